"""WireTap: a side output that never slows the main stream down (Pekko's ``wireTap``)."""
from __future__ import annotations

from ...stage.attributes import Attributes
from ...stage.graph_stage import GraphStage
from ...stage.handlers import InHandler, OutHandler
from ...stage.logic import GraphStageLogic
from ...stage.ports import Inlet, Outlet
from ...stage.shapes import UniformFanOutShape


class WireTap(GraphStage):
    """Passes elements to ``out0`` and, when it happens to be ready, also to the tap ``out1``.

    **Emits when** upstream emits (to the tap only if the tap has demand; otherwise the tap misses
    the element). **Backpressures when** ``out0`` backpressures (never because of the tap).
    **Completes when** upstream completes. **Cancels when** ``out0`` cancels; a cancelled tap is
    simply left alone."""

    def __init__(self):
        self.in_ = Inlet("WireTap.in")
        self.out0 = Outlet("WireTap.out0")
        self.out1 = Outlet("WireTap.out1")
        self.shape = UniformFanOutShape(self.in_, [self.out0, self.out1])
        self.initial_attributes = Attributes.name("wire_tap")

    def create_logic(self, attributes):
        in_, out0, out1 = self.in_, self.out0, self.out1

        class Logic(GraphStageLogic, InHandler, OutHandler):
            stateless = True  # the tap drops what finds no demand: nothing is kept

            def __init__(self, shape):
                super().__init__(shape)
                self.set_handler(in_, self)
                self.set_handler(out0, self)
                self.set_handler(out1, OutHandler(on_pull=lambda: None, on_downstream_finish=lambda cause: None))

            def on_push(self):
                elem = self.grab(in_)
                self.push(out0, elem)
                if self.is_available(out1):
                    self.push(out1, elem)

            def on_pull(self):
                self.pull(in_)

        return Logic(self.shape)
