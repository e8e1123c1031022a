"""`grouplab` command line: run, coordinator, consumer, describe, delete, topics, configs, assign."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import re
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NoReturn

from rich.console import Console

from grouplab.cli_text import cli_texts, default_lang, has_wide, lang_of, localize_parser, wrap_cells
from grouplab.consumer.assignors import UnknownAssignor, assignor_names, get_assignor
from grouplab.consumer.config import ConsumerConfig, ConsumerConfigError
from grouplab.coordinator.config import BrokerConfig, ConfigError
from grouplab.coordinator.group_log import LogLockedError
from grouplab.extras import MissingExtra, extra_for, require
from grouplab.protocol.effects import wall_clock_ms
from grouplab.protocol.types import Subscription, TopicPartition, format_partitions
from grouplab.teach.catalog import DEFAULT_LANG, Catalog

if TYPE_CHECKING:
    from grouplab.teach.lessons import Lesson, Told

# Piped output (not a terminal, no COLUMNS) is laid out this wide, so that no table cell is cut to
# "partiti…" at rich's default of 80; on a terminal rich measures it, and COLUMNS always wins.
PIPE_WIDTH = 200
DEFAULT_UI_PORT = 8765  # grouplab ui / run --ui: the dashboard on http://127.0.0.1:8765/


def _console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    columns = os.environ.get("COLUMNS", "")
    tty = hasattr(stream, "isatty") and stream.isatty()
    width = None if tty or columns.isdigit() else PIPE_WIDTH
    return Console(stderr=stderr, highlight=False, width=width)


console = _console()
err = _console(stderr=True)


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as package_version

    try:
        return package_version("grouplab")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


class UsageError(Exception):
    """A mistake in the command line: one line on stderr, exit 2."""


class CliError(Exception):
    """Something the user can fix that is not the command line (a port in use, no server, an
    unknown group): one line on stderr, exit 1."""


_LANG = DEFAULT_LANG  # the language of this command line's own words (help, usage errors): main() sets it


def say(english: str) -> str:
    """A usage error, a failure or a help text in the command line's language (cli_text.py)."""
    return cli_texts(_LANG).say(english)


def fail(command: str | None, message: object) -> None:
    """One line on stderr, never wrapped, never read as rich markup ("[Errno 98]", "[t0:7]");
    prefixed `grouplab COMMAND:` unless `command` is None (a message that names its command)."""
    text = say(" ".join(str(message).split()))
    if command is not None:
        text = f"grouplab {command}: {text}" if command else f"grouplab: {text}"
    err.print(text, style="red", markup=False, highlight=False, soft_wrap=True)


# ----------------------------------------------------------------------------- parsing helpers


def parse_topic_sizes(text: str) -> dict[str, int]:
    """`t0:3,t1:3` -> {"t0": 3, "t1": 3}."""
    sizes: dict[str, int] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        name, sep, count = item.rpartition(":")
        if not sep or not name or not count.isdigit() or int(count) < 1:
            raise UsageError(f"expected TOPIC:PARTITIONS (e.g. t0:3), got {item!r}")
        sizes[name] = int(count)
    if not sizes:
        raise UsageError("no topics given")
    return sizes


def parse_list(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


def broker_config(args: argparse.Namespace) -> BrokerConfig:
    cfg = BrokerConfig()
    if getattr(args, "config_file", None):
        try:
            cfg = cfg.with_properties_file(args.config_file)
        except OSError as exc:
            raise UsageError(f"cannot read --config-file {args.config_file}: {exc.strerror or exc}") from None
    return cfg.with_overrides(args.config or [])


def check_assignors(names: list[str]) -> list[str]:
    for name in names:
        get_assignor(name)
    return names


# ----------------------------------------------------------------------------- run


def _group_protocol_args(args: argparse.Namespace) -> None:
    """--group-protocol and --group-remote-assignor become the consumers' group.protocol and
    group.remote.assignor (ahead of --consumer-config, which may also set them); --assignor
    (partition.assignment.strategy) is the classic protocol's and is refused under consumer, as
    Kafka's Java client refuses it. Fills in --assignor's default."""
    protocol = args.group_protocol
    if protocol == "consumer":
        if getattr(args, "protocol", None) == "zk":
            raise UsageError("--group-protocol consumer is Kafka 4's protocol; --protocol zk is the ZooKeeper era's: "
                             "give one of them")
        if args.assignor is not None:
            raise UsageError("--assignor is partition.assignment.strategy, a classic-protocol setting; under "
                             "--group-protocol consumer the coordinator assigns: choose its assignor with "
                             "--group-remote-assignor uniform|range")
        pairs = ["group.protocol=consumer"]
        if args.group_remote_assignor is not None:
            pairs.append(f"group.remote.assignor={args.group_remote_assignor}")
        args.consumer_config = pairs + list(args.consumer_config or [])
    elif args.group_remote_assignor is not None:
        raise UsageError("--group-remote-assignor is for --group-protocol consumer (the coordinator's assignors)")
    if args.assignor is None:
        args.assignor = "range"


def _consumer_protocol_views(args: argparse.Namespace) -> list[Any]:
    """With --group-protocol consumer there are no rebalances to tabulate: the live view is the
    coordinator's lines for the group (epochs, targets, revoke-first waits) and each member's
    (what each answer gives and takes, at which member epoch), in words."""
    from grouplab.readable import ConsumerView, CoordinatorView

    if args.group_protocol != "consumer":
        return []
    return [CoordinatorView(console, args.lang), ConsumerView(console, args.lang, by_node=True)]


def _cluster_args(args: argparse.Namespace) -> tuple[dict[str, int], list[str]]:
    """run's and ui's shared checks, before anything starts: topics, assignors, consumer overrides."""
    topics = parse_topic_sizes(args.topics)
    assignors = check_assignors(parse_list(args.assignor))
    ConsumerConfig(group_id=args.group, topics=sorted(topics), client_id="consumer-1",
                   assignors=assignors).with_overrides(args.consumer_config or [])
    return topics, assignors


def _topics_text(topics: dict[str, int]) -> str:
    return ", ".join(f"{t}:{n}" for t, n in topics.items())


def _banner(cluster: Any, args: argparse.Namespace, topics: dict[str, int], assignors: list[str],
            run_dir: Path | None, c: Catalog) -> None:
    if args.group_protocol == "consumer":
        assigning = c.t("run.banner.kip848", assignor=args.group_remote_assignor or c.t("run.banner.coordinators_choice"))
    else:
        assigning = c.t("run.banner.assignor", assignors=",".join(assignors))
    where = (c.t("run.banner.brokers", brokers=cluster.brokers, host=cluster.host,
                 ports=",".join(str(p) for p in cluster.server.ports.values()), node=cluster.coordinator_of_group())
             if cluster.brokers > 1 else c.t("run.banner.coordinator", host=cluster.host, port=cluster.port))
    console.print(f"[bold]grouplab[/] {where} · {c.t('run.group', group=f'[bold]{args.group}[/]')} · "
                  f"{c.t('run.topics', topics=_topics_text(topics))} · {assigning}"
                  + (f" · {c.t('run.banner.event_log', dir=run_dir)}" if run_dir else "")
                  + (f" · {c.t('run.banner.group_log', dir=args.data_dir)}" if args.data_dir else "")
                  + (f" · {c.t('run.banner.kafka_clients', host=cluster.host, port=cluster.kafka_client_port)}"
                     + (c.t("run.banner.kafka_proxy") if cluster.kafka_proxy is not None else "")
                     if cluster.kafka_port is not None else ""))
    # The command that reaches this run's coordinator from another terminal (its port is a free one).
    command = f"grouplab describe --bootstrap-server {cluster.host}:{cluster.port} --group {args.group}"
    console.print(f"[dim]{c.t('run.banner.other_terminal', command=command)}[/]")
    if cluster.proxy is not None:
        rules = ", ".join(rule.spec() for rule in cluster.proxy.rules) or c.t("run.proxy.none_yet")
        ports = ",".join(str(p) for _h, p in cluster.bootstrap)
        console.print(c.t("run.proxy.on", proxy=f"[bold]{c.t('run.proxy')}[/]", host=cluster.host, ports=ports,
                          per_broker=c.t("run.proxy.per_broker") if cluster.brokers > 1 else "")
                      + f" · {c.t('run.proxy.faults', rules=rules)}"
                      + (f" · {c.t('run.seed', seed=args.fault_seed)}" if args.fault_seed is not None else ""))


class Dashboard:
    """`--ui`: the hub listening to the cluster, and the web server once the cluster is up."""

    def __init__(self, group: str, lang: str, command: str) -> None:
        from grouplab.ui.hub import Hub

        require("ui", command)  # the web server's; checked before the cluster starts
        check_lang(lang)
        self.lang = lang
        self.cluster: Any = None
        # The timeline told by grouplab explain's narrator, reading the live Broker after each step.
        self.hub = Hub(group, lang=lang, broker=self._broker)
        self.c = Catalog(lang)
        self.server: Any = None

    def _broker(self) -> Any:
        server = self.cluster.server if self.cluster is not None else None
        return server.broker if server is not None else None

    async def start(self, cluster: Any, args: argparse.Namespace) -> None:
        from grouplab.ui.controls import Controls, cluster_info
        from grouplab.ui.web import UiServer

        self.cluster = cluster
        self.hub.extras = lambda: cluster_info(cluster)
        port = DEFAULT_UI_PORT if args.ui_port is None else args.ui_port
        server = UiServer(self.hub, Controls(cluster, self.lang), "127.0.0.1", port)
        try:
            await server.start()
        except OSError as exc:
            raise CliError(ui_listen_error("127.0.0.1", port, exc)) from None
        self.server = server

    async def announce(self, args: argparse.Namespace) -> None:
        """The URL (the chosen port with --ui-port 0), and the browser with --open."""
        console.print(f"[bold green]{self.c.t('run.dashboard')}[/] "
                      + self.c.t("run.dashboard.on", url=f"[bold]{self.server.url}[/]"))
        if args.open:
            import webbrowser

            await asyncio.get_running_loop().run_in_executor(None, webbrowser.open, self.server.url)

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()


def ui_listen_error(host: str, port: int, exc: OSError) -> str:
    import errno

    if exc.errno == errno.EADDRINUSE:
        return (f"cannot serve the dashboard on {host}:{port}: the port is already in use; "
                f"pick another --ui-port (0: any free port)")
    return f"cannot serve the dashboard on {host}:{port}: {exc.strerror or exc}"


async def _start_cluster(cluster: Any, port: int, dashboard: Dashboard | None, args: argparse.Namespace) -> None:
    """Start the cluster, then the dashboard; if either fails, nothing is left running."""
    from grouplab.coordinator.server import DataDirError, KafkaPortError

    try:
        await cluster.start()
    except DataDirError as exc:
        await cluster.close()
        raise CliError(exc) from None
    except KafkaPortError as exc:
        await cluster.close()
        raise CliError(listen_error(cluster.host, args.kafka_port, exc, "--kafka-port")) from None
    except OSError as exc:
        await cluster.close()
        raise CliError(listen_error(cluster.host, port, exc)) from None
    if dashboard is not None:
        try:
            await dashboard.start(cluster, args)
        except BaseException:
            await cluster.close()
            raise


async def cmd_run(args: argparse.Namespace) -> int:
    from grouplab.cluster import LocalCluster
    from grouplab.display import RebalanceView, summary_table
    from grouplab.readable import GroupEpochs

    check_lang(args.lang)
    _group_protocol_args(args)
    if args.protocol == "zk":
        return await cmd_run_zk(args)
    if args.zookeeper or args.streams is not None:
        raise UsageError("--zookeeper and --streams are for the ZooKeeper-era consumers: add --protocol zk")
    topics, assignors = _cluster_args(args)
    if args.consumers == 0 and not args.forever:
        raise UsageError("--consumers 0 needs --forever (the script stops one consumer and adds another); "
                         "give --consumers 1 or more")
    if not args.delivery and (args.records is not None or args.processing_ms is not None):
        raise UsageError("--records and --processing-ms only apply with --delivery MODE")
    if args.timeout <= 0:
        raise UsageError("--timeout must be more than 0 seconds")
    if not args.ui and (args.ui_port is not None or args.open):
        raise UsageError("--ui-port and --open only apply with --ui")
    if args.kill_coordinator and args.brokers < 2:
        raise UsageError("--kill-coordinator needs a cluster: --brokers 2 or more")
    consumer_config = ConsumerConfig(group_id=args.group, topics=sorted(topics), client_id="consumer-1",
                                     assignors=assignors).with_overrides(args.consumer_config or [])
    # The session timeout that removes a crashed member: the consumers' own (classic), or the
    # broker's group.consumer.session.timeout.ms (consumer protocol, KIP-848).
    session_ms = (broker_config(args).consumer_session_timeout_ms if consumer_config.consumer_protocol
                  else consumer_config.session_timeout_ms)
    c = Catalog(args.lang)
    view = RebalanceView(console, args.group, session_timeout_ms=session_ms, lang=args.lang)
    run_dir = Path(args.run_dir) if args.run_dir else None
    delivery = None
    if args.delivery:
        from grouplab.consumer.delivery import DeliveryMode
        from grouplab.cluster import DeliveryRun

        delivery = DeliveryRun(DeliveryMode(args.delivery), next(iter(topics)),
                               1000 if args.records is None else args.records,
                               20 if args.processing_ms is None else args.processing_ms,
                               hold_back=args.crash and not args.forever)
    dashboard = Dashboard(args.group, args.lang, "run --ui") if args.ui else None
    # A consumer-protocol group has no rebalances to count: the summary says its last group epoch.
    epochs = GroupEpochs(args.group) if args.group_protocol == "consumer" else None
    aborts = _AbortCount()
    listeners: list[Callable[[str, Any], None]] = [view, aborts.on_event]
    cluster = LocalCluster(topics, args.group, assignors, broker_config(args), args.consumer_config,
                           run_dir, port=args.port,
                           listeners=listeners + _consumer_protocol_views(args) + ([epochs] if epochs is not None else [])
                           + ([dashboard.hub.on_event] if dashboard is not None else []),
                           data_dir=args.data_dir, faults=args.faults, fault_seed=args.fault_seed, delivery=delivery,
                           trace_listeners=[dashboard.hub.on_trace] if dashboard is not None else None,
                           proxy=dashboard is not None, kafka_port=args.kafka_port, brokers=args.brokers)
    await _start_cluster(cluster, args.port, dashboard, args)
    _banner(cluster, args, topics, assignors, run_dir, c)
    interrupted = timed_out = False
    try:
        if dashboard is not None:
            await dashboard.announce(args)
        console.print(f"[dim]{c.t('run.starting', count=args.consumers)}[/]")
        for _ in range(args.consumers):
            await cluster.add_consumer()
        if args.consumers:
            await cluster.wait_stable(args.timeout)
            await asyncio.sleep(args.hold)
        if args.kill_coordinator and cluster.apps:
            await _kill_the_coordinator(cluster, view, args, c)
        if not args.forever and cluster.apps:  # (with --ui, the page may have stopped them all)
            victim = cluster.apps[0]
            name = victim.client.config.client_id
            if args.crash and delivery is not None:
                # Where a crash shows what the mode costs: between processing and committing (a
                # duplicate at-least-once, an aborted transaction exactly-once), or between
                # committing and processing (a loss at-most-once).
                point = "committed" if delivery.mode.value == "at-most-once" else "processed"
                console.print(f"[yellow]{c.t(f'run.crash.{point}', name=name)}[/]")
                if not await cluster.crash_consumer_at(victim, point, min(args.timeout, 5.0)):
                    console.print(f"[yellow]{c.t('run.crash.no_batch', name=name)}[/]")
            else:
                console.print(f"[yellow]{c.t('run.stopping.crash' if args.crash else 'run.stopping.leave', name=name)}[/]")
                await cluster.stop_consumer(victim, leave=not args.crash)
            await _with_countdown(view, cluster.wait_stable(args.timeout))
            await asyncio.sleep(args.hold)
            console.print(f"[green]{c.t('run.adding')}[/]")
            await cluster.add_consumer()
            await cluster.wait_stable(args.timeout)
            await asyncio.sleep(args.hold)
            if delivery is not None:
                eos = delivery.mode.value == "exactly-once"
                console.print(f"[dim]{c.t('run.draining.eos' if eos else 'run.draining')}[/]")
                if not await _wait_drained(cluster, delivery, args.timeout):
                    console.print(f"[yellow]{c.t('run.drain_timeout', timeout=f'{args.timeout:g}')}[/]")
        else:
            console.print(f"[dim]{c.t('run.forever')}[/]")
            await asyncio.Event().wait()
    except asyncio.CancelledError:
        interrupted = True
        console.print(f"[yellow]{c.t('run.interrupted')}[/]")
    except asyncio.TimeoutError:
        timed_out = True
        console.print(f"[red]{c.t('run.timeout', timeout=f'{args.timeout:g}')}[/]")
    finally:
        if dashboard is not None:
            await dashboard.stop()
        apps = cluster.apps + cluster.stopped
        account = None
        if delivery is not None and cluster.server is not None:
            account = await delivery.account(cluster.host, cluster.port, topics[delivery.input_topic],
                                             cluster.event_log("run") if run_dir else None,
                                             {tp.partition: offset for tp, offset in _committed(cluster).items()
                                              if tp.topic == delivery.input_topic})
        await cluster.close()
        costs_line = view.finish(wall_clock_ms())
        if view.records or args.group_protocol != "consumer":  # (a consumer-protocol group has no rebalances)
            console.print(summary_table(view.records, c))
        processed = sum(sum(app.stats.processed.values()) for app in apps)
        moves = (c.t("run.summary.epoch", epoch=epochs.last) if epochs is not None and not view.records
                 else c.t("run.summary.rebalances", count=len(view.records)))
        console.print(f"{moves} · {c.t('run.summary.ran', count=len(apps))} · "
                      + c.t("run.summary.records" if delivery is not None else "run.summary.synthetic", count=processed)
                      + (f" · {c.t('run.summary.event_log', dir=run_dir)}" if run_dir else ""))
        console.print(costs_line)
        if account is not None:
            console.print(_delivery_table(delivery, account, processed, aborts.count, c))
        if cluster.proxy is not None and cluster.proxy.rules:
            console.print(c.t("run.faults_fired", rules=", ".join(f"{rule.spec()} ×{rule.fired}"
                                                                  for rule in cluster.proxy.rules)))
    if timed_out:
        raise CliError(c.t("run.timeout.error", timeout=f"{args.timeout:g}"))
    return 130 if interrupted else 0


async def cmd_ui(args: argparse.Namespace) -> int:
    """A cluster and its dashboard, until Ctrl-C: the page's buttons are the script."""
    from grouplab.cluster import LocalCluster
    from grouplab.display import RebalanceView

    _group_protocol_args(args)
    topics, assignors = _cluster_args(args)
    dashboard = Dashboard(args.group, args.lang, "ui")
    c = Catalog(args.lang)
    view = RebalanceView(console, args.group, lang=args.lang)
    run_dir = Path(args.run_dir) if args.run_dir else None
    cluster = LocalCluster(topics, args.group, assignors, broker_config(args), args.consumer_config, run_dir,
                           port=args.port, listeners=[view, *_consumer_protocol_views(args), dashboard.hub.on_event],
                           data_dir=args.data_dir,
                           faults=args.faults, fault_seed=args.fault_seed,
                           trace_listeners=[dashboard.hub.on_trace], proxy=True, kafka_port=args.kafka_port,
                           brokers=args.brokers)
    await _start_cluster(cluster, args.port, dashboard, args)
    _banner(cluster, args, topics, assignors, run_dir, c)
    try:
        await dashboard.announce(args)
        for _ in range(args.consumers):
            await cluster.add_consumer()
        console.print(f"[dim]{c.t('ui.started', count=args.consumers)}[/]")
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        console.print(f"[yellow]{c.t('run.interrupted')}[/]")
    finally:
        await dashboard.stop()
        await cluster.close()
        console.print(c.t("run.summary.rebalances", count=len(view.records))
                      + (f" · {c.t('run.summary.event_log', dir=run_dir)}" if run_dir else ""))
    return 130


async def cmd_run_zk(args: argparse.Namespace) -> int:
    """The same script as `run`, by the ZooKeeper-era consumers over a registry (docs/legacy.md §6)."""
    from rich.table import Table

    from grouplab.consumer.legacy.config import LegacyConfig
    from grouplab.zk.run import ZkCluster, ZkRunError

    topics = parse_topic_sizes(args.topics)
    if args.delivery or args.faults or args.data_dir or args.config or args.config_file or args.ui:
        raise UsageError("--delivery, --faults, --data-dir, --config and --ui are for the coordinator protocol; "
                         "--protocol zk takes --zookeeper, --streams and --consumer-config (Kafka 0.8 names)")
    if args.consumers == 0 and not args.forever:
        raise UsageError("--consumers 0 needs --forever; give --consumers 1 or more")
    check_zookeeper(args.zookeeper, "run")
    c = Catalog(args.lang)
    streams = 1 if args.streams is None else args.streams
    LegacyConfig(args.group, "consumer-1", {t: streams for t in topics},
                 assignment_strategy=args.assignor).with_overrides(args.consumer_config)
    run_dir = Path(args.run_dir) if args.run_dir else None
    logs: list[Any] = []

    def events(node: str) -> Any:
        if run_dir is None:
            return None
        from grouplab.eventlog import run_dir_log

        log = run_dir_log(run_dir, node)
        logs.append(log)
        return log.emit

    cluster = ZkCluster(topics, args.group, args.assignor, streams, args.consumer_config, args.zookeeper, events)
    where = c.t("zk.at", hosts=args.zookeeper) if args.zookeeper else c.t("zk.embedded")
    console.print(f"[bold]grouplab[/] {c.t('zk.banner', where=where)} · {c.t('run.group', group=f'[bold]{args.group}[/]')} · "
                  f"{c.t('run.topics', topics=_topics_text(topics))} · {c.t('zk.streams', count=streams)} · "
                  f"{c.t('run.banner.assignor', assignors=args.assignor)}"
                  + (f" · {c.t('run.banner.event_log', dir=run_dir)}" if run_dir else ""))
    try:
        await cluster.start()
    except ZkRunError as exc:
        raise CliError(str(exc)) from None
    steps: list[tuple[str, int | None, int]] = []
    interrupted = timed_out = False

    async def step(what: str) -> None:
        nonlocal timed_out
        ops = cluster.ops()
        settle = await cluster.wait_settled(args.timeout)
        steps.append((what, settle, cluster.ops() - ops))
        if settle is None:
            timed_out = True
            raise asyncio.TimeoutError
        console.print(c.t("zk.settled", settled="[green]" + c.t("zk.settled.word") + "[/]", what=what, ms=settle,
                          ops=cluster.ops() - ops))
        await asyncio.sleep(args.hold)

    try:
        console.print(f"[dim]{c.t('run.starting', count=args.consumers)}[/]")
        for _ in range(args.consumers):
            cluster.add_consumer()
        if args.consumers:
            await step(c.t("zk.step.joined", count=args.consumers))
        if args.forever:
            console.print(f"[dim]{c.t('run.forever')}[/]")
            await asyncio.Event().wait()
        victim = cluster.drivers[0]
        console.print(f"[yellow]{c.t('zk.stopping.crash' if args.crash else 'zk.stopping.leave', name=victim.consumer_id)}[/]")
        cluster.stop_consumer(victim, crash=args.crash)
        await step(c.t("zk.step.crashed" if args.crash else "zk.step.left", name=victim.consumer_id))
        console.print(f"[green]{c.t('run.adding')}[/]")
        cluster.add_consumer()
        await step(c.t("zk.step.one_joined"))
    except asyncio.CancelledError:
        interrupted = True
        console.print(f"[yellow]{c.t('run.interrupted')}[/]")
    except asyncio.TimeoutError:
        console.print(f"[red]{c.t('run.timeout', timeout=f'{args.timeout:g}')}[/]")
    finally:
        table = Table(title=c.t("zk.table.title"), title_justify="left", header_style="bold")
        for col in ("consumer", "partitions", "rebalances", "gave_up", "reads", "writes"):
            table.add_column(c.t(f"zk.table.col.{col}"), justify="left" if col in ("consumer", "partitions") else "right")
        for d in cluster.drivers + cluster.stopped:
            table.add_row(d.consumer_id + ("" if d in cluster.drivers else c.t("zk.table.stopped")),
                          format_partitions(sorted(d.machine.fetchers)) if d in cluster.drivers else "-",
                          str(d.machine.rebalances),
                          str(d.machine.gave_up), str(d.reads), str(d.writes))
        await cluster.close()
        for log in logs:
            log.close()
        console.print(table)
        console.print(" · ".join(c.t("zk.step.unsettled" if ms is None else "zk.step.settled", what=what, ms=ms, ops=ops)
                                 for what, ms, ops in steps))
    if timed_out:
        raise CliError(c.t("run.timeout.error", timeout=f"{args.timeout:g}"))
    return 130 if interrupted else 0


def check_zookeeper(hosts: str | None, command: str) -> None:
    """--zookeeper's HOST:PORT, and the zk extra it needs (kazoo, the client of a real ZooKeeper)."""
    if hosts is not None:
        host, sep, port = hosts.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise UsageError(f"--zookeeper expects HOST:PORT (e.g. 127.0.0.1:2181), got {hosts!r}")
        require("zk", f"{command} --zookeeper")


async def _with_countdown(view: Any, waiting: Any) -> None:
    """Await `waiting` (the group settling); meanwhile, while a member that stopped is still in
    the group, say when its session will have run out: once, and on a terminal as a live line."""
    text = view.countdown(wall_clock_ms())
    if text is None:
        await waiting
        return
    console.print(f"[yellow]{text}[/]")
    task = asyncio.ensure_future(waiting)
    try:
        if console.is_terminal:
            with console.status(text) as status:
                while not task.done() and (text := view.countdown(wall_clock_ms())) is not None:
                    status.update(text)
                    await asyncio.wait([task], timeout=0.5)
        await task
    finally:
        task.cancel()


def listen_error(host: str, port: int | None, exc: OSError, flag: str = "--port") -> str:
    import errno

    if exc.errno == errno.EADDRINUSE:
        return (f"cannot listen on {host}:{port}: the port is already in use; stop what uses it "
                f"or pick another {flag} (0: any free port)")
    return f"cannot listen on {host}:{port}: {exc.strerror or exc}; check --host and {flag}"


def _committed(cluster: Any) -> dict:
    """The highest offset each partition's consumers committed (what the apps report)."""
    committed: dict = {}
    for app in cluster.apps + cluster.stopped:
        for tp, offset in app.stats.committed.items():
            committed[tp] = max(committed.get(tp, 0), offset)
    return committed


async def _wait_drained(cluster: Any, delivery: Any, timeout_s: float) -> bool:
    """Until every input partition's committed offset reached its end (what the apps report) and,
    exactly-once, no transaction holds the output back from a read_committed reader: a crashed
    member's stays open until transaction.timeout.ms aborts it, and the account counts what that
    reader sees in the end. False if `timeout_s` passed first."""
    partitions = cluster.topics[delivery.input_topic]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        if sum(_committed(cluster).values()) >= partitions * delivery.records and (
                delivery.mode.value != "exactly-once"
                or not await delivery.open_transactions(cluster.host, cluster.port, partitions)):
            return True
        await asyncio.sleep(0.1)
    return False


async def _kill_the_coordinator(cluster: Any, view: Any, args: argparse.Namespace, c: Catalog) -> None:
    """`run --kill-coordinator`: the group's coordinator broker is killed; the consumers find the
    new one, which loads the group; the broker comes back and a preferred-leader election hands the
    group back to it (docs/protocol.md §12)."""
    node = cluster.coordinator_of_group()
    console.print(f"[yellow]{c.t('run.kill', node=node, group=args.group)}[/]")
    await cluster.kill_broker(node)
    console.print(f"[dim]{c.t('run.kill.moved', node=cluster.coordinator_of_group(), ms=cluster.broker_config.coordinator_load_time_ms)}[/]")
    await _with_countdown(view, cluster.wait_stable(args.timeout))
    await asyncio.sleep(args.hold)
    console.print(f"[green]{c.t('run.kill.restart', node=node)}[/]")
    await cluster.restart_broker(node)
    cluster.elect_leaders()
    await cluster.wait_stable(args.timeout)
    await asyncio.sleep(args.hold)


def _delivery_table(delivery: Any, account: dict, processed: int, aborted: int = 0, c: Catalog | None = None) -> Any:
    """The run's delivery account; exactly-once also counts the transactions the coordinator
    aborted (a crashed member's open one: its records are what read_uncommitted would see twice)."""
    from rich.table import Table

    c = c or Catalog()
    mode = delivery.mode.value
    table = Table(title=c.t("run.delivery.title", mode=mode), title_justify="left", header_style="bold")
    columns = ["produced", "processed", "lost", "duplicated", "uncommitted"]
    columns += ["aborted"] if mode == "exactly-once" else []
    for col in columns + ["guarantee"]:
        table.add_column(c.t(f"run.delivery.col.{col}"), justify="right")
    broken = {"at-most-once": account["duplicated"] > 0, "at-least-once": account["lost"] > 0,
              "exactly-once": account["lost"] > 0 or account["duplicated"] > 0}[mode]
    cells = [str(account["produced"]), str(processed), str(account["lost"]), str(account["duplicated"]),
             str(account["duplicated_uncommitted"])] + ([str(aborted)] if mode == "exactly-once" else [])
    table.add_row(*cells, f"[red]{c.t('run.delivery.broken')}[/]" if broken else f"[green]{c.t('run.delivery.held')}[/]")
    return table


class _AbortCount:
    """Transactions the coordinator aborted during a run (transaction_aborted events)."""

    def __init__(self) -> None:
        self.count = 0

    def on_event(self, node: str, ev: Any) -> None:
        if node == "coordinator" and ev.event == "transaction_aborted":
            self.count += 1


# ----------------------------------------------------------------------------- coordinator / consumer


async def cmd_coordinator(args: argparse.Namespace) -> int:
    from grouplab.coordinator.server import CoordinatorServer, DataDirError, KafkaPortError
    from grouplab.eventlog import EventLog, run_dir_log, stderr_log
    from grouplab.protocol.memory import gc_relaxed
    from grouplab.readable import CoordinatorView
    from grouplab.tracefile import TraceFile, trace_path

    check_lang(args.lang)
    events = (run_dir_log(args.run_dir, "coordinator") if args.run_dir
              else stderr_log("coordinator") if args.log_json else EventLog("coordinator"))
    if not args.log_json:  # a person at a terminal: each decision and rebalance in words
        events.listeners.append(CoordinatorView(err, args.lang))
    trace = TraceFile(trace_path(args.run_dir)) if args.run_dir else None
    client_logs: dict[str, EventLog] = {}  # Kafka clients' holdings (docs/kafka-wire.md §6a), one file each

    def client_log(node: str) -> EventLog:
        if node not in client_logs:
            client_logs[node] = run_dir_log(args.run_dir, node)
        return client_logs[node]

    server = CoordinatorServer(broker_config(args), args.host, args.port, events=events, data_dir=args.data_dir,
                               trace=trace, kafka_port=args.kafka_port,
                               client_logs=client_log if args.run_dir else None, brokers=args.brokers)

    def close_logs() -> None:
        events.close()
        for log in client_logs.values():
            log.close()
        if trace is not None:
            trace.close()

    try:
        await server.start()
    except DataDirError as exc:
        close_logs()
        raise CliError(exc) from None
    except KafkaPortError as exc:
        close_logs()
        raise CliError(listen_error(args.host, args.kafka_port, exc, "--kafka-port")) from None
    except OSError as exc:
        close_logs()
        raise CliError(listen_error(args.host, args.port, exc)) from None
    except BaseException:
        close_logs()
        raise
    groups, topics = len(server.broker.groups), len(server.broker.topics.partitions)
    logs = server.log_store.recovery.partitions if server.log_store is not None else 0
    c = Catalog(args.lang)
    restored = c.t("cmd.coordinator.restored", groups=count_of(c, "groups", groups), topics=count_of(c, "topics", topics),
                   dir=args.data_dir, logs=count_of(c, "logs", logs)) if args.data_dir else ""
    kafka = c.t("cmd.coordinator.kafka", addr=f"{args.host}:{server.kafka_port}") if server.kafka_port is not None else ""
    if args.brokers > 1:
        err.print(c.t("cmd.coordinator.cluster", brokers=args.brokers, restored=restored))
        for node in range(args.brokers):
            kafka_at = c.t("cmd.coordinator.kafka", addr=f"{args.host}:{server.kafka_ports[node]}") if server.kafka_ports else ""
            err.print(c.t("cmd.coordinator.broker", node=node, addr=f"{args.host}:{server.ports[node]}", kafka=kafka_at))
        bootstrap = ",".join(f"{args.host}:{p}" for p in (server.kafka_ports or server.ports).values())
        err.print(c.t("cmd.coordinator.bootstrap", servers=bootstrap))
    else:
        err.print(c.t("cmd.coordinator.listening", addr=f"{args.host}:{server.port}", kafka=kafka, restored=restored))
    gc.freeze()  # what start made (modules, recovered state) lives on: full collections need not walk it again
    from grouplab.broker_console import BrokerConsole

    console = BrokerConsole(server, err) if args.brokers > 1 else None
    try:
        if console is not None:
            console.start()
        with gc_relaxed():  # collections every 700 allocations were a third of its CPU at 10,000 joins
            await server.serve_forever()
    except asyncio.CancelledError:
        err.print(f"[yellow]{c.t('cmd.coordinator.interrupted')}[/]")
        return 130
    finally:
        if console is not None:
            console.stop()
        await server.stop()
        close_logs()
    return 0


async def cmd_consumer(args: argparse.Namespace) -> int:
    from grouplab.consumer.app import SimulatedConsumerApp
    from grouplab.admin import parse_bootstrap
    from grouplab.eventlog import EventLog, run_dir_log, stderr_log
    from grouplab.readable import ConsumerView

    check_lang(args.lang)
    _group_protocol_args(args)

    host, port = parse_bootstrap(args.bootstrap_server)
    config = ConsumerConfig(group_id=args.group, topics=parse_list(args.topics), client_id=args.client_id,
                            group_instance_id=args.group_instance_id,
                            assignors=check_assignors(parse_list(args.assignor))).with_overrides(args.consumer_config or [])
    events: EventLog = run_dir_log(args.run_dir, args.client_id) if args.run_dir else (
        stderr_log(args.client_id) if args.log_json else EventLog(args.client_id))

    events.listeners.append(ConsumerView(console, args.lang))
    app = SimulatedConsumerApp(config, host, port, events=events)
    try:
        await app.start()
    except OSError as exc:
        events.close()
        raise CliError(f"cannot connect to {host}:{port}: {exc.strerror or exc}; "
                       "is `grouplab coordinator` running there? (--bootstrap-server)") from None
    c = Catalog(args.lang)
    console.print(c.t("cmd.consumer.joining", client=args.client_id, group=args.group, addr=f"{host}:{port}"))
    try:
        while app.client.machine.fatal_error is None:
            await asyncio.sleep(0.2)
        return 1
    except asyncio.CancelledError:
        console.print(f"[yellow]{c.t('cmd.consumer.interrupted', client=args.client_id)}[/]")
        return 130
    finally:
        await app.stop(leave=True)
        events.close()


# ----------------------------------------------------------------------------- admin commands


async def cmd_describe(args: argparse.Namespace) -> int:
    from grouplab.admin import AdminClient, AdminError, parse_bootstrap
    from grouplab.describe import as_json, describe
    from grouplab.display import consumer_group_table, describe_table, offsets_table
    from grouplab.protocol.consumer_protocol import decode_assignment
    from grouplab.protocol.messages import ConsumerGroupDescribedGroup

    check_lang(args.lang)
    c = Catalog(args.lang)
    host, port = parse_bootstrap(args.bootstrap_server)
    async with AdminClient(host, port) as admin:
        groups = args.group or []
        if args.all_groups:
            groups = await admin.list_groups()
        if not groups and args.all_groups:
            err.print(c.t("describe.no_groups"))
            return 0
        if not groups:
            raise UsageError("give --group NAME (repeatable) or --all-groups")
        described = await describe(admin, groups)
    if args.format == "json":
        print(json.dumps(as_json(described), indent=2))
    else:
        for g in described.groups:
            console.print(consumer_group_table(g, c) if isinstance(g, ConsumerGroupDescribedGroup)
                          else describe_table(g, decode_assignment, c))
            if described.offsets[g.group_id]:
                console.print(offsets_table(g, described.offsets[g.group_id], c))
    problems = [c.t("describe.missing", group=repr(name)) for name in described.missing]
    problems += [f"group {gid!r}: {AdminError(code, None)}" for gid, code in described.failed]
    if problems:
        raise CliError(c.t("describe.sep").join(problems) + (c.t("describe.missing.hint") if described.missing else ""))
    return 0


async def cmd_delete(args: argparse.Namespace) -> int:
    """Like kafka-consumer-groups --delete: DeleteGroups of each group; the deleted ones are
    printed, any that could not be deleted make one line on stderr and exit 1. With --topic, like
    --delete-offsets: OffsetDelete of those topics' offsets from one group (grouplab/delete_offsets.py)."""
    from grouplab.admin import AdminClient, AdminError, parse_bootstrap
    from grouplab.protocol.errors import ErrorCode

    check_lang(args.lang)
    c = Catalog(args.lang)
    if args.topic:
        return await delete_group_offsets(args, c)
    host, port = parse_bootstrap(args.bootstrap_server)
    async with AdminClient(host, port) as admin:
        groups = args.group or []
        if args.all_groups:
            groups = await admin.list_groups()
            if not groups:
                err.print(c.t("delete.no_groups"))
                return 0
        if not groups:
            raise UsageError("give --group NAME (repeatable) or --all-groups")
        results = await admin.delete_groups(groups)
    deleted = [g for g, code in results.items() if code == 0]
    if deleted:
        console.print(c.t("delete.groups" if len(deleted) != 1 else "delete.group", groups=", ".join(map(repr, deleted))),
                      markup=False, highlight=False)
    # What each refusal means to the person who asked (kafka-consumer-groups names only the code).
    meaning = {ErrorCode.GROUP_ID_NOT_FOUND: c.t("delete.meaning.GROUP_ID_NOT_FOUND"),
               ErrorCode.NON_EMPTY_GROUP: c.t("delete.meaning.NON_EMPTY_GROUP"),
               ErrorCode.INVALID_GROUP_ID: c.t("delete.meaning.INVALID_GROUP_ID")}
    failed = [c.t("delete.failed.one", name=repr(g), meaning=meaning.get(ErrorCode.from_code(code)) or AdminError(code, None))
              for g, code in results.items() if code]
    if failed:
        raise CliError(c.t("delete.failed", failed=c.t("delete.sep").join(failed)))
    return 0


async def delete_group_offsets(args: argparse.Namespace, c: Catalog) -> int:
    """`delete --group G --topic T[:P,...]`: the deleted partitions printed; a refusal (of the
    request, or of some partitions) one line on stderr and exit 1."""
    from grouplab.admin import AdminClient, AdminError, parse_bootstrap
    from grouplab.delete_offsets import MEANING, TopicSpecError, delete_offsets
    from grouplab.protocol.errors import ErrorCode

    if args.all_groups or len(args.group or []) != 1:
        raise UsageError("--topic deletes the offsets of one group: give exactly one --group (no --all-groups)")
    [group] = args.group
    host, port = parse_bootstrap(args.bootstrap_server)
    try:
        async with AdminClient(host, port) as admin:
            outcome = await delete_offsets(admin, group, args.topic)
    except TopicSpecError as exc:
        raise UsageError(str(exc)) from None
    except AdminError as exc:
        code = ErrorCode.from_code(exc.code)
        meaning = c.t(f"delete.offsets.meaning.{code.name}") if code in MEANING else str(exc)
        raise CliError(c.t("delete.offsets.refused", group=repr(group), meaning=meaning)) from None
    if outcome.deleted:
        names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in outcome.deleted)
        console.print(c.t("delete.offsets.deleted", partitions=names, group=repr(group)), markup=False, highlight=False)
    problems = outcome.problems(group, c)
    if problems:
        raise CliError(c.t("delete.offsets.failed", group=repr(group), problems=c.t("delete.sep").join(problems)))
    return 0


async def cmd_topics(args: argparse.Namespace) -> int:
    from grouplab.admin import AdminClient, parse_bootstrap

    check_lang(args.lang)
    c = Catalog(args.lang)
    host, port = parse_bootstrap(args.bootstrap_server)
    async with AdminClient(host, port) as admin:
        if args.action == "create":
            await admin.create_topics({args.topic: args.partitions})
            console.print(c.t("topics.created", topic=args.topic, count=args.partitions))
        elif args.action == "add-partitions":
            await admin.create_partitions(args.topic, args.partitions)
            console.print(c.t("topics.now_has", topic=args.topic, count=args.partitions))
        elif args.action == "delete":
            return await _delete_topics(admin, args.topic, c)
        else:
            for name, count in sorted((await admin.topics()).items()):
                console.print(f"{name}\t{count}")
    return 0


async def _delete_topics(admin: Any, names: list[str], c: Catalog) -> int:
    """Like kafka-topics --delete: DeleteTopics of each topic; the deleted ones are printed, any
    that could not be deleted make one line on stderr and exit 1."""
    from grouplab.admin import AdminError
    from grouplab.protocol.errors import ErrorCode

    results = await admin.delete_topics(names)
    deleted = [name for name, (code, _) in results.items() if code == 0]
    if deleted:
        console.print(c.t("topics.deleted" if len(deleted) != 1 else "topics.deleted_one", topics=", ".join(deleted)),
                      markup=False, highlight=False)
    meaning = {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: c.t("topics.meaning.UNKNOWN_TOPIC_OR_PARTITION"),
               ErrorCode.TOPIC_DELETION_DISABLED: c.t("topics.meaning.TOPIC_DELETION_DISABLED")}
    failed = [c.t("delete.failed.one", name=repr(name),
                  meaning=meaning.get(ErrorCode.from_code(code)) or AdminError(code, message))
              for name, (code, message) in results.items() if code]
    if failed:
        raise CliError(c.t("delete.failed", failed=c.t("delete.sep").join(failed)))
    return 0


async def cmd_configs(args: argparse.Namespace) -> int:
    """Like kafka-configs --describe --all: a topic's configs (--topic) or the broker's (the
    default; its id from DescribeCluster), with their values and sources."""
    from grouplab.admin import AdminClient, AdminError, parse_bootstrap
    from grouplab.display import CONFIG_SOURCES, configs_table
    from grouplab.protocol.errors import ErrorCode
    from grouplab.protocol.messages import RESOURCE_BROKER, RESOURCE_TOPIC, DescribeConfigsResource

    check_lang(args.lang)
    c = Catalog(args.lang)
    host, port = parse_bootstrap(args.bootstrap_server)
    async with AdminClient(host, port) as admin:
        if args.topic is not None:
            resource = DescribeConfigsResource(RESOURCE_TOPIC, args.topic)
        else:
            broker = args.broker if args.broker is not None else (await admin.describe_cluster()).controller_id
            resource = DescribeConfigsResource(RESOURCE_BROKER, str(broker))
        (result,) = await admin.describe_configs([resource], documentation=args.format == "json")
    what = (c.t("configs.topic", topic=args.topic) if args.topic is not None
            else c.t("configs.broker", broker=resource.resource_name))
    if result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        raise CliError(c.t("configs.no_topic", topic=repr(args.topic)))
    if result.error_code:
        raise CliError(c.t("configs.cannot", what=what, error=AdminError(result.error_code, result.error_message)))
    if args.format == "json":
        print(json.dumps([{"name": e.name, "value": e.value, "source": CONFIG_SOURCES.get(e.config_source),
                           "read_only": e.read_only, "sensitive": e.is_sensitive, "documentation": e.documentation}
                          for e in result.configs], indent=2))
    else:
        console.print(configs_table(c.t("configs.title", what=what), result.configs, c))
    return 0


# ----------------------------------------------------------------------------- assign (no server)


def check_assign_protocol(args: argparse.Namespace) -> None:
    """--protocol consumer takes the server-side assignors, classic the client-side ones."""
    from grouplab.coordinator.server_assignors import SERVER_ASSIGNORS

    server = ", ".join(SERVER_ASSIGNORS)
    if args.protocol == "consumer":
        if args.assignor not in SERVER_ASSIGNORS:
            if args.assignor in assignor_names():
                raise UsageError(f"--protocol consumer computes the assignment on the coordinator with {server}; "
                                 f"{args.assignor!r} is a client-side assignor (use it with --protocol classic)")
            raise UsageError(f"--protocol consumer computes the assignment on the coordinator with {server}; "
                             f"{args.assignor!r} is no assignor")
        if args.streams is not None:
            raise UsageError("--streams is for the ZooKeeper-era assignors; leave out --protocol consumer")
    elif args.assignor in SERVER_ASSIGNORS and args.assignor not in assignor_names():
        raise UsageError(f"{args.assignor!r} is a server-side assignor (KIP-848): give --protocol consumer")


def parse_assign_members(specs: list[str], sizes: dict[str, int], allow_none: bool) -> dict[str, list[str]]:
    """`--member NAME=T1,T2` (and `NAME=` for a member subscribed to nothing, when allowed) -> {NAME: topics}."""
    members: dict[str, list[str]] = {}
    for spec in specs:
        name, sep, topics = spec.partition("=")
        if not sep or not name or (not parse_list(topics) and not allow_none):
            raise UsageError(f"expected --member NAME=TOPIC[,TOPIC...], got {spec!r}")
        if name in members:
            raise UsageError(f"member {name!r} is given twice; give each --member once with all its topics")
        unknown = [t for t in parse_list(topics) if t not in sizes]
        if unknown:
            raise UsageError(f"member {name!r} subscribes to {', '.join(map(repr, unknown))}, not in --topics "
                             f"({', '.join(sizes)}); add it there as TOPIC:PARTITIONS")
        members[name] = list(dict.fromkeys(parse_list(topics)))
    if not members:
        raise UsageError("give at least one --member NAME=TOPIC[,TOPIC...]")
    return members


def parse_assign_owned(specs: list[str], members: dict[str, list[str]],
                       sizes: dict[str, int], departed_ok: bool = False) -> dict[str, list[TopicPartition]]:
    """`--owned NAME=T:P,T:P` -> {NAME: partitions}: checked against --member and --topics, no partition twice.
    With `departed_ok`, NAME may be a member that left (no --member): what it owned moves."""
    owners: dict[TopicPartition, str] = {}
    owned: dict[str, list[TopicPartition]] = {}
    for spec in specs:
        name, sep, parts = spec.partition("=")
        if not sep or not name:
            raise UsageError(f"expected --owned NAME=TOPIC:PARTITION[,...], got {spec!r}")
        if name not in members and not departed_ok:
            raise UsageError(f"--owned names unknown member {name!r}; give it a --member {name}=TOPIC first")
        if name in owned:
            raise UsageError(f"--owned {name} is given twice; list all its partitions in one --owned {name}=T:P,T:P")
        partitions = [TopicPartition.parse(p) for p in parse_list(parts)]
        for tp in partitions:
            if tp.topic not in sizes or tp.partition >= sizes[tp.topic]:
                n = sizes.get(tp.topic, 0)
                have = (f"{tp.topic} has {n} partition{'s' * (n != 1)} in --topics, numbered from 0" if n
                        else f"{tp.topic!r} is not in --topics")
                raise UsageError(f"--owned {name}={tp.topic}:{tp.partition}: no such partition ({have})")
            if owners.get(tp, name) != name:
                raise UsageError(f"--owned: {tp.topic}:{tp.partition} is owned by both {owners[tp]} and {name}")
            owners[tp] = name
        owned[name] = list(dict.fromkeys(partitions))
    return owned


def cmd_assign(args: argparse.Namespace) -> int:
    check_lang(args.lang)
    c = Catalog(args.lang)
    sizes = parse_topic_sizes(args.topics)
    check_assign_protocol(args)
    if args.protocol == "consumer":
        from grouplab.assign_server import print_server_assignment

        members = parse_assign_members(args.member, sizes, allow_none=True)
        given = parse_assign_owned(args.owned or [], members, sizes, departed_ok=True)  # as below: one that left
        return print_server_assignment(console, args.assignor, args.topics, sizes, members,
                                       {m: ps for m, ps in given.items() if m in members}, args.format,
                                       departed={m: ps for m, ps in given.items() if m not in members}, c=c)
    if args.streams is not None or any(":" in spec.partition("=")[2] for spec in args.member):
        return assign_over_threads(args, sizes)
    members = parse_assign_members(args.member, sizes, allow_none=False)
    subscriptions = {name: Subscription(topics=topics) for name, topics in members.items()}
    # A member with --owned but no --member has left the group: its partitions go to others, and
    # count as moved (the "moved" of a rebalance after a member left).
    all_owned = parse_assign_owned(args.owned or [], members, sizes, departed_ok=True)
    departed = {name: owned for name, owned in all_owned.items() if name not in members}
    for name, owned in all_owned.items():
        if name in departed:
            continue
        subscriptions[name].owned_partitions = owned
        subscriptions[name].generation_id = 1
        # The eager sticky assignor reads a member's last assignment from its user data only (as
        # Kafka's does): an eager member has revoked everything by the time it rejoins.
        subscriptions[name].user_data = get_assignor(args.assignor).subscription_user_data(owned, 1)
    result = get_assignor(args.assignor).assign(sizes, subscriptions)
    if args.format == "json":
        print(json.dumps({m: [[tp.topic, tp.partition] for tp in sorted(ps)] for m, ps in result.items()}))
        return 0
    from grouplab.display import assignment_table, print_departed

    previous = {tp: m for m, sub in subscriptions.items() for tp in sub.owned_partitions}
    previous.update({tp: m for m, owned in departed.items() for tp in owned})
    owner = {tp: m for m, ps in result.items() for tp in ps}
    moved_to: dict[str, int] = {}
    for tp, m in owner.items():
        if previous.get(tp) not in (None, m):
            moved_to[m] = moved_to.get(m, 0) + 1
    console.print(assignment_table({m: sorted(ps) for m, ps in result.items()}, moved=moved_to if previous else None,
                                   title=c.t("assign.title", assignor=args.assignor, topics=args.topics), c=c))
    print_departed(console, departed, c)
    if previous:
        withheld = sorted(tp for tp in previous if tp not in owner and tp.partition < sizes.get(tp.topic, 0))
        moved = [f"{tp}: {previous[tp]}→{owner[tp]}" for tp in sorted(owner) if previous.get(tp) not in (None, owner[tp])]
        console.print(c.t("assign.moved", count=len(moved), moves=", ".join(moved) or "-"))
        if withheld:
            console.print(c.t("assign.withheld", count=len(withheld), partitions=format_partitions(withheld)))
    return 0


def parse_topic_counts(spec: str, sizes: dict[str, int], streams: int) -> tuple[str, dict[str, int]]:
    """`C1=t0:2,t1` -> ("C1", {"t0": 2, "t1": streams}): a ZooKeeper-era consumer's topicCountMap."""
    name, sep, topics = spec.partition("=")
    if not sep or not name or not parse_list(topics):
        raise UsageError(f"expected --member NAME=TOPIC[:STREAMS][,TOPIC[:STREAMS]...], got {spec!r}")
    counts: dict[str, int] = {}
    for item in parse_list(topics):
        topic, colon, n = item.partition(":")
        if colon and (not n.isdigit() or int(n) < 1):
            raise UsageError(f"--member {name}: expected TOPIC:STREAMS with STREAMS 1 or more, got {item!r}")
        if topic not in sizes:
            raise UsageError(f"member {name!r} subscribes to {topic!r}, not in --topics ({', '.join(sizes)}); "
                             f"add it there as TOPIC:PARTITIONS")
        counts[topic] = int(n) if colon else streams
    return name, counts


def assign_over_threads(args: argparse.Namespace, sizes: dict[str, int]) -> int:
    """The ZooKeeper-era assignors (docs/legacy.md §2): every consumer has STREAMS threads per topic,
    `<consumer>-<n>`, and partitions go to thread ids."""
    from grouplab.consumer.legacy.assignors import get_legacy_assignor
    from grouplab.consumer.legacy.threads import by_consumer

    c = Catalog(args.lang)
    if args.owned:
        raise UsageError("--owned is for the sticky assignors; the ZooKeeper-era assignors (--streams) kept no memory")
    streams = 1 if args.streams is None else args.streams
    subscriptions: dict[str, dict[str, int]] = {}
    for spec in args.member:
        name, counts = parse_topic_counts(spec, sizes, streams)
        if name in subscriptions:
            raise UsageError(f"member {name!r} is given twice; give each --member once with all its topics")
        subscriptions[name] = counts
    if not subscriptions:
        raise UsageError("give at least one --member NAME=TOPIC[:STREAMS][,TOPIC...]")
    result = get_legacy_assignor(args.assignor)(sizes, subscriptions)
    if args.format == "json":
        print(json.dumps({t: [[tp.topic, tp.partition] for tp in ps] for t, ps in result.items()}))
        return 0
    from grouplab.display import assignment_table

    console.print(assignment_table(result, title=c.t("assign.threads.title", assignor=args.assignor, topics=args.topics),
                                   unit=c.t("assign.threads.unit"), c=c))
    per_consumer = by_consumer(result, subscriptions)
    console.print(c.t("assign.per_consumer", consumers=" · ".join(f"{name}: {format_partitions(ps)}"
                                                                  for name, ps in per_consumer.items())))
    return 0


# ----------------------------------------------------------------------------- replay


def cmd_replay(args: argparse.Namespace) -> int:
    """The work is grouplab/replay.py; this says what it compared, or where the two part ways."""
    from grouplab.replay import EVENTS_MISSING, ReplayRefused, replay

    check_lang(args.lang)
    c = Catalog(args.lang)
    try:
        result = replay(args.run_dir)
    except ReplayRefused as exc:
        raise CliError(exc) from None
    inputs = (c.t("replay.inputs", requests=f"{result.requests:,}", timers=f"{result.timers:,}",
                  member_ids=f"{result.member_ids:,}")
              + (c.t("replay.restarts" if result.restarts != 1 else "replay.restart", count=result.restarts)
                 if result.restarts else ""))
    diff = result.difference
    if diff is None:
        events = c.t("replay.events", count=f"{result.events:,}") if result.events_compared else ""
        console.print(c.t("replay.identical", inputs=inputs, answers=f"{result.responses:,}", events=events))
        for note in result.notes:
            err.print(f"[yellow]{c.t('replay.note')}[/] {c.t('replay.events_missing') if note == EVENTS_MISSING else note}")
        return 0
    where = "trace/coordinator.jsonl" if diff.what == "trace line" else "coordinator.jsonl"
    console.print(f"[red]{c.t('replay.differs')}[/]{c.t('replay.differs.where', where=where, line=diff.index, inputs=inputs)}")
    console.print(f"  {c.t('replay.recorded')} {_excerpt(diff.recorded)}", markup=False, highlight=False)
    console.print(f"  {c.t('replay.replayed')} {_excerpt(diff.replayed)}", markup=False, highlight=False)
    return 1


def count_of(c: Catalog, what: str, n: int) -> str:
    """`1 group`, `2 groups`: the catalogue's `cmd.count.<what>.one` or `.many`."""
    return c.t(f"cmd.count.{what}.{'one' if n == 1 else 'many'}", n=n)


def check_lang(lang: str) -> None:
    from grouplab.teach.catalog import languages

    if lang not in languages():
        raise UsageError(f"--lang {lang!r}: choose one of {', '.join(languages())}")


def cmd_explain(args: argparse.Namespace) -> int:
    """Arguments and display; the story is grouplab/teach/explain.py's (and a lesson's, lessons.py's)."""
    import tempfile

    from grouplab.replay import ReplayRefused
    from grouplab.teach.catalog import Catalog
    from grouplab.teach.explain import Filter, extent, narrate_run, select, text_lines
    from grouplab.teach.lessons import Told, comparison_text, markdown_page, tell

    check_lang(args.lang)
    if args.lessons:
        return cmd_lessons(args)
    if args.lesson is not None:
        if args.target:
            raise UsageError(f"give either a target or --lesson {args.lesson}, not both")
        args.target = args.lesson
    if args.target and not Path(args.target).is_dir():
        compared = _compare_lesson(args.target)
        if compared is not None:
            return _explain_compare_lesson(args, compared)
    if not args.target:
        raise UsageError("give a RUN_DIR, a scenario or a lesson to explain (grouplab lessons lists the lessons)")
    c = Catalog(args.lang)
    target = Path(args.target)
    asked = Filter(args.from_s, args.to_s, args.generation)
    lesson: Lesson | None = None
    with tempfile.TemporaryDirectory(prefix="grouplab-explain-") as tmp:
        try:
            if (target / "trace").is_dir() or (target.is_dir() and not target.suffix == ".toml"):
                told = [Told(None, story := narrate_run(target, args.lang), select(story, asked))]
                label = str(target)
            else:  # a scenario or a lesson: run it on the simulator first, into a directory that goes afterwards
                lesson = _lesson_or_scenario(args.target)
                seed = args.seed if args.seed is not None else lesson.spec.seed
                told = tell(lesson, seed, args.lang, asked, Path(tmp))
                label = f"{lesson.scenario.name}, seed {seed}"
        except ReplayRefused as exc:
            raise CliError(exc) from None
    story, steps = told[0].story, told[0].steps
    if lesson is not None and lesson.scenario.lesson is not None:  # a lesson: its title and introduction first
        title, intro = c.t("title.lesson", title=lesson.title(c)), lesson.intro(c)
    else:
        title, intro = c.t("title.run", group=story.group or "?", run=label), None
    if args.format == "markdown":
        text = markdown_page(told, c, title, intro, args.all)
    elif args.format == "mermaid":
        return _write_diagrams(told, c, args.all, args.out)
    else:
        text = ""
    if text:
        if args.out:
            Path(args.out).write_text(text, encoding="utf-8")
            err.print(c.t("cmd.wrote", path=args.out))
        else:
            sys.stdout.write(text)
        return 0
    if not any(t.steps for t in told):
        low, high, seconds = extent(story)
        asked_for = " ".join(f"--{name.replace('_s', '')} {value:g}" for name, value in
                             (("generation", args.generation), ("from_s", args.from_s), ("to_s", args.to_s))
                             if value is not None)
        err.print(c.t("filtered.none.range", command=f"grouplab explain {args.target} {asked_for}".strip(),
                      low=low, high=high, seconds=f"{seconds:.1f}"), soft_wrap=True)
        return 1

    def wait() -> bool:
        try:
            answer = input(c.t("step.prompt") + " ")
        except EOFError:
            return True
        return answer.strip().lower() != "q"

    console.print(title, style="bold", markup=False, highlight=False)
    if intro:
        console.print(intro, markup=False, highlight=False)
    stopped = False

    def step() -> bool:
        nonlocal stopped
        stopped = not wait()
        return not stopped

    for t in told:
        if t.label is not None:
            console.print(f"\n── {t.label} ──", style="bold", markup=False, highlight=False)
        for style, line in text_lines(t.story, t.steps, c, show_all=args.all, on_step=step if args.step else None):
            console.print(line, style=style or None, markup=False, highlight=False, soft_wrap=True)
        if stopped:
            return 0
    if len(told) > 1:
        console.print(f"\n── {c.t('compare.title')} ──", style="bold", markup=False, highlight=False)
        for line in comparison_text(told, c):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    return 0


def _write_diagrams(told: list[Told], c: Catalog, show_all: bool, out: str | None) -> int:
    """Every variant's sequence diagram. A mermaid file holds one diagram, so with `--out FILE` a
    lesson in variants writes FILE-<variant>.mmd each; on stdout each diagram follows a `%%` comment
    naming its variant (mermaid's comment), separated by a blank line."""
    from grouplab.teach.explain import mermaid

    diagrams = [(t, mermaid(t.story, t.steps, c, show_all=show_all)) for t in told]
    if len(diagrams) == 1:
        text = diagrams[0][1]
        if out:
            Path(out).write_text(text, encoding="utf-8")
            err.print(c.t("cmd.wrote", path=out))
        else:
            sys.stdout.write(text)
        return 0
    if out:
        base = Path(out)
        for t, text in diagrams:
            path = base.with_name(f"{base.stem}-{t.variant}{base.suffix or '.mmd'}")
            path.write_text(text, encoding="utf-8")
            err.print(c.t("cmd.wrote", path=path))
        return 0
    sys.stdout.write("\n".join(f"%% {_mm_comment(t.label or t.variant or '')}\n{text}" for t, text in diagrams))
    return 0


def _mm_comment(text: str) -> str:
    return " ".join(text.split())


def _compare_lesson(target: str) -> Lesson | None:
    """A built-in lesson told through `grouplab compare` (zk-vs-coordinator), or None."""
    from grouplab.sim.scenario import ScenarioError, resolve_scenario
    from grouplab.teach.lessons import find_lesson, load_lesson

    try:
        resolve_scenario(target)
        return None  # a scenario of that name comes first, as in _lesson_or_scenario
    except ScenarioError:
        pass
    path = find_lesson(target)
    lesson = load_lesson(path) if path is not None else None
    return lesson if lesson is not None and lesson.spec.compare else None


def _explain_compare_lesson(args: argparse.Namespace, lesson: Lesson) -> int:
    """The lesson's changes under every design (grouplab/teach/compare_lesson.py), as text or markdown."""
    from grouplab.teach.catalog import Catalog
    from grouplab.teach.compare_lesson import markdown, play, text_lines

    if args.format == "mermaid":
        raise UsageError(f"{lesson.name} compares designs change by change and has no message diagram: "
                         "use --format text or markdown")
    if args.from_s is not None or args.to_s is not None or args.generation is not None:
        raise UsageError(f"{lesson.name} is told change by change: --from, --to and --generation do not apply")
    c = Catalog(args.lang)
    told = play(lesson.scenario, args.seed if args.seed is not None else lesson.spec.seed)
    title, intro = c.t("title.lesson", title=lesson.title(c)), lesson.intro(c)
    if args.format == "markdown":
        text = markdown(told, c, title, intro)
        if args.out:
            Path(args.out).write_text(text, encoding="utf-8")
            err.print(c.t("cmd.wrote", path=args.out))
        else:
            sys.stdout.write(text)
        return 0
    console.print(title, style="bold", markup=False, highlight=False)
    if intro:
        console.print(intro, markup=False, highlight=False)
    for style, line in text_lines(told, c):
        console.print(line, style=style or None, markup=False, highlight=False, soft_wrap=True)
    return 0


def _lesson_or_scenario(target: str) -> Lesson:
    """A scenario file or built-in scenario name, else a built-in lesson name; one line if neither."""
    from grouplab.sim.scenario import ScenarioError, builtin_scenario_names, resolve_scenario
    from grouplab.teach.lessons import find_lesson, lesson_names, load_lesson

    try:
        path = resolve_scenario(target)
    except ScenarioError:
        found = find_lesson(target)
        if found is None:
            raise UsageError(f"{target}: not a run directory, a scenario or a lesson (lessons: {', '.join(lesson_names())}; "
                             f"built-in scenarios: {', '.join(builtin_scenario_names())})") from None
        path = found
    try:
        return load_lesson(path)
    except ScenarioError as exc:
        raise UsageError(f"{target}: not a run directory, and {exc}") from None


def cmd_lessons(args: argparse.Namespace) -> int:
    """The built-in lessons with their titles, in the chosen language."""
    from grouplab.teach.catalog import Catalog
    from grouplab.teach.lessons import find_lesson, lesson_names, load_lesson

    check_lang(args.lang)
    c = Catalog(args.lang)
    names = lesson_names()
    width = max((len(n) for n in names), default=0)
    for name in names:
        path = find_lesson(name)
        assert path is not None
        console.print(f"{name:<{width}}  {load_lesson(path).title(c)}", markup=False, highlight=False, soft_wrap=True)
    err.print(c.t("lessons.hint"))
    return 0


def _excerpt(line: dict[str, Any] | None, limit: int = 400) -> str:
    if line is None:
        return "(nothing)"
    text = json.dumps(line, separators=(",", ":"))
    return text if len(text) <= limit else text[:limit] + f"… ({len(text):,} characters)"


# ----------------------------------------------------------------------------- plot


def cmd_plot(args: argparse.Namespace) -> int:
    from grouplab.plot import chart_from_run, save

    require("plot", "plot")
    if Path(args.out).suffix.lower() not in (".png", ".svg"):
        raise UsageError(f"--out must end in .png or .svg (got {args.out!r})")
    check_lang(args.lang)
    if args.lang != "en":
        from grouplab.plot import PlotFontError, cjk_font

        try:
            cjk_font()
        except PlotFontError as exc:
            raise CliError(exc) from None
    chart = chart_from_run(args.run_dir, args.group, args.title, lang=args.lang)
    path = save(chart, args.out)
    console.print(Catalog(args.lang).t("plot.wrote", path=path, lanes=len(chart.lanes), bars=f"{len(chart.bars):,}",
                                       idle=f"{len(chart.idle):,}", bands=len(chart.bands), faults=len(chart.faults)))
    return 0


# ----------------------------------------------------------------------------- simulate


def cmd_simulate(args: argparse.Namespace) -> int:
    from grouplab.progress import ProgressReport

    from grouplab.sim.runner import parse_seeds, result_row, run_seed, totals
    from grouplab.sim.scenario import load_scenario, resolve_scenario
    from grouplab.sim.timeline import Timeline

    if args.seed is not None and args.seeds:
        raise UsageError("give --seed N (one run, with its timeline) or --seeds RANGE (many runs), not both")
    seeds = parse_seeds(args.seeds) if args.seeds else [1 if args.seed is None else args.seed]
    if args.run_dir and len(seeds) > 1:
        raise UsageError("--run-dir writes one run's event log: use it with --seed, not --seeds")
    check_lang(args.lang)
    c = Catalog(args.lang)
    if args.protocol == "zk":
        return cmd_simulate_zk(args, seeds)
    scenario = load_scenario(resolve_scenario(args.scenario))
    if args.members:
        scenario = scenario.with_members(args.members)
    if args.group_protocol:
        scenario = scenario.with_group_protocol(args.group_protocol)
    if args.assignor and scenario.group_protocol() == "consumer":
        remote = parse_list(args.assignor)
        if len(remote) != 1 or remote[0] not in ("uniform", "range"):
            raise UsageError("with group.protocol=consumer, --assignor names the one server-side assignor "
                             "the members ask for (group.remote.assignor): uniform or range")
        scenario.consumer["group.remote.assignor"] = remote[0]
    elif args.assignor:
        scenario = scenario.with_assignors(check_assignors(parse_list(args.assignor)))
    interrupted = False
    if len(seeds) == 1:
        timeline = Timeline(scenario.group_id, session_timeout_ms=scenario.coordinator_session_timeout_ms(),
                            lang=args.lang)
        result = run_seed(scenario, seeds[0], args.run_dir, listener=timeline)
        costs_line = timeline.finish(result.ended_ms)
        console.print(timeline.render(limit=args.timeline_rows,
                                      title=c.t("sim.title", scenario=scenario.name, seed=seeds[0])))
        results = [result]
    else:
        results = []
        with sigint_flag() as stop:
            if not err.is_terminal:  # (a terminal gets the progress bar instead)
                err.print(c.t("sim.running", count=f"{len(seeds):,}", scenario=scenario.name), soft_wrap=True)
            with ProgressReport(err, c.t("sim.progress", scenario=scenario.name), total=len(seeds),
                                unit=c.t("sim.progress.unit"), c=c) as progress:
                for seed in seeds:
                    if stop.is_set():
                        break
                    results.append(run_seed(scenario, seed))
                    progress.update(advance=1)
        if stop.is_set():
            interrupted = True
            err.print(f"[yellow]{c.t('sim.interrupted', done=f'{len(results):,}', total=f'{len(seeds):,}')}[/]",
                      soft_wrap=True)
            if not results:
                return 130
    rows = [result_row(r) for r in results]
    summary = totals(results)
    for r in results:
        if not r.ok:
            v = r.violation
            assert v is not None
            said = c.t("sim.violated", seed=r.seed, invariant=_invariant_name(v.invariant, c), ms=v.now_ms)
            console.print(f"[red bold]{said}[/]\n  {v.detail}")
            console.print(f"  {c.t('sim.last_steps')}\n" + "\n".join(f"    {line}" for line in v.trace[-args.trace_lines:]))
            console.print(f"  {c.t('sim.replay')} grouplab simulate --scenario {args.scenario} --seed {r.seed} "
                          f"--run-dir runs/seed-{r.seed}")
    console.print(c.t("sim.summary", scenario=scenario.name, seeds=summary["seeds"], events=f"{summary['events']:,}")
                  + (_epochs_summary(summary, c) if scenario.group_protocol() == "consumer" else
                     c.t("sim.summary.rebalances", rebalances=summary["rebalances"], moved=summary["partitions_moved"]))
                  + c.t("sim.summary.settled", median=summary["settle_ms_median"], most=summary["settle_ms_max"])
                  + (f"[green]{c.t('sim.held')}[/]" if not summary["failed"]
                     else f"[red]{c.t('sim.failed_seeds', seeds=summary['failed'])}[/]"))
    if summary["produced"] is not None:
        console.print(_delivery_summary(summary, rows, c), soft_wrap=True)
    if len(seeds) == 1:
        console.print(costs_line)
    if args.summary_json:
        Path(args.summary_json).write_text(json.dumps({"scenario": scenario.name, "totals": summary, "seeds": rows,
                                                       "interrupted": interrupted}, indent=2))
    if interrupted:
        return 130
    return 1 if summary["failed"] else 0


def _invariant_name(name: str, c: Catalog) -> str:
    """An invariant's name (`one owner per generation`) in the catalogue's words; one it has no
    text for (the ZooKeeper era's `single_owner`, a name) as it came."""
    key = "sim.invariant." + re.sub(r"\W+", "_", name)
    return c.t(key) if c.has(key) else name


def _delivery_summary(summary: dict[str, Any], rows: list[dict[str, Any]], c: Catalog) -> str:
    """A delivery scenario's account over its seeds: `delivery: 180,000 records produced, 180,250
    processed · lost 0 · duplicated 250 (in 7 of 100 seeds) · read_uncommitted would see 300 twice`."""
    def seeds_with(key: str) -> str:
        hit = sum(1 for r in rows if (r.get(key) or 0) > 0)
        return c.t("sim.delivery.in_seeds", hit=hit, total=len(rows)) if summary[key] else ""

    unc = sum(r.get("duplicated_uncommitted") or 0 for r in rows)
    return (c.t("sim.delivery", produced=f"{summary['produced']:,}", processed=f"{summary['processed']:,}",
                lost=f"{summary['lost']:,}", lost_seeds=seeds_with("lost"), duplicated=f"{summary['duplicated']:,}",
                duplicated_seeds=seeds_with("duplicated"))
            + (c.t("sim.delivery.uncommitted", count=f"{unc:,}") if unc != summary["duplicated"] else ""))


def _epochs_summary(summary: dict[str, Any], c: Catalog) -> str:
    """A consumer-protocol group's part of the summary line: `14 group epochs (member_joined ×6,
    session_timeout ×8), 20 partitions moved, back to Stable after an epoch move in median 1,040 ms
    (max 3,100 ms), `."""
    causes = ", ".join(f"{k} ×{n}" for k, n in summary["epoch_causes"].items())
    median, most = summary["converge_ms_median"], summary["converge_ms_max"]
    back = c.t("sim.epochs.back", median=f"{median:,.0f}", most=f"{most:,}") if median is not None else ""
    return (c.t("sim.epochs", count=summary["group_epochs"]) + (f" ({causes})" if causes else "")
            + c.t("sim.epochs.moved", moved=summary["partitions_moved"]) + back)


@contextlib.contextmanager
def sigint_flag() -> Iterator[threading.Event]:
    """Ctrl-C sets a flag that a loop of short steps checks between steps, instead of raising
    KeyboardInterrupt wherever the main thread happens to be (inside rich's or a library's lock, a
    KeyboardInterrupt once left `simulate --seeds` running on past Ctrl-C). A second Ctrl-C raises."""
    stop = threading.Event()

    def on_sigint(_signum: int, _frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


def cmd_simulate_zk(args: argparse.Namespace, seeds: list[int]) -> int:
    """A ZooKeeper-era scenario (grouplab/scenarios/zk/, docs/legacy.md §5) in its simulator."""
    from grouplab.zk.scenario import load_zk_scenario
    from grouplab.zk.sim import Violation
    from grouplab.zk.simulate import ZkTimeline, changes_table, run_zk_seed, summary_line

    c = Catalog(args.lang)
    if args.members or args.assignor or args.summary_json:
        raise UsageError("--members, --assignor and --summary-json are for coordinator scenarios; "
                         "a ZooKeeper-era scenario sets its consumers itself")
    scenario = load_zk_scenario(args.scenario)
    results, failed = [], []
    for seed in seeds:
        timeline = ZkTimeline(scenario.group, lang=args.lang) if len(seeds) == 1 else None
        try:
            result = run_zk_seed(scenario, seed, args.run_dir, listener=timeline)
        except Violation as v:
            failed.append(v)
            console.print(f"[red bold]{c.t('sim.zk.violated', seed=seed, invariant=v.invariant, ms=v.at_ms, detail=v.detail)}[/]", markup=True, highlight=False)
            console.print(f"  {c.t('sim.replay')} grouplab simulate --protocol zk --scenario {args.scenario} --seed {seed} "
                          f"--run-dir runs/zk-seed-{seed}", markup=False)
            continue
        results.append(result)
        if timeline is not None:
            console.print(timeline.render(limit=args.timeline_rows, title=c.t("sim.title", scenario=scenario.name,
                                                                                  seed=seed)))
            console.print(changes_table(result, c.t("sim.zk.changes_title"), c))
    console.print(summary_line(scenario, results, failed, c))
    return 1 if failed else 0


# ----------------------------------------------------------------------------- compare


def _compare_script(args: argparse.Namespace) -> Any:
    from grouplab.compare.script import Settings, real_names, script, sim_names

    topics = parse_topic_sizes(args.topics)
    grow = args.add or f"{next(iter(topics))}:{topics[next(iter(topics))] + 2}"
    topic, sep, total = grow.rpartition(":")
    if not sep or not topic or not total.isdigit():
        raise UsageError(f"--add expects TOPIC:TOTAL (the topic's new partition count), got {grow!r}")
    settings = Settings(args.consumers, topics, (topic, int(total)), args.session_timeout_ms,
                        args.zk_session_timeout_ms, args.metadata_max_age_ms, args.gap_ms, args.group,
                        metadata_refresh=args.metadata_refresh)
    # Both designs' configurations are checked before anything runs: a bad timeout is one line.
    ConsumerConfig(group_id=settings.group, topics=list(topics)).with_overrides(
        [f"session.timeout.ms={settings.session_timeout_ms}", f"metadata.max.age.ms={settings.metadata_max_age_ms}"])
    broker = BrokerConfig()
    if not broker.group_min_session_timeout_ms <= settings.session_timeout_ms <= broker.group_max_session_timeout_ms:
        raise UsageError(f"--session-timeout-ms {settings.session_timeout_ms}: the coordinator accepts "
                         f"{broker.group_min_session_timeout_ms} to {broker.group_max_session_timeout_ms} ms "
                         "(group.min.session.timeout.ms, group.max.session.timeout.ms)")
    from grouplab.consumer.legacy.config import LegacyConfig
    from grouplab.coordinator.registry import TICK_TIME_MS

    LegacyConfig(settings.group, "check", {t: 1 for t in topics}).with_overrides(
        [f"zookeeper.session.timeout.ms={settings.zk_session_timeout_ms}"])
    if not 2 * TICK_TIME_MS <= settings.zk_session_timeout_ms <= 20 * TICK_TIME_MS:
        raise UsageError(f"--zk-session-timeout-ms {settings.zk_session_timeout_ms}: ZooKeeper negotiates a "
                         f"session timeout into 2 to 20 × tickTime, {2 * TICK_TIME_MS} to {20 * TICK_TIME_MS} ms "
                         f"with tickTime {TICK_TIME_MS}")
    if args.real:
        return script(settings, real_names(args.consumers))
    return script(settings, sim_names(args.consumers), 1 if args.seed is None else args.seed)


def cmd_compare(args: argparse.Namespace) -> int:
    """The same membership changes under the ZooKeeper era, the classic protocol (eager and
    cooperative) and KIP-848, side by side (docs/legacy.md §7): in the simulators (default) or over
    real sockets (--real)."""
    from grouplab.compare.script import CompareError, parse_designs

    if not args.real and (args.zookeeper is not None or args.timeout is not None or args.hold is not None):
        raise UsageError("--zookeeper, --timeout and --hold are for runs over real sockets: add --real")
    if args.real and args.seed is not None:
        raise UsageError("--seed is for the simulators; a run over real sockets (--real) has none")
    check_zookeeper(args.zookeeper, "compare")
    check_lang(args.lang)
    try:
        designs = parse_designs(args.designs)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.scale is not None:
        if args.real:
            raise UsageError("--scale runs in the simulators only (a hundred consumers per design over sockets would "
                             "measure this machine); leave out --real")
        return _compare_scale(args, designs)
    script = _compare_script(args)
    if args.real:
        return _run_async(lambda a: _compare_real(a, script, designs), args)
    from grouplab.compare.simulate import simulate

    seed = 1 if args.seed is None else args.seed
    try:
        results = {d: simulate(script, seed, d) for d in designs}
    except CompareError as exc:
        raise CliError(exc) from None
    except AssertionError as exc:  # the ZooKeeper-era simulator's Violation names the seed
        raise CliError(f"the ZooKeeper-era simulator: {exc}") from None
    _compare_output(args, script, results, "simulator", seed)
    return 0


def _compare_scale(args: argparse.Namespace, designs: list[str]) -> int:
    """`compare --scale 10,50,100`: the script's totals per group size and design (grouplab/compare/scale.py)."""
    from dataclasses import asdict

    from grouplab.compare.scale import parse_sizes, render_scale, run_scale, scale_lines
    from grouplab.compare.script import CompareError
    from grouplab.progress import ProgressReport

    try:
        sizes = parse_sizes(args.scale)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    settings = _compare_script(args).settings
    seed = 1 if args.seed is None else args.seed
    c = Catalog(args.lang)
    try:
        with ProgressReport(err, "compare --scale", total=len(sizes) * len(designs), unit=c.t("progress.unit.runs"),
                            c=c) as progress:
            scaled = run_scale(settings, sizes, seed, designs, lambda n, d: progress.update(advance=1))
    except CompareError as exc:
        raise CliError(exc) from None
    except AssertionError as exc:  # the ZooKeeper-era simulator's Violation names the seed
        raise CliError(f"the ZooKeeper-era simulator: {exc}") from None
    lines = scale_lines(scaled, c)
    if args.format == "json":
        print(json.dumps({"mode": "scale", "seed": seed, "designs": designs,
                          "sizes": {str(n): {d: asdict(f) for d, f in by.items()} for n, by in scaled.items()},
                          "conclusion": lines}, indent=2, ensure_ascii=False))
        return 0
    console.print(render_scale(scaled, seed, c))
    for line in lines:
        console.print(line, soft_wrap=True, markup=False, highlight=False)
    return 0


async def _compare_real(args: argparse.Namespace, script: Any, designs: list[str]) -> int:
    from grouplab.compare.real import run_real
    from grouplab.compare.script import CompareError

    def say(line: str) -> None:  # progress on stdout, as `run` prints it (none with --format json)
        if args.format == "table":
            console.print(line, style="dim", markup=False, soft_wrap=True)

    c = Catalog(args.lang)
    where = c.t("zk.at", hosts=args.zookeeper) if args.zookeeper else c.t("zk.embedded")
    say(c.t("cmp.real.running", where=where))
    try:
        # Added partitions settle only once the leader's metadata is refreshed (metadata.max.age.ms,
        # Kafka's default 5 min): the default timeout covers that, or that change could never settle.
        # With --metadata-refresh on-change (the default) they are refreshed when the partitions are made.
        waits = script.settings.metadata_max_age_ms / 1000 + 60 if script.settings.waits_for_max_age else 0
        default_timeout = max(120.0, waits)
        results = await run_real(script, designs, args.zookeeper,
                                 default_timeout if args.timeout is None else args.timeout,
                                 1.0 if args.hold is None else args.hold, say, c)
    except CompareError as exc:
        raise CliError(exc) from None
    _compare_output(args, script, results, "real", None)
    return 0


def _compare_output(args: argparse.Namespace, script: Any, results: Any, mode: str, seed: int | None) -> None:
    from grouplab.compare.report import as_json, conclusion, render

    s = script.settings
    c = Catalog(args.lang)
    if args.format == "json":
        print(json.dumps(as_json(script, results, mode, seed, c), indent=2, ensure_ascii=False))
        return
    where = c.t("cmp.head.simulated", seed=seed) if mode == "simulator" else c.t("cmp.head.real")
    metadata = (c.t("cmp.head.max_age", age=s.metadata_max_age_ms) if s.waits_for_max_age
                else c.t("cmp.head.on_change"))
    console.print(c.t("cmp.head", title="[bold]grouplab compare[/]", where=where, group=s.group,
                      topics=_topics_text(s.topics), session=s.session_timeout_ms, zk=s.zk_session_timeout_ms,
                      metadata=metadata), soft_wrap=True)
    console.print(render(script, results, mode, c))
    for line in conclusion(script, results, c):
        console.print(line, soft_wrap=True)


# ----------------------------------------------------------------------------- sweep (Spark)


class _KeepSigint:
    """The `signal` module, except that signal(SIGINT, ...) changes nothing."""

    def __getattr__(self, name: str) -> Any:
        return getattr(signal, name)

    def signal(self, signum: int, handler: Any) -> Any:
        if signum == signal.SIGINT:
            return signal.getsignal(signum)
        return signal.signal(signum, handler)


def interrupted_line(command: str, done: str) -> str:
    """What Ctrl-C during a Spark command prints: how far it got (`done`, English, said here)."""
    return f"grouplab {command}: {say(f'interrupted after {done}; Spark stopped' if done else 'interrupted; Spark stopped')}"


class SparkInterrupt:
    """Ctrl-C during a Spark command: one line saying what was done, Spark stopped quietly, exit 130.

    A KeyboardInterrupt raised in the driver's main thread would land inside a Py4J call (pages of
    Py4J errors), and only once that call returns (a long job: never). So SIGINT raises nothing here:
    the C-level handler writes to a wakeup pipe, and a watcher thread does the stopping at once."""

    def __init__(self, command: str, done: Any) -> None:
        self.command, self.done = command, done
        self.spark: Any = None
        self.fired = False

    def __enter__(self) -> "SparkInterrupt":
        import threading

        # PySpark's SparkContext installs a SIGINT handler of its own (cancel the jobs, raise in the
        # main thread): while this block runs it finds a `signal` module that leaves SIGINT alone.
        spark_context: Any
        try:
            from pyspark.core import context as spark_context
        except ImportError:  # pragma: no cover - older PySpark layout
            spark_context = None
        self._spark_context = spark_context
        if spark_context is not None:
            spark_context.signal = _KeepSigint()
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self._old_handler = signal.signal(signal.SIGINT, lambda *_: None)
        self._old_wakeup = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        threading.Thread(target=self._watch, name="grouplab-ctrl-c", daemon=True).start()
        return self

    def started(self, spark: Any) -> Any:
        """The session is up: take SIGINT back from PySpark, whose handler raises in the main thread."""
        self.spark = spark
        signal.signal(signal.SIGINT, lambda *_: None)
        return spark

    def __exit__(self, *exc: Any) -> None:
        if self.fired:  # the main thread failed or finished while the watcher stops Spark: it exits, 130
            import time

            time.sleep(5)
            os._exit(130)
        if self._spark_context is not None:
            self._spark_context.signal = signal
        signal.set_wakeup_fd(self._old_wakeup)
        signal.signal(signal.SIGINT, self._old_handler)
        os.write(self._write, b"\0")  # ends the watcher

    def _watch(self) -> None:
        while True:
            got = os.read(self._read, 1)
            if not got or got == b"\0":
                os.close(self._read)
                os.close(self._write)
                return
            if got[0] == signal.SIGINT:
                self.fired = True
                break
        import logging
        import threading

        # From now on nothing else reaches the user: Py4J's logger and this process's stderr are silenced.
        logging.getLogger("py4j").setLevel(logging.CRITICAL + 1)
        sys.stderr.flush()
        user_stderr = os.dup(2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        try:
            done = self.done()
        except Exception:
            done = ""
        line = interrupted_line(self.command, done) + "\n"
        try:
            sys.stdout.flush()
        except Exception:
            pass
        os.write(user_stderr, line.encode())
        if self.spark is not None:
            stopper = threading.Thread(target=self._stop_spark, daemon=True)
            stopper.start()
            stopper.join(1.0)
        os._exit(130)  # the JVM follows: it exits when its stdin, a pipe from this process, closes

    def _stop_spark(self) -> None:
        try:
            self.spark.sparkContext.cancelAllJobs()
            self.spark.stop()
        except BaseException:
            pass


def parse_sizes(text: str) -> list[int]:
    """`10,100,1000` -> [10, 100, 1000]: member counts, each >= 1, duplicates dropped."""
    sizes: list[int] = []
    for item in parse_list(text):
        if not item.isdigit() or int(item) < 1:
            raise UsageError(f"--members takes member counts >= 1 like 10,100,1000; got {item!r}")
        if int(item) not in sizes:
            sizes.append(int(item))
    if not sizes:
        raise UsageError("no member counts given")
    return sizes


def output_dir(path: str) -> Path:
    """--out of the Spark commands: a directory the driver writes (the report) and the executors
    write (Parquet), so a filesystem path, created now, before Spark starts."""
    if "://" in path:
        raise UsageError(f"--out must be a filesystem path (on a cluster, a shared mount), not a URI: {path}")
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create --out {out}: {exc}") from None
    return out


def _sweep_eta(scenario: Any, members: int, cases: int, c: Catalog) -> str:
    """`about 20 min on 2 cores (one 1,000-member simulation took 2.4 s here)`: an upper-side guess,
    the largest size's time for every case, shared among this machine's cores."""
    import time as _time

    from grouplab.sim.runner import run_seed

    started = _time.monotonic()
    run_seed(scenario.with_members(members), 1)
    one = _time.monotonic() - started
    cores = os.cpu_count() or 1
    total = one * cases / cores
    when = c.t("sweep.eta.min", n=f"{total / 60:.0f}") if total >= 120 else c.t("sweep.eta.s", n=f"{total:.0f}")
    return c.t("sweep.eta", when=when, cores=cores, members=f"{members:,}", one=f"{one:.1f}")


def cmd_sweep(args: argparse.Namespace) -> int:
    """Arguments and display only; the job is grouplab/pipeline/sweep.py."""
    require("spark", "sweep")
    from grouplab.progress import ProgressReport

    from grouplab.pipeline.session import SparkUnavailable, parse_conf, spark_session
    from grouplab.sim.runner import parse_seeds
    from grouplab.sim.scenario import load_scenario, resolve_scenario

    check_lang(args.lang)
    c = Catalog(args.lang)
    seeds = parse_seeds(args.seeds)
    assignors = list(dict.fromkeys(check_assignors(parse_list(args.assignors))))
    if not assignors:
        raise UsageError("no assignors given")
    if args.seeds_per_task < 1:
        raise UsageError("--seeds-per-task must be >= 1")
    path = resolve_scenario(args.scenario)
    scenario = load_scenario(path)  # a broken scenario fails here, before Spark starts
    sizes = parse_sizes(args.members) if args.members else [scenario.member_count]
    conf = parse_conf(args.conf)
    out = output_dir(args.out)
    tasks = [0, 0]
    cases = len(assignors) * len(sizes) * len(seeds)
    # Its size before Spark starts (which takes a while): what was asked for, and a guess at how
    # long, from one simulation of the largest size timed here.
    err.print(c.t("sweep.start", scenario=scenario.name, assignors=", ".join(assignors), sizes=", ".join(map(str, sizes)),
                  seeds=len(seeds), cases=f"{cases:,}", eta=_sweep_eta(scenario, max(sizes), cases, c)), soft_wrap=True)

    def done() -> str:
        return f"{tasks[0]:,} of {tasks[1]:,} Spark tasks" if tasks[1] else "starting Spark"  # said by interrupted_line

    with SparkInterrupt("sweep", done) as interrupt:
        try:
            spark = interrupt.started(spark_session(args.master, conf, app_name=f"grouplab sweep {scenario.name}"))
        except SparkUnavailable as exc:
            raise CliError(exc) from None
        from grouplab.pipeline.sweep import run_sweep

        err.print(c.t("sweep.spark_started", master=spark.sparkContext.master), soft_wrap=True)
        with ProgressReport(err, c.t("sweep.progress.tasks"), c=c) as progress:

            def advanced(finished: int, total: int) -> None:
                tasks[:] = [finished, total]
                progress.update(completed=finished, total=total)

            result = run_sweep(spark, path.read_text(), scenario.name, args.scenario, assignors, sizes, seeds,
                               out, args.seeds_per_task, on_progress=advanced, lang=args.lang)
    console.print(_sweep_table(scenario.name, result.summary, c))
    for v in result.violations[:args.show_violations]:
        case = c.t("sweep.case", assignor=v["assignor"], members=v["members"], seed=v["seed"])
        console.print(f"[red]{case}: {v['violation']}[/] "
                      f"{(v['violation_detail'] or '').splitlines()[0] if v['violation_detail'] else ''}")
    if len(result.violations) > args.show_violations:
        console.print(f"[red]{c.t('sweep.more_cases', count=len(result.violations) - args.show_violations)}[/]")
    console.print(c.t("sweep.done", cases=f"{result.cases:,}", tasks=f"{result.tasks:,}", s=f"{result.elapsed_s:.1f}",
                      seeds=result.seeds_path, summary=result.summary_path, report=result.report_path))
    return 1 if result.violations else 0


def _sweep_table(name: str, summary: list[dict[str, Any]], c: Catalog | None = None) -> Any:
    """The summary, narrow enough for 80 columns (events and totals are in the report)."""
    from rich import box
    from rich.table import Table

    def num(value: Any) -> str:
        if value is None:
            return "-"
        return f"{value:.0f}" if isinstance(value, float) and abs(value) >= 100 else (
            f"{value:.1f}" if isinstance(value, float) else str(value))

    c = c or Catalog()
    table = Table(title=c.t("sweep.table.title", name=name), title_justify="left", header_style="bold",
                  box=box.SIMPLE_HEAD, padding=(0, 0), show_edge=False)
    table.add_column(c.t("sweep.col.assignor"), no_wrap=True)
    for key in ("members", "seeds", "rebalances", "moved", "unowned", "imbalance", "p50", "p99", "violations"):
        table.add_column(c.t(f"sweep.table.col.{key}"), justify="right")
    for r in summary:
        imbalance = f"{num(r['imbalance_mean'])}/{num(r['imbalance_max'])}"
        violations = f"[red bold]{r['violations']}[/]" if r["violations"] else "0"
        table.add_row(r["assignor"], str(r["members"]), str(r["seeds"]), num(r["rebalances_per_seed"]),
                      num(r["partitions_moved_per_seed"]), num(r["unowned_partition_s_per_seed"]), imbalance,
                      num(r["rebalance_p50_ms"]), num(r["rebalance_p99_ms"]), violations)
    return table


# ----------------------------------------------------------------------------- analyze (Spark)


def cmd_analyze(args: argparse.Namespace) -> int:
    """Arguments and display only; the job is grouplab/pipeline/analyze.py, the page report.py."""
    require("spark", "analyze")  # before grouplab.pipeline.tables, which imports pyspark
    from grouplab.progress import ProgressReport

    from grouplab.pipeline.session import SparkUnavailable, parse_conf, spark_session
    from grouplab.pipeline.tables import NoEventLogs, input_files, run_labels

    check_lang(args.lang)
    c = Catalog(args.lang)
    if args.lang != "en":  # the report's charts need a CJK font: refuse before Spark's work, not after
        from grouplab.plot import PlotFontError, cjk_font

        try:
            cjk_font()
        except PlotFontError as exc:
            raise CliError(exc) from None
    try:  # a missing directory or one without logs is a usage error, before Spark starts
        input_files(args.run_dirs)
    except NoEventLogs as exc:
        raise UsageError(str(exc)) from None
    conf = parse_conf(args.conf)
    out = output_dir(args.out)
    written_tables: list[str] = []

    def done() -> str:
        return f"writing {len(written_tables)} table(s): {', '.join(written_tables)}" if written_tables else ""

    with SparkInterrupt("analyze", done) as interrupt:
        try:
            spark = interrupt.started(spark_session(args.master, conf, app_name="grouplab analyze"))
        except SparkUnavailable as exc:
            raise CliError(exc) from None
        from grouplab.pipeline.analyze import TABLES, analyze
        from grouplab.pipeline.report import write_report

        labels = run_labels(args.run_dirs)
        err.print(c.t("analyze.started", count=len(labels), runs=", ".join(labels.values()),
                      master=spark.sparkContext.master))
        with ProgressReport(err, c.t("analyze.progress.reading"), total=len(TABLES) + args.events_table + 1,
                            unit=c.t("progress.unit.tables"), c=c) as progress:

            def written(name: str, rows: int) -> None:
                written_tables.append(name)
                progress.update(advance=1, description=c.t("analyze.progress.wrote", name=name, rows=f"{rows:,}"))

            result = analyze(spark, args.run_dirs, out, on_table=written, events_table=args.events_table)
            progress.update(description=c.t("analyze.progress.report"))
            report = write_report(spark, out, lang=args.lang)
            progress.update(advance=1)
    console.print(_runs_table(result.runs, c))
    malformed = sum(r["malformed_lines"] or 0 for r in result.runs)
    if malformed:
        console.print(f"[yellow]{c.t('analyze.malformed_skipped', count=f'{malformed:,}', dir=out / 'malformed')}[/]")
        for ex in result.malformed_examples[:3]:
            console.print(f"  [dim]{ex['run']}/{ex['file']}:[/] {ex['line'][:120]!r}", markup=True, highlight=False)
    console.print(c.t("analyze.done", tables=", ".join(f"{name} ({rows:,})" for name, rows in result.rows.items()),
                      out=out, report=report))
    return 0


def _runs_table(runs: list[dict[str, Any]], c: Catalog | None = None) -> Any:
    from rich import box
    from rich.table import Table

    c = c or Catalog()
    table = Table(title=c.t("analyze.table.title"), title_justify="left", header_style="bold", box=box.SIMPLE_HEAD,
                  show_edge=False)
    # "log lines", not "events": `grouplab simulate` counts every simulator event (timers and
    # messages too), which is more than the lines its nodes log.
    for key in ("run", "lines", "bad", "rebalances", "moved", "unowned", "idle", "p50", "p99", "delivery"):
        table.add_column(c.t(f"analyze.table.col.{key}"), justify="left" if key in ("run", "delivery") else "right")
    for r in runs:
        delivery = "-" if not r.get("delivery_mode") else c.t("analyze.table.delivery", mode=r["delivery_mode"],
                                                              lost=r["lost"], dup=r["duplicated"])
        table.add_row(r["run"], f"{r['events']:,}", str(r["malformed_lines"]), str(r["rebalances"]),
                      str(r["partitions_moved"]),
                      "-" if r["unowned_partition_ms"] is None else f"{r['unowned_partition_ms'] / 1000:,.1f}",
                      "-" if r.get("assigned_not_consumed_ms") is None else f"{r['assigned_not_consumed_ms'] / 1000:,.1f}",
                      "-" if r["rebalance_p50_ms"] is None else str(r["rebalance_p50_ms"]),
                      "-" if r["rebalance_p99_ms"] is None else str(r["rebalance_p99_ms"]), delivery)
    return table


# ----------------------------------------------------------------------------- main


FAULTS_HELP = """\
fault SPEC (--faults, repeatable): API:ACTION[:ARG][:OPTION=VALUE...]
  API      JoinGroup, SyncGroup, Heartbeat, LeaveGroup, Metadata, ... or * (every API)
           FindCoordinator: real Kafka clients' only (needs --kafka-port; no error action)
  ACTION   drop[:P]           never forward it (with probability P, default 1)
           delay:MS|MIN-MAX   forward it MS (or uniformly MIN..MAX) ms later, in order
           duplicate          forward it twice
           error:CODE         answer it with this Kafka error code (number or name) instead
           reorder[:WAIT_MS]  send it after the next frame on the same connection
           disconnect         never forward it and reset its connection; the client reconnects
  OPTION   p=P  dir=request|response|both (default request)  link=CLIENT-ID-GLOB  limit=N
examples:
  --faults Heartbeat:drop:0.2   --faults JoinGroup:delay:200-500   --faults SyncGroup:duplicate
  --faults '*:delay:50'         --faults Heartbeat:error:27        --faults Heartbeat:error:27:link=consumer-2:limit=1
  --faults Heartbeat:disconnect:link=consumer-2:limit=1
"""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every option's help ends with its default, unless it has none or says it already."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (not action.option_strings or action.default is None or action.default is False
                or action.default == [] or action.default == argparse.SUPPRESS
                or "default" in text or isinstance(action, (argparse._HelpAction, argparse._VersionAction))):
            return text
        return f"{text}{say(' (default: %(default)s)')}"

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        """Epilogs laid out by hand keep their lines; a one-line description is wrapped."""
        if "\n" in text.strip():
            return super()._fill_text(text, width, indent)
        if has_wide(text):
            return "\n".join(indent + line for line in wrap_cells(text, width - len(indent)))
        return argparse.HelpFormatter._fill_text(self, text, width, indent)

    def _split_lines(self, text: str, width: int) -> list[str]:
        return wrap_cells(text, width) if has_wide(text) else super()._split_lines(text, width)

    def add_usage(self, usage: str | None, actions: Any, groups: Any, prefix: str | None = None) -> None:
        super().add_usage(usage, actions, groups, say("usage: ") if prefix is None else prefix)


class Parser(argparse.ArgumentParser):
    """argparse with grouplab's help layout and one-line usage errors (exit 2)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        err.print(f"{self.prog}: {say(' '.join(message.split()))}{say(f' (see {self.prog} --help)')}", style="red",
                  markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)


def port_or_off(text: str) -> int | None:
    """--kafka-port: a port, or `off` for no Kafka-wire listener."""
    return None if text == "off" else port_number(text)


def port_number(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"a port is a number from 0 to 65535, not {text!r}")
    return int(text)


MAX_BROKERS = 16  # a cluster in one process: more brokers teach nothing more, and each takes two ports


def broker_count(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_BROKERS:
        raise argparse.ArgumentTypeError(f"--brokers takes a number of brokers from 1 to {MAX_BROKERS}, not {text!r}")
    return int(text)


def at_least(low: int) -> Any:
    def check(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be {low} or more, got {value}")
        return value
    check.__name__ = "int"
    return check


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {text!r}")
    return value


SIMULATE_EPILOG = """\
"events" in the summary counts every event the simulator handled (messages, timers, faults), not
lines of the event log: `grouplab analyze` of the same run counts log lines, which are fewer.
"""

EXIT_CODES = """\
exit codes: 0 done · 1 failed (an invariant broke, a server could not be reached or started, an
unknown group) · 2 a mistake in the command line · 130 interrupted (Ctrl-C)
"""


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="grouplab", description="Kafka consumer-group rebalancing, emulated, over real sockets.",
               epilog=EXIT_CODES)
    p.add_argument("--version", action="version", version=f"grouplab {version()}", help="print the version and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add_broker_config(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--config", action="append", metavar="NAME=VALUE",
                        help=f"broker config override with Kafka's name (repeatable); known: {', '.join(BrokerConfig.names())}")
        sp.add_argument("--config-file", metavar="FILE", help="a server.properties-style file of overrides")

    def add_bootstrap(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--bootstrap-server", default="127.0.0.1:9192", metavar="HOST:PORT",
                        help="the coordinator to talk to")

    def add_group_protocol(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--group-protocol", choices=["classic", "consumer"], default="classic",
                        help="group.protocol: classic (JoinGroup/SyncGroup, client-side assignors) or consumer "
                             "(KIP-848: ConsumerGroupHeartbeat, the coordinator assigns)")
        sp.add_argument("--group-remote-assignor", choices=["uniform", "range"],
                        help="group.remote.assignor: with --group-protocol consumer, the server-side assignor to ask "
                             "for (default: the coordinator's choice, its group.consumer.assignors)")

    def add_cluster_options(sp: argparse.ArgumentParser) -> None:
        """The local cluster's options, shared by `run` and `ui`."""
        sp.add_argument("--consumers", type=at_least(0), default=3,
                        help="consumers to start (run: 0 only with --forever: a coordinator for consumers started "
                             "elsewhere)")
        sp.add_argument("--topics", default="t0:3,t1:3", help="TOPIC:PARTITIONS,... to create")
        sp.add_argument("--assignor", help=f"preference list of {', '.join(assignor_names())} "
                                           "(partition.assignment.strategy; default: range; classic protocol only)")
        add_group_protocol(sp)
        sp.add_argument("--group", default="grouplab", help="the consumers' group.id")
        sp.add_argument("--port", type=port_number, default=0, help="coordinator port (0: any free port)")
        sp.add_argument("--brokers", type=broker_count, default=1, metavar="N",
                        help="a cluster of N brokers (docs/protocol.md §12): the consumers bootstrap on all of them "
                             "and follow their group's coordinator")
        sp.add_argument("--kafka-port", type=port_or_off, default=None, metavar="PORT",
                        help="also listen for real Kafka clients on PORT (Kafka's own protocol, docs/kafka-wire.md; "
                             "0: any free port); they can join the group beside grouplab's consumers")
        sp.add_argument("--run-dir", help="write the JSON event log, one file per node, into this directory")
        sp.add_argument("--data-dir", metavar="DIR",
                        help="keep group and topic metadata in DIR/group-metadata.log across restarts")
        sp.add_argument("--consumer-config", action="append", default=[], metavar="NAME=VALUE",
                        help="consumer config override with Kafka's name (repeatable)")
        sp.add_argument("--faults", action="append", default=[], metavar="SPEC",
                        help="inject a fault through a proxy between consumers and coordinator (repeatable); "
                             "SPEC is API:ACTION[:ARG][:OPTION=VALUE...], see below and docs/faults.md")
        sp.add_argument("--fault-seed", type=int, metavar="N", help="seed of the fault proxy's randomness (a repeatable run)")
        add_broker_config(sp)

    def add_ui_options(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--ui-port", type=port_number, metavar="PORT",
                        help=f"the dashboard's port on 127.0.0.1 (default: {DEFAULT_UI_PORT}; 0: any free port, printed)")
        sp.add_argument("--open", action="store_true", help="open the dashboard in the default web browser")
        sp.add_argument("--lang", default=default_lang(), help="language of everything it shows (lines, tables, the dashboard): "
                                                     "en or zh")

    r = sub.add_parser("run", help="a coordinator plus N simulated consumers, showing each rebalance live",
                       epilog=FAULTS_HELP)
    add_cluster_options(r)
    r.add_argument("--hold", type=seconds, default=2.0, help="seconds to keep processing between steps")
    r.add_argument("--timeout", type=seconds, default=120.0, help="seconds to wait for each rebalance")
    r.add_argument("--delivery", choices=["at-most-once", "at-least-once", "exactly-once"],
                   help="consumers read the first --topics topic, write each record to <topic>-out and commit "
                        "in this mode; an account of lost and duplicated records is printed at the end")
    r.add_argument("--records", type=at_least(1), help="with --delivery: input records per partition (default: 1000)")
    r.add_argument("--processing-ms", type=at_least(0),
                   help="with --delivery: time spent on each fetched batch (default: 20)")
    r.add_argument("--crash", action="store_true", help="stop the consumer by crashing it (no LeaveGroup, no commit)")
    r.add_argument("--kill-coordinator", action="store_true",
                   help="with --brokers: first kill the group's coordinator broker, watch the group move to the "
                        "new coordinator, then restart it and hand the group back")
    r.add_argument("--forever", action="store_true", help="skip the stop/add script; run until Ctrl-C")
    r.add_argument("--ui", action="store_true", help="also serve the live dashboard (grouplab ui) while the run goes on")
    add_ui_options(r)
    r.add_argument("--protocol", choices=["coordinator", "zk"], default="coordinator",
                   help="coordinator: today's group coordinator; zk: the ZooKeeper-era consumers, each computing "
                        "the assignment from a registry (docs/legacy.md)")
    r.add_argument("--zookeeper", metavar="HOST:PORT",
                   help="with --protocol zk: a real ZooKeeper (zookeeper.connect); without it, the embedded registry")
    r.add_argument("--streams", type=at_least(1), metavar="N",
                   help="with --protocol zk: streams (consumer threads) per topic for every consumer (default: 1)")

    u = sub.add_parser("ui", help="a coordinator plus N simulated consumers and a live dashboard in the browser, "
                                  "with buttons to kill, hang, slow down or cut off members (docs/ui.md)",
                       epilog=FAULTS_HELP)
    add_cluster_options(u)
    add_ui_options(u)

    c = sub.add_parser("coordinator", help="run the coordinator server alone")
    c.add_argument("--host", default="127.0.0.1", help="address to listen on")
    c.add_argument("--port", type=port_number, default=9192,
                   help="port of grouplab's msgpack protocol, for grouplab's own clients (0: any free port)")
    c.add_argument("--kafka-port", type=port_or_off, default=9092, metavar="PORT",
                   help="port of Kafka's own protocol, for real Kafka clients (kafka-python, aiokafka, librdkafka, "
                        "Java; docs/kafka-wire.md); 0: any free port, off: none")
    c.add_argument("--run-dir", help="write the JSON event log to RUN_DIR/coordinator.jsonl and the message trace "
                   "to RUN_DIR/trace/coordinator.jsonl (grouplab replay, explain)")
    c.add_argument("--log-json", action="store_true",
                   help="print the JSON event log to stderr instead of the human view of each rebalance")
    c.add_argument("--lang", default=default_lang(), help="language of the human view: en or zh")
    c.add_argument("--data-dir", metavar="DIR", help="keep group and topic metadata in DIR/group-metadata.log and the "
                                      "partition logs in DIR/logs/: a restarted coordinator recovers its groups, topics "
                                      "and records (without it nothing is kept)")
    c.add_argument("--brokers", type=broker_count, default=1, metavar="N",
                   help="run a cluster of N brokers (node ids 0..N-1) in this process, each with its own ports "
                        "(PORT+n and KAFKA_PORT+n; any free ones with 0), sharing one store: a group's coordinator is "
                        "the broker Kafka would place it on; type `kill N`, `restart N`, `elect` or `status` on the "
                        "terminal (docs/protocol.md §12)")
    add_broker_config(c)

    k = sub.add_parser("consumer", help="run one simulated consumer against a coordinator")
    add_bootstrap(k)
    k.add_argument("--group", required=True, help="group.id to join")
    k.add_argument("--topics", required=True, help="TOPIC,TOPIC,... to subscribe to")
    k.add_argument("--assignor", help="partition.assignment.strategy, preference order (default: range; classic "
                                      "protocol only)")
    add_group_protocol(k)
    k.add_argument("--client-id", default="consumer", help="client.id")
    k.add_argument("--group-instance-id", help="static membership (group.instance.id)")
    k.add_argument("--run-dir", help="write the event log to RUN_DIR/<client-id>.jsonl")
    k.add_argument("--log-json", action="store_true", help="also print the JSON event log to stderr")
    k.add_argument("--lang", default=default_lang(), help="language of the consumer's explanations: en or zh")
    k.add_argument("--consumer-config", action="append", default=[], metavar="NAME=VALUE",
                   help="consumer config override with Kafka's name (repeatable)")

    d = sub.add_parser("describe", help="describe groups (members, generation, state, protocol, assignments, "
                                        "committed offsets, log end offsets and lag)")
    add_bootstrap(d)
    d.add_argument("--group", action="append", help="group to describe (repeatable)")
    d.add_argument("--all-groups", action="store_true", help="describe every group the coordinator has")
    d.add_argument("--format", choices=["table", "json"], default="table", help="output format")
    d.add_argument("--lang", default=default_lang(), help="language of the tables' words: en or zh (JSON keys stay English)")

    x = sub.add_parser("delete", help="delete Empty groups and their committed offsets, like kafka-consumer-groups "
                                      "--delete (a group with members is refused); with --topic, delete some "
                                      "offsets of one group, like --delete-offsets")
    add_bootstrap(x)
    x.add_argument("--group", action="append", help="group to delete (repeatable)")
    x.add_argument("--all-groups", action="store_true", help="delete every group the coordinator has (those with "
                                                             "members are refused and reported)")
    x.add_argument("--topic", action="append", metavar="TOPIC[:P,P...]",
                   help="delete the group's committed offsets of this topic (every partition), or of these "
                        "partitions, instead of the group (repeatable; one --group; refused for a topic its "
                        "members consume)")
    x.add_argument("--lang", default=default_lang(), help="language of the result lines: en or zh")

    t = sub.add_parser("topics", help="create topics, add partitions, delete topics, list topics")
    tsub = t.add_subparsers(dest="action", required=True, metavar="ACTION")
    tc = tsub.add_parser("create", help="create a topic")
    tc.add_argument("topic", help="topic name")
    tc.add_argument("--partitions", type=at_least(1), default=1, help="partition count")
    add_bootstrap(tc)
    tc.add_argument("--lang", default=default_lang(), help="language of the result line: en or zh")
    ta = tsub.add_parser("add-partitions", help="raise a topic's partition count to --partitions (the new total)")
    ta.add_argument("topic", help="topic name")
    ta.add_argument("--partitions", type=at_least(1), required=True, help="the new total partition count")
    add_bootstrap(ta)
    ta.add_argument("--lang", default=default_lang(), help="language of the result line: en or zh")
    td = tsub.add_parser("delete", help="delete topics: their partitions' records, and every group's committed "
                                        "offsets of them (like kafka-topics --delete)")
    td.add_argument("topic", nargs="+", help="topic name (one or more)")
    add_bootstrap(td)
    td.add_argument("--lang", default=default_lang(), help="language of the result lines: en or zh")
    tl = tsub.add_parser("list", help="list topics with their partition counts")
    add_bootstrap(tl)
    tl.add_argument("--lang", default=default_lang(), help="language of the result lines: en or zh (the list itself is names "
                                                 "and numbers)")

    cf = sub.add_parser("configs", help="describe the broker's or a topic's configs: values and their sources "
                                        "(like kafka-configs --describe --all)")
    which = cf.add_mutually_exclusive_group()
    which.add_argument("--topic", help="describe this topic's configs")
    which.add_argument("--broker", type=int, help="describe this broker's configs (default: the coordinator's, "
                                                  "broker.id)")
    cf.add_argument("--format", choices=["table", "json"], default="table",
                    help="output format (json adds read-only, sensitive and documentation)")
    add_bootstrap(cf)
    cf.add_argument("--lang", default=default_lang(), help="language of the table's title and header: en or zh "
                                                 "(JSON stays as it is)")

    s = sub.add_parser("simulate", help="deterministic simulation of a fault scenario (virtual time, seeded)",
                       epilog=SIMULATE_EPILOG)
    s.add_argument("--scenario", required=True,
                   help="a scenario TOML file or a built-in name, e.g. crash-storm (grouplab/scenarios/crash-storm.toml); "
                        "with --protocol zk, e.g. herd (grouplab/scenarios/zk/herd.toml)")
    s.add_argument("--protocol", choices=["coordinator", "zk"], default="coordinator",
                   help="zk: a ZooKeeper-era scenario in its simulator (docs/legacy.md §5)")
    s.add_argument("--seed", type=int, help="run one seed and print its timeline (default: 1)")
    s.add_argument("--seeds", help="run many seeds: 1-500 or 1-10,42; reports every failing seed")
    s.add_argument("--run-dir", help="write the run's JSON event log here (one file per node), with --seed")
    s.add_argument("--members", type=at_least(1), help="resize the scenario to this many members")
    s.add_argument("--assignor", help="use this assignor preference list for every member (with the consumer "
                                      "protocol: the server-side assignor they ask for, uniform or range)")
    s.add_argument("--group-protocol", choices=["classic", "consumer"],
                   help="run every member on this group.protocol (consumer: KIP-848; the scenario's session and "
                        "heartbeat settings become the broker's group.consumer.*; default: the scenario's own)")
    s.add_argument("--summary-json", metavar="OUT", help="write per-seed and total metrics as JSON")
    s.add_argument("--timeline-rows", type=at_least(0), default=60, help="timeline rows to print (0: all)")
    s.add_argument("--trace-lines", type=at_least(0), default=20, help="steps shown before a violation")
    s.add_argument("--lang", default=default_lang(), help="language of the timeline, the summary and the failing seeds' "
                                                "reports: en or zh")

    cp = sub.add_parser("compare", help="the same membership changes under the ZooKeeper era, the classic protocol "
                                        "(eager and cooperative) and KIP-848, side by side (docs/legacy.md §7)",
                        description="N consumers join, one leaves, one crashes, partitions are added, one joins: "
                                    "under each design, in the simulators (deterministic: a seed gives the same "
                                    "tables) or over real sockets (--real). Per change: requests to the coordinator "
                                    "vs registry operations, time to a settled assignment, partition-seconds "
                                    "without a consumer, rebalances per consumer, failed claims.")
    cp.add_argument("--designs", default="zk,eager,cooperative,consumer", metavar="LIST",
                    help="which designs, of zk (the ZooKeeper era), eager (classic, range), cooperative (classic, "
                         "cooperative-sticky), consumer (KIP-848, uniform); default: all four")
    cp.add_argument("--consumers", type=at_least(3), default=5, help="consumers that join first")
    cp.add_argument("--topics", default="t0:6,t1:6", help="TOPIC:PARTITIONS,... every consumer reads")
    cp.add_argument("--add", metavar="TOPIC:TOTAL", help="the partitions added: TOPIC's new count "
                                                         "(default: the first topic's + 2)")
    cp.add_argument("--seed", type=int, help="the simulators' seed (default: 1)")
    cp.add_argument("--session-timeout-ms", type=at_least(1), default=10_000, metavar="MS",
                    help="the coordinator designs' session timeout (classic session.timeout.ms, KIP-848 "
                         "group.consumer.session.timeout.ms)")
    cp.add_argument("--zk-session-timeout-ms", type=at_least(1), default=10_000, metavar="MS",
                    help="the ZooKeeper era's zookeeper.session.timeout.ms")
    cp.add_argument("--metadata-refresh", choices=["on-change", "max-age"], default="on-change",
                    help="when a classic group's leader sees added partitions: on-change (default, fair: when they "
                         "are made, as the ZooKeeper era's watch and KIP-848's coordinator do) or max-age (at its "
                         "next metadata refresh, every --metadata-max-age-ms, as Kafka's client does; the wait is "
                         "shown on its own line)")
    cp.add_argument("--metadata-max-age-ms", type=at_least(1), default=300_000, metavar="MS",
                    help="metadata.max.age.ms: with --metadata-refresh max-age, how soon a classic group's leader "
                         "sees new partitions")
    cp.add_argument("--gap-ms", type=at_least(0), default=30_000, metavar="MS",
                    help="simulators: quiet time after each change, beyond the timeouts it must wait for")
    cp.add_argument("--group", default="grouplab", help="group.id of both groups")
    cp.add_argument("--real", action="store_true", help="run over real sockets instead: a local coordinator, and "
                                                        "the embedded registry or --zookeeper")
    cp.add_argument("--zookeeper", metavar="HOST:PORT", help="with --real: a real ZooKeeper instead of the embedded registry")
    cp.add_argument("--timeout", type=seconds, help="with --real: seconds each change may take to settle (default: "
                                                    "120, or metadata.max.age.ms + 60 s if longer)")
    cp.add_argument("--hold", type=seconds, help="with --real: seconds between a change settling and the next "
                                                 "(default: 1)")
    cp.add_argument("--scale", metavar="N,N,...", help="instead of the per-change tables, the whole script's totals "
                                                      "at each of these group sizes, e.g. 10,50,100 (simulated): "
                                                      "registry reads / requests, time to settle, claim conflicts")
    cp.add_argument("--format", choices=["table", "json"], default="table", help="output format")
    cp.add_argument("--lang", default=default_lang(), help="language of the tables and the conclusion: en or zh")

    w = sub.add_parser("sweep", help="many simulations as Spark tasks: assignors × member counts × seeds, "
                                     "compared in Parquet tables and an HTML report (docs/pipeline.md)")
    w.add_argument("--scenario", required=True, help="a scenario TOML file or a built-in name, e.g. crash-storm")
    w.add_argument("--assignors", default=",".join(assignor_names()),
                   help="comma list of assignors to compare (default: all of them)")
    w.add_argument("--members", help="comma list of member counts, e.g. 10,100,1000 (default: the scenario's)")
    w.add_argument("--seeds", default="1-100", help="1-1000 or 1-10,42")
    w.add_argument("--out", required=True, metavar="DIR", help="writes DIR/seeds/, DIR/summary/ (Parquet), DIR/report.html")
    w.add_argument("--master", help="Spark master URL (default: $GROUPLAB_SPARK_MASTER or local[*])")
    w.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark setting (repeatable)")
    w.add_argument("--seeds-per-task", type=int, default=1, metavar="N",
                   help="simulations per Spark task (default 1: best balance; more: less task overhead)")
    w.add_argument("--show-violations", type=at_least(0), default=10, metavar="N",
                   help="failed cases to print (all are in the report)")
    w.add_argument("--lang", default=default_lang(), help="language of the table, the lines and the HTML report: en or zh")

    y = sub.add_parser("analyze", help="event logs of runs -> Parquet tables and an HTML report, on Spark (docs/pipeline.md)")
    y.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories (grouplab run/simulate --run-dir)")
    y.add_argument("--out", required=True, metavar="DIR", help="writes DIR/<table>/ (Parquet) and DIR/report.html")
    y.add_argument("--master", help="Spark master URL (default: $GROUPLAB_SPARK_MASTER or local[*])")
    y.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark setting (repeatable)")
    y.add_argument("--events-table", action="store_true", help="also write every parsed event as the `events` table")
    y.add_argument("--lang", default=default_lang(), help="language of the table, the lines and the HTML report: en or zh")

    rp = sub.add_parser("replay", help="run the coordinator's state machine again over a run's message trace "
                        "and check that it answers the same (docs/events.md §7)")
    rp.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (grouplab run/simulate/coordinator --run-dir)")
    rp.add_argument("--lang", default=default_lang(), help="language of the verdict: en or zh")

    ex = sub.add_parser("explain", help="tell a run message by message: who sent what, what the coordinator "
                        "decided and why (docs/explain.md)")
    ex.add_argument("target", metavar="RUN_DIR|SCENARIO|LESSON", nargs="?",
                    help="a run directory (run/simulate/coordinator --run-dir), or a scenario or lesson to simulate")
    ex.add_argument("--seed", type=int, help="the seed to simulate a SCENARIO with (default 1; a lesson's own)")
    ex.add_argument("--lang", default=default_lang(), help="language of the explanations: en or zh")
    ex.add_argument("--lessons", action="store_true", help="list the built-in lessons (as `grouplab lessons`)")
    ex.add_argument("--lesson", metavar="LESSON", help="a built-in lesson to tell (the same as giving its name)")
    ex.add_argument("--format", choices=["text", "markdown", "mermaid"], default="text",
                    help="text for the terminal, markdown for a page to hand out, mermaid for a sequence diagram")
    ex.add_argument("--out", metavar="FILE", help="write markdown or mermaid here instead of stdout")
    ex.add_argument("--step", action="store_true", help="wait for Enter after each step")
    ex.add_argument("--from", dest="from_s", type=float, metavar="S", help="start S seconds into the run")
    ex.add_argument("--to", dest="to_s", type=float, metavar="S", help="stop S seconds into the run")
    ex.add_argument("--generation", type=int, metavar="N",
                    help="only the rebalance that formed generation N and that generation's life")
    ex.add_argument("--all", action="store_true", help="also tell routine messages (heartbeats, commits) one by one")

    ls = sub.add_parser("lessons", help="list the built-in lessons: `grouplab explain LESSON` tells one (docs/explain.md)")
    ls.add_argument("--lang", default=default_lang(), help="language of the titles: en or zh")

    pl = sub.add_parser("plot", help="draw a run's partition ownership over time: rebalances, faults and the time "
                                     "partitions were assigned but not consumed (no Spark)")
    pl.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (grouplab run/simulate --run-dir)")
    pl.add_argument("--out", required=True, metavar="FILE", help="timeline.png or timeline.svg (the format is the extension)")
    pl.add_argument("--group", help="the consumer group to draw (default: the run's group with the most partitions)")
    pl.add_argument("--title", help="the chart's title (default: the run directory's name and the group)")
    pl.add_argument("--lang", default=default_lang(), help="language of the chart's title, legend and axis: en or zh "
                                                 "(zh needs a CJK font, e.g. Debian's fonts-wqy-microhei)")

    a = sub.add_parser("assign", help="compute an assignment without any server (a calculator)")
    a.add_argument("--assignor", required=True,
                   help=f"one of {', '.join(assignor_names())}; with --protocol consumer: uniform or range")
    a.add_argument("--protocol", choices=["classic", "consumer"], default="classic",
                   help="classic: a client-side assignor run by the group leader; consumer: a KIP-848 "
                        "server-side assignor run by the coordinator (--owned is each member's current "
                        "target assignment; --member NAME= subscribes to nothing)")
    a.add_argument("--topics", required=True, help="TOPIC:PARTITIONS,...")
    a.add_argument("--member", action="append", default=[], metavar="NAME=TOPIC[,TOPIC]",
                   help="a member and its subscription (repeatable, at least one; NAME= with --protocol consumer "
                        "for a member subscribed to nothing)")
    a.add_argument("--owned", action="append", metavar="NAME=T:P[,T:P]", help="previous ownership (sticky assignors)")
    a.add_argument("--format", choices=["table", "json"], default="table", help="output format")
    a.add_argument("--streams", type=at_least(1), metavar="N",
                   help="the ZooKeeper-era consumer: N streams (threads) per topic for every member, assigned over "
                        "thread ids <member>-<n> with the old range or roundrobin; a member's TOPIC:STREAMS "
                        "overrides it (docs/legacy.md)")
    a.add_argument("--lang", default=default_lang(), help="language of the table and the lines under it: en or zh "
                                                "(JSON stays as it is)")
    return p


_ASYNC = {"run": cmd_run, "ui": cmd_ui, "coordinator": cmd_coordinator, "consumer": cmd_consumer, "describe": cmd_describe,
          "delete": cmd_delete, "topics": cmd_topics, "configs": cmd_configs}


def _run_async(coro_fn: Any, args: argparse.Namespace) -> int:
    """Run a command; Ctrl-C (SIGINT/SIGTERM) cancels it so its cleanup runs and it exits cleanly."""
    async def main() -> int:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        assert task is not None
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        try:
            return await coro_fn(args)
        except asyncio.CancelledError:
            return 130

    return asyncio.run(main())


def _command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)parser of the command given, so that its errors name it and its --help."""
    names = [args.command] + ([args.action] if getattr(args, "action", None) else [])
    for name in names:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or name not in subs[0].choices:
            break
        parser = subs[0].choices[name]
    return parser


_WRITES_RUN_DIR = ("run", "ui", "coordinator", "consumer", "simulate")  # (replay, plot: RUN_DIR is read)


def check_run_dir(path: str) -> None:
    """A --run-dir that cannot be written fails here, named as such, before anything starts (it
    used to surface later as a port or a bare errno)."""
    where = Path(path)
    if where.exists() and not where.is_dir():
        raise CliError(f"cannot use --run-dir {path}: it is a file, not a directory")
    try:
        where.mkdir(parents=True, exist_ok=True)
        probe = where / ".grouplab-write-check"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise CliError(f"cannot use --run-dir {path}: {exc.strerror or exc}") from None


def _spelling_hint(command: argparse.ArgumentParser, extra: list[str]) -> str:
    """One port vocabulary, as Kafka's tools have it: a server listens on --port, a client reaches
    one with --bootstrap-server HOST:PORT. The other spelling gets a hint naming the right one."""
    options = {o for action in command._actions for o in action.option_strings}  # noqa: SLF001
    given = [e.split("=", 1)[0] for e in extra]
    values = dict(zip(extra, [*extra[1:], ""]))
    if "--port" in given and "--bootstrap-server" in options:
        port = next((e.split("=", 1)[1] for e in extra if e.startswith("--port=")), values.get("--port", "PORT"))
        return (f"; a command that reaches a coordinator takes --bootstrap-server HOST:PORT "
                f"(servers listen on --port): --bootstrap-server 127.0.0.1:{port or 'PORT'}")
    if "--bootstrap-server" in given and "--port" in options:
        return "; this command starts the coordinator: it listens on --port PORT (clients take --bootstrap-server)"
    return ""


def main(argv: list[str] | None = None) -> int:
    global _LANG
    _LANG = lang_of(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    localize_parser(parser, _LANG)
    args, extra = parser.parse_known_args(argv)
    if extra:
        command = _command_parser(parser, args)
        command.error(f"unrecognized arguments: {' '.join(extra)}{_spelling_hint(command, extra)}")
    try:
        if args.command in _WRITES_RUN_DIR and args.run_dir:
            check_run_dir(args.run_dir)
        if args.command == "assign":
            return cmd_assign(args)
        if args.command == "simulate":
            return cmd_simulate(args)
        if args.command == "compare":
            return cmd_compare(args)
        if args.command == "sweep":
            return cmd_sweep(args)
        if args.command == "analyze":
            return cmd_analyze(args)
        if args.command == "replay":
            return cmd_replay(args)
        if args.command == "explain":
            return cmd_explain(args)
        if args.command == "lessons":
            return cmd_lessons(args)
        if args.command == "plot":
            return cmd_plot(args)
        return _run_async(_ASYNC[args.command], args)
    except KeyboardInterrupt:
        fail(args.command, "interrupted")
        return 130
    except MissingExtra as exc:  # like a missing Java for Spark: the environment, not the command line
        fail(None, exc)
        return 1
    except (UsageError, ConfigError, ConsumerConfigError, UnknownAssignor, ValueError, LogLockedError,
            FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
        fail(args.command, exc)
        return 2
    except CliError as exc:
        fail(args.command, exc)
        return 1
    except ConnectionError as exc:
        from grouplab.admin import NotGrouplab

        fail(args.command, exc if isinstance(exc, NotGrouplab) else
             f"cannot connect: {exc}; is `grouplab coordinator` running there? (--bootstrap-server)")
        return 1
    except TimeoutError:  # (asyncio's too) an admin request nobody answered in time
        fail(args.command, "no answer from the coordinator within 30 s: is it hung or overloaded? (--bootstrap-server)")
        return 1
    except Exception as exc:
        from grouplab.admin import AdminError

        if isinstance(exc, AdminError):
            fail(args.command, exc)
            return 1
        missing = extra_for(exc, args.command) if isinstance(exc, ModuleNotFoundError) else None
        if missing is not None:  # an extra's import that no require() guarded: still one line
            fail(None, missing)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
