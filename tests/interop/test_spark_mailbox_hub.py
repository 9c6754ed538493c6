"""from_spark's Ray islands reach the driver through one long-lived hub actor holding a mailbox per source: a graph
run opens its source's mailbox and closes it when it ends, starting no actor; the hub's calls, in process."""
from __future__ import annotations

import threading

import ray

from atoll import Materializer, Sink, Source
from atoll.interop import spark_on_demand
from atoll.interop.spark_on_demand import MailboxHub
from .interop_helpers import wait_until


def test_the_hub_serves_each_key_apart_and_a_closed_key_is_closed():
    hub = MailboxHub()
    hub.open("a")
    hub.open("b")
    hub.want("a", 0)
    hub.want("b", 5)
    hub.done("a", 0)
    assert hub.requests("a", 0) == [("want", 0), ("done", 0)]
    assert hub.requests("b", 0) == [("want", 5)]
    assert hub.answer("a", 0, 0) is None  # not answered yet: the wait is bounded
    hub.reply("a", 0, "exec-1", None)
    assert hub.answer("a", 0, 0) == ("exec-1", None)
    assert hub.answer("b", 0, 0) is None
    # a waiting answer is woken by the close of its key, and finds it closed
    got = []
    waiter = threading.Thread(target=lambda: got.append(hub.answer("b", 1, 30)))
    waiter.start()
    hub.close("b")
    waiter.join(30)
    assert got == [(None, "closed")]
    assert hub.open_keys() == 1
    # calls for a key that is not open: no state is made for it
    hub.want("gone", 1)
    hub.reply("gone", 1, "x", None)
    assert hub.requests("gone", 0) == [] and hub.answer("gone", 1, 0) == (None, "closed")
    hub.close("a")
    assert hub.open_keys() == 0


def test_graph_runs_share_the_hub_and_leave_no_mailbox_open(spark):
    df = spark.range(0, 3000, numPartitions=3).selectExpr("id", "id * 2 as twice")
    m = Materializer.ray(start_timeout=60)
    try:
        hub = spark_on_demand._hub_actor()
        for _ in range(2):
            rows = Source.from_spark(df, max_rows_per_batch=500).run_with(Sink.seq(), m).result(120)
            assert rows == [{"id": i, "twice": 2 * i} for i in range(3000)]
            assert spark_on_demand._hub_actor() is hub
            assert wait_until(lambda: ray.get(hub.open_keys.remote()) == 0, 30)
        first = Source.from_spark(df).run_with(Sink.head(), m).result(120)
        assert first == {"id": 0, "twice": 0}
        assert wait_until(lambda: ray.get(hub.open_keys.remote()) == 0, 30)
    finally:
        m.shutdown()


def test_the_hub_ends_with_the_spark_session_and_the_next_use_makes_a_new_one(spark):
    from atoll.interop import spark_session

    hub = spark_on_demand._hub_actor()
    assert spark_on_demand.stop_hub in spark_session._stop_hooks  # spark_session.stop() runs it
    spark_on_demand.stop_hub()
    assert wait_until(lambda: _dead(hub), 30)
    spark_on_demand.stop_hub()  # none left: nothing to do
    again = spark_on_demand._hub_actor()
    assert again is not hub and ray.get(again.open_keys.remote()) == 0


def _dead(actor) -> bool:
    try:
        ray.get(actor.__ray_ready__.remote(), timeout=5)
        return False
    except ray.exceptions.RayActorError:
        return True
