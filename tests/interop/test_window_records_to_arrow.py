"""Window and Late records leave through the Arrow edges (Parquet here) as flat rows."""
from __future__ import annotations

import pyarrow.parquet as pq

from atoll import Aggregate, Keep, Materializer, Sink, Source


def test_windows_and_late_records_are_written_as_rows(tmp_path):
    events = [{"user": "u1", "ts_ms": t} for t in (0, 5, 70_000, 100_000, 1_000)]
    late_path, out_path = tmp_path / "late.parquet", tmp_path / "windows.parquet"
    m = Materializer.local()
    try:
        (stats, late_rows), rows = (
            Source.from_iterator(lambda: iter(events))
            .with_timestamps(lambda e: e["ts_ms"])
            .tumbling_window(60_000, key=lambda e: e["user"], aggregate=Aggregate.count(),
                             late_to=Sink.to_parquet(str(late_path)), combine=Keep.both)
            .to_mat(Sink.to_parquet(str(out_path)), Keep.both)
            .run(m))
        assert (rows.result(10), late_rows.result(10)) == (2, 1)
    finally:
        m.shutdown()
    assert pq.read_table(out_path).to_pylist() == [
        {"key": "u1", "start": 0, "end": 60_000, "value": 2, "timing": "on_time"},
        {"key": "u1", "start": 60_000, "end": 120_000, "value": 2, "timing": "on_time"},
    ]
    assert pq.read_table(late_path).to_pylist() == [
        {"value": {"user": "u1", "ts_ms": 1_000}, "timestamp": 1_000, "watermark": 100_000}]
    assert stats.snapshot()["late_diverted"] == 1
