"""Automatic recovery on Materializer.local: an island thread killed mid-stream (or, with
RestartPolicy(on_stage_failure=True), a failed stage) makes the whole graph restart from its last complete checkpoint
on new threads, and the driver's futures and handles get the value of a failure-free run (Flink's style: exact
results, nothing lost or duplicated, the replay shown). Mirrors tests/ray/test_recovery_ray.py."""
from __future__ import annotations

import operator
import random
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from atoll import CheckpointError, CheckpointSettings, Keep, KillSwitches, Materializer, RecoveryFailedError, RestartPolicy, Sink, Source
from atoll.errors import IslandDiedError
from atoll.testkit import TestSink
from atoll.testkit.chaos import elements_received, kill_island, kill_island_at, kill_island_chosen, kill_island_when, numbered, verifying_sink

sys.path.insert(0, str(Path(__file__).resolve().parent))
from thread_checks import assert_no_thread_left  # noqa: E402

N = 4000
KEYS = 4


def _wait_until(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


def _mat(tmp_path, fusion: bool = True, interval=None, **restart):
    policy = RestartPolicy(**{"backoff": 0.0, **restart})
    return Materializer.local(fusion=fusion, checkpoint=CheckpointSettings(storage=str(tmp_path), interval=interval,
                                                                           restart=policy))


def _endless():
    """2000 elements/s until the kill switch ends it: the stream cannot end before a kill."""
    return (Source.range(0, 10_000_000).throttle(200, 0.1).via_mat(KillSwitches.single(), Keep.right).island()
            .map(lambda x: x * 2).island().to_mat(Sink.seq(), Keep.both))


def _prefix(seq) -> list:
    got = seq.result(30)
    assert got == [2 * x for x in range(len(got))]  # nothing lost, duplicated or reordered
    return got


def _keyed(n: int, emitted: Counter):
    """A 3-island keyed pipeline: the numbered source (counting what it emits, replays included) | a map | the
    verifying sink."""
    def count(p):
        emitted[p] += 1
        return p

    return (numbered(n, KEYS).throttle(200, 0.1).map(count).island().map(lambda p: (p[0], p[1])).island()
            .to_mat(verifying_sink(n, KEYS), Keep.right))


# ---------------------------------------------------------------- a kill at a random point, per island
@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("island", [0, 1, 2], ids=["sink", "middle", "source"])
def test_a_keyed_pipeline_killed_at_a_random_point_loses_and_duplicates_nothing(tmp_path, island, fusion):
    seed = random.randrange(1 << 30)
    fraction = random.Random(seed).uniform(0.3, 0.7)
    emitted: Counter = Counter()
    name = f"keyed-{island}-{fusion}"
    mat = _mat(tmp_path, fusion)
    try:
        verdict = _keyed(N, emitted).run(mat, name=name)
        g = mat.running_graph(name)
        # a checkpoint at 20%, the kill between 30% and 70%: what came between is replayed
        _wait_until(lambda: sum(emitted.values()) >= 0.2 * N)
        info = g.checkpoint_now(timeout=10)
        struck = kill_island_at(g, island, fraction, N)
        v = verdict.result(30)
        replayed = sum(emitted.values()) - N
        print(f"seed={seed} fraction={fraction:.2f} killed island {island} after {struck} elements, "
              f"{replayed} replayed: {v}")
        assert v.ok, f"seed={seed}: {v}"
        assert v.received == N, f"seed={seed}: {v}"
        assert set(emitted) == {(i % KEYS, i // KEYS) for i in range(N)}
        assert replayed > 0, f"seed={seed}: the source replayed nothing"  # restored from checkpoint 1, not the start
        assert replayed < N - 0.2 * N, f"seed={seed}: {replayed} replayed"
        assert (g.restarts, g.attempt, info.id, info.attempt) == (1, 1, 1, 0)
        assert struck < N
    finally:
        mat.shutdown()
    assert_no_thread_left(mat, name)


def test_repeated_kills_are_each_recovered(tmp_path):
    emitted: Counter = Counter()
    mat = _mat(tmp_path, interval=0.1, max_restarts=5)
    try:
        verdict = _keyed(N, emitted).run(mat, name="repeated")
        g = mat.running_graph("repeated")
        for k, (island, fraction) in enumerate([(1, 0.2), (2, 0.45), (0, 0.7)]):
            _wait_until(lambda: g.attempt == k)
            kill_island_at(g, island, fraction, N)
        v = verdict.result(30)
        assert v.ok and v.received == N, str(v)
        assert g.restarts == 3 and g.attempt == 3
        assert sum(emitted.values()) > N
    finally:
        mat.shutdown()
    assert_no_thread_left(mat, "repeated")


# ---------------------------------------------------------------- what the graph reports
def test_elements_received_counts_per_island_from_the_sink_and_names_an_unknown_island(tmp_path):
    mat = _mat(tmp_path)
    try:
        switch, seq = _endless().run(mat, name="received")
        g = mat.running_graph("received")
        _wait_until(lambda: elements_received(g, 0) >= 20)
        sink, middle = elements_received(g, 0), elements_received(g, "received-island-1")
        assert middle >= sink >= 20  # read in this order: what reached the sink went through the middle first
        assert elements_received(g, 2) == 0  # the source's island has no input channel
        with pytest.raises(LookupError, match="elements_received: graph received has no island 3 .*received-island-0"):
            elements_received(g, 3)
        switch.shutdown()
        assert len(_prefix(seq)) >= 20
    finally:
        mat.shutdown()
    assert_no_thread_left(mat, "received")


@pytest.mark.parametrize("island", [0, 1, 2], ids=["sink", "middle", "source"])
def test_a_killed_island_restarts_from_the_checkpoint_and_checkpoints_continue(tmp_path, island):
    mat = _mat(tmp_path)
    try:
        switch, seq = _endless().run(mat, name=f"kill-{island}")
        g = mat.running_graph(f"kill-{island}")
        first = g.checkpoint_now(timeout=10)
        kill_island(g, island)
        _wait_until(lambda: g.attempt == 1)
        status = g.checkpoint_status()
        assert sorted(status["islands"]) == sorted(i["name"] for i in g.islands())
        _wait_until(lambda: elements_received(g, 0) >= 10)  # the new attempt streams past the restored prefix
        second = g.checkpoint_now(timeout=10)  # the new attempt runs and checkpoints
        switch.shutdown()
        got = _prefix(seq)
        assert len(got) >= 10
        assert g.wait(10)
        assert g.restarts == 1 and g.attempt == 1
        assert {(i["restarts"], i["attempt"]) for i in g.islands()} == {(1, 1)}
        assert (first.id, first.attempt, second.id, second.attempt) == (1, 0, 2, 1)
    finally:
        mat.shutdown()
    assert_no_thread_left(mat, f"kill-{island}")


def test_an_island_killed_before_any_checkpoint_restarts_the_graph_from_the_beginning(tmp_path):
    mat = _mat(tmp_path)
    try:
        switch, seq = _endless().run(mat, name="early")
        g = mat.running_graph("early")
        kill_island(g, 1)
        _wait_until(lambda: g.attempt == 1)
        assert g.checkpoints() == []
        assert g.checkpoint_now(timeout=10).attempt == 1
        _wait_until(lambda: elements_received(g, 0) > 0)
        switch.shutdown()
        assert len(_prefix(seq)) > 0
        assert g.restarts == 1
    finally:
        mat.shutdown()
    assert_no_thread_left(mat, "early")


def test_a_fold_gets_the_failure_free_total(tmp_path):
    mat = _mat(tmp_path)
    try:
        total = (Source.range(0, N).throttle(200, 0.1).island().map(lambda x: x % 7).island()
                 .to_mat(Sink.fold(0, operator.add), Keep.right)).run(mat, name="fold")
        g = mat.running_graph("fold")
        assert g.checkpoint_now(timeout=10).id == 1
        kill_island(g, 2)
        _wait_until(lambda: g.attempt == 1)
        assert total.result(30) == sum(x % 7 for x in range(N))
    finally:
        mat.shutdown()
    assert_no_thread_left(mat, "fold")


# ---------------------------------------------------------------- the policy's bounds
def test_the_restart_budget_ends_the_graph_with_recovery_failed(tmp_path):
    mat = _mat(tmp_path, max_restarts=1)
    try:
        _switch, seq = _endless().run(mat, name="budget")
        g = mat.running_graph("budget")
        g.checkpoint_now(timeout=10)
        kill_island(g, 1)
        kill_island_when(g, 1, lambda: g.attempt == 1 and g.is_running, timeout=10)
        with pytest.raises(RecoveryFailedError) as info:
            seq.result(30)
        assert isinstance(info.value.__cause__, IslandDiedError)
        assert "budget" in str(info.value)
        assert g.restarts == 1
        with pytest.raises(RecoveryFailedError):
            g.completion.result(10)
    finally:
        mat.shutdown()
    assert_no_thread_left(mat, "budget")


def test_without_restarts_a_killed_island_fails_the_graph(tmp_path):
    mat = _mat(tmp_path, max_restarts=0)
    try:
        _switch, seq = _endless().run(mat, name="norestart")
        g = mat.running_graph("norestart")
        g.checkpoint_now(timeout=10)
        kill_island(g, 1)
        with pytest.raises(IslandDiedError):
            seq.result(30)
        with pytest.raises(IslandDiedError):
            g.completion.result(10)
        assert g.restarts == 0
    finally:
        mat.shutdown()
    assert_no_thread_left(mat, "norestart")


def test_without_checkpoints_a_killed_island_fails_the_graph(tmp_path):
    mat = Materializer.local()
    try:
        _switch, seq = _endless().run(mat, name="plain")
        g = mat.running_graph("plain")
        kill_island(g, 1)
        with pytest.raises(IslandDiedError):
            seq.result(30)
        assert g.restarts == 0 and g.attempt == 0
    finally:
        mat.shutdown()
    assert_no_thread_left(mat, "plain")


# ---------------------------------------------------------------- stage failures
@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_a_transient_stage_failure_restarts_only_when_the_policy_says_so(tmp_path, fusion):
    failed = []

    def fail_once(x):
        if x == 1500 and not failed:
            failed.append(x)
            raise ValueError("poison, once")
        return x

    graph = Source.range(0, N).throttle(200, 0.1).island().map(fail_once).island().to_mat(Sink.seq(), Keep.right)
    mat = _mat(tmp_path / "on", fusion, interval=0.1, on_stage_failure=True)
    try:
        seq = graph.run(mat, name="stage-failure")
        g = mat.running_graph("stage-failure")
        assert seq.result(30) == list(range(N))
        assert g.restarts == 1
    finally:
        mat.shutdown()
    assert failed == [1500]
    assert_no_thread_left(mat, "stage-failure")
    failed.clear()
    mat = _mat(tmp_path / "off", fusion, interval=0.1)
    try:
        with pytest.raises(ValueError, match="poison, once"):
            graph.run(mat, name="stage-failure-off").result(30)
    finally:
        mat.shutdown()
    assert_no_thread_left(mat, "stage-failure-off")


def test_a_deterministic_poison_element_spends_the_budget(tmp_path):
    seen = []

    def poison(x):
        if x == 300:
            seen.append(x)
            raise ValueError("poison")
        return x

    mat = _mat(tmp_path, interval=0.05, on_stage_failure=True, max_restarts=2)
    try:
        seq = (Source.range(0, 1000).throttle(200, 0.1).island().map(poison).island()
               .to_mat(Sink.seq(), Keep.right)).run(mat, name="poison")
        g = mat.running_graph("poison")
        with pytest.raises(RecoveryFailedError) as info:
            seq.result(30)
        assert isinstance(info.value.__cause__, ValueError) and str(info.value.__cause__) == "poison"
        assert g.restarts == 2 and seen == [300, 300, 300]  # the first run and each restart meet it once
        with pytest.raises(RecoveryFailedError):
            g.completion.result(10)
    finally:
        mat.shutdown()
    assert_no_thread_left(mat, "poison")


# ---------------------------------------------------------------- kill switches and handles
def test_a_kill_switch_shutdown_given_during_recovery_is_applied_to_the_new_attempt(tmp_path):
    mat = _mat(tmp_path, backoff=0.5, jitter=0.0)
    try:
        switch, seq = _endless().run(mat, name="switch")
        g = mat.running_graph("switch")
        g.checkpoint_now(timeout=10)
        kill_island(g, 0)
        _wait_until(lambda: g.restarts == 1)  # in its back-off
        assert g.attempt == 0
        switch.shutdown()
        got = _prefix(seq)
        assert len(got) < 10_000_000
        assert g.attempt == 1 and g.wait(10)
    finally:
        mat.shutdown()
    assert_no_thread_left(mat, "switch")


def test_a_kill_switch_abort_turns_recovery_off(tmp_path):
    class Stop(Exception):
        pass

    mat = _mat(tmp_path, on_stage_failure=True)
    try:
        switch, seq = _endless().run(mat, name="abort")
        g = mat.running_graph("abort")
        g.checkpoint_now(timeout=10)
        switch.abort(Stop("stop"))
        with pytest.raises(Stop):
            seq.result(30)
        assert g.wait(10) and g.restarts == 0
    finally:
        mat.shutdown()
    assert_no_thread_left(mat, "abort")


def test_an_abort_during_the_back_off_ends_the_recovery(tmp_path):
    class Stop(Exception):
        pass

    mat = _mat(tmp_path, backoff=0.5, jitter=0.0)
    try:
        switch, seq = _endless().run(mat, name="abort-backoff")
        g = mat.running_graph("abort-backoff")
        g.checkpoint_now(timeout=10)
        kill_island(g, 1)
        _wait_until(lambda: g.restarts == 1)
        switch.abort(Stop("stop"))
        with pytest.raises(Stop):
            seq.result(30)
        assert g.wait(10) and g.attempt == 0
    finally:
        mat.shutdown()
    assert_no_thread_left(mat, "abort-backoff")


def test_cancel_during_the_back_off_ends_the_graph(tmp_path):
    mat = _mat(tmp_path, backoff=5.0, jitter=0.0)
    try:
        _switch, seq = _endless().run(mat, name="cancel")
        g = mat.running_graph("cancel")
        kill_island(g, 2)
        _wait_until(lambda: g.restarts == 1)
        g.cancel()
        with pytest.raises(Exception) as info:
            seq.result(30)
        assert "cancelled" in str(info.value)
        assert g.wait(10) and g.attempt == 0
    finally:
        mat.shutdown()
    assert_no_thread_left(mat, "cancel")


def test_handles_are_rebound_a_probe_continues_after_the_checkpoint(tmp_path):
    mat = _mat(tmp_path)
    try:
        probe = (Source.range(0, 1_000_000).island().map(lambda x: x * 2).island()
                 .to_mat(TestSink.probe(), Keep.right)).run(mat, name="probe")
        g = mat.running_graph("probe")
        probe.request(5)
        assert probe.expect_next_n(5) == [0, 2, 4, 6, 8]
        g.checkpoint_now(timeout=10)
        kill_island(g, 1)
        _wait_until(lambda: g.attempt == 1)
        probe.request(5)
        assert probe.expect_next_n(5) == [10, 12, 14, 16, 18]
        g.cancel()
        assert g.wait(10)
    finally:
        mat.shutdown()
    assert_no_thread_left(mat, "probe")


# ---------------------------------------------------------------- a kill while a checkpoint is half aligned
def test_an_island_killed_while_a_checkpoint_is_aligned_restarts_from_the_previous_checkpoint(tmp_path):
    """The merge island (a Merge of islands a and b, and the sink) is killed while it holds barrier 2 of a and waits
    for b's, which b never sends (its thread is held in a gate): checkpoint 2 never completes (its waiter fails,
    its id is not reused), the graph restarts from checkpoint 1, each input's elements arrive exactly once."""
    armed, released, past = threading.Event(), threading.Event(), threading.Event()
    blocked: list = []

    def gate(x):
        if armed.is_set() and not released.is_set():
            blocked.append(x)
            released.wait(30)
        elif released.is_set() and x > blocked[0]:
            past.set()  # the next attempt went past the element the first one blocked at
        return x

    a = (Source.range(0, 10_000_000).throttle(200, 0.1).via_mat(KillSwitches.single(), Keep.right)
         .map(lambda x: ("a", x)).island())
    b = (Source.range(0, 10_000_000).throttle(200, 0.1).via_mat(KillSwitches.single(), Keep.right)
         .map(gate).map(lambda x: ("b", x)).island())
    mat = _mat(tmp_path)
    try:
        (switch_a, switch_b), seq = a.merge(b, combine=Keep.both).to_mat(Sink.seq(), Keep.both).run(mat, name="align")
        g = mat.running_graph("align")
        assert g.checkpoint_now(timeout=10).id == 1
        armed.set()
        _wait_until(lambda: blocked)
        pending = g.checkpoint_now(wait=False)  # checkpoint 2: a's barrier reaches the merge, b's never does
        seen = {}

        def half_aligned():
            st = g.checkpoint_status()
            waiting = [name for name, s in st["islands"].items()
                       if s.get("checkpoint") == 2 and len(s.get("waiting_for") or ()) == 1]
            if st["in_progress"] != 2 or len(st["answered"]) != 1 or len(waiting) != 1:
                return None
            seen.update(status=st, a=st["answered"][0])
            return waiting[0]

        merge = kill_island_chosen(g, half_aligned, timeout=10)
        released.set()  # the fence joins b's thread: let it leave the gate
        b_name = ({r["name"] for r in g.islands()} - {seen["a"], merge}).pop()
        assert b_name not in seen["status"]["answered"]
        with pytest.raises(CheckpointError):
            pending.result(10)
        _wait_until(lambda: g.attempt == 1)
        assert g.checkpoint_status()["restored_from"] == 1
        after = g.checkpoint_now(timeout=10)
        # what passed the gate reaches the sink before the completion a shutdown sends after it
        _wait_until(past.is_set)
        switch_a.shutdown()
        switch_b.shutdown()
        got = seq.result(30)
        a_values = [x for k, x in got if k == "a"]
        b_values = [x for k, x in got if k == "b"]
        assert a_values == list(range(len(a_values)))
        assert b_values == list(range(len(b_values)))
        assert len(b_values) > blocked[0]
        assert (after.id, after.attempt, g.restarts) == (3, 1, 1)
        assert 2 not in [c.id for c in g.checkpoints()]
    finally:
        released.set()
        mat.shutdown()
    assert_no_thread_left(mat, "align")


# ---------------------------------------------------------------- a statistics handle across a restart
@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_event_time_windows_and_their_stats_handle_survive_a_kill(tmp_path, fusion):
    from atoll import Aggregate

    n = 3000

    def graph():
        return (Source.range(0, n).throttle(200, 0.1).map(lambda x: (x, x % 3)).with_timestamps(lambda e: e[0])
                .island().tumbling_window(100, key=lambda e: e[1], aggregate=Aggregate.count()).island()
                .to_mat(Sink.seq(), Keep.both))

    plain = Materializer.local(fusion=fusion)
    try:
        _stats, fut = (Source.range(0, n).map(lambda x: (x, x % 3)).with_timestamps(lambda e: e[0]).island()
                       .tumbling_window(100, key=lambda e: e[1], aggregate=Aggregate.count()).island()
                       .to_mat(Sink.seq(), Keep.both)).run(plain)
        expected = fut.result(30)
    finally:
        plain.shutdown()
    mat = _mat(tmp_path, fusion)
    try:
        stats, fut = graph().run(mat, name="windows")
        g = mat.running_graph("windows")
        _wait_until(lambda: stats.watermark is not None and stats.watermark >= 0.2 * n)
        g.checkpoint_now(timeout=10)
        kill_island_at(g, 1, 0.5, n)
        got = fut.result(30)
        assert sorted(map(repr, got)) == sorted(map(repr, expected)) and len(got) == len(expected) > 0
        assert g.restarts == 1
        assert stats.open_windows == 0 and stats.snapshot()["late_dropped"] == 0  # the new attempt's counters
    finally:
        mat.shutdown()
    assert_no_thread_left(mat, "windows")


# ---------------------------------------------------------------- a run restored from a checkpoint
def test_a_restored_run_killed_before_its_first_checkpoint_restarts_from_the_checkpoint_it_was_restored_from(tmp_path):
    emitted: Counter = Counter()
    mat = _mat(tmp_path)
    try:
        first = _keyed(N, emitted).run(mat, name="before")
        g = mat.running_graph("before")
        _wait_until(lambda: sum(emitted.values()) >= 0.3 * N)
        info = g.stop_with_checkpoint(timeout=10)
        with pytest.raises(Exception):
            first.result(10)  # the stopped run's sink never completes
    finally:
        mat.shutdown()
    assert_no_thread_left(mat, "before")
    mat = _mat(tmp_path)
    try:
        before = sum(emitted.values())
        verdict = _keyed(N, emitted).run(mat, name="after", restore_from=info)
        g = mat.running_graph("after")
        kill_island(g, 1)
        _wait_until(lambda: g.attempt == 1)
        assert g.checkpoints() == [] and g.checkpoint_status()["restored_from"] == info.id
        v = verdict.result(30)
        assert v.ok and v.received == N, str(v)
        assert g.restarts == 1
        assert sum(emitted.values()) - before < N  # attempt 1 started at the restored cut, not at the beginning
    finally:
        mat.shutdown()
    assert_no_thread_left(mat, "after")
