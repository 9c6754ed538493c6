"""Recovery at the awkward moments of a checkpoint on Materializer.ray (issue 12's fault-injection tests): an
island killed while checkpoint n is being aligned, an island that dies after writing its snapshot blob but before
acknowledging it, a sink that dies in the middle of its two-phase commit, and a restart that finds no capacity.

Each fault is injected exactly where it is meant to strike, not at a random moment: a gate in a stage that blocks
the island's thread until the test opens it, a ``pyarrow.fs`` file system handler that ends the actor process right
after a chosen blob was written, a Parquet sink whose k-th commit ends the process after renaming its part, and a
test actor that takes the only unit of a custom resource an island needs while that island is dead. Results are
checked exactly (nothing lost, duplicated or reordered); the seeds of the randomised choices are printed."""
from __future__ import annotations

import io
import json
import os
import random
import time

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from atoll import CheckpointSettings, Keep, KillSwitches, Materializer, RecoveryFailedError, RestartPolicy, Sink, Source
from atoll.errors import CheckpointError, IslandScheduleTimeoutError
from atoll.interop.parquet import ParquetSink, _ParquetLogic, new_promise
from atoll.testkit.chaos import kill_island_chosen, numbered, verifying_sink

import ray_helpers
from ray_helpers import wait_no_island_actors

#: endless for a test: the graphs that use it are ended by their kill switches
ENDLESS = 10**9


@pytest.fixture(scope="module")
def ray_session():
    """This module's Ray session: a ``ray.cluster_utils.Cluster`` of a head node, where the islands run, and one
    removable node that alone has the custom resource ``x`` (the no-capacity test places an island there and
    removes the node). The other tests use it as conftest's single-node session."""
    with ray_helpers.cluster_session({"num_cpus": 4}, x={"num_cpus": 1, "resources": {"x": 1}}) as (cluster, added):
        nodes.update(added)
        yield cluster


#: the removable nodes of this module's cluster
nodes: dict = {}


def _wait_until(condition, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} not reached within {timeout}s"
        time.sleep(0.01)


def _manifest(storage, graph: str, checkpoint_id: int) -> str:
    return os.path.join(str(storage), graph, f"chk-{checkpoint_id:08d}", "_MANIFEST.json")


def _prefix(values: list, what: str) -> None:
    """``values`` are 0, 1, 2, ... - nothing lost, duplicated or reordered."""
    assert values == list(range(len(values))), f"{what}: not an exact prefix"


# ---------------------------------------------------------------- 1. a kill while checkpoint n is being aligned
def _gate(armed: str, blocked: str, released: str, past: str):
    """A ``map`` function that, once the file ``armed`` exists, blocks its island's thread on the next element until
    the file ``released`` exists (writing the element into ``blocked`` when it stops). A blocked island cannot cut a
    checkpoint, so its barrier never leaves: what is downstream of it stays half aligned for as long as the test
    wants. Once ``released`` exists it passes everything (the next attempt replays through it), and creates the file
    ``past`` when an element after the one it blocked at goes through."""
    def gate(x):
        if os.path.exists(armed) and not os.path.exists(released):
            with open(blocked, "w") as f:
                f.write(str(x))
            deadline = time.monotonic() + 120  # the test's own deadlines are shorter: never hang a worker for ever
            while not os.path.exists(released) and time.monotonic() < deadline:
                time.sleep(0.005)
        elif os.path.exists(released) and not os.path.exists(past):
            with open(blocked) as f:
                if x > int(f.read()):
                    open(past, "w").close()
        return x

    return gate


@pytest.mark.slow
def test_an_island_killed_while_a_checkpoint_is_aligned_restarts_from_the_previous_checkpoint(ray_session, tmp_path):
    """Island ``merge`` (a Merge of islands ``a`` and ``b``, and the sink) is killed while it holds barrier 2 of
    ``a`` and waits for ``b``'s, which ``b`` never sends (its thread is blocked in a gate): checkpoint 2 never
    completes (its waiter fails, it has no manifest, its id is not reused), the graph restarts from checkpoint 1,
    and each input's elements arrive exactly once and in order."""
    armed, blocked, released, past = (str(tmp_path / n) for n in ("armed", "blocked", "released", "past"))
    storage = tmp_path / "ckpt"
    a = (Source.range(0, ENDLESS).throttle(100, 0.1).via_mat(KillSwitches.single(), Keep.right)
         .map(lambda x: ("a", x)).island())
    b = (Source.range(0, ENDLESS).throttle(100, 0.1).via_mat(KillSwitches.single(), Keep.right)
         .map(_gate(armed, blocked, released, past)).map(lambda x: ("b", x)).island())
    graph = a.merge(b, combine=Keep.both).to_mat(Sink.seq(), Keep.both)
    mat = Materializer.ray(start_timeout=30, checkpoint=CheckpointSettings(
        storage=str(storage), restart=RestartPolicy(backoff=0.0)))
    try:
        (switch_a, switch_b), seq = graph.run(mat, name="align")
        g = mat.running_graph("align")
        assert g.checkpoint_now(timeout=30).id == 1
        open(armed, "w").close()
        _wait_until(lambda: os.path.exists(blocked), what="island b blocked in its gate")
        pending = g.checkpoint_now(wait=False)  # checkpoint 2: a's barrier reaches the merge, b's never does
        seen = {}

        def half_aligned():
            """The island that holds barrier 2 on one input and waits for it on the other (None: not yet)."""
            st = g.checkpoint_status()
            waiting = [name for name, s in st["islands"].items()
                       if s.get("checkpoint") == 2 and len(s.get("waiting_for") or ()) == 1]
            if st["in_progress"] != 2 or len(st["answered"]) != 1 or len(waiting) != 1:
                return None
            seen.update(status=st, a=st["answered"][0])
            return waiting[0]

        merge = kill_island_chosen(g, half_aligned, timeout=30)
        st = seen["status"]
        assert st["islands"][seen["a"]] != {"state": "ended"}, "island a must still run: its barrier arrived"
        b_name = ({r["name"] for r in g.islands()} - {seen["a"], merge}).pop()
        assert b_name not in st["answered"] and st["islands"][b_name].get("checkpoint") is None  # never cut 2
        _wait_until(lambda: g.restarts == 1, what="the fence of the failed attempt")  # every old actor is dead
        open(released, "w").close()
        with pytest.raises(CheckpointError):
            pending.result(30)
        _wait_until(lambda: g.attempt == 1, what="the next attempt")
        # the coordinator takes the new attempt in on its own thread (a queued "resume"): wait for it
        _wait_until(lambda: g.checkpoint_status()["restored_from"] is not None, what="the coordinator's resume")
        assert g.checkpoint_status()["restored_from"] == 1
        after = g.checkpoint_now(timeout=30)  # the new attempt runs and checkpoints, with a new id
        # b goes on past the element it was blocked at before the switches end the stream (the replay from
        # checkpoint 1 starts before that element; without the wait the shutdown could come first)
        _wait_until(lambda: os.path.exists(past), what="island b past the element it was blocked at")
        switch_a.shutdown()
        switch_b.shutdown()
        got = seq.result(60)
        a_values = [x for k, x in got if k == "a"]
        b_values = [x for k, x in got if k == "b"]
        _prefix(a_values, "input a")
        _prefix(b_values, "input b")
        assert len(b_values) > int(open(blocked).read())  # b went on past the element it was blocked at
        assert after.id == 3 and after.attempt == 1
        assert not os.path.exists(_manifest(storage, "align", 2))
        assert 2 not in [c.id for c in g.checkpoints()]
        assert g.restarts == 1
    finally:
        if not os.path.exists(released):
            open(released, "w").close()
        mat.shutdown()
    assert wait_no_island_actors() == []


# ---------------------------------------------------------------- 2a. a kill between a snapshot write and its ack
class _ExitFile(io.FileIO):
    """A file written for ``_DyingLocalFS``: once closed (everything written and flushed), ``on_closed`` runs."""

    def __init__(self, path: str, on_closed):
        super().__init__(path, "wb")
        self._on_closed = on_closed

    def close(self):
        was_open = not self.closed
        super().close()
        if was_open:
            self._on_closed()


class _DyingLocalFS(pafs.FileSystemHandler):
    """Local files (a ``pyarrow.fs.PyFileSystem`` handler for ``CheckpointSettings(storage=(fs, path))``), except
    that the first process other than the driver that writes a file ending in ``target`` ends itself with
    ``os._exit`` right after the file is complete: the island actor writing its snapshot blob dies after the write
    and before its acknowledgement leaves. ``marker`` records what was written (once: the next attempt's blobs have
    other names anyway)."""

    def __init__(self, target: str, marker: str, driver_pid: int):
        self.target, self.marker, self.driver_pid = target, marker, driver_pid
        self.fs = pafs.LocalFileSystem()

    def __getstate__(self):
        return (self.target, self.marker, self.driver_pid)

    def __setstate__(self, state):
        self.__init__(*state)

    def _written(self, path: str) -> None:
        if path.endswith(self.target) and os.getpid() != self.driver_pid and not os.path.exists(self.marker):
            with open(self.marker, "w") as f:
                json.dump({"path": path, "size": os.path.getsize(path), "pid": os.getpid()}, f)
            os._exit(1)

    def get_type_name(self):
        return "dying-local"

    def equals(self, other):
        return isinstance(other, _DyingLocalFS) and other.__getstate__() == self.__getstate__()

    def normalize_path(self, path):
        return path

    def get_file_info(self, paths):
        return self.fs.get_file_info(paths)

    def get_file_info_selector(self, selector):
        return self.fs.get_file_info(selector)

    def create_dir(self, path, recursive):
        self.fs.create_dir(path, recursive=recursive)

    def delete_dir(self, path):
        self.fs.delete_dir(path)

    def delete_dir_contents(self, path, missing_dir_ok=False):
        self.fs.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self):
        raise OSError("dying-local: refusing to empty the root directory")

    def delete_file(self, path):
        self.fs.delete_file(path)

    def move(self, src, dest):
        self.fs.move(src, dest)

    def copy_file(self, src, dest):
        self.fs.copy_file(src, dest)

    def open_input_stream(self, path):
        return self.fs.open_input_stream(path)

    def open_input_file(self, path):
        return self.fs.open_input_file(path)

    def open_output_stream(self, path, metadata):
        import pyarrow as pa

        return pa.PythonFile(_ExitFile(path, lambda: self._written(path)), mode="w")

    def open_append_stream(self, path, metadata):
        return self.fs.open_append_stream(path, metadata)


KEYS = 4
NK = 4000  # 4 s at 1000 elements/s: checkpoints every 0.2 s, the fault strikes at checkpoint 2 to 4


def _keyed(n: int):
    return (numbered(n, KEYS).throttle(100, 0.1).island().map(lambda p: (p[0], p[1])).island()
            .to_mat(verifying_sink(n, KEYS), Keep.right))


@pytest.mark.slow
@pytest.mark.parametrize("island", [0, 1, 2], ids=["sink", "middle", "source"])
def test_an_island_dying_after_writing_its_snapshot_before_acknowledging_it(ray_session, tmp_path, island):
    """The island's blob of checkpoint k is complete on storage when its process ends, but the coordinator never
    hears of it: checkpoint k never completes (no manifest, not listed), the graph restarts from k - 1, and the
    keyed result is exact."""
    seed = random.randrange(1 << 30)
    k = random.Random(seed).randint(2, 4)
    marker = tmp_path / "died"
    root = tmp_path / "ckpt"
    fs = pafs.PyFileSystem(_DyingLocalFS(f"chk-{k:08d}/island-{island:03d}-a0.bin", str(marker), os.getpid()))
    mat = Materializer.ray(start_timeout=30, checkpoint=CheckpointSettings(
        storage=(fs, str(root)), interval=0.2, restart=RestartPolicy(backoff=0.0)))
    name = f"blob-{island}"
    try:
        verdict = _keyed(NK).run(mat, name=name)
        g = mat.running_graph(name)
        v = verdict.result(90)
        print(f"seed={seed} island={island} checkpoint={k}: {v}")
        assert v.ok, f"seed={seed}: {v}"
        assert v.received == NK, f"seed={seed}"
        died = json.loads(marker.read_text())  # the fault struck, after a complete write
        assert died["size"] > 0 and died["path"].endswith(f"chk-{k:08d}/island-{island:03d}-a0.bin"), died
        assert g.restarts == 1, f"seed={seed}"
        assert g.checkpoint_status()["restored_from"] == k - 1, f"seed={seed}"
        assert k not in [c.id for c in g.checkpoints()]
        assert not os.path.exists(_manifest(root, name, k)), f"seed={seed}"
    finally:
        mat.shutdown()
    assert wait_no_island_actors() == []


# ---------------------------------------------------------------- 2b. a kill during a sink's commit
class _DyingParquetSink(ParquetSink):
    """``Sink.to_parquet`` whose ``at``-th commit (phase 2) renames its first prepared part to its final name and
    then ends the actor process - once (``marker``): a kill in the middle of ``snapshot_commit_finish``."""

    def __init__(self, path, marker: str, at: int):
        super().__init__(path, rows_per_block=100)
        self.marker, self.at = marker, at

    def create_logic_and_materialized_value(self, attributes):
        promise = new_promise()
        return _DyingParquetLogic(self, promise), promise


class _DyingParquetLogic(_ParquetLogic):
    def __init__(self, stage: _DyingParquetSink, promise):
        super().__init__(stage, promise)
        self.marker, self.at = stage.marker, stage.at
        self.commits = 0

    def snapshot_commit_finish(self, checkpoint_id, prepared, success):
        if success and prepared:
            self.commits += 1
            if self.commits == self.at and not os.path.exists(self.marker):
                self.parts.commit(prepared[:1], checkpoint_id)  # the first part is visible under its final name
                with open(self.marker, "w") as f:
                    json.dump({"checkpoint": checkpoint_id, "committed": prepared[0][1],
                               "prepared": [final for _temp, final in prepared]}, f)
                os._exit(1)
        super().snapshot_commit_finish(checkpoint_id, prepared, success)


def _committed(path) -> list:
    names = sorted(os.listdir(path))
    assert [n for n in names if n.startswith("_")] == [], names  # no temporary left
    out = []
    for n in names:
        out.extend(pq.read_table(os.path.join(path, n)).column("x").to_pylist())
    return out


N = 3000


@pytest.mark.slow
def test_a_sink_killed_during_its_commit_commits_again_on_restore_exactly_once(ray_session, tmp_path):
    """The Parquet sink's commit of checkpoint n renamed a part and the process ended before the commit returned:
    the restart restores a checkpoint that still lists that part as prepared, commits it again (a part already
    renamed is recognised, not written twice), and the directory holds exactly the failure-free run's rows."""
    seed = random.randrange(1 << 30)
    at = random.Random(seed).randint(2, 4)
    out = tmp_path / "out"
    marker = tmp_path / "died"
    mat = Materializer.ray(start_timeout=30, checkpoint=CheckpointSettings(
        storage=str(tmp_path / "ckpt"), interval=0.2, restart=RestartPolicy(backoff=0.0)))
    try:
        written = (Source.range(0, N).throttle(100, 0.1).island().map(lambda x: {"x": x}).island()
                   .to_mat(Sink.from_graph(_DyingParquetSink(str(out), str(marker), at)), Keep.right)).run(
            mat, name="commit")
        g = mat.running_graph("commit")
        assert written.result(90) == N, f"seed={seed}"
        died = json.loads(marker.read_text())
        print(f"seed={seed} commit #{at}: died committing checkpoint {died['checkpoint']} after renaming "
              f"{died['committed']}")
        assert g.restarts == 1, f"seed={seed}"
        assert g.checkpoint_status()["restored_from"] >= died["checkpoint"], f"seed={seed}"
        assert os.path.exists(out / died["committed"])
        assert _committed(out) == list(range(N)), f"seed={seed}"
    finally:
        mat.shutdown()
    assert wait_no_island_actors() == []


# ---------------------------------------------------------------- 3. no capacity after a loss
@pytest.mark.slow
def test_a_restart_that_finds_no_capacity_fails_with_recovery_failed_naming_the_resources(ray_session, tmp_path):
    """The only node with the resource ``x`` an island needs is lost: the next attempt cannot be scheduled, and the
    graph ends with ``RecoveryFailedError`` (caused by the launcher's ``IslandScheduleTimeoutError``) naming the
    island and ``x``, after one start timeout (not once per restart the policy allows), leaving no actor. (A real
node loss on ``ray.cluster_utils.Cluster``: a test actor holding ``x`` on one node raced the restart for it.)"""
    cluster = ray_session
    mat = Materializer.ray(start_timeout=6, checkpoint=CheckpointSettings(
        storage=str(tmp_path), restart=RestartPolicy(backoff=0.0, max_restarts=3)))
    try:
        seq = (Source.range(0, ENDLESS).throttle(100, 0.1).island().map(lambda x: x * 2).island(resources={"x": 1})
               .to_mat(Sink.seq(), Keep.right)).run(mat, name="capacity")
        g = mat.running_graph("capacity")
        g.checkpoint_now(timeout=30)
        needy = [i for i in g.islands() if (i["options"] or {}).get("resources") == {"x": 1}]
        assert len(needy) == 1 and needy[0]["node_id"] == nodes["x"].node_id, g.islands()
        cluster.remove_node(nodes.pop("x"), allow_graceful=False)
        with pytest.raises(RecoveryFailedError) as info:
            seq.result(90)
        message = str(info.value)
        print(message)
        assert needy[0]["name"] in message and "'x'" in message and "no capacity" in message
        assert isinstance(info.value.__cause__, IslandScheduleTimeoutError)
        # not retried until the budget is spent (another start timeout would find the same cluster); an earlier
        # restart may have failed otherwise: Ray can place an actor on the lost node before it is declared dead
        assert "budget" not in message and 1 <= g.restarts < 3, (g.restarts, message)
        assert g.wait(30)
        with pytest.raises(RecoveryFailedError):
            g.completion.result(30)
    finally:
        mat.shutdown()
    assert wait_no_island_actors() == []
