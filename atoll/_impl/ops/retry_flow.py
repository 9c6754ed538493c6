"""RetryFlow's coordinator (Pekko's ``RetryFlowCoordinator``): one element at a time goes through the wrapped
flow; ``decide_retry(in, out)`` returning a new input sends that into the flow again after a backoff."""
from __future__ import annotations

from typing import Any, Callable

from ...errors import IllegalStateError, NonFailureCancellation
from ...stage.attributes import Attributes
from ...stage.graph_stage import GraphStage
from ...stage.handlers import InHandler, OutHandler
from ...stage.ports import Inlet, Outlet
from ...stage.shapes import BidiShape
from ...stage.timers import TimerGraphStageLogic
from .base import require_callable
from .restart import _seconds, backoff_delay

_NOTHING = object()
_RETRY = "RetryCurrentElement"


class RetryFlowCoordinator(GraphStage):
    """The bidi stage that ``RetryFlow.with_backoff`` joins with the wrapped flow: ``external_in ->
    internal_out -> flow -> internal_in -> external_out``.

    Only one element is inside the wrapped flow at a time (it must emit exactly one output per input:
    a second output fails the stream with ``IllegalStateError``, a filtered element hangs it). For each
    output, ``decide_retry(in, out)`` returns ``None`` (emit ``out``) or the input to try next, which
    enters the flow after ``min(max_backoff, min_backoff * 2**n) * (1 + random * random_factor)`` seconds
    (``n`` retries of this element so far); after ``max_retries`` retries the last output is emitted.

    **Emits when** the wrapped flow emits and ``decide_retry`` says no retry (or retries are used up).
    **Backpressures when** downstream backpressures, or an element is in the flow or waiting for its
    retry. **Completes when** upstream completes and no element is in progress. **Cancels when**
    downstream cancels, or the wrapped flow cancels (a plain cancellation waits for the element in
    progress to come out)."""

    def __init__(self, min_backoff: float, max_backoff: float, random_factor: float, max_retries: int,
                 decide_retry: Callable[[Any, Any], Any], rng=None):
        op = "RetryFlow.with_backoff"
        self.min_backoff = _seconds(op, "min_backoff", min_backoff, positive=False)
        self.max_backoff = _seconds(op, "max_backoff", max_backoff, positive=False)
        if self.max_backoff < self.min_backoff:
            raise ValueError(f"{op}: max_backoff must be >= min_backoff, got {max_backoff} < {min_backoff}")
        self.random_factor = _seconds(op, "random_factor", random_factor, positive=False)
        if isinstance(max_retries, bool) or not isinstance(max_retries, int):
            raise TypeError(f"{op}: max_retries must be an int, got {max_retries!r}")
        if max_retries < 0:
            raise ValueError(f"{op}: max_retries must be >= 0, got {max_retries}")
        require_callable(op, "decide_retry", decide_retry)
        self.max_retries = max_retries
        self.decide_retry = decide_retry
        self.rng = rng
        self.external_in = Inlet("RetryFlow.externalIn")
        self.internal_out = Outlet("RetryFlow.internalOut")
        self.internal_in = Inlet("RetryFlow.internalIn")
        self.external_out = Outlet("RetryFlow.externalOut")
        self.shape = BidiShape(self.external_in, self.internal_out, self.internal_in, self.external_out)
        self.initial_attributes = Attributes.name("retry_flow")

    def create_logic(self, attributes):
        return _CoordinatorLogic(self)


class _CoordinatorLogic(TimerGraphStageLogic):
    def __init__(self, stage: RetryFlowCoordinator):
        super().__init__(stage.shape)
        self.stage = stage
        self.ext_in, self.int_out = stage.external_in, stage.internal_out
        self.int_in, self.ext_out = stage.internal_in, stage.external_out
        self.in_progress = _NOTHING
        self.retry_no = 0
        self.set_handler(self.ext_in, InHandler(on_push=self._on_external_push,
                                                on_upstream_finish=self._on_external_finish))
        self.set_handler(self.int_out, OutHandler(on_pull=self._on_internal_pull,
                                                  on_downstream_finish=self._on_internal_cancel))
        self.set_handler(self.int_in, InHandler(on_push=self._on_internal_push))
        self.set_handler(self.ext_out, OutHandler(on_pull=self._on_external_pull))

    def _on_external_push(self):
        elem = self.grab(self.ext_in)
        self.in_progress = elem
        self.retry_no = 0
        self.push(self.int_out, elem)

    def _on_external_finish(self):
        if self.in_progress is _NOTHING:
            self.complete_stage()

    def _on_internal_pull(self):
        if self.in_progress is _NOTHING and not self.has_been_pulled(self.ext_in) and not self.is_closed(self.ext_in):
            self.pull(self.ext_in)

    def _on_internal_cancel(self, cause):
        if self.in_progress is _NOTHING or not isinstance(cause, NonFailureCancellation):
            self.cancel_stage(cause)
        else:
            self.set_keep_going(True)  # the element in progress still comes out

    def _on_internal_push(self):
        result = self.grab(self.int_in)
        current = self.in_progress
        if current is _NOTHING:
            self.fail_stage(IllegalStateError(
                f"inner flow emitted unexpected element {result!r}; the flow must be one-in one-out"))
            return
        if self.retry_no == self.stage.max_retries:
            self._push_external(result)
            return
        try:
            again = self.stage.decide_retry(current, result)
        except Exception as e:  # noqa: BLE001 - decide_retry's failure fails the stream
            self.fail_stage(e)
            return
        if again is None:
            self._push_external(result)
        else:
            self._plan_retry(again)

    def _on_external_pull(self):
        if not self.has_been_pulled(self.int_in):
            self.pull(self.int_in)

    def _push_external(self, result) -> None:
        self.in_progress = _NOTHING
        self.push(self.ext_out, result)
        if self.is_closed(self.ext_in):
            self.complete_stage()
        elif self.is_available(self.int_out):
            self.pull(self.ext_in)

    def _plan_retry(self, elem) -> None:
        s = self.stage
        delay = backoff_delay(self.retry_no, s.min_backoff, s.max_backoff, s.random_factor, s.rng)
        self.in_progress = elem
        self.retry_no += 1
        self.pull(self.int_in)
        self.schedule_once(_RETRY, delay)

    def on_timer(self, key):
        self.push(self.int_out, self.in_progress)
