"""Test probes (Pekko's StreamTestKit): a publisher probe as Source, a subscriber probe as Sink.

Like Pekko's, the probes are channel endpoints: ``TestSource.probe()`` feeds the stream through an
input boundary (so ``expect_request()`` sees the boundary's batched demand, e.g. 16 then 8), and
``TestSink.probe()`` consumes through an output boundary (so nothing flows until ``request(n)``).
Every ``expect_*`` waits up to ``timeout`` seconds (default 3) and raises ``AssertionError``.

Under a manual clock (``Materializer.local(clock=ManualClock())``) ``expect_no_message(d)`` advances
the virtual clock by ``d`` - which returns once every effect of the timers due meanwhile was handled -
and then checks that nothing arrived, instead of sleeping. The other timeouts stay wall-clock waits.

Event time: ``TestSource.probe(event_time=True)`` is an event-time stage (the graph carries timestamps):
``send_next(x, ts=...)`` stamps elements; ``send_watermark(w)`` / ``send_idle()`` put markers on the
signal lane (they need no demand; they work on plain probes too). ``TestSink.probe()`` reads the
timestamps and control signals that frames carry; see ``TestSubscriberProbe`` for how signals and
``expect_next`` interleave.
"""
from __future__ import annotations

import queue
import time
from typing import Any, List, Optional

from ..errors import NO_MORE_ELEMENTS_NEEDED, IllegalStateError
from .._impl.islands.boundaries import MAX_DEMAND, FrameSignals, FrameTimestamps, InputBoundary, OutputBoundary
from .._impl.ops.base import SinkStage, SourceStage
from ..stage.attributes import InputBuffer
from ..stage.signals import IDLE, Idle, Signal, Watermark

DEFAULT_TIMEOUT = 3.0
_UNSET = object()


class _EventQueue:
    def __init__(self, owner: str):
        self.owner = owner
        self.q: "queue.Queue" = queue.Queue()
        self.stash: List[tuple] = []

    def put(self, ev: tuple) -> None:
        self.q.put(ev)

    def next(self, timeout: float, what: str) -> tuple:
        if self.stash:
            return self.stash.pop(0)
        try:
            return self.q.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"{self.owner}: timeout ({timeout}s) while waiting for {what}") from None

    def snapshot(self) -> List[tuple]:
        """Every event not consumed yet, in order (the queue is left empty)."""
        out = list(self.stash)
        self.stash = []
        while True:
            try:
                out.append(self.q.get_nowait())
            except queue.Empty:
                return out

    def peek_none(self, seconds: float) -> Optional[tuple]:
        if self.stash:
            return self.stash[0]
        try:
            ev = self.q.get(timeout=seconds) if seconds > 0 else self.q.get_nowait()
        except queue.Empty:
            return None
        self.stash.append(ev)
        return ev


def _manual_clock(logic) -> Any:
    """The driven (virtual) clock the probe's stage runs under, or None (real time, or not running
    in this process)."""
    interp = getattr(logic, "interpreter", None) if logic is not None else None
    clock = getattr(getattr(interp, "host", None), "clock", None)
    if getattr(clock, "drives_timers", False) and hasattr(clock, "advance"):
        return clock
    return None


class TestPublisherProbe:
    """Drives a stream from a test: ``send_next``/``send_complete``/``send_error``, and observes the
    stream's demand (``expect_request``) and cancellation (``expect_cancellation``)."""

    __test__ = False  # not a pytest test class

    def __init__(self, timeout: float = DEFAULT_TIMEOUT, event_time: bool = False):
        self.timeout = timeout
        self.event_time = event_time  # the probe's stage is an event-time stage (send_next(x, ts=...))
        self._events = _EventQueue("TestPublisherProbe")
        self._subscriber = None
        self._seq = 0
        self._expected_request_seq = 0
        self.pending = 0  # demand received and not yet used by send_next
        self._logic = None  # the stage feeding the stream (to find its clock)

    def __atoll_detach__(self) -> "TestPublisherProbe":
        """A copy for the driver once the probe's island has ended: it holds the demand and
        cancellation events not consumed yet; elements sent to it go nowhere."""
        copy = TestPublisherProbe(self.timeout, self.event_time)
        copy._events.stash = [ev for ev in self._events.snapshot() if ev[0] != "subscribe"]
        copy._subscriber = _EndedChannel()
        copy._seq = self._seq
        copy._expected_request_seq = self._expected_request_seq
        copy.pending = self.pending
        return copy

    def __reduce__(self):
        return (
            _rebuild_publisher,
            (self.timeout, self._events.stash, self._seq, self._expected_request_seq, self.pending, self.event_time),
        )

    # -- publisher protocol (called from the stream's island) --------------------------------
    def subscribe(self, subscriber) -> None:
        self._events.put(("subscribe", subscriber))
        subscriber.on_subscribe(self)

    def request(self, n: int, seq: int, acked=None) -> None:
        self._events.put(("request", n, seq))

    def cancel(self, cause: BaseException) -> None:
        self._events.put(("cancel", cause))

    # -- test API ------------------------------------------------------------------------------
    def ensure_subscription(self) -> "TestPublisherProbe":
        while self._subscriber is None:
            ev = self._events.next(self.timeout, "the stream to subscribe")
            if ev[0] == "subscribe":
                self._subscriber = ev[1]
            else:
                self._events.stash.append(ev)
                break
        return self

    expect_subscription = ensure_subscription

    def expect_request(self) -> int:
        """Wait for the next demand signal and return its ``n``."""
        self.ensure_subscription()
        ev = self._next_skipping_subscribe("a request")
        if ev[0] != "request":
            raise AssertionError(f"TestPublisherProbe: expected a request, got {ev[0]} {ev[1:]!r}")
        n, seq = ev[1], ev[2]
        if seq != self._expected_request_seq:
            raise AssertionError(f"TestPublisherProbe: request #{seq} arrived, expected #{self._expected_request_seq}")
        self._expected_request_seq += 1
        self.pending += n
        return n

    def _next_skipping_subscribe(self, what: str) -> tuple:
        while True:
            ev = self._events.next(self.timeout, what)
            if ev[0] != "subscribe":
                return ev

    def send_next(self, elem: Any, ts: Any = None) -> "TestPublisherProbe":
        """Emit ``elem`` (waiting for demand first if there is none). ``ts``: the element's event
        timestamp, only on ``TestSource.probe(event_time=True)``; without it an event-time probe sends
        the element with no timestamp (a window downstream then fails with ``MissingTimestampError``)."""
        frame = self._element_frame(elem, ts)
        self.ensure_subscription()
        if self.pending == 0:
            self.expect_request()
        self.pending -= 1
        self._send_frame(frame)
        return self

    def _element_frame(self, elem: Any, ts: Any) -> list:
        if ts is None:
            return [elem]
        if not self.event_time:
            raise IllegalStateError(
                "TestPublisherProbe: send_next(..., ts=...) needs an event-time probe: use "
                "TestSource.probe(event_time=True)"
            )
        return [elem, FrameTimestamps([ts])]

    def _send_frame(self, frame: list) -> None:
        seq = self._seq
        self._seq += 1
        self._subscriber.on_next(seq, frame)

    def send_signal(self, signal: Signal) -> "TestPublisherProbe":
        """Put a control signal on the stream, after the elements sent so far; needs no demand (a frame
        with no element, which still takes its frame sequence number)."""
        if not isinstance(signal, Signal):
            raise TypeError(f"TestPublisherProbe.send_signal: expected an atoll Signal, got {signal!r}")
        self.ensure_subscription()
        self._send_frame([FrameSignals([(0, signal)])])
        return self

    def send_watermark(self, timestamp: Any) -> "TestPublisherProbe":
        """Send ``Watermark(timestamp)``: no element with a smaller timestamp follows (needs no demand)."""
        return self.send_signal(Watermark(timestamp))

    def send_idle(self) -> "TestPublisherProbe":
        """Send the ``IDLE`` marker (needs no demand)."""
        return self.send_signal(IDLE)

    def send_next_many(self, *elems: Any) -> "TestPublisherProbe":
        for e in elems:
            self.send_next(e)
        return self

    def unsafe_send_next(self, elem: Any, ts: Any = None) -> "TestPublisherProbe":
        """Emit ``elem`` without checking demand (to test overrun handling)."""
        frame = self._element_frame(elem, ts)
        self.ensure_subscription()
        self._send_frame(frame)
        return self

    def send_complete(self) -> "TestPublisherProbe":
        self.ensure_subscription()
        self._subscriber.on_complete()
        return self

    def send_error(self, exc: BaseException) -> "TestPublisherProbe":
        self.ensure_subscription()
        self._subscriber.on_error(exc)
        return self

    def expect_cancellation(self) -> BaseException:
        """Wait for the stream to cancel (skipping demand signals); returns the cause."""
        self.ensure_subscription()
        while True:
            ev = self._next_skipping_subscribe("cancellation")
            if ev[0] == "cancel":
                return ev[1]
            if ev[0] == "request":
                self._expected_request_seq += 1
                self.pending += ev[1]
                continue
            raise AssertionError(f"TestPublisherProbe: expected cancellation, got {ev!r}")

    def expect_cancellation_with_cause(self, cause_type) -> BaseException:
        cause = self.expect_cancellation()
        ok = isinstance(cause, cause_type) if isinstance(cause_type, type) else cause == cause_type
        if not ok:
            raise AssertionError(f"TestPublisherProbe: cancelled with {cause!r}, expected {cause_type!r}")
        return cause

    def expect_no_message(self, seconds: float = 0.1) -> "TestPublisherProbe":
        """No demand or cancellation for ``seconds`` (virtual seconds under a manual clock)."""
        clock = _manual_clock(self._logic)
        if clock is not None:
            clock.advance(seconds)
        ev = self._events.peek_none(0.0 if clock is not None else seconds)
        if ev is not None and ev[0] != "subscribe":
            raise AssertionError(f"TestPublisherProbe: expected no message for {seconds}s, got {ev!r}")
        if ev is not None:
            self._events.stash.pop(0)
            self._subscriber = ev[1]
        return self


class _Next(tuple):
    """A ``("next", elem)`` event whose element came with an event timestamp (``.ts``); equal to the
    plain 2-tuple, so code comparing events is unaffected."""

    def __new__(cls, elem: Any, ts: Any):
        self = tuple.__new__(cls, ("next", elem))
        self.ts = ts
        return self

    def __reduce__(self):
        return (_Next, (self[1], self.ts))


class TestSubscriberProbe:
    """Consumes a stream in a test: ``request(n)``, then ``expect_next``/``expect_complete``/
    ``expect_error``; ``cancel`` stops it.

    Control signals (watermarks, idle markers, barriers) arriving in the frames are recorded, never
    dropped, in one of two ways chosen when the probe is made (``TestSink.probe(signals=...)``):

    * ``signals=True`` (the default of ``TestSink.probe(event_time=True)``): a signal is an event in
      the same queue as the elements, in arrival order. ``expect_next`` (and every other ``expect_*`` of
      elements or termination) fails on a signal that is next, so a test states every signal where it
      arrives: ``expect_next(a)``, ``expect_watermark(10)``, ``expect_next(b)``. ``expect_event``
      returns ``("signal", sig)``; ``to_strict`` returns elements and signals in order.
    * ``signals=False`` (the default of a plain probe: today's behaviour): signals go to a separate
      queue; the element methods never see them, and ``expect_watermark``/``expect_idle``/
      ``expect_signal`` read that queue in arrival order (their order against elements is not
      checked). ``expect_no_message`` ignores them.

    Watermarks coalesce on a connection (latest wins), so whether a watermark directly followed by a
    larger one shows is a matter of timing: ``expect_watermark(w)`` accepts (and drops) watermarks
    smaller than ``w`` that come right before it with nothing in between.
    """

    __test__ = False

    def __init__(self, timeout: float = DEFAULT_TIMEOUT, event_time: bool = False, signals: bool = False):
        self.timeout = timeout
        self.event_time = event_time
        self.signals_inline = signals
        self._events = _EventQueue("TestSubscriberProbe")
        self._signal_queue: List[Signal] = []  # signals=False: the signals received, oldest first
        self._subscription = None
        self._request_seq = 0
        self._expected_frame = 0
        self._logic = None  # the stage feeding the probe (to find its clock)

    def __atoll_detach__(self) -> "TestSubscriberProbe":
        """A copy for the driver once the probe's island has ended (see ``atoll._impl.actors.exports``):
        it holds the events not consumed yet; demand and cancel signals go nowhere."""
        copy = TestSubscriberProbe(self.timeout, self.event_time, self.signals_inline)
        copy._events.stash = [ev for ev in self._events.snapshot() if ev[0] != "subscribe"]
        copy._signal_queue = list(self._signal_queue)
        copy._subscription = _EndedChannel()
        copy._request_seq = self._request_seq
        copy._expected_frame = self._expected_frame
        return copy

    def __reduce__(self):
        # only detached copies travel (live probes stay in their island as handles)
        return (_rebuild_subscriber, (self.timeout, self._events.stash, self._request_seq, self._expected_frame,
                                      self.event_time, self.signals_inline, self._signal_queue))

    # -- subscriber protocol (called from the stream's island) ---------------------------------
    def on_subscribe(self, subscription) -> None:
        self._events.put(("subscribe", subscription))

    def on_next(self, seq: int, frame: list) -> None:
        self._events.put(("frame", seq, frame))

    def on_complete(self) -> None:
        self._events.put(("complete",))

    def on_error(self, exc: BaseException) -> None:
        self._events.put(("error", exc))

    # -- internals ---------------------------------------------------------------------------
    def _expand(self, seq: int, frame: list) -> List[tuple]:
        """The events of one frame (checked for its sequence number): its elements, with their
        timestamps when the frame carries them, and its signals at their positions (or, with
        ``signals=False``, signals appended to the separate signal queue)."""
        if seq != self._expected_frame:
            raise AssertionError(f"TestSubscriberProbe: frame #{seq} arrived, expected #{self._expected_frame}")
        self._expected_frame += 1
        sigs = ()
        if frame and type(frame[-1]) is FrameSignals:
            sigs = frame[-1].signals
            frame = frame[:-1]
        if frame and type(frame[-1]) is FrameTimestamps:
            stamps = frame[-1].timestamps
            frame = frame[:-1]
            events = [_Next(e, t) for e, t in zip(frame, stamps)]
        else:
            events = [("next", e) for e in frame]
        if not sigs:
            return events
        if not self.signals_inline:
            self._signal_queue.extend(sig for _, sig in sigs)
            return events
        out: List[tuple] = []
        i = 0
        for pos, sig in sigs:
            out.extend(events[i:pos])
            i = max(i, pos)
            out.append(("signal", sig))
        out.extend(events[i:])
        return out

    def _expand_stash(self) -> None:
        """Expand the raw frames left in the stash (a detached copy, or one stashed by a peek), in order."""
        stash = self._events.stash
        if any(ev[0] == "frame" for ev in stash):
            out = []
            for ev in stash:
                if ev[0] == "frame":
                    out.extend(self._expand(ev[1], ev[2]))
                elif ev[0] == "subscribe":
                    self._subscription = ev[1]
                else:
                    out.append(ev)
            self._events.stash = out

    def _receive(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for one raw event and add what it brings to the stash (or the signal
        queue); False on timeout."""
        try:
            ev = self._events.q.get(timeout=timeout) if timeout > 0 else self._events.q.get_nowait()
        except queue.Empty:
            return False
        if ev[0] == "subscribe":
            self._subscription = ev[1]
        elif ev[0] == "frame":
            self._events.stash.extend(self._expand(ev[1], ev[2]))
        else:
            self._events.stash.append(ev)
        return True

    def _next_event(self, what: str) -> tuple:
        self._expand_stash()
        deadline = time.monotonic() + self.timeout
        while True:
            stash = self._events.stash
            if stash:
                return stash.pop(0)
            if not self._receive(deadline - time.monotonic()):
                raise AssertionError(f"TestSubscriberProbe: timeout ({self.timeout}s) while waiting for {what}")

    def _next_signal(self, what: str) -> Signal:
        """The next signal: the next event (``signals=True``, failing if it is no signal) or the head of
        the signal queue."""
        if self.signals_inline:
            ev = self._next_event(what)
            if ev[0] != "signal":
                raise AssertionError(f"TestSubscriberProbe: expected {what}, got {ev!r}")
            return ev[1]
        self._expand_stash()
        deadline = time.monotonic() + self.timeout
        while not self._signal_queue:
            if not self._receive(deadline - time.monotonic()):
                raise AssertionError(f"TestSubscriberProbe: timeout ({self.timeout}s) while waiting for {what}")
        return self._signal_queue.pop(0)

    def _peek_signal(self) -> Optional[Signal]:
        """The next signal if it is there already (nothing else before it), without taking it."""
        self._expand_stash()
        while self._receive(0.0):
            pass
        if self.signals_inline:
            stash = self._events.stash
            return stash[0][1] if stash and stash[0][0] == "signal" else None
        return self._signal_queue[0] if self._signal_queue else None

    # -- test API ------------------------------------------------------------------------------
    def ensure_subscription(self) -> "TestSubscriberProbe":
        while self._subscription is None:
            ev = self._events.next(self.timeout, "the subscription")
            if ev[0] == "subscribe":
                self._subscription = ev[1]
            else:
                raise AssertionError(f"TestSubscriberProbe: expected the subscription, got {ev!r}")
        return self

    expect_subscription = ensure_subscription

    def request(self, n: int) -> "TestSubscriberProbe":
        """Signal demand for ``n`` more elements."""
        self.ensure_subscription()
        seq = self._request_seq
        self._request_seq += 1
        self._subscription.request(n, seq)
        return self

    def cancel(self, cause: Optional[BaseException] = None) -> "TestSubscriberProbe":
        self.ensure_subscription()
        self._subscription.cancel(cause if cause is not None else NO_MORE_ELEMENTS_NEEDED)
        return self

    def expect_next(self, *elems: Any) -> Any:
        """With no argument: the next element. With arguments: assert the next elements in order."""
        if not elems:
            ev = self._next_event("an element")
            if ev[0] != "next":
                raise AssertionError(f"TestSubscriberProbe: expected an element, got {ev!r}")
            return ev[1]
        for want in elems:
            ev = self._next_event(f"element {want!r}")
            if ev[0] != "next":
                raise AssertionError(f"TestSubscriberProbe: expected element {want!r}, got {ev!r}")
            if ev[1] != want:
                raise AssertionError(f"TestSubscriberProbe: expected element {want!r}, got {ev[1]!r}")
        return self

    def expect_next_with_timestamp(self, elem: Any = _UNSET, ts: Any = _UNSET) -> tuple:
        """The next element and its event timestamp, as ``(elem, ts)``; asserts ``elem`` and ``ts`` when
        given. The element must have come with a timestamp (a graph with event time: make the probe
        with ``TestSink.probe(event_time=True)`` or put an event-time stage upstream)."""
        what = "an element" if elem is _UNSET else f"element {elem!r}"
        ev = self._next_event(what)
        if ev[0] != "next":
            raise AssertionError(f"TestSubscriberProbe: expected {what} with a timestamp, got {ev!r}")
        if type(ev) is not _Next:
            raise AssertionError(
                f"TestSubscriberProbe: element {ev[1]!r} came without timestamps: the graph has no event-time "
                "stage (use TestSink.probe(event_time=True))"
            )
        if elem is not _UNSET and ev[1] != elem:
            raise AssertionError(f"TestSubscriberProbe: expected element {elem!r}, got {ev[1]!r} (ts {ev.ts!r})")
        if ts is not _UNSET and ev.ts != ts:
            raise AssertionError(f"TestSubscriberProbe: expected element {ev[1]!r} at timestamp {ts!r}, got ts {ev.ts!r}")
        return ev[1], ev.ts

    def expect_signal(self, signal: Any = _UNSET) -> Signal:
        """The next control signal (asserting it equals ``signal`` when given)."""
        what = "a signal" if signal is _UNSET else f"signal {signal!r}"
        got = self._next_signal(what)
        if signal is not _UNSET and got != signal:
            raise AssertionError(f"TestSubscriberProbe: expected {what}, got {got!r}")
        return got

    def expect_watermark(self, timestamp: Any = _UNSET) -> Any:
        """The next signal is a watermark (at ``timestamp`` when given); returns its timestamp. Smaller
        watermarks right before it (nothing in between) are accepted and dropped: a connection may
        coalesce such a run to its last one, so whether they show depends on timing."""
        what = "a watermark" if timestamp is _UNSET else f"watermark {timestamp!r}"
        skipped = []
        while True:
            try:
                got = self._next_signal(what)
            except AssertionError as e:
                if skipped:
                    raise AssertionError(f"{e} (after the smaller watermarks {skipped!r})") from None
                raise
            if type(got) is not Watermark:
                raise AssertionError(f"TestSubscriberProbe: expected {what}, got signal {got!r}")
            if timestamp is _UNSET or got.timestamp == timestamp:
                return got.timestamp
            if got.timestamp > timestamp:
                raise AssertionError(f"TestSubscriberProbe: expected {what}, got {got!r}")
            skipped.append(got.timestamp)

    def expect_idle(self) -> "TestSubscriberProbe":
        """The next signal is the ``IDLE`` marker."""
        got = self._next_signal("the idle marker")
        if type(got) is not Idle:
            raise AssertionError(f"TestSubscriberProbe: expected the idle marker, got signal {got!r}")
        return self

    def expect_no_signal(self) -> "TestSubscriberProbe":
        """No signal received and not consumed yet (``signals=False``: the signal queue is empty; with
        ``signals=True``: the next event, if there is one already, is no signal). Does not wait."""
        nxt = self._peek_signal()
        if nxt is not None:
            raise AssertionError(f"TestSubscriberProbe: expected no signal, got {nxt!r}")
        return self

    def expect_next_n(self, n_or_elems) -> List[Any]:
        """``n`` next elements (an int), or assert the given list of next elements."""
        if isinstance(n_or_elems, int):
            return [self.expect_next() for _ in range(n_or_elems)]
        got = [self.expect_next() for _ in n_or_elems]
        if got != list(n_or_elems):
            raise AssertionError(f"TestSubscriberProbe: expected {list(n_or_elems)!r}, got {got!r}")
        return got

    def expect_next_unordered(self, *elems: Any) -> "TestSubscriberProbe":
        got = [self.expect_next() for _ in elems]
        if sorted(map(repr, got)) != sorted(map(repr, elems)):
            raise AssertionError(f"TestSubscriberProbe: expected {elems!r} in any order, got {got!r}")
        return self

    def request_next(self, elem: Any = _UNSET) -> Any:
        """``request(1)`` then ``expect_next`` (asserting ``elem`` if given)."""
        self.request(1)
        if elem is _UNSET:
            return self.expect_next()
        return self.expect_next(elem)

    def expect_complete(self) -> "TestSubscriberProbe":
        ev = self._next_event("completion")
        if ev[0] != "complete":
            raise AssertionError(f"TestSubscriberProbe: expected completion, got {ev!r}")
        return self

    def expect_error(self, expected: Any = None) -> BaseException:
        """Wait for the failure; ``expected`` may be an exception type or instance to compare with."""
        ev = self._next_event("an error")
        if ev[0] != "error":
            raise AssertionError(f"TestSubscriberProbe: expected an error, got {ev!r}")
        exc = ev[1]
        if expected is not None:
            if isinstance(expected, type):
                ok = isinstance(exc, expected)
            else:
                ok = exc is expected or (type(exc) is type(expected) and str(exc) == str(expected))
            if not ok:
                raise AssertionError(f"TestSubscriberProbe: expected error {expected!r}, got {exc!r}")
        return exc

    def expect_subscription_and_complete(self) -> "TestSubscriberProbe":
        self.ensure_subscription()
        return self.expect_complete()

    def expect_subscription_and_error(self, expected: Any = None) -> BaseException:
        self.ensure_subscription()
        return self.expect_error(expected)

    def expect_next_or_complete(self, elem: Any = _UNSET) -> Any:
        ev = self._next_event("an element or completion")
        if ev[0] == "complete":
            return None
        if ev[0] != "next" or (elem is not _UNSET and ev[1] != elem):
            raise AssertionError(f"TestSubscriberProbe: expected element {'' if elem is _UNSET else repr(elem)} or completion, got {ev!r}")
        return ev[1]

    def expect_next_or_error(self) -> Any:
        ev = self._next_event("an element or error")
        if ev[0] in ("next", "error"):
            return ev[1]
        raise AssertionError(f"TestSubscriberProbe: expected element or error, got {ev!r}")

    def expect_event(self) -> tuple:
        """The next raw event: ("next", e), ("complete",), ("error", exc), or with ``signals=True``
        ("signal", sig)."""
        return self._next_event("an event")

    def expect_no_message(self, seconds: float = 0.1) -> "TestSubscriberProbe":
        """No element, completion or error for ``seconds`` (virtual seconds under a manual clock:
        the clock is advanced, and what arrived meanwhile is checked without waiting). A signal counts
        as a message with ``signals=True`` only."""
        clock = _manual_clock(self._logic)
        if clock is not None:
            clock.advance(seconds)
            deadline = None
        else:
            deadline = time.monotonic() + seconds
        self._expand_stash()
        while True:
            stash = self._events.stash
            if stash:
                raise AssertionError(f"TestSubscriberProbe: expected no message for {seconds}s, got {stash[0]!r}")
            left = 0.0 if deadline is None else deadline - time.monotonic()
            if deadline is not None and left <= 0:
                return self
            if not self._receive(left):
                return self

    def to_strict(self, timeout: float = DEFAULT_TIMEOUT) -> List[Any]:
        """Request everything and collect until completion (fails on error). With ``signals=True`` the
        list holds the signals too, in their places."""
        self.request(MAX_DEMAND)
        out = []
        deadline = time.monotonic() + timeout
        while True:
            saved, self.timeout = self.timeout, max(0.001, deadline - time.monotonic())
            try:
                ev = self._next_event("completion")
            finally:
                self.timeout = saved
            if ev[0] == "next" or ev[0] == "signal":
                out.append(ev[1])
            elif ev[0] == "complete":
                return out
            else:
                raise AssertionError(f"TestSubscriberProbe: stream failed with {ev[1]!r}") from ev[1]


class _EndedChannel:
    """The peer of a probe whose stream has ended: every signal is dropped (as after completion)."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def _rebuild_subscriber(timeout, stash, request_seq, expected_frame, event_time=False, signals=False,
                        signal_queue=()) -> TestSubscriberProbe:
    p = TestSubscriberProbe(timeout, event_time, signals)
    p._events.stash = list(stash)
    p._signal_queue = list(signal_queue)
    p._subscription = _EndedChannel()
    p._request_seq = request_seq
    p._expected_frame = expected_frame
    return p


def _rebuild_publisher(timeout, stash, seq, expected_request_seq, pending, event_time=False) -> TestPublisherProbe:
    p = TestPublisherProbe(timeout, event_time)
    p._events.stash = list(stash)
    p._subscriber = _EndedChannel()
    p._seq = seq
    p._expected_request_seq = expected_request_seq
    p.pending = pending
    return p


class _ProbeSource(SourceStage):
    checkpoint_hint = "a test probe source is driven by the test and cannot replay after a restore"

    def __init__(self, timeout: float, event_time: bool = False):
        super().__init__("TestSource")
        self.timeout = timeout
        # an instance attribute: a plain probe stays a non-event-time stage
        self.event_time = event_time

    def create_logic_and_materialized_value(self, attributes):
        probe = TestPublisherProbe(self.timeout, self.event_time)
        size = attributes.get(InputBuffer).max
        logic = InputBoundary(probe, size, "TestSource", out=self.out)
        probe._logic = logic
        return logic, probe


class _ProbeSink(SinkStage):
    stateless = True  # what it received went to the test already

    def __init__(self, timeout: float, event_time: bool = False, signals: bool = False):
        super().__init__("TestSink")
        self.timeout = timeout
        self.event_time = event_time
        self.signals = signals

    def create_logic_and_materialized_value(self, attributes):
        probe = TestSubscriberProbe(self.timeout, self.event_time, self.signals)
        logic = OutputBoundary("TestSink", in_=self.in_)
        probe._logic = logic
        logic.publisher_ref.subscribe(probe)
        return logic, probe


class TestSource:
    """``TestSource.probe()``: a Source materializing a ``TestPublisherProbe``."""

    __test__ = False

    @staticmethod
    def probe(timeout: float = DEFAULT_TIMEOUT, event_time: bool = False):
        """``event_time=True``: the probe is an event-time stage (the graph carries timestamps) and
        ``send_next(x, ts=...)`` stamps the elements it sends; no ``with_timestamps`` is needed."""
        from ..dsl.source import Source

        return Source.from_graph(_ProbeSource(timeout, event_time))


class TestSink:
    """``TestSink.probe()``: a Sink materializing a ``TestSubscriberProbe``."""

    __test__ = False

    @staticmethod
    def probe(timeout: float = DEFAULT_TIMEOUT, event_time: bool = False, signals: Optional[bool] = None):
        """``event_time=True``: the probe is an event-time stage (so ``expect_next_with_timestamp`` works
        even with no other event-time stage in the graph). ``signals``: whether control signals are
        events in the element queue (True) or kept in a separate queue (False); default: ``event_time``.
        See ``TestSubscriberProbe``."""
        from ..dsl.sink import Sink

        return Sink.from_graph(_ProbeSink(timeout, event_time, event_time if signals is None else bool(signals)))
