"""GraphStageLogic: the per-materialization state machine of a stage (Pekko's ``GraphStageLogic``).

A logic owns one connection per port and talks to the island's interpreter only through those
connections: ``push``/``pull``/``grab`` flip port-state bits and queue one event, nothing more. All
callbacks of one logic run on its island's interpreter thread, so a logic needs no locks; the only
thread-safe entry points are async callbacks (``get_async_callback``) and timers.
"""
from __future__ import annotations

import math
import threading
from concurrent.futures import Future
from typing import Any, Callable, Iterable, Optional

from ..errors import (
    NO_MORE_ELEMENTS_NEEDED,
    STAGE_WAS_COMPLETED,
    IllegalStateError,
    NonFailureCancellation,
    PortStateError,
    StreamDetachedError,
)
from ._connection import (
    GRAB_MASK,
    PULL_MASK,
    PUSH_MASK,
    EMPTY,
    IN_CLOSED,
    IN_FAILED,
    IN_READY,
    KEEP_GOING_FLAG,
    KEEP_GOING_MASK,
    OUT_CLOSED,
    OUT_READY,
    PULLING,
    PULL_START_FLIP,
    PUSHING,
    PUSH_START_FLIP,
    Cancelled,
    Failed,
)
from ..markers import Done
from .attributes import Attributes, CancellationStrategy
from .handlers import InHandler, OutHandler
from ._port_calls import fall_back_to, port_calls
from .ports import Inlet, Outlet
from .shapes import Shape
from .checkpointing import NO_STATE
from .event_clock import NEG_INF, EventClock
from .signals import Signal, Watermark, require_signal

_pending_lock = threading.Lock()
_STOPPED = object()  # GraphStageLogic._feedback once the stage has stopped


# state masks used by the port queries (precomputed: they run per element)
_IN_READY_CLOSED = IN_READY | IN_CLOSED
_IN_READY_FAILED = IN_READY | IN_FAILED
_OUT_READY_CLOSED = OUT_READY | OUT_CLOSED


class GraphStageLogic:
    """Base class of every stage's runtime logic.

    Construct with the stage's shape (``super().__init__(shape)``), install handlers for every port
    with ``set_handler``, then react to ``on_push``/``on_pull`` and friends. Port rules (as Pekko):
    pull an inlet at most once until it is pushed; push an outlet only after ``on_pull``; grab only
    after ``on_push``. Breaking a rule raises ``PortStateError`` naming the stage and port.
    """

    __slots__ = (
        "_in_ports",
        "_out_ports",
        "_in_conns",
        "_out_conns",
        "_in_handlers",
        "_out_handlers",
        "_interpreter",
        "_enqueue",
        "stage_id",
        "_counter",
        "_finalized",
        "_pending_async",
        "_feedback",
        "attributes",
        "stage_name",
        "_alignment",
        "_ts",
        "_event_clock",
        "__weakref__",
        "__dict__",
    )

    #: Chunk regions (``atoll._impl.islands.chunking``): this logic asks upstream for more elements than
    #: downstream asked for (a buffer, a grouping, an aggregation, an eager fan-in, a worker pool), so
    #: the chunks it pulls and pushes can hold more than one element beside element-wise neighbours.
    pulls_ahead = False
    #: Chunk regions: this logic can emit several elements for one it receives (``map_concat``).
    expands = False
    #: Set by a checkpoint restore on a stage that had finished at the cut (a ``checkpoint.snapshot.StageEnd``): the
    #: interpreter never starts it, and its ports are closed again as they were closed then.
    _restored_end = None

    def __init__(self, shape: Optional[Shape] = None, in_count: int = 0, out_count: int = 0):
        if shape is not None:
            ins, outs = shape.inlets, shape.outlets
        else:
            ins, outs = (None,) * in_count, (None,) * out_count
        self._in_ports = ins
        self._out_ports = outs
        self._in_conns = [None] * len(ins)
        self._out_conns = [None] * len(outs)
        self._in_handlers = [None] * len(ins)
        self._out_handlers = [None] * len(outs)
        self._interpreter = None
        self._enqueue = None
        self.stage_id = -1
        self._counter = 0
        self._finalized = False
        self._pending_async = None
        self._feedback = None
        self.attributes = Attributes.none
        self.stage_name = type(self).__name__
        self._alignment = None
        self._ts = None
        self._event_clock = None

    def __repr__(self) -> str:
        return self.stage_name

    # ------------------------------------------------------------------ lifecycle hooks
    def pre_start(self) -> None:
        """Called once, before any port event, on the island's thread."""

    def post_stop(self) -> None:
        """Called once after the stage stopped (all ports closed, or the island was torn down)."""

    # ------------------------------------------------------------------ handlers
    def set_handler(self, port, handler) -> None:
        """Install ``handler`` for ``port`` (an ``InHandler`` for an inlet, ``OutHandler`` for an outlet)."""
        if not isinstance(handler, GraphStageLogic) and hasattr(handler, "__dict__"):
            handler._logic = self  # lets the default callbacks reach this logic
        if isinstance(port, Inlet):
            idx = self._index_of(port, self._in_ports)
            if not hasattr(handler, "on_push"):
                raise TypeError(f"{self}: handler for {port} must be an InHandler, got {handler!r}")
            self._in_handlers[idx] = handler
            conn = self._in_conns[idx]
            if conn is not None:
                conn.set_in_handler(handler)
        elif isinstance(port, Outlet):
            idx = self._index_of(port, self._out_ports)
            if not hasattr(handler, "on_pull"):
                raise TypeError(f"{self}: handler for {port} must be an OutHandler, got {handler!r}")
            self._out_handlers[idx] = handler
            conn = self._out_conns[idx]
            if conn is not None:
                conn.set_out_handler(handler)
        else:
            raise TypeError(f"{self}: set_handler expects an Inlet or Outlet, got {port!r}")

    def set_handlers(self, in_: Inlet, out: Outlet, handler) -> None:
        """Install one object as handler of both ``in_`` and ``out``."""
        self.set_handler(in_, handler)
        self.set_handler(out, handler)

    def get_handler(self, port):
        if isinstance(port, Inlet):
            return self._in_handlers[self._index_of(port, self._in_ports)]
        return self._out_handlers[self._index_of(port, self._out_ports)]

    def _index_of(self, port, ports) -> int:
        i = port.id
        if 0 <= i < len(ports) and (ports[i] is port or ports[i] is None):
            return i
        for j, p in enumerate(ports):
            if p is port:
                return j
        raise ValueError(f"{self}: {port!r} is not a port of this stage's shape")

    # ------------------------------------------------------------------ input ports
    def pull(self, in_: Inlet) -> None:
        """Ask upstream for one element; ``on_push`` follows when it arrives."""
        conn = self._in_conns[in_.id]
        try:
            st = conn.state
        except AttributeError:
            raise self._not_initialized() from None
        # ``==`` first: the plain state costs one comparison (``&`` is not specialized for ints)
        if st == IN_READY or st & PULL_MASK == IN_READY:
            conn.state = st ^ PULL_START_FLIP
            interp = self._interpreter
            if interp.chased is None and not interp.queue:
                interp.chased = conn  # event chasing: the queue's head, dispatched right after this handler
            else:
                self._enqueue(conn)
        else:
            if st & IN_CLOSED:
                raise PortStateError(f"Cannot pull closed port ({in_.name}) of stage {self}")
            if not st & IN_READY:
                raise PortStateError(f"Cannot pull port ({in_.name}) of stage {self} twice")
            # upstream already closed, its close event is queued: just track the pull.
            conn.state = st ^ PULL_START_FLIP

    def try_pull(self, in_: Inlet) -> None:
        """``pull`` unless the port is closed."""
        if not self.is_closed(in_):
            self.pull(in_)

    def grab(self, in_: Inlet) -> Any:
        """Take the element that arrived with ``on_push``."""
        conn = self._in_conns[in_.id]
        try:
            elem = conn.slot
        except AttributeError:
            raise self._not_initialized() from None
        st = conn.state
        if (st == IN_READY or st & GRAB_MASK == IN_READY) and elem is not EMPTY:
            conn.slot = EMPTY
            return elem
        # slow path: the port was completed, failed or cancelled meanwhile
        if not self.is_available(in_):
            raise PortStateError(f"Cannot get element from already empty input port ({in_.name}) of stage {self}")
        if conn.state & IN_FAILED:
            conn.slot = Failed(elem.ex, EMPTY)
            return elem.previous
        conn.slot = EMPTY  # completed, element still waiting
        return elem

    def cancel(self, in_: Inlet, cause: Optional[BaseException] = None) -> None:
        """Tell upstream no more elements are needed (with ``cause``, default ``NoMoreElementsNeeded``)."""
        interp = self._interpreter
        if interp is None:
            raise self._not_initialized()
        interp.cancel(self._in_conns[in_.id], NO_MORE_ELEMENTS_NEEDED if cause is None else cause)

    def is_available(self, port) -> bool:
        """Inlet: an element can be grabbed. Outlet: downstream has pulled and may be pushed to."""
        if isinstance(port, Inlet):
            conn = self._in_conns[port.id]
            st = conn.state
            if st & GRAB_MASK == IN_READY:
                return conn.slot is not EMPTY
            if st & GRAB_MASK == _IN_READY_CLOSED:
                # completed with an element still to grab; a cancelled port has discarded its element
                slot = conn.slot
                return slot is not EMPTY and type(slot) is not Cancelled
            if st & _IN_READY_FAILED == _IN_READY_FAILED:
                slot = conn.slot
                return type(slot) is Failed and slot.previous is not EMPTY
            return False
        return self._out_conns[port.id].state & _OUT_READY_CLOSED == OUT_READY

    def has_been_pulled(self, in_: Inlet) -> bool:
        """True between ``pull(in_)`` and the matching ``on_push``."""
        return self._in_conns[in_.id].state & _IN_READY_CLOSED == 0

    def is_closed(self, port) -> bool:
        if isinstance(port, Inlet):
            return bool(self._in_conns[port.id].state & IN_CLOSED)
        return bool(self._out_conns[port.id].state & OUT_CLOSED)

    # ------------------------------------------------------------------ output ports
    def push(self, out: Outlet, elem: Any, ts: Any = None) -> None:
        """Send ``elem`` downstream; allowed once per ``on_pull``. In a graph with event time the element
        carries ``ts`` if given, else ``current_timestamp`` (the timestamp of the element this stage
        grabbed last); elsewhere ``ts`` is ignored."""
        conn = self._out_conns[out.id]
        try:
            st = conn.state
        except AttributeError:
            raise self._not_initialized() from None
        if (st == OUT_READY or st & PUSH_MASK == OUT_READY) and elem is not None:
            conn.state = st ^ PUSH_START_FLIP
            conn.slot = elem
            interp = self._interpreter
            if interp.chased is None and not interp.queue:
                interp.chased = conn  # event chasing: the queue's head, dispatched right after this handler
            else:
                self._enqueue(conn)
        else:
            if elem is None:
                raise PortStateError(
                    f"Cannot push None to port ({out.name}) of stage {self}: elements must not be None "
                    "(Reactive Streams rule 2.13)"
                )
            if st & OUT_CLOSED:
                raise PortStateError(f"Cannot push closed port ({out.name}) of stage {self}")
            if not st & OUT_READY:
                raise PortStateError(
                    f"Cannot push port ({out.name}) of stage {self} twice, or before it being pulled"
                )
            # downstream cancelled meanwhile: the element is dropped, the state still flips.
            conn.state = st ^ PUSH_START_FLIP

    def complete(self, out: Outlet) -> None:
        """Complete ``out`` (after any pending ``emit`` on it)."""
        interp = self._interpreter
        if interp is None:
            raise self._not_initialized()
        handler = self._out_handlers[out.id]
        if isinstance(handler, _Emitting):
            handler.add_follow_up(_EmittingCompletion(self, out, handler.previous))
        else:
            interp.complete(self._out_conns[out.id])

    def fail(self, out: Outlet, exc: BaseException) -> None:
        """Fail ``out`` with ``exc``."""
        interp = self._interpreter
        if interp is None:
            raise self._not_initialized()
        interp.fail(self._out_conns[out.id], exc)

    def _not_initialized(self) -> IllegalStateError:
        return IllegalStateError(
            f"{self}: not yet initialized: only set_handler is allowed in the GraphStageLogic constructor "
            "(use pre_start for anything that touches ports)"
        )

    # ------------------------------------------------------------------ event time
    @property
    def current_timestamp(self) -> Any:
        """The timestamp of the element grabbed last (None outside event-time graphs or before any)."""
        return self._ts

    def enable_event_time(self) -> None:
        """Carry timestamps beside elements (called by island assembly when the graph has event time).

        ``grab`` then reads the element's timestamp into ``current_timestamp`` and ``push`` stamps the
        element with it (or with its ``ts`` argument). The stamped forms are bound on the instance, so
        graphs without event time keep the plain methods and pay nothing."""
        self.grab = self._grab_stamped
        self.push = self._push_stamped

    def _grab_stamped(self, in_: Inlet) -> Any:
        elem = GraphStageLogic.grab(self, in_)
        self._ts = self._in_conns[in_.id].ts
        return elem

    def _push_stamped(self, out: Outlet, elem: Any, ts: Any = None) -> None:
        GraphStageLogic.push(self, out, elem)
        self._out_conns[out.id].ts = self._ts if ts is None else ts

    def chunk_timestamps(self) -> bool:
        """Whether this logic's chunk form carries timestamps: ``conn.ts`` beside each chunk is either
        None (no element has one) or a list with one timestamp per element. In a graph with event time,
        only such logics run chunked; the others run element-wise. True by default for sources (their
        chunks have no timestamps) and sinks (they ignore them); a stage with both kinds of ports must
        say so itself."""
        return not self._in_ports or not self._out_ports

    # ------------------------------------------------------------------ the chunk form
    def chunk_capable(self) -> bool:
        """Whether this logic has a chunk form (a stage declares one by overriding this and
        ``enable_chunks``). The chunk form must keep the per-element semantics exactly: nothing
        beyond demand, the element and signal order, a failure after the elements before it,
        supervision per element."""
        return False

    def enable_chunks(self, chunk_size: int) -> None:
        """Switch to the chunk form: install handlers that move lists (``pull_chunk``/``push_chunk``).
        Called by the island's chunk negotiation (``atoll._impl.islands.chunking``) before the island
        starts; ``chunk_size`` is what a stage with unbounded demand asks for per pull."""
        raise TypeError(f"{self} has no chunk form")

    # ------------------------------------------------------------------ state hooks
    def reset_state(self) -> None:
        """Forget the state built from the elements so far (Restart supervision); stateless by default."""

    # ------------------------------------------------------------------ checkpoint state (Jet's Processor names)
    #: A logic that keeps nothing a restore would need (no position, no accumulator, no buffered
    #: element) says so here; with checkpointing on, every other logic must override
    #: ``save_to_snapshot``/``restore_from_snapshot``, or materializing fails with
    #: ``CheckpointNotSupportedError`` naming it. The stage (``GraphStage.stateless``) may declare it too.
    stateless: bool = False

    def save_to_snapshot(self) -> Any:
        """The operator's state at a checkpoint cut, as a picklable value the stage will not mutate
        afterwards; ``NO_STATE`` (the default) when there is nothing to save. Runs on the island's
        thread between events. Never save port state (pulled/closed flags): demand re-forms by itself."""
        return NO_STATE

    def restore_from_snapshot(self, state: Any) -> None:
        """Take back what ``save_to_snapshot`` returned; called after construction, before ``pre_start``."""

    def ready_for_snapshot(self) -> bool:
        """False while the logic holds work it cannot save (an iterator half consumed, a call in flight):
        the cut waits until every logic of the island is ready."""
        return True

    def checkpointing_enabled(self, request_checkpoint: Callable[..., None]) -> None:
        """The island runs with checkpoints: called once before ``pre_start`` (after a restore's
        ``restore_from_snapshot``/``rollback_uncommitted``). A sink with two-phase commits switches to its
        transactional mode here; ``request_checkpoint()`` (island thread) asks the coordinator for a
        checkpoint soon - once ``CheckpointSettings.min_pause`` has passed since the last one ended -, and
        ``request_checkpoint(final=True)`` at once, for the end of the input (to commit the last epoch when the
        stream ended)."""

    def snapshot_commit_prepare(self, checkpoint_id: int) -> Any:
        """Phase 1 of a two-phase commit (sinks with external effects): close what checkpoint
        ``checkpoint_id`` covers and return a picklable handle to everything prepared and not yet
        committed (None: nothing), stored in the checkpoint. Called before ``save_to_snapshot``."""
        return None

    def snapshot_commit_finish(self, checkpoint_id: int, prepared: Any, success: bool) -> None:
        """Phase 2: checkpoint ``checkpoint_id`` is durable (``success``): commit ``prepared``. Called on the
        island thread for every checkpoint ``k <= n`` that prepared something when checkpoint ``n``
        completes (an aborted checkpoint's ``prepared`` is committed by the next one that completes).
        Idempotent: it is called again with the restored ``prepared`` on restore. A logic must not complete
        its stage while something it prepared is not committed (a finished island commits nothing)."""

    def rollback_uncommitted(self, restored_checkpoint_id: Optional[int]) -> None:
        """On restore (after ``restore_from_snapshot`` and the restored ``snapshot_commit_finish``): drop
        external effects not covered by checkpoint ``restored_checkpoint_id``. A logic starting with
        checkpoints but without a snapshot (None: from the start) rolls back by itself."""

    def pull_chunk(self, in_: Inlet, n: int) -> None:
        """Chunk form: ask upstream for at most ``n`` (>= 1) elements; ``on_push`` brings a non-empty list."""
        conn = self._in_conns[in_.id]
        conn.demand = n
        self.pull(in_)

    def push_chunk(self, out: Outlet, chunk: list) -> None:
        """Chunk form: push a non-empty list of at most ``demand_of(out)`` elements (one push per pull)."""
        n = len(chunk)
        if n == 0 or n > self._out_conns[out.id].demand:
            raise PortStateError(
                f"Cannot push a chunk of {n} elements to port ({out.name}) of stage {self}: "
                f"it must hold 1 to {self._out_conns[out.id].demand} (the demand of the pull)"
            )
        self.push(out, chunk)

    def demand_of(self, out: Outlet) -> int:
        """Chunk form: how many elements the pending pull on ``out`` accepts."""
        return self._out_conns[out.id].demand

    # ------------------------------------------------------------------ the signal lane
    def on_signal(self, signal) -> None:
        """A control signal (``atoll.stage.signals``) arrived; on a stage with several inlets, once all
        live inlets delivered it. The default hands a watermark to ``on_watermark`` and forwards any
        other signal to every outlet after the elements still waiting to be emitted there. Override to
        transform, absorb or hold signals; a stage that keeps elements back (a buffer, a window) must
        keep the signals after them back too. A signal that came after an element is heard once the stage
        took that element: right after ``on_push`` if it grabbed it there, else when it pulls that inlet again
        (an element left waiting in the inlet keeps the signals behind it there)."""
        if type(signal) is Watermark:
            clock = self._event_clock
            if clock is None:
                clock = self._event_clock = EventClock()
            if signal.timestamp > clock.watermark:
                clock.watermark = signal.timestamp
                self.on_watermark(signal.timestamp)
            elif clock.hold is None:  # a replay (or the one that ends an idle spell): on unchanged
                self.forward_signal(signal)
        else:
            self.forward_signal(signal)

    # ------------------------------------------------------------------ event time of custom stages
    def on_watermark(self, watermark: Any) -> None:
        """Event time reached ``watermark`` (no element with a smaller timestamp follows, late ones
        aside). The default fires the event timers due at it (``on_event_timer``, in timestamp order),
        then sends on ``min(watermark, hold)`` (see ``hold_watermark``) if that grew. Override to act on
        time; call ``super().on_watermark(watermark)`` (or ``forward_watermark``) to let time go on.
        Only watermarks that advance reach this method."""
        clock = self._event_clock
        if clock.heap:
            due = clock.pop_due(watermark)
            while due is not None:
                self.on_event_timer(due[0], due[1])
                due = clock.pop_due(watermark)
        self.forward_watermark()

    @property
    def current_watermark(self) -> Any:
        """The last watermark this stage heard (``-inf`` before the first)."""
        clock = self._event_clock
        return NEG_INF if clock is None else clock.watermark

    def forward_watermark(self) -> None:
        """Send on the current watermark, bounded by the hold, if it grew since the last one sent."""
        clock = self._event_clock
        if clock is None:
            return
        w = clock.outgoing()
        if w > clock.forwarded:
            clock.forwarded = w
            self.forward_signal(Watermark(w))

    def schedule_event_timer(self, key: Any, timestamp: Any) -> None:
        """Call ``on_event_timer(key, timestamp)`` once a watermark ``>= timestamp`` arrives; replaces
        an earlier event timer with the same ``key``. A timer at or below the current watermark fires
        with the next watermark that advances (as Flink's event-time timers do)."""
        if isinstance(timestamp, bool) or not isinstance(timestamp, (int, float)):
            raise TypeError(f"{self}.schedule_event_timer: timestamp must be an int or float, got {timestamp!r}")
        clock = self._event_clock
        if clock is None:
            clock = self._event_clock = EventClock()
        clock.schedule(key, timestamp)

    def cancel_event_timer(self, key: Any) -> None:
        """Disarm the event timer ``key`` (nothing happens if there is none)."""
        if self._event_clock is not None:
            self._event_clock.cancel(key)

    def is_event_timer_active(self, key: Any) -> bool:
        return self._event_clock is not None and key in self._event_clock.armed

    def on_event_timer(self, key: Any, timestamp: Any) -> None:
        """The event timer ``key`` scheduled at ``timestamp`` is due. Runs before the watermark that
        made it due goes on, so what it pushes or emits arrives before that watermark."""

    def fire_remaining_event_timers(self) -> None:
        """Fire every armed event timer, in timestamp order: completion is the end of event time, so a
        stage whose timers must fire at the end calls this from ``on_upstream_finish`` before completing."""
        clock = self._event_clock
        if clock is None:
            return
        due = clock.pop_due(math.inf)
        while due is not None:
            self.on_event_timer(due[0], due[1])
            due = clock.pop_due(math.inf)

    def hold_watermark(self, timestamp: Any) -> None:
        """Send on no watermark above ``timestamp`` until ``release_watermark_hold`` (Beam's watermark
        hold): a stage that keeps elements back holds time at the smallest timestamp it keeps. Moving
        the hold up lets the watermark heard meanwhile go on up to it; a watermark already sent is not
        taken back."""
        clock = self._event_clock
        if clock is None:
            clock = self._event_clock = EventClock()
        clock.hold = timestamp
        if clock.watermark > clock.forwarded:
            self.forward_watermark()

    def hold_watermark_for(self, timestamps) -> None:
        """Hold the watermark at the smallest of ``timestamps`` (None entries ignored) - the elements this
        stage keeps - or release the hold when there is none."""
        low = None
        for ts in timestamps:
            if ts is not None and (low is None or ts < low):
                low = ts
        if low is None:
            self.release_watermark_hold()
        else:
            self.hold_watermark(low)

    def release_watermark_hold(self) -> None:
        """End the hold; the current watermark goes on if it is ahead of the last one sent."""
        clock = self._event_clock
        if clock is not None and clock.hold is not None:
            clock.hold = None
            self.forward_watermark()

    def forward_signal(self, signal) -> None:
        """Emit ``signal`` on every open outlet."""
        for out in self._out_ports:
            conn = self._out_conns[out.id] if out is not None else None
            if conn is not None and not conn.state & OUT_CLOSED:
                self.emit_signal(out, signal)

    def emit_signal(self, out: Outlet, signal) -> None:
        """Send ``signal`` on ``out`` after the elements pushed or still to be emitted there; needs no
        demand. Dropped when ``out`` is closed."""
        interp = self._interpreter
        if interp is None:
            raise self._not_initialized()
        if not isinstance(signal, Signal):
            require_signal(f"{self}.emit_signal({out.name})", signal)
        handler = self._out_handlers[out.id]
        if isinstance(handler, _Emitting):
            handler.add_follow_up(_EmittingSignal(self, out, handler.previous, signal))
        else:
            interp.emit_signal(self._out_conns[out.id], signal)

    def _receive_signal(self, conn, signal) -> None:
        """Kernel entry: ``signal`` arrived on ``conn``; stages with several inlets go through alignment."""
        conns = self._in_conns
        if len(conns) > 1:
            alignment = self._alignment
            if alignment is None:
                from .signal_alignment import FanInAlignment

                alignment = self._alignment = FanInAlignment(self)
            alignment.on_signal(conns.index(conn), signal)
        else:
            self.on_signal(signal)

    # ------------------------------------------------------------------ whole stage
    def complete_stage(self) -> None:
        """Cancel every inlet (cause ``StageWasCompleted``) and complete every outlet."""
        self._internal_complete_stage(STAGE_WAS_COMPLETED, None)

    def fail_stage(self, exc: BaseException) -> None:
        """Cancel every inlet and fail every outlet with ``exc``."""
        self._internal_complete_stage(exc, exc)

    def cancel_stage(self, cause: BaseException) -> None:
        """React to downstream cancellation according to the stage's cancellation strategy."""
        strategy = self.attributes.get(CancellationStrategy)
        kind = strategy.strategy if strategy is not None else "propagate_failure"
        if kind == "complete_stage" or (kind == "propagate_failure" and isinstance(cause, NonFailureCancellation)):
            self._internal_complete_stage(cause, None)
        else:
            self._internal_complete_stage(cause, cause)

    def _internal_complete_stage(self, cancel_cause: BaseException, failure: Optional[BaseException]) -> None:
        interp = self._interpreter
        if interp is None:
            raise self._not_initialized()
        for conn in self._in_conns:
            interp.cancel(conn, cancel_cause)
        for i, conn in enumerate(self._out_conns):
            handler = self._out_handlers[i]
            if failure is None and isinstance(handler, _Emitting):
                handler.add_follow_up(_EmittingCompletion(self, handler.out, handler.previous))
            elif failure is None:
                interp.complete(conn)
            else:
                interp.fail(conn, failure)
        self.set_keep_going(False)

    def set_keep_going(self, enabled: bool) -> None:
        """Keep the stage alive after all its ports closed (until it calls ``complete_stage``)."""
        if enabled:
            self._counter |= KEEP_GOING_FLAG
        else:
            c = self._counter = self._counter & KEEP_GOING_MASK
            if c == 0 and self._interpreter is not None:
                self._interpreter.stage_finished(self)  # every port already closed: the stage stops

    @property
    def is_keep_going(self) -> bool:
        return bool(self._counter & KEEP_GOING_FLAG)

    @property
    def materializer(self):
        """The materializer that runs this stage (available from ``pre_start`` on)."""
        if self._interpreter is None:
            raise IllegalStateError(f"{self}: materializer is only available once the stage runs")
        return self._interpreter.materializer

    @property
    def interpreter(self):
        return self._interpreter

    # ------------------------------------------------------------------ emit helpers
    def emit(self, out: Outlet, elem: Any, and_then: Optional[Callable[[], None]] = None, ts: Any = None) -> None:
        """Push ``elem`` as soon as downstream pulls, then run ``and_then``; handlers are restored after.
        In an event-time graph the element carries ``ts`` (default: the timestamp of the last grab)."""
        if self.is_available(out):
            self.push(out, elem, ts)
            if and_then is not None:
                and_then()
        else:
            emitting = _EmittingSingle(self, out, elem, self._non_emitting_handler(out), and_then)
            if ts is not None:
                emitting.ts = ts
            self._set_or_add_emitting(out, emitting)

    def emit_multiple(self, out: Outlet, elems: Iterable[Any], and_then: Optional[Callable[[], None]] = None) -> None:
        """Push every element of ``elems`` as downstream pulls, then run ``and_then``."""
        it = iter(elems)
        first = next(it, _NOTHING)
        if first is _NOTHING:
            if and_then is not None:
                and_then()
            return
        nxt = next(it, _NOTHING)
        if self.is_available(out):
            self.push(out, first)
            if nxt is _NOTHING:
                if and_then is not None:
                    and_then()
                return
            self._set_or_add_emitting(out, _EmittingIterator(self, out, nxt, it, self._non_emitting_handler(out), and_then))
        else:
            pending = _EmittingIterator(self, out, first, _prepend(nxt, it), self._non_emitting_handler(out), and_then)
            self._set_or_add_emitting(out, pending)

    def abort_emitting(self, out: Outlet) -> None:
        """Drop whatever is still waiting to be emitted on ``out`` and restore its handler."""
        handler = self._out_handlers[out.id]
        if isinstance(handler, _Emitting):
            self.set_handler(out, handler.previous)

    def _non_emitting_handler(self, out: Outlet):
        h = self._out_handlers[out.id]
        return h.previous if isinstance(h, _Emitting) else h

    def _set_or_add_emitting(self, out: Outlet, emitting: "_Emitting") -> None:
        h = self._out_handlers[out.id]
        if isinstance(h, _Emitting):
            h.add_follow_up(emitting)
        else:
            self.set_handler(out, emitting)

    # ------------------------------------------------------------------ read helpers
    def read(self, in_: Inlet, and_then: Callable[[Any], None], on_close: Callable[[], None]) -> None:
        """Read one element from ``in_`` (pulling if needed) and hand it to ``and_then``."""
        if self.is_available(in_):
            and_then(self.grab(in_))
        elif self.is_closed(in_):
            on_close()
        else:
            previous = self._in_handlers[in_.id]
            if isinstance(previous, _Reading):
                raise IllegalStateError(f"{self}: already reading on inlet {in_}")
            self.set_handler(in_, _Reading(self, in_, previous, and_then, on_close))
            if not self.has_been_pulled(in_):
                self.pull(in_)

    def read_n(self, in_: Inlet, n: int, and_then: Callable[[list], None], on_complete: Callable[[list], None]) -> None:
        """Read ``n`` elements from ``in_``; ``on_complete`` gets the partial list if upstream ends first."""
        if n < 0:
            raise ValueError(f"{self}: read_n(n) needs n >= 0, got {n}")
        if n == 0:
            and_then([])
            return
        got: list = []

        def step(elem):
            got.append(elem)
            if len(got) == n:
                and_then(got)
            else:
                self.read(in_, step, lambda: on_complete(got))

        self.read(in_, step, lambda: on_complete(got))

    def pass_along(self, from_: Inlet, to: Outlet, do_finish: bool = True, do_fail: bool = True, do_pull: bool = False) -> None:
        """Forward every element from ``from_`` to ``to`` (emitting, then pulling again). ``do_finish`` /
        ``do_fail``: completion / failure of ``from_`` completes / fails the stage (otherwise it is
        ignored); ``do_pull``: pull ``from_`` once right away."""
        logic = self

        def pull_again():
            logic.try_pull(from_)

        class _PassAlong(InHandler):
            def on_push(self_inner):
                logic.emit(to, logic.grab(from_), pull_again)

            def on_upstream_finish(self_inner):
                if do_finish:
                    logic.complete_stage()

            def on_upstream_failure(self_inner, exc):
                if do_fail:
                    logic.fail_stage(exc)

        if self._interpreter is not None:
            if self.is_available(from_):
                self.emit(to, self.grab(from_), pull_again)
            if do_finish and self.is_closed(from_):
                self.complete_stage()
        self.set_handler(from_, _PassAlong())
        if do_pull:
            self.try_pull(from_)

    # ------------------------------------------------------------------ async entry
    def get_async_callback(self, handler: Callable[[Any], None]) -> "AsyncCallback":
        """A thread-safe entry point: ``invoke(value)`` runs ``handler(value)`` on the island's thread."""
        return AsyncCallback(self, handler)

    def _invoke_async(self, handler, value, promise) -> None:
        if promise is not None:
            # track the promise so that it fails with StreamDetachedError if the stage stops first
            with _pending_lock:
                feedback = self._feedback
                if feedback is not _STOPPED:
                    if feedback is None:
                        feedback = self._feedback = set()
                    feedback.add(promise)
            if feedback is _STOPPED:
                promise.set_exception(self._detached())
                return
        interp = self._interpreter
        if interp is None:
            with _pending_lock:
                interp = self._interpreter
                if interp is None:
                    if self._pending_async is None:
                        self._pending_async = []
                    self._pending_async.append((handler, value, promise))
                    return
        if self._finalized:
            return  # dropped; a tracked promise is failed by _after_post_stop
        interp.post_async(self, handler, value, promise)

    def _feedback_dispatched(self, promise) -> None:
        with _pending_lock:
            feedback = self._feedback
            if feedback is not None and feedback is not _STOPPED:
                feedback.discard(promise)

    def _detached(self) -> StreamDetachedError:
        return StreamDetachedError(f"stage {self} stopped before the async invocation was processed")

    def _attach(self, interpreter, stage_id: int) -> None:
        """Bind to the interpreter (called by the island builder before ``pre_start``)."""
        self.stage_id = stage_id
        self._enqueue = interpreter.enqueue
        with _pending_lock:
            # hand over the invocations buffered before the start first, so that later ones stay behind them
            pending, self._pending_async = self._pending_async, None
            if pending:
                for handler, value, promise in pending:
                    interpreter.post_async(self, handler, value, promise)
            self._interpreter = interpreter
        self._bind_port_calls(interpreter)

    def _bind_port_calls(self, interpreter) -> None:
        """Install per-instance ``push``/``pull``/``grab`` fast paths over this logic's connections and
        interpreter (the per-element hot path).

        Each (``atoll.stage._port_calls``) takes the plain case only (the port's state is exactly the one
        protocol bit, the element is not ``None``: one integer comparison) and hands every other case (a
        signal or hold waiting, a closed, failed or unwired port, a rule broken) to the class method, so
        errors and edge cases stay exactly the class method's. A logic whose class overrides one of them, or
        that bound its own on the instance (event-time stamping), keeps that one. They are set as plain
        attributes: touching ``self.__dict__`` would turn the instance's inline attribute values into a dict
        and slow every other ``self.x`` of the logic."""
        ins, outs = self._in_conns, self._out_conns
        if _rebindable(self.push, _base_push):
            self.push = port_calls(self, interpreter, outs, self._out_ports).push
        rebind_pull, rebind_grab = _rebindable(self.pull, _base_pull), _rebindable(self.grab, _base_grab)
        if rebind_pull or rebind_grab:
            calls = port_calls(self, interpreter, ins, self._in_ports)  # one object for the inlets' two calls
            if rebind_pull:
                self.pull = calls.pull
            if rebind_grab:
                self.grab = calls.grab
        self._bind_fused_handlers(interpreter)

    def _bind_fused_handlers(self, interpreter) -> None:
        """Hook for built-in logics whose per-element handler inlines its port calls' plain case
        (``atoll.stage._port_calls.fusable``); called after the port calls are bound. Default: none."""

    def _after_post_stop(self) -> None:
        """Internal cleanup after ``post_stop`` (timers, async callbacks): outstanding
        ``invoke_with_feedback`` futures fail with ``StreamDetachedError``."""
        with _pending_lock:
            feedback, self._feedback = self._feedback, _STOPPED
        if feedback is not None and feedback is not _STOPPED:
            exc = self._detached()
            for promise in feedback:
                if not promise.done():
                    promise.set_exception(exc)


_base_push = GraphStageLogic.push
_base_pull = GraphStageLogic.pull
_base_grab = GraphStageLogic.grab
fall_back_to(GraphStageLogic)


def _rebindable(bound, base) -> bool:
    """Whether a logic's port call is the class method ``base`` or the fast path of an earlier attachment
    (rebound to the new interpreter), not an override of its own."""
    return getattr(bound, "__func__", None) is base or getattr(bound, "port_fast_path", False)


class AsyncCallback:
    """Thread-safe handle that schedules a logic's handler on the logic's island thread."""

    __slots__ = ("_logic", "_handler")

    def __init__(self, logic: GraphStageLogic, handler: Callable[[Any], None]):
        self._logic = logic
        self._handler = handler

    def invoke(self, value: Any = None) -> None:
        """Schedule ``handler(value)``; silently dropped once the stage has stopped (as Pekko)."""
        self._logic._invoke_async(self._handler, value, None)

    def invoke_with_feedback(self, value: Any = None) -> Future:
        """Schedule ``handler(value)``; the future completes with ``Done`` after it ran, or fails with
        ``StreamDetachedError`` when the stage stopped first (or the handler's exception)."""
        promise: Future = Future()
        promise.set_running_or_notify_cancel()
        self._logic._invoke_async(self._handler, value, promise)
        return promise


_NOTHING = object()


def _prepend(first, it):
    if first is not _NOTHING:
        yield first
    yield from it


class _Reading(InHandler):
    """Temporary in-handler installed by ``read``; restores ``previous`` when the element arrives."""

    def __init__(self, logic: GraphStageLogic, in_: Inlet, previous, and_then, on_close):
        self.logic = logic
        self.in_ = in_
        self.previous = previous
        self.and_then = and_then
        self.on_close = on_close

    def on_push(self) -> None:
        logic = self.logic
        elem = logic.grab(self.in_)
        logic.set_handler(self.in_, self.previous)
        self.and_then(elem)

    def on_upstream_finish(self) -> None:
        self.logic.set_handler(self.in_, self.previous)
        self.on_close()
        self.previous.on_upstream_finish()

    def on_upstream_failure(self, exc: BaseException) -> None:
        self.logic.set_handler(self.in_, self.previous)
        self.previous.on_upstream_failure(exc)


class _Emitting(OutHandler):
    """Temporary out-handler installed by ``emit``; restores ``previous`` when its elements are out."""

    def __init__(self, logic: GraphStageLogic, out: Outlet, previous, and_then):
        self.logic = logic
        self.out = out
        self.previous = previous
        self.and_then = and_then
        self.follow_ups: list = []

    def add_follow_up(self, e: "_Emitting") -> None:
        self.follow_ups.append(e)

    def follow_up(self) -> None:
        logic, out = self.logic, self.out
        logic.set_handler(out, self.previous)
        if self.and_then is not None:
            self.and_then()
        if self.follow_ups:
            current = logic._out_handlers[out.id]
            if isinstance(current, _Emitting):
                current.follow_ups.extend(self.follow_ups)
            else:
                rest = self.follow_ups
                while rest and isinstance(rest[0], _EmittingSignal):
                    logic._interpreter.emit_signal(logic._out_conns[out.id], rest[0].signal)
                    rest = rest[1:]
                if not rest:
                    return
                nxt = rest[0]
                nxt.follow_ups = rest[1:] + nxt.follow_ups
                if isinstance(nxt, _EmittingCompletion):
                    if nxt.follow_ups:
                        # elements queued after the completion still go out before it
                        head = nxt.follow_ups[0]
                        head.follow_ups = nxt.follow_ups[1:] + head.follow_ups + [nxt]
                        nxt.follow_ups = []
                        logic.set_handler(out, head)
                    else:
                        logic.complete(out)
                else:
                    logic.set_handler(out, nxt)

    def on_downstream_finish(self, cause: BaseException) -> None:
        self.previous.on_downstream_finish(cause)


class _EmittingSingle(_Emitting):
    def __init__(self, logic, out, elem, previous, and_then):
        super().__init__(logic, out, previous, and_then)
        self.elem = elem
        self.ts = logic._ts  # event time: the element keeps the timestamp it had when emitted

    def on_pull(self) -> None:
        self.logic.push(self.out, self.elem, self.ts)
        self.follow_up()


class _EmittingIterator(_Emitting):
    def __init__(self, logic, out, first, rest, previous, and_then):
        super().__init__(logic, out, previous, and_then)
        self.nxt = first
        self.rest = rest
        self.ts = logic._ts  # event time: every element of the batch keeps the timestamp it had when emitted

    def on_pull(self) -> None:
        self.logic.push(self.out, self.nxt, self.ts)
        self.nxt = next(self.rest, _NOTHING)
        if self.nxt is _NOTHING:
            self.follow_up()


class _EmittingSignal(_Emitting):
    """A control signal queued behind pending emits; it goes out as soon as they are out."""

    def __init__(self, logic, out, previous, signal):
        super().__init__(logic, out, previous, None)
        self.signal = signal

    def on_pull(self) -> None:
        # reached only when queued behind a completion that had elements after it (see follow_up)
        logic, out = self.logic, self.out
        logic._interpreter.emit_signal(logic._out_conns[out.id], self.signal)
        self.follow_up()
        current = logic._out_handlers[out.id]
        if isinstance(current, _Emitting) and logic.is_available(out):
            current.on_pull()  # the pull that reached this signal is for the next element


class _EmittingCompletion(_Emitting):
    def __init__(self, logic, out, previous):
        super().__init__(logic, out, previous, None)

    def on_pull(self) -> None:
        logic = self.logic
        logic.set_handler(self.out, self.previous)
        logic.complete(self.out)
