"""Slicing by time (Pekko's ``TakeWithin``, ``DropWithin`` and ``Timers.DelayInitial``):
``take_within``, ``drop_within`` and ``initial_delay``, on the host's clock."""
from __future__ import annotations

from ...stage.handlers import InHandler, OutHandler
from ...stage.timers import TimerGraphStageLogic
from .base import FlowLogic, FlowStage
from .timeouts import require_duration

_TIMER = "time_slice"


class TakeWithin(FlowStage):
    """Passes elements until ``d`` seconds after the start, then completes and cancels upstream.

    **Emits when** an upstream element arrives (within the time). **Backpressures when** downstream
    backpressures. **Completes when** upstream completes or the time elapsed. **Cancels when**
    downstream cancels or the time elapsed."""

    def __init__(self, d: float):
        self.d = require_duration("take_within", "d", d)
        super().__init__("take_within")

    def create_logic(self, attributes):
        return _TakeWithinLogic(self)


class _TakeWithinLogic(TimerGraphStageLogic, InHandler, OutHandler):
    stateless = True  # processing time: a restored stage takes for d seconds from its restart
    def __init__(self, stage: TakeWithin):
        super().__init__(stage.shape)
        self.in_ = stage.in_
        self.out = stage.out
        self.d = stage.d
        self.set_handler(stage.in_, self)
        self.set_handler(stage.out, self)

    def pre_start(self) -> None:
        self.schedule_once(_TIMER, self.d)

    def on_push(self) -> None:
        self.push(self.out, self.grab(self.in_))

    def on_pull(self) -> None:
        self.pull(self.in_)

    def on_timer(self, key) -> None:
        self.complete_stage()


class DropWithin(FlowStage):
    """Drops the elements that arrive within ``d`` seconds of the start (an element arriving exactly
    at ``d`` is dropped too, as Pekko), then passes everything.

    **Emits when** the time elapsed and an upstream element arrives. **Backpressures when**
    downstream backpressures. **Completes when** upstream completes. **Cancels when** downstream
    cancels."""

    def __init__(self, d: float):
        self.d = require_duration("drop_within", "d", d)
        super().__init__("drop_within")

    def create_logic(self, attributes):
        return _DropWithinLogic(self)


class _DropWithinLogic(FlowLogic):
    start = 0.0
    passing = False

    def __init__(self, stage: DropWithin):
        super().__init__(stage)
        self.d = stage.d

    def save_to_snapshot(self):
        return self.passing  # processing time: a restored stage still dropping drops for d from its restart

    def restore_from_snapshot(self, state) -> None:
        self.passing = state

    def pre_start(self) -> None:
        self.now = self.interpreter.host.now
        self.start = self.now()

    def on_push(self) -> None:
        if self.passing:
            self.push(self.out, self.grab(self.in_))
        elif self.now() - self.start <= self.d:
            self.grab(self.in_)
            self.pull(self.in_)
        else:
            self.passing = True
            self.push(self.out, self.grab(self.in_))


class InitialDelay(FlowStage):
    """Delays the first element: upstream is not pulled until ``d`` seconds after the start (0: no
    delay), then elements pass through.

    **Emits when** upstream emits an element, once the delay elapsed. **Backpressures when**
    downstream backpressures or the delay has not elapsed yet. **Completes when** upstream completes.
    **Cancels when** downstream cancels."""

    def __init__(self, d: float):
        self.d = require_duration("initial_delay", "d", d, allow_zero=True)
        super().__init__("initial_delay")

    def create_logic(self, attributes):
        return _InitialDelayLogic(self)


class _InitialDelayLogic(TimerGraphStageLogic, InHandler, OutHandler):
    open = False

    def __init__(self, stage: InitialDelay):
        super().__init__(stage.shape)
        self.in_ = stage.in_
        self.out = stage.out
        self.d = stage.d
        self.set_handler(stage.in_, self)
        self.set_handler(stage.out, self)

    def save_to_snapshot(self):
        return self.open

    def restore_from_snapshot(self, state) -> None:
        self.open = state

    def pre_start(self) -> None:
        if self.d == 0:
            self.open = True
        elif not self.open:  # restored open: the delay is over
            self.schedule_once(_TIMER, self.d)

    def on_push(self) -> None:
        self.push(self.out, self.grab(self.in_))

    def on_pull(self) -> None:
        if self.open:
            self.pull(self.in_)

    def on_timer(self, key) -> None:
        self.open = True
        if self.is_available(self.out):
            self.pull(self.in_)
