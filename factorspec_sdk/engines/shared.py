"""One engine shared by several processes: `EngineHost` runs its verbs, `EngineProxy` calls them.

FactorSpec's work for a record (the request, the spec, the oracle, the planner, the decoding
loop, the re-check) is Python that holds the GIL, so one process plans on one core whatever
the machine has. ``factorspec serve --planning-workers N``
(`factorspec_sdk.server.planning_workers`) runs N server processes that do all of it, and
keeps the model in one process: each server process drives the engine through an
`EngineProxy`, an `Engine` whose verbs (``new_sequence``, ``extend``, ``truncate``, ...) are
calls over a `multiprocessing` connection, and the `EngineHost` runs them on one thread, the
only one that touches the engine.

* **One batch.** Each process's decoder batches its own records. The host runs every
  ``extend`` waiting when the engine becomes free as ONE ``extend`` over all of them
  (requests from different processes name different sequences), so the engine sees one
  batch, as it would with one process. If that merged call fails, each process's part is run
  alone, so only the process whose request is bad gets the error.
* **Sequences belong to their connection.** A process may only touch the sequences it made;
  when it goes away (its connection closes), the host releases them.
* **A board.** Each process may post one value (`EngineProxy.post`: the server's counters)
  and gets back the latest value of every process that ever posted, the gone ones marked,
  so that any process can answer for all of them (``/metrics``).
* **Errors** of the engine reach the caller as `EngineError` with the host's message; a host
  that is gone is an `EngineError` too, never a hang (a closed connection ends a wait).

On the wire: the host first sends an `EngineInfo` (name, vocabulary, model folder, dtype);
then each request is ``(verb, args)`` and each reply ``("ok", value)`` or ``("error",
message)``, pickled by the connection (logits as numpy arrays). Everything here is
FactorSpec's own: it is the `Engine` protocol (`factorspec_sdk.engines.protocol`) carried
between processes.
"""

from __future__ import annotations

import logging
import multiprocessing
import queue
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from factorspec_sdk.engines.protocol import (
    ChatMessage,
    Engine,
    Logits,
    SequenceId,
    cached_prompt_tokens,
    undo_extend,
)
from factorspec_sdk.errors import EngineError

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from factorspec_sdk.tokens.vocab import TokenizerInfo

__all__ = ["EngineHost", "EngineInfo", "EngineProxy", "Posted"]

log = logging.getLogger("factorspec.engine")


@dataclass(frozen=True, slots=True)
class EngineInfo:
    """What a process learns of the shared engine when it connects.

    Attributes:
        name: the engine's name (``"embedded"``, ``"scripted"``).
        tokenizer: its vocabulary (`TokenizerInfo` pickles).
        model_path: its model folder, or None.
        dtype: its weights dtype, or None.
    """

    name: str
    tokenizer: TokenizerInfo
    model_path: str | None
    dtype: str | None


@dataclass(frozen=True, slots=True)
class Posted:
    """A process's latest value on the host's board (`EngineProxy.post`).

    Attributes:
        value: what it posted.
        live: False once the process has gone.
    """

    value: object
    live: bool


@dataclass(eq=False)
class _Peer:
    """One connected process: its end of the connection and the sequences it made."""

    conn: Connection
    sequences: set[SequenceId] = field(default_factory=set)
    gone: bool = False
    posted: object = None

    def reply(self, status: str, value: object) -> None:
        if self.gone:
            return
        try:
            self.conn.send((status, value))
        except (OSError, EOFError):  # it went away; its close message releases its sequences
            self.gone = True


_Item = tuple[_Peer, tuple[str, tuple[Any, ...]] | None]
"""A request of a peer, or None: the peer's connection closed."""


class EngineHost:
    """Serves one engine to other processes (`connect` gives each its connection).

    Args:
        engine: the engine; from now on only the host's thread calls it, until `close`.

    Attributes:
        forwards: ``extend`` calls made on the engine.
        merged_forwards: those that ran the requests of more than one process.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.info = EngineInfo(
            name=engine.name,
            tokenizer=engine.tokenizer,
            model_path=_text_attribute(engine, "model_path"),
            dtype=_text_attribute(engine, "dtype"),
        )
        self.forwards = 0
        self.merged_forwards = 0
        self._inbox: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._peers: set[_Peer] = set()
        self._peers_lock = threading.Lock()
        self._retired: list[Posted] = []  # the last posts of processes gone (engine thread)
        self._thread = threading.Thread(
            target=self._run, name="factorspec-engine-host", daemon=True
        )
        self._thread.start()

    def connect(self) -> Connection:
        """A new connection to the engine: hand it to one process, which wraps it in `EngineProxy`.

        The host keeps the other end; the process's sequences are released when it closes.
        """
        here, there = multiprocessing.Pipe()
        peer = _Peer(here)
        with self._peers_lock:
            self._peers.add(peer)
        threading.Thread(
            target=self._read, args=(peer,), name="factorspec-engine-peer", daemon=True
        ).start()
        return there

    @property
    def alive(self) -> bool:
        """Whether the host's thread runs."""
        return self._thread.is_alive()

    def close(self, timeout: float = 10.0) -> None:
        """Stop serving: the connections close, so a process waiting on a call gets an error.

        The engine itself stays open (its owner closes it).
        """
        self._inbox.put(None)
        self._thread.join(timeout)
        with self._peers_lock:
            peers, self._peers = list(self._peers), set()
        for peer in peers:
            peer.gone = True
            peer.conn.close()

    # ------------------------------------------------------------------ peer threads

    def _read(self, peer: _Peer) -> None:
        """Send the peer the engine's info, then queue its requests until it closes."""
        try:
            peer.conn.send(self.info)  # may block until the process reads it: on this thread
            while True:
                self._inbox.put((peer, peer.conn.recv()))
        except (EOFError, OSError):
            pass
        except Exception:
            if not peer.gone:  # else `close` closed the connection under this read
                raise
        self._inbox.put((peer, None))

    # ------------------------------------------------------------------ engine thread

    def _run(self) -> None:
        while True:
            first = self._inbox.get()
            if first is None:
                return
            items = [first]
            while True:  # everything that waited while the engine was busy goes together
                try:
                    more = self._inbox.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._inbox.put(None)  # stop after this round
                    break
                items.append(more)
            extends: list[tuple[_Peer, tuple[Any, ...]]] = []
            for peer, message in items:
                if message is None:
                    self._drop(peer)
                    continue
                verb, args = message
                if verb == "extend":
                    extends.append((peer, args))
                    continue
                try:
                    peer.reply("ok", self._call(peer, verb, args))
                except Exception as exc:
                    peer.reply("error", _message(exc))
            if extends:
                self._extend(extends)

    def _owned(self, peer: _Peer, seq: object) -> SequenceId:
        if not isinstance(seq, int) or seq not in peer.sequences:
            raise EngineError(f"sequence {seq!r} is not one this process made")
        return seq

    def _call(self, peer: _Peer, verb: str, args: tuple[Any, ...]) -> object:
        engine = self.engine
        if verb == "new_sequence":
            seq = engine.new_sequence(args[0])
            peer.sequences.add(seq)
            return seq
        if verb == "release":
            seq = self._owned(peer, args[0])
            peer.sequences.discard(seq)
            engine.release(seq)
            return None
        if verb == "length":
            return engine.length(self._owned(peer, args[0]))
        if verb == "truncate":
            engine.truncate(self._owned(peer, args[0]), int(args[1]))
            return None
        if verb == "cached_tokens":
            return cached_prompt_tokens(engine, self._owned(peer, args[0]))
        if verb == "verify_cost":
            return float(engine.verify_cost(int(args[0])))
        if verb == "apply_chat_template":
            return engine.apply_chat_template(args[0])
        if verb == "post":
            peer.posted = args[0]
            return self._board()
        raise EngineError(f"unknown engine verb {verb!r}")

    def _extend(self, extends: list[tuple[_Peer, tuple[Any, ...]]]) -> None:
        """Run the waiting ``extend`` calls as one; alone each, if the merged one fails."""
        live: list[tuple[_Peer, list[tuple[SequenceId, Sequence[int]]], list[int]]] = []
        for peer, (requests, keep) in extends:
            if peer.gone:
                continue
            try:
                reqs = [(self._owned(peer, seq), tokens) for seq, tokens in requests]
            except EngineError as exc:
                peer.reply("error", _message(exc))
                continue
            rows = [len(t) for _, t in reqs] if keep is None else [int(k) for k in keep]
            live.append((peer, reqs, rows))
        if not live:
            return
        before = [[(seq, self.engine.length(seq)) for seq, _ in reqs] for _, reqs, _ in live]
        try:
            out = self._forward(
                [r for _, reqs, _ in live for r in reqs], [k for _, _, ks in live for k in ks]
            )
        except Exception as exc:
            if len(live) == 1:
                live[0][0].reply("error", _message(exc))
                return
            # find whose request failed: each alone, from where the merged call found it
            for (peer, reqs, rows), lengths in zip(live, before, strict=True):
                try:
                    undo_extend(self.engine, lengths)
                    peer.reply("ok", self._forward(reqs, rows))
                except Exception as alone:
                    peer.reply("error", _message(alone))
            return
        if len(live) > 1:
            self.merged_forwards += 1
        start = 0
        for peer, reqs, _ in live:
            peer.reply("ok", out[start : start + len(reqs)])
            start += len(reqs)

    def _board(self) -> list[Posted]:
        with self._peers_lock:
            live = [Posted(p.posted, True) for p in self._peers if p.posted is not None]
        return live + self._retired

    def _forward(
        self, requests: list[tuple[SequenceId, Sequence[int]]], keep: list[int]
    ) -> list[Logits]:
        self.forwards += 1
        return self.engine.extend(requests, keep=keep)

    def _drop(self, peer: _Peer) -> None:
        """A process went away: release every sequence it left."""
        peer.gone = True
        for seq in list(peer.sequences):
            try:
                self.engine.release(seq)
            except Exception as exc:  # the engine's own trouble; the sequence is gone anyway
                log.warning("releasing sequence %s of a closed connection: %r", seq, exc)
        peer.sequences.clear()
        with self._peers_lock:
            self._peers.discard(peer)
        if peer.posted is not None:
            self._retired.append(Posted(peer.posted, False))
        peer.conn.close()


class EngineProxy:
    """An `Engine` in another process: each verb is a call to that process's `EngineHost`.

    Args:
        conn: a connection from `EngineHost.connect`.

    Raises:
        EngineError: the host does not answer with its `EngineInfo`.
    """

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self._costs: dict[int, float] = {}
        try:
            info = conn.recv()
        except (EOFError, OSError) as exc:
            raise EngineError(f"the engine process did not answer: {exc!r}") from exc
        if not isinstance(info, EngineInfo):
            raise EngineError(f"the engine process sent {type(info).__name__}, not EngineInfo")
        self.info = info

    @property
    def name(self) -> str:
        """The shared engine's name."""
        return self.info.name

    @property
    def tokenizer(self) -> TokenizerInfo:
        """The shared engine's vocabulary (a copy, in this process)."""
        return self.info.tokenizer

    @property
    def model_path(self) -> str:
        """The shared engine's model folder ("" when it has none)."""
        return self.info.model_path or ""

    @property
    def dtype(self) -> str | None:
        """The shared engine's weights dtype, when it has one."""
        return self.info.dtype

    def _call(self, verb: str, *args: object) -> Any:
        with self._lock:
            try:
                self._conn.send((verb, args))
                status, value = self._conn.recv()
            except (EOFError, OSError) as exc:
                raise EngineError(f"the engine process is gone: {exc!r}") from exc
        if status != "ok":
            raise EngineError(str(value))
        return value

    def apply_chat_template(self, messages: Sequence[ChatMessage]) -> list[int]:
        """Token ids of ``messages`` with the model's chat template (run by the host)."""
        return list(self._call("apply_chat_template", [dict(m) for m in messages]))

    def new_sequence(self, prompt_ids: Sequence[int]) -> SequenceId:
        """Start a sequence on the host."""
        return int(self._call("new_sequence", [int(t) for t in prompt_ids]))

    def extend(
        self,
        requests: Sequence[tuple[SequenceId, Sequence[int]]],
        *,
        keep: Sequence[int] | None = None,
    ) -> list[Logits]:
        """The host's ``extend`` (batched there with other processes' requests)."""
        reqs = [(int(seq), [int(t) for t in tokens]) for seq, tokens in requests]
        rows = None if keep is None else [int(k) for k in keep]
        out: list[Logits] = self._call("extend", reqs, rows)
        return out

    def length(self, seq: SequenceId) -> int:
        """Tokens the sequence holds."""
        return int(self._call("length", seq))

    def truncate(self, seq: SequenceId, length: int) -> None:
        """Roll the sequence back on the host."""
        self._call("truncate", seq, length)

    def release(self, seq: SequenceId) -> None:
        """Free the sequence on the host."""
        self._call("release", seq)

    def cached_tokens(self, seq: SequenceId) -> int:
        """Prompt tokens of ``seq`` the host's prefix cache served (0 without one)."""
        return int(self._call("cached_tokens", seq))

    def verify_cost(self, k: int) -> float:
        """The host engine's cost of a ``k``-token forward (asked once per ``k``)."""
        cost = self._costs.get(k)
        if cost is None:
            cost = self._costs[k] = float(self._call("verify_cost", k))
        return cost

    def post(self, value: object) -> list[Posted]:
        """Put ``value`` (picklable) on the host's board, replacing this process's last one.

        Returns every process's latest value (this one's included), the gone ones marked.
        Answered between two forwards.
        """
        board: list[Posted] = self._call("post", value)
        return board

    def close(self) -> None:
        """Close the connection (the host releases this process's sequences)."""
        self._conn.close()


def _text_attribute(engine: Engine, name: str) -> str | None:
    value = getattr(engine, name, None)
    return None if value is None else str(value)


def _message(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, EngineError) else f"{type(exc).__name__}: {exc}"
