"""EventTimeOps: the event-time operators of Source and Flow - timestamp assigners and windows.

Timestamps travel beside the elements (user functions never see them); watermarks travel on the signal
lane. A watermark ``W`` says no element with a timestamp ``< W`` follows; windows are half-open
``[start, end)`` and fire at the first watermark ``>= end``. See DESIGN.md (event time) for the rules.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from ..stage.shapes import FlowShape
from ..windowing import Aggregate, Session, Sliding, Tumbling
from .graph_dsl import GraphDSL
from .keep import Keep


class EventTimeOps:
    """Mixin for Source and Flow (which provide ``via`` / ``via_mat``)."""

    __slots__ = ()

    # ------------------------------------------------------------------ timestamps and watermarks
    def with_timestamps(self, ts_fn: Callable[[Any], Any], *, max_out_of_orderness=0,
                        idle_timeout: Optional[float] = None, watermark_granularity=None,
                        partition: Optional[Callable[[Any], Any]] = None):
        """Stamp each element with ``ts_fn(elem)`` (an int or float, e.g. epoch milliseconds) and emit the
        watermark ``max timestamp seen - max_out_of_orderness`` after each element that raises it.
        ``partition=fn``: one generator per partition, the watermark is the minimum over the active ones;
        ``idle_timeout`` (seconds): a partition without elements for that long stops holding the watermark
        back, and an ``Idle`` marker goes downstream once all are idle; ``watermark_granularity=g``: emit
        only multiples of ``g``. Replaces any timestamps and watermarks from upstream."""
        from .._impl.ops.timestamps import WithTimestamps

        return self.via(_flow(WithTimestamps(ts_fn, max_out_of_orderness, idle_timeout, watermark_granularity,
                                             partition)))

    def with_watermarks(self, ts_fn: Callable[[Any], Any], watermark_fn: Callable[[Any, Any], Any]):
        """Stamp each element with ``ts_fn(elem)`` and emit ``watermark_fn(elem, ts)`` after it when that is
        not None and grows (punctuated watermarks)."""
        from .._impl.ops.timestamps import WithWatermarks

        return self.via(_flow(WithWatermarks(ts_fn, watermark_fn)))

    # ------------------------------------------------------------------ windows
    def tumbling_window(self, size, *, key: Optional[Callable[[Any], Any]] = None, offset=0, **options):
        """Fixed windows ``[offset + k*size, +size)`` per key; emits ``Window`` records; materializes
        ``WindowStats``. Options: see ``window``."""
        return self.window(Tumbling(size, offset, where="tumbling_window"), key=key, _name="tumbling_window",
                           **options)

    def sliding_window(self, size, slide, *, key: Optional[Callable[[Any], Any]] = None, offset=0, **options):
        """Windows of ``size`` every ``slide`` (``0 < slide <= size``) per key; with ``Aggregate.merge`` one
        accumulator per pane, so the cost per element does not grow as the slide shrinks."""
        return self.window(Sliding(size, slide, offset, where="sliding_window"), key=key, _name="sliding_window",
                           **options)

    def session_window(self, gap, *, key: Optional[Callable[[Any], Any]] = None, **options):
        """Sessions per key: an element opens ``[ts, ts + gap)`` and merges with every session it overlaps
        (sessions exactly ``gap`` apart stay apart); needs an aggregate with ``merge``."""
        return self.window(Session(gap, where="session_window"), key=key, _name="session_window", **options)

    def window(self, spec, *, key: Optional[Callable[[Any], Any]] = None, aggregate: Optional[Aggregate] = None,
               allowed_lateness=0, accumulate: bool = True, early_count: Optional[int] = None,
               early_every: Optional[float] = None, late_to=None, combine: Callable[[Any, Any], Any] = Keep.left,
               on_late: str = "drop", max_open_windows: Optional[int] = None, _name: str = "window"):
        """Event-time windows of ``spec`` (``Tumbling``, ``Sliding`` or ``Session``) per ``key`` (None: one
        key), aggregated by ``aggregate`` (default ``Aggregate.collect()``). A window fires on time at the
        first watermark ``>= end``; an element for an already fired window that is not yet expired
        (``end + allowed_lateness > W``) fires it again as ``late``; an element whose windows all expired
        is dropped (``on_late="drop"``, counted), sent as ``Late`` to ``late_to`` (a Sink; ``combine`` joins
        its materialized value with the ``WindowStats``), or fails the stream (``on_late="fail"``).
        ``accumulate=False`` emits only what arrived since the previous firing; ``early_count=n`` /
        ``early_every=s`` add early firings every n elements / s seconds. ``max_open_windows`` fails with
        ``TooManyWindowsError`` instead of growing without bound. The materialized value is the live
        ``WindowStats`` (this operator's value replaces the one upstream, as ``watch_termination`` does)."""
        from .._impl.ops.window import WindowStage
        from .flow import Flow

        if aggregate is None:
            aggregate = Aggregate.collect()
        if late_to is not None and on_late == "fail":
            raise ValueError(f"{_name}: late_to and on_late='fail' contradict each other; choose one")
        if late_to is not None and not callable(combine):
            raise TypeError(f"{_name}: combine must be callable, got {combine!r}")
        stage = WindowStage(_name, spec, key, aggregate, allowed_lateness=allowed_lateness, accumulate=accumulate,
                            early_count=early_count, early_every=early_every, on_late=on_late,
                            max_open_windows=max_open_windows, late_port=late_to is not None)
        if late_to is None:
            return self.via_mat(Flow.from_graph(stage), Keep.right)

        def build(b, w, late_sink):
            b.connect(w.outlets[1], late_sink.inlets[0])
            return FlowShape(w.inlets[0], w.outlets[0])

        return self.via_mat(Flow.from_graph(GraphDSL.create(build, stage, late_to, combine=combine)), Keep.right)


def _flow(stage):
    from .flow import Flow

    return Flow.from_graph(stage)
