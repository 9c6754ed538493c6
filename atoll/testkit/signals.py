"""Test stages for the signal lane: ``Scripted`` (a source of elements and control signals in a given
order) and ``Recording`` (a sink logging elements and signals in one list, in arrival order).

Both have a chunk form, so a pipeline between them runs on chunk connections unless the materializer
says ``fusion=False``; use them to check that an operator keeps signals in their place.
"""
from __future__ import annotations

from concurrent.futures import Future

from atoll._impl.ops.base import SinkStage, SourceStage, complete_promise, fail_promise, new_promise
from atoll.stage.handlers import InHandler, OutHandler
from atoll.stage.logic import GraphStageLogic
from atoll.stage.signals import Signal


def coalesce_watermarks(log):
    """``log`` with every run of same-kind coalescing signals (watermarks, idle markers) with no element
    or other signal between them reduced to its last one: what a connection delivers is the same up to
    such runs (a newer watermark replaces one still waiting, ``Signal.coalesce``), so compare logs
    through this."""
    out = []
    for x in log:
        if out and isinstance(x, Signal) and x.coalesce and type(out[-1]) is type(x):
            out[-1] = x
        else:
            out.append(x)
    return out


class Scripted(SourceStage):
    """Emits ``items`` in order: elements are pushed on demand, each ``Signal`` is emitted as soon as
    the elements before it are out (signals need no demand)."""

    def __init__(self, items):
        super().__init__("scripted")
        self.items = list(items)

    def create_logic(self, attributes):
        return _ScriptedLogic(self)


class _ScriptedLogic(GraphStageLogic, OutHandler):
    def __init__(self, stage):
        super().__init__(stage.shape)
        self.out = stage.out
        self.items = stage.items
        self.i = 0
        self.set_handler(self.out, self)

    def pre_start(self):
        self._signals()

    def _signals(self):
        items = self.items
        while self.i < len(items) and isinstance(items[self.i], Signal):
            self.emit_signal(self.out, items[self.i])
            self.i += 1
        if self.i >= len(items):
            self.complete(self.out)

    def on_pull(self):
        self.push(self.out, self.items[self.i])
        self.i += 1
        self._signals()

    def chunk_capable(self):
        return True

    def enable_chunks(self, chunk_size):
        self.set_handler(self.out, OutHandler(on_pull=self.on_pull_chunk))

    def on_pull_chunk(self):
        n = self._out_conns[0].demand
        chunk = []
        items = self.items
        while len(chunk) < n and self.i < len(items) and not isinstance(items[self.i], Signal):
            chunk.append(items[self.i])
            self.i += 1
        self.push(self.out, chunk)
        self._signals()


class Recording(SinkStage):
    """Logs every element and signal in arrival order; materializes ``Future[list]``."""

    def __init__(self, chunk: int = 3):
        super().__init__("recording")
        self.chunk = chunk

    def create_logic_and_materialized_value(self, attributes):
        promise = new_promise()
        return _RecordingLogic(self, promise), promise


class _RecordingLogic(GraphStageLogic, InHandler):
    def __init__(self, stage, promise: Future):
        super().__init__(stage.shape)
        self.in_ = stage.in_
        self.promise = promise
        self.log = []
        self.chunked = False
        self.chunk = stage.chunk
        self.set_handler(self.in_, self)

    def pre_start(self):
        self._pull()

    def _pull(self):
        if self.chunked:
            self.pull_chunk(self.in_, self.chunk)
        else:
            self.pull(self.in_)

    def on_push(self):
        got = self.grab(self.in_)
        if self.chunked:
            self.log.extend(got)
        else:
            self.log.append(got)
        self._pull()

    def on_signal(self, signal):
        self.log.append(signal)

    def on_upstream_finish(self):
        complete_promise(self.promise, self.log)
        self.complete_stage()

    def on_upstream_failure(self, exc):
        fail_promise(self.promise, exc)
        self.fail_stage(exc)

    def chunk_capable(self):
        return True

    def enable_chunks(self, chunk_size):
        self.chunked = True
