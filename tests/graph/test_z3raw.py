"""Raw terms: the same terms z3py makes, alive after the builder closes only through roots."""

from __future__ import annotations

import sys

import pytest
import z3

from factorspec_sdk.graph.z3raw import (
    TermBuilder,
    assert_all,
    copy_assertions,
    largest_divisor,
    reads_and_equalities,
    substitute_all,
    true_under,
    true_with,
    value_in,
)


def test_raw_terms_equal_the_terms_z3py_makes() -> None:
    ctx = z3.Context()
    x, y, b = z3.Int("x", ctx), z3.Int("y", ctx), z3.Bool("b", ctx)
    with TermBuilder(ctx) as tb:
        tx, ty, tb_ = tb.term(x), tb.term(y), tb.term(b)
        two, huge = tb.int(2), tb.int(10**30)
        made = {
            "sum": tb.wrap_int(tb.app("add", [tx, ty, two])),
            "cmp": tb.wrap(tb.app("le", [tb.app("mul", [tx, two]), tb.app("neg", [ty])])),
            "ite": tb.wrap_int(tb.app("ite", [tb_, tb.app("div", [tx, two]), huge])),
            "logic": tb.wrap(
                tb.app("implies", [tb.app("not", [tb_]), tb.disj([tb.app("eq", [tx, ty])])])
            ),
            "distinct": tb.wrap(tb.app("distinct", [tx, ty, tb.app("mod", [tx, two])])),
            "empty": tb.wrap(
                tb.app("and", [tb.conj([]), tb.app("or", [tb.disj([]), tb.bool(True)])])
            ),
        }
    want = {
        "sum": z3.Sum(x, y, z3.IntVal(2, ctx)),  # one n-ary node
        "cmp": x * 2 <= -y,
        "ite": z3.If(b, x / 2, z3.IntVal(10**30, ctx)),
        "logic": z3.Implies(z3.Not(b), x == y),
        "distinct": z3.Distinct(x, y, x % 2),
        "empty": z3.And(z3.BoolVal(True, ctx), z3.Or(z3.BoolVal(False, ctx), True)),
    }
    for key, term in made.items():
        assert term.eq(want[key]), key  # the same node (Z3 shares equal terms)
    s = z3.Solver(ctx=ctx)
    s.add(made["cmp"], x == 3)  # the roots outlive the builder
    assert s.check() == z3.sat and s.model()[y].as_long() <= -6


def test_raw_variables_are_z3pys_variables() -> None:
    ctx = z3.Context()
    names = ["stays[0].city", "null(note)", "len(stays)", "prix_été"]
    with TermBuilder(ctx) as tb:
        ints = [tb.wrap_int(tb.const(n, boolean=False)) for n in names]
        bools = [tb.wrap(tb.const(n, boolean=True)) for n in names]
    for n, i, b in zip(names, ints, bools, strict=True):
        assert i.eq(z3.Int(n, ctx)) and b.eq(z3.Bool(n, ctx)), n
        assert str(i) == str(z3.Int(n, ctx))
    s = z3.Solver(ctx=ctx)
    s.add(ints[0] > 2, bools[1])  # alive after the builder closed
    assert s.check() == z3.sat


def test_a_term_libz3_refuses_raises_at_once() -> None:
    ctx = z3.Context()
    with TermBuilder(ctx) as tb:
        with pytest.raises(z3.Z3Exception):
            tb.app("and", [tb.int(1), tb.int(2)])  # not Boolean: a null node
        with pytest.raises(ValueError, match="unknown operation"):
            tb.app("pow", [tb.int(1), tb.int(2)])


def test_values_in_a_model_equal_z3pys() -> None:
    ctx = z3.Context()
    x, y, b = z3.Int("x", ctx), z3.Int("y", ctx), z3.Bool("b", ctx)
    s = z3.Solver(ctx=ctx)
    s.add(x == 7, z3.Not(b))
    assert s.check() == z3.sat
    model = s.model()
    with TermBuilder(ctx) as tb:
        tx, ty = tb.term(x), tb.term(y)
        for node, term in [(tx, x), (ty, y), (tb.app("add", [tx, tb.int(1)]), x + 1)]:
            got = z3.IntNumRef(tb.eval(model, node), ctx)
            assert got.as_long() == model.eval(term, model_completion=True).as_long()
        assert tb.truth(tb.eval(model, tb.term(b))) is False
        assert tb.truth(tb.eval(model, tb.app("eq", [tx, tb.int(7)]))) is True
        assert tb.truth(tb.term(b)) is None  # not a value
        assert tb.value(tb.eval(model, tx), boolean=False) == 7
        assert tb.value(tb.eval(model, tb.term(b)), boolean=True) is False
        with pytest.raises(z3.Z3Exception, match="not a Boolean or integer value"):
            tb.value(tx, boolean=False)
    assert value_in(model, x == 7, boolean=True) is True
    assert value_in(model, b, boolean=True) is False
    y_big = model.eval(y, model_completion=True).as_long() > 1000
    assert value_in(model, z3.Or(b, y > 1000), boolean=True) is y_big
    assert value_in(model, x + 1, boolean=False) == 8
    assert value_in(model, x * 10**25 - 1, boolean=False) == 7 * 10**25 - 1  # beyond 64 bits
    assert value_in(model, -x, boolean=False) == -7
    assert value_in(model, z3.ToReal(x) / 2, boolean=False) is None  # 7/2: not an int


def test_true_under_evaluates_constraints_at_given_values() -> None:
    ctx = z3.Context()
    x, y, b = z3.Int("x", ctx), z3.Int("y", ctx), z3.Bool("b", ctx)
    cs = [x * y == 12, z3.Implies(b, x > y), x % 5 == 3]
    assert true_under(cs, [(x, 3), (y, 4), (b, False)])
    assert not true_under(cs, [(x, 3), (y, 4), (b, True)])  # 3 > 4 is false
    assert not true_under(cs, [(x, 8), (y, 4), (b, False)])  # 32 != 12
    # y left out is 0 in the evaluated model: False, though y = 4 would do (ask the solver)
    assert not true_under(cs, [(x, 3), (b, False)])
    assert true_under([x <= 10**30], [(x, 10**25)])  # beyond 64 bits
    # a term that is no variable, or one given twice: False, never an error
    assert not true_under(cs, [(x + 1, 4), (y, 4), (b, False)])
    assert not true_under(cs, [(x, 3), (x, 3), (y, 4), (b, False)])
    assert true_under([], [])


def test_true_with_evaluates_a_moved_model_and_puts_it_back() -> None:
    ctx = z3.Context()
    x, y, z = z3.Int("x", ctx), z3.Int("y", ctx), z3.Int("z", ctx)
    s = z3.Solver(ctx=ctx)
    s.add(x + y == 10, x >= 0, y >= 0, x % 3 == 0)
    s.add(x == 3)
    assert s.check() == z3.sat
    model = s.model()  # z is no variable of it: completed where evaluated
    formula = z3.And(x + y == 10, x >= 0, y >= 0, x % 3 == 0)
    assert true_with(model, formula, [(x, 6), (y, 4)])
    assert not true_with(model, formula, [(x, 6)])  # 6 + 7 != 10
    assert not true_with(model, formula, [(x, 4), (y, 6)])  # 4 % 3 != 0
    assert true_with(model, z3.And(formula, z == 5), [(z, 5)])
    assert true_with(model, formula, [(x, 9), (y, 1)])
    assert not true_with(model, formula, [(x + 1, 6), (y, 4)])  # a term that is no variable
    # the model answers as before every evaluation
    assert model.eval(x).as_long() == 3 and model.eval(y).as_long() == 7
    assert model.eval(x + y == 10)


def test_assert_all_asserts_the_formulas_copied_into_the_solvers_context() -> None:
    src, dst = z3.Context(), z3.Context()
    x, y = z3.Int("x", src), z3.Int("y", src)
    formulas = [x + y == 7, x > 2, z3.Or(y > 3, x == 0)]
    raw = z3.SimpleSolver(ctx=dst)
    assert_all(raw, formulas)
    plain = z3.SimpleSolver(ctx=dst)
    for f in formulas:
        plain.add(f.translate(dst))
    assert [a.sexpr() for a in raw.assertions()] == [a.sexpr() for a in plain.assertions()]
    assert all(a.ctx is dst for a in raw.assertions())
    xd = z3.Int("x", dst)
    assert raw.check(xd == 3) == z3.sat and raw.check(xd == 4) == z3.unsat  # y > 3 needs x < 4
    assert_all(raw, [])  # nothing to add
    assert len(raw.assertions()) == 3
    same = z3.SimpleSolver(ctx=src)  # the formulas' own context: asserted as they are
    assert_all(same, formulas)
    by_z3py = z3.SimpleSolver(ctx=src)
    by_z3py.add(*formulas)
    assert [a.sexpr() for a in same.assertions()] == [a.sexpr() for a in by_z3py.assertions()]
    assert same.check(x == 4) == z3.unsat and same.check(x == 3) == z3.sat


def test_copy_assertions_copies_every_scope_to_the_base_level() -> None:
    ctx = z3.Context()
    x, y = z3.Int("x", ctx), z3.Int("y", ctx)
    source = z3.SimpleSolver(ctx=ctx)
    source.add(x + y == 7)
    source.push()
    source.add(x > 2)
    source.push()
    source.add(y > 3)
    target = z3.SimpleSolver(ctx=ctx)
    copy_assertions(source, target)
    assert [a.sexpr() for a in target.assertions()] == [a.sexpr() for a in source.assertions()]
    assert target.num_scopes() == 0 and source.num_scopes() == 2
    assert target.check(x == 3) == z3.sat and target.check(x == 4) == z3.unsat
    with pytest.raises(z3.Z3Exception, match="one context"):
        copy_assertions(source, z3.SimpleSolver(ctx=z3.Context()))


def test_substitute_all_equals_z3pys_substitute() -> None:
    ctx = z3.Context()
    x, y = z3.Int("x", ctx), z3.Int("y", ctx)
    p, q = z3.Bool("p", ctx), z3.Bool("q", ctx)
    formulas = [z3.And(p, x > 1), z3.Or(q, z3.Not(p)), x + y == 3, z3.Implies(q, y < x)]
    pairs = [(p, x == y), (q, z3.BoolVal(False, ctx))]
    got = substitute_all(formulas, pairs)
    want = [z3.substitute(f, *pairs) for f in formulas]
    assert all(g.eq(w) for g, w in zip(got, want, strict=True))
    assert all(isinstance(g, z3.BoolRef) and g.ctx is ctx for g in got)
    del formulas, pairs, want  # the results hold their own references
    assert str(got[0]) == "And(x == y, x > 1)"
    assert substitute_all([x > 1], [])[0].eq(x > 1) and substitute_all([], [(p, q)]) == []
    with pytest.raises(z3.Z3Exception, match="sorts differ"):
        substitute_all([x > 1], [(x, p)])


def test_largest_divisor_finds_every_div_and_mod_under_shared_terms() -> None:
    x, y = z3.Ints("x y")
    shared = (x * 3 + y) / 10_000  # a rounding's quotient, used twice
    assert largest_divisor([x % 7 == 1, z3.If(shared > 2, shared % 2 == 0, y / 5 == 1)]) == 10_000
    assert largest_divisor([x % -60 == 0, x + y <= 3]) == 60
    assert largest_divisor([x / y == 2]) == sys.maxsize  # not a numeral: no bound
    assert largest_divisor([x + 2 * y == 3, z3.Bool("b")]) == 0
    assert largest_divisor([]) == 0


def test_reads_and_equalities_find_each_formulas_variables_and_the_definitions() -> None:
    ctx = z3.Context()
    a, b, c, k = (z3.Int(n, ctx) for n in "abck")
    on = z3.Bool("on", ctx)
    deep = z3.IntVal(0, ctx)
    for i in range(600):  # an unrolled lookup: deeper than Python's recursion allows
        deep = z3.If(a == i, i * 2, deep)
    formulas = [
        z3.And(b == a + 2, z3.Implies(on, c == b * 2)),
        z3.If(on, a == 3 + k, c == c + 0),  # k is no variable of ``names``; c == c defines none
        z3.Or(a == 5, b == 1),  # a disjunction defines nothing
        b == deep,
    ]
    names = frozenset({"a", "b", "c", "on"})
    reads, equalities = reads_and_equalities(formulas, names)
    assert reads == [
        frozenset({"a", "b", "c", "on"}),
        frozenset({"a", "c", "on"}),
        frozenset({"a", "b"}),
        frozenset({"a", "b"}),
    ]
    found = {(name, str(term), frozenset(used)) for name, term, _, used in equalities}
    assert found == {
        ("b", "a + 2", frozenset({"a"})),
        ("c", "b*2", frozenset({"b"})),  # in the consequent of an implication
        ("a", "3 + k", frozenset()),
        ("b", str(deep), frozenset({"a"})),
    }
    assert {str(eq) for _, _, eq, _ in equalities} >= {"b == a + 2", "a == 3 + k"}
