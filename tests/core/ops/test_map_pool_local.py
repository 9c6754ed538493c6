"""map_pool without Ray: the same stage on local worker threads (one ``factory()`` instance per thread).

The model's calls block on gates the test opens (``Ctl``), so completion order is chosen by the test,
never by sleeping. Batching and idle scaling run on ``ManualClock``. Actor death needs Ray
(``tests/ray/test_map_pool.py``).
"""
from __future__ import annotations

import functools
import queue
import random
import threading

import pytest
from ops_kit import TE, fmat  # noqa: F401

from atoll import Attributes, Flow, Keep, Materializer, Sink, Source, Supervision
from atoll.errors import StreamDetachedError
from atoll.testkit import ManualClock, TestSink, TestSource, assert_all_stages_stopped

RESUME = Attributes.supervision_strategy(Supervision.resuming_decider)
RESTART = Attributes.supervision_strategy(Supervision.restarting_decider)
_SAME = object()


class Ctl:
    """Shared by the model instances of one test: records calls and instances; each call waits until
    the test releases its element (with a value or an exception)."""

    def __init__(self, gated: bool = True):
        self.gated = gated
        self.lock = threading.Lock()
        self.calls: "queue.Queue" = queue.Queue()
        self.gates: dict = {}
        self.outcomes: dict = {}
        self.instances = 0
        self.current: dict = {}  # instance -> calls running now
        self.max_current = 0
        self.closed = False

    def _gate(self, key) -> threading.Event:
        with self.lock:
            ev = self.gates.get(key)
            if ev is None:
                ev = self.gates[key] = threading.Event()
                if self.closed:
                    ev.set()
            return ev

    def new_instance(self) -> int:
        with self.lock:
            self.instances += 1
            return self.instances

    def enter(self, inst, key):
        with self.lock:
            self.current[inst] = self.current.get(inst, 0) + 1
            self.max_current = max(self.max_current, sum(self.current.values()))
        self.calls.put(key)
        if self.gated:
            self._gate(key).wait(10.0)
        with self.lock:
            self.current[inst] -= 1
            out = self.outcomes.pop(key, _SAME)
        if isinstance(out, BaseException):
            raise out
        return key if out is _SAME else out

    def next_call(self, timeout: float = 5.0):
        try:
            return self.calls.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("the model was not called") from None

    def release(self, key, outcome=_SAME) -> None:
        with self.lock:
            if outcome is not _SAME:
                self.outcomes[key] = outcome
        self._gate(key).set()

    def release_all(self) -> None:
        with self.lock:
            self.closed = True
            gates = list(self.gates.values())
        for g in gates:
            g.set()


class Gated:
    def __init__(self, ctl: Ctl):
        self.ctl = ctl
        self.inst = ctl.new_instance()

    def __call__(self, x):
        return self.ctl.enter(self.inst, x)


class Batches:
    """Batch model: records each batch; ``bad`` maps a first element to a wrong result length."""

    def __init__(self, ctl: Ctl, bad=None):
        self.ctl = ctl
        self.bad = bad or {}
        ctl.new_instance()

    def __call__(self, xs):
        self.ctl.calls.put(list(xs))
        n = self.bad.get(xs[0], len(xs))
        return [x * 10 for x in xs][:n] + [0] * max(0, n - len(xs))


@pytest.fixture
def ctl():
    c = Ctl()
    yield c
    c.release_all()


def run_probes(flow, mat, signals=None):
    """``TestSource.probe() -> flow -> TestSink.probe()``: ``(src, control, sink)``."""
    (src, control), sink = TestSource.probe().via_mat(flow, Keep.both) \
        .to_mat(TestSink.probe(signals=signals), Keep.both) \
        .add_attributes(Attributes.input_buffer(1, 1)).run(mat)
    return src, control, sink


def pool_threads():
    return [t for t in threading.enumerate() if t.name == "atoll-pool"]


def assert_no_pool_thread(before=()):
    for t in pool_threads():
        if t not in before:
            t.join(5.0)
            assert not t.is_alive(), f"pool worker thread {t} still running"


# =========================================================================== order
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("ordered", [True, False])
def test_order_under_completion_order_chosen_by_the_test(fmat, ctl, seed, ordered):
    rng = random.Random(seed)
    n, par = 30, 3
    sink = Source.range(0, n).map_pool(functools.partial(Gated, ctl), size=3, max_in_flight_per_actor=1,
                                       ordered=ordered).run_with(TestSink.probe(), fmat)
    sink.request(1000)
    called, released, out = [], [], []
    while len(released) < n:
        prefix = 0
        while prefix in released:
            prefix += 1
        emitted = prefix if ordered else len(released)
        target = min(n, emitted + par)  # the stage holds at most `par` elements: that many have been called
        while len(called) < target:
            called.append(ctl.next_call())
        assert len(called) == target
        x = rng.choice([c for c in called if c not in released])
        ctl.release(x)
        released.append(x)
        if not ordered:
            out.append(sink.expect_next())
    if ordered:
        for x in range(n):
            sink.expect_next(x)
    else:
        assert out == released  # completion order
    sink.expect_complete()
    assert ctl.instances == 3
    assert ctl.max_current <= 3
    assert_no_pool_thread()


def test_results_in_order_with_batches_and_several_actors(fmat):
    class Double:
        def __call__(self, xs):
            return [2 * x for x in xs]

    out = Source.range(0, 200).map_pool(Double, size=3, batch_size=7).run_with(Sink.seq(), fmat).result(10)
    assert out == [2 * x for x in range(200)]


def test_none_results_are_dropped(fmat):
    class Evens:
        def __call__(self, x):
            return x if x % 2 == 0 else None

    assert Source.range(0, 10).map_pool(Evens, size=2).run_with(Sink.seq(), fmat).result(5) == [0, 2, 4, 6, 8]


def test_factory_runs_once_per_worker_and_method_is_used(fmat):
    made = []

    class Model:
        def __init__(self, k):
            made.append(k)
            self.k = k

        def predict(self, x):
            return x + self.k

    out = Source.range(0, 50).map_pool(functools.partial(Model, 100), size=2, method="predict") \
        .run_with(Sink.seq(), fmat).result(5)
    assert out == list(range(100, 150))
    assert made == [100, 100]


def test_factory_may_be_a_function_returning_a_callable(fmat):
    def make():
        table = {i: i * i for i in range(10)}
        return table.__getitem__

    assert Source.range(0, 10).map_pool(make, size=2).run_with(Sink.seq(), fmat).result(5) == [i * i for i in range(10)]


# =========================================================================== the bound
def test_holds_at_most_parallelism_elements(fmat, ctl):
    """size 2 x 2 in flight = 4 held; a completed element that is not emitted yet still counts."""
    pulled = []

    def gen():
        for i in range(6):
            pulled.append(i)
            yield i

    control, sink = Source.from_iterator(gen) \
        .map_pool(functools.partial(Gated, ctl), size=2, max_in_flight_per_actor=2) \
        .to_mat(TestSink.probe(), Keep.both).run(fmat)
    sink.request(1)
    entered = {ctl.next_call(), ctl.next_call()}  # a worker runs one call at a time, the second waits in it
    assert entered <= {0, 1, 2, 3}
    sink.expect_no_message(0.2)
    assert pulled == [0, 1, 2, 3]  # held == 4: nothing more pulled
    assert control.in_flight() == 4
    for i in (1, 2, 3):
        ctl.release(i)  # done but behind 0: still held
    sink.expect_no_message(0.2)
    assert pulled == [0, 1, 2, 3]
    ctl.release(0)
    sink.expect_next(0)
    ctl.release(4)
    sink.request(10)
    sink.expect_next(1, 2, 3, 4)
    assert pulled[:5] == [0, 1, 2, 3, 4]
    ctl.release(5)
    sink.expect_next(5)
    sink.expect_complete()
    assert ctl.max_current <= 2


def test_no_call_before_downstream_demand(fmat, ctl):
    control, sink = Source.range(0, 10).map_pool(functools.partial(Gated, ctl), size=1) \
        .to_mat(TestSink.probe(), Keep.both).run(fmat)
    sink.ensure_subscription()
    sink.expect_no_message(0.2)
    assert ctl.calls.empty() and control.in_flight() == 0
    assert control.size() == 1  # the worker starts without waiting for demand
    sink.cancel()


# =========================================================================== supervision
class Failing:
    def __init__(self, bad, made=None):
        self.bad = bad
        if made is not None:
            made.append(self)

    def __call__(self, x):
        if x in self.bad:
            raise TE(f"bad {x}")
        return x


def test_stop_fails_the_stream(fmat):
    before = pool_threads()
    fut = Source.range(0, 10).map_pool(functools.partial(Failing, {3}), size=2).run_with(Sink.seq(), fmat)
    with pytest.raises(TE, match="bad 3"):
        fut.result(5)
    assert_no_pool_thread(before)


def test_resume_drops_the_element(fmat):
    out = Source.range(0, 8).map_pool(functools.partial(Failing, {3, 5}), size=2) \
        .with_attributes(RESUME).run_with(Sink.seq(), fmat).result(5)
    assert out == [0, 1, 2, 4, 6, 7]


def test_restart_drops_the_element_and_replaces_the_worker(fmat):
    made = []
    control, fut = Source.range(0, 8).map_pool(functools.partial(Failing, {3}, made), size=1) \
        .with_attributes(RESTART).to_mat(Sink.seq(), Keep.both).run(fmat)
    assert fut.result(5) == [0, 1, 2, 4, 5, 6, 7]
    assert len(made) == 2
    assert control.restarts() == 1


def test_retry_exceptions_retries_then_asks_the_decider(fmat):
    attempts: dict = {}
    lock = threading.Lock()

    class Flaky:
        def __call__(self, x):
            with lock:
                attempts[x] = attempts.get(x, 0) + 1
                k = attempts[x]
            if x == 2 and k <= 2:
                raise TimeoutError(f"flaky {x}")
            if x == 4:
                raise TimeoutError("always")
            return x

    out = Source.range(0, 6).map_pool(Flaky, size=2, max_retries=2, retry_exceptions=(TimeoutError,)) \
        .with_attributes(RESUME).run_with(Sink.seq(), fmat).result(5)
    assert out == [0, 1, 2, 3, 5]
    assert attempts[2] == 3 and attempts[4] == 3  # 1 + max_retries
    attempts.clear()
    fut = Source.range(0, 6).map_pool(Flaky, size=1, max_retries=0, retry_exceptions=TimeoutError) \
        .run_with(Sink.seq(), fmat)
    with pytest.raises(TimeoutError, match="flaky 2"):
        fut.result(5)


def test_exceptions_not_listed_are_not_retried(fmat):
    calls = []

    class Bad:
        def __call__(self, x):
            calls.append(x)
            raise TE("no retry")

    fut = Source.single(1).map_pool(Bad, retry_exceptions=(TimeoutError,)).run_with(Sink.seq(), fmat)
    with pytest.raises(TE):
        fut.result(5)
    assert calls == [1]


def test_factory_failure_fails_the_stream_after_consecutive_failures(fmat):
    tries = []

    class Broken:
        def __init__(self):
            tries.append(1)
            raise TE("cannot load the model")

        def __call__(self, x):
            return x

    before = pool_threads()
    fut = Source.range(0, 5).map_pool(Broken, size=1).run_with(Sink.seq(), fmat)
    with pytest.raises(TE, match="cannot load the model"):
        fut.result(5)
    assert len(tries) == 3
    assert_no_pool_thread(before)


def test_one_failing_start_is_replaced(fmat):
    tries = []
    lock = threading.Lock()

    class FirstFails:
        def __init__(self):
            with lock:
                tries.append(1)
                first = len(tries) == 1
            if first:
                raise TE("first start fails")

        def __call__(self, x):
            return x

    assert Source.range(0, 5).map_pool(FirstFails, size=1).run_with(Sink.seq(), fmat).result(5) == [0, 1, 2, 3, 4]
    assert len(tries) == 2


def test_upstream_failure_and_cancel_stop_the_workers(fmat, ctl):
    before = pool_threads()
    src, _control, sink = run_probes(Flow().map_pool(functools.partial(Gated, ctl), size=2), fmat)
    sink.request(5)
    src.send_next(1)
    ctl.next_call()
    src.send_error(TE("upstream"))
    assert sink.expect_error() == TE("upstream")
    ctl.release_all()
    assert_no_pool_thread(before)
    src, _control, sink = run_probes(Flow().map_pool(functools.partial(Gated, ctl), size=2), fmat)
    sink.request(5)
    src.send_next(1)
    sink.expect_next(1)
    sink.cancel()
    src.expect_cancellation()
    assert_no_pool_thread(before)


# =========================================================================== batching (virtual time)
@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def cmat(clock):
    m = Materializer.local(clock=clock)
    yield m
    try:
        assert_all_stages_stopped(m, timeout=5.0)
    finally:
        m.shutdown()


def test_batch_timeout_bounds_the_wait_of_a_partial_batch(cmat, clock):
    ctl = Ctl(gated=False)
    src, control, sink = run_probes(
        Flow().map_pool(functools.partial(Batches, ctl), size=1, max_in_flight_per_actor=1, batch_size=4,
                        batch_timeout=1.0), cmat)
    sink.request(100)
    src.send_next(0)
    src.send_next(1)
    clock.advance(0.5)
    assert ctl.calls.empty() and control.in_flight() == 0  # a partial batch waits
    clock.advance(0.5)  # the oldest element waited 1 s: the batch goes
    assert ctl.next_call() == [0, 1]
    sink.expect_next(0, 10)
    for x in (2, 3, 4, 5):  # a full batch goes at once
        src.send_next(x)
    assert ctl.next_call() == [2, 3, 4, 5]
    sink.expect_next(20, 30, 40, 50)
    src.send_next(6)
    src.send_complete()  # upstream done: a partial batch cannot grow, it goes at once
    assert ctl.next_call() == [6]
    sink.expect_next(60)
    sink.expect_complete()


class GatedBatches:
    def __init__(self, ctl: Ctl):
        self.ctl = ctl

    def __call__(self, xs):
        self.ctl.enter(0, tuple(xs))
        return xs


def test_elements_whose_wait_is_over_go_when_a_slot_frees(cmat, clock, ctl):
    src, _control, sink = run_probes(Flow().map_pool(functools.partial(GatedBatches, ctl), size=1,
                                                     max_in_flight_per_actor=2, batch_size=3, batch_timeout=1.0), cmat)
    sink.request(100)
    src.send_next(0)
    clock.advance(1.0)  # the partial batch waited batch_timeout
    assert ctl.next_call() == (0,)
    for x in (1, 2, 3):
        src.send_next(x)  # a full batch goes at once (second slot of the worker)
    clock.advance(0)
    src.send_next(4)
    clock.advance(1.0)  # 4 waited 1 s, but both slots are busy
    ctl.release((0,))
    sink.expect_next(0)
    assert ctl.next_call() == (1, 2, 3)
    ctl.release((1, 2, 3))
    assert ctl.next_call() == (4,)  # went when (0,) freed a slot, without more time passing
    ctl.release((4,))
    sink.expect_next(1, 2, 3, 4)
    src.send_complete()
    sink.expect_complete()


def test_without_batch_timeout_a_partial_batch_waits_until_full(cmat, clock):
    ctl = Ctl(gated=False)
    src, control, sink = run_probes(
        Flow().map_pool(functools.partial(Batches, ctl), size=1, max_in_flight_per_actor=2, batch_size=3), cmat)
    sink.request(100)
    src.send_next(0)
    src.send_next(1)
    clock.advance(1000.0)
    assert ctl.calls.empty() and control.in_flight() == 0
    src.send_next(2)
    assert ctl.next_call() == [0, 1, 2]
    sink.expect_next(0, 10, 20)
    src.send_next(3)
    src.send_complete()  # cannot grow any more: goes
    assert ctl.next_call() == [3]
    sink.expect_next(30)
    sink.expect_complete()


def test_batch_result_length_mismatch_fails(fmat):
    ctl = Ctl(gated=False)
    fut = Source.range(0, 16) \
        .map_pool(functools.partial(Batches, ctl, {8: 7}), batch_size=8, batch_timeout=100.0, size=1) \
        .run_with(Sink.seq(), fmat)
    with pytest.raises(ValueError, match=r"^map_pool\(Batches\): fn returned 7 results for 8 elements$"):
        fut.result(5)


# =========================================================================== scaling and PoolControl
def test_scale_from_zero_and_back_on_idle(cmat, clock):
    ctl = Ctl(gated=False)
    src, control, sink = run_probes(
        Flow().map_pool(functools.partial(Gated, ctl), size=(0, 2), idle_timeout=5.0), cmat)
    sink.request(10)
    sink.expect_no_message(0.1)
    assert control.size() == 0 and ctl.instances == 0
    src.send_next(1)  # waits for a slot with no worker: one starts
    sink.expect_next(1)
    assert control.size() == 1 and ctl.instances == 1
    clock.advance(4.9)
    assert control.size() == 1
    clock.advance(0.1)  # idle for idle_timeout: stopped (alive > min = 0)
    assert control.size() == 0
    src.send_next(2)  # cold start again
    sink.expect_next(2)
    assert ctl.instances == 2
    src.send_complete()
    sink.expect_complete()


def test_scale_up_starts_what_the_waiting_elements_need(fmat, ctl):
    src, control, sink = run_probes(
        Flow().map_pool(functools.partial(Gated, ctl), size=(1, 3), max_in_flight_per_actor=1), fmat)
    sink.request(10)
    src.send_next(0)
    assert ctl.next_call() == 0
    src.send_next(1)
    src.send_next(2)
    assert sorted([ctl.next_call(), ctl.next_call()]) == [1, 2]
    assert control.size() == 3 and ctl.instances == 3
    src.send_next(3)  # at max: waits
    assert control.in_flight() == 3
    for x in range(3):
        ctl.release(x)
    assert ctl.next_call() == 3
    ctl.release(3)
    sink.expect_next(0, 1, 2, 3)
    src.send_complete()
    sink.expect_complete()


def test_resize_and_pool_control(fmat, ctl):
    src, control, sink = run_probes(
        Flow().map_pool(functools.partial(Gated, ctl), size=1, max_in_flight_per_actor=1), fmat)
    sink.request(10)
    assert control.size() == 1
    control.resize(3)
    assert control.size() == 3
    for x in range(3):
        src.send_next(x)
    assert sorted(ctl.next_call() for _ in range(3)) == [0, 1, 2]
    assert control.in_flight() == 3
    control.resize(0)  # pause: the running elements go back to wait
    assert control.size() == 0 and control.in_flight() == 0
    for x in range(3):
        ctl.release(x)  # the stopped workers' late results are ignored
    sink.expect_no_message(0.2)
    control.resize(1)
    assert sorted(ctl.next_call() for _ in range(3)) == [0, 1, 2]  # sent again, one at a time
    sink.expect_next(0, 1, 2)
    with pytest.raises(ValueError, match="resize"):
        control.resize(-1)
    src.send_complete()
    sink.expect_complete()
    assert control.size() == 0
    with pytest.raises(StreamDetachedError):
        control.resize(2)


# =========================================================================== arguments
class M:
    def __call__(self, x):
        return x


@pytest.mark.parametrize("kwargs,exc,msg", [
    ({"size": (3, 2)}, ValueError,
     r"map_pool: size must be >= 1 or \(min, max\) with 0 <= min <= max, max >= 1, got \(3, 2\)"),
    ({"size": 0}, ValueError, "map_pool: size must be >= 1"),
    ({"size": (0, 0)}, ValueError, "map_pool: size must be"),
    ({"size": (1, 2, 3)}, ValueError, "map_pool: size must be"),
    ({"max_in_flight_per_actor": 0}, ValueError, "map_pool: argument 'max_in_flight_per_actor' must be >= 1"),
    ({"batch_size": 0}, ValueError, "map_pool: argument 'batch_size' must be >= 1"),
    ({"batch_timeout": 1.0}, ValueError, "map_pool: argument 'batch_timeout' needs batch_size"),
    ({"batch_size": 4, "batch_timeout": 0}, ValueError, "map_pool: argument 'batch_timeout' must be > 0"),
    ({"ordered": 1}, TypeError, "map_pool: argument 'ordered' must be a bool"),
    ({"method": ""}, TypeError, "map_pool: argument 'method'"),
    ({"max_retries": -1}, ValueError, "map_pool: argument 'max_retries' must be >= 0"),
    ({"retry_exceptions": [ValueError]}, TypeError, "map_pool: argument 'retry_exceptions'"),
    ({"num_cpus": -1}, ValueError, "map_pool: argument 'num_cpus'"),
    ({"resources": 3}, TypeError, "map_pool: argument 'resources'"),
    ({"idle_timeout": 0}, ValueError, "map_pool: argument 'idle_timeout'"),
    ({"ready_timeout": -1}, ValueError, "map_pool: argument 'ready_timeout'"),
    ({"fetch": None}, TypeError, "map_pool: argument 'fetch'"),
])
def test_bad_arguments_fail_at_build_time(kwargs, exc, msg):
    with pytest.raises(exc, match=msg):
        Flow().map_pool(M, **kwargs)


def test_factory_must_be_callable():
    with pytest.raises(TypeError, match="map_pool: argument 'factory' must be callable"):
        Source.single(1).map_pool(3)


def test_missing_method_fails_the_stream(fmat):
    fut = Source.single(1).map_pool(M, method="predict").run_with(Sink.seq(), fmat)
    with pytest.raises(TypeError, match=r"map_pool\(M\): .* has no callable 'predict'"):
        fut.result(5)


# =========================================================================== control signals and event time
def test_ordered_signals_stay_behind_the_elements_before_them(fmat, ctl):
    src, _control, sink = run_probes(
        Flow().map_pool(functools.partial(Gated, ctl), size=3, max_in_flight_per_actor=1), fmat, signals=True)
    sink.request(10)
    src.send_next(1)
    src.send_next(2)
    src.send_watermark(5)
    src.send_next(3)
    assert sorted(ctl.next_call() for _ in range(3)) == [1, 2, 3]
    for n in (3, 2, 1):
        ctl.release(n)
    sink.expect_next(1)
    sink.expect_next(2)
    sink.expect_watermark(5)
    sink.expect_next(3)
    src.send_complete()
    sink.expect_complete()


def test_unordered_results_do_not_cross_a_signal(fmat, ctl):
    src, _control, sink = run_probes(
        Flow().map_pool(functools.partial(Gated, ctl), size=3, ordered=False, max_in_flight_per_actor=1), fmat,
        signals=True)
    sink.request(10)
    src.send_next(1)
    src.send_next(2)
    src.send_watermark(5)
    src.send_next(3)
    assert sorted(ctl.next_call() for _ in range(3)) == [1, 2, 3]
    ctl.release(3)  # arrived after the watermark: waits for it
    sink.expect_no_message(0.1)
    ctl.release(2)
    sink.expect_next(2)
    ctl.release(1)
    sink.expect_next(1)
    sink.expect_watermark(5)
    sink.expect_next(3)
    src.send_complete()
    sink.expect_complete()


@pytest.mark.parametrize("ordered", [True, False])
def test_results_keep_their_elements_timestamps(fmat, ctl, ordered):
    (src, _control), sink = TestSource.probe(event_time=True) \
        .via_mat(Flow().map_pool(functools.partial(Gated, ctl), size=3, ordered=ordered, max_in_flight_per_actor=1),
                 Keep.both) \
        .to_mat(TestSink.probe(event_time=True), Keep.both).run(fmat)
    sink.request(3)
    for n, ts in ((1, 100), (2, 200), (3, 300)):
        src.send_next(n, ts=ts)
    assert sorted(ctl.next_call() for _ in range(3)) == [1, 2, 3]
    ctl.release(3)
    if not ordered:
        sink.expect_next_with_timestamp(3, 300)
    ctl.release(1)
    if not ordered:
        sink.expect_next_with_timestamp(1, 100)
    ctl.release(2)
    for n in ((1, 2, 3) if ordered else (2,)):
        sink.expect_next_with_timestamp(n, n * 100)
    src.send_complete()
    sink.expect_complete()


def test_no_worker_ready_within_ready_timeout_fails_the_stream(cmat, clock):
    from atoll._impl.ops.pool_map import PoolStartTimeoutError

    gate = threading.Event()

    class Slow:
        def __init__(self):
            gate.wait(10.0)  # "cannot be placed": never ready until the test lets it go

        def __call__(self, x):
            return x

    before = pool_threads()
    try:
        control, sink = Source.range(0, 3).map_pool(Slow, size=2, ready_timeout=30.0) \
            .to_mat(TestSink.probe(), Keep.both).run(cmat)
        sink.request(3)
        clock.advance(29.0)
        assert control.size() == 2
        sink.expect_no_message(0.0)
        clock.advance(1.0)
        err = sink.expect_error()
        assert isinstance(err, PoolStartTimeoutError)
        assert "map_pool(Slow): no pool worker was ready within 30.0 s" in str(err)
    finally:
        gate.set()
    assert_no_pool_thread(before)


# =========================================================================== warm pool actors: the release protocol
def test_pool_actor_is_kept_warm_only_if_the_islands_last_call_was_its_release():
    """``PoolActor`` (the Ray actor class, called in-process here): the driver's ``reset`` answers True only
    when the island's last call was ``release`` - a later ``ready`` or call (a restarted attempt adopting the
    actor) un-releases it; the released instance stays usable until ``reset``; ``init`` builds a new one."""
    from atoll._impl.ops.actor_pool import PoolActor

    made = []

    def factory(k=10):
        made.append(k)
        return lambda x: x * k

    a = PoolActor(factory, "__call__")
    a.ready()
    assert a.call([1, 2], False) == [10, 20]
    assert a.reset() is False  # never released: killed
    a = PoolActor(factory, "__call__")
    a.release()
    assert a.call([3], False) == [30]  # an attempt adopting it still finds its instance
    assert a.reset() is False
    a = PoolActor(factory, "__call__")
    a.call([1], False)
    a.release()
    a.ready()  # a restarted attempt's readiness check
    assert a.reset() is False
    a = PoolActor(factory, "__call__")
    a.call([1], False)
    a.release()
    assert a.reset() is True  # kept warm; its instance is gone
    assert a.inst is None
    a.init(lambda: factory(7), "__call__")
    assert a.call([2], False) == [14]
    assert made == [10, 10, 10, 10, 7]
    with pytest.raises(ZeroDivisionError):
        a.init(lambda: 1 / 0, "__call__")
