"""``Valve``: hold a running stream at an exact element (checkpoint, failure and stop tests)."""
from __future__ import annotations

import threading

from ..stage import Attributes, FlowShape, GraphStage, GraphStageLogic, InHandler, Inlet, OutHandler, Outlet

__all__ = ["Valve"]


class Valve(GraphStage):
    """A flow stage for checkpoint tests: passes elements up to ``limit``, then stops pulling and sets
    ``reached``; ``open_to(n)`` (from any thread, once the graph runs) raises the limit. Lets a test hold a
    stream at an exact element to checkpoint, fail or stop it there."""

    stateless = True

    def __init__(self, limit: int):
        self.in_, self.out = Inlet("valve.in"), Outlet("valve.out")
        self.shape = FlowShape(self.in_, self.out)
        self.limit = limit
        self.reached = threading.Event()
        self.raise_limit = None
        self.initial_attributes = Attributes.name("valve")

    def open_to(self, limit: int) -> None:
        self.reached.clear()
        self.raise_limit.invoke(limit)

    def create_logic(self, attributes):
        stage = self

        class Logic(GraphStageLogic, InHandler, OutHandler):
            stateless = True

            def __init__(self):
                super().__init__(stage.shape)
                self.passed = 0
                self.waiting = False
                self.set_handlers(stage.in_, stage.out, self)
                stage.raise_limit = self.get_async_callback(self._raise)

            def _raise(self, limit):
                stage.limit = limit
                if self.waiting:
                    self.waiting = False
                    self.pull(stage.in_)

            def on_push(self):
                self.passed += 1
                self.push(stage.out, self.grab(stage.in_))

            def on_pull(self):
                if self.passed >= stage.limit:
                    self.waiting = True
                    stage.reached.set()
                else:
                    self.pull(stage.in_)

        return Logic()
