"""What makes an ended island a failed one for checkpoints (``checkpointer.failure_in``): a failure that reached one of
its ends - a sink or an output boundary - not one a stage turned into a completion on its way (``recover``). A failed
island gives no final snapshot, so no later checkpoint of its graph can complete; a cleanly ended one answers every
later checkpoint with its final state."""
from __future__ import annotations

import time

import pytest

from atoll import CheckpointError, CheckpointSettings, Keep, KillSwitches, Materializer, Sink, Source


def _fail(x):
    raise ValueError(f"poison {x}")


def _until_ended(g, island: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while next(i["state"] for i in g.islands() if i["name"] == island) == "running":
        assert time.monotonic() < deadline, f"{island} did not end"
        time.sleep(0.01)


def _side_island_then_checkpoint(tmp_path, side):
    """``side`` in an island of its own, merged into an endless throttled line; once the side's island ended, a
    checkpoint of the graph."""
    mat = Materializer.local(checkpoint=CheckpointSettings(storage=str(tmp_path)))
    try:
        switch = (Source.repeat(1).throttle(100, 0.1).via_mat(KillSwitches.single(), Keep.right)
                  .merge(side.island()).island().to(Sink.ignore())).run(mat, name="ends")
        g = mat.running_graph("ends")
        _until_ended(g, "ends-island-2")
        try:
            return g.checkpoint_now(timeout=10)
        finally:
            switch.shutdown()
            g.wait(10)
    finally:
        mat.shutdown()


def test_an_island_whose_failure_recover_turned_into_a_completion_ended_cleanly(tmp_path):
    info = _side_island_then_checkpoint(tmp_path, Source.single(1).map(_fail).recover(lambda e: -1))
    assert info.finished_islands == ["ends-island-2"]


def test_an_island_whose_failure_reached_its_output_ended_failed(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint can be taken"):
        _side_island_then_checkpoint(tmp_path, Source.single(1).map(_fail))
