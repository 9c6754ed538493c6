"""Supervision of operators inside the interpreter (Pekko's InterpreterSupervisionSpec, extended to
the operators Atoll has with user functions: map, filter, scan, fold, take_while, drop_while,
map_concat, stateful_map, limit_weighted)."""
from __future__ import annotations

import pytest

from atoll import Supervision
from atoll._impl.ops.aggregate import Fold, Grouped, Scan
from atoll._impl.ops.slicing import DropWhile, Limit, TakeWhile
from atoll._impl.ops.transform import Filter, Map, MapConcat, StatefulMap

from atoll.errors import STAGE_WAS_COMPLETED

from interpreter_kit import Cancel, OnComplete, OnError, OnNext, OneBounded, RequestAnother, RequestOne

TE = Exception("TEST")
RESUME = Supervision.resuming_decider
RESTART = Supervision.restarting_decider


def boom_if(pred, fn=lambda x: x):
    def f(x):
        if pred(x):
            raise TE
        return fn(x)

    return f


# ------------------------------------------------------------------------------ InterpreterSupervisionSpec
def test_handle_external_failure():
    s = OneBounded(Map(lambda x: x + 1))
    assert s.last_events() == set()
    s.upstream.on_error(TE)
    assert s.last_events() == {OnError(TE)}


def test_emit_failure_when_op_throws():
    s = OneBounded(Map(boom_if(lambda x: x == 0)))
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(2)
    assert s.last_events() == {OnNext(2)}
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(0)
    assert s.last_events() == {Cancel(TE), OnError(TE)}
    assert s.interpreter.is_completed


def test_emit_failure_when_op_throws_in_middle_of_the_chain():
    s = OneBounded(Map(lambda x: x + 1), Map(boom_if(lambda x: x == 0, lambda x: x + 10)), Map(lambda x: x + 100))
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(2)
    assert s.last_events() == {OnNext(113)}
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(-1)
    assert s.last_events() == {Cancel(TE), OnError(TE)}


@pytest.mark.parametrize("decider", [RESUME, RESTART], ids=["resume", "restart"])
def test_resume_when_map_throws(decider):
    s = OneBounded(Map(boom_if(lambda x: x == 0)), decider=decider)
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(2)
    assert s.last_events() == {OnNext(2)}
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(0)  # boom: dropped, pulled again
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(3)
    assert s.last_events() == {OnNext(3)}
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(0)
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(4)
    assert s.last_events() == {OnNext(4)}


def test_resume_when_map_throws_in_middle_of_the_chain():
    s = OneBounded(
        Map(lambda x: x + 1), Map(boom_if(lambda x: x == 0, lambda x: x + 10)), Map(lambda x: x + 100), decider=RESUME
    )
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(2)
    assert s.last_events() == {OnNext(113)}
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(-1)
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(3)
    assert s.last_events() == {OnNext(114)}


def test_resume_when_map_throws_before_grouped():
    s = OneBounded(Map(lambda x: x + 1), Map(boom_if(lambda x: x <= 0, lambda x: x + 10)), Grouped(3), decider=RESUME)
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(2)
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(-1)
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(3)
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(4)
    assert s.last_events() == {OnNext([13, 14, 15])}


def test_complete_after_resume_when_map_throws_before_grouped():
    s = OneBounded(Map(lambda x: x + 1), Map(boom_if(lambda x: x <= 0, lambda x: x + 10)), Grouped(1000), decider=RESUME)
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(2)
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(-1)
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(3)
    assert s.last_events() == {RequestOne()}
    s.upstream.on_complete()
    assert s.last_events() == {OnNext([13, 14]), OnComplete()}


# ------------------------------------------------------------------------------ the other operators with user functions
@pytest.mark.parametrize("decider", [RESUME, RESTART], ids=["resume", "restart"])
def test_filter_drops_the_failing_element(decider):
    s = OneBounded(Filter(boom_if(lambda x: x == 0, lambda x: x % 2 == 1)), decider=decider)
    s.downstream.request_one()
    s.last_events()
    s.upstream.on_next(0)
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(2)  # filtered out
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(3)
    assert s.last_events() == {OnNext(3)}


def test_filter_stops_by_default():
    s = OneBounded(Filter(boom_if(lambda x: x == 0, lambda x: True)))
    s.downstream.request_one()
    s.last_events()
    s.upstream.on_next(0)
    assert s.last_events() == {Cancel(TE), OnError(TE)}


def _scan_setup(decider):
    s = OneBounded(Scan(0, lambda acc, x: acc + boom_if(lambda y: y == 0)(x)), decider=decider)
    s.downstream.request_one()
    assert s.last_events() == {OnNext(0)}  # zero first, without pulling
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(1)
    assert s.last_events() == {OnNext(1)}
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    return s


def test_scan_resume_skips_the_element():
    s = _scan_setup(RESUME)
    s.upstream.on_next(0)
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(2)
    assert s.last_events() == {OnNext(3)}


def test_scan_restart_then_continue():
    s = _scan_setup(RESTART)
    s.upstream.on_next(0)
    assert s.last_events() == {OnNext(0)}
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(2)
    assert s.last_events() == {OnNext(2)}


def test_scan_stop_fails():
    s = _scan_setup(None)
    s.upstream.on_next(0)
    assert s.last_events() == {Cancel(TE), OnError(TE)}


@pytest.mark.parametrize("decider,expected", [(RESUME, 1 + 2 + 3), (RESTART, 3)], ids=["resume", "restart"])
def test_fold_supervision(decider, expected):
    s = OneBounded(Fold(0, lambda acc, x: acc + boom_if(lambda y: y == 0)(x)), decider=decider)
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    for x in (1, 2, 0, 3):
        s.upstream.on_next(x)
        assert s.last_events() == {RequestOne()}
    s.upstream.on_complete()
    assert s.last_events() == {OnNext(expected), OnComplete()}


def test_fold_stop_fails():
    s = OneBounded(Fold(0, lambda acc, x: acc + boom_if(lambda y: y == 0)(x)))
    s.downstream.request_one()
    s.last_events()
    s.upstream.on_next(0)
    assert s.last_events() == {Cancel(TE), OnError(TE)}


@pytest.mark.parametrize("decider", [RESUME, RESTART], ids=["resume", "restart"])
def test_take_while_skips_the_failing_element(decider):
    s = OneBounded(TakeWhile(boom_if(lambda x: x == 0, lambda x: x < 10)), decider=decider)
    s.downstream.request_one()
    s.last_events()
    s.upstream.on_next(0)
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(1)
    assert s.last_events() == {OnNext(1)}
    s.downstream.request_one()
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(10)
    assert s.last_events() == {OnComplete(), Cancel(STAGE_WAS_COMPLETED)}


@pytest.mark.parametrize("decider", [RESUME, RESTART], ids=["resume", "restart"])
def test_drop_while_skips_the_failing_element(decider):
    s = OneBounded(DropWhile(boom_if(lambda x: x == 0, lambda x: x < 5)), decider=decider)
    s.downstream.request_one()
    s.last_events()
    s.upstream.on_next(1)  # dropped
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(0)  # boom: skipped
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(7)
    assert s.last_events() == {OnNext(7)}
    s.downstream.request_one()
    s.upstream.on_next(0)  # the predicate is not consulted any more
    assert s.last_events() == {RequestOne(), OnNext(0)}


@pytest.mark.parametrize("decider", [RESUME, RESTART], ids=["resume", "restart"])
def test_map_concat_skips_the_failing_element(decider):
    s = OneBounded(MapConcat(boom_if(lambda x: x == 0, lambda x: [x, x])), decider=decider)
    s.downstream.request_one()
    s.last_events()
    s.upstream.on_next(0)
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(1)
    assert s.last_events() == {OnNext(1)}
    s.downstream.request_one()
    assert s.last_events() == {OnNext(1)}


def _stateful_map(decider):
    def fn(state, x):
        if x == 0:
            raise TE
        return state + x, state + x

    return OneBounded(StatefulMap(lambda: 100, fn), decider=decider)


def test_stateful_map_resume_keeps_the_state():
    s = _stateful_map(RESUME)
    s.downstream.request_one()
    s.upstream.on_next(1)
    assert s.last_events() == {RequestOne(), OnNext(101)}
    s.downstream.request_one()
    s.upstream.on_next(0)
    assert s.last_events() == {RequestOne(), RequestAnother()}
    s.upstream.on_next(2)
    assert s.last_events() == {OnNext(103)}


def test_stateful_map_restart_recreates_the_state():
    s = _stateful_map(RESTART)
    s.downstream.request_one()
    s.upstream.on_next(1)
    assert s.last_events() == {RequestOne(), OnNext(101)}
    s.downstream.request_one()
    s.last_events()
    s.upstream.on_next(0)
    s.last_events()
    s.upstream.on_next(2)
    assert s.last_events() == {OnNext(102)}


def test_limit_weighted_restart_resets_the_count():
    cost = boom_if(lambda x: x == 0, lambda x: x)
    s = OneBounded(Limit(5, cost), decider=RESTART)
    s.downstream.request_one()
    s.last_events()
    s.upstream.on_next(4)
    assert s.last_events() == {OnNext(4)}
    s.downstream.request_one()
    s.last_events()
    s.upstream.on_next(0)  # boom: restart resets the count
    assert s.last_events() == {RequestOne()}
    s.upstream.on_next(5)  # would exceed 5 without the reset
    assert s.last_events() == {OnNext(5)}

