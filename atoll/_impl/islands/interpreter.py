"""GraphInterpreter: runs one island's stages synchronously (Pekko's ``GraphInterpreter``).

The island is a fixed table of logics and connections. ``push``/``pull``/close calls queue the
connection (at most one pending event per connection, its kind encoded in the port state) and
``execute`` dispatches queued events to the handlers, a bounded number per turn so the host can serve
async callbacks, timers and channel messages in between. Exceptions thrown by a handler fail that
stage: downstream fails, upstream is cancelled with the cause.

Event chasing (after Pekko's interpreter): while ``execute`` runs, a push or pull issued when nothing is
queued is not queued but kept in ``chased`` and dispatched right after the handler returns. It would be
the queue's head anyway, so the event order is exactly the plain queue's order; a chain of element-wise
stages just passes an element along without a queue round trip. Fuzzing mode
(``Materializer.local(fuzzing=seed)``) turns chasing off and queues each event before or after the last
queued one at random: handlers see a different, still legal, event order, which flushes out stages
that depend on one.
"""
from __future__ import annotations

import logging
import random
from collections import deque
from itertools import repeat
from operator import length_hint
from typing import Any, List, Optional

from ...errors import NO_MORE_ELEMENTS_NEEDED, NonFailureCancellation, PortStateError
from ...markers import Done
from ...stage.attributes import LogLevels
from ...stage._connection import (
    EMPTY,
    END_CANCELLED,
    END_COMPLETED,
    END_FAILED,
    HELD,
    IN_CLOSED,
    IN_FAILED,
    IN_READY,
    KEEP_GOING_FLAG,
    KEEP_GOING_MASK,
    OUT_CLOSED,
    OUT_READY,
    PULL_END_FLIP,
    PULLING,
    PUSH_END_FLIP,
    PUSHING,
    SIGNAL,
    Cancelled,
    Connection,
    Failed,
)

log = logging.getLogger("atoll.interpreter")

class _NoChase:
    """``chased`` outside ``execute`` (and always in fuzzing mode): pushes and pulls are queued."""

    __slots__ = ()

    def __repr__(self):
        return "NoChase"


NO_CHASE = _NoChase()


class _FinalizeMark:
    """The event "finalize the stages that just finished": put at the head of the event order by
    ``stage_finished`` while ``execute`` runs, so that the loop needs no test of its own after each event."""

    __slots__ = ("state",)

    def __init__(self):
        self.state = -1  # neither PUSHING nor PULLING: dispatched through ``_process_slow``

    def __repr__(self):
        return "FinalizeMark"


FINALIZE = _FinalizeMark()


class GraphInterpreter:
    """Executes the stages of one island; every method runs on the island's thread."""

    __slots__ = (
        "logics",
        "connections",
        "queue",
        "enqueue",
        "host",
        "materializer",
        "name",
        "running_stages",
        "chased",
        "finished",
        "refund",
        "failures",
        "restored_ends",
        "_fuzz",
        "_initialized",
    )

    def __init__(self, logics: List[Any], connections: List[Connection], host, materializer=None, name: str = "island",
                 fuzzing: Optional[int] = None):
        """``fuzzing``: a seed turns on fuzzing mode (no chasing, shuffled queue order); None is normal."""
        self.logics = logics
        self.connections = connections
        self.queue: deque = deque()
        self.host = host
        self.materializer = materializer
        self.name = name
        self.running_stages = len(logics)
        #: the queue's virtual head: the event issued while nothing was queued (``None``: free,
        #: ``NO_CHASE``: outside ``execute`` or fuzzing, queue everything)
        self.chased = NO_CHASE
        #: logics whose last port closed (``_counter`` reached 0) since the last check: finalized after the event
        self.finished: List[Any] = []
        #: budget steps ``FINALIZE`` events took without an event to dispatch after them, given back by ``execute``
        self.refund = 0
        #: failures that travelled through connections so far (failed, or cancelled with an error): a checkpoint
        #: of the island is declined when one travels while it is being taken (``IslandCheckpointer``)
        self.failures = 0
        #: after a restore: ``restored_ends(interpreter)`` closes the ports of the stages that had finished at the
        #: cut (they are not started again) once every other stage has started (``checkpointer.close_ended``)
        self.restored_ends = None
        self._fuzz = None if fuzzing is None else random.Random(fuzzing)
        self.enqueue = self.queue.append if fuzzing is None else self._enqueue_fuzzing
        self._initialized = False

    def __repr__(self):
        return f"GraphInterpreter({self.name}, {self.running_stages} running stages)"

    # ------------------------------------------------------------------ lifecycle
    def init(self) -> None:
        """Attach every logic, then run every ``pre_start`` in order."""
        for i, logic in enumerate(self.logics):
            logic._counter = (len(logic._in_conns) + len(logic._out_conns)) | (logic._counter & KEEP_GOING_FLAG)
            logic._attach(self, i)
        self._initialized = True
        for logic in self.logics:
            if logic._restored_end is not None:  # finished at the restored cut: it stays finished, never started
                logic._counter = 0
                logic._finalized = True
                self.running_stages -= 1
                continue
            try:
                logic.pre_start()
            except Exception as e:  # noqa: BLE001 - a failing pre_start fails its stage
                self._report_error(logic, e)
            self._after_stage_has_run(logic)
        if self.restored_ends is not None:
            self.restored_ends(self)

    @property
    def is_completed(self) -> bool:
        """All stages stopped and nothing left to process."""
        return self.running_stages == 0 and not self.queue

    @property
    def is_suspended(self) -> bool:
        """Events are waiting: another ``execute`` turn is needed."""
        return bool(self.queue)

    # ------------------------------------------------------------------ the event loop
    def _enqueue_fuzzing(self, conn: Connection) -> None:
        """Fuzzing mode's enqueue: the new event lands before or after the last queued one at random."""
        queue = self.queue
        if queue and self._fuzz.random() < 0.5:
            last = queue.pop()
            queue.append(conn)
            queue.append(last)
        else:
            queue.append(conn)

    def execute(self, event_limit: int) -> int:
        """Process up to ``event_limit`` events (queued and chased); returns the unused budget."""
        if self._fuzz is not None:
            return self._execute_fuzzing(event_limit)
        queue = self.queue
        pop = queue.popleft
        if self.finished:  # stages that finished outside ``execute`` (async input, timers): before any event
            self._finalize_finished()
        # a plain push or pull event is a connection whose state is exactly PUSHING or PULLING (one
        # integer comparison); any closing, failure, signal or hold bit beside it takes the slow path
        pushing, pulling, in_ready, out_ready = PUSHING, PULLING, IN_READY, OUT_READY
        remaining = event_limit if event_limit < 0 else 0  # the budget left when the loop runs out
        self.chased = None
        # the budget as an iterator that hands out the same object each time (``range`` would make a new int per
        # event past 256): the loop counts events without a decrement or a test of its own, and when the events
        # run out the iterator's length says how much budget is left (this event's included)
        budget = repeat(None, event_limit)
        for _ in budget:
            conn = self.chased
            if conn is None:
                if not queue:
                    remaining = length_hint(budget) + 1
                    break
                conn = pop()
            else:
                self.chased = None
            st = conn.state
            # the handler is read into a local before the call: ``conn.on_push()`` would compile to a
            # LOAD_METHOD on a slot, which CPython 3.11 does not specialize (a plain load + call is faster)
            if st == pushing:
                conn.state = in_ready  # PUSHING ^ PUSH_END_FLIP
                handler = conn.on_push
                try:
                    handler()
                except Exception as e:  # noqa: BLE001
                    self._report_error(conn.in_owner, e)
            elif st == pulling:
                conn.state = out_ready  # PULLING ^ PULL_END_FLIP
                handler = conn.on_pull
                try:
                    handler()
                except Exception as e:  # noqa: BLE001
                    self._report_error(conn.out_owner, e)
            else:
                self._process_slow(conn, st)
        conn = self.chased
        if conn is not None:
            if conn is FINALIZE:  # part of the last event: a stage finished by it is finalized now
                self.chased = None
                self._finalize_finished()
            else:
                queue.appendleft(conn)  # out of budget: the chased event stays the queue's head
        self.chased = NO_CHASE
        refund = self.refund
        if refund:
            self.refund = 0
            remaining += refund
        return remaining

    def _execute_fuzzing(self, event_limit: int) -> int:
        """``execute`` in fuzzing mode: no chasing, every event through the slow dispatch, and each chunk pushed
        checked against the demand of the pull it answers (a stage pushing more breaks backpressure downstream:
        an output boundary sends past the channel's demand)."""
        queue = self.queue
        remaining = event_limit
        while queue and remaining > 0:
            remaining -= 1
            conn = queue.popleft()
            st = conn.state
            if conn.chunked and st & (PUSHING | IN_CLOSED | OUT_CLOSED) == PUSHING and len(conn.slot) > conn.demand:
                owner, n = conn.out_owner, conn.demand
                error = PortStateError(
                    f"{owner}: pushed a chunk of {len(conn.slot)} elements on {conn.outlet.name} to {conn.in_owner}, "
                    f"whose pull asked for at most {n} (fuzzing mode's demand check)")
                conn.slot = conn.slot[:n]  # downstream gets what it asked for, then the pushing stage's failure
                if type(conn.ts) is list:
                    conn.ts = conn.ts[:n]
                self._report_error(owner, error)
                st = conn.state
            self._process_slow(conn, st)
            if self.finished:
                self._finalize_finished()
        return remaining

    # ------------------------------------------------------------------ the slow path: signals, holds, closes
    def _process_slow(self, conn: Connection, st: int):
        """Dispatch an event of ``conn`` whose state has control signals, a hold or a closing.

        Order on a connection is the order of emission: the signals emitted before the element in
        flight (``signals_before``), the element, the signals after it, then the closing. A held
        inlet (a fan-in waiting for a blocking signal on its other inlets) delivers nothing
        downstream until released; pulls and cancellations still travel upstream."""
        if conn is FINALIZE:
            return self._finalize_then_next()
        if st & SIGNAL and not st & HELD:
            self._deliver_signals(conn, st)
            self._after_stage_has_run(conn.in_owner)
            st = conn.state
        if st & HELD:
            if st & (PULLING | OUT_CLOSED | IN_CLOSED) == PULLING:
                return self._deliver_pull(conn, st)
            if st & (OUT_CLOSED | IN_CLOSED) == IN_CLOSED:
                return self._process_close(conn, st)
            return None
        if st & (PUSHING | IN_CLOSED | OUT_CLOSED) == PUSHING:
            logic = conn.in_owner
            conn.state = st ^ PUSH_END_FLIP
            try:
                conn.on_push()
            except Exception as e:  # noqa: BLE001
                self._report_error(logic, e)
            st = conn.state
            if st & SIGNAL and not st & (HELD | PUSHING) and conn.slot is EMPTY:
                # the signals emitted after the element, once the stage took it; one that keeps it in its inlet for
                # now (a zip waiting for its other input or for demand) hears them when it pulls that inlet again,
                # so that it cannot send them on ahead of the element
                self._deliver_signals(conn, st)
            return logic
        if st & (PULLING | OUT_CLOSED | IN_CLOSED) == PULLING:
            return self._deliver_pull(conn, st)
        return self._process_close(conn, st)

    def _finalize_then_next(self):
        """The ``FINALIZE`` event: finalize the stages the last event finished, then dispatch the next event in the
        same step of the budget (finalizing is part of the event that finished them, as ``_after_stage_has_run``
        is; a turn counts the same events as before), or give the step back when no event is left."""
        self._finalize_finished()
        conn = self.chased
        if conn is None:
            queue = self.queue
            if not queue:
                self.refund += 1
                return None
            conn = queue.popleft()
        else:
            self.chased = None
        return self._process_slow(conn, conn.state)

    def _deliver_pull(self, conn: Connection, st: int):
        logic = conn.out_owner
        conn.state = st ^ PULL_END_FLIP
        try:
            conn.on_pull()
        except Exception as e:  # noqa: BLE001
            self._report_error(logic, e)
        return logic

    def _deliver_signals(self, conn: Connection, st: int) -> None:
        """Hand ``conn``'s waiting signals to its downstream stage: those before the element in flight,
        or all of them when none is; stops early when the stage puts the inlet on hold."""
        sigs = conn.signals
        if st & IN_CLOSED or not sigs:  # a cancelled inlet hears nothing more
            conn.signals = None
            conn.signals_before = 0
            conn.state &= ~SIGNAL
            return
        n = conn.signals_before if st & PUSHING else len(sigs)
        logic = conn.in_owner
        while n > 0 and sigs:
            sig = sigs.pop(0)
            n -= 1
            if conn.signals_before:
                conn.signals_before -= 1
            if not logic._finalized:
                try:
                    logic._receive_signal(conn, sig)
                except Exception as e:  # noqa: BLE001
                    self._report_error(logic, e)
            if conn.state & HELD:
                break
        if not sigs:
            conn.signals = None
            conn.signals_before = 0
            conn.state &= ~SIGNAL
        elif not conn.state & PUSHING:
            # no element in flight: what is left (stopped by a hold or not) precedes the next element
            conn.signals_before = len(sigs)

    def emit_signal(self, conn: Connection, signal) -> None:
        """Queue ``signal`` on ``conn`` behind what its upstream pushed so far (called by logics)."""
        st = conn.state
        if st & (IN_CLOSED | OUT_CLOSED):
            return  # nobody downstream to hear it, or the upstream side already closed
        sigs = conn.signals
        if sigs is None:
            sigs = conn.signals = []
        elif sigs and signal.coalesce and type(sigs[-1]) is type(signal) and (
            not st & PUSHING or len(sigs) > conn.signals_before
        ):
            sigs[-1] = signal  # no element between them: the newer one says it all
            return
        sigs.append(signal)
        if not st & PUSHING:
            conn.signals_before = len(sigs)
        if not st & SIGNAL:
            conn.state = st | SIGNAL
            if not st & PUSHING:
                self.enqueue(conn)  # a pushed element's event delivers the signals too

    def _process_close(self, conn: Connection, st: int):
        if st & (OUT_CLOSED | IN_CLOSED) == IN_CLOSED:
            # downstream cancelled
            logic = conn.out_owner
            conn.state = st | OUT_CLOSED
            self._dec(logic)
            slot = conn.slot
            cause = slot.cause if type(slot) is Cancelled else NO_MORE_ELEMENTS_NEEDED
            conn.slot = EMPTY
            try:
                conn.out_handler.on_downstream_finish(cause)
            except Exception as e:  # noqa: BLE001
                self._report_error(logic, e)
            return logic
        if st & (OUT_CLOSED | IN_CLOSED) == OUT_CLOSED:
            logic = conn.in_owner
            if st & PUSHING:
                # an element is still on its way: deliver it, then the close event again
                conn.state = st ^ PUSH_END_FLIP
                try:
                    conn.on_push()
                except Exception as e:  # noqa: BLE001
                    self._report_error(logic, e)
                if not conn.state & IN_CLOSED:
                    self.enqueue(conn)
                return logic
            conn.state = st | IN_CLOSED
            self._dec(logic)
            alignment = getattr(logic, "_alignment", None)
            if alignment is not None:
                try:
                    alignment.on_inlet_closed()  # a closed inlet no longer holds a signal back
                except Exception as e:  # noqa: BLE001
                    self._report_error(logic, e)
            try:
                if st & IN_FAILED:
                    conn.in_handler.on_upstream_failure(conn.slot.ex)
                else:
                    conn.in_handler.on_upstream_finish()
            except Exception as e:  # noqa: BLE001
                self._report_error(logic, e)
            return logic
        return None

    def _dec(self, logic) -> None:
        """One port of ``logic`` closed; a logic left with none (and not keeping going) is finished."""
        c = logic._counter
        if c & KEEP_GOING_MASK:
            logic._counter = c = c - 1
            if c == 0:
                self.stage_finished(logic)

    def stage_finished(self, logic) -> None:
        """``logic``'s last port closed: finalize it once the handler now running returns. Inside ``execute`` the
        finalization becomes the next event (the chased one, if any, goes back to the queue's head behind it), as
        Pekko's interpreter finalizes a stage right after the event that finished it; outside, the caller (or
        the next ``execute``, before any event) finalizes."""
        self.finished.append(logic)
        chased = self.chased
        if chased is NO_CHASE or chased is FINALIZE:
            return
        if chased is not None:
            self.queue.appendleft(chased)
        self.chased = FINALIZE

    def _finalize_finished(self) -> None:
        finished = self.finished
        while finished:
            logic = finished.pop()
            if logic._counter == 0 and not logic._finalized:
                self._finalize(logic)

    def _after_stage_has_run(self, logic) -> None:
        if logic._counter == 0 and not logic._finalized:
            self._finalize(logic)
        if self.finished:
            self._finalize_finished()

    def _report_error(self, logic, exc: BaseException) -> None:
        name = logic.stage_name
        levels = logic.attributes.get(LogLevels)  # the stage's LogLevels.on_failure, if it sets one
        log.log(levels.on_failure if levels is not None else logging.DEBUG, "Error in stage [%s] of %s: %r", name, self.name, exc, exc_info=exc)
        if logic._finalized:
            return
        try:
            logic.fail_stage(exc)
        except Exception as e2:  # noqa: BLE001 - never let error handling itself escape the loop
            log.error("failing stage [%s] raised %r", name, e2)

    def _finalize(self, logic) -> None:
        logic._finalized = True
        self.running_stages -= 1
        try:
            logic.post_stop()
        except Exception as e:  # noqa: BLE001 - post_stop errors are only logged, as in Pekko
            log.error("Error in post_stop of stage [%s]: %r", logic.stage_name, e, exc_info=e)
        try:
            logic._after_post_stop()
        except Exception as e:  # noqa: BLE001
            log.error("Error cleaning up stage [%s]: %r", logic.stage_name, e)

    # ------------------------------------------------------------------ port closing (called by logics)
    def complete(self, conn: Connection) -> None:
        st = conn.state
        conn.state = st | OUT_CLOSED
        if conn.end is None:
            conn.end = (END_COMPLETED, None)
        if st & (IN_CLOSED | PUSHING | PULLING | OUT_CLOSED) == 0:
            self.enqueue(conn)
        if not st & OUT_CLOSED:
            self._dec(conn.out_owner)

    def fail(self, conn: Connection, exc: BaseException) -> None:
        st = conn.state
        conn.state = st | OUT_CLOSED
        if conn.end is None:
            conn.end = (END_FAILED, exc)
        if st & (IN_CLOSED | OUT_CLOSED) == 0:
            self.failures += 1
            conn.state = st | OUT_CLOSED | IN_FAILED
            conn.slot = Failed(exc, conn.slot)
            if st & (PULLING | PUSHING) == 0:
                self.enqueue(conn)
        if not st & OUT_CLOSED:
            self._dec(conn.out_owner)

    def cancel(self, conn: Connection, cause: BaseException) -> None:
        st = conn.state
        conn.state = st | IN_CLOSED
        if conn.end is None:
            conn.end = (END_CANCELLED, cause)
        if not st & OUT_CLOSED:
            if not isinstance(cause, NonFailureCancellation):
                self.failures += 1
            conn.slot = Cancelled(cause)
            if st & (PULLING | PUSHING | IN_CLOSED) == 0:
                self.enqueue(conn)
        if not st & IN_CLOSED:
            self._dec(conn.in_owner)

    # ------------------------------------------------------------------ async input
    def post_async(self, logic, handler, value, promise) -> None:
        """Thread-safe: have ``handler(value)`` run for ``logic`` on this island's thread."""
        self.host.post(self.run_async_input, logic, handler, value, promise)

    def run_async_input(self, logic, handler, value, promise) -> None:
        if logic._finalized:
            if promise is not None and not promise.done():
                promise.set_exception(logic._detached())
            return
        try:
            handler(value)
            if promise is not None:
                logic._feedback_dispatched(promise)
                if not promise.done():
                    promise.set_result(Done)
        except Exception as e:  # noqa: BLE001
            if promise is not None:
                logic._feedback_dispatched(promise)
                if not promise.done():
                    promise.set_exception(e)
            self._report_error(logic, e)
        self._after_stage_has_run(logic)

    # ------------------------------------------------------------------ teardown
    def fail_all(self, cause: BaseException, event_limit: int = 1_000_000) -> None:
        """Tear the island down with ``cause`` so that every stage hears it through its handlers.

        The failure starts where elements start: stages with an ``on_island_abort(cause)`` hook
        hear about it first (island boundaries pass ``cause`` to their peer islands, port-less
        fused loops stop with it), then every stage without inlets (sources, input boundaries)
        fails with ``cause``, and the failure flows downstream through the usual handlers while
        cancellation flows upstream. Stages still running after that (a cycle without a source,
        keep-going stages) fail too; whatever is left is stopped abruptly."""
        for logic in self.logics:
            hook = getattr(logic, "on_island_abort", None)
            if hook is not None and not logic._finalized:
                try:
                    hook(cause)
                except Exception as e:  # noqa: BLE001
                    self._report_error(logic, e)
                self._after_stage_has_run(logic)
        for sources_only in (True, False):
            for logic in self.logics:
                if logic._finalized or (sources_only and logic._in_conns):
                    continue
                try:
                    logic.fail_stage(cause)
                except Exception as e:  # noqa: BLE001
                    log.error("failing stage [%s] raised %r", logic.stage_name, e)
                self._after_stage_has_run(logic)
            self.execute(event_limit)
        self.finish()

    def finish(self) -> None:
        """Stop every stage that is still running (``post_stop``); used when the island is torn down."""
        for logic in self.logics:
            if not logic._finalized:
                self._finalize(logic)
        self.queue.clear()

