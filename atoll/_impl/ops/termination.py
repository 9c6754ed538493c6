"""watch_termination: a pass-through that materializes a future of the stream's termination."""
from __future__ import annotations

from ...errors import NonFailureCancellation, abrupt_termination
from ...markers import Done
from .base import FlowLogic, FlowStage, complete_promise, fail_promise, new_promise


class WatchTermination(FlowStage):
    """Passes elements on unchanged; its ``Future[Done]`` completes when upstream completes or
    downstream cancels without failure, and fails with the cause of a failure (or a failing cancel).

    **Emits when** upstream emits. **Backpressures when** downstream backpressures.
    **Completes when** upstream completes. **Cancels when** downstream cancels."""

    def __init__(self):
        super().__init__("watch_termination")

    def create_logic_and_materialized_value(self, attributes):
        promise = new_promise()

        class Logic(FlowLogic):
            stateless = True

            def on_push(self):
                self.push(self.out, self.grab(self.in_))

            def on_upstream_finish(self):
                complete_promise(promise, Done)
                self.complete_stage()

            def on_upstream_failure(self, exc):
                fail_promise(promise, exc)
                self.fail_stage(exc)

            def on_downstream_finish(self, cause):
                if isinstance(cause, NonFailureCancellation):
                    complete_promise(promise, Done)
                else:
                    fail_promise(promise, cause)
                self.cancel_stage(cause)

            def post_stop(self):
                fail_promise(promise, abrupt_termination(self))

        return Logic(self), promise
