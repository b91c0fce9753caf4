"""The canonical JSON writer: a character automaton over the layout that consults the oracle."""

from factorspec_sdk.writer.automaton import FreeString as FreeString
from factorspec_sdk.writer.automaton import Option as Option
from factorspec_sdk.writer.automaton import Writer as Writer
from factorspec_sdk.writer.automaton import WriterState as WriterState

__all__ = ["FreeString", "Option", "Writer", "WriterState"]
