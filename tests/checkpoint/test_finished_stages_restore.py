"""A stage that had finished at a checkpoint's cut stays finished after a restore from it (exactly-once).

Before, a restore started every stage again and relied on each one finishing again by itself. Stages that finish by
what happened to them did not: a branch that had failed came back to life and took the elements after the cut, a
``fold`` whose input had ended emitted its result a second time, a ``recover`` its fallback, a source cancelled by a
failed stage went on from its saved position. Now the cut records, per finished stage, how it closed its ports
(``checkpoint.snapshot.StageEnd``) and the restore closes them again the same way without starting the stage. The
round trips (``checkpoint_round_trip``: checkpoint after ``at`` elements, stop, restore) and the kills below failed
before the change: duplicated results, revived branches, a restored ``concat`` that never completed.
"""
from __future__ import annotations

import operator
import pickle
import time
from collections import Counter

import pytest

from atoll import (Broadcast, CheckpointError, CheckpointSettings, Flow, GraphDSL, Keep, KillSwitches, Materializer,
                   RestartPolicy, Sink, Source)
from atoll.checkpoint import snapshot as snapshots
from atoll.stage import FlowShape
from atoll.testkit.chaos import kill_island_at
from atoll.testkit.round_trip import checkpoint_round_trip

MAIN = 200


def _main():
    return Source.range(1000, 1000 + MAIN)


def _fail_at(n: int):
    def fn(x):
        if x == n:
            raise ValueError(f"poison {n}")
        return x

    return fn


def _same_multiset(expected, got) -> None:
    assert Counter(got) == Counter(expected)


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_a_fold_finished_before_the_cut_emits_its_result_once_after_a_restore(tmp_path, fusion):
    side = Source.range(1, 11).fold(0, operator.add).map(lambda s: -s)
    expected, got = checkpoint_round_trip(lambda: _main().merge(side), at=120, storage=tmp_path, fusion=fusion)
    _same_multiset(expected, got)
    assert got.count(-55) == 1


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_a_recover_that_emitted_its_fallback_before_the_cut_does_not_emit_it_again(tmp_path, fusion):
    side = Source.failed(ValueError("side")).recover(lambda e: -1)
    expected, got = checkpoint_round_trip(lambda: _main().merge(side), at=120, storage=tmp_path, fusion=fusion)
    _same_multiset(expected, got)
    assert got.count(-1) == 1


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_a_source_cancelled_by_a_failed_stage_does_not_go_on_after_a_restore(tmp_path, fusion):
    # the side's range emitted 0..5, the map failed at 5, recover ended the side: 6..9 must never appear
    side = Source.range(0, 10).map(_fail_at(5)).map(lambda x: -10 - x).recover(lambda e: -1)
    expected, got = checkpoint_round_trip(lambda: _main().merge(side), at=120, storage=tmp_path, fusion=fusion)
    assert sorted(x for x in expected if x < 0) == [-14, -13, -12, -11, -10, -1]
    _same_multiset(expected, got)


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_a_finished_concat_prefix_in_a_merge_restores_and_completes(tmp_path, fusion):
    side = Source.single(-7).concat(Source.empty())
    expected, got = checkpoint_round_trip(lambda: _main().merge(side), at=120, storage=tmp_path, fusion=fusion)
    _same_multiset(expected, got)


def _with_failing_branch(seen: list, fail_at: int = 5):
    """Every element also goes to a branch that fails at ``fail_at`` (what reached its sink is in ``seen``); the
    Broadcast does not cancel eagerly, so the main line runs on without the branch."""
    def build(b):
        bc = b.add(Broadcast(2))
        branch = b.add(Flow().map(_fail_at(fail_at)).to(Sink.foreach(seen.append)))
        bc.out(0) >> branch.in_
        return FlowShape(bc.in_, bc.out(1))

    return Flow.from_graph(GraphDSL.create(build))


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_a_branch_failed_before_the_cut_stays_failed_after_a_restore(tmp_path, fusion):
    seen: list = []
    expected, got = checkpoint_round_trip(lambda: _main().via(_with_failing_branch(seen, 1005)), at=120,
                                          storage=tmp_path, fusion=fusion)
    assert got == expected == list(range(1000, 1000 + MAIN))
    # the uninterrupted run and the checkpointed one each gave the branch 1000..1004; the restored run nothing
    assert seen == [1000, 1001, 1002, 1003, 1004] * 2


def test_a_branch_failed_before_a_checkpoint_stays_failed_when_a_kill_restores_that_checkpoint(tmp_path):
    seen: list = []
    n = 3000
    mat = Materializer.local(checkpoint=CheckpointSettings(storage=str(tmp_path), interval=0.1,
                                                           restart=RestartPolicy(backoff=0.0)))
    try:
        seq = (Source.range(0, n).throttle(200, 0.1).island().via(_with_failing_branch(seen, 100)).island()
               .map(lambda x: x).island().to_mat(Sink.seq(), Keep.right)).run(mat, name="branch")
        g = mat.running_graph("branch")
        deadline = time.monotonic() + 30
        while not any(c.id > 1 for c in g.checkpoints()):  # a checkpoint after the branch failed (at 100)
            assert time.monotonic() < deadline, "no second checkpoint"
            time.sleep(0.01)
        assert kill_island_at(g, 1, 0.5, n) < n
        assert seq.result(60) == list(range(n))
        assert g.restarts == 1
        assert seen == list(range(100))  # nothing after the failure, before the kill or after the restore
    finally:
        mat.shutdown()


def test_with_restarts_on_stage_failure_a_checkpoint_after_a_branch_failed_is_declined(tmp_path):
    seen: list = []
    mat = Materializer.local(checkpoint=CheckpointSettings(
        storage=str(tmp_path), restart=RestartPolicy(backoff=0.0, on_stage_failure=True)))
    try:
        switch = (Source.repeat(1).throttle(100, 0.1).scan(0, operator.add).via_mat(KillSwitches.single(), Keep.right)
                  .via(_with_failing_branch(seen, 5)).to(Sink.ignore())).run(mat, name="declines")
        g = mat.running_graph("declines")
        deadline = time.monotonic() + 30
        while len(seen) < 5:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with pytest.raises(CheckpointError, match="restarts on stage failure go back to a checkpoint before it"):
            g.checkpoint_now(timeout=10)
        switch.abort(RuntimeError("the test ends the graph"))
    finally:
        mat.shutdown()
    assert seen == [0, 1, 2, 3, 4]  # scan emits its zero first


def test_a_snapshot_written_before_finished_stages_were_recorded_reads_as_none_finished():
    snap = snapshots.IslandSnapshot(0, "old", 1, [])
    del snap.__dict__["ended"]  # what unpickling a snapshot from before the field gives
    assert snapshots.ended_stages(pickle.loads(pickle.dumps(snap))) == {}
    snap.ended = {3: snapshots.StageEnd({0: ("completed", None)}, {})}
    assert snapshots.ended_stages(snap)[3].outlets == {0: ("completed", None)}


@pytest.mark.parametrize("single_file", [False, True], ids=["dataset", "single-file"])
def test_a_parquet_sink_in_a_branch_finished_before_the_cut_keeps_exactly_its_rows_after_a_restore(tmp_path,
                                                                                                  single_file):
    import pyarrow.parquet as pq

    paths: list = []

    def make():
        # the uninterrupted run writes side0; the checkpointed run and its restore write side1, as a rerun would
        out = tmp_path / (f"side{min(len(paths), 1)}" + (".parquet" if single_file else ""))
        paths.append(out)
        side = (Source.range(0, 10).map(lambda x: {"x": x})
                .also_to(Sink.to_parquet(str(out), "x long", single_file=single_file))
                .filter(lambda r: False).map(lambda r: -1))
        return _main().merge(side)

    expected, got = checkpoint_round_trip(make, at=120, storage=tmp_path / "checkpoints")
    _same_multiset(expected, got)
    assert sorted(pq.read_table(str(paths[-1])).column("x").to_pylist()) == list(range(10))
