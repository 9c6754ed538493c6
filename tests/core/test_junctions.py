"""Junctions in general: construction checks, port names and shapes (deep copies included), the
junction cases of Pekko's GraphInterpreterSpec, and the two-input cases every fan-in junction shares
(Pekko's BaseTwoStreamsSetup.commonTests and the "one completed/failed and one nonempty" cases),
all on the bare interpreter."""
from __future__ import annotations

import pytest

from atoll.errors import NO_MORE_ELEMENTS_NEEDED, STAGE_WAS_COMPLETED
from atoll.materializer.atomic_builder import AtomicTraversalBuilder
from atoll._impl.ops.fan_in import (
    Concat,
    Interleave,
    Merge,
    MergeLatest,
    MergePreferred,
    MergePrioritized,
    MergeSorted,
    OrElse,
    Zip,
    ZipLatest,
    ZipLatestWith,
    ZipWith,
)
from atoll._impl.ops.fan_out import Balance, Broadcast, Partition, Unzip, UnzipWith
from atoll.stage.shapes import (
    FanInShape,
    FanInShapeN,
    FanOutShape,
    FanOutShapeN,
    MergePreferredShape,
    UniformFanInShape,
    UniformFanOutShape,
)

from interpreter_kit import Cancel, JunctionSetup, Kit, OnComplete, OnError, OnNext, RequestOne
from stage_helpers import Boom, IdentityLogic, LinearStage

# ---------------------------------------------------------------------------------------------- construction


@pytest.mark.parametrize(
    "make, exc, words",
    [
        (lambda: Merge(0), ValueError, ["Merge", "'n'"]),
        (lambda: Merge(2.0), TypeError, ["Merge", "'n'"]),
        (lambda: Merge(2, eager_complete="yes"), TypeError, ["Merge", "'eager_complete'"]),
        (lambda: MergePreferred(0), ValueError, ["MergePreferred", "'n'"]),
        (lambda: MergePrioritized([]), ValueError, ["MergePrioritized", "'priorities'"]),
        (lambda: MergePrioritized([1, 0]), ValueError, ["MergePrioritized", "'priorities'"]),
        (lambda: MergePrioritized([1, -3]), ValueError, ["MergePrioritized", "'priorities'"]),
        (lambda: MergePrioritized([1, 2.5]), TypeError, ["MergePrioritized", "'priorities'"]),
        (lambda: MergePrioritized(3), TypeError, ["MergePrioritized", "'priorities'"]),
        (lambda: MergeSorted(key=3), TypeError, ["MergeSorted", "'key'"]),
        (lambda: MergeLatest(0), ValueError, ["MergeLatest", "'n'"]),
        (lambda: ZipWith("f"), TypeError, ["ZipWith", "'fn'"]),
        (lambda: ZipWith(max, 1), ValueError, ["ZipWith", "'n'"]),
        (lambda: ZipLatestWith(None), TypeError, ["ZipLatestWith", "'fn'"]),
        (lambda: ZipLatestWith(max, 1), ValueError, ["ZipLatestWith", "'n'"]),
        (lambda: ZipLatest(eager_complete=None), TypeError, ["ZipLatest", "'eager_complete'"]),
        (lambda: Concat(0), ValueError, ["Concat", "'n'"]),
        (lambda: Concat(2, detached_inputs=1), TypeError, ["Concat", "'detached_inputs'"]),
        (lambda: Interleave(0, 1), ValueError, ["Interleave", "'n'"]),
        (lambda: Interleave(2, 0), ValueError, ["Interleave", "'segment_size'"]),
        (lambda: Broadcast(0), ValueError, ["Broadcast", "'n'"]),
        (lambda: Broadcast(2, eager_cancel=False, non_eager_cancel_outputs={1}), ValueError, ["Broadcast", "requires eager_cancel=True"]),
        (lambda: Broadcast(2, eager_cancel=True, non_eager_cancel_outputs={2}), ValueError, ["Broadcast", "'non_eager_cancel_outputs'"]),
        (lambda: Balance(0), ValueError, ["Balance", "'n'"]),
        (lambda: Balance(2, wait_for_all_downstreams="no"), TypeError, ["Balance", "'wait_for_all_downstreams'"]),
        (lambda: Partition(0, len), ValueError, ["Partition", "'n'"]),
        (lambda: Partition(2, 5), TypeError, ["Partition", "'fn'"]),
        (lambda: UnzipWith(None), TypeError, ["UnzipWith", "'fn'"]),
        (lambda: UnzipWith(tuple, 1), ValueError, ["UnzipWith", "'n'"]),
    ],
)
def test_bad_arguments_are_rejected_when_the_junction_is_built(make, exc, words):
    with pytest.raises(exc) as info:
        make()
    for w in words:
        assert w in str(info.value)


def test_one_input_or_output_junctions_are_allowed_like_in_pekko():
    for stage in (Merge(1), MergePreferred(1), MergeLatest(1), Concat(1), Interleave(1, 3), Broadcast(1), Balance(1), Partition(1, len)):
        assert len(stage.shape.inlets) + len(stage.shape.outlets) >= 2


# ---------------------------------------------------------------------------------------------- ports and shapes

FAN_IN = [
    (Merge(3), UniformFanInShape, ["Merge.in0", "Merge.in1", "Merge.in2"], ["Merge.out"]),
    (MergePreferred(2), MergePreferredShape, ["MergePreferred.in0", "MergePreferred.in1", "MergePreferred.preferred"], ["MergePreferred.out"]),
    (MergePrioritized([1, 2]), UniformFanInShape, ["MergePrioritized.in0", "MergePrioritized.in1"], ["MergePrioritized.out"]),
    (MergeSorted(), FanInShapeN, ["MergeSorted.in0", "MergeSorted.in1"], ["MergeSorted.out"]),
    (MergeLatest(2), UniformFanInShape, ["MergeLatest.in0", "MergeLatest.in1"], ["MergeLatest.out"]),
    (Zip(), FanInShapeN, ["Zip.in0", "Zip.in1"], ["Zip.out"]),
    (ZipWith(max, 3), FanInShapeN, ["ZipWith.in0", "ZipWith.in1", "ZipWith.in2"], ["ZipWith.out"]),
    (ZipLatest(), FanInShapeN, ["ZipLatest.in0", "ZipLatest.in1"], ["ZipLatest.out"]),
    (ZipLatestWith(max, 2), FanInShapeN, ["ZipLatestWith.in0", "ZipLatestWith.in1"], ["ZipLatestWith.out"]),
    (Concat(), UniformFanInShape, ["Concat.in0", "Concat.in1"], ["Concat.out"]),
    (Interleave(2, 1), UniformFanInShape, ["Interleave.in0", "Interleave.in1"], ["Interleave.out"]),
    (OrElse(), UniformFanInShape, ["OrElse.primary", "OrElse.secondary"], ["OrElse.out"]),
]
FAN_OUT = [
    (Broadcast(2), UniformFanOutShape, ["Broadcast.in"], ["Broadcast.out0", "Broadcast.out1"]),
    (Balance(3), UniformFanOutShape, ["Balance.in"], ["Balance.out0", "Balance.out1", "Balance.out2"]),
    (Partition(2, len), UniformFanOutShape, ["Partition.in"], ["Partition.out0", "Partition.out1"]),
    (Unzip(), FanOutShapeN, ["Unzip.in"], ["Unzip.out0", "Unzip.out1"]),
    (UnzipWith(tuple, 3), FanOutShapeN, ["UnzipWith.in"], ["UnzipWith.out0", "UnzipWith.out1", "UnzipWith.out2"]),
]


@pytest.mark.parametrize("stage, shape_type, ins, outs", FAN_IN + FAN_OUT, ids=lambda x: repr(x) if not isinstance(x, (list, type)) else None)
def test_port_names_and_shape_types_follow_pekko(stage, shape_type, ins, outs):
    assert type(stage.shape) is shape_type
    assert [p.name for p in stage.shape.inlets] == ins
    assert [p.name for p in stage.shape.outlets] == outs
    if isinstance(stage.shape, UniformFanInShape):
        assert isinstance(stage.shape, FanInShape) or shape_type is UniformFanInShape or shape_type is MergePreferredShape
    else:
        assert isinstance(stage.shape, UniformFanOutShape)


@pytest.mark.parametrize("stage, shape_type, ins, outs", FAN_IN + FAN_OUT, ids=lambda x: repr(x) if not isinstance(x, (list, type)) else None)
def test_deep_copy_keeps_the_shape_type_and_maps_fresh_ports_to_the_originals(stage, shape_type, ins, outs):
    shape = stage.shape
    copy = shape.deep_copy()
    assert type(copy) is shape_type
    assert [p.name for p in copy.inlets] == ins and [p.name for p in copy.outlets] == outs
    for c, o in zip(copy.inlets + copy.outlets, shape.inlets + shape.outlets):
        assert c is not o and c.mapped_to is o and type(c) is type(o)
    again = copy.deep_copy()
    assert type(again) is shape_type
    assert all(p.origin() is o for p, o in zip(again.inlets + again.outlets, shape.inlets + shape.outlets))


@pytest.mark.parametrize("stage", [s for s, *_ in FAN_IN + FAN_OUT], ids=repr)
def test_junctions_get_an_atomic_traversal_builder(stage):
    assert isinstance(stage.traversal_builder, AtomicTraversalBuilder)


def test_merge_preferred_shape_keeps_its_port_roles_through_deep_copies():
    stage = MergePreferred(3)
    shape = stage.shape
    assert shape.preferred is stage.preferred and shape.out is stage.out
    assert shape.ins == stage.ins and shape.secondary_ports == 3
    assert [shape.in_(i) for i in range(3)] == list(stage.ins)  # in_(i) is the i-th secondary, as Pekko's in(i)
    copy = shape.deep_copy()
    assert isinstance(copy, MergePreferredShape) and isinstance(copy, UniformFanInShape)
    assert copy.preferred.mapped_to is stage.preferred
    assert [p.mapped_to for p in copy.ins] == list(stage.ins)
    assert copy.out.mapped_to is stage.out
    assert copy.inlets[-1] is copy.preferred and len(copy.inlets) == 4


def test_numbered_port_accessors_of_the_n_ary_shapes():
    zip_shape = Zip().shape.deep_copy()
    assert zip_shape.in0 is zip_shape.inlets[0] and zip_shape.in1 is zip_shape.inlets[1]
    assert zip_shape.in_(1) is zip_shape.in1
    unzip_shape = UnzipWith(tuple, 3).shape.deep_copy()
    assert [unzip_shape.out0, unzip_shape.out1, unzip_shape.out2] == list(unzip_shape.outlets)
    assert isinstance(unzip_shape, FanOutShape) and unzip_shape.in_.name == "UnzipWith.in"
    for bad in ("in2", "in01", "inx", "input"):
        with pytest.raises(AttributeError):
            getattr(zip_shape, bad)
    with pytest.raises(AttributeError):
        unzip_shape.out3


def test_shapes_with_numbered_ports_survive_pickling():
    import pickle

    shape = pickle.loads(pickle.dumps(ZipWith(max, 3).shape))
    assert type(shape) is FanInShapeN and [p.name for p in shape.inlets] == ["ZipWith.in0", "ZipWith.in1", "ZipWith.in2"]
    shape = pickle.loads(pickle.dumps(MergePreferred(1).shape))
    assert type(shape) is MergePreferredShape and shape.preferred.name == "MergePreferred.preferred"


def test_a_junction_blueprint_can_be_materialized_more_than_once():
    stage = Merge(2)
    for _ in range(2):
        s = JunctionSetup(stage)
        assert s.feed([[1], [2]]) == [[1, 2]]
        assert s.interpreter.is_completed


# ---------------------------------------------------------------------------------------------- GraphInterpreterSpec


def test_interpreter_zip():
    s = JunctionSetup(Zip(), start=False)
    source1, source2 = s.ups
    sink = s.down
    assert s.last_events() == set()
    sink.request_one()
    assert s.last_events() == {RequestOne(source1), RequestOne(source2)}
    source1.on_next(42)
    assert s.last_events() == set()
    source2.on_next("Meaning of life")
    assert s.last_events() == {OnNext((42, "Meaning of life"), sink), RequestOne(source1), RequestOne(source2)}


def test_interpreter_broadcast():
    s = JunctionSetup(Broadcast(2), start=False)
    source = s.up
    sink1, sink2 = s.downs
    assert s.last_events() == set()
    sink1.request_one()
    assert s.last_events() == set()
    sink2.request_one()
    assert s.last_events() == {RequestOne(source)}
    source.on_next(1)
    assert s.last_events() == {OnNext(1, sink1), OnNext(1, sink2)}


def test_interpreter_merge():
    s = JunctionSetup(Merge(2), start=False)
    source1, source2 = s.ups
    sink = s.down
    assert s.last_events() == set()
    sink.request_one()
    assert s.last_events() == {RequestOne(source1), RequestOne(source2)}
    source1.on_next(1)
    assert s.last_events() == {OnNext(1, sink), RequestOne(source1)}
    source2.on_next(2)
    assert s.last_events() == set()
    sink.request_one()
    assert s.last_events() == {OnNext(2, sink), RequestOne(source2)}
    sink.request_one()
    assert s.last_events() == set()
    source2.on_next(3)
    assert s.last_events() == {OnNext(3, sink), RequestOne(source2)}
    sink.request_one()
    assert s.last_events() == set()
    source1.on_next(4)
    assert s.last_events() == {OnNext(4, sink), RequestOne(source1)}


def test_interpreter_balance():
    s = JunctionSetup(Balance(2), start=False)
    source = s.up
    sink1, sink2 = s.downs
    assert s.last_events() == set()
    sink1.request_one()
    assert s.last_events() == {RequestOne(source)}
    sink2.request_one()
    assert s.last_events() == set()
    source.on_next(1)
    assert s.last_events() == {OnNext(1, sink1), RequestOne(source)}
    source.on_next(2)
    assert s.last_events() == {OnNext(2, sink2)}


def _wire(kit, stages, connections):
    """Add stages (returns their logics) and connect ``(outlet, inlet)`` pairs."""
    logics = [kit.add(st) for st in stages]
    for out, in_ in connections:
        kit.connect(out, in_)
    return logics


def test_interpreter_broadcast_zip():
    kit = Kit()
    source, sink = kit.add(kit.upstream("source")), kit.add(kit.downstream("sink"))
    zip_, bcast = Zip(), Broadcast(2)
    _wire(kit, [zip_, bcast], [(source.out, bcast.in_), (bcast.outs[0], zip_.ins[0]), (bcast.outs[1], zip_.ins[1]), (zip_.out, sink.in_)])
    kit.init()
    assert kit.last_events() == set()
    sink.request_one()
    assert kit.last_events() == {RequestOne(source)}
    source.on_next(1)
    assert kit.last_events() == {OnNext((1, 1), sink), RequestOne(source)}
    sink.request_one()
    source.on_next(2)
    assert kit.last_events() == {OnNext((2, 2), sink), RequestOne(source)}


def test_interpreter_zip_broadcast():
    kit = Kit()
    source1, source2 = kit.add(kit.upstream("source1")), kit.add(kit.upstream("source2"))
    sink1, sink2 = kit.add(kit.downstream("sink1")), kit.add(kit.downstream("sink2"))
    zip_, bcast = Zip(), Broadcast(2)
    _wire(
        kit,
        [bcast, zip_],
        [(source1.out, zip_.ins[0]), (source2.out, zip_.ins[1]), (zip_.out, bcast.in_), (bcast.outs[0], sink1.in_), (bcast.outs[1], sink2.in_)],
    )
    kit.init()
    assert kit.last_events() == set()
    sink1.request_one()
    assert kit.last_events() == {RequestOne(source1), RequestOne(source2)}
    sink2.request_one()
    source1.on_next(1)
    assert kit.last_events() == set()
    source2.on_next(2)
    assert kit.last_events() == {OnNext((1, 2), sink1), OnNext((1, 2), sink2), RequestOne(source1), RequestOne(source2)}


def test_interpreter_non_divergent_cycle():
    kit = Kit()
    source, sink = kit.add(kit.upstream("source")), kit.add(kit.downstream("sink"))
    merge, balance = Merge(2), Balance(2)
    _wire(
        kit,
        [merge, balance],
        [(source.out, merge.ins[0]), (merge.out, balance.in_), (balance.outs[0], sink.in_), (balance.outs[1], merge.ins[1])],
    )
    kit.init()
    assert kit.last_events() == set()
    sink.request_one()
    assert kit.last_events() == {RequestOne(source)}
    source.on_next(1)
    assert kit.last_events() == {OnNext(1, sink), RequestOne(source)}
    source.on_next(2)  # the token enters the merge-balance cycle and gets stuck
    assert kit.last_events() == {RequestOne(source)}
    sink.request_one()  # unstuck it
    assert kit.last_events() == {OnNext(2, sink)}


def _detacher():
    class Logic(IdentityLogic):
        def pre_start(self):
            self.try_pull(self.in_)

        def on_push(self):
            if self.is_available(self.out):
                self.push(self.out, self.grab(self.in_))
                self.try_pull(self.in_)

        def on_upstream_finish(self):
            if not self.is_available(self.in_):
                self.complete_stage()

        def on_pull(self):
            if self.is_available(self.in_):
                self.push(self.out, self.grab(self.in_))
                if self.is_closed(self.in_):
                    self.complete_stage()
                else:
                    self.pull(self.in_)

    return LinearStage("Detacher", Logic)


def test_interpreter_divergent_cycle():
    kit = Kit()
    source, sink = kit.add(kit.upstream("source")), kit.add(kit.downstream("sink"))
    detach, balance, merge = _detacher(), Balance(2), Merge(2)
    _wire(
        kit,
        [detach, balance, merge],
        [
            (source.out, merge.ins[0]),
            (merge.out, balance.in_),
            (balance.outs[0], sink.in_),
            (balance.outs[1], detach.in_),
            (detach.out, merge.ins[1]),
        ],
    )
    kit.init()
    assert kit.last_events() == set()
    sink.request_one()
    assert kit.last_events() == {RequestOne(source)}
    source.on_next(1)
    assert kit.last_events() == {OnNext(1, sink), RequestOne(source)}
    # the token enters the merge-balance cycle and spins until the event limit
    source.on_next(2, event_limit=1000)
    assert kit.last_events() == {RequestOne(source)}
    assert kit.interpreter.is_suspended  # still alive, just suspended by the limit
    # the fairness of the event queue and of Balance lets the element leave the cycle
    sink.request_one()
    assert kit.last_events() == {OnNext(2, sink)}
    assert not kit.interpreter.is_suspended


# ---------------------------------------------------------------------------------------------- two inputs, common cases

TWO_INPUTS = {
    "merge": lambda: Merge(2),
    "merge_eager": lambda: Merge(2, eager_complete=True),
    "merge_preferred": lambda: MergePreferred(1),
    "merge_prioritized": lambda: MergePrioritized([2, 8], seed=7),
    "merge_sorted": lambda: MergeSorted(),
    "merge_latest": lambda: MergeLatest(2),
    "zip": lambda: Zip(),
    "zip_with": lambda: ZipWith(lambda a, b: a + b),
    "zip_latest": lambda: ZipLatest(),
    "zip_latest_with": lambda: ZipLatestWith(lambda a, b: a + b),
    "concat": lambda: Concat(),
    "concat_attached": lambda: Concat(2, detached_inputs=False),
    "interleave": lambda: Interleave(2, 2),
    "or_else": lambda: OrElse(),
}

#: what ``[] + [1, 2, 3, 4]`` (either order) gives
ONE_EMPTY_ONE_NONEMPTY = {
    "merge": [1, 2, 3, 4],
    "merge_eager": [],  # the empty input completes the merge at once
    "merge_preferred": [1, 2, 3, 4],
    "merge_prioritized": [1, 2, 3, 4],
    "merge_sorted": [1, 2, 3, 4],
    "merge_latest": [],  # never every input delivered an element
    "zip": [],
    "zip_with": [],
    "zip_latest": [],
    "zip_latest_with": [],
    "concat": [1, 2, 3, 4],
    "concat_attached": [1, 2, 3, 4],
    "interleave": [1, 2, 3, 4],
    "or_else": [1, 2, 3, 4],
}

two_inputs = pytest.mark.parametrize("name", list(TWO_INPUTS))


def _only(events, *kinds):
    return {e for e in events if isinstance(e, kinds)}


@two_inputs
def test_two_immediately_completed_publishers(name):
    s = JunctionSetup(TWO_INPUTS[name](), start=False)
    for up in s.ups:
        up.complete_out()
    s.kit.run()
    assert s.last_events() == {OnComplete(s.down)}
    assert s.interpreter.is_completed


@two_inputs
def test_two_delayed_completed_publishers(name):
    s = JunctionSetup(TWO_INPUTS[name]())
    s.down.request_one()
    for up in s.ups:
        up.on_complete()
    events = s.last_events()
    assert _only(events, OnNext, OnComplete, OnError) == {OnComplete(s.down)}
    assert s.interpreter.is_completed


@two_inputs
@pytest.mark.parametrize("immediate", [0, 1])
def test_one_immediately_completed_and_one_delayed_completed_publisher(name, immediate):
    s = JunctionSetup(TWO_INPUTS[name](), start=False)
    s.ups[immediate].complete_out()
    s.kit.run()
    if not s.down.closed:  # an eager junction completed already
        s.down.request_one()
    if not s.ups[1 - immediate].closed:
        s.ups[1 - immediate].on_complete()
    assert _only(s.last_events(), OnNext, OnComplete, OnError) == {OnComplete(s.down)}
    assert s.interpreter.is_completed


@two_inputs
def test_two_immediately_failed_publishers(name):
    exc = Boom("test")
    s = JunctionSetup(TWO_INPUTS[name](), start=False)
    for up in s.ups:
        up.fail_out(exc)
    s.kit.run()
    assert s.last_events() == {OnError(exc, s.down)}
    assert s.interpreter.is_completed


@two_inputs
def test_two_delayed_failed_publishers(name):
    exc = Boom("test")
    s = JunctionSetup(TWO_INPUTS[name]())
    s.down.request_one()
    s.ups[0].fail_out(exc)
    s.ups[1].fail_out(exc)
    s.kit.run()
    assert _only(s.last_events(), OnNext, OnComplete, OnError) == {OnError(exc, s.down)}
    assert s.interpreter.is_completed


@two_inputs
@pytest.mark.parametrize("immediate", [0, 1], ids=["case1", "case2"])
def test_one_immediately_failed_and_one_delayed_failed_publisher(name, immediate):
    exc = Boom("test")
    s = JunctionSetup(TWO_INPUTS[name](), start=False)
    s.ups[immediate].fail_out(exc)
    s.kit.run()
    assert s.down.closed
    other = s.ups[1 - immediate]
    events = s.last_events()
    assert _only(events, OnNext, OnComplete, OnError) == {OnError(exc, s.down)}
    # the other input is cancelled if it was still open (after the start-up pull, if the junction pulls)
    assert events - {OnError(exc, s.down)} <= {Cancel(exc, other), RequestOne(other)}
    assert other.closed
    assert s.interpreter.is_completed


@two_inputs
@pytest.mark.parametrize("empty", [0, 1], ids=["completed_first", "completed_second"])
def test_one_immediately_completed_and_one_nonempty_publisher(name, empty):
    s = JunctionSetup(TWO_INPUTS[name](), start=False)
    sources = [[1, 2, 3, 4], [1, 2, 3, 4]]
    sources[empty] = []
    (received,) = s.feed(sources)
    assert received == ONE_EMPTY_ONE_NONEMPTY[name]
    assert OnComplete(s.down) in s.kit.log
    assert s.interpreter.is_completed


@two_inputs
@pytest.mark.parametrize("empty", [0, 1], ids=["completed_first", "completed_second"])
def test_one_delayed_completed_and_one_nonempty_publisher(name, empty):
    s = JunctionSetup(TWO_INPUTS[name]())
    s.down.request_one()
    s.ups[empty].on_complete()  # completes only once it has been asked (TestPublisher.lazyEmpty)
    sources = [[1, 2, 3, 4], [1, 2, 3, 4]]
    sources[empty] = None
    (received,) = s.feed(sources)
    assert s.received(s.down) == ONE_EMPTY_ONE_NONEMPTY[name] == received
    assert OnComplete(s.down) in s.kit.log
    assert s.interpreter.is_completed


@two_inputs
@pytest.mark.parametrize("failed", [0, 1], ids=["failed_first", "failed_second"])
def test_one_immediately_failed_and_one_nonempty_publisher(name, failed):
    exc = Boom("test")
    s = JunctionSetup(TWO_INPUTS[name](), start=False)
    s.ups[failed].fail_out(exc)
    sources = [[1, 2, 3, 4], [1, 2, 3, 4]]
    sources[failed] = None
    s.feed(sources)
    assert OnError(exc, s.down) in s.kit.log
    assert s.received(s.down) == []  # the failure is seen before any element could pass
    assert s.interpreter.is_completed


@two_inputs
def test_pass_along_early_cancellation(name):
    s = JunctionSetup(TWO_INPUTS[name](), start=False)
    s.down.cancel_and_run()
    events = s.last_events()
    assert _only(events, Cancel) == {Cancel(NO_MORE_ELEMENTS_NEEDED, up) for up in s.ups}
    assert events - _only(events, Cancel) <= {RequestOne(up) for up in s.ups}  # start-up pulls, queued before
    assert s.interpreter.is_completed


@two_inputs
def test_downstream_cancel_with_a_failure_cancels_every_input_with_it(name):
    exc = Boom("downstream failed")
    s = JunctionSetup(TWO_INPUTS[name]())
    s.down.cancel_and_run(exc)
    assert _only(s.last_events(), Cancel) == {Cancel(exc, up) for up in s.ups}
    assert s.interpreter.is_completed


@two_inputs
def test_completion_cancels_open_inputs_with_stage_was_completed_or_no_more_elements(name):
    """Whatever the reason a fan-in junction stops, every input it leaves open is cancelled."""
    s = JunctionSetup(TWO_INPUTS[name]())
    s.down.request_one()
    s.ups[0].on_complete()
    if not s.interpreter.is_completed:
        s.ups[1].on_complete()
    assert s.interpreter.is_completed
    for e in s.kit.log:
        if isinstance(e, Cancel):
            assert e.payload in (STAGE_WAS_COMPLETED, NO_MORE_ELEMENTS_NEEDED)
