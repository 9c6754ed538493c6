"""throttle: a token bucket limiting the rate of elements or of their cost (Pekko's ``Throttle`` and
``TokenBucket``), on the host's clock."""
from __future__ import annotations

from ...errors import RateExceededError
from ...stage.checkpointing import NO_STATE
from ...stage.handlers import InHandler, OutHandler
from ...stage.supervision import Supervision, decide
from ...stage.timers import TimerGraphStageLogic
from .base import FlowStage, decider_of, require_callable, require_int
from .timeouts import require_duration

_TIMER = "throttle"
_NANOS = 1_000_000_000

#: ``maximum_burst`` default: ``max(1, 0.1 s worth of tokens)`` (Pekko's ``AutomaticMaximumBurst``)
AUTOMATIC_MAXIMUM_BURST = -1


class ThrottleMode:
    """How ``throttle`` reacts to a rate above the limit (Pekko's ``ThrottleMode``): ``shaping``
    delays elements to meet the rate, ``enforcing`` fails the stream with ``RateExceededError``."""

    __slots__ = ("kind",)

    def __init__(self, kind: str):
        if kind not in ("shaping", "enforcing"):
            raise ValueError(f"ThrottleMode: unknown kind {kind!r}; expected 'shaping' or 'enforcing'")
        self.kind = kind

    def __repr__(self):
        return f"ThrottleMode.{self.kind}"

    def __eq__(self, other):
        return isinstance(other, ThrottleMode) and other.kind == self.kind

    def __hash__(self):
        return hash(self.kind)

    def __reduce__(self):
        return (ThrottleMode, (self.kind,))


ThrottleMode.shaping = ThrottleMode("shaping")
ThrottleMode.enforcing = ThrottleMode("enforcing")


def _one(_elem) -> int:
    return 1


class TokenBucket:
    """Pekko's ``TokenBucket`` in integer nanoseconds: ``capacity`` tokens, one more every
    ``nanos_between_tokens``; full at ``init``. ``offer(cost, now)`` returns 0 if the element may go
    now, else how many nanoseconds it must wait (the tokens are then spent ahead)."""

    __slots__ = ("capacity", "period", "available", "last_update")

    def __init__(self, capacity: int, nanos_between_tokens: int):
        self.capacity = capacity
        self.period = nanos_between_tokens
        self.available = 0
        self.last_update = 0

    def init(self, now: int) -> None:
        self.available = self.capacity
        self.last_update = now

    def offer(self, cost: int, now: int) -> int:
        period = self.period
        elapsed = now - self.last_update
        if elapsed >= period:
            arrived = elapsed // period
            self.last_update += arrived * period
        else:
            arrived = 0
        self.available = min(self.available + arrived, self.capacity)
        if cost <= self.available:
            self.available -= cost
            return 0
        delay = (cost - self.available) * period - (now - self.last_update)
        self.available = 0
        self.last_update = now + delay
        return delay


class Throttle(FlowStage):
    """Limits the throughput to ``cost`` units per ``per`` seconds with a token bucket of
    ``maximum_burst`` tokens (full at the start; ``AUTOMATIC_MAXIMUM_BURST``: ``max(1, tokens per
    0.1 s)``). Each element costs ``cost_fn(elem)`` tokens (1 without ``cost_fn``). ``shaping`` delays
    an element until enough tokens arrived; ``enforcing`` fails the stream with ``RateExceededError``.

    **Emits when** upstream emits an element and the configured time per element elapsed.
    **Backpressures when** downstream backpressures or the incoming rate is higher than the rate
    limit. **Completes when** upstream completes (after the element being delayed). **Cancels when**
    downstream cancels.

    Supervision (an exception from ``cost_fn``): Resume and Restart drop the element."""

    def __init__(self, cost: int, per: float, maximum_burst: int = AUTOMATIC_MAXIMUM_BURST, cost_fn=None,
                 mode: ThrottleMode = ThrottleMode.shaping, arg: str = "elements"):
        require_int("throttle", arg, cost, 1)
        per = require_duration("throttle", "per", per)
        if isinstance(maximum_burst, bool) or not isinstance(maximum_burst, int):
            raise TypeError(f"throttle: argument 'maximum_burst' must be an int, got {maximum_burst!r}")
        if not isinstance(mode, ThrottleMode):
            raise TypeError(f"throttle: argument 'mode' must be a ThrottleMode, got {mode!r}")
        if cost_fn is not None:
            require_callable("throttle", "cost_fn", cost_fn)
        per_nanos = round(per * _NANOS)
        if per_nanos < cost:
            raise ValueError("throttle: rates larger than 1 unit / nanosecond are not supported")
        between = per_nanos // cost
        if maximum_burst == AUTOMATIC_MAXIMUM_BURST:
            burst = max(1, 100_000_000 // between)
        elif maximum_burst < 0:
            raise ValueError(f"throttle: argument 'maximum_burst' must be >= 0, got {maximum_burst}")
        else:
            burst = maximum_burst
        if mode is ThrottleMode.enforcing or mode == ThrottleMode.enforcing:
            if burst <= 0:
                raise ValueError(f"throttle: argument 'maximum_burst' must be > 0 in enforcing mode, got {burst}")
        super().__init__("throttle")
        self.nanos_between_tokens = between
        self.burst = burst
        self.cost_fn = cost_fn if cost_fn is not None else _one
        self.enforcing = mode == ThrottleMode.enforcing

    def create_logic(self, attributes):
        return _ThrottleLogic(self, decider_of(attributes))


class _ThrottleLogic(TimerGraphStageLogic, InHandler, OutHandler):
    # checkpoints: the token bucket is processing time (a restored stage starts with a full bucket); the state is
    # the element waiting for tokens, if any, emitted first after a restore. (Waiting for it instead starved the
    # cut: a throttle fed by a stage of its own island that holds elements - map_concat, recursively, buffer -
    # takes the next element in the same event that emits the last one, so it is never without one.)
    def save_to_snapshot(self):
        held = self.current if self.current is not None else self.restored
        return NO_STATE if held is None else (held,)

    def restore_from_snapshot(self, state) -> None:
        self.restored = state[0]

    def __init__(self, stage: Throttle, decider):
        super().__init__(stage.shape)
        self.in_ = stage.in_
        self.out = stage.out
        self.bucket = TokenBucket(stage.burst, stage.nanos_between_tokens)
        self.cost_fn = stage.cost_fn
        self.enforcing = stage.enforcing
        self.decider = decider
        self.current = None
        self.restored = None  # the element a restore gave back: emitted at the first pull
        self.set_handler(stage.in_, self)
        self.set_handler(stage.out, self)

    def _now(self) -> int:
        return round(self.interpreter.host.now() * _NANOS)

    def pre_start(self) -> None:
        self.bucket.init(self._now())

    def on_upstream_finish(self) -> None:
        if self.restored is None and not (self.is_available(self.out) and self.is_timer_active(_TIMER)):
            self.complete_stage()

    def on_push(self) -> None:
        self._offer(self.grab(self.in_))

    def _offer(self, elem) -> None:
        try:
            cost = self.cost_fn(elem)
        except Exception as exc:
            if decide(self.decider, exc) == Supervision.STOP:
                self.fail_stage(exc)
            else:
                self.pull(self.in_)
            return
        if isinstance(cost, bool) or not isinstance(cost, int):
            self.fail_stage(TypeError(f"throttle: cost_fn must return an int, got {cost!r} for element {elem!r}"))
            return
        if cost < 0:
            self.fail_stage(ValueError("Cost must be non-negative"))  # Pekko's TokenBucket message
            return
        delay = self.bucket.offer(cost, self._now())
        if delay == 0:
            self.push(self.out, elem)
        elif self.enforcing:
            self.fail_stage(RateExceededError("Maximum throttle throughput exceeded."))
        else:
            self.current = elem
            self.schedule_once(_TIMER, delay / _NANOS)

    def on_pull(self) -> None:
        if self.restored is not None:
            elem, self.restored = self.restored, None
            self._offer(elem)  # a full bucket: it goes now, unless its cost is above the burst
            if self.current is None and self.is_closed(self.in_) and not self.is_closed(self.out):
                self.complete_stage()  # upstream ended before the pull (a restored source at its end)
            return
        self.pull(self.in_)

    def on_timer(self, key) -> None:
        elem, self.current = self.current, None
        self.push(self.out, elem)
        if self.is_closed(self.in_):
            self.complete_stage()
