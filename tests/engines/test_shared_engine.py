"""One engine served to several callers: `EngineHost` and `EngineProxy` (engines/shared.py).

The proxies run in this process, each on its own connection, as the planning workers of
``factorspec serve --planning-workers`` do in theirs; the engine is the scripted random model.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence

import numpy as np
import pytest

from factorspec_sdk.drafter.loop import DecodeJob, Decoder, DecoderConfig
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.engines.protocol import Logits, SequenceId
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.engines.shared import EngineHost, EngineProxy, Posted
from factorspec_sdk.errors import EngineError
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.tokens.plan import Planner
from factorspec_sdk.writer.automaton import Writer
from tests.helpers import TRIP_CONTEXT, Trip, tiny_tokenizer

TOK = tiny_tokenizer()
PROMPT = TOK.encode("plan a trip to Paris and Rome then Parma")


class GatedEngine(ScriptedEngine):
    """The scripted model whose next ``extend`` waits until the test sets its ``gate``."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.gate: threading.Event | None = None
        self.entered = threading.Event()

    def extend(
        self,
        requests: Sequence[tuple[SequenceId, Sequence[int]]],
        *,
        keep: Sequence[int] | None = None,
    ) -> list[Logits]:
        gate, self.gate = self.gate, None
        if gate is not None:
            self.entered.set()
            assert gate.wait(10.0)
        return super().extend(requests, keep=keep)


class AppendsThenFails(GatedEngine):
    """An engine whose batched forward fails part-way: it appends the valid requests' tokens
    before it raises for one with a token outside the vocabulary."""

    def extend(
        self,
        requests: Sequence[tuple[SequenceId, Sequence[int]]],
        *,
        keep: Sequence[int] | None = None,
    ) -> list[Logits]:
        valid = [r for r in requests if all(t < self.tokenizer.vocab_size for t in r[1])]
        if len(requests) > 1 and len(valid) < len(requests):
            super().extend(valid)
            raise EngineError("a token outside the vocabulary, found part-way")
        return super().extend(requests, keep=keep)


@pytest.fixture
def host() -> Iterator[EngineHost]:
    h = EngineHost(ScriptedEngine.random(TOK, seed=3, temperature_scale=3.0))
    yield h
    h.close()


def wait_for(condition: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_a_proxy_gives_the_engines_logits_and_vocabulary(host: EngineHost) -> None:
    direct = ScriptedEngine.random(TOK, seed=3, temperature_scale=3.0)
    proxy = EngineProxy(host.connect())
    assert proxy.name == "scripted" and proxy.tokenizer.vocab == TOK.vocab
    s, d = proxy.new_sequence(PROMPT), direct.new_sequence(PROMPT)
    for new, keep in (([5, 6, 7], None), ([8], [1]), ([9, 10, 11, 12], [2])):
        got = proxy.extend([(s, new)], keep=keep)
        want = direct.extend([(d, new)], keep=keep)
        assert len(got) == 1 and np.array_equal(got[0], want[0])
    assert proxy.length(s) == direct.length(d) == len(PROMPT) + 8
    proxy.truncate(s, len(PROMPT) + 2)
    direct.truncate(d, len(PROMPT) + 2)
    assert np.array_equal(proxy.extend([(s, [4])])[0], direct.extend([(d, [4])])[0])
    assert proxy.verify_cost(8) == direct.verify_cost(8)
    assert proxy.cached_tokens(s) == 0
    proxy.release(s)
    with pytest.raises(EngineError, match="not one this process made"):
        proxy.length(s)
    proxy.close()


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_decoding_through_a_proxy_equals_decoding_on_the_engine(
    host: EngineHost, temperature: float
) -> None:
    spec = compile_spec(Trip, TRIP_CONTEXT)

    def run(engine: ScriptedEngine | EngineProxy) -> list[tuple[str, list[int]]]:
        jobs = [
            DecodeJob(
                Planner(Writer(spec), TOK),
                PROMPT,
                SamplingParams(temperature=temperature, seed=i, max_tokens=300),
            )
            for i in range(3)
        ]
        outs = Decoder(engine, DecoderConfig()).run(jobs)
        assert all(o.error is None for o in outs)
        return [(o.text, o.tokens) for o in outs]

    direct = run(ScriptedEngine.random(TOK, seed=3, temperature_scale=3.0))
    proxy = EngineProxy(host.connect())
    assert run(proxy) == direct
    for text, _ in direct:
        Trip.model_validate_json(text, context=TRIP_CONTEXT)
    proxy.close()


Outcome = tuple[EngineProxy, int, "list[Logits] | EngineError"]


def extends_behind_a_held_engine(
    engine: GatedEngine, host: EngineHost, tokens: dict[str, list[int]]
) -> dict[str, Outcome]:
    """One caller's extend holds the engine while one extend per entry of ``tokens`` (each
    its own caller and sequence) queues behind it; then the gate opens. Returns each
    entry's caller, sequence and what its extend returned or raised."""
    first = EngineProxy(host.connect())
    callers = {name: EngineProxy(host.connect()) for name in tokens}
    first_seq = first.new_sequence(PROMPT)
    seqs = {name: p.new_sequence(PROMPT) for name, p in callers.items()}
    gate = engine.gate = threading.Event()
    held = threading.Thread(target=first.extend, args=([(first_seq, [5, 6])],))
    held.start()
    assert engine.entered.wait(10.0)
    results: dict[str, list[Logits] | EngineError] = {}

    def call(name: str) -> None:
        try:
            results[name] = callers[name].extend([(seqs[name], tokens[name])])
        except EngineError as exc:
            results[name] = exc

    threads = [threading.Thread(target=call, args=(name,)) for name in tokens]
    for t in threads:
        t.start()
    wait_for(lambda: host._inbox.qsize() == len(tokens))  # they wait together
    gate.set()
    for t in (held, *threads):
        t.join(10.0)
    return {name: (callers[name], seqs[name], results[name]) for name in tokens}


def test_extends_that_wait_together_run_as_one_forward() -> None:
    engine = GatedEngine.random(TOK, seed=3)
    host = EngineHost(engine)
    try:
        out = extends_behind_a_held_engine(engine, host, {"b": [5, 6], "c": [5, 6]})
        assert host.forwards == 2 and host.merged_forwards == 1
        assert engine.forward_calls == 2 and engine.batch_log[-1] == (len(PROMPT) + 2,) * 2
        direct = ScriptedEngine.random(TOK, seed=3)
        want = direct.extend([(direct.new_sequence(PROMPT), [5, 6])])[0]
        for name in ("b", "c"):
            rows = out[name][2]
            assert isinstance(rows, list) and np.array_equal(rows[0], want)
    finally:
        host.close()


@pytest.mark.parametrize("engine_class", [GatedEngine, AppendsThenFails])
def test_a_failing_request_in_a_shared_forward_fails_only_its_caller(
    engine_class: type[GatedEngine],
) -> None:
    """Each part runs alone from where the merged call found it (an engine that appended
    some tokens before it failed has them cut back first)."""
    engine = engine_class.random(TOK, seed=3)
    host = EngineHost(engine)
    try:
        bad = TOK.vocab_size + 7  # the engine refuses it
        out = extends_behind_a_held_engine(engine, host, {"b": [bad], "c": [5]})
        (b, sb, got_b), (c, sc, got_c) = out["b"], out["c"]
        assert isinstance(got_b, EngineError) and str(bad) in str(got_b)
        assert isinstance(got_c, list) and got_c[0].shape == (1, TOK.vocab_size)
        assert c.length(sc) == len(PROMPT) + 1 and b.length(sb) == len(PROMPT)
    finally:
        host.close()


def test_a_caller_cannot_touch_another_callers_sequences(host: EngineHost) -> None:
    a, b = EngineProxy(host.connect()), EngineProxy(host.connect())
    seq = a.new_sequence(PROMPT)
    for call in (
        lambda: b.extend([(seq, [5])]),
        lambda: b.truncate(seq, 1),
        lambda: b.release(seq),
        lambda: b.length(seq),
    ):
        with pytest.raises(EngineError, match="not one this process made"):
            call()
    assert a.length(seq) == len(PROMPT)


def test_a_closed_connection_releases_its_sequences() -> None:
    engine = ScriptedEngine.random(TOK, seed=3)
    host = EngineHost(engine)
    try:
        a = EngineProxy(host.connect())
        seqs = [a.new_sequence(PROMPT) for _ in range(3)]
        a.extend([(seqs[0], [5])])
        assert len(engine._seqs) == 3
        a.close()
        wait_for(lambda: not engine._seqs)
        b = EngineProxy(host.connect())  # the host still serves the others
        assert b.length(b.new_sequence(PROMPT)) == len(PROMPT)
    finally:
        host.close()


def test_a_closed_host_is_an_engine_error_not_a_hang() -> None:
    host = EngineHost(ScriptedEngine.random(TOK, seed=3))
    proxy = EngineProxy(host.connect())
    seq = proxy.new_sequence(PROMPT)
    host.close()
    with pytest.raises(EngineError, match="engine process is gone"):
        proxy.extend([(seq, [5])])


def test_an_unknown_verb_is_an_engine_error(host: EngineHost) -> None:
    proxy = EngineProxy(host.connect())
    with pytest.raises(EngineError, match="unknown engine verb 'forward'"):
        proxy._call("forward")
    assert proxy.length(proxy.new_sequence(PROMPT)) == len(PROMPT)  # still served


def test_the_board_keeps_each_callers_latest_post_and_marks_the_gone(host: EngineHost) -> None:
    a, b = EngineProxy(host.connect()), EngineProxy(host.connect())
    assert a.post("a1") == [Posted("a1", True)]
    a.post("a2")
    assert sorted(map(repr, b.post("b1"))) == sorted(
        map(repr, [Posted("a2", True), Posted("b1", True)])
    )
    a.close()
    wait_for(lambda: Posted("a2", False) in b.post("b2"))
    assert sorted(map(repr, b.post("b3"))) == sorted(
        map(repr, [Posted("a2", False), Posted("b3", True)])
    )
