"""map_remote on ``Materializer.local()`` without Ray: ``fn`` runs on the stage's pool of ``parallelism``
threads, with ``map_async``'s contract (the FlowMapAsyncSpec cases that concern order, the bound,
supervision and None results), plus the local retries and the validation. The Ray task path is tested
in tests/ray/test_map_remote.py.

The calls block on events the test sets, so completion order is the test's choice, never a sleep's.
"""
from __future__ import annotations

import queue
import threading

import pytest
from ops_kit import TE, fmat  # noqa: F401

from atoll import Attributes, Flow, Sink, Source, Supervision
from atoll.testkit import TestSink, assert_all_stages_stopped

RESUME = Attributes.supervision_strategy(Supervision.resuming_decider)


class Blocking:
    """``fn`` for the thread pool: records each call, then waits until the test releases that element."""

    def __init__(self):
        self.started: "queue.Queue" = queue.Queue()
        self.events: dict = {}
        self.lock = threading.Lock()
        self.seen: list = []

    def _event(self, x) -> threading.Event:
        with self.lock:
            return self.events.setdefault(x, threading.Event())

    def __call__(self, x):
        ev = self._event(x)
        self.started.put(x)
        if not ev.wait(5):
            raise TE(f"never released: {x}")
        return x * 10

    def wait_started(self, *xs):
        while not set(xs) <= set(self.seen):
            try:
                self.seen.append(self.started.get(timeout=3))
            except queue.Empty:
                raise AssertionError(f"not started: {sorted(set(xs) - set(self.seen))}; started {self.seen}") from None
        return sorted(self.seen)

    def expect_none_started(self, seconds=0.1):
        try:
            x = self.started.get(timeout=seconds)
        except queue.Empty:
            return
        raise AssertionError(f"unexpected call for {x}")

    def release(self, x):
        self._event(x).set()


def test_keeps_element_order_with_out_of_order_completion(fmat):
    fn = Blocking()
    sink = Source.range(1, 5).map_remote(fn, parallelism=4).run_with(TestSink.probe(), fmat)
    sink.request(10)
    fn.wait_started(1, 2, 3, 4)
    for x in (4, 2, 3):
        fn.release(x)
    sink.expect_no_message(0.1)
    fn.release(1)
    sink.expect_next(10, 20, 30, 40)
    sink.expect_complete()


def test_unordered_emits_in_completion_order(fmat):
    fn = Blocking()
    sink = Source.range(1, 4).map_remote(fn, parallelism=3, ordered=False).run_with(TestSink.probe(), fmat)
    sink.request(10)
    fn.wait_started(1, 2, 3)
    for x in (3, 1, 2):
        fn.release(x)
        sink.expect_next(x * 10)
    sink.expect_complete()


def test_at_most_parallelism_calls_in_flight(fmat):
    fn = Blocking()
    sink = Source.range(1, 11).map_remote(fn, parallelism=3).run_with(TestSink.probe(), fmat)
    sink.request(100)
    assert fn.wait_started(1, 2, 3) == [1, 2, 3]
    fn.expect_none_started()
    fn.release(1)
    sink.expect_next(10)
    assert fn.wait_started(4) == [1, 2, 3, 4]
    fn.expect_none_started()
    for x in range(2, 11):
        fn.release(x)
    sink.expect_next(*[x * 10 for x in range(2, 11)])
    sink.expect_complete()


def test_a_failure_fails_the_stream_and_resume_drops_the_element(fmat):
    def fn(x):
        if x == 3:
            raise TE("bad 3")
        return x

    with pytest.raises(TE, match="bad 3"):
        Source.range(1, 6).map_remote(fn, parallelism=2).run_with(Sink.seq(), fmat).result(3)
    out = Source.range(1, 6).map_remote(fn, parallelism=2).with_attributes(RESUME).run_with(Sink.seq(), fmat)
    assert out.result(3) == [1, 2, 4, 5]


def test_none_results_are_dropped(fmat):
    out = Source.range(0, 10).map_remote(lambda x: x if x % 3 else None, parallelism=2).run_with(Sink.seq(), fmat)
    assert out.result(3) == [1, 2, 4, 5, 7, 8]


@pytest.mark.parametrize("max_retries,ok", [(2, True), (1, False)])
def test_retry_exceptions_locally(fmat, max_retries, ok):
    attempts = {}
    lock = threading.Lock()

    def flaky(x):
        with lock:
            attempts[x] = attempts.get(x, 0) + 1
            n = attempts[x]
        if x == 2 and n <= 2:
            raise TE(f"flaky {n}")
        return x

    out = Source.range(1, 4).map_remote(flaky, parallelism=2, max_retries=max_retries, retry_exceptions=[TE]) \
        .run_with(Sink.seq(), fmat)
    if ok:
        assert out.result(3) == [1, 2, 3]
        assert attempts[2] == 3
    else:
        with pytest.raises(TE, match="flaky 2"):
            out.result(3)


def test_exceptions_are_not_retried_by_default(fmat):
    calls = []

    def boom(x):
        calls.append(x)
        raise TE("no retry")

    with pytest.raises(TE, match="no retry"):
        Source.single(1).map_remote(boom, parallelism=1).run_with(Sink.seq(), fmat).result(3)
    assert calls == [1]


def test_the_thread_pool_ends_with_the_stage(fmat):
    out = Source.range(0, 20).map_remote(lambda x: x + 1, parallelism=4).run_with(Sink.seq(), fmat)
    assert out.result(3) == list(range(1, 21))
    assert_all_stages_stopped(fmat)
    done = threading.Event()
    for _ in range(300):
        if not [t for t in threading.enumerate() if t.name.startswith("atoll-map-remote")]:
            done.set()
            break
        done.wait(0.01)  # the pool's threads exit once they see the shutdown
    assert done.is_set()


def test_validation():
    f = Flow()
    with pytest.raises(ValueError, match="map_remote: argument 'parallelism' must be >= 1, got 0"):
        f.map_remote(abs, parallelism=0)
    with pytest.raises(TypeError, match="map_remote: argument 'fn' must be callable"):
        f.map_remote(3, parallelism=1)
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'parallelism'"):
        f.map_remote(abs)
    with pytest.raises(ValueError, match="map_remote: argument 'num_cpus' must be >= 0, got -1"):
        f.map_remote(abs, parallelism=1, num_cpus=-1)
    with pytest.raises(TypeError, match="map_remote: argument 'resources' must be a dict"):
        f.map_remote(abs, parallelism=1, resources=["GPU"])
    with pytest.raises(TypeError, match="map_remote: argument 'retry_exceptions' must be a bool or a list"):
        f.map_remote(abs, parallelism=1, retry_exceptions="yes")
    with pytest.raises(ValueError, match="map_remote: argument 'max_retries' must be >= -1, got -2"):
        f.map_remote(abs, parallelism=1, max_retries=-2)
    with pytest.raises(TypeError, match="map_remote: argument 'fetch' must be a bool"):
        f.map_remote(abs, parallelism=1, fetch=1)
