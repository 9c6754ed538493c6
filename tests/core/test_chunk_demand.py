"""A chunk answers the pull it follows: at most the demand the pull named (``pull_chunk(in_, n)``).

A stage that pushes more breaks backpressure downstream - an island's output boundary behind it sends past the
channel's demand, and the other island fails with "input buffer overrun". Fuzzing mode checks every chunk against
its pull's demand and fails the stage that pushed too much. ``with_timestamps`` cuts a chunk into segments where an
element lies behind the watermark and pushed each remaining segment whole, whatever the next pull accepted (a
restored stage met a smaller demand than the chunk its saved segments came from): now a segment goes out in the
pieces the pulls accept, its watermark after its last element.
"""
from __future__ import annotations

import pytest

from atoll import FlowShape, GraphStage, GraphStageLogic, Inlet, InHandler, Keep, Materializer, OutHandler, Outlet, Sink, Source
from atoll.errors import PortStateError
from atoll.stage.signals import Watermark


class _ChunkStage(GraphStage):
    def __init__(self, name):
        self.in_, self.out = Inlet(f"{name}.in"), Outlet(f"{name}.out")
        self.shape = FlowShape(self.in_, self.out)


class Doubler(_ChunkStage):
    """A faulty chunk stage: pushes every chunk twice over (``chunk + chunk``), past the pull's demand."""

    def __init__(self):
        super().__init__("doubler")

    def create_logic(self, attributes):
        stage = self

        class Logic(GraphStageLogic, InHandler, OutHandler):
            def __init__(self):
                super().__init__(stage.shape)
                self.set_handlers(stage.in_, stage.out, self)

            def chunk_capable(self):
                return True

            def enable_chunks(self, chunk_size):
                self.set_handler(stage.in_, InHandler(on_push=self.on_push_chunk))
                self.set_handler(stage.out, OutHandler(on_pull=self.on_pull_chunk))

            def on_pull_chunk(self):
                self.pull_chunk(stage.in_, self.demand_of(stage.out))

            def on_push_chunk(self):
                chunk = self.grab(stage.in_)
                self.push(stage.out, chunk + chunk)

            def on_push(self):
                self.push(stage.out, self.grab(stage.in_))

            def on_pull(self):
                self.pull(stage.in_)

        return Logic()


def test_fuzzing_mode_fails_a_stage_that_pushes_more_than_the_pull_asked_for():
    m = Materializer.local(fuzzing=1, chunk_size=8)
    try:
        fut = Source.range(0, 100).via(Doubler()).run_with(Sink.seq(), m)
        with pytest.raises(PortStateError, match=r"Doubler: pushed a chunk of 16 elements on doubler.out .* at most 8"):
            fut.result(10)
    finally:
        m.shutdown()


class Sipper(_ChunkStage):
    """A chunk stage (timestamps kept) that asks upstream for ``first`` elements, then one per pull, and fails
    if a chunk holds more than it asked for; records ``("w", ts)`` for each watermark and ``("e", x, ts)`` for each
    element it passes on."""

    def __init__(self, first, log):
        super().__init__("sipper")
        self.first = first
        self.log = log

    def create_logic(self, attributes):
        stage = self

        class Logic(GraphStageLogic, InHandler, OutHandler):
            def __init__(self):
                super().__init__(stage.shape)
                self.asked = stage.first
                self.set_handlers(stage.in_, stage.out, self)

            def chunk_capable(self):
                return True

            def chunk_timestamps(self):
                return True

            def enable_chunks(self, chunk_size):
                self.set_handler(stage.in_, InHandler(on_push=self.on_push_chunk))
                self.set_handler(stage.out, OutHandler(on_pull=self.on_pull_chunk))

            def on_pull_chunk(self):
                self.pull_chunk(stage.in_, min(self.asked, self.demand_of(stage.out)))

            def on_push_chunk(self):
                chunk, stamps = self.grab(stage.in_), self.current_timestamp
                if len(chunk) > self.asked:
                    self.fail_stage(AssertionError(f"sipper asked for {self.asked}, got {len(chunk)}"))
                    return
                self.asked = 1
                stage.log.extend(("e", x, t) for x, t in zip(chunk, stamps))
                self.push(stage.out, chunk, stamps)

            def on_signal(self, signal):
                if type(signal) is Watermark:
                    stage.log.append(("w", signal.timestamp))
                super().on_signal(signal)

            def on_push(self):
                raise AssertionError("the sipper runs in chunks here")

            def on_pull(self):
                raise AssertionError("the sipper runs in chunks here")

        return Logic()


def test_with_timestamps_pushes_a_segment_in_the_pieces_the_pulls_accept():
    # one chunk of 8: the element 15 lies behind the watermark 20 the element form would have emitted before it,
    # so the chunk is cut into [10, 20] (watermark 20) and [15, 30, 31, 40, 41, 50] (watermark 50); the second
    # segment meets pulls of one element each
    stamps = [10, 20, 15, 30, 31, 40, 41, 50]
    log: list = []
    m = Materializer.local(chunk_size=8)
    try:
        got = (Source.from_iterable(stamps).with_timestamps(lambda t: t).via(Sipper(8, log))
               .to_mat(Sink.seq(), Keep.right).run(m).result(10))
    finally:
        m.shutdown()
    assert got == stamps
    assert log == [("e", 10, 10), ("e", 20, 20), ("w", 20)] + [("e", t, t) for t in stamps[2:]] + [("w", 50)]
