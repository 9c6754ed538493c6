"""Columnar frames across real island boundaries (Ray actors): rows arrive exactly as they were sent.

One Ray session for the module (``ray_session`` in conftest). Rows of the same keys cross as columns
(``atoll._impl.actors.codec``); these graphs check that what the user gets on the other side is the same as
on the local materializer: equal dicts, same key order and value types, mixed frames, large values by reference,
and that Arrow batches still travel by reference.
"""
from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pytest

from atoll import Keep, Materializer, Sink, Source


def same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and np.array_equal(a, b)
    return a == b


def row(i: int) -> dict:
    return {"id": i, "twice": 2 * i, "name": f"user-{i}", "k": i * 0.5, "flag": i % 2 == 0,
            "maybe": None if i % 3 else i, "nested": {"l": [i, (i, "t")], "b": b"x%d" % i},
            "dec": decimal.Decimal(i) / 4}


def local_result(graph):
    local = Materializer.local()
    try:
        return graph.run(local).result(30)
    finally:
        local.shutdown()


def test_rows_cross_an_island_boundary_exactly(rmat):
    graph = Source.range(0, 20_000).map(row).island().map(lambda r: r).to_mat(Sink.seq(), Keep.right)
    got = graph.run(rmat).result(60)
    want = [row(i) for i in range(20_000)]
    assert len(got) == len(want) and all(same(g, w) for g, w in zip(got, want))
    assert [list(r) for r in got[:1]] == [["id", "twice", "name", "k", "flag", "maybe", "nested", "dec"]]


def test_the_user_function_on_the_far_side_sees_plain_dicts(rmat):
    def check(r):
        assert type(r) is dict and type(r["id"]) is int and type(r["flag"]) is bool
        assert type(r["k"]) is float and type(r["nested"]["l"][1]) is tuple
        return r["id"]

    total = (Source.range(0, 10_000).map(row).island().map(check)
             .run_with(Sink.fold(0, lambda a, b: a + b), rmat).result(60))
    assert total == sum(range(10_000))


def test_mixed_and_heterogeneous_frames_across_islands(rmat):
    def elem(i):
        if i % 1000 == 7:
            return i  # an int among the rows
        if i % 1000 == 500:
            return {"twice": 2 * i, "id": i}  # another key order
        if 2000 <= i < 2100:
            return {"id": i, "extra": [i]}  # other keys for a while
        return {"id": i, "twice": 2 * i}

    graph = Source.range(0, 5000).map(elem).island().to_mat(Sink.seq(), Keep.right)
    got = graph.run(rmat).result(60)
    want = local_result(graph)
    assert len(got) == 5000 and all(same(g, w) for g, w in zip(got, want))
    assert list(got[500]) == ["twice", "id"]


def test_large_values_in_rows_still_go_by_reference(rmat):
    big = np.arange(50_000, dtype=np.int64)  # 400 KB: an object-store reference, not msgpack

    graph = (Source.range(0, 40).map(lambda i: {"i": i, "arr": big + i, "blob": bytes(200_000)})
             .island().map(lambda r: (r["i"], int(r["arr"][-1]), len(r["blob"]), type(r["arr"]).__name__))
             .to_mat(Sink.seq(), Keep.right))
    got = graph.run(rmat).result(60)
    assert got == [(i, 49_999 + i, 200_000, "ndarray") for i in range(40)]


def test_arrow_batches_cross_by_reference_and_a_map_over_them_is_zero_copy(rmat, ray_session):
    from atoll._impl.actors import codec

    batch = pa.RecordBatch.from_pydict({"a": list(range(100_000)), "b": [float(i) for i in range(100_000)]})
    # the codec: the batch goes as an object reference beside a tiny payload, and is read back without a copy
    payload, refs = codec.encode_message(1, 1, [batch, {"x": 1}])
    assert len(refs) == 1 and len(payload) < 100
    before = pa.total_allocated_bytes()
    _, _, (got, d) = codec.decode_message(payload, refs)
    assert got.equals(batch) and d == {"x": 1}
    assert pa.total_allocated_bytes() - before < 10_000  # read from the object store, not into Arrow's pool

    def in_island(b):
        pool_before = pa.total_allocated_bytes()
        s = b.slice(10)
        return s.num_rows, s.column(0).buffers()[1].address - b.column(0).buffers()[1].address, \
            pa.total_allocated_bytes() - pool_before

    graph = (Source.from_iterable([batch] * 4).island().map(in_island).to_mat(Sink.seq(), Keep.right))
    # a map over the received batch (a slice) shares its buffers: nothing allocated in the island
    assert graph.run(rmat).result(60) == [(99_990, 0, 0)] * 4
