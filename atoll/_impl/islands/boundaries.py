"""Island boundaries: the two ends of a Reactive Streams channel between islands.

``OutputBoundary`` (publisher side) sits on the producing stage's outlet; ``InputBoundary``
(subscriber side) feeds the consuming stage's inlet. They speak the protocol

    subscribe -> on_subscribe -> request(n) -> on_next(frame) ... -> on_complete | on_error(cause)
    cancel(cause) upstream

through *peer refs*: objects with those methods, provided by the transport (in-process async
callbacks, Ray actor calls, or a test probe). Every incoming signal is an async input of the boundary
logic, so it runs on the island's thread.

Demand is counted in elements: the input boundary requests its buffer size up front and requests half
of it again each time half has been consumed (Pekko's batching input boundary). The output boundary
pulls only while it has demand, collects what its upstream pushes during one interpreter turn into a
frame and sends it when the host flushes (or when the frame is full). Frames and requests carry
sequence numbers; a gap or duplicate fails the channel with ``ProtocolError``.

Elements passed by reference (over Ray: numpy arrays and Arrow data, which the codec puts into the object store)
are bounded in bytes too, by the channel's *store budget* (``store_budget``, 0: none): the subscriber ref reports
what each frame put into the store, the output boundary counts it until the input boundary's requests show the
elements consumed, and pulls upstream only while it stays within its share; the input boundary hands such
elements on in chunks of bounded bytes and requests as soon as it handed them on (DESIGN 6).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Optional, Union

from ...errors import (
    AbruptStageTerminationError,
    ProtocolError,
    SpecViolationError,
)
from ...stage.handlers import InHandler, OutHandler
from ...stage.logic import GraphStageLogic
from ...stage.ports import Inlet, Outlet
from ...stage.shapes import SinkShape, SourceShape
from ...stage.signals import Watermark
from .element_size import is_large_element

#: Reactive Streams rule 3.17: demand saturates at 2^63-1 ("effectively unbounded").
MAX_DEMAND = 2**63 - 1

#: Encoded bytes a frame aims to stay under on a transport that reports them (Ray actor calls): Ray passes a call
#: argument inline up to 100 KiB and through the object store above that (a 170 KB frame cost ~5x a 100 KB one
#: per call), so frames are cut below it with room for the call's own envelope. An element larger than this
#: still travels, alone in its frame.
FRAME_BYTES = 90 * 1024


def store_chunk_bytes(budget: int) -> int:
    """Of a channel's store budget, the share an input boundary hands downstream in one chunk (of elements passed by
    reference): a quarter. The output boundary keeps the rest, ``budget - store_chunk_bytes(budget)``, for what is
    in flight and buffered at the receiver, so that the channel holds at most ``budget`` (elements larger than a
    share go one at a time)."""
    return max(1, budget // 4)


@dataclass(frozen=True, slots=True)
class StreamCompleted:
    """Terminal signal an output boundary owes its subscriber: ``on_complete``."""


@dataclass(frozen=True, slots=True)
class StreamFailed:
    """Terminal signal an output boundary owes its subscriber: ``on_error(cause)``."""

    cause: BaseException


TerminalSignal = Union[StreamCompleted, StreamFailed]
_COMPLETED = StreamCompleted()


class _FrameTail:
    """An item after a frame's elements carrying one list about them (never an element itself):
    pickles and prints as ``Kind(list)``."""

    __slots__ = ()

    def __reduce__(self):
        return (type(self), (getattr(self, self.__slots__[0]),))

    def __repr__(self):
        return f"{type(self).__name__}({getattr(self, self.__slots__[0])!r})"


class FrameSignals(_FrameTail):
    """Last item of a frame that carries control signals: ``(position, signal)`` pairs, the position
    being the number of the frame's elements that precede the signal. Frames without signals carry
    no such item, so the element path pays one type check per frame; signals never count as demand."""

    __slots__ = ("signals",)

    def __init__(self, signals: list):
        self.signals = signals


class FrameTimestamps(_FrameTail):
    """Frame item in event-time graphs: the timestamps of the frame's elements, one per element, in
    order. It follows the elements (before a ``FrameSignals`` item); frames of graphs without event
    time never carry one."""

    __slots__ = ("timestamps",)

    def __init__(self, timestamps: list):
        self.timestamps = timestamps


class ChannelBarrier:
    """Checkpoint barrier ``checkpoint_id`` on a channel: every element sent before it belongs to that
    checkpoint. It travels in a frame's signal tail like a signal (it needs no demand and never overtakes
    an element), but the input boundary hands it to the island's checkpointer instead of its stages."""

    __slots__ = ("checkpoint_id",)

    def __init__(self, checkpoint_id: int):
        self.checkpoint_id = checkpoint_id

    def __reduce__(self):
        return (ChannelBarrier, (self.checkpoint_id,))

    def __eq__(self, other):
        return type(other) is ChannelBarrier and other.checkpoint_id == self.checkpoint_id

    def __hash__(self):
        return hash(("ChannelBarrier", self.checkpoint_id))

    def __repr__(self):
        return f"ChannelBarrier({self.checkpoint_id})"


class CallbackPublisherRef:
    """Publisher ref whose methods are the boundary's async callbacks (in-process transport).
    ``subscribe_with_request(subscriber, n)`` is a subscription whose first request (#0, ``n`` elements) came
    with it (transports where a signal costs a hop, see ``InputBoundary.pre_start``)."""

    __slots__ = ("subscribe", "subscribe_with_request", "request", "cancel", "ack")

    def __init__(self, logic: "OutputBoundary"):
        self.subscribe = logic.get_async_callback(logic._on_subscribe).invoke
        sub_req = logic.get_async_callback(logic._on_subscribe_with_request)
        self.subscribe_with_request = lambda subscriber, n: sub_req.invoke((subscriber, n))
        req = logic.get_async_callback(logic._on_request).invoke
        self.request = lambda n, seq, acked=None: req((n, seq, acked))
        self.cancel = logic.get_async_callback(logic._on_cancel).invoke
        self.ack = logic.get_async_callback(logic._on_ack).invoke


class CallbackSubscriberRef:
    """Subscriber ref whose methods are the boundary's async callbacks (in-process transport). ``on_next(seq, frame,
    stored)``: ``stored`` is the object-store bytes the frame's elements hold (a transport passing large elements
    by reference says so; 0 otherwise)."""

    __slots__ = ("on_subscribe", "on_next", "on_complete", "on_error")

    def __init__(self, logic: "InputBoundary"):
        self.on_subscribe = logic.get_async_callback(logic._on_subscribe).invoke
        nxt = logic.get_async_callback(logic._on_next)
        self.on_next = lambda seq, frame, stored=0: nxt.invoke((seq, frame, stored))
        done = logic.get_async_callback(logic._on_complete)
        self.on_complete = lambda: done.invoke(None)
        self.on_error = logic.get_async_callback(logic._on_error).invoke


class OutputBoundary(GraphStageLogic, InHandler):
    """Publisher end of a channel, fed by one outlet of this island."""

    #: a checkpoint cut sends what the frame holds before its barrier: nothing to save
    stateless = True

    def __init__(
        self, name: str = "OutputBoundary", max_frame: int = 1 << 16, in_: Optional[Inlet] = None, window: int = 16,
        store_budget: int = 0,
    ):
        self.in_ = in_ if in_ is not None else Inlet(f"{name}.in")
        shape = SinkShape(self.in_)
        shape.assign_ids()
        super().__init__(shape)
        self.stage_name = name
        self.max_frame = max_frame
        #: elements per frame now: ``max_frame``, or on a transport reporting encoded sizes what keeps a frame
        #: under ``FRAME_BYTES`` at the bytes per element of the last frame sent (the first frame holds one)
        self.frame_cap = max_frame
        self.sized = False  # the subscriber ref's ``on_next`` returns the frame's encoded bytes
        self.window = window
        self.acked = 0  # frames the subscriber confirmed (windowed transports only)
        self.windowed = False
        self.sent = 0  # elements sent (for progress reports)
        self.subscriber = None
        self.demand = 0
        self.frame: list = []
        self.frame_ts: Optional[list] = None  # event time: the frame's timestamps, parallel to ``frame``
        self.frame_seq = 0
        self.request_seq = 0
        self.terminal: Optional[TerminalSignal] = None  # not signalled yet
        self.signalled_terminal = False
        # The store budget (elements passed by reference, on a transport reporting the bytes each frame put into
        # the object store). ``store_limit``: the bytes this end lets sent frames hold in the store until the
        # subscriber is known to have consumed them (the budget less the receiver's chunk share; 0: no budget).
        # Once a frame held some (``store_gated``), ``demand`` is what the budget lets the boundary pull now and
        # ``demand_held`` the rest of the subscriber's demand.
        self.store_budget = store_budget
        self.store_limit = 0
        self.store_gated = False
        self.stored_out = 0  # store bytes of sent frames not known consumed
        self.store_elem = 0  # store bytes per element expected of the next elements (recent frames' averages)
        self.stored_frames: deque = deque()  # [elements sent up to its end, elements, bytes, bytes not consumed]
        self.consumed_known = 0  # elements the subscriber consumed: its requests after the first one
        self.demand_held = 0
        self._resume = self.get_async_callback(self._on_resume).invoke
        self.set_handler(self.in_, self)
        self.publisher_ref = CallbackPublisherRef(self)

    # ------------------------------------------------------------------ signals from the subscriber
    def _on_subscribe(self, subscriber) -> None:
        if self.subscriber is not None:
            subscriber.on_subscribe(self.publisher_ref)
            subscriber.on_error(SpecViolationError(f"{self}: this publisher accepts one subscriber only (rule 2.12)"))
            return
        self.subscriber = subscriber
        self.windowed = getattr(subscriber, "windowed", False)
        if getattr(subscriber, "sized", False):
            self.sized = True
            self.frame_cap = 1  # measure the elements' size on a first frame of one
        if self.store_budget > 0 and getattr(subscriber, "reports_stored", False):
            self.store_limit = max(1, self.store_budget - store_chunk_bytes(self.store_budget))
        subscriber.on_subscribe(self.publisher_ref)
        if self.terminal is not None:
            self._signal_terminal()
        elif self.frame_signals:
            self._interpreter.host.mark_dirty(self)

    def _on_subscribe_with_request(self, subscriber_n) -> None:
        """A subscription that carries the subscriber's request #0 (one hop less before the first frame): as
        ``_on_subscribe`` followed by ``request(n)``; a refused second subscriber's request is not counted."""
        subscriber, n = subscriber_n
        accepted = self.subscriber is None
        self._on_subscribe(subscriber)
        if accepted:
            self._on_request((n, 0, None))

    def _on_request(self, n_seq_acked) -> None:
        n, seq, acked = n_seq_acked
        if acked is not None:
            self._on_ack(acked)
        if seq != self.request_seq:
            self._protocol_failure(ProtocolError(f"{self}: request #{seq} arrived, expected #{self.request_seq}"))
            return
        self.request_seq += 1
        if n < 1:
            self._protocol_failure(SpecViolationError(f"{self}: request({n}) is not positive (rule 3.9)"))
            return
        self.demand = min(self.demand + n, MAX_DEMAND)
        if seq:  # the input boundary requests again exactly what it consumed (its first request: its buffer)
            self.consumed_known += n
        if self.store_gated:
            self._release_consumed()
            if (self.frame or self.frame_signals) and not self.signalled_terminal:
                self.flush()  # frames held back for the budget
                if self.terminal is not None and not self.frame and not self.frame_signals:
                    self._signal_terminal()
                    return
        in_ = self.in_
        if self.demand > 0 and not self.has_been_pulled(in_) and not self.is_closed(in_):
            self._pull_upstream()

    def _pull_upstream(self) -> None:
        if self.chunked:
            self._in_conns[0].demand = min(self.demand, self.max_frame)
        self.pull(self.in_)

    # ------------------------------------------------------------------ the store budget
    def _store_fit(self) -> int:
        """Elements that fit the store budget now besides what was sent (at ``store_elem`` bytes each); one when
        nothing sent holds any, so that an element larger than the budget still travels."""
        room = self.store_limit - self.stored_out
        e = self.store_elem
        if room <= 0:
            fit = 0
        else:
            fit = room // e if e else MAX_DEMAND
        if fit < 1 and not self.stored_out:
            fit = 1
        return fit

    def _count_stored(self, n: int, stored: int, largest: int) -> None:
        """A frame of ``n`` elements holding ``stored`` bytes of the object store (``largest`` the largest object's)
        was sent: count them (until the subscriber consumed them), expect as much of the next elements, and let
        only what still fits the budget be pulled.

        The next elements are expected to hold what this frame's did per element (its average, or its largest
        object when larger: a frame mixing small elements and stored ones), or, when that is less, 7/8 of what was
        expected before (so that the expectation follows shrinking elements over a few frames and a frame of
        smaller ones, such as a partition's last batch, does not let the next frame past the budget by much)."""
        e = self.store_elem
        decayed = e - (e >> 3)
        if stored:
            self.stored_out += stored
            self.stored_frames.append([self.sent, n, stored, stored])
            per = -(-stored // n)
            if largest > per:
                per = largest
            self.store_elem = per if per >= decayed else decayed
            self.store_gated = True
        else:
            self.store_elem = decayed if e > 7 else 0

    def _rebalance(self) -> None:
        """Split the subscriber's demand into what the store budget lets the boundary pull now (``demand``: the
        elements that fit besides those collected) and the rest (``demand_held``)."""
        total = self.demand + self.demand_held
        if total > MAX_DEMAND:
            total = MAX_DEMAND
        allowed = self._store_fit() - len(self.frame)
        d = allowed if allowed < total else total
        if d < 0:
            d = 0 if total > 0 else total
        self.demand = d
        self.demand_held = total - d

    def _on_resume(self, _=None) -> None:
        """Pull again if the budget let demand back while no pull was out (posted by ``flush``, which may run
        outside the interpreter's turn, where a pull would wait for the next event)."""
        in_ = self.in_
        if self.demand > 0 and not self.signalled_terminal and not self.has_been_pulled(in_) and not self.is_closed(in_):
            self._pull_upstream()

    def _release_consumed(self) -> None:
        """The subscriber consumed ``consumed_known`` elements: forget their store bytes (a frame partly consumed,
        in proportion) and give back the demand the budget now allows."""
        k = self.consumed_known
        q = self.stored_frames
        while q:
            entry = q[0]
            end, n, stored, left = entry
            if end <= k:
                self.stored_out -= left
                q.popleft()
                continue
            rest = end - k
            if rest < n:
                now = stored * rest // n
                self.stored_out -= left - now
                entry[3] = now
            break
        self._rebalance()

    def _on_cancel(self, cause) -> None:
        self.frame = []
        self.signalled_terminal = True
        if not self.is_closed(self.in_):
            self.cancel(self.in_, cause)

    def _protocol_failure(self, exc: BaseException) -> None:
        self.frame = []
        if not self.signalled_terminal and self.subscriber is not None:
            self.signalled_terminal = True
            self.subscriber.on_error(exc)
        self.fail_stage(exc)

    # ------------------------------------------------------------------ upstream side
    #: chunk form: upstream pushes lists of elements, each pull asking for the channel's demand
    chunked = False
    frame_signals: Optional[list] = None  # (position in frame, signal) for the frame being collected

    def chunk_capable(self) -> bool:
        return True

    def chunk_timestamps(self) -> bool:
        return True

    def enable_chunks(self, chunk_size: int) -> None:
        self.chunked = True

    def enable_event_time(self) -> None:
        super().enable_event_time()
        self.frame_ts = []

    def on_signal(self, signal) -> None:
        """Signals travel in the frame, after the elements pushed before them; they need no demand."""
        sigs = self.frame_signals
        if sigs is None:
            sigs = self.frame_signals = []
        was_idle = not self.frame and len(sigs) == 0
        sigs.append((len(self.frame), signal))
        if was_idle and self.subscriber is not None:
            self._interpreter.host.mark_dirty(self)

    def emit_barrier(self, checkpoint_id: int) -> None:
        """Send checkpoint barrier ``checkpoint_id`` after the elements collected so far (the island's cut)."""
        if not self.signalled_terminal:
            self.on_signal(ChannelBarrier(checkpoint_id))

    def on_push(self) -> None:
        frame = self.frame
        was_empty = not frame
        if self.chunked:
            chunk = self.grab(self.in_)
            frame.extend(chunk)
            self.demand -= len(chunk)
            if self.frame_ts is not None:
                ts = self._ts  # None when the chunk's elements carry no timestamps (before any assigner)
                self.frame_ts.extend(ts if ts is not None else [None] * len(chunk))
        else:
            frame.append(self.grab(self.in_))
            self.demand -= 1
            if self.frame_ts is not None:
                self.frame_ts.append(self._ts)
        if len(frame) >= self.frame_cap:
            self.flush()
        elif was_empty:
            self._interpreter.host.mark_dirty(self)
        if self.demand > 0:
            self._pull_upstream()

    def flush(self) -> None:
        """Send the collected frame (called by the host at the end of an interpreter turn). Over a
        windowed transport, while ``window`` frames are unconfirmed the frame keeps growing instead
        (up to the demand); the subscriber confirms frames with its requests or with ``ack``. A frame holds at
        most ``frame_cap`` elements, adapted after each frame on a transport that reports encoded sizes."""
        seq0 = self.frame_seq
        while (self.frame or self.frame_signals) and not self.signalled_terminal and (
            not self.windowed or self.frame_seq - self.acked < self.window
        ):
            frame = self.frame
            ts = self.frame_ts
            cap = self.frame_cap
            if self.store_gated and frame and not self.frame_signals:
                # elements beyond the store budget wait for the subscriber to consume (a signal behind them does
                # not: it must not be delayed, and the pulls the budget allows keep what is collected small)
                fit = self._store_fit()
                if fit < 1:
                    break
                if fit < cap:
                    cap = fit
            if len(frame) > cap:
                self.frame = frame[cap:]
                frame = frame[:cap]
                if ts is not None:
                    self.frame_ts = ts[cap:]
                    ts = ts[:cap]
            else:
                self.frame = []
                if ts is not None:
                    self.frame_ts = []
            seq = self.frame_seq
            self.frame_seq = seq + 1
            n = len(frame)
            self.sent += n
            if ts:
                frame = frame + [FrameTimestamps(ts)]
            if self.frame_signals:
                frame = self._attach_signals(frame)
            nbytes = self.subscriber.on_next(seq, frame)
            if self.sized and n:
                # the next frame: as many elements of this frame's average size as fit the budget
                cap = FRAME_BYTES * n // max(1, nbytes)
                self.frame_cap = 1 if cap < 1 else (cap if cap < self.max_frame else self.max_frame)
                if self.store_limit:
                    stored = self.subscriber.stored
                    if stored or self.store_gated:
                        self._count_stored(n, stored, self.subscriber.stored_largest if stored else 0)
        if self.store_gated and self.frame_seq != seq0:
            # what was sent held what it held: the budget may let less, or more, be pulled now
            self._rebalance()
            if self.demand > 0 and not self.signalled_terminal and not self.has_been_pulled(self.in_) \
                    and not self.is_closed(self.in_):
                self._resume(None)

    def _attach_signals(self, frame: list) -> list:
        """Move the signals that belong to ``frame`` (those after at most its elements) into its tail."""
        n = len(frame)
        if n and type(frame[-1]) is FrameTimestamps:
            n -= 1
        sigs = self.frame_signals
        mine = [(p, sig) for p, sig in sigs if p <= n]
        rest = [(p - n, sig) for p, sig in sigs if p > n]
        self.frame_signals = rest or None
        return frame + [FrameSignals(mine)] if mine else frame

    def _on_ack(self, frames: int) -> None:
        if frames > self.acked:
            self.acked = frames
        if self.frame or self.frame_signals:
            self.flush()
        if self.terminal is not None and not self.frame and not self.frame_signals and self.subscriber is not None:
            self._signal_terminal()

    def on_upstream_finish(self) -> None:
        self.terminal = _COMPLETED
        if self.subscriber is not None:
            self._signal_terminal()
        else:
            self.set_keep_going(True)  # stay until the subscriber comes to hear it

    def on_upstream_failure(self, exc: BaseException) -> None:
        self.terminal = StreamFailed(exc)
        if self.subscriber is not None:
            self._signal_terminal()
        else:
            self.set_keep_going(True)

    def _signal_terminal(self) -> None:
        if self.signalled_terminal:
            return
        self.flush()
        terminal = self.terminal
        if (self.frame or self.frame_signals) and isinstance(terminal, StreamCompleted):
            self.set_keep_going(True)  # the last frame waits for the window; _on_ack finishes the job
            return
        self.signalled_terminal = True
        self.set_keep_going(False)
        if isinstance(terminal, StreamCompleted):
            self.subscriber.on_complete()
        else:
            self.subscriber.on_error(terminal.cause)

    def on_island_abort(self, cause: BaseException) -> None:
        """The island is being torn down with ``cause``: the subscriber fails with it."""
        self.terminal = StreamFailed(cause)
        if self.subscriber is not None:
            self.frame = []
            self._signal_terminal()

    def post_stop(self) -> None:
        if not self.signalled_terminal and self.subscriber is not None:
            self.signalled_terminal = True
            self.subscriber.on_error(AbruptStageTerminationError(f"{self}: island stopped before the stream ended"))


class _FrameBuffer:
    """The input boundary's received elements, kept as the frames they came in (lists, never mutated:
    a frame is owned by the receiver, and a whole frame may be handed downstream as one chunk; the one exception,
    ``InputBoundary``'s store-budget paths, clear the slots of a partly taken frame, which was never handed on)."""

    __slots__ = ("frames", "head", "size")

    def __init__(self):
        self.frames: deque = deque()
        self.head = 0  # elements of frames[0] already taken
        self.size = 0  # elements buffered

    def __bool__(self) -> bool:
        return self.size > 0

    def __len__(self) -> int:
        return self.size

    def add(self, frame: list) -> None:
        """Append a non-empty frame."""
        self.frames.append(frame)
        self.size += len(frame)

    def clear(self) -> None:
        self.frames.clear()
        self.head = 0
        self.size = 0

    def take_one(self) -> Any:
        frames = self.frames
        first = frames[0]
        i = self.head
        x = first[i]
        i += 1
        if i == len(first):
            frames.popleft()
            i = 0
        self.head = i
        self.size -= 1
        return x

    def take(self, n: int) -> list:
        """The next ``n`` (1 <= n <= size) elements as a list: a whole frame itself when it fits exactly,
        a slice of one, or the frames gathered into a new list."""
        frames = self.frames
        first = frames[0]
        i = self.head
        rest = len(first) - i
        self.size -= n
        if n < rest:
            self.head = i + n
            return first[i : i + n]
        frames.popleft()
        self.head = 0
        if n == rest:
            return first if i == 0 else first[i:]
        chunk = first[i:]
        n -= rest
        while n:
            nxt = frames[0]
            if n < len(nxt):
                chunk.extend(nxt[:n])
                self.head = n
                break
            frames.popleft()
            chunk.extend(nxt)
            n -= len(nxt)
        return chunk


def _peek(buf: "_FrameBuffer", n: int) -> list:
    """The first ``n`` elements of ``buf`` (1 <= n <= size), left in place."""
    out: list = []
    head = buf.head
    for frame in buf.frames:
        part = frame[head : head + (n - len(out))]
        out.extend(part)
        head = 0
        if len(out) >= n:
            break
    return out


class InputBoundary(GraphStageLogic, OutHandler):
    """Subscriber end of a channel, feeding one inlet of this island."""

    #: at a checkpoint cut everything before the barrier was delivered; what follows it is replayed upstream
    stateless = True

    def __init__(self, publisher, size: int, name: str = "InputBoundary", out: Optional[Outlet] = None,
                 store_budget: int = 0, grow_to: int = 0):
        """``size``: the input buffer, requested up front. ``grow_to`` (> ``size``; 0: never): the buffer from the
        first frame on when that frame's first element is not large (``element_size.is_large_element``); the
        difference is requested at once (a channel between local islands, see ``InProcessTransport``)."""
        if size < 1:
            raise ValueError(f"{name}: input buffer size must be >= 1, got {size}")
        self.out = out if out is not None else Outlet(f"{name}.out")
        shape = SourceShape(self.out)
        shape.assign_ids()
        super().__init__(shape)
        self.stage_name = name
        self.publisher = publisher
        self.upstream = None
        self.size = size
        self.batch = max(1, size // 2)
        self.buffer = _FrameBuffer()
        self.ts_buffer: Optional[_FrameBuffer] = None  # event time: the timestamps, framed as ``buffer``
        self.outstanding = 0
        self.consumed = 0
        self.received = 0  # elements received (for progress reports)
        self.last_watermark = None  # the last watermark handed downstream (for progress reports)
        self.frames_received = 0
        self.frames_acked = 0
        self.acks = False  # does the publisher want frame confirmations (a windowed transport)?
        self.ack_every = 4  # half the publisher's window when it says how large that is
        self.ack_pending = False
        self.frame_seq = 0
        self.request_seq = 0
        self.upstream_completed = False
        self.upstream_done = False  # completed, failed or cancelled: no signal to send upstream any more
        # The store budget (elements passed by reference): ``store_chunk`` is the most store bytes handed downstream
        # in one chunk (0: no budget). While frames holding store bytes are buffered, ``stored_in`` lists them as
        # ``[first element's position, end position, bytes]`` and consumed elements are requested again as soon as
        # such bytes were handed on (``request_at`` drops to 1 so that the element path checks; ``batch`` else).
        self.store_chunk = store_chunk_bytes(store_budget) if store_budget > 0 else 0
        self.stored_in: Optional[deque] = None
        self.stored_unrequested = 0  # store bytes handed downstream since the last request
        self.request_at = self.batch
        self.grow_to = grow_to if grow_to > size else 0
        self.set_handler(self.out, self)
        self.subscriber_ref = CallbackSubscriberRef(self)

    def pre_start(self) -> None:
        pub = self.publisher
        if getattr(pub, "request_on_subscribe", False):
            # the first request travels with the subscription instead of answering ``on_subscribe``: on a
            # transport where each signal is a call between processes this saves a hop before the first frame.
            # The subscription is taken as made now: frames travel in another call group than ``on_subscribe``
            # and may arrive before it, and their acks and the next requests need the upstream already.
            self.early_request = True
            self._subscribed(pub)
            self.outstanding += self.size
            self.request_seq = 1
            pub.subscribe(self.subscriber_ref, self.size)
        else:
            pub.subscribe(self.subscriber_ref)

    def _subscribed(self, upstream) -> None:
        self.upstream = upstream
        self.acks = getattr(upstream, "windowed", False)
        window = getattr(upstream, "window", None)
        if window:
            self.ack_every = max(1, window // 2)

    # ------------------------------------------------------------------ signals from the publisher
    def _on_subscribe(self, upstream) -> None:
        if self.early_request and upstream is self.upstream:
            return  # the publisher confirms the subscription taken as made at start
        if self.upstream is not None:
            upstream.cancel(SpecViolationError(f"{self}: already subscribed (rule 2.5)"))
            return
        self._subscribed(upstream)
        if not self.upstream_done:
            self._request(self.size)

    def _request(self, n: int) -> None:
        self.outstanding += n
        seq = self.request_seq
        self.request_seq = seq + 1
        if self.acks:
            self.frames_acked = self.frames_received
            self.upstream.request(n, seq, self.frames_received)
        else:
            self.upstream.request(n, seq)

    def _on_next(self, seq_frame_stored) -> None:
        seq, frame, stored = seq_frame_stored
        if self.upstream_done:
            return
        if seq != self.frame_seq:
            self._fail_channel(ProtocolError(f"{self}: frame #{seq} arrived, expected #{self.frame_seq}"))
            return
        self.frame_seq = seq + 1
        tail = None
        if frame and type(frame[-1]) is FrameSignals:
            tail = frame[-1].signals
            frame = self._take_signals(frame)
        ts = None
        if frame and type(frame[-1]) is FrameTimestamps:
            ts = frame[-1].timestamps
            frame = frame[:-1]
        n = len(frame)
        if n > self.outstanding:
            self._fail_channel(SpecViolationError(f"{self}: input buffer overrun: {n} elements for {self.outstanding} requested"))
            return
        self.outstanding -= n
        self.received += n
        if stored and n and self.store_chunk:
            q = self.stored_in
            if q is None:
                q = self.stored_in = deque()
                self.request_at = 1
            q.append([self.received - n, self.received, stored])
        if self.log is not None and not self.log_complete:
            self._log_frame(frame, ts, n, tail)
        self.frames_received += 1
        if self.grow_to and n:
            self._grow(frame[0])
        if self.acks and not self.ack_pending and self.frames_received - self.frames_acked >= self.ack_every:
            # confirm at the end of the turn, unless a request sent meanwhile carried the confirmation
            self.ack_pending = True
            self._interpreter.host.mark_dirty(self)
        buf = self.buffer
        if n:
            buf.add(frame)
            if self.ts_buffer is not None:
                self.ts_buffer.add(ts if ts is not None else [None] * n)
        if self.signals:
            self._emit_due_signals()  # a signal placed before these elements goes first
            if self.blocked_at is not None and self._held():
                return
        if buf and self.is_available(self.out):
            if self.chunked:
                self._push_chunk()
            else:
                self._push_one()
        if self.signals:
            self._emit_due_signals()

    def _grow(self, first: Any) -> None:
        """The first elements arrived: unless ``first`` is large, the buffer becomes ``grow_to`` elements and the
        difference is requested now (half of it again each time half was consumed, as before)."""
        grow_to, self.grow_to = self.grow_to, 0
        if is_large_element(first):
            return
        extra = grow_to - self.size
        self.size = grow_to
        self.batch = max(1, grow_to // 2)
        if self.stored_in is None:
            self.request_at = self.batch
        self._request(extra)

    def flush(self) -> None:
        """End of the host's turn: confirm the frames received, if ``ack_every`` or more are unconfirmed
        (windowed transports; a request confirms them too, so a turn that requested needs no ack)."""
        self.ack_pending = False
        if self.upstream_done or self.upstream is None:
            return
        received = self.frames_received
        if received - self.frames_acked >= self.ack_every:
            self.frames_acked = received
            self.upstream.ack(received)

    def _on_complete(self, _=None) -> None:
        if self.upstream_done:
            return
        self.upstream_done = True
        self.upstream_completed = True
        if not self.buffer and not (self.blocked_at is not None and self._held()):
            if self.signals:
                self._emit_due_signals()
            else:
                self.complete(self.out)

    def _on_error(self, exc) -> None:
        if self.upstream_done:
            return
        self.upstream_done = True
        self._clear_buffer()
        self.fail(self.out, exc)

    def _clear_buffer(self, by_downstream: bool = False) -> None:
        cp = self.checkpointer
        if cp is not None and cp.pending is not None and self._undelivered_count(cp.pending) > 0:
            cp.channel_state_dropped(self, by_downstream)  # the pending checkpoint's cut can no longer hold them
        self.buffer.clear()
        if self.ts_buffer is not None:
            self.ts_buffer.clear()
        self.stored_in = None
        self.request_at = self.batch

    def _fail_channel(self, exc: BaseException) -> None:
        self._clear_buffer()
        self._cancel_upstream(exc)
        self.fail_stage(exc)

    # ------------------------------------------------------------------ downstream side
    #: the first request went out with the subscription (``pre_start``), not in answer to ``on_subscribe``
    early_request = False
    #: chunk form: downstream takes lists of elements, as many as buffered and its pull accepts (and
    #: never past a signal that is due in between). A handed-out chunk counts as consumed at once, so
    #: while downstream works through it the buffer refills: the island then holds up to two buffers'
    #: worth of elements (still bounded by ``input_buffer``).
    chunked = False
    signals: Optional[deque] = None  # (element position in the channel, signal), oldest first
    delivered = 0  # elements pushed downstream so far
    #: the island's checkpointer (checkpointing on), told when a checkpoint barrier is reached
    checkpointer = None
    #: the checkpoint whose barrier this input received (aligned checkpoints): the elements before the barrier
    #: still go downstream, nothing after it - element, signal or completion - until the checkpointer's cut
    #: releases it; what was received before the barrier but not delivered at the cut is channel state
    blocked_at: Optional[int] = None
    #: the last checkpoint whose barrier arrived here (blocked on or, at-least-once, delivered past)
    barrier_seen: Optional[int] = None
    #: logged checkpoints: what arrives after the island's cut of ``log_for`` and before its barrier here
    #: (the channel's state in that checkpoint; the elements are delivered as usual too)
    log: Optional[list] = None
    log_ts: Optional[list] = None
    log_signals: Optional[list] = None  # (elements of ``log`` before it, signal)
    log_for: Optional[int] = None
    log_complete = False

    def chunk_capable(self) -> bool:
        return True

    def chunk_timestamps(self) -> bool:
        return True

    def enable_chunks(self, chunk_size: int) -> None:
        self.chunked = True

    def enable_event_time(self) -> None:
        super().enable_event_time()
        self.ts_buffer = _FrameBuffer()

    def _take_signals(self, frame: list) -> list:
        """Split a frame's signal tail off; the signals are queued at their element positions. A checkpoint
        barrier is announced to the island's checkpointer on arrival (it may cut before delivering up to it)."""
        tail = frame[-1]
        frame = frame[:-1]
        base = self.received  # the elements received before this frame
        if self.signals is None:
            self.signals = deque()
        for p, sig in tail.signals:
            if type(sig) is ChannelBarrier:
                cp = self.checkpointer
                hold = None if cp is None else cp.barrier_reached(self, sig.checkpoint_id)
                if hold is None:
                    continue  # no checkpointing here, or a checkpoint given up: the barrier is dropped
                self.barrier_seen = sig.checkpoint_id
                if hold:
                    self.blocked_at = sig.checkpoint_id
            self.signals.append((base + p, sig))
        return frame

    def _held(self) -> bool:
        """Delivery stands at a checkpoint barrier that waits for the cut."""
        sigs = self.signals
        return bool(sigs) and type(sigs[0][1]) is ChannelBarrier and sigs[0][0] <= self.delivered

    def undelivered_before_cut(self, checkpoint_id: int) -> tuple:
        """``(elements, timestamps or None, signals)`` received but not delivered that belong before the cut of
        ``checkpoint_id`` (``_undelivered_count``); ``signals``: the control signals among them not sent on yet, as
        ``(how many of the elements come before it, signal)``."""
        n = self._undelivered_count(checkpoint_id)
        sigs: list = []
        queued = self.signals
        if queued:
            cut_here = self.barrier_seen == checkpoint_id
            if not cut_here or any(type(sig) is ChannelBarrier and sig.checkpoint_id == checkpoint_id
                                   for _p, sig in queued):
                delivered = self.delivered
                for pos, sig in queued:
                    if type(sig) is ChannelBarrier:
                        if cut_here and sig.checkpoint_id == checkpoint_id:
                            break
                        continue  # a barrier of a checkpoint given up
                    sigs.append((max(0, pos - delivered), sig))
        if n <= 0:
            return [], None, sigs
        elems = _peek(self.buffer, n)
        ts = _peek(self.ts_buffer, n) if self.ts_buffer is not None else None
        return elems, ts, sigs

    def _undelivered_count(self, checkpoint_id: int) -> int:
        """How many buffered elements belong before the cut of ``checkpoint_id``: those up to its barrier, none once
        delivery went past the barrier (at-least-once checkpoints do not hold it), all once upstream has ended
        without one."""
        buf = self.buffer
        if self.barrier_seen != checkpoint_id:
            return buf.size
        for pos, sig in self.signals or ():  # delivered past the barrier, unless it is still ahead
            if type(sig) is ChannelBarrier and sig.checkpoint_id == checkpoint_id:
                return min(buf.size, pos - self.delivered)
        return 0

    def start_log(self, checkpoint_id: int) -> None:
        """Record what arrives from now on until barrier ``checkpoint_id`` (the island's cut is done)."""
        self.log, self.log_for, self.log_complete = [], checkpoint_id, False
        self.log_ts = [] if self.ts_buffer is not None else None
        self.log_signals = []

    def _log_frame(self, frame: list, ts: Optional[list], n: int, tail: Optional[list] = None) -> None:
        """Log the frame's elements, and the signals of its tail (``(position in the frame, signal)``), that came
        before the logged checkpoint's barrier (all of them if it is not in this frame; the barrier's signal is
        still queued, delivery has not reached it)."""
        limit = n
        if self.barrier_seen == self.log_for:
            base = self.received - n
            for pos, sig in self.signals or ():
                if type(sig) is ChannelBarrier and sig.checkpoint_id == self.log_for:
                    limit = max(0, min(n, pos - base))
                    break
            self.log_complete = True
        if tail:
            logged = len(self.log)
            for p, sig in tail:
                if type(sig) is ChannelBarrier:
                    if sig.checkpoint_id == self.log_for:
                        break
                    continue
                self.log_signals.append((logged + p, sig))
        if limit:
            self.log.extend(frame[:limit])
            if self.log_ts is not None:
                self.log_ts.extend(ts[:limit] if ts is not None else [None] * limit)

    @property
    def logged_all(self) -> bool:
        """The log holds everything of the logged checkpoint: its barrier came, or upstream ended."""
        return self.log_complete or self.upstream_done

    def take_log(self) -> tuple:
        """``(elements, timestamps or None, signals)`` logged, and stop logging."""
        elems, ts, sigs = self.log or [], self.log_ts, self.log_signals or []
        self.log = self.log_ts = self.log_signals = self.log_for = None
        self.log_complete = False
        return elems, (ts if ts is not None and any(t is not None for t in ts) else None), sigs

    def _emit_due_signals(self) -> None:
        """Emit every signal whose elements before it have all been pushed downstream."""
        sigs = self.signals
        while sigs and sigs[0][0] <= self.delivered:
            sig = sigs[0][1]
            if type(sig) is ChannelBarrier:
                if self.blocked_at == sig.checkpoint_id:
                    return  # the cut releases it
                sigs.popleft()  # a barrier of a checkpoint given up meanwhile
                continue
            sigs.popleft()
            if type(sig) is Watermark:
                self.last_watermark = sig.timestamp  # read by the host's info() (consoles, metrics)
            self.emit_signal(self.out, sig)
        if self.upstream_completed and not self.buffer and not sigs and not self.is_closed(self.out):
            self.complete(self.out)

    def _push_chunk(self) -> None:
        buf = self.buffer
        n = min(buf.size, self._out_conns[0].demand)
        if self.signals:  # stop at the next signal (due ones went out already, so it is ahead)
            n = max(1, min(n, self.signals[0][0] - self.delivered))
        stored = self.stored_in is not None
        if stored:  # frames holding store bytes are buffered: a chunk holds at most ``store_chunk`` of them
            n = self._stored_cap(n)
            first, head = buf.frames[0], buf.head
        chunk = buf.take(n)
        if stored and buf.head:
            # a frame partly handed on (never handed on whole, so only this buffer has it): forget that part
            rest, h = buf.frames[0], buf.head
            start = head if rest is first else 0
            rest[start:h] = [None] * (h - start)
        self.delivered += len(chunk)
        if self.ts_buffer is not None:
            self.push(self.out, chunk, self.ts_buffer.take(n))
        else:
            self.push(self.out, chunk)
        if not self.upstream_completed:
            self.consumed += len(chunk)
            if stored:
                self._stored_delivered(len(chunk))  # requests what was consumed as soon as it held store bytes
            elif self.consumed >= self.batch:
                n = (self.consumed // self.batch) * self.batch
                self.consumed -= n
                self._request(n)

    def _push_one(self) -> None:
        self.delivered += 1
        if self.ts_buffer is not None:
            self.push(self.out, self.buffer.take_one(), self.ts_buffer.take_one())
        else:
            self.push(self.out, self.buffer.take_one())
        if not self.upstream_completed:
            self.consumed += 1
            if self.consumed >= self.request_at:
                if self.stored_in is None:
                    self.consumed = 0
                    self._request(self.batch)
                else:
                    buf = self.buffer
                    if buf.head:  # the element's frame is still buffered: drop its reference to the element
                        buf.frames[0][buf.head - 1] = None
                    self._stored_delivered(1)

    # ------------------------------------------------------------------ the store budget
    def _stored_cap(self, n: int) -> int:
        """Of the next ``n`` elements, how many a chunk takes so that it holds at most ``store_chunk`` store bytes
        (at least one), at each frame's average bytes per element."""
        d = self.delivered
        limit = d + n
        room = self.store_chunk
        for start, end, stored in self.stored_in:
            if start >= limit:
                break
            lo = start if start > d else d
            hi = end if end < limit else limit
            if hi <= lo:
                continue
            per = stored / (end - start)
            b = per * (hi - lo)
            if b > room:
                k = lo + int(room // per) - d
                return k if k > 1 else 1
            room -= b
        return n

    def _stored_delivered(self, k: int) -> None:
        """``k`` elements were handed downstream: count the store bytes they held, and request what was consumed
        once that reaches half a chunk's share or the buffer ran dry (the publisher may be waiting for the budget);
        back to requests by ``batch`` once no frame holding store bytes is left."""
        d = self.delivered
        d0 = d - k
        q = self.stored_in
        b = 0
        for start, end, stored in q:
            if start >= d:
                break
            lo = start if start > d0 else d0
            hi = end if end < d else d
            if hi > lo:
                part = stored * (hi - lo) // (end - start)
                b += part if part > 0 else 1
        while q and q[0][1] <= d:
            q.popleft()
        if b:
            self.stored_unrequested += b
        un = self.stored_unrequested
        if self.consumed >= self.batch or (un and (un >= (self.store_chunk + 1) // 2 or not self.buffer)):
            n = self.consumed
            self.consumed = 0
            self.stored_unrequested = 0
            if n:
                self._request(n)
        if not q and not self.stored_unrequested:
            self.stored_in = None
            self.request_at = self.batch

    def release_barrier(self) -> None:
        """The checkpointer's cut is done (or the checkpoint was given up): go on past the barrier."""
        n = self.blocked_at
        if n is None:
            return
        self.blocked_at = None
        sigs = self.signals
        if sigs:
            self.signals = deque(item for item in sigs if not (type(item[1]) is ChannelBarrier
                                                                and item[1].checkpoint_id <= n))
        if self.is_closed(self.out):
            return
        if self.is_available(self.out):
            self.on_pull()
        else:
            if self.signals:
                self._emit_due_signals()
            if self.upstream_completed and not self.buffer and not self.signals and not self.is_closed(self.out):
                self.complete(self.out)

    @property
    def delivered_all(self) -> bool:
        """Upstream ended: nothing more will arrive (what it sent may still wait in the buffer)."""
        return self.upstream_done or self.is_closed(self.out)

    def on_pull(self) -> None:
        if self.blocked_at is not None and self._held():
            return
        if self.buffer:
            if self.chunked:
                self._push_chunk()
            else:
                self._push_one()
        if self.signals:
            self._emit_due_signals()  # and completes once everything is out
        elif self.upstream_completed and not self.buffer:
            self.complete(self.out)

    def _cancel_upstream(self, cause: BaseException) -> None:
        if not self.upstream_done:
            self.upstream_done = True
            # before on_subscribe arrived, the publisher ref itself accepts the cancel
            (self.upstream if self.upstream is not None else self.publisher).cancel(cause)

    def on_downstream_finish(self, cause: BaseException) -> None:
        self._clear_buffer(by_downstream=True)
        self._cancel_upstream(cause)
        self.complete_stage()

    def on_island_abort(self, cause: BaseException) -> None:
        """The island is being torn down with ``cause``: upstream is cancelled with it."""
        self._clear_buffer()
        self._cancel_upstream(cause)

    def post_stop(self) -> None:
        self._cancel_upstream(AbruptStageTerminationError(f"{self}: island stopped before the stream ended"))
