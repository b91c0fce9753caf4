"""The trip benchmark's method names and the values of its options (methods, cities, shard).

Every module of the benchmark names methods through this one: `METHODS` (in run order), the
FactorSpec methods, the baselines the ratios compare against, and the n-gram family
``syntax+ngram-kK`` (`ngram_k` reads ``K`` back).
"""

from __future__ import annotations

from collections.abc import Iterable

from factorspec_sdk.domains.trip import MAX_CITIES, MIN_CITIES

__all__ = [
    "BASELINES",
    "FACTORSPEC_METHODS",
    "METHODS",
    "NGRAM_KS",
    "NGRAM_PREFIX",
    "expand_methods",
    "ngram_k",
    "parse_cities",
    "parse_shard",
]

NGRAM_KS: tuple[int, ...] = (3, 5, 8)
"""Draft lengths tried for the n-gram baseline; the best is reported."""

NGRAM_PREFIX = "syntax+ngram-k"
"""The n-gram methods are ``NGRAM_PREFIX + str(k)``."""

METHODS: dict[str, str] = {
    "free": "free generation, JSON parsed afterwards",
    "syntax": "XGrammar JSON-schema mask, token by token",
    "syntax+retry": "XGrammar mask + up to 3 retries naming the violated relations",
    **{
        f"{NGRAM_PREFIX}{k}": f"XGrammar mask + n-gram prompt-lookup drafts of {k} tokens"
        for k in NGRAM_KS
    },
    "factorspec-certain": "FactorSpec, certain drafts only (max_guesses=0)",
    "factorspec": "FactorSpec, certain drafts + guesses (per-request width)",
}
"""Every method the benchmark knows, in the order it runs them."""

FACTORSPEC_METHODS: tuple[str, ...] = ("factorspec-certain", "factorspec")
"""The methods that decode with a FactorSpec `Client`."""

BASELINES: tuple[str, ...] = ("free", "syntax", "syntax+retry", "syntax+ngram")
"""Baselines the ratios compare against (``syntax+ngram`` is its best ``k``)."""


def ngram_k(method: str) -> int | None:
    """The draft length ``K`` of ``syntax+ngram-kK``; ``None`` for any other method."""
    if not method.startswith(NGRAM_PREFIX):
        return None
    return int(method.removeprefix(NGRAM_PREFIX))


def expand_methods(spec: str | Iterable[str]) -> list[str]:
    """Method names from ``"all"``, a comma-separated string or a list.

    ``syntax+ngram`` stands for every ``syntax+ngram-kK``; ``baselines`` for the four
    baselines; the result is in `METHODS` order without repeats.

    Raises:
        ValueError: an unknown method name (the message lists the known ones).
    """
    items = [s.strip() for s in spec.split(",")] if isinstance(spec, str) else list(spec)
    chosen: set[str] = set()
    for item in items:
        if not item:
            continue
        if item == "all":
            chosen.update(METHODS)
        elif item == "baselines":
            chosen.update(m for m in METHODS if m not in FACTORSPEC_METHODS)
        elif item == "syntax+ngram":
            chosen.update(f"{NGRAM_PREFIX}{k}" for k in NGRAM_KS)
        elif item in METHODS:
            chosen.add(item)
        else:
            known = ", ".join(["all", "baselines", "syntax+ngram", *METHODS])
            raise ValueError(f"unknown method {item!r}; known: {known}")
    if not chosen:
        raise ValueError("no method chosen")
    return [m for m in METHODS if m in chosen]


def parse_cities(text: str) -> tuple[int, int]:
    """``"3-10"`` -> ``(3, 10)``; ``"5"`` -> ``(5, 5)``.

    Raises:
        ValueError: not a count or a range of counts within 3..10.
    """
    parts = text.replace("..", "-").split("-")
    try:
        low, high = (int(parts[0]), int(parts[-1])) if len(parts) <= 2 else (0, -1)
    except ValueError:
        raise ValueError(f"--cities takes N or LOW-HIGH, got {text!r}") from None
    if not MIN_CITIES <= low <= high <= MAX_CITIES:
        raise ValueError(f"--cities must lie within {MIN_CITIES}-{MAX_CITIES}, got {text!r}")
    return low, high


def parse_shard(text: str) -> tuple[int, int]:
    """``"0/2"`` -> ``(0, 2)``: shard ``K`` of ``M`` (problems whose index is K mod M).

    Raises:
        ValueError: not ``K/M`` with ``0 <= K < M``.
    """
    try:
        k_text, m_text = text.split("/")
        k, m = int(k_text), int(m_text)
    except ValueError:
        raise ValueError(f"--shard wants K/M (e.g. 0/2), got {text!r}") from None
    if not 0 <= k < m:
        raise ValueError(f"--shard {text}: need 0 <= K < M")
    return k, m
