"""grouped_within / grouped_weighted_within: groups closed by size, weight or time (Pekko's
``GroupedWeightedWithin``), on the host's clock."""
from __future__ import annotations

import sys

from ...stage.handlers import InHandler, OutHandler
from ...stage.supervision import Supervision, decide
from ...stage.timers import TimerGraphStageLogic
from .base import FlowStage, decider_of, require_callable, require_int
from .timeouts import require_duration

_TIMER = "grouped_within"
_NONE = object()  # no pending element
_UNBOUNDED = sys.maxsize


def _zero_cost(_elem) -> int:
    return 0


class GroupedWeightedWithin(FlowStage):
    """Groups elements into lists closed when ``d`` seconds passed since the last group was emitted,
    or the group reached ``max_weight`` (sum of ``cost(elem)``) or ``max_number`` elements, whichever
    comes first. An element heavier than ``max_weight`` goes in a group of its own; an element that
    does not fit in the current group opens the next one. Groups are never empty.

    **Emits when** the time elapsed since the last group (and the group is not empty), or the weight
    or number limit is reached. **Backpressures when** downstream backpressures and the group is full
    with one more element pending. **Completes when** upstream completes (after the last group).
    **Cancels when** downstream cancels.

    Supervision (an exception from ``cost``): Resume drops the element and keeps the group; Restart
    drops the element and the group, and restarts the time window. A negative cost fails the stream
    with ``ValueError``."""

    def __init__(self, max_weight: int, max_number: int, cost, d: float, op: str = "grouped_weighted_within"):
        if op == "grouped_within":
            require_int(op, "n", max_number, 1)
        else:
            require_int(op, "max_weight", max_weight, 1)
            require_int(op, "max_number", max_number, 1)
            require_callable(op, "cost", cost)
        self.d = require_duration(op, "d", d)
        super().__init__(op)
        self.max_weight = max_weight
        self.max_number = max_number
        self.cost = cost

    def create_logic(self, attributes):
        return _GroupedWithinLogic(self, decider_of(attributes))


class _GroupedWithinLogic(TimerGraphStageLogic, InHandler, OutHandler):
    pulls_ahead = True  # fills a group whatever downstream asked for

    # checkpoints: the group goes out when its processing-time timer fires (at most d later), so the cut
    # waits for an empty group instead of saving it
    stateless = True

    def ready_for_snapshot(self) -> bool:
        return not self.group and self.pending is _NONE

    """Pekko's logic: ``push_eagerly`` is set when a non-empty group must go as soon as downstream
    pulls (the timer fired, a limit was reached, an element is pending, upstream finished)."""

    def __init__(self, stage: GroupedWeightedWithin, decider):
        super().__init__(stage.shape)
        self.in_ = stage.in_
        self.out = stage.out
        self.max_weight = stage.max_weight
        self.max_number = stage.max_number
        self.cost = stage.cost
        self.d = stage.d
        self.decider = decider
        self.group = []
        self.pending = _NONE
        self.pending_weight = 0
        self.push_eagerly = False
        self.group_emitted = True
        self.finished = False
        self.total_weight = 0
        self.total_number = 0
        self.has_elements = False
        self.group_ts = None  # event time: the smallest timestamp in the group, and the pending element's
        self.pending_ts = None
        self.group_max = None  # event time: the largest timestamp in the group (the group carries it)
        self.set_handler(stage.in_, self)
        self.set_handler(stage.out, self)

    def _restart_timer(self) -> None:
        self.schedule_with_fixed_delay(_TIMER, self.d, self.d)

    def pre_start(self) -> None:
        self._restart_timer()
        self.pull(self.in_)

    def _next_element(self, elem) -> None:
        try:
            cost = self.cost(elem)
        except Exception as exc:
            d = decide(self.decider, exc)
            if d == Supervision.STOP:
                self.fail_stage(exc)
            else:
                if d == Supervision.RESTART:
                    self.reset_state()
                    self._restart_timer()
                if not self.has_been_pulled(self.in_):
                    self.pull(self.in_)
            return
        self.group_emitted = False
        if cost < 0:
            self.fail_stage(ValueError(f"Negative weight [{cost}] for element [{elem!r}] is not allowed"))
            return
        self.has_elements = True
        if self._ts is not None:
            self._held(self._ts, self.total_weight + cost <= self.max_weight
                       and self.total_number + 1 <= self.max_number or self.total_weight == 0 and self.total_number == 0)
        if self.total_weight + cost <= self.max_weight and self.total_number + 1 <= self.max_number:
            self.group.append(elem)
            self.total_weight += cost
            self.total_number += 1
            if self.total_weight < self.max_weight and self.total_number < self.max_number:
                self.pull(self.in_)
            elif not self.is_available(self.out):
                self.push_eagerly = True
                self.pull(self.in_)
            else:
                self._restart_timer()
                self._emit_group()
        else:
            if self.total_weight == 0 and self.total_number == 0:
                self.group.append(elem)
                self.total_weight += cost
                self.total_number += 1
                self.push_eagerly = True
            else:
                self.pending = elem
                self.pending_weight = cost
            self._restart_timer()
            self._try_close_group()

    def _held(self, ts, into_group: bool) -> None:
        """Event time: an element is kept (in the group or as pending); hold the watermark at the smallest
        timestamp kept, so no watermark overtakes an element still inside (spec: holding stages)."""
        if into_group:
            if self.group_ts is None or ts < self.group_ts:
                self.group_ts = ts
            if self.group_max is None or ts > self.group_max:
                self.group_max = ts
        else:
            self.pending_ts = ts
        self.hold_watermark_for((self.group_ts, self.pending_ts))

    def _group_out(self) -> None:
        """Event time: the group went downstream; what stays is the pending element (if any)."""
        if self.group_ts is not None or self.pending_ts is not None:
            self.group_ts = self.group_max = self.pending_ts
            self.pending_ts = None
            self.hold_watermark_for((self.group_ts,))

    def reset_state(self) -> None:
        if self.group_ts is not None or self.pending_ts is not None:
            self.group_ts = self.pending_ts = self.group_max = None
            self.release_watermark_hold()
        self.group = []
        self.pending = _NONE
        self.pending_weight = 0
        self.push_eagerly = False
        self.group_emitted = True
        self.total_weight = 0
        self.total_number = 0
        self.has_elements = False

    def _try_close_group(self) -> None:
        if self.is_available(self.out):
            self._emit_group()
        elif self.pending is not _NONE or self.finished:
            self.push_eagerly = True

    def _emit_group(self) -> None:
        self.group_emitted = True
        group = self.group
        self.group = []
        self.push(self.out, group, self.group_max)
        self._group_out()
        if self.finished:
            if self.pending is not _NONE:
                pending, self.pending = self.pending, _NONE
                self.emit(self.out, [pending], self.complete_stage, self.group_max)
            else:
                self.complete_stage()
        else:
            self._start_new_group()

    def _start_new_group(self) -> None:
        if self.pending is not _NONE:
            self.total_weight = self.pending_weight
            self.total_number = 1
            self.pending_weight = 0
            self.group.append(self.pending)
            self.pending = _NONE
            self.group_emitted = False
        else:
            self.total_weight = 0
            self.total_number = 0
            self.has_elements = False
        self.push_eagerly = False
        if self.is_available(self.in_):
            self._next_element(self.grab(self.in_))
        elif not self.has_been_pulled(self.in_) and not self.is_closed(self.in_):
            self.pull(self.in_)

    def on_push(self) -> None:
        if self.pending is _NONE:
            self._next_element(self.grab(self.in_))
        # else: keep the element in the port for the next group

    def on_pull(self) -> None:
        if self.push_eagerly:
            self._emit_group()

    def on_upstream_finish(self) -> None:
        self.finished = True
        if self.group_emitted:
            self.complete_stage()
        else:
            self._try_close_group()

    def on_timer(self, key) -> None:
        if self.has_elements:
            if self.is_available(self.out):
                self._emit_group()
            else:
                self.push_eagerly = True
