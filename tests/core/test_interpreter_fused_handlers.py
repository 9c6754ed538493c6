"""Fused per-element handlers: ``Source.range``'s ``on_pull`` and ``Sink.fold``'s ``on_push`` with their
port calls' plain case inlined (``atoll.stage._port_calls.fusable`` / ``install_on_push``/``install_on_pull``).

They run where the range or the fold has a neighbour without a chunk form. These tests pin that the fused
forms are the ones running there, and that they keep the exact signals: one pull per element, nothing
pushed beyond demand, the completion with the last element, supervision at the element, failures after
the elements before them, rebinding to a second interpreter, and the class methods wherever a fused form
would not be exact (event time, an overriding subclass, another handler on the port).
"""
from __future__ import annotations

import pytest

from atoll import Flow, FlowShape, GraphStage, GraphStageLogic, InHandler, Inlet, Materializer, OutHandler, Outlet, Sink, Source
from atoll._impl.ops.sinks import FoldSink, _FoldLogic
from atoll._impl.ops.sources import RangeSource, _RangeLogic
from atoll.errors import PortStateError
from atoll.stage.attributes import Attributes
from atoll.stage.supervision import Supervision

from interpreter_kit import Cancel, Kit, OnComplete, OnNext, RequestOne


class Boom(Exception):
    pass


def _fold_kit(fn=lambda a, b: a + b, attributes=Attributes.none, event_time=False):
    kit = Kit()
    up = kit.add(kit.upstream())
    fold = kit.add(FoldSink(0, fn), attributes)
    kit.connect(up.out, fold.in_)
    if event_time:
        fold.enable_event_time()
    kit.init()
    return kit, up, fold, kit.mat_values[0]


def _range_kit(start, stop, event_time=False):
    kit = Kit()
    src = kit.add(RangeSource(start, stop))
    down = kit.add(kit.downstream())
    kit.connect(src.out, down.in_)
    if event_time:
        src.enable_event_time()
    kit.init()
    return kit, src, down


def _is_fused(logic, name):
    return name in vars(logic) and getattr(logic, name) is not getattr(type(logic), name).__get__(logic)


# ------------------------------------------------------------------ the fold
def test_a_fold_between_element_stages_runs_its_fused_on_push_one_pull_per_element():
    kit, up, fold, promise = _fold_kit()
    assert _is_fused(fold, "on_push")
    assert fold._in_conns[0].on_push is fold.on_push
    kit.step_all()
    assert kit.last_events() == {RequestOne(up)}  # the pull of pre_start
    for x in (3, 4, 5):
        up.on_next(x)
        assert kit.last_events() == {RequestOne(up)}
    up.on_complete()
    assert promise.result(0) == 12


def test_a_fold_gets_the_element_sent_with_the_completion():
    kit, up, fold, promise = _fold_kit()
    kit.step_all()
    up.on_next(1)
    up.on_next_and_complete(10)
    assert promise.result(0) == 11


@pytest.mark.parametrize("decision, expected", [(Supervision.RESUME, 1 + 3), (Supervision.RESTART, 3)])
def test_a_fold_supervises_a_failing_fn_at_its_element(decision, expected):
    def fn(acc, x):
        if x == 2:
            raise Boom()
        return acc + x

    kit, up, fold, promise = _fold_kit(fn, Attributes.supervision_strategy(lambda e: decision))
    kit.step_all()
    for x in (1, 2, 3):
        up.on_next(x)
        assert kit.last_events() == {RequestOne(up)}  # the element after the failure is asked for too
    up.on_complete()
    assert promise.result(0) == expected


def test_a_fold_stopping_on_a_failing_fn_cancels_upstream_and_fails_its_future():
    boom = Boom()

    def fn(acc, x):
        if x == 2:
            raise boom
        return acc + x

    kit, up, fold, promise = _fold_kit(fn)
    kit.step_all()
    kit.last_events()
    up.on_next(1)
    assert kit.last_events() == {RequestOne(up)}
    up.on_next(2)
    assert kit.last_events() == {Cancel(boom, up)}
    assert promise.exception(0) is boom


def test_a_fold_upstream_failure_after_elements_fails_its_future_with_it():
    kit, up, fold, promise = _fold_kit()
    kit.step_all()
    up.on_next(1)
    exc = Boom()
    up.on_error(exc)
    assert promise.exception(0) is exc


def test_an_event_time_fold_keeps_the_class_method():
    kit, up, fold, promise = _fold_kit(event_time=True)
    assert not _is_fused(fold, "on_push")
    kit.step_all()
    up.on_next(2)
    up.on_complete()
    assert promise.result(0) == 2


def test_a_fold_subclass_overriding_on_push_keeps_its_own():
    class Doubling(_FoldLogic):
        def on_push(self):
            self.acc = self.fn(self.acc, 2 * self.grab(self.in_))
            self.pull(self.in_)

    class DoublingFold(FoldSink):
        def create_logic_and_materialized_value(self, attributes):
            logic, promise = super().create_logic_and_materialized_value(attributes)
            logic.__class__ = Doubling
            return logic, promise

    kit = Kit()
    up = kit.add(kit.upstream())
    fold = kit.add(DoublingFold(0, lambda a, b: a + b))
    kit.connect(up.out, fold.in_)
    kit.init()
    assert not _is_fused(fold, "on_push")
    kit.step_all()
    up.on_next(5)
    up.on_complete()
    assert kit.mat_values[0].result(0) == 10


def test_a_fold_whose_handler_is_set_again_keeps_the_fused_form():
    """A checkpoint pause puts another handler on a port and the logic back afterwards."""
    kit, up, fold, promise = _fold_kit()
    fused = fold.on_push
    other = InHandler(on_push=lambda: None)
    fold.set_handler(fold.in_, other)
    assert fold._in_conns[0].on_push is not fused
    fold.set_handler(fold.in_, fold)
    assert fold._in_conns[0].on_push is fused
    kit.step_all()
    up.on_next(7)
    up.on_complete()
    assert promise.result(0) == 7


# ------------------------------------------------------------------ the range
def test_a_range_before_an_element_stage_pushes_only_on_demand_and_completes_with_its_last_element():
    kit, src, down = _range_kit(0, 3)
    assert _is_fused(src, "on_pull")
    assert src._out_conns[0].on_pull is src.on_pull
    kit.step_all()
    assert kit.last_events() == set()  # nothing without demand
    down.request_one()
    assert kit.last_events() == {OnNext(0, down)}
    down.request_one()
    assert kit.last_events() == {OnNext(1, down)}
    down.request_one()
    assert kit.last_events() == {OnNext(2, down), OnComplete(down)}


def test_an_empty_range_completes_at_start():
    kit, src, down = _range_kit(5, 5)
    kit.step_all()
    assert kit.last_events() == {OnComplete(down)}


def test_an_event_time_range_keeps_the_class_method():
    kit, src, down = _range_kit(0, 2, event_time=True)
    assert not _is_fused(src, "on_pull")
    down.request_one()
    down.request_one()
    assert kit.last_events() == {OnNext(0, down), OnNext(1, down), OnComplete(down)}


def test_a_range_restored_mid_way_goes_on_from_its_snapshot():
    kit, src, down = _range_kit(0, 4)
    src.restore_from_snapshot(2)
    down.request_one()
    assert kit.last_events() == {OnNext(2, down)}
    down.request_one()
    assert kit.last_events() == {OnNext(3, down), OnComplete(down)}


def test_fused_handlers_rebind_to_a_second_interpreter():
    kit, src, down = _range_kit(0, 5)
    down.request_one()
    assert kit.last_events() == {OnNext(0, down)}
    kit2 = Kit()
    kit2.add(src)
    down2 = kit2.add(kit2.downstream())
    kit2.connect(src.out, down2.in_)
    kit2.init()
    assert src._out_conns[0].on_pull is src.on_pull
    down2.request_one()
    assert kit2.last_events() == {OnNext(1, down2)}
    assert not kit.interpreter.queue  # nothing went to the first interpreter


# ------------------------------------------------------------------ through the materializer
class _Custom(GraphStage):
    """A user stage without a chunk form: the range and the fold beside it run element by element."""

    def __init__(self, fn):
        self.in_ = Inlet("custom.in")
        self.out = Outlet("custom.out")
        self.shape = FlowShape(self.in_, self.out)
        self.fn = fn

    def create_logic(self, attributes):
        stage = self

        class Logic(GraphStageLogic, InHandler, OutHandler):
            def __init__(self):
                super().__init__(stage.shape)
                self.set_handlers(stage.in_, stage.out, self)

            def on_push(self):
                self.push(stage.out, stage.fn(self.grab(stage.in_)))

            def on_pull(self):
                self.pull(stage.in_)

        return Logic()


@pytest.mark.parametrize("fuzzing", [None, 1, 2, 3])
def test_range_custom_fold_gives_the_exact_result_normal_and_fuzzing(fuzzing):
    mat = Materializer.local(fuzzing=fuzzing)
    try:
        got = (Source.range(0, 500).via(Flow.from_graph(_Custom(lambda x: x * 3)))
               .run_with(Sink.fold(0, lambda a, b: a * 7 % 1_000_003 + b), mat).result(10))
    finally:
        mat.shutdown()
    acc = 0
    for x in range(500):
        acc = acc * 7 % 1_000_003 + 3 * x
    assert got == acc


def test_a_none_from_the_element_stage_fails_the_fold_after_the_elements_before_it():
    seen = []

    def fn(a, b):
        seen.append(b)
        return a + b

    mat = Materializer.local()
    try:
        fut = (Source.range(0, 10).via(Flow.from_graph(_Custom(lambda x: None if x == 4 else x)))
               .run_with(Sink.fold(0, fn), mat))
        with pytest.raises(PortStateError):
            fut.result(10)
    finally:
        mat.shutdown()
    assert seen == [0, 1, 2, 3]
