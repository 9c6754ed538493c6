"""detach: a one-element buffer between upstream and downstream (Pekko's ``GraphStages.Detacher``)."""
from __future__ import annotations

from .base import FlowLogic, FlowStage


class Detach(FlowStage):
    """Holds at most one element, so upstream may run one element ahead of downstream's demand.

    **Emits when** downstream pulls and an element is held. **Backpressures when** an element is held
    and downstream backpressures. **Completes when** upstream completes and the held element was
    emitted. **Cancels when** downstream cancels."""

    def __init__(self):
        super().__init__("detach")

    def create_logic(self, attributes):
        return _DetachLogic(self)


class _DetachLogic(FlowLogic):
    pulls_ahead = True  # holds one element read ahead

    stateless = True  # the element it holds stays in its input connection (saved as in flight)

    def pre_start(self) -> None:
        self.try_pull(self.in_)

    def on_push(self) -> None:
        if self.is_available(self.out):
            self.push(self.out, self.grab(self.in_))
            self.try_pull(self.in_)

    def on_upstream_finish(self) -> None:
        if not self.is_available(self.in_):
            self.complete_stage()

    def on_pull(self) -> None:
        if self.is_available(self.in_):
            self.push(self.out, self.grab(self.in_))
            if self.is_closed(self.in_):
                self.complete_stage()
            else:
                self.pull(self.in_)
