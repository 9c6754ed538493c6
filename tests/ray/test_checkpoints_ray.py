"""Checkpoints on Materializer.ray: barriers cross actor channels, island actors write their blobs, the driver's
coordinator writes the manifest; restore_from starts new actors from the checkpoint. Automatic recovery after an
island dies is not built yet (see the issue's closing note)."""
from __future__ import annotations

import operator
import os

import pytest

from atoll import CheckpointNotSupportedError, CheckpointSettings, Keep, Materializer, Sink, Source
from atoll.testkit import TestSink

from ray_helpers import wait_no_island_actors

N = 1000


def _graph():
    return (Source.range(0, N).map(lambda x: x + 1).island().map(lambda x: x * 2).island()
            .to_mat(TestSink.probe(), Keep.right))


def _rest(probe) -> list:
    probe.request(10 * N)
    got = []
    while True:
        ev = probe.expect_event()
        if ev[0] != "next":
            assert ev[0] == "complete", ev
            return got
        got.append(ev[1])


@pytest.fixture(scope="module")
def ckpt_mat(ray_session, tmp_path_factory):
    m = Materializer.ray(start_timeout=30, checkpoint=CheckpointSettings(storage=str(tmp_path_factory.mktemp("ck"))))
    yield m
    m.shutdown()


@pytest.mark.parametrize("after", [1, 10, 500])
def test_a_ray_graph_stopped_with_a_checkpoint_restores_exactly(ckpt_mat, ray_mat, after):
    probe = _graph().run(ckpt_mat, name=f"stop-{after}")
    probe.request(after)
    got = probe.expect_next_n(after)
    g = ckpt_mat.running_graph(f"stop-{after}")
    info = g.stop_with_checkpoint(timeout=30)
    assert sorted(os.listdir(info.path)) == ["_MANIFEST.json", "island-000-a0.bin", "island-001-a0.bin",
                                             "island-002-a0.bin"]
    assert g.wait(30)
    rest = _rest(_graph().run(ray_mat, restore_from=info))
    assert got + rest == [2 * (x + 1) for x in range(N)]
    assert wait_no_island_actors() == []


def test_a_fold_checkpointed_while_it_runs_restores_to_the_same_total(ckpt_mat, ray_mat):
    n = 300_000
    graph = Source.range(0, n).island().map(lambda x: x % 7).island().to_mat(Sink.fold(0, operator.add), Keep.right)
    total = graph.run(ckpt_mat, name="fold")
    try:
        info = ckpt_mat.running_graph("fold").stop_with_checkpoint(timeout=30)
    except LookupError:  # the machine was fast enough to finish first: nothing to restore
        assert total.result(30) == sum(x % 7 for x in range(n))
        return
    assert graph.run(ray_mat, restore_from=info).result(60) == sum(x % 7 for x in range(n))
    assert wait_no_island_actors() == []


def test_repeated_checkpoints_on_ray_keep_ids_and_the_stream(ckpt_mat):
    probe = _graph().run(ckpt_mat, name="repeat")
    probe.request(5)
    probe.expect_next_n(5)
    g = ckpt_mat.running_graph("repeat")
    assert [g.checkpoint_now(timeout=30).id for _ in range(3)] == [1, 2, 3]
    assert _rest(probe) == [2 * (x + 1) for x in range(5, N)]
    assert g.wait(30)
    assert wait_no_island_actors() == []


def test_refused_before_any_actor_starts(ckpt_mat):
    with pytest.raises(CheckpointNotSupportedError, match="from_iterator"):
        Source.from_iterator(lambda: iter(range(3))).island().map(lambda x: x).run_with(Sink.seq(), ckpt_mat)
    assert wait_no_island_actors() == []


@pytest.mark.parametrize("guarantee,alignment", [("at_least_once", "aligned"), ("exactly_once", "logged")])
def test_a_fan_in_on_ray_checkpoints_without_holding_inputs_and_restores(ray_session, ray_mat, tmp_path, guarantee,
                                                                        alignment):
    def graph():
        slow = Source.range(0, 200).throttle(100, 0.1).map(lambda x: ("slow", x)).island()
        fast = Source.range(0, 5000).map(lambda x: ("fast", x)).island()
        return slow.merge(fast).island().to_mat(TestSink.probe(), Keep.right)

    mat = Materializer.ray(start_timeout=30, checkpoint=CheckpointSettings(storage=str(tmp_path), guarantee=guarantee,
                                                                          alignment=alignment))
    try:
        probe = graph().run(mat, name="fan-in")
        probe.request(50)
        got = probe.expect_next_n(50)
        g = mat.running_graph("fan-in")
        assert g.checkpoint_now(timeout=30).id == 1
        info = g.stop_with_checkpoint(timeout=30)
        assert g.wait(30)
    finally:
        mat.shutdown()
    got += _rest(graph().run(ray_mat, restore_from=info))
    for side, n in (("slow", 200), ("fast", 5000)):
        seen = [x for s, x in got if s == side]
        assert set(seen) == set(range(n)), side  # nothing lost
        if guarantee == "exactly_once":
            assert seen == list(range(n)), side  # nothing repeated, each side in order
    assert wait_no_island_actors() == []


def _window_events():
    """(ts, key, value): four keys, timestamps ~3 apart with disorder, every 9th element 30-60 behind (late)."""
    import random

    r = random.Random(4)
    out = []
    for i in range(400):
        ts = 3 * i + r.randint(0, 5)
        if i % 9 == 8:
            ts -= r.randint(30, 60)
        out.append((ts, "k%d" % r.randrange(4), r.randint(0, 20)))
    return out


def _sessions(events, sink):
    from atoll import Aggregate

    return (Source.from_iterable(events).with_timestamps(lambda e: e[0]).island()
            .session_window(15, key=lambda e: e[1], aggregate=Aggregate.max(lambda e: e[2]))
            .map(lambda w: (w.key, w.start, w.end, w.value, w.timing)).to_mat(sink, Keep.right))


@pytest.mark.parametrize("after", [1, 20])
def test_windows_behind_a_channel_restore_with_the_watermarks_between_their_elements(ray_session, ray_mat, tmp_path,
                                                                                     after):
    # the window island's input held elements and the watermarks between them at the cut: both are re-sent in
    # order, so the restored windows take and drop the same late elements (before, the watermarks were lost and
    # a restored session took elements that had been late: 132 or 134 sessions instead of 135)
    events = _window_events()
    local = Materializer.local()
    try:
        want = _sessions(events, Sink.seq()).run(local).result(30)
    finally:
        local.shutdown()
    # chunks of 4 and the probe in the windows' island: the windows take a few elements per pull and stop while
    # results wait for the probe's demand, so that island's input holds the rest - elements and the watermarks
    # between them - at the cut
    mat = Materializer.ray(start_timeout=30, chunk_size=4, checkpoint=CheckpointSettings(storage=str(tmp_path)))
    try:
        probe = _sessions(events, TestSink.probe()).run(mat, name=f"sessions-{after}")
        probe.request(after)
        got = probe.expect_next_n(after)
        info = mat.running_graph(f"sessions-{after}").stop_with_checkpoint(timeout=30)
    finally:
        mat.shutdown()
    got += _rest(_sessions(events, TestSink.probe()).run(ray_mat, restore_from=info))
    assert sorted(got) == sorted(want)
    assert wait_no_island_actors() == []
