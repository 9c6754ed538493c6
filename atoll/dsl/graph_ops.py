"""GraphOps: the Flow/Source shortcuts that build small graphs around a junction (Pekko's
``merge``, ``zip``, ``concat``, ``also_to`` ...).

Each takes the other Source (or Sink) and an optional ``combine`` for the materialized values
(``combine(this, other)``, default ``Keep.left``, like Pekko's ``xxxMat`` variants).
"""
from __future__ import annotations

from typing import Any, Callable

from ..stage.shapes import FlowShape
from .graph_dsl import GraphDSL
from .keep import Keep


class GraphOps:
    """Mixin for Source and Flow (which provide ``via_mat``)."""

    __slots__ = ()

    # ------------------------------------------------------------------ helpers
    def _with_other_input(self, junction, other, this_port: int, other_port: int, combine):
        from .flow import Flow

        def build(b, that):
            j = b.add(junction)
            b.connect(that.outlets[0], j.inlets[other_port])
            return FlowShape(j.inlets[this_port], j.outlets[0])

        return self.via_mat(Flow.from_graph(GraphDSL.create(build, other)), combine)

    def _with_side_output(self, junction, sink, main_port: int, side_port: int, combine):
        from .flow import Flow

        def build(b, s):
            j = b.add(junction)
            b.connect(j.outlets[side_port], s.inlets[0])
            return FlowShape(j.inlets[0], j.outlets[main_port])

        return self.via_mat(Flow.from_graph(GraphDSL.create(build, sink)), combine)

    # ------------------------------------------------------------------ fan-in
    def merge(self, other, eager_complete: bool = False, combine: Callable[[Any, Any], Any] = Keep.left):
        """Elements of this and ``other`` as they arrive (``Merge(2)``)."""
        from .._impl.ops.fan_in import Merge

        return self._with_other_input(Merge(2, eager_complete=eager_complete), other, 0, 1, combine)

    def merge_sorted(self, other, combine: Callable[[Any, Any], Any] = Keep.left):
        """Merge two sorted streams into one sorted stream (``MergeSorted``)."""
        from .._impl.ops.fan_in import MergeSorted

        return self._with_other_input(MergeSorted(), other, 0, 1, combine)

    def zip(self, other, combine: Callable[[Any, Any], Any] = Keep.left):
        """Pairs ``(this, other)`` (``Zip``)."""
        from .._impl.ops.fan_in import Zip

        return self._with_other_input(Zip(), other, 0, 1, combine)

    def zip_with(self, other, fn: Callable[[Any, Any], Any], combine: Callable[[Any, Any], Any] = Keep.left):
        """``fn(this, other)`` for each pair (``ZipWith``)."""
        from .._impl.ops.fan_in import ZipWith

        return self._with_other_input(ZipWith(fn, 2), other, 0, 1, combine)

    def zip_latest(self, other, combine: Callable[[Any, Any], Any] = Keep.left):
        """Pairs of the latest elements of both, each time either emits (``ZipLatest``)."""
        from .._impl.ops.fan_in import ZipLatest

        return self._with_other_input(ZipLatest(), other, 0, 1, combine)

    def concat(self, other, combine: Callable[[Any, Any], Any] = Keep.left):
        """This stream's elements, then ``other``'s (``Concat(2)``)."""
        from .._impl.ops.fan_in import Concat

        return self._with_other_input(Concat(2), other, 0, 1, combine)

    def prepend(self, other, combine: Callable[[Any, Any], Any] = Keep.left):
        """``other``'s elements, then this stream's."""
        from .._impl.ops.fan_in import Concat

        return self._with_other_input(Concat(2), other, 1, 0, combine)

    def interleave(self, other, segment_size: int, eager_close: bool = False, combine: Callable[[Any, Any], Any] = Keep.left):
        """``segment_size`` elements from this, then from ``other``, and so on (``Interleave(2)``)."""
        from .._impl.ops.fan_in import Interleave

        return self._with_other_input(Interleave(2, segment_size, eager_close=eager_close), other, 0, 1, combine)

    def or_else(self, other, combine: Callable[[Any, Any], Any] = Keep.left):
        """This stream, or ``other`` if this one completes without any element (``OrElse``)."""
        from .._impl.ops.fan_in import OrElse

        return self._with_other_input(OrElse(), other, 0, 1, combine)

    # ------------------------------------------------------------------ fan-out
    def also_to(self, sink, combine: Callable[[Any, Any], Any] = Keep.left):
        """Every element also goes to ``sink`` (``Broadcast(2, eager_cancel=True)``)."""
        from .._impl.ops.fan_out import Broadcast

        return self._with_side_output(Broadcast(2, eager_cancel=True), sink, 0, 1, combine)

    def also_to_all(self, *sinks):
        """Every element also goes to each of ``sinks``."""
        from .._impl.ops.fan_out import Broadcast
        from .flow import Flow

        if not sinks:
            return self

        def build(b, *shapes):
            bc = b.add(Broadcast(len(shapes) + 1, eager_cancel=True))
            for i, s in enumerate(shapes):
                b.connect(bc.outlets[i + 1], s.inlets[0])
            return FlowShape(bc.inlets[0], bc.outlets[0])

        return self.via(Flow.from_graph(GraphDSL.create(build, *sinks)))

    def divert_to(self, sink, pred: Callable[[Any], bool], combine: Callable[[Any, Any], Any] = Keep.left):
        """Elements for which ``pred`` holds go to ``sink`` instead of downstream."""
        from .._impl.ops.base import require_callable
        from .._impl.ops.fan_out import Partition

        require_callable("divert_to", "pred", pred)
        return self._with_side_output(
            Partition(2, lambda x: 1 if pred(x) else 0, eager_cancel=True), sink, 0, 1, combine
        )

    def wire_tap(self, sink, combine: Callable[[Any, Any], Any] = Keep.left):
        """Every element also goes to ``sink`` if it is ready for it; otherwise the tap misses it
        (the main stream is never slowed down by the tap)."""
        from .._impl.ops.wire_tap import WireTap

        return self._with_side_output(WireTap(), sink, 0, 1, combine)

    # ------------------------------------------------------------------ streaming recursion
    def recursively(self, op: Callable[[Any], Any], max_pending: int = 1024):
        """Streaming recursion (KIP-1113 style): emits every upstream element and every element that
        ``op`` produces, and feeds each produced element back into ``op``. ``op`` builds the step
        from a Flow (``lambda s: s.filter(...).map(...)``). Completes when upstream completed and no
        element is left in flight inside the loop. See ``atoll._impl.ops.recursion``."""
        from .._impl.ops.recursion import Recursively

        return self.via(Recursively.flow(op, max_pending))
