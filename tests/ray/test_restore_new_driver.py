"""``restore_from`` in a new driver: a first Python process runs a checkpointed graph on Materializer.ray, stops it
with a checkpoint and exits (its Ray with it); a second process, with a Ray of its own, restores the graph from the
checkpoint's path and gets the failure-free result; a different blueprint is refused with
``CheckpointMismatchError``. Nothing is shared between the two drivers but the checkpoint storage (Flink's
"resume from a savepoint" with a new JobManager).

Each process starts its own local Ray (``address="local"``) and shuts it down; the test checks that every process
of both Ray instances is gone afterwards (and ends any left over, by its pid)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from atoll import Keep, Materializer, Sink, Source

N = 3000
NAME = "new-driver"
HERE = os.path.dirname(os.path.abspath(__file__))


def graph():
    """1000 elements/s through three islands into ``Sink.seq`` (the result lives in the graph's state)."""
    return (Source.range(0, N).throttle(100, 0.1).island().map(lambda x: 3 * x).island()
            .to_mat(Sink.seq(), Keep.right))


def other_graph():
    """The same shape with a ``filter`` where ``graph`` has its ``map``: not the checkpointed blueprint."""
    return (Source.range(0, N).throttle(100, 0.1).island().filter(lambda x: x >= 0).island()
            .to_mat(Sink.seq(), Keep.right))


# ---------------------------------------------------------------- the drivers (run as ``python <this file> ...``)
def _start_ray(pids_file: str):
    import ray

    import psutil

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}})
    _record_ray_pids(pids_file, psutil)
    return ray


def _record_ray_pids(pids_file: str, psutil) -> None:
    """This driver's Ray processes (gcs, raylet, ... and their children, the workers), for the test to check."""
    import ray

    node = ray._private.worker._global_node
    procs = {}
    for pid in {info.process.pid for infos in node.all_processes.values() for info in infos}:
        try:
            proc = psutil.Process(pid)
            for each in [proc, *proc.children(recursive=True)]:
                procs[each.pid] = each.create_time()
        except psutil.NoSuchProcess:
            pass
    procs.pop(os.getpid(), None)
    with open(pids_file, "a") as f:  # with its start time: a pid reused later is another process
        f.write("".join(f"{pid} {created!r}\n" for pid, created in sorted(procs.items())))


def first_driver(storage: str, out: str, pids_file: str) -> None:
    """Run ``graph()`` with checkpoints, stop it with a checkpoint once a quarter of it went through, write the
    checkpoint's path to ``out``."""
    from atoll import CheckpointSettings

    ray = _start_ray(pids_file)
    try:
        mat = Materializer.ray(start_timeout=60, checkpoint=CheckpointSettings(storage=storage))
        try:
            graph().run(mat, name=NAME)
            g = mat.running_graph(NAME)
            deadline = time.monotonic() + 120
            while max((i.get("elements_in") or 0) for i in g.islands()) < N // 4:
                assert time.monotonic() < deadline, "the graph did not get going"
                time.sleep(0.02)
            info = g.stop_with_checkpoint(timeout=60)
            assert g.wait(60)
            import psutil

            _record_ray_pids(pids_file, psutil)  # workers started since
        finally:
            mat.shutdown()
        with open(out, "w") as f:
            json.dump({"path": info.path, "id": info.id}, f)
    finally:
        ray.shutdown()


def second_driver(path: str, out: str, pids_file: str) -> None:
    """Restore ``other_graph()`` (refused) and ``graph()`` from ``path``; write what happened to ``out``."""
    from atoll import CheckpointMismatchError

    ray = _start_ray(pids_file)
    try:
        mat = Materializer.ray(start_timeout=60)
        try:
            try:
                other_graph().run(mat, restore_from=path)
                mismatch = None
            except CheckpointMismatchError as e:
                mismatch = str(e)
            result = graph().run(mat, restore_from=path).result(120)
            import psutil

            _record_ray_pids(pids_file, psutil)
        finally:
            mat.shutdown()
        with open(out, "w") as f:
            json.dump({"mismatch": mismatch, "result": result}, f)
    finally:
        ray.shutdown()


# ---------------------------------------------------------------- the test
def _run_driver(role: str, *args: str, timeout: float = 300) -> None:
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    env["RAY_AUTH_MODE"] = "disabled"
    env["PYTHONPATH"] = os.pathsep.join([HERE, os.path.dirname(os.path.dirname(HERE)), env.get("PYTHONPATH", "")]
                                        ).rstrip(os.pathsep)
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), role, *args], env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"the {role} driver failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-5000:]}"


def _alive(procs) -> list:
    """The recorded processes (pid, start time) still running: the same pid started at the same time."""
    import psutil

    alive = []
    for pid, created in procs:
        try:
            proc = psutil.Process(pid)
            if proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except psutil.NoSuchProcess:
            pass
    return alive


def _wait_gone(pids_file: str, timeout: float = 30.0) -> list:
    """The recorded Ray processes still running after ``timeout`` seconds (ended then, so nothing outlives the
    test); [] when every one was gone."""
    import psutil

    if not os.path.exists(pids_file):
        return []
    with open(pids_file) as f:
        procs = {(int(pid), float(created)) for pid, created in (line.split() for line in f if line.strip())}
    deadline = time.monotonic() + timeout
    while _alive(procs) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _alive(procs)
    for proc in left:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    return [proc.pid for proc in left]


@pytest.mark.slow
def test_a_new_driver_restores_a_checkpoint_of_a_driver_that_exited(tmp_path):
    storage, first_out, second_out = str(tmp_path / "checkpoints"), str(tmp_path / "first.json"), \
        str(tmp_path / "second.json")
    first_pids, second_pids = str(tmp_path / "first.pids"), str(tmp_path / "second.pids")
    try:
        _run_driver("first", storage, first_out, first_pids)
        assert os.path.getsize(first_pids) > 0  # its Ray's processes were recorded
        assert _wait_gone(first_pids) == [], "the first driver's Ray outlived it"
        with open(first_out) as f:
            checkpoint = json.load(f)
        assert os.path.isfile(os.path.join(checkpoint["path"], "_MANIFEST.json"))

        _run_driver("second", checkpoint["path"], second_out, second_pids)
        assert os.path.getsize(second_pids) > 0
        assert _wait_gone(second_pids) == [], "the second driver's Ray outlived it"
        with open(second_out) as f:
            second = json.load(f)
    finally:
        _wait_gone(first_pids, timeout=0)
        _wait_gone(second_pids, timeout=0)
    assert second["mismatch"] is not None, "a different blueprint was restored"
    assert "('Filter', 'filter')" in second["mismatch"] and "('Map', 'map')" in second["mismatch"]

    assert second["result"] == [3 * x for x in range(N)]  # the failure-free result of ``graph()``


if __name__ == "__main__":
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    {"first": first_driver, "second": second_driver}[sys.argv[1]](*sys.argv[2:])
