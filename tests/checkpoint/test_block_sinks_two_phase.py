"""Sink.to_ray_dataset (and so Sink.to_spark, which shares its island half, ``CommittingBlockLogic``) under
checkpoints on Materializer.local: blocks are pending until the checkpoint covering them completes, the sink's
state holds part names (never object refs), and the Dataset is built only from committed blocks after the final
checkpoint.

Every test compares the Dataset's rows with the failure-free run: the same elements in the same order, none
lost, none twice. Ray runs here only for the driver's reads and the Dataset (the islands are threads)."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import ray  # noqa: E402

from atoll import CheckpointSettings, Flow, Keep, Materializer, Sink, Source  # noqa: E402
from atoll._impl.islands import checkpoint_coordinator  # noqa: E402
from atoll.interop.ray_dataset import RayDatasetSink  # noqa: E402
from atoll.testkit.round_trip import checkpoint_round_trip  # noqa: E402

N = 2000


@pytest.fixture(scope="module", autouse=True)
def ray_session():
    from ray_start import release_shared_ray

    release_shared_ray()  # this module's own: one CPU, a small store
    started = not ray.is_initialized()
    if started:
        ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False, object_store_memory=80 * 1024 * 1024)
    yield
    if started:
        ray.shutdown()


def _sink(rows: int = 64):
    return Sink.from_graph(RayDatasetSink(rows_per_block=rows))


def _xs(dataset) -> list:
    return [r["x"] for r in dataset.take_all()]


def _rows():
    return Source.range(0, N).map(lambda x: {"x": x})


def _files(tmp_path) -> list:
    """Every file left in the sinks' block directories (``<storage>/<graph>/_sink-blocks/<op>-<token>/``)."""
    root = tmp_path / "checkpoints"
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs
                  if "_sink-blocks" in d)


from atoll.testkit.valve import Valve as _Valve  # noqa: E402


def _mat(tmp_path, **settings):
    return Materializer.local(checkpoint=CheckpointSettings(storage=str(tmp_path / "checkpoints"), **settings))


# ---------------------------------------------------------------------------------------------- end of stream
@pytest.mark.parametrize("islands", [1, 3])
def test_the_dataset_is_built_after_the_final_checkpoint_committed_every_block(tmp_path, islands):
    graph = _rows()
    for _ in range(islands - 1):
        graph = graph.island().map(lambda r: r)
    mat = _mat(tmp_path)  # interval None: only the sink's request makes the checkpoint that commits
    try:
        dataset = graph.to_mat(_sink(), Keep.right).run(mat, name="end")
        g = mat.running_graph("end")
        assert _xs(dataset.result(30)) == list(range(N))
        assert g.wait(20)
    finally:
        mat.shutdown()
    assert _files(tmp_path) == []  # deleted with the graph's checkpoints, after the driver read them


def test_retained_checkpoints_keep_the_committed_parts(tmp_path):
    mat = _mat(tmp_path, retain_on_success=True)
    try:
        future = _rows().to_mat(_sink(rows=500), Keep.right).run(mat, name="kept")
        g = mat.running_graph("kept")
        dataset = future.result(30)
        assert g.wait(20)
    finally:
        mat.shutdown()
    assert _xs(dataset) == list(range(N))
    files = _files(tmp_path)
    assert len(files) == 4 and all(os.path.basename(f).startswith("part-") for f in files), files


def test_an_empty_stream_gives_an_empty_dataset(tmp_path):
    mat = _mat(tmp_path)
    try:
        dataset = Source.empty().to_mat(_sink(), Keep.right).run(mat, name="empty").result(30)
    finally:
        mat.shutdown()
    assert dataset.count() == 0


def test_checkpoints_mid_stream_commit_blocks_in_order(tmp_path):
    valve = _Valve(500)
    mat = _mat(tmp_path)
    try:
        dataset = _rows().via(Flow.from_graph(valve)).island().to_mat(_sink(), Keep.right).run(mat, name="mid")
        g = mat.running_graph("mid")
        for limit in (1100, 1700, N):
            assert valve.reached.wait(20)
            g.checkpoint_now(timeout=20)
            valve.open_to(limit)
        assert _xs(dataset.result(30)) == list(range(N))
    finally:
        mat.shutdown()


# ---------------------------------------------------------------------------------------------- failure and restore
def test_a_failure_after_a_checkpoint_restores_to_exactly_the_failure_free_dataset(tmp_path):
    valve = _Valve(700)
    mat = _mat(tmp_path)
    try:
        dataset = _rows().via(Flow.from_graph(valve)).island().to_mat(_sink(), Keep.right).run(mat, name="fail")
        g = mat.running_graph("fail")
        assert valve.reached.wait(20)
        info = g.checkpoint_now(timeout=20)
        valve.open_to(1500)  # 800 more rows gathered after the checkpoint, then the graph fails
        assert valve.reached.wait(20)
        g.cancel(RuntimeError("injected failure"))
        with pytest.raises(RuntimeError, match="injected failure"):
            dataset.result(20)
        assert g.wait(20)
    finally:
        mat.shutdown()
    # the failed attempt left the blocks it closed after the checkpoint as temporaries nobody prepared
    assert any(os.path.basename(f).startswith("_part-") for f in _files(tmp_path))
    mat = _mat(tmp_path)
    try:
        dataset = _rows().via(Flow.from_graph(_Valve(N))).island().to_mat(_sink(), Keep.right) \
            .run(mat, name="fail", restore_from=info)
        g = mat.running_graph("fail")
        assert _xs(dataset.result(30)) == list(range(N))
        assert g.wait(20)
    finally:
        mat.shutdown()
    assert _files(tmp_path) == []


def test_a_restore_commits_what_the_checkpoint_prepared_when_phase_two_was_lost(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint_coordinator.LocalIslandPort, "complete", lambda self, n: None)
    valve = _Valve(900)
    mat = _mat(tmp_path)
    try:
        _rows().via(Flow.from_graph(valve)).island().to_mat(_sink(), Keep.right).run(mat, name="lost")
        g = mat.running_graph("lost")
        assert valve.reached.wait(20)
        info = g.checkpoint_now(timeout=20)
        valve.open_to(1300)
        assert valve.reached.wait(20)
        g.cancel(RuntimeError("injected failure"))
        assert g.wait(20)
    finally:
        mat.shutdown()
    files = _files(tmp_path)
    assert files and not any(os.path.basename(f).startswith("part-") for f in files)  # nothing was committed
    monkeypatch.undo()
    mat = _mat(tmp_path)
    try:
        dataset = _rows().via(Flow.from_graph(_Valve(N))).island().to_mat(_sink(), Keep.right) \
            .run(mat, name="lost", restore_from=info)
        assert _xs(dataset.result(30)) == list(range(N))
    finally:
        mat.shutdown()


@pytest.mark.parametrize("at", [0, 333, 1999])
def test_stop_with_checkpoint_and_restore_without_checkpoints_gives_each_row_once(tmp_path, at):
    expected, got = checkpoint_round_trip(_rows, at=at, storage=str(tmp_path / "checkpoints"),
                                          sink=lambda: _sink(rows=50), timeout=30)
    assert _xs(expected) == _xs(got) == list(range(N))


def test_the_sink_state_holds_part_names_not_object_refs(tmp_path):
    # the reason for the parts: a restored sink runs in a new island, where the killed one's refs are dead
    from atoll.interop.arrow_blocks import BlockStore, CommittingBlockLogic

    states = []
    original = CommittingBlockLogic.save_to_snapshot

    def spy(self):
        state = original(self)
        states.append(state)
        return state

    CommittingBlockLogic.save_to_snapshot = spy
    valve = _Valve(300)
    mat = _mat(tmp_path)
    try:
        dataset = _rows().via(Flow.from_graph(valve)).island().to_mat(_sink(), Keep.right).run(mat, name="state")
        assert valve.reached.wait(20)
        mat.running_graph("state").checkpoint_now(timeout=20)
        valve.open_to(N)
        assert _xs(dataset.result(30)) == list(range(N))
    finally:
        CommittingBlockLogic.save_to_snapshot = original
        mat.shutdown()
    assert states
    for state in states:
        assert isinstance(state["store"], BlockStore)
        assert all(isinstance(n, str) for n in state["committed"])
        assert not any(isinstance(v, ray.ObjectRef) for v in state.values())
