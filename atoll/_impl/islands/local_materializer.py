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
from .local_phase import InProcessTransport, LocalIslandPhase, materialized_values


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
            value = resolve(mat, materialized_values(phases))
        except BaseException:
            driver.abort()
            raise
        live = [p for p in phases if not p.is_empty]
        hosts = [p.host for p in live]
        running = RunningGraph(build.name, hosts, self._unregister, cleanups=driver.hand_over())
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
