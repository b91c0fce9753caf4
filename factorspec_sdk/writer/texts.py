r"""The texts a free string may close at when a relation reads its value.

A free ``str`` leaf that a relation compares (``==``, ``!=``, ``in`` a constant set) has a
code variable over the spec's intern table: one code per string some relation names, and
`OTHER_CODE` for every other text. It needs no finite domain. While `OTHER_CODE` is
feasible, the writer writes the string character by character like any free string, and
what it may close at depends on the text, not only on its length:

- a *named* text (one in the intern table) closes only if its own code is feasible;
- any other text closes where `OTHER_CODE` is, at a length feasible with it.

`StringTexts` holds the answers, asked of the oracle once when the string opens (the record
before the string does not change while it is written): the named texts that are feasible
and those that are not, and whether other texts are. The lengths other texts may take are
the string's `StringLengths`, asked under ``code == OTHER_CODE``.

Two free strings a relation compares (``self.a == self.b``) share a ``same(a, b)``
variable. When the second is written, the first one's text counts as named too: closing at
it sets ``same`` true, any other text sets it false. So a string the relations make equal to
an earlier one can only copy it (certain text), and one they make different can be anything
but that text. Hand-written: no grammar library knows the relations.

Texts are values, escapes read (`factorspec_sdk.writer.escapes`): a relation's ``'a"b'`` is
the string the model writes as ``"a\"b"``, and a named text with a quote, a backslash or a
newline is written freely like any other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from factorspec_sdk.relations.layout import OTHER_TEXT
from factorspec_sdk.writer.affixes import Affixes

if TYPE_CHECKING:
    from factorspec_sdk.graph import Fact

__all__ = ["StringTexts"]


@dataclass(frozen=True, slots=True)
class StringTexts:
    """What a free string whose value a relation reads may close at.

    Attributes:
        var: the string's code variable.
        feasible: named texts the string may be (their codes are feasible).
        banned: named texts it may not be.
        other: whether a text no relation names is feasible (every ``same`` false).
        linked: the ``same`` variables of strings written before, with their texts.
        keep: whether the string's fact holds its text even where no relation names it
            (strings written after it compare with it).
        affixes: where relations read its ``startswith``/``endswith``, its affix variables
            and the lengths each profile allows (`Affixes`); None otherwise.
    """

    var: str
    feasible: frozenset[str]
    banned: frozenset[str]
    other: bool
    linked: tuple[tuple[str, str], ...] = ()
    keep: bool = False
    affixes: Affixes | None = None

    def named(self, text: str) -> bool:
        """Whether ``text`` is named: by a relation, or as the text of a linked string."""
        return text in self.feasible or text in self.banned

    def facts(self, text: str | None) -> tuple[Fact, ...]:
        """The facts of closing as ``text`` (None: a text no relation names, as padding)."""
        if text is None:
            if self.affixes is not None:
                raise ValueError("a string with affixes closes as a text, not a length")
            value = OTHER_TEXT
        else:
            value = text if self.keep or self.named(text) else OTHER_TEXT
        code: tuple[Fact, ...] = ((self.var, value), *((v, text == t) for v, t in self.linked))
        if self.affixes is not None and text is not None:
            return (*code, *self.affixes.facts(text))
        return code

    def constant_chars(self) -> frozenset[str]:
        """The characters of every named text and affix constant.

        A character outside them makes a text no relation names, with no affix beyond
        those of its ends.
        """
        affixes = frozenset() if self.affixes is None else self.affixes.constant_chars()
        return frozenset("".join(self.feasible | self.banned)) | affixes

    def extending(self, written: str) -> list[str]:
        """The feasible named texts that start with ``written``, shortest first."""
        found = (t for t in self.feasible if t.startswith(written))
        return sorted(found, key=lambda t: (len(t), t))

    def named_from(self, written: str) -> list[str]:
        """The named texts, feasible or banned, that start with ``written``."""
        return sorted(t for t in self.feasible | self.banned if t.startswith(written))

    def banned_at(self, written: str, length: int) -> list[str]:
        """The banned texts of ``length`` characters that start with ``written``."""
        return sorted(t for t in self.banned if len(t) == length and t.startswith(written))
