"""Sink.to_spark_stream under Atoll checkpoints: exactly once into Spark's file sink across failures and restores.

The staged files become visible to Spark only once a checkpoint covering them is complete (two-phase commit); a
restore keeps the staging directory and restarts the query on it with the same checkpoint_location. Every test
reads back what Spark wrote and compares it with the failure-free output: each row once."""
from __future__ import annotations

import json
import os
import random
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray.cloudpickle

from atoll import (CheckpointError, CheckpointMismatchError, CheckpointNotSupportedError, CheckpointSettings, Flow,
                   Keep, Materializer, RestartPolicy, Sink, Source)
from atoll.testkit.chaos import kill_island_at
from atoll.testkit.round_trip import checkpoint_round_trip

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray workers cannot import this test module

N = 3000
SCHEMA = "x long, y string"


from atoll.testkit.valve import Valve as _Valve  # noqa: E402


def _rows():
    return Source.range(0, N).map(lambda x: {"x": x, "y": str(x)})


def _sink(spark, base, **kw):
    args = dict(path=str(base / "out"), checkpoint_location=str(base / "chk"), schema=SCHEMA, rows_per_batch=200,
                trigger="100 milliseconds", staging_dir=str(base / "staging"))
    args.update(kw)
    return Sink.to_spark_stream(spark, **args)


def _written(spark, base) -> list:
    """The ``x`` of every row Spark's file sink committed at ``base/out``, sorted (duplicates kept)."""
    return sorted(r.x for r in spark.read.schema(SCHEMA).parquet(str(base / "out")).collect())


def _mat(tmp_path, **settings):
    return Materializer.local(checkpoint=CheckpointSettings(storage=str(tmp_path / "checkpoints"), **settings))


def _staging(base):
    return os.listdir(base / "staging")


def test_a_failure_after_checkpoints_then_a_restore_writes_every_row_once(spark, tmp_path):
    base = tmp_path
    (base / "staging").mkdir()
    valve = _Valve(700)
    mat = _mat(tmp_path)
    try:
        written = _rows().via(Flow.from_graph(valve)).island().to_mat(_sink(spark, base), Keep.right) \
            .run(mat, name="stream-fail")
        g = mat.running_graph("stream-fail")
        assert valve.reached.wait(60)
        g.checkpoint_now(timeout=60)
        valve.open_to(1700)  # the sink asks for checkpoints as its pending files fill up: Spark gets rows
        assert valve.reached.wait(120)
        g.cancel(RuntimeError("injected failure"))
        with pytest.raises(RuntimeError, match="injected failure"):
            written.result(60)
        assert g.wait(60)
        info = g.checkpoints()[-1]
    finally:
        mat.shutdown()
    before = _written(spark, base)
    assert before == list(range(len(before))) and len(before) < 1700  # only rows some checkpoint covered
    assert len(_staging(base)) == 1  # kept for the restore
    _restore_writes_every_row_once(spark, tmp_path, "stream-fail", info)


def _restore_writes_every_row_once(spark, base, name: str, checkpoint, **settings) -> None:
    """Restore graph ``name`` from ``checkpoint`` with the valve open: the sink writes all N rows, Spark's output holds
    each row once, every staging directory is gone once the query processed everything, and no query is left."""
    mat = _mat(base, **settings)
    try:
        written = _rows().via(Flow.from_graph(_Valve(N))).island().to_mat(_sink(spark, base), Keep.right) \
            .run(mat, name=name, restore_from=checkpoint)
        assert written.result(180) == N
    finally:
        mat.shutdown()
    assert _written(spark, base) == list(range(N))
    assert _staging(base) == []
    assert not spark.streams.active


def _wait_until(condition, timeout: float = 120.0, what: str = "condition", poll: float = 0.01) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} not reached within {timeout}s"
        time.sleep(poll)


def test_restoring_an_older_checkpoint_taken_before_anything_was_released_writes_every_row_once(spark, tmp_path):
    # checkpoint 1 is taken before the sink staged anything; the later checkpoints release files that Spark
    # processes; the run fails; a restore of checkpoint 1 (retained) replays every row: Spark has some of them
    # already, from files released after the checkpoint, and must get each row once all the same
    base = tmp_path
    (base / "staging").mkdir()
    valve = _Valve(0)
    mat = _mat(tmp_path, retained=100)
    try:
        written = _rows().via(Flow.from_graph(valve)).island().to_mat(_sink(spark, base), Keep.right) \
            .run(mat, name="stream-older")
        g = mat.running_graph("stream-older")
        assert valve.reached.wait(60)
        older = g.checkpoint_now(timeout=60)  # nothing staged, nothing released
        valve.open_to(1500)  # the sink asks for the checkpoints that release its files
        _wait_until(lambda: (base / "out").is_dir() and len(_written(spark, base)) >= 400, what="Spark's first rows",
                    poll=0.5)
        g.cancel(RuntimeError("injected failure"))
        with pytest.raises(RuntimeError, match="injected failure"):
            written.result(60)
        assert g.wait(60)
        assert g.checkpoints()[-1].id > older.id
    finally:
        mat.shutdown()
    before = _written(spark, base)
    assert before == list(range(len(before))) and len(before) < 1500
    _restore_writes_every_row_once(spark, tmp_path, "stream-older", older, retained=100)


def _restored_logic(directory, **state):
    """A staging sink's logic given ``state`` as its checkpoint's (the restore's hooks need no running graph)."""
    from atoll.interop.spark_stream_staging import StagingSink
    from atoll.stage import Attributes

    stage = StagingSink(pa.schema([("x", pa.int64())]), str(directory), None, 100, 0.5, 2, deferred=True,
                        spark_checkpoint="chk")
    logic, _promise = stage.create_logic_and_materialized_value(Attributes())
    full = dict(count=0, schema=stage.schema, rows=[], rows_base=0, pending=[], directory=str(directory),
                spark_checkpoint="chk", staged=0, rows_staged=0, prepared=[], released=0, last_mtime_ns=0,
                ended=False)
    full.update(state)
    logic.restore_from_snapshot(full)
    return logic


def _table(lo: int, hi: int):
    return pa.table({"x": list(range(lo, hi))})


def test_a_restore_older_than_the_last_release_skips_the_rows_spark_has_and_finishes_a_cut_short_release(tmp_path):
    from atoll.interop.spark_stream_staging import LEDGER

    # the ledger counts files 0..2 (rows 0..29); file 2's rename was cut short by a crash; file 3 was never released
    (tmp_path / LEDGER).write_text(json.dumps({"files": 3, "rows": 30, "mtime_ns": 5_000_000}))
    pq.write_table(_table(20, 30), tmp_path / ".pending-00000002-aaaa.parquet")
    pq.write_table(_table(30, 40), tmp_path / ".pending-00000003-bbbb.parquet")
    # checkpoint 1's cut: file 0 (rows 0..9) prepared (released since, and processed by Spark: gone), rows 10..27
    # gathered (a table, then three rows)
    logic = _restored_logic(tmp_path, staged=1, rows_staged=10, released=0, count=28, rows_base=25,
                            prepared=[(".pending-00000000-cccc.parquet", "part-00000000-cccc.parquet", 10)],
                            pending=[_table(10, 25)], rows=[{"x": 25}, {"x": 26}, {"x": 27}])
    logic.snapshot_commit_finish(1, [(".pending-00000000-cccc.parquet", "part-00000000-cccc.parquet", 10)], True)
    logic.rollback_uncommitted(1)
    assert sorted(os.listdir(tmp_path)) == [LEDGER, "part-00000002-aaaa.parquet"]
    assert (logic.staged, logic.rows_staged, logic.released) == (3, 30, 3)
    assert logic.pending == [] and logic.rows == [] and logic.skip == 2  # rows 28 and 29 come with the replay
    logic._put(_table(28, 33))
    assert [t.column("x").to_pylist() for t in logic.pending] == [[30, 31, 32]] and logic.skip == 0
    assert logic.save_to_snapshot()["skip"] == 0


def test_a_restored_prepared_file_that_is_gone_but_was_never_released_fails_the_restore(tmp_path):
    from atoll.interop.spark_stream_staging import LEDGER

    (tmp_path / LEDGER).write_text(json.dumps({"files": 3, "rows": 30, "mtime_ns": 5_000_000}))
    prepared = [(".pending-00000005-dddd.parquet", "part-00000005-dddd.parquet", 50)]
    logic = _restored_logic(tmp_path, staged=6, rows_staged=50, released=3, prepared=prepared)
    with pytest.raises(CheckpointError, match="never released to Spark"):
        logic.snapshot_commit_finish(4, prepared, True)


@pytest.mark.parametrize("at,schema", [(0, SCHEMA), (1234, SCHEMA), (1234, None)], ids=["0", "1234", "inferred"])
def test_stop_with_checkpoint_and_restore_without_checkpoints_writes_every_row_once(spark, tmp_path, at, schema):
    # the restore's driver has no checkpoint settings: it starts the query on its own directory (schema given)
    # and moves it to the restored sink's directory once offered, or (schema inferred) starts it there
    plain, stopped = tmp_path / "plain", tmp_path / "stopped"
    for d in (plain, stopped):
        (d / "staging").mkdir(parents=True)
    bases = iter([plain, stopped, stopped])  # the failure-free run, the stopped one, the restore (no checkpoints)
    expected, got = checkpoint_round_trip(_rows, at=at, storage=str(tmp_path / "checkpoints"),
                                          sink=lambda: _sink(spark, next(bases), schema=schema), timeout=180)
    assert expected == got == N
    assert _written(spark, stopped) == _written(spark, plain) == list(range(N))
    assert _staging(stopped) == []
    assert not spark.streams.active


def test_without_an_interval_the_sink_asks_for_the_checkpoints_that_release_its_files(spark, tmp_path):
    (tmp_path / "staging").mkdir()
    mat = _mat(tmp_path)  # interval None: only the sink's requests make checkpoints
    try:
        written = _rows().island().to_mat(_sink(spark, tmp_path, max_pending_batches=2), Keep.right) \
            .run(mat, name="stream-requests")
        assert written.result(180) == N
    finally:
        mat.shutdown()
    assert _written(spark, tmp_path) == list(range(N))


def test_foreach_batch_sees_every_row_with_stable_batch_ids_across_a_restore(spark, tmp_path):
    seen = {}  # batch id -> rows; a repeated batch must hold the same rows

    def keep(batch_df, batch_id):
        rows = sorted(r.x for r in batch_df.collect())
        assert seen.setdefault(batch_id, rows) == rows

    def sink():
        return Sink.to_spark_stream(spark, foreach_batch=keep, checkpoint_location=str(tmp_path / "chk"),
                                    schema=SCHEMA, rows_per_batch=250, trigger="100 milliseconds",
                                    staging_dir=str(tmp_path / "staging"))

    (tmp_path / "staging").mkdir()
    valve = _Valve(1000)
    mat = _mat(tmp_path)
    try:
        written = _rows().via(Flow.from_graph(valve)).to_mat(sink(), Keep.right).run(mat, name="stream-fb")
        assert valve.reached.wait(60)
        info = mat.running_graph("stream-fb").stop_with_checkpoint(60)
        with pytest.raises(Exception):
            written.result(60)
    finally:
        mat.shutdown()
    mat = _mat(tmp_path)
    try:
        written = _rows().via(Flow.from_graph(_Valve(N))).to_mat(sink(), Keep.right) \
            .run(mat, name="stream-fb-2", restore_from=info)
        assert written.result(180) == N
    finally:
        mat.shutdown()
    assert sorted(x for rows in seen.values() for x in rows) == list(range(N))  # each row in exactly one batch


def test_checkpoints_without_a_checkpoint_location_are_refused_before_anything_starts(spark, tmp_path):
    mat = _mat(tmp_path)
    try:
        with pytest.raises(CheckpointNotSupportedError, match="give checkpoint_location"):
            _rows().run_with(Sink.to_spark_stream(spark, format="noop"), mat)
        assert mat.running_graphs() == []
    finally:
        mat.shutdown()
    assert not spark.streams.active


def test_a_fresh_run_refuses_a_location_with_progress_and_a_restore_another_location(spark, tmp_path):
    (tmp_path / "staging").mkdir()
    mat = _mat(tmp_path)
    try:
        assert Source.range(0, 500).map(lambda x: {"x": x, "y": str(x)}).run_with(
            _sink(spark, tmp_path), mat).result(180) == 500
        with pytest.raises(CheckpointError, match="holds the progress of an earlier query"):
            Source.range(0, 500).map(lambda x: {"x": x, "y": str(x)}).run_with(
                _sink(spark, tmp_path), mat).result(180)
    finally:
        mat.shutdown()
    assert not spark.streams.active
    valve = _Valve(300)
    other = tmp_path / "other"
    (other / "staging").mkdir(parents=True)
    mat = _mat(tmp_path)
    try:
        written = _rows().via(Flow.from_graph(valve)).to_mat(_sink(spark, other), Keep.right).run(mat, name="moved")
        assert valve.reached.wait(60)
        info = mat.running_graph("moved").stop_with_checkpoint(60)
        with pytest.raises(Exception):
            written.result(60)
    finally:
        mat.shutdown()
    mat = _mat(tmp_path)
    try:
        moved = _sink(spark, other, checkpoint_location=str(other / "elsewhere"))
        with pytest.raises(CheckpointMismatchError, match="restore with the same one"):
            _rows().via(Flow.from_graph(_Valve(N))).to_mat(moved, Keep.right) \
                .run(mat, name="moved-2", restore_from=info).result(180)
    finally:
        mat.shutdown()
    assert not spark.streams.active


@pytest.mark.slow
def test_a_killed_sink_island_leaves_every_row_once_in_sparks_output(spark, ray_session, tmp_path):
    seed = random.randrange(1 << 30)
    fraction = random.Random(seed).uniform(0.3, 0.7)
    (tmp_path / "staging").mkdir()
    mat = Materializer.ray(start_timeout=60, checkpoint=CheckpointSettings(
        storage=str(tmp_path / "checkpoints"), interval=0.5, restart=RestartPolicy(backoff=0.0)))
    try:
        written = (Source.range(0, N).throttle(100, 0.1).island().map(lambda x: {"x": x, "y": str(x)}).island()
                   .to_mat(_sink(spark, tmp_path), Keep.right)).run(mat, name="stream-kill")
        g = mat.running_graph("stream-kill")
        struck = kill_island_at(g, 0, fraction, N, timeout=120)
        assert written.result(240) == N, f"seed={seed}"
        print(f"seed={seed} fraction={fraction:.2f} killed the sink island after {struck} elements")
        assert struck < N and g.restarts == 1
    finally:
        mat.shutdown()
    assert _written(spark, tmp_path) == list(range(N)), f"seed={seed}"
    assert not spark.streams.active
