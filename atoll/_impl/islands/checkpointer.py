"""IslandCheckpointer: takes an island's part of a checkpoint (the cut), and puts a restored island back.

Barriers exist only on channels (``ChannelBarrier`` in a frame's signal tail); inside an island the cut is
one moment between interpreter events. Checkpoint ``n`` becomes known to an island from the coordinator
(``inject``) or from the first barrier ``n`` that reaches one of its inputs. An input that reached the
barrier is blocked there (aligned checkpoints: nothing after the barrier enters the island); an input
whose upstream ended counts as aligned once it delivered everything. When every input is aligned (and the
coordinator's ``inject`` arrived, for an island without inputs) the island cuts as soon as every logic is
``ready_for_snapshot`` and no outlet has an ``emit`` in progress; while it waits, its sources are paused so
that work in flight drains. The cut records every logic's ``save_to_snapshot`` (for a stage that has finished:
how it closed its ports, ``StageEnd``, so that a restore keeps it finished) and every element sitting in
an in-island connection (against the outlet that pushed it), sends barrier ``n`` on every output channel,
releases the inputs and resumes the sources. Local sources may be cut at any moment: their position is
part of the island's state, and the barrier leaves after exactly what was sent before the cut.

Why a moment and not a drain (the design sketch drained first): elements waiting in connections are
captured and re-pushed on restore, so a cycle inside an island, or a ``Zip`` waiting for its other input,
needs no quiescence. Control signals waiting among those elements are captured at their positions and re-sent
in place, and the event time the kernel keeps for each logic (clock, timers, fan-in valve) is saved beside its
state (``event_time_state``). What is not captured: pending ``emit`` outputs with an ``and_then`` continuation (the
cut waits for them, since a continuation cannot be saved).
"""
from __future__ import annotations

import itertools
import logging
from typing import Any, Callable, Dict, List, Optional, Sequence

from ..._portable import portable_exception
from ...checkpoint.snapshot import InFlight, IslandSnapshot, StageEnd, dumps, ended_stages, in_flight_signals, loads
from ...stage.checkpointing import NO_STATE
from ...stage.handlers import OutHandler
from ...stage.logic import _Emitting, _EmittingCompletion, _EmittingIterator, _EmittingSignal, _EmittingSingle
from ...errors import NO_MORE_ELEMENTS_NEEDED, CheckpointError, NonFailureCancellation
from ...stage._connection import (
    EMPTY,
    END_CANCELLED,
    END_COMPLETED,
    END_FAILED,
    IN_CLOSED,
    OUT_CLOSED,
    OUT_READY,
    PULL_END_FLIP,
    PULLING,
    PUSHING,
    Cancelled,
    Failed,
)
from ...stage.signals import Barrier, Signal
from .boundaries import InputBoundary, OutputBoundary
from .chunking import _Adapter
from .event_time_state import EVENT_TIME, event_time_state, is_event_time_key, restore_event_time_state

log = logging.getLogger("atoll.checkpoint")


class _PausedOut(OutHandler):
    """Stands in for a source's outlet handler while the island waits to cut: a pull is remembered and
    delivered to the real handler on resume."""

    __slots__ = ("logic", "out", "previous", "pulled", "resumed")

    def __init__(self, logic, out, previous):
        self.logic, self.out, self.previous = logic, out, previous
        self.pulled = False
        self.resumed = False

    def on_pull(self) -> None:
        if self.resumed:  # an emit chain put this handler back after the resume
            self.logic.set_handler(self.out, self.previous)
            self.previous.on_pull()
        else:
            self.pulled = True

    def on_downstream_finish(self, cause: BaseException) -> None:
        self.logic.set_handler(self.out, self.previous)
        self.previous.on_downstream_finish(cause)


class _Replaying(_Emitting):
    """Re-pushes the elements that sat in a connection at the cut, before the outlet's own handler runs
    again: one per pull, or as many as the pull accepts on a chunk connection (never past the next signal). It is
    an ``emit`` in progress, so a completion the restored stage asks for (a source restored at its end) waits
    behind it. ``signals`` are the control signals that waited among those elements, as ``(elements before it,
    signal)``: each goes out once the elements before it are out (``start`` sends those before the first element,
    after ``init``), so the stages downstream meet the same watermarks between the same elements as before the
    cut."""

    def __init__(self, logic, out, previous, elements: list, timestamps: Optional[list],
                 signals: Optional[list] = None):
        super().__init__(logic, out, previous, None)
        self.elements = elements
        self.timestamps = timestamps
        self.signals = signals or None
        self.done = 0  # elements re-pushed so far (the signals' positions count from the first)
        #: a stage that had failed this outlet at the cut fails it again once the elements before are out
        self.then_fail: Optional[BaseException] = None

    def follow_up(self) -> None:
        super().follow_up()
        if self.then_fail is not None:
            self.logic._interpreter.fail(self.logic._out_conns[self.out.id], self.then_fail)

    def start(self) -> None:
        """After ``init``: send the signals that came before the first element; with no element to re-push (only
        signals waited), hand the outlet back."""
        self._emit_due()
        if not self.elements and self.logic._out_handlers[self.out.id] is self:
            self.follow_up()

    def _emit_due(self) -> None:
        sigs = self.signals
        if sigs:
            logic = self.logic
            conn, interpreter, done = logic._out_conns[self.out.id], logic._interpreter, self.done
            i = 0
            while i < len(sigs) and sigs[i][0] <= done:
                interpreter.emit_signal(conn, sigs[i][1])
                i += 1
            del sigs[:i]

    def pending(self) -> tuple:
        """``(elements, timestamps or None, signals)`` still to re-push, the signals' positions counted from the
        first of those elements."""
        done = self.done
        sigs = [(p - done, sig) for p, sig in self.signals] if self.signals else []
        return self.elements, self.timestamps, sigs

    def on_pull(self) -> None:
        logic, out = self.logic, self.out
        conn = logic._out_conns[out.id]
        elems, ts = self.elements, self.timestamps
        if conn.chunked:
            n = min(len(elems), conn.demand)
            if self.signals:  # a signal is a flush point: the chunk stops before it
                n = max(1, min(n, self.signals[0][0] - self.done))
            chunk, self.elements = elems[:n], elems[n:]
            if ts is not None:
                tchunk, self.timestamps = ts[:n], ts[n:]
                logic.push(out, chunk, tchunk)
            else:
                logic.push(out, chunk)
        else:
            n = 1
            self.elements = elems[1:]
            if ts is not None:
                self.timestamps = ts[1:]
                logic.push(out, elems[0], ts[0])
            else:
                logic.push(out, elems[0])
        self.done += n
        if self.signals:
            self._emit_due()
        if not self.elements:
            self.follow_up()


#: the most elements an iterator ``emit`` in progress may still hold for the cut to record them
EMIT_LIMIT = 100_000


def recordable_signal(signal) -> bool:
    """Whether a control signal waiting at a cut is recorded with the elements around it: every one but a
    checkpoint barrier (barriers belong to the run that sent them; inside an island there are none)."""
    return isinstance(signal, Signal) and not isinstance(signal, Barrier)


def _pending_emits(handler) -> Optional[tuple]:
    """``(elements, timestamps or None, signals)`` an ``emit`` chain still has to push (``signals``: the control
    signals queued among them, as ``(elements before it, signal)``), or None when it cannot be recorded: an
    ``and_then`` continuation (a closure the stage relies on) or an iterator longer than ``EMIT_LIMIT``. An
    iterator is read into a list and put back, so the stream sees the same elements. Queued completions are left
    out (a restored stage completes again by itself)."""
    elems: list = []
    stamps: list = []
    sigs: list = []
    chain = [handler]
    i = 0
    while i < len(chain):
        e = chain[i]
        i += 1
        chain[i:i] = e.follow_ups
        if isinstance(e, _EmittingSignal):
            if recordable_signal(e.signal):
                sigs.append((len(elems), e.signal))
            continue
        if isinstance(e, _EmittingCompletion):
            continue
        if isinstance(e, _Replaying):  # a restore's re-push not finished yet
            r_elems, r_ts, r_sigs = e.pending()
            sigs.extend((len(elems) + p, sig) for p, sig in r_sigs)
            elems.extend(r_elems)
            stamps.extend(r_ts if r_ts is not None else [None] * len(r_elems))
            continue
        if e.and_then is not None:
            return None
        if isinstance(e, _EmittingSingle):
            elems.append(e.elem)
            stamps.append(e.ts)
        elif isinstance(e, _EmittingIterator):
            rest = list(itertools.islice(e.rest, EMIT_LIMIT + 1))
            if len(rest) > EMIT_LIMIT:
                e.rest = itertools.chain(rest, e.rest)
                return None
            e.rest = iter(rest)
            elems.append(e.nxt)
            elems.extend(rest)
            stamps.extend([e.ts] * (1 + len(rest)))
        else:
            return None
    return elems, (stamps if any(t is not None for t in stamps) else None), sigs


def _connection_contents(conn) -> Optional[tuple]:
    """``(elements, timestamps or None, signals)`` waiting in ``conn`` at a cut, or None when nothing does: the
    element (or chunk) in its slot and the control signals queued on it, in their order - those emitted before
    the element still being pushed come first, those after it (or after an element delivered and not grabbed)
    last."""
    slot = conn.slot
    st = conn.state
    if type(slot) is Failed and not st & IN_CLOSED:
        slot = slot.previous  # the element before a failure downstream has not heard of yet
    has_elem = not (slot is EMPTY or type(slot) is Failed or type(slot) is Cancelled)
    if has_elem and st & (PULLING | OUT_READY):
        # the stage pulled again without grabbing it (``drop`` skips elements so, as Pekko's does): the element
        # was discarded, only the slot still refers to it
        has_elem = False
    queued = conn.signals
    if not has_elem and not queued:
        return None
    elems: list = []
    ts = None
    if has_elem:
        elems = list(slot) if conn.chunked else [slot]
        ts = conn.ts
        if ts is not None:
            ts = list(ts) if conn.chunked else [ts]
    sigs: list = []
    if queued:
        before = conn.signals_before if has_elem and st & PUSHING else 0
        for j, sig in enumerate(queued):
            if recordable_signal(sig):
                sigs.append((0 if j < before else len(elems), sig))
    if not elems and not sigs:
        return None
    return elems, ts, sigs


class IslandCheckpointer:
    """The checkpoint side of one island (runs on the island's thread). ``keys`` maps ``id(logic)`` to the
    stage key of every logic of the plan and of the channel boundaries; ``report(kind, island, n, payload)``
    tells the coordinator: ``("ack", i, n, bytes)``, ``("decline", i, n, reason)``, ``("request", i, 0,
    final)`` (a stage asks for a checkpoint soon; ``final``: at the end of its input, not held by ``min_pause``).

    ``aligned`` (exactly-once): an input that delivered barrier ``n`` delivers nothing more until the cut;
    False (``guarantee="at_least_once"``): inputs never wait, the cut comes once every input saw ``n``, and
    what a fast input delivered after its barrier is in the snapshot and replayed again after a restore.

    Two-phase commits: the cut calls each logic's ``snapshot_commit_prepare(n)`` (before its
    ``save_to_snapshot``) and keeps what it returned; ``complete(n)`` (the coordinator wrote checkpoint
    ``n``'s manifest) calls ``snapshot_commit_finish(k, prepared, True)`` for every ``k <= n`` still kept,
    oldest first - Flink's subsumed notifications: a lost or aborted notification is made up by the next."""

    def __init__(self, host, interpreter, index: int, name: str, keys: Dict[int, Any], fingerprint: list,
                 report: Callable[..., None], attempt: int = 0, aligned: bool = True, logged: bool = False,
                 feedback: Sequence[InputBoundary] = (), decline_after_failure: bool = False):
        self.host = host
        #: exactly-once: the stages finished at a cut stay finished after a restore (``StageEnd``). Not at-least-once:
        #: there a cut may hold a stage finished by an input that went past its barrier, whose source replays what
        #: came after the barrier, so the stage must run again
        self.keep_ended = aligned
        #: restarts on stage failure: once a failure reached one of the island's ends (a branch failed and the rest
        #: ran on; ``failure_in``), every later checkpoint is declined, so that the restart the failure leads to
        #: goes back to a cut before it rather than to one that holds the failed stages finished
        self.decline_after_failure = decline_after_failure
        #: id(logic) -> its ``StageEnd``, made once when a cut first finds the stage finished
        self._ends: Dict[int, StageEnd] = {}
        #: exactly-once: an input that delivered barrier n waits for the cut; at-least-once (False): it goes
        #: on, so the cut (once every input saw n) holds effects of elements its source will replay
        self.aligned = aligned and not logged
        #: logged (exactly-once, never waiting for a slow input): cut at the end of the turn that brought the
        #: first barrier or injection (that input held until then), then log each other input until its
        #: barrier comes; the ack waits for the logs (Chandy-Lamport's channel recording)
        self.logged = logged
        #: while logging: (the cut's snapshot bytes, the inputs being logged)
        self.logging: Optional[tuple] = None
        self.interpreter = interpreter
        self.index = index
        self.name = name
        self.keys = keys
        self.fingerprint = fingerprint
        self.report = report
        self.attempt = attempt
        logics = interpreter.logics
        self.inputs: List[InputBoundary] = [lg for lg in logics if isinstance(lg, InputBoundary)]
        self.outputs: List[OutputBoundary] = [lg for lg in logics if isinstance(lg, OutputBoundary)]
        self.sources = [lg for lg in logics if not lg._in_ports and lg._out_ports
                        and not isinstance(lg, (InputBoundary, _Adapter))]
        for b in self.inputs:
            b.checkpointer = self
        #: inputs that close a cycle through other islands: their barrier comes only after this island's cut,
        #: so they are never waited for nor held, and logged from the cut until their barrier comes
        self.feedback = frozenset(id(b) for b in feedback)
        #: the checkpoint being collected (None: idle) and the highest one finished or given up
        self.pending: Optional[int] = None
        self.done_upto = 0
        self.injected = False
        self.paused: List[_PausedOut] = []
        self.waiting_since = None
        #: the interpreter's failure count when the pending checkpoint began (a change declines it)
        self.failures_at = 0
        #: an input that dropped elements it received before the pending checkpoint's barrier (None: none did)
        self.dropped: Optional[str] = None
        #: checkpoint id -> [(logic, prepared)] of the cuts whose commits are not finished yet
        self.prepared: Dict[int, List[tuple]] = {}
        for logic in logics:
            logic.checkpointing_enabled(self.request_checkpoint)

    def request_checkpoint(self, final: bool = False) -> None:
        """A stage of the island wants a checkpoint soon (island thread): ``final`` (taken at once) for a sink whose
        stream ended and whose last epoch commits only with a checkpoint; otherwise (e.g. a sink whose staged
        files wait for a commit) once ``CheckpointSettings.min_pause`` has passed since the last checkpoint."""
        self.report("request", self.index, 0, bool(final))

    # ------------------------------------------------------------------ from the coordinator and the inputs
    def inject(self, checkpoint_id: int) -> None:
        """The coordinator triggered ``checkpoint_id`` (posted to the island's thread)."""
        if checkpoint_id <= self.done_upto:
            return
        if self.pending != checkpoint_id:
            self._begin(checkpoint_id)
        self.injected = True

    def complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` is durable (its manifest is written): phase 2 of the two-phase commits
        prepared by it and by every earlier cut not committed yet (island thread). A commit that fails fails
        its stage: a restore commits it again (commits are idempotent)."""
        due = sorted(k for k in self.prepared if k <= checkpoint_id)
        for k in due:
            for logic, prepared in self.prepared.pop(k):
                # as an async input of the stage: skipped once it stopped (a restore commits what it prepared),
                # a failure fails it, and a stage that completes in the commit is finalized
                logic._interpreter.run_async_input(logic, self._commit_of(logic, k), prepared, None)

    def _commit_of(self, logic, checkpoint_id: int) -> Callable[[Any], None]:
        def commit(prepared: Any) -> None:
            try:
                logic.snapshot_commit_finish(checkpoint_id, prepared, True)
            except Exception as e:
                log.error("island %s: %s could not commit checkpoint %d: %r", self.name, logic.stage_name,
                          checkpoint_id, e)
                raise

        return commit

    def abort(self, checkpoint_id: int) -> None:
        """The coordinator gave ``checkpoint_id`` up: release what waits for it (what its cut prepared stays,
        for the next checkpoint that completes)."""
        if checkpoint_id > self.done_upto:
            self.done_upto = checkpoint_id
        if self.pending is not None and self.pending <= checkpoint_id:
            self._stop_logging()
            self._release()

    def barrier_reached(self, boundary: InputBoundary, checkpoint_id: int) -> Optional[bool]:
        """Barrier ``checkpoint_id`` arrived on input ``boundary``: None to drop it (a checkpoint given up, or a
        stale barrier), True to hold the input there until the cut, False to let it go on.

        Exactly-once holds every input at its barrier until the cut: aligned waits there for the other inputs;
        logged cuts at the end of the turn that brought the first barrier, and an input that delivered past
        its barrier before that would leave effects of replayed elements in the snapshot. Once logged mode
        has cut, later barriers only end their input's log. At-least-once and feedback inputs never wait."""
        if checkpoint_id <= self.done_upto:
            return None
        if self.pending is None or checkpoint_id > self.pending:
            self._begin(checkpoint_id)
        return (self.aligned or self.logged) and self.logging is None and id(boundary) not in self.feedback

    def _begin(self, checkpoint_id: int) -> None:
        if self.pending is not None:
            self._stop_logging()
            self._release()  # a newer checkpoint subsumes the one in progress
        self.pending = checkpoint_id
        self.injected = False
        self.failures_at = self.interpreter.failures
        self.dropped = None

    def channel_state_dropped(self, boundary: InputBoundary, by_downstream: bool = False) -> None:
        """``boundary`` cleared its buffer, elements received before the pending checkpoint's barrier among them
        (its downstream cancelled, the island is torn down): before the cut, that checkpoint can no longer hold them.
        Except when its downstream cancelled under an exactly-once checkpoint: the stage that cancelled is recorded
        finished (or its state knows it cancelled), so nothing after a restore asks for those elements again, and
        declining would only make a checkpoint taken as a branch ends (a ``zip`` whose other input completed) fail."""
        if by_downstream and self.keep_ended:
            return
        if self.pending is not None and self.logging is None:
            self.dropped = boundary.stage_name

    # ------------------------------------------------------------------ the cut (called by the host between turns)
    def _aligned(self) -> bool:
        n = self.pending
        any_barrier = False
        logged, feedback = self.logged, self.feedback
        for b in self.inputs:
            if b.barrier_seen == n:
                any_barrier = True
            elif not (logged or b.delivered_all or id(b) in feedback):
                return False
        return self.injected or any_barrier

    def _not_ready(self) -> Optional[str]:
        """Why the island cannot be cut now (None: it can)."""
        if len(self.host.interpreters) > 1:
            return "a substream is running"
        for logic in self.interpreter.logics:
            for conn in logic._out_conns:
                if conn is not None and isinstance(conn.out_handler, _Emitting) and \
                        _pending_emits(conn.out_handler) is None:
                    return f"{logic.stage_name} is emitting with a continuation or an unbounded iterator"
            try:
                ready = logic.ready_for_snapshot()
            except Exception as e:  # noqa: BLE001 - a broken hook declines the checkpoint, not the stream
                return f"{logic.stage_name}.ready_for_snapshot raised {e!r}"
            if not ready:
                return f"{logic.stage_name} is not ready"
        return None

    def poll(self) -> None:
        """Cut if the pending checkpoint can be cut now; otherwise pause the sources and wait (logged: once
        cut, ack when every log is complete). A failure that travelled through the island, or an input that
        dropped elements from before the barrier, since the checkpoint began declines it (``_lost_meanwhile``)."""
        if self.pending is not None and (
                self.interpreter.failures != self.failures_at or self.dropped is not None
                or (self.decline_after_failure and failure_in(self.interpreter) is not None)):
            self._lost_meanwhile()
            return
        if self.logging is not None:
            if all(b.logged_all for b in self.logging[1]):
                self._finish_logging()
            return
        if self.pending is None or not self._aligned():
            return
        why = self._not_ready()
        if why is not None:
            self.waiting_since = why
            if not self.paused:
                self._pause_sources()
            return
        self._cut()

    def _lost_meanwhile(self) -> None:
        """Between the pending checkpoint's start and its cut (or, logged, the end of its logs) a failure travelled
        through the island, or an input dropped elements received before the barrier: decline the checkpoint. A
        failure may drop what the cut must hold (the island's cancel clears its inputs' buffers; failing stages drop
        what they hold), and what an input dropped is channel state: a snapshot taken now would miss elements that
        its restore never replays."""
        n = self.pending
        if self.interpreter.failures != self.failures_at:
            why = f"a failure travelled through the island before its cut ({failure_in(self.interpreter, False)!r})"
        elif self.dropped is None:
            why = (f"a failure reached an end of the island ({failure_in(self.interpreter)!r}) and restarts on stage "
                   "failure go back to a checkpoint before it")
        else:
            why = f"{self.dropped} dropped elements it had received before the barrier (its downstream cancelled)"
        err = CheckpointError(f"island {self.name}: checkpoint {n} declined: {why}")
        self.done_upto = max(self.done_upto, n)
        self._stop_logging()
        self._release()
        self.report("decline", self.index, n, err)

    def _pause_sources(self) -> None:
        for logic in self.sources:
            if logic._interpreter is None:
                continue
            for out, conn in zip(logic._out_ports, logic._out_conns):
                if conn is None or conn.state & (OUT_CLOSED | IN_CLOSED):
                    continue
                paused = _PausedOut(logic, out, logic.get_handler(out))
                logic.set_handler(out, paused)
                self.paused.append(paused)

    def _resume_sources(self) -> None:
        paused, self.paused = self.paused, []
        for p in paused:
            p.resumed = True
            if p.logic.get_handler(p.out) is p:
                p.logic.set_handler(p.out, p.previous)
            if p.pulled:
                # deliver the remembered pull as an event, so the handler runs inside the interpreter
                conn = p.logic._out_conns[p.out.id]
                if conn.state & OUT_READY and not conn.state & (OUT_CLOSED | IN_CLOSED):
                    conn.state ^= PULL_END_FLIP
                    self.interpreter.enqueue(conn)

    def snapshot(self, checkpoint_id: int, finished: bool = False) -> IslandSnapshot:
        """Everything the island holds now, as checkpoint ``checkpoint_id``'s part."""
        snap = IslandSnapshot(self.index, self.name, checkpoint_id, self.fingerprint, finished=finished,
                              attempt=self.attempt)
        keys = self.keys
        for logic in self.interpreter.logics:
            key = keys.get(id(logic))
            if key is None:
                continue
            if self.keep_ended and logic._finalized and keeps_finished(logic):
                end = self._ends.get(id(logic))
                if end is None:
                    end = self._ends[id(logic)] = stage_end(logic)
                snap.ended[key] = end  # its state too: a restore rolls external effects back with it
            state = logic.save_to_snapshot()
            if state is not NO_STATE:
                snap.stages[key] = state
            if logic._event_clock is not None or logic._alignment is not None:
                timed = event_time_state(logic)
                if timed is not None:
                    snap.stages[(EVENT_TIME, key)] = timed
        if not finished:
            snap.in_flight = self._in_flight()
        return snap

    def _in_flight(self) -> List[InFlight]:
        found: Dict[Any, list] = {}
        for conn in self.interpreter.connections:
            contents = _connection_contents(conn)
            if contents is None:
                continue
            owner, outlet, depth = conn.out_owner, conn.outlet, 0
            while isinstance(owner, _Adapter):  # an adapter holds nothing: attribute to the outlet before it
                up = owner._in_conns[0]
                owner, outlet, depth = up.out_owner, up.outlet, depth + 1
            key = self.keys.get(id(owner))
            if key is None:
                raise RuntimeError(f"island {self.name}: an element waits on a connection from {owner!r}, "
                                   "which has no stage key")
            found.setdefault((key, outlet.id), []).append((depth, *contents))
        # after the element in the connection: what the outlet still had to emit, what an input received
        for logic in self.interpreter.logics:
            key = self.keys.get(id(logic))
            if key is None:
                continue
            for out_port, conn in zip(logic._out_ports, logic._out_conns):
                if conn is not None and isinstance(conn.out_handler, _Emitting):
                    elems, ts, sigs = _pending_emits(conn.out_handler)
                    if elems or sigs:
                        found.setdefault((key, out_port.id), []).append((-1, elems, ts, sigs))
            if isinstance(logic, InputBoundary):
                elems, ts, sigs = logic.undelivered_before_cut(self.pending)
                if elems or sigs:
                    found.setdefault((key, logic.out.id), []).append((-1, elems, ts, sigs))
        out = []
        for (key, outlet), parts in found.items():
            parts.sort(key=lambda p: -p[0])  # nearer downstream (more adapters passed) came first
            elems: list = []
            sigs: list = []
            for p in parts:
                sigs.extend((len(elems) + pos, sig) for pos, sig in p[3])
                elems.extend(p[1])
            ts = None
            if any(p[2] is not None for p in parts):
                ts = [t for p in parts for t in (p[2] if p[2] is not None else [None] * len(p[1]))]
            out.append(InFlight(key, outlet, elems, ts, sigs or None))
        return out

    def _describe(self, key) -> str:
        for logic in self.interpreter.logics:
            if self.keys.get(id(logic)) == key:
                return f"{logic.stage_name} (#{key})"
        return str(key)

    def _cut(self) -> None:
        n = self.pending
        try:
            # phase 1 first: a sink closes its epoch (flushing what it gathered) before it saves its state
            prepared = []
            for logic in self.interpreter.logics:
                key = self.keys.get(id(logic))
                if key is not None:
                    value = logic.snapshot_commit_prepare(n)
                    if value is not None:
                        prepared.append((key, logic, value))
            snap = self.snapshot(n)
            for key, _logic, value in prepared:
                snap.stages[("prepared", key)] = value
            data = dumps(snap, self._describe)
        except Exception as e:  # noqa: BLE001 - the checkpoint fails, the stream goes on
            log.warning("island %s: checkpoint %d declined: %r", self.name, n, e)
            self.done_upto = max(self.done_upto, n)
            self._release()
            self.report("decline", self.index, n, e)
            return
        if prepared:
            self.prepared[n] = [(logic, value) for _key, logic, value in prepared]
        for b in self.outputs:
            b.emit_barrier(n)
        unlogged = [b for b in self.inputs if b.barrier_seen != n and not b.delivered_all]
        if unlogged:  # logged mode or feedback inputs: the other cuts waited for every input
            for b in unlogged:
                b.start_log(n)
            self.logging = (data, unlogged)
            self.waiting_since = None
            for b in self.inputs:  # the inputs held at their barrier for the cut go on
                if b.blocked_at is not None:
                    b.release_barrier()
            if self.paused:
                self._resume_sources()
            return
        self.done_upto = n
        self._release()
        self.report("ack", self.index, n, data)

    def _finish_logging(self) -> None:
        """Every logged input reached the checkpoint's barrier (or ended): add the logs to the cut's snapshot as
        the channels' state, replayed ahead of the channels after a restore, and ack."""
        n = self.pending
        data, inputs = self.logging
        self.logging = None
        logs = [(self.keys.get(id(b)), b.out.id, *b.take_log()) for b in inputs]
        if any(elems or sigs for _k, _o, elems, _ts, sigs in logs):
            snap = loads(data)
            for key, outlet, elems, ts, sigs in logs:
                if elems or sigs:
                    _append_in_flight(snap, key, outlet, elems, ts, sigs)
            try:
                data = dumps(snap, self._describe)
            except Exception as e:  # noqa: BLE001 - the checkpoint fails, the stream goes on
                self.done_upto = max(self.done_upto, n)
                self._release()
                self.report("decline", self.index, n, e)
                return
        self.done_upto = n
        self._release()
        self.report("ack", self.index, n, data)

    def _stop_logging(self) -> None:
        if self.logging is not None:
            for b in self.logging[1]:
                b.take_log()
            self.logging = None

    def _release(self) -> None:
        self.pending = None
        self.injected = False
        self.waiting_since = None
        for b in self.inputs:
            if b.blocked_at is not None:
                b.release_barrier()
        if self.paused:
            self._resume_sources()

    def status(self) -> dict:
        """What the island waits for in the checkpoint in progress (for ``checkpoint_status``)."""
        if self.pending is None:
            return {"checkpoint": None}
        if self.logging is not None:
            return {"checkpoint": self.pending, "cut": True,
                    "logging": [b.stage_name for b in self.logging[1] if not b.logged_all]}
        return {
            "checkpoint": self.pending,
            "injected": self.injected,
            "waiting_for": [b.stage_name for b in self.inputs if b.barrier_seen != self.pending and not b.delivered_all],
            "not_ready": self.waiting_since,
        }


def _append_in_flight(snap: IslandSnapshot, key: Any, outlet: int, elems: list, ts: Optional[list],
                      sigs: Optional[list] = None) -> None:
    """Put ``elems`` (and the signals among them, ``(elements before it, signal)``) after what ``snap`` already
    holds for outlet ``outlet`` of stage ``key``."""
    for f in snap.in_flight:
        if f.stage == key and f.outlet == outlet:
            if f.timestamps is not None or ts is not None:
                f.timestamps = (f.timestamps if f.timestamps is not None else [None] * len(f.elements)) + \
                    (ts if ts is not None else [None] * len(elems))
            if sigs:
                base = len(f.elements)
                f.signals = list(in_flight_signals(f)) + [(base + p, sig) for p, sig in sigs]
            f.elements = f.elements + elems
            return
    snap.in_flight.append(InFlight(key, outlet, list(elems), ts, list(sigs) if sigs else None))


def failure_in(interpreter, at_ends: bool = True) -> Optional[BaseException]:
    """The first failure that reached one of the island's ends: a connection into a sink (a stage without outlets) or
    an output boundary that failed, or that the sink or boundary cancelled with an error (a sink that failed itself, a
    peer island that failed). A failure a stage turned into a completion on its way (``recover``) is not one: the
    island's stream ended as its ends saw it. ``at_ends=False``: the first failure on any connection. None when
    there is none."""
    for conn in interpreter.connections:
        end = conn.end
        if end is None:
            continue
        if at_ends:
            owner = conn.in_owner
            if owner._out_conns and not isinstance(owner, OutputBoundary):
                continue
        kind, cause = end
        if kind == END_FAILED or (kind == END_CANCELLED and not isinstance(cause, NonFailureCancellation)):
            return cause
    return None


def ended_cleanly(interpreter) -> bool:
    """No failure reached one of the island's ends (``failure_in``)."""
    return failure_in(interpreter) is None


# ---------------------------------------------------------------------------------------------- restore
def restore_island(snapshot: IslandSnapshot, logics_by_key: Dict[Any, Any], island: str) -> List[tuple]:
    """Put the saved states back into freshly created logics (before ``pre_start``); returns the elements to
    re-push once the interpreter is initialized (``replay_in_flight``)."""
    for key, end in ended_stages(snapshot).items():
        logic = logics_by_key.get(key)
        if logic is None:
            raise RuntimeError(f"island {island}: the checkpoint holds the end of stage #{key}, which is not there")
        logic._restored_end = end
    for key, state in snapshot.stages.items():  # the kernel's event time first: a stage's own restore may refine it
        if is_event_time_key(key):
            logic = logics_by_key.get(key[1])
            if logic is None:
                raise RuntimeError(f"island {island}: the checkpoint holds event time for stage #{key[1]}, "
                                   "which is not there")
            restore_event_time_state(logic, state)
    for key, state in snapshot.stages.items():
        if type(key) is tuple and key and key[0] in ("prepared", EVENT_TIME):
            continue
        logic = logics_by_key.get(key)
        if logic is None:
            raise RuntimeError(f"island {island}: the checkpoint holds state for stage #{key}, which is not there")
        logic.restore_from_snapshot(state)
    for key, prepared in snapshot.stages.items():
        if type(key) is tuple and key and key[0] == "prepared":
            logics_by_key[key[1]].snapshot_commit_finish(snapshot.checkpoint_id, prepared, True)
    for logic in logics_by_key.values():
        logic.rollback_uncommitted(snapshot.checkpoint_id)
    return [(logics_by_key[f.stage], f) for f in snapshot.in_flight]


def replay_in_flight(replays: List[tuple]) -> None:
    """Install the re-push of the elements (and signals) that waited in connections at the cut (before ``init``,
    so that a stage completing in ``pre_start`` completes after them; ``start_replays`` sends the signals before
    the first element once ``init`` is done)."""
    for logic, f in replays:
        out = logic._out_ports[f.outlet]
        sigs = in_flight_signals(f)
        if not f.elements and not sigs:
            continue
        logic.set_handler(out, _Replaying(logic, out, logic.get_handler(out), list(f.elements),
                                          None if f.timestamps is None else list(f.timestamps), list(sigs)))


def start_replays(interpreter) -> None:
    """After a restore's ``init``: every re-push sends the signals that came before its first element."""
    for logic in interpreter.logics:
        for handler in list(logic._out_handlers):
            if isinstance(handler, _Replaying):
                handler.start()


# ---------------------------------------------------------------------------------------------- finished stages
def keeps_finished(logic) -> bool:
    """Whether ``logic``, finished at a cut, stays finished after a restore of it: every stage apart from the channel
    boundaries (started again: they carry the closes to the other islands) and adapters. A finished sink's
    materialized value was completed by the run that took the cut (and with restarts on stage failure no cut holds
    a failed stage), so the value is not needed again."""
    return not isinstance(logic, (InputBoundary, OutputBoundary, _Adapter))


def stage_end(logic) -> StageEnd:
    """How the finished ``logic`` closed its ports (``StageEnd``); a stage restored finished keeps its record."""
    restored = logic._restored_end
    if restored is not None:
        return restored
    end = StageEnd()
    for i, conn in enumerate(logic._out_conns):
        if conn is not None and conn.end is not None and conn.end[0] != END_CANCELLED:
            kind, exc = conn.end
            end.outlets[i] = (kind, None if exc is None else portable_exception(exc))
    for i, conn in enumerate(logic._in_conns):
        if conn is not None and conn.end is not None and conn.end[0] == END_CANCELLED:
            end.inlets[i] = portable_exception(conn.end[1])
    return end


def close_ended(interpreter) -> None:
    """After a restore's ``init``: close the ports of the stages restored finished (never started) as they closed
    them before the cut - completed or failed outlets (after the elements that waited on them are re-pushed),
    cancelled inlets - so that the live stages around them hear it again. A port their neighbour had closed is
    closed without an event when that neighbour is a live stage (it closed it itself and its restored state knows),
    or from this side when it is a channel boundary, which passes the close on to its peer island."""
    start_replays(interpreter)
    ended = [logic for logic in interpreter.logics if logic._restored_end is not None]
    for logic in ended:
        end = logic._restored_end
        for i, (kind, exc) in end.outlets.items():
            conn, handler = logic._out_conns[i], logic._out_handlers[i]
            if kind == END_COMPLETED:
                if isinstance(handler, _Emitting):  # re-pushed elements first
                    handler.add_follow_up(_EmittingCompletion(logic, handler.out, handler.previous))
                else:
                    interpreter.complete(conn)
            elif isinstance(handler, _Replaying):
                handler.then_fail = exc
            else:
                interpreter.fail(conn, exc)
        for i, cause in end.inlets.items():
            interpreter.cancel(logic._in_conns[i], cause)
    for logic in ended:
        end = logic._restored_end
        for i, conn in enumerate(logic._out_conns):
            if conn is not None and i not in end.outlets:
                _closed_by_neighbour(interpreter, conn, True)
        for i, conn in enumerate(logic._in_conns):
            if conn is not None and i not in end.inlets:
                _closed_by_neighbour(interpreter, conn, False)


def _closed_by_neighbour(interpreter, conn, downstream: bool) -> None:
    """``conn`` of a stage restored finished had been closed by its neighbour (``downstream``: the stage's outlet,
    cancelled by the stage after it; else its inlet, completed or failed by the one before): close it again,
    looking through adapters (which had passed the close on)."""
    while True:
        if conn.state & (IN_CLOSED | OUT_CLOSED) == IN_CLOSED | OUT_CLOSED:
            return
        neighbour = conn.in_owner if downstream else conn.out_owner
        if neighbour._restored_end is not None:
            return  # its own record closes it
        if isinstance(neighbour, (InputBoundary, OutputBoundary)):
            if downstream:
                interpreter.complete(conn)
            else:
                interpreter.cancel(conn, NO_MORE_ELEMENTS_NEEDED)
            return
        near = conn.out_owner if downstream else conn.in_owner
        conn.state |= IN_CLOSED | OUT_CLOSED  # as before the cut, without an event
        conn.end = (END_CANCELLED, NO_MORE_ELEMENTS_NEEDED) if downstream else (END_COMPLETED, None)
        interpreter._dec(neighbour)
        if near._restored_end is None:
            interpreter._dec(near)  # an adapter between them: it had closed this side too
        if not isinstance(neighbour, _Adapter):
            return
        conn = neighbour._out_conns[0] if downstream else neighbour._in_conns[0]
