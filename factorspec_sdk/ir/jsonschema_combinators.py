"""The JSON Schema converter's combinators: ``allOf``, ``anyOf`` and ``oneOf`` of one schema.

`CombinatorConverter` lays out an ``allOf`` with one schema, and an ``anyOf`` / ``oneOf`` of
one schema and ``{"type": "null"}`` (`factorspec_sdk.ir.jsonschema`), beside a sibling
``type`` where the values written for the one schema have that type. A combinator of several
schemas, or beside other keywords, is a grammar value.
"""

from __future__ import annotations

from factorspec_sdk.ir.jsonschema_base import ConverterBase, NothingWritable, NotNative
from factorspec_sdk.ir.jsonschema_keywords import JsonDict, shaped
from factorspec_sdk.ir.limits import IRError
from factorspec_sdk.relations.kinds import LeafKind

__all__ = ["CombinatorConverter"]


class CombinatorConverter(ConverterBase):
    """The combinator nodes of a conversion (see the module)."""

    def combinator_node(
        self,
        s: JsonDict,
        kws: set[str],
        found: list[str],
        where: str,
        refs: tuple[str, ...],
        depth: int,
        nullable: bool,
    ) -> JsonDict:
        """The layout of node ``s`` under the combinator ``found[0]`` (of ``found``).

        Raises:
            NothingWritable: the one schema has no value the writer can write.
            NotNative: the combinator is a grammar value (several schemas, other keywords
                beside it, a grammar value under it).
            IRError: the values written do not fit a sibling ``type``, or ``s`` is malformed.
        """
        key = found[0]
        others = kws - {key}
        if others - {"type"}:
            raise NotNative(f"{where}: {key} beside {', '.join(sorted(others))}")
        alts = shaped(s[key], list, where, key)
        if key == "allOf":
            if len(alts) != 1:
                raise NotNative(f"{where}: allOf with several schemas")
            i, alt = 0, alts[0]
        else:
            rest = [(i, a) for i, a in enumerate(alts) if not self._null_only(a)]
            if len(rest) != 1:
                raise NotNative(f"{where}: {key} of several schemas (other than X | null)")
            i, alt = rest[0]
        if "type" in others and isinstance(alt, dict) and not {"type", "$ref"} & set(alt):
            # the same instance: the sibling type is the untyped alternative's own
            alt = {**alt, "type": s["type"]}
        try:
            out = self.node(alt, f"{where}/{key}/{i}", refs, depth + 1)
        except NothingWritable:
            if nullable:
                raise NothingWritable(
                    f"{where}: only null is allowed, and never written alone"
                ) from None
            raise
        if out["type"] == "grammar":  # the whole combinator is then one grammar value
            raise NotNative(f"{where}/{key}/{i}: a grammar value under {key}")
        if "type" in others:
            self._fit_type(s["type"], out, f"{where}/{key}/{i}")
        # a value of `alt` matches no null-only alternative, so oneOf holds for it too;
        # null is written only where the whole node (its type included) accepts it
        out["nullable"] = nullable
        return self.writable_null(s, where, out)

    def _fit_type(self, t: object, out: JsonDict, where: str) -> None:
        """Check that the values of layout ``out`` all have JSON type ``t`` (a sibling)."""
        if out["type"] == "leaf" and out["kind"] == LeafKind.ENUM:
            choices = out["choices"]
            assert isinstance(choices, list)  # built by enum_node
            kept = [c for c in choices if self.valid({"type": t}, c, where)]
            if not kept:
                raise NothingWritable(f"{where}: no enum value has the sibling type {t!r}")
            out["choices"] = kept
            return
        if out["type"] == "leaf":
            written = {"int": "integer", "bool": "boolean", "str": "string"}[str(out["kind"])]
        else:
            written = "object" if out["type"] == "object" else "array"
        names = {t} if isinstance(t, str) else set(t) if isinstance(t, list) else set()
        if written not in names and not (written == "integer" and "number" in names):
            raise IRError(f"{where}: the {written} values written here do not fit type {t!r}")

    def _null_only(self, s: object) -> bool:
        """Whether ``s`` is ``{"type": "null"}`` (besides keywords the dialect ignores)."""
        return (
            isinstance(s, dict)
            and s.get("type") == "null"
            and not ({k for k in s if k in self.keywords} - {"type"})
        )
