"""Resource operators: ``Source.unfold_resource`` (Pekko's ``unfoldResource``) and ``map_with_resource``
(Pekko's ``mapWithResource``, which is its ``StatefulMap`` with the resource as state)."""
from __future__ import annotations

from typing import Any, Callable

from ...stage.supervision import Supervision, decide
from .base import FlowStage, SourceStage, decider_of, require_callable
from .sources import _SourceLogic
from .transform import StatefulMap


class UnfoldResourceSource(SourceStage):
    """Emits ``read(resource)`` per pull, with ``resource = create()`` made when the stream starts, until
    ``read`` returns ``None``; then ``close(resource)`` runs and the stream completes. ``close`` runs
    exactly once per resource: at that end, when downstream cancels, when the stream fails or is torn
    down. What ``create`` or ``close`` raises fails the stream.

    Supervision of ``read``: Stop closes the resource and fails; Resume asks ``read`` again (the element
    is skipped); Restart closes the resource, creates a new one and reads from it.

    **Emits when** there is demand and ``read`` returns a value. **Completes when** ``read`` returns
    ``None``. **Cancels when** downstream cancels (closing the resource)."""

    def __init__(self, create: Callable[[], Any], read: Callable[[Any], Any], close: Callable[[Any], Any]):
        require_callable("Source.unfold_resource", "create", create)
        require_callable("Source.unfold_resource", "read", read)
        require_callable("Source.unfold_resource", "close", close)
        super().__init__("unfold_resource")
        self.create = create
        self.read = read
        self.close = close

    def create_logic(self, attributes):
        return _UnfoldResourceLogic(self, decider_of(attributes))


class _UnfoldResourceLogic(_SourceLogic):
    def __init__(self, stage: UnfoldResourceSource, decider):
        super().__init__(stage)
        self.create = stage.create
        self.read = stage.read
        self.close = stage.close
        self.decider = decider
        self.open = False
        self.resource = None

    def pre_start(self):
        self.resource = self.create()
        self.open = True

    def on_pull(self):
        read = self.read
        while True:
            try:
                data = read(self.resource)
            except Exception as e:  # noqa: BLE001
                d = decide(self.decider, e)
                if d == Supervision.STOP:
                    self.open = False
                    try:
                        self.close(self.resource)
                    except Exception as e2:  # noqa: BLE001 - close failing wins, as in Pekko
                        self.fail_stage(e2)
                        return
                    self.fail_stage(e)
                    return
                if d == Supervision.RESTART:
                    self.open = False
                    self.close(self.resource)
                    self.resource = self.create()
                    self.open = True
                continue
            if data is None:
                self._close_stage()
            else:
                self.push(self.out, data)
            return

    def on_downstream_finish(self, cause):
        self._close_stage()

    def _close_stage(self) -> None:
        self.open = False
        try:
            self.close(self.resource)
        except Exception as e:  # noqa: BLE001
            self.fail_stage(e)
            return
        self.complete_stage()

    def post_stop(self):
        if self.open:
            self.open = False
            self.close(self.resource)


class MapWithResource(StatefulMap):
    """Maps each element with ``fn(resource, elem)``, ``resource = create()`` made when the stream starts;
    a ``None`` result emits nothing for that element (Pekko's elements are never null). ``close(resource)``
    runs exactly once per resource, when upstream completes or fails, downstream cancels, or the stage is
    torn down; what it returns (unless ``None``) is emitted before the stage completes or fails (dropped
    on cancellation).

    **Emits when** ``fn`` returns an element and downstream is ready. **Backpressures when**
    downstream backpressures. **Completes when** upstream completes (after ``close``'s element).
    **Cancels when** downstream cancels. Supervision of ``fn``: Resume skips the element; Restart
    closes the resource (emitting what ``close`` returns) and creates a new one."""

    def __init__(self, create: Callable[[], Any], fn: Callable[[Any, Any], Any], close: Callable[[Any], Any]):
        require_callable("map_with_resource", "create", create)
        require_callable("map_with_resource", "fn", fn)
        require_callable("map_with_resource", "close", close)

        def step(resource, elem):
            return resource, fn(resource, elem)

        super().__init__(create, step, close)
        FlowStage.__init__(self, "map_with_resource")  # ports and name of this operator
