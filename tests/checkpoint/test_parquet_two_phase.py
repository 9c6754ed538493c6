"""Sink.to_parquet under checkpoints: part files written as hidden temporaries, closed at the cut (phase 1),
renamed once the checkpoint is durable (phase 2), committed again on restore and rolled back by listing.

Every test compares the directory with the failure-free run: the committed parts, read in name order, hold
exactly the stream's elements in order (nothing lost, nothing twice) and no temporary is left."""
from __future__ import annotations

import os
import threading

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from atoll import CheckpointError, CheckpointSettings, Flow, Keep, Materializer, Sink, Source
from atoll._impl.islands import checkpoint_coordinator
from atoll.interop.parquet import ParquetSink
from atoll.stage import Attributes, FlowShape, GraphStage, GraphStageLogic, InHandler, Inlet, OutHandler, Outlet
from atoll.testkit.round_trip import checkpoint_round_trip

N = 2000


def _sink(path, rows: int = 64):
    return Sink.from_graph(ParquetSink(str(path), rows_per_block=rows))


def _committed(path) -> list:
    """The ``x`` column of the committed parts, in part order; fails if a temporary is left."""
    names = sorted(os.listdir(path))
    assert [n for n in names if n.startswith("_")] == [], names
    assert all(n.startswith("part-") and n.endswith(".parquet") for n in names), names
    out = []
    for n in names:
        out.extend(pq.read_table(os.path.join(path, n)).column("x").to_pylist())
    return out


def _temporaries(path) -> list:
    return sorted(n for n in os.listdir(path) if n.startswith("_part-"))


def _rows():
    return Source.range(0, N).map(lambda x: {"x": x})


from atoll.testkit.valve import Valve as _Valve  # noqa: E402


class _Declining(GraphStage):
    """Passes everything; its state cannot be saved while ``declining`` is set (the island declines the cut)."""

    def __init__(self):
        self.in_, self.out = Inlet("declining.in"), Outlet("declining.out")
        self.shape = FlowShape(self.in_, self.out)
        self.declining = threading.Event()
        self.initial_attributes = Attributes.name("declining")

    def create_logic(self, attributes):
        stage = self

        class Logic(GraphStageLogic, InHandler, OutHandler):
            def __init__(self):
                super().__init__(stage.shape)
                self.set_handlers(stage.in_, stage.out, self)

            def save_to_snapshot(self):
                if stage.declining.is_set():
                    raise RuntimeError("not now")
                return None

            def restore_from_snapshot(self, state):
                pass

            def on_push(self):
                self.push(stage.out, self.grab(stage.in_))

            def on_pull(self):
                self.pull(stage.in_)

        return Logic()


def _mat(tmp_path, **settings):
    return Materializer.local(checkpoint=CheckpointSettings(storage=str(tmp_path / "checkpoints"), **settings))


# ---------------------------------------------------------------------------------------------- end of stream
@pytest.mark.parametrize("islands", [1, 3])
def test_the_end_of_the_stream_commits_the_last_part_before_the_future_completes(tmp_path, islands):
    out = tmp_path / "out"
    graph = _rows()
    for _ in range(islands - 1):
        graph = graph.island().map(lambda r: r)
    mat = _mat(tmp_path)  # interval None: only the sink's request makes the checkpoint that commits
    try:
        written = graph.to_mat(_sink(out), Keep.right).run(mat, name="end")
        assert written.result(20) == N
        # the future completed after the commit: every row is visible, no temporary is left
        assert _committed(out) == list(range(N))
        assert ds.dataset(str(out)).to_table().num_rows == N
    finally:
        mat.shutdown()


def test_checkpoints_mid_stream_commit_epochs_in_order(tmp_path):
    out = tmp_path / "out"
    valve = _Valve(500)
    mat = _mat(tmp_path)
    try:
        written = _rows().via(Flow.from_graph(valve)).island().to_mat(_sink(out), Keep.right).run(mat, name="mid")
        g = mat.running_graph("mid")
        for limit in (1100, 1700, N):
            assert valve.reached.wait(20)
            g.checkpoint_now(timeout=20)
            valve.open_to(limit)
        assert written.result(20) == N
        assert _committed(out) == list(range(N))
        assert len(os.listdir(out)) >= 3  # an epoch per checkpoint that saw rows, plus the last one
    finally:
        mat.shutdown()


def test_an_empty_stream_writes_an_empty_directory(tmp_path):
    out = tmp_path / "out"
    mat = _mat(tmp_path)
    try:
        assert Source.empty().to_mat(_sink(out), Keep.right).run(mat, name="empty").result(20) == 0
        assert os.listdir(out) == []
    finally:
        mat.shutdown()


# ---------------------------------------------------------------------------------------------- failure and restore
def test_a_failure_after_a_checkpoint_restores_to_exactly_the_failure_free_output(tmp_path):
    out = tmp_path / "out"
    valve = _Valve(700)
    mat = _mat(tmp_path)
    try:
        written = _rows().via(Flow.from_graph(valve)).island().to_mat(_sink(out), Keep.right).run(mat, name="fail")
        g = mat.running_graph("fail")
        assert valve.reached.wait(20)
        info = g.checkpoint_now(timeout=20)
        valve.open_to(1500)  # 800 more rows written after the checkpoint, then the graph fails
        assert valve.reached.wait(20)
        g.cancel(RuntimeError("injected failure"))
        with pytest.raises(RuntimeError, match="injected failure"):
            written.result(20)
        assert g.wait(20)
    finally:
        mat.shutdown()
    # what a crashed attempt leaves behind: a temporary nobody prepared
    (out / "_part-00000007-0badf00d.parquet.inprogress").write_bytes(b"half a part")
    mat = _mat(tmp_path)
    try:
        written = _rows().via(Flow.from_graph(_Valve(N))).island().to_mat(_sink(out), Keep.right) \
            .run(mat, name="fail", restore_from=info)
        assert written.result(20) == N
        assert _committed(out) == list(range(N))
    finally:
        mat.shutdown()


def test_a_restore_commits_what_the_checkpoint_prepared_when_phase_two_was_lost(tmp_path, monkeypatch):
    # the island died between the manifest and the commit: the notification never arrived
    monkeypatch.setattr(checkpoint_coordinator.LocalIslandPort, "complete", lambda self, n: None)
    out = tmp_path / "out"
    valve = _Valve(900)
    mat = _mat(tmp_path)
    try:
        written = _rows().via(Flow.from_graph(valve)).island().to_mat(_sink(out), Keep.right).run(mat, name="lost")
        g = mat.running_graph("lost")
        assert valve.reached.wait(20)
        info = g.checkpoint_now(timeout=20)
        valve.open_to(1300)
        assert valve.reached.wait(20)
        g.cancel(RuntimeError("injected failure"))
        assert g.wait(20)
    finally:
        mat.shutdown()
    assert [n for n in os.listdir(out) if not n.startswith("_")] == []  # nothing was committed
    assert len(_temporaries(out)) >= 1  # the prepared part (the unprepared one was deleted at the failure)
    assert ds.dataset(str(out)).to_table().num_rows == 0  # readers skip the hidden temporaries
    monkeypatch.undo()
    mat = _mat(tmp_path)
    try:
        closed = _Valve(0)
        written = _rows().via(Flow.from_graph(closed)).island().to_mat(_sink(out), Keep.right) \
            .run(mat, name="lost", restore_from=info)
        assert closed.reached.wait(20)  # running: the restore committed the prepared part before the start
        committed = _committed(out)
        assert len(committed) > 0 and committed == list(range(len(committed)))
        closed.open_to(N)
        assert written.result(20) == N
        assert _committed(out) == list(range(N))
    finally:
        mat.shutdown()


@pytest.mark.parametrize("at", [0, 1, 333, 1999])
def test_stop_with_checkpoint_and_restore_without_checkpoints_writes_each_row_once(tmp_path, at):
    out, plain = tmp_path / "out", tmp_path / "plain.parquet"
    paths = iter([plain, out, out])  # the failure-free run (no checkpoints: one file), the stopped one, the restore
    expected_rows, got_rows = checkpoint_round_trip(_rows, at=at, storage=tmp_path / "checkpoints",
                                                    sink=lambda: _sink(next(paths), rows=50), timeout=20)
    assert expected_rows == got_rows == N
    assert _committed(out) == pq.read_table(plain).column("x").to_pylist() == list(range(N))


# ---------------------------------------------------------------------------------------------- aborted checkpoints
def test_an_aborted_checkpoint_commits_nothing_and_a_fresh_run_rolls_its_parts_back(tmp_path):
    out = tmp_path / "out"
    valve, declining = _Valve(600), _Declining()
    declining.declining.set()
    mat = _mat(tmp_path)
    try:
        written = (_rows().via(Flow.from_graph(valve)).island().via(Flow.from_graph(declining))
                   .to_mat(_sink(out), Keep.right).run(mat, name="abort"))
        g = mat.running_graph("abort")
        assert valve.reached.wait(20)
        with pytest.raises(CheckpointError, match="not now"):
            g.checkpoint_now(timeout=20)  # the sink prepared its part, then the island declined
        valve.open_to(800)
        assert valve.reached.wait(20)
        g.cancel(RuntimeError("injected failure"))
        assert g.wait(20)
    finally:
        mat.shutdown()
    assert [n for n in os.listdir(out) if not n.startswith("_")] == []
    assert len(_temporaries(out)) == 1  # prepared by the aborted checkpoint, never committed
    mat = _mat(tmp_path)
    try:  # a run that restores nothing rolls back every temporary
        written = _rows().to_mat(_sink(out), Keep.right).run(mat, name="abort-fresh")
        assert written.result(20) == N
        assert _committed(out) == list(range(N))
    finally:
        mat.shutdown()


def test_the_next_complete_checkpoint_commits_what_an_aborted_one_prepared(tmp_path):
    out = tmp_path / "out"
    valve, declining = _Valve(600), _Declining()
    declining.declining.set()
    mat = _mat(tmp_path)
    try:
        written = (_rows().via(Flow.from_graph(valve)).island().via(Flow.from_graph(declining))
                   .to_mat(_sink(out), Keep.right).run(mat, name="subsumed"))
        g = mat.running_graph("subsumed")
        assert valve.reached.wait(20)
        with pytest.raises(CheckpointError):
            g.checkpoint_now(timeout=20)
        declining.declining.clear()
        info = g.checkpoint_now(timeout=20)
        valve.open_to(1000)
        assert valve.reached.wait(20)
        g.cancel(RuntimeError("injected failure"))
        assert g.wait(20)
    finally:
        mat.shutdown()
    # the rows up to the cut of the complete checkpoint are committed (phase 2 ran before the failure), the
    # aborted checkpoint's part among them
    committed = _committed(out)
    assert len(committed) > 0 and committed == list(range(len(committed)))
    mat = _mat(tmp_path)
    try:
        written = (_rows().via(Flow.from_graph(_Valve(N))).island().via(Flow.from_graph(_Declining()))
                   .to_mat(_sink(out), Keep.right).run(mat, name="subsumed", restore_from=info))
        assert written.result(20) == N
        assert _committed(out) == list(range(N))
    finally:
        mat.shutdown()


# ---------------------------------------------------------------------------------------------- without checkpoints
def test_without_checkpoints_the_sink_writes_one_file_as_before(tmp_path):
    out = tmp_path / "one.parquet"
    mat = Materializer.local()
    try:
        assert _rows().to_mat(_sink(out), Keep.right).run(mat).result(20) == N
    finally:
        mat.shutdown()
    assert out.is_file()
    assert pq.read_table(out).column("x").to_pylist() == list(range(N))


def test_with_checkpoints_a_file_at_the_path_fails_the_sink(tmp_path):
    out = tmp_path / "taken"
    pq.write_table(pa.table({"x": [1]}), out)
    mat = _mat(tmp_path)
    try:
        with pytest.raises(NotADirectoryError, match="Sink.to_parquet"):
            _rows().to_mat(_sink(out), Keep.right).run(mat, name="file").result(20)
    finally:
        mat.shutdown()


def test_a_commit_racing_another_commit_of_the_same_part_finds_it_committed(tmp_path):
    # two commits of one prepared part (a stopped run's last one and a restore's): the one whose move finds
    # the temporary gone while the final part exists has nothing left to do
    from atoll.interop.parquet_parts import PartFiles

    parts = PartFiles(str(tmp_path / "out"))
    parts.start_fresh()
    parts.write(pa.table({"x": [1, 2]}))
    prepared = parts.prepare()
    other = PartFiles(str(tmp_path / "out"))
    other.restore(parts.state())
    real_move = other.fs.move

    class RacedFs:
        """The filesystem of ``other``, whose move runs the racing commit first."""

        def __getattr__(self, name):
            return getattr(real_move.__self__, name)

        def move(self, src, dst):
            parts.commit(prepared)
            real_move(src, dst)

    other.fs = RacedFs()
    other.commit(prepared)
    assert _committed(tmp_path / "out") == [1, 2] and other.pending == [] and parts.pending == []
    lost = PartFiles(str(tmp_path / "out"))
    lost.restore({"seq": 5, "pending": [("_part-00000004-deadbeef.parquet.inprogress", "part-00000004.parquet")]})
    with pytest.raises(CheckpointError, match=r"_part-00000004-deadbeef.parquet.inprogress is gone .* part-00000004.parquet does not exist"):
        lost.commit(lost.pending)


# ---------------------------------------------------------------------------------------------- single_file=True
def _single(path, rows: int = 64):
    return Sink.from_graph(ParquetSink(str(path), rows_per_block=rows, single_file=True))


def _file_rows(path) -> list:
    return pq.read_table(path).column("x").to_pylist()


def _leftovers(directory) -> list:
    """Hidden names the single-file sink may leave beside its file: its parts directory, merge temporaries."""
    return sorted(n for n in os.listdir(directory) if n.startswith("_"))


@pytest.mark.parametrize("islands", [1, 3])
def test_single_file_is_merged_from_the_committed_parts_at_the_end(tmp_path, islands):
    out = tmp_path / "data" / "one.parquet"
    out.parent.mkdir()
    graph = _rows()
    for _ in range(islands - 1):
        graph = graph.island().map(lambda r: r)
    mat = _mat(tmp_path)
    try:
        assert graph.to_mat(_single(out), Keep.right).run(mat, name="single").result(20) == N
    finally:
        mat.shutdown()
    assert out.is_file() and _file_rows(out) == list(range(N))
    assert _leftovers(out.parent) == []  # the parts are deleted once merged


def test_single_file_through_checkpoints_a_failure_and_a_restore_holds_each_row_once(tmp_path):
    out = tmp_path / "one.parquet"
    pq.write_table(pa.table({"x": [-1]}), out)  # a previous run's file: replaced only by the final rename
    valve = _Valve(700)
    mat = _mat(tmp_path)
    try:
        written = _rows().via(Flow.from_graph(valve)).island().to_mat(_single(out), Keep.right).run(mat, name="sf")
        g = mat.running_graph("sf")
        assert valve.reached.wait(20)
        g.checkpoint_now(timeout=20)
        valve.open_to(1100)
        assert valve.reached.wait(20)
        info = g.checkpoint_now(timeout=20)  # two epochs committed as parts
        assert _file_rows(out) == [-1]  # readers of the file see the old one until the end
        valve.open_to(1500)
        assert valve.reached.wait(20)
        g.cancel(RuntimeError("injected failure"))
        with pytest.raises(RuntimeError, match="injected failure"):
            written.result(20)
        assert g.wait(20)
    finally:
        mat.shutdown()
    parts = tmp_path / "_one.parquet.parts"
    assert sorted(n for n in os.listdir(parts) if n.startswith("part-")) == ["part-00000000.parquet",
                                                                            "part-00000001.parquet"]
    assert _file_rows(out) == [-1]
    mat = _mat(tmp_path)
    try:
        written = _rows().via(Flow.from_graph(_Valve(N))).island().to_mat(_single(out), Keep.right) \
            .run(mat, name="sf", restore_from=info)
        assert written.result(20) == N
    finally:
        mat.shutdown()
    assert _file_rows(out) == list(range(N))
    assert _leftovers(tmp_path) == ["checkpoints"] or _leftovers(tmp_path) == []


@pytest.mark.parametrize("at", [0, 777, 1999])
def test_single_file_stop_with_checkpoint_and_restore_without_checkpoints_writes_each_row_once(tmp_path, at):
    out, plain = tmp_path / "out.parquet", tmp_path / "plain.parquet"
    paths = iter([plain, out, out])  # the failure-free run, the stopped one, the restore (no checkpoints)
    expected_rows, got_rows = checkpoint_round_trip(_rows, at=at, storage=tmp_path / "checkpoints",
                                                    sink=lambda: _single(next(paths), rows=50), timeout=20)
    assert expected_rows == got_rows == N
    assert _file_rows(out) == _file_rows(plain) == list(range(N))
    assert [n for n in os.listdir(tmp_path) if n.startswith("_")] == []


def test_single_file_restored_after_the_end_is_left_as_the_failure_free_file(tmp_path):
    out = tmp_path / "one.parquet"
    valve = _Valve(600)
    mat = _mat(tmp_path, retain_on_success=True, retained=10)
    try:
        written = _rows().via(Flow.from_graph(valve)).island().to_mat(_single(out), Keep.right).run(mat, name="done")
        g = mat.running_graph("done")
        assert valve.reached.wait(20)
        older = g.checkpoint_now(timeout=20)
        valve.open_to(N)
        assert written.result(20) == N
        assert g.wait(20)
    finally:
        mat.shutdown()
    final = Materializer.latest_checkpoint(str(tmp_path / "checkpoints"), "done")
    assert final is not None and final.id > older.id
    before = os.stat(out)
    for info in (final, older):  # the final checkpoint: nothing to merge again; an older one: rebuilt exactly
        mat = _mat(tmp_path)
        try:
            written = _rows().via(Flow.from_graph(_Valve(N))).island().to_mat(_single(out), Keep.right) \
                .run(mat, name=f"again-{info.id}", restore_from=info)
            assert written.result(20) == N
        finally:
            mat.shutdown()
        assert _file_rows(out) == list(range(N))
        if info is final:
            assert os.stat(out).st_mtime_ns == before.st_mtime_ns  # not written again
        assert [n for n in os.listdir(tmp_path) if n.startswith("_")] == []


def test_single_file_of_an_empty_stream_is_an_empty_file_with_the_schema(tmp_path):
    out = tmp_path / "empty.parquet"
    mat = _mat(tmp_path)
    try:
        sink = Sink.from_graph(ParquetSink(str(out), schema="x long", single_file=True))
        assert Source.empty().to_mat(sink, Keep.right).run(mat, name="empty-single").result(20) == 0
    finally:
        mat.shutdown()
    table = pq.read_table(out)
    assert table.num_rows == 0 and table.schema.names == ["x"]


def test_single_file_at_a_directory_fails_the_sink_naming_the_argument(tmp_path):
    out = tmp_path / "a-dir"
    out.mkdir()
    mat = _mat(tmp_path)
    try:
        with pytest.raises(IsADirectoryError, match="single_file=True"):
            _rows().to_mat(_single(out), Keep.right).run(mat, name="dir").result(20)
    finally:
        mat.shutdown()
    with pytest.raises(TypeError, match="single_file must be True or False"):
        ParquetSink(str(out), single_file="yes")
    with pytest.raises(ValueError, match="needs a file path"):
        ParquetSink(str(out) + "/", single_file=True)


def test_single_file_through_the_dsl_without_checkpoints_writes_one_file(tmp_path):
    out = tmp_path / "plain.parquet"
    mat = Materializer.local()
    try:
        assert _rows().to_mat(Sink.to_parquet(str(out), single_file=True), Keep.right).run(mat).result(20) == N
    finally:
        mat.shutdown()
    assert _file_rows(out) == list(range(N))


def test_single_file_merge_is_idempotent_across_its_own_crash_windows(tmp_path):
    from atoll.interop.parquet_parts import SingleFile

    out = tmp_path / "one.parquet"
    (tmp_path / "_one.parquet.0123abcd.inprogress").write_bytes(b"a crashed merge")  # an earlier run's temporary
    single = SingleFile(str(out), "feedbeef")
    single.start_fresh()
    assert _leftovers(tmp_path) == []
    parts = single.parts()
    parts.start_fresh()
    committed = []
    for rows in ([0, 1], [2], [3, 4, 5]):
        parts.write(pa.table({"x": rows}))
        prepared = parts.prepare()
        parts.commit(prepared)
        committed.extend(prepared)
    # the merge renamed the file into place, then the process died before deleting the parts
    real_delete = parts.delete_all
    parts.delete_all = lambda: None
    single.merge(parts, committed, None)
    assert _file_rows(out) == list(range(6)) and os.path.isdir(tmp_path / "_one.parquet.parts")
    merged_at = os.stat(out).st_mtime_ns
    parts.delete_all = real_delete
    single.merge(parts, committed, None)  # the restore: the file holds these parts already, only the clean-up runs
    assert os.stat(out).st_mtime_ns == merged_at and _leftovers(tmp_path) == []
    # a part neither in the directory nor in the file cannot be merged
    with pytest.raises(CheckpointError, match="neither in"):
        single.merge(single.parts(), committed + [("_part-00000003-00000000.parquet.inprogress",
                                                    "part-00000003.parquet")], None)
    assert _file_rows(out) == list(range(6))  # untouched
