"""The four ways the tool-calling benchmark answers a BFCL case, and how an answer is scored.

Every method gets the same prompt (`make_task`): a system message of
`factorspec_sdk.tools.tools_prompt` (the case's functions as tools) before the case's own
system text if it has one, the question, and `factorspec_sdk.prompts.hint_sentence` of the
calls record appended to the last user message, exactly the messages
``Client.call(tools, question)`` sends for a plain question. They decode greedily with the
same token budget:

===========  ================================================================================
method       what it is
===========  ================================================================================
free         free generation; the first JSON object in the text is the answer
xgrammar     XGrammar's mask of the calls record's JSON schema, one token per forward
llguidance   llguidance's mask of the same schema, one token per forward
factorspec   ``Client.generate`` of the calls record (`factorspec_sdk.tools.calls_model`)
===========  ================================================================================

The JSON schema is ``calls_model(tools, max_calls).model_json_schema()``: the record
FactorSpec writes, closed (`closed_schema`: ``additionalProperties: false`` on every object
with properties, as OpenAI's strict mode asks; XGrammar's ``strict_mode`` assumes it, while
llguidance would otherwise let the model add keys of its own). ``max_calls`` is 1, or
`factorspec_sdk.tools.MAX_PARALLEL_CALLS` for the parallel categories. `score` checks an
answer against that schema (``jsonschema``) and runs BFCL's checker on its calls
(`factorspec_sdk.bench.tools.checker`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from factorspec_sdk.bench import baselines
from factorspec_sdk.bench.tools.checker import check_calls
from factorspec_sdk.bench.tools.convert import bfcl_calls, tool_of
from factorspec_sdk.bench.tools.data import BfclCase
from factorspec_sdk.bench.tools.names import parse_names
from factorspec_sdk.bench.tools.results import ToolRecord
from factorspec_sdk.engines.protocol import ChatMessage, Engine
from factorspec_sdk.tools import MAX_PARALLEL_CALLS, Tool, calls_model, tools_prompt

if TYPE_CHECKING:
    from pydantic import BaseModel

    from factorspec_sdk.bench.baselines import LLGuidanceBackend, XGrammarBackend
    from factorspec_sdk.client import Client

__all__ = [
    "METHODS",
    "Setup",
    "ToolTask",
    "closed_schema",
    "first_json_object",
    "make_task",
    "parse_methods",
    "run_method",
    "score",
]

METHODS: dict[str, str] = {
    "free": "free generation, first JSON object parsed",
    "xgrammar": "XGrammar JSON-schema mask, token by token",
    "llguidance": "llguidance JSON-schema mask, token by token",
    "factorspec": "FactorSpec Client.generate of the calls record",
}
"""Every method, in run order."""


def parse_methods(spec: str) -> list[str]:
    """Method names from a comma list (``all``: every one), in `METHODS` order.

    Raises:
        ValueError: an unknown name (the message lists the known ones).
    """
    return parse_names(spec, list(METHODS), "method")


@dataclass(slots=True)
class Setup:
    """What the methods share for one run: the engine, the budget, the mask backends."""

    engine: Engine
    max_tokens: int
    client: Client | None = None
    xgrammar: XGrammarBackend | None = None
    llguidance: LLGuidanceBackend | None = None

    def backend(self, method: str) -> baselines.MaskBackend:
        """The mask backend of ``xgrammar`` or ``llguidance`` (built on first use)."""
        if method == "xgrammar":
            if self.xgrammar is None:
                self.xgrammar = baselines.XGrammarBackend(self.engine.tokenizer)
            return self.xgrammar
        if self.llguidance is None:
            self.llguidance = baselines.LLGuidanceBackend(self.engine.tokenizer)
        return self.llguidance


@dataclass(slots=True)
class ToolTask:
    """One BFCL case as the methods see it."""

    case: BfclCase
    tools: list[Tool]
    model: type[BaseModel]
    schema: dict[str, Any]
    messages: list[ChatMessage]
    prompt_ids: list[int] = field(default_factory=list)


def closed_schema(schema: Any) -> Any:
    """A copy of ``schema`` with ``additionalProperties: false`` on every object with properties.

    Objects that already say something about additional properties keep it.
    """
    if isinstance(schema, list):
        return [closed_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: closed_schema(v) for k, v in schema.items()}
    if isinstance(schema.get("properties"), dict) and "additionalProperties" not in schema:
        out["additionalProperties"] = False
    return out


def make_task(case: BfclCase, engine: Engine) -> ToolTask:
    """The tools, calls record, schema and prompt of ``case`` (the same for every method).

    Raises:
        UnsupportedFunctionDoc: a function doc of the case cannot become a tool.
    """
    from factorspec_sdk.prompts import with_schema_hint
    from factorspec_sdk.relations.pydantic_layout import build_layout

    tools = [tool_of(doc) for doc in case.functions]
    n = MAX_PARALLEL_CALLS if case.parallel else 1
    model = calls_model(tools, n)
    listed = tools_prompt(tools, n)
    messages: list[ChatMessage] = [dict(m) for m in case.messages]
    if messages and messages[0]["role"] == "system":
        messages[0]["content"] = f"{listed}\n\n{messages[0]['content']}"
    else:
        messages.insert(0, {"role": "system", "content": listed})
    messages = with_schema_hint(messages, build_layout(model))
    ids = engine.apply_chat_template(messages)
    return ToolTask(case, tools, model, closed_schema(model.model_json_schema()), messages, ids)


def first_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (free generation's answer), or ``None``."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def score(record: ToolRecord, task: ToolTask) -> None:
    """Parse ``record.text``; check it against the schema and with BFCL's checker."""
    import jsonschema

    value = first_json_object(record.text)
    if value is None:
        record.error_type = record.error_type or "parse"
        return
    record.parsed = True
    record.schema_valid = jsonschema.Draft202012Validator(task.schema).is_valid(value)
    try:
        calls = bfcl_calls(value)
    except ValueError as exc:
        record.error_type = "format"
        record.error = str(exc)
        return
    verdict = check_calls(task.case, calls)
    record.ast_valid = verdict.valid
    record.error_type = verdict.error_type
    record.error = verdict.error


def _factorspec(record: ToolRecord, task: ToolTask, setup: Setup) -> None:
    if setup.client is None:
        from factorspec_sdk.client import Client

        setup.client = Client(setup.engine)
    result = setup.client.generate(  # task.messages carry the hint already
        task.model,
        task.messages,
        max_tokens=setup.max_tokens,
        schema_in_prompt=False,
        return_result=True,
    )
    stats = result.stats
    record.text = result.text
    record.tokens = stats.tokens
    record.forwards = stats.verify_steps
    record.stopped = "done"


def run_method(method: str, task: ToolTask, setup: Setup) -> ToolRecord:
    """``method``'s answer to ``task``, scored; a method that raises is an error record."""
    record = ToolRecord(method, task.case.id, task.case.category)
    started = time.perf_counter()
    try:
        if method == "factorspec":
            _factorspec(record, task, setup)
        else:
            if method == "free":
                run = baselines.decode_free(setup.engine, task.prompt_ids, setup.max_tokens)
            else:
                run = baselines.decode_syntax(
                    setup.engine,
                    setup.backend(method),
                    task.prompt_ids,
                    task.schema,
                    setup.max_tokens,
                )
            record.text = run.text
            record.tokens = len(run.tokens)
            record.forwards = run.forwards
            record.stopped = run.stopped
    except Exception as exc:  # a crashing method is an invalid answer with its message
        record.error_type = "error"
        record.error = f"{type(exc).__name__}: {exc}"[:300]
        record.stopped = "error"
    record.wall_seconds = time.perf_counter() - started
    if record.stopped != "error":
        score(record, task)
    return record
