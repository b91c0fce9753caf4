"""A free string that relations read with ``startswith``/``endswith``: where it may close.

A free ``str`` leaf read as ``s.startswith(c)`` or ``s.endswith(d)`` (constants) has one
Bool per affix (`codes.affix`); `codes.affix_links` ties them to the leaf's code and length
exactly. The writer writes the string freely and decides the affixes by the text:

- it closes as a text no relation names only where the oracle allows that text's affixes
  (its *profile*, one Bool per affix variable) at that length;
- a token is allowed where the text can still be completed. From a text ``w``, the
  completions are ``m + X + e``: ``m`` is ``w`` itself (deviating from every constant
  prefix ``w`` could still become) or a constant prefix that extends ``w``, ``X`` one or
  more characters no constant has (the alphabet is large), ``e`` a constant suffix or
  nothing; such a text has the prefixes of ``m`` and the suffixes of ``e`` and no more. The
  others are *tight* texts made of constants only (``w`` or ``m`` followed by the rest of
  a suffix it already ends with the start of), and named texts: each checked on its own.

`Affixes` asks the oracle once per profile for the lengths it allows (`StringLengths`, all
under the record before the string), so each question is a set lookup or a cached query.
Hand-written: no grammar library knows the relations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from factorspec_sdk.relations.affixes import Affix, open_profile, profile
from factorspec_sdk.writer.lengths import StringLengths

if TYPE_CHECKING:
    from factorspec_sdk.graph.compiled import Assignment, Fact
    from factorspec_sdk.graph.oracle import Oracle

__all__ = ["Affixes", "Profile"]

Profile = tuple[bool, ...]
"""One Bool per affix variable, in `Affixes.variables` order."""


class Affixes:
    """The affix variables of one free string and the lengths each profile allows.

    Args:
        oracle: the request's oracle.
        assignment: the facts of the record before the string, plus ``code == OTHER``.
        variables: (variable, ``startswith`` or ``endswith``, constant) per affix variable.
        length_var: the string's length variable, with its bounds ``lo``..``hi``.
    """

    __slots__ = (
        "_lengths",
        "affixes",
        "assignment",
        "hi",
        "length_var",
        "lo",
        "oracle",
        "variables",
    )

    def __init__(
        self,
        oracle: Oracle,
        assignment: Assignment,
        variables: tuple[tuple[str, str, str], ...],
        length_var: str,
        lo: int,
        hi: int,
    ) -> None:
        self.oracle = oracle
        self.assignment = assignment
        self.variables = variables
        self.affixes: list[Affix] = [(m, c) for _, m, c in variables]
        self.length_var = length_var
        self.lo = lo
        self.hi = hi
        self._lengths: dict[Profile, StringLengths] = {}

    @property
    def prefixes(self) -> list[str]:
        """The constant prefixes, shortest first."""
        return sorted({c for _, m, c in self.variables if m == "startswith"}, key=len)

    @property
    def suffixes(self) -> list[str]:
        """The constant suffixes and the empty one, shortest first."""
        return ["", *sorted({c for _, m, c in self.variables if m == "endswith"}, key=len)]

    def constant_chars(self) -> frozenset[str]:
        """The characters of the affix constants.

        A text written on with characters outside them keeps the affixes it has: its
        profile is its ends' (`open_profile`).
        """
        return frozenset("".join(c for _, _, c in self.variables))

    def profile(self, text: str) -> Profile:
        """The affixes of ``text``."""
        return profile(text, self.affixes)

    def open_profile(self, pre: str, suf: str) -> Profile:
        """The affixes of ``pre + X + suf`` with ``X`` of characters no constant has."""
        return open_profile(pre, suf, self.affixes)

    def facts(self, text: str) -> tuple[Fact, ...]:
        """The facts of closing as ``text``: its affixes and its length."""
        affixes = zip(self.variables, self.profile(text), strict=True)
        return (*((v, b) for (v, _, _), b in affixes), (self.length_var, len(text)))

    def lengths(self, profile: Profile) -> StringLengths:
        """The lengths a text no relation names with ``profile`` may close at."""
        hit = self._lengths.get(profile)
        if hit is None:
            facts = tuple((v, b) for (v, _, _), b in zip(self.variables, profile, strict=True))
            hit = StringLengths(
                self.oracle, (*self.assignment, *facts), self.length_var, self.lo, self.hi
            )
            self._lengths[profile] = hit
        return hit

    def closes(self, text: str) -> bool:
        """Whether a text no relation names may close as ``text``."""
        return self.lengths(self.profile(text)).closes(len(text))

    def open_prefixes(self, written: str) -> list[str]:
        """The constant prefixes that strictly extend ``written``."""
        return [c for c in self.prefixes if len(c) > len(written) and c.startswith(written)]

    def deviating(self, written: str) -> str:
        """The longest constant prefix of ``written``, or ``""``."""
        found = [c for c in self.prefixes if written.startswith(c)]
        return found[-1] if found else ""

    def open_forms(self, written: str, extra: int = 0) -> list[tuple[str, str, int]]:
        """The completions ``m + X + e`` of ``written``, as ``(m, e, least)``.

        ``written`` is followed by ``extra`` characters no constant has and ``X`` by at least
        one more; ``least`` is the shortest length of such a completion.
        """
        n = len(written) + extra
        heads = [self.deviating(written)] + ([] if extra else self.open_prefixes(written))
        return [(m, e, max(n, len(m)) + 1 + len(e)) for m in heads for e in self.suffixes]

    def open_ok(self, written: str, extra: int = 0) -> bool:
        """Whether ``written`` plus ``extra`` such characters completes as an `open_forms`.

        Some length its profile allows is long enough.
        """
        return any(
            self.lengths(self.open_profile(m, e)).longest >= least
            for m, e, least in self.open_forms(written, extra)
        )

    def head_feasible(self, head: str) -> bool:
        """Whether a text no relation names may have the constant prefixes of ``head``.

        With any constant suffixes: some such profile is feasible at some length.
        """
        count = len(self.variables)
        for bits in range(2**count):
            profile = tuple(
                head.startswith(c) if m == "startswith" else bool(bits >> i & 1)
                for i, (_, m, c) in enumerate(self.variables)
            )
            if self.lengths(profile).longest >= 0:
                return True
        return False

    def tight(self, written: str) -> list[str]:
        """The texts of constants only that extend ``written`` (see the module)."""
        heads = [written, *self.open_prefixes(written)]
        out: set[str] = set()
        for h in heads:
            for e in self.suffixes:
                for j in range(len(e) + 1):
                    if h.endswith(e[:j]):
                        out.add(h + e[j:])
        return sorted(out, key=lambda t: (len(t), t))
