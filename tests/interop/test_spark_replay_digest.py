"""A restore of ``Source.from_spark`` checks that the rows it skips are those the checkpointed run emitted: the
snapshot holds a digest per partition of the Arrow data emitted (``background_source.Digested``), and a DataFrame
that changed but still has as many rows fails the restore with ``SourceReplayMismatchError`` naming the rows."""
from __future__ import annotations

import pytest

from atoll import Source
from atoll.errors import SourceReplayMismatchError
from atoll.interop.background_source import BackgroundSource, Digested
from atoll.testkit.round_trip import checkpoint_round_trip


def _changing(*dfs):
    """A ``make`` for checkpoint_round_trip: its calls (uninterrupted run, checkpointed run, restore) read the
    given DataFrames in turn."""
    it = iter(dfs)

    def make():
        return Source.from_spark(next(it), max_rows_per_batch=100).map(lambda r: (r["id"], r["y"]))

    return make


def test_an_unchanged_dataframe_restores_exactly_with_a_cut_inside_a_slice(spark, tmp_path):
    df = spark.range(0, 3000, numPartitions=4).selectExpr("id", "id * 3 as y")
    expected, got = checkpoint_round_trip(_changing(df, df, df), 1234, storage=str(tmp_path), timeout=60)
    assert expected == [(i, 3 * i) for i in range(3000)] and got == expected


@pytest.mark.parametrize("changed_from", [0, 800, 1200])
def test_a_dataframe_changed_before_the_cut_fails_the_restore(spark, tmp_path, changed_from):
    df = spark.range(0, 3000, numPartitions=4).selectExpr("id", "id * 3 as y")
    changed = spark.range(0, 3000, numPartitions=4).selectExpr(
        "id", f"case when id >= {changed_from} and id < {changed_from + 5} then -1 else id * 3 end as y")
    with pytest.raises(SourceReplayMismatchError) as e:
        checkpoint_round_trip(_changing(df, df, changed), 1234, storage=str(tmp_path), timeout=60)
    # partitions of 750 rows: the first that differs is named by its rows
    first = (changed_from // 750) * 750
    assert "from_spark" in str(e.value) and f"elements {first}.." in str(e.value)
    assert f"the first {first} of the " in str(e.value)


def test_a_change_after_the_cut_is_not_a_mismatch(spark, tmp_path):
    df = spark.range(0, 3000, numPartitions=4).selectExpr("id", "id * 3 as y")
    changed = spark.range(0, 3000, numPartitions=4).selectExpr(
        "id", "case when id >= 2500 then -1 else id * 3 end as y")
    expected, got = checkpoint_round_trip(_changing(df, df, changed), 1234, storage=str(tmp_path), timeout=60)
    assert got[:2400] == expected[:2400] and got[-1] == (2999, -1)


# ---------------------------------------------------------------- the generic mechanism, without Spark
def _digested_source(data, segment_every=10, chunk=4):
    """A replayable BackgroundSource over ``data`` in chunks of ``chunk`` elements, digested (the digest of a
    chunk is its repr), a new segment every ``segment_every`` chunks."""

    def factory():
        for i in range(0, len(data), chunk):
            part = list(data[i:i + chunk])
            yield Digested(part, repr(part).encode(), lambda k, part=part: repr(part[:k]).encode(),
                           segment=(i // chunk) % segment_every == 0)

    return Source.from_graph(BackgroundSource("digested", factory, chunked=True, replayable=True))


@pytest.mark.parametrize("at", [0, 1, 7, 40, 41, 99])
def test_generic_digests_restore_exactly(tmp_path, at):
    data = list(range(100))
    expected, got = checkpoint_round_trip(lambda: _digested_source(data), at, storage=str(tmp_path))
    assert expected == data and got == data


def test_generic_digests_detect_a_change_and_name_the_segment(tmp_path):
    calls = []

    def make():
        calls.append(1)
        data = list(range(100))
        if len(calls) == 3:
            data[45] = -45  # in the second segment (elements 40..79)
        return _digested_source(data)

    with pytest.raises(SourceReplayMismatchError) as e:
        checkpoint_round_trip(make, 70, storage=str(tmp_path))
    assert "elements 40..69" in str(e.value) and "the first 40 of the 70" in str(e.value)


def test_generic_change_inside_the_cut_chunk_is_detected(tmp_path):
    calls = []

    def make():
        calls.append(1)
        data = list(range(100))
        if len(calls) == 3:
            data[69] = -1  # the chunk 68..71 is cut at 70: its first two elements are checked
        return _digested_source(data)

    with pytest.raises(SourceReplayMismatchError):
        checkpoint_round_trip(make, 70, storage=str(tmp_path))


def test_a_snapshot_of_an_older_version_restores_without_the_check():
    from atoll.interop.background_source import _ReplayableBackgroundLogic

    stage = BackgroundSource("digested", lambda: iter(()), chunked=True, replayable=True)
    logic = _ReplayableBackgroundLogic(stage)
    logic.restore_from_snapshot(12)  # a bare count: nothing to chain the digests onto
    assert logic.skip == 12 and logic.expected is None and not logic.verifiable
    assert logic.save_to_snapshot() == 12
    fresh = _ReplayableBackgroundLogic(stage)
    fresh.restore_from_snapshot({"emitted": 4, "segments": [(0, 4, "00" * 16)]})
    assert fresh.skip == 4 and fresh.expected == [(0, 4, bytes(16))]
    assert fresh.save_to_snapshot() == {"emitted": 4, "segments": [(0, 4, "00" * 16)]}
