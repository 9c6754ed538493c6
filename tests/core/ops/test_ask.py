"""ask: ported from Pekko's FlowAskSpec, in-process.

A Ray actor handle is stood in for by ``FakeActor``, whose methods have a ``.remote(x)`` returning a
``concurrent.futures.Future`` (what ``ask`` needs from a handle); the cases with a real Ray actor (an
actor's exception, a killed actor) are in ``tests/ray/test_async_ray.py``.
Not applicable: "signal ask timeout failure" (a Ray call has no ask timeout; a stuck actor is bounded by
the stream's own timeouts), "produce asked elements (simple ask)" (no default parallelism overload),
"replies are Status.Success" (no status envelope in Ray).
"""
from __future__ import annotations

import pytest
from ops_kit import TE, fmat  # noqa: F401
from test_map_async_kit import Calls, done, failed

from atoll import Attributes, Flow, Keep, Sink, Source, Supervision
from atoll.testkit import TestSink, TestSource

RESUME = Attributes.supervision_strategy(Supervision.resuming_decider)


class _Method:
    def __init__(self, fn):
        self.fn = fn

    def remote(self, x):
        return self.fn(x)


class FakeActor:
    """``actor.<method>.remote(x)`` calls ``reply(x)`` (a future)."""

    def __init__(self, reply, method="__call__"):
        setattr(self, "m_" + method, _Method(reply))
        self._method = method

    def __getattr__(self, name):
        if name == self._method:
            return self.__dict__["m_" + name]
        raise AttributeError(name)


def reply(x):
    return done(("Reply", x))


def fails_on(n):
    return lambda x: failed(TE(f"Booming for {n}!")) if x == n else reply(x)


def fails_on_all_except(n):
    return lambda x: reply(x) if x == n else failed(TE(f"Booming for {x}!"))


def test_produce_asked_elements(fmat):
    c = Source.range(1, 4).ask(FakeActor(reply), 4).run_with(TestSink.probe(), fmat)
    c.request(2)
    c.expect_next(("Reply", 1))
    c.expect_next(("Reply", 2))
    c.expect_no_message(0.1)
    c.request(2)
    c.expect_next(("Reply", 3))
    c.expect_complete()


def test_a_named_method(fmat):
    actor = FakeActor(lambda x: done(x * 2), method="double")
    assert Source.range(1, 4).ask(actor, 2, method="double").run_with(Sink.seq(), fmat).result(3) == [2, 4, 6]


def test_produce_future_elements_in_order(fmat):
    calls = Calls()
    c = Source.range(1, 51).ask(FakeActor(calls), 4).run_with(TestSink.probe(), fmat)
    c.request(1000)
    for start in range(1, 51, 4):
        batch = list(range(start, min(start + 4, 51)))
        calls.wait_for(*batch)
        for n in reversed(batch):  # the replies arrive in reverse order
            calls.complete(n, ("Reply", n))
    for n in range(1, 51):
        c.expect_next(("Reply", n))
    c.expect_complete()


def test_unordered_ask_emits_in_completion_order(fmat):
    calls = Calls()
    c = Source.range(1, 4).ask(FakeActor(calls), 3, ordered=False).run_with(TestSink.probe(), fmat)
    c.request(3)
    calls.wait_for(1, 2, 3)
    for n in (3, 1, 2):
        calls.complete(n)
        c.expect_next(n)
    c.expect_complete()


def test_signal_ask_failure(fmat):
    c = Source.range(1, 6).ask(FakeActor(fails_on(1)), 4).run_with(TestSink.probe(), fmat)
    c.request(10)
    assert c.expect_error() == TE("Booming for 1!")


def test_a_failure_mid_stream_must_skip_element_with_resume_strategy(fmat):
    p = Calls()
    elements = Source.from_iterable("abcdef").ask(FakeActor(p), 5).with_attributes(RESUME).run_with(Sink.seq(), fmat)
    p.wait_for(*"abcde")
    for x in "abde":
        p.complete(x)
    p.wait_for("f")
    p.complete("f")
    p.fail("c", TE("Booom!"))
    assert elements.result(3) == ["a", "b", "d", "e", "f"]


def test_resume_after_ask_failure(fmat):
    c = Source.range(1, 6).ask(FakeActor(fails_on(3)), 4).with_attributes(RESUME).run_with(TestSink.probe(), fmat)
    c.request(10)
    for n in (1, 2, 4, 5):
        c.expect_next(("Reply", n))
    c.expect_complete()


def test_resume_after_multiple_failures(fmat):
    out = Source.range(1, 7).ask(FakeActor(fails_on_all_except(6)), 2).with_attributes(RESUME).run_with(Sink.head(), fmat)
    assert out.result(3) == ("Reply", 6)


def test_handle_cancel_properly(fmat):
    src, sink = TestSource.probe().ask(FakeActor(Calls()), 4).to_mat(TestSink.probe(), Keep.both).run(fmat)
    src.expect_request()
    sink.cancel()
    src.expect_cancellation()


def test_validation():
    with pytest.raises(ValueError, match="ask: argument 'parallelism' must be >= 1, got 0"):
        Flow().ask(FakeActor(reply), 0)
    with pytest.raises(TypeError, match="ask: .* has no remote method 'nope'"):
        Flow().ask(FakeActor(reply), 1, method="nope")
    with pytest.raises(TypeError, match="ask: argument 'ordered' must be a bool"):
        Flow().ask(FakeActor(reply), 1, ordered="yes")
