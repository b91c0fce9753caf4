"""The benchmarks' progress bar: items yielded one by one under a rich bar on stderr."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

__all__ = ["tracked"]

T = TypeVar("T")


def tracked(items: Sequence[T], describe: Callable[[T], str], *, progress: bool) -> Iterator[T]:
    """Yield ``items``; with ``progress``, under a bar (count and time) naming the current one.

    The bar (rich, on stderr) stays on the screen when the loop ends. Without ``progress``
    the items are yielded plainly (a run without a terminal logs lines instead).
    """
    if not progress:
        yield from items
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    columns = (BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress("{task.description}", *columns, transient=False) as bar:
        task = bar.add_task("starting the workers", total=len(items))
        for item in items:
            bar.update(task, description=describe(item))
            yield item
            bar.advance(task)
