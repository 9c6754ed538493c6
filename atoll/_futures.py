"""Promises: the ``concurrent.futures.Future``\\ s that carry materialized values (a sink's result, a
completion) from the stage that fulfils them to whoever holds the value.

A leaf module (it imports nothing of Atoll), so the operators, the interpreter and the driver-side
handles can all share these helpers without importing each other.
"""
from __future__ import annotations

from concurrent.futures import Future, InvalidStateError
from typing import Any


def new_promise() -> Future:
    """A ``concurrent.futures.Future`` already marked running (so callers cannot cancel it)."""
    f: Future = Future()
    f.set_running_or_notify_cancel()
    return f


def complete_promise(promise: Future, value: Any) -> None:
    """Complete ``promise`` with ``value`` unless it is already done."""
    if not promise.done():
        try:
            promise.set_result(value)
        except InvalidStateError:
            pass


def fail_promise(promise: Future, exc: BaseException) -> None:
    """Fail ``promise`` with ``exc`` unless it is already done."""
    if not promise.done():
        try:
            promise.set_exception(exc)
        except InvalidStateError:
            pass


__all__ = ["new_promise", "complete_promise", "fail_promise"]
