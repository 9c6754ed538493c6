"""Error handling operators: recover, recover_with_retries, map_error."""
from __future__ import annotations

from typing import Any, Callable

from .base import FlowLogic, FlowStage, require_callable, require_int

_NONE = object()


class Recover(FlowStage):
    """On upstream failure, emits ``fn(exc)`` as a last element and completes; whatever ``fn``
    raises (for instance the original exception, to not recover it) fails the stream instead.

    **Emits when** upstream emits, or the recovered element when upstream failed.
    **Backpressures when** downstream backpressures. **Completes when** upstream completes, or after
    the recovered element. **Cancels when** downstream cancels."""

    def __init__(self, fn: Callable[[BaseException], Any]):
        require_callable("recover", "fn", fn)
        super().__init__("recover")
        self.fn = fn

    def create_logic(self, attributes):
        fn = self.fn

        class Logic(FlowLogic):
            recovered = _NONE  # the replacement element, once upstream failed, until downstream pulls

            def save_to_snapshot(self):
                return None if self.recovered is _NONE else (self.recovered,)

            def restore_from_snapshot(self, state) -> None:
                if state is not None:
                    self.recovered = state[0]

            def on_push(self):
                self.push(self.out, self.grab(self.in_))

            def on_pull(self):
                if self.recovered is not _NONE:
                    self.push(self.out, self.recovered)
                    self.complete_stage()
                else:
                    self.pull(self.in_)

            def on_upstream_failure(self, exc):
                try:
                    result = fn(exc)
                except Exception as e:  # noqa: BLE001 - fn decides: its exception fails the stream
                    self.fail_stage(e)
                    return
                if result is None:
                    err = TypeError(f"recover: fn returned None for {exc!r}; return an element or raise")
                    err.__cause__ = exc
                    self.fail_stage(err)
                elif self.is_available(self.out):
                    self.push(self.out, result)
                    self.complete_stage()
                else:
                    self.recovered = result

        return Logic(self)


class MapError(FlowStage):
    """Replaces an upstream failure's exception by ``fn(exc)`` (an exception); elements pass unchanged.
    ``fn`` re-raising ``exc`` keeps the failure as it is; any other exception ``fn`` raises fails the
    stream instead; returning something that is not an exception fails it with ``TypeError``.

    **Emits when** upstream emits. **Backpressures when** downstream backpressures.
    **Completes when** upstream completes. **Fails when** upstream fails (with the mapped exception).
    **Cancels when** downstream cancels."""

    def __init__(self, fn: Callable[[BaseException], BaseException]):
        require_callable("map_error", "fn", fn)
        super().__init__("map_error")
        self.fn = fn

    def create_logic(self, attributes):
        fn = self.fn

        class Logic(FlowLogic):
            stateless = True

            def on_push(self):
                self.push(self.out, self.grab(self.in_))

            def on_upstream_failure(self, exc):
                # an exception raised by fn escapes the handler: the interpreter logs it and fails
                # the stage with it (Pekko logs it too, unlike an exception raised in recover)
                mapped = fn(exc)
                if not isinstance(mapped, BaseException):
                    err = TypeError(f"map_error: fn must return an exception, got {mapped!r}")
                    err.__cause__ = exc
                    self.fail_stage(err)
                else:
                    self.fail_stage(mapped)

        return Logic(self)
