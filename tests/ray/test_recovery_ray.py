"""Automatic recovery on Materializer.ray: an island actor killed mid-stream is replaced, the whole graph restarts
from its last complete checkpoint, and the driver's future gets the value of a failure-free run."""
from __future__ import annotations

import operator
import time

import pytest

from atoll import CheckpointSettings, Keep, Materializer, RecoveryFailedError, RestartPolicy, Sink, Source
from atoll.errors import IslandDiedError
from atoll.testkit.chaos import kill_island, kill_island_when

from ray_helpers import wait_no_island_actors

N = 3000


def _wait_until(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def _graph(n: int = N):
    # ~3 s at 1000 elements/s: long enough to be killed mid-stream
    return (Source.range(0, n).throttle(100, 0.1).island().map(lambda x: x * 2).island()
            .to_mat(Sink.seq(), Keep.right))


def _mat(tmp_path, **restart):
    policy = RestartPolicy(backoff=0.0, **restart)
    return Materializer.ray(start_timeout=30, checkpoint=CheckpointSettings(storage=str(tmp_path), restart=policy))


@pytest.mark.parametrize("island", [0, 1, 2], ids=["source", "middle", "sink"])
def test_a_killed_island_restarts_from_the_checkpoint_and_the_result_is_exact(ray_session, tmp_path, island):
    mat = _mat(tmp_path)
    try:
        seq = _graph().run(mat, name=f"kill-{island}")
        g = mat.running_graph(f"kill-{island}")
        first = g.checkpoint_now(timeout=30)
        kill_island(g, island)
        assert seq.result(60) == [2 * x for x in range(N)]
        assert g.restarts == 1 and g.attempt == 1
        assert g.wait(30)
        assert first.id == 1
    finally:
        mat.shutdown()
    assert wait_no_island_actors() == []


def test_an_island_killed_before_any_checkpoint_restarts_the_graph_from_the_beginning(ray_session, tmp_path):
    mat = _mat(tmp_path)
    try:
        seq = _graph(1000).run(mat, name="early")
        g = mat.running_graph("early")
        kill_island(g, 1)
        assert seq.result(60) == [2 * x for x in range(1000)]
        assert g.restarts == 1
    finally:
        mat.shutdown()
    assert wait_no_island_actors() == []


def test_checkpoints_continue_after_a_recovery_with_new_ids(ray_session, tmp_path):
    mat = _mat(tmp_path)
    try:
        total = (Source.range(0, N).throttle(100, 0.1).island().map(lambda x: x % 7).island()
                 .to_mat(Sink.fold(0, operator.add), Keep.right)).run(mat, name="ids")
        g = mat.running_graph("ids")
        assert g.checkpoint_now(timeout=30).id == 1
        kill_island(g, 2)
        _wait_until(lambda: g.attempt == 1)
        after = g.checkpoint_now(timeout=30)
        assert after.id == 2 and after.attempt == 1
        assert total.result(60) == sum(x % 7 for x in range(N))
    finally:
        mat.shutdown()


def test_the_restart_budget_ends_the_graph_with_recovery_failed(ray_session, tmp_path):
    mat = _mat(tmp_path, max_restarts=1)
    try:
        seq = _graph().run(mat, name="budget")
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
        seq = _graph().run(mat, name="norestart")
        g = mat.running_graph("norestart")
        g.checkpoint_now(timeout=30)
        kill_island(g, 1)
        with pytest.raises(IslandDiedError):
            seq.result(60)
        assert g.restarts == 0
    finally:
        mat.shutdown()
    assert wait_no_island_actors() == []
