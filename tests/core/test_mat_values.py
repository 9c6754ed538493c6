"""Materialized values: the traversal's stack language (push-not-used, pop, transform, compose),
values that are only known later (remote islands), and what running blueprints return for
Keep.left/right/both/none, custom combiners and map_materialized_value; plus the attribute stack
(most specific wins) as seen by running stages."""
from __future__ import annotations

from concurrent.futures import Future

import pytest

from atoll import Attributes, Done, Flow, Keep, KillSwitches, NotUsed, Sink, Source, Supervision
from atoll.materializer import mat_values
from atoll.materializer.mat_values import DeferredValue, PendingValue, is_pending, resolve
from atoll.materializer.traversal import Compose, MaterializeAtomic, Pop, PushNotUsed, Transform
from atoll._impl.ops.kill_switch import UniqueKillSwitch
from atoll.stage.shapes import Shape

from traversal_kit import TestModule, concat, record_materialize


# ------------------------------------------------------------------------------ mat_values
def test_apply_runs_right_away_without_pending_values():
    assert mat_values.apply(lambda a, b: a + b, 1, 2) == 3
    assert not is_pending(3)


def test_apply_defers_when_an_argument_is_pending_and_resolve_evaluates_later():
    calls = []

    def combine(a, b):
        calls.append((a, b))
        return (a, b)

    p = PendingValue("remote-sink")
    d = mat_values.apply(combine, "local", p)
    assert isinstance(d, DeferredValue) and is_pending(d) and calls == []
    t = mat_values.apply(lambda v: ("mapped", v), d)
    assert is_pending(t)
    assert resolve(t, {"remote-sink": 42}) == ("mapped", ("local", 42))
    assert calls == [("local", 42)]
    assert resolve("plain", {}) == "plain"
    with pytest.raises(KeyError):
        resolve(PendingValue("unknown"), {})


class _Valued(TestModule):
    """A module without ports whose materialized value is ``value``."""

    def __init__(self, name, value):
        super().__init__(name, Shape())
        self.mat_value = value


def _stack_run(*commands):
    return record_materialize(concat(*commands)).mat_value


def test_stack_language_in_the_materializer():
    a, b = _Valued("a", "A"), _Valued("b", "B")
    ma, mb = MaterializeAtomic(a, ()), MaterializeAtomic(b, ())
    assert _stack_run(ma, mb, Pop) == "A"
    assert _stack_run(ma, Pop, mb) == "B"
    assert _stack_run(ma, mb, Compose(lambda x, y: x + y)) == "AB"
    assert _stack_run(ma, mb, Compose(lambda x, y: x + y, reverse=True)) == "BA"
    assert _stack_run(PushNotUsed, Transform(lambda v: v is NotUsed)) is True
    assert _stack_run(ma, Transform(str.lower), Transform(lambda v: v * 2)) == "aa"


def test_pending_values_flow_through_the_stack_language():
    a = _Valued("a", PendingValue("a"))
    b = _Valued("b", "B")
    rec = record_materialize(
        concat(MaterializeAtomic(a, ()), MaterializeAtomic(b, ()), Compose(Keep.both), Transform(lambda v: ("T",) + v))
    )
    assert is_pending(rec.mat_value)
    assert resolve(rec.mat_value, {"a": "A"}) == ("T", "A", "B")


def test_the_value_stack_must_end_with_one_value():
    a = _Valued("a", "A")
    with pytest.raises(RuntimeError, match="2 values"):
        record_materialize(concat(MaterializeAtomic(a, ()), MaterializeAtomic(a, ())))


# ------------------------------------------------------------------------------ running blueprints
def _switch_flow():
    return KillSwitches.single()


def test_keep_left_right_both_none(mat):
    src = Source.range(0, 3)
    assert src.to_mat(Sink.seq(), Keep.left).run(mat) is NotUsed
    f = src.to_mat(Sink.seq(), Keep.right).run(mat)
    assert isinstance(f, Future) and f.result(timeout=3) == [0, 1, 2]
    left, right = src.via_mat(_switch_flow(), Keep.right).to_mat(Sink.seq(), Keep.both).run(mat)
    assert isinstance(left, UniqueKillSwitch) and right.result(timeout=3) == [0, 1, 2]
    assert src.via_mat(_switch_flow(), Keep.right).to_mat(Sink.seq(), Keep.none).run(mat) is NotUsed


def test_nested_keep_both_and_custom_combiners(mat):
    (a, b), c = (
        Source.range(0, 2)
        .via_mat(_switch_flow(), Keep.both)
        .to_mat(Sink.seq(), Keep.both)
        .run(mat)
    )
    assert a is NotUsed and isinstance(b, UniqueKillSwitch) and c.result(timeout=3) == [0, 1]
    combined = Source.range(0, 2).via_mat(_switch_flow(), lambda l, r: ("L", l, "R", type(r).__name__)).to(Sink.ignore()).run(mat)
    assert combined == ("L", NotUsed, "R", "UniqueKillSwitch")


def test_map_materialized_value_on_every_kind_of_blueprint(mat):
    src = Source.range(0, 2).map_materialized_value(lambda v: ("src", v))
    flow = Flow().map(lambda x: x + 1).map_materialized_value(lambda v: ("flow", v))
    sink = Sink.seq().map_materialized_value(lambda f: ("sink", f))
    (s, fl), (tag, fut) = src.via_mat(flow, Keep.both).to_mat(sink, Keep.both).run(mat)
    assert s == ("src", NotUsed) and fl == ("flow", NotUsed) and tag == "sink"
    assert fut.result(timeout=3) == [1, 2]
    # runs while materializing, before the islands start: it must not wait for the stream
    graph = Source.range(0, 2).to_mat(Sink.seq(), Keep.right).map_materialized_value(lambda f: ("graph", f))
    tag, fut = graph.run(mat)
    assert tag == "graph" and fut.result(timeout=3) == [0, 1]


def test_identity_flow_materializes_not_used_or_its_mapped_value(mat):
    assert Source.single(1).via_mat(Flow(), Keep.right).to(Sink.ignore()).run(mat) is NotUsed
    mapped_identity = Flow().map_materialized_value(lambda _: "ID")
    assert Source.single(1).via_mat(mapped_identity, Keep.right).to(Sink.ignore()).run(mat) == "ID"
    assert Source.single(1).via_mat(mapped_identity, Keep.both).to(Sink.ignore()).run(mat) == (NotUsed, "ID")
    # the mapped identity as the *start* of a chain keeps its value too
    chain = mapped_identity.via_mat(Flow().map(lambda x: x * 10), Keep.left)
    value, result = Source.single(1).via_mat(chain, Keep.right).to_mat(Sink.seq(), Keep.both).run(mat)
    assert value == "ID" and result.result(timeout=3) == [10]
    both = mapped_identity.via_mat(Flow().map(lambda x: x), Keep.both)
    assert Source.single(1).via_mat(both, Keep.right).to(Sink.ignore()).run(mat) == ("ID", NotUsed)


def test_a_blueprint_materializes_fresh_values_each_run(mat):
    graph = Source.range(0, 3).via_mat(_switch_flow(), Keep.right).to_mat(Sink.seq(), Keep.both)
    (k1, f1), (k2, f2) = graph.run(mat), graph.run(mat)
    assert k1 is not k2 and f1 is not f2
    assert f1.result(timeout=3) == f2.result(timeout=3) == [0, 1, 2]


def test_mat_values_across_islands(mat):
    switch, fut = Source.repeat(1).island().via_mat(_switch_flow(), Keep.right).island().to_mat(Sink.seq(), Keep.both).run(mat)
    switch.shutdown()
    assert all(x == 1 for x in fut.result(timeout=3))


def test_watch_termination_value_combined(mat):
    (nu, done), res = Source.range(0, 2).watch_termination(Keep.both).to_mat(Sink.seq(), Keep.both).run(mat)
    assert nu is NotUsed and done.result(timeout=3) is Done and res.result(timeout=3) == [0, 1]


# ------------------------------------------------------------------------------ attribute stack
def _divide():
    return Flow().map(lambda x: 10 // x)


def test_inner_attributes_are_more_specific_than_outer_ones(mat):
    resume = Attributes.supervision_strategy(Supervision.resuming_decider)
    stop = Attributes.supervision_strategy(Supervision.stopping_decider)
    inner_resume = Source.from_iterable([1, 0, 2]).via(_divide().with_attributes(resume)).with_attributes(stop)
    assert inner_resume.run_with(Sink.seq(), mat).result(timeout=3) == [10, 5]
    inner_stop = Source.from_iterable([1, 0, 2]).via(_divide().with_attributes(stop)).with_attributes(resume)
    with pytest.raises(ZeroDivisionError):
        inner_stop.run_with(Sink.seq(), mat).result(timeout=3)


def test_outer_attributes_apply_where_nothing_more_specific_is_set(mat):
    resume = Attributes.supervision_strategy(Supervision.resuming_decider)
    graph = Source.from_iterable([1, 0, 2]).via(_divide()).with_attributes(resume)
    assert graph.run_with(Sink.seq(), mat).result(timeout=3) == [10, 5]
    # attributes added after composition apply to everything composed so far, not to later stages
    later = Source.from_iterable([1, 0, 2]).with_attributes(resume).via(_divide())
    with pytest.raises(ZeroDivisionError):
        later.run_with(Sink.seq(), mat).result(timeout=3)


def test_materializer_defaults_are_least_specific(mat):
    m_attrs = mat.settings.top_attributes()
    assert m_attrs.get(type(Attributes.input_buffer(1, 1).attribute_list[0])) is not None
    small = Attributes.input_buffer(1, 1)
    got = Source.range(0, 5).island().via(Flow().map(lambda x: x).with_attributes(small)).run_with(Sink.seq(), mat)
    assert got.result(timeout=3) == [0, 1, 2, 3, 4]


def test_map_materialized_value_runs_even_when_its_value_is_dropped():
    """Pekko runs ``mapMaterializedValue`` at materialization whatever the combiners keep (RestartSpec relies on it):
    once each, also under ``Keep.none`` and inside a GraphDSL ``b.add``."""
    from atoll import ClosedShape, GraphDSL, Keep, Materializer, RunnableGraph, Sink, Source

    calls = []
    m = Materializer.local()
    try:
        src = Source.single(1).map_materialized_value(lambda v: calls.append("src") or v)
        snk = Sink.seq().map_materialized_value(lambda v: calls.append("sink") or v)
        assert src.to_mat(snk, Keep.none).run(m) is NotUsed
        assert sorted(calls) == ["sink", "src"]

        def build(b):
            b.add(Source.single(2).map_materialized_value(lambda v: calls.append("in graph") or v)) >> b.add(Sink.ignore()).in_
            return ClosedShape

        RunnableGraph.from_graph(GraphDSL.create(build)).run(m)
        assert sorted(calls) == ["in graph", "sink", "src"]
    finally:
        m.shutdown()
