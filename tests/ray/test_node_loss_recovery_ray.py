"""Recovery from a lost node on Materializer.ray (issue 12: "a helper that kills an island or removes a node at a
chosen fraction of the stream"): a whole node of a ``ray.cluster_utils.Cluster`` is removed - its raylet and every
worker on it killed at once, as when a machine is lost - while an island of a keyed pipeline runs there, and the
graph restarts from its last checkpoint on the node that is left, exactly once and in order per key. An actor of the
next attempt that Ray places on the lost node before it declares the node dead is started again within the same
restart (the last two tests, without a cluster).

The island that is lost needs one unit of the custom resource ``spot``, which the removable node and the head both
offer: the head's unit is taken by a placeholder actor while the graph starts (so the island lands on the removable
node) and given back before the node is removed (so the restart can be placed on the head). The seed of the random
point of the stream is printed."""
from __future__ import annotations

import random
import time
from concurrent.futures import Future
from types import SimpleNamespace

import pytest
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from atoll import CheckpointSettings, Keep, Materializer, RecoveryFailedError, RestartPolicy
from atoll._impl.actors.attempt import ActorLostAtStart
from atoll._impl.actors.recovery import GraphRecovery
from atoll.testkit.chaos import numbered, remove_node_at, verifying_sink

import ray_helpers
from ray_helpers import wait_no_island_actors

KEYS = 4
NK = 6000  # 6 s at 1000 elements/s: a removal at 70% leaves the stream 1.8 s to go


@pytest.fixture(scope="module")
def ray_session():
    """This module's Ray session: a ``ray.cluster_utils.Cluster`` of a head node and one removable node, both
    offering one unit of the custom resource ``spot`` (the head also ``head``, which pins the other islands there)."""
    with ray_helpers.cluster_session({"num_cpus": 4, "resources": {"spot": 1, "head": 100}},
                                     spot={"num_cpus": 1, "resources": {"spot": 1}}) as (cluster, added):
        nodes.update(added)
        yield cluster


#: the removable nodes of this module's cluster
nodes: dict = {}


@ray.remote(num_cpus=0, resources={"spot": 1})
class _Placeholder:
    """Holds the head's unit of ``spot`` while the graph starts."""

    def ready(self) -> bool:
        return True


def _wait_until(condition, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} not reached within {timeout}s"
        time.sleep(0.01)


def _keyed(n: int):
    """Source on the head, the middle island on a node offering ``spot``, the sink island where Ray puts it."""
    return (numbered(n, KEYS).throttle(100, 0.1).island(resources={"head": 1})
            .map(lambda p: (p[0], p[1])).island(resources={"spot": 1})
            .to_mat(verifying_sink(n, KEYS), Keep.right))


@pytest.mark.slow
def test_a_keyed_pipeline_that_loses_a_node_recovers_on_the_node_left_exactly_once(ray_session, tmp_path):
    cluster = ray_session
    seed = random.randrange(1 << 30)
    fraction = random.Random(seed).uniform(0.3, 0.7)
    lost = nodes.pop("spot")
    head = cluster.head_node.node_id
    placeholder = _Placeholder.options(scheduling_strategy=NodeAffinitySchedulingStrategy(head, soft=False)).remote()
    mat = Materializer.ray(start_timeout=60, checkpoint=CheckpointSettings(
        storage=str(tmp_path), interval=0.2, restart=RestartPolicy(backoff=0.0)))
    try:
        assert ray.get(placeholder.ready.remote(), timeout=60)
        verdict = _keyed(NK).run(mat, name="node-loss")
        g = mat.running_graph("node-loss")
        before = g.islands()
        spot = [i for i in before if (i["options"] or {}).get("resources") == {"spot": 1}]
        assert len(spot) == 1 and spot[0]["node_id"] == lost.node_id, before
        ray.kill(placeholder)  # the head's unit of spot is free again: the restart can be placed there
        _wait_until(lambda: len(g.checkpoints()) >= 1, what="a first checkpoint")
        struck = remove_node_at(g, cluster, lost, fraction, NK, timeout=120)
        _wait_until(lambda: g.attempt == 1, timeout=120, what="the next attempt")
        after = g.islands()  # the stream has over 1.8 s to go: the new attempt's islands still run
        v = verdict.result(180)
        print(f"seed={seed} fraction={fraction:.2f} removed node {lost.node_id[:8]} after {struck} elements "
              f"(islands there: {[i['name'] for i in before if i['node_id'] == lost.node_id]}): {v}")
        assert v.ok, f"seed={seed}: {v}"
        assert v.received == NK
        assert g.restarts == 1, f"seed={seed}: {g.restarts} restarts"
        assert struck < NK
        assert g.wait(30)
        moved = [i for i in after if (i["options"] or {}).get("resources") == {"spot": 1}]
        assert len(moved) == 1 and moved[0].get("node_id", head) == head, after  # placed on the node left
    finally:
        mat.shutdown()
        try:
            ray.kill(placeholder)
        except Exception:  # noqa: BLE001 - killed already
            pass
    assert wait_no_island_actors(timeout=30) == []


# ---------------------------------------------------------------- the relaunch, without a cluster
class _Launcher:
    """Fails its first ``lost`` launches as a launch does whose actor was placed on a node lost meanwhile."""

    def __init__(self, lost: int, start_timeout: float = 30.0):
        self.lost, self.calls = lost, 0
        self.settings = SimpleNamespace(start_timeout=start_timeout)
        self.islands = []

    def launch(self, attempt, snapshots):
        self.calls += 1
        if self.calls <= self.lost:
            raise ActorLostAtStart("island g-island-0 failed to start: The actor died because its node has died.")
        return ["records"], [["values"]]


class _Running:
    """What ``GraphRecovery`` asks of the running graph."""

    name = "g"

    def __init__(self):
        self._coordinator = SimpleNamespace(suspend=lambda: None, latest=lambda: None)
        self.installed = Future()

    def _recovery_veto(self):
        return None

    def _recovery_failed(self, err):
        self.installed.set_exception(err)

    def _install_attempt(self, records, results, attempt, info):
        self.installed.set_result((records, results, attempt, info))


def test_an_attempt_that_lost_an_actor_while_starting_is_started_again_within_the_same_restart():
    launcher, running = _Launcher(lost=2), _Running()
    recovery = GraphRecovery(running, launcher, RestartPolicy(backoff=0.0), None, None)
    recovery.RELAUNCH_PAUSE = 0.0
    recovery.start([], RuntimeError("island died"))
    assert running.installed.result(30) == (["records"], [["values"]], 1, None)
    assert launcher.calls == 3 and recovery.restarts == 1 and recovery.attempt == 1


def test_past_the_start_timeout_a_lost_actor_is_a_failed_restart():
    launcher, running = _Launcher(lost=10, start_timeout=0.0), _Running()
    recovery = GraphRecovery(running, launcher, RestartPolicy(backoff=0.0, max_restarts=2), None, None)
    recovery.start([], RuntimeError("island died"))
    with pytest.raises(RecoveryFailedError, match="budget spent") as info:
        running.installed.result(30)
    assert isinstance(info.value.__cause__, ActorLostAtStart)
    assert launcher.calls == 2 and recovery.restarts == 2  # one launch per restart: each failed at once
