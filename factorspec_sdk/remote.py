"""`RemoteBackend`: generate typed, always-valid records on a `factorspec serve` server.

The model's relations never travel as code: the client compiles the spec locally for each
context and sends its relation IR (`factorspec_sdk.ir.to_ir`) in the ``factorspec``
extension field of an OpenAI chat completion request, made with the official ``openai``
package; the answer is parsed into the model and validated with
``Model.model_validate_json(text, context=...)``, the same relations run in Python.

```python
backend = RemoteBackend("http://127.0.0.1:8000")
results = backend.generate_batch(Itinerary, [prompt], contexts=[trip])
plan = results[0].value
```
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar, cast

from pydantic import BaseModel, ValidationError

from factorspec_sdk.client import GenerationResult, chat_messages
from factorspec_sdk.drafter.loop import GenerationStats
from factorspec_sdk.errors import (
    FactorSpecError,
    GenerationError,
    IncompleteGenerationError,
    SpecError,
    TokenBudgetError,
    UnsatisfiableSpecError,
)

if TYPE_CHECKING:
    from openai import OpenAI
    from openai.types.chat import ChatCompletionMessageParam
    from openai.types.shared_params import ResponseFormatJSONSchema

    from factorspec_sdk.engines.protocol import ChatMessage

__all__ = ["RemoteBackend", "RemoteError"]

T = TypeVar("T", bound=BaseModel)
Prompt = str | Sequence["ChatMessage"]


class RemoteError(GenerationError):
    """The server refused or failed a request (``status``: its HTTP status)."""

    code = "remote"

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RemoteBackend:
    """Generates records on a remote `factorspec serve` (or any server that reads the IR).

    Args:
        base_url: the server, e.g. ``http://127.0.0.1:8000`` (``/v1`` is added if missing).
        api_key: the server's API key, if it needs one.
        model: the model id to request (default: the first one ``/v1/models`` lists).
        timeout: seconds to wait for one answer.
        max_retries: retries of the openai client on 429 / connection errors.
        max_concurrency: requests in flight at once in `generate_batch` (the server batches
            them on its engine).
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
    ) -> None:
        from openai import OpenAI

        url = base_url.rstrip("/")
        if not url.endswith("/v1"):
            url += "/v1"
        self.base_url = url
        self.openai: OpenAI = OpenAI(
            base_url=url, api_key=api_key or "EMPTY", timeout=timeout, max_retries=max_retries
        )
        self._model = model
        self.max_concurrency = max_concurrency

    @property
    def model(self) -> str:
        """The model id requests name (asked from the server once if not given)."""
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

    @staticmethod
    def messages(
        prompt: Prompt, *, layout: object = None, system: str | None = None, hint: bool = True
    ) -> list[ChatMessage]:
        """The chat messages `Client` would build for ``prompt`` (same schema hint)."""
        from factorspec_sdk.relations.layout import ObjectLayout

        return chat_messages(
            prompt,
            system=system,
            layout=layout if isinstance(layout, ObjectLayout) else None,
            hint=hint,
        )

    def generate(
        self,
        model_cls: type[T],
        prompt: Prompt,
        *,
        context: object = None,
        system: str | None = None,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        max_tokens: int = 2048,
        speculative: bool | None = None,
        schema_in_prompt: bool = True,
    ) -> GenerationResult[T]:
        """One record (see `generate_batch`)."""
        del speculative  # the server's setting applies
        return self.generate_batch(
            model_cls,
            [prompt],
            contexts=[context],
            system=system,
            temperature=temperature,
            top_p=top_p,
            seed=seed,
            max_tokens=max_tokens,
            schema_in_prompt=schema_in_prompt,
        )[0]

    def generate_batch(
        self,
        model_cls: type[T],
        prompts: Sequence[Prompt],
        *,
        contexts: Sequence[object] | None = None,
        system: str | None = None,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        max_tokens: int = 2048,
        speculative: bool | None = None,
        schema_in_prompt: bool = True,
    ) -> list[GenerationResult[T]]:
        """Generate one record per prompt on the server, requests in flight concurrently.

        ``contexts[i]`` is the context of ``prompts[i]``; with a seed, request ``i`` samples
        with ``seed + i`` (as `Client.generate_batch`). Each result's ``value`` passes
        ``model_cls.model_validate(..., context=contexts[i])``.

        Raises:
            UnsatisfiableSpecError, SpecError, RelationDefinitionError, ContextError: the spec
                does not compile for a context (raised locally, before any request).
            TokenBudgetError: ``max_tokens`` is below the shortest record.
            IncompleteGenerationError: the server's request timeout ended the record.
            RemoteError: the server refused or failed a request.
        """
        del speculative
        if isinstance(prompts, str):
            raise TypeError("generate_batch takes a list of prompts; use generate for one")
        if contexts is None:
            contexts = [None] * len(prompts)
        if len(contexts) != len(prompts):
            raise ValueError(f"{len(prompts)} prompts but {len(contexts)} contexts")
        from factorspec_sdk.graph import compile_spec
        from factorspec_sdk.graph.spec import _LOCK
        from factorspec_sdk.ir import spec_to_ir

        bodies = []
        for i, (prompt, ctx) in enumerate(zip(prompts, contexts, strict=True)):
            with _LOCK:  # Z3's main context is not thread-safe
                spec = compile_spec(model_cls, ctx)
                ir = spec_to_ir(spec)
            messages = self.messages(
                prompt, layout=spec.layout, system=system, hint=schema_in_prompt
            )
            bodies.append((messages, ir, None if seed is None else seed + i))
        model_id = self.model

        def one(
            item: tuple[list[ChatMessage], dict[str, object], int | None], ctx: object
        ) -> GenerationResult[T]:
            messages, ir, s = item
            return self._request(
                model_cls, model_id, messages, ir, ctx, temperature, top_p, s, max_tokens
            )

        if len(bodies) == 1:
            return [one(bodies[0], contexts[0])]
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(bodies))) as pool:
            futures = [pool.submit(one, b, c) for b, c in zip(bodies, contexts, strict=True)]
            return [f.result() for f in futures]

    def _request(
        self,
        model_cls: type[T],
        model_id: str,
        messages: list[ChatMessage],
        ir: dict[str, object],
        context: object,
        temperature: float,
        top_p: float,
        seed: int | None,
        max_tokens: int,
    ) -> GenerationResult[T]:
        from openai import APIStatusError, OpenAIError

        response_format: ResponseFormatJSONSchema = {
            "type": "json_schema",
            "json_schema": {"name": model_cls.__name__, "schema": model_cls.model_json_schema()},
        }
        try:
            completion = self.openai.chat.completions.create(
                model=model_id,
                messages=cast("list[ChatCompletionMessageParam]", messages),
                temperature=temperature,
                top_p=top_p,
                seed=seed,
                max_tokens=max_tokens,
                response_format=response_format,
                extra_body={"factorspec": {"ir": ir}},
            )
        except APIStatusError as exc:
            raise _remote_error(exc, model_cls.__name__, max_tokens) from exc
        except OpenAIError as exc:
            raise RemoteError(f"request failed: {exc}") from exc
        choice = completion.choices[0]
        text = choice.message.content or ""
        extra = completion.model_extra or {}
        stats_raw = extra.get("factorspec")
        stats = _stats(stats_raw if isinstance(stats_raw, dict) else {}, completion.usage)
        token_ids = stats_raw.get("token_ids", []) if isinstance(stats_raw, dict) else []
        if choice.finish_reason == "length":
            raise IncompleteGenerationError(
                "the server stopped before the record was complete",
                partial_text=text,
                tokens=stats.tokens,
            )
        try:
            value = model_cls.model_validate_json(text, context=context)
        except ValidationError as exc:
            raise GenerationError(
                f"the server's record does not validate ({exc}); text: {text!r}"
            ) from exc
        return GenerationResult(value, text, [int(t) for t in token_ids], stats)


def _remote_error(exc: object, model: str, max_tokens: int) -> FactorSpecError:
    status = getattr(exc, "status_code", None)
    body = getattr(exc, "body", None)
    err = body.get("error", body) if isinstance(body, dict) else None
    message = str(err.get("message")) if isinstance(err, dict) else str(exc)
    if isinstance(err, dict) and err.get("code") == "unsatisfiable_spec":
        fs = err.get("factorspec")
        core = fs.get("unsat_core") if isinstance(fs, dict) else None
        if isinstance(core, list):
            return UnsatisfiableSpecError([str(c) for c in core], model)
    if isinstance(err, dict) and err.get("code") == "token_budget":
        fs = err.get("factorspec")
        need = fs.get("min_tokens") if isinstance(fs, dict) else None
        if isinstance(need, int):
            return TokenBudgetError(max_tokens=max_tokens, min_tokens=need)
    if status == 422 and not (
        isinstance(err, dict) and err.get("code") == "prompt_not_tokenizable"
    ):
        return SpecError(message)
    return RemoteError(f"the server answered {status}: {message}", status)


def _stats(raw: dict[str, object], usage: object) -> GenerationStats:
    def num(key: str) -> float:
        v = raw.get(key, 0)
        return float(v) if isinstance(v, (int, float)) else 0.0

    prompt_tokens = getattr(usage, "prompt_tokens", 0) or 0
    return GenerationStats(
        prompt_tokens=int(prompt_tokens),
        tokens=int(num("tokens")),
        verify_steps=int(num("verify_steps")),
        drafted=int(num("drafted")),
        certain_drafted=int(num("certain_drafted")),
        guesses_proposed=int(num("guesses_proposed")),
        guesses_accepted=int(num("guesses_accepted")),
        forward_seconds=num("forward_seconds"),
        plan_seconds=num("oracle_seconds"),
        critical_plan_seconds=num("critical_oracle_seconds"),
        wall_seconds=num("wall_seconds"),
    )


def _dumps(obj: object) -> str:  # pragma: no cover - debugging aid
    return json.dumps(obj, indent=2)
