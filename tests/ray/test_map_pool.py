"""map_pool on Ray: pool actors created by the island actor that runs the stage.

A named counting actor (``Counter``) records what the test checks - elements pulled and emitted, calls,
deaths - instead of timing. The pool actors ask for ``num_cpus=0.25`` so that several fit on the test
session's 4 CPUs beside the island actors. Every test ends with no pool actor alive.
"""
from __future__ import annotations

import os
import random
import time

import pytest
import ray

from atoll import Attributes, Flow, Keep, KillSwitches, Sink, Source, Supervision
from atoll.errors import PoolWorkerDiedError
from atoll.testkit import TestSink, TestSource

RESUME = Attributes.supervision_strategy(Supervision.resuming_decider)
CPU = 0.25


@ray.remote(num_cpus=0)
class Counter:
    def __init__(self):
        self.pulled = 0
        self.emitted = 0
        self.max_held = 0
        self.deaths: dict = {}
        self.instances = 0

    def pull(self):
        self.pulled += 1
        self.max_held = max(self.max_held, self.pulled - self.emitted)

    def emit(self):
        self.emitted += 1

    def attempt(self, x) -> int:
        """Count an attempt on ``x`` (the element a model dies on); returns how many there were before."""
        n = self.deaths.get(x, 0)
        self.deaths[x] = n + 1
        return n

    def new_instance(self):
        self.instances += 1

    def get(self):
        return {"pulled": self.pulled, "emitted": self.emitted, "max_held": self.max_held,
                "deaths": dict(self.deaths), "instances": self.instances}


@pytest.fixture
def counter(ray_session):
    name = f"pool-counter-{random.random()}"
    c = Counter.options(name=name).remote()
    yield name
    ray.kill(c)


class Model:
    """Random latency (0..10 ms) per call; dies (``os._exit``) on ``die_on`` the first ``deaths`` times."""

    def __init__(self, counter: str, die_on=None, deaths: int = 0, seed: int = 0):
        self.counter = ray.get_actor(counter)
        self.die_on = die_on
        self.deaths = deaths
        self.rng = random.Random(seed + os.getpid())
        ray.get(self.counter.new_instance.remote())

    def __call__(self, x):
        if x == self.die_on and ray.get(self.counter.attempt.remote(x)) < self.deaths:
            os._exit(1)
        time.sleep(self.rng.random() * 0.01)
        return x * 10


def _counted(counter: str, n: int):
    def gen():
        c = ray.get_actor(counter)
        for i in range(n):
            ray.get(c.pull.remote())
            yield i

    return gen


def _emit(counter: str):
    def fn(x):
        ray.get(ray.get_actor(counter).emit.remote())
        return x

    return fn


def pool_actors_alive(include_warm: bool = False) -> int:
    """Pool actors alive, apart from those idle in a materializer's warm pool (kept for the next graph,
    not leaked) unless ``include_warm``."""
    import ray_helpers
    from ray.util.state import list_actors

    from atoll._impl.actors.warm_pool import idle_actor_ids

    warm = set() if include_warm else idle_actor_ids()
    address = f"http://{ray_helpers.DASHBOARD}" if ray_helpers.DASHBOARD else None
    return len([a for a in list_actors(address=address, filters=[("class_name", "=", "PoolActor"),
                                                                 ("state", "=", "ALIVE")],
                                       limit=1000, raise_on_missing_output=False) if a.actor_id not in warm])


def wait_until(cond, timeout: float = 30.0, what: str = "") -> None:
    """Wait for an eventual state (Ray reports actor deaths asynchronously); fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or cond}")
        time.sleep(0.1)


def assert_no_pool_actor() -> None:
    wait_until(lambda: pool_actors_alive() == 0, what="every pool actor to be gone")


# =========================================================================== order and bound
def test_order_under_random_latency_and_the_bound(rmat, counter):
    import functools

    n, size, mif = 60, 2, 2
    control, fut = Source.from_iterator(_counted(counter, n)) \
        .map_pool(functools.partial(Model, counter), size=size, max_in_flight_per_actor=mif, num_cpus=CPU) \
        .map(_emit(counter)).to_mat(Sink.seq(), Keep.both).run(rmat)
    assert fut.result(120) == [x * 10 for x in range(n)]
    stats = ray.get(ray.get_actor(counter).get.remote())
    assert stats["pulled"] == stats["emitted"] == n
    # pulled counts an element when the stage pulls it, emitted once the next stage got it: the one in
    # between may have been pulled already (held <= parallelism), hence + 1
    assert stats["max_held"] <= size * mif + 1
    assert stats["instances"] == size  # factory ran once per actor
    assert control.restarts() == 0
    assert_no_pool_actor()


def test_batches_unordered_on_ray(rmat):
    out = Source.range(0, 100).map_pool(_Doubler, size=2, batch_size=8, ordered=False, num_cpus=CPU) \
        .run_with(Sink.seq(), rmat).result(120)
    assert sorted(out) == [2 * x for x in range(100)]
    assert_no_pool_actor()


class _Doubler:
    def __call__(self, xs):
        return [2 * x for x in xs]


# =========================================================================== actor death
def test_an_actor_that_dies_once_is_replaced(rmat, counter):
    import functools

    control, fut = Source.range(0, 12) \
        .map_pool(functools.partial(Model, counter, die_on=5, deaths=1), size=1, num_cpus=CPU) \
        .to_mat(Sink.seq(), Keep.both).run(rmat)
    assert fut.result(120) == [x * 10 for x in range(12)]
    assert control.restarts() == 1
    stats = ray.get(ray.get_actor(counter).get.remote())
    assert stats["deaths"] == {5: 2}  # attempts on 5: one died, the second ran
    assert stats["instances"] == 2  # the replacement ran the rest
    assert_no_pool_actor()


def test_an_element_that_always_kills_its_actor(rmat, counter):
    import functools

    fut = Source.range(0, 8) \
        .map_pool(functools.partial(Model, counter, die_on=3, deaths=100), size=1, max_retries=1, num_cpus=CPU) \
        .run_with(Sink.seq(), rmat)
    with pytest.raises(PoolWorkerDiedError) as info:
        fut.result(120)
    assert (info.value.index, info.value.attempts) == (3, 2)
    assert_no_pool_actor()
    out = Source.range(0, 8) \
        .map_pool(functools.partial(Model, counter, die_on=3, deaths=100), size=1, max_retries=1, num_cpus=CPU) \
        .with_attributes(RESUME).run_with(Sink.seq(), rmat)
    assert out.result(120) == [x * 10 for x in range(8) if x != 3]
    assert ray.get(ray.get_actor(counter).get.remote())["deaths"] == {3: 4}  # 2 attempts per run, all died
    assert_no_pool_actor()


# =========================================================================== scaling and control
def test_scale_to_zero_and_back_and_resize(rmat, counter):
    import functools

    # an element waits for a cold actor start (a new worker process): longer than the probe's 3 s default
    # on a loaded machine
    (src, control), sink = TestSource.probe().via_mat(
        Flow().map_pool(functools.partial(Model, counter), size=(0, 1), idle_timeout=0.3, num_cpus=CPU),
        Keep.both).to_mat(TestSink.probe(timeout=60.0), Keep.both).run(rmat)
    sink.request(10)
    assert control.size() == 0
    src.send_next(1)
    sink.expect_next(10)
    assert control.size() == 1
    wait_until(lambda: control.size() == 0, what="the idle actor to be stopped")
    src.send_next(2)  # cold start
    sink.expect_next(20)
    assert ray.get(ray.get_actor(counter).get.remote())["instances"] == 2  # a new actor ran it
    control.resize(2)
    assert control.size() == 2
    src.send_next(3)
    sink.expect_next(30)
    src.send_complete()
    sink.expect_complete()
    assert_no_pool_actor()


# =========================================================================== no actor left
def test_actors_started_by_the_driver_are_gone_after_the_island_died(rmat, counter):
    """On Ray islands the driver starts the first ``min`` actors (``prepare_on_driver``), so the island's death
    does not take them with it: the driver kills them once the graph has ended."""
    import functools

    from atoll.errors import IslandDiedError
    from atoll.testkit.chaos import kill_island

    (src, control), fut = TestSource.probe().via_mat(
        Flow().map_pool(functools.partial(Model, counter), size=2, num_cpus=CPU), Keep.both) \
        .to_mat(Sink.seq(), Keep.both).run(rmat)
    graph = rmat.running_graphs()[-1]
    src.send_next(1)
    wait_until(lambda: ray.get(ray.get_actor(counter).get.remote())["instances"] == 2, what="both actors built")
    assert pool_actors_alive() == 2
    kill_island(graph, 0)
    with pytest.raises(IslandDiedError):
        fut.result(60)
    # killed, not kept warm: the island never released them
    wait_until(lambda: pool_actors_alive(include_warm=True) == 0, what="every pool actor to be gone")


def test_no_pool_actor_left_after_cancel_and_kill_switch(rmat, counter):
    import functools

    (src, control), sink = TestSource.probe().via_mat(
        Flow().map_pool(functools.partial(Model, counter), size=2, num_cpus=CPU), Keep.both) \
        .to_mat(TestSink.probe(), Keep.both).run(rmat)
    sink.request(2)
    src.send_next(1)
    sink.expect_next(10)
    assert control.size() == 2
    sink.cancel()
    src.expect_cancellation()
    assert_no_pool_actor()

    (switch, control), fut = Source.repeat(1).via_mat(KillSwitches.single(), Keep.right) \
        .via_mat(Flow().map_pool(functools.partial(Model, counter), size=2, num_cpus=CPU), Keep.both) \
        .to_mat(Sink.ignore(), Keep.both).run(rmat)
    wait_until(lambda: control.size() == 2 and control.in_flight() > 0, what="the pool to work")
    switch.abort(RuntimeError("stop it"))
    with pytest.raises(RuntimeError, match="stop it"):
        fut.result(60)
    assert_no_pool_actor()


# =========================================================================== fetch=False
def _fetch(ref):
    return type(ref).__name__, ray.get(ref)


def test_fetch_false_emits_object_refs(rmat):
    out = Source.range(0, 10).map_pool(_Evens, size=1, fetch=False, batch_size=4, num_cpus=CPU) \
        .map(_fetch).run_with(Sink.seq(), rmat).result(120)
    assert out == [("ObjectRef", x) for x in range(0, 10, 2)]  # the None results are dropped
    assert_no_pool_actor()


class _Evens:
    def __call__(self, xs):
        return [x if x % 2 == 0 else None for x in xs]


# =========================================================================== user errors on Ray
class ModelError(Exception):
    pass


class _Raises:
    def __call__(self, x):
        if x == 2:
            raise ModelError(f"bad {x}")
        return x


class _BrokenInit:
    def __init__(self):
        raise ModelError("cannot load the model")

    def __call__(self, x):
        return x


def test_user_errors_reach_the_decider_as_themselves(rmat):
    fut = Source.range(0, 5).map_pool(_Raises, num_cpus=CPU).run_with(Sink.seq(), rmat)
    with pytest.raises(ModelError, match="bad 2"):
        fut.result(120)
    out = Source.range(0, 5).map_pool(_Raises, num_cpus=CPU).with_attributes(RESUME).run_with(Sink.seq(), rmat)
    assert out.result(120) == [0, 1, 3, 4]
    fut = Source.range(0, 5).map_pool(_BrokenInit, num_cpus=CPU).run_with(Sink.seq(), rmat)
    with pytest.raises(ModelError, match="cannot load the model"):
        fut.result(120)
    assert_no_pool_actor()


class _Pid:
    def __call__(self, x):
        return x, os.getpid()


def test_a_local_materializer_with_ray_uses_ray_actors(ray_session):
    from atoll import Materializer

    m = Materializer.local()
    try:
        out = Source.range(0, 20).map_pool(_Pid, size=2, num_cpus=CPU).run_with(Sink.seq(), m).result(120)
    finally:
        m.shutdown()
    assert [x for x, _ in out] == list(range(20))
    assert os.getpid() not in {pid for _, pid in out}  # ran in Ray actors, not in driver threads
    assert_no_pool_actor()


# =========================================================================== warm pool actors
class _ActorId:
    def __init__(self, counter: str):
        ray.get(ray.get_actor(counter).new_instance.remote())

    def __call__(self, x):
        if x == "fail":
            raise ModelError("fail")
        return ray.get_runtime_context().get_actor_id()


class _ActorIdBoth(_ActorId):
    """``_ActorId`` whose calls wait (at most 60 s) until ``factory()`` ran in 2 actors, then take 20 ms: a
    graph of a pool of 2 ends only after both actors were ready. (Without it a short graph could end on the
    first actor alone while the second still started - Ray starts as many worker processes at a time as
    the machine has cores - and a worker still starting when the stage ends is killed, not kept warm.)"""

    def __init__(self, counter: str):
        super().__init__(counter)
        self.counter = ray.get_actor(counter)

    def __call__(self, x):
        deadline = time.monotonic() + 60
        while ray.get(self.counter.get.remote())["instances"] < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.02)
        return super().__call__(x)


def _warm_pool_actor_ids() -> set:
    """Ids of the alive pool actors idle in a warm pool."""
    import ray_helpers
    from ray.util.state import list_actors

    from atoll._impl.actors.warm_pool import idle_actor_ids

    address = f"http://{ray_helpers.DASHBOARD}" if ray_helpers.DASHBOARD else None
    alive = {a.actor_id for a in list_actors(address=address, filters=[("class_name", "=", "PoolActor"),
                                                                        ("state", "=", "ALIVE")],
                                             limit=1000, raise_on_missing_output=False)}
    return alive & idle_actor_ids()


def test_driver_started_actors_of_a_clean_graph_are_reused_and_a_failed_graphs_are_killed(rmat, counter):
    """A graph that ended cleanly leaves the actors the driver started warm: the next graph with the same
    options takes them (same actors, ``factory()`` built again); a graph whose stage failed kills them."""
    import functools

    factory = functools.partial(_ActorIdBoth, counter)

    def run(data):
        # options of this test only: the warm actors other tests left (num_cpus=CPU) are not taken here
        return Source.from_iterable(data).map_pool(factory, size=2, num_cpus=0.2).run_with(Sink.seq(), rmat)

    before = _warm_pool_actor_ids()
    first = set(run(list(range(20))).result(120))
    wait_until(lambda: len(_warm_pool_actor_ids() - before) == 2, what="both actors kept warm")
    warm = _warm_pool_actor_ids() - before
    assert first <= warm
    second = set(run(list(range(20))).result(120))
    assert second <= warm  # the same worker processes
    assert ray.get(ray.get_actor(counter).get.remote())["instances"] == 4  # factory() ran again on each
    wait_until(lambda: _warm_pool_actor_ids() - before == warm, what="both actors back in the warm pool")
    with pytest.raises(ModelError):
        run([1, "fail", 2]).result(120)
    # the failed graph took both warm actors and killed them
    wait_until(lambda: not _warm_pool_actor_ids() & warm, what="the failed graph's actors to be gone")
    assert_no_pool_actor()


def test_a_graph_started_right_after_the_last_ones_result_takes_its_pool_actors(rmat, counter):
    """The driver hands a clean graph's pool actors to the warm pool as the graph ends, with their reset's
    answer as what ``take`` waits for, and a graph started at once waits for the ending one: the second graph,
    started as soon as the first one's result is in, runs on the same two actors."""
    import functools

    factory = functools.partial(_ActorIdBoth, counter)

    def run() -> set:
        # options of this test only (num_cpus): no other test's warm actors are taken
        return set(Source.from_iterable(range(20)).map_pool(factory, size=2, num_cpus=0.25)
                   .run_with(Sink.seq(), rmat).result(120))

    first = run()
    second = run()
    assert len(first) == 2 and second == first


def test_warm_pool_actors_are_killed_after_their_idle_time(rmat, counter, monkeypatch):
    """An idle warm pool actor holds the CPUs it asked for: it is killed once ``WARM_IDLE_S`` passed without
    a graph taking it (shortened here; the expiry runs on the driver)."""
    import functools

    from atoll._impl.ops import actor_pool

    monkeypatch.setattr(actor_pool, "WARM_IDLE_S", 0.5)
    before = _warm_pool_actor_ids()
    out = Source.range(0, 10).map_pool(functools.partial(_ActorId, counter), size=2, num_cpus=0.15) \
        .run_with(Sink.seq(), rmat).result(120)
    assert len(out) == 10
    # kept warm first (the give-back is asynchronous), then gone: wait for both eventual states
    wait_until(lambda: set(out) & (_warm_pool_actor_ids() - before) or not _pool_actor_alive(set(out)),
               what="the actors kept warm or already expired")
    wait_until(lambda: not _pool_actor_alive(set(out)), what="the idle warm actors to be killed")


def _pool_actor_alive(ids: set) -> bool:
    import ray_helpers
    from ray.util.state import list_actors

    address = f"http://{ray_helpers.DASHBOARD}" if ray_helpers.DASHBOARD else None
    alive = {a.actor_id for a in list_actors(address=address, filters=[("class_name", "=", "PoolActor"),
                                                                        ("state", "=", "ALIVE")],
                                             limit=1000, raise_on_missing_output=False)}
    return bool(alive & ids)


# =========================================================================== the start of pool actors
def test_pool_actor_processes_do_not_import_atoll(rmat):
    """The pool actor class is shipped by value (``pool_worker``): a pool actor's worker process imports what
    ``factory`` needs, not the ``atoll`` package - for the actors the driver starts (``Materializer.ray``) and
    for those the stage starts itself (``Materializer.local``, and scaling up). The factory is defined here,
    inside the test, so that it is pickled by value too (this test module imports atoll)."""
    from atoll import Materializer

    class Probe:
        def __call__(self, x):
            import sys

            return x, "atoll" in sys.modules

    # options of their own (num_cpus): no warm actor of another test (whose factory imported atoll) is reused
    out = Source.range(0, 6).map_pool(Probe, size=2, num_cpus=0.21).run_with(Sink.seq(), rmat).result(120)
    assert out == [(i, False) for i in range(6)]
    m = Materializer.local()
    try:
        out = Source.range(0, 40).map_pool(Probe, size=(1, 2), num_cpus=0.21, max_in_flight_per_actor=1) \
            .run_with(Sink.seq(), m).result(120)
    finally:
        m.shutdown()
    assert out == [(i, False) for i in range(40)]
    assert_no_pool_actor()


def test_a_driver_handle_whose_actor_was_never_created_is_not_adopted(ray_session):
    """A stage copy whose driver-side handles have no actor yet (``RayWorker.later()``, created only once the
    island actors exist) starts its own workers instead of adopting them; the results are exact."""
    import copy

    from atoll import Materializer
    from atoll._impl.ops.actor_pool import RayWorker
    from atoll._impl.ops.pool_map import MapPool

    stage = copy.copy(MapPool(_Pid, size=2, num_cpus=CPU))
    stage.prestarted = (RayWorker.later(), RayWorker.later())
    m = Materializer.local()
    try:
        out = Source.range(0, 10).via(Flow.from_graph(stage)).run_with(Sink.seq(), m).result(120)
    finally:
        m.shutdown()
    assert [x for x, _ in out] == list(range(10))
    assert os.getpid() not in {pid for _, pid in out}  # Ray actors the stage started
    assert all(w.actor is None for w in stage.prestarted)
    assert_no_pool_actor()
