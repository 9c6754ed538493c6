"""Small custom stages shared by the interpreter-level tests."""
from __future__ import annotations

from typing import Callable

from atoll import Attributes, FlowShape, GraphStage, GraphStageLogic, InHandler, Inlet, OutHandler, Outlet


class Boom(Exception):
    """The test exception (Pekko's ``TE``)."""


def _nothing(*_args) -> None:
    pass


class LinearStage(GraphStage):
    """A one-in one-out stage whose logic is built by ``make_logic(stage)``."""

    def __init__(self, name: str, make_logic: Callable[["LinearStage"], GraphStageLogic]):
        self.in_ = Inlet(f"{name}.in")
        self.out = Outlet(f"{name}.out")
        self.shape = FlowShape(self.in_, self.out)
        self._make_logic = make_logic
        self._name = name
        self.initial_attributes = Attributes.name(name)

    def create_logic(self, attributes):
        return self._make_logic(self)

    def __repr__(self):
        return self._name


class IdentityLogic(GraphStageLogic, InHandler, OutHandler):
    """Pass-through logic with overridable hooks."""

    def __init__(self, stage: LinearStage):
        super().__init__(stage.shape)
        self.in_ = stage.in_
        self.out = stage.out
        self.set_handlers(stage.in_, stage.out, self)

    def on_push(self):
        self.push(self.out, self.grab(self.in_))

    def on_pull(self):
        self.pull(self.in_)


def pre_start_and_post_stop_identity(
    on_start: Callable[[], None] = _nothing,
    on_stop: Callable[[], None] = _nothing,
    on_upstream_completed: Callable[[], None] = _nothing,
    on_upstream_failed: Callable[[BaseException], None] = _nothing,
) -> LinearStage:
    class Logic(IdentityLogic):
        def pre_start(self):
            on_start()

        def post_stop(self):
            on_stop()

        def on_upstream_finish(self):
            on_upstream_completed()
            super().on_upstream_finish()

        def on_upstream_failure(self, exc):
            on_upstream_failed(exc)
            super().on_upstream_failure(exc)

    return LinearStage("PreStartAndPostStopIdentity", Logic)


def pre_start_failer(throw: Callable[[], None]) -> LinearStage:
    class Logic(IdentityLogic):
        def pre_start(self):
            throw()

    return LinearStage("PreStartFailer", Logic)


def post_stop_failer(throw: Callable[[], None]) -> LinearStage:
    class Logic(IdentityLogic):
        def on_upstream_finish(self):
            self.complete_stage()

        def post_stop(self):
            throw()

    return LinearStage("PostStopFailer", Logic)


def push_finish_stage(on_post_stop: Callable[[], None] = _nothing) -> LinearStage:
    """Pushes the first element and completes the stage right away."""

    class Logic(IdentityLogic):
        def on_push(self):
            self.push(self.out, self.grab(self.in_))
            self.complete_stage()

        def on_upstream_finish(self):
            self.fail_stage(Boom("Cannot happen"))

        def post_stop(self):
            on_post_stop()

    return LinearStage("PushFinish", Logic)


def raise_(exc: BaseException) -> Callable[[], None]:
    def thrower(*_args):
        raise exc

    return thrower


__all__ = [
    "Boom",
    "LinearStage",
    "IdentityLogic",
    "pre_start_and_post_stop_identity",
    "pre_start_failer",
    "post_stop_failer",
    "push_finish_stage",
    "raise_",
]
