"""In/out handlers: the callbacks a stage logic installs on its ports (Pekko's ``InHandler``/``OutHandler``).

A handler is either the logic itself (``class L(GraphStageLogic, InHandler, OutHandler)``), a subclass
instance, or built from plain functions: ``InHandler(on_push=..., on_upstream_finish=...)``. The
defaults follow Pekko: upstream finish completes the stage, upstream failure fails it, downstream
cancel cancels the stage (per its cancellation strategy).
"""
from __future__ import annotations

from typing import Callable, Optional


def _owner(handler):
    from .logic import GraphStageLogic

    if isinstance(handler, GraphStageLogic):
        return handler
    logic = handler.__dict__.get("_logic")
    if logic is None:
        raise TypeError(f"handler {handler!r} is not installed on any stage logic")
    return logic


class InHandler:
    """Callbacks for an inlet: ``on_push``, ``on_upstream_finish``, ``on_upstream_failure``."""

    def __init__(
        self,
        on_push: Optional[Callable[[], None]] = None,
        on_upstream_finish: Optional[Callable[[], None]] = None,
        on_upstream_failure: Optional[Callable[[BaseException], None]] = None,
    ):
        if on_push is not None:
            self.on_push = on_push
        if on_upstream_finish is not None:
            self.on_upstream_finish = on_upstream_finish
        if on_upstream_failure is not None:
            self.on_upstream_failure = on_upstream_failure

    def on_push(self) -> None:
        raise TypeError(f"{type(self).__name__} defines no on_push")

    def on_upstream_finish(self) -> None:
        _owner(self).complete_stage()

    def on_upstream_failure(self, exc: BaseException) -> None:
        _owner(self).fail_stage(exc)


class OutHandler:
    """Callbacks for an outlet: ``on_pull`` and ``on_downstream_finish(cause)``."""

    def __init__(
        self,
        on_pull: Optional[Callable[[], None]] = None,
        on_downstream_finish: Optional[Callable[[BaseException], None]] = None,
    ):
        if on_pull is not None:
            self.on_pull = on_pull
        if on_downstream_finish is not None:
            self.on_downstream_finish = on_downstream_finish

    def on_pull(self) -> None:
        raise TypeError(f"{type(self).__name__} defines no on_pull")

    def on_downstream_finish(self, cause: BaseException) -> None:
        _owner(self).cancel_stage(cause)


class InOutHandler(InHandler, OutHandler):
    """Both handlers in one object (the common case for a one-in, one-out stage)."""

    def __init__(self, **callbacks):
        in_keys = {"on_push", "on_upstream_finish", "on_upstream_failure"}
        InHandler.__init__(self, **{k: v for k, v in callbacks.items() if k in in_keys})
        OutHandler.__init__(self, **{k: v for k, v in callbacks.items() if k not in in_keys})


def _ignore_push() -> None:
    pass


def eager_terminate_input() -> InHandler:
    """Completes/fails the stage when upstream finishes; pushes are ignored."""
    return InHandler(on_push=_ignore_push)


def ignore_terminate_input() -> InHandler:
    """Ignores pushes and upstream completion (the stage decides when to stop); failure fails the stage."""
    return InHandler(on_push=_ignore_push, on_upstream_finish=lambda: None)


def eager_terminate_output() -> OutHandler:
    """Cancels the stage when downstream cancels; pulls are ignored."""
    return OutHandler(on_pull=lambda: None)


def ignore_terminate_output() -> OutHandler:
    """Ignores pulls and downstream cancellation."""
    return OutHandler(on_pull=lambda: None, on_downstream_finish=lambda cause: None)
