"""Islands as Ray actors: results, materialized values, options, channels, console handles."""
from __future__ import annotations

import decimal
import time

import numpy as np
import pyarrow as pa
import pytest
import ray

from atoll import Attributes, Flow, Keep, KillSwitches, Materializer, Sink, Source
from atoll.errors import IslandScheduleTimeoutError
from atoll.testkit import TestSink, TestSource

from ray_helpers import wait_no_island_actors


def _graphs():
    """(name, blueprint) pairs whose results must be the same on every materializer."""
    return [
        ("two islands", Source.range(0, 1000).map(lambda x: x + 1).island().map(lambda x: x * 2).filter(lambda x: x % 3 != 0).to_mat(Sink.seq(), Keep.right)),
        (
            "nested islands",
            Source.range(0, 300)
            .map(lambda x: x + 1)
            .island()
            .map(lambda x: x * 2)
            .island()
            .scan(0, lambda a, b: a + b)
            .island()
            .to_mat(Sink.last(), Keep.right),
        ),
        ("grouped across islands", Source.range(0, 50).island().grouped(7).island().to_mat(Sink.seq(), Keep.right)),
        ("tuples stay tuples", Source.from_iterable("abc").zip_with_index().island().to_mat(Sink.seq(), Keep.right)),
        ("empty", Source.empty().island().map(lambda x: x).to_mat(Sink.seq(), Keep.right)),
        ("take cancels upstream island", Source.repeat(7).island().take(5).to_mat(Sink.seq(), Keep.right)),
    ]


@pytest.mark.parametrize("name,graph", _graphs(), ids=[n for n, _ in _graphs()])
def test_same_results_as_local(rmat, name, graph):
    local = Materializer.local()
    try:
        expected = graph.run(local).result(10)
    finally:
        local.shutdown()
    assert graph.run(rmat).result(30) == expected


def test_fused_run_behind_a_boundary_finishes_its_buffered_input(rmat):
    """Upstream may complete while a fused run is still working through a received chunk over several
    turns; the run must finish that chunk before it stops (it once was stopped with every port closed)."""
    for _ in range(3):
        total = (Source.range(0, 100_000).island().map(lambda x: x * 2)
                 .run_with(Sink.fold(0, lambda a, b: a + b), rmat).result(60))
        assert total == 2 * sum(range(100_000))


def test_islands_are_actors_with_their_options(rmat):
    switch, done = (
        Source.repeat(1)
        .island(name="atoll-test-source", num_cpus=0.5)
        .via_mat(KillSwitches.single(), Keep.right)
        .to_mat(Sink.ignore(), Keep.both)
        .run(rmat)
    )
    graph = rmat.running_graphs()[0]
    infos = {i["name"]: i for i in graph.islands()}
    assert set(infos) == {"atoll-test-source", f"{graph.name}-island-0"}
    src = infos["atoll-test-source"]
    assert src["options"] == {"name": "atoll-test-source", "num_cpus": 0.5}
    assert src["state"] == "running" and src["node_id"] == ray.get_runtime_context().get_node_id()
    with pytest.raises(ValueError, match="atoll-test-source"):  # the island's name, not a Ray actor name
        ray.get_actor("atoll-test-source")
    switch.shutdown()
    done.result(10)
    assert graph.wait(10)


def test_island_actors_collect_cyclic_garbage_less_often(rmat):
    """An island actor's process runs the cyclic collector at ``ISLAND_GC_THRESHOLD`` (its own process: the
    driver's thresholds stay as they were)."""
    import gc

    from atoll._impl.actors.island_actor import ISLAND_GC_THRESHOLD

    driver = gc.get_threshold()
    seen = Source.single(0).map(lambda _: gc.get_threshold()).island().run_with(Sink.head(), rmat).result(60)
    assert tuple(seen) == ISLAND_GC_THRESHOLD != driver
    assert gc.get_threshold() == driver


def test_materialized_values_reach_the_driver(rmat):
    (switch, term), total = (
        Source.range(0, 10)
        .island()
        .via_mat(KillSwitches.single(), Keep.right)
        .watch_termination(Keep.both)
        .to_mat(Sink.fold(0, lambda a, b: a + b), Keep.both)
        .run(rmat)
    )
    assert total.result(10) == 45
    assert repr(term.result(10)) == "Done"
    switch.shutdown()  # after the stream ended: a no-op, as in Pekko


def test_map_materialized_value_runs_on_the_driver(rmat):
    fut = Source.range(0, 4).island().to_mat(Sink.seq(), Keep.right).map_materialized_value(lambda f: ("wrapped", f)).run(rmat)
    assert fut[0] == "wrapped" and fut[1].result(10) == [0, 1, 2, 3]


def test_kill_switch_proxy_works_from_another_ray_task(rmat):
    switch, done = Source.repeat(1).via_mat(KillSwitches.single(), Keep.right).island().to_mat(Sink.ignore(), Keep.both).run(rmat)

    @ray.remote(num_cpus=0)
    def stop(s):
        s.shutdown()
        return "stopped"

    assert ray.get(stop.remote(switch)) == "stopped"
    assert repr(done.result(10)) == "Done"


def test_probes_see_exact_demand_across_islands(rmat):
    src, sink = TestSource.probe().island().map(lambda x: x * 10).to_mat(TestSink.probe(), Keep.both).run(rmat)
    assert src.expect_request() == rmat.settings.input_buffer[1]
    sink.request(2)
    src.send_next_many(1, 2, 3)
    sink.expect_next(10, 20)
    sink.expect_no_message(0.2)  # the third element waits for demand
    sink.request(1)
    sink.expect_next(30)
    src.send_complete()
    sink.expect_complete()


def test_element_types_survive_the_channel(rmat):
    elems = [1, 2.5, "s", b"b", True, (1, (2, "x")), [1, 2], {"k": (1, 2)}, decimal.Decimal("1.25"), {1: "int key"}]
    assert Source.from_iterable(elems).island().to_mat(Sink.seq(), Keep.right).run(rmat).result(10) == elems


def test_large_payloads_travel_as_object_references(rmat):
    arr = np.arange(200_000, dtype=np.float64)
    table = pa.table({"a": list(range(1000))})
    got = Source.from_iterable([arr, table]).island().to_mat(Sink.seq(), Keep.right).run(rmat).result(20)
    assert np.array_equal(got[0], arr)
    assert not got[0].flags.writeable, "read zero-copy from the object store"
    assert got[1].equals(table)


def test_cancel_fails_every_future_with_the_cause_and_ends_all_actors(rmat):
    term, total = (
        Source.repeat(1)
        .island()
        .watch_termination(Keep.right)
        .map(lambda x: x)
        .island()
        .to_mat(Sink.fold(0, lambda a, b: a + b), Keep.both)
        .run(rmat)
    )
    graph = rmat.running_graphs()[0]
    time.sleep(0.2)  # let elements flow before cancelling (not a race: the result is the same either way)
    graph.cancel(ValueError("operator said stop"))
    with pytest.raises(ValueError, match="operator said stop"):
        total.result(10)
    with pytest.raises(ValueError, match="operator said stop"):
        term.result(10)
    assert graph.wait(10)
    assert wait_no_island_actors() == []


def test_unschedulable_island_fails_within_the_start_timeout(ray_session):
    m = Materializer.ray(start_timeout=2)
    t0 = time.monotonic()
    with pytest.raises(IslandScheduleTimeoutError, match="nowhere"):
        Source.range(0, 3).island(resources={"nowhere": 1}).to_mat(Sink.seq(), Keep.right).run(m)
    assert time.monotonic() - t0 < 15
    assert wait_no_island_actors() == []
    m.shutdown()


def test_unknown_island_option_is_rejected_when_building():
    with pytest.raises(ValueError, match="'num_cpu'"):
        Source.range(0, 3).island(num_cpu=1)
    with pytest.raises(ValueError, match="'resources' must be a dict"):
        Flow().map(abs).island(resources=["x"])


def test_input_buffer_attribute_sets_the_demand_of_a_boundary(rmat):
    src, sink = (
        TestSource.probe()
        .with_attributes(Attributes.input_buffer(4, 4))
        .island()
        .map(lambda x: x)
        .to_mat(TestSink.probe(), Keep.both)
        .run(rmat)
    )
    assert src.expect_request() == 4
    sink.request(10)
    src.send_next_many(1, 2)
    assert src.expect_request() == 2  # half of the buffer consumed -> asked again
    src.send_complete()
    sink.expect_next(1, 2)
    sink.expect_complete()


def test_no_actor_is_left_after_a_graph_completes(rmat):
    assert Source.range(0, 100).island().map(lambda x: x).island().to_mat(Sink.seq(), Keep.right).run(rmat).result(20) == list(range(100))
    rmat.running_graphs() and rmat.running_graphs()[0].wait(10)
    assert wait_no_island_actors() == []


def test_object_refs_as_elements_cross_islands_without_being_fetched(rmat):
    """An element that is an ObjectRef travels as a ref (Ray tracks it as a nested reference); the next island
    gets the ref itself and may ``ray.get`` it."""
    import ray

    got = (Source.range(1, 5).map(lambda x: ray.put(3 * x)).island()
           .map(lambda ref: (type(ref).__name__, ray.get(ref))).island()
           .run_with(Sink.seq(), rmat).result(60))
    assert got == [("ObjectRef", 3), ("ObjectRef", 6), ("ObjectRef", 9), ("ObjectRef", 12)]
