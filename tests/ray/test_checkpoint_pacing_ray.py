"""``CheckpointSettings.min_pause`` on Materializer.ray: the final checkpoint a two-phase-commit sink asks for at the
end of its input travels from the island actor to the driver's coordinator as final (``CheckpointRequested``), so
the end of the stream does not wait for the pause (an hour here, longer than any test runs)."""
from __future__ import annotations

import os

import pyarrow.parquet as pq

from atoll import CheckpointSettings, Keep, KillSwitches, Materializer, Sink, Source

from ray_helpers import wait_no_island_actors

HOUR = 3600.0


def test_the_end_of_a_two_phase_sink_stream_does_not_wait_for_the_pause(ray_session, tmp_path):
    out = tmp_path / "out"
    mat = Materializer.ray(start_timeout=30, checkpoint=CheckpointSettings(storage=str(tmp_path / "chk"),
                                                                           min_pause=HOUR))
    try:
        switch, done = (Source.range(0, 10**9).throttle(100, 0.1).via_mat(KillSwitches.single(), Keep.right)
                        .island().map(lambda x: {"x": x}).to_mat(Sink.to_parquet(str(out)), Keep.both)
                        ).run(mat, name="paced")
        g = mat.running_graph("paced")
        first = g.checkpoint_now(timeout=30)  # the pause runs from here
        switch.shutdown()  # the end of the stream: the sink asks for its final checkpoint
        done.result(60)
        assert g.wait(30)
        assert [c.id for c in g.checkpoints()][-1] == first.id + 1
    finally:
        mat.shutdown()
    got = []
    for name in sorted(os.listdir(out)):
        got.extend(pq.read_table(os.path.join(out, name)).column("x").to_pylist())
    assert got == list(range(len(got))) and got
    assert wait_no_island_actors() == []
