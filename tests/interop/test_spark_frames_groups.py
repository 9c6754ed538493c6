"""arrow_refs_to_spark encodes a frame's tables in a few Ray tasks, each taking a contiguous group of them: one
Spark partition per table still, in order, and a mismatch is named at its table's position in the whole list."""
from __future__ import annotations

import pyarrow as pa
import pytest
import ray

from atoll.interop import spark_frames
from atoll.interop.errors import SchemaMismatchError
from atoll.interop.spark_frames import arrow_refs_to_spark, release_frame
from atoll.interop.task_groups import groups as _groups
from atoll.interop.spark_schema import to_arrow_schema


@pytest.mark.parametrize("n", [1, 2, 3, 5, 16, 17, 32, 33, 100])
def test_groups_cover_every_position_once_in_order(n):
    groups = _groups(n)
    assert [i for g in groups for i in g] == list(range(n))
    assert len(groups) == min(n, max(2, -(-n // spark_frames.TABLES_PER_TASK)))
    sizes = [len(g) for g in groups]
    assert max(sizes) - min(sizes) <= 1 and max(sizes) <= max(spark_frames.TABLES_PER_TASK, -(-n // 2))


def test_many_tables_keep_their_order_and_partitions(spark):
    schema = to_arrow_schema("id bigint, name string")
    tables = [pa.table({"id": list(range(10 * i, 10 * i + i + 1)), "name": [f"t{i}"] * (i + 1)}, schema=schema)
              for i in range(7)]
    df = arrow_refs_to_spark([ray.put(t) for t in tables], schema)
    try:
        assert df.rdd.getNumPartitions() == 7
        per_partition = df.rdd.glom().map(lambda rows: [r.asDict() for r in rows]).collect()
        assert per_partition == [t.to_pylist() for t in tables]
    finally:
        release_frame(df)


def test_a_mismatch_inside_a_group_is_named_at_its_position(spark):
    schema = to_arrow_schema("id bigint, name string")
    good = pa.table({"id": [1], "name": ["a"]}, schema=schema)
    bad = pa.table({"id": ["1"], "name": ["a"]})
    # five tables: groups [0, 1, 2] and [3, 4]; the mismatches at 4 and 2: the first one is reported
    refs = [ray.put(t) for t in (good, good, bad, good, bad)]
    with pytest.raises(SchemaMismatchError) as info:
        arrow_refs_to_spark(refs, schema)
    err = info.value
    assert (err.column, err.expected, err.found, err.element_index) == ("id", "int64", "string", 2)
    refs = [ray.put(t) for t in (good, good, good, good, bad)]
    with pytest.raises(SchemaMismatchError, match=r"^element 4, column 'id': expected int64, found string$"):
        arrow_refs_to_spark(refs, schema)
