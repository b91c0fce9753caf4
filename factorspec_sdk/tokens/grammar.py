"""Grammar values on the token level: llguidance generates what no relation reads.

A writer `GrammarValue` is a value whose JSON Schema the writer does not walk itself: a
float, a Decimal, a date, a UUID, a union, a dict, a tuple, a recursive model, a string with
a pattern or a format, ... (`factorspec_sdk.relations.layout.GrammarLayout`). It is decoded as
one *grammar segment*, together with the grammar values that follow it with only forced
layout text between them: llguidance's matcher for the Lark grammar ``T0 v0 T1 v1 ... Tn``,
where each ``vi`` is a value's schema (``%json``, with the writer's separators), ``T0`` is the
layout text forced since the previous choice, ``Ti`` the text between two values and ``Tn``
the text forced after the last one, up to the writer's next choice point. So a token may span
a value's start or end and the text beside it (`` [``, ``5,``, ``", "``), as the canonical
tokenization has it; a record of grammar values only is one segment.

llguidance does the grammar work: masks, the forced (certain) tokens inside and after the
value, the JSON string grammar with every escape, formats, patterns, numbers, ``$ref``
recursion. Written here by hand is only what llguidance cannot know:

- where the segment ends: once its suffix is consumed, decoding resumes at the writer's next
  choice point (a trie of the oracle's options, another grammar value, or the record's end).
  A value with no forced text after it that can still grow (a number as the item of a list
  whose length a relation reads) offers both its continuations and the choice after it;
- rollback for speculative decoding: a cursor is the segment plus the tokens consumed inside
  it, and the segment's single matcher is moved to a cursor by llguidance's ``rollback`` and
  ``consume_tokens``;
- the closing walk (`GrammarSegment.closing`), for the token budget: one particular way to
  finish the segment from a cursor, token by token. llguidance does not say how many tokens
  the shortest completion of a schema takes; the walk takes the tokens llguidance forces
  (``compute_ff_tokens``: forced text, tokenized canonically), else, inside a string or a
  number, the shortest completion one of the segment's guides proposes
  (`factorspec_sdk.writer.closing_guides`: a pattern's or a format's automaton, a length, a
  property name, an enumerated text, a number's range) that llguidance accepts, as
  single-byte tokens; where a value starts and nothing may close, the first of
  `factorspec_sdk.writer.closing.LITERALS` (``0``, ``""``, ``[]``, ``{}``, ``null``, ...)
  that llguidance takes as a whole value, so a value that may be empty or null never nests
  further; elsewhere the first single-byte token it allows in a fixed order (``}`` and ``]``
  first, so what is open closes, then the shortest values). Every token of it is one the
  masks allow. `factorspec_sdk.writer.closing.closing_bound` bounds its length in bytes (so
  in tokens) from any prefix of a value: one number for a value of bounded nesting, and for
  one of unbounded nesting a number per array or object open in it (`GrammarSegment.nesting`
  counts them, token by token).

Cursors are immutable and cheap; the segment holds the matcher behind a lock (the planner's
prefetch thread may create segments while the decoding thread masks).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from factorspec_sdk.errors import GenerationError
from factorspec_sdk.relations.layout import GRAMMAR_OPTIONS, path_name
from factorspec_sdk.tokens.json_longest import longest_bytes
from factorspec_sdk.tokens.json_rest import LarkPart, value_rest
from factorspec_sdk.tokens.json_scan import (
    ESCAPE_ORDER,
    IN_ESCAPE,
    IN_NUMBER,
    IN_STRING,
    IN_UTF8,
    STRING_ORDER,
    UTF8_ORDER,
    VALUE_ORDER,
    JsonScan,
    Lex,
    lex,
    lex_start,
    lex_value,
)
from factorspec_sdk.tokens.vocab import TokenizerInfo
from factorspec_sdk.writer.closing import LITERALS
from factorspec_sdk.writer.closing_guides import ClosingGuides, closing_guides

if TYPE_CHECKING:
    from factorspec_sdk.writer.automaton import GrammarValue, WriterState

__all__ = [
    "GrammarCursor",
    "GrammarSegment",
    "GrammarStep",
    "GrammarTables",
    "lark_grammar",
    "lex_value",
]

TokenIds = npt.NDArray[np.int64]


def lark_grammar(texts: Sequence[str], schemas: Sequence[str], lead: LarkPart | None = None) -> str:
    """The Lark grammar of a segment: ``texts[0] schemas[0] texts[1] ... texts[-1]``.

    With ``lead``, its expression first (the rest of a value written in part, `value_rest`).
    """
    if len(texts) != len(schemas) + 1:
        raise ValueError("a segment has one more text than values")
    rules: list[str] = []
    parts: list[str] = []
    if lead is not None and lead.expr:
        parts.append(lead.expr)
    if lead is not None:
        rules.extend(lead.rules)
    for i, text in enumerate(texts):
        if text:
            parts.append(f"T{i}")
            rules.append(f"T{i}: " + json.dumps(text, ensure_ascii=False))
        if i < len(schemas):
            body: dict[str, Any] = json.loads(schemas[i])
            if isinstance(body, dict):
                body = {**body, "x-guidance": GRAMMAR_OPTIONS}
            parts.append(f"v{i}")
            rules.append(f"v{i}: %json " + json.dumps(body, ensure_ascii=False))
    return "\n".join(["start: " + " ".join(parts), *rules]) + "\n"


_ENCODER_MEMO = 4096
"""Texts the encoder remembers before it starts afresh."""


class _Encoder:
    """The canonical encoder, in the shape llguidance's ``TokenizerWrapper`` calls."""

    def __init__(self, tok: TokenizerInfo) -> None:
        self.eos_token_id = tok.eos_ids[0] if tok.eos_ids else len(tok.vocab) - 1
        self.bos_token_id = None
        self.tokens = list(tok.vocab)
        self.special_token_ids = sorted(tok.special_ids)
        self._encode = tok.encode
        self._memo: dict[str, list[int]] = {}
        """Texts llguidance asked for (the forced text of a segment, asked at every mask)."""

    def __call__(self, text: str | bytes) -> list[int]:
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        hit = self._memo.get(text)
        if hit is None:
            hit = self._encode(text)
            if len(self._memo) >= _ENCODER_MEMO:
                self._memo.clear()
            self._memo[text] = hit
        return list(hit)


class GrammarTables:
    """llguidance's tokenizer for one vocabulary, and its compiled segment grammars.

    Matchers for a grammar are compiled once and copied for each segment
    (``LLMatcher.deep_copy`` is a few microseconds; compiling takes milliseconds).
    """

    def __init__(self, tok: TokenizerInfo, *, max_grammars: int = 512) -> None:
        import llguidance

        self._llg = llguidance
        self.tok = tok
        self.tokenizer = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_Encoder(tok)))
        self.vocab_size = len(tok.vocab)
        self.special = np.asarray(sorted(tok.special_ids), dtype=np.int64)
        self.byte_ids: dict[int, int] = {}
        """The token of each single byte the vocabulary has one for (the closing walk's)."""
        self.most_opens = 0
        """The most ``[`` and ``{`` one token holds: how much deeper one token can nest."""
        for i, raw in enumerate(tok.vocab):
            if i in tok.special_ids:
                continue
            if len(raw) == 1:
                self.byte_ids.setdefault(raw[0], i)
            self.most_opens = max(self.most_opens, raw.count(b"[") + raw.count(b"{"))
        plain = (1 << self.vocab_size) - 1
        for i in tok.special_ids:
            plain &= ~(1 << i)
        self._plain_bits = plain
        self._literals: list[list[int]] | None = None
        self._templates: OrderedDict[tuple[tuple[str, ...], tuple[str, ...]], Any] = OrderedDict()
        self._max = max_grammars
        self._lock = threading.Lock()

    def matcher(self, texts: tuple[str, ...], schemas: tuple[str, ...], where: str) -> Any:
        """A fresh matcher for the segment ``texts[0] schemas[0] ... texts[-1]``.

        Raises:
            GenerationError: llguidance cannot compile the grammar (the layout checks each
                schema alone when the spec compiles, so this names an internal fault).
        """
        key = (texts, schemas)
        with self._lock:
            template = self._templates.get(key)
            if template is not None:
                self._templates.move_to_end(key)
                return template.deep_copy()
        grammar = self._llg.LLMatcher.grammar_from_lark(lark_grammar(texts, schemas))
        template = self._llg.LLMatcher(self.tokenizer, grammar, log_level=0)
        if template.is_error():
            raise GenerationError(
                f"{where}: llguidance rejects its grammar: {template.get_error()}"
            )
        with self._lock:
            self._templates[key] = template
            if len(self._templates) > self._max:
                self._templates.popitem(last=False)
        return template.deep_copy()

    def walk_token(self, bitmask: bytes, order: Sequence[int], *, single: bool = True) -> int:
        """The closing walk's token at an llguidance bitmask (-1 when there is none).

        The one token allowed (forced text; with ``single``), else the first token of
        ``order`` allowed; special tokens (EOS) left out. Bit tests on the mask, without
        listing its ids.
        """
        if single:
            bits = int.from_bytes(bitmask, "little") & self._plain_bits
            if bits.bit_count() == 1:
                return bits.bit_length() - 1
        for t in order:
            if bitmask[t >> 3] >> (t & 7) & 1:
                return t
        return -1

    @property
    def literals(self) -> list[list[int]]:
        """`LITERALS` as the closing walk tries them, in order.

        Each in its canonical tokens, then (where they differ) in single-byte tokens.
        """
        if self._literals is None:
            found: list[list[int]] = []
            for text in LITERALS:
                for ids in (self.tok.encode(text), self.byte_tokens(text.encode("ascii"))):
                    if ids and ids not in found:
                        found.append(ids)
            self._literals = found
        return self._literals

    def byte_tokens(self, data: bytes) -> list[int] | None:
        """``data`` as single-byte tokens (None when the vocabulary lacks one of its bytes)."""
        ids = [self.byte_ids.get(b, -1) for b in data]
        return None if -1 in ids else ids

    def ids(self, bitmask: bytes) -> TokenIds:
        """Allowed token ids of an llguidance bitmask, special tokens (EOS) left out."""
        bits = np.unpackbits(np.frombuffer(bitmask, dtype=np.uint8), bitorder="little")
        bits = bits[: self.vocab_size]
        if len(self.special):
            bits[self.special] = 0
        return np.flatnonzero(bits).astype(np.int64)


_TABLES: dict[int, tuple[TokenizerInfo, GrammarTables]] = {}
_TABLES_LOCK = threading.Lock()


def grammar_tables(tok: TokenizerInfo) -> GrammarTables:
    """The `GrammarTables` of a tokenizer (one per tokenizer object, built on first use)."""
    with _TABLES_LOCK:
        hit = _TABLES.get(id(tok))
        if hit is not None and hit[0] is tok:
            return hit[1]
    tables = GrammarTables(tok)
    with _TABLES_LOCK:
        if len(_TABLES) >= 8:
            _TABLES.pop(next(iter(_TABLES)))
        _TABLES[id(tok)] = (tok, tables)
    return tables


@dataclass(frozen=True, slots=True)
class GrammarStep:
    """What a grammar segment allows after some of its tokens.

    Attributes:
        ids: tokens that continue the segment (sorted).
        accepting: the segment is complete here.
        stopped: nothing can follow inside the segment (complete, and the value cannot grow).
    """

    ids: TokenIds
    accepting: bool
    stopped: bool

    def has(self, token: int) -> bool:
        """Whether ``token`` continues the segment."""
        i = int(np.searchsorted(self.ids, token))
        return i < len(self.ids) and int(self.ids[i]) == token


class GrammarSegment:
    """A run of grammar values of one record being decoded: its matcher and where it leads.

    Attributes:
        values: the writer's grammar values, in order.
        texts: the forced layout text before, between and after them (one more than values),
            inside the grammar.
        exit_state: the writer state after the last text (a choice point, or the record's end).
        owe: the end of the last text left to the choice after the segment (a space, so
            `` true`` stays one token), or "".
        where: the values' paths, for messages.
    """

    def __init__(
        self,
        tables: GrammarTables,
        values: Sequence[GrammarValue],
        texts: Sequence[str],
        exit_state: WriterState,
        owe: str = "",
    ) -> None:
        self.values = tuple(values)
        self.texts = tuple(texts)
        self.exit_state = exit_state
        self.owe = owe
        self.where = ", ".join(path_name(v.path) or "<root>" for v in self.values)
        self._tables = tables
        self.schemas = tuple(v.node.schema for v in self.values)
        """Each value's JSON Schema, in order."""
        self._matcher = tables.matcher(self.texts, self.schemas, self.where)
        self._guides: ClosingGuides | None = None
        self._orders: dict[int, list[int]] = {}
        self._at: tuple[int, ...] = ()
        self._steps: OrderedDict[tuple[int, ...], GrammarStep] = OrderedDict()
        self._lock = threading.Lock()
        self._text_bytes = tuple(len(t.encode("utf-8")) for t in self.texts)
        self._lexed: tuple[int, ...] = ()
        self._lex_states: list[Lex] = [lex_start(self._text_bytes[0])]
        self._lex_lock = threading.Lock()
        self._most_bytes: int | None = None  # -1: unbounded
        self._rest_memo: tuple[tuple[int, ...], str | None] | None = None  # the last asked

    def step(self, tokens: tuple[int, ...]) -> GrammarStep:
        """The segment after ``tokens`` (a few recent answers are kept)."""
        with self._lock:
            hit = self._steps.get(tokens)
            if hit is not None:
                return hit
            self._goto(tokens)
            m = self._matcher
            mask = m.compute_bitmask()
            if m.is_error():  # a lexer or parser limit: the matcher stops, but not complete
                raise GenerationError(f"{self.where}: llguidance failed here: {m.get_error()}")
            out = GrammarStep(self._tables.ids(mask), bool(m.is_accepting()), bool(m.is_stopped()))
            self._steps[tokens] = out
            if len(self._steps) > 8:
                self._steps.popitem(last=False)
            return out

    def layout_left(self, tokens: tuple[int, ...]) -> str | None:
        """The layout text still to write before the next value after ``tokens``, or None.

        ``""`` where ``tokens`` end right where a value starts; None inside a value (or a
        character of the text), and once the segment's last text is written.
        """
        k, skip, *_ = self._lex_at(tokens)
        if k >= len(self.values) and not skip:
            return None
        if not skip and len(self._value_bytes(tokens)):
            return None
        text = self.texts[min(k, len(self.values))].encode("utf-8")
        try:
            return text[len(text) - skip :].decode("utf-8")
        except UnicodeDecodeError:
            return None

    def rest_grammar(self, tokens: tuple[int, ...]) -> str | None:
        """The Lark grammar of the segment's rest after ``tokens``, or None.

        In the layout text before a value (`layout_left`) it is the segment's own from
        there: the rest of that text, then the values and texts as they are; its language is
        the segment's after ``tokens``, so llguidance allows the same tokens under both.
        Inside a value it is the rest of that value as any JSON with the writer's separators
        (`factorspec_sdk.tokens.json_rest.value_rest`), then the segment's texts and values
        after it as they are: a superset of the segment's rest, which an engine that decodes
        the rest as one request (`factorspec_sdk.drafter.segments`) may leave at a token the
        masks then refuse. None inside an escape or a UTF-8 character, and once the segment
        is written.
        """
        memo = self._rest_memo
        if memo is not None and memo[0] == tokens:
            return memo[1]
        grammar = self._rest_grammar(tokens)
        self._rest_memo = (tokens, grammar)
        return grammar

    def _rest_grammar(self, tokens: tuple[int, ...]) -> str | None:
        layout = self.layout_left(tokens)
        k = min(self._lex_at(tokens)[0], len(self.values))
        if layout is not None:
            return lark_grammar((layout, *self.texts[k + 1 :]), self.schemas[k:])
        if k >= len(self.values):
            return None
        lead = value_rest(self._value_bytes(tokens))
        if lead is None:
            return None
        return lark_grammar(self.texts[k + 1 :], self.schemas[k + 1 :], lead)

    def most_bytes_left(self, tokens: tuple[int, ...]) -> int | None:
        """The most bytes the segment can still write after ``tokens``, or None if unbounded.

        Its texts and each value's longest text (`factorspec_sdk.tokens.json_longest`), less
        what ``tokens`` wrote: a token holds at least one byte, so it bounds the tokens a
        request for the segment's rest can need.
        """
        if self._most_bytes is None:
            longest = [longest_bytes(json.loads(s)) for s in self.schemas]
            known = [n for n in longest if n is not None]
            total = sum(self._text_bytes) + sum(known)
            self._most_bytes = total if len(known) == len(longest) else -1
        if self._most_bytes < 0:
            return None
        written = sum(len(self._tables.tok.vocab[t]) for t in tokens)
        return max(0, self._most_bytes - written)

    def _value_bytes(self, tokens: tuple[int, ...]) -> bytes:
        """The bytes of the value ``tokens`` leave incomplete (from the segment's text on)."""
        k, skip, *_, ended = self._lex_at(tokens)
        if skip or k >= len(self.values):
            return b""
        data = b"".join(self._tables.tok.vocab[t] for t in tokens)
        return data[ended + self._text_bytes[k] :]

    def closing(self, tokens: tuple[int, ...], limit: int) -> list[int] | None:
        """The closing walk's tokens from ``tokens`` to the segment's end (see the module).

        It ends where the segment first accepts (all its text written). ``None`` when the
        vocabulary lacks a byte the walk needs, or after ``limit`` tokens.
        """
        with self._lock:
            self._goto(tokens)
            m = self._matcher.deep_copy()
        tables = self._tables
        vocab = tables.tok.vocab
        scan = JsonScan()
        scan.feed(b"".join(vocab[t] for t in tokens))
        out: list[int] = []
        while not m.is_accepting():
            if len(out) >= limit:
                return None
            run = m.compute_ff_tokens()[: limit - len(out)]
            if not run:
                # one token at a time: where the rest of a completion is forced, the mask
                # allows only its canonical tokens (``",`` rather than ``"``), taken next round
                mask = m.compute_bitmask()
                plan = self._completion(m, scan, mask)
                token = plan[0] if plan and mask[plan[0] >> 3] >> (plan[0] & 7) & 1 else -1
                if token < 0:
                    token = tables.walk_token(mask, self._order(scan))
                if token < 0:
                    return None
                run = [token]
            if not m.consume_tokens(run):
                raise GenerationError(f"{self.where}: llguidance refused a token it allowed")
            out.extend(run)
            scan.feed(b"".join(vocab[t] for t in run))
        return out

    def _completion(self, m: Any, scan: JsonScan, mask: bytes) -> list[int]:
        """The shortest completion of what is under way that llguidance takes.

        In a string or a number, each guide (`factorspec_sdk.writer.closing_guides`) proposes one;
        they are tried shortest first, as single-byte tokens (``validate_tokens``; the walk
        takes the first if the mask allows it). Where a value starts and no container may
        close, the first of `LITERALS` llguidance takes as a whole value (``0``, ``""``,
        ``[]``, ``{}``, ``null``, ...), so a value that may be empty or null never nests
        further. ``[]`` elsewhere, when the number may end here, or when no completion is
        allowed (the walk then goes by its byte order).
        """
        guides = self.guides
        tables = self._tables
        if scan.value_expected:
            if tables.walk_token(mask, self._closers, single=False) >= 0:
                return []  # the byte order closes the open array or object first
            for literal in tables.literals:
                if m.validate_tokens(literal) == len(literal) and self._ends(m, literal):
                    return literal
            return []
        content = scan.content() if scan.kind == IN_STRING else None
        if content is not None:
            for text in guides.string_completions(content):
                ids = tables.byte_tokens((text + '"').encode("utf-8"))
                if ids is not None and m.validate_tokens(ids) == len(ids):
                    return ids
        elif scan.kind == IN_NUMBER:
            for text in guides.number_completions(scan.number()):
                ids = tables.byte_tokens(text.encode("ascii"))
                if ids is not None and m.validate_tokens(ids) == len(ids) and self._ends(m, ids):
                    return ids  # [] when complete: the structural order ends it
        return []

    def _ends(self, m: Any, ids: list[int]) -> bool:
        """Whether ``ids`` (which llguidance takes) end a value: what may follow one is next."""
        probe = m.deep_copy() if ids else m
        if ids:
            probe.consume_tokens(ids)
        return bool(
            probe.is_accepting()
            or self._tables.walk_token(probe.compute_bitmask(), self._enders, single=False) >= 0
        )

    @property
    def most_opens(self) -> int:
        """The most arrays and objects one token of the vocabulary can open."""
        return self._tables.most_opens

    @property
    def guides(self) -> ClosingGuides:
        """The closing walk's guides for this segment's values (built on first use)."""
        if self._guides is None:
            self._guides = closing_guides(tuple(v.node.schema for v in self.values))
        return self._guides

    def _order(self, scan: JsonScan) -> list[int]:
        """The single-byte tokens the walk tries where no guide completes, in order."""
        kind = scan.kind
        hit = self._orders.get(kind)
        if hit is not None:
            return hit
        byte_ids = self._tables.byte_ids
        if kind == IN_STRING:
            order = STRING_ORDER
        elif kind == IN_ESCAPE:
            order = ESCAPE_ORDER
        elif kind == IN_UTF8:
            order = UTF8_ORDER
        else:
            firsts = bytes(t.encode("utf-8")[0] for t in self.texts[1:] if t)
            order = b"}]" + firsts + (b"," if kind == IN_NUMBER else b"") + VALUE_ORDER
        hit = self._orders[kind] = [byte_ids[b] for b in dict.fromkeys(order) if b in byte_ids]
        return hit

    @property
    def _enders(self) -> list[int]:
        """Single-byte tokens that may follow a complete value."""
        firsts = bytes(t.encode("utf-8")[0] for t in self.texts[1:] if t)
        return [self._tables.byte_ids[b] for b in b",}]" + firsts if b in self._tables.byte_ids]

    @property
    def _closers(self) -> list[int]:
        """The single-byte tokens that close an array or an object."""
        return [self._tables.byte_ids[b] for b in b"}]" if b in self._tables.byte_ids]

    def value_index(self, tokens: tuple[int, ...]) -> int:
        """The index of the first value ``tokens`` leave incomplete (``len(values)`` if none).

        Lexed value by value (`lex`): each value's end found by the JSON lexer and the text
        after it skipped.
        """
        return min(self._lex_at(tokens)[0], len(self.values))

    def nesting(self, tokens: tuple[int, ...]) -> tuple[int, int]:
        """The value ``tokens`` leave incomplete (as `value_index`) and its depth.

        The depth is how many arrays and objects are open in that value (0 while the layout
        text before it is written).
        """
        k, skip, depth, *_ = self._lex_at(tokens)
        n = len(self.values)
        return (k, depth) if k < n and not skip else (min(k, n), 0)

    def in_string(self, tokens: tuple[int, ...]) -> bool:
        """Whether ``tokens`` end inside a string of a value, ready for its next character.

        Not inside the layout text (its keys' strings), not right after a backslash or
        inside a unicode escape, not inside a UTF-8 character: the bytes are lexed value by
        value, each value's end found by the JSON lexer and the text after it skipped.
        """
        k, skip, _, in_str, escape, utf8, *_ = self._lex_at(tokens)
        return k < len(self.values) and not skip and bool(in_str) and not escape and not utf8

    def _lex_at(self, tokens: tuple[int, ...]) -> Lex:
        """Where the segment's bytes stand after ``tokens`` (see `lex`).

        Kept per token of the last tokens asked (decoding asks them one token further, or
        a few back after a rejected draft), so each token's bytes are read once.
        """
        vocab = self._tables.tok.vocab
        with self._lex_lock:
            done, states = self._lexed, self._lex_states
            n = len(done)
            if len(tokens) >= n and tokens[:n] == done:
                k = n
            else:  # the longest common prefix, by halves
                lo, hi = 0, min(n, len(tokens))
                while lo < hi:
                    mid = (lo + hi + 1) // 2
                    if tokens[:mid] == done[:mid]:
                        lo = mid
                    else:
                        hi = mid - 1
                k = lo
                del states[k + 1 :]
            state = states[k]
            for t in tokens[k:]:
                state = lex(state, vocab[t], self._text_bytes)
                states.append(state)
            self._lexed = tokens
            return state

    def _goto(self, tokens: tuple[int, ...]) -> None:
        at, m = self._at, self._matcher
        k = 0
        for a, b in zip(at, tokens, strict=False):
            if a != b:
                break
            k += 1
        if len(at) > k and not m.rollback(len(at) - k):
            raise GenerationError(f"{self.where}: llguidance could not roll back: {m.get_error()}")
        if len(tokens) > k and not m.consume_tokens(list(tokens[k:])):
            raise GenerationError(
                f"{self.where}: a token outside the grammar reached the matcher: {m.get_error()}"
            )
        self._at = tokens


@dataclass(frozen=True, slots=True)
class GrammarCursor:
    """Inside a grammar segment, after ``tokens`` of it."""

    segment: GrammarSegment
    tokens: tuple[int, ...] = ()

    def step(self) -> GrammarStep:
        """What the segment allows here."""
        return self.segment.step(self.tokens)
