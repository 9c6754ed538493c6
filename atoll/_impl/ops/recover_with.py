"""recover_with_retries: on failure, continue with a fresh Source (Pekko's ``recoverWithRetries``)."""
from __future__ import annotations

from typing import Any, Callable

from ...dsl.keep import Keep
from ...stage.handlers import InHandler, OutHandler
from ...stage.substreams import SubSinkInlet, stop_substreams, sub_materialize
from .base import FlowLogic, FlowStage, require_callable


class RecoverWithRetries(FlowStage):
    """On upstream failure, switches to the Source ``fn(exc)`` and goes on emitting its elements; if
    that one fails too, ``fn`` is asked again, at most ``attempts`` times in all (``-1``: unlimited,
    ``0``: never). Whatever ``fn`` raises fails the stream (re-raise ``exc`` to not recover it).

    **Emits when** upstream (or the current recovery source) emits. **Backpressures when**
    downstream backpressures. **Completes when** upstream or the recovery source completes.
    **Cancels when** downstream cancels."""

    def __init__(self, attempts: int, fn: Callable[[BaseException], Any]):
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < -1:
            raise ValueError(f"recover_with_retries: argument 'attempts' must be an int >= -1, got {attempts!r}")
        require_callable("recover_with_retries", "fn", fn)
        super().__init__("recover_with_retries")
        self.attempts = attempts
        self.fn = fn

    def create_logic(self, attributes):
        stage = self

        class Logic(FlowLogic):
            attempt = 0

            def on_push(self):
                self.push(self.out, self.grab(self.in_))

            def on_upstream_failure(self, exc):
                self._on_failure(exc)

            def _on_failure(self, exc):
                if stage.attempts >= 0 and self.attempt >= stage.attempts:
                    self.fail_stage(exc)
                    return
                try:
                    source = stage.fn(exc)
                    from ...dsl.source import Source

                    source = Source.from_graph(source)
                except Exception as e:  # noqa: BLE001 - fn decides: its exception fails the stream
                    self.fail_stage(e)
                    return
                self.attempt += 1
                self._switch_to(source)

            def _switch_to(self, source):
                logic = self
                sub = SubSinkInlet(self, "recover_with_retries.sub")

                class SubHandler(InHandler):
                    def on_push(self):
                        logic.push(logic.out, sub.grab())

                    def on_upstream_finish(self):
                        logic.complete_stage()

                    def on_upstream_failure(self, exc):
                        logic._on_failure(exc)

                class Out(OutHandler):
                    def on_pull(self):
                        sub.pull()

                    def on_downstream_finish(self, cause):
                        sub.cancel(cause)
                        logic.cancel_stage(cause)

                sub.set_handler(SubHandler())
                sub_materialize(self, source.to_mat(sub.sink, Keep.left))
                self.set_handler(self.out, Out())
                if self.is_available(self.out):
                    sub.pull()

            def post_stop(self):
                stop_substreams(self)

        return Logic(self)
