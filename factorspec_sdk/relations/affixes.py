"""What ``startswith``/``endswith`` constants say of a text: its affix profile.

One copy for both sides of the contract: the compiler ties a free str leaf's affix
variables to its code and length with these profiles (`compiler.codes.affix_links`), and
the writer decides them from the text it writes (`factorspec_sdk.writer.affixes`).

An affix is ``(method, constant)``, ``method`` being ``startswith`` or ``endswith``; a
profile is one Bool per affix, in order.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["Affix", "open_profile", "profile"]

Affix = tuple[str, str]
"""``("startswith", "EU-")`` or ``("endswith", ".org")``."""


def profile(text: str, affixes: Sequence[Affix]) -> tuple[bool, ...]:
    """The affixes ``text`` has."""
    return tuple(bool(getattr(text, method)(c)) for method, c in affixes)


def open_profile(pre: str, suf: str, affixes: Sequence[Affix]) -> tuple[bool, ...]:
    """The affixes of ``pre + X + suf``, ``X`` one or more characters no constant has.

    Such a text starts with exactly the constant prefixes of ``pre`` and ends with exactly
    the constant suffixes of ``suf``.
    """
    return tuple(
        pre.startswith(c) if method == "startswith" else suf.endswith(c) for method, c in affixes
    )
