"""The restart loop of automatic recovery, shared by both materializers: a graph whose island died (or, with
``RestartPolicy(on_stage_failure=True)``, whose stage failed) restarts from its last complete checkpoint within
its ``RestartPolicy``.

``RestartLoop`` holds what does not depend on where islands run: the budget (``max_restarts``, ``within``), the
back-off ``min(max_backoff, backoff * 2**(r-1)) * (1 +- jitter)``, the choice of the checkpoint (this run's
newest, else the one the run was restored from, else none: a start from the beginning), and the order of the
steps on a thread of its own (they block): suspend the coordinator, then per try: veto (cancel, kill switch
abort) -> budget -> fence the failed attempt -> back off -> load the checkpoint -> start the next attempt ->
hand it to the graph. A failed start counts as a failed restart. What is specific to a backend - how an attempt's
islands are stopped for sure (``_fence``), how the next one is started (``_launch``), which start failures end
recovery at once (``_fatal``) - is a subclass's: ``actors.recovery.GraphRecovery`` (Ray actors) and
``local_recovery.LocalGraphRecovery`` (threads). The running graph (with ``RecoveringGraph``) provides
``_coordinator``, ``_recovery_veto()``, ``_recovery_failed(err)`` and ``_install_attempt(*launched, attempt, info)``.
"""
from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from typing import Any, Optional

from ...checkpoint.settings import RestartPolicy
from ..._futures import fail_promise
from ...errors import RecoveryFailedError
from .checkpoint_setup import load_restore

log = logging.getLogger("atoll.recovery")


def backoff_delay(policy: RestartPolicy, restart: int, rng: random.Random) -> float:
    """Seconds to wait before restart number ``restart`` (1-based)."""
    base = min(policy.max_backoff, policy.backoff * 2 ** (restart - 1))
    return max(0.0, base * (1 + rng.uniform(-policy.jitter, policy.jitter)))


class RecoveringGraph:
    """What a running graph that restarts does when one of its islands fails, the same on both backends (the Ray
    graph and the local one mix it in): one restart per attempt, none once cancelled or a kill switch aborted.
    The graph provides ``_lock``, ``_islands`` (records with ``stale``, ``ended``, ``futures`` and ``handles``),
    ``_recovery`` (a ``RestartLoop`` or None), ``_recovering``, ``_finished``, ``_cancelled``,
    ``_cancel_cause``, ``_finish()``, and the backend's ``_stop_failed_islands(islands, err)`` and
``_detach_handle(proxy)``; a kill switch proxy among the handles has an ``abort_cause`` property."""

    @property
    def restarts(self) -> int:
        """How many times the graph was restarted from a checkpoint."""
        return 0 if self._recovery is None else self._recovery.restarts

    @property
    def attempt(self) -> int:
        """The incarnation running now: 0, then one more per restart."""
        return 0 if self._recovery is None else self._recovery.attempt

    def enable_recovery(self, recovery: "RestartLoop") -> None:
        """Restart the graph from its checkpoints when an island dies (``recovery``: the backend's loop)."""
        self._recovery = recovery

    def cancel(self, cause: Optional[BaseException] = None) -> None:
        super().cancel(cause)
        if self._recovery is not None:
            self._recovery.interrupt()  # a back-off in progress ends now; the restart loop sees the cancel

    def _release(self) -> None:
        """The graph finished: the driver's futures (with the values they carry, a ``Sink.seq``'s list) and handles
        are the caller's; the island records let go of them once every future is decided."""
        for r in self._islands:
            if all(f.done() for f in r.futures.values()):
                r.futures, r.handles = {}, {}

    def _maybe_finish(self) -> None:
        with self._lock:
            if self._recovering or any(not r.ended for r in self._islands):
                return
        self._finish()

    def _recovery_veto(self) -> Optional[BaseException]:
        """Why the graph must not restart: it was cancelled, or one of its kill switches aborted (None: it may)."""
        if self._cancelled:
            return self._cancel_cause
        for r in self._islands:
            for proxy in r.handles.values():
                # looked up on the class: a handle proxy forwards instance attributes, waiting while suspended
                abort_cause = getattr(type(proxy), "abort_cause", None)
                cause = abort_cause.__get__(proxy) if abort_cause is not None else None
                if cause is not None:
                    return cause
        return None

    def _recovery_failed(self, err: BaseException) -> None:
        """Recovery gave up (or was vetoed): the graph ends with ``err``; every pending future fails with it. The
        backend stops what is left of the islands (``_stop_failed_islands``) and detaches a handle proxy
        (``_detach_handle``)."""
        with self._lock:
            islands = list(self._islands)
            self._recovering = False
            for r in islands:
                r.ended = True
                r.state = "died"
                r.error = err
        self._stop_failed_islands(islands, err)
        for r in islands:
            for proxy in r.handles.values():
                self._detach_handle(proxy)
            for fut in r.futures.values():
                fail_promise(fut, err)
        log.error("graph %s failed: %s", self.name, err)
        self._maybe_finish()

    def _try_recover(self, record: Any, cause: BaseException, stage_failure: bool) -> bool:
        """``record`` failed with ``cause``: start a restart if the policy allows it (True: it took over)."""
        recovery = self._recovery
        if recovery is None or not recovery.accepts(stage_failure) or self._recovery_veto() is not None:
            return False
        with self._lock:
            if record.stale or self._recovering:
                return True  # one restart for the whole attempt
            if self._finished or record.ended:
                return False
            self._recovering = True
            old = list(self._islands)
            for r in old:
                r.stale = True
        for r in old:
            for proxy in r.handles.values():
                proxy._suspend()
        log.warning("graph %s: %s; restarting from the last checkpoint", self.name, cause)
        recovery.start(old, cause)
        return True


class RestartLoop:
    """Restarts of one running graph within its ``RestartPolicy`` (see the module docstring)."""

    def __init__(self, running, policy: RestartPolicy, restored_from: Optional[int], restore_storage: Any):
        self.running = running
        self.policy = policy
        self.initial = None if restored_from is None else restore_storage.path(restored_from)
        self.restarts = 0
        self.attempt = 0
        self._times: deque = deque()  # when each restart happened (for ``within``)
        self._wake = threading.Event()  # cancel() cuts a back-off short
        self._rng = random.Random()

    def accepts(self, stage_failure: bool) -> bool:
        """Whether a failure of this kind restarts the graph (the budget is checked when it happens)."""
        if self.policy.max_restarts == 0:
            return False
        return not stage_failure or self.policy.on_stage_failure

    def interrupt(self) -> None:
        """The graph was cancelled: stop waiting."""
        self._wake.set()

    def start(self, old: list, cause: BaseException) -> None:
        """Recover from ``cause`` (the failure of attempt ``self.attempt``, whose islands are ``old``)."""
        threading.Thread(target=self._run, args=(old, cause), name=f"atoll-recovery-{self.running.name}",
                         daemon=True).start()

    # ------------------------------------------------------------------ what a backend provides
    def _fence(self, old: list) -> None:
        """Stop every island of ``old`` and return once none can act any more (``RecoveryFailedError`` if that
        cannot be made sure of)."""
        raise NotImplementedError

    def _launch(self, attempt: int, snapshots) -> tuple:
        """Build attempt ``attempt`` restored from ``snapshots`` (None: from the start), not running yet; returns
        the arguments ``_install_attempt`` takes before the attempt number."""
        raise NotImplementedError

    def _fatal(self, error: BaseException) -> Optional[BaseException]:
        """The error that ends recovery at once when a start failed with ``error`` (None: try again)."""
        return None

    # ------------------------------------------------------------------ the recovery thread
    def _budget_left(self) -> bool:
        within = self.policy.within
        if within is not None:
            now = time.monotonic()
            while self._times and now - self._times[0] > within:
                self._times.popleft()
            return len(self._times) < self.policy.max_restarts
        return self.restarts < self.policy.max_restarts

    def _spent(self, last: BaseException) -> RecoveryFailedError:
        policy = self.policy
        err = RecoveryFailedError(
            f"graph {self.running.name}: restart budget spent ({self.restarts} restart(s), at most "
            f"{policy.max_restarts}{'' if policy.within is None else f' within {policy.within}s'}); "
            f"last failure: {last}")
        err.__cause__ = last
        return err

    def _run(self, old: list, cause: BaseException) -> None:
        running = self.running
        try:
            running._coordinator.suspend()
        except Exception as e:  # noqa: BLE001 - the coordinator is only asked to stop checkpointing
            log.warning("graph %s: suspending checkpoints for recovery failed: %r", running.name, e)
        last = cause
        while True:
            stop = running._recovery_veto()
            if stop is not None:
                running._recovery_failed(stop)
                return
            if not self._budget_left():
                running._recovery_failed(self._spent(last))
                return
            try:
                self._fence(old)
            except RecoveryFailedError as e:
                e.__cause__ = last
                running._recovery_failed(e)
                return
            self.restarts += 1
            self._times.append(time.monotonic())
            delay = backoff_delay(self.policy, self.restarts, self._rng)
            log.warning("graph %s: restart %d after %s (back-off %.2fs)", running.name, self.restarts, last, delay)
            if delay > 0:
                self._wake.wait(delay)  # cancel() cuts it short
            if running._recovery_veto() is not None:
                continue  # cancelled or a kill switch aborted meanwhile: the veto ends it
            try:
                info, snapshots = self._checkpoint()
                launched = self._launch(self.attempt + 1, snapshots)
            except Exception as e:  # noqa: BLE001 - a failed restart: try again within the budget
                fatal = self._fatal(e)
                if fatal is not None:
                    log.error("graph %s: restart %d cannot succeed: %s", running.name, self.restarts, e)
                    running._recovery_failed(fatal)
                    return
                log.warning("graph %s: restart %d failed: %r", running.name, self.restarts, e)
                last = e
                old = []
                continue
            attempt = self.attempt + 1
            running._install_attempt(*launched, attempt, info)
            self.attempt = attempt  # (a graph may publish it earlier, once its coordinator resumed)
            return

    def _checkpoint(self):
        """The checkpoint to restart from: this run's newest, else the one it was restored from, else none."""
        info = self.running._coordinator.latest()
        path = info.path if info is not None else self.initial
        if path is None:
            return None, None
        _storage, cid, snapshots = load_restore(path)
        return (info if info is not None else cid), snapshots
