"""Comparing greedy outputs of two numeric kernels without asserting on rounding.

Two kernels (vLLM's CPU kernels and torch, bf16 and fp32, one wide forward and many narrow
ones) compute logits that differ in the last bits. Where the top two masked logits at a choice
are within that rounding, either token is a correct greedy answer, and after the first such
split the two records go on from different contexts. So a cross-kernel test compares token
for token up to the first difference, and accepts that difference only where the reference's
masked top-two margin at that position is below ``tolerance``; a difference where the margin
was clear is a real bug (a wrong mask, a wrong position, a wrong token) and fails.

The margins come from one teacher-forced forward of the reference engine over the prompt and
the reference's record tokens, with the planner replayed token by token for the masks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel

from factorspec_sdk import Client
from factorspec_sdk.engines.protocol import Engine
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.tokens.plan import planner_for

BF16_TOLERANCE = 1.0
"""Logit margin within which two bf16 kernels may disagree (SmolLM2 logits are ~10-30 in
size; bf16 keeps 8 bits of mantissa, and the error grows through 30 layers)."""

FP32_TOLERANCE = 5e-2
"""The same for two fp32 kernels (vLLM's CPU kernels and torch agree to ~1e-3)."""

CHUNKING_TOLERANCE = 1e-3
"""The same for one fp32 kernel run over different chunkings (they agree to ~1e-4)."""


@dataclass(frozen=True, slots=True)
class Comparison:
    """How two greedy records compared.

    Attributes:
        same: the token lists are equal.
        compared_choices: choice positions (more than one allowed token) both agreed on
            before the first difference, each with a margin above the tolerance.
        split_at: index of the first differing token, or None.
        split_margin: the reference's masked top-two margin there, or None.
    """

    same: bool
    compared_choices: int
    split_at: int | None
    split_margin: float | None


def choice_margins(
    engine: Engine,
    model: type[BaseModel],
    prompt: str,
    context: object,
    tokens: list[int],
) -> list[float | None]:
    """Per record token: the masked top-two logit margin on ``engine``, None where certain."""
    spec = compile_spec(model, context)
    planner = planner_for(spec, engine.tokenizer)
    prompt_ids = Client(engine).prompt_ids(prompt, layout=spec.layout)
    seq = engine.new_sequence(prompt_ids[:-1])
    try:
        rows = engine.extend([(seq, [prompt_ids[-1], *tokens[:-1]])])[0]
    finally:
        engine.release(seq)
    margins: list[float | None] = []
    cursor = planner.start()
    for row, token in zip(rows, tokens, strict=True):
        allowed = planner.allowed(cursor)
        if len(allowed) < 2:
            margins.append(None)
        else:
            top = np.sort(row[allowed].astype(np.float64))[-2:]
            margins.append(float(top[1] - top[0]))
        cursor = planner.advance(cursor, token)
    return margins


def compare_greedy(
    reference: list[int],
    other: list[int],
    margins: list[float | None],
    tolerance: float,
) -> Comparison:
    """Compare ``other`` with ``reference``; see the module docstring for the rule."""
    compared = 0
    for i, (a, b) in enumerate(zip(reference, other, strict=False)):
        margin = margins[i] if i < len(margins) else None
        if a != b:
            return Comparison(False, compared, i, margin)
        if margin is not None and margin >= tolerance:
            compared += 1
    if len(reference) != len(other):
        i = min(len(reference), len(other))
        return Comparison(False, compared, i, margins[i] if i < len(margins) else None)
    return Comparison(True, compared, None, None)


def assert_same_greedy(
    reference_engine: Engine,
    model: type[BaseModel],
    prompt: str,
    context: object,
    reference: list[int],
    other: list[int],
    tolerance: float,
) -> Comparison:
    """Assert ``other`` equals ``reference`` except past a split at a near-tie; return how."""
    margins = choice_margins(reference_engine, model, prompt, context, reference)
    result = compare_greedy(reference, other, margins, tolerance)
    if result.same:
        return result
    assert result.split_margin is not None and result.split_margin < tolerance, (
        f"{model.__name__}: the records differ at token {result.split_at} "
        f"(reference {reference[result.split_at or 0 :][:5]}, other "
        f"{other[result.split_at or 0 :][:5]}) where the reference's masked top-two margin "
        f"is {result.split_margin} (tolerance {tolerance}): not a rounding tie"
    )
    return result
