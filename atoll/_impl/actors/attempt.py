"""Starting one attempt of a Ray graph: an island actor per island, built from its plan, started together.

The first run of a graph and every automatic recovery (``recovery.GraphRecovery``) start their actors the same
way, so the code lives here once: create one ``IslandActor`` per island with the island's options, send every
plan (with the checkpoint settings of the attempt and the island's snapshot to restore, if any), and wait for
all of them to be built within ``start_timeout``. Nothing runs until the caller calls ``run``. Actors come
from the materializer's warm pool when it has ones with the same options (``warm_pool``); every launch gets
its own wire base (``IslandActor.start``), so calls left over from an earlier graph reach nothing.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Dict, List, Optional, Tuple

import ray

from ...errors import IslandScheduleTimeoutError, MaterializationError
from .island_actor import IslandActor
from .running import _Island
from .warm_pool import pool_key

#: wire bases of launches: a plan's channel ids are small numbers, each launch shifts them into its own range
_WIRE_SPAN = 1 << 24
_launches = itertools.count(1)


class ActorLostAtStart(MaterializationError):
    """An island actor died while its attempt was being started, not by an error of its own: its process or its
    node was lost (after a node loss, Ray may place a new actor on that node until it declares the node dead)."""


def kill_actors(actors) -> None:
    """``ray.kill`` every actor (no restart); actors already gone are ignored."""
    for a in actors:
        try:
            ray.kill(a, no_restart=True)
        except Exception:  # noqa: BLE001
            pass


class IslandLauncher:
    """The islands of one graph, ready to be started as many times as recovery needs: per island its index, name,
    finished plan and actor options (``(index, name, plan, options, island_options)``)."""

    __slots__ = ("islands", "settings", "checkpoint", "pool")

    def __init__(self, islands: List[Tuple[int, str, Any, Dict[str, Any], dict]], settings,
                 checkpoint: Optional[dict], pool=None):
        self.islands = islands
        self.settings = settings
        self.checkpoint = checkpoint  # storage and graph name of the checkpoints, or None
        self.pool = pool  # the materializer's WarmActorPool, or None

    def launch(self, attempt: int, snapshots: Optional[Dict[int, Any]],
               on_created: Optional[Callable[[], None]] = None) -> Tuple[List[_Island], List[list]]:
        """Create and build attempt ``attempt``'s actors (restoring each island from ``snapshots[index]`` when
        given); returns the island records and each island's exported materialized values. ``on_created`` is
        called once every island actor was created and before the plans are sent. On failure every
        actor of the attempt is killed and the error raised: ``IslandScheduleTimeoutError`` (no resources), the
        stage's own exception (a stage that failed while being built), ``ActorLostAtStart`` (an actor died, not by
        its own error: its process or node was lost) or ``MaterializationError``."""
        settings = self.settings
        ckpt = None if self.checkpoint is None else dict(self.checkpoint, attempt=attempt)
        wire_base = next(_launches) * _WIRE_SPAN
        actors: Dict[int, Any] = {}
        records = []
        for index, name, _plan, opts, island_opts in self.islands:
            key = pool_key(opts) if self.pool is not None else None
            actor = self.pool.take(key) if key is not None else None
            if actor is None:
                actor = IslandActor.options(**opts).remote(name)
            actors[index] = actor
            records.append(_Island(index, name, actor, island_opts, wire_base, key))
        if on_created is not None:
            try:
                on_created()
            except BaseException:
                kill_actors(actors.values())
                raise
        starts = [actors[index].start.remote(plan, actors, settings, ckpt, snapshots.get(index) if snapshots else None,
                                             wire_base)
                  for index, _name, plan, _opts, _io in self.islands]
        ready, pending = ray.wait(starts, num_returns=len(starts), timeout=settings.start_timeout)
        if pending:
            stuck = [isl for isl, ref in zip(self.islands, starts) if ref in pending]
            kill_actors(actors.values())
            detail = "; ".join(f"{name} with options {opts}" for _i, name, _p, opts, _io in stuck)
            raise IslandScheduleTimeoutError(
                f"could not start island(s) within {settings.start_timeout:.0f}s: {detail}. "
                f"Resources available in the cluster: {ray.available_resources()}"
            )
        results = []
        for (_index, name, _plan, _opts, _io), ref in zip(self.islands, starts):
            try:
                results.append(ray.get(ref))
            except ray.exceptions.RayTaskError as e:
                kill_actors(actors.values())
                cause = e.cause if getattr(e, "cause", None) is not None else e
                raise cause from None
            except ray.exceptions.RayActorError as e:
                kill_actors(actors.values())
                lost = isinstance(e, ray.exceptions.ActorDiedError) and not e.actor_init_failed
                raise (ActorLostAtStart if lost else MaterializationError)(
                    f"island {name} failed to start: {e}") from None
        return records, results

    @staticmethod
    def run(records: List[_Island]) -> None:
        """Start the interpreters of a built attempt (every island exists, so no channel signal is lost)."""
        ray.get([r.actor.run.remote() for r in records])
