"""TimeOps: operators that read the host's clock - grouping within a time, throttling, delays and timeouts
(Pekko's timer-driven operators). Durations are seconds (int or float)."""
from __future__ import annotations

from typing import Any, Callable, Optional

from .._impl.ops.delay import Delay, DelayOverflowStrategy
from .._impl.ops.grouped_within import GroupedWeightedWithin, _UNBOUNDED, _zero_cost
from .._impl.ops.keep_alive import KeepAlive
from .._impl.ops.throttle import AUTOMATIC_MAXIMUM_BURST, Throttle, ThrottleMode
from .._impl.ops.time_slicing import DropWithin, InitialDelay, TakeWithin
from .._impl.ops.timeouts import BackpressureTimeout, CompletionTimeout, IdleTimeout, InitialTimeout


class TimeOps:
    """Mixin for Source and Flow."""

    __slots__ = ()

    # ------------------------------------------------------------------ grouping by time
    def grouped_within(self, n: int, d: float):
        """Lists of up to ``n`` elements, each emitted when full or ``d`` seconds after the previous
        group (never empty; the last partial group on completion)."""
        return self._stage(GroupedWeightedWithin(_UNBOUNDED, n, _zero_cost, d, "grouped_within"))

    def grouped_weighted_within(self, max_weight: int, d: float, cost: Callable[[Any], int],
                                max_number: Optional[int] = None):
        """Lists whose summed ``cost(elem)`` stays within ``max_weight`` (and of at most
        ``max_number`` elements if given), emitted when full or ``d`` seconds after the previous
        group; a heavier element goes alone."""
        return self._stage(GroupedWeightedWithin(max_weight, _UNBOUNDED if max_number is None else max_number,
                                                 cost, d))

    # ------------------------------------------------------------------ rate
    def throttle(self, elements: Optional[int] = None, per: Optional[float] = None,
                 maximum_burst: int = AUTOMATIC_MAXIMUM_BURST, mode: ThrottleMode = ThrottleMode.shaping, *,
                 cost: Optional[int] = None, cost_fn: Optional[Callable[[Any], int]] = None):
        """At most ``elements`` per ``per`` seconds (token bucket of ``maximum_burst``, default
        ``max(1, 0.1 s worth)``). Cost form: ``throttle(cost=units, per=s, cost_fn=fn)`` limits the
        summed ``cost_fn(elem)`` instead. ``ThrottleMode.shaping`` delays; ``enforcing`` fails with
        ``RateExceededError``."""
        if per is None:
            raise TypeError("throttle: argument 'per' is required")
        if cost is not None or cost_fn is not None:
            if elements is not None:
                raise TypeError("throttle: give either 'elements' or 'cost' with 'cost_fn', not both")
            if cost is None or cost_fn is None:
                raise TypeError("throttle: the cost form needs both 'cost' and 'cost_fn'")
            return self._stage(Throttle(cost, per, maximum_burst, cost_fn, mode, arg="cost"))
        if elements is None:
            raise TypeError("throttle: argument 'elements' is required")
        return self._stage(Throttle(elements, per, maximum_burst, None, mode))

    # ------------------------------------------------------------------ delays
    def delay(self, of: float, strategy: DelayOverflowStrategy = DelayOverflowStrategy.drop_tail):
        """Emit each element ``of`` seconds after it arrived, buffering up to ``InputBuffer.max``
        elements (``strategy`` decides when full)."""
        return self._stage(Delay.fixed(of, strategy))

    def delay_with(self, strategy_factory: Callable[[], Callable[[Any], float]],
                   strategy: DelayOverflowStrategy = DelayOverflowStrategy.drop_tail):
        """``delay`` with a per-element delay: ``strategy_factory()`` (called per materialization)
        returns a function ``elem -> seconds``."""
        return self._stage(Delay(strategy_factory, strategy, "delay_with"))

    def initial_delay(self, d: float):
        """Do not pull upstream before ``d`` seconds after the start."""
        return self._stage(InitialDelay(d))

    # ------------------------------------------------------------------ slicing by time
    def take_within(self, d: float):
        """Pass elements for ``d`` seconds, then complete."""
        return self._stage(TakeWithin(d))

    def drop_within(self, d: float):
        """Drop the elements of the first ``d`` seconds."""
        return self._stage(DropWithin(d))

    # ------------------------------------------------------------------ timeouts
    def initial_timeout(self, timeout: float):
        """Fail with ``InitialTimeoutError`` if no element passed within ``timeout`` seconds."""
        return self._stage(InitialTimeout(timeout))

    def completion_timeout(self, timeout: float):
        """Fail with ``CompletionTimeoutError`` if not completed within ``timeout`` seconds."""
        return self._stage(CompletionTimeout(timeout))

    def idle_timeout(self, timeout: float):
        """Fail with ``StreamIdleTimeoutError`` if no element passed for ``timeout`` seconds."""
        return self._stage(IdleTimeout(timeout))

    def backpressure_timeout(self, timeout: float):
        """Fail with ``BackpressureTimeoutError`` if downstream gave no demand for ``timeout`` seconds
        after an element."""
        return self._stage(BackpressureTimeout(timeout))

    def keep_alive(self, max_idle: float, inject: Callable[[], Any]):
        """Emit ``inject()`` when upstream was idle for ``max_idle`` seconds and downstream pulls."""
        return self._stage(KeepAlive(max_idle, inject))
