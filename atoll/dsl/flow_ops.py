"""FlowOps: the operators shared by Source and Flow (Pekko's ``FlowOps``).

Each method builds the operator's stage (validating its arguments right away, so mistakes surface
when the blueprint is built) and appends it with ``via``; the result is a new Source or Flow.
"""
from __future__ import annotations

import operator
from typing import Any, Callable, Iterable, Optional, Tuple

from .._impl.ops.aggregate import Fold, Grouped, Reduce, Scan, Sliding
from .._impl.ops.buffer import Buffer, OverflowStrategy
from .._impl.ops.recovery import MapError, Recover
from .._impl.ops.sequence import DropRepeated, Intersperse, Log, ZipWithIndex
from .._impl.ops.slicing import Drop, DropWhile, Limit, Take, TakeWhile
from .._impl.ops.termination import WatchTermination
from .._impl.ops.transform import Filter, Map, MapConcat, StatefulMap, StatefulMapConcat

_UNSET = object()


class FlowOps:
    """Mixin; subclasses implement ``via``/``via_mat`` returning their own kind."""

    __slots__ = ()

    def _stage(self, stage):
        from .flow import Flow

        return self.via(Flow.from_graph(stage))

    def _stage_mat(self, stage, combine):
        from .flow import Flow

        return self.via_mat(Flow.from_graph(stage), combine)

    # ------------------------------------------------------------------ element-wise
    def map(self, fn: Callable[[Any], Any]):
        """Transform each element with ``fn``."""
        return self._stage(Map(fn))

    def filter(self, pred: Callable[[Any], bool]):
        """Keep the elements for which ``pred`` is true."""
        return self._stage(Filter(pred))

    def filter_not(self, pred: Callable[[Any], bool]):
        """Drop the elements for which ``pred`` is true."""
        return self._stage(Filter(pred, negate=True))

    def map_concat(self, fn: Callable[[Any], Iterable[Any]]):
        """Replace each element by the elements of the iterable ``fn(elem)``."""
        return self._stage(MapConcat(fn))

    def stateful_map(self, create: Callable[[], Any], fn: Callable[[Any, Any], Tuple[Any, Any]], on_complete: Optional[Callable[[Any], Any]] = None):
        """Map with state: ``fn(state, elem) -> (state, out)``; ``out`` of None emits nothing."""
        return self._stage(StatefulMap(create, fn, on_complete))

    def stateful_map_concat(self, factory: Callable[[], Callable[[Any], Iterable[Any]]]):
        """``map_concat`` with a fresh function from ``factory()`` per materialization."""
        return self._stage(StatefulMapConcat(factory))

    # ------------------------------------------------------------------ aggregating
    def scan(self, zero: Any, fn: Callable[[Any, Any], Any]):
        """Emit ``zero`` and every intermediate ``fn(acc, elem)``."""
        return self._stage(Scan(zero, fn))

    def fold(self, zero: Any, fn: Callable[[Any, Any], Any]):
        """Emit the final ``fn(acc, elem)`` when upstream completes."""
        return self._stage(Fold(zero, fn))

    def reduce(self, fn: Callable[[Any, Any], Any]):
        """Like ``fold`` seeded with the first element."""
        return self._stage(Reduce(fn))

    def grouped(self, n: int):
        """Lists of ``n`` elements (the last may be shorter)."""
        return self._stage(Grouped(n))

    def sliding(self, n: int, step: int = 1):
        """Windows of ``n`` elements moving by ``step``."""
        return self._stage(Sliding(n, step))

    # ------------------------------------------------------------------ slicing
    def take(self, n: int):
        """The first ``n`` elements."""
        return self._stage(Take(n))

    def take_while(self, pred: Callable[[Any], bool], inclusive: bool = False):
        """Elements while ``pred`` holds (and the first failing one if ``inclusive``)."""
        return self._stage(TakeWhile(pred, inclusive))

    def drop(self, n: int):
        """Skip the first ``n`` elements."""
        return self._stage(Drop(n))

    def drop_while(self, pred: Callable[[Any], bool]):
        """Skip elements while ``pred`` holds."""
        return self._stage(DropWhile(pred))

    def limit(self, n: int):
        """Fail with ``StreamLimitReachedError`` if more than ``n`` elements arrive."""
        return self._stage(Limit(n))

    def limit_weighted(self, n: int, cost: Callable[[Any], int]):
        """Fail with ``StreamLimitReachedError`` once the total ``cost`` exceeds ``n``."""
        return self._stage(Limit(n, cost))

    # ------------------------------------------------------------------ sequence shaping
    def intersperse(self, *args: Any):
        """``intersperse(inject)`` or ``intersperse(start, inject, end)``."""
        if len(args) == 1:
            return self._stage(Intersperse(None, args[0], None))
        if len(args) == 3:
            return self._stage(Intersperse(*args))
        raise TypeError(f"intersperse takes (inject) or (start, inject, end), got {len(args)} arguments")

    def zip_with_index(self):
        """Pair each element with its index: ``(elem, i)``."""
        return self._stage(ZipWithIndex())

    def drop_repeated(self, eq: Callable[[Any, Any], bool] = operator.eq):
        """Drop elements equal to the previous one."""
        return self._stage(DropRepeated(eq))

    def buffer(self, size: int, strategy: OverflowStrategy):
        """A buffer of ``size`` elements with an overflow ``strategy``."""
        return self._stage(Buffer(size, strategy))

    def log(self, name: str, extract: Optional[Callable[[Any], Any]] = None, logger: Optional[Any] = None):
        """Log elements (``extract(elem)``), completion, failure and cancellation to the logger
        ``atoll.log.<name>`` (or ``logger``), at the levels of ``Attributes.log_levels``."""
        return self._stage(Log(name, extract, logger))

    # ------------------------------------------------------------------ errors and termination
    def recover(self, fn: Callable[[BaseException], Any]):
        """On failure emit ``fn(exc)`` and complete (``fn`` raising fails the stream)."""
        return self._stage(Recover(fn))

    def recover_with_retries(self, attempts: int, fn: Callable[[BaseException], Any]):
        """On failure switch to the Source ``fn(exc)``, at most ``attempts`` times (-1: unlimited)."""
        from .._impl.ops.recover_with import RecoverWithRetries

        return self._stage(RecoverWithRetries(attempts, fn))

    def map_error(self, fn: Callable[[BaseException], BaseException]):
        """Replace a failure's exception by ``fn(exc)``."""
        return self._stage(MapError(fn))

    def watch_termination(self, combine: Callable[[Any, Any], Any] = None):
        """Materialize a ``Future[Done]`` of this point's termination, combined with the current value
        by ``combine`` (default ``Keep.right``: just the future)."""
        from .keep import Keep

        return self._stage_mat(WatchTermination(), combine if combine is not None else Keep.right)
