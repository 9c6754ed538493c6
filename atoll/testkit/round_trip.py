"""checkpoint_round_trip: does a blueprint restore exactly from a checkpoint taken mid-stream?

It runs the blueprint three ways on ``Materializer.local``: once without interruption into ``sink()``
(``Sink.seq`` by default); once more with checkpoints on, held by a gate after ``at`` outputs, checkpointed
and stopped there (``stop_with_checkpoint``); and once restored from that checkpoint into a fresh
materializer. It returns ``(expected, got)``: the uninterrupted result and the restored run's result -
equal when every stage saved and restored its state exactly (the sink's restored state included, so a
``Sink.seq`` result holds the elements from before the checkpoint too).
"""
from __future__ import annotations

import threading
import uuid
from typing import Any, Callable, Optional, Tuple

from ..checkpoint import CheckpointSettings
from ..dsl import Flow, Keep, Sink
from ..materializer import Materializer
from ..stage import Attributes, FlowShape, GraphStage, GraphStageLogic, InHandler, Inlet, OutHandler, Outlet


class _Gate(GraphStage):
    """Passes the first ``at`` elements, then stops pulling and sets ``reached`` (``at=None``: always open)."""

    stateless = True

    def __init__(self, at: Optional[int]):
        self.in_, self.out = Inlet("gate.in"), Outlet("gate.out")
        self.shape = FlowShape(self.in_, self.out)
        self.at = at
        self.reached = threading.Event()
        self.finished_early = False
        self.initial_attributes = Attributes.name("checkpoint-gate")

    def create_logic(self, attributes):
        stage = self

        class Logic(GraphStageLogic, InHandler, OutHandler):
            stateless = True

            def __init__(self):
                super().__init__(stage.shape)
                self.passed = 0
                self.set_handlers(stage.in_, stage.out, self)

            def pre_start(self):
                if stage.at == 0:
                    stage.reached.set()

            def on_push(self):
                self.passed += 1
                self.push(stage.out, self.grab(stage.in_))

            def on_pull(self):
                if stage.at is not None and self.passed >= stage.at:
                    stage.reached.set()
                else:
                    self.pull(stage.in_)

            def on_upstream_finish(self):
                if stage.at is not None and not stage.reached.is_set():
                    stage.finished_early = True
                    stage.reached.set()
                self.complete_stage()

        return Logic()


def checkpoint_round_trip(make: Callable[[], Any], at: int, *, storage: Any, sink: Optional[Callable[[], Any]] = None,
                          fusion: bool = True, timeout: float = 10.0, **settings) -> Tuple[Any, Any]:
    """``(uninterrupted result, restored result)`` of ``make()`` (a Source blueprint) into ``sink()``, the
    checkpoint taken after ``at`` elements reached the sink (``at`` must be below the number of elements the
    source produces). ``settings`` go to every ``Materializer.local`` (``chunk_size``, ``input_buffer``...)."""
    if isinstance(at, bool) or not isinstance(at, int) or at < 0:
        raise ValueError(f"checkpoint_round_trip: at must be an int >= 0, got {at!r}")
    sink = sink or Sink.seq
    plain = Materializer.local(fusion=fusion, **settings)
    try:
        expected = make().run_with(sink(), plain).result(timeout)
    finally:
        plain.shutdown()
    gate = _Gate(at)
    name = f"round-trip-{uuid.uuid4().hex[:8]}"
    first = Materializer.local(fusion=fusion, checkpoint=CheckpointSettings(storage=storage), **settings)
    try:
        make().via(Flow.from_graph(gate)).to_mat(sink(), Keep.right).run(first, name=name)
        if not gate.reached.wait(timeout):
            raise TimeoutError(f"checkpoint_round_trip: {at} elements did not reach the sink within {timeout}s")
        if gate.finished_early:
            raise ValueError(f"checkpoint_round_trip: the stream ended before {at} elements; choose a smaller at")
        info = first.running_graph(name).stop_with_checkpoint(timeout)
    finally:
        first.shutdown()
    second = Materializer.local(fusion=fusion, **settings)
    try:
        got = make().via(Flow.from_graph(_Gate(None))).to_mat(sink(), Keep.right).run(second, restore_from=info)
        return expected, got.result(timeout)
    finally:
        second.shutdown()
