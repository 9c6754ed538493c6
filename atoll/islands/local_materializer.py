"""LocalMaterializer: runs every island of a graph on its own thread in this process."""
from __future__ import annotations

import itertools
from typing import Any

from ..materializer import phased
from ..materializer.debug import stderr_debug
from ..materializer.driver_prep import DriverContext
from ..materializer.materializer import Materializer, MaterializerSettings
from ..materializer.mat_values import resolve
from ..materializer.running_graph import RunningGraph
from .local_phase import LocalIslandPhase

_names = itertools.count(1)


class _GraphBuild:
    """What the phases of one materialization share."""

    def __init__(self, materializer, name: str = None):
        self.materializer = materializer
        self.settings = materializer.settings
        self.top_attributes = materializer.settings.top_attributes()
        self.name = name or f"graph-{next(_names)}"


def materialize_in_host(graph, host, materializer, name: str) -> Any:
    """Materialize ``graph`` into an already running ``host`` (substreams): every island of the
    graph becomes another interpreter on that host's thread. Call from the host's thread."""
    build = _GraphBuild(materializer, name)
    mat, phases = phased.materialize(
        graph.builder.traversal,
        lambda tag, attrs, index: LocalIslandPhase(build, attrs, index, host=host),
        build.top_attributes,
    )
    for p in phases:
        if not p.is_empty:
            host.add_interpreter(p.host_interpreter)
    return resolve(mat, {})


class LocalMaterializer(Materializer):
    def __init__(self, settings: MaterializerSettings):
        super().__init__(settings)

    def __repr__(self):
        return "Materializer.local()"

    def materialize(self, graph) -> Any:
        self._check_open()
        build = _GraphBuild(self)
        traversal = graph.builder.traversal
        driver = DriverContext(self, remote=False)
        try:
            mat, phases = phased.materialize(
                traversal,
                lambda tag, attrs, index: LocalIslandPhase(build, attrs, index),
                build.top_attributes,
                stderr_debug() if self.settings.debug else None,
                driver,
            )
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
        return resolve(mat, {})
