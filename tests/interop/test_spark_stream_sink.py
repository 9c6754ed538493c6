"""Sink.to_spark_stream: a graph's output written by a Spark Structured Streaming query, on the shared session."""
from __future__ import annotations

import itertools
import sys
import uuid

import pytest
import ray
import ray.cloudpickle

from atoll import KillSwitches, Keep, Materializer, Sink, Source
from atoll.interop.errors import SchemaMismatchError
from atoll.interop.spark_on_demand import SparkJobError
from atoll.testkit import assert_all_stages_stopped

from .conftest import ALL_TYPES_DDL, all_types_rows
from .interop_helpers import actors_still_alive, rate_df, wait_until

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray workers cannot import this test module


@pytest.fixture
def anymat(smat, spark):
    yield smat
    assert_all_stages_stopped(smat, timeout=15.0)
    assert wait_until(lambda: not spark.streams.active), "a Spark query was left running"


def name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def memory_rows(spark, query_name):
    return [r.asDict(recursive=True) for r in spark.table(query_name).collect()]


# ------------------------------------------------------------------------------------------------ writing
def test_elements_reach_a_memory_table_in_order(spark, anymat):
    q = name("in_order")
    rows = [{"id": i, "name": f"n{i}"} for i in range(1000)]
    future = Source.from_iterable(rows).run_with(
        Sink.to_spark_stream(spark, format="memory", query_name=q, rows_per_batch=250), anymat)
    assert future.result(180) == 1000
    assert memory_rows(spark, q) == rows  # one staged file per micro-batch, in order
    assert future.query is not None and future.query_id == future.query.id
    assert [p["numInputRows"] for p in future.query.recentProgress if p["numInputRows"]] == [250] * 4  # a file each
    assert not future.query.isActive


def test_a_parquet_table_with_a_checkpoint_gets_every_row_once(spark, anymat, tmp_path):
    out, chk = str(tmp_path / "out"), str(tmp_path / "chk")
    future = (Source.range(0, 3000).map(lambda i: {"id": i, "twice": i * 2}).island()
              .run_with(Sink.to_spark_stream(spark, path=out, format="parquet", checkpoint_location=chk,
                                             schema="id long, twice long", rows_per_batch=1000,
                                             trigger="100 milliseconds"), anymat))
    assert future.result(180) == 3000
    back = spark.read.parquet(out)
    assert back.count() == 3000
    assert sorted((r.id, r.twice) for r in back.collect()) == [(i, 2 * i) for i in range(3000)]


def test_every_spark_type_round_trips(spark, anymat):
    q = name("all_types")
    df = spark.createDataFrame(all_types_rows(), ALL_TYPES_DDL)
    rows = [r.asDict(recursive=True) for r in df.collect()]
    future = Source.from_iterable(rows).run_with(
        Sink.to_spark_stream(spark, format="memory", query_name=q, schema=ALL_TYPES_DDL), anymat)
    assert future.result(180) == 3
    assert memory_rows(spark, q) == rows


def test_arrow_batches_with_an_inferred_schema(spark, anymat):
    import pyarrow as pa

    q = name("arrow")
    batches = [pa.record_batch({"k": list(range(i * 10, i * 10 + 10)), "v": [float(i)] * 10}) for i in range(5)]
    future = Source.from_iterable(batches).run_with(
        Sink.to_spark_stream(spark, format="memory", query_name=q), anymat)
    assert future.result(180) == 50
    got = memory_rows(spark, q)
    assert [r["k"] for r in got] == list(range(50))
    assert spark.table(q).schema.simpleString() == "struct<k:bigint,v:double>"


def test_an_empty_stream_starts_no_query(spark, anymat):
    future = Source.empty().run_with(Sink.to_spark_stream(spark, format="noop"), anymat)
    assert future.result(60) == 0
    assert future.query is None


def test_foreach_batch_sees_each_micro_batch(spark, anymat):
    seen = []

    def keep(batch_df, batch_id):
        seen.append((batch_id, [r.id for r in batch_df.collect()]))

    future = Source.range(0, 30).map(lambda i: {"id": i}).run_with(
        Sink.to_spark_stream(spark, foreach_batch=keep, rows_per_batch=10), anymat)
    assert future.result(180) == 30
    assert [ids for _, ids in seen] == [list(range(0, 10)), list(range(10, 20)), list(range(20, 30))]
    assert [b for b, _ in seen] == sorted(b for b, _ in seen)


def test_rate_source_to_spark_stream_round_trip(spark, anymat):
    q = name("rate_round_trip")
    future = (Source.from_spark_stream(rate_df(spark), trigger="200 milliseconds")
              .map(lambda r: {"value": r["value"], "square": r["value"] * r["value"]})
              .take(300)
              .run_with(Sink.to_spark_stream(spark, format="memory", query_name=q, trigger="200 milliseconds",
                                             max_batch_delay=0.2), anymat))
    assert future.result(180) == 300
    assert memory_rows(spark, q) == [{"value": v, "square": v * v} for v in range(300)]


def test_file_source_through_a_graph_into_a_parquet_table(spark, anymat, tmp_path):
    import json
    import os

    src = tmp_path / "in"
    src.mkdir()
    for f in range(3):
        with open(src / f"part-{f}.json", "w") as out:
            for k in range(5):
                out.write(json.dumps({"id": f * 5 + k}) + "\n")
        os.utime(src / f"part-{f}.json", (1_700_000_000 + f, 1_700_000_000 + f))
    df = spark.readStream.schema("id long").option("maxFilesPerTrigger", 1).json(str(src))
    out = str(tmp_path / "out")
    future = (Source.from_spark_stream(df, trigger={"availableNow": True}, checkpoint_location=str(tmp_path / "c1"))
              .map(lambda r: {"id": r["id"], "label": f"row {r['id']}"})
              .run_with(Sink.to_spark_stream(spark, path=out, format="json", checkpoint_location=str(tmp_path / "c2"),
                                             schema="id long, label string"), anymat))
    assert future.result(180) == 15
    got = sorted((r.id, r.label) for r in spark.read.schema("id long, label string").json(out).collect())
    assert got == [(i, f"row {i}") for i in range(15)]


# ------------------------------------------------------------------------------------------- backpressure
def test_backpressure_bounds_what_is_pulled_ahead_of_spark(spark, ray_session):
    """An endless source with a slow trigger: the sink pulls no more than the pending micro-batches allow."""
    pulled = itertools.count()
    counted = []

    def count(i):
        counted.append(next(pulled))
        return {"id": i}

    m = Materializer.local()
    try:
        switch, future = (Source.from_iterator(lambda: itertools.count()).map(count)
                          .via_mat(KillSwitches.single(), Keep.right)
                          .to_mat(Sink.to_spark_stream(spark, format="noop", trigger="2 seconds", rows_per_batch=100,
                                                       max_pending_batches=2), Keep.both).run(m))
        query = future.wait_started(60)
        assert wait_until(lambda: len([p for p in query.recentProgress if p["numInputRows"]]) >= 1)
        pulled_now = len(counted)
        committed = len([p for p in query.recentProgress if p["numInputRows"]])  # read after: no fewer than then
        # committed files + at most 2 staged files waiting + at most one micro-batch being gathered
        assert pulled_now <= (committed + 2 + 1) * 100, (pulled_now, committed)
        switch.shutdown()
        assert future.result(120) == len(counted)
    finally:
        m.shutdown()
    assert wait_until(lambda: not spark.streams.active)


# --------------------------------------------------------------------------------------- ends and failures
def test_kill_switch_shutdown_writes_the_rest_and_stops_the_query(spark, anymat):
    q = name("shutdown")
    switch, future = (Source.from_iterator(lambda: itertools.count()).map(lambda i: {"id": i})
                      .via_mat(KillSwitches.single(), Keep.right)
                      .to_mat(Sink.to_spark_stream(spark, format="memory", query_name=q, rows_per_batch=50),
                              Keep.both).run(anymat))
    query = future.wait_started(60)
    assert wait_until(lambda: any(p["numInputRows"] for p in query.recentProgress))
    switch.shutdown()
    n = future.result(120)
    assert [r["id"] for r in memory_rows(spark, q)] == list(range(n))
    assert spark.streams.active == []


def test_kill_switch_abort_stops_the_query_and_fails_the_future(spark, anymat):
    switch, future = (Source.from_iterator(lambda: itertools.count()).map(lambda i: {"id": i})
                      .via_mat(KillSwitches.single(), Keep.right)
                      .to_mat(Sink.to_spark_stream(spark, format="noop", rows_per_batch=50), Keep.both)
                      .run(anymat))
    query = future.wait_started(60)
    assert wait_until(lambda: any(p["numInputRows"] for p in query.recentProgress))
    switch.abort(RuntimeError("stop the writer"))
    with pytest.raises(RuntimeError, match="stop the writer"):
        future.result(120)
    assert spark.streams.active == []


class Refused(Exception):
    pass


def refuse_at_700(i):
    if i == 700:
        raise Refused("element 700 refused")
    return {"id": i}


def test_a_failing_stage_fails_the_future_with_its_exception(spark, anymat):
    future = Source.range(0, 10_000).map(refuse_at_700).island().run_with(
        Sink.to_spark_stream(spark, format="noop", schema="id long", rows_per_batch=100), anymat)
    with pytest.raises(Refused, match="element 700 refused"):
        future.result(120)
    assert spark.streams.active == []


def test_an_element_that_does_not_fit_fails_the_future(spark, anymat):
    future = Source.from_iterable([{"id": 1}, {"id": "two"}]).run_with(
        Sink.to_spark_stream(spark, format="noop", schema="id long"), anymat)
    with pytest.raises(SchemaMismatchError, match="id"):
        future.result(120)
    assert spark.streams.active == []


def test_a_failing_query_fails_the_graph_with_sparks_message(spark, anymat):
    def refuse(batch_df, batch_id):
        if batch_id == 2:
            raise ValueError("batch two refused by the writer")

    future = Source.from_iterator(lambda: itertools.count()).map(lambda i: {"id": i}).island().run_with(
        Sink.to_spark_stream(spark, foreach_batch=refuse, rows_per_batch=10), anymat)
    with pytest.raises(SparkJobError, match="batch two refused by the writer"):
        future.result(180)
    assert spark.streams.active == []


def test_no_actor_is_left(spark, ray_session):
    m = Materializer.ray(start_timeout=60)
    try:
        future = (Source.range(0, 500).map(lambda i: {"id": i}).island()
                  .run_with(Sink.to_spark_stream(spark, format="noop", rows_per_batch=100), m))
        actors = [i.actor for g in m.running_graphs() for i in g._islands]
        assert len(actors) == 2
        assert future.result(120) == 500
        box = future._box_actor
        assert actors_still_alive(actors + [box]) == []
    finally:
        m.shutdown()
    assert spark.streams.active == []


# -------------------------------------------------------------------------------------------- bad arguments
def test_bad_arguments_fail_when_built(spark, tmp_path):
    chk = str(tmp_path / "chk")
    cases = [
        (dict(path=str(tmp_path / "o"), format="nosuchformat", checkpoint_location=chk), ValueError,
         "unknown format 'nosuchformat'"),
        (dict(path=str(tmp_path / "o")), ValueError, "checkpoint_location is required"),
        (dict(format="memory", query_name="m", trigger={"continuous": "1 second"}), ValueError,
         "trigger must have exactly one of"),
        (dict(format="noop", trigger=5), TypeError, "trigger must be None"),
        (dict(format="noop", trigger={"availableNow": True}), ValueError, "would stop the query"),
        (dict(format="noop", output_mode="complete"), ValueError, "output_mode must be one of"),
        (dict(), ValueError, "say where to write"),
        (dict(format="memory"), ValueError, "needs query_name"),
        (dict(path="a", table="t", checkpoint_location=chk), ValueError, "give one of path, table"),
        (dict(foreach_batch=print, format="parquet"), ValueError, "does not apply with foreach_batch"),
        (dict(foreach_batch=5), TypeError, "foreach_batch must be a function"),
        (dict(format="noop", schema="id nosuchtype"), ValueError, "invalid schema"),
        (dict(format="noop", rows_per_batch=0), ValueError, "rows_per_batch must be an int >= 1"),
        (dict(format="noop", max_pending_batches=0), ValueError, "max_pending_batches must be"),
        (dict(format="noop", max_batch_delay=0), ValueError, "max_batch_delay must be"),
        (dict(format="parquet", checkpoint_location=chk), ValueError, "needs a path"),
    ]
    for kwargs, error, message in cases:
        with pytest.raises(error, match=f"Sink.to_spark_stream: .*{message}"):
            Sink.to_spark_stream(spark, **kwargs)
    assert not spark.streams.active  # nothing started at build time
