"""Sources that read external data take part in checkpoints when they can read it again: from_parquet saves the
rows it emitted and skips them after a restore; data that no longer holds them fails the restore."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from atoll import CheckpointNotSupportedError, CheckpointSettings, Materializer, Sink, Source, SourceReplayMismatchError
from atoll.interop.background_source import BackgroundSource
from atoll.testkit.round_trip import checkpoint_round_trip


def _dataset(path, n: int, files: int = 3):
    path.mkdir()
    per = n // files
    for f in range(files):
        lo, hi = f * per, (n if f == files - 1 else (f + 1) * per)
        pq.write_table(pa.table({"x": list(range(lo, hi))}), path / f"part-{f}.parquet")
    return str(path)


@pytest.mark.parametrize("at", [0, 1, 333, 999])
@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_from_parquet_restores_exactly(tmp_path, at, fusion):
    data = _dataset(tmp_path / "data", 1000)
    expected, got = checkpoint_round_trip(lambda: Source.from_parquet(data, max_rows_per_batch=64).map(lambda r: r["x"]),
                                          at, storage=str(tmp_path / "ck"), fusion=fusion)
    assert expected == list(range(1000))
    assert got == expected


def test_arrow_batches_from_parquet_restore_by_batch(tmp_path):
    data = _dataset(tmp_path / "data", 1000)
    expected, got = checkpoint_round_trip(
        lambda: Source.from_parquet(data, as_="arrow", max_rows_per_batch=100).map(lambda b: b.column("x").to_pylist()),
        4, storage=str(tmp_path / "ck"))
    assert got == expected and sum(expected, []) == list(range(1000))


class _Counter:
    """A replayable factory whose data can shrink between runs (to show the mismatch check)."""

    def __init__(self, n):
        self.n = n

    def __call__(self):
        return iter([list(range(i, min(i + 10, self.n))) for i in range(0, self.n, 10)])


def test_a_replay_that_yields_fewer_elements_than_were_emitted_fails_with_replay_mismatch(tmp_path):
    factory = _Counter(100)
    source = lambda: Source.from_graph(BackgroundSource("counter", factory, chunked=True, replayable=True))  # noqa: E731
    mat = Materializer.local(checkpoint=CheckpointSettings(storage=str(tmp_path)))
    try:
        probe_graph = source().to_mat(Sink.seq(), lambda a, b: b)
        assert probe_graph.run(mat).result(10) == list(range(100))
    finally:
        mat.shutdown()
    from atoll.testkit.round_trip import _Gate  # noqa: PLC0415 - the kit's gate: stop after 50 elements
    from atoll import Flow, Keep

    gate = _Gate(50)
    mat = Materializer.local(checkpoint=CheckpointSettings(storage=str(tmp_path)))
    try:
        source().via(Flow.from_graph(gate)).to_mat(Sink.seq(), Keep.right).run(mat, name="shrinks")
        assert gate.reached.wait(10)
        info = mat.running_graph("shrinks").stop_with_checkpoint(10)
    finally:
        mat.shutdown()
    factory.n = 30  # the data changed: only 30 elements left where 50 were read
    mat = Materializer.local()
    try:
        with pytest.raises(SourceReplayMismatchError, match="counter: the checkpoint was taken after 50 elements"):
            source().via(Flow.from_graph(_Gate(None))).to_mat(Sink.seq(), Keep.right).run(mat, restore_from=info).result(10)
    finally:
        mat.shutdown()


def test_a_background_source_that_cannot_replay_is_refused_with_its_hint(tmp_path):
    stage = BackgroundSource("once", lambda: iter([1, 2]), checkpoint_hint="it reads a socket")
    mat = Materializer.local(checkpoint=CheckpointSettings(storage=str(tmp_path)))
    try:
        with pytest.raises(CheckpointNotSupportedError, match="it reads a socket"):
            Source.from_graph(stage).run_with(Sink.seq(), mat)
    finally:
        mat.shutdown()
