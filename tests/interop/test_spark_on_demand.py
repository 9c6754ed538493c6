"""Source.from_spark computing partitions on demand (atoll.interop.spark_on_demand), on the shared Spark session."""
from __future__ import annotations

import sys
import threading

import pytest
import ray
import ray.cloudpickle

from atoll import Materializer, Sink, Source
from atoll.interop.spark_on_demand import JOB_GROUP_PREFIX, OnDemandPartitions, SparkJobError, running_hub
from atoll.testkit import TestSink, assert_all_stages_stopped
from .interop_helpers import wait_until

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray workers cannot import this test module


@pytest.fixture
def anymat(smat):
    yield smat
    assert_all_stages_stopped(smat, timeout=15.0)


def from_spark_jobs(sc, after_job: int):
    """``[(job id, number of tasks, status)]`` of the jobs run by on-demand sources with an id above
    ``after_job`` (from Spark's status store, which keeps every job's group)."""
    jobs = sc._jsc.sc().statusStore().jobsList(None)
    out = []
    for k in range(jobs.size()):
        job = jobs.apply(k)
        group = job.jobGroup()
        if job.jobId() > after_job and group.isDefined() and str(group.get()).startswith(JOB_GROUP_PREFIX):
            out.append((job.jobId(), job.numTasks(), str(job.status())))
    return out


def last_job_id(sc) -> int:
    jobs = sc._jsc.sc().statusStore().jobsList(None)
    return max((jobs.apply(k).jobId() for k in range(jobs.size())), default=-1)


def wait_no_active_jobs(sc, timeout=30.0) -> list:
    wait_until(lambda: not sc.statusTracker().getActiveJobsIds(), timeout)
    return list(sc.statusTracker().getActiveJobsIds())


def persistent_rdds(sc) -> set:
    return set(sc._jsc.getPersistentRDDs().keys())


def test_one_element_of_64_partitions_runs_spark_tasks_for_at_most_3(spark, anymat):
    sc = spark.sparkContext
    df = spark.range(0, 64 * 100, numPartitions=64).selectExpr("id", "cast(id as string) as name")
    before, cached = last_job_id(sc), persistent_rdds(sc)
    probe = Source.from_spark(df).run_with(TestSink.probe(timeout=60), anymat)
    probe.request(1)
    assert probe.expect_next() == {"id": 0, "name": "0"}
    probe.expect_no_message(1.0)  # time for a source that reads ahead to show it
    jobs = from_spark_jobs(sc, before)
    tasks = sum(n for _, n, _ in jobs)
    print(f"\nSpark tasks run for 1 element of a 64-partition DataFrame: {tasks} ({len(jobs)} jobs)")
    assert tasks <= 3, jobs
    probe.cancel()
    assert wait_no_active_jobs(sc) == []
    assert wait_until(lambda: persistent_rdds(sc) == cached)  # unpersisted when the graph ended


def test_every_row_in_order_with_a_partition_job_each(spark, anymat):
    sc = spark.sparkContext
    df = spark.range(0, 2000, numPartitions=8).selectExpr("id", "id * 2 as twice")
    before = last_job_id(sc)
    rows = Source.from_spark(df, max_rows_per_batch=64).run_with(Sink.seq(), anymat).result(120)
    assert rows == [{"id": i, "twice": 2 * i} for i in range(2000)]
    jobs = from_spark_jobs(sc, before)
    assert sorted(n for _, n, _ in jobs) == [1] * 8  # one single-task job per partition
    arrow = Source.from_spark(df, as_="arrow", prefetch_partitions=1).run_with(Sink.seq(), anymat).result(120)
    assert sum(b.num_rows for b in arrow) == 2000


def test_cached_mode_is_kept(spark, anymat):
    df = spark.range(0, 300, numPartitions=3)
    rows = Source.from_spark(df, cache=True).run_with(Sink.seq(), anymat).result(120)
    assert [r["id"] for r in rows] == list(range(300))


def test_empty_dataframe_and_empty_partitions(spark, anymat):
    df = spark.range(0, 100, numPartitions=4).where("id < 10 or id >= 75")
    rows = Source.from_spark(df).run_with(Sink.seq(), anymat).result(120)
    assert [r["id"] for r in rows] == list(range(10)) + list(range(75, 100))
    none = spark.sql("select id from range(0)")
    assert Source.from_spark(none).run_with(Sink.seq(), anymat).result(120) == []


def test_a_failing_spark_job_fails_the_graph_with_sparks_message(spark, anymat):
    from pyspark.sql.functions import udf

    @udf("long")
    def explode_on_5(pid, x):
        if pid == 5:
            raise ValueError("boom in partition five")
        return x

    sc = spark.sparkContext
    cached = persistent_rdds(sc)
    df = spark.range(0, 800, numPartitions=8).selectExpr("id", "spark_partition_id() as pid")
    df = df.select("id", explode_on_5("pid", "id").alias("x"))
    future = Source.from_spark(df).map(lambda r: r).run_with(Sink.to_spark("id long, x long"), anymat)
    with pytest.raises(SparkJobError, match="boom in partition five") as info:
        future.result(180)
    assert "partition 5" in str(info.value)
    assert wait_no_active_jobs(sc) == []
    assert wait_until(lambda: persistent_rdds(sc) == cached)


def test_on_ray_the_spark_side_is_prepared_while_the_island_actors_start(spark, anymat, monkeypatch):
    """Ray islands: the Arrow RDD is planned on a driver thread after the island actors were created (their worker
    processes start meanwhile) and before their plans are sent; in-process islands: within ``run()`` itself."""
    from atoll.materializer import driver_prep

    created, seen = threading.Event(), {}
    islands_created = driver_prep.DriverContext.islands_created
    prepare = OnDemandPartitions._prepare

    def after_islands(self):
        created.set()
        islands_created(self)

    def watched_prepare(self):
        seen["on_run_thread"] = threading.get_ident() == run_thread
        seen["islands_were_created"] = created.wait(60) if not seen["on_run_thread"] else created.is_set()
        prepare(self)

    monkeypatch.setattr(driver_prep.DriverContext, "islands_created", after_islands)
    monkeypatch.setattr(OnDemandPartitions, "_prepare", watched_prepare)
    run_thread = threading.get_ident()
    rows = Source.from_spark(spark.range(0, 40, numPartitions=4)).run_with(Sink.seq(), anymat).result(120)
    assert rows == [{"id": i} for i in range(40)]
    remote = anymat.__class__.__name__ != "LocalMaterializer"
    assert seen == ({"on_run_thread": False, "islands_were_created": True} if remote else
                    {"on_run_thread": True, "islands_were_created": False})


def test_a_spark_side_that_cannot_be_prepared_fails_run_and_leaves_nothing(spark, anymat, monkeypatch):
    def cannot_plan(self):
        raise RuntimeError("cannot plan this DataFrame")

    sc = spark.sparkContext
    before, cached = last_job_id(sc), persistent_rdds(sc)
    alive_islands = _alive_island_actors()
    monkeypatch.setattr(OnDemandPartitions, "_prepare", cannot_plan)
    with pytest.raises(RuntimeError, match="cannot plan this DataFrame"):
        Source.from_spark(spark.range(0, 40, numPartitions=4)).run_with(Sink.seq(), anymat)
    assert from_spark_jobs(sc, before) == []
    assert persistent_rdds(sc) == cached
    assert wait_until(lambda: _alive_island_actors() <= alive_islands, 30)
    hub = running_hub()
    if hub is not None:  # the source's mailbox was closed with it
        assert ray.get(hub.open_keys.remote()) == 0


def _alive_island_actors() -> set:
    """Ids of the island actors alive in the Ray cluster that are not idle in a warm pool (from the GCS: these tests'
    Ray has no dashboard for ``ray.util.state``)."""
    from ray._private import state

    from atoll._impl.actors.warm_pool import idle_actor_ids

    alive = {key for key, info in state.actors().items()
             if info["ActorClassName"].endswith("IslandActor") and info["State"] == "ALIVE"}
    return alive - set(idle_actor_ids())


def test_bad_arguments_fail_when_built(spark):
    df = spark.range(3)
    with pytest.raises(TypeError, match="cache must be a bool"):
        Source.from_spark(df, cache="yes")
    with pytest.raises(ValueError, match="prefetch_partitions must be an int >= 1"):
        Source.from_spark(df, prefetch_partitions=0)
    stream = spark.readStream.format("rate").load()
    with pytest.raises(ValueError, match="streaming DataFrame.*from_spark_stream"):
        Source.from_spark(stream)


def test_partitions_server_closes_cleanly_without_a_graph(spark):
    sc = spark.sparkContext
    cached = persistent_rdds(sc)
    with OnDemandPartitions(spark.range(0, 30, numPartitions=3), prefetch=2) as parts:
        tables = list(parts.client.tables())
    assert [t.num_rows for t in tables] == [10, 10, 10]
    assert persistent_rdds(sc) == cached


def store_stats() -> dict:
    """The object store's figures (one node), in bytes: ``used``, ``avail``, ``held`` (primary copies: the objects
    some process holds a reference to, what Ray must keep or spill - ``ray memory``'s "needed"), ``spilled`` (so
    far) and ``fallback`` (objects allocated outside the store because it was full)."""
    from ray._private.internal_api import get_memory_info_reply, get_state_from_address

    stats = get_memory_info_reply(get_state_from_address(ray.get_runtime_context().gcs_address)).store_stats
    return {"used": stats.object_store_bytes_used, "avail": stats.object_store_bytes_avail,
            "held": stats.object_store_bytes_primary_copy, "spilled": stats.spilled_bytes_total,
            "fallback": stats.object_store_bytes_fallback}


@pytest.mark.slow
def test_a_dataframe_of_4x_the_object_store_streams_through_it(spark):
    """A DataFrame of 4x the object store's capacity (the shared test session has a 100 MiB store, see conftest)
    streams through an island into another island that counts its rows, Spark never holding or computing the
    DataFrame whole; the store is sampled every 50 ms meanwhile. What the store holds stays within what is in
    flight, and nothing is spilled.

    The bound, in partitions of ``P`` bytes of Arrow data (4096 rows of 1028 bytes: ``id`` 8, ``pad`` 1016 and its
    4-byte offset). The partitions Spark computed ahead (``prefetch_partitions``) wait in the executor's block
    manager, not in Ray. Referenced in the store are at most: the next partition's table (the hub's copy, owned by
    the island) and the one being taken (2 ``P``); the executor's replies the hub is copying, one for each of the
    two partitions the island asks it for (2 ``P``); and the channel's batches, each put in the store as its own
    object of ``B`` = 1024 rows = ``P / 4`` (a batch is a slice of its partition's table; the codec puts only its
    rows, not the table's buffers): in flight, buffered at the receiver and handed on in a chunk together, at most
    the channel's store budget (``RaySettings.channel_store_bytes``: by default an eighth of the store, 12.5 MiB;
    ``B`` is below a quarter of it, so the batches fit it exactly). In all ``4 P`` + the budget, 28.6 MiB of a
    100 MiB store. (The island asks for up to 65536 elements ahead: in elements, the channel's bound would be
    65536 batches.)

    What is measured against it is the store's primary copies (``held``), not its ``used`` bytes: ``used`` also
    counts objects already released and not yet deleted (the raylet deletes released objects in batches, every
    second or 100 objects; they are evictable, never spilled) - with nothing held it peaked at 96 MiB here. A
    table being emitted is held by its zero-copy batches rather than by a reference, and is not in ``held``: a
    leak of those, or of anything else, that grows with the stream (4x the store passes through it) would fill the
    store and show as spilled or fallback bytes, asserted to be none.

    Before the channel codec's hooks stopped forming a reference cycle, sent batches stayed referenced until
    Python's cyclic garbage collector ran: 136.6-152.6 MiB held at the peak, 868-1277 MiB spilled. Before channels
    had a store budget, the test asked for 4 batches ahead (``Attributes.input_buffer(4, 4)``): with the default
    buffer and a consumer slower than Spark, the store filled and Ray spilled."""
    before = store_stats()
    capacity = before["used"] + before["avail"]
    row_bytes = 1024
    part_rows = 4096
    part_bytes = part_rows * (row_bytes + 4)  # P: id (8) + pad (row_bytes - 8) + the string's offset (4)
    partitions = 4 * capacity // (part_rows * row_bytes) + 1
    rows = partitions * part_rows
    df = spark.range(0, rows, numPartitions=partitions).selectExpr("id", f"repeat('x', {row_bytes - 8}) as pad")
    peak = {"used": before["used"], "held": before["held"], "fallback": before["fallback"]}
    done = threading.Event()

    def sample():
        while not done.wait(0.05):
            now = store_stats()
            for k in peak:
                peak[k] = max(peak[k], now[k])

    sampler = threading.Thread(target=sample)
    sampler.start()
    m = Materializer.ray(start_timeout=60)
    budget = m.settings.channel_store_bytes
    try:
        n = (Source.from_spark(df, as_="arrow", max_rows_per_batch=1024).island()
             .map(lambda b: b.num_rows).run_with(Sink.fold(0, lambda a, b: a + b), m).result(600))
    finally:
        done.set()
        sampler.join()
        assert_all_stages_stopped(m, timeout=15.0)
        m.shutdown()
    after = store_stats()
    data = rows * row_bytes
    assert part_bytes // 4 <= budget // 4  # a batch fits a chunk's share: the channel holds at most the budget
    bound = 4 * part_bytes + budget
    spilled = after["spilled"] - before["spilled"]
    mib = 2 ** 20
    print(f"\nobject store {capacity / mib:.0f} MiB, DataFrame {data / mib:.0f} MiB in {partitions} partitions; "
          f"peak held {peak['held'] / mib:.1f} MiB (before {before['held'] / mib:.1f}, bound {bound / mib:.1f}), "
          f"peak used {peak['used'] / mib:.1f} MiB, spilled {spilled / mib:.1f} MiB, "
          f"peak fallback {peak['fallback'] / mib:.1f} MiB")
    assert n == rows
    assert data >= 4 * capacity and bound < capacity / 2
    assert peak["held"] - before["held"] <= bound
    assert spilled == 0
    assert peak["fallback"] == 0


def _pandas_imported(_self) -> bool:
    return "pandas" in sys.modules


def test_the_hub_passes_each_partition_on_as_its_arrow_stream_and_never_imports_pandas(spark):
    """On Ray the hub actor fetches each partition from the executor and hands its Arrow IPC stream on as it came, one
    buffer the island reads into a table: a table returned from the hub went through Ray's Arrow reducer, whose
    offsets handling (string columns) imported ``pyarrow.compute`` and pandas into the hub, ~0.3 s of its CPU with
    its first partition, on the way to the stream's first element."""
    from atoll.interop import spark_on_demand

    spark_on_demand.stop_hub()
    spark_on_demand.start_hub()  # a fresh hub process: nothing another test ran in it counts
    mat = Materializer.ray(start_timeout=60)
    try:
        df = spark.createDataFrame([(i, f"page-{i % 7}", None if i % 5 == 0 else i / 4) for i in range(400)],
                                   "id long, page string, score double").repartition(4)
        rows = Source.from_spark(df).run_with(Sink.seq(), mat).result(60)
        assert_all_stages_stopped(mat, timeout=15.0)
    finally:
        mat.shutdown()
    assert sorted((r["id"], r["page"], r["score"]) for r in rows) == \
        [(i, f"page-{i % 7}", None if i % 5 == 0 else i / 4) for i in range(400)]
    assert ray.get(running_hub().__ray_call__.remote(_pandas_imported)) is False
