"""on_error_complete: turn a matching upstream failure into completion (Pekko's ``onErrorComplete``)."""
from __future__ import annotations

from typing import Any, Callable, Optional, Union

from .base import FlowLogic, FlowStage


def _matcher(pred: Any) -> Callable[[BaseException], bool]:
    if pred is None:
        return lambda exc: True
    if isinstance(pred, type):
        if issubclass(pred, BaseException):
            return lambda exc: isinstance(exc, pred)
        raise TypeError(f"on_error_complete: argument 'pred' must be an exception class, got {pred!r}")
    if isinstance(pred, tuple) and pred and all(isinstance(t, type) and issubclass(t, BaseException) for t in pred):
        return lambda exc: isinstance(exc, pred)
    if callable(pred):
        return pred
    raise TypeError("on_error_complete: argument 'pred' must be None, an exception class, a tuple of exception "
                    f"classes or a callable, got {pred!r}")


class OnErrorComplete(FlowStage):
    """Completes instead of failing when upstream fails with an exception that ``pred`` accepts:
    ``None`` accepts every exception, an exception class (or tuple of classes) those that are instances
    of it (Pekko's ``onErrorComplete[T]()``), a callable those for which ``pred(exc)`` is true (Pekko's
    partial function answering true). Other failures go on downstream; what ``pred`` raises fails the
    stream with that exception. Elements overtaken by the failure signal are not recovered.

    **Emits when** an element is available from upstream. **Backpressures when** downstream
    backpressures. **Completes when** upstream completes, or fails with an accepted exception.
    **Cancels when** downstream cancels."""

    def __init__(self, pred: Union[None, type, tuple, Callable[[BaseException], bool]] = None):
        self.matches = _matcher(pred)
        super().__init__("on_error_complete")

    def create_logic(self, attributes):
        return _OnErrorCompleteLogic(self)


class _OnErrorCompleteLogic(FlowLogic):
    stateless = True

    def __init__(self, stage: OnErrorComplete):
        super().__init__(stage)
        self.matches = stage.matches

    def on_push(self):
        self.push(self.out, self.grab(self.in_))

    def on_upstream_failure(self, exc):
        try:
            accepted = self.matches(exc)
        except Exception as e:  # noqa: BLE001 - the predicate's own failure fails the stream
            self.fail_stage(e)
            return
        if accepted:
            self.complete_stage()
        else:
            self.fail_stage(exc)
