"""``Aggregate``: how a window turns its elements into a value (Flink ``AggregateFunction``, Jet
``AggregateOperation``).

``create() -> acc`` makes an empty accumulator, ``add(acc, elem) -> acc`` returns the new accumulator (it may mutate
and return ``acc``), ``merge(a, b) -> acc`` combines two accumulators (it may mutate and return ``a``, never ``b``)
and is needed by sessions and by pane-based sliding windows, ``result(acc)`` makes the emitted value (identity by
default). With ``accumulate=True`` a mutable accumulator is read again at every firing, so ``result`` should copy it
(``collect`` does). The helpers are built from module-level functions so that they pickle.
"""
from __future__ import annotations

import copy
import operator
from functools import partial
from typing import Any, Callable, Optional


def _require_callable(where: str, what: str, fn: Any) -> None:
    if not callable(fn):
        raise TypeError(f"{where}: {what} must be callable, got {type(fn).__name__}")


class _Empty:
    """The accumulator of ``min``/``max``/``reduce`` before the first element (``None`` may be an element)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "EMPTY"

    def __reduce__(self):
        return "EMPTY"


EMPTY = _Empty()


def _zero() -> int:
    return 0


def _count_add(acc: int, _elem: Any) -> int:
    return acc + 1


def _sum_add_fn(fn: Callable, acc: Any, elem: Any) -> Any:
    return acc + fn(elem)


def _empty() -> _Empty:
    return EMPTY


def _none_if_empty(acc: Any) -> Any:
    return None if acc is EMPTY else acc


def _pick_add(better: Callable, fn: Optional[Callable], acc: Any, elem: Any) -> Any:
    value = elem if fn is None else fn(elem)
    return value if acc is EMPTY or better(value, acc) else acc


def _pick_merge(better: Callable, a: Any, b: Any) -> Any:
    if a is EMPTY:
        return b
    if b is EMPTY:
        return a
    return b if better(b, a) else a


def _list_add(acc: list, elem: Any) -> list:
    acc.append(elem)
    return acc


def _list_merge(a: list, b: list) -> list:
    a.extend(b)
    return a


def _fold_create(zero: Any) -> Any:
    return copy.deepcopy(zero)


def _reduce_add(fn: Callable, acc: Any, elem: Any) -> Any:
    return elem if acc is EMPTY else fn(acc, elem)


def _reduce_merge(fn: Callable, a: Any, b: Any) -> Any:
    if a is EMPTY:
        return b
    if b is EMPTY:
        return a
    return fn(a, b)


class Aggregate:
    """The four functions of a window aggregation; see the module docstring for their contract."""

    __slots__ = ("create", "add", "merge", "result", "name", "_pure")

    def __init__(self, create: Callable[[], Any], add: Callable[[Any, Any], Any],
                 merge: Optional[Callable[[Any, Any], Any]] = None, result: Optional[Callable[[Any], Any]] = None,
                 *, name: str = "Aggregate"):
        _require_callable(name, "create", create)
        _require_callable(name, "add", add)
        if merge is not None:
            _require_callable(name, "merge", merge)
        if result is not None:
            _require_callable(name, "result", result)
        self.create = create
        self.add = add
        self.merge = merge
        self.result = result
        self.name = name
        # the helpers whose add and merge never mutate an accumulator (they return a new one, or one of their
        # arguments): the pane FIFO may then hold and combine accumulators without fresh copies
        self._pure = False

    def _pure_helper(self) -> "Aggregate":
        self._pure = True
        return self

    def __repr__(self) -> str:
        return f"<{self.name}{'' if self.merge is not None else ' (no merge)'}>"

    # -------------------------------------------------------------------------------------------- helpers
    @staticmethod
    def count() -> "Aggregate":
        """The number of elements."""
        return Aggregate(_zero, _count_add, operator.add, name="Aggregate.count")._pure_helper()

    @staticmethod
    def sum(fn: Optional[Callable[[Any], Any]] = None) -> "Aggregate":
        """The sum of the elements, or of ``fn(elem)``; 0 for none."""
        if fn is None:
            return Aggregate(_zero, operator.add, operator.add, name="Aggregate.sum")._pure_helper()
        _require_callable("Aggregate.sum", "fn", fn)
        return Aggregate(_zero, partial(_sum_add_fn, fn), operator.add, name="Aggregate.sum")._pure_helper()

    @staticmethod
    def min(fn: Optional[Callable[[Any], Any]] = None) -> "Aggregate":
        """The smallest element, or smallest ``fn(elem)`` (the value, not the element); ``None`` for none."""
        if fn is not None:
            _require_callable("Aggregate.min", "fn", fn)
        return Aggregate(_empty, partial(_pick_add, operator.lt, fn), partial(_pick_merge, operator.lt),
                         _none_if_empty, name="Aggregate.min")._pure_helper()

    @staticmethod
    def max(fn: Optional[Callable[[Any], Any]] = None) -> "Aggregate":
        """The largest element, or largest ``fn(elem)`` (the value, not the element); ``None`` for none."""
        if fn is not None:
            _require_callable("Aggregate.max", "fn", fn)
        return Aggregate(_empty, partial(_pick_add, operator.gt, fn), partial(_pick_merge, operator.gt),
                         _none_if_empty, name="Aggregate.max")._pure_helper()

    @staticmethod
    def collect() -> "Aggregate":
        """The elements as a list in arrival order; merged accumulators (sessions, sliding panes) are concatenated in
        start order (later elements follow). Each result is a copy."""
        return Aggregate(list, _list_add, _list_merge, list, name="Aggregate.collect")

    @staticmethod
    def fold(zero: Any, fn: Callable[[Any, Any], Any], merge: Optional[Callable[[Any, Any], Any]] = None
             ) -> "Aggregate":
        """``fn(acc, elem)`` from a deep copy of ``zero`` per window; sessions and panes need ``merge``."""
        _require_callable("Aggregate.fold", "fn", fn)
        if merge is not None:
            _require_callable("Aggregate.fold", "merge", merge)
        return Aggregate(partial(_fold_create, zero), fn, merge, name="Aggregate.fold")

    @staticmethod
    def reduce(fn: Callable[[Any, Any], Any]) -> "Aggregate":
        """``fn`` applied pairwise from the first element; ``fn`` must be associative (it also merges)."""
        _require_callable("Aggregate.reduce", "fn", fn)
        return Aggregate(_empty, partial(_reduce_add, fn), partial(_reduce_merge, fn), _none_if_empty,
                         name="Aggregate.reduce")
