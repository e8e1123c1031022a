// grouplab's live dashboard: renders the server's snapshots (server-sent events from /api/stream)
// and posts the buttons to /api/... No framework, no network but the page's own server. Every word
// it shows is a catalogue template the server put in the page (#texts; grouplab/ui/texts.py).
"use strict";

const $ = (sel) => document.querySelector(sel);
const PAGE = JSON.parse(document.getElementById("texts").textContent || "{}");
const TEXTS = PAGE.texts || {};
// The template of `key` ("ui.page." left out) with its {name}s filled; the key itself if missing.
const template = (key) => TEXTS["ui.page." + key] ?? key;
const t = (key, vars) => template(key).replace(/\{(\w+)\}/g, (m, name) => (vars && name in vars ? String(vars[name]) : m));
// The same, as nodes: a {name} may be a node (a span the page updates later).
function tNodes(key, vars) {
  return template(key).split(/\{(\w+)\}/).map((part, i) => (i % 2 ? (vars && part in vars ? vars[part] : `{${part}}`) : part))
    .filter((part) => part !== "");
}
// A value's word (a fault kind, a removal reason, a state): `kind.crash`, else the value itself.
const word = (group, value) => (value === null || value === undefined ? value
  : TEXTS[`ui.page.${group}.${value}`] ?? String(value));

// The static words of index.html: `data-t` (a `data-slot` child stays, in its place) and `data-t-title`.
function applyTexts() {
  if (PAGE.lang) document.documentElement.lang = PAGE.lang;
  for (const node of document.querySelectorAll("[data-t]")) {
    const key = node.dataset.t.replace(/^ui\.page\./, "");
    if (!(("ui.page." + key) in TEXTS)) continue;
    const slots = Object.fromEntries([...node.querySelectorAll("[data-slot]")].map((s) => [s.dataset.slot, s]));
    node.replaceChildren(...tNodes(key, slots));
  }
  for (const node of document.querySelectorAll("[data-t-title]")) {
    const key = node.dataset.tTitle.replace(/^ui\.page\./, "");
    if (("ui.page." + key) in TEXTS) node.title = t(key);
  }
}
applyTexts();
let last = null;            // the latest snapshot
const rates = {};           // client id -> {processed, t, rate}
let entries = [];           // timeline entries kept on the page
const MAX_ENTRIES = 3000;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "style") node.setAttribute("style", v);
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function shortMember(id, client) {
  if (!id) return "-";
  if (client && id.startsWith(client + "-")) return client + "-" + id.slice(client.length + 1, client.length + 5);
  return id.length > 24 ? id.slice(0, 24) + "…" : id;
}
// A generated member id is `<client id>-<uuid4>`: shown as `<client id>-<4 hex digits>`.
const shorten = (text) => String(text || "").replace(/-([0-9a-f]{4})[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/g, "-$1");
const secs = (ms) => t("secs", {n: (ms / 1000).toFixed(ms < 10000 ? 1 : 0)});
const hue = (gen) => (gen * 67) % 360;
const time = (ms) => new Date(ms).toLocaleTimeString([], {hour12: false}) + "." + String(ms % 1000).padStart(3, "0");

// ------------------------------------------------------------------------------ actions

async function post(path, body) {
  const out = $("#action-result");
  out.className = "pending";
  out.textContent = "…";
  try {
    const resp = await fetch(path, {method: "POST", headers: {"Content-Type": "application/json"},
                                    body: JSON.stringify(body || {})});
    const answer = await resp.json();
    out.className = answer.ok ? "ok" : "bad";
    out.textContent = answer.message;
  } catch (e) {
    out.className = "bad";
    out.textContent = t("action.no_answer", {error: e});
  }
}

function memberAction(client, action, body) {
  return post(`/api/members/${encodeURIComponent(client)}/${action}`, body);
}

$("#add-member").addEventListener("click", () => post("/api/members", {assignors: $("#add-assignor").value}));
$("#add-partitions").addEventListener("click", () => {
  const topic = $("#topic-select").value;
  post(`/api/topics/${encodeURIComponent(topic)}/partitions`, {partitions: Number($("#topic-total").value)});
});
$("#restart-coordinator").addEventListener("click", () => post("/api/coordinator/restart"));

// ------------------------------------------------------------------------------ rendering

function fillSelect(select, values, keep) {
  const current = select.value;
  if (select.dataset.values === JSON.stringify(values)) return;
  select.dataset.values = JSON.stringify(values);
  select.replaceChildren(...values.map((v) => el("option", {value: v}, v)));
  if (keep && values.includes(current)) select.value = current;
}

function render(s) {
  last = s;
  $("#group-id").textContent = s.group_id;
  const st = $("#group-state");
  st.textContent = s.state;
  st.dataset.state = s.state;
  // A consumer-protocol group (KIP-848): the group epoch, the coordinator's assignor, no leader.
  const kip848 = s.type === "consumer";
  $("#generation-label").textContent = t(kip848 ? "sum.group_epoch" : "sum.generation");
  $("#generation").textContent = s.generation;
  $("#protocol-label").textContent = t(kip848 ? "sum.assignor" : "sum.protocol");
  $("#protocol").textContent = s.protocol || "-";
  const clients = Object.fromEntries(s.members.map((m) => [m.member_id, m.client_id]));
  $("#leader").textContent = kip848 ? t("sum.leader_none") : shortMember(s.leader, clients[s.leader]);
  const coord = $("#coordinator");
  coord.textContent = t(s.coordinator_up ? "sum.up" : "sum.down");
  coord.className = s.coordinator_up ? "good" : "bad";

  const banner = $("#rebalancing");
  if (s.rebalancing_ms !== null) {
    banner.hidden = false;
    banner.textContent = t("rebalancing", {time: secs(s.rebalancing_ms), trigger: shorten(s.rebalance_trigger)});
  } else banner.hidden = true;

  const cluster = s.cluster || {apps: [], offsets: [], assignors: []};
  const apps = Object.fromEntries(cluster.apps.map((a) => [a.client_id, a]));
  const now = s.now_ms;
  for (const a of cluster.apps) {
    const r = rates[a.client_id];
    if (!r) rates[a.client_id] = {processed: a.processed, t: now, rate: null};
    else if (now - r.t >= 900) {
      r.rate = (a.processed - r.processed) * 1000 / (now - r.t);
      r.processed = a.processed; r.t = now;
    }
  }
  const lag = {};
  for (const o of cluster.offsets) lag[o.topic + "-" + o.partition] = o.lag;

  renderMembers(s, apps, lag);
  renderBrokers(s);
  renderGrid(s, clients);
  renderCosts(s, clients);
  renderRebalances(s, clients);
  fillSelect($("#add-assignor"), cluster.assignors, true);
  fillSelect($("#topic-select"), Object.keys(s.topics).sort(), true);
  const total = $("#topic-total");
  if (document.activeElement !== total) total.value = (s.topics[$("#topic-select").value] || 0) + 1;
  $("#durability").textContent = cluster.data_dir ? t("durable.yes", {dir: cluster.data_dir}) : t("durable.no");
}

function faultLabel(m) {
  if (!m.fault) return null;
  const what = word("fault", m.fault);
  if (!m.removal) return what;
  return t(m.removal.by === "max.poll.interval.ms" ? "removal.leaves" : "removal.removed",
           {what, time: secs(m.removal.in_ms)});
}

function renderMembers(s, apps, lag) {
  const rows = [];
  const shown = new Set();
  for (const m of s.members) {
    shown.add(m.client_id);
    const app = apps[m.client_id];
    const age = m.heartbeat_age_ms;
    const health = age === null ? "unknown" : (m.session_timeout_ms && age > m.session_timeout_ms / 2 ? "late" : "ok");
    const lags = m.partitions.map(([t, p]) => lag[t + "-" + p]).filter((x) => x !== null && x !== undefined);
    const rate = rates[m.client_id] && rates[m.client_id].rate;
    const label = faultLabel(m);
    rows.push(el("tr", {"data-member": m.client_id, class: m.fault ? "faulted" : null},
      el("td", {title: m.member_id}, shortMember(m.member_id, m.client_id)),
      el("td", {}, m.leader ? t("role.leader") : ""),
      el("td", {}, m.protocols.join(",")),
      el("td", {class: "hb " + health, title: t("hb.tip", {count: m.heartbeats, ms: m.session_timeout_ms})},
        age === null ? "-" : t("hb.ago", {time: secs(age)}), m.heartbeat_error ? el("small", {}, " " + m.heartbeat_error) : null),
      el("td", {}, m.partitions.length),
      el("td", {}, m.fault ? "0" : (rate === null || rate === undefined ? "…" : Math.round(rate))),
      el("td", {}, lags.length ? lags.reduce((a, b) => a + b, 0) : "-"),
      el("td", {class: m.fault ? "bad countdown" : "", "data-countdown": m.removal ? m.removal.in_ms : null},
        label || (app ? word("app", app.state) : t("status.not_running"))),
      buttonCell(m.client_id, app, s)));
  }
  // Apps not (or no longer) in the group: joining, or removed while hung.
  for (const app of Object.values(apps)) {
    if (shown.has(app.client_id)) continue;
    rows.push(el("tr", {"data-member": app.client_id, class: "outside"},
      el("td", {}, app.client_id), el("td", {}, ""), el("td", {}, app.assignors.join(",")), el("td", {}, "-"),
      el("td", {}, "0"), el("td", {}, "-"), el("td", {}, "-"),
      el("td", {}, app.fault ? t("status.outside_fault", {fault: word("kind", app.fault)})
                             : t("status.outside", {state: word("app", app.state)})),
      buttonCell(app.client_id, app, s)));
  }
  $("#members tbody").replaceChildren(...rows);
}

// A member's buttons survive the re-renders (twice a second), so its inputs keep what was typed.
const buttonCells = {};
function buttonCell(client, app, s) {
  const key = JSON.stringify([!!app, app && app.fault]);
  const cached = buttonCells[client];
  if (cached && cached.key === key) return cached.node;
  const node = el("td", {class: "buttons"}, el("div", {class: "btns"}, memberButtons(client, app, s)));
  buttonCells[client] = {key, node};
  return node;
}

function memberButtons(client, app, s) {
  if (!app) return [el("span", {class: "note"}, t("btn.process_gone"))];
  if (app.fault) return [el("button", {"data-action": "resume", onclick: () => memberAction(client, "resume")}, t("btn.resume"))];
  const seconds = el("input", {type: "number", min: "1", max: "3600", value: "15", class: "secs", title: t("tip.seconds")});
  const assignor = el("select", {title: t("tip.assignor")}, ...(s.cluster ? s.cluster.assignors : []).map((a) => el("option", {value: a}, a)));
  return [
    el("button", {"data-action": "kill", title: t("tip.kill"),
                  onclick: () => memberAction(client, "kill")}, t("btn.kill")),
    el("button", {"data-action": "hang", title: t("tip.hang"), onclick: () => memberAction(client, "hang")}, t("btn.hang")),
    el("button", {"data-action": "slow", title: t("tip.slow"),
                  onclick: () => memberAction(client, "slow")}, t("btn.slow")),
    el("button", {"data-action": "partition", title: t("tip.partition"),
                  onclick: () => memberAction(client, "partition", {seconds: Number(seconds.value)})}, t("btn.partition")), seconds,
    el("button", {"data-action": "assignor", title: t("tip.switch"),
                  onclick: () => memberAction(client, "assignor", {assignors: assignor.value})}, t("btn.switch")), assignor,
  ];
}

// A cluster of brokers: each broker live or down, the group's coordinator (loading or not), how many
// of the grid's partitions it leads, and a kill / restart button; one broker shows no panel.
function renderBrokers(s) {
  const b = s.brokers;
  $("#brokers-panel").hidden = !b;
  if (!b) return;
  $("#offsets-partition").textContent = `__consumer_offsets-${b.offsets_partition}`;
  $("#coordinator").textContent = b.coordinator >= 0 ? t(b.loading ? "sum.broker_loading" : "sum.broker", {id: b.coordinator})
                                                    : t("sum.no_broker");
  $("#coordinator").className = b.coordinator >= 0 && !b.loading ? "good" : "bad";
  $("#brokers tbody").replaceChildren(...b.nodes.map((n) => el("tr",
    {"data-broker": n.id, "data-live": n.live ? "yes" : "no", "data-coordinator": n.coordinator ? "yes" : "no"},
    el("th", {}, t("broker.name", {id: n.id})),
    el("td", {class: n.live ? "good" : "bad"}, t(n.live ? "broker.live" : "broker.down")),
    el("td", {}, n.coordinator ? t(b.loading ? "broker.coordinator_loading" : "broker.coordinator") : ""),
    el("td", {}, t(n.leads === 1 ? "broker.leads.one" : "broker.leads.many", {count: n.leads})),
    el("td", {}, n.live
      ? el("button", {"data-action": "kill", onclick: () => post(`/api/brokers/${n.id}/kill`)}, t("btn.kill"))
      : el("button", {"data-action": "restart", onclick: () => post(`/api/brokers/${n.id}/restart`)}, t("btn.restart"))))));
}

function renderGrid(s, clients) {
  const members = s.members.map((m) => m);
  const leaders = s.brokers ? Object.fromEntries(s.brokers.leaders.map(([t, p, n]) => [`${t}-${p}`, n])) : {};
  // A removed member keeps a greyed column (it owns nothing now), so a class sees who left and why.
  const departed = s.departed || [];
  const since = (d) => secs(s.now_ms - d.removed_ms);
  $("#grid thead").replaceChildren(el("tr", {}, el("th", {}, t("col.partition")),
    ...members.map((m) => el("th", {title: m.member_id}, m.client_id)),
    ...departed.map((d) => el("th", {class: "departed", "data-departed": d.client_id,
                                     title: t("departed.tip", {member: d.member_id, time: since(d), reason: word("reason", d.reason)})},
                             d.client_id, el("small", {}, ` ${word("reason", d.reason)}`))),
    el("th", {}, "")));
  const faults = Object.fromEntries(s.faults.map((f) => [f.id, f]));
  const byMember = Object.fromEntries(s.members.map((m) => [m.member_id, m]));
  const rows = s.partitions.map((p) => {
    const name = `${p.topic}-${p.partition}`;
    const cells = members.map((m) => {
      if (p.member !== m.member_id && !(p.member === null && p.client === m.client_id && p.state === "consumed")) {
        return el("td", {"data-cell": `${name}:${m.client_id}`, class: "cell empty"});
      }
      let text = p.generation === null ? "" : String(p.generation);
      let title = t("cell.tip", {name, state: word("pstate", p.state)});
      if (p.state === "not_consumed") {
        const r = byMember[p.member] && byMember[p.member].removal;
        text = r ? `✕ ${secs(r.in_ms)}` : "✕";
        title = t("cell.not_consumed", {name, client: m.client_id,
                                        kind: faults[p.fault] ? word("kind", faults[p.fault].kind) : t("cell.fault")})
          + (r ? t(r.by === "max.poll.interval.ms" ? "cell.leaves" : "cell.removes", {time: secs(r.in_ms)}) : "");
      }
      return el("td", {"data-cell": `${name}:${m.client_id}`, "data-state": p.state, class: "cell " + p.state,
                       style: p.generation !== null ? `--gen-hue:${hue(p.generation)}` : null, title}, text);
    });
    const status = p.state === "consumed" ? "" : t("status." + p.state);
    const leader = name in leaders ? leaders[name] : null;
    const head = leader === null ? el("th", {}, name)
      : el("th", {title: t("led_by", {id: leader}), "data-leader": leader}, name, el("small", {}, ` @${leader >= 0 ? leader : "–"}`));
    const gone = departed.map((d) => el("td", {class: "cell departed", "data-cell": `${name}:${d.client_id}`}));
    return el("tr", {"data-partition": name, "data-state": p.state}, head, ...cells, ...gone,
              el("td", {class: "status " + p.state}, status));
  });
  $("#grid tbody").replaceChildren(...rows);
}

function renderCosts(s, clients) {
  const c = s.costs;
  $("#costs").replaceChildren(
    el("span", {class: "cost not_consumed", id: "cost-not-consumed"},
       t("cost.not_consumed", {value: (c.not_consumed_ms / 1000).toFixed(1)})),
    el("span", {class: "cost unowned", id: "cost-unowned"},
       t("cost.unowned", {value: (c.unowned_ms / 1000).toFixed(1)})));
  $("#faults tbody").replaceChildren(...s.faults.slice().reverse().map((f) => el("tr", {"data-fault": f.id},
    el("td", {}, f.ended_ms ? t("fault.over", {kind: word("kind", f.kind)}) : word("kind", f.kind)),
    el("td", {}, f.client_id), el("td", {}, time(f.started_ms)),
    el("td", {}, f.removed_ms ? t("fault.removed_after", {time: secs(f.removed_ms - f.started_ms),
                                                         reason: word("reason", f.removal_reason)}) : t("fault.not_yet")),
    el("td", {}, t("partition_s", {value: (f.not_consumed_ms / 1000).toFixed(1)})))));
}

function renderRebalances(s, clients) {
  $("#rebalances tbody").replaceChildren(...s.rebalances.slice().reverse().map((r) => el("tr", {"data-generation": r.generation},
    el("td", {}, r.generation), el("td", {}, r.protocol || "-"), el("td", {}, r.members),
    el("td", {}, r.duration_ms === null ? "-" : t("ms", {ms: r.duration_ms})), el("td", {}, r.moved), el("td", {}, shorten(r.trigger) || "-"))));
}

// ------------------------------------------------------------------------------ timeline

function entryNode(e) {
  const cls = ["entry", e.kind, e.error ? "error" : "", e.routine ? "routine" : ""].join(" ");
  return el("li", {class: cls, "data-id": e.id, "data-api": e.api || "", onclick: () => showRaw(e)},
    el("time", {}, time(e.ts_ms)), " ", e.text, e.why ? el("div", {class: "why"}, "↳ " + e.why) : null);
}

function addEntries(list) {
  const ol = $("#timeline");
  const follow = $("#follow").checked;
  for (const e of list) {
    entries.push(e);
    ol.append(entryNode(e));
  }
  while (entries.length > MAX_ENTRIES) { entries.shift(); ol.firstChild.remove(); }
  if (follow) ol.scrollTop = ol.scrollHeight;
}

async function showRaw(e) {
  const resp = await fetch(`/api/messages/${e.id}`);
  const raw = await resp.json();
  $("#detail").hidden = false;
  $("#detail-title").textContent = e.text;
  const show = (v) => v === null || v === undefined ? t("raw.none_yet") : JSON.stringify(v, null, 2);
  if ("request" in raw && raw.request) {
    $("#raw-request").textContent = show(raw.request);
    $("#raw-response").textContent = show(raw.response);
  } else {
    $("#raw-request").textContent = show(raw.event || raw.line || raw.response || raw.said || raw);
    $("#raw-response").textContent = t("raw.not_a_message");
  }
}
$("#detail-close").addEventListener("click", () => { $("#detail").hidden = true; });
$("#show-routine").addEventListener("change", (ev) => document.body.classList.toggle("routine-shown", ev.target.checked));

// ------------------------------------------------------------------------------ the stream

function connect() {
  const source = new EventSource("/api/stream");
  const conn = $("#connection");
  source.addEventListener("open", () => { conn.textContent = t("conn.live"); conn.className = "good"; });
  source.addEventListener("state", (ev) => render(JSON.parse(ev.data)));
  source.addEventListener("timeline", (ev) => addEntries(JSON.parse(ev.data)));
  source.addEventListener("bye", () => { conn.textContent = t("conn.stopped"); conn.className = "bad"; source.close(); });
  source.addEventListener("error", () => {
    if (source.readyState === EventSource.CLOSED) return;
    conn.textContent = t("conn.reconnecting"); conn.className = "bad";
    entries = []; $("#timeline").replaceChildren();   // the stream starts again with its backlog
  });
}
connect();
