"""Supervision: how an operator reacts to an exception thrown by user code (Pekko's ``Supervision``).

A decider maps the exception to ``STOP`` (fail the stream, the default), ``RESUME`` (drop the element
and go on) or ``RESTART`` (drop the element, reset the operator's state, go on). Only operators whose
docstring says so consult it.
"""
from __future__ import annotations

from typing import Callable

Decider = Callable[[BaseException], str]


class Supervision:
    STOP = "stop"
    RESUME = "resume"
    RESTART = "restart"

    @staticmethod
    def stopping_decider(exc: BaseException) -> str:
        return Supervision.STOP

    @staticmethod
    def resuming_decider(exc: BaseException) -> str:
        return Supervision.RESUME

    @staticmethod
    def restarting_decider(exc: BaseException) -> str:
        return Supervision.RESTART


def decide(decider: Decider, exc: BaseException) -> str:
    """Run ``decider`` on ``exc``. A decider that raises fails the stage with its own exception;
    one that returns something other than a directive fails it with a ``TypeError`` naming the value."""
    d = decider(exc)
    if d is Supervision.STOP or d is Supervision.RESUME or d is Supervision.RESTART or d in _DIRECTIVES:
        return d
    raise TypeError(f"supervision decider {decider!r} returned {d!r}; expected Supervision.STOP, RESUME or RESTART")


_DIRECTIVES = (Supervision.STOP, Supervision.RESUME, Supervision.RESTART)


def supervise(logic, decider: Decider, exc: BaseException) -> bool:
    """The one supervision branch of the built-in operators, for ``exc`` raised by user code on the
    current element: Stop fails ``logic``'s stage with ``exc`` and returns False; Restart calls
    ``logic.reset_state()`` and returns True; Resume returns True (the caller drops the element)."""
    d = decide(decider, exc)
    if d == Supervision.STOP:
        logic.fail_stage(exc)
        return False
    if d == Supervision.RESTART:
        logic.reset_state()
    return True


def supervise_chunk(logic, exc: BaseException, done: list) -> bool:
    """``supervise`` for ``exc`` raised on one element of a chunk of a one-in one-out ``logic`` (with
    ``decider`` and ``out``): Stop pushes the results made before that element (``done``) and then
    fails, so the failure arrives after them; Resume/Restart (which resets the state) return True and
    the caller drops the element and goes on with the rest of the chunk."""
    d = decide(logic.decider, exc)
    if d == Supervision.STOP:
        if done:
            logic.push(logic.out, done)
        logic.fail_stage(exc)
        return False
    if d == Supervision.RESTART:
        logic.reset_state()
    return True
