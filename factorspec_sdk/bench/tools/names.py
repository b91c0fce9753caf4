"""Choosing names from a comma list on the command line (the categories, the methods)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["parse_names"]


def parse_names(spec: str, known: Sequence[str], what: str) -> list[str]:
    """Names of ``known`` from a comma list (``all``: every one), in ``known``'s order.

    Args:
        spec: the comma list, e.g. ``"simple,live_simple"`` or ``"all"``.
        known: every name, in the order the result keeps.
        what: what a name is (``"category"``), for the messages.

    Raises:
        ValueError: an unknown name (the message lists the known ones), or none chosen.
    """
    chosen: set[str] = set()
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if item == "all":
            chosen.update(known)
        elif item in known:
            chosen.add(item)
        else:
            raise ValueError(f"unknown {what} {item!r}; known: all, {', '.join(known)}")
    if not chosen:
        raise ValueError(f"no {what} chosen")
    return [name for name in known if name in chosen]
