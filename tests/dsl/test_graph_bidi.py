"""BidiFlow on both materializers (Pekko's BidiFlowSpec): the two directions in isolation, ``join``
with a Flow on either side, ``atop`` its inverse, ``reversed``, materialized values, and attributes.

Atoll has no ``Flow.join(bidi)`` (Pekko's flow-on-the-left form); ``join_left`` below builds it with
GraphDSL. Tests taking ``mat`` run on ``Materializer.local()`` and ``Materializer.ray()``; those
taking ``local_mat`` only in-process.
"""
from __future__ import annotations

import pytest

from atoll import (
    Attributes,
    BidiFlow,
    BidiShape,
    Broadcast,
    ClosedShape,
    Flow,
    FlowShape,
    GraphDSL,
    Keep,
    KillSwitches,
    Merge,
    NotUsed,
    Sink,
    Source,
)
from atoll.stage.attributes import AsyncBoundary, Name

from dsl_helpers import closed

STR = "Hello World"


def to_str(b: bytes) -> str:
    return b.decode("utf-8")


def to_bytes(s: str) -> bytes:
    return s.encode("utf-8")


def make_bidi():
    """int -> int + 2 (outbound), bytes -> str (inbound)."""
    return BidiFlow.from_flows(Flow().map(lambda x: x + 2).named("top"), Flow().map(to_str).named("bottom"))


def make_inverse():
    """int -> int + 2 (outbound), str -> bytes (inbound)."""
    return BidiFlow.from_flows(Flow().map(lambda x: x + 2).named("top"), Flow().map(to_bytes).named("bottom"))


def make_bidi_mat():
    """Like ``make_bidi`` but materializes the head of a side stream: 42."""

    def build(b, s):
        Source.single(42) >> s.in_
        top = b.add(Flow().map(lambda x: x + 2))
        bottom = b.add(Flow().map(to_str))
        return BidiShape(top.in_, top.out, bottom.in_, bottom.out)

    return BidiFlow.from_graph(GraphDSL.create(build, Sink.head()))


def join_left(flow, bidi, combine=Keep.left):
    """Pekko's ``flow.join(bidi)``: ``flow`` sits on the left of ``bidi`` (``bidi.out2 -> flow ->
    bidi.in1``); the result is a Flow from ``bidi.in2`` to ``bidi.out1``."""

    def build(b, f, bd):
        b.connect(bd.out2, f.inlets[0])
        b.connect(f.outlets[0], bd.in1)
        return FlowShape(bd.in2, bd.out1)

    return Flow.from_graph(GraphDSL.create(build, flow, bidi, combine=combine))


def test_bidi_top_and_bottom_in_isolation_in_their_own_island(mat):
    def build(b, st, sb):
        s = b.add(make_bidi().island())
        Source.single(1) >> s.in1
        s.out1 >> st.in_
        Source.single(to_bytes(STR)) >> s.in2
        s.out2 >> sb.in_
        return ClosedShape

    top, bottom = closed(build, Sink.head(), Sink.head(), combine=Keep.both).run(mat)
    assert top.result(10) == 3
    assert bottom.result(10) == STR


def test_bidi_as_a_flow_open_on_the_left(local_mat):
    f = make_bidi().join(Flow().map(lambda x: to_bytes(f"Hello {x}")))
    assert Source.from_iterable([1, 2, 3]).via(f).limit(10).run_with(Sink.seq(), local_mat).result(10) == ["Hello 3", "Hello 4", "Hello 5"]


def test_bidi_as_a_flow_open_on_the_right(local_mat):
    f = join_left(Flow().map(lambda s: int(s)), make_bidi())
    result = Source.from_iterable([b"1", b"2"]).via(f).limit(10).run_with(Sink.seq(), local_mat).result(5)
    assert result == [3, 4]


def test_bidi_atop_its_inverse(local_mat):
    f = make_bidi().atop(make_inverse()).join(Flow().map(str))
    assert Source.from_iterable([1, 2, 3]).via(f).limit(10).run_with(Sink.seq(), local_mat).result(10) == ["5", "6", "7"]


def test_bidi_reversed(local_mat):
    # the case above turned around: the flow sits on the left and each bidi is reversed
    f = join_left(join_left(Flow().map(str), make_inverse().reversed()), make_bidi().reversed())
    assert Source.from_iterable([1, 2, 3]).via(f).limit(10).run_with(Sink.seq(), local_mat).result(5) == ["5", "6", "7"]


def test_bidi_materializes_to_its_value(mat):
    """A closed loop ``flow <-> bidi <-> flow`` in which no element ever flows (as in Pekko); the kill
    switch in the loop ends it."""

    def build(b, bidi, switch):
        left = b.add(Flow().map(int))
        right = b.add(Flow().map(lambda x: to_bytes(f"Hello {x}")))
        b.connect(left.out, bidi.in1)
        b.connect(bidi.out2, switch.in_)
        b.connect(switch.out, left.in_)
        b.connect(bidi.out1, right.in_)
        b.connect(right.out, bidi.in2)
        return ClosedShape

    value, switch = closed(build, make_bidi_mat(), KillSwitches.single(), combine=Keep.both).run(mat)
    assert value.result(10) == 42
    switch.shutdown()


def test_bidi_combines_materialized_values(mat):
    """``left <-> bidi <-> right`` closed into a loop that completes on its own; on Ray the bidi and
    the right-hand flow run in islands of their own."""

    def build_left(b, sink):
        bcast = b.add(Broadcast(2))
        merge = b.add(Merge(2))
        flow = b.add(Flow().map(int))
        bcast.out(0) >> sink.in_
        Source.single(1) >> bcast.in_
        bcast.out(1) >> merge.in_(0)
        flow.out >> merge.in_(1)
        return FlowShape(flow.in_, merge.out)

    def build_right(b, sink):
        flow = b.add(Flow().grouped(10))
        flow.out >> sink.in_
        return FlowShape(flow.in_, b.add(Source.single(b"10")).out)

    left = Flow.from_graph(GraphDSL.create(build_left, Sink.head()))
    right = Flow.from_graph(GraphDSL.create(build_right, Sink.head())).island()

    def build(b, l, bd, r):
        b.connect(l.outlets[0], bd.in1)
        b.connect(bd.out2, l.inlets[0])
        b.connect(bd.out1, r.inlets[0])
        b.connect(r.outlets[0], bd.in2)
        return ClosedShape

    l, m, r = closed(build, left, make_bidi_mat().island(), right, combine=lambda *v: v).run(mat)
    assert l.result(10) == 1
    assert m.result(10) == 42
    assert set(r.result(10)) == {3, 12}


def test_bidi_overrides_attribute_handling():
    b = make_bidi().island().add_attributes(Attributes.none).named("name")
    assert isinstance(b, BidiFlow)
    attrs = b.traversal_builder.attributes
    assert attrs.get_first(Name) == Name("name")
    assert attrs.get_first(AsyncBoundary) is not None


def _identity_bidi():
    return BidiFlow.from_flows(Flow(), Flow())


def _my_bidi():
    return BidiFlow.from_flows(Flow().map(lambda x: x + 1), Flow().map(lambda x: x + 1)).map_materialized_value(
        lambda _: "bidi-matval"
    )


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda: _identity_bidi().atop(_my_bidi(), Keep.left), NotUsed),
        (lambda: _identity_bidi().atop(_my_bidi(), Keep.none), NotUsed),
        (lambda: _identity_bidi().atop(_my_bidi(), Keep.right), "bidi-matval"),
        (lambda: _identity_bidi().atop(_my_bidi(), lambda _, m: m), "bidi-matval"),
        (lambda: _my_bidi().atop(_identity_bidi(), Keep.left), "bidi-matval"),
        (lambda: _my_bidi().atop(_identity_bidi(), Keep.none), NotUsed),
        (lambda: _my_bidi().atop(_identity_bidi(), Keep.right), NotUsed),
        (lambda: _my_bidi().atop(_identity_bidi(), lambda m, _: m), "bidi-matval"),
    ],
    ids=[
        "identity atop, left",
        "identity atop, none",
        "identity atop, right",
        "identity atop, fn",
        "atop identity, left",
        "atop identity, none",
        "atop identity, right",
        "atop identity, fn",
    ],
)
def test_bidi_atop_an_identity_bidi_keeps_the_right_materialized_value(local_mat, make, expected):
    joined = make().join(Flow(), Keep.left)
    bidi_value, result = Source.from_iterable([1, 2]).via_mat(joined, Keep.right).to_mat(Sink.seq(), Keep.both).run(local_mat)
    assert result.result(5) == [3, 4]
    assert bidi_value == expected


def test_bidi_needs_a_bidi_shape():
    with pytest.raises(TypeError, match="BidiShape"):
        BidiFlow.from_graph(Flow().map(str))
