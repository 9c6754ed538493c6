"""The declarative helpers of GraphStageLogic: emit, emit_multiple, read, read_n, pass_along
(Pekko's GraphStageLogicSpec and the emit/read contract of GraphStage.scala)."""
from __future__ import annotations

import pytest

from atoll import GraphStage, GraphStageLogic, InHandler, OutHandler, Outlet, Sink, Source, SourceShape
from atoll.errors import IllegalStateError
from atoll.stage.handlers import eager_terminate_input, eager_terminate_output, ignore_terminate_input
from atoll.testkit import TestSink

from interpreter_kit import OnComplete, OnError, OnNext, OneBounded, RequestOne
from stage_helpers import Boom, IdentityLogic, LinearStage


# ------------------------------------------------------------------------------ stages
def read_n_emit_n(n):
    class Logic(GraphStageLogic):
        def __init__(self, stage):
            super().__init__(stage.shape)
            self.stage = stage
            self.set_handler(stage.in_, eager_terminate_input())
            self.set_handler(stage.out, eager_terminate_output())

        def pre_start(self):
            st = self.stage
            self.read_n(st.in_, n, lambda elems: self.emit_multiple(st.out, elems, self.complete_stage), lambda elems: None)

    return LinearStage(f"readN({n})", Logic)


def read_n_emit_rest_on_complete(n):
    class Logic(GraphStageLogic):
        def __init__(self, stage):
            super().__init__(stage.shape)
            self.stage = stage
            self.set_handler(stage.in_, eager_terminate_input())
            self.set_handler(stage.out, eager_terminate_output())

        def pre_start(self):
            st = self.stage
            self.read_n(
                st.in_,
                n,
                lambda elems: self.fail_stage(IllegalStateError("Shouldn't happen!")),
                lambda elems: self.emit_multiple(st.out, elems, self.complete_stage),
            )

    return LinearStage(f"readNRest({n})", Logic)


def emit_1234():
    class Logic(GraphStageLogic):
        def __init__(self, stage):
            super().__init__(stage.shape)
            self.out = stage.out
            self.set_handler(stage.in_, eager_terminate_input())
            self.set_handler(stage.out, eager_terminate_output())

        def pre_start(self):
            self.emit(self.out, 1, lambda: self.emit(self.out, 2))
            self.emit(self.out, 3, lambda: self.emit(self.out, 4))

    return LinearStage("emit1234", Logic)


def emit_5678():
    class Logic(GraphStageLogic):
        def __init__(self, stage):
            super().__init__(stage.shape)
            out, in_ = stage.out, stage.in_

            def finish():
                self.emit(out, 5, lambda: self.emit(out, 6))
                self.emit(out, 7, lambda: self.emit(out, 8))
                self.complete_stage()

            self.set_handler(in_, InHandler(on_push=lambda: self.push(out, self.grab(in_)), on_upstream_finish=finish))
            self.set_handler(out, OutHandler(on_pull=lambda: self.pull(in_)))

    return LinearStage("emit5678", Logic)


class EmitOnPull(GraphStage):
    """A source that emits ``elems`` (any iterable, evaluated lazily) then 42, then completes."""

    def __init__(self, make_elems):
        self.out = Outlet("out")
        self.shape = SourceShape(self.out)
        self.make_elems = make_elems

    def create_logic(self, attributes):
        stage = self

        class Logic(GraphStageLogic):
            def __init__(self):
                super().__init__(stage.shape)
                self.set_handler(stage.out, OutHandler(on_pull=self._pulled))

            def _pulled(self):
                self.emit_multiple(
                    stage.out, stage.make_elems(), lambda: self.emit(stage.out, 42, self.complete_stage)
                )

        return Logic()


# ------------------------------------------------------------------------------ read / read_n (GraphStageLogicSpec)
def test_read_n_and_emit_n_before_completing(mat):
    sink = Source.range(1, 11).via(read_n_emit_n(2)).run_with(TestSink.probe(), mat)
    sink.request(10).expect_next(1, 2)
    sink.expect_complete()


def test_read_n_does_not_emit_if_upstream_completes_before_n(mat):
    sink = Source.range(1, 6).via(read_n_emit_n(6)).run_with(TestSink.probe(), mat)
    sink.request(10)
    sink.expect_complete()


def test_read_n_does_not_emit_if_upstream_fails_before_n(mat):
    error = ValueError("Don't argue like that!")

    def f(x):
        if x > 3:
            raise error
        return x

    sink = Source.range(1, 6).map(f).via(read_n_emit_n(6)).run_with(TestSink.probe(), mat)
    sink.request(10)
    assert sink.expect_error() is error


def test_read_n_provides_the_elements_read_when_upstream_completes_first(mat):
    sink = Source.range(1, 6).via(read_n_emit_rest_on_complete(6)).run_with(TestSink.probe(), mat)
    sink.request(10).expect_next(1, 2, 3, 4, 5)
    sink.expect_complete()


def test_read_n_zero_and_negative():
    got = []

    class Logic(GraphStageLogic):
        def __init__(self, stage):
            super().__init__(stage.shape)
            self.stage = stage
            self.set_handler(stage.in_, eager_terminate_input())
            self.set_handler(stage.out, eager_terminate_output())

        def pre_start(self):
            self.read_n(self.stage.in_, 0, got.append, got.append)
            with pytest.raises(ValueError):
                self.read_n(self.stage.in_, -1, got.append, got.append)

    s = OneBounded(LinearStage("r", Logic))
    assert got == [[]]
    s.upstream.on_complete()


def test_read_one_element_and_restore_the_handler():
    got = []

    class Logic(IdentityLogic):
        def pre_start(self):
            self.read(self.in_, got.append, lambda: got.append("closed"))

    s = OneBounded(LinearStage("r", Logic))
    assert s.last_events() == {RequestOne()}  # read pulls
    s.upstream.on_next(1)
    assert got == [1]
    assert s.last_events() == set()  # the element went to read, not downstream
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}  # the previous handler is back
    s.upstream.on_next(2)
    assert s.last_events() == {OnNext(2)}


def test_read_on_completed_port_calls_on_close_then_the_previous_handler():
    got = []

    class Logic(IdentityLogic):
        def pre_start(self):
            self.read(self.in_, got.append, lambda: got.append("closed"))

    s = OneBounded(LinearStage("r", Logic))
    assert s.last_events() == {RequestOne()}
    s.upstream.on_complete()
    assert got == ["closed"]
    assert s.last_events() == {OnComplete()}


def test_read_failure_goes_to_the_previous_handler():
    got = []

    class Logic(IdentityLogic):
        def pre_start(self):
            self.read(self.in_, got.append, lambda: got.append("closed"))

    s = OneBounded(LinearStage("r", Logic))
    assert s.last_events() == {RequestOne()}
    exc = Boom("upstream")
    s.upstream.on_error(exc)
    assert got == []
    assert s.last_events() == {OnError(exc)}


def test_read_twice_on_one_inlet_is_refused():
    errors = []

    class Logic(IdentityLogic):
        def pre_start(self):
            self.read(self.in_, lambda e: None, lambda: None)
            try:
                self.read(self.in_, lambda e: None, lambda: None)
            except IllegalStateError as e:
                errors.append(e)

    s = OneBounded(LinearStage("r", Logic))
    assert len(errors) == 1 and "already reading" in str(errors[0])
    s.upstream.on_complete()


def test_read_uses_an_available_element_without_pulling():
    got = []

    class Logic(IdentityLogic):
        def on_push(self):
            # the element is available: read takes it synchronously
            self.read(self.in_, got.append, lambda: None)

    s = OneBounded(LinearStage("r", Logic))
    s.downstream.request_one()
    s.last_events()
    s.upstream.on_next(7)
    assert got == [7]
    assert s.last_events() == set()


# ------------------------------------------------------------------------------ emit (GraphStageLogicSpec)
def test_emit_all_things_before_completing(mat):
    sink = Source.empty().via(emit_1234()).run_with(TestSink.probe(), mat)
    sink.request(5)
    sink.expect_next(1)
    # emitting from a callback leaves open whether 2 or 3 comes first
    sink.expect_next_unordered(2, 3)
    sink.expect_next(4)
    sink.expect_complete()


def test_emit_all_elements_queued_before_complete_stage(mat):
    got = Source.range(1, 3).via(emit_5678()).run_with(Sink.seq(), mat).result(timeout=3)
    assert got[:2] == [1, 2] and got[2] == 5 and sorted(got[3:5]) == [6, 7] and got[5] == 8
    assert len(got) == 6


def test_emit_properly_after_empty_iterable(mat):
    assert Source.from_graph(EmitOnPull(lambda: iter(()))).run_with(Sink.seq(), mat).result(timeout=3) == [42]


def test_emit_properly_from_a_lazy_iterator(mat):
    def gen():
        yield from (1, 2, 3)

    assert Source.from_graph(EmitOnPull(gen)).run_with(Sink.seq(), mat).result(timeout=3) == [1, 2, 3, 42]


def test_emit_waits_for_demand_and_restores_the_handler():
    class Logic(IdentityLogic):
        def on_push(self):
            elem = self.grab(self.in_)
            self.emit_multiple(self.out, [elem, elem * 10, elem * 100], lambda: None)

    s = OneBounded(LinearStage("e", Logic))
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(1)
    assert s.last_events() == {OnNext(1)}
    s.downstream.request_one()
    assert s.last_events() == {OnNext(10)}
    s.downstream.request_one()
    assert s.last_events() == {OnNext(100)}
    s.downstream.request_one()  # the original handler pulls again
    assert s.last_events() == {RequestOne()}


def test_complete_while_emitting_waits_for_the_elements():
    class Logic(IdentityLogic):
        def on_push(self):
            elem = self.grab(self.in_)
            self.emit_multiple(self.out, [elem, elem + 1])
            self.complete(self.out)

    s = OneBounded(LinearStage("e", Logic))
    s.downstream.request_one()
    s.last_events()
    s.upstream.on_next(1)
    assert s.last_events() == {OnNext(1)}
    s.downstream.request_one()
    assert s.last_events() == {OnNext(2), OnComplete()}


def test_elements_emitted_after_a_queued_completion_still_go_out_first():
    class Logic(IdentityLogic):
        def pre_start(self):
            # no demand yet: everything is queued behind the emitting handler
            self.emit(self.out, 1)
            self.complete(self.out)
            self.emit(self.out, 2)

    s = OneBounded(LinearStage("e", Logic))
    assert s.last_events() == set()
    s.downstream.request_one()
    assert s.last_events() == {OnNext(1)}
    s.downstream.request_one()
    # the completion follows the last element without waiting for another pull
    assert s.last_events() == {OnNext(2), OnComplete()}
    s.upstream.on_complete()


def test_fail_while_emitting_fails_at_once():
    exc = Boom("now")

    class Logic(IdentityLogic):
        def on_push(self):
            self.emit_multiple(self.out, [1, 2, 3])
            self.fail(self.out, exc)

    s = OneBounded(LinearStage("e", Logic))
    s.downstream.request_one()
    s.last_events()
    s.upstream.on_next(0)
    assert s.last_events() == {OnNext(1), OnError(exc)}


def test_abort_emitting_drops_pending_elements_and_restores_the_handler():
    class Logic(IdentityLogic):
        def on_push(self):
            elem = self.grab(self.in_)
            if elem == "abort":
                self.abort_emitting(self.out)
            else:
                self.emit_multiple(self.out, [elem, elem])
                self.pull(self.in_)

    s = OneBounded(LinearStage("e", Logic))
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next("a")
    assert s.last_events() == {OnNext("a"), RequestOne()}
    s.upstream.on_next("abort")
    assert s.last_events() == set()
    s.downstream.request_one()
    # the second "a" was dropped: the original handler is back and pulls upstream
    assert s.last_events() == {RequestOne()}


def test_emit_multiple_of_nothing_runs_and_then_right_away():
    ran = []

    class Logic(IdentityLogic):
        def pre_start(self):
            self.emit_multiple(self.out, [], lambda: ran.append("done"))

    s = OneBounded(LinearStage("e", Logic))
    assert ran == ["done"]
    s.upstream.on_complete()


def test_cancel_while_emitting_goes_to_the_original_handler():
    class Logic(IdentityLogic):
        def pre_start(self):
            self.emit_multiple(self.out, [1, 2, 3])

    s = OneBounded(LinearStage("e", Logic))
    s.downstream.request_one()
    assert s.last_events() == {OnNext(1)}
    s.downstream.cancel_and_run()
    ev = s.last_events()
    assert {e.kind for e in ev} == {"Cancel"}


# ------------------------------------------------------------------------------ pass_along
def _pass_along_stage(do_finish=True, do_fail=True, do_pull=False, in_constructor=False, notes=None):
    """Installs pass_along(in, out) (in the constructor or in pre_start); its own out handler pulls."""

    class Logic(GraphStageLogic):
        def __init__(self, stage):
            super().__init__(stage.shape)
            self.stage = stage
            self.set_handler(stage.out, OutHandler(on_pull=self._pulled))
            self.set_handler(stage.in_, ignore_terminate_input())
            if in_constructor:
                self.pass_along(stage.in_, stage.out, do_finish, do_fail, do_pull)

        def _pulled(self):
            if not self.has_been_pulled(self.stage.in_):
                self.try_pull(self.stage.in_)

        def pre_start(self):
            if not in_constructor:
                self.pass_along(self.stage.in_, self.stage.out, do_finish, do_fail, do_pull)

        def post_stop(self):
            if notes is not None:
                notes.append("post_stop")

    return LinearStage("passAlong", Logic)


def test_pass_along_with_initial_pull():
    s = OneBounded(_pass_along_stage(do_pull=True))
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(1)
    assert s.last_events() == set()  # no demand yet: emitted later
    s.downstream.request_one()
    # emitted, then upstream is pulled again
    assert s.last_events() == {OnNext(1), RequestOne()}
    s.downstream.request_one()
    s.upstream.on_next(2)
    assert s.last_events() == {OnNext(2), RequestOne()}
    s.upstream.on_complete()
    assert s.last_events() == {OnComplete()}


@pytest.mark.parametrize("in_constructor", [False, True], ids=["pre_start", "constructor"])
def test_pass_along_forwards_elements(in_constructor):
    s = OneBounded(_pass_along_stage(in_constructor=in_constructor))
    assert s.last_events() == set()
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(1)
    # pushed right away (demand was there), then upstream is pulled again
    assert s.last_events() == {OnNext(1), RequestOne()}
    s.upstream.on_next(2)
    assert s.last_events() == set()  # waits for demand
    s.downstream.request_one()
    assert s.last_events() == {OnNext(2), RequestOne()}
    s.upstream.on_complete()
    assert s.last_events() == {OnComplete()}


def test_pass_along_without_finish_ignores_completion():
    notes = []
    s = OneBounded(_pass_along_stage(do_finish=False, do_pull=True, notes=notes))
    s.last_events()
    s.upstream.on_complete()
    assert s.last_events() == set()
    assert notes == []  # the stage's own handlers decide when to stop: still running
    s.downstream.cancel_and_run()
    assert notes == ["post_stop"]


def test_pass_along_without_fail_ignores_failure():
    notes = []
    s = OneBounded(_pass_along_stage(do_fail=False, do_pull=True, notes=notes))
    s.last_events()
    s.upstream.on_error(Boom("ignored"))
    assert s.last_events() == set()
    assert notes == []
    s.downstream.cancel_and_run()
    assert notes == ["post_stop"]


def test_pass_along_fails_the_stage_on_failure():
    exc = Boom("upstream")
    s = OneBounded(_pass_along_stage(do_pull=True))
    s.last_events()
    s.upstream.on_error(exc)
    assert s.last_events() == {OnError(exc)}


def test_pass_along_takes_an_element_already_available_and_pulls_again():
    class Logic(GraphStageLogic):
        def __init__(self, stage):
            super().__init__(stage.shape)
            self.stage = stage
            self.set_handler(stage.in_, InHandler(on_push=lambda: self.pass_along(stage.in_, stage.out)))
            self.set_handler(stage.out, OutHandler(on_pull=lambda: self.pull(stage.in_) if not self.has_been_pulled(stage.in_) else None))

    s = OneBounded(LinearStage("lateP", Logic))
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(1)
    # pass_along found 1 waiting: emitted it, then pulled again
    assert s.last_events() == {OnNext(1), RequestOne()}


def test_pass_along_on_a_closed_inlet_completes_the_stage():
    class Logic(GraphStageLogic):
        def __init__(self, stage):
            super().__init__(stage.shape)
            self.stage = stage
            self.set_handler(stage.in_, InHandler(on_push=lambda: None, on_upstream_finish=lambda: None))
            self.set_handler(stage.out, OutHandler(on_pull=lambda: self.pass_along(stage.in_, stage.out)))

    s = OneBounded(LinearStage("closedP", Logic))
    s.upstream.on_complete()
    assert s.last_events() == set()
    s.downstream.request_one()
    assert s.last_events() == {OnComplete()}

