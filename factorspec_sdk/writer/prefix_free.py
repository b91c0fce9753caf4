"""The options at a writer's choice point made prefix-free and non-empty.

`factorspec_sdk.writer.automaton.Writer.choices` hands out options whose texts no other
option's text begins, each non-empty: an option is joined to the layout text after it, an
empty one (an optional key left out, a union's branch) to what follows it, and one whose
text begins another's to the choices after it (`prefix_free`).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from typing import TYPE_CHECKING

from factorspec_sdk.writer.state import FreeString, GrammarValue, Option

if TYPE_CHECKING:
    from factorspec_sdk.writer.automaton import Writer

__all__ = ["non_empty", "prefix_free"]


def prefix_free(writer: Writer, options: list[Option]) -> list[Option]:
    """``options`` with each one whose text begins another's joined to what follows it.

    A list item is followed by a choice (another item or the end), not by forced text,
    so item values ``6`` and ``63`` would end where the other goes on; ``6`` becomes
    ``6, `` and ``6]`` (the choices after it, with their forced text), which no other
    option's text begins. An option followed by forced text is first joined to that
    text alone (a union's branches, all ``{"kind": `` up to their tags, part there, even
    where a free string follows). Options whose texts are already prefix-free are kept.
    """
    for _ in range(8):  # each round joins one more choice; real clashes end in one
        texts = sorted(o.text for o in options)
        clash = {a for a, b in pairwise(texts) if b.startswith(a)}
        if not clash:
            return options
        joined: list[Option] = []
        for o in options:
            if o.text not in clash:
                joined.append(o)
                continue
            forced, at = writer.forced(o.state)
            if forced and not at.done:  # the forced text may tell them apart already
                joined.append(Option(o.text + forced, at))
                continue
            if at.done:
                if not forced:
                    raise RuntimeError(f"option {o.text!r} ends the record, begins another")
                joined.append(Option(o.text + forced, at))
                continue
            sub = writer.choices(at)
            if isinstance(sub, FreeString | GrammarValue):
                raise RuntimeError(f"option {o.text!r} begins another and a free value follows")
            joined.extend(Option(o.text + forced + x.text, x.state) for x in sub)
        options = joined
    raise RuntimeError("option texts stay not prefix-free")


def non_empty(writer: Writer, o: Option) -> Iterator[Option]:
    """``o`` joined to the layout text after it; if still empty, to what follows it."""
    suffix, after = writer.layout_text(o.state)
    text = o.text + suffix
    if text:
        yield Option(text, after)
        return
    forced, at = writer.forced(after)
    if forced:
        yield Option(forced, at)
        return
    sub = writer.choices(at)
    if isinstance(sub, FreeString | GrammarValue):
        raise RuntimeError("an empty option cannot be followed by a free value")
    yield from sub
