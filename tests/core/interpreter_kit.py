"""A bare-interpreter harness (the counterpart of Pekko's ``GraphInterpreterSpecKit``).

It builds a ``GraphInterpreter`` directly from stage logics with ``IslandBuilder`` (no materializer,
no threads, no fusion) and drives it step by step from the test's own thread, so a test can assert the
exact signals each step produces:

* ``KitHost`` stands in for the island host: ``post`` collects callbacks (run them with
  ``run_posted``), ``schedule`` keeps timers on a virtual clock (fire them with ``advance``).
* ``UpstreamProbe`` / ``DownstreamProbe`` are boundary logics that record ``RequestOne``,
  ``Cancel(cause)`` / ``OnNext(elem)``, ``OnComplete``, ``OnError(exc)`` into the kit's event set.
* ``Kit`` wires stages to each other and to probes; ``one_bounded(*stages)`` is Pekko's
  ``OneBoundedSetup``: upstream probe -> stages -> downstream probe, every signal processed to the end.
* ``JunctionSetup(stage)`` puts a probe on every port of one (fan-in or fan-out) stage; ``feed`` drives
  upstream probes like ``Source(list)`` and downstream probes like eager sinks.
"""
from __future__ import annotations

import heapq
import itertools
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from atoll.errors import NO_MORE_ELEMENTS_NEEDED
from atoll._impl.islands.island_builder import IslandBuilder
from atoll._impl.islands.interpreter import GraphInterpreter
from atoll.materializer.materializer import MaterializerSettings
from atoll.stage.attributes import Attributes
from atoll.stage.graph_stage import GraphStage
from atoll.stage.handlers import InHandler, OutHandler
from atoll.stage.logic import GraphStageLogic
from atoll.stage.ports import Inlet, Outlet
from atoll.stage.shapes import SinkShape, SourceShape

#: The attributes every materialized stage inherits (input buffer, stopping supervision).
DEFAULT_ATTRIBUTES = MaterializerSettings().top_attributes()

UNLIMITED = 1 << 30


# ---------------------------------------------------------------------------------------------- events
class Event:
    """A recorded signal; equal when kind, source and payload are equal (exceptions by identity)."""

    __slots__ = ("source", "payload")
    kind = "?"

    def __init__(self, source=None, payload: Any = None):
        self.source = source
        self.payload = payload

    def _key(self):
        return (self.kind, id(self.source) if self.source is not None else None, _freeze(self.payload))

    def __eq__(self, other):
        return isinstance(other, Event) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        src = f"{self.source!r}, " if self.source is not None else ""
        return f"{self.kind}({src}{self.payload!r})" if self.payload is not None else f"{self.kind}({src.rstrip(', ')})"


def _freeze(p):
    if isinstance(p, BaseException):
        return ("exc", id(p))
    if isinstance(p, (list, tuple)):
        return (type(p).__name__, tuple(_freeze(x) for x in p))
    if isinstance(p, dict):
        return ("dict", tuple(sorted((k, _freeze(v)) for k, v in p.items())))
    return p


class RequestOne(Event):
    kind = "RequestOne"

    def __init__(self, source=None):
        super().__init__(source)


class RequestAnother(Event):
    kind = "RequestAnother"

    def __init__(self, source=None):
        super().__init__(source)


class OnComplete(Event):
    kind = "OnComplete"

    def __init__(self, source=None):
        super().__init__(source)


class OnNext(Event):
    kind = "OnNext"

    def __init__(self, elem, source=None):
        super().__init__(source, elem)


class OnError(Event):
    kind = "OnError"

    def __init__(self, exc, source=None):
        super().__init__(source, exc)


class Cancel(Event):
    kind = "Cancel"

    def __init__(self, cause, source=None):
        super().__init__(source, cause)


class PreStart(Event):
    kind = "PreStart"

    def __init__(self, source=None):
        super().__init__(source)


class PostStop(Event):
    kind = "PostStop"

    def __init__(self, source=None):
        super().__init__(source)


# ---------------------------------------------------------------------------------------------- host
class _Timer:
    __slots__ = ("due", "seq", "fn", "args", "cancelled")

    def __init__(self, due, seq, fn, args):
        self.due = due
        self.seq = seq
        self.fn = fn
        self.args = args
        self.cancelled = False

    def __lt__(self, other):
        return (self.due, self.seq) < (other.due, other.seq)


class KitHost:
    """The services an interpreter needs from its host, run synchronously on the test's thread."""

    def __init__(self):
        self.posted: List[Tuple[Callable, tuple]] = []
        self.timers: List[_Timer] = []
        self.time = 0.0  # virtual seconds, moved by advance()
        self.dirty: List[Any] = []
        self._seq = itertools.count()
        self.interpreter: Optional[GraphInterpreter] = None

    # -- the host interface used by the interpreter, logics and timers
    def post(self, fn: Callable, *args) -> None:
        self.posted.append((fn, args))

    def schedule(self, delay: float, fn: Callable, *args) -> _Timer:
        t = _Timer(self.time + delay, next(self._seq), fn, args)
        heapq.heappush(self.timers, t)
        return t

    def cancel_scheduled(self, handle: _Timer) -> None:
        handle.cancelled = True

    def mark_dirty(self, boundary) -> None:
        self.dirty.append(boundary)

    def now(self) -> float:
        """The host's (virtual) time: what timers read."""
        return self.time

    # -- driving
    @property
    def active_timers(self) -> List[_Timer]:
        return sorted(t for t in self.timers if not t.cancelled)

    def run_posted(self, event_limit: int = UNLIMITED) -> int:
        """Run every posted callback (and what they post), each followed by an interpreter turn."""
        n = 0
        while self.posted:
            fn, args = self.posted.pop(0)
            fn(*args)
            n += 1
            if self.interpreter is not None:
                self.interpreter.execute(event_limit)
        return n

    def advance(self, seconds: float) -> int:
        """Move the virtual clock forward, firing every timer that falls due (in order); returns the
        number of timers fired."""
        end = self.time + seconds
        fired = 0
        while self.timers and self.timers[0].due <= end:
            t = heapq.heappop(self.timers)
            if t.cancelled:
                continue
            self.time = max(self.time, t.due)
            t.fn(*t.args)
            fired += 1
            if self.interpreter is not None:
                self.interpreter.execute(UNLIMITED)
            self.run_posted()
        self.time = end
        return fired


# ---------------------------------------------------------------------------------------------- probes
class UpstreamProbe(GraphStageLogic):
    """A boundary logic with one outlet ``out``; records pulls and cancellations of its outlet."""

    def __init__(self, kit: "Kit", name: str = "upstream"):
        self.out = Outlet(f"{name}.out")
        self.out.id = 0
        super().__init__(SourceShape(self.out))
        self.kit = kit
        self.stage_name = name
        self.set_handler(
            self.out,
            OutHandler(on_pull=self._on_pull, on_downstream_finish=self._on_downstream_finish),
        )

    def _on_pull(self):
        self.kit.record(RequestOne(self.kit.source_tag(self)))

    def _on_downstream_finish(self, cause):
        self.kit.record(Cancel(cause, self.kit.source_tag(self)))

    # -- port operations without running the interpreter (may raise PortStateError)
    @property
    def available(self) -> bool:
        return self.is_available(self.out)

    @property
    def closed(self) -> bool:
        return self.is_closed(self.out)

    def push_elem(self, elem) -> None:
        self.push(self.out, elem)
        self._after()

    def complete_out(self) -> None:
        self.complete(self.out)
        self._after()

    def fail_out(self, exc: BaseException) -> None:
        self.fail(self.out, exc)
        self._after()

    def _after(self) -> None:
        # an external signal, like an async input: stop this probe once its port is closed
        self._interpreter._after_stage_has_run(self)

    # -- Pekko's UpstreamProbe: signal, then run the interpreter
    def on_next(self, elem, event_limit: int = UNLIMITED) -> None:
        self.push_elem(elem)
        self.kit.run(event_limit)

    def on_complete(self, event_limit: int = UNLIMITED) -> None:
        self.complete_out()
        self.kit.run(event_limit)

    def on_next_and_complete(self, elem, event_limit: int = UNLIMITED) -> None:
        self.push_elem(elem)
        self.complete_out()
        self.kit.run(event_limit)

    def on_error(self, exc: BaseException, event_limit: int = UNLIMITED) -> None:
        self.fail_out(exc)
        self.kit.run(event_limit)


class DownstreamProbe(GraphStageLogic):
    """A boundary logic with one inlet ``in_``; records pushes (grabbing them unless ``grab=False``),
    completion and failure of its inlet."""

    def __init__(self, kit: "Kit", name: str = "downstream", grab: bool = True):
        self.in_ = Inlet(f"{name}.in")
        self.in_.id = 0
        super().__init__(SinkShape(self.in_))
        self.kit = kit
        self.stage_name = name
        self.auto_grab = grab
        self.set_handler(
            self.in_,
            InHandler(
                on_push=self._on_push,
                on_upstream_finish=self._on_upstream_finish,
                on_upstream_failure=self._on_upstream_failure,
            ),
        )

    def _on_push(self):
        if self.auto_grab:
            elem = self.grab(self.in_)
        else:
            slot = self._in_conns[0].slot  # peek without grabbing
            elem = getattr(slot, "previous", slot)
        self.kit.record(OnNext(elem, self.kit.source_tag(self)))

    def _on_upstream_finish(self):
        self.kit.record(OnComplete(self.kit.source_tag(self)))

    def _on_upstream_failure(self, exc):
        self.kit.record(OnError(exc, self.kit.source_tag(self)))

    # -- port operations without running the interpreter (may raise PortStateError)
    @property
    def available(self) -> bool:
        return self.is_available(self.in_)

    @property
    def pulled(self) -> bool:
        return self.has_been_pulled(self.in_)

    @property
    def closed(self) -> bool:
        return self.is_closed(self.in_)

    def pull_in(self) -> None:
        self.pull(self.in_)
        self._after()

    def cancel_in(self, cause: Optional[BaseException] = None) -> None:
        self.cancel(self.in_, cause)
        self._after()

    def grab_elem(self):
        return self.grab(self.in_)

    def _after(self) -> None:
        self._interpreter._after_stage_has_run(self)

    # -- Pekko's DownstreamProbe: signal, then run the interpreter
    def request_one(self, event_limit: int = UNLIMITED) -> None:
        self.pull_in()
        self.kit.run(event_limit)

    def cancel_and_run(self, cause: Optional[BaseException] = None, event_limit: int = UNLIMITED) -> None:
        self.cancel_in(NO_MORE_ELEMENTS_NEEDED if cause is None else cause)
        self.kit.run(event_limit)


# ---------------------------------------------------------------------------------------------- the kit
def create_logic(stage: GraphStage, attributes: Attributes = Attributes.none) -> Tuple[GraphStageLogic, Any]:
    """Create ``stage``'s logic as the materializer would: port ids set, attributes inherited."""
    stage.shape.assign_ids()
    attrs = DEFAULT_ATTRIBUTES.and_(stage.initial_attributes).and_(attributes)
    logic, mat = stage.create_logic_and_materialized_value(attrs)
    logic.attributes = attrs
    logic.stage_name = attrs.name_or_default(type(stage).__name__)
    return logic, mat


class Kit:
    """Assemble an interpreter from logics and (outlet, inlet) connections, then drive it."""

    def __init__(self, record_sources: bool = True):
        self.host = KitHost()
        self.events: set = set()
        self.log: List[Event] = []
        self.record_sources = record_sources
        self.interpreter: Optional[GraphInterpreter] = None
        self._logics: List[GraphStageLogic] = []
        self._owner: Dict[int, GraphStageLogic] = {}
        self._connections: List[Tuple[Outlet, Inlet]] = []
        self.mat_values: List[Any] = []

    # -- recording
    def source_tag(self, probe):
        return probe if self.record_sources else None

    def record(self, event: Event) -> None:
        self.events.add(event)
        self.log.append(event)

    def last_events(self) -> set:
        """The events recorded since the last call (a set, as Pekko's ``lastEvents()``)."""
        ev, self.events = self.events, set()
        return ev

    def clear_events(self) -> None:
        self.events = set()

    # -- assembly
    def upstream(self, name: str = "upstream") -> UpstreamProbe:
        return UpstreamProbe(self, name)

    def downstream(self, name: str = "downstream", grab: bool = True) -> DownstreamProbe:
        return DownstreamProbe(self, name, grab)

    def add(self, stage_or_logic, attributes: Attributes = Attributes.none) -> GraphStageLogic:
        """Add a stage (its logic is created here) or a ready-made logic; returns the logic."""
        if isinstance(stage_or_logic, GraphStage):
            logic, mat = create_logic(stage_or_logic, attributes)
            self.mat_values.append(mat)
        else:
            logic = stage_or_logic
            if logic.attributes is Attributes.none or not logic.attributes.attribute_list:
                logic.attributes = DEFAULT_ATTRIBUTES.and_(attributes)
        self._logics.append(logic)
        for p in list(logic._in_ports) + list(logic._out_ports):
            if p is not None:
                self._owner[id(p)] = logic
        return logic

    def connect(self, out: Outlet, in_: Inlet) -> "Kit":
        self._connections.append((out, in_))
        return self

    def init(self) -> GraphInterpreter:
        """Build the interpreter (connection ``i`` is the ``i``-th ``connect``) and run ``init``."""
        b = IslandBuilder("kit")
        for logic in self._logics:
            b.add_logic(logic)
        for slot, (out, in_) in enumerate(self._connections):
            b.assign_port(in_, slot, self._owner[id(in_)])
            b.assign_port(out, slot, self._owner[id(out)])
        self.interpreter = b.build(self.host)
        self.host.interpreter = self.interpreter
        self.interpreter.init()
        return self.interpreter

    # -- driving
    def step(self, events: int = 1) -> int:
        return self.interpreter.execute(events)

    def step_all(self) -> int:
        return self.interpreter.execute(UNLIMITED)

    def run(self, event_limit: int = UNLIMITED) -> None:
        """Process every queued event and every posted callback."""
        self.interpreter.execute(event_limit)
        self.host.run_posted(event_limit)


def linear(kit: Kit, stages: Sequence[Any], attributes: Attributes = Attributes.none, grab: bool = True):
    """upstream probe -> stages -> downstream probe; returns ``(upstream, logics, downstream)``."""
    up = kit.add(kit.upstream())
    logics = [kit.add(s, attributes) for s in stages]
    down = kit.add(kit.downstream(grab=grab))
    chain: List[Any] = [up] + logics + [down]
    for a, b in zip(chain, chain[1:]):
        kit.connect(a._out_ports[0], b._in_ports[0])
    return up, logics, down


class OneBounded:
    """Pekko's ``OneBoundedSetup``: probes around a linear chain of stages, events without sources,
    and every probe action runs the interpreter to quiescence."""

    def __init__(self, *stages: Any, decider: Optional[Callable] = None, attributes: Attributes = Attributes.none):
        if decider is not None:
            attributes = attributes.and_(Attributes.supervision_strategy(decider))
        self.kit = Kit(record_sources=False)
        self.upstream, self.logics, self.downstream = linear(self.kit, stages, attributes)
        self.kit.upstream_probe = self.upstream
        # Pekko's one-bounded upstream reports a second outstanding pull as RequestAnother
        self.upstream._on_pull = self._on_pull  # type: ignore[method-assign]
        self.upstream.set_handler(
            self.upstream.out,
            OutHandler(on_pull=self._on_pull, on_downstream_finish=self.upstream._on_downstream_finish),
        )
        self.kit.init()
        self.kit.run()

    def _on_pull(self):
        if RequestOne() in self.kit.events:
            self.kit.record(RequestAnother())
        else:
            self.kit.record(RequestOne())

    @property
    def interpreter(self) -> GraphInterpreter:
        return self.kit.interpreter

    def last_events(self) -> set:
        return self.kit.last_events()


class JunctionSetup:
    """One stage (typically a fan-in or fan-out junction) with an upstream probe on each of its inlets
    (``ups[i]``, named ``up<i>``) and a downstream probe on each of its outlets (``downs[i]``, named
    ``down<i>``): Pekko's ``TestSetup`` with ``builder(stage).connect(...)``. Events carry their probe.

    ``start=True`` runs the interpreter once after ``init`` so that the stage's ``pre_start`` pulls are
    already processed (and recorded); ``start=False`` leaves them queued, as Pekko's ``init()`` does.
    """

    def __init__(
        self,
        stage: GraphStage,
        attributes: Attributes = Attributes.none,
        decider: Optional[Callable] = None,
        start: bool = True,
        grab: bool = True,
    ):
        if decider is not None:
            attributes = attributes.and_(Attributes.supervision_strategy(decider))
        self.kit = Kit()
        self.stage = stage
        self.logic = self.kit.add(stage, attributes)
        shape = stage.shape
        self.ups = [self.kit.add(self.kit.upstream(f"up{i}")) for i in range(len(shape.inlets))]
        self.downs = [self.kit.add(self.kit.downstream(f"down{i}", grab=grab)) for i in range(len(shape.outlets))]
        for up, in_ in zip(self.ups, shape.inlets):
            self.kit.connect(up.out, in_)
        for out, down in zip(shape.outlets, self.downs):
            self.kit.connect(out, down.in_)
        self.kit.init()
        if start:
            self.kit.run()

    @property
    def interpreter(self) -> GraphInterpreter:
        return self.kit.interpreter

    @property
    def up(self) -> UpstreamProbe:
        """The only upstream probe (fan-out stages)."""
        (up,) = self.ups
        return up

    @property
    def down(self) -> DownstreamProbe:
        """The only downstream probe (fan-in stages)."""
        (down,) = self.downs
        return down

    def last_events(self) -> set:
        return self.kit.last_events()

    def received(self, down: DownstreamProbe) -> List[Any]:
        """Every element ``down`` got so far, in order."""
        return [e.payload for e in self.kit.log if isinstance(e, OnNext) and e.source is down]

    def feed(
        self,
        sources: Sequence[Optional[Sequence[Any]]],
        demand: Optional[Sequence[Optional[int]]] = None,
        max_rounds: int = 100_000,
    ) -> List[List[Any]]:
        """``feed(self.kit, self.ups, self.downs, sources, demand)``."""
        return feed(self.kit, self.ups, self.downs, sources, demand, max_rounds)


def feed(
    kit: Kit,
    ups: Sequence[UpstreamProbe],
    downs: Sequence[DownstreamProbe],
    sources: Sequence[Optional[Sequence[Any]]],
    demand: Optional[Sequence[Optional[int]]] = None,
    max_rounds: int = 100_000,
) -> List[List[Any]]:
    """Drive ``ups`` like ``Source(list)`` upstreams and ``downs`` like eagerly requesting sinks until
    nothing moves any more; returns what each downstream received meanwhile.

    ``sources[i]``: the elements ``ups[i]`` sends (one per pull; it completes right after its last
    element, or at once when the list is empty); ``None`` leaves ``ups[i]`` alone.
    ``demand[j]``: how many elements ``downs[j]`` requests (``None``: unbounded, the default).
    In each round every upstream that was pulled sends one element (in order) and the interpreter runs
    to quiescence, then every downstream with demand left pulls and the interpreter runs again (so
    elements tend to wait at the stage for demand, as with fast sources and a slower sink).
    """
    start = len(kit.log)
    todo = [None if s is None else list(s) for s in sources]
    left = [None] * len(downs) if demand is None else list(demand)
    for _ in range(max_rounds):
        moved = False
        for i, up in enumerate(ups):
            items = todo[i]
            if items is None or up.closed:
                continue
            if not items:
                up.complete_out()
                todo[i] = None
                moved = True
            elif up.available:
                up.push_elem(items.pop(0))
                if not items:
                    up.complete_out()
                    todo[i] = None
                moved = True
        kit.run()
        for j, down in enumerate(downs):
            if not down.closed and not down.pulled and (left[j] is None or left[j] > 0):
                down.pull_in()
                if left[j] is not None:
                    left[j] -= 1
                moved = True
        kit.run()
        if not moved:
            break
    out: List[List[Any]] = [[] for _ in downs]
    index = {id(d): j for j, d in enumerate(downs)}
    for e in kit.log[start:]:
        if isinstance(e, OnNext) and id(e.source) in index:
            out[index[id(e.source)]].append(e.payload)
    return out


def events(*evs: Event) -> set:
    return set(evs)


__all__ = [
    "DEFAULT_ATTRIBUTES",
    "Event",
    "RequestOne",
    "RequestAnother",
    "OnComplete",
    "OnNext",
    "OnError",
    "Cancel",
    "PreStart",
    "PostStop",
    "KitHost",
    "UpstreamProbe",
    "DownstreamProbe",
    "Kit",
    "OneBounded",
    "JunctionSetup",
    "feed",
    "create_logic",
    "linear",
    "events",
]
