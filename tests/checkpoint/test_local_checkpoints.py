"""Checkpoints on Materializer.local: the cut, the storage, restore_from and what is refused up front.

Every round trip compares with the failure-free run of the same blueprint (Flink's ITCase style: exact
results). Operator-by-operator round trips live in test_operator_state_*.py."""
from __future__ import annotations

import operator
import os
import threading

import pytest

from atoll import (
    Broadcast,
    ClosedShape,
    CheckpointCorruptedError,
    CheckpointError,
    CheckpointInfo,
    CheckpointMismatchError,
    CheckpointNotSupportedError,
    CheckpointSettings,
    CheckpointTimeoutError,
    Flow,
    GraphDSL,
    Keep,
    Materializer,
    Merge,
    OverflowStrategy,
    Partition,
    RestartPolicy,
    RunnableGraph,
    Sink,
    Source,
)
from atoll.errors import IllegalStateError
from atoll.stage import SourceShape, FlowShape, GraphStage, GraphStageLogic, InHandler, Inlet, OutHandler, Outlet
from atoll.testkit import TestSink
from atoll.testkit.round_trip import checkpoint_round_trip

POINTS = [0, 1, 17, 498, 999]


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("at", POINTS)
def test_islands_in_a_chain_restore_exactly(tmp_path, fusion, at):
    def make():
        return (Source.range(0, 1000).map(lambda x: x + 1).island()
                .filter(lambda x: x % 3 != 0).island().map(lambda x: x * 10))

    expected, got = checkpoint_round_trip(make, at=min(at, 600), storage=tmp_path, fusion=fusion)
    assert got == expected


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("at", [0, 3, 250, 499])
def test_a_fold_over_islands_restores_its_accumulator(tmp_path, fusion, at):
    expected, got = checkpoint_round_trip(lambda: Source.range(0, 500).island().map(lambda x: x * x).island(), at=at,
                                          sink=lambda: Sink.fold(0, operator.add), storage=tmp_path, fusion=fusion)
    assert got == expected == sum(x * x for x in range(500))


def _zip_of_two_islands():
    left = Source.range(0, 400).map(lambda x: x * 2).island()
    right = Source.range(0, 400).map(lambda x: -x).island()
    return left.zip(right).map(lambda p: p[0] + p[1])


def _merge_of_two_islands():
    a = Source.range(0, 300).map(lambda x: ("a", x)).island()
    b = Source.range(0, 300).map(lambda x: ("b", x)).island()
    return a.merge(b)


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("at", [0, 5, 200, 399])
def test_a_zip_of_two_islands_aligns_both_inputs(tmp_path, fusion, at):
    expected, got = checkpoint_round_trip(_zip_of_two_islands, at=at, storage=tmp_path, fusion=fusion)
    assert got == expected


@pytest.mark.parametrize("at", [0, 7, 300, 599])
def test_a_merge_of_two_islands_loses_and_duplicates_nothing(tmp_path, at):
    # merge order depends on timing, so compare per input: each keeps its order, nothing lost or doubled
    expected, got = checkpoint_round_trip(_merge_of_two_islands, at=at, storage=tmp_path)
    assert sorted(got) == sorted(expected)
    for side in "ab":
        assert [x for s, x in got if s == side] == list(range(300))


def test_a_checkpoint_cut_while_the_sink_backpressures_records_the_channel_state(tmp_path):
    # the gate holds the sink: the last island's input buffer and the connections are full at the cut
    make = lambda: Source.range(0, 5000).island().map(lambda x: x + 1).island().buffer(64, OverflowStrategy.backpressure)
    expected, got = checkpoint_round_trip(make, at=10, storage=tmp_path, input_buffer=(16, 16))
    assert got == expected


# ---------------------------------------------------------------------------------------------- the files
def _stopped_run(tmp_path, graph, name="g", n=10, **settings):
    mat = Materializer.local(checkpoint=CheckpointSettings(storage=str(tmp_path), **settings))
    probe = graph.run(mat, name=name)
    probe.request(n)
    got = probe.expect_next_n(n)
    info = mat.running_graph(name).stop_with_checkpoint(timeout=10)
    mat.shutdown()
    return got, info


def _probe_graph():
    return Source.range(0, 100).map(lambda x: x + 1).island().to_mat(TestSink.probe(), Keep.right)


def test_a_checkpoint_is_blobs_plus_a_manifest_and_restores_from_every_kind_of_path(tmp_path):
    got, info = _stopped_run(tmp_path, _probe_graph())
    assert isinstance(info, CheckpointInfo) and info.id == 1 and info.graph == "g" and info.bytes > 0
    files = sorted(os.listdir(info.path))
    assert files == ["_MANIFEST.json", "island-000-a0.bin", "island-001-a0.bin"]
    for where in (info, info.path, str(tmp_path / "g"), Materializer.latest_checkpoint(str(tmp_path), "g")):
        rest = _probe_graph().run(Materializer.local(), restore_from=where).request(1000).to_strict(5)
        assert got + rest == list(range(1, 101))


def test_a_damaged_blob_is_refused_not_restored(tmp_path):
    _, info = _stopped_run(tmp_path, _probe_graph())
    blob = os.path.join(info.path, "island-001-a0.bin")
    data = bytearray(open(blob, "rb").read())
    data[-1] ^= 0xFF
    open(blob, "wb").write(bytes(data))
    with pytest.raises(CheckpointCorruptedError, match="island-001-a0.bin is damaged|island-001-a0.bin' is damaged"):
        _probe_graph().run(Materializer.local(), restore_from=info)


def test_an_incomplete_checkpoint_is_not_restored(tmp_path):
    _, info = _stopped_run(tmp_path, _probe_graph())
    os.remove(os.path.join(info.path, "_MANIFEST.json"))
    with pytest.raises(CheckpointError, match="not complete"):
        _probe_graph().run(Materializer.local(), restore_from=info.path)
    assert Materializer.latest_checkpoint(str(tmp_path), "g") is None


def test_a_different_blueprint_is_refused_naming_the_stage(tmp_path):
    _, info = _stopped_run(tmp_path, _probe_graph())
    other = Source.range(0, 100).filter(lambda x: x > 0).island().to_mat(TestSink.probe(), Keep.right)
    with pytest.raises(CheckpointMismatchError, match=r"differs at stage #\d+: the graph has \('Filter', 'filter'\), the checkpoint \('Map', 'map'\)"):
        other.run(Materializer.local(), restore_from=info)
    fewer = Source.range(0, 100).map(lambda x: x + 1).to_mat(TestSink.probe(), Keep.right)
    with pytest.raises(CheckpointMismatchError, match="islands"):
        fewer.run(Materializer.local(), restore_from=info)


def test_checkpoint_ids_are_never_reused_and_old_ones_are_pruned(tmp_path):
    mat = Materializer.local(checkpoint=CheckpointSettings(storage=str(tmp_path), retained=2))
    probe = _probe_graph().run(mat, name="ids")
    probe.request(5)
    probe.expect_next_n(5)
    g = mat.running_graph("ids")
    ids = [g.checkpoint_now(timeout=10).id for _ in range(4)]
    assert ids == [1, 2, 3, 4]
    assert [c.id for c in g.checkpoints()] == [3, 4]
    assert sorted(os.listdir(tmp_path / "ids")) == ["chk-00000003", "chk-00000004"]
    info = g.stop_with_checkpoint(timeout=10)
    assert info.id == 5
    assert g.completion.done()  # it returns once the graph ended: a restore never runs beside it
    mat.shutdown()
    # a run restored into the same place goes on with higher ids
    mat2 = Materializer.local(checkpoint=CheckpointSettings(storage=str(tmp_path), retained=2))
    probe2 = _probe_graph().run(mat2, name="ids", restore_from=info)
    probe2.request(3)
    assert probe2.expect_next_n(3) == [6, 7, 8]
    assert mat2.running_graph("ids").checkpoint_now(timeout=10).id == 6
    mat2.shutdown()


def test_interval_checkpoints_run_by_themselves(tmp_path):
    mat = Materializer.local(checkpoint=CheckpointSettings(storage=str(tmp_path), interval=0.02, retained=3))
    probe = _probe_graph().run(mat, name="tick")
    probe.request(3)
    probe.expect_next_n(3)
    g = mat.running_graph("tick")
    done = threading.Event()
    # wait for the third checkpoint without sleeping: join the one in progress until ids reach 3
    for _ in range(200):
        if g.checkpoint_now(timeout=10).id >= 3:
            done.set()
            break
    assert done.is_set() and len(g.checkpoints()) == 3
    mat.shutdown()


def test_after_shutdown_nothing_writes_to_the_checkpoint_storage(tmp_path):
    """``Materializer.shutdown()`` returns once the coordinators of its graphs stopped: the storage can be removed
    then (the demo's recovery job removed it while a checkpoint of its just-finished graph was being written)."""
    mat = Materializer.local(checkpoint=CheckpointSettings(storage=str(tmp_path), interval=0.01))
    probe = _probe_graph().run(mat, name="ticking")
    probe.request(3)
    probe.expect_next_n(3)
    g = mat.running_graph("ticking")
    g.checkpoint_now(timeout=10)
    coordinator = g._coordinator
    mat.shutdown()
    assert not coordinator._thread.is_alive()
    with pytest.raises(CheckpointError):  # no checkpoint is taken any more
        g.checkpoint_now(timeout=10)


def test_checkpoints_are_deleted_when_the_graph_succeeds_unless_retained(tmp_path):
    for retain in (False, True):
        mat = Materializer.local(checkpoint=CheckpointSettings(storage=str(tmp_path), retain_on_success=retain))
        probe = Source.range(0, 50).island().to_mat(TestSink.probe(), Keep.right).run(mat)
        (g,) = mat.running_graphs()
        assert g.name.startswith("graph-")
        probe.request(5)
        probe.expect_next_n(5)
        info = g.checkpoint_now(timeout=10)
        assert os.path.exists(info.path)
        probe.request(100)
        assert probe.expect_next_n(45) == list(range(5, 50))
        probe.expect_complete()
        assert g.wait(10)
        assert os.path.exists(info.path) == retain, retain
        mat.shutdown()


# ---------------------------------------------------------------------------------------------- refusals
class _Undeclared(GraphStage):
    """A custom stage that keeps a counter but says nothing about checkpoints."""

    def __init__(self):
        self.in_, self.out = Inlet("undeclared.in"), Outlet("undeclared.out")
        self.shape = FlowShape(self.in_, self.out)

    def create_logic(self, attributes):
        stage = self

        class Logic(GraphStageLogic, InHandler, OutHandler):
            def __init__(self):
                super().__init__(stage.shape)
                self.count = 0
                self.set_handlers(stage.in_, stage.out, self)

            def on_push(self):
                self.count += 1
                self.push(stage.out, self.grab(stage.in_))

            def on_pull(self):
                self.pull(stage.in_)

        return Logic()


def test_an_undeclared_custom_stage_is_refused_before_anything_runs(tmp_path):
    mat = Materializer.local(checkpoint=CheckpointSettings(storage=str(tmp_path)))
    before = threading.active_count()
    with pytest.raises(CheckpointNotSupportedError, match=r"_Undeclared.*declares neither stateless"):
        Source.range(0, 10).via(Flow.from_graph(_Undeclared())).run_with(Sink.seq(), mat)
    assert threading.active_count() == before and mat.running_graphs() == []
    mat.shutdown()


def test_a_source_that_cannot_replay_is_refused(tmp_path):
    mat = Materializer.local(checkpoint=CheckpointSettings(storage=str(tmp_path)))
    with pytest.raises(CheckpointNotSupportedError, match="from_iterator"):
        Source.from_iterator(lambda: iter(range(10))).run_with(Sink.seq(), mat)
    mat.shutdown()


def _collatz_step(e):
    start, n, steps = e
    return (start, n // 2 if n % 2 == 0 else 3 * n + 1, steps + 1)


def _collatz_loop(across: bool = False):
    """A feedback loop: an element goes round until it reached 1 (GraphCyclesSpec's shape); inside one island,
    or (``across``) with the loop's step in an island of its own, so that the loop runs through two islands."""
    starts = list(range(1, 28))

    def build(b):
        body = Flow().map(_collatz_step).buffer(len(starts), OverflowStrategy.backpressure)
        step = b.add(body.island() if across else body)
        merge = b.add(Merge(2))
        part = b.add(Partition(2, lambda e: 0 if e[1] == 1 else 1, eager_cancel=True))
        out = b.add(Flow().take(len(starts)))
        Source.from_iterable([(s, s, 0) for s in starts]) >> merge.in_(0)
        merge.out >> part.in_
        part.out(0) >> out.in_
        part.out(1) >> step.in_
        step.out >> merge.in_(1)
        return SourceShape(out.out)

    return Source.from_graph(GraphDSL.create(build))


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("at", [0, 1, 13, 26])
def test_a_cycle_inside_one_island_restores_the_elements_going_round(tmp_path, fusion, at):
    expected, got = checkpoint_round_trip(_collatz_loop, at=at, storage=tmp_path, fusion=fusion)
    assert sorted(got) == sorted(expected) and len(got) == 27


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("at", [0, 1, 13, 26])
def test_a_cycle_through_two_islands_logs_its_back_edge_and_restores_exactly(tmp_path, fusion, at):
    # the back edge's barrier comes round only after the loop's first island cut: that channel is logged
    # from the cut until its barrier (ABS) and replayed after the restore, never waited for
    expected, got = checkpoint_round_trip(lambda: _collatz_loop(across=True), at=at, storage=tmp_path, fusion=fusion)
    assert sorted(got) == sorted(expected) and len(got) == 27
    assert sorted(got)[-1] == (27, 1, 111)


# ---------------------------------------------------------------------------------------------- failures
class _Controlled(GraphStage):
    """Passes elements on; ``ready`` and ``state`` are set by the test."""

    def __init__(self):
        self.in_, self.out = Inlet("controlled.in"), Outlet("controlled.out")
        self.shape = FlowShape(self.in_, self.out)
        self.ready = True
        self.state = 0

    def create_logic(self, attributes):
        stage = self

        class Logic(GraphStageLogic, InHandler, OutHandler):
            def __init__(self):
                super().__init__(stage.shape)
                self.set_handlers(stage.in_, stage.out, self)

            def save_to_snapshot(self):
                return stage.state

            def restore_from_snapshot(self, state):
                pass

            def ready_for_snapshot(self):
                return stage.ready

            def on_push(self):
                self.push(stage.out, self.grab(stage.in_))

            def on_pull(self):
                self.pull(stage.in_)

        return Logic()


def test_a_stage_that_never_gets_ready_times_the_checkpoint_out_and_says_which(tmp_path):
    stage = _Controlled()
    stage.ready = False
    mat = Materializer.local(checkpoint=CheckpointSettings(storage=str(tmp_path), timeout=0.3))
    probe = Source.range(0, 100).island().via(Flow.from_graph(stage)).to_mat(TestSink.probe(), Keep.right).run(mat, name="slow")
    probe.request(2)
    probe.expect_next_n(2)
    g = mat.running_graph("slow")
    pending = g.checkpoint_now(wait=False)
    with pytest.raises(CheckpointTimeoutError, match="_Controlled is not ready"):
        pending.result(10)
    # the stream goes on, and a later checkpoint succeeds once the stage is ready
    stage.ready = True
    probe.request(2)
    assert probe.expect_next_n(2) == [2, 3]
    assert g.checkpoint_now(timeout=10).id == 2
    mat.shutdown()


def test_state_that_cannot_be_pickled_declines_the_checkpoint_not_the_stream(tmp_path):
    stage = _Controlled()
    stage.state = threading.Lock()
    mat = Materializer.local(checkpoint=CheckpointSettings(storage=str(tmp_path)))
    probe = Source.range(0, 100).via(Flow.from_graph(stage)).to_mat(TestSink.probe(), Keep.right).run(mat, name="lock")
    probe.request(1)
    probe.expect_next(0)
    with pytest.raises(CheckpointError, match="cannot be pickled"):
        mat.running_graph("lock").checkpoint_now(timeout=10)
    probe.request(1)
    probe.expect_next(1)
    mat.shutdown()


def test_a_graph_without_checkpoints_says_how_to_turn_them_on():
    mat = Materializer.local()
    probe = _probe_graph().run(mat, name="plain")
    with pytest.raises(IllegalStateError, match="checkpoint=CheckpointSettings"):
        mat.running_graph("plain").checkpoint_now()
    probe.cancel()
    mat.shutdown()


def test_checkpoint_status_names_the_island_that_holds_a_checkpoint_up(tmp_path):
    stage = _Controlled()
    stage.ready = False
    mat = Materializer.local(checkpoint=CheckpointSettings(storage=str(tmp_path), timeout=30))
    probe = Source.range(0, 100).island().via(Flow.from_graph(stage)).to_mat(TestSink.probe(), Keep.right).run(mat, name="st")
    probe.request(1)
    probe.expect_next(0)
    g = mat.running_graph("st")
    pending = g.checkpoint_now(wait=False)
    status = None
    for _ in range(1000):  # the island thread sets the reason at its next turn
        status = g.checkpoint_status()
        if any(s.get("not_ready") for s in status["islands"].values()):
            break
        threading.Event().wait(0.005)
    assert status["in_progress"] == 1
    waiting = {k: v for k, v in status["islands"].items() if v.get("not_ready")}
    assert len(waiting) == 1 and "_Controlled is not ready" in list(waiting.values())[0]["not_ready"]
    stage.ready = True
    assert pending.result(10).id == 1
    mat.shutdown()


def test_bad_settings_name_the_argument():
    with pytest.raises(ValueError, match="interval"):
        CheckpointSettings(interval=0)
    with pytest.raises(ValueError, match="retained"):
        CheckpointSettings(retained=0)
    with pytest.raises(ValueError, match="guarantee"):
        CheckpointSettings(guarantee="twice")
    with pytest.raises(ValueError, match="max_restarts"):
        RestartPolicy(max_restarts=-1)
    with pytest.raises(TypeError, match="checkpoint must be a CheckpointSettings"):
        Materializer.local(checkpoint={"interval": 1})
    with pytest.raises(ValueError, match="name"):
        Source.single(1).to(Sink.ignore()).run(Materializer.local(checkpoint=CheckpointSettings()), name="a/b")


def test_ray_checkpoint_settings_are_checked_before_ray_starts():
    with pytest.raises(TypeError, match="checkpoint must be a CheckpointSettings"):
        Materializer.ray(checkpoint=5.0)
