"""TestStream: a scripted event-time source (Beam's ``TestStream``).

    stream = (TestStream()
              .add_elements("a", "b", ts=1)
              .add_elements_with_timestamps(("c", 12), ("d", 3))
              .advance_watermark_to(10)
              .mark_idle()
              .advance_processing_time(2.0)
              .advance_watermark_to_infinity())
    stream.to_source().tumbling_window(10).run_with(TestSink.probe(event_time=True), mat)

The source is an event-time stage (the graph carries timestamps; no ``with_timestamps`` is needed).
It plays the script in order: elements are pushed on demand, each with its timestamp; watermarks and
idle markers are emitted as soon as the elements before them are out (signals need no demand);
``advance_processing_time(s)`` waits until ``s`` seconds of the host's clock passed after the source
reached that step: under ``Materializer.local(clock=ManualClock())`` the test moves time with
``clock.advance(...)``; under a real clock the source really waits ``s`` seconds. The source completes
after the last step (completion is the watermark ``+inf`` downstream: every open window fires);
``advance_watermark_to_infinity()`` ends the script.
"""
from __future__ import annotations

import math
from typing import Any, List, Tuple

from .._impl.ops.base import SourceStage
from ..stage.handlers import OutHandler
from ..stage.signals import IDLE, Watermark
from ..stage.timers import TimerGraphStageLogic

_ELEM, _SIGNAL, _WAIT = 0, 1, 2


def _number(where: str, name: str, x: Any) -> None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or math.isnan(x):
        raise TypeError(f"TestStream.{where}: {name} must be an int or float, got {x!r}")


class TestStream:
    """Builder of a scripted event-time source; each step returns the builder."""

    __test__ = False  # not a pytest test class

    def __init__(self):
        self._steps: List[Tuple[int, Any, Any]] = []
        self._watermark = -math.inf
        self._ended = False

    def __repr__(self) -> str:
        return f"TestStream({len(self._steps)} steps{', ended' if self._ended else ''})"

    def _add(self, where: str, step) -> "TestStream":
        if self._ended:
            raise ValueError(f"TestStream.{where}: the script already ended with advance_watermark_to_infinity()")
        self._steps.append(step)
        return self

    def add_elements(self, *elems: Any, ts: Any) -> "TestStream":
        """Add ``elems``, all with the timestamp ``ts`` (elements behind the watermark are late data:
        the source sends them as they are, the operators downstream decide)."""
        _number("add_elements", "ts", ts)
        if not elems:
            raise ValueError("TestStream.add_elements: give at least one element")
        for e in elems:
            if e is None:
                raise ValueError("TestStream.add_elements: elements must not be None")
            self._add("add_elements", (_ELEM, e, ts))
        return self

    def add_elements_with_timestamps(self, *pairs: Tuple[Any, Any]) -> "TestStream":
        """Add ``(element, timestamp)`` pairs in order."""
        if not pairs:
            raise ValueError("TestStream.add_elements_with_timestamps: give at least one (element, ts) pair")
        for pair in pairs:
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise TypeError(f"TestStream.add_elements_with_timestamps: expected (element, ts) pairs, got {pair!r}")
            e, ts = pair
            _number("add_elements_with_timestamps", "ts", ts)
            if e is None:
                raise ValueError("TestStream.add_elements_with_timestamps: elements must not be None")
            self._add("add_elements_with_timestamps", (_ELEM, e, ts))
        return self

    def advance_watermark_to(self, timestamp: Any) -> "TestStream":
        """Emit ``Watermark(timestamp)``; watermarks never go back (a smaller one is a ``ValueError``)."""
        _number("advance_watermark_to", "timestamp", timestamp)
        if timestamp < self._watermark:
            raise ValueError(
                f"TestStream.advance_watermark_to: the watermark must not go back ({timestamp!r} < {self._watermark!r})")
        if timestamp == math.inf:
            return self.advance_watermark_to_infinity()
        self._watermark = timestamp
        return self._add("advance_watermark_to", (_SIGNAL, Watermark(timestamp), None))

    def mark_idle(self) -> "TestStream":
        """Emit the ``IDLE`` marker (the next element or watermark makes the stream active again)."""
        return self._add("mark_idle", (_SIGNAL, IDLE, None))

    def advance_processing_time(self, seconds: float) -> "TestStream":
        """Wait until ``seconds`` of the host clock passed (virtual under a ``ManualClock``)."""
        _number("advance_processing_time", "seconds", seconds)
        if not 0 <= seconds < math.inf:
            raise ValueError(f"TestStream.advance_processing_time: seconds must be finite and >= 0, got {seconds!r}")
        return self._add("advance_processing_time", (_WAIT, seconds, None))

    def advance_watermark_to_infinity(self) -> "TestStream":
        """End the script: the source completes there (the watermark ``+inf``)."""
        if self._ended:
            raise ValueError("TestStream.advance_watermark_to_infinity: the script already ended")
        self._ended = True
        self._watermark = math.inf
        return self

    @property
    def steps(self) -> list:
        """The script: ``("element", elem, ts)``, ``("signal", sig)``, ``("wait", seconds)`` in order."""
        names = {_ELEM: "element", _SIGNAL: "signal", _WAIT: "wait"}
        return [(names[k], a, b) if k == _ELEM else (names[k], a) for k, a, b in self._steps]

    def to_source(self):
        """A Source playing the script (materialized value ``NotUsed``); every materialization plays it
        from the start."""
        from ..dsl.source import Source

        return Source.from_graph(_TestStreamSource(list(self._steps)))


class _TestStreamSource(SourceStage):
    event_time = True

    def __init__(self, steps: list):
        super().__init__("TestStream")
        self.steps = steps

    def create_logic(self, attributes):
        return _TestStreamLogic(self)


class _TestStreamLogic(TimerGraphStageLogic, OutHandler):
    def __init__(self, stage: _TestStreamSource):
        super().__init__(stage.shape)
        self.out = stage.out
        self.steps = stage.steps
        self.i = 0
        self.waiting = False  # a processing-time step is in progress
        self.set_handler(self.out, self)

    def pre_start(self) -> None:
        self._run()

    def _run(self) -> None:
        """Play every step that needs no demand: signals, waits; push the next element if pulled."""
        steps = self.steps
        out = self.out
        while not self.waiting and self.i < len(steps):
            kind, a, b = steps[self.i]
            if kind == _SIGNAL:
                self.i += 1
                self.emit_signal(out, a)
            elif kind == _WAIT:
                self.i += 1
                self.waiting = True
                self.schedule_once("advance_processing_time", a)
            else:
                if not self.is_available(out):
                    return
                self.i += 1
                self.push(out, a, b)
        if not self.waiting and self.i >= len(steps):
            self.complete(out)

    def on_pull(self) -> None:
        self._run()

    def on_timer(self, key) -> None:
        self.waiting = False
        self._run()
