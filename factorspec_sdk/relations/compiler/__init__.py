"""Symbolic evaluation of relations into Z3 formulas.

A relation's AST is evaluated against the model's layout. Expressions rooted at the context
parameter (and literals, and module constants) evaluate *concretely* to Python values at
compile time; expressions rooted at ``self`` evaluate *symbolically* to Z3 terms over leaf
variables and list-length variables.

Every evaluation yields a value and a *definedness* condition ``ok``: the condition under
which evaluating the expression raises no exception (an index out of range, a dict lookup
miss, a division by zero, ``min()`` of an empty sequence). Python's short-circuiting is
respected: ``len(xs) > 0 and xs[0].a == 1`` is defined on an empty list. A relation holds
exactly when its body evaluates without exception to a truthy value, as in
`factorspec_sdk.relations.decorator.evaluate`.

Representation:

- ``int`` leaves are Z3 ``Int``; ``bool`` leaves Z3 ``Bool``.
- ``str`` leaves and ``Literal``/``Enum`` leaves with str values are Z3 ``Int`` *codes* into
  a per-spec intern table (`InternTable`) of every constant string seen; code 0 means
  "any other string". The ``len()`` of a free ``str`` leaf is an ``Int`` ``len(path)`` of
  its own (in characters); a string read only through ``len()`` needs no finite domain.
- Lists are unrolled to their bound; element ``i`` exists iff ``i < len(path)``.
- ``Optional`` nodes get a Bool ``null(path)`` variable.
- ``datetime.date`` leaves are ``Int`` ordinals (``date.toordinal()``); their ``.year``,
  ``.month`` and ``.day`` are ``Int`` variables ``year(path)``... tied to the ordinal by a
  ``calendar of path`` factor (`date_parts`).

Modules, one job each (each imports only those above it, except `core`, which collects the
rules of all of them):

- `terms`: Z3 term helpers (connectives that fold Python bools, C-API builders, lengths).
- `values`: the symbolic value classes (`SCode`, `SSeq`, `SMaybe`, `SChoice`...), results
  (`R`) and scopes.
- `records`: what the graph stage receives: `VarRecord`, `InternTable`, `CompiledRelation`.
- `ints`, `codes`, `dates`, `floats`, `uuids`: the rules of each *value kind* (see below);
  `date_parts`: the parts and methods of date values (``.year``, ``.hour``, ``.weekday()``)
  and the factors that tie a field's part variables to it; `float_compare`: comparisons of
  floats and Decimals, proved to give Python's answer.
- `choices`: values under conditions (``a if c else b``, If-chains), truthiness.
- `statements`: let-bindings, ``if``/``return`` chains, target binding.
- `names`: literals, names (locals, closures, globals, builtins) and displays.
- `fields`: the values of the record's nodes, and attribute access.
- `operators`: boolean, arithmetic, comparison, membership and conditional operators.
- `sequences`: subscripts, slices, comprehensions, iteration.
- `reductions`: the builtins that fold an iterable into one value, ``all``/``any``/``sum``/
  ``min``/``max``/``distinct``.
- `builtin_calls`: calls: the dispatch, ``len``/``zip``/``enumerate``/``range``/``abs``/
  ``round``/``int``/``float``/``bool``/``list``/``tuple``/``str`` (of constants)/
  ``isinstance``, the rules of `reductions` (`CALLS`), and methods of constants.
- `raises`: operations Python refuses for their operands' types whatever the values
  (``Decimal * float``, ``time + timedelta``), reported as `RelationRaisesError` with the
  fix instead of compiled as "violated".
- `core`: `RelationCompiler`, the state (layout, context, variables, intern table) and the
  dispatch of each AST node type to its rule.

Why functions taking the compiler rather than mixins: the rules call one another across jobs
(a comprehension binds targets and compares values; ``distinct`` compares items), and a
plain function call names the module it comes from and is checked by mypy as it stands;
mixins would hide that behind one ``self`` spread over ten bases. So `RelationCompiler`
keeps only the state and the variables, and every rule is a function ``rule(cx, ...)`` over
it; each rule module exports ``RULES`` (AST node type -> rule), which `core` merges.

Value kinds (where a new type's rules go): each kind of leaf value has one module for the
rules that depend on the kind: `ints` (Int/Bool terms: leaf variables, the term of a value,
``==``, ordering, arithmetic) and `codes` (str/Literal/Enum codes: leaf variables, the code
of a constant, ``==``, membership, truthiness, merging under a condition), `dates`,
`floats` and `uuids` (``==`` only; the rest refused). A new kind is a new module of that
shape, plus one line at each dispatch point that asks "is this value of the kind?": `fields.leaf`,
`operators.eq`/`order`/`arith`/``in``, `choices.ite`/`truthy`, and the builtins that take
numbers (``sum``/``min``/``max`` in `reductions`, ``abs`` in `builtin_calls`).
"""

from factorspec_sdk.relations.compiler.builtin_calls import dict_key_factors
from factorspec_sdk.relations.compiler.codes import (
    affix_links,
    decided_by_codes,
    length_links,
    text_links,
)
from factorspec_sdk.relations.compiler.core import RelationCompiler
from factorspec_sdk.relations.compiler.date_parts import date_links, tied_parts
from factorspec_sdk.relations.compiler.records import (
    BOOL_KINDS,
    OTHER_CODE,
    OTHER_TEXT,
    CompiledRelation,
    InternTable,
    VarKind,
    VarRecord,
)
from factorspec_sdk.relations.compiler.terms import AND, to_bool

__all__ = [
    "AND",
    "BOOL_KINDS",
    "OTHER_CODE",
    "OTHER_TEXT",
    "CompiledRelation",
    "InternTable",
    "RelationCompiler",
    "VarKind",
    "VarRecord",
    "affix_links",
    "date_links",
    "decided_by_codes",
    "dict_key_factors",
    "length_links",
    "text_links",
    "tied_parts",
    "to_bool",
]
