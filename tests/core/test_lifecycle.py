"""Stage lifecycle in the interpreter: pre_start/post_stop order, failures in hooks and handlers.

Ported from Pekko's LifecycleInterpreterSpec, GraphInterpreterFailureModesSpec and the lifecycle
cases of GraphStageLogicSpec.
"""
from __future__ import annotations

import pytest

from atoll import ClosedShape, Flow, GraphStage, GraphStageLogic, InHandler, Inlet, OutHandler, Outlet, Sink, SinkShape, Source, SourceShape
from atoll.errors import IllegalStateError, NO_MORE_ELEMENTS_NEEDED
from atoll._impl.ops.aggregate import Fold
from atoll._impl.ops.transform import Map
from atoll.stage.handlers import eager_terminate_input, eager_terminate_output

from interpreter_kit import Cancel, Kit, OnComplete, OnError, OnNext, OneBounded, PostStop, PreStart, RequestOne
from stage_helpers import (
    Boom,
    IdentityLogic,
    LinearStage,
    pre_start_and_post_stop_identity,
    pre_start_failer,
    post_stop_failer,
    push_finish_stage,
    raise_,
)


# ------------------------------------------------------------------------------ LifecycleInterpreterSpec
def test_pre_start_is_called_in_stage_order():
    calls = []
    s = OneBounded(
        pre_start_and_post_stop_identity(on_start=lambda: calls.append("start-a")),
        pre_start_and_post_stop_identity(on_start=lambda: calls.append("start-b")),
        pre_start_and_post_stop_identity(on_start=lambda: calls.append("start-c")),
    )
    assert calls == ["start-a", "start-b", "start-c"]
    s.upstream.on_complete()
    assert calls == ["start-a", "start-b", "start-c"]
    assert s.interpreter.is_completed


def test_post_stop_in_order_when_upstream_completes():
    calls = []

    def stage(x):
        return pre_start_and_post_stop_identity(
            on_upstream_completed=lambda: calls.append(f"complete-{x}"), on_stop=lambda: calls.append(f"stop-{x}")
        )

    s = OneBounded(stage("a"), stage("b"), stage("c"))
    s.upstream.on_complete()
    # each stage stops right after it handled the completion, before the next stage hears of it
    assert calls == ["complete-a", "stop-a", "complete-b", "stop-b", "complete-c", "stop-c"]
    assert s.last_events() == {OnComplete()}


def test_post_stop_in_order_when_upstream_fails():
    calls = []
    s = OneBounded(
        pre_start_and_post_stop_identity(on_upstream_failed=lambda e: calls.append(str(e)), on_stop=lambda: calls.append("stop-c"))
    )
    s.upstream.on_error(Boom("Boom! Boom! Boom!"))
    assert calls == ["Boom! Boom! Boom!", "stop-c"]


def test_post_stop_in_reverse_order_when_downstream_cancels():
    calls = []
    s = OneBounded(
        pre_start_and_post_stop_identity(on_stop=lambda: calls.append("stop-a")),
        pre_start_and_post_stop_identity(on_stop=lambda: calls.append("stop-b")),
        pre_start_and_post_stop_identity(on_stop=lambda: calls.append("stop-c")),
    )
    s.downstream.cancel_and_run()
    assert calls == ["stop-c", "stop-b", "stop-a"]
    assert s.last_events() == {Cancel(NO_MORE_ELEMENTS_NEEDED)}


def test_pre_start_before_post_stop():
    calls = []
    s = OneBounded(
        pre_start_and_post_stop_identity(on_start=lambda: calls.append("start-a"), on_stop=lambda: calls.append("stop-a"))
    )
    assert calls == ["start-a"]
    s.upstream.on_complete()
    assert calls == ["start-a", "stop-a"]


class ZeroPortStage(GraphStage):
    shape = ClosedShape

    def __init__(self, on_start, on_stop):
        self.on_start = on_start
        self.on_stop = on_stop

    def create_logic(self, attributes):
        stage = self

        class Logic(GraphStageLogic):
            def pre_start(self):
                stage.on_start()

            def post_stop(self):
                stage.on_stop()

        return Logic(ClosedShape)


def test_pre_start_before_post_stop_for_zero_port_stages():
    calls = []
    kit = Kit()
    kit.add(ZeroPortStage(lambda: calls.append("start-a"), lambda: calls.append("stop-a")))
    kit.add(ZeroPortStage(lambda: calls.append("start-b"), lambda: calls.append("stop-b")))
    interp = kit.init()
    assert calls == ["start-a", "stop-a", "start-b", "stop-b"]
    assert interp.is_completed


def test_failing_pre_start_fails_the_stream():
    boom = Boom("Boom!")
    s = OneBounded(pre_start_failer(raise_(boom)))
    assert s.last_events() == {Cancel(boom), OnError(boom)}


def test_failing_pre_start_fails_the_stream_with_stages_after():
    boom = Boom("Boom!")
    s = OneBounded(Map(lambda x: x), pre_start_failer(raise_(boom)), Map(lambda x: x))
    assert s.last_events() == {Cancel(boom), OnError(boom)}
    assert s.interpreter.is_completed


def test_failing_post_stop_does_not_blow_up(caplog):
    s = OneBounded(post_stop_failer(raise_(Boom("Boom!"))))
    assert s.last_events() == set()
    s.upstream.on_complete()
    assert s.last_events() == {OnComplete()}
    assert s.interpreter.is_completed
    assert any("post_stop" in r.getMessage() for r in caplog.records)


def _push_finish_case(*stages):
    calls = []
    stages = [st if not callable(st) else st(lambda: calls.append("stop")) for st in stages]
    s = OneBounded(*stages)
    assert s.last_events() == set()
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next_and_complete("foo")
    assert s.last_events() == {OnNext("foo"), OnComplete()}
    assert calls == ["stop"]
    assert s.interpreter.is_completed


def test_post_stop_when_push_and_finish_and_upstream_completes():
    _push_finish_case(lambda stop: push_finish_stage(stop))


def test_post_stop_when_push_and_finish_with_indirect_upstream():
    _push_finish_case(Map(lambda x: x), lambda stop: push_finish_stage(stop), Map(lambda x: x))


def test_post_stop_when_push_and_finish_and_downstream_immediately_pulls():
    _push_finish_case(lambda stop: push_finish_stage(stop), Fold("", lambda acc, x: acc + x))


# ------------------------------------------------------------------------------ GraphInterpreterFailureModesSpec
class FailingSetup:
    """upstream probe -> a pass-through stage that can fail on its next event -> downstream probe."""

    def __init__(self, fail_on_next_event: bool = False):
        self.fail_next = fail_on_next_event
        self.fail_on_post_stop = False
        self.exc = Boom("test")
        self.kit = Kit()
        setup = self

        def may_fail(task):
            if setup.fail_next:
                setup.fail_next = False
                raise setup.exc
            task()

        class Logic(GraphStageLogic):
            def __init__(self, stage):
                super().__init__(stage.shape)
                self.set_handler(
                    stage.in_,
                    InHandler(
                        on_push=lambda: may_fail(lambda: self.push(stage.out, self.grab(stage.in_))),
                        on_upstream_finish=lambda: may_fail(self.complete_stage),
                        on_upstream_failure=lambda e: may_fail(lambda: self.fail_stage(e)),
                    ),
                )
                self.set_handler(
                    stage.out,
                    OutHandler(
                        on_pull=lambda: may_fail(lambda: self.pull(stage.in_)),
                        on_downstream_finish=lambda cause: may_fail(self.complete_stage),
                    ),
                )

            def pre_start(self):
                may_fail(lambda: setup.kit.record(PreStart(self)))

            def post_stop(self):
                if setup.fail_on_post_stop:
                    raise setup.exc
                setup.kit.record(PostStop(self))

        self.upstream, (self.stage,), self.downstream = _linear(self.kit, LinearStage("sandwich", Logic))
        self.kit.init()

    def events(self):
        return self.kit.last_events()


def _linear(kit, *stages):
    from interpreter_kit import linear

    return linear(kit, stages)


def test_failure_in_on_pull():
    s = FailingSetup()
    assert s.events() == {PreStart(s.stage)}
    s.downstream.pull_in()
    s.fail_next = True
    s.kit.step_all()
    assert s.events() == {Cancel(s.exc, s.upstream), OnError(s.exc, s.downstream), PostStop(s.stage)}


def test_failure_in_on_push():
    s = FailingSetup()
    assert s.events() == {PreStart(s.stage)}
    s.downstream.pull_in()
    s.kit.step_all()
    s.kit.clear_events()
    s.upstream.push_elem(0)
    s.fail_next = True
    s.kit.step_all()
    assert s.events() == {Cancel(s.exc, s.upstream), OnError(s.exc, s.downstream), PostStop(s.stage)}


def test_failure_in_on_pull_while_cancel_is_pending():
    s = FailingSetup()
    s.events()
    s.downstream.pull_in()
    s.downstream.cancel_in()
    s.fail_next = True
    s.kit.step_all()
    assert s.events() == {Cancel(s.exc, s.upstream), PostStop(s.stage)}


def test_failure_in_on_push_while_complete_is_pending():
    s = FailingSetup()
    s.events()
    s.downstream.pull_in()
    s.kit.step_all()
    s.kit.clear_events()
    s.upstream.push_elem(0)
    s.upstream.complete_out()
    s.fail_next = True
    s.kit.step_all()
    assert s.events() == {OnError(s.exc, s.downstream), PostStop(s.stage)}


def test_failure_in_on_upstream_finish():
    s = FailingSetup()
    s.events()
    s.upstream.complete_out()
    s.fail_next = True
    s.kit.step_all()
    assert s.events() == {OnError(s.exc, s.downstream), PostStop(s.stage)}


def test_failure_in_on_upstream_failure_propagates_the_handler_error():
    s = FailingSetup()
    s.events()
    s.upstream.fail_out(Boom("another exception"))  # not the one that propagates
    s.fail_next = True
    s.kit.step_all()
    assert s.events() == {OnError(s.exc, s.downstream), PostStop(s.stage)}


def test_failure_in_on_downstream_finish():
    s = FailingSetup()
    s.events()
    s.downstream.cancel_in()
    s.fail_next = True
    s.kit.step_all()
    assert s.events() == {Cancel(s.exc, s.upstream), PostStop(s.stage)}


def test_failure_in_pre_start():
    s = FailingSetup(fail_on_next_event=True)
    s.kit.step_all()
    assert s.events() == {Cancel(s.exc, s.upstream), OnError(s.exc, s.downstream), PostStop(s.stage)}


def test_failure_in_post_stop_is_logged_only(caplog):
    s = FailingSetup()
    s.events()
    s.upstream.complete_out()
    s.downstream.cancel_in()
    s.fail_on_post_stop = True
    s.kit.step_all()
    assert s.events() == set()
    assert s.stage._finalized
    assert any("post_stop" in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------------------------ GraphStageLogicSpec (lifecycle)
def test_lifecycle_hooks_in_the_right_order(mat):
    calls = []

    class Logic(GraphStageLogic):
        def __init__(self, stage):
            super().__init__(stage.shape)
            self.set_handler(stage.in_, eager_terminate_input())
            self.set_handler(stage.out, OutHandler(on_pull=self._pulled))

        def _pulled(self):
            self.complete_stage()
            calls.append("pulled")

        def pre_start(self):
            calls.append("pre_start")

        def post_stop(self):
            calls.append("post_stop")

    done = Source.single(1).via(LinearStage("g", Logic)).run_with(Sink.ignore(), mat)
    done.result(timeout=3)
    assert calls == ["pre_start", "pulled", "post_stop"]


def test_not_double_terminate_a_single_stage():
    stops = []

    class G(GraphStageLogic):
        def __init__(self, stage):
            super().__init__(stage.shape)
            self.set_handler(stage.in_, eager_terminate_input())
            self.set_handler(stage.out, eager_terminate_output())

        def post_stop(self):
            stops.append("post_stop")

    kit = Kit()
    up, (g, pass_through), down = _linear(kit, LinearStage("g", G), LinearStage("passThrough", IdentityLogic))
    interp = kit.init()
    c0, c1 = interp.connections[0], interp.connections[1]
    interp.complete(c0)  # as if upstream completed
    interp.cancel(c1, NO_MORE_ELEMENTS_NEEDED)  # as if passThrough cancelled
    interp.execute(1)
    assert stops == ["post_stop"]
    assert interp.is_suspended
    assert g._finalized and g._counter == 0
    assert not pass_through._finalized
    interp.execute(1)
    assert stops == ["post_stop"]
    assert not interp.is_completed
    assert not interp.is_suspended


class _PushInConstructor(GraphStage):
    def __init__(self):
        self.out = Outlet("out")
        self.shape = SourceShape(self.out)

    def create_logic(self, attributes):
        stage = self

        class Logic(GraphStageLogic):
            def __init__(self):
                super().__init__(stage.shape)
                self.set_handler(stage.out, OutHandler(on_pull=lambda: None))
                self.push(stage.out, 1)

        return Logic()


class _PullInConstructor(GraphStage):
    def __init__(self):
        self.in_ = Inlet("in")
        self.shape = SinkShape(self.in_)

    def create_logic(self, attributes):
        stage = self

        class Logic(GraphStageLogic):
            def __init__(self):
                super().__init__(stage.shape)
                self.set_handler(stage.in_, InHandler(on_push=lambda: None))
                self.pull(stage.in_)

        return Logic()


def test_push_from_constructor_is_refused(mat):
    with pytest.raises(IllegalStateError, match="not yet initialized"):
        Source.from_graph(_PushInConstructor()).run_with(Sink.ignore(), mat)


def test_pull_from_constructor_is_refused(mat):
    with pytest.raises(IllegalStateError, match="not yet initialized"):
        Source.single(1).run_with(Sink.from_graph(_PullInConstructor()), mat)


def _forgetful_stage(set_in: bool):
    """A stage that forgets one of its handlers: the out handler, or (``set_in=False``) the in handler."""

    class Logic(GraphStageLogic):
        def __init__(self, stage):
            super().__init__(stage.shape)
            if set_in:
                self.set_handler(stage.in_, InHandler(on_push=lambda: None))
            else:
                self.set_handler(stage.out, OutHandler(on_pull=lambda: None))

    return LinearStage("stage-name", Logic)


def test_good_error_message_if_in_handler_missing(mat):
    with pytest.raises(IllegalStateError, match=r"^No handler defined in stage \[") as ei:
        Source.never().via(_forgetful_stage(set_in=False)).run_with(Sink.ignore(), mat)
    assert "[stage-name]" in str(ei.value) and "stage-name.in" in str(ei.value)


def test_good_error_message_if_out_handler_missing(mat):
    with pytest.raises(IllegalStateError, match=r"^No handler defined in stage \[") as ei:
        Source.never().via(_forgetful_stage(set_in=True)).map(lambda x: x).run_with(Sink.ignore(), mat)
    assert "[stage-name]" in str(ei.value) and "stage-name.out" in str(ei.value)


def test_good_error_message_if_out_handler_missing_with_downstream_boundary(mat):
    with pytest.raises(IllegalStateError, match=r"^No handler defined in stage \[") as ei:
        Source.never().via(_forgetful_stage(set_in=True)).run_with(Sink.ignore().island(), mat)
    assert "[stage-name]" in str(ei.value) and "stage-name.out" in str(ei.value)


def test_good_error_message_if_handler_missing_with_upstream_island(mat):
    with pytest.raises(IllegalStateError, match=r"^No handler defined in stage \[") as ei:
        Source.never().island().via(_forgetful_stage(set_in=True)).run_with(Sink.ignore(), mat)
    assert "[stage-name]" in str(ei.value) and "stage-name.out" in str(ei.value)


def test_good_error_message_if_handler_missing_when_stage_is_an_island(mat):
    with pytest.raises(IllegalStateError, match=r"^No handler defined in stage \[") as ei:
        Source.never().via(Flow.from_graph(_forgetful_stage(set_in=True)).island()).run_with(Sink.ignore(), mat)
    assert "[stage-name]" in str(ei.value) and "stage-name.out" in str(ei.value)


# ------------------------------------------------------------------------------ error reporting
def test_stage_errors_are_logged_at_the_stages_log_level(caplog):
    import logging

    from atoll import Attributes

    class Throwing(IdentityLogic):
        def on_push(self):
            raise Boom("logged")

    def boom():
        return LinearStage("thrower", Throwing)

    quiet = OneBounded(boom())
    quiet.downstream.request_one()
    with caplog.at_level(logging.INFO, logger="atoll.interpreter"):
        quiet.upstream.on_next(1)
    assert not [r for r in caplog.records if "Error in stage" in r.getMessage()]

    loud = OneBounded(boom(), attributes=Attributes.log_levels(on_failure=logging.WARNING))
    loud.downstream.request_one()
    with caplog.at_level(logging.INFO, logger="atoll.interpreter"):
        loud.upstream.on_next(1)
    records = [r for r in caplog.records if "Error in stage" in r.getMessage()]
    assert [r.levelno for r in records] == [logging.WARNING]
    assert "thrower" in records[0].getMessage()


def test_tearing_down_an_island_fails_every_open_port_and_stops_every_stage():
    """``fail_all`` (used when an island is torn down): every stage hears the cause, post_stop runs
    everywhere, pending feedback futures fail with StreamDetachedError."""
    from atoll.errors import StreamDetachedError

    calls = []
    s = OneBounded(
        pre_start_and_post_stop_identity(on_upstream_failed=lambda e: calls.append(("failed-a", e)), on_stop=lambda: calls.append("stop-a")),
        pre_start_and_post_stop_identity(on_upstream_failed=lambda e: calls.append(("failed-b", e)), on_stop=lambda: calls.append("stop-b")),
    )
    a = s.logics[0]
    feedback = a.get_async_callback(lambda v: calls.append(v)).invoke_with_feedback("never runs")
    cause = Boom("island torn down")
    s.interpreter.fail_all(cause)
    assert ("failed-a", cause) in calls and ("failed-b", cause) in calls
    assert calls.count("stop-a") == 1 and calls.count("stop-b") == 1
    assert "never runs" not in calls
    assert s.interpreter.running_stages == 0
    assert isinstance(feedback.exception(0), StreamDetachedError)
    assert OnError(cause) in s.last_events()
