"""The stream timeouts (Pekko's ``impl/Timers.scala``): ``initial_timeout``, ``completion_timeout``,
``idle_timeout`` and ``backpressure_timeout``, plus the duration helpers the time-based operators share.

Every time read goes through the host's clock (``self.interpreter.host.now()``), so the operators run
on virtual time under the test kit's ``ManualClock``. Pekko's timeouts that check a deadline
periodically (idle, backpressure) do so every ``timeout_check_interval(timeout)`` seconds, as Pekko.
"""
from __future__ import annotations

import math
from typing import Any

from ...errors import BackpressureTimeoutError, CompletionTimeoutError, InitialTimeoutError, StreamIdleTimeoutError
from ...stage.handlers import InHandler, OutHandler
from ...stage.timers import TimerGraphStageLogic
from .base import FlowStage

_TIMER = "timeout"

_UNITS = (
    (86_400_000_000_000, "day"),
    (3_600_000_000_000, "hour"),
    (60_000_000_000, "minute"),
    (1_000_000_000, "second"),
    (1_000_000, "millisecond"),
    (1_000, "microsecond"),
    (1, "nanosecond"),
)


def require_duration(op: str, arg: str, value: Any, allow_zero: bool = False) -> float:
    """Check a duration in seconds (an int or float, finite, > 0 or >= 0 with ``allow_zero``); returns it as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{op}: argument {arg!r} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{op}: argument {arg!r} must be {'>= 0' if allow_zero else '> 0'}, got {value}")
    return float(value)


def format_duration(seconds: float) -> str:
    """A duration as Pekko's ``FiniteDuration.toCoarsest`` prints it: ``1 second``, ``500 milliseconds``,
    ``2 minutes`` (the coarsest unit that holds it exactly, in whole nanoseconds)."""
    nanos = round(seconds * 1_000_000_000)
    if nanos == 0:
        return "0 days"
    for size, name in _UNITS:
        if nanos % size == 0:
            n = nanos // size
            return f"{n} {name}" if n == 1 else f"{n} {name}s"
    raise AssertionError("unreachable")  # the nanosecond divides everything


def timeout_check_interval(timeout: float) -> float:
    """How often a deadline is checked (Pekko's ``Timers.timeoutCheckInterval``): every second for
    timeouts above a second, else ``min(max(timeout / 8, 0.1), timeout / 2)``."""
    if timeout > 1.0:
        return 1.0
    return min(max(timeout / 8, 0.1), timeout / 2)


class _TimeoutStage(FlowStage):
    op = ""

    def __init__(self, timeout: float):
        self.timeout = require_duration(self.op, "timeout", timeout)
        super().__init__(self.op)


class _PassLogic(TimerGraphStageLogic, InHandler, OutHandler):
    """Passes elements through unchanged; subclasses add the timer. With checkpoints the timers are
    processing time: a restored stage starts them again from its start (they are not saved)."""

    stateless = True

    def __init__(self, stage: _TimeoutStage):
        super().__init__(stage.shape)
        self.in_ = stage.in_
        self.out = stage.out
        self.timeout = stage.timeout
        self.set_handler(stage.in_, self)
        self.set_handler(stage.out, self)

    def on_push(self) -> None:
        self.push(self.out, self.grab(self.in_))

    def on_pull(self) -> None:
        self.pull(self.in_)


class InitialTimeout(_TimeoutStage):
    """Fails the stream with ``InitialTimeoutError`` if the first element has not passed through
    within ``timeout`` seconds of the start.

    **Emits when** upstream emits an element. **Backpressures when** downstream backpressures.
    **Completes when** upstream completes, or fails if the timeout elapses before the first element
    arrives. **Cancels when** downstream cancels."""

    op = "initial_timeout"

    def create_logic(self, attributes):
        return _InitialLogic(self)


class _InitialLogic(_PassLogic):
    initial_passed = False
    stateless = False

    def save_to_snapshot(self):
        return self.initial_passed

    def restore_from_snapshot(self, state) -> None:
        self.initial_passed = state

    def pre_start(self) -> None:
        if not self.initial_passed:
            self.schedule_once(_TIMER, self.timeout)

    def on_push(self) -> None:
        self.initial_passed = True
        self.push(self.out, self.grab(self.in_))

    def on_timer(self, key) -> None:
        if not self.initial_passed:
            self.fail_stage(InitialTimeoutError(
                f"The first element has not yet passed through in {format_duration(self.timeout)}."))


class CompletionTimeout(_TimeoutStage):
    """Fails the stream with ``CompletionTimeoutError`` if it has not completed within ``timeout``
    seconds of the start.

    **Emits when** upstream emits an element. **Backpressures when** downstream backpressures.
    **Completes when** upstream completes, or fails if the timeout elapses before upstream completes.
    **Cancels when** downstream cancels."""

    op = "completion_timeout"

    def create_logic(self, attributes):
        return _CompletionLogic(self)


class _CompletionLogic(_PassLogic):
    def pre_start(self) -> None:
        self.schedule_once(_TIMER, self.timeout)

    def on_timer(self, key) -> None:
        self.fail_stage(CompletionTimeoutError(f"The stream has not been completed in {format_duration(self.timeout)}."))


class IdleTimeout(_TimeoutStage):
    """Fails the stream with ``StreamIdleTimeoutError`` if no element passed for ``timeout`` seconds
    (checked periodically, as Pekko, so the failure may come up to one check interval late).

    **Emits when** upstream emits an element. **Backpressures when** downstream backpressures.
    **Completes when** upstream completes, or fails if the timeout elapses between two elements.
    **Cancels when** downstream cancels."""

    op = "idle_timeout"

    def create_logic(self, attributes):
        return _IdleLogic(self)


class _IdleLogic(_PassLogic):
    deadline = math.inf

    def pre_start(self) -> None:
        self.deadline = self.interpreter.host.now() + self.timeout
        check = timeout_check_interval(self.timeout)
        self.schedule_with_fixed_delay(_TIMER, check, check)

    def on_push(self) -> None:
        self.deadline = self.interpreter.host.now() + self.timeout
        self.push(self.out, self.grab(self.in_))

    def on_timer(self, key) -> None:
        if self.deadline - self.interpreter.host.now() < 0:
            self.fail_stage(StreamIdleTimeoutError(f"No elements passed in the last {format_duration(self.timeout)}."))


class BackpressureTimeout(_TimeoutStage):
    """Fails the stream with ``BackpressureTimeoutError`` if an element was emitted and downstream
    did not signal demand again within ``timeout`` seconds (checked periodically, as Pekko).

    **Emits when** upstream emits an element. **Backpressures when** downstream backpressures.
    **Completes when** upstream completes, or fails if the timeout elapses between an element being
    emitted and the following demand. **Cancels when** downstream cancels."""

    op = "backpressure_timeout"

    def create_logic(self, attributes):
        return _BackpressureLogic(self)


class _BackpressureLogic(_PassLogic):
    deadline = math.inf
    waiting_demand = True

    def pre_start(self) -> None:
        self.deadline = self.interpreter.host.now() + self.timeout
        check = timeout_check_interval(self.timeout)
        self.schedule_with_fixed_delay(_TIMER, check, check)

    def on_push(self) -> None:
        self.push(self.out, self.grab(self.in_))
        self.deadline = self.interpreter.host.now() + self.timeout
        self.waiting_demand = True

    def on_pull(self) -> None:
        self.waiting_demand = False
        self.pull(self.in_)

    def on_timer(self, key) -> None:
        if self.waiting_demand and self.deadline - self.interpreter.host.now() < 0:
            self.fail_stage(BackpressureTimeoutError(f"No demand signalled in the last {format_duration(self.timeout)}."))
