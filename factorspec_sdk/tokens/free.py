r"""Free strings at the token level: vocabulary tables built once per tokenizer, and masks.

A free string's JSON text is written token by token, escapes included
(`factorspec_sdk.writer.escapes`); the writer says what the value may become
(`factorspec_sdk.writer.state.FreeString`). The masks are vocabulary-wide numpy arrays:

- *plain* tokens (no quote, no backslash, no control character) add their characters to the
  value as they are; they are the bulk of a vocabulary, and are masked by length and by the
  named texts and affixes a relation reads, as arrays (`FreeTables`);
- *plain closers* (a quote with plain text before it) close the string;
- every other token that goes on inside a string, from each class of pending escape
  (`ESCAPE_CLASSES`: between characters, after ``\``, after ``\u0``, inside a surrogate
  pair, ...), is an *escape move* (`EscapeMoves`): its characters added, the class of the
  escape pending after it, and whether it closes the string. They are built per class on
  first use: few tokens hold a backslash, and inside ``\u`` only those that begin with hex
  digits go on.

A token may end inside an escape; that escape then counts as one more character, whatever it
becomes. A vocabulary that cannot spell every escape one character at a time (no token for
``\``, ``u`` or a hex digit) writes none: then every pending escape can be finished, and a
pending escape can become any character, as `FreeString.can_finish` assumes.

Hand-written for the reasons `factorspec_sdk.tokens.plan` gives: the feasible lengths and
texts come from the oracle, which no grammar library knows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from factorspec_sdk.tokens.vocab import TokenIds, TokenizerInfo
from factorspec_sdk.writer.escapes import ESCAPE_CLASSES, class_of, decode

if TYPE_CHECKING:
    from factorspec_sdk.writer.state import FreeString

__all__ = ["EscapeMoves", "FreeMaskStats", "FreeMasks", "FreeTables", "free_tables"]

_SPELLING = frozenset('\\u0123456789abcdefABCDEF"/bfnrt')
"""The characters escapes are spelled with: each needs a token of its own for escapes."""


@dataclass(frozen=True, slots=True)
class EscapeMoves:
    """The tokens that go on from one class of pending escape, plain tokens aside.

    Attributes:
        ids: the tokens, ascending.
        adds: per token, characters it adds to the value (a pending escape counts as one).
        ends: per token, the class of the escape pending after it; -1 where it closes.
        texts: per token, its text.
        after: per token, its text after the closing quote (``""`` where it does not close).
    """

    ids: TokenIds
    adds: npt.NDArray[np.int64]
    ends: npt.NDArray[np.int64]
    texts: tuple[str, ...]
    after: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FreeTables:
    """Vocabulary tables for free strings, built once per tokenizer.

    Attributes:
        safe_ids: plain tokens: text a JSON string holds as it is (no quote, backslash or
            control character).
        safe_chars: characters of each plain token.
        safe_text: text of each plain token.
        quote_ids: plain closers: tokens with a quote and plain text before it.
        quote_before: text of each plain closer before its quote.
        quote_after: text of each plain closer after its quote.
        by_text: the plain tokens of each text.
        by_raw: every token of each text (for spelling a JSON text that holds escapes).
        texts: each token's text (None where its bytes are not whole UTF-8).
        escapes: whether the vocabulary spells escapes (see the module).
        finish: per class of pending escape, the fewest tokens that finish it and add no
            character (0 between characters).
        finishers: per class, the tokens that go on inside the escape and add no character,
            those on the shortest way to finish it first.
    """

    safe_ids: TokenIds
    safe_chars: npt.NDArray[np.int64]
    safe_text: tuple[str, ...]
    quote_ids: TokenIds
    quote_before: tuple[str, ...]
    quote_after: tuple[str, ...]
    by_text: Mapping[str, tuple[int, ...]]
    by_raw: Mapping[str, tuple[int, ...]]
    texts: tuple[str | None, ...]
    escapes: bool
    finish: tuple[int, ...]
    finishers: tuple[tuple[int, ...], ...]
    _moves: dict[int, EscapeMoves] = field(default_factory=dict, compare=False, repr=False)
    _foreign: dict[frozenset[str], npt.NDArray[np.bool_]] = field(
        default_factory=dict, compare=False, repr=False
    )

    @property
    def after_texts(self) -> frozenset[str]:
        """The texts plain closers have after their quote (``""``, ``,``, ``]``, ``", "``...)."""
        return frozenset(self.quote_after)

    def foreign(self, chars: frozenset[str]) -> npt.NDArray[np.bool_]:
        """Per plain token: whether none of its characters is in ``chars`` (read-only).

        Built on first use per set of characters, then kept with the tokenizer's tables
        (every request of a spec asks the same sets: its strings' affix constants).
        """
        hit = self._foreign.get(chars)
        if hit is None:
            hit = np.asarray([not (set(t) & chars) for t in self.safe_text], dtype=bool)
            hit.flags.writeable = False
            self._foreign[chars] = hit
        return hit

    def ids_of(self, texts: Iterable[str]) -> TokenIds:
        """The plain tokens whose text is one of ``texts``."""
        ids = [t for text in texts for t in self.by_text.get(text, ())]
        return np.asarray(sorted(set(ids)), dtype=np.int64)

    def toward(self, texts: Iterable[str], n: int) -> TokenIds:
        """The plain tokens that write on toward a text of ``texts``.

        Each writes a non-empty part of such a text right after its first ``n`` characters.
        """
        return self.ids_of({t[n:k] for t in texts for k in range(n + 1, len(t) + 1)})

    def moves(self, escape: str) -> EscapeMoves:
        """The escape moves from ``escape``'s class (built on first use, then kept)."""
        k = class_of(escape)
        hit = self._moves.get(k)
        if hit is None:
            hit = self._moves[k] = _escape_moves(self, k)
        return hit

    def spell(self, text: str) -> list[int] | None:
        """Tokens that write the JSON text ``text``, longest first; None if none can."""
        out: list[int] = []
        i = 0
        while i < len(text):
            j = next((j for j in range(len(text), i, -1) if text[i:j] in self.by_raw), None)
            if j is None:
                return None
            out.append(self.by_raw[text[i:j]][0])
            i = j
        return out


def _plain(text: str) -> bool:
    return not any(c in '"\\' or ord(c) < 0x20 for c in text)


@lru_cache(maxsize=8)
def free_tables(tok: TokenizerInfo) -> FreeTables:
    """The free-string tables of ``tok`` (built once per tokenizer)."""
    safe_ids: list[int] = []
    safe_chars: list[int] = []
    safe_text: list[str] = []
    q_ids: list[int] = []
    q_before: list[str] = []
    q_after: list[str] = []
    texts: list[str | None] = []
    by_raw: dict[str, tuple[int, ...]] = {}
    for i, raw in enumerate(tok.vocab):
        text: str | None = None
        if raw and i not in tok.special_ids:
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = None
        texts.append(text)
        if text is None:
            continue
        by_raw[text] = (*by_raw.get(text, ()), i)
        q = text.find('"')
        if q < 0 and _plain(text):
            safe_ids.append(i)
            safe_chars.append(len(text))
            safe_text.append(text)
        elif q >= 0 and _plain(text[:q]):
            q_ids.append(i)
            q_before.append(text[:q])
            q_after.append(text[q + 1 :])
    by_text: dict[str, tuple[int, ...]] = {}
    for tid, text in zip(safe_ids, safe_text, strict=True):
        by_text[text] = (*by_text.get(text, ()), tid)
    escapes = all(c in by_raw for c in _SPELLING)
    finish, finishers = _finishers(texts) if escapes else ((0,), ((),))
    return FreeTables(
        np.asarray(safe_ids, dtype=np.int64),
        np.asarray(safe_chars, dtype=np.int64),
        tuple(safe_text),
        np.asarray(q_ids, dtype=np.int64),
        tuple(q_before),
        tuple(q_after),
        by_text,
        by_raw,
        tuple(texts),
        escapes,
        finish,
        finishers,
    )


def _finishers(
    texts: list[str | None],
) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """Per class of pending escape: the fewest tokens that finish it, and the tokens that do.

    Only tokens spelled with escape characters alone can go on inside an escape without
    adding a character, so only those are read.
    """
    steps: dict[int, list[tuple[int, int]]] = {k: [] for k in range(1, len(ESCAPE_CLASSES))}
    for tid, text in enumerate(texts):
        if not text or len(text) > 12 or not set(text) <= _SPELLING:
            continue
        for k in steps:
            piece = decode(ESCAPE_CLASSES[k], text)
            if piece is not None and piece.close is None and not piece.chars[1:]:
                if piece.chars and piece.escape:  # finished one escape, began another
                    continue
                steps[k].append((tid, class_of(piece.escape)))
    far = len(ESCAPE_CLASSES) + 1
    finish = [0] + [far] * (len(ESCAPE_CLASSES) - 1)
    for _ in ESCAPE_CLASSES:  # shortest ways, by relaxation (the escape graph is tiny)
        for k, moves in steps.items():
            for _, end in moves:
                finish[k] = min(finish[k], 1 + finish[end])
    order = [()] + [
        tuple(tid for tid, end in sorted(steps[k], key=lambda m: (finish[m[1]], m[0])))
        for k in range(1, len(ESCAPE_CLASSES))
    ]
    return tuple(finish), tuple(order)


def _escape_moves(tables: FreeTables, k: int) -> EscapeMoves:
    """The escape moves from class ``k`` (see `EscapeMoves`)."""
    escape = ESCAPE_CLASSES[k]
    ids: list[int] = []
    adds: list[int] = []
    ends: list[int] = []
    texts: list[str] = []
    after: list[str] = []
    if tables.escapes:
        starts = {chr(c) for c in range(128) if decode(escape, chr(c)) is not None}
        if not escape:
            starts = {"\\"}  # between characters, a move holds a backslash (else it is plain)
        for tid, text in enumerate(tables.texts):
            if text is None or (escape and text[0] not in starts):
                continue
            if not escape:
                q = text.find('"')
                if "\\" not in (text if q < 0 else text[:q]):
                    continue
            piece = decode(escape, text)
            if piece is None:
                continue
            ids.append(tid)
            adds.append(len(piece.chars) + (1 if piece.escape else 0) - (1 if escape else 0))
            ends.append(-1 if piece.close is not None else class_of(piece.escape))
            texts.append(text)
            after.append("" if piece.close is None else text[piece.close + 1 :])
    return EscapeMoves(
        np.asarray(ids, dtype=np.int64),
        np.asarray(adds, dtype=np.int64),
        np.asarray(ends, dtype=np.int64),
        tuple(texts),
        tuple(after),
    )


@dataclass(slots=True)
class FreeMaskStats:
    """What one request's free-string masks cost, as counts.

    Attributes:
        masks: masks computed (each free string once: the drafter and the verifier ask
            the same cursor again, and a rejected draft's cursors come back).
        hits: masks asked again and answered from the request's cache.
        checked: plain tokens of strings with affixes checked one by one
            (`FreeString.completable`); the rest are decided as arrays.
    """

    masks: int = 0
    hits: int = 0
    checked: int = 0


class FreeMasks:
    """The masks of one request's free strings.

    A free string's mask depends on the string alone (its state, what is written, the
    escape under way), so each is computed once per request and kept.

    Args:
        tables: the tokenizer's `FreeTables`.
    """

    def __init__(self, tables: FreeTables) -> None:
        self.tables = tables
        self.stats = FreeMaskStats()
        self._masks: dict[FreeString, TokenIds] = {}

    def allowed(self, free: FreeString, rests: frozenset[str]) -> TokenIds:
        """The tokens allowed inside ``free``: each leaves a string that can still close.

        ``rests``: the texts a plain closer may have after its quote (the planner's
        `~factorspec_sdk.tokens.plan.Planner.close_rests`, one set per string). The array is
        the request's cached one: read-only.
        """
        hit = self._masks.get(free)
        if hit is not None:
            self.stats.hits += 1
            return hit
        mask = self._mask(free, rests)
        mask.flags.writeable = False
        self._masks[free] = mask
        self.stats.masks += 1
        return mask

    def _mask(self, free: FreeString, rests: frozenset[str]) -> TokenIds:
        parts: list[TokenIds] = []
        if not free.escape:
            parts.extend(self._plain_allowed(free, rests))
        parts.append(self._escape_allowed(free))
        # the parts may overlap (`_texts_allowed`'s): marked in a table of the vocabulary,
        # read back in order (np.unique's hashing took ~6-10 ms of the vocabulary a mask)
        marked = np.zeros(len(self.tables.texts), dtype=bool)
        for part in parts:
            marked[part] = True
        return np.flatnonzero(marked).astype(np.int64)

    def _plain_allowed(self, free: FreeString, rests: frozenset[str]) -> list[TokenIds]:
        """Plain tokens and plain closers (those whose text after the quote is in ``rests``)."""
        tables = self.tables
        n = len(free.written)
        parts: list[TokenIds] = []
        if free.texts is None:
            longest = free.longest
            if longest is None:
                parts.append(tables.safe_ids)
            elif longest > n:
                parts.append(tables.safe_ids[tables.safe_chars <= longest - n])
        elif free.texts.affixes is not None:
            parts.append(self._affix_allowed(free))
        else:
            parts.extend(self._texts_allowed(free))
        closing = [
            tid
            for tid, before, after in zip(
                tables.quote_ids.tolist(), tables.quote_before, tables.quote_after, strict=True
            )
            if after in rests and free.closes(free.written + before)
        ]
        parts.append(np.asarray(closing, dtype=np.int64))
        return parts

    def _escape_allowed(self, free: FreeString) -> TokenIds:
        """The escape moves from ``free``'s pending escape that leave a string that can close.

        A string no relation reads the text of: by counts, as arrays (a pending escape can
        always be finished, `FreeTables.escapes`). Otherwise each move is read: its
        characters, the escape pending after it, where it closes.
        """
        moves = self.tables.moves(free.escape)
        if not len(moves.ids):
            return moves.ids
        if free.texts is None:
            n = free.chars
            grows = moves.ends >= 0
            longest = free.longest
            ok = grows if longest is None else grows & (n + moves.adds <= longest)
            for i in np.flatnonzero(~grows).tolist():  # a closer: the length it closes at
                ok[i] = free.close_suffix.startswith(moves.after[i]) and free.closes_at(
                    n + int(moves.adds[i])
                )
            return moves.ids[ok]
        keep: list[int] = []
        for tid, end, text, after in zip(
            moves.ids.tolist(), moves.ends.tolist(), moves.texts, moves.after, strict=True
        ):
            piece = decode(free.escape, text)
            assert piece is not None  # a move goes on from every escape of its class
            value = free.written + piece.chars
            if end >= 0:
                if free.can_finish(value, piece.escape):
                    keep.append(tid)
            elif free.close_suffix.startswith(after) and free.closes(value):
                keep.append(tid)
        return np.asarray(keep, dtype=np.int64)

    def _affix_allowed(self, free: FreeString) -> TokenIds:
        """Plain tokens of a string read with ``startswith``/``endswith``, each completable.

        See `factorspec_sdk.writer.affixes`. By token length: a token of characters no affix
        constant has completes as ``X`` itself; any other token that runs along no constant
        completes with one more such character; the tokens along a constant or a named text,
        and the rest where that is not enough, are checked one by one. (A named text's
        characters do not count against ``X``: a text that extends what is written plus a
        token along no named text is no named text.)
        """
        tables = self.tables
        texts = free.texts
        assert texts is not None and texts.affixes is not None
        aff = texts.affixes
        w, n = free.written, len(free.written)
        chars = aff.constant_chars()
        foreign = tables.foreign(chars)
        toward = [*aff.open_prefixes(w), *aff.tight(w), *texts.named_from(w)]
        special = set(tables.toward(toward, n).tolist())
        for c in aff.open_prefixes(w):  # tokens that run past a prefix's end
            rest = c[n:]
            special |= {
                tid
                for tid, text in zip(tables.safe_ids.tolist(), tables.safe_text, strict=True)
                if text.startswith(rest)
            }
        head = aff.deviating(w)
        ok = np.zeros(len(tables.safe_ids), dtype=bool)
        for size in np.unique(tables.safe_chars).tolist():
            if n + size > aff.hi:
                continue
            sized = tables.safe_chars == size
            as_x = texts.other and any(
                aff.lengths(aff.open_profile(head, e)).longest >= n + size + len(e)
                for e in aff.suffixes
            )
            plus = texts.other and aff.open_ok(w, size)
            ok |= sized & ((foreign & as_x) | plus)
        in_special = np.isin(tables.safe_ids, np.asarray(sorted(special), dtype=np.int64))
        ok &= ~in_special
        # a token along no constant keeps the prefixes of `head`: with no feasible profile of
        # those, only the tokens along a constant can complete
        todo = ~ok if texts.other and aff.head_feasible(head) else in_special
        todo &= tables.safe_chars <= aff.hi - n  # a longer token overruns every text
        index = np.flatnonzero(todo).tolist()
        self.stats.checked += len(index)
        checked = [
            int(tables.safe_ids[i]) for i in index if free.completable(w + tables.safe_text[i])
        ]
        return np.concatenate([tables.safe_ids[ok], np.asarray(checked, dtype=np.int64)])

    def _texts_allowed(self, free: FreeString) -> list[TokenIds]:
        """Plain tokens of a string whose value a relation reads, each with a completion.

        From ``w`` (what is written plus the token) the string can still close: as a text
        no relation names of a feasible length above ``len(w)`` (there are more such texts
        than named ones); as ``w`` itself at the longest such length, unless ``w`` is named
        and banned; or as a feasible named text that starts with ``w`` (`FreeString.can_finish`
        says the same of one text).
        """
        tables = self.tables
        texts = free.texts
        assert texts is not None
        n = len(free.written)
        parts: list[TokenIds] = []
        top = free.longest_other
        if top is None:
            parts.append(tables.safe_ids)
        elif top > n:
            parts.append(tables.safe_ids[tables.safe_chars < top - n])
            edge = tables.safe_ids[tables.safe_chars == top - n]
            banned = tables.ids_of(t[n:] for t in texts.banned_at(free.written, top))
            parts.append(edge[~np.isin(edge, banned)])
        parts.append(tables.toward(texts.extending(free.written), n))
        return parts
