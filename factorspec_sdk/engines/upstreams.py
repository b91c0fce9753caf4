"""A pool of OpenAI-compatible engine servers (vLLM, SGLang) behind one `CompletionEngine`.

Scaling out past one machine is what vLLM and SGLang already do: run several servers and
put a router in front. FactorSpec's front plans the masks (the relations live there) and
the servers run the forwards. This module owns the pool of servers ("upstreams"):

* **Routing with affinity.** A record is decoded on one upstream from its first request
  to its last (`UpstreamPool.lease`): each segment's prompt extends the previous one, so
  the upstream's prefix cache holds all of it, which is what sglang-router calls
  cache-aware routing. A new record goes to the healthy upstream with the fewest records
  in flight (then the fewest served, then the first listed).
* **Health.** A request that cannot connect, times out or gets a 5xx marks its upstream
  down (its last error is kept); a background thread re-probes down upstreams every
  ``probe_interval_s`` (``GET /v1/models``) and takes them back once they answer and still
  serve the same model. `UpstreamPool.health` is a snapshot: URL, up/down, records in
  flight, records served, requests answered, failures, last error.
* **No healthy upstream** is an `UpstreamsUnavailableError` naming every upstream and its
  last error.

What happens to a record whose upstream dies belongs to the code that runs records
(`factorspec_sdk.backends.upstreams` restarts it from its beginning on another upstream);
a lease only reports that its upstream failed (`UpstreamLease.failed`).

Every upstream must serve the same model with the same tokenizer: the masks are planned on
one local tokenizer (``tokenizer=``, a model folder), shared by all of them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from factorspec_sdk.engines.completion import (
    Completion,
    CompletionReply,
    ConstraintStyle,
    HFTokenizer,
)
from factorspec_sdk.engines.openai_server import OpenAIServerEngine, ServerKind, TokenizerSource
from factorspec_sdk.engines.protocol import ChatMessage
from factorspec_sdk.errors import EngineError, UpstreamsUnavailableError
from factorspec_sdk.tokens.vocab import TokenizerInfo

__all__ = ["UpstreamHealth", "UpstreamLease", "UpstreamPool", "is_upstream_failure", "v1_root"]

log = logging.getLogger("factorspec.upstreams")

_MAX_ERROR_CHARS = 500


def v1_root(url: str) -> str:
    """``url`` as an OpenAI API root: ``http://host:8000`` -> ``http://host:8000/v1``."""
    root = url.strip().rstrip("/")
    return root if root.endswith("/v1") else root + "/v1"


def is_upstream_failure(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it was raised from) says the server itself failed.

    A refused or dropped connection, a timeout and a 5xx answer are the server's failures;
    a 4xx answer is this request's own (another server would refuse it too).
    """
    import openai

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, (openai.APIConnectionError, openai.InternalServerError)):
            return True
        seen = seen.__cause__
    return False


@dataclass(frozen=True, slots=True)
class UpstreamHealth:
    """One upstream's state at one moment.

    Attributes:
        url: the upstream's API root.
        up: whether it takes records.
        in_flight: records decoding on it now.
        records: records it finished (its lease ended without it failing, after at least
            one request: a record the spec determines whole asks no upstream).
        requests: completion requests it answered.
        failures: times it was marked down.
        last_error: the error that last marked it down (None if none did).
    """

    url: str
    up: bool
    in_flight: int
    records: int
    requests: int
    failures: int
    last_error: str | None

    def as_dict(self) -> dict[str, str | bool | int | None]:
        """A JSON-ready dict (the server's ``/health`` lists these)."""
        return {
            "url": self.url,
            "up": self.up,
            "in_flight": self.in_flight,
            "records": self.records,
            "requests": self.requests,
            "failures": self.failures,
            "last_error": self.last_error,
        }


@dataclass(eq=False, slots=True)
class _Upstream:
    index: int
    url: str
    engine: OpenAIServerEngine | None = None
    up: bool = False
    in_flight: int = 0
    records: int = 0
    requests: int = 0
    failures: int = 0
    last_error: str | None = None


class UpstreamLease:
    """One record's upstream: a `CompletionEngine` that sends every request to it.

    Made by `UpstreamPool.lease`; valid until the ``with`` block ends.
    """

    def __init__(self, pool: UpstreamPool, upstream: _Upstream, engine: OpenAIServerEngine):
        self._pool = pool
        self._upstream = upstream
        self._engine = engine
        self.failed = False
        """Whether the upstream failed during this lease (it is then marked down)."""
        self.requests = 0
        """Completion requests sent through this lease."""

    @property
    def url(self) -> str:
        """The upstream's API root."""
        return self._upstream.url

    @property
    def name(self) -> str:
        """The upstream's engine name, e.g. ``"vllm-server"``."""
        return self._engine.name

    @property
    def tokenizer(self) -> TokenizerInfo:
        """The pool's vocabulary."""
        return self._pool.tokenizer

    @property
    def constraint_style(self) -> ConstraintStyle:
        """The pool's constraint style."""
        return self._pool.constraint_style

    def apply_chat_template(self, messages: Sequence[ChatMessage]) -> list[int]:
        """Token ids of ``messages`` with the model's chat template."""
        return self._pool.apply_chat_template(messages)

    def complete(self, requests: Sequence[Completion]) -> list[CompletionReply]:
        """Send the requests to this lease's upstream.

        Raises:
            EngineError: the request failed; when the upstream itself failed (or another
                record found it dead meanwhile) `failed` is set and it is marked down.
        """
        if not self._pool._is_up(self._upstream):
            self.failed = True
            raise EngineError(
                f"upstream {self.url} went down during the record: "
                f"{self._upstream.last_error or 'marked down'}"
            )
        self.requests += len(requests)
        try:
            replies = self._engine.complete(requests)
        except EngineError as exc:
            if is_upstream_failure(exc):
                self.failed = True
                self._pool._mark_down(self._upstream, exc)
            raise
        self._pool._answered(self._upstream, len(replies))
        return replies

    def close(self) -> None:
        """Nothing to free: the pool owns the upstream's client."""


class UpstreamPool:
    """A `CompletionEngine` over several OpenAI-compatible vLLM or SGLang servers.

    Args:
        urls: the servers, e.g. ``["http://10.0.0.1:8000", "http://10.0.0.2:8000/v1"]``
            (``/v1`` is added when missing).
        tokenizer: the model's tokenizer: a local folder, or a loaded `TokenizerSource`
            (default: the default model's folder, SmolLM2-135M-Instruct).
        model: the model id to request (default: the first reachable server's first model;
            every server must serve it).
        api_key: the servers' API key, if they need one.
        server: ``"vllm"``, ``"sglang"`` or ``"auto"`` (from ``/v1/models``).
        constraint: ``"tokens"`` or ``"regex"`` (default: the servers' preferred style).
        timeout: seconds per completion request before the upstream counts as failed.
        probe_interval_s: seconds between re-probes of down upstreams (None: only
            `probe` re-probes).
        probe_timeout_s: seconds a probe waits for ``/v1/models``.
        records_per_upstream: records decoded on one upstream at once (its HTTP
            connections; the front's record threads are sized from it, see `capacity`).

    Raises:
        ValueError: no URL, or a bad number.
        UpstreamsUnavailableError: no server answers (each one's error is named).
        EngineError: as `OpenAIServerEngine` for the tokenizer.
    """

    def __init__(
        self,
        urls: Sequence[str],
        *,
        tokenizer: str | Path | TokenizerSource | None = None,
        model: str | None = None,
        api_key: str | None = None,
        server: ServerKind | Literal["auto"] = "auto",
        constraint: ConstraintStyle | None = None,
        timeout: float = 600.0,
        probe_interval_s: float | None = 5.0,
        probe_timeout_s: float = 5.0,
        records_per_upstream: int = 8,
    ) -> None:
        roots = [v1_root(u) for u in urls if u.strip()]
        if not roots:
            raise ValueError("an upstream pool needs at least one server URL")
        if len(set(roots)) != len(roots):
            raise ValueError(f"an upstream is listed twice: {roots}")
        if records_per_upstream < 1:
            raise ValueError("records_per_upstream must be >= 1")
        if probe_interval_s is not None and probe_interval_s <= 0:
            raise ValueError("probe_interval_s must be > 0 (or None)")
        if tokenizer is None:
            from factorspec_sdk.engines.model_store import default_model_path

            tokenizer = default_model_path()
        self._tok: TokenizerSource = (
            HFTokenizer(tokenizer) if isinstance(tokenizer, (str, Path)) else tokenizer
        )
        self._model_path = getattr(self._tok, "folder", None)
        self._model = model
        self._api_key = api_key
        self._server: ServerKind | Literal["auto"] = server
        self._constraint = constraint
        self._timeout = timeout
        self._probe_timeout = probe_timeout_s
        self.records_per_upstream = records_per_upstream
        self._lock = threading.Lock()
        self._upstreams = [_Upstream(i, url) for i, url in enumerate(roots)]
        self._style: ConstraintStyle | None = None
        self._kind: ServerKind | None = None
        self._sticky: _Upstream | None = None
        self._closed = threading.Event()
        self._prober: threading.Thread | None = None
        connected = [self._connect(upstream) for upstream in self._upstreams]
        if not any(connected):
            raise self._unavailable("no upstream server answers")
        if probe_interval_s is not None:
            self._prober = threading.Thread(
                target=self._probe_loop,
                args=(probe_interval_s,),
                name="factorspec-upstream-probe",
                daemon=True,
            )
            self._prober.start()

    # ------------------------------------------------------------------ engine facts

    @property
    def name(self) -> str:
        """``"vllm-upstreams"`` or ``"sglang-upstreams"``."""
        return f"{self._kind}-upstreams"

    @property
    def model(self) -> str | None:
        """The model id requested from every upstream."""
        return self._model

    @property
    def model_path(self) -> str | None:
        """The local tokenizer folder (None for a tokenizer passed loaded)."""
        return None if self._model_path is None else str(self._model_path)

    @property
    def tokenizer(self) -> TokenizerInfo:
        """The model's vocabulary (the local tokenizer's)."""
        return self._tok.info

    @property
    def constraint_style(self) -> ConstraintStyle:
        """The constraint style every upstream is sent."""
        assert self._style is not None  # set by the constructor or it raised
        return self._style

    @property
    def urls(self) -> list[str]:
        """The upstreams' API roots, in the order given."""
        return [u.url for u in self._upstreams]

    @property
    def capacity(self) -> int:
        """Records the pool decodes at once: ``records_per_upstream`` times the upstreams."""
        return self.records_per_upstream * len(self._upstreams)

    def apply_chat_template(self, messages: Sequence[ChatMessage]) -> list[int]:
        """Token ids of ``messages`` with the model's chat template and generation prompt."""
        return self._tok.apply_chat_template(messages)

    # ------------------------------------------------------------------ routing

    @contextmanager
    def lease(self) -> Iterator[UpstreamLease]:
        """An upstream for one record: every request of the record goes to it.

        The healthy upstream with the fewest records in flight (then the fewest served,
        then the first listed) is chosen.

        Raises:
            UpstreamsUnavailableError: no upstream is up.
        """
        upstream, engine = self._acquire(sticky=False)
        lease = UpstreamLease(self, upstream, engine)
        try:
            yield lease
        finally:
            with self._lock:
                upstream.in_flight -= 1
                if not lease.failed and lease.requests:
                    upstream.records += 1

    def complete(self, requests: Sequence[Completion]) -> list[CompletionReply]:
        """Send one batch to one upstream (the one the previous batch went to while it is up).

        Without a lease, consecutive batches stay on one upstream, so a decoder that
        drives every record through this method keeps its records' prefixes in one cache;
        a failed upstream is marked down and the batch fails (records are restarted by
        `factorspec_sdk.backends.upstreams`, which leases an upstream per record).

        Raises:
            UpstreamsUnavailableError: no upstream is up.
            EngineError: the upstream failed.
        """
        upstream, engine = self._acquire(sticky=True)
        try:
            replies = engine.complete(requests)
            self._answered(upstream, len(replies))
            return replies
        except EngineError as exc:
            if is_upstream_failure(exc):
                self._mark_down(upstream, exc)
            raise
        finally:
            with self._lock:
                upstream.in_flight -= 1

    def _acquire(self, *, sticky: bool) -> tuple[_Upstream, OpenAIServerEngine]:
        with self._lock:
            ready = [u for u in self._upstreams if u.up and u.engine is not None]
            if not ready:
                raise self._unavailable("no upstream is healthy")
            if sticky and any(u is self._sticky for u in ready):
                chosen = self._sticky
            else:
                chosen = min(ready, key=lambda u: (u.in_flight, u.records, u.index))
            assert chosen is not None and chosen.engine is not None
            self._sticky = chosen
            chosen.in_flight += 1
            return chosen, chosen.engine

    # ------------------------------------------------------------------ health

    def _is_up(self, upstream: _Upstream) -> bool:
        """Whether ``upstream`` is marked up."""
        with self._lock:
            return upstream.up

    def _answered(self, upstream: _Upstream, requests: int) -> None:
        """Count ``requests`` answered by ``upstream``."""
        with self._lock:
            upstream.requests += requests

    def _mark_down(self, upstream: _Upstream, error: BaseException | str) -> None:
        """Take ``upstream`` out of routing until a probe finds it answering again."""
        message = str(error)[:_MAX_ERROR_CHARS]
        with self._lock:
            was_up = upstream.up
            upstream.up = False
            upstream.last_error = message
            if was_up:
                upstream.failures += 1
        if was_up:
            log.warning("upstream %s is down: %s", upstream.url, message)

    def health(self) -> list[UpstreamHealth]:
        """A snapshot of every upstream, in the order given."""
        with self._lock:
            return [
                UpstreamHealth(
                    u.url, u.up, u.in_flight, u.records, u.requests, u.failures, u.last_error
                )
                for u in self._upstreams
            ]

    def probe(self) -> list[UpstreamHealth]:
        """Probe every down upstream now (``GET /v1/models``); the answering come back up.

        An upstream that answers but serves another model, or another server family,
        stays down with that as its error.
        """
        for upstream in self._upstreams:
            if not self._is_up(upstream):
                self._connect(upstream)
        return self.health()

    def _probe_loop(self, interval: float) -> None:
        while not self._closed.wait(interval):
            try:
                self.probe()
            except Exception:  # a probe must never end the prober
                log.exception("upstream probe failed")

    def _answers(self, url: str) -> tuple[str | None, list[str]]:
        """Probe ``url/models``: (None, the model ids served) or (why it failed, [])."""
        import httpx

        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        try:
            answer = httpx.get(url + "/models", timeout=self._probe_timeout, headers=headers)
        except httpx.HTTPError as exc:
            return f"probe of {url}/models failed: {exc!r}", []
        if answer.status_code != 200:
            return f"probe of {url}/models answered {answer.status_code}", []
        try:
            data = answer.json()["data"]
            return None, [str(m["id"]) for m in data]
        except (ValueError, KeyError, TypeError):
            return f"probe of {url}/models answered no model list", []

    def _connect(self, upstream: _Upstream) -> bool:
        """(Re)connect ``upstream``: probe it and check that it serves the pool's model.

        Its client is built the first time; later outages keep it (the HTTP client
        reconnects by itself, and records in flight may still hold it).

        Returns:
            Whether it is up now.
        """
        problem, served = self._answers(upstream.url)
        if problem is None and upstream.engine is not None:
            if self._model not in served:
                problem = f"{upstream.url} serves {served}, not the pool's {self._model!r}"
            else:
                with self._lock:
                    upstream.up = True
                log.warning("upstream %s is up again", upstream.url)
                return True
        engine: OpenAIServerEngine | None = None
        if problem is None:
            try:
                engine = OpenAIServerEngine(
                    upstream.url,
                    self._model,
                    api_key=self._api_key,
                    tokenizer=self._tok,
                    server=self._server if self._kind is None else self._kind,
                    constraint=self._constraint if self._style is None else self._style,
                    timeout=self._timeout,
                    max_concurrency=self.records_per_upstream,
                    max_retries=0,
                )
            except EngineError as exc:
                problem = exc.message
        if engine is not None:
            with self._lock:
                if self._style is None:  # the first upstream that answers sets the pool's
                    self._style = engine.constraint_style
                    self._kind = engine.dialect.kind
                    self._model = engine.model
                if engine.model != self._model or engine.constraint_style != self._style:
                    problem = (
                        f"{upstream.url} serves {engine.model!r} ({engine.name}); the pool "
                        f"serves {self._model!r} ({self._kind}-server)"
                    )
                else:
                    upstream.engine = engine
                    upstream.up = True
            if problem is not None:
                engine.close()
        if problem is not None:
            self._mark_down(upstream, problem)
            return False
        return True

    def _unavailable(self, why: str) -> UpstreamsUnavailableError:
        errors = {u.url: u.last_error for u in self._upstreams}
        listed = "; ".join(f"{url}: {err or 'down'}" for url, err in errors.items())
        return UpstreamsUnavailableError(f"{why} ({listed})", errors)

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Stop the prober and close every upstream's client."""
        self._closed.set()
        if self._prober is not None:
            self._prober.join(self._probe_timeout + 5)
        with self._lock:
            engines = [u.engine for u in self._upstreams if u.engine is not None]
            for u in self._upstreams:
                u.engine = None
                u.up = False
        for engine in engines:
            engine.close()

    def __enter__(self) -> UpstreamPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        states = ", ".join(f"{h.url} {'up' if h.up else 'down'}" for h in self.health())
        return f"UpstreamPool({states})"
