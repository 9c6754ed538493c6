"""Running graphs: the driver's handle on one materialized graph (for an operator's console).

A handle lists the graph's islands with their state, waits for all of them to end, and cancels the whole
graph with a cause (every stage fails with it, so every future of the graph fails with it too).
``RunningGraphBase`` holds what every backend shares: the completion future, the clean-ups run when
the last island ended, and the outcome policy (the error of the first island in island order that
failed, else ``Done``). ``RunningGraph`` is the local materializer's (islands are ``ThreadHost``\\ s);
``actors.running.RayRunningGraph`` is the Ray materializer's.
"""
from __future__ import annotations

import itertools
import logging
import threading
from abc import ABC, abstractmethod
from concurrent.futures import Future
from typing import Any, Callable, List, Optional, Union

from ..errors import AbruptTerminationError
from ..markers import Done

_graph_ids = itertools.count(1)
log = logging.getLogger(__name__)


class RunningGraphBase(ABC):
    """What both materializers' running graphs share; subclasses report island ends and call
    ``_finish`` once every island has ended."""

    def __init__(self, name: str, islands: List[Any], on_end: Optional[Callable[[Any], None]] = None,
                 cleanups: Optional[List[Callable[[], None]]] = None):
        self.id = next(_graph_ids)
        self.name = name
        self._islands = list(islands)
        self._lock = threading.Lock()
        self._on_end = on_end
        self._cleanups: List[Callable[[], None]] = list(cleanups or ())
        self._finished = False
        self.completion: Future = Future()
        self.completion.set_running_or_notify_cancel()
        self._cancelled = False
        self._cancel_cause: Optional[BaseException] = None
        self._coordinator = None  # the checkpoint coordinator, with checkpointing on
        self._checkpoint_settings = None

    def __repr__(self):
        state = "ended" if self.completion.done() else "running"
        return f"{type(self).__name__}({self.name}, {len(self._islands)} islands, {state})"

    def add_cleanup(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` when every island has ended (before ``completion`` is set)."""
        self._cleanups.append(fn)

    @staticmethod
    def _island_error(island: Any) -> Optional[BaseException]:
        """The error ``island`` ended with (None if it did not fail)."""
        return getattr(island, "error", None)

    def _finish(self) -> None:
        """Every island ended (call once; later calls do nothing): run the clean-ups, let go of the run's data
        (``_release``), then complete ``completion`` with the first failed island's error, else ``Done``, then tell
        ``on_end``."""
        with self._lock:
            if self._finished:
                return
            self._finished = True
        for fn in self._cleanups:
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - a failed clean-up must not hide the graph's outcome
                log.error("cleanup of graph %s failed: %r", self.name, e)
        self._cleanups = []
        errors = [e for e in map(self._island_error, self._islands) if e is not None]
        if self._coordinator is not None:
            self._end_checkpoints(succeeded=not errors and not self._cancelled)
            self._coordinator.release_ports()
        self._release()   # before ``completion``: whoever waits for it finds the run's data let go
        if errors:
            self.completion.set_exception(errors[0])
        else:
            self.completion.set_result(Done)
        if self._on_end is not None:
            self._on_end(self)

    def _release(self) -> None:
        """The graph finished: let go of what only its run needed (a local graph's interpreters and the elements
        they held), keeping what a handle still answers (``islands()``, the outcome). Nothing to do by default."""

    @property
    def is_running(self) -> bool:
        return not self.completion.done()

    @property
    def restarts(self) -> int:
        """How many times the graph was restarted from a checkpoint (0 for a graph that cannot restart)."""
        return 0

    @property
    def attempt(self) -> int:
        """The incarnation running now: 0, then one more per restart."""
        return 0

    # ------------------------------------------------------------------ checkpoints
    def attach_checkpoints(self, coordinator: Any, settings: Any) -> None:
        """The graph runs with checkpointing: ``coordinator`` takes its checkpoints."""
        self._coordinator = coordinator
        self._checkpoint_settings = settings

    def stop_checkpoints(self) -> None:
        """Take no more checkpoints (the materializer shuts down): returns once the coordinator's thread has ended,
        the checkpoint in progress abandoned or, if it was being written, written. Idempotent; nothing to do for
        a graph without checkpoints."""
        if self._coordinator is not None:
            self._coordinator.stop()

    def _end_checkpoints(self, succeeded: bool) -> None:
        coordinator = self._coordinator
        coordinator.stop()  # handles the islands' last reports first
        if succeeded and coordinator.all_clean() and not self._checkpoint_settings.retain_on_success:
            try:
                coordinator.storage.delete_all()
            except Exception as e:  # noqa: BLE001
                log.warning("graph %s: deleting its checkpoints failed: %r", self.name, e)

    def _require_checkpoints(self):
        if self._coordinator is None:
            from ..errors import IllegalStateError

            raise IllegalStateError(f"graph {self.name} runs without checkpoints: create the materializer with "
                                    "checkpoint=CheckpointSettings(...)")
        return self._coordinator

    def checkpoint_now(self, timeout: Optional[float] = 60.0, wait: bool = True) -> Any:
        """Take a checkpoint now (or join the one in progress); returns its ``CheckpointInfo`` once durable
        (``CheckpointError`` if it was aborted), or with ``wait=False`` a future of it."""
        future = self._require_checkpoints().trigger()
        return future.result(timeout) if wait else future

    def checkpoints(self) -> List[Any]:
        """The complete checkpoints this run took that are still retained, oldest first."""
        return self._require_checkpoints().checkpoints()

    def checkpoint_status(self) -> dict:
        """The checkpoint in progress, which islands answered it and what the others wait for."""
        return self._require_checkpoints().status()

    def stop_with_checkpoint(self, timeout: Optional[float] = 60.0) -> Any:
        """Take a checkpoint, cancel the graph and wait until every island ended (as Flink's stop-with-savepoint:
        a restore never runs beside the stopped run's last commits); the checkpoint stays (restore it with
        ``run(..., restore_from=info)``). Returns its ``CheckpointInfo``; ``TimeoutError`` (naming the
        checkpoint) when the graph did not end within ``timeout`` seconds of the checkpoint."""
        info = self.checkpoint_now(timeout)
        self.cancel(AbruptTerminationError(f"graph {self.name} was stopped with checkpoint {info.path}"))
        if not self.wait(timeout):
            raise TimeoutError(f"graph {self.name}: checkpoint {info.path} was taken but the graph did not end "
                               f"within {timeout}s of it")
        return info

    def cancel(self, cause: Optional[BaseException] = None) -> None:
        """Fail every stage of every island with ``cause`` (default: ``AbruptTerminationError``)."""
        if cause is None:
            cause = AbruptTerminationError(f"graph {self.name} was cancelled")
        self._cancel_cause = cause
        self._cancelled = True
        for island in self._islands:
            self._cancel_island(island, cause)

    @abstractmethod
    def _cancel_island(self, island: Any, cause: BaseException) -> None:
        """Fail every stage of ``island`` with ``cause`` (an island that already ended is left alone)."""

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block until every island ended; True if they did within ``timeout`` seconds."""
        try:
            self.completion.exception(timeout)
            return True
        except TimeoutError:
            return False

    @abstractmethod
    def islands(self) -> List[dict]:
        """Name, state and placement of each island."""


class RunningGraph(RunningGraphBase):
    """A local graph: each island is a ``ThreadHost`` that reports its end to ``island_ended``.
    ``indices``: the islands' indices in the graph (default: their positions), for ``kill_island``."""

    def __init__(self, name: str, islands: List[Any], on_end: Optional[Callable[["RunningGraph"], None]] = None,
                 cleanups: Optional[List[Callable[[], None]]] = None, indices: Optional[List[int]] = None):
        super().__init__(name, islands, on_end, cleanups)
        self._indices = list(range(len(self._islands))) if indices is None else list(indices)
        self._remaining = len(self._islands)
        if self._remaining == 0:
            self._finish()

    def island_ended(self, island) -> None:
        """Called by each island's host when it stopped."""
        with self._lock:
            self._remaining -= 1
            last = self._remaining == 0
        if last:
            self._finish()

    def kill_island(self, island: Union[int, str]) -> None:
        """Make island ``island`` (its index or name) die: a fatal ``IslandDiedError`` posted to its thread ends the
        thread's loop past every stage's supervision; the other islands are cancelled with it, so the graph fails
        with it (``atoll.testkit.chaos.kill_island``; a graph that can restart recovers instead)."""
        from ..errors import IslandDiedError

        for index, host in zip(self._indices, self._islands):
            if (isinstance(island, int) and index == island) or host.name == island:
                break
        else:
            names = [h.name for h in self._islands]
            raise LookupError(f"kill_island: graph {self.name} has no island {island!r} (its islands: {names})")

        def die() -> None:
            err = IslandDiedError(host.name, "its thread was killed")
            for other in self._islands:
                if other is not host:
                    other.cancel(err)
            raise err

        host.post(die)

    def _cancel_island(self, island: Any, cause: BaseException) -> None:
        island.cancel(cause)

    def _release(self) -> None:
        for host in self._islands:
            host.release()

    def islands(self) -> List[dict]:
        return [i.info() for i in self._islands]
