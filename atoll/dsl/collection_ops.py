"""CollectionOps: small element and collection operators (collect, fold_while, grouped_weighted ...), resource
and error-completion operators, and their Source/Sink factories."""
from __future__ import annotations

from typing import Any, Callable, Iterable, Optional, Union

from .._impl.ops import collection as C
from .._impl.ops import more_sinks as MK
from .._impl.ops import more_sources as MS
from .._impl.ops.on_error_complete import OnErrorComplete


class CollectionOps:
    """Mixin for Source and Flow."""

    __slots__ = ()

    def collect(self, fn: Callable[[Any], Any]):
        """Emit ``fn(elem)`` for the elements where it is not None (Pekko's ``collect`` with a partial
        function: None means "not defined", the element is dropped)."""
        return self._stage(C.Collect(fn))

    def fold_while(self, zero: Any, pred: Callable[[Any], bool], fn: Callable[[Any, Any], Any]):
        """``fold`` that emits early (and cancels upstream) once ``pred(acc)`` is false."""
        return self._stage(C.FoldWhile(zero, pred, fn))

    def grouped_weighted(self, min_weight: int, cost: Callable[[Any], int]):
        """Lists whose summed ``cost`` reaches ``min_weight`` (the last one may weigh less)."""
        return self._stage(C.GroupedWeighted(min_weight, cost))

    def grouped_adjacent_by(self, fn: Callable[[Any], Any]):
        """Lists of adjacent elements with equal keys ``fn(elem)``."""
        return self._stage(C.GroupedAdjacentBy(fn))

    def grouped_adjacent_by_weighted(self, fn: Callable[[Any], Any], max_weight: int, cost: Callable[[Any], int]):
        """``grouped_adjacent_by`` that also closes a group before it would weigh more than ``max_weight``."""
        return self._stage(C.GroupedAdjacentBy(fn, max_weight, cost))

    def take_last(self, n: int):
        """At completion, emit the last ``n`` elements as one list (``[]`` for an empty stream)."""
        return self._stage(C.TakeLast(n))

    def on_error_complete(self, pred: Union[None, type, tuple, Callable[[BaseException], bool]] = None):
        """Complete instead of failing when upstream fails with an exception ``pred`` accepts (None: any;
        an exception class or tuple: instances of it; a callable: ``pred(exc)`` true)."""
        return self._stage(OnErrorComplete(pred))

    def map_with_resource(self, create: Callable[[], Any], fn: Callable[[Any, Any], Any],
                          close: Callable[[Any], Any]):
        """Map with a resource made by ``create()`` per materialization: ``fn(resource, elem)`` (None drops
        the element); ``close(resource)`` runs once at completion, failure or cancellation and may
        return a last element to emit (None: nothing)."""
        from .._impl.ops.resource import MapWithResource

        return self._stage(MapWithResource(create, fn, close))


class CollectionSources:
    """Mixin for Source."""

    __slots__ = ()

    @staticmethod
    def cycle(factory: Callable[[], Iterable[Any]]):
        """Emit the elements of ``factory()`` over and over (a fresh iterable each cycle); an empty one fails
        the stream with ``ValueError``."""
        from .source import Source

        return Source.from_graph(MS.CycleSource(factory))

    @staticmethod
    def iterate(seed: Any, fn: Callable[[Any], Any], has_next: Optional[Callable[[Any], bool]] = None):
        """Emit ``seed``, ``fn(seed)``, ``fn(fn(seed))`` ... (forever, or while ``has_next(value)``)."""
        from .source import Source

        return Source.from_graph(MS.IterateSource(seed, fn, has_next))

    @staticmethod
    def maybe():
        """Materialize a ``MaybePromise`` (Future-like): ``set_result(x)``/``try_complete(x)`` emits ``x`` and
        completes, with None completes empty, ``set_exception(e)``/``try_fail(e)`` fails; on Ray the driver's
        handle reaches the stage in its island."""
        from .source import Source

        return Source.from_graph(MS.MaybeSource())

    @staticmethod
    def unfold_resource(create: Callable[[], Any], read: Callable[[Any], Any], close: Callable[[Any], Any]):
        """Emit ``read(resource)`` per pull until it returns None, with ``resource = create()`` and
        ``close(resource)`` at the end (Pekko's ``unfoldResource``)."""
        from .._impl.ops.resource import UnfoldResourceSource
        from .source import Source

        return Source.from_graph(UnfoldResourceSource(create, read, close))


class CollectionSinks:
    """Mixin for Sink."""

    __slots__ = ()

    @staticmethod
    def count():
        """``Future[int]``: the number of elements."""
        from .sink import Sink

        return Sink.from_graph(MK.CountSink())

    @staticmethod
    def exists(pred: Callable[[Any], bool]):
        """``Future[bool]``: whether ``pred`` holds for some element (cancels upstream once it did)."""
        from .sink import Sink

        return Sink.from_graph(MK.ExistsSink(pred))

    @staticmethod
    def forall(pred: Callable[[Any], bool]):
        """``Future[bool]``: whether ``pred`` holds for every element (cancels upstream once it did not)."""
        from .sink import Sink

        return Sink.from_graph(MK.ForallSink(pred))

    @staticmethod
    def fold_while(zero: Any, pred: Callable[[Any], bool], fn: Callable[[Any, Any], Any]):
        """``Future`` of ``fold_while``: the fold of the elements, cancelling upstream once ``pred(acc)`` is
        false (Pekko's ``Sink.foldWhile``: ``fold_while`` into ``Sink.head``)."""
        from .flow import Flow
        from .keep import Keep
        from .sink import Sink

        return Flow().fold_while(zero, pred, fn).to_mat(Sink.head(), Keep.right)

    @staticmethod
    def none(pred: Callable[[Any], bool]):
        """``Future[bool]``: whether ``pred`` holds for no element (cancels upstream once it did)."""
        from .sink import Sink

        return Sink.from_graph(MK.NoneSink(pred))

    @staticmethod
    def take_last(n: int):
        """``Future[list]``: the last ``n`` elements."""
        from .sink import Sink

        return Sink.from_graph(MK.TakeLastSink(n))
