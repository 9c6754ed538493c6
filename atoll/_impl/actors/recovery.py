"""Automatic recovery of a checkpointed Ray graph: when an island's actor dies, the whole graph restarts from its
last complete checkpoint on new actors, and the driver's futures and handles carry on as if nothing happened.

Recovery is global (every island rolls back to the same cut), so it needs no deterministic routing. Its steps,
on a thread of its own (they block): suspend the coordinator (the checkpoint in flight is abandoned); kill every
actor of the failed attempt and wait until each is dead - a zombie must never write after the restore (the
fence, at most ``FENCE_SECONDS``); back off ``min(max_backoff, backoff * 2**(r-1)) * (1 +- jitter)``; load the
newest complete checkpoint of this run (else the checkpoint the run was restored from, else none: the graph
starts from the beginning, which is safe because nothing was committed before a checkpoint completed); start
the next attempt's actors from it; rebind the driver's futures and handles to them (a kill switch command given
meanwhile is re-applied); resume the coordinator and run. A failed start counts as a failed restart (an actor
lost while starting does not: see below). Ray's own actor restarts stay off: a restarted actor re-runs its
constructor and its calls become at-least-once. The loop, budget and back-off are
``islands.graph_restarts.RestartLoop``'s, shared with ``Materializer.local``'s recovery; this module gives it Ray's
fence, launch and no-capacity rule.

What restarts: an island that died (``IslandDiedError``), and a stage failure when
``RestartPolicy(on_stage_failure=True)``. What does not: ``cancel()``, a kill switch ``abort``, or a spent budget
(``RecoveryFailedError``, whose ``__cause__`` is the last failure); a cancel or abort given during the back-off
ends the recovery when the back-off is over. No capacity ends it too, at once: when the
next attempt's actors cannot be scheduled within ``start_timeout`` (``IslandScheduleTimeoutError``: a node with
the resources an island needs was lost), the graph fails with a ``RecoveryFailedError`` naming the islands and
the resources they miss, caused by that error - retrying would only wait ``start_timeout`` again per restart.
An actor of the next attempt that dies while it starts, not by an error of its own (``ActorLostAtStart``: after a
node loss Ray may place it on the lost node until its health checks declare that node dead, seconds later), is
not a failed restart: the same restart starts the attempt again, until ``start_timeout`` after its first try.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Dict, Optional

import ray

from ...checkpoint.settings import RestartPolicy
from ...errors import IslandScheduleTimeoutError, RecoveryFailedError
from ..islands.graph_restarts import RestartLoop, backoff_delay  # noqa: F401 - backoff_delay: re-exported
from .attempt import ActorLostAtStart, IslandLauncher, kill_actors

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


class GraphRecovery(RestartLoop):
    """Restarts of one running graph (``RayRunningGraph``) within its ``RestartPolicy``: the shared
    ``RestartLoop`` with Ray's fence (kill every actor, wait until each answers "dead"), launch (the graph's
    ``IslandLauncher``) and no-capacity rule."""

    #: the longest wait for the actors of a failed attempt to be dead
    FENCE_SECONDS = 10.0

    def __init__(self, running, launcher: IslandLauncher, policy: RestartPolicy, restored_from: Optional[int],
                 restore_storage: Any):
        super().__init__(running, policy, restored_from, restore_storage)
        self.launcher = launcher

    #: the pause before an attempt that lost an actor while starting is started again
    RELAUNCH_PAUSE = 0.2

    def _launch(self, attempt: int, snapshots) -> tuple:
        deadline = time.monotonic() + self.launcher.settings.start_timeout
        while True:
            try:
                return self.launcher.launch(attempt, snapshots)
            except ActorLostAtStart as e:  # placed on a node that was lost: Ray places it elsewhere once it knows
                if time.monotonic() >= deadline or self.running._recovery_veto() is not None:
                    raise
                log.warning("graph %s: attempt %d lost an actor while starting, starting it again: %s",
                            self.running.name, attempt, str(e).splitlines()[0])
                self._wake.wait(self.RELAUNCH_PAUSE)  # cancel() cuts it short

    def _fatal(self, error: BaseException) -> Optional[BaseException]:
        if isinstance(error, IslandScheduleTimeoutError):  # no capacity: waiting another start_timeout changes nothing
            return no_capacity_error(self.running.name, self.restarts, self.launcher.islands, error)
        return None

    def _fence(self, old: list) -> None:
        """Kill the actors of ``old`` (island records) and return once every one is dead."""
        actors = [r.actor for r in old]
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
