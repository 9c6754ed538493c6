"""``Source.from_ray_dataset`` under checkpoints: replayable like ``from_parquet`` and ``from_spark`` - a restore
executes the Dataset again (with its block order preserved in checkpointed runs and restores) and skips the
elements already emitted, checking their digests, so a Dataset that changed fails the restore with
``SourceReplayMismatchError`` instead of silently skipping other rows.

The round trips run on Materializer.local (Ray serves only the Dataset's execution); the last test kills the
source's island actor on Materializer.ray mid-stream."""
from __future__ import annotations

import os
import random
import time

import numpy as np
import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import ray  # noqa: E402

from atoll import CheckpointSettings, Keep, Materializer, RestartPolicy, Sink, Source  # noqa: E402
from atoll.errors import SourceReplayMismatchError  # noqa: E402
from atoll.interop import ray_dataset  # noqa: E402
from atoll.testkit import assert_all_stages_stopped  # noqa: E402
from atoll.testkit.chaos import kill_island_at  # noqa: E402
from atoll.testkit.round_trip import checkpoint_round_trip  # noqa: E402
from ray_start import shared_local_ray  # noqa: E402

N = 3000

_DASHBOARD = []


@pytest.fixture(scope="module", autouse=True)
def ray_session():
    ctx = shared_local_ray()  # the run's shared local Ray (its workers import this module's functions)
    _DASHBOARD.append(ctx.dashboard_url)
    yield
    _DASHBOARD.clear()


def _alive_island_actors() -> list:
    from ray.util.state import list_actors

    return [a for a in list_actors(address=f"http://{_DASHBOARD[0]}", limit=10000,
                                   filters=[("class_name", "=", "IslandActor")], raise_on_missing_output=False)
            if a.state != "DEAD"]


def _wait_no_island_actors(timeout: float = 15.0) -> list:
    deadline = time.monotonic() + timeout
    while True:
        alive = _alive_island_actors()
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def _ds(n: int = N, blocks: int = 6):
    return ray.data.range(n, override_num_blocks=blocks)


def _changing(*datasets, **options):
    """A ``make`` for checkpoint_round_trip: its calls (uninterrupted run, checkpointed run, restore) read the
    given Datasets in turn."""
    it = iter(datasets)
    options.setdefault("max_rows_per_batch", 256)

    def make():
        return Source.from_ray_dataset(next(it), **options).map(lambda r: r["id"])

    return make


# ---------------------------------------------------------------- exact round trips
@pytest.mark.parametrize("at", [0, 1234, 2990])
@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_rows_restore_exactly_at_every_cut(tmp_path, at, fusion):
    ds = _ds()
    expected, got = checkpoint_round_trip(_changing(ds, ds, ds), at, storage=str(tmp_path), fusion=fusion,
                                          timeout=60)
    assert sorted(expected) == list(range(N))  # without checkpoints: Ray Data's own block order
    assert got == list(range(N))  # checkpointed and restored runs: in the Dataset's order, each row once


@pytest.mark.parametrize("at", [0, 5, 11])
@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_arrow_batches_restore_exactly_at_every_cut(tmp_path, at, fusion):
    ds = _ds()

    def make():
        return Source.from_ray_dataset(ds, as_="arrow", max_rows_per_batch=250).map(
            lambda b: b.column("id").to_pylist())

    expected, got = checkpoint_round_trip(make, at, storage=str(tmp_path), fusion=fusion, timeout=60)
    assert sorted(sum(expected, [])) == list(range(N))
    assert got == [list(range(i, i + 250)) for i in range(0, N, 250)]


def test_a_transformed_dataset_with_blocks_of_other_sizes_restores_exactly(tmp_path):
    # the same rows cut into other blocks on replay: the digests are of the rows, not of the block layout
    def squares(blocks):
        return _ds(blocks=blocks).map_batches(lambda b: {"id": b["id"], "sq": b["id"] * b["id"]},
                                              batch_format="numpy")

    make = _changing(squares(6), squares(6), squares(5))
    expected, got = checkpoint_round_trip(make, 1500, storage=str(tmp_path), timeout=60)
    assert got == list(range(N)) and sorted(expected) == got


# ---------------------------------------------------------------- a changed Dataset is detected
@pytest.mark.parametrize("changed_from", [0, 700, 1230])
def test_a_dataset_changed_before_the_cut_fails_the_restore(tmp_path, changed_from):
    changed = _ds().map_batches(
        lambda b: {"id": np.where((b["id"] >= changed_from) & (b["id"] < changed_from + 3), -1, b["id"])},
        batch_format="numpy")
    with pytest.raises(SourceReplayMismatchError) as e:
        checkpoint_round_trip(_changing(_ds(), _ds(), changed), 1234, storage=str(tmp_path), timeout=60)
    # one segment (below SEGMENT_ROWS rows): it covers every element emitted before the cut
    assert "from_ray_dataset" in str(e.value) and "elements 0..1233" in str(e.value)
    assert "the first 0 of the 1234 elements" in str(e.value)


def test_a_dataset_of_another_schema_fails_the_restore(tmp_path):
    floats = _ds().map_batches(lambda b: {"id": b["id"].astype("float64")}, batch_format="numpy")
    with pytest.raises(SourceReplayMismatchError, match="from_ray_dataset"):
        checkpoint_round_trip(_changing(_ds(), _ds(), floats), 600, storage=str(tmp_path), timeout=60)


def test_a_dataset_with_fewer_rows_than_were_emitted_fails_the_restore(tmp_path):
    with pytest.raises(SourceReplayMismatchError, match="from_ray_dataset: the checkpoint was taken after 2000 "
                                                        "elements, but a replay yields only 1000"):
        checkpoint_round_trip(_changing(_ds(), _ds(), _ds(1000)), 2000, storage=str(tmp_path), timeout=60)


def test_a_change_after_the_cut_is_not_a_mismatch(tmp_path):
    changed = _ds().map_batches(lambda b: {"id": np.where(b["id"] >= 2500, -b["id"], b["id"])}, batch_format="numpy")
    expected, got = checkpoint_round_trip(_changing(_ds(), _ds(), changed), 1234, storage=str(tmp_path), timeout=60)
    assert got == list(range(2500)) + [-x for x in range(2500, N)]


def test_segments_start_every_segment_rows(monkeypatch, tmp_path):
    # segments of 512 rows (two batches of 256): a change is named by its segment's rows
    monkeypatch.setattr(ray_dataset, "SEGMENT_ROWS", 512)
    changed = _ds().map_batches(lambda b: {"id": np.where(b["id"] == 1100, -1, b["id"])}, batch_format="numpy")
    with pytest.raises(SourceReplayMismatchError) as e:
        checkpoint_round_trip(_changing(_ds(), _ds(), changed), 1234, storage=str(tmp_path), timeout=60)
    assert "elements 1024..1233" in str(e.value) and "the first 1024 of the 1234" in str(e.value)


# ---------------------------------------------------------------- the order, the caller's Dataset
def test_the_checkpointed_form_preserves_order_on_a_copy_and_the_plain_form_is_undigested():
    ds = _ds()
    global_ctx = ray.data.DataContext.get_current()
    was = (ds.context.execution_options.preserve_order, global_ctx.execution_options.preserve_order)
    ordered = ray_dataset._ordered(ds)
    assert ordered is not ds and ordered.context is not ds.context
    assert ordered.context.execution_options.preserve_order
    assert (ds.context.execution_options.preserve_order, global_ctx.execution_options.preserve_order) == was
    assert ray_dataset._ordered(ordered) is ordered  # already ordered: used as it is
    reader = ray_dataset.ray_dataset_source(ds, max_rows_per_batch=1000).factory
    items = list(reader())
    assert [type(i).__name__ for i in items] == ["Digested"] * 3
    assert [i.segment for i in items] == [True, False, False]
    assert sum((i.item for i in items), []) == [{"id": x} for x in range(N)]
    plain = list(reader.undigested()())
    assert sorted(r["id"] for chunk in plain for r in chunk) == list(range(N))


# ---------------------------------------------------------------- Materializer.ray: the source island killed
@pytest.mark.slow
def test_the_source_island_killed_mid_stream_recovers_exactly_on_ray(tmp_path):
    n = 4000
    seed = random.randrange(1 << 30)
    fraction = random.Random(seed).uniform(0.3, 0.7)
    ds = _ds(n, blocks=8)
    graph = (Source.from_ray_dataset(ds, max_rows_per_batch=200).map(lambda r: r["id"]).throttle(100, 0.1).island()
             .map(lambda x: x * 2).island().to_mat(Sink.seq(), Keep.right))
    mat = Materializer.ray(start_timeout=60, checkpoint=CheckpointSettings(
        storage=str(tmp_path), interval=0.2, restart=RestartPolicy(backoff=0.0)))
    try:
        seq = graph.run(mat, name="ray-dataset-kill")
        g = mat.running_graph("ray-dataset-kill")
        deadline = time.monotonic() + 60
        while not g.checkpoints():
            assert time.monotonic() < deadline, "no checkpoint completed"
            time.sleep(0.01)
        struck = kill_island_at(g, 2, fraction, n, watch=0)  # Ray numbers islands from the sink: 2 is the source's
        got = seq.result(120)
        print(f"seed={seed} fraction={fraction:.2f} killed the source island after {struck} elements")
        assert got == [2 * x for x in range(n)], f"seed={seed}"  # nothing lost, repeated or reordered
        assert g.restarts == 1, f"seed={seed}"
        assert struck < n
        assert g.wait(30)
        assert_all_stages_stopped(mat, timeout=15)
    finally:
        mat.shutdown()
    assert _wait_no_island_actors() == []
