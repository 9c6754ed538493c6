"""Warm island actors: a cleanly ended graph's actors are reset and serve the next graph; failed, aborted or
cancelled graphs never give theirs back; idle ones stop after the idle timeout and at shutdown."""
from __future__ import annotations

import threading
import time

import pytest
import ray

from atoll import Keep, KillSwitches, Materializer, Sink, Source
from atoll._impl.actors.messages import Detached
from atoll._impl.actors.warm_pool import WarmActorPool
from atoll.errors import IslandDiedError
from atoll.testkit import TestSink, TestSource

from ray_helpers import alive_island_actors, wait_no_island_actors


def wait_until(cond, timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def alive_ids() -> set:
    return {a.actor_id for a in alive_island_actors(include_warm=True)}


def run_switched(mat, islands: int = 2, island_options=None):
    """A graph of ``islands`` islands that runs until its kill switch: (switch, count future, graph, actor ids)."""
    g = Source.repeat(1).via_mat(KillSwitches.single(), Keep.right).island(**(island_options or {}))
    for _ in range(islands - 2):
        g = g.map(lambda x: x).island(**(island_options or {}))
    switch, count = g.map(lambda x: x).to_mat(Sink.fold(0, lambda a, b: a + b), Keep.both).run(mat)
    graph = mat.running_graphs()[-1]
    wait_until(lambda: all(i["state"] == "running" and "actor_id" in i for i in graph.islands()),
               what="every island running")
    return switch, count, graph, sorted(i["actor_id"] for i in graph.islands())


def stop(switch, count, graph) -> int:
    switch.shutdown()
    n = count.result(30)
    assert graph.wait(30)
    return n


def run_probes(mat):
    """TestSource -> island -> map -> TestSink: (source probe, sink probe, graph)."""
    src, sink = TestSource.probe().island().map(lambda x: x * 10).to_mat(TestSink.probe(), Keep.both).run(mat)
    return src, sink, mat.running_graphs()[-1]


def exchange(src, sink, graph, elems=(1, 2, 3)) -> None:
    """The demand-driven exchange, then completion: exact elements and signal order."""
    sink.request(len(elems))
    assert src.expect_request() >= 1
    src.send_next_many(*elems)
    sink.expect_next(*[x * 10 for x in elems])
    src.send_complete()
    sink.expect_complete()
    assert graph.wait(30)


@pytest.fixture
def mat(ray_session):
    m = Materializer.ray(start_timeout=30)
    yield m
    m.shutdown()
    assert wait_no_island_actors(include_warm=True) == []


def test_a_cleanly_ended_graphs_actors_serve_the_next_graph(mat):
    s1, c1, g1, ids1 = run_switched(mat)
    stop(s1, c1, g1)
    assert mat.warm_pool.idle_count() == 2
    s2, c2, g2, ids2 = run_switched(mat)
    assert ids2 == ids1 and mat.warm_pool.reused == 2 and mat.warm_pool.idle_count() == 0
    stop(s2, c2, g2)
    assert mat.warm_pool.idle_count() == 2


def test_graphs_started_as_soon_as_the_last_ones_result_is_in_run_on_its_actors(mat):
    """A graph gives its actors back when the driver has heard every island end, a few milliseconds after its
    sink's future completed; the next graph, started at once, waits for them (``WarmActorPool.take``) instead
    of starting fresh worker processes: five graphs in a row run on the first one's two actors."""
    def once() -> int:
        return Source.range(0, 1000).island().to_mat(Sink.fold(0, lambda a, b: a + b), Keep.right) \
            .run(mat).result(60)

    for _ in range(5):
        assert once() == 499500
    assert mat.warm_pool.reused == 8
    wait_until(lambda: not mat.running_graphs(), what="the last graph to end")
    assert mat.warm_pool.idle_count() == 2 and len(alive_ids()) == 2


class _FakeActor:
    """What the pool keeps of an actor when its ``ready`` is None: only the id (no Ray call is made)."""

    def __init__(self, n: int):
        self._actor_id = bytes([n])


class _ObservedPool(WarmActorPool):
    """Tells when ``take`` is about to wait for a winding-down graph (the waiting thread holds the lock until it
    waits, so whatever the test does under the lock next happens while it waits)."""

    def __init__(self, idle_timeout: float):
        super().__init__(idle_timeout)
        self.waiting = threading.Event()

    def _wait_for_returns(self) -> bool:
        if self._returning:
            self.waiting.set()
        return super()._wait_for_returns()


def _take_in_thread(pool):
    got = []
    t = threading.Thread(target=lambda: got.append(pool.take("k")), daemon=True)
    t.start()
    return t, got


def test_take_waits_for_a_winding_down_graphs_actors_and_stops_waiting_when_it_is_done():
    pool = _ObservedPool(idle_timeout=60)
    pool.RETURN_WAIT = 60.0
    try:
        pool.returning(1)
        t, got = _take_in_thread(pool)
        assert pool.waiting.wait(30)
        actor = _FakeActor(1)
        pool.add_fresh("k", actor, None)  # graph 1 gives an actor back: the waiting take gets it
        t.join(30)
        assert got == [actor]
        pool.waiting.clear()
        t, got = _take_in_thread(pool)  # graph 1 still winding down, nothing idle: waits again
        assert pool.waiting.wait(30)
        pool.returned(1)  # graph 1 is done, and gave nothing more: a fresh actor is needed
        t.join(30)
        assert got == [None]
        assert pool.take("k") is None  # nothing winding down: no wait at all
    finally:
        pool.shutdown()


def test_take_waits_for_a_winding_down_graph_no_longer_than_return_wait():
    pool = WarmActorPool(idle_timeout=60)
    pool.RETURN_WAIT = 0.05  # a graph whose future completed, running on: take gives up on it
    try:
        pool.returning(1)
        t, got = _take_in_thread(pool)
        t.join(30)
        assert got == [None]
        assert not pool._returning  # forgotten: later takes do not wait for it again
    finally:
        pool.shutdown()


def test_a_graph_that_restarts_is_no_longer_waited_for():
    """A graph marked as winding down (a future of it completed) whose island then fails and which restarts is not
    ending after all: its next attempt's ``take`` must not wait for the graph itself."""
    import types

    from atoll._impl.actors.running import RayRunningGraph, _Island

    pool = WarmActorPool(idle_timeout=60)
    pool.RETURN_WAIT = 60.0
    try:
        record = _Island(0, "island-0", object(), {}, 0, "k")
        graph = RayRunningGraph("g", [record], None, pool)
        started = []
        graph._recovery = types.SimpleNamespace(accepts=lambda stage_failure: True,
                                                start=lambda old, cause: started.append(cause))
        pool.returning(id(graph))
        cause = RuntimeError("island lost")
        assert graph._try_recover(record, cause, True)
        assert started == [cause] and id(graph) not in pool._returning
        assert pool.take("k") is None  # at once: nothing is winding down
    finally:
        pool.shutdown()


def test_a_reused_actor_keeps_the_channel_protocol_exact(mat):
    """The demand-driven exchange of test_islands, on actors that served a graph before."""
    s, c, g, _ = run_switched(mat)
    stop(s, c, g)
    src, sink, graph = run_probes(mat)
    assert mat.warm_pool.reused == 2
    exchange(src, sink, graph)


def test_late_calls_meant_for_the_previous_graph_reach_nothing(mat):
    """Channel ids and the coordinator's generation are per launch: a frame terminal, a cancel, a checkpoint
    injection or an old kill switch aimed at a reused actor leave the new graph alone."""
    s1, c1, g1, ids1 = run_switched(mat)
    old = {i.index: (i.actor, i.gen) for i in g1._islands}
    old_hids = {i.index: list(i.handles) for i in g1._islands}  # the kill switch's handle id
    stop(s1, c1, g1)
    src, sink, g2 = run_probes(mat)
    assert sorted(i["actor_id"] for i in g2.islands()) == ids1
    calls = []
    for actor, gen in old.values():
        for ch in range(4):  # the old graph's channel numbers (small: per-graph ids) and the old wire ids
            calls += [actor.on_complete.remote(ch), actor.on_complete.remote(gen + ch),
                      actor.cancel.remote(gen + ch, RuntimeError("late cancel"))]
        calls += [actor.cancel_island.remote(RuntimeError("late cancel_island"), gen),
                  actor.inject_checkpoint.remote(1, gen)]
    ray.get(calls, timeout=30)
    # a driver proxy's call still in flight when its island ended: answered "detached" (the proxy then uses the
    # copy the island left), never routed to the new island's handles
    stale = ray.get([old[i][0].call_handle.remote(hid, "shutdown", (), {}) for i, hids in old_hids.items()
                     for hid in hids], timeout=30)
    assert stale and all(type(r) is Detached for r in stale)
    s1.shutdown()  # the first graph's switch acts on its own (ended) copy
    assert all(i["state"] == "running" for i in g2.islands())
    exchange(src, sink, g2, (4, 5, 6, 7))


def test_a_failed_graph_never_returns_its_actors(mat):
    def boom(x):
        if x > 100:
            raise ValueError("boom")
        return x

    before = alive_ids()
    fut = Source.range(0, 1000).island().map(boom).island().run_with(Sink.seq(), mat)
    with pytest.raises(ValueError, match="boom"):
        fut.result(30)
    mat.running_graphs() and mat.running_graphs()[0].wait(30)
    assert mat.warm_pool.idle_count() == 0
    wait_until(lambda: alive_ids() <= before, what="the failed graph's actors to be gone")


@pytest.mark.parametrize("how", ["abort", "cancel"])
def test_an_aborted_or_cancelled_graph_never_returns_its_actors(mat, how):
    s, c, g, ids = run_switched(mat)
    if how == "abort":
        s.abort(RuntimeError("stop now"))
    else:
        g.cancel()
    with pytest.raises(Exception):
        c.result(30)
    assert g.wait(30)
    assert mat.warm_pool.idle_count() == 0
    wait_until(lambda: not (set(ids) & alive_ids()), what="the graph's actors to be gone")


def test_an_actor_left_with_a_running_thread_is_not_reused(mat):
    def leave_a_thread(x):
        if x == 0:
            threading.Thread(target=time.sleep, args=(120,), name="user-left-over", daemon=True).start()
        return x

    s, c, g, ids = run_switched(mat, islands=2)
    stop(s, c, g)
    # the same shape, but the downstream island starts a thread that outlives its graph
    g2 = Source.range(0, 5).island().map(leave_a_thread).run_with(Sink.seq(), mat)
    assert g2.result(30) == [0, 1, 2, 3, 4]
    mat.running_graphs() and mat.running_graphs()[0].wait(30)
    assert mat.warm_pool.idle_count() == 2  # given back; the reset decides when the actor is next taken
    s3, c3, g3, ids3 = run_switched(mat, islands=2)
    assert len(set(ids3) & set(ids)) == 1  # one actor was clean and reused, the other was refused
    stop(s3, c3, g3)
    wait_until(lambda: len(set(ids) & alive_ids()) == 1, what="the refused actor to be killed")


def test_warm_actors_are_started_ahead_of_the_first_graph(ray_session):
    m = Materializer.ray(start_timeout=30, warm_actors=2)
    try:
        assert m.warm_pool.idle_count() == 2
        assert Source.range(0, 10).island().map(lambda x: x * 2).run_with(Sink.seq(), m).result(30) == \
            [x * 2 for x in range(10)]
        assert m.warm_pool.reused == 2
    finally:
        m.shutdown()
    assert wait_no_island_actors(include_warm=True) == []


def test_idle_actors_stop_after_the_idle_timeout(ray_session):
    m = Materializer.ray(start_timeout=30, warm_idle_timeout=0.5)
    try:
        s, c, g, ids = run_switched(m)
        stop(s, c, g)
        wait_until(lambda: m.warm_pool.idle_count() == 0, what="the idle timeout")
        wait_until(lambda: not (set(ids) & alive_ids()), what="the idle actors to be killed")
        wait_until(lambda: not [t for t in threading.enumerate() if t.name == "atoll-warm-actors"],
                   what="the reaper thread to end with an empty pool")
    finally:
        m.shutdown()


def test_shutdown_stops_the_idle_actors_and_later_ones(ray_session):
    m = Materializer.ray(start_timeout=30)
    s, c, g, ids = run_switched(m)
    stop(s, c, g)
    assert m.warm_pool.idle_count() == 2
    m.shutdown()
    assert m.warm_pool.idle_count() == 0
    assert not [t for t in threading.enumerate() if t.name == "atoll-warm-actors"]
    assert wait_no_island_actors(include_warm=True) == []


def test_actors_with_other_options_are_not_shared(mat):
    s, c, g, ids = run_switched(mat)
    stop(s, c, g)
    s2, c2, g2, ids2 = run_switched(mat, island_options={"num_cpus": 0.25})
    # the source island asks for num_cpus=0.25: a new actor; the outer island has the default options: reused
    assert len(set(ids2) & set(ids)) == 1 and mat.warm_pool.reused == 1
    stop(s2, c2, g2)
    assert mat.warm_pool.idle_count() == 3


def test_a_blueprint_with_a_named_island_runs_twice_at_once_and_its_actors_are_pooled(mat):
    """``name`` names the island, not its actor: a Ray actor name is unique in the cluster, so two materializations
    of one blueprint with a named island failed (Ray's "name already taken") and the named island's actor was never
    reused. Now both run side by side, each shows the name, and all four actors go back to the pool."""
    named = {"name": "warm-test-named"}
    s1, c1, g1, ids1 = run_switched(mat, island_options=named)
    s2, c2, g2, ids2 = run_switched(mat, island_options=named)  # the same blueprint's island, while the first runs
    assert not set(ids1) & set(ids2)
    for g in (g1, g2):
        assert sorted(i["name"] for i in g.islands()) == sorted(["warm-test-named", f"{g.name}-island-0"])
    assert stop(s1, c1, g1) > 0 and stop(s2, c2, g2) > 0
    assert mat.warm_pool.idle_count() == 4
    s3, c3, g3, ids3 = run_switched(mat, island_options=named)
    assert set(ids3) <= set(ids1) | set(ids2) and mat.warm_pool.reused == 2
    stop(s3, c3, g3)


def test_without_reuse_every_actor_is_gone_when_the_graph_ends(ray_session):
    m = Materializer.ray(start_timeout=30, reuse_actors=False)
    try:
        assert m.warm_pool is None
        assert Source.range(0, 100).island().map(lambda x: x).island().run_with(Sink.seq(), m).result(20) == \
            list(range(100))
        m.running_graphs() and m.running_graphs()[0].wait(10)
        assert wait_no_island_actors(include_warm=True) == []
    finally:
        m.shutdown()


def test_an_island_dying_in_a_reused_actor_is_reported(mat):
    s, c, g, ids = run_switched(mat)
    stop(s, c, g)
    s2, c2, g2, ids2 = run_switched(mat)
    assert ids2 == ids
    ray.kill(g2._islands[0].actor, no_restart=True)
    with pytest.raises(IslandDiedError):
        c2.result(30)
    assert g2.wait(30)
    assert mat.warm_pool.idle_count() == 0


@pytest.mark.parametrize("kwargs, fragment", [
    ({"warm_actors": -1}, "warm_actors"),
    ({"warm_actors": 1.5}, "warm_actors"),
    ({"warm_idle_timeout": 0}, "warm_idle_timeout"),
    ({"warm_actors": 2, "reuse_actors": False}, "reuse_actors"),
])
def test_bad_arguments_name_the_argument(ray_session, kwargs, fragment):
    with pytest.raises(ValueError, match=fragment) as e:
        Materializer.ray(**kwargs)
    assert "Materializer.ray" in str(e.value)
