"""Test probes (Pekko's StreamTestKit): a publisher probe as Source, a subscriber probe as Sink.

Like Pekko's, the probes are channel endpoints: ``TestSource.probe()`` feeds the stream through an
input boundary (so ``expect_request()`` sees the boundary's batched demand, e.g. 16 then 8), and
``TestSink.probe()`` consumes through an output boundary (so nothing flows until ``request(n)``).
Every ``expect_*`` waits up to ``timeout`` seconds (default 3) and raises ``AssertionError``.

Under a manual clock (``Materializer.local(clock=ManualClock())``) ``expect_no_message(d)`` advances
the virtual clock by ``d`` - which returns once every effect of the timers due meanwhile was handled -
and then checks that nothing arrived, instead of sleeping. The other timeouts stay wall-clock waits.
"""
from __future__ import annotations

import queue
import time
from typing import Any, List, Optional

from ..errors import NO_MORE_ELEMENTS_NEEDED
from .._impl.islands.boundaries import MAX_DEMAND, InputBoundary, OutputBoundary
from .._impl.ops.base import SinkStage, SourceStage
from ..stage.attributes import InputBuffer

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

    def __init__(self, timeout: float = DEFAULT_TIMEOUT):
        self.timeout = timeout
        self._events = _EventQueue("TestPublisherProbe")
        self._subscriber = None
        self._seq = 0
        self._expected_request_seq = 0
        self.pending = 0  # demand received and not yet used by send_next
        self._logic = None  # the stage feeding the stream (to find its clock)

    def __atoll_detach__(self) -> "TestPublisherProbe":
        """A copy for the driver once the probe's island has ended: it holds the demand and
        cancellation events not consumed yet; elements sent to it go nowhere."""
        copy = TestPublisherProbe(self.timeout)
        copy._events.stash = [ev for ev in self._events.snapshot() if ev[0] != "subscribe"]
        copy._subscriber = _EndedChannel()
        copy._seq = self._seq
        copy._expected_request_seq = self._expected_request_seq
        copy.pending = self.pending
        return copy

    def __reduce__(self):
        return (
            _rebuild_publisher,
            (self.timeout, self._events.stash, self._seq, self._expected_request_seq, self.pending),
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

    def send_next(self, elem: Any) -> "TestPublisherProbe":
        """Emit ``elem`` (waiting for demand first if there is none)."""
        self.ensure_subscription()
        if self.pending == 0:
            self.expect_request()
        self.pending -= 1
        seq = self._seq
        self._seq += 1
        self._subscriber.on_next(seq, [elem])
        return self

    def send_next_many(self, *elems: Any) -> "TestPublisherProbe":
        for e in elems:
            self.send_next(e)
        return self

    def unsafe_send_next(self, elem: Any) -> "TestPublisherProbe":
        """Emit ``elem`` without checking demand (to test overrun handling)."""
        self.ensure_subscription()
        seq = self._seq
        self._seq += 1
        self._subscriber.on_next(seq, [elem])
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


class TestSubscriberProbe:
    """Consumes a stream in a test: ``request(n)``, then ``expect_next``/``expect_complete``/
    ``expect_error``; ``cancel`` stops it."""

    __test__ = False

    def __init__(self, timeout: float = DEFAULT_TIMEOUT):
        self.timeout = timeout
        self._events = _EventQueue("TestSubscriberProbe")
        self._subscription = None
        self._request_seq = 0
        self._expected_frame = 0
        self._logic = None  # the stage feeding the probe (to find its clock)

    def __atoll_detach__(self) -> "TestSubscriberProbe":
        """A copy for the driver once the probe's island has ended (see ``atoll._impl.actors.exports``):
        it holds the events not consumed yet; demand and cancel signals go nowhere."""
        copy = TestSubscriberProbe(self.timeout)
        copy._events.stash = [ev for ev in self._events.snapshot() if ev[0] != "subscribe"]
        copy._subscription = _EndedChannel()
        copy._request_seq = self._request_seq
        copy._expected_frame = self._expected_frame
        return copy

    def __reduce__(self):
        # only detached copies travel (live probes stay in their island as handles)
        return (_rebuild_subscriber, (self.timeout, self._events.stash, self._request_seq, self._expected_frame))

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
    def _next_event(self, what: str) -> tuple:
        while True:
            ev = self._events.next(self.timeout, what)
            if ev[0] == "subscribe":
                self._subscription = ev[1]
                continue
            if ev[0] == "frame":
                seq, frame = ev[1], ev[2]
                if seq != self._expected_frame:
                    raise AssertionError(f"TestSubscriberProbe: frame #{seq} arrived, expected #{self._expected_frame}")
                self._expected_frame += 1
                rest = [("next", e) for e in frame]
                self._events.stash[:0] = rest[1:]
                return rest[0]
            return ev

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
        """The next raw event: ("next", e), ("complete",) or ("error", exc)."""
        return self._next_event("an event")

    def expect_no_message(self, seconds: float = 0.1) -> "TestSubscriberProbe":
        """No element, completion or error for ``seconds`` (virtual seconds under a manual clock:
        the clock is advanced, and what arrived meanwhile is checked without waiting)."""
        clock = _manual_clock(self._logic)
        if clock is not None:
            clock.advance(seconds)
            deadline = None
        else:
            deadline = time.monotonic() + seconds
        while True:
            left = 0.0 if deadline is None else deadline - time.monotonic()
            if deadline is not None and left <= 0:
                return self
            ev = self._events.peek_none(left)
            if ev is None:
                return self
            if ev[0] == "subscribe":
                self._events.stash.pop(0)
                self._subscription = ev[1]
                continue
            raise AssertionError(f"TestSubscriberProbe: expected no message for {seconds}s, got {ev!r}")

    def to_strict(self, timeout: float = DEFAULT_TIMEOUT) -> List[Any]:
        """Request everything and collect until completion (fails on error)."""
        self.request(MAX_DEMAND)
        out = []
        deadline = time.monotonic() + timeout
        while True:
            saved, self.timeout = self.timeout, max(0.001, deadline - time.monotonic())
            try:
                ev = self._next_event("completion")
            finally:
                self.timeout = saved
            if ev[0] == "next":
                out.append(ev[1])
            elif ev[0] == "complete":
                return out
            else:
                raise AssertionError(f"TestSubscriberProbe: stream failed with {ev[1]!r}") from ev[1]


class _EndedChannel:
    """The peer of a probe whose stream has ended: every signal is dropped (as after completion)."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def _rebuild_subscriber(timeout, stash, request_seq, expected_frame) -> TestSubscriberProbe:
    p = TestSubscriberProbe(timeout)
    p._events.stash = list(stash)
    p._subscription = _EndedChannel()
    p._request_seq = request_seq
    p._expected_frame = expected_frame
    return p


def _rebuild_publisher(timeout, stash, seq, expected_request_seq, pending) -> TestPublisherProbe:
    p = TestPublisherProbe(timeout)
    p._events.stash = list(stash)
    p._subscriber = _EndedChannel()
    p._seq = seq
    p._expected_request_seq = expected_request_seq
    p.pending = pending
    return p


class _ProbeSource(SourceStage):
    def __init__(self, timeout: float):
        super().__init__("TestSource")
        self.timeout = timeout

    def create_logic_and_materialized_value(self, attributes):
        probe = TestPublisherProbe(self.timeout)
        size = attributes.get(InputBuffer).max
        logic = InputBoundary(probe, size, "TestSource", out=self.out)
        probe._logic = logic
        return logic, probe


class _ProbeSink(SinkStage):
    def __init__(self, timeout: float):
        super().__init__("TestSink")
        self.timeout = timeout

    def create_logic_and_materialized_value(self, attributes):
        probe = TestSubscriberProbe(self.timeout)
        logic = OutputBoundary("TestSink", in_=self.in_)
        probe._logic = logic
        logic.publisher_ref.subscribe(probe)
        return logic, probe


class TestSource:
    """``TestSource.probe()``: a Source materializing a ``TestPublisherProbe``."""

    __test__ = False

    @staticmethod
    def probe(timeout: float = DEFAULT_TIMEOUT):
        from ..dsl.source import Source

        return Source.from_graph(_ProbeSource(timeout))


class TestSink:
    """``TestSink.probe()``: a Sink materializing a ``TestSubscriberProbe``."""

    __test__ = False

    @staticmethod
    def probe(timeout: float = DEFAULT_TIMEOUT):
        from ..dsl.sink import Sink

        return Sink.from_graph(_ProbeSink(timeout))
