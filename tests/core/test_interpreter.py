"""Signal flow through chains of stages in the bare interpreter (Pekko's InterpreterSpec,
GraphInterpreterSpec identity/detacher cases and ChasingEventsSpec)."""
from __future__ import annotations

import pytest

from atoll import Keep
from atoll.errors import NO_MORE_ELEMENTS_NEEDED, STAGE_WAS_COMPLETED, PortStateError
from atoll._impl.ops.aggregate import Fold, Grouped
from atoll._impl.ops.slicing import Take
from atoll._impl.ops.transform import Filter, Map
from atoll.testkit import TestSink, TestSource

from interpreter_kit import Cancel, Kit, OnComplete, OnError, OnNext, OneBounded, RequestOne, linear
from stage_helpers import Boom, IdentityLogic, LinearStage, push_finish_stage


def doubler():
    """Emits every element twice."""

    class Logic(IdentityLogic):
        latest = None
        one_more = False

        def on_push(self):
            self.latest = self.grab(self.in_)
            self.one_more = True
            self.push(self.out, self.latest)

        def on_pull(self):
            if self.one_more:
                self.push(self.out, self.latest)
                self.one_more = False
            else:
                self.pull(self.in_)

    return LinearStage("Doubler", Logic)


def detacher():
    """A one-element buffer: pulls upstream ahead of demand."""

    class Logic(IdentityLogic):
        def pre_start(self):
            self.pull(self.in_)

        def on_push(self):
            if self.is_available(self.out):
                self.push(self.out, self.grab(self.in_))
                self.try_pull(self.in_)

        def on_pull(self):
            if self.is_available(self.in_):
                self.push(self.out, self.grab(self.in_))
                if self.is_closed(self.in_):
                    self.complete_stage()
                else:
                    self.pull(self.in_)

        def on_upstream_finish(self):
            if not self.is_available(self.in_):
                self.complete_stage()

    return LinearStage("Detacher", Logic)


# ------------------------------------------------------------------------------ InterpreterSpec
def test_map():
    s = OneBounded(Map(lambda x: x + 1))
    assert s.last_events() == set()
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(0)
    assert s.last_events() == {OnNext(1)}
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(1)
    assert s.last_events() == {OnNext(2)}
    s.upstream.on_complete()
    assert s.last_events() == {OnComplete()}
    assert s.interpreter.is_completed


def test_chain_of_maps():
    s = OneBounded(Map(lambda x: x + 1), Map(lambda x: x * 2), Map(lambda x: x + 1))
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(0)
    assert s.last_events() == {OnNext(3)}
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(1)
    assert s.last_events() == {OnNext(5)}
    s.downstream.cancel_and_run()
    assert s.last_events() == {Cancel(NO_MORE_ELEMENTS_NEEDED)}
    assert s.interpreter.is_completed


def test_only_boundary_ops():
    s = OneBounded()
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(0)
    assert s.last_events() == {OnNext(0)}
    s.upstream.on_complete()
    assert s.last_events() == {OnComplete()}


def test_one_to_many_many_to_one_chain():
    s = OneBounded(doubler(), Filter(lambda x: x != 0))
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(0)
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(1)
    assert s.last_events() == {OnNext(1)}
    s.downstream.request_one()
    assert s.last_events() == {OnNext(1)}
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_complete()
    assert s.last_events() == {OnComplete()}


def test_many_to_one_one_to_many_chain():
    s = OneBounded(Filter(lambda x: x != 0), doubler())
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(0)
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(1)
    assert s.last_events() == {OnNext(1)}
    s.downstream.request_one()
    assert s.last_events() == {OnNext(1)}
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.downstream.cancel_and_run()
    assert s.last_events() == {Cancel(NO_MORE_ELEMENTS_NEEDED)}


def test_take():
    s = OneBounded(Take(2))
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(0)
    assert s.last_events() == {OnNext(0)}
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(1)
    assert s.last_events() == {OnNext(1), Cancel(STAGE_WAS_COMPLETED), OnComplete()}
    assert s.interpreter.is_completed


def test_take_inside_a_chain():
    s = OneBounded(Filter(lambda x: x != 0), Take(2), Map(lambda x: x + 1))
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(0)
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(1)
    assert s.last_events() == {OnNext(2)}
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(2)
    assert s.last_events() == {Cancel(STAGE_WAS_COMPLETED), OnComplete(), OnNext(3)}


def test_fold():
    s = OneBounded(Fold(0, lambda acc, x: acc + x))
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    for x in (0, 1, 2):
        s.upstream.on_next(x)
        assert s.last_events() == {RequestOne()}
    s.upstream.on_complete()
    assert s.last_events() == {OnNext(3), OnComplete()}


def test_fold_with_proper_cancel():
    s = OneBounded(Fold(0, lambda acc, x: acc + x))
    s.downstream.request_one()
    s.last_events()
    for x in (0, 1, 2):
        s.upstream.on_next(x)
        assert s.last_events() == {RequestOne()}
    s.downstream.cancel_and_run()
    assert s.last_events() == {Cancel(NO_MORE_ELEMENTS_NEEDED)}


def test_fold_completing_while_not_in_a_push_position():
    s = OneBounded(Fold(0, lambda acc, x: acc + x))
    s.upstream.on_complete()
    assert s.last_events() == set()
    s.downstream.request_one()
    assert s.last_events() == {OnComplete(), OnNext(0)}


def test_grouped():
    s = OneBounded(Grouped(3))
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(0)
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(1)
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(2)
    assert s.last_events() == {OnNext([0, 1, 2])}
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(3)
    assert s.last_events() == {RequestOne()}
    s.upstream.on_complete()
    assert s.last_events() == {OnNext([3]), OnComplete()}


@pytest.mark.parametrize(
    "stages",
    [
        lambda: [push_finish_stage()],
        lambda: [Map(lambda x: x), push_finish_stage(), Map(lambda x: x)],
        lambda: [push_finish_stage(), Fold(0, lambda a, b: a + b)],
    ],
    ids=["direct", "indirect", "downstream-pulls-immediately"],
)
def test_push_and_finish_with_upstream_push_and_finish(stages):
    s = OneBounded(*stages())
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next_and_complete(1)
    assert s.last_events() == {OnNext(1), OnComplete()}
    assert s.interpreter.is_completed


def test_report_error_if_pull_is_called_while_terminating(caplog):
    class Logic(IdentityLogic):
        def on_push(self):
            self.pull(self.in_)

        def on_upstream_finish(self):
            if not self.has_been_pulled(self.in_):
                self.pull(self.in_)

    s = OneBounded(LinearStage("pullOnFinish", Logic))
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_complete()
    ev = s.last_events()
    assert len(ev) == 1
    (e,) = ev
    assert isinstance(e, OnError) and isinstance(e.payload, PortStateError)
    assert "Cannot pull closed port" in str(e.payload)


def test_take_take():
    s = OneBounded(Take(1), Take(1))
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(1)
    assert s.last_events() == {OnNext(1), OnComplete(), Cancel(STAGE_WAS_COMPLETED)}


def test_take_take_with_push_and_finish_from_upstream():
    s = OneBounded(Take(1), Take(1))
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next_and_complete(1)
    assert s.last_events() == {OnNext(1), OnComplete()}


# ------------------------------------------------------------------------------ GraphInterpreterSpec
def test_identity():
    kit = Kit()
    source, _, sink = linear(kit, [LinearStage("identity", IdentityLogic)])
    kit.init()
    assert kit.last_events() == set()
    sink.request_one()
    assert kit.last_events() == {RequestOne(source)}
    source.on_next(1)
    assert kit.last_events() == {OnNext(1, sink)}


def test_chained_identity():
    kit = Kit()
    source, _, sink = linear(kit, [LinearStage("id1", IdentityLogic), LinearStage("id2", IdentityLogic)])
    kit.init()
    sink.request_one()
    assert kit.last_events() == {RequestOne(source)}
    source.on_next(1)
    assert kit.last_events() == {OnNext(1, sink)}


def test_detacher_stage():
    kit = Kit()
    source, _, sink = linear(kit, [detacher()])
    kit.init()
    kit.run()
    assert kit.last_events() == {RequestOne(source)}  # pulls ahead
    sink.request_one()
    assert kit.last_events() == set()
    source.on_next(1)
    assert kit.last_events() == {OnNext(1, sink), RequestOne(source)}
    source.on_next(2)  # source waits
    assert kit.last_events() == set()
    sink.request_one()  # "push and pull"
    assert kit.last_events() == {OnNext(2, sink), RequestOne(source)}
    sink.request_one()  # sink waits
    assert kit.last_events() == set()
    source.on_next(3)
    assert kit.last_events() == {OnNext(3, sink), RequestOne(source)}


def test_a_stage_fails_when_its_handler_throws_and_others_see_it():
    exc = Boom("in the middle")

    class Logic(IdentityLogic):
        def on_push(self):
            raise exc

    kit = Kit()
    source, (a, b, c), sink = linear(kit, [LinearStage("a", IdentityLogic), LinearStage("b", Logic), LinearStage("c", IdentityLogic)])
    kit.init()
    sink.request_one()
    source.on_next(1)
    assert kit.last_events() == {RequestOne(source), Cancel(exc, source), OnError(exc, sink)}
    assert all(l._finalized for l in (a, b, c))
    assert kit.interpreter.is_completed


def test_execute_respects_the_event_limit():
    kit = Kit()
    source, _, sink = linear(kit, [LinearStage(f"id{i}", IdentityLogic) for i in range(5)])
    kit.init()
    sink.pull_in()
    # the pull travels through 6 connections: one event each
    assert kit.interpreter.execute(4) == 0
    assert kit.interpreter.is_suspended
    assert kit.last_events() == set()
    assert kit.interpreter.execute(10) == 8
    assert kit.last_events() == {RequestOne(source)}
    assert not kit.interpreter.is_suspended


# ------------------------------------------------------------------------------ ChasingEventsSpec
def cancel_in_chased_pull():
    class Logic(IdentityLogic):
        first = True

        def on_pull(self):
            self.pull(self.in_)
            if not self.first:
                self.cancel(self.in_)
            self.first = False

    return LinearStage("CancelInChasedPull", Logic)


def complete_in_chased_push():
    class Logic(IdentityLogic):
        def on_push(self):
            self.push(self.out, self.grab(self.in_))
            self.complete(self.out)

    return LinearStage("CompleteInChasedPush", Logic)


def failure_in_chased_push(exc):
    class Logic(IdentityLogic):
        def on_push(self):
            self.push(self.out, self.grab(self.in_))
            self.fail(self.out, exc)

    return LinearStage("FailureInChasedPush", Logic)


# The chasing stages leave their other port open (as in Pekko); the tests close it from outside so
# that every stream ends.
def test_propagate_cancel_enqueued_right_after_pull(mat):
    upstream, downstream = TestSource.probe().via(cancel_in_chased_pull()).to_mat(TestSink.probe(), Keep.both).run(mat)
    downstream.request(2)
    upstream.send_next(0)
    downstream.expect_next(0)
    upstream.expect_cancellation()
    downstream.cancel()


def test_propagate_complete_enqueued_right_after_push(mat):
    upstream, downstream = TestSource.probe().via(complete_in_chased_push()).to_mat(TestSink.probe(), Keep.both).run(mat)
    downstream.request(1)
    upstream.send_next(1)
    downstream.expect_next(1)
    downstream.expect_complete()
    upstream.send_complete()


def test_propagate_failure_enqueued_right_after_push(mat):
    exc = Boom("test failure")
    upstream, downstream = TestSource.probe().via(failure_in_chased_push(exc)).to_mat(TestSink.probe(), Keep.both).run(mat)
    downstream.request(1)
    upstream.send_next(1)
    downstream.expect_next(1)
    assert downstream.expect_error() is exc
    upstream.send_complete()


def test_cancel_right_after_pull_on_the_bare_interpreter():
    kit = Kit()
    up, _, down = linear(kit, [cancel_in_chased_pull()])
    kit.init()
    down.request_one()
    assert kit.last_events() == {RequestOne(up)}
    up.on_next(0)
    assert kit.last_events() == {OnNext(0, down)}
    down.request_one()  # pull then cancel in the same handler: the cancel wins
    assert kit.last_events() == {Cancel(NO_MORE_ELEMENTS_NEEDED, up)}


def test_complete_right_after_push_on_the_bare_interpreter():
    kit = Kit()
    up, _, down = linear(kit, [complete_in_chased_push()])
    kit.init()
    down.request_one()
    up.on_next(1)
    assert kit.last_events() == {RequestOne(up), OnNext(1, down), OnComplete(down)}


def test_failure_right_after_push_on_the_bare_interpreter():
    exc = Boom("test failure")
    kit = Kit()
    up, _, down = linear(kit, [failure_in_chased_push(exc)])
    kit.init()
    down.request_one()
    up.on_next(1)
    assert kit.last_events() == {RequestOne(up), OnNext(1, down), OnError(exc, down)}
    assert not kit.interpreter.is_completed  # the stage only failed its outlet; its inlet is still open
