"""Identity: the stage that passes every element through (what the empty ``Flow()`` becomes when a
graph needs a real stage with ports, e.g. when it is added to a GraphDSL builder)."""
from __future__ import annotations

from .base import FlowLogic, FlowStage
from .forms import IDENTITY, StatelessForm
from .transform import _StatelessChunkForm


class Identity(FlowStage):
    """Passes elements on unchanged.

    **Emits when** upstream emits. **Backpressures when** downstream backpressures.
    **Completes when** upstream completes. **Cancels when** downstream cancels."""

    def __init__(self):
        super().__init__("identity")

    def stateless_form(self) -> StatelessForm:
        return StatelessForm(IDENTITY, name="identity")

    def create_logic(self, attributes):
        return _IdentityLogic(self)


class _IdentityLogic(_StatelessChunkForm, FlowLogic):
    stateless = True

    def on_push(self):
        self.push(self.out, self.grab(self.in_))

    def on_push_chunk(self):
        self.push(self.out, self.grab(self.in_))
