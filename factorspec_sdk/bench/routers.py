"""The routers people run in front of vLLM and SGLang fleets, started from their PyPI wheels.

``with RouterProcess("vllm", ["http://127.0.0.1:8001", ...], policy="consistent_hash") as
router: ...`` starts ``vllm-router`` (or ``sglang-router launch``) on a free loopback port in
a child process, waits until its ``/health`` answers 200 (both routers check their workers'
``/health`` first), and stops it when the block ends. The benchmark of the two tiers
(`factorspec_sdk.bench.upstreams`) and the tests use it; the router's own options (retries,
health checks, circuit breaker) go in ``args``.

`prefix_cache` reads the prefix cache counters a vLLM server reports on ``/metrics``.

Wheels: ``pip install vllm-router sglang-router`` (Rust binaries inside; `make install` puts
vllm-router 0.1.17 and sglang-router 0.3.2 in the virtual environment).
"""

from __future__ import annotations

import re
import shutil
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from factorspec_sdk.server.process import ChildProcess, free_port

__all__ = [
    "ROUTER_POLICIES",
    "PrefixCache",
    "RouterKind",
    "RouterProcess",
    "prefix_cache",
    "router_binary",
]

RouterKind = Literal["vllm", "sglang"]

ROUTER_POLICIES: dict[RouterKind, tuple[str, ...]] = {
    "vllm": ("consistent_hash", "cache_aware", "round_robin", "power_of_two", "random"),
    "sglang": ("manual", "cache_aware", "round_robin", "power_of_two", "random"),
}
"""The policies each router takes (the first keeps a record on one server by its key)."""

_BINARIES: dict[RouterKind, tuple[str, tuple[str, ...], str]] = {
    # binary, arguments before the options, its name for the warning log level
    "vllm": ("vllm-router", (), "warning"),
    "sglang": ("sglang-router", ("launch",), "warn"),
}


def router_binary(kind: RouterKind) -> str | None:
    """The path of the router's binary: beside this interpreter, else on ``PATH``."""
    name = _BINARIES[kind][0]
    return shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)


class RouterProcess(ChildProcess):
    """vllm-router or sglang-router in a child process, on a free loopback port.

    Args:
        kind: ``"vllm"`` or ``"sglang"``.
        workers: the engine servers' root URLs (``http://host:port``; a trailing ``/v1``
            is dropped).
        policy: the routing policy (`ROUTER_POLICIES`).
        args: more router options, e.g. ``("--disable-retries",)``.
        start_timeout: seconds to wait for ``/health``.
        log: a file for the router's output (default: discarded).

    Raises:
        ValueError: a policy the router does not take, or no worker.
        RuntimeError: the router is not installed, exited, or was not healthy in time.
    """

    def __init__(
        self,
        kind: RouterKind,
        workers: Sequence[str],
        *,
        policy: str,
        args: Sequence[str] = (),
        start_timeout: float = 60.0,
        log: Path | None = None,
    ) -> None:
        if policy not in ROUTER_POLICIES[kind]:
            raise ValueError(f"{kind}-router takes no policy {policy!r}: {ROUTER_POLICIES[kind]}")
        if not workers:
            raise ValueError("a router needs at least one worker URL")
        self.kind = kind
        self.workers = [w.rstrip("/").removesuffix("/v1") for w in workers]
        self.policy = policy
        self.args = tuple(args)
        self.port = free_port()
        self.what = f"{kind}-router"
        super().__init__(start_timeout=start_timeout, log=log)

    @property
    def url(self) -> str:
        """The router's root URL, e.g. ``http://127.0.0.1:8123``."""
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """The router's command line."""
        name, sub, level = _BINARIES[self.kind]
        binary = router_binary(self.kind)
        if binary is None:
            raise RuntimeError(f"{name} is not installed: pip install {name}")
        return [
            binary, *sub,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--policy", self.policy,
            "--worker-urls", *self.workers,
            "--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port()),
            "--log-level", level,
            *self.args,
        ]  # fmt: skip


@dataclass(frozen=True, slots=True)
class PrefixCache:
    """A vLLM server's prefix cache counters (tokens).

    Attributes:
        queries: prompt tokens looked up in the cache.
        hits: of those, tokens found cached.
    """

    queries: float
    hits: float

    def __sub__(self, other: PrefixCache) -> PrefixCache:
        return PrefixCache(self.queries - other.queries, self.hits - other.hits)

    def __add__(self, other: PrefixCache) -> PrefixCache:
        return PrefixCache(self.queries + other.queries, self.hits + other.hits)

    @property
    def hit_rate(self) -> float:
        """Hits / queries (0 with no query)."""
        return self.hits / self.queries if self.queries else 0.0


_COUNTER = re.compile(r"^vllm:prefix_cache_(queries|hits)_total(?:\{[^}]*\})?\s+(\S+)$", re.M)


def prefix_cache(root: str, timeout: float = 30.0) -> PrefixCache:
    """The prefix cache counters on ``root/metrics`` (vLLM's names; summed over engines).

    Raises:
        RuntimeError: the server has no such counters.
    """
    with urllib.request.urlopen(root.removesuffix("/v1") + "/metrics", timeout=timeout) as r:
        text = r.read().decode()
    found = {"queries": 0.0, "hits": 0.0}
    seen = set()
    for name, value in _COUNTER.findall(text):
        found[name] += float(value)
        seen.add(name)
    if seen != {"queries", "hits"}:
        raise RuntimeError(f"{root}/metrics has no vllm:prefix_cache_queries/hits counters")
    return PrefixCache(found["queries"], found["hits"])
