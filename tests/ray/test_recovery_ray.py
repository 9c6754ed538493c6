"""Automatic recovery on Materializer.ray: an island actor killed mid-stream is replaced, the whole graph restarts
from its last complete checkpoint, and the driver's future gets the value of a failure-free run."""
from __future__ import annotations

import operator
import random
import time

import pytest

from atoll import CheckpointSettings, Keep, KillSwitches, Materializer, RecoveryFailedError, RestartPolicy, Sink, Source
from atoll.errors import IslandDiedError
from atoll.testkit import TestSink
from atoll.testkit.chaos import elements_received, kill_island, kill_island_at, kill_island_when, numbered, verifying_sink

from ray_helpers import wait_no_island_actors

N = 3000


def _wait_until(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def _graph():
    """1000 elements/s for 1000 s: the test ends it with the kill switch once it has seen what it wants, so the
    stream can never end before the kill (whatever the machine's load)."""
    return (Source.range(0, 1_000_000).throttle(100, 0.1).via_mat(KillSwitches.single(), Keep.right).island()
            .map(lambda x: x * 2).island().to_mat(Sink.seq(), Keep.both))


def _prefix(seq) -> list:
    got = seq.result(60)
    assert got == [2 * x for x in range(len(got))]  # nothing lost, duplicated or reordered
    return got


def _mat(tmp_path, **restart):
    policy = RestartPolicy(**{"backoff": 0.0, **restart})
    return Materializer.ray(start_timeout=30, checkpoint=CheckpointSettings(storage=str(tmp_path), restart=policy))


@pytest.mark.parametrize("island", [0, 1, 2], ids=["sink", "middle", "source"])
def test_a_killed_island_restarts_from_the_checkpoint_and_the_result_is_exact(ray_session, tmp_path, island):
    mat = _mat(tmp_path)
    try:
        switch, seq = _graph().run(mat, name=f"kill-{island}")
        g = mat.running_graph(f"kill-{island}")
        first = g.checkpoint_now(timeout=30)
        kill_island(g, island)
        _wait_until(lambda: g.attempt == 1)
        _wait_until(lambda: elements_received(g, 0) >= 100)  # the new attempt streams past the restored prefix
        second = g.checkpoint_now(timeout=30)  # the new attempt runs and checkpoints
        switch.shutdown()
        got = _prefix(seq)
        assert len(got) >= 100
        assert g.restarts == 1 and g.attempt == 1
        assert g.wait(30)
        assert {(i["restarts"], i["attempt"]) for i in g.islands()} == {(1, 1)}  # what atoll.metrics records
        assert (first.id, first.attempt, second.id, second.attempt) == (1, 0, 2, 1)
    finally:
        mat.shutdown()
    assert wait_no_island_actors() == []


def test_an_island_killed_before_any_checkpoint_restarts_the_graph_from_the_beginning(ray_session, tmp_path):
    mat = _mat(tmp_path)
    try:
        switch, seq = _graph().run(mat, name="early")
        g = mat.running_graph("early")
        kill_island(g, 1)
        _wait_until(lambda: g.attempt == 1)
        assert g.checkpoints() == []
        g.checkpoint_now(timeout=30)
        _wait_until(lambda: elements_received(g, 0) > 0)
        switch.shutdown()
        assert len(_prefix(seq)) > 0
        assert g.restarts == 1
    finally:
        mat.shutdown()
    assert wait_no_island_actors() == []


def test_checkpoints_continue_after_a_recovery_with_new_ids(ray_session, tmp_path):
    mat = _mat(tmp_path)
    try:
        total = (Source.range(0, 2 * N).throttle(100, 0.1).island().map(lambda x: x % 7).island()
                 .to_mat(Sink.fold(0, operator.add), Keep.right)).run(mat, name="ids")
        g = mat.running_graph("ids")
        assert g.checkpoint_now(timeout=30).id == 1
        kill_island(g, 2)
        _wait_until(lambda: g.attempt == 1)
        after = g.checkpoint_now(timeout=30)
        assert after.id == 2 and after.attempt == 1
        assert total.result(60) == sum(x % 7 for x in range(2 * N))
    finally:
        mat.shutdown()


def test_the_restart_budget_ends_the_graph_with_recovery_failed(ray_session, tmp_path):
    mat = _mat(tmp_path, max_restarts=1)
    try:
        _switch, seq = _graph().run(mat, name="budget")
        g = mat.running_graph("budget")
        g.checkpoint_now(timeout=30)
        kill_island(g, 1)
        kill_island_when(g, 1, lambda: g.attempt == 1 and g.is_running, timeout=30)
        with pytest.raises(RecoveryFailedError) as info:
            seq.result(60)
        assert isinstance(info.value.__cause__, IslandDiedError)
        assert "budget" in str(info.value)
        assert g.restarts == 1
        with pytest.raises(RecoveryFailedError):
            g.completion.result(30)
    finally:
        mat.shutdown()
    assert wait_no_island_actors() == []


def test_without_restarts_a_killed_island_fails_the_graph_as_before(ray_session, tmp_path):
    mat = _mat(tmp_path, max_restarts=0)
    try:
        _switch, seq = _graph().run(mat, name="norestart")
        g = mat.running_graph("norestart")
        g.checkpoint_now(timeout=30)
        kill_island(g, 1)
        with pytest.raises(IslandDiedError):
            seq.result(60)
        assert g.restarts == 0
    finally:
        mat.shutdown()
    assert wait_no_island_actors() == []


# ---------------------------------------------------------------- the chaos kit: keyed pipeline, random kill points
KEYS = 4
NK = 6000  # 6 s at 1000 elements/s: a kill at 70% leaves the stream 1.8 s to go


def _keyed(n: int):
    return (numbered(n, KEYS).throttle(100, 0.1).island().map(lambda p: (p[0], p[1])).island()
            .to_mat(verifying_sink(n, KEYS), Keep.right))


@pytest.mark.parametrize("island", [0, 1, 2], ids=["sink", "middle", "source"])
def test_a_keyed_pipeline_killed_at_a_random_point_loses_and_duplicates_nothing(ray_session, tmp_path, island):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    fraction = rng.uniform(0.3, 0.7)
    mat = Materializer.ray(start_timeout=30, checkpoint=CheckpointSettings(
        storage=str(tmp_path), interval=0.2, restart=RestartPolicy(backoff=0.0)))
    try:
        verdict = _keyed(NK).run(mat, name=f"keyed-{island}")
        g = mat.running_graph(f"keyed-{island}")
        _wait_until(lambda: len(g.checkpoints()) >= 1)
        struck = kill_island_at(g, island, fraction, NK)
        v = verdict.result(60)
        print(f"seed={seed} fraction={fraction:.2f} killed island {island} after {struck} elements: {v}")
        assert v.ok, f"seed={seed}: {v}"
        assert v.received == NK
        assert g.restarts == 1  # the kill happened mid-stream and was recovered from
        assert struck < NK
    finally:
        mat.shutdown()
    assert wait_no_island_actors() == []


def test_repeated_kills_are_each_recovered(ray_session, tmp_path):
    mat = Materializer.ray(start_timeout=30, checkpoint=CheckpointSettings(
        storage=str(tmp_path), interval=0.2, restart=RestartPolicy(backoff=0.0, max_restarts=5)))
    try:
        verdict = _keyed(NK).run(mat, name="repeated")
        g = mat.running_graph("repeated")
        for k, (island, fraction) in enumerate([(1, 0.2), (2, 0.45), (0, 0.7)]):
            _wait_until(lambda: g.attempt == k)
            kill_island_at(g, island, fraction, NK)
        v = verdict.result(60)
        assert v.ok, str(v)
        assert g.restarts == 3
    finally:
        mat.shutdown()
    assert wait_no_island_actors() == []


def test_a_stage_failure_restarts_only_when_the_policy_says_so(ray_session, tmp_path):
    marker = tmp_path / "failed-once"

    def fail_once(x):
        if x == 1500 and not marker.exists():
            marker.write_text("x")
            raise ValueError("poison, once")
        return x

    graph = Source.range(0, N).island().map(fail_once).island().to_mat(Sink.seq(), Keep.right)
    mat = _mat(tmp_path / "on", on_stage_failure=True)
    try:
        seq = graph.run(mat, name="stage-failure")
        assert seq.result(60) == list(range(N))
        assert mat.running_graph("stage-failure").restarts == 1
    finally:
        mat.shutdown()
    marker.unlink()
    mat = _mat(tmp_path / "off")
    try:
        with pytest.raises(ValueError, match="poison, once"):
            graph.run(mat, name="stage-failure-off").result(60)
    finally:
        mat.shutdown()
    assert wait_no_island_actors() == []


def test_a_kill_switch_shutdown_given_during_recovery_is_applied_to_the_new_attempt(ray_session, tmp_path):
    mat = _mat(tmp_path, backoff=1.0, jitter=0.0)
    try:
        switch, seq = (Source.range(0, 100 * N).throttle(100, 0.1).island().via_mat(KillSwitches.single(), Keep.right)
                       .island().to_mat(Sink.seq(), Keep.both)).run(mat, name="switch")
        g = mat.running_graph("switch")
        g.checkpoint_now(timeout=30)
        kill_island(g, 0)
        _wait_until(lambda: g.restarts == 1)  # in its 1 s back-off
        switch.shutdown()
        got = seq.result(60)
        assert got == list(range(len(got))) and len(got) < 100 * N
        assert g.attempt == 1
    finally:
        mat.shutdown()
    assert wait_no_island_actors() == []


def test_handles_are_rebound_to_the_new_actors_a_probe_continues_after_the_checkpoint(ray_session, tmp_path):
    mat = _mat(tmp_path)
    try:
        probe = (Source.range(0, 1_000_000).island().map(lambda x: x * 2).island()
                 .to_mat(TestSink.probe(), Keep.right)).run(mat, name="probe")
        g = mat.running_graph("probe")
        probe.request(5)
        assert probe.expect_next_n(5) == [0, 2, 4, 6, 8]
        g.checkpoint_now(timeout=30)
        kill_island(g, 1)
        _wait_until(lambda: g.attempt == 1)
        probe.request(5)
        assert probe.expect_next_n(5) == [10, 12, 14, 16, 18]
        g.cancel()
        assert g.wait(30)
    finally:
        mat.shutdown()
    assert wait_no_island_actors() == []


# ---------------------------------------------------------------- a cycle through islands
STARTS = 200


def _collatz(e):
    start, n, steps = e
    return (start, n // 2 if n % 2 == 0 else 3 * n + 1, steps + 1)


def _steps(n: int) -> int:
    k = 0
    while n != 1:
        n, k = (n // 2 if n % 2 == 0 else 3 * n + 1), k + 1
    return k


def _loop_through_two_islands():
    """Starts at 100/s go round a loop (merge -> partition -> step island -> merge) until they reach 1."""
    from atoll import ClosedShape, Flow, GraphDSL, Merge, OverflowStrategy, Partition, RunnableGraph

    def build(b, sink):
        step = b.add(Flow().map(_collatz).buffer(STARTS, OverflowStrategy.backpressure).island())
        merge = b.add(Merge(2))
        part = b.add(Partition(2, lambda e: 0 if e[1] == 1 else 1, eager_cancel=True))
        out = b.add(Flow().take(STARTS))
        Source.range(1, STARTS + 1).throttle(10, 0.1).map(lambda s: (s, s, 0)) >> merge.in_(0)
        merge.out >> part.in_
        part.out(0) >> out.in_
        part.out(1) >> step.in_
        step.out >> merge.in_(1)
        out.out >> sink.in_
        return ClosedShape

    return RunnableGraph.from_graph(GraphDSL.create(build, Sink.seq()))


@pytest.mark.parametrize("island", [0, 1], ids=["loop-head", "loop-step"])
def test_a_cycle_through_islands_recovers_with_exact_loop_counts(ray_session, tmp_path, island):
    mat = _mat(tmp_path)
    try:
        seq = _loop_through_two_islands().run(mat, name=f"loop-{island}")
        g = mat.running_graph(f"loop-{island}")
        assert g.checkpoint_now(timeout=30).id == 1
        kill_island(g, island)
        _wait_until(lambda: g.attempt == 1)
        assert g.checkpoint_now(timeout=30).attempt == 1
        got = seq.result(60)
        assert sorted(got) == [(s, 1, _steps(s)) for s in range(1, STARTS + 1)]  # each exactly once, counts exact
        assert g.restarts == 1
    finally:
        mat.shutdown()
    assert wait_no_island_actors() == []
