"""Supervision of the element-wise, aggregating, slicing and sequence operators: ported from Pekko's
FlowSupervisionSpec, plus one table that holds every operator with user code to the same contract
(Stop fails the stream with the exception, Resume drops the failing element)."""
from __future__ import annotations

import operator

import pytest
from ops_kit import TE, fmat  # noqa: F401

from atoll import Attributes, Flow, Sink, Source, Supervision
from atoll.errors import PortStateError

EXC = TE("simulated exc")


def _failing(n):
    if n == 3:
        raise EXC
    return n


FAILING_MAP = Flow().map(_failing)


def _run(flow, mat):
    data = list(range(1, 6)) + list(range(1, 6))
    return Source.from_iterable(data).via(flow).limit(1000).run_with(Sink.seq(), mat).result(3)


def _with(decider):
    return Attributes.supervision_strategy(decider)


def test_supervision_stops_and_completes_the_stream_with_failure_by_default(fmat):
    with pytest.raises(TE) as info:
        _run(FAILING_MAP, fmat)
    assert info.value is EXC


def test_supervision_supports_resume(fmat):
    assert _run(FAILING_MAP.with_attributes(_with(Supervision.resuming_decider)), fmat) == [1, 2, 4, 5, 1, 2, 4, 5]


def test_supervision_supports_restart(fmat):
    assert _run(FAILING_MAP.with_attributes(_with(Supervision.restarting_decider)), fmat) == [1, 2, 4, 5, 1, 2, 4, 5]


def test_supervision_completes_the_stream_with_failure_when_none_is_emitted(fmat):
    fut = Source.from_iterable(["a", "b"]).map(lambda _: None).limit(1000).run_with(Sink.seq(), fmat)
    with pytest.raises(PortStateError, match="must not be None"):
        fut.result(3)


def test_supervision_resumes_the_stream_when_none_is_emitted(fmat):
    null_map = Flow().map(lambda e: None if e == "b" else e).with_attributes(_with(Supervision.resuming_decider))
    out = Source.from_iterable(["a", "b", "c"]).via(null_map).limit(1000).run_with(Sink.seq(), fmat).result(3)
    assert out == ["a", "c"]


def test_supervision_decider_sees_the_exception_and_can_choose_per_exception(fmat):
    seen = []

    def decider(e):
        seen.append(e)
        return Supervision.RESUME if isinstance(e, TE) else Supervision.STOP

    def fn(n):
        if n == 2:
            raise TE("skip me")
        if n == 4:
            raise KeyError("fatal")
        return n

    fut = Source.range(1, 6).via(Flow().map(fn).with_attributes(_with(decider))).run_with(Sink.seq(), fmat)
    with pytest.raises(KeyError):
        fut.result(3)
    assert [type(e) for e in seen] == [TE, KeyError]


def test_supervision_a_decider_returning_no_directive_fails_the_stream(fmat):
    flow = Flow().map(_failing).with_attributes(_with(lambda e: "ignore"))
    with pytest.raises(TypeError, match="expected Supervision.STOP, RESUME or RESTART"):
        _run(flow, fmat)


# ------------------------------------------------------------------------- every operator with user code
def _raise_on_3(result):
    def fn(*args):
        if args[-1] == 3:
            raise EXC
        return result(*args)

    return fn


def _acc_raise_on_3(fn):
    def wrapped(acc, elem):
        if elem == 3:
            raise EXC
        return fn(acc, elem)

    return wrapped


# (operator, flow, output with Resume for the input 1..5, where element 3 makes user code fail)
OPERATORS = [
    ("map", lambda: Flow().map(_raise_on_3(lambda x: x * 10)), [10, 20, 40, 50]),
    ("filter", lambda: Flow().filter(_raise_on_3(lambda x: True)), [1, 2, 4, 5]),
    ("filter_not", lambda: Flow().filter_not(_raise_on_3(lambda x: False)), [1, 2, 4, 5]),
    ("map_concat", lambda: Flow().map_concat(_raise_on_3(lambda x: [x, x])), [1, 1, 2, 2, 4, 4, 5, 5]),
    ("stateful_map", lambda: Flow().stateful_map(lambda: 0, _acc_raise_on_3(lambda s, e: (s + e, s + e))), [1, 3, 7, 12]),
    ("stateful_map_concat", lambda: Flow().stateful_map_concat(lambda: _raise_on_3(lambda x: [x])), [1, 2, 4, 5]),
    ("scan", lambda: Flow().scan(0, _acc_raise_on_3(operator.add)), [0, 1, 3, 7, 12]),
    ("fold", lambda: Flow().fold(0, _acc_raise_on_3(operator.add)), [12]),
    ("reduce", lambda: Flow().reduce(_acc_raise_on_3(operator.add)), [12]),
    ("take_while", lambda: Flow().take_while(_raise_on_3(lambda x: True)), [1, 2, 4, 5]),
    ("drop_while", lambda: Flow().drop_while(_raise_on_3(lambda x: x < 5)), [5]),
    ("limit_weighted", lambda: Flow().limit_weighted(100, _raise_on_3(lambda x: 1)), [1, 2, 4, 5]),
    ("drop_repeated", lambda: Flow().drop_repeated(_acc_raise_on_3(operator.eq)), [1, 2, 4, 5]),
    ("log", lambda: Flow().log("supervised", _raise_on_3(lambda x: x)), [1, 2, 4, 5]),
]


@pytest.mark.parametrize("name, build, resumed", OPERATORS, ids=[o[0] for o in OPERATORS])
def test_operator_fails_the_stream_with_the_exception_of_user_code_by_default(fmat, name, build, resumed):
    fut = Source.range(1, 6).via(build()).run_with(Sink.seq(), fmat)
    with pytest.raises(TE) as info:
        fut.result(3)
    assert info.value is EXC


@pytest.mark.parametrize("name, build, resumed", OPERATORS, ids=[o[0] for o in OPERATORS])
def test_operator_drops_the_failing_element_on_resume(fmat, name, build, resumed):
    flow = build().with_attributes(_with(Supervision.resuming_decider))
    assert Source.range(1, 6).via(flow).run_with(Sink.seq(), fmat).result(3) == resumed
