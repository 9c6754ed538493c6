"""The block sinks (``to_spark``, ``to_ray_dataset``, ``to_parquet``) gather a chunk of plain row dicts as a whole:
the same blocks (row groups here) cut at the same rows, the same values and the same error positions as element by
element, whatever mix of dicts and other elements the chunks hold."""
from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from atoll import Materializer, Sink, Source
from atoll.interop.errors import SchemaMismatchError
from atoll.interop.parquet import ParquetSink
from atoll.windowing import Window

SCHEMA = "id long, name string, k double"


def _run(elements, path, rows_per_block):
    m = Materializer.local()
    try:
        return Source.from_iterator(lambda: iter(elements)).run_with(
            Sink.from_graph(ParquetSink(str(path), SCHEMA, rows_per_block=rows_per_block)), m).result(30)
    finally:
        m.shutdown()


def _row(i):
    return {"id": i, "name": f"n{i}", "k": i * 0.5}


@pytest.mark.parametrize("rows_per_block", [1, 7, 64, 5000])
def test_row_dicts_cut_into_the_same_blocks(tmp_path, rows_per_block):
    rows = [_row(i) for i in range(1000)]
    path = tmp_path / "out.parquet"
    assert _run(rows, path, rows_per_block) == 1000
    f = pq.ParquetFile(path)
    sizes = [f.metadata.row_group(g).num_rows for g in range(f.num_row_groups)]
    full, rest = divmod(1000, rows_per_block)
    assert sizes == [rows_per_block] * full + ([rest] if rest else [])
    got = f.read().to_pylist()
    assert got == rows
    assert [type(v) for v in got[3].values()] == [int, str, float]


def test_dicts_mixed_with_other_elements_keep_order_and_blocks(tmp_path):
    schema_rows = [_row(i) for i in range(300)]
    elements = list(schema_rows)
    # a window record in the middle: a non-dict element the sink turns into a row (it does not fit the schema:
    # the stream fails naming its exact position, once its block is converted)
    elements.insert(150, Window("u", 0, 10, 3, "on_time"))
    path = tmp_path / "out.parquet"
    with pytest.raises(SchemaMismatchError) as info:
        _run(elements, path, 64)
    err = info.value
    assert (err.column, err.found, err.element_index, err.row) == ("key", "str 'u'", 150, None)
    # the blocks before the one holding it were written, whole
    assert pq.read_table(path).to_pylist() == schema_rows[:128]


def test_a_bad_value_is_named_at_its_element(tmp_path):
    rows = [_row(i) for i in range(500)]
    rows[333] = {"id": 333, "name": "n333", "k": 7}  # an int where double is expected: refused, not coerced
    with pytest.raises(SchemaMismatchError) as info:
        _run(rows, tmp_path / "out.parquet", 100)
    err = info.value
    assert (err.column, err.element_index) == ("k", 333)


def test_a_row_with_a_missing_column_is_named(tmp_path):
    rows = [_row(i) for i in range(40)]
    rows[17] = {"id": 17, "name": "n17"}
    with pytest.raises(SchemaMismatchError) as info:
        _run(rows, tmp_path / "out.parquet", 10)
    assert (info.value.column, info.value.element_index) == ("k", 17)


def test_typed_values_pass_through_exactly(tmp_path):
    rows = [{"id": i, "name": None if i % 3 == 0 else f"n{i}", "k": float(i)} for i in range(50)]
    path = tmp_path / "out.parquet"
    assert _run(rows, path, 16) == 50
    assert pq.read_table(path).to_pylist() == rows


def test_an_upstream_failure_leaves_the_written_blocks_whole_when_the_future_fails(tmp_path):
    def rows_then_boom():
        for i in range(100):
            yield _row(i)
        raise KeyError("boom")

    path = tmp_path / "out.parquet"
    m = Materializer.local()
    try:
        fut = Source.from_iterator(rows_then_boom).run_with(
            Sink.from_graph(ParquetSink(str(path), SCHEMA, rows_per_block=30)), m)
        with pytest.raises(KeyError):
            fut.result(30)
        # read at once: the file was closed before the future failed
        assert pq.read_table(path).to_pylist() == [_row(i) for i in range(90)]
    finally:
        m.shutdown()


@pytest.mark.parametrize("chunks", [True, False])
def test_rows_that_do_not_fit_fail_the_stream_at_once_not_when_their_block_fills(tmp_path, chunks):
    """The first rows are checked against the schema as they arrive: a stream whose rows do not fit fails although
    its first block (65,536 rows by default) never fills and the stream never ends."""
    bad = {"id": 1, "name": "n1", "k": 2}  # an int where double is expected
    m = Materializer.local(fusion=chunks)
    try:
        fut = Source.single(bad).concat(Source.never()).run_with(
            Sink.from_graph(ParquetSink(str(tmp_path / "out.parquet"), SCHEMA)), m)
        with pytest.raises(SchemaMismatchError) as info:
            fut.result(30)
        assert (info.value.column, info.value.element_index) == ("k", 0)
    finally:
        m.shutdown()
