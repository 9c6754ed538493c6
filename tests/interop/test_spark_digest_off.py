"""Replay digests (``from_spark``'s per-partition blake2b) are computed only for runs that use them: a run with
checkpoints saves them, a restore checks the skipped elements against them; a run with neither calls the factory's
``undigested()`` form and emits the same elements."""
from __future__ import annotations

import datetime as dt
from typing import List

import pyarrow as pa
import pytest

from atoll import Materializer, Sink, Source
from atoll.errors import SourceReplayMismatchError
from atoll.interop.background_source import BackgroundSource, Digested
from atoll.interop.spark_source import _PartitionReader
from atoll.testkit.round_trip import checkpoint_round_trip


class _Factory:
    """Chunks of ``data`` (4 elements), digested (a chunk's repr) unless made by ``undigested()``; ``log`` records
    which form each run called."""

    def __init__(self, data: List[int], log: list, digest: bool = True):
        self.data, self.log, self.digest = data, log, digest

    def undigested(self) -> "_Factory":
        return _Factory(self.data, self.log, digest=False)

    def __call__(self):
        self.log.append("digested" if self.digest else "plain")
        for i in range(0, len(self.data), 4):
            part = list(self.data[i:i + 4])
            if self.digest:
                yield Digested(part, repr(part).encode(), lambda k, part=part: repr(part[:k]).encode(),
                               segment=i % 40 == 0)
            else:
                yield part


def _source(data, log):
    return Source.from_graph(BackgroundSource("digested", _Factory(data, log), chunked=True, replayable=True))


def test_a_run_without_checkpoints_calls_the_undigested_form():
    log: list = []
    m = Materializer.local()
    try:
        assert _source(list(range(50)), log).run_with(Sink.seq(), m).result(10) == list(range(50))
    finally:
        m.shutdown()
    assert log == ["plain"]


def test_checkpointed_and_restoring_runs_keep_the_digests(tmp_path):
    log: list = []
    data = list(range(100))
    expected, got = checkpoint_round_trip(lambda: _source(data, log), 45, storage=str(tmp_path))
    assert expected == data and got == data
    # the uninterrupted run, the checkpointed run, the restore
    assert log == ["plain", "digested", "digested"]


def test_a_restore_still_detects_a_change(tmp_path):
    log: list = []
    runs: list = []

    def make():
        runs.append(1)
        data = list(range(100))
        if len(runs) == 3:
            data[5] = -5
        return _source(data, log)

    with pytest.raises(SourceReplayMismatchError) as e:
        checkpoint_round_trip(make, 45, storage=str(tmp_path))
    assert "elements 0..39" in str(e.value)


def test_the_spark_reader_without_digests_yields_the_same_rows():
    table = pa.table({"id": pa.array(range(10), pa.int64()), "name": [f"n{i}" for i in range(10)],
                      "t": pa.array([dt.datetime(2024, 1, 1, 12, i) for i in range(10)], pa.timestamp("us"))})
    reader = _PartitionReader(lambda: iter([table, table.slice(3)]), "rows", 4, "UTC", digest=True)
    digested = list(reader())
    plain = list(reader.undigested()())
    assert all(type(d) is Digested for d in digested) and not any(type(p) is Digested for p in plain)
    assert [d.item for d in digested] == plain
    assert [len(p) for p in plain] == [4, 4, 2, 4, 3]
    assert plain[0][1] == {"id": 1, "name": "n1", "t": dt.datetime(2024, 1, 1, 12, 1)}
