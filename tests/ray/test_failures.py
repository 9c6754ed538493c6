"""Failures, kill switches and dying actors across Ray islands: every island ends, nothing is left."""
from __future__ import annotations

import time

import pytest
import ray

from atoll import Keep, KillSwitches, Sink, Source
from atoll.errors import IslandDiedError
from atoll.testkit.chaos import kill_island

from ray_helpers import wait_no_island_actors, wait_received


class PipelineError(Exception):
    pass


def test_stage_failure_reaches_the_driver_with_type_and_message(rmat):
    def explode(x):
        if x == 50:
            raise PipelineError(f"bad element {x}")
        return x

    term, total = (
        Source.range(0, 10**9)
        .watch_termination(Keep.right)
        .island()
        .map(explode)
        .island()
        .to_mat(Sink.fold(0, lambda a, b: a + b), Keep.both)
        .run(rmat)
    )
    with pytest.raises(PipelineError, match="bad element 50") as info:
        total.result(20)
    assert type(info.value) is PipelineError
    # upstream of the failure was cancelled with the cause
    with pytest.raises(PipelineError, match="bad element 50"):
        term.result(20)
    assert wait_no_island_actors() == []


@ray.remote
def _failing_task(x):
    raise PipelineError(f"task failed on {x}")


def test_a_ray_task_error_travels_across_islands_as_the_task_s_exception(rmat):
    """A stage that fails with a ``RayTaskError`` (a ``ray.get`` of a failed task): Ray will not carry its own
    errors as call arguments, so the channel sends the task's exception; the graph ends instead of hanging."""
    term, out = (Source.range(0, 10**9).watch_termination(Keep.right).island()
                 .map(lambda x: ray.get(_failing_task.remote(x))).island()
                 .to_mat(Sink.seq(), Keep.both).run(rmat))
    with pytest.raises(PipelineError, match="task failed on 0"):
        out.result(30)
    with pytest.raises(PipelineError, match="task failed on 0"):
        term.result(30)  # upstream was cancelled with the same cause, across the other channel
    assert wait_no_island_actors() == []


def test_kill_switch_stops_an_infinite_busy_graph_promptly(rmat):
    switch, done = (
        Source.repeat(1)
        .island()
        .via_mat(KillSwitches.single(), Keep.right)
        .map(lambda x: x + 1)
        .island()
        .to_mat(Sink.fold(0, lambda a, b: a + b), Keep.both)
        .run(rmat)
    )
    wait_received(rmat.running_graphs()[0])
    t0 = time.monotonic()
    switch.shutdown()
    assert done.result(10) > 0
    assert time.monotonic() - t0 < 5
    assert wait_no_island_actors() == []


def test_kill_switch_reaches_a_backpressured_graph(rmat):
    def slow(x):
        time.sleep(0.02)
        return x

    switch, done = (
        Source.repeat(1)
        .via_mat(KillSwitches.single(), Keep.right)
        .island()
        .map(slow)
        .island()
        .to_mat(Sink.ignore(), Keep.both)
        .run(rmat)
    )
    time.sleep(0.3)
    switch.abort(PipelineError("aborted while backpressured"))
    with pytest.raises(PipelineError, match="aborted while backpressured"):
        done.result(10)
    assert wait_no_island_actors() == []


def test_kill_switch_stops_an_idle_tick_source(rmat):
    switch, ticks = (
        Source.tick(0.0, 0.05, "tick")
        .via_mat(KillSwitches.single(), Keep.right)
        .island()
        .to_mat(Sink.seq(), Keep.both)
        .run(rmat)
    )
    wait_received(rmat.running_graphs()[0])
    switch.shutdown()
    got = ticks.result(10)
    assert got and set(got) == {"tick"}
    assert wait_no_island_actors() == []


def test_shared_kill_switch_controls_several_islands_and_graphs(rmat):
    shared = KillSwitches.shared("all")
    a = Source.repeat(1).via(shared.flow()).island().to_mat(Sink.ignore(), Keep.right).run(rmat)
    b = Source.repeat(2).island().via(shared.flow()).map(lambda x: x).island().to_mat(Sink.ignore(), Keep.right).run(rmat)
    time.sleep(0.2)
    shared.abort(PipelineError("all stop"))
    for fut in (a, b):
        with pytest.raises(PipelineError, match="all stop"):
            fut.result(10)
    # a graph materialized after the switch fired fails right away
    late = Source.repeat(3).via(shared.flow()).island().to_mat(Sink.ignore(), Keep.right).run(rmat)
    with pytest.raises(PipelineError, match="all stop"):
        late.result(10)
    assert wait_no_island_actors() == []


def test_killed_island_actor_becomes_island_died_error(rmat):
    term, done = (
        Source.repeat(1)
        .island(name="atoll-test-victim")
        .watch_termination(Keep.right)
        .map(lambda x: x)
        .island()
        .to_mat(Sink.ignore(), Keep.both)
        .run(rmat)
    )
    time.sleep(0.3)
    kill_island(rmat.running_graphs()[-1], "atoll-test-victim")  # its actor, found by the island's name
    with pytest.raises(IslandDiedError, match="atoll-test-victim"):
        term.result(15)
    with pytest.raises(IslandDiedError, match="atoll-test-victim"):
        done.result(15)
    graph_errors = [g for g in rmat.running_graphs()]
    for g in graph_errors:
        g.wait(15)
    assert wait_no_island_actors() == []
