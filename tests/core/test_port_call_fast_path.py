"""The per-element fast path of ``push``/``pull``/``grab`` and of the interpreter's dispatch loop.

``GraphStageLogic._attach`` binds per-instance fast paths for the three port calls that take only the
plain state (one integer comparison) and defer every other case to the class methods; ``execute``
dispatches a connection whose state is exactly PUSHING or PULLING and sends the rest to the slow path.
These tests pin what must not change with that: overrides stay in charge, rule violations raise the
class methods' errors, signals waiting on a port keep their place before the element, the event
budget of ``execute`` counts chased and queued events alike, and the logics of one class share one function
per port call (bound to an object of each logic's own), so a call site in their handlers stays monomorphic.
"""
from __future__ import annotations

import pytest

from atoll import Flow, FlowShape, GraphStage, GraphStageLogic, InHandler, Inlet, Materializer, OutHandler, Outlet, Sink, Source
from atoll.errors import PortStateError
from atoll.stage.signals import Watermark

from interpreter_kit import Kit, OnNext, RequestOne


class _Counting(GraphStage):
    """A map-like stage whose logic class overrides push/pull/grab (counting, then the base method),
    or binds its own ``grab`` on the instance (``instance_grab``)."""

    def __init__(self, counts: dict, instance_grab: bool = False):
        self.in_ = Inlet("counting.in")
        self.out = Outlet("counting.out")
        self.shape = FlowShape(self.in_, self.out)
        self.counts = counts
        self.instance_grab = instance_grab

    def create_logic(self, attributes):
        stage, counts = self, self.counts

        class Logic(GraphStageLogic, InHandler, OutHandler):
            def __init__(self):
                super().__init__(stage.shape)
                self.set_handlers(stage.in_, stage.out, self)
                if stage.instance_grab:
                    self.grab = self._own_grab

            def _own_grab(self, in_):
                counts["own_grab"] = counts.get("own_grab", 0) + 1
                return GraphStageLogic.grab(self, in_) * 10

            def push(self, out, elem, ts=None):
                counts["push"] = counts.get("push", 0) + 1
                super().push(out, elem, ts)

            def pull(self, in_):
                counts["pull"] = counts.get("pull", 0) + 1
                super().pull(in_)

            def grab(self, in_):
                counts["grab"] = counts.get("grab", 0) + 1
                return super().grab(in_)

            def on_push(self):
                self.push(stage.out, self.grab(stage.in_))

            def on_pull(self):
                self.pull(stage.in_)

        return Logic()


def test_a_logic_class_overriding_the_port_calls_keeps_its_overrides():
    counts: dict = {}
    mat = Materializer.local()
    try:
        got = Source.range(0, 50).via(Flow.from_graph(_Counting(counts))).run_with(Sink.seq(), mat).result(10)
    finally:
        mat.shutdown()
    assert got == list(range(50))
    assert counts["push"] == 50 and counts["grab"] == 50
    assert counts["pull"] >= 50  # one per element, plus the one that learns of the completion


def test_a_logic_binding_its_own_grab_on_the_instance_keeps_it():
    counts: dict = {}
    mat = Materializer.local()
    try:
        stage = _Counting(counts, instance_grab=True)
        got = Source.range(0, 20).via(Flow.from_graph(stage)).run_with(Sink.seq(), mat).result(10)
    finally:
        mat.shutdown()
    assert got == [10 * i for i in range(20)]
    assert counts["own_grab"] == 20 and "grab" not in counts


class _Pass(GraphStage):
    """The plain user stage the fast path is for: grab and push, pull."""

    def __init__(self):
        self.in_ = Inlet("pass.in")
        self.out = Outlet("pass.out")
        self.shape = FlowShape(self.in_, self.out)

    def create_logic(self, attributes):
        stage = self

        class Logic(GraphStageLogic, InHandler, OutHandler):
            def __init__(self):
                super().__init__(stage.shape)
                self.set_handlers(stage.in_, stage.out, self)

            def on_push(self):
                self.push(stage.out, self.grab(stage.in_))

            def on_pull(self):
                self.pull(stage.in_)

        return Logic()


def _wired():
    kit = Kit()
    up = kit.add(kit.upstream())
    mid = kit.add(_Pass())
    down = kit.add(kit.downstream())
    kit.connect(up.out, mid._in_ports[0]).connect(mid._out_ports[0], down.in_)
    kit.init()
    return kit, up, mid, down


def test_rule_violations_through_the_bound_port_calls_raise_the_class_methods_errors():
    kit, up, mid, down = _wired()
    in_, out = mid._in_ports[0], mid._out_ports[0]
    with pytest.raises(PortStateError, match="twice, or before it being pulled"):
        mid.push(out, 1)
    with pytest.raises(PortStateError, match="already empty"):
        mid.grab(in_)
    down.pull_in()
    kit.step_all()  # mid's on_pull pulled its inlet
    assert RequestOne(up) in kit.last_events()
    with pytest.raises(PortStateError, match="twice"):
        mid.pull(in_)
    with pytest.raises(PortStateError, match="must not be None"):
        mid.push(out, None)
    mid.push(out, 7)
    with pytest.raises(PortStateError, match="twice, or before it being pulled"):
        mid.push(out, 8)
    kit.step_all()
    assert OnNext(7, down) in kit.last_events()
    mid.cancel(in_)
    kit.step_all()
    with pytest.raises(PortStateError, match="Cannot pull closed port"):
        mid.pull(in_)


def test_a_push_behind_a_waiting_signal_delivers_the_signal_first():
    kit, up, mid, down = _wired()
    seen = []
    down.on_signal = lambda sig: seen.append(("signal", sig.timestamp))
    down._on_push = lambda: seen.append(("element", down.grab(down.in_)))
    down.set_handler(down.in_, InHandler(on_push=down._on_push))
    down.pull_in()
    kit.step_all()  # the pull reaches the upstream probe
    out = mid._out_ports[0]
    mid.emit_signal(out, Watermark(5))  # waits on the connection: a push now finds the SIGNAL bit
    mid.push(out, 1)
    kit.step_all()
    assert seen == [("signal", 5), ("element", 1)]


def test_execute_returns_the_unused_budget_and_keeps_a_chased_event_at_the_head():
    kit, up, mid, down = _wired()
    interp = kit.interpreter
    assert interp.execute(0) == 0
    assert interp.execute(10) == 10  # nothing to do
    down.pull_in()  # queued: outside execute nothing is chased
    # one event: the pull reaches mid, whose on_pull pull is chased, and the budget ends
    assert interp.execute(1) == 0
    assert interp.is_suspended and RequestOne(up) not in kit.last_events()
    assert interp.execute(5) == 4  # the chased pull was kept as the queue's head
    assert RequestOne(up) in kit.last_events()
    up.push_elem(3)
    assert interp.execute(5) == 3  # push to mid, mid's chased push to the probe
    assert kit.last_events() == {OnNext(3, down)}


def test_a_logic_attached_to_a_second_interpreter_uses_the_second_one():
    kit, up, mid, down = _wired()
    kit2 = Kit()
    up2 = kit2.add(kit2.upstream())
    kit2.add(mid)
    down2 = kit2.add(kit2.downstream())
    kit2.connect(up2.out, mid._in_ports[0]).connect(mid._out_ports[0], down2.in_)
    kit2.init()
    down2.pull_in()
    kit2.step_all()
    assert RequestOne(up2) in kit2.last_events()
    up2.push_elem(4)
    kit2.step_all()
    assert kit2.last_events() == {OnNext(4, down2)}
    assert not kit.interpreter.queue  # nothing went to the first interpreter


def test_logics_of_one_class_share_the_functions_of_their_port_calls():
    """Two instances of one user stage in a chain: each logic's push/pull/grab is bound to its own ports, and
    every logic's call of a kind is the same function (what CPython's call specialization keys on)."""
    kit = Kit()
    up = kit.add(kit.upstream())
    first, second = kit.add(_Pass()), kit.add(_Pass())
    down = kit.add(kit.downstream())
    kit.connect(up.out, first._in_ports[0]).connect(first._out_ports[0], second._in_ports[0])
    kit.connect(second._out_ports[0], down.in_)
    kit.init()
    for name in ("push", "pull", "grab"):
        a, b = getattr(first, name), getattr(second, name)
        assert a.__func__ is b.__func__, name
        assert a.__self__ is not b.__self__, name
    for i in range(3):
        down.pull_in()
        kit.step_all()
        assert RequestOne(up) in kit.last_events()
        up.push_elem(i)
        kit.step_all()
        assert kit.last_events() == {OnNext(i, down)}
