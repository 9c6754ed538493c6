"""Helpers shared by the built-in operators: linear stage shapes, promises, supervision lookup,
argument checks.

The promise helpers are defined in the leaf module :mod:`atoll._futures` and re-exported here, where
the operators have always found them."""
from __future__ import annotations

from typing import Any

from ..._futures import complete_promise, fail_promise, new_promise  # noqa: F401 - re-exported for the operators
from ...stage.attributes import Attributes, SupervisionStrategy
from ...stage.graph_stage import GraphStage
from ...stage.handlers import InHandler, OutHandler
from ...stage.logic import GraphStageLogic
from ...stage.ports import Inlet, Outlet
from ...stage.shapes import FlowShape, SinkShape, SourceShape
from ...stage.supervision import Supervision


class FlowStage(GraphStage):
    """A stage with one inlet ``in_`` and one outlet ``out``, named ``name``."""

    def __init__(self, name: str):
        self.in_ = Inlet(f"{name}.in")
        self.out = Outlet(f"{name}.out")
        self.shape = FlowShape(self.in_, self.out)
        self.initial_attributes = Attributes.name(name)


class SourceStage(GraphStage):
    """A stage with one outlet ``out``."""

    def __init__(self, name: str):
        self.out = Outlet(f"{name}.out")
        self.shape = SourceShape(self.out)
        self.initial_attributes = Attributes.name(name)


class SinkStage(GraphStage):
    """A stage with one inlet ``in_``."""

    def __init__(self, name: str):
        self.in_ = Inlet(f"{name}.in")
        self.shape = SinkShape(self.in_)
        self.initial_attributes = Attributes.name(name)


class FlowLogic(GraphStageLogic, InHandler, OutHandler):
    """Logic of a one-in one-out stage handling both ports itself; ``on_pull`` pulls upstream."""

    def __init__(self, stage: FlowStage):
        super().__init__(stage.shape)
        self.in_ = stage.in_
        self.out = stage.out
        self.set_handler(stage.in_, self)
        self.set_handler(stage.out, self)

    def on_pull(self) -> None:
        self.pull(self.in_)



class ChunkFlow:
    """Chunk form plumbing of a one-in one-out logic: ``enable_chunks`` installs
    ``on_push_chunk``/``on_pull_chunk`` (the element callbacks for finish/failure/cancel stay)."""

    chunked = False

    def chunk_capable(self) -> bool:
        return True

    def enable_chunks(self, chunk_size: int) -> None:
        self.chunked = True
        self.chunk_size = chunk_size
        self.set_handler(self.in_, InHandler(on_push=self.on_push_chunk, on_upstream_finish=self.on_upstream_finish,
                                             on_upstream_failure=self.on_upstream_failure))
        self.set_handler(self.out, OutHandler(on_pull=self.on_pull_chunk, on_downstream_finish=self.on_downstream_finish))

    def on_pull_chunk(self) -> None:
        """Default: ask upstream for what downstream accepts."""
        self.pull_chunk(self.in_, self._out_conns[0].demand)

    def pull_again(self) -> None:
        """Every element of a chunk was dropped: ask again for what downstream still accepts."""
        self.pull_chunk(self.in_, self._out_conns[0].demand)


def decider_of(attributes: Attributes):
    s = attributes.get(SupervisionStrategy)
    return s.decider if s is not None else Supervision.stopping_decider


def require_callable(op: str, arg: str, value: Any) -> None:
    if not callable(value):
        raise TypeError(f"{op}: argument {arg!r} must be callable, got {value!r}")


def require_int(op: str, arg: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{op}: argument {arg!r} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{op}: argument {arg!r} must be >= {minimum}, got {value}")


def require_bool(op: str, arg: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{op}: argument {arg!r} must be a bool, got {value!r}")


_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), frozenset, range)


def snapshot_copy(value: Any) -> Any:
    """A copy of a user value (an accumulator, a state) that later in-place changes cannot reach: a
    checkpoint must hold the value at the cut. Immutable values (tuples of them too) are shared."""
    if isinstance(value, _IMMUTABLE):
        return value
    if type(value) is tuple and all(isinstance(v, _IMMUTABLE) for v in value):
        return value
    import copy

    return copy.deepcopy(value)


def event_clock_state(logic) -> Any:
    """A logic's event time at a cut (watermark heard and sent, hold, armed event timers), or None."""
    clock = logic._event_clock
    if clock is None:
        return None
    timers = sorted((seq, key, ts) for key, (ts, seq) in clock.armed.items())
    return (clock.watermark, clock.forwarded, clock.hold, [(key, ts) for _, key, ts in timers])


def restore_event_clock(logic, state: Any) -> None:
    """Give ``logic`` back the event time ``event_clock_state`` saved (timers re-armed in their order)."""
    if state is None:
        return
    from ...stage.event_clock import EventClock

    clock = EventClock()
    clock.watermark, clock.forwarded, clock.hold, timers = state
    for key, ts in timers:
        clock.schedule(key, ts)
    logic._event_clock = clock
