"""WarmActorPool: island actors kept between graphs, so that the next graph starts without new worker processes.

Starting a Ray actor means starting a Python worker process (~0.5 s each on a small machine, one after the
other); an island actor whose graph ended cleanly is instead *reset* (``IslandActor.reset``: interpreter,
threads, exports and channels gone, so it is indistinguishable from a fresh one) and kept here under its actor
options. The next graph with the same options takes it. Actors idle for ``idle_timeout`` seconds are killed
by a reaper thread that runs only while the pool holds actors; ``shutdown`` kills them all. A failed, killed
or cancelled graph never gives its actors back (``RayRunningGraph``), and an actor whose reset finds
something left over (a stage's thread still running) is killed instead of kept.

A graph gives its actors back when its last island ended, which the driver hears a few milliseconds after the
sink's future completed (each island reports its end in its own reply). A caller that starts the next graph as
soon as it has the result would find the pool empty and start fresh worker processes (~0.5 s). So a graph tells
the pool when it likely winds down (a future of it completed, or an island of it ended cleanly: ``returning``)
and when it has given its actors back or killed them (``returned``); ``take`` with no idle actor for the key
waits for winding-down graphs, each at most ``RETURN_WAIT`` seconds from its first sign (a graph whose future
completed while it runs on for hours delays only the materializations of the next 0.5 s, by what a fresh actor
would cost anyway).
"""
from __future__ import annotations

import logging
import pickle
import threading
import time
import weakref
from collections import deque
from typing import Any, Deque, Dict, Hashable, Optional

import ray

log = logging.getLogger("atoll.ray")

_pools: "weakref.WeakSet[WarmActorPool]" = weakref.WeakSet()


def idle_actor_ids() -> set:
    """Ray actor ids (hex) of every island actor idle in a warm pool of this process (tests tell them from leaks)."""
    return {aid for pool in list(_pools) for aid in pool.idle_actor_ids()}


def pool_key(options: Dict[str, Any]) -> Optional[Hashable]:
    """The pool key of actor ``options``: equal options share actors. None (never pooled) when an option
    cannot be compared by value. (Island actors carry no Ray ``name``: an island's name is not its actor's.)"""
    try:
        return pickle.dumps(sorted(options.items()), protocol=5)
    except Exception:  # noqa: BLE001 - e.g. a scheduling strategy holding a handle: no reuse
        return None


class _Idle:
    __slots__ = ("actor", "reset", "until")

    def __init__(self, actor, reset, until: float):
        self.actor, self.reset, self.until = actor, reset, until


class WarmActorPool:
    """Idle island actors by pool key (see the module docstring). ``idle_timeout``: seconds an idle actor is
    kept; ``reset_timeout``: how long ``take`` waits for a returned actor's reset before giving up on it."""

    reset_timeout = 30.0
    #: how long after a graph began to wind down ``take`` may wait for its actors (about what starting a fresh
    #: actor costs on a small machine, so that waiting never loses much)
    RETURN_WAIT = 0.5

    def __init__(self, idle_timeout: float):
        self.idle_timeout = idle_timeout
        self._idle: Dict[Hashable, Deque[_Idle]] = {}
        self._returning: Dict[int, float] = {}  # id of a winding-down graph -> until when ``take`` waits for it
        self._lock = threading.Condition()
        self._reaper: Optional[threading.Thread] = None
        self._closed = False
        self.reused = 0  # actors handed out again (for tests and the console)
        _pools.add(self)

    # ------------------------------------------------------------------ lending
    def take(self, key: Optional[Hashable]):
        """A reset idle actor for ``key``, or None (the caller creates a fresh one)."""
        if key is None:
            return None
        while True:
            with self._lock:
                q = self._idle.get(key)
                while not q and self._wait_for_returns():
                    q = self._idle.get(key)
                if not q:
                    return None
                entry = q.pop()  # most recently used first: its process is warmest
            if entry.reset is None or self._reset_ok(entry):
                self.reused += 1
                return entry.actor

    def _wait_for_returns(self) -> bool:
        """(Under the lock.) Wait until a winding-down graph gave its actors back or the soonest one's wait is
        over; False at once when no graph is winding down (any more)."""
        returning = self._returning
        if not returning or self._closed:
            return False
        now = time.monotonic()
        for token in [t for t, until in returning.items() if until <= now]:
            del returning[token]  # waited for long enough: it winds down slowly
        if not returning:
            return False
        self._lock.wait(min(returning.values()) - now)
        return True

    def returning(self, token: int) -> None:
        """Graph ``token`` likely winds down (a future of it completed, an island of it ended cleanly): its actors
        may come back soon."""
        with self._lock:
            if not self._closed:
                self._returning.setdefault(token, time.monotonic() + self.RETURN_WAIT)

    def returned(self, token: int) -> None:
        """Graph ``token`` has given back (or killed) its actors, or is not ending after all (it restarts): ``take``
        waits for it no longer."""
        with self._lock:
            if self._returning.pop(token, None) is not None:
                self._lock.notify_all()

    def _reset_ok(self, entry: _Idle) -> bool:
        try:
            if ray.get(entry.reset, timeout=self.reset_timeout):
                return True
            log.debug("island actor not reusable: its reset found leftovers; killing it")
        except Exception as e:  # noqa: BLE001 - died or stuck while idle
            log.debug("island actor not reusable: %r", e)
        _kill(entry.actor)
        return False

    def give(self, key: Optional[Hashable], actor) -> None:
        """Take back ``actor`` (its island ended cleanly): reset it and keep it for ``idle_timeout`` seconds."""
        if key is None:
            _kill(actor)
            return
        try:
            reset = actor.reset.remote()
        except Exception:  # noqa: BLE001 - the handle is unusable
            _kill(actor)
            return
        self._put(key, _Idle(actor, reset, time.monotonic() + self.idle_timeout))

    def add_fresh(self, key: Hashable, actor, ready, idle_timeout: Optional[float] = None) -> None:
        """Keep a newly created actor (``Materializer.ray(warm_actors=n)``, or a pool actor its graph left);
        ``ready``: the ref of its first call, which ``take`` waits for; ``idle_timeout``: a shorter idle time
        for this actor than the pool's (every actor of one key must use the same)."""
        timeout = self.idle_timeout if idle_timeout is None else min(idle_timeout, self.idle_timeout)
        self._put(key, _Idle(actor, ready, time.monotonic() + timeout))

    def discard(self, key: Hashable, actor) -> None:
        """Take ``actor`` out of the idle ones if it is there (it turned out not reusable); the caller kills it."""
        with self._lock:
            q = self._idle.get(key)
            if q:
                for entry in q:
                    if entry.actor is actor:
                        q.remove(entry)
                        break

    def _put(self, key: Hashable, entry: _Idle) -> None:
        with self._lock:
            if self._closed:
                closed = True
            else:
                closed = False
                self._idle.setdefault(key, deque()).append(entry)
                if self._reaper is None:
                    self._reaper = threading.Thread(target=self._reap, name="atoll-warm-actors", daemon=True)
                    self._reaper.start()
                self._lock.notify_all()
        if closed:
            _kill(entry.actor)

    def idle_count(self) -> int:
        with self._lock:
            return sum(len(q) for q in self._idle.values())

    def idle_actor_ids(self) -> set:
        with self._lock:
            return {e.actor._actor_id.hex() for q in self._idle.values() for e in q}

    # ------------------------------------------------------------------ ending
    def _reap(self) -> None:
        """Kill actors whose idle time is over; the thread ends when the pool is empty or closed."""
        with self._lock:
            while True:
                if self._closed or not any(self._idle.values()):
                    self._reaper = None
                    return
                now = time.monotonic()
                expired = []
                soonest = now + self.idle_timeout
                for q in self._idle.values():  # oldest first per key, one idle time per key
                    while q and now >= q[0].until:
                        expired.append(q.popleft())
                    if q:
                        soonest = min(soonest, q[0].until)
                if expired:
                    self._lock.release()
                    try:
                        for e in expired:
                            _kill(e.actor)
                    finally:
                        self._lock.acquire()
                    continue
                self._lock.wait(max(0.01, soonest - now))

    def shutdown(self) -> None:
        """Kill every idle actor and stop the reaper; actors given back later are killed at once."""
        with self._lock:
            self._closed = True
            entries = [e for q in self._idle.values() for e in q]
            self._idle.clear()
            self._returning.clear()
            reaper = self._reaper
            self._lock.notify_all()
        for e in entries:
            _kill(e.actor)
        if reaper is not None and reaper is not threading.current_thread():
            reaper.join(timeout=5.0)


def _kill(actor) -> None:
    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # noqa: BLE001 - already gone
        pass

