"""Automatic recovery of a checkpointed Ray graph: when an island's actor dies, the whole graph restarts from its
last complete checkpoint on new actors, and the driver's futures and handles carry on as if nothing happened.

Recovery is global (every island rolls back to the same cut), so it needs no deterministic routing. Its steps,
on a thread of its own (they block): suspend the coordinator (the checkpoint in flight is abandoned); kill every
actor of the failed attempt and wait until each is dead - a zombie must never write after the restore (the
fence, at most ``FENCE_SECONDS``); back off ``min(max_backoff, backoff * 2**(r-1)) * (1 +- jitter)``; load the
newest complete checkpoint of this run (else the checkpoint the run was restored from, else none: the graph
starts from the beginning, which is safe because nothing was committed before a checkpoint completed); start
the next attempt's actors from it; rebind the driver's futures and handles to them (a kill switch command given
meanwhile is re-applied); resume the coordinator and run. A failed start counts as a failed restart. Ray's own
actor restarts stay off: a restarted actor re-runs its constructor and its calls become at-least-once.

What restarts: an island that died (``IslandDiedError``), and a stage failure when
``RestartPolicy(on_stage_failure=True)``. What does not: ``cancel()``, a kill switch ``abort``, or a spent budget
(``RecoveryFailedError``, whose ``__cause__`` is the last failure). No capacity ends it too, at once: when the
next attempt's actors cannot be scheduled within ``start_timeout`` (``IslandScheduleTimeoutError``: a node with
the resources an island needs was lost), the graph fails with a ``RecoveryFailedError`` naming the islands and
the resources they miss, caused by that error - retrying would only wait ``start_timeout`` again per restart.
"""
from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from typing import Any, Dict, Optional

import ray

from ...checkpoint.settings import RestartPolicy
from ...errors import IslandScheduleTimeoutError, RecoveryFailedError
from ..islands.checkpoint_setup import load_restore
from .attempt import IslandLauncher, kill_actors

log = logging.getLogger("atoll.recovery")


def _needs(options: dict) -> Dict[str, float]:
    """The Ray resources an actor with these options asks for (by Ray's resource names)."""
    needs = {str(k): float(v) for k, v in (options.get("resources") or {}).items() if v}
    for option, resource in (("num_cpus", "CPU"), ("num_gpus", "GPU"), ("memory", "memory")):
        if options.get(option):
            needs[resource] = float(options[option])
    return needs


def no_capacity_error(graph: str, restart: int, islands: list, cause: IslandScheduleTimeoutError) -> RecoveryFailedError:
    """The ``RecoveryFailedError`` of a restart whose actors could not be scheduled: per island
    (``(index, name, plan, options, island_options)``, as the launcher has them) the resources it needs that the
    cluster does not have free now, with what is free and what exists in all; ``cause`` (the launcher's error,
    which names the islands it waited for) is its ``__cause__``."""
    try:
        available, total = ray.available_resources(), ray.cluster_resources()
    except Exception:  # noqa: BLE001 - Ray itself is going away: the cause still says what was missing
        available, total = {}, {}
    short = []
    for _index, name, _plan, options, _io in islands:
        missing = {k: v for k, v in _needs(options).items() if available.get(k, 0.0) < v}
        if missing:
            have = ", ".join(f"{k}={available.get(k, 0.0):g} free of {total.get(k, 0.0):g}" for k in sorted(missing))
            short.append(f"island {name} needs {missing} ({have})")
    what = "; ".join(short) if short else "the resources of its islands are not free"
    err = RecoveryFailedError(f"graph {graph}: restart {restart} found no capacity: {what}. {cause}")
    err.__cause__ = cause
    return err


def backoff_delay(policy: RestartPolicy, restart: int, rng: random.Random) -> float:
    """Seconds to wait before restart number ``restart`` (1-based)."""
    base = min(policy.max_backoff, policy.backoff * 2 ** (restart - 1))
    return max(0.0, base * (1 + rng.uniform(-policy.jitter, policy.jitter)))


class GraphRecovery:
    """Restarts of one running graph (``RayRunningGraph``) within its ``RestartPolicy``."""

    #: the longest wait for the actors of a failed attempt to be dead
    FENCE_SECONDS = 10.0

    def __init__(self, running, launcher: IslandLauncher, policy: RestartPolicy, restored_from: Optional[int],
                 restore_storage: Any):
        self.running = running
        self.launcher = launcher
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

    # ------------------------------------------------------------------ the recovery thread
    def _budget_left(self) -> bool:
        within = self.policy.within
        if within is not None:
            now = time.monotonic()
            while self._times and now - self._times[0] > within:
                self._times.popleft()
            return len(self._times) < self.policy.max_restarts
        return self.restarts < self.policy.max_restarts

    def _run(self, old: list, cause: BaseException) -> None:
        running = self.running
        coordinator = running._coordinator
        try:
            coordinator.suspend()
        except Exception as e:  # noqa: BLE001 - the coordinator is only asked to stop checkpointing
            log.warning("graph %s: suspending checkpoints for recovery failed: %r", running.name, e)
        last = cause
        while True:
            stop = running._recovery_veto()
            if stop is not None:
                running._recovery_failed(stop)
                return
            if not self._budget_left():
                err = RecoveryFailedError(
                    f"graph {running.name}: restart budget spent ({self.restarts} restart(s), at most "
                    f"{self.policy.max_restarts}{'' if self.policy.within is None else f' within {self.policy.within}s'}); "
                    f"last failure: {last}")
                err.__cause__ = last
                running._recovery_failed(err)
                return
            try:
                self._fence([r.actor for r in old])
            except RecoveryFailedError as e:
                e.__cause__ = last
                running._recovery_failed(e)
                return
            self.restarts += 1
            self._times.append(time.monotonic())
            delay = backoff_delay(self.policy, self.restarts, self._rng)
            log.warning("graph %s: restart %d after %s (back-off %.2fs)", running.name, self.restarts, last, delay)
            if delay > 0 and self._wake.wait(delay):
                continue  # cancelled meanwhile: the veto ends it
            try:
                info, snapshots = self._checkpoint()
                records, results = self.launcher.launch(self.attempt + 1, snapshots)
            except IslandScheduleTimeoutError as e:  # no capacity: waiting another start_timeout changes nothing
                log.error("graph %s: restart %d could not be scheduled: %s", running.name, self.restarts, e)
                running._recovery_failed(no_capacity_error(running.name, self.restarts, self.launcher.islands, e))
                return
            except Exception as e:  # noqa: BLE001 - a failed restart: try again within the budget
                log.warning("graph %s: restart %d failed: %r", running.name, self.restarts, e)
                last = e
                old = []
                continue
            running._install_attempt(records, results, self.attempt + 1, info)
            self.attempt += 1
            return

    def _fence(self, actors: list) -> None:
        """Kill ``actors`` and return once every one is dead."""
        kill_actors(actors)
        deadline = time.monotonic() + self.FENCE_SECONDS
        for actor in actors:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RecoveryFailedError(f"graph {self.running.name}: an island actor of attempt {self.attempt} "
                                              f"was still alive {self.FENCE_SECONDS:.0f}s after it was killed")
                try:
                    ray.get(actor.info.remote(), timeout=min(left, 1.0))
                except ray.exceptions.RayActorError:
                    break  # dead
                except ray.exceptions.GetTimeoutError:
                    continue
                except Exception:  # noqa: BLE001 - any other answer than "alive" counts as gone
                    break
                time.sleep(0.02)  # still answering: the kill has not reached it yet

    def _checkpoint(self):
        """The checkpoint to restart from: this run's newest, else the one it was restored from, else none."""
        info = self.running._coordinator.latest()
        path = info.path if info is not None else self.initial
        if path is None:
            return None, None
        _storage, cid, snapshots = load_restore(path)
        return (info if info is not None else cid), snapshots
