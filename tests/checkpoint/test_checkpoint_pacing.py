"""``CheckpointSettings.min_pause`` and the checkpoints stages ask for (``request_checkpoint``), as Flink paces
checkpoints: the pause from the end of one checkpoint to the start of the next holds back the periodic trigger and a
stage's ordinary request alike, never ``checkpoint_now`` nor the final checkpoint a two-phase-commit sink asks for
at the end of its input.

The coordinator reads its own clock (not an island host's, which ``ManualClock`` drives), so the exact rule is
tested on the coordinator alone with a clock the test moves and ``sync()`` to look at each decision; the local
materializer tests then show the request path from a stage and that the end of a stream never waits for a pause
(an hour, longer than any test runs)."""
from __future__ import annotations

import threading

import pytest

from atoll import CheckpointSettings, Flow, Keep, Materializer, Sink, Source
from atoll._impl.islands.checkpoint_coordinator import CheckpointCoordinator
from atoll._impl.ops.base import SinkStage, complete_promise, new_promise
from atoll.checkpoint.storage import CheckpointStorage
from atoll.stage import GraphStageLogic, InHandler
from atoll.testkit.valve import Valve

HOUR = 3600.0


class _Port:
    """An island the coordinator reaches: records the checkpoints injected into it."""

    def __init__(self):
        self.injected = []

    def inject(self, checkpoint_id: int) -> None:
        self.injected.append(checkpoint_id)

    def abort(self, checkpoint_id: int) -> None:
        pass

    def complete(self, checkpoint_id: int) -> None:
        pass

    def status(self) -> dict:
        return {}


class _Clock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def paced(tmp_path):
    """A coordinator of one island with ``min_pause=10`` on a clock at 5 s (less than the pause: the first
    checkpoint must not wait for a pause after nothing)."""
    clock, port = _Clock(5.0), _Port()
    coordinator = CheckpointCoordinator(CheckpointSettings(storage=str(tmp_path), min_pause=10.0),
                                        CheckpointStorage(str(tmp_path), "g"), "g", [(0, "g-island-0", port)],
                                        clock=clock)
    coordinator.start()
    yield coordinator, clock, port
    coordinator.stop()


def _ack(coordinator, n: int) -> None:
    coordinator.report("ack", 0, n, b"state")
    coordinator.sync()
    assert coordinator.latest().id == n


def test_a_request_waits_for_the_pause_since_the_last_checkpoint_ended(paced):
    coordinator, clock, port = paced
    coordinator.report("request", 0, 0, False)  # no checkpoint ended yet: at once
    coordinator.sync()
    assert port.injected == [1]
    _ack(coordinator, 1)  # ended at 5 s: the pause lasts until 15 s
    clock.now = 6.0
    coordinator.report("request", 0, 0, False)
    coordinator.sync()
    assert port.injected == [1]
    clock.now = 14.9
    coordinator.sync()
    assert port.injected == [1]
    clock.now = 15.0
    coordinator.sync()
    assert port.injected == [1, 2]  # the request is answered once the pause has passed
    _ack(coordinator, 2)
    clock.now = 30.0
    coordinator.sync()
    assert port.injected == [1, 2]  # answered: nothing more is taken


def test_a_final_request_and_checkpoint_now_are_taken_at_once_within_the_pause(paced):
    coordinator, clock, port = paced
    first = coordinator.trigger()
    coordinator.sync()
    _ack(coordinator, 1)
    assert first.result(10).id == 1
    clock.now = 6.0
    now = coordinator.trigger()  # checkpoint_now: never held back
    coordinator.sync()
    assert port.injected == [1, 2]
    _ack(coordinator, 2)
    assert now.result(10).id == 2
    clock.now = 7.0
    coordinator.report("request", 0, 0, False)  # held until 16 s ...
    coordinator.sync()
    assert port.injected == [1, 2]
    coordinator.report("request", 0, 0, True)  # ... but the stream ended: the final one goes at once
    coordinator.sync()
    assert port.injected == [1, 2, 3]
    _ack(coordinator, 3)
    clock.now = 20.0
    coordinator.sync()
    assert port.injected == [1, 2, 3]  # checkpoint 3 answered both requests


def test_an_aborted_checkpoint_starts_the_pause_too(paced):
    coordinator, clock, port = paced
    coordinator.report("request", 0, 0, False)
    coordinator.sync()
    coordinator.report("decline", 0, 1, "not now")  # aborted at 5 s: the request stays, held until 15 s
    coordinator.sync()
    assert port.injected == [1] and coordinator.latest() is None
    clock.now = 14.0
    coordinator.sync()
    assert port.injected == [1]
    clock.now = 15.5
    coordinator.sync()
    assert port.injected == [1, 2]
    _ack(coordinator, 2)


# ---------------------------------------------------------------- from a stage, on Materializer.local
class _RequestingSink(SinkStage):
    """Counts its elements; asks for an ordinary checkpoint at element ``ask_at`` (then sets ``asked``) and, at the
    end of its input, for a final one, completing its future in the commit of that checkpoint (a two-phase-commit
    sink's end)."""

    def __init__(self, ask_at: int):
        super().__init__("requesting")
        self.ask_at = ask_at
        self.asked = threading.Event()

    def create_logic_and_materialized_value(self, attributes):
        promise = new_promise()
        stage = self

        class Logic(GraphStageLogic, InHandler):
            def __init__(self):
                super().__init__(stage.shape)
                self.set_handler(stage.in_, self)
                self.count = 0
                self.ended = False
                self.request = None

            def checkpointing_enabled(self, request_checkpoint):
                self.request = request_checkpoint

            def save_to_snapshot(self):
                return (self.count, self.ended)

            def restore_from_snapshot(self, state):
                self.count, self.ended = state

            def pre_start(self):
                self.pull(stage.in_)

            def on_push(self):
                self.grab(stage.in_)
                self.count += 1
                if self.count == stage.ask_at:
                    self.request()
                    stage.asked.set()
                self.pull(stage.in_)

            def on_upstream_finish(self):
                self.ended = True
                self.set_keep_going(True)
                self.request(final=True)

            def snapshot_commit_prepare(self, checkpoint_id):
                return self.count if self.ended else None

            def snapshot_commit_finish(self, checkpoint_id, prepared, success):
                if success and prepared is not None:
                    complete_promise(promise, prepared)
                    self.complete_stage()

        return Logic(), promise


def test_a_stage_request_is_held_by_the_pause_and_the_final_one_is_not(tmp_path):
    valve, sink = Valve(100), _RequestingSink(ask_at=150)
    mat = Materializer.local(checkpoint=CheckpointSettings(storage=str(tmp_path), min_pause=HOUR))
    try:
        done = Source.range(0, 300).via(Flow.from_graph(valve)).to_mat(sink, Keep.right).run(mat, name="paced")
        g = mat.running_graph("paced")
        assert valve.reached.wait(30)
        assert g.checkpoint_now(timeout=30).id == 1  # the pause runs from here
        valve.open_to(200)
        assert sink.asked.wait(30) and valve.reached.wait(30)
        g._coordinator.sync()  # the request was reported before ``asked`` was set
        assert g.checkpoint_status()["in_progress"] is None and [c.id for c in g.checkpoints()] == [1]
        valve.open_to(300)  # the end of the stream: the final request is taken at once
        assert done.result(30) == 300
        assert g.wait(30)
        assert [c.id for c in g.checkpoints()] == [1, 2]
    finally:
        mat.shutdown()


def test_the_end_of_a_parquet_sink_stream_does_not_wait_for_the_pause(tmp_path):
    valve = Valve(500)
    mat = Materializer.local(checkpoint=CheckpointSettings(storage=str(tmp_path / "chk"), min_pause=HOUR))
    try:
        done = Source.range(0, 1000).map(lambda x: {"x": x}).via(Flow.from_graph(valve)) \
            .to_mat(Sink.to_parquet(str(tmp_path / "out")), Keep.right).run(mat, name="parquet-paced")
        g = mat.running_graph("parquet-paced")
        assert valve.reached.wait(30)
        g.checkpoint_now(timeout=30)
        valve.open_to(1000)
        done.result(30)
        assert g.wait(30)
    finally:
        mat.shutdown()
    import pyarrow.dataset as ds

    assert sorted(ds.dataset(str(tmp_path / "out")).to_table().column("x").to_pylist()) == list(range(1000))
