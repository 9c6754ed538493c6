"""LocalMaterializer: runs every island of a graph on its own thread in this process."""
from __future__ import annotations

from typing import Any

from ...materializer import phased
from ...materializer.debug import stderr_debug
from ...materializer.driver_prep import DriverContext
from ...materializer.materializer import Materializer, MaterializerSettings
from ...materializer.mat_values import resolve
from ...materializer.running_graph import RunningGraph
from .island_plan import GraphBuild
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
    def __init__(self, settings: MaterializerSettings):
        super().__init__(settings)

    def __repr__(self):
        return "Materializer.local()"

    def materialize(self, graph) -> Any:
        self._check_open()
        build = GraphBuild(self)
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
            value = resolve(mat, materialized_values(phases))
        except BaseException:
            driver.abort()
            raise
        hosts = [p.host for p in phases if not p.is_empty]
        running = RunningGraph(build.name, hosts, self._unregister, cleanups=driver.hand_over())
        if hosts:
            self._register(running)
        for h in hosts:
            h.on_done = running.island_ended
        for h in hosts:
            h.start()
        return value
