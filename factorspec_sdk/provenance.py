"""Where each part of a generated record came from: the model, the relations or the schema.

``result.provenance`` (a `Provenance`) says, for every leaf of the record and every variable
the relations read (``len(stays)``, ``null(note)``), whether

- the **model** chose it (two or more values were feasible when it was written),
- the **relations** determined it (the values written before it left one value that the
  schema alone would not force; with the relations that read it), or
- the **schema** forced it (one value by the schema's own bounds, or structure),

and counts the record's tokens by the same three origins. A token is ``model`` when the model
chose it among two or more allowed tokens; ``relations`` when it was the only allowed token
and lies in a value the relations determined; ``schema`` when it was the only allowed token
otherwise (keys, punctuation, a value the schema forces, and the rest of a value after the
model's first token of it made it certain).

It is computed from the record's tokens after the fact, by replaying the planner the record
was decoded with (its caches make that cheap) and asking the oracle, for each fact in the
order the writer wrote them, whether the facts before it left more than one value. So it is
the same with and without speculation, and for every engine with a local planner. A
``factorspec serve`` computes it the same way when a request asks for it, and sends it as
JSON data (`Provenance.to_json`), which `Provenance.from_json` reads back into the same
object. A backend hands the client an `Explain` for each record (`replayed` from its planner,
or `received` from a server's JSON): the provenance is computed once, when first asked for.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from factorspec_sdk.errors import GenerationError
from factorspec_sdk.relations.layout import (
    LayoutNode,
    LeafLayout,
    ListLayout,
    ObjectLayout,
    Path,
    UnionLayout,
    branch_part,
    path_name,
)

if TYPE_CHECKING:
    from pydantic import TypeAdapter

    from factorspec_sdk.tokens.plan import Planner

__all__ = [
    "ORIGINS",
    "Explain",
    "Origin",
    "Provenance",
    "Source",
    "provenance_of",
    "received",
    "replayed",
]

Origin = Literal["model", "relations", "schema"]
ORIGINS: tuple[Origin, ...] = ("model", "relations", "schema")

_Span = tuple[Path, int, int]
_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class Source:
    """Where one leaf (or relation variable) of a record came from.

    Attributes:
        name: the leaf's path as Python spells it (``stays[2].first_day``), or the
            variable's name (``len(stays)``, ``null(note)``).
        origin: ``model``, ``relations`` or ``schema``.
        relations: the relations that read it (for ``model``: those its choice must satisfy).
        tokens: the tokens of its value by origin (empty for a variable with no text).
        span: the character range of its value in the record's text (None for a variable).
    """

    name: str
    origin: Origin
    relations: tuple[str, ...] = ()
    tokens: Mapping[Origin, int] = field(default_factory=dict)
    span: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class Provenance:
    """The origins of a record's leaves and tokens.

    Attributes:
        sources: per leaf path (and per variable without a leaf), in the record's order.
        tokens: the record's tokens by origin (structure included).
        token_origins: the origin of each token of the record, in order.
        token_ends: where each token ends in the record's text (characters).
    """

    sources: Mapping[str, Source]
    tokens: Mapping[Origin, int]
    token_origins: tuple[Origin, ...]
    token_ends: tuple[int, ...]

    def pieces(self, text: str) -> list[tuple[str, Origin]]:
        """``text`` (the record's) cut where the origin of its tokens changes."""
        out: list[tuple[str, Origin]] = []
        start = 0
        for origin, end in zip(self.token_origins, self.token_ends, strict=True):
            if end <= start:
                continue  # a token inside a character another token finished
            if out and out[-1][1] == origin:
                out[-1] = (out[-1][0] + text[start:end], origin)
            else:
                out.append((text[start:end], origin))
            start = end
        return out

    def share(self, origin: Origin) -> float:
        """The share of the record's tokens of ``origin``."""
        total = sum(self.tokens.values())
        return self.tokens.get(origin, 0) / total if total else 0.0

    def of(self, origin: Origin) -> list[Source]:
        """The sources of ``origin``, in the record's order."""
        return [s for s in self.sources.values() if s.origin == origin]

    def summary(self) -> str:
        """One line: leaves and token shares per origin."""
        parts = [f"{o}: {len(self.of(o))} values, {self.share(o):.0%} of tokens" for o in ORIGINS]
        return "; ".join(parts)

    def to_json(self) -> dict[str, object]:
        """The provenance as JSON data (a server's answer carries it; `from_json` reads it)."""
        data: dict[str, object] = _adapter().dump_python(self, mode="json")
        return data

    @classmethod
    def from_json(cls, data: object) -> Provenance:
        """The provenance of `to_json`'s data.

        Raises:
            ValueError: ``data`` is not a provenance (a pydantic ``ValidationError``).
        """
        provenance: Provenance = _adapter().validate_python(data)
        return provenance


@cache
def _adapter() -> TypeAdapter[Any]:
    """Pydantic's reader and writer of `Provenance` (built on first use)."""
    from pydantic import TypeAdapter

    return TypeAdapter(Provenance)


Explain = Callable[[], Provenance]
"""Computes a record's provenance on first call and returns the same object after.

Raises `GenerationError` where the provenance cannot be told (a server's malformed
JSON, tokens that are no complete record of the planner's spec).
"""


def replayed(planner: Planner, tokens: list[int], max_tokens: int) -> Explain:
    """The provenance of a record decoded here: `provenance_of` the planner, once, on demand."""
    return _once(lambda: provenance_of(planner, tokens, max_tokens))


def received(data: Mapping[str, object]) -> Explain:
    """The provenance a server sent with a record (`Provenance.to_json`'s data), read on demand."""
    return _once(lambda: Provenance.from_json(data))


def _once(make: Callable[[], Provenance]) -> Explain:
    @cache
    def explained() -> Provenance:
        try:
            return make()
        except ValueError as exc:
            raise GenerationError(f"the record's provenance cannot be read: {exc}") from exc

    return explained


def provenance_of(planner: Planner, tokens: list[int], max_tokens: int) -> Provenance:
    """The provenance of a record decoded with ``planner`` into ``tokens``.

    Raises:
        ValueError: ``tokens`` are not a complete record of the planner's spec.
    """
    from factorspec_sdk.graph.compiled import AtLeast, AtMost  # Z3: only when explaining
    from factorspec_sdk.tokens.plan import Finished

    spec = planner.writer.spec
    oracle = planner.writer.oracle
    vocab = planner.tok.vocab
    cursor = planner.start()
    chosen: list[bool] = []
    ends: list[int] = []
    text = bytearray()
    for i, token in enumerate(tokens):
        chosen.append(planner.certain(cursor, max_tokens - i) is None)
        cursor = planner.advance(cursor, token, critical=False)
        text += vocab[token]
        ends.append(len(text))
    if not isinstance(cursor, Finished):
        raise ValueError("the tokens are not a complete record")
    # the origin of each fact, asked in the order the writer wrote them
    facts = cursor.state.assignment
    origins: dict[str, tuple[Origin, tuple[str, ...]]] = {}
    for k, (var, value) in enumerate(facts):
        if isinstance(value, AtLeast | AtMost) or var in origins:
            continue
        feasible = oracle.feasible_values(facts[:k], var, limit=1)
        reads = spec.relations_mentioning(var)
        if feasible is None or len(feasible) > 1:
            origins[var] = ("model", reads)
        elif _schema_forces(spec.variables.get(var)):
            origins[var] = ("schema", ())
        else:
            origins[var] = ("relations", reads)
    # leaves and their tokens
    sources: dict[str, Source] = {}
    by_token: list[Origin] = ["model" if c else "schema" for c in chosen]
    record = bytes(text)
    ends = [len(record[:e].decode("utf-8", errors="ignore")) for e in ends]  # in characters
    starts = [0, *ends[:-1]]
    for path, start, end in _leaf_spans(spec.layout, record.decode("utf-8")):
        name = path_name(path)
        leaf_var = spec.variable_for(path)
        counts: dict[Origin, int] = {}
        inside = [
            i for i in range(len(tokens)) if starts[i] < end and ends[i] > start
        ]  # tokens that overlap the value
        if leaf_var is not None and leaf_var in origins:
            origin, reads = origins.pop(leaf_var)
        else:
            origin = "model" if any(chosen[i] for i in inside) else "schema"
            reads = ()
        for i in inside:
            if origin == "relations" and not chosen[i]:
                by_token[i] = "relations"
            counts[by_token[i]] = counts.get(by_token[i], 0) + 1
        sources[name] = Source(name, origin, reads, counts, (start, end))
    for var, (origin, reads) in origins.items():  # lengths, null-ness, ...: no text of their own
        sources.setdefault(var, Source(var, origin, reads))
    totals: dict[Origin, int] = {}
    for o in by_token:
        totals[o] = totals.get(o, 0) + 1
    return Provenance(sources, totals, tuple(by_token), tuple(ends))


def _schema_forces(info: object) -> bool:
    """Whether the schema alone leaves a variable one value (a one-value enum, ``ge == le``)."""
    domain = getattr(info, "domain", None)
    if domain is not None:
        return len(domain) == 1
    ge, le = getattr(info, "ge", None), getattr(info, "le", None)
    return ge is not None and ge == le


def _leaf_spans(layout: LayoutNode, text: str) -> Iterator[tuple[Path, int, int]]:
    """Each leaf value of the record ``text`` with its layout path and character range."""
    end = yield from _value(layout, text, _skip(text, 0), ())
    if _skip(text, end) != len(text):
        raise ValueError("the text is more than one JSON value")


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _value(node: LayoutNode, text: str, i: int, path: Path) -> Generator[_Span, None, int]:
    """The leaves of the value at ``i`` (of layout ``node``); returns the index after it."""
    opening = text[i : i + 1]
    if isinstance(node, ObjectLayout) and opening == "{":
        fields = {f.key: f for f in node.fields}
        i = _skip(text, i + 1)
        while text[i : i + 1] not in ("}", ""):
            key, i = _string(text, i)
            i = _skip(text, _skip(text, i) + 1)  # past the colon
            f = fields.get(key)
            if f is None:  # a key no field has (the writer writes none): one span
                j = _end_of(text, i)
                yield (*path, key), i, j
                i = j
            else:
                i = yield from _value(f.node, text, i, (*path, f.name))
            i = _next_item(text, i)
        return i + 1
    if isinstance(node, ListLayout) and node.mapping and opening == "{":
        entry = node.item
        assert isinstance(entry, ObjectLayout)
        value_node = entry.field("value").node
        i = _skip(text, i + 1)
        k = 0
        while text[i : i + 1] not in ("}", ""):
            _, j = _string(text, i)
            yield (*path, k, "key"), i, j
            i = _skip(text, _skip(text, j) + 1)  # past the colon
            i = yield from _value(value_node, text, i, (*path, k, "value"))
            i = _next_item(text, i)
            k += 1
        return i + 1
    if isinstance(node, ListLayout) and opening == "[":
        i = _skip(text, i + 1)
        k = 0
        while text[i : i + 1] not in ("]", ""):
            i = yield from _value(node.item, text, i, (*path, k))
            i = _next_item(text, i)
            k += 1
        return i + 1
    j = _end_of(text, i)
    if isinstance(node, UnionLayout) and opening == "{":
        data = json.loads(text[i:j])
        for branch in node.branches:
            tag = branch.field(node.tag)
            assert isinstance(tag.node, LeafLayout)
            if isinstance(data, dict) and data.get(tag.key) == tag.node.choices[0]:
                return (yield from _value(branch, text, i, (*path, branch_part(branch.model))))
    yield path, i, j  # a scalar, null, a grammar value (floats, unions, ... no relation reads)
    return j


def _next_item(text: str, i: int) -> int:
    """Past the comma after an item, if any."""
    i = _skip(text, i)
    return _skip(text, i + 1) if text[i : i + 1] == "," else i


def _string(text: str, i: int) -> tuple[str, int]:
    """The JSON string at ``i`` and the index after it."""
    return _scanstring(text, i + 1)


def _end_of(text: str, i: int) -> int:
    """The index after the JSON value at ``i``."""
    return json.JSONDecoder().raw_decode(text, i)[1]
