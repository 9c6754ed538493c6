"""delay / delay_with: shift each element in time by a fixed or per-element delay, holding elements
in a bounded buffer (Pekko's ``Delay`` with ``DelayOverflowStrategy``), on the host's clock."""
from __future__ import annotations

import logging
from collections import deque

from ...errors import BufferOverflowError, IllegalStateError
from ...stage.attributes import InputBuffer
from ...stage.handlers import InHandler, OutHandler
from ...stage.supervision import Supervision, decide
from ...stage.timers import TimerGraphStageLogic
from .base import FlowStage, decider_of, require_callable
from .timeouts import require_duration

log = logging.getLogger("atoll.delay")

_TIMER = "delay"
#: an element due within this many milliseconds is emitted at once (Pekko's ``DelayPrecisionMS``)
_PRECISION_MS = 10


class DelayOverflowStrategy:
    """What ``delay`` does when an element arrives while its buffer is full (Pekko's
    ``DelayOverflowStrategy``): ``emit_early`` emits the oldest element before its time,
    ``drop_head``/``drop_tail``/``drop_buffer`` drop the oldest/youngest/all buffered elements,
    ``drop_new`` drops the arriving element, ``backpressure`` stops pulling while full and ``fail``
    fails the stream with ``BufferOverflowError``."""

    __slots__ = ("kind",)

    KINDS = ("emit_early", "drop_head", "drop_tail", "drop_buffer", "drop_new", "backpressure", "fail")

    def __init__(self, kind: str):
        if kind not in self.KINDS:
            raise ValueError(f"DelayOverflowStrategy: unknown kind {kind!r}; expected one of {self.KINDS}")
        self.kind = kind

    def __repr__(self):
        return f"DelayOverflowStrategy.{self.kind}"

    def __eq__(self, other):
        return isinstance(other, DelayOverflowStrategy) and other.kind == self.kind

    def __hash__(self):
        return hash(self.kind)

    def __reduce__(self):
        return (DelayOverflowStrategy, (self.kind,))


for _k in DelayOverflowStrategy.KINDS:
    setattr(DelayOverflowStrategy, _k, DelayOverflowStrategy(_k))
del _k


class _FixedDelay:
    __slots__ = ("seconds",)

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __call__(self, _elem) -> float:
        return self.seconds


class Delay(FlowStage):
    """Emits each element ``delay(elem)`` seconds after it arrived (``delay`` from
    ``delay_factory()``, made per materialization; ``Flow.delay(d)`` uses a fixed one), keeping at
    most ``InputBuffer.max`` elements (16 by default; ``Attributes.input_buffer``); ``strategy``
    decides when it is full. Elements due within 10 ms are emitted at once (Pekko's precision);
    the timer for a later one is set to its exact due time (Pekko: whole milliseconds).

    **Emits when** there is a pending element in the buffer and its time elapsed (``emit_early``: also
    when the buffer is full). **Backpressures when** the buffer is full and the strategy is
    ``backpressure``; never for the dropping strategies; ``fail`` fails the stream when it gets full.
    **Completes when** upstream completes and the buffered elements were drained. **Cancels when**
    downstream cancels.

    Supervision (an exception from the per-element delay function): Resume drops the element;
    Restart drops it and makes a new delay function with ``delay_factory()``."""

    def __init__(self, delay_factory, strategy: DelayOverflowStrategy, op: str = "delay"):
        require_callable(op, "strategy_factory" if op == "delay_with" else "delay", delay_factory)
        if not isinstance(strategy, DelayOverflowStrategy):
            raise TypeError(f"{op}: argument 'strategy' must be a DelayOverflowStrategy, got {strategy!r}")
        super().__init__(op)
        self.delay_factory = delay_factory
        self.strategy = strategy

    @staticmethod
    def fixed(of: float, strategy: DelayOverflowStrategy) -> "Delay":
        fixed = _FixedDelay(require_duration("delay", "of", of, allow_zero=True))
        return Delay(lambda: fixed, strategy)

    def create_logic(self, attributes):
        ib = attributes.get(InputBuffer)
        return _DelayLogic(self, ib.max if ib is not None else 16, decider_of(attributes),
                           attributes.name_or_default("delay"))


class _DelayLogic(TimerGraphStageLogic, InHandler, OutHandler):
    pulls_ahead = True  # holds the elements being delayed

    # checkpoints: delays are processing time; the elements being delayed go out as their timers fire, so
    # the cut waits for them (at most the longest delay) instead of saving them
    stateless = True

    def ready_for_snapshot(self) -> bool:
        return not self.buf

    """The buffer holds ``(due, elem, ts)`` in arrival order (``ts``: the element's event timestamp in an
    event-time graph, else None); one timer for the head."""

    def __init__(self, stage: Delay, size: int, decider, name: str):
        super().__init__(stage.shape)
        self.in_ = stage.in_
        self.out = stage.out
        self.size = size
        self.kind = stage.strategy.kind
        self.factory = stage.delay_factory
        self.next_delay = stage.delay_factory()
        self.decider = decider
        self.name = name
        self.buf = deque()
        self.set_handler(stage.in_, self)
        self.set_handler(stage.out, self)

    def pre_start(self) -> None:
        self.now = self.interpreter.host.now

    def _should_pull(self) -> bool:
        # emit_early counts as backpressure: it pulls while full only when it can emit early
        kind = self.kind
        return (len(self.buf) < self.size or (kind != "backpressure" and kind != "emit_early")
                or (kind == "emit_early" and self.is_available(self.out)))

    def _grab_and_pull(self) -> None:
        elem = self.grab(self.in_)
        try:
            d = self.next_delay(elem)
        except Exception as exc:
            directive = decide(self.decider, exc)
            if directive == Supervision.STOP:
                self.fail_stage(exc)
                return
            if directive == Supervision.RESTART:
                self.next_delay = self.factory()
            if self._should_pull():
                self.pull(self.in_)
            return
        self.buf.append((self.now() + d, elem, self._ts))  # _ts: event time (None elsewhere)
        if self._should_pull():
            self.pull(self.in_)

    def _wait_ms(self) -> int:
        return int((self.buf[0][0] - self.now()) * 1000)  # truncated toward zero, as Pekko's toMillis

    def _rehold(self) -> None:
        """Event time: hold the watermark at the smallest timestamp still buffered, so no watermark
        overtakes a delayed element (spec: stages that hold elements); nothing to do elsewhere."""
        if self._ts is not None:
            self.hold_watermark_for([e[2] for e in self.buf])

    def on_push(self) -> None:
        self._on_push()
        self._rehold()

    def _on_push(self) -> None:
        if len(self.buf) >= self.size:
            self._on_push_when_full()
            return
        self._grab_and_pull()
        if self.buf and not self.is_timer_active(_TIMER):
            wait = self._wait_ms()
            if wait <= _PRECISION_MS:
                # due: out now, or at the next pull (Pekko arms a timer of 0 that finds out not ready)
                if self.is_available(self.out):
                    self.push(self.out, *self.buf.popleft()[1:])
                    self._complete_if_ready()
            else:
                self.schedule_once(_TIMER, self.buf[0][0] - self.now())

    def _on_push_when_full(self) -> None:
        kind = self.kind
        if kind == "emit_early":
            if not self.is_available(self.out):
                raise IllegalStateError("Was configured to emitEarly and got element when out is not ready and "
                                        "buffer is full, should not be possible.")
            if self.is_timer_active(_TIMER):
                self.cancel_timer(_TIMER)
            self.push(self.out, *self.buf.popleft()[1:])
            self._grab_and_pull()
            self._complete_if_ready()
        elif kind == "drop_head":
            log.debug("delay %s is full: dropping the oldest element", self.name)
            self.buf.popleft()
            self._grab_and_pull()
        elif kind == "drop_tail":
            log.debug("delay %s is full: dropping the youngest element", self.name)
            self.buf.pop()
            self._grab_and_pull()
        elif kind == "drop_buffer":
            log.debug("delay %s is full: dropping the buffer", self.name)
            self.buf.clear()
            self._grab_and_pull()
        elif kind == "drop_new":
            log.debug("delay %s is full: dropping the new element", self.name)
            self.grab(self.in_)
            self.pull(self.in_)
        elif kind == "fail":
            log.error("delay %s is full (capacity %d): failing", self.name, self.size)
            self.fail_stage(BufferOverflowError(f"Buffer overflow for delay operator (max capacity was: {self.size})!"))
        else:
            raise IllegalStateError("Delay buffer must never overflow in Backpressure mode")

    def on_upstream_finish(self) -> None:
        self._complete_if_ready()

    def on_pull(self) -> None:
        if not self.is_timer_active(_TIMER) and self.buf:
            wait = self._wait_ms()
            if wait <= _PRECISION_MS:
                self.push(self.out, *self.buf.popleft()[1:])
            else:
                self.schedule_once(_TIMER, self.buf[0][0] - self.now())
        if not self.is_closed(self.in_) and not self.has_been_pulled(self.in_) and self._should_pull():
            self.pull(self.in_)
        self._rehold()
        self._complete_if_ready()

    def _complete_if_ready(self) -> None:
        if self.is_closed(self.in_) and not self.buf:
            self.complete_stage()

    def on_timer(self, key) -> None:
        if self.is_available(self.out) and self.buf:
            self.push(self.out, *self.buf.popleft()[1:])
        self._rehold()
        self._complete_if_ready()
