"""The single-port form of the bound port calls and the dispatch loop's handler call.

A logic with one inlet (one outlet) gets ``grab``/``pull`` (``push``) closures over that port and its
connection: the plain case costs one identity test. These tests pin that any other port object - one
that only shares the id, a port of a logic built without a shape - still goes through the class
methods with their results and errors, and that a handler failing in the loop's plain dispatch fails
its stage after the elements before it, in the exact event order.
"""
from __future__ import annotations

import pytest

from atoll import FlowShape, GraphStage, GraphStageLogic, InHandler, Inlet, OutHandler, Outlet
from atoll.errors import PortStateError

from interpreter_kit import Cancel, Kit, OnError, OnNext, RequestOne


class _Map(GraphStage):
    """A user-written map: grab, apply, push; pull. ``port_of`` picks the port object the handlers
    pass to the port calls (the shape's own by default)."""

    def __init__(self, fn, port_of=None):
        self.in_ = Inlet("map.in")
        self.out = Outlet("map.out")
        self.shape = FlowShape(self.in_, self.out)
        self.fn = fn
        self.port_of = port_of or (lambda p: p)

    def create_logic(self, attributes):
        stage = self
        in_, out = self.port_of(self.in_), self.port_of(self.out)

        class Logic(GraphStageLogic, InHandler, OutHandler):
            def __init__(self):
                super().__init__(stage.shape)
                self.set_handlers(stage.in_, stage.out, self)

            def on_push(self):
                self.push(out, stage.fn(self.grab(in_)))

            def on_pull(self):
                self.pull(in_)

        return Logic()


def _twin(port):
    """Another port object with the same name and id (not the logic's own)."""
    twin = type(port)(port.name)
    twin.id = port.id
    return twin


def _run(stage, elems):
    kit = Kit(record_sources=False)
    up = kit.add(kit.upstream())
    mid = kit.add(stage)
    down = kit.add(kit.downstream())
    kit.connect(up.out, mid._in_ports[0]).connect(mid._out_ports[0], down.in_)
    kit.init()
    log = []
    for e in elems:
        down.request_one()
        log.extend(kit.log)
        kit.log.clear()
        up.on_next(e)
        log.extend(kit.log)
        kit.log.clear()
    return kit, up, mid, down, log


def test_the_shape_port_and_a_twin_port_give_the_same_events():
    _, _, _, _, own = _run(_Map(lambda x: x * 3), [1, 2, 3])
    _, _, _, _, twin = _run(_Map(lambda x: x * 3, port_of=_twin), [1, 2, 3])
    expected = []
    for x in (1, 2, 3):
        expected += [RequestOne(None), OnNext(3 * x, None)]
    assert own == expected
    assert twin == expected


def test_a_twin_port_breaking_a_rule_raises_the_class_methods_errors():
    kit, up, mid, down, _ = _run(_Map(lambda x: x), [])
    in_twin, out_twin = _twin(mid._in_ports[0]), _twin(mid._out_ports[0])
    with pytest.raises(PortStateError, match="twice, or before it being pulled"):
        mid.push(out_twin, 1)
    with pytest.raises(PortStateError, match="already empty"):
        mid.grab(in_twin)
    down.pull_in()
    kit.step_all()
    with pytest.raises(PortStateError, match="twice"):
        mid.pull(in_twin)
    with pytest.raises(PortStateError, match="must not be None"):
        mid.push(out_twin, None)


class _Shapeless(GraphStageLogic, InHandler, OutHandler):
    """A logic built with port counts instead of a shape (its ports are None): the general closures."""

    def __init__(self, in_, out):
        super().__init__(in_count=1, out_count=1)
        self.in_, self.out = in_, out
        self.set_handler(in_, self)
        self.set_handler(out, self)

    def on_push(self):
        self.push(self.out, self.grab(self.in_) + 1)

    def on_pull(self):
        self.pull(self.in_)


def test_a_logic_without_a_shape_moves_elements_through_the_general_port_calls():
    in_, out = Inlet("shapeless.in"), Outlet("shapeless.out")
    in_.id = out.id = 0
    kit = Kit(record_sources=False)
    up = kit.add(kit.upstream())
    mid = kit.add(_Shapeless(in_, out))
    down = kit.add(kit.downstream())
    kit._owner[id(in_)] = kit._owner[id(out)] = mid
    kit.connect(up.out, in_).connect(out, down.in_)
    kit.init()
    for x in (5, 6):
        down.request_one()
        up.on_next(x)
    assert kit.log == [RequestOne(None), OnNext(6, None), RequestOne(None), OnNext(7, None)]
    with pytest.raises(PortStateError, match="already empty"):
        mid.grab(in_)


def test_a_handler_failing_in_the_plain_dispatch_fails_its_stage_after_the_elements_before_it():
    boom = ValueError("boom")

    def fn(x):
        if x == 2:
            raise boom
        return x * 10

    kit, up, mid, down, log = _run(_Map(fn), [1, 2])
    assert log == [RequestOne(None), OnNext(10, None), RequestOne(None), Cancel(boom, None), OnError(boom, None)]
    assert mid._finalized
