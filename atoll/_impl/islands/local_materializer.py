"""LocalMaterializer: runs every island of a graph on its own thread in this process."""
from __future__ import annotations

from typing import Any, Optional

from ...materializer import phased
from ...materializer.debug import stderr_debug
from ...materializer.driver_prep import DriverContext
from ...materializer.materializer import Materializer, MaterializerSettings
from ...materializer.mat_values import resolve
from ...materializer.running_graph import RunningGraph
from .island_plan import GraphBuild
from .checkpoint_setup import (
    check_checkpointable,
    check_restorable,
    graph_name,
    island_end_hook,
    load_restore,
    replay_hook,
    wire_checkpoints,
)
from .feedback import back_edge_channels
from .local_phase import InProcessTransport, LocalIslandPhase, materialized_values
from .local_recovery import LocalGraphRecovery, LocalIsland, LocalRecoveringGraph


def materialize_in_host(graph, host, materializer, name: str) -> Any:
    """Materialize ``graph`` into an already running ``host`` (substreams): every island of the
    graph becomes another interpreter on that host's thread. Call from the host's thread."""
    build = GraphBuild(materializer, name)
    transport = InProcessTransport()
    mat, phases = phased.materialize(
        graph.builder.traversal,
        lambda tag, attrs, index: LocalIslandPhase(build, attrs, index, transport, host=host),
        build.top_attributes,
    )
    value = resolve(mat, materialized_values(phases))
    for p in phases:
        if not p.is_empty:
            host.add_interpreter(p.host_interpreter)
    return value


class LocalMaterializer(Materializer):
    """Runs each island of a graph on a thread of this process; with ``checkpoint`` settings whose
    ``RestartPolicy`` allows restarts, a graph restarts from its checkpoints (``local_recovery``)."""

    def __init__(self, settings: MaterializerSettings, checkpoint=None):
        super().__init__(settings)
        self.checkpoint = checkpoint

    def __repr__(self):
        return "Materializer.local()"

    def materialize(self, graph, name: Optional[str] = None, restore_from: Any = None) -> Any:
        self._check_open()
        checkpointing = self.checkpoint is not None
        name = graph_name(name, checkpointing)
        restored_from = restore_storage = None
        build = GraphBuild(self, name)
        if restore_from is not None:
            restore_storage, restored_from, build.restore = load_restore(restore_from)
        transport = InProcessTransport()
        traversal = graph.builder.traversal
        driver = DriverContext(self, remote=False)
        try:
            mat, phases = phased.materialize(
                traversal,
                lambda tag, attrs, index: LocalIslandPhase(build, attrs, index, transport),
                build.top_attributes,
                stderr_debug() if self.settings.debug else None,
                driver,
            )
            if build.restore is not None:
                check_restorable(phases, build.restore, f"checkpoint {restored_from} of {restore_storage.base}")
            if checkpointing or build.restore is not None:
                check_checkpointable([(p.name, p.stage_logics()) for p in phases if p.assembled is not None])
            live = [p for p in phases if not p.is_empty]
            recovering = checkpointing and bool(live) and self.checkpoint.restart.max_restarts > 0
            if recovering:
                return self._run_recovering(mat, phases, live, build, driver, restored_from, restore_storage)
            value = resolve(mat, materialized_values(phases))
        except BaseException:
            driver.abort()
            raise
        hosts = [p.host for p in live]
        running = RunningGraph(build.name, hosts, self._unregister, cleanups=driver.hand_over(),
                               indices=[p.index for p in live])
        coordinator = None
        if checkpointing and hosts:
            coordinator = wire_checkpoints(self.checkpoint, build.name, phases, running, restored_from, restore_storage,
                                           build.plans)
        if hosts:
            self._register(running)
        for p in live:
            p.host.before_init = replay_hook(p.assembled)
            if coordinator is not None:
                end = island_end_hook(coordinator, p)
                p.host.on_done = lambda h, end=end: (end(h), running.island_ended(h))
            else:
                p.host.on_done = running.island_ended
        if coordinator is not None:
            coordinator.start()
        for h in hosts:
            h.start()
        return value

    def _run_recovering(self, mat, phases, live, build, driver, restored_from, restore_storage) -> Any:
        """Run a checkpointed graph that restarts from its checkpoints when an island dies
        (``local_recovery``): the user gets the driver's values, rebound to each attempt's."""
        records = [LocalIsland(p.index, p.name, p.plan, p.host, p.assembled) for p in live]
        running = LocalRecoveringGraph(build.name, records, self._unregister)
        value = resolve(mat, running.adopt())
        coordinator = wire_checkpoints(self.checkpoint, build.name, phases, running, restored_from, restore_storage,
                                       build.plans, live=running.live(records))
        for fn in driver.hand_over():  # from here on nothing fails: the graph runs them when it ends
            running.add_cleanup(fn)
        running.enable_recovery(LocalGraphRecovery(running, self, self.settings, self.checkpoint,
                                                   back_edge_channels(build.plans), restored_from, restore_storage))
        self._register(running)
        for p in live:
            p.host.before_init = replay_hook(p.assembled)
        coordinator.start()
        running.start()
        return value
