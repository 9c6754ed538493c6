"""Helpers for the Ray tests (imported by name: the test directories are not packages)."""
from __future__ import annotations

import contextlib
import socket
import time

from ray_start import worker_runtime_env

#: the dashboard of this module's Ray session (several local Ray instances may be running)
DASHBOARD = None


def alive_island_actors(include_warm: bool = False) -> list:
    """Island actors Ray's state API reports as alive (needs the dashboard, started by ``ray_session``), apart
    from those idle in a materializer's warm pool (kept for the next graph, not leaked) unless ``include_warm``."""
    from ray.util.state import list_actors

    from atoll._impl.actors.warm_pool import idle_actor_ids

    warm = set() if include_warm else idle_actor_ids()
    return [
        a
        for a in list_actors(
            address=f"http://{DASHBOARD}" if DASHBOARD else None,
            limit=10000,
            filters=[("class_name", "=", "IslandActor")],
            raise_on_missing_output=False,
        )
        if a.state not in ("DEAD",) and a.actor_id not in warm
    ]


def wait_no_island_actors(timeout: float = 10.0, include_warm: bool = False) -> list:
    deadline = time.monotonic() + timeout
    while True:
        alive = alive_island_actors(include_warm)
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def wait_received(graph, n: int = 1, island: int = 0, timeout: float = 30.0) -> None:
    """Wait until ``island`` (default 0, the sink's: islands are numbered from the sink) of the running ``graph``
    received ``n`` elements through its channels (``chaos.elements_received``): a condition to wait on, where a
    sleep would guess how long that takes."""
    from atoll.testkit.chaos import elements_received

    deadline = time.monotonic() + timeout
    while elements_received(graph, island) < n:
        assert time.monotonic() < deadline, f"island {island} did not receive {n} elements within {timeout}s"
        time.sleep(0.01)


#: the test clusters' GCS declares a node dead after 4 failed health checks 0.5 s apart, each given 1.5 s (Ray's
#: defaults, 5 checks 3 s apart given 10 s each, made each node-loss test wait ~15 s for the news; the recovery under
#: test is the same, and a live raylet on a loaded 2-core machine still answers well within 1.5 s)
FAST_NODE_DEATH = {"health_check_period_ms": 500, "health_check_failure_threshold": 4, "health_check_timeout_ms": 1500}


@contextlib.contextmanager
def cluster_session(head_node_args: dict, **nodes_args: dict):
    """A Ray session on a ``ray.cluster_utils.Cluster`` of a head node (``head_node_args``, with a dashboard on a free
    port: other Ray instances may run on this machine) and one node per keyword (``name=add_node args``); yields
    ``(cluster, {name: node})`` and shuts both down at the end. The test modules' directory travels to the workers
    on ``PYTHONPATH`` (test modules and helpers are imported by name)."""
    import ray
    from ray.cluster_utils import Cluster

    global DASHBOARD
    if ray.is_initialized():
        ray.shutdown()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cluster = Cluster(initialize_head=True, head_node_args=dict(head_node_args, include_dashboard=True,
                                                                dashboard_port=port, _system_config=FAST_NODE_DEATH))
    nodes = {name: cluster.add_node(**args) for name, args in nodes_args.items()}
    cluster.wait_for_nodes()
    ctx = ray.init(address=cluster.address, log_to_driver=False, runtime_env=worker_runtime_env(__file__))
    DASHBOARD = ctx.dashboard_url
    try:
        yield cluster, nodes
    finally:
        ray.shutdown()
        cluster.shutdown()
