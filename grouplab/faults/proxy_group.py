"""FaultProxies in front of a cluster's brokers, one each, used as one (grouplab.testing).

Each broker of a cluster has its own Kafka-wire listener, and a client connects to every broker
Metadata names. For every connection to go through a fault proxy, each broker gets one, and each
proxy rewrites the brokers an answer advertises to their proxies' addresses (`advertise`). A rule
is added to every proxy as one Rule object, so `limit` and `fired` count across the cluster (a
rule that drops one SyncGroup drops one, wherever it goes); link faults (isolate, disconnect,
heal, pause) apply at every proxy. With one broker this is one FaultProxy.
"""

from __future__ import annotations

from typing import Any, Iterable

from grouplab.faults.proxy import FaultProxy, Held
from grouplab.faults.rules import Rule, RuleSet


class ProxyGroup:
    """`proxies[node]` fronts broker `node`; the methods a test uses act on all of them."""

    def __init__(self, proxies: dict[int, FaultProxy]) -> None:
        if not proxies:
            raise ValueError("a proxy group needs at least one proxy")
        self.proxies = proxies
        self.advertise: dict[int, tuple[str, int]] = {}
        for proxy in proxies.values():
            proxy.advertise = self.advertise  # filled in as they listen (start)

    @property
    def first(self) -> FaultProxy:
        return self.proxies[min(self.proxies)]

    @property
    def host(self) -> str:
        return self.first.host

    @property
    def port(self) -> int:
        return self.first.port

    @property
    def rules(self) -> RuleSet:
        return self.first.rules  # every proxy holds the same rules

    async def start(self) -> "ProxyGroup":
        for node, proxy in self.proxies.items():
            await proxy.start()
            self.advertise[node] = (proxy.host, proxy.port)
        return self

    async def stop(self) -> None:
        for proxy in self.proxies.values():
            await proxy.stop()

    def add(self, rule: Rule) -> Rule:
        for proxy in self.proxies.values():
            proxy.add(rule)
        return rule

    def add_rule(self, api: str = "*", action: str = "drop", **kw: Any) -> Rule:
        rule = self.first.add_rule(api, action, **kw)
        for node, proxy in self.proxies.items():
            if proxy is not self.first:
                proxy.add(rule)
        return rule

    def remove(self, rule: Rule) -> None:
        for proxy in self.proxies.values():
            proxy.remove(rule)

    def clear(self) -> None:
        for proxy in self.proxies.values():
            proxy.clear()

    def held_frames(self, api: str | None = None, link: str = "*", direction: str | None = None) -> list[Held]:
        return [h for proxy in self.proxies.values() for h in proxy.held_frames(api, link, direction)]

    def release(self, api: str | None = None, link: str = "*", direction: str | None = None) -> int:
        return sum(proxy.release(api, link, direction) for proxy in self.proxies.values())

    def disconnect(self, links: str | Iterable[str] = "*") -> int:
        return sum(proxy.disconnect(links) for proxy in self.proxies.values())

    def partition(self, links: str | Iterable[str] = "*") -> None:
        for proxy in self.proxies.values():
            proxy.partition(links)

    def is_partitioned(self, client_id: str) -> bool:
        return self.first.is_partitioned(client_id)  # every proxy holds the same partitions

    @property
    def partition_dropped(self) -> int:
        return sum(proxy.partition_dropped for proxy in self.proxies.values())

    def isolate(self, links: str | Iterable[str]) -> int:
        return sum(proxy.isolate(links) for proxy in self.proxies.values())

    def heal(self, links: str | Iterable[str] | None = None) -> None:
        for proxy in self.proxies.values():
            proxy.heal(links)

    def pause(self) -> None:
        for proxy in self.proxies.values():
            proxy.pause()

    def resume(self) -> None:
        for proxy in self.proxies.values():
            proxy.resume()
