"""A real multi-node Ray cluster on one machine (ray.cluster_utils.Cluster): islands pinned on
different nodes, elements in order, and a node lost mid-stream becoming IslandDiedError."""
from __future__ import annotations

import os
import time

import pytest
import ray
from ray.cluster_utils import Cluster

from atoll import Keep, Materializer, Sink, Source
from atoll.errors import IslandDiedError

import ray_helpers


@pytest.fixture(scope="module")
def cluster():
    if ray.is_initialized():
        ray.shutdown()
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "_system_config": ray_helpers.FAST_NODE_DEATH})
    nodes = {
        "a": c.add_node(num_cpus=1, resources={"island_a": 10}),
        "b": c.add_node(num_cpus=1, resources={"island_b": 10}),
    }
    c.wait_for_nodes()
    here = os.path.dirname(os.path.abspath(__file__))
    ray.init(address=c.address, log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": here}})
    yield c, nodes
    ray.shutdown()
    c.shutdown()


def test_islands_pinned_on_different_nodes_deliver_in_order(cluster):
    c, nodes = cluster
    m = Materializer.ray(start_timeout=60)
    fut = (
        Source.range(0, 20_000)
        .island(resources={"island_a": 1})
        .map(lambda x: x * 2)
        .island(resources={"island_b": 1})
        .to_mat(Sink.seq(), Keep.right)
        .run(m)
    )
    graph = m.running_graphs()[0]
    placed = {tuple(i["options"].get("resources", {})): i.get("node_id") for i in graph.islands()}
    assert placed[("island_a",)] == nodes["a"].node_id
    assert placed[("island_b",)] == nodes["b"].node_id
    assert fut.result(60) == [x * 2 for x in range(20_000)]
    assert graph.wait(30)
    m.shutdown()


def test_losing_a_node_mid_stream_reaches_the_driver(cluster):
    c, nodes = cluster
    m = Materializer.ray(start_timeout=60)
    term, done = (
        Source.repeat(1)
        .island(resources={"island_a": 1}, name="atoll-on-node-a")
        .watch_termination(Keep.right)
        .map(lambda x: x)
        .island(resources={"island_b": 1})
        .to_mat(Sink.ignore().island(resources={"island_b": 1}), Keep.both)
        .run(m)
    )
    graph = m.running_graphs()[0]
    assert len(graph.islands()) == 3  # every stage sits in a pinned island (the outer one is empty)
    c.remove_node(nodes["a"], allow_graceful=False)
    with pytest.raises(IslandDiedError, match="atoll-on-node-a"):
        done.result(60)
    with pytest.raises(IslandDiedError, match="atoll-on-node-a"):
        term.result(60)
    assert graph.wait(60)
    for a in graph.actor_handles():
        _wait_unreachable(a, 60)
    m.shutdown()


def _wait_unreachable(actor, timeout: float) -> None:
    """Wait until a call to ``actor`` fails with ``RayActorError``. ``ray.kill`` is asynchronous (the kill travels
    through the GCS while calls go straight to the actor), so a call just after the graph ended may still be
    answered; an actor that keeps answering for ``timeout`` seconds was never killed."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            ray.get(actor.info.remote(), timeout=timeout)
        except ray.exceptions.RayActorError:
            return
        assert time.monotonic() < deadline, f"island actor {actor} still answers {timeout}s after the graph ended"
        time.sleep(0.1)
