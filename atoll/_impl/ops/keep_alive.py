"""keep_alive(max_idle, inject): inject an element when upstream was idle (Pekko's ``Timers.IdleInject``)."""
from __future__ import annotations

import math

from ...stage.handlers import InHandler, OutHandler
from ...stage.timers import TimerGraphStageLogic
from .base import FlowStage, require_callable
from .timeouts import require_duration

_TIMER = "keep_alive"


class KeepAlive(FlowStage):
    """Injects ``inject()`` when no upstream element arrived for ``max_idle`` seconds and downstream
    demands; injections do not pile up while downstream backpressures, and upstream elements are
    preferred (upstream is pulled ahead, as Pekko).

    **Emits when** upstream emits an element, or upstream was idle for ``max_idle`` and downstream
    pulled. **Backpressures when** downstream backpressures. **Completes when** upstream completes
    (after the element it holds, if any). **Cancels when** downstream cancels."""

    def __init__(self, max_idle: float, inject):
        self.max_idle = require_duration("keep_alive", "max_idle", max_idle)
        require_callable("keep_alive", "inject", inject)
        super().__init__("keep_alive")
        self.inject = inject

    def create_logic(self, attributes):
        return _KeepAliveLogic(self)


class _KeepAliveLogic(TimerGraphStageLogic, InHandler, OutHandler):
    stateless = True  # the idle deadline is processing time: a restored stage starts it again
    deadline = math.inf

    def __init__(self, stage: KeepAlive):
        super().__init__(stage.shape)
        self.in_ = stage.in_
        self.out = stage.out
        self.max_idle = stage.max_idle
        self.inject = stage.inject
        self.set_handler(stage.in_, self)
        self.set_handler(stage.out, self)

    def pre_start(self) -> None:
        self.now = self.interpreter.host.now
        self.deadline = self.now() + self.max_idle
        self.pull(self.in_)

    def on_push(self) -> None:
        self.deadline = self.now() + self.max_idle
        self.cancel_timer(_TIMER)
        if self.is_available(self.out):
            self.push(self.out, self.grab(self.in_))
            self.pull(self.in_)

    def on_upstream_finish(self) -> None:
        if not self.is_available(self.in_):
            self.complete_stage()

    def on_pull(self) -> None:
        if self.is_available(self.in_):
            self.push(self.out, self.grab(self.in_))
            if self.is_closed(self.in_):
                self.complete_stage()
            else:
                self.pull(self.in_)
        else:
            self._inject_or_reschedule()

    def on_timer(self, key) -> None:
        self._inject_or_reschedule()

    def _inject_or_reschedule(self) -> None:
        now = self.now()
        if now < self.deadline:
            self.schedule_once(_TIMER, self.deadline - now)
        else:
            self.push(self.out, self.inject())
            self.deadline = now + self.max_idle
