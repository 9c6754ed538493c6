"""Where an island's cut lands when a barrier arrives in the middle of a frame and downstream has demand for
everything: exactly-once (``aligned`` and ``logged``) cuts with only the elements before the barrier
delivered - ``logged`` never waits for a slow input, but it must not deliver past the barrier that starts the
cut, or the snapshot would hold effects of elements the upstream source replays after a restore;
``at_least_once`` lets the input run on, so the cut holds the elements after the barrier too. The channel's
publisher is a fake that hands frames in by hand; the island's checkpointer is a real one, polled by the real
thread host between turns. No Ray is started."""
from __future__ import annotations

import queue
import threading

import pytest

from atoll import Flow, Keep, KillSwitches, Sink, Source
from atoll._impl.islands.boundaries import ChannelBarrier, FrameSignals, InputBoundary
from atoll._impl.islands.checkpointer import IslandCheckpointer
from atoll._impl.ops.base import SourceStage
from atoll.checkpoint.snapshot import loads
from atoll.stage.signals import Watermark
from atoll.testkit.valve import Valve


class _Publisher:
    request_on_subscribe = False
    windowed = False

    def __init__(self):
        self.subscribed = threading.Event()  # the input boundary subscribes in its pre_start, on the island's thread

    def subscribe(self, subscriber, n: int = 0) -> None:
        self.subscriber = subscriber
        self.subscribed.set()

    def request(self, n: int, seq: int, acked=None) -> None:
        pass

    def cancel(self, cause) -> None:
        pass


class _Input(SourceStage):
    def __init__(self, publisher, logics: list):
        super().__init__("Input")
        self.publisher, self.logics = publisher, logics

    def create_logic_and_materialized_value(self, attributes):
        logic = InputBoundary(self.publisher, 16, out=self.out)
        self.logics.append(logic)
        return logic, None


def _attach_checkpointer(boundaries: list, publisher, report, **options) -> IslandCheckpointer:
    """A real checkpointer for the island of the first input boundary (stage keys by position), polled by its thread
    host. It waits until that boundary subscribed to ``publisher``: ``run`` may return before the island's thread
    has built its interpreter, and a boundary subscribes in its ``pre_start``, once the interpreter holds every
    logic."""
    assert publisher.subscribed.wait(10)
    interpreter = boundaries[0]._interpreter
    keys = {id(lg): i for i, lg in enumerate(interpreter.logics)}
    cp = IslandCheckpointer(interpreter.host, interpreter, 0, "island", keys, [], report, **options)
    interpreter.host.checkpointer = cp
    return cp


@pytest.mark.parametrize("guarantee, at_cut", [("aligned", [1]), ("logged", [1]), ("at_least_once", [1, 2, 3])])
def test_an_exactly_once_cut_comes_before_the_elements_after_the_barrier(mat, guarantee, at_cut):
    pub, boundaries, seen, acks = _Publisher(), [], [], queue.Queue()
    attached = threading.Event()

    def record(x):
        attached.wait(5)  # the checkpointer is in place before the first element is delivered
        seen.append(x)
        return x

    done = Source.from_graph(_Input(pub, boundaries)).map(record).run_with(Sink.ignore(), mat)

    def report(kind, index, n, data):
        acks.put((kind, n, list(seen)))

    _attach_checkpointer(boundaries, pub, report, aligned=guarantee != "at_least_once", logged=guarantee == "logged")
    attached.set()
    pub.subscriber.on_subscribe(pub)
    pub.subscriber.on_next(0, [1, 2, 3, FrameSignals([(1, ChannelBarrier(1))])])
    assert acks.get(timeout=10) == ("ack", 1, at_cut)
    pub.subscriber.on_complete()
    done.result(10)
    assert seen == [1, 2, 3]


def _logged_cut_of_a_merge(mat, fast_frame: list, last_fast):
    """A merge of two inputs, ``fast`` and ``slow``, under a logged checkpointer: ``fast_frame`` (with barrier 1) goes
    to ``fast`` and the cut is made once ``last_fast`` went by (the fast input ran on past its barrier, the slow one
    is logged from now on). Returns ``(fast, slow, acks, seen, done)``."""
    fast, slow, boundaries, seen, acks = _Publisher(), _Publisher(), [], [], queue.Queue()
    attached, moved = threading.Event(), threading.Event()

    def record(x):
        attached.wait(5)
        seen.append(x)
        if x == last_fast:
            moved.set()
        return x

    graph = Source.from_graph(_Input(fast, boundaries)).merge(Source.from_graph(_Input(slow, boundaries)))
    done = graph.map(record).run_with(Sink.ignore(), mat)
    _attach_checkpointer(boundaries, fast, lambda kind, index, n, data: acks.put((kind, n, data)), logged=True)
    attached.set()
    for p in (fast, slow):
        assert p.subscribed.wait(10)
        p.subscriber.on_subscribe(p)
    fast.subscriber.on_next(0, fast_frame)
    assert moved.wait(10)  # cut at the fast barrier, then the fast input went on past it
    return fast, slow, acks, seen, done


def test_logged_cut_releases_the_input_it_held_and_logs_the_other_until_its_barrier(mat):
    fast, slow, acks, seen, done = _logged_cut_of_a_merge(
        mat, ["f1", "f2", "f3", FrameSignals([(1, ChannelBarrier(1))])], "f3")
    assert acks.empty()  # the slow input is logged until its barrier comes
    slow.subscriber.on_next(0, ["s1", FrameSignals([(1, ChannelBarrier(1))])])
    kind, n, data = acks.get(timeout=10)
    assert (kind, n) == ("ack", 1)
    snap = loads(data)
    assert [f.elements for f in snap.in_flight] == [["s1"]]  # the slow input's log: replayed after a restore
    for p in (fast, slow):
        p.subscriber.on_complete()
    done.result(10)
    assert sorted(seen) == ["f1", "f2", "f3", "s1"]


def test_the_log_of_an_input_keeps_the_signals_among_its_elements(mat):
    # the slow input is logged from the cut to its barrier: the watermarks among the logged elements are recorded at
    # their places (they were dropped, so a restore replayed the elements without them)
    fast, slow, acks, _seen, done = _logged_cut_of_a_merge(mat, ["f1", "f2", FrameSignals([(1, ChannelBarrier(1))])],
                                                           "f2")
    slow.subscriber.on_next(0, ["s1", "s2", FrameSignals([(1, Watermark(7))])])
    slow.subscriber.on_next(1, ["s3", FrameSignals([(0, Watermark(9)), (1, ChannelBarrier(1))])])
    kind, n, data = acks.get(timeout=10)
    assert (kind, n) == ("ack", 1)
    [f] = loads(data).in_flight
    assert (f.elements, f.signals) == (["s1", "s2", "s3"], [(1, Watermark(7)), (2, Watermark(9))])
    for p in (fast, slow):
        p.subscriber.on_complete()
    done.result(10)


@pytest.mark.parametrize("stop", ["cancel", "shutdown", None])
def test_an_input_dropping_elements_before_the_barrier_ahead_of_the_cut_declines_the_checkpoint(mat, stop):
    # the valve passes element 1 only, so 2 and 3 (before the barrier) wait in the input's buffer: channel state the
    # cut must hold. When the frame bringing them and the island's cancel are served in one turn, before the cut, the
    # input clears that buffer: a cut would miss them and a restore would never replay them, so the checkpoint is
    # declined. A kill switch's shutdown cancels the valve and so the input too, but the cut records the switch and
    # the valve finished: a restore ends the same way and nothing asks for 2 and 3 again, so that cut is taken.
    # Without a stop the same cut holds them.
    pub, boundaries, acks = _Publisher(), [], queue.Queue()
    holding, go_on = threading.Event(), threading.Event()
    valve = Valve(1)

    def hold(x):  # the island's thread waits here while the barrier's frame (and the stop) are posted
        holding.set()
        assert go_on.wait(10)
        return x

    switch, done = (Source.from_graph(_Input(pub, boundaries)).via(Flow.from_graph(valve))
                    .via_mat(KillSwitches.single(), Keep.right).map(hold).to_mat(Sink.seq(), Keep.both).run(mat))
    host = _attach_checkpointer(boundaries, pub, lambda kind, index, n, data: acks.put((kind, n, data))).host
    pub.subscriber.on_subscribe(pub)
    pub.subscriber.on_next(0, [1])
    assert holding.wait(10)
    pub.subscriber.on_next(1, [2, 3, FrameSignals([(2, ChannelBarrier(1))])])
    if stop == "cancel":
        host.cancel(RuntimeError("operator stop"))
    elif stop == "shutdown":
        switch.shutdown()
    go_on.set()
    kind, n, data = acks.get(timeout=10)
    if stop == "cancel":
        assert (kind, n) == ("decline", 1), (kind, n, data)
        assert "checkpoint 1 declined: a failure travelled through the island" in str(data)
        assert "operator stop" in str(data)
        with pytest.raises(RuntimeError, match="operator stop"):
            done.result(10)
    elif stop == "shutdown":
        assert (kind, n) == ("ack", 1), (kind, n, data)
        snap = loads(data)
        assert snap.in_flight == []
        assert len(snap.ended) >= 2  # the kill switch and the valve
        assert done.result(10) == [1]
    else:
        assert (kind, n) == ("ack", 1), (kind, n, data)
        assert [f.elements for f in loads(data).in_flight] == [[2, 3]]
        valve.open_to(10)
        pub.subscriber.on_complete()
        assert done.result(10) == [1, 2, 3]
