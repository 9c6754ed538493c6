"""Driver-side preparation of stages that need the driver's process before they run in an island.

Some stages hold something only the launching process has: a Spark DataFrame (its JVM lives in the driver),
a resource to be created per run. Such a stage defines ``prepare_on_driver(ctx) -> (stage, finish)``; the
phased materializer calls it once per materialization, on the driver, before the stage is handed to its
island. ``stage`` is what runs (same shape, same ports; picklable for Ray islands); ``finish`` (or ``None``)
maps the materialized value the island reports to the one the user sees. Resources the preparation took are
given back through :meth:`DriverContext.on_end` (after the graph ended) or :meth:`DriverContext.on_abort`
(when materialization itself failed).
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable, List, Optional, Tuple

log = logging.getLogger(__name__)


class DriverContext:
    """What ``prepare_on_driver`` sees: the materializer, and where to register clean-ups."""

    __slots__ = ("materializer", "remote", "_on_end", "_on_abort", "_on_islands_created", "_before_plans", "holds",
                 "phase")

    def __init__(self, materializer: Any, remote: bool):
        self.materializer = materializer
        #: True when islands run in other processes (Ray actors), False for in-process islands.
        self.remote = remote
        self._on_end: List[Callable[[], None]] = []
        self._on_abort: List[Callable[[], None]] = []
        self._on_islands_created: List[Callable[[], None]] = []
        self._before_plans: List[Callable[[], None]] = []
        #: island holds taken during this materialization (bound by the materializer when the graph runs)
        self.holds: List["IslandHold"] = []
        #: the island phase of the stage being prepared
        self.phase: Any = None

    def hold_island(self) -> "IslandHold":
        """Keep the island of the stage being prepared (its actor, and so the Ray objects it owns) alive after
        its stages stopped, until ``release()`` is called on the returned hold. In-process islands need no
        hold: their objects belong to this process."""
        hold = IslandHold(self.phase)
        if self.remote:
            self.holds.append(hold)
        return hold

    def on_end(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` once the graph has ended (any outcome); also when materialization fails."""
        self._on_end.append(fn)

    def on_islands_created(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` once the island actors of the graph were created, before their plans are sent (remote
        materializers; the stage copy ``prepare_on_driver`` returned is sent with the plan, so what ``fn``
        sets on it still travels). Ray starts only as many worker processes at a time as the node has cores:
        actors created here start after the islands' (``map_pool``'s driver-started pool actors)."""
        self._on_islands_created.append(fn)

    def before_plans_sent(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` after the ``on_islands_created`` callbacks, just before the plans are sent (remote
        materializers): a stage whose driver-side preparation goes on while the island actors start (the
        Spark side of ``Source.from_spark``) waits for it here; an exception fails the materialization."""
        self._before_plans.append(fn)

    def islands_created(self) -> None:
        """The materializer's side: the island actors exist; run (and forget) the ``on_islands_created``
        callbacks, then the ``before_plans_sent`` ones. An exception propagates: materialization fails (and
        ``abort`` runs the clean-ups)."""
        fns, self._on_islands_created = self._on_islands_created, []
        later, self._before_plans = self._before_plans, []
        for fn in fns + later:
            fn()

    def on_abort(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` only if materialization fails before the graph runs."""
        self._on_abort.append(fn)

    def hand_over(self) -> List[Callable[[], None]]:
        """The graph runs: return the end callbacks (for its running handle) and forget all callbacks."""
        fns = list(self._on_end)
        self._on_end.clear()
        self._on_abort.clear()
        self._on_islands_created.clear()
        self._before_plans.clear()
        return fns

    def abort(self) -> None:
        """Materialization failed: run the abort and end callbacks (errors are logged, not raised)."""
        for fn in self._on_abort + self._on_end:
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - the materialization error is the one to report
                log.error("driver-side clean-up after a failed materialization failed: %r", e)
        self._on_abort.clear()
        self._on_end.clear()
        self._on_islands_created.clear()
        self._before_plans.clear()


class IslandHold:
    """A promise not to stop an island's actor yet; ``release()`` (idempotent, thread-safe) ends it."""

    __slots__ = ("phase", "_lock", "_released", "_on_release")

    def __init__(self, phase: Any):
        self.phase = phase
        self._lock = threading.Lock()
        self._released = False
        self._on_release: Optional[Callable[[], None]] = None

    def bind(self, on_release: Callable[[], None]) -> None:
        """The materializer's side: call ``on_release`` when released (now, if it already was)."""
        with self._lock:
            self._on_release = on_release
            now = self._released
        if now:
            on_release()

    def release(self) -> None:
        with self._lock:
            if self._released:
                return
            self._released = True
            fn = self._on_release
        if fn is not None:
            fn()


def prepare(module: Any, ctx: Optional[DriverContext], phase: Any = None) -> Tuple[Any, Optional[Callable[[Any], Any]]]:
    """``(stage to run, finish)`` for ``module``: itself and no finish unless it asks for preparation."""
    hook = getattr(module, "prepare_on_driver", None)
    if hook is None or ctx is None:
        return module, None
    ctx.phase = phase
    stage, finish = hook(ctx)
    if stage.shape is not module.shape:
        raise TypeError(f"{module!r}.prepare_on_driver must return a stage with the same shape object")
    return stage, finish
