"""Port states of one connection, signal by signal (Pekko's GraphInterpreterPortsSpec).

``out`` is an upstream probe's outlet, ``in_`` a downstream probe's inlet (which does not grab on
push). Every case runs twice: with the probes wired directly (one event per ``step``) and with an
event-propagating stage between them (two events per ``step``), as Pekko's ``chasing`` variants.
"""
from __future__ import annotations

import pytest

from atoll import FlowShape, GraphStage, GraphStageLogic, InHandler, Inlet, OutHandler, Outlet
from atoll.errors import NO_MORE_ELEMENTS_NEEDED, PortStateError

from interpreter_kit import Cancel, Kit, OnComplete, OnError, OnNext, RequestOne


class Boom(Exception):
    pass


class EventPropagateStage(GraphStage):
    """Passes every signal straight through (the stage between the probes in the chasing variant)."""

    def __init__(self):
        self.in_ = Inlet("Propagate.in")
        self.out = Outlet("Propagate.out")
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

            def on_upstream_finish(self):
                self.complete(stage.out)

            def on_upstream_failure(self, exc):
                self.fail(stage.out, exc)

            def on_downstream_finish(self, cause):
                self.cancel(stage.in_, cause)

        return Logic()


class PortSetup:
    def __init__(self, chasing: bool):
        self.chasing = chasing
        self.kit = Kit()
        self.out = self.kit.add(self.kit.upstream("upstreamPort"))
        self.in_ = self.kit.add(self.kit.downstream("downstreamPort", grab=False))
        if chasing:
            mid = self.kit.add(EventPropagateStage())
            self.kit.connect(self.out.out, mid._in_ports[0]).connect(mid._out_ports[0], self.in_.in_)
        else:
            self.kit.connect(self.out.out, self.in_.in_)
        self.kit.init()

    # -- signals (not processed until step/step_all)
    def step(self):
        self.kit.step(2 if self.chasing else 1)

    def step_all(self):
        self.kit.step_all()

    def events(self):
        return self.kit.last_events()

    def clear(self):
        self.kit.clear_events()

    # -- expectations
    def state(self, out_available, out_closed, in_available, in_pulled, in_closed):
        got = (self.out.available, self.out.closed, self.in_.available, self.in_.pulled, self.in_.closed)
        assert got == (out_available, out_closed, in_available, in_pulled, in_closed)

    def cannot_push(self):
        with pytest.raises(PortStateError):
            self.out.push_elem(0)

    def cannot_pull(self):
        with pytest.raises(PortStateError):
            self.in_.pull_in()

    def cannot_grab(self):
        with pytest.raises(PortStateError):
            self.in_.grab_elem()

    def all_closed(self):
        self.state(False, True, False, False, True)
        self.cannot_pull()
        self.cannot_push()
        self.cannot_grab()

    def closed_and_quiet(self):
        """After both sides closed: further cancel/complete are no-ops."""
        self.all_closed()
        self.in_.cancel_in()
        self.step_all()
        assert self.events() == set()
        self.all_closed()
        self.out.complete_out()
        self.step_all()
        assert self.events() == set()
        self.all_closed()


@pytest.fixture(params=[False, True], ids=["direct", "chasing"])
def p(request):
    return PortSetup(request.param)


def _pulled_and_requested(p):
    p.in_.pull_in()
    p.step_all()
    assert p.events() == {RequestOne(p.out)}


# ------------------------------------------------------------------------------------ push and pull
def test_transition_on_push_and_pull(p):
    assert p.events() == set()
    p.state(False, False, False, False, False)
    p.cannot_push()
    p.cannot_grab()

    p.in_.pull_in()
    assert p.events() == set()
    p.state(False, False, False, True, False)
    p.cannot_pull()
    p.cannot_push()
    p.cannot_grab()

    p.step_all()
    assert p.events() == {RequestOne(p.out)}
    p.state(True, False, False, True, False)
    p.cannot_pull()
    p.cannot_grab()

    p.out.push_elem(0)
    assert p.events() == set()
    p.state(False, False, False, True, False)
    p.cannot_pull()
    p.cannot_push()
    p.cannot_grab()

    p.step_all()
    assert p.events() == {OnNext(0, p.in_)}
    p.state(False, False, True, False, False)
    p.cannot_push()

    assert p.in_.grab_elem() == 0
    assert p.events() == set()
    p.state(False, False, False, False, False)
    p.cannot_push()
    p.cannot_grab()


def test_drop_ungrabbed_element_on_pull(p):
    p.in_.pull_in()
    p.step()
    p.clear()
    p.out.push_elem(0)
    p.step()
    assert p.events() == {OnNext(0, p.in_)}
    p.in_.pull_in()
    p.cannot_grab()


def test_not_allow_to_grab_element_before_it_arrives(p):
    p.in_.pull_in()
    p.step_all()
    p.out.push_elem(0)
    p.cannot_grab()


def test_not_allow_to_grab_element_if_already_cancelled(p):
    p.in_.pull_in()
    p.step_all()
    p.out.push_elem(0)
    p.in_.cancel_in()
    p.step_all()
    p.cannot_grab()


# ------------------------------------------------------------------------------------ completion
def test_propagate_complete_while_downstream_is_active(p):
    p.state(False, False, False, False, False)
    p.out.complete_out()
    assert p.events() == set()
    p.state(False, True, False, False, False)
    p.cannot_push()
    p.step_all()
    assert p.events() == {OnComplete(p.in_)}
    p.closed_and_quiet()


def test_propagate_complete_while_upstream_is_active(p):
    _pulled_and_requested(p)
    p.state(True, False, False, True, False)
    p.out.complete_out()
    assert p.events() == set()
    p.state(False, True, False, True, False)
    p.cannot_push()
    p.step_all()
    assert p.events() == {OnComplete(p.in_)}
    p.closed_and_quiet()


def test_propagate_complete_while_pull_is_in_flight(p):
    p.in_.pull_in()
    assert p.events() == set()
    p.state(False, False, False, True, False)
    p.out.complete_out()
    assert p.events() == set()
    p.state(False, True, False, True, False)
    p.cannot_push()
    p.step_all()
    assert p.events() == {OnComplete(p.in_)}
    p.closed_and_quiet()


def test_propagate_complete_while_push_is_in_flight(p):
    _pulled_and_requested(p)
    p.out.push_elem(0)
    assert p.events() == set()
    p.state(False, False, False, True, False)
    p.out.complete_out()
    assert p.events() == set()
    p.state(False, True, False, True, False)
    p.cannot_push()

    p.step()
    assert p.events() == {OnNext(0, p.in_)}
    p.state(False, True, True, False, False)
    p.cannot_push()
    assert p.in_.grab_elem() == 0
    p.cannot_grab()

    p.step()
    assert p.events() == {OnComplete(p.in_)}
    p.all_closed()
    p.out.complete_out()
    p.step_all()
    assert p.events() == set()
    p.all_closed()


def test_push_then_complete_keeps_the_element_grabbable(p):
    _pulled_and_requested(p)
    p.out.push_elem(0)
    p.out.complete_out()
    p.step()
    assert p.events() == {OnNext(0, p.in_)}
    p.step()
    assert p.events() == {OnComplete(p.in_)}
    p.state(False, True, True, False, True)
    assert p.in_.grab_elem() == 0
    p.cannot_grab()


def test_propagate_complete_while_push_is_in_flight_and_pulled_after_the_push(p):
    _pulled_and_requested(p)
    p.out.push_elem(0)
    p.out.complete_out()
    p.step()
    assert p.events() == {OnNext(0, p.in_)}
    assert p.in_.grab_elem() == 0
    p.in_.pull_in()
    p.step_all()
    assert p.events() == {OnComplete(p.in_)}
    p.all_closed()


def test_ignore_pull_while_completing(p):
    p.out.complete_out()
    p.in_.pull_in()
    # the pull is not delivered, but the port still reports it
    assert p.in_.pulled
    p.step_all()
    assert p.events() == {OnComplete(p.in_)}
    p.all_closed()


# ------------------------------------------------------------------------------------ cancellation
def test_propagate_cancel_while_downstream_is_active(p):
    p.state(False, False, False, False, False)
    p.in_.cancel_in()
    assert p.events() == set()
    p.state(False, False, False, False, True)
    p.cannot_pull()
    p.cannot_grab()
    p.step_all()
    assert p.events() == {Cancel(NO_MORE_ELEMENTS_NEEDED, p.out)}
    p.closed_and_quiet()


def test_propagate_cancel_while_upstream_is_active(p):
    _pulled_and_requested(p)
    p.state(True, False, False, True, False)
    p.in_.cancel_in()
    assert p.events() == set()
    p.state(True, False, False, False, True)
    p.cannot_pull()
    p.cannot_grab()
    p.step_all()
    assert p.events() == {Cancel(NO_MORE_ELEMENTS_NEEDED, p.out)}
    p.closed_and_quiet()


def test_propagate_cancel_while_pull_is_in_flight(p):
    p.in_.pull_in()
    p.state(False, False, False, True, False)
    p.in_.cancel_in()
    assert p.events() == set()
    p.state(False, False, False, False, True)
    p.cannot_push()
    p.cannot_grab()
    p.step_all()
    assert p.events() == {Cancel(NO_MORE_ELEMENTS_NEEDED, p.out)}
    p.closed_and_quiet()


def test_propagate_cancel_while_push_is_in_flight(p):
    _pulled_and_requested(p)
    p.out.push_elem(0)
    p.state(False, False, False, True, False)
    p.in_.cancel_in()
    assert p.events() == set()
    p.state(False, False, False, False, True)
    p.cannot_pull()
    p.step_all()
    assert p.events() == {Cancel(NO_MORE_ELEMENTS_NEEDED, p.out)}
    p.closed_and_quiet()


def test_cancel_carries_its_cause(p):
    cause = Boom("not needed")
    p.in_.cancel_in(cause)
    p.step_all()
    assert p.events() == {Cancel(cause, p.out)}


def test_ignore_push_while_cancelling(p):
    _pulled_and_requested(p)
    p.in_.cancel_in()
    p.out.push_elem(0)  # accepted and dropped: downstream is gone
    assert not p.out.available
    p.step_all()
    assert p.events() == {Cancel(NO_MORE_ELEMENTS_NEEDED, p.out)}
    p.all_closed()


def test_clear_ungrabbed_element_even_when_cancelled(p):
    _pulled_and_requested(p)
    p.out.push_elem(0)
    p.step_all()
    assert p.events() == {OnNext(0, p.in_)}
    p.in_.cancel_in()
    assert p.events() == set()
    p.state(False, False, False, False, True)
    p.cannot_pull()
    p.cannot_grab()
    p.step_all()
    assert p.events() == {Cancel(NO_MORE_ELEMENTS_NEEDED, p.out)}
    p.all_closed()


def test_ignore_completion_concurrent_with_cancel_cancel_first(p):
    p.in_.cancel_in()
    p.out.complete_out()
    p.step_all()
    assert p.events() == set()
    p.all_closed()


def test_ignore_completion_concurrent_with_cancel_complete_first(p):
    p.out.complete_out()
    p.in_.cancel_in()
    p.step_all()
    assert p.events() == set()
    p.all_closed()


def test_ignore_completion_from_push_complete_cancelled_while_in_flight(p):
    _pulled_and_requested(p)
    p.out.push_elem(0)
    p.out.complete_out()
    p.in_.cancel_in()
    p.step_all()
    assert p.events() == set()
    p.all_closed()


def test_ignore_completion_from_push_complete_cancelled_after_on_push(p):
    _pulled_and_requested(p)
    p.out.push_elem(0)
    p.out.complete_out()
    p.step()
    assert p.events() == {OnNext(0, p.in_)}
    p.state(False, True, True, False, False)
    p.cannot_push()
    assert p.in_.grab_elem() == 0
    p.in_.cancel_in()
    p.step_all()
    assert p.events() == set()
    p.all_closed()


# ------------------------------------------------------------------------------------ failure
def test_propagate_failure_while_downstream_is_active(p):
    exc = Boom("test")
    p.out.fail_out(exc)
    assert p.events() == set()
    p.state(False, True, False, False, False)
    p.cannot_push()
    p.step_all()
    assert p.events() == {OnError(exc, p.in_)}
    p.closed_and_quiet()


def test_propagate_failure_while_upstream_is_active(p):
    exc = Boom("test")
    _pulled_and_requested(p)
    p.out.fail_out(exc)
    assert p.events() == set()
    p.state(False, True, False, True, False)
    p.cannot_push()
    p.step_all()
    assert p.events() == {OnError(exc, p.in_)}
    p.closed_and_quiet()


def test_propagate_failure_while_pull_is_in_flight(p):
    exc = Boom("test")
    p.in_.pull_in()
    p.out.fail_out(exc)
    assert p.events() == set()
    p.state(False, True, False, True, False)
    p.cannot_push()
    p.step_all()
    assert p.events() == {OnError(exc, p.in_)}
    p.closed_and_quiet()


def test_propagate_failure_while_push_is_in_flight(p):
    exc = Boom("test")
    _pulled_and_requested(p)
    p.out.push_elem(0)
    p.out.fail_out(exc)
    assert p.events() == set()
    p.state(False, True, False, True, False)
    p.cannot_push()

    p.step()
    assert p.events() == {OnNext(0, p.in_)}
    p.state(False, True, True, False, False)
    assert p.in_.grab_elem() == 0
    p.cannot_grab()

    p.step()
    assert p.events() == {OnError(exc, p.in_)}
    p.all_closed()
    p.out.complete_out()
    p.step_all()
    assert p.events() == set()


def test_push_then_fail_keeps_the_element_grabbable(p):
    exc = Boom("test")
    _pulled_and_requested(p)
    p.out.push_elem(0)
    p.out.fail_out(exc)
    p.step()
    assert p.events() == {OnNext(0, p.in_)}
    p.step()
    assert p.events() == {OnError(exc, p.in_)}
    p.state(False, True, True, False, True)
    assert p.in_.grab_elem() == 0
    p.cannot_grab()


def test_ignore_pull_while_failing(p):
    exc = Boom("test")
    p.out.fail_out(exc)
    p.in_.pull_in()
    assert p.in_.pulled
    p.step_all()
    assert p.events() == {OnError(exc, p.in_)}
    p.all_closed()


def test_ignore_failure_concurrent_with_cancel_cancel_first(p):
    p.in_.cancel_in()
    p.out.fail_out(Boom("test"))
    p.step_all()
    assert p.events() == set()
    p.all_closed()


def test_ignore_failure_concurrent_with_cancel_fail_first(p):
    p.out.fail_out(Boom("test"))
    p.in_.cancel_in()
    p.step_all()
    assert p.events() == set()
    p.all_closed()


def test_ignore_failure_from_push_then_fail_cancelled_while_in_flight(p):
    _pulled_and_requested(p)
    p.out.push_elem(0)
    p.out.fail_out(Boom("test"))
    p.in_.cancel_in()
    p.step_all()
    assert p.events() == set()
    p.all_closed()


def test_ignore_failure_from_push_then_fail_cancelled_after_on_push(p):
    _pulled_and_requested(p)
    p.out.push_elem(0)
    p.out.fail_out(Boom("test"))
    p.step()
    assert p.events() == {OnNext(0, p.in_)}
    p.state(False, True, True, False, False)
    p.cannot_push()
    assert p.in_.grab_elem() == 0
    p.in_.cancel_in()
    p.step_all()
    assert p.events() == set()
    p.all_closed()


# ------------------------------------------------------------------------------------ error messages
def _messages_name(exc_info, stage: str, port: str):
    msg = str(exc_info.value)
    assert stage in msg and port in msg, msg


def test_double_pull_names_stage_and_port():
    p = PortSetup(False)
    p.in_.pull_in()
    with pytest.raises(PortStateError, match="twice") as ei:
        p.in_.pull_in()
    _messages_name(ei, "downstreamPort", "downstreamPort.in")


def test_push_without_demand_names_stage_and_port():
    p = PortSetup(False)
    with pytest.raises(PortStateError, match="before it being pulled") as ei:
        p.out.push_elem(1)
    _messages_name(ei, "upstreamPort", "upstreamPort.out")


def test_grab_when_empty_names_stage_and_port():
    p = PortSetup(False)
    with pytest.raises(PortStateError, match="empty input port") as ei:
        p.in_.grab_elem()
    _messages_name(ei, "downstreamPort", "downstreamPort.in")


def test_pull_and_push_closed_ports_name_stage_and_port():
    p = PortSetup(False)
    p.in_.cancel_in()
    p.out.complete_out()
    p.step_all()
    with pytest.raises(PortStateError, match="closed port") as ei:
        p.in_.pull_in()
    _messages_name(ei, "downstreamPort", "downstreamPort.in")
    with pytest.raises(PortStateError, match="closed port") as ei:
        p.out.push_elem(1)
    _messages_name(ei, "upstreamPort", "upstreamPort.out")


def test_push_none_is_refused_and_leaves_the_port_usable():
    p = PortSetup(False)
    _pulled_and_requested(p)
    with pytest.raises(PortStateError, match="2.13"):
        p.out.push_elem(None)
    assert p.out.available
    p.out.push_elem(7)
    p.step_all()
    assert p.events() == {OnNext(7, p.in_)}
