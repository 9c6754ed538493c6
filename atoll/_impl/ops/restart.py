"""Restart with backoff: ``RestartSource``, ``RestartFlow``, ``RestartSink`` (Pekko's ``RestartWithBackoffLogic``).

The wrapped Source/Flow/Sink is made by a factory and run as a substream of the stage
(``atoll.stage.substreams``). When it ends (completes, fails, or - for flows and sinks - cancels), the
stage waits ``min(max_backoff, min_backoff * 2**n) * (1 + random * random_factor)`` (``n`` restarts so
far) on its own timer and runs a fresh one. ``n`` goes back to 0 when the last restart happened more
than ``max_restarts_within`` ago; once ``max_restarts`` restarts were made the stage ends the way the
wrapped stream ended. Restarts are lossy: an element in flight when a wrapped stream ends is lost.
"""
from __future__ import annotations

import logging
import math
import random
from typing import Any, Callable, Optional

from ...materializer.keep import Keep
from ...stage.handlers import InHandler, OutHandler, eager_terminate_input, eager_terminate_output
from ...stage.substreams import SubSinkInlet, SubSourceOutlet, stop_substreams, sub_materialize
from ...stage.timers import TimerGraphStageLogic
from .base import FlowStage, SinkStage, SourceStage, require_callable

log = logging.getLogger("atoll.restart")

_UNLIMITED = 2**63 - 1


def _seconds(op: str, arg: str, value: Any, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{op}: {arg} must be a number of seconds, got {value!r}")
    if math.isnan(value) or math.isinf(value) or value < 0 or (positive and value == 0):
        raise ValueError(f"{op}: {arg} must be {'> 0' if positive else '>= 0'} seconds, got {value}")
    return float(value)


class RestartSettings:
    """Backoff settings of the restart operators (Pekko's ``RestartSettings``), validated when built.

    ``min_backoff``/``max_backoff``: seconds (``0 < min_backoff <= max_backoff``); ``random_factor``
    (``>= 0``) adds up to that fraction of the delay at random (0: exact delays); ``max_restarts``
    (``None``: unlimited) restarts counted within ``max_restarts_within`` seconds (default
    ``min_backoff``); ``restart_on(exc)`` decides whether a failure (or a cancellation cause) restarts
    (default: always); ``rng`` (a ``random.Random``) draws the jitter (default: the module's)."""

    __slots__ = ("min_backoff", "max_backoff", "random_factor", "max_restarts", "max_restarts_within",
                 "restart_on", "rng")

    def __init__(self, min_backoff: float, max_backoff: float, random_factor: float,
                 max_restarts: Optional[int] = None, max_restarts_within: Optional[float] = None,
                 restart_on: Optional[Callable[[BaseException], bool]] = None, rng: Optional[random.Random] = None):
        op = "RestartSettings"
        self.min_backoff = _seconds(op, "min_backoff", min_backoff, positive=True)
        self.max_backoff = _seconds(op, "max_backoff", max_backoff, positive=True)
        if self.max_backoff < self.min_backoff:
            raise ValueError(f"{op}: max_backoff must be >= min_backoff, got {max_backoff} < {min_backoff}")
        self.random_factor = _seconds(op, "random_factor", random_factor, positive=False)
        if max_restarts is None:
            self.max_restarts = _UNLIMITED
        elif isinstance(max_restarts, bool) or not isinstance(max_restarts, int):
            raise TypeError(f"{op}: max_restarts must be an int or None, got {max_restarts!r}")
        elif max_restarts < 0:
            raise ValueError(f"{op}: max_restarts must be >= 0, got {max_restarts}")
        else:
            self.max_restarts = max_restarts
        self.max_restarts_within = (self.min_backoff if max_restarts_within is None
                                    else _seconds(op, "max_restarts_within", max_restarts_within, positive=False))
        if restart_on is not None:
            require_callable(op, "restart_on", restart_on)
        self.restart_on = restart_on
        self.rng = rng

    def with_max_restarts(self, count: int, within: float) -> "RestartSettings":
        """A copy with ``max_restarts=count`` counted within ``within`` seconds."""
        return RestartSettings(self.min_backoff, self.max_backoff, self.random_factor, count, within,
                               self.restart_on, self.rng)

    def with_restart_on(self, restart_on: Callable[[BaseException], bool]) -> "RestartSettings":
        """A copy restarting only on failures for which ``restart_on(exc)`` is true."""
        max_restarts = None if self.max_restarts == _UNLIMITED else self.max_restarts
        return RestartSettings(self.min_backoff, self.max_backoff, self.random_factor, max_restarts,
                               self.max_restarts_within, restart_on, self.rng)

    def should_restart_on(self, exc: BaseException) -> bool:
        return True if self.restart_on is None else bool(self.restart_on(exc))

    def delay(self, restart_count: int) -> float:
        """Pekko's ``RetrySupport.calculateDelay``."""
        return backoff_delay(restart_count, self.min_backoff, self.max_backoff, self.random_factor, self.rng)

    def __repr__(self):
        mr = "unlimited" if self.max_restarts == _UNLIMITED else self.max_restarts
        return (f"RestartSettings(min_backoff={self.min_backoff}, max_backoff={self.max_backoff}, "
                f"random_factor={self.random_factor}, max_restarts={mr}, max_restarts_within={self.max_restarts_within})")


def backoff_delay(n: int, min_backoff: float, max_backoff: float, random_factor: float,
                  rng: Optional[random.Random] = None) -> float:
    """``min(max_backoff, min_backoff * 2**n) * (1 + random * random_factor)``."""
    rnd = 1.0 + (rng.random() if rng is not None else random.random()) * random_factor if random_factor else 1.0
    try:
        base = min(max_backoff, min_backoff * math.pow(2, n))
    except OverflowError:
        base = max_backoff
    return base * rnd


def _check_settings(op: str, settings: Any) -> None:
    if not isinstance(settings, RestartSettings):
        raise TypeError(f"{op}: settings must be a RestartSettings, got {settings!r}")


_TIMER = "RestartTimer"


class _RestartLogic(TimerGraphStageLogic):
    """Shared logic: counting restarts, the restart timer, and the sub-inlet/sub-outlet wiring."""

    def __init__(self, shape, name: str, settings: RestartSettings, only_on_failures: bool):
        super().__init__(shape)
        self.name = name
        self.settings = settings
        self.only_on_failures = only_on_failures
        self.restart_count = 0
        self.reset_deadline = None  # set when the first graph starts (host time)
        self.finishing = False

    # --- to implement
    def start_graph(self) -> None:
        raise TypeError("subclass must implement start_graph")

    def backoff(self) -> None:
        raise TypeError("subclass must implement backoff")

    # --- shared
    def _now(self) -> float:
        return self.interpreter.host.now()

    def pre_start(self):
        self.reset_deadline = self._now() + self.settings.max_restarts_within
        self.start_graph()

    def on_timer(self, key):
        self.start_graph()
        self.reset_deadline = self._now() + self.settings.max_restarts_within

    def max_restarts_reached(self) -> bool:
        if self._now() > self.reset_deadline:
            self.restart_count = 0
        return self.restart_count == self.settings.max_restarts

    def schedule_restart_timer(self) -> None:
        delay = self.settings.delay(self.restart_count)
        log.debug("%s: restarting in %.3fs", self, delay)
        self.schedule_once(_TIMER, delay)
        self.restart_count += 1
        self.backoff()

    def _prune_substreams(self) -> None:
        subs = getattr(self, "_substreams", None)
        if subs:
            subs[:] = [s for s in subs if not s.closed]

    def create_sub_inlet(self, out) -> SubSinkInlet:
        """A sub-inlet whose elements go to ``out``; its end restarts (or ends) the stage."""
        self._prune_substreams()
        sink_in = SubSinkInlet(self, f"RestartWithBackoff{self.name}.subIn")
        logic = self

        def on_push():
            logic.push(out, sink_in.grab())

        def on_upstream_finish():
            if logic.finishing or logic.max_restarts_reached() or logic.only_on_failures:
                logic.complete(out)
            else:
                log.info("%s: restarting stream due to completion [%d]", logic, logic.restart_count + 1)
                logic.schedule_restart_timer()

        def on_upstream_failure(exc):
            if logic.finishing or logic.max_restarts_reached() or not logic.settings.should_restart_on(exc):
                logic.fail(out, exc)
            else:
                log.info("%s: restarting stream due to failure [%d]: %r", logic, logic.restart_count + 1, exc)
                logic.schedule_restart_timer()

        sink_in.set_handler(InHandler(on_push=on_push, on_upstream_finish=on_upstream_finish,
                                      on_upstream_failure=on_upstream_failure))

        def on_downstream_finish(cause):
            logic.finishing = True
            sink_in.cancel(cause)

        self.set_handler(out, OutHandler(on_pull=sink_in.pull, on_downstream_finish=on_downstream_finish))
        return sink_in

    def create_sub_outlet(self, in_) -> SubSourceOutlet:
        """A sub-outlet fed from ``in_``; its cancellation restarts (or ends) the stage."""
        source_out = SubSourceOutlet(self, f"RestartWithBackoff{self.name}.subOut")
        logic = self

        def on_pull():
            if logic.is_available(in_):
                source_out.push(logic.grab(in_))
            elif not logic.has_been_pulled(in_):
                logic.pull(in_)

        def on_downstream_finish(cause):
            if (logic.finishing or logic.max_restarts_reached() or logic.only_on_failures
                    or not logic.settings.should_restart_on(cause)):
                logic.cancel(in_, cause)
            else:
                logic.schedule_restart_timer()

        source_out.set_handler(OutHandler(on_pull=on_pull, on_downstream_finish=on_downstream_finish))

        def on_push():
            if source_out.is_available():
                source_out.push(logic.grab(in_))

        def on_upstream_finish():
            logic.finishing = True
            source_out.complete()

        def on_upstream_failure(exc):
            logic.finishing = True
            source_out.fail(exc)

        self.set_handler(in_, InHandler(on_push=on_push, on_upstream_finish=on_upstream_finish,
                                        on_upstream_failure=on_upstream_failure))
        return source_out

    def post_stop(self):
        stop_substreams(self)


def _made(op: str, made: Any, kind: str, inlets: int, outlets: int):
    """What the factory returned, checked: a blueprint (Source/Flow/Sink: the DSL wraps graphs and
    stages in one) of the right shape."""
    shape = getattr(made, "shape", None)
    if (shape is None or len(shape.inlets) != inlets or len(shape.outlets) != outlets
            or (kind == "Source" and not hasattr(made, "to_mat"))):
        raise TypeError(f"{op}: the factory must return a {kind}, got {made!r}")
    return made


# ---------------------------------------------------------------------------------------------- source
class RestartWithBackoffSource(SourceStage):
    """Runs ``factory()`` and emits its elements; when it completes (unless ``only_on_failures``) or
    fails, runs a new one after the backoff (Pekko's ``RestartSource.withBackoff`` /
    ``onFailuresWithBackoff``).

    **Emits when** the wrapped source emits. **Backpressures when** downstream backpressures.
    **Completes when** the wrapped source completes and no restart is due (``only_on_failures``, or
    ``max_restarts`` reached); fails when it fails and no restart is due (``restart_on`` false
    included). **Cancels when** downstream cancels (the wrapped source is cancelled, never restarted)."""

    def __init__(self, settings: RestartSettings, factory: Callable[[], Any], only_on_failures: bool = False):
        op = "RestartSource.on_failures_with_backoff" if only_on_failures else "RestartSource.with_backoff"
        _check_settings(op, settings)
        require_callable(op, "factory", factory)
        super().__init__("restart_source")
        self.op = op
        self.settings = settings
        self.factory = factory
        self.only_on_failures = only_on_failures

    def create_logic(self, attributes):
        return _RestartSourceLogic(self)


class _RestartSourceLogic(_RestartLogic):
    def __init__(self, stage: RestartWithBackoffSource):
        super().__init__(stage.shape, "Source", stage.settings, stage.only_on_failures)
        self.stage = stage
        self.out = stage.out
        self.backoff()

    def start_graph(self) -> None:
        sink_in = self.create_sub_inlet(self.out)
        source = _made(self.stage.op, self.stage.factory(), "Source", 0, 1)
        sub_materialize(self, source.to_mat(sink_in.sink, Keep.left))  # the inner value is computed (and dropped)
        if self.is_available(self.out):
            sink_in.pull()

    def backoff(self) -> None:
        self.set_handler(self.out, eager_terminate_output())


# ---------------------------------------------------------------------------------------------- flow
class _DelayCancellation(FlowStage):
    """Passes elements; a cancellation from downstream reaches upstream only ``delay`` seconds later
    (so that a wrapped flow which cancels and then completes or fails is seen completing/failing)."""

    def __init__(self, delay: float):
        super().__init__("delay_cancellation")
        self.delay = delay

    def create_logic(self, attributes):
        return _DelayCancellationLogic(self)


class _DelayCancellationLogic(TimerGraphStageLogic, InHandler, OutHandler):
    def __init__(self, stage: _DelayCancellation):
        super().__init__(stage.shape)
        self.in_ = stage.in_
        self.out = stage.out
        self.delay = stage.delay
        self.cause = None
        self.set_handler(self.in_, self)
        self.set_handler(self.out, self)

    def on_push(self):
        self.push(self.out, self.grab(self.in_))

    def on_pull(self):
        self.pull(self.in_)

    def on_downstream_finish(self, cause):
        self.cause = cause
        self.schedule_once("CompleteState", self.delay)
        self.set_handler(self.in_, eager_terminate_input())

    def on_timer(self, key):
        self.cancel_stage(self.cause)


class RestartWithBackoffFlow(FlowStage):
    """Runs ``factory()`` between its ports; when it completes, fails or cancels its upstream (only when
    it fails with ``only_on_failures``), runs a new one after the backoff (Pekko's
    ``RestartFlow.withBackoff`` / ``onFailuresWithBackoff``). A cancellation of the wrapped flow's
    upstream reaches this stage ``cancellation_delay`` seconds later (Pekko's ``Delay`` attribute,
    50 ms), so that a flow that cancels and then completes counts as completing.

    **Emits when** the wrapped flow emits. **Backpressures when** downstream backpressures.
    **Completes when** upstream completes (or the wrapped flow completes and no restart is due).
    **Cancels when** downstream cancels (or the wrapped flow cancels and no restart is due)."""

    def __init__(self, settings: RestartSettings, factory: Callable[[], Any], only_on_failures: bool = False,
                 cancellation_delay: float = 0.05):
        op = "RestartFlow.on_failures_with_backoff" if only_on_failures else "RestartFlow.with_backoff"
        _check_settings(op, settings)
        require_callable(op, "factory", factory)
        self.cancellation_delay = _seconds(op, "cancellation_delay", cancellation_delay, positive=False)
        super().__init__("restart_flow")
        self.op = op
        self.settings = settings
        self.factory = factory
        self.only_on_failures = only_on_failures

    def create_logic(self, attributes):
        return _RestartFlowLogic(self)


class _RestartFlowLogic(_RestartLogic):
    def __init__(self, stage: RestartWithBackoffFlow):
        super().__init__(stage.shape, "Flow", stage.settings, stage.only_on_failures)
        self.stage = stage
        self.in_ = stage.in_
        self.out = stage.out
        self.active = None
        self.backoff()

    def start_graph(self) -> None:
        source_out = self.create_sub_outlet(self.in_)
        sink_in = self.create_sub_inlet(self.out)
        made = _made(self.stage.op, self.stage.factory(), "Flow", 1, 1)
        graph = (source_out.source
                 .via(_DelayCancellation(self.stage.cancellation_delay))
                 .via_mat(made, Keep.right)
                 .to_mat(sink_in.sink, Keep.left))
        sub_materialize(self, graph)
        if self.is_available(self.out):
            sink_in.pull()
        self.active = (source_out, sink_in)

    def backoff(self) -> None:
        self.set_handler(self.in_, eager_terminate_input())
        self.set_handler(self.out, eager_terminate_output())
        if self.active is not None:
            source_out, sink_in = self.active
            self.active = None
            if not source_out.is_closed():
                source_out.complete()
            if not sink_in.is_closed():
                sink_in.cancel()


# ---------------------------------------------------------------------------------------------- sink
class RestartWithBackoffSink(SinkStage):
    """Feeds ``factory()`` with the elements; when it cancels, runs a new one after the backoff (Pekko's
    ``RestartSink.withBackoff``). Upstream completion or failure ends the stage (and the wrapped sink)
    without restart.

    **Backpressures when** the wrapped sink backpressures. **Completes when** upstream completes.
    **Cancels when** the wrapped sink cancels and no restart is due (``max_restarts`` reached, or
    ``restart_on`` false for the cancellation cause)."""

    def __init__(self, settings: RestartSettings, factory: Callable[[], Any]):
        op = "RestartSink.with_backoff"
        _check_settings(op, settings)
        require_callable(op, "factory", factory)
        super().__init__("restart_sink")
        self.op = op
        self.settings = settings
        self.factory = factory

    def create_logic(self, attributes):
        return _RestartSinkLogic(self)


class _RestartSinkLogic(_RestartLogic):
    def __init__(self, stage: RestartWithBackoffSink):
        super().__init__(stage.shape, "Sink", stage.settings, False)
        self.stage = stage
        self.in_ = stage.in_
        self.backoff()

    def start_graph(self) -> None:
        source_out = self.create_sub_outlet(self.in_)
        made = _made(self.stage.op, self.stage.factory(), "Sink", 1, 0)
        sub_materialize(self, source_out.source.to_mat(made, Keep.right))

    def backoff(self) -> None:
        self.set_handler(self.in_, eager_terminate_input())
