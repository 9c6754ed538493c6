"""How an island with several inputs takes its cut, per ``CheckpointSettings``: ``aligned`` exactly-once (the
default) holds an input at its barrier until every input has delivered theirs, and a restore repeats nothing;
``guarantee="at_least_once"`` never holds one (the cut comes once every input saw its barrier) and a restore
repeats what a fast input delivered after its barrier; ``alignment="logged"`` never holds one either, cuts at
the first barrier and records what the other inputs deliver until theirs come: a restore repeats nothing."""
from __future__ import annotations

import threading
from collections import Counter

import pytest

from atoll import CheckpointSettings, Keep, Materializer, Sink, Source
from atoll.testkit import TestSink

FAST = 4000
SLOW = 10


def _merge(release: threading.Event, held: threading.Event, seen: list):
    """A slow island that stops at its 5th element until ``release`` is set (``held`` says it stopped), and a
    fast island of ``FAST`` elements at 2000/s, merged in a third island; ``seen[0]`` counts the fast
    elements through the merge."""

    def slow_step(x):
        if x == 5 and not release.is_set():
            held.set()
            release.wait(60)
        return ("slow", x)

    def count(p):
        if p[0] == "fast":
            seen[0] += 1
        return p

    slow = Source.range(0, SLOW).map(slow_step).island()
    fast = Source.range(0, FAST).throttle(200, 0.1).map(lambda x: ("fast", x)).island()
    return slow.merge(fast).map(count).island()


def _wait_for(condition, what: str, timeout: float = 30.0) -> None:
    expired = threading.Event()
    timer = threading.Timer(timeout, expired.set)
    timer.start()
    try:
        while not condition():
            assert not expired.is_set(), f"{what}: not reached within {timeout}s"
            expired.wait(0.005)
    finally:
        timer.cancel()


def _run_with_a_lagging_input(tmp_path, guarantee: str, alignment: str = "aligned"):
    """Checkpoint 1 taken while the slow island is held; returns (checkpoint, result, fast elements through
    the merge while the checkpoint waited for the slow island, the islands' status then)."""
    release, held, seen = threading.Event(), threading.Event(), [0]
    mat = Materializer.local(checkpoint=CheckpointSettings(storage=str(tmp_path), guarantee=guarantee,
                                                           alignment=alignment, retain_on_success=True))
    taken: dict = {}
    try:
        result = _merge(release, held, seen).to_mat(Sink.seq(), Keep.right).run(mat, name="lag")
        g = mat.running_graph("lag")
        assert held.wait(30)
        t = threading.Thread(target=lambda: taken.setdefault("info", g.checkpoint_now(timeout=60)))
        t.start()
        _wait_for(lambda: g.checkpoint_status()["in_progress"] is not None, "a checkpoint in progress")
        if guarantee == "at_least_once" or alignment == "logged":
            _wait_for(lambda: seen[0] == FAST, "every fast element through the merge while the checkpoint waits")
        else:
            # one of the merge island's two inputs (the fast one) stands at its barrier, the other is awaited
            _wait_for(lambda: any(s.get("waiting_for") == [">merge"] for s in g.checkpoint_status()["islands"].values()),
                      "the merge island waiting for its slow input only")
        status = g.checkpoint_status()
        through = seen[0]
        release.set()
        t.join(60)
        return taken["info"], result.result(30), through, status
    finally:
        release.set()
        mat.shutdown()


def _restored(info) -> list:
    release, held, seen = threading.Event(), threading.Event(), [0]
    release.set()
    mat = Materializer.local()
    try:
        return _merge(release, held, seen).to_mat(Sink.seq(), Keep.right).run(mat, restore_from=info).result(30)
    finally:
        mat.shutdown()


def _sides(got) -> tuple:
    return [x for s, x in got if s == "fast"], [x for s, x in got if s == "slow"]


def test_at_least_once_lets_a_fast_input_run_past_its_barrier_and_a_restore_repeats_what_it_delivered(tmp_path):
    info, first, through, status = _run_with_a_lagging_input(tmp_path, "at_least_once")
    assert info.id == 1
    assert through == FAST and status["in_progress"] is not None  # all of it, while the checkpoint waited
    fast, slow = _sides(first)
    assert fast == list(range(FAST)) and slow == list(range(SLOW))
    fast, slow = _sides(_restored(info))
    counts = Counter(fast)
    assert set(counts) == set(range(FAST)) and set(slow) == set(range(SLOW))  # nothing lost
    assert max(counts.values()) == 2  # what went past the fast barrier before the cut comes again


def test_exactly_once_holds_a_fast_input_at_its_barrier_and_a_restore_repeats_nothing(tmp_path):
    info, first, through, status = _run_with_a_lagging_input(tmp_path, "exactly_once")
    assert info.id == 1
    assert through < FAST
    fast, slow = _sides(first)
    assert fast == list(range(FAST)) and slow == list(range(SLOW))
    fast, slow = _sides(_restored(info))
    assert sorted(fast) == list(range(FAST)) and sorted(slow) == list(range(SLOW))


def test_logged_alignment_lets_a_fast_input_run_on_and_a_restore_repeats_nothing(tmp_path):
    info, first, through, status = _run_with_a_lagging_input(tmp_path, "exactly_once", "logged")
    assert info.id == 1
    assert through == FAST and status["in_progress"] is not None  # all of it, while the checkpoint waited
    # the merge island cut at the fast barrier and logs its slow input until that barrier comes
    assert [">merge"] in [s.get("logging") for s in status["islands"].values()], status
    fast, slow = _sides(first)
    assert fast == list(range(FAST)) and slow == list(range(SLOW))
    fast, slow = _sides(_restored(info))
    assert sorted(fast) == list(range(FAST)) and slow == list(range(SLOW))  # exactly once, slow side in order


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("at", [0, 5, 200, 398])
def test_logged_alignment_round_trips_a_zip_of_two_islands_exactly(tmp_path, fusion, at):
    def make():
        left = Source.range(0, 400).map(lambda x: x * 2).island()
        right = Source.range(0, 400).map(lambda x: -x).island()
        return left.zip(right).map(lambda p: p[0] + p[1])

    expected = [x for x in range(400)]
    mat = Materializer.local(fusion=fusion, checkpoint=CheckpointSettings(storage=str(tmp_path), alignment="logged",
                                                                          retain_on_success=True))
    try:
        probe = make().to_mat(TestSink.probe(), Keep.right).run(mat, name="zip")
        probe.request(at + 1)
        got = probe.expect_next_n(at + 1)
        info = mat.running_graph("zip").stop_with_checkpoint(timeout=30)
    finally:
        mat.shutdown()
    again = Materializer.local(fusion=fusion)
    try:
        probe = make().to_mat(TestSink.probe(), Keep.right).run(again, restore_from=info)
        probe.request(1000)
        rest = probe.expect_next_n(399 - at)
        probe.expect_complete()
    finally:
        again.shutdown()
    assert got + rest == expected


@pytest.mark.parametrize("guarantee", ["banana", "exactly-once"])
def test_an_unknown_guarantee_is_refused_naming_the_argument(guarantee):
    with pytest.raises(ValueError, match="guarantee"):
        CheckpointSettings(guarantee=guarantee)


def test_logged_alignment_needs_exactly_once_and_an_unknown_alignment_is_refused():
    with pytest.raises(ValueError, match="alignment='logged'.*exactly_once"):
        CheckpointSettings(guarantee="at_least_once", alignment="logged")
    with pytest.raises(ValueError, match="alignment must be one of"):
        CheckpointSettings(alignment="unaligned")
