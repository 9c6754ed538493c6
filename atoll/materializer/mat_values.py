"""Materialized values that are not known yet when the traversal is walked.

An island hosted elsewhere (a Ray actor) reports its stages' values only after it started. The
materializer still runs the traversal's stack language in its one pass; a ``Transform``/``Compose``
that meets a ``PendingValue`` is recorded as a ``DeferredValue`` and evaluated once every pending
value is resolved. For in-process islands nothing is pending and the functions run immediately.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple


class PendingValue:
    """The not-yet-known materialized value of stage ``key`` (an opaque, hashable id)."""

    __slots__ = ("key",)

    def __init__(self, key):
        self.key = key

    def __repr__(self):
        return f"PendingValue({self.key!r})"


class DeferredValue:
    """``fn(*args)`` to be computed once the pending values among ``args`` are known; computed once
    (the result is kept), however many values refer to it."""

    __slots__ = ("fn", "args", "done", "result")

    def __init__(self, fn: Callable, args: Tuple[Any, ...]):
        self.fn = fn
        self.args = args
        self.done = False
        self.result = None


def is_pending(value: Any) -> bool:
    t = type(value)
    return t is PendingValue or t is DeferredValue


def apply(fn: Callable, *args: Any) -> Any:
    """``fn(*args)`` now, or a ``DeferredValue`` if an argument is still pending."""
    for a in args:
        if is_pending(a):
            return DeferredValue(fn, args)
    return fn(*args)


def resolve(value: Any, known: Dict[Any, Any]) -> Any:
    """Evaluate ``value`` with ``known`` mapping pending keys to their values."""
    t = type(value)
    if t is PendingValue:
        return known[value.key]
    if t is DeferredValue:
        if not value.done:
            value.result = value.fn(*(resolve(a, known) for a in value.args))
            value.done = True
        return value.result
    return value


def keep_every(value: Any, deferred: List[DeferredValue]) -> Any:
    """``value``, made to evaluate every one of ``deferred`` too when it is resolved: a function of the
    traversal (``map_materialized_value``, a ``Keep`` combiner) runs even when ``Keep.none`` or
    ``Keep.left`` drops its result, as in Pekko. Evaluated in recording order, then ``value``."""
    if not deferred:
        return value
    return DeferredValue(_last, tuple(deferred) + (value,))


def _last(*values: Any) -> Any:
    return values[-1]
