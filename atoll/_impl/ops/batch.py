"""batch / batch_weighted / conflate / conflate_with_seed: aggregate while downstream is slower
(Pekko's ``Batch``; ``conflate`` is ``Batch`` with a cost of 0 and a limit of 1, so it never
backpressures)."""
from __future__ import annotations

from ...stage.handlers import InHandler, OutHandler
from ...stage.logic import GraphStageLogic
from ...stage.supervision import Supervision, decide
from .base import FlowStage, decider_of, event_clock_state, require_callable, require_int, restore_event_clock, snapshot_copy

_NONE = object()  # no aggregate / no pending element


def _zero(_elem) -> int:
    return 0


def _one(_elem) -> int:
    return 1


def _identity(elem):
    return elem


class Batch(FlowStage):
    """Aggregates the elements that arrive while downstream backpressures: the first one into
    ``seed(elem)``, the next ones with ``aggregate(acc, elem)``, as long as the summed ``cost`` stays
    within ``max``; an element that does not fit waits (one at most) and upstream is backpressured.
    An element whose cost alone exceeds ``max`` still seeds a batch of its own.

    **Emits when** downstream stops backpressuring and there is an aggregated element available.
    **Backpressures when** the aggregate is full (``max`` reached) and one more element is pending
    (conflate: never). **Completes when** upstream completes and the aggregate and the pending
    element were emitted. **Cancels when** downstream cancels.

    Supervision (an exception from ``cost``, ``seed`` or ``aggregate``): Resume drops the element
    and keeps the aggregate; Restart drops the element and the aggregate."""

    def __init__(self, max: int, cost, seed, aggregate, op: str = "batch"):
        if op in ("batch", "batch_weighted"):
            require_int(op, "max_weight" if op == "batch_weighted" else "max", max, 1)
        if op == "batch_weighted":
            require_callable(op, "cost", cost)
        if op != "conflate":
            require_callable(op, "seed", seed)
        require_callable(op, "aggregate", aggregate)
        super().__init__(op)
        self.max = max
        self.cost = cost
        self.seed = seed
        self.aggregate = aggregate

    @staticmethod
    def conflate_with_seed(seed, aggregate, op: str = "conflate_with_seed") -> "Batch":
        return Batch(1, _zero, seed, aggregate, op)

    @staticmethod
    def conflate(aggregate) -> "Batch":
        return Batch(1, _zero, _identity, aggregate, "conflate")

    @staticmethod
    def batch(max: int, seed, aggregate) -> "Batch":
        return Batch(max, _one, seed, aggregate, "batch")

    def create_logic(self, attributes):
        return _BatchLogic(self, decider_of(attributes))


class _BatchLogic(GraphStageLogic, InHandler, OutHandler):
    pulls_ahead = True  # aggregates while downstream backpressures

    def __init__(self, stage: Batch, decider):
        super().__init__(stage.shape)
        self.in_ = stage.in_
        self.out = stage.out
        self.max = stage.max
        self.cost = stage.cost
        self.seed = stage.seed
        self.aggregate = stage.aggregate
        self.decider = decider
        self.agg = _NONE
        self.left = stage.max
        self.pending = _NONE
        self.agg_ts = None  # event time: the smallest timestamp folded into agg, and the pending element's
        self.pending_ts = None
        self.agg_max = None  # event time: the largest timestamp folded into agg (the aggregate carries it)
        self.set_handler(stage.in_, self)
        self.set_handler(stage.out, self)

    def reset_state(self) -> None:
        self.agg = _NONE
        self.left = self.max
        self.pending = _NONE
        if self.agg_ts is not None or self.pending_ts is not None:
            self.agg_ts = self.pending_ts = self.agg_max = None
            self.release_watermark_hold()

    def _held(self, into_agg: bool) -> None:
        """Event time: the element just grabbed is kept (in agg or as pending); hold the watermark at the
        smallest timestamp kept, so no watermark overtakes an element still inside (spec: holding stages)."""
        ts = self._ts
        if ts is None:
            return
        if into_agg:
            if self.agg_ts is None or ts < self.agg_ts:
                self.agg_ts = ts
            if self.agg_max is None or ts > self.agg_max:
                self.agg_max = ts
        else:
            self.pending_ts = ts
        self.hold_watermark_for((self.agg_ts, self.pending_ts))

    def _agg_out(self) -> None:
        """Event time: agg went downstream; what stays is the pending element (if any)."""
        if self.agg_ts is not None or self.pending_ts is not None:
            self.agg_ts = self.agg_max = self.pending_ts
            self.pending_ts = None
            self.hold_watermark_for((self.agg_ts,))

    def _pending_dropped(self) -> None:
        """Event time: seeding the pending element failed and supervision dropped it: nothing is kept."""
        if self.agg_ts is not None and self.agg is _NONE:
            self.agg_ts = self.agg_max = None
            self.release_watermark_hold()

    def _supervise(self, exc: BaseException) -> bool:
        """False: the stage failed. Restart resets the state; Resume keeps it."""
        d = decide(self.decider, exc)
        if d == Supervision.STOP:
            self.fail_stage(exc)
            return False
        if d == Supervision.RESTART:
            self.reset_state()
        return True

    def _flush(self) -> None:
        if self.agg is not _NONE:
            self.push(self.out, self.agg, self.agg_max)
            self.left = self.max
            self.agg = _NONE
            self._agg_out()
        if self.pending is not _NONE:
            pending = self.pending
            try:
                cost = self.cost(pending)
                self.agg = self.seed(pending)
                self.left -= cost
                self.pending = _NONE
            except Exception as exc:
                if self._supervise(exc):
                    self.pending = _NONE
                    self._pending_dropped()

    def save_to_snapshot(self):
        agg = self.agg if self.agg is _NONE else snapshot_copy(self.agg)
        return {"agg": None if agg is _NONE else (agg,), "left": self.left,
                "pending": None if self.pending is _NONE else (self.pending,),
                "ts": (self.agg_ts, self.pending_ts, self.agg_max), "clock": event_clock_state(self)}

    def restore_from_snapshot(self, state) -> None:
        self.agg = _NONE if state["agg"] is None else state["agg"][0]
        self.pending = _NONE if state["pending"] is None else state["pending"][0]
        self.left = state["left"]
        ts = state["ts"]
        self.agg_ts, self.pending_ts = ts[0], ts[1]
        self.agg_max = ts[2] if len(ts) > 2 else ts[0]
        restore_event_clock(self, state["clock"])  # the watermark hold on the elements kept

    def pre_start(self) -> None:
        if self.pending is _NONE:  # restored with a pending element: upstream waits until it fits
            self.pull(self.in_)

    def on_push(self) -> None:
        elem = self.grab(self.in_)
        try:
            cost = self.cost(elem)
        except Exception as exc:
            if self._supervise(exc):
                self.pull(self.in_)
            return
        if self.agg is _NONE:
            try:
                self.agg = self.seed(elem)
                self.left -= cost
                self._held(True)
            except Exception as exc:
                if not self._supervise(exc):
                    return
        elif self.left < cost:
            self.pending = elem
            self._held(False)
        else:
            try:
                self.agg = self.aggregate(self.agg, elem)
                self.left -= cost
                self._held(True)
            except Exception as exc:
                if not self._supervise(exc):
                    return
        if self.is_available(self.out):
            self._flush()
            if self.is_closed(self.out):  # a supervision Stop in the flush failed the stage
                return
        if self.pending is _NONE and not self.is_closed(self.in_):
            self.pull(self.in_)

    def on_upstream_finish(self) -> None:
        if self.agg is _NONE:
            self.complete_stage()

    def on_pull(self) -> None:
        if self.agg is _NONE:
            if self.is_closed(self.in_):
                self.complete_stage()
            elif not self.has_been_pulled(self.in_):
                self.pull(self.in_)
        elif self.is_closed(self.in_):
            self.push(self.out, self.agg, self.agg_max)
            self.agg = _NONE
            self._agg_out()
            if self.pending is _NONE:
                self.complete_stage()
            else:
                pending, self.pending = self.pending, _NONE
                try:
                    self.agg = self.seed(pending)
                except Exception as exc:
                    if not self._supervise(exc):
                        return
                    self._pending_dropped()
                if self.agg is _NONE:
                    self.complete_stage()
        else:
            self._flush()
            if not self.is_closed(self.in_) and not self.has_been_pulled(self.in_):
                self.pull(self.in_)
