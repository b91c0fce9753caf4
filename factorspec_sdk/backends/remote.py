"""`RemoteBackend`: records decoded on a ``factorspec serve`` server.

The model's relations never travel as code: the backend compiles the spec locally for each
context and sends its relation IR (`factorspec_sdk.ir.spec_to_ir`) in the ``factorspec``
extension field of an OpenAI chat completion request, made with the official ``openai``
package, with the chat messages a local engine would see (`factorspec_sdk.prompts`). The
client validates the answer with ``Model.model_validate_json(text, context=...)``, the same
relations run in Python.

The extension field also asks the server for the record's provenance (``"provenance":
true``; `factorspec_sdk.provenance`), which the answer's ``factorspec`` stats carry back, so
``result.provenance`` is what a local engine gives. The stats are the server's, with the
client's parts added: the spec's export, the chat messages, the wait for a connection, and
the network (each round trip less the server's wall time).

```python
client = Client(backend=RemoteBackend("http://127.0.0.1:8000"))
plan = client.generate(Itinerary, prompt, context=trip)
```

`WireSpec` (a model and context as a request carries them), `remote_error` (a server's
error answer as a FactorSpec error) and `check_finished` are the pieces other callers of a
FactorSpec server reuse (`factorspec_sdk.integrations.openai_compat`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel

from factorspec_sdk.backends.base import GenerationRequest, RecordOutcome
from factorspec_sdk.drafter.stats import GenerationStats, others
from factorspec_sdk.engines.openai_server import v1_root
from factorspec_sdk.errors import (
    FactorSpecError,
    GenerationTimeoutError,
    IncompleteGenerationError,
    RemoteError,
    SpecError,
    TokenBudgetError,
    UnsatisfiableSpecError,
)
from factorspec_sdk.partials import PartialSink, PartialText
from factorspec_sdk.prompts import chat_messages
from factorspec_sdk.provenance import Explain, received

if TYPE_CHECKING:
    from openai import OpenAI
    from openai.types.chat import ChatCompletionMessageParam
    from openai.types.shared_params import ResponseFormatJSONSchema

    from factorspec_sdk.engines.protocol import ChatMessage
    from factorspec_sdk.graph import CompiledSpec

__all__ = ["RemoteBackend", "WireSpec", "api_root", "check_finished", "remote_error"]


def api_root(base_url: str) -> str:
    """``base_url`` ending in ``/v1`` (added if missing), without a trailing slash."""
    return v1_root(base_url)


@dataclass(frozen=True, slots=True)
class WireSpec:
    """A model and its context as a request to a FactorSpec server carries them.

    Attributes:
        model: the Pydantic model class.
        spec: its spec compiled locally for the context (the layout, for prompt hints).
        ir: the relation IR of ``spec`` (the context folded in as constants).
    """

    model: type[BaseModel]
    spec: CompiledSpec
    ir: dict[str, object]

    @classmethod
    def build(
        cls, model: type[BaseModel], context: object = None, spec: CompiledSpec | None = None
    ) -> WireSpec:
        """Compile ``model`` for ``context`` (cached; or take ``spec``) and export its IR.

        Raises:
            SpecError: the model, its relations or the context cannot be compiled.
        """
        from factorspec_sdk.graph import compile_spec
        from factorspec_sdk.ir import spec_to_ir

        if spec is None:
            spec = compile_spec(model, context)
        return cls(model, spec, spec_to_ir(spec))

    def response_format(self) -> ResponseFormatJSONSchema:
        """The ``response_format`` of the request: the model's JSON schema."""
        return {
            "type": "json_schema",
            "json_schema": {"name": self.model.__name__, "schema": self.model.model_json_schema()},
        }

    def extra_body(self, extra: Mapping[str, object] | None = None) -> dict[str, object]:
        """``extra``, with the IR added to its ``factorspec`` extension field.

        The messages go as the client built them (with its schema hint, or as written):
        ``schema_in_prompt`` is false unless ``extra`` sets it.
        """
        body = dict(extra or {})
        ext = body.get("factorspec")
        if ext is not None and not isinstance(ext, Mapping):
            raise TypeError(f"extra_body['factorspec'] must be a mapping, not {type(ext)}")
        body["factorspec"] = {"schema_in_prompt": False, **(ext or {}), "ir": self.ir}
        return body


def check_finished(finish_reason: str | None, text: str, tokens: int) -> None:
    """Raise when the server's answer ended before the record was complete.

    ``factorspec serve`` answers a record cut short with an error (`remote_error`), never
    ``length``; a server that still sends its cut text as content is caught here.

    Raises:
        IncompleteGenerationError: ``finish_reason`` is ``length``.
    """
    if finish_reason == "length":
        raise IncompleteGenerationError(
            "the server stopped before the record was complete", partial_text=text, tokens=tokens
        )


class RemoteBackend:
    """Generates records on a remote ``factorspec serve`` (or any server that reads the IR).

    Args:
        base_url: the server, e.g. ``http://127.0.0.1:8000`` (``/v1`` is added if missing).
        api_key: the server's API key, if it needs one.
        model: the model id to request (default: the first one ``/v1/models`` lists).
        timeout: seconds to wait for one answer.
        max_retries: retries of the openai client on 429 / connection errors.
        max_concurrency: requests of one batch in flight at once (the server batches them
            on its engine).
        speculative: the drafting asked of the server for requests that set none (the
            extension field's ``speculative``); None: the server's setting.
        provenance: ask the server for each record's provenance (``result.provenance``;
            a few milliseconds of the server's oracle and a few kB per answer).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        model: str | None = None,
        *,
        timeout: float = 600.0,
        max_retries: int = 2,
        max_concurrency: int = 32,
        speculative: bool | None = None,
        provenance: bool = True,
    ) -> None:
        from openai import OpenAI

        self.base_url = api_root(base_url)
        self.openai: OpenAI = OpenAI(
            base_url=self.base_url,
            api_key=api_key or "EMPTY",
            timeout=timeout,
            max_retries=max_retries,
        )
        self._model = model
        self.max_concurrency = max_concurrency
        self.speculative = speculative
        self.provenance = provenance

    @property
    def name(self) -> str:
        """``"factorspec-server"``."""
        return "factorspec-server"

    @property
    def model(self) -> str:
        """The model id requests name (asked from the server once if not given).

        Raises:
            RemoteError: the server cannot be reached or lists no model.
        """
        if self._model is None:
            from openai import OpenAIError

            try:
                models = self.openai.models.list()
            except OpenAIError as exc:
                raise RemoteError(f"cannot list the server's models: {exc}") from exc
            if not models.data:
                raise RemoteError("the server lists no model")
            self._model = models.data[0].id
        return self._model

    def close(self) -> None:
        """Close the HTTP connections."""
        self.openai.close()

    def run(self, requests: Sequence[GenerationRequest]) -> list[RecordOutcome]:
        """Send every request, up to ``max_concurrency`` in flight; one outcome each.

        A request's spec is compiled locally first (a spec error is that request's outcome,
        no request is sent for it). A request's ``speculative`` (else the backend's) is sent
        in the extension field; with neither, the server's setting applies. Errors the
        server names come back as their class
        (`UnsatisfiableSpecError`, `TokenBudgetError`, `SpecError`); a record that ran out
        of tokens is an `IncompleteGenerationError`, of the server's time limit a
        `GenerationTimeoutError`; anything else a `RemoteError`.

        Each record's stats are the server's, with this backend's parts added: the spec's
        export and the chat messages, the wait for a free connection (``queue_seconds``),
        the round trip less the server's wall (``network_seconds``; listing the server's
        models too); the other records' preparation, and their requests after this one's
        answer, are its ``batch_seconds``.
        """
        started = time.perf_counter()
        outcomes: dict[int, RecordOutcome] = {}
        spent: list[dict[str, float]] = [{} for _ in requests]
        bodies: list[tuple[int, list[ChatMessage], WireSpec]] = []
        for i, request in enumerate(requests):
            t0 = time.perf_counter()
            try:
                wire = WireSpec.build(request.model, request.context, request.spec)
                t1 = time.perf_counter()
                messages = chat_messages(
                    request.prompt,
                    system=request.system,
                    layout=wire.spec.layout,
                    hint=request.schema_in_prompt,
                )
            except Exception as exc:
                outcomes[i] = RecordOutcome.failed(exc)
                spent[i]["spec_seconds"] = time.perf_counter() - t0
                continue
            spent[i] = {"spec_seconds": t1 - t0, "prompt_seconds": time.perf_counter() - t1}
            bodies.append((i, messages, wire))
        model_id = ""
        listing = 0.0
        if bodies:
            t0 = time.perf_counter()
            try:
                model_id = self.model
            except RemoteError as exc:
                for i, _, _ in bodies:
                    outcomes[i] = RecordOutcome.failed(exc)
                bodies = []
            listing = time.perf_counter() - t0
        sent = time.perf_counter()
        spans: dict[int, tuple[float, float]] = {}

        def one(body: tuple[int, list[ChatMessage], WireSpec]) -> RecordOutcome:
            i, messages, wire = body
            t0 = time.perf_counter()
            try:
                return self._request(requests[i], model_id, messages, wire)
            except Exception as exc:
                return RecordOutcome.failed(exc)
            finally:
                spans[i] = (t0, time.perf_counter())

        if len(bodies) == 1:
            outcomes[bodies[0][0]] = one(bodies[0])
        elif bodies:
            with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(bodies))) as pool:
                for (i, _, _), out in zip(bodies, pool.map(one, bodies), strict=True):
                    outcomes[i] = out
        answered = time.perf_counter()
        prepared = sum(sum(p.values()) for p in spent)
        for i in range(len(requests)):
            stats = outcomes[i].stats
            own = spent[i]
            stats.add(own)
            apart = others(prepared, sum(own.values()))
            if i in spans:
                t0, t1 = spans[i]
                server = stats.wall_seconds  # the server's wall (0 without an answer)
                stats.add(
                    {
                        "network_seconds": (t1 - t0 - server) + listing,
                        "queue_seconds": t0 - sent,
                        "batch_seconds": apart + (answered - t1),
                    }
                )
            else:  # never sent: it waited for the others' requests
                stats.add({"batch_seconds": apart + listing + (answered - sent)})
            stats.settle(time.perf_counter() - started)
        return [outcomes[i] for i in range(len(requests))]

    def _request(
        self,
        request: GenerationRequest,
        model_id: str,
        messages: list[ChatMessage],
        wire: WireSpec,
    ) -> RecordOutcome:
        from openai import APIError, APIStatusError, OpenAIError

        model_cls = request.model
        params = request.params
        speculative = self.speculative if request.speculative is None else request.speculative
        asked: dict[str, object] = {"provenance": True} if self.provenance else {}
        if speculative is not None:
            asked["speculative"] = speculative
        ext = {"factorspec": asked} if asked else {}
        body = {
            "model": model_id,
            "messages": cast("list[ChatCompletionMessageParam]", messages),
            "temperature": params.temperature,
            "top_p": params.top_p,
            "seed": params.seed,
            "max_tokens": params.max_tokens,
            "response_format": wire.response_format(),
            "extra_body": wire.extra_body(ext),
        }
        try:
            if request.on_partial is not None:
                return self._stream(request, body, request.on_partial)
            completion = self.openai.chat.completions.create(**body)  # type: ignore[call-overload]
        except APIStatusError as exc:
            raise remote_error(exc, model_cls.__name__, params.max_tokens) from exc
        except APIError as exc:
            if isinstance(exc.body, dict):  # the server's error event that ended a stream
                raise remote_error(exc, model_cls.__name__, params.max_tokens) from exc
            raise RemoteError(f"request failed: {exc}") from exc
        except OpenAIError as exc:
            raise RemoteError(f"request failed: {exc}") from exc
        choice = completion.choices[0]
        text = choice.message.content or ""
        extra = completion.model_extra or {}
        stats_raw = extra.get("factorspec")
        raw = stats_raw if isinstance(stats_raw, dict) else {}
        stats = _stats(raw, completion.usage)
        token_ids = raw.get("token_ids", [])
        check_finished(choice.finish_reason, text, stats.tokens)
        ids = [int(t) for t in token_ids] if isinstance(token_ids, list) else []
        return RecordOutcome(text, ids, stats, explain=_provenance(raw))

    def _stream(
        self, request: GenerationRequest, body: dict[str, Any], sink: PartialSink
    ) -> RecordOutcome:
        """``body`` sent with ``stream=True``: each delta's new view to ``sink``.

        The server streams the record's text ahead of its forwards by the certain tokens it
        knows; the views are of that text (see `factorspec_sdk.partials.PartialText`).
        """
        views = PartialText(request.model)
        first = views.feed("")
        if first is not None:
            sink(first)
        finish: str | None = None
        stats_raw: dict[str, object] = {}
        usage: object = None
        error: object = None
        stream = self.openai.chat.completions.create(
            **body, stream=True, stream_options={"include_usage": True}
        )
        with stream:
            for chunk in stream:
                extra = chunk.model_extra or {}
                if "error" in extra:  # an error the server sent as an event
                    error = extra["error"]
                raw = extra.get("factorspec")
                if isinstance(raw, dict):
                    stats_raw = raw
                if chunk.usage is not None:
                    usage = chunk.usage
                for choice in chunk.choices:
                    if choice.delta.content:
                        view = views.feed(choice.delta.content)
                        if view is not None:
                            sink(view)
                    if choice.finish_reason is not None:
                        finish = choice.finish_reason
        if error is not None:
            message = error.get("message") if isinstance(error, dict) else error
            raise RemoteError(f"the server ended the stream with an error: {message}")
        stats = _stats(stats_raw, usage)
        token_ids = stats_raw.get("token_ids", [])
        check_finished(finish, views.text, stats.tokens)
        ids = [int(t) for t in token_ids] if isinstance(token_ids, list) else []
        return RecordOutcome(views.text, ids, stats, explain=_provenance(stats_raw))


def remote_error(exc: object, model: str, max_tokens: int | None) -> FactorSpecError:
    """The FactorSpec error a server's error answer ``exc`` (an ``openai.APIStatusError``) means.

    An unsatisfiable spec (with its unsat core), a token budget below the shortest record
    (a `TokenBudgetError` when the request gave ``max_tokens``, else a `RemoteError` naming
    the server's default), a record that ran out of its budget (``max_tokens_reached``: an
    `IncompleteGenerationError` with its partial text) or of its time limit
    (``timeout_reached``: a `GenerationTimeoutError`), another 422 a `SpecError`, anything
    else a `RemoteError` with the server's status and message.
    """
    status = getattr(exc, "status_code", None)
    body = getattr(exc, "body", None)
    err = body.get("error", body) if isinstance(body, dict) else None
    message = str(err.get("message")) if isinstance(err, dict) else str(exc)
    if isinstance(err, dict) and err.get("code") == "unsatisfiable_spec":
        fs = err.get("factorspec")
        core = fs.get("unsat_core") if isinstance(fs, dict) else None
        if isinstance(core, list):
            return UnsatisfiableSpecError([str(c) for c in core], model)
    if isinstance(err, dict) and err.get("code") in ("max_tokens_reached", "timeout_reached"):
        fs = err.get("factorspec")
        fs = fs if isinstance(fs, dict) else {}
        partial, tokens, limit = fs.get("partial_text"), fs.get("tokens"), fs.get("timeout_s")
        text = partial if isinstance(partial, str) else ""
        count = tokens if isinstance(tokens, int) else 0
        if err.get("code") == "max_tokens_reached":
            return IncompleteGenerationError(
                "the server's token budget ran out before the record was complete",
                partial_text=text,
                tokens=count,
            )
        seconds = float(limit) if isinstance(limit, (int, float)) else None
        return GenerationTimeoutError(
            f"the server's time limit{'' if seconds is None else f' of {seconds:g} s'} ran "
            "out before the record was complete (start the server with a larger "
            '--request-timeout, or send extra_body={"factorspec": {"timeout_s": SECONDS}})',
            partial_text=text,
            tokens=count,
            timeout_s=seconds,
        )
    if isinstance(err, dict) and err.get("code") == "token_budget":
        fs = err.get("factorspec")
        need = fs.get("min_tokens") if isinstance(fs, dict) else None
        if isinstance(need, int) and max_tokens is not None:
            return TokenBudgetError(max_tokens=max_tokens, min_tokens=need)
        return RemoteError(f"the server answered {status}: {message}", status)  # its budget
    if status == 422 and not (
        isinstance(err, dict) and err.get("code") == "prompt_not_tokenizable"
    ):
        return SpecError(message)
    if status is None:  # no status: an error event ended a stream
        return RemoteError(f"the server ended the stream with an error: {message}")
    return RemoteError(f"the server answered {status}: {message}", status)


def _stats(raw: dict[str, object], usage: object) -> GenerationStats:
    """The server's stats (its ``factorspec`` field) and the prompt's tokens (``usage``)."""
    stats = GenerationStats.from_json(raw)
    prompt_tokens = getattr(usage, "prompt_tokens", 0) or 0
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", 0) or 0
    stats.prompt_tokens = int(prompt_tokens)
    stats.cached_prompt_tokens = int(cached)
    return stats


def _provenance(raw: dict[str, object]) -> Explain | None:
    """The provenance the server sent with the record (read on demand), if any."""
    data = raw.get("provenance")
    return received(data) if isinstance(data, dict) else None
