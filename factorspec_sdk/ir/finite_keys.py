"""An object whose ``propertyNames`` is an ``enum`` or ``const``, as the closed object it is.

Such a ``propertyNames`` makes the object's key set finite: the object is exactly a closed
one (``additionalProperties: false``, no ``patternProperties``) whose properties are the
names ``propertyNames`` accepts, each holding its own schema (under ``properties``) and those
of the patterns that match it (by `re.search`, as `jsonschema` matches), else the schema of
``additionalProperties``; the order is that of ``properties``, then of the names. The rewrite
has the same instances. The writer lays such an object out natively
(`factorspec_sdk.ir.jsonschema_objects`), and a grammar value's copy uses it too
(`factorspec_sdk.ir.standalone`): llguidance implements no ``propertyNames``.

`key_schema` is the schema a written key's value holds (its own and its patterns', all held).
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["closed_keys", "key_schema"]

JsonDict = dict[str, object]

_GONE = frozenset({"patternProperties", "propertyNames", "additionalProperties"})
"""The keywords the rewrite replaces (with ``properties`` and ``additionalProperties: false``)."""


def key_schema(key: str, own: list[object], patterns: dict[str, object]) -> object:
    """A written key's schema: its own (``own``) and those of the patterns that match it.

    ``False`` where one of them is (no value: the key is absent-only), ``True`` where none
    constrains anything, one schema, or the ``allOf`` of several.
    """
    schemas = own + [sub for p, sub in patterns.items() if re.search(p, key)]
    if any(x is False for x in schemas):
        return False
    schemas = [x for x in schemas if x is not True and x != {}]
    if len(schemas) > 1:
        return {"allOf": schemas}
    return schemas[0] if schemas else True


def closed_keys(
    s: JsonDict,
    *,
    resolve: Callable[[object, str], object],
    valid: Callable[[object, str, str], bool],
    where: str,
) -> JsonDict | None:
    """The closed object ``s`` is where its ``propertyNames`` names finitely many keys, else None.

    Args:
        s: an object schema (its keywords those of its dialect; drafts 4 to 7 ignore the
            siblings of ``$ref``, so the caller passes none there).
        resolve: ``resolve(ref, where)``, the schema a local ``$ref`` points to.
        valid: ``valid(schema, name, where)``, whether `jsonschema` accepts ``name`` for
            ``schema`` (its ``$ref``s resolved in the document).
        where: the place of ``s``, for errors.

    None where ``s`` has no ``propertyNames``, where it has ``unevaluatedProperties`` (which
    reads what in-place keywords evaluate), where ``propertyNames`` reaches no ``enum`` or
    ``const`` through ``$ref``, or where a keyword has the wrong shape (the caller's own
    checks then name it).
    """
    if "propertyNames" not in s or "unevaluatedProperties" in s:
        return None
    names_schema, at = s["propertyNames"], f"{where}/propertyNames"
    props = s.get("properties", {})
    patterns = s.get("patternProperties", {})
    if not isinstance(props, dict) or not isinstance(patterns, dict):
        return None
    try:
        for p in patterns:
            re.compile(p)
    except re.error:
        return None
    candidates = _enumerated(names_schema, resolve, at)
    if candidates is None:
        return None
    names = [n for n in candidates if valid(names_schema, n, at)]
    extra = s.get("additionalProperties", True)
    closed: JsonDict = {}
    for name in [*(k for k in props if k in names), *(n for n in names if n not in props)]:
        if name in props:
            own = [props[name]]
        else:  # additionalProperties holds a key no pattern matches
            own = [] if any(re.search(p, name) for p in patterns) else [extra]
        closed[name] = key_schema(name, own, patterns)
    out = {k: v for k, v in s.items() if k not in _GONE}
    out["properties"] = closed
    out["additionalProperties"] = False
    return out


def _enumerated(
    s: object, resolve: Callable[[object, str], object], where: str
) -> list[str] | None:
    """The strings of the ``enum`` / ``const`` that ``s`` holds (through ``$ref``), or None.

    A superset of the names ``s`` accepts (the caller validates each against ``s``); None
    where ``s`` names no finite set this way.
    """
    seen: set[int] = set()
    while isinstance(s, dict) and id(s) not in seen:
        seen.add(id(s))
        if isinstance(s.get("enum"), list):
            return list(dict.fromkeys(v for v in s["enum"] if isinstance(v, str)))
        if "const" in s:
            return [s["const"]] if isinstance(s["const"], str) else []
        if "$ref" not in s:
            return None
        s = resolve(s["$ref"], where)
    return None
