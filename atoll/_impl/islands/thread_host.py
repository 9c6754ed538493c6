"""ThreadHost: runs one island's interpreter on a dedicated thread (the local materializer's island host).

The host owns the island's inbox (async callbacks, channel signals, control messages from any thread),
its timers and the list of output boundaries with a frame to flush. Its loop alternates: drain the
inbox, fire due timers, run one bounded interpreter turn, flush frames; it sleeps on the inbox when
there is nothing to do, and ends when every stage of the island has stopped.

Time: every semantic time read goes through the host's clock, ``host.now()`` (``atoll.stage.clock``;
a real monotonic clock unless one is given). Under a driven clock (the test kit's ``ManualClock``)
the host keeps no timers of its own: it hands them to the clock, which fires them through the inbox
when virtual time reaches them, and it reports to the clock when it posts work and when it goes idle,
so that the clock can tell when every effect of a firing has been handled. The ``perf_counter``
reads below only bound how long a turn may run (adaptive slicing); they stay on real time.
"""
from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from queue import Empty, SimpleQueue
from typing import Any, Callable, List, Optional

from ...stage.clock import REAL_CLOCK, Clock
from .inbox_wait import get_within
log = logging.getLogger("atoll.host")

_seq = itertools.count()


class _Scheduled:
    __slots__ = ("due", "seq", "fn", "args", "cancelled")

    def __init__(self, due, fn, args):
        self.due = due
        self.seq = next(_seq)
        self.fn = fn
        self.args = args
        self.cancelled = False

    def __lt__(self, other):
        return (self.due, self.seq) < (other.due, other.seq)


class IslandHost:
    """What interpreters need from whoever runs them: a thread-safe ``post``, timers, frame flushing.

    A host runs one island's interpreter plus the interpreters of substreams materialized from its
    stages (``flat_map_concat``, ``recover_with_retries`` ...), all on one thread, like Pekko's actor
    hosting several interpreter shells. Subclasses decide where the loop runs (a thread here, a Ray
    actor in ``atoll._impl.actors``). ``clock``: where time is read and, if it is a driven clock (virtual
    time), who fires the timers; default the real monotonic clock."""

    def __init__(self, name: str, event_limit: int = 2000, inbox_batch: int = 256, clock: Optional[Clock] = None):
        self.name = name
        self.clock: Clock = clock if clock is not None else REAL_CLOCK
        self._driven = self.clock.drives_timers
        self.event_limit = event_limit
        self.slice = min(16, event_limit)  # grows while turns are quick
        self.inbox_batch = inbox_batch
        self.inbox: SimpleQueue = SimpleQueue()
        self.timers: List[_Scheduled] = []
        self.dirty: List[Any] = []
        self.interpreter = None
        self.interpreters: List[Any] = []
        self.state = "created"
        self.error: Optional[BaseException] = None
        self.on_done: Optional[Callable[["IslandHost"], None]] = None
        #: checkpointing on: the island's ``IslandCheckpointer`` (polled between turns while a checkpoint is
        #: pending) and what to run right before the interpreter's ``init`` (a restore's re-pushes)
        self.checkpointer = None
        self.before_init: Optional[Callable[[], None]] = None
        self.events = 0  # interpreter events processed (read by info(); written by the host's thread only)
        self._final_info: Optional[dict] = None  # what info() read when the island was released

    # ------------------------------------------------------------------ services for the interpreter
    def now(self) -> float:
        """The host's time in seconds (its clock's): what timers and operators measure time with."""
        return self.clock.now()

    def post(self, fn: Callable, *args) -> None:
        """Thread-safe: run ``fn(*args)`` on the island's thread."""
        if self._driven:
            self.clock.host_post(self, fn, args)
        else:
            self.inbox.put((fn, args))

    def schedule(self, delay: float, fn: Callable, *args) -> _Scheduled:
        """Run ``fn(*args)`` on the island's thread after ``delay`` seconds (call from the island's thread).
        Under a driven clock the clock keeps the timer and fires it when its time has come."""
        item = _Scheduled(self.clock.now() + delay, fn, args)
        if self._driven:
            self.clock.host_schedule(self, item)
        else:
            heapq.heappush(self.timers, item)
        return item

    def fire_scheduled(self, item: _Scheduled) -> None:
        """Run a timer a driven clock says is due (on the host's thread, through the inbox)."""
        if not item.cancelled:
            item.fn(*item.args)

    def cancel_scheduled(self, handle: _Scheduled) -> None:
        handle.cancelled = True

    def mark_dirty(self, boundary) -> None:
        """``boundary`` has a frame to send at the end of this turn."""
        self.dirty.append(boundary)

    def add_interpreter(self, interp) -> None:
        """Run another interpreter on this host (a substream); call from the host's thread."""
        self.interpreters.append(interp)
        interp.init()

    # ------------------------------------------------------------------ control from any thread
    def cancel(self, cause: BaseException) -> None:
        """Fail every stage of the island with ``cause`` (thread-safe)."""
        self.post(self._cancel, cause)

    def _cancel(self, cause: BaseException) -> None:
        for interp in list(self.interpreters):
            if interp.running_stages:
                interp.fail_all(cause)
        self._flush()

    def info(self) -> dict:
        """State and progress, read without locks from any thread (figures may be a turn old).

        ``elements_in``/``elements_out``: elements received/sent through the island's channel boundaries;
        ``source_elements`` (and ``expected`` when every source knows its length): elements the island's
        own sources emitted so far, for sources that tell (ranges, sequences, ``elements_emitted``);
        ``events``: interpreter events processed (an activity figure for islands without boundaries);
        ``inputs``: per input channel ``buffered``/``capacity``/``requested`` (demand outstanding upstream)
        and ``watermark`` (the last one handed downstream, None before the first); ``outputs``: per output
        channel ``sent`` and ``demand`` (what downstream asked for and was not sent yet); ``buffer_fill``:
        buffered over capacity across inputs (0..1, None without inputs)."""
        from .boundaries import InputBoundary, OutputBoundary

        final = self._final_info
        if final is not None:
            return dict(final)
        interp = self.interpreter
        logics = interp.logics if interp is not None else []
        inputs, outputs, produced, expected, sized = [], [], 0, 0, True
        for l in logics:
            if isinstance(l, InputBoundary):
                inputs.append({"name": l.stage_name, "received": l.received, "buffered": len(l.buffer),
                               "capacity": l.size, "requested": l.outstanding, "watermark": l.last_watermark})
            elif isinstance(l, OutputBoundary):
                outputs.append({"name": l.stage_name, "sent": l.sent, "demand": l.demand})
            elif not l._in_conns:  # one of the island's own sources
                n, size = _source_progress(l)
                if n is None:
                    sized = False
                    continue
                produced += n
                if size is None:
                    sized = False
                else:
                    expected += size
        capacity = sum(i["capacity"] for i in inputs)
        d = {
            "name": self.name,
            "state": self.state,
            "running_stages": sum(i.running_stages for i in self.interpreters),
            "stages": len(logics),
            "substreams": max(0, len(self.interpreters) - 1),
            "elements_in": sum(i["received"] for i in inputs),
            "elements_out": sum(o["sent"] for o in outputs),
            "source_elements": produced,
            "events": self.events,
            "inputs": inputs,
            "outputs": outputs,
            "buffer_fill": (sum(i["buffered"] for i in inputs) / capacity) if capacity else None,
            "demand": sum(o["demand"] for o in outputs),
        }
        if sized and expected and not inputs:
            d["expected"] = expected
        return d

    def release(self) -> None:
        """The island ended and its graph finished: keep its last figures (what ``info()`` reads from now on) and
        drop the interpreters, with every stage, buffer and element they held, so that a handle on the ended graph
        (a caller's, the registry of recent graphs a console reads) keeps no stream data alive."""
        self._final_info = self.info()
        self.interpreter = None
        self.interpreters = []
        self.timers = []
        self.dirty = []
        self.checkpointer = None
        self.before_init = None
        self.on_done = None

    # ------------------------------------------------------------------ the loop
    def run_loop(self) -> None:
        """Initialize the island's interpreter and run until every interpreter on the host stopped."""
        self.state = "running"
        try:
            self.interpreters.append(self.interpreter)
            if self.before_init is not None:
                self.before_init()
            self.interpreter.init()
            self._flush()
            self._loop()
            self.state = "completed"
        except BaseException as e:  # noqa: BLE001 - a host bug must still tear the island down
            log.error("island %s crashed: %r", self.name, e, exc_info=e)
            self.error = e
            self.state = "failed"
            for interp in self.interpreters:
                try:
                    interp.fail_all(e)
                except BaseException as e2:  # noqa: BLE001
                    log.error("island %s: teardown after crash failed: %r", self.name, e2)
                    interp.finish()
            try:
                self._flush()
            except BaseException:  # noqa: BLE001
                pass
        finally:
            try:
                if self.on_done is not None:
                    self.on_done(self)
            finally:
                if self._driven:
                    self.clock.host_ended(self)

    #: a turn should leave the inbox waiting no longer than this (seconds)
    TURN_BUDGET = 0.005
    #: how often an island waiting to cut a checkpoint asks its stages again when nothing happens (seconds)
    CUT_RETRY = 0.01

    def _run_turn(self) -> bool:
        """One bounded turn of every interpreter with work; returns True while any work is queued.

        A turn is bounded by events and, adaptively, by time: when handlers are slow (user code
        that takes milliseconds per element) the event budget shrinks so that kill switches,
        cancellation and channel signals in the inbox are still served within a few handler calls."""
        interps = self.interpreters
        limit = self.slice
        busy = False
        if len(interps) == 1:
            interp = interps[0]
            if interp.queue:
                # real time, not host.now(): this measures CPU time to size the next turn
                t0 = time.perf_counter()
                self.events += limit - interp.execute(limit)
                dt = time.perf_counter() - t0
                if dt > self.TURN_BUDGET * 2 and limit > 1:
                    self.slice = max(1, limit // 4)
                elif dt < self.TURN_BUDGET / 2 and limit < self.event_limit:
                    self.slice = min(self.event_limit, limit * 2)
                busy = bool(interp.queue)
        else:
            for interp in list(interps):
                if interp.queue:
                    self.events += limit - interp.execute(limit)
                    busy = busy or bool(interp.queue)
                if interp.running_stages == 0 and not interp.queue and interp is not self.interpreter:
                    interps.remove(interp)
        if self.dirty:
            self._flush()
        return busy

    def _all_done(self) -> bool:
        for interp in self.interpreters:
            if interp.running_stages or interp.queue:
                return False
        return True

    def _loop(self) -> None:
        inbox = self.inbox
        get = inbox.get
        empty = inbox.empty
        timers = self.timers
        batch = self.inbox_batch
        qsize = inbox.qsize
        clock = time.perf_counter  # CPU budget of the inbox drain: real time on purpose
        budget = self.TURN_BUDGET
        driven = self._driven
        now = self.clock.now
        while True:
            # only what is there now (work that re-posts itself waits for the next round), and
            # never longer than a turn's budget, so interpreter events are not starved
            n = min(batch, qsize())
            if n:
                t0 = clock()
                while n:
                    fn, args = get()
                    fn(*args)
                    n -= 1
                    if clock() - t0 > budget:
                        break
            if timers:
                self._fire_due_timers()
            busy = self._run_turn()
            cp = self.checkpointer
            if cp is not None and cp.pending is not None:
                cp.poll()
                self._flush()
                busy = busy or any(i.queue for i in self.interpreters)
            if not busy and self._all_done():
                return
            if busy or not empty():
                continue
            timeout = None
            if timers:
                timeout = max(0.0, timers[0].due - now())
            elif driven and not self.clock.host_idle(self):
                continue  # something was posted meanwhile
            if cp is not None and cp.waiting_since is not None:
                # a checkpoint waits for a stage to get ready: look again soon even if no event comes
                timeout = self.CUT_RETRY if timeout is None else min(timeout, self.CUT_RETRY)
            try:
                fn, args = get_within(inbox, timeout)
            except Empty:
                continue
            fn(*args)

    def _fire_due_timers(self) -> None:
        timers = self.timers
        now = self.clock.now()
        while timers and timers[0].due <= now:
            item = heapq.heappop(timers)
            if not item.cancelled:
                item.fn(*item.args)

    def _flush(self) -> None:
        dirty = self.dirty
        if dirty:
            self.dirty = []
            for b in dirty:
                b.flush()


def _source_progress(logic) -> tuple:
    """``(elements emitted, total or None)`` of a source logic that tells, else ``(None, None)``: a logic may
    define ``elements_emitted`` (and ``size_hint``, an int or None); sequence sources (``range``,
    ``from_iterable`` over a sequence) are read from their position."""
    n = getattr(logic, "elements_emitted", None)
    if n is not None:
        hint = getattr(logic, "size_hint", None)
        return n, hint() if callable(hint) else hint
    seq, i = getattr(logic, "seq", None), getattr(logic, "i", None)
    if isinstance(i, int) and isinstance(seq, (range, list, tuple)):
        return i, len(seq)
    return None, None


class ThreadHost(IslandHost):
    """Runs the island on its own daemon thread."""

    def __init__(self, name: str, **kw):
        super().__init__(name, **kw)
        self.thread: Optional[threading.Thread] = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self.run_loop, name=f"atoll-{self.name}", daemon=True)
        if self._driven:
            # busy from now on: a driven clock must not see the graph idle before it initialized
            self.clock.host_started(self)
        self.thread.start()

    def join(self, timeout: Optional[float] = None) -> bool:
        if self.thread is None:
            return True
        self.thread.join(timeout)
        return not self.thread.is_alive()
