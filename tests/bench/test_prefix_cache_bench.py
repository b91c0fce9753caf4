"""The prefix-cache benchmark's prompts and table (the run itself needs the real model)."""

from __future__ import annotations

from factorspec_sdk.bench.prefix_cache import SYSTEM_PROMPT, ModeResult, messages_for, table
from factorspec_sdk.domains.trip import generate_problem, prompt_for


def test_every_trip_shares_the_system_message() -> None:
    trips = [generate_problem(3, seed) for seed in (1, 2)]
    first, second = (messages_for(t, "Answer with JSON of this form: {}") for t in trips)
    assert first[0] == second[0] and first[0]["content"].startswith(SYSTEM_PROMPT)
    assert first[0]["content"].endswith("Answer with JSON of this form: {}")
    assert [m["content"] for m in (first[1], second[1])] == [prompt_for(t) for t in trips]


def test_table_reports_both_ways_and_the_ratio() -> None:
    off = ModeResult("off", 2, 2, 800, 0, 100, 5.0, [3.0, 3.0])
    on = ModeResult("on", 2, 2, 800, 300, 100, 4.0, [2.0, 2.0])
    text = table({"off": off, "on": on})
    assert "| off | 2/2 | 400 | 0 (0%) | 3.00 s | 3.00 s | 2.50 s |" in text
    assert "| on | 2/2 | 400 | 300 (38%) | 2.00 s | 2.00 s | 2.00 s |" in text
    assert "**1.50x**" in text
