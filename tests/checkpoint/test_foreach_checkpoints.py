"""Sink.foreach (and Sink.foreach_async) under checkpoints: at-least-once.

A first run passes ``cut`` elements, takes a checkpoint, passes more (up to ``stop``), then fails; a second run
restores the checkpoint. Every element is seen (nothing lost); the elements seen twice are exactly those the
first run saw after the checkpoint's cut and before it stopped; each run sees its elements in stream order; the
restored run's future completes once with Done. A stop_with_checkpoint followed by a restore repeats nothing."""
from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest

from atoll import CheckpointSettings, Done, Flow, Keep, Materializer, Sink, Source

N = 300


from atoll.testkit.valve import Valve as _Valve  # noqa: E402


def _done(x):
    f = Future()
    f.set_result(x)
    return f


def _sink(kind, seen):
    if kind == "foreach":
        return Sink.foreach(seen.append)
    return Sink.foreach_async(4, lambda x: _done(seen.append(x)))


def _mat(tmp_path, fusion):
    return Materializer.local(fusion=fusion, checkpoint=CheckpointSettings(storage=str(tmp_path / "checkpoints")))


def _wait_for(cond, timeout=10.0):
    ev = threading.Event()
    for _ in range(int(timeout / 0.01)):
        if cond():
            return True
        ev.wait(0.01)
    return cond()


@pytest.mark.parametrize("kind", ["foreach", "foreach_async"])
@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("cut,stop", [(0, 40), (100, 101), (100, 250), (299, 299)])
def test_a_restore_repeats_exactly_the_elements_after_the_cut(tmp_path, kind, fusion, cut, stop):
    first, second = [], []
    valve = _Valve(cut)
    mat = _mat(tmp_path, fusion)
    try:
        done = (Source.range(0, N).via(Flow.from_graph(valve)).to_mat(_sink(kind, first), Keep.right)
                .run(mat, name="fe"))
        g = mat.running_graph("fe")
        assert valve.reached.wait(20)
        assert _wait_for(lambda: len(first) >= cut)  # the valve passed them; the sink has called fn for each
        info = g.checkpoint_now(timeout=20)
        at_cut = len(first)
        if stop > cut:
            valve.open_to(stop)
            assert valve.reached.wait(20)
        assert _wait_for(lambda: len(first) >= stop)
        g.cancel(RuntimeError("injected failure"))
        with pytest.raises(RuntimeError, match="injected failure"):
            done.result(20)
        assert g.wait(20)
    finally:
        mat.shutdown()
    mat = Materializer.local(fusion=fusion)
    try:
        done = (Source.range(0, N).via(Flow.from_graph(_Valve(N))).to_mat(_sink(kind, second), Keep.right)
                .run(mat, restore_from=info))
        assert done.result(20) is Done
    finally:
        mat.shutdown()
    assert at_cut == cut
    assert first == list(range(stop))  # in order, nothing past the valve
    assert second == list(range(cut, N))  # the restore starts at the cut
    assert sorted(set(first) | set(second)) == list(range(N))  # nothing lost
    assert sorted(set(first) & set(second)) == list(range(cut, stop))  # seen twice: after the cut, before the stop


@pytest.mark.parametrize("kind", ["foreach", "foreach_async"])
@pytest.mark.parametrize("fusion", [True, False])
def test_stop_with_checkpoint_then_restore_sees_every_element_once(tmp_path, kind, fusion):
    first, second = [], []
    valve = _Valve(123)
    mat = _mat(tmp_path, fusion)
    try:
        done = (Source.range(0, N).via(Flow.from_graph(valve)).to_mat(_sink(kind, first), Keep.right)
                .run(mat, name="fe-stop"))
        assert valve.reached.wait(20)
        info = mat.running_graph("fe-stop").stop_with_checkpoint(20)
        with pytest.raises(Exception, match="stopped with checkpoint"):
            done.result(20)
    finally:
        mat.shutdown()
    mat = _mat(tmp_path, fusion)  # restored with checkpoints on: later checkpoints change nothing
    try:
        done = (Source.range(0, N).via(Flow.from_graph(_Valve(N))).to_mat(_sink(kind, second), Keep.right)
                .run(mat, name="fe-stop-2", restore_from=info))
        assert done.result(20) is Done
    finally:
        mat.shutdown()
    assert first + second == list(range(N))


def test_foreach_across_islands_with_periodic_checkpoints_repeats_only_after_the_restored_cut(tmp_path):
    # checkpoints every 50 ms while elements flow through three islands; the graph is failed mid-stream and
    # restored from its newest checkpoint: what the two runs saw joins into the stream with one repeated run
    first, second = [], []
    valve = _Valve(N // 2)
    mat = Materializer.local(checkpoint=CheckpointSettings(storage=str(tmp_path / "checkpoints"), interval=0.05))
    try:
        done = (Source.range(0, N).throttle(50, 0.05).island().map(lambda x: x).via(Flow.from_graph(valve))
                .island().to_mat(Sink.foreach(first.append), Keep.right).run(mat, name="fe-periodic"))
        g = mat.running_graph("fe-periodic")
        assert valve.reached.wait(30)
        assert _wait_for(lambda: len(g.checkpoints()) >= 2)
        g.cancel(RuntimeError("injected failure"))
        with pytest.raises(RuntimeError):
            done.result(20)
        assert g.wait(20)
        info = g.checkpoints()[-1]
    finally:
        mat.shutdown()
    mat = Materializer.local()
    try:
        done = (Source.range(0, N).throttle(50, 0.05).island().map(lambda x: x).via(Flow.from_graph(_Valve(N)))
                .island().to_mat(Sink.foreach(second.append), Keep.right).run(mat, restore_from=info))
        assert done.result(30) is Done
    finally:
        mat.shutdown()
    assert first == list(range(len(first))) and 0 < len(first) <= N // 2
    assert second and second == list(range(second[0], N))
    assert second[0] <= len(first)  # nothing lost between the runs
    assert sorted(set(first) & set(second)) == list(range(second[0], len(first)))
