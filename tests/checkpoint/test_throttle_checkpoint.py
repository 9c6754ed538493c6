"""``throttle`` under checkpoints: the element waiting for tokens is the stage's state (saved at the cut, emitted
first after a restore), so a cut never waits for the throttle's timer. Waiting for it starved checkpoints when a
stage of the throttle's own island kept it fed (``recursively`` or ``map_concat`` before it: the throttle takes
the next element in the same event that emits the last, so it is never without one; on Ray no checkpoint
completed while such a stream ran).

The clock is a ManualClock that does not move while the checkpoint is taken: the throttle's timer cannot fire,
so the cut can only happen with the waiting element in the snapshot."""
from __future__ import annotations

import pytest

from atoll import CheckpointSettings, Keep, Materializer, Source
from atoll.testkit import TestSink
from atoll.testkit.clock import ManualClock


def _graph(n: int):
    return Source.range(0, n).throttle(1, 1.0, maximum_burst=1).to_mat(TestSink.probe(), Keep.right)


@pytest.mark.parametrize("n", [10, 2], ids=["source-running", "source-at-its-end"])
def test_the_element_waiting_for_tokens_is_saved_and_emitted_first_after_a_restore(tmp_path, n):
    clock = ManualClock()
    mat = Materializer.local(clock=clock, checkpoint=CheckpointSettings(storage=str(tmp_path)))
    try:
        probe = _graph(n).run(mat, name="throttled")
        probe.request(3)
        assert probe.expect_next() == 0  # the bucket's one token; 1 now waits for the next, at t = 1 s
        info = mat.running_graph("throttled").stop_with_checkpoint(timeout=10)
    finally:
        mat.shutdown()
    assert clock.now() == 0.0  # the timer never fired: 1 is in the checkpoint, not emitted
    clock = ManualClock()
    mat = Materializer.local(clock=clock)
    try:
        probe = _graph(n).run(mat, restore_from=info)
        probe.request(n + 5)
        rest = [probe.expect_next()]  # a restored stage starts with a full bucket: the held element goes at once
        for _ in range(n - 2):
            clock.advance(1.0)
            rest.append(probe.expect_next())
        probe.expect_complete()
        assert rest == list(range(1, n))
    finally:
        mat.shutdown()
