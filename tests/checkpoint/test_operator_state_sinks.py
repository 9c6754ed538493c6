"""Sinks, junctions and sources restore exactly through the checkpoint round trip (fused and unfused)."""
from __future__ import annotations

import operator

import pytest

from atoll import Attributes, Sink, Source
from atoll._impl.ops.sources import IterableSource
from atoll.stage.checkpointing import checkpoint_refusal
from atoll.testkit.round_trip import checkpoint_round_trip

N = 40
SINKS = {
    "fold": lambda: Sink.fold(0, operator.add),
    "reduce": lambda: Sink.reduce(operator.add),
    "last": lambda: Sink.last(),
    "seq": lambda: Sink.seq(),
}


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("at", [0, 13, N - 1])
@pytest.mark.parametrize("name", sorted(SINKS))
def test_sink_round_trip(name, at, fusion, tmp_path):
    expected, got = checkpoint_round_trip(lambda: Source.range(0, N), sink=SINKS[name], at=at,
                                          storage=str(tmp_path), fusion=fusion)
    assert got == expected


JUNCTIONS = {
    "merge": lambda: Source.range(0, N).merge(Source.range(100, 100 + N)),
    "zip": lambda: Source.range(0, N).zip(Source.range(100, 100 + N)),
    "zip_with": lambda: Source.range(0, N).zip_with(Source.range(100, 100 + N), operator.add),
}


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("at", [0, 13, N - 1])
@pytest.mark.parametrize("name", sorted(JUNCTIONS))
def test_junction_round_trip(name, at, fusion, tmp_path):
    expected, got = checkpoint_round_trip(JUNCTIONS[name], at=at, storage=str(tmp_path), fusion=fusion)
    assert sorted(got) == sorted(expected)  # a merge's interleaving may differ between runs


def test_from_iterator_without_replay_is_refused_with_a_hint():
    stage = IterableSource(lambda: iter(range(3)), name="from_iterator", factory=True)
    reason = checkpoint_refusal(stage.create_logic(Attributes.none), stage)
    assert reason is not None and 'replay="skip"' in reason


def test_from_iterator_replay_skip_skips_what_was_emitted(tmp_path):
    expected, got = checkpoint_round_trip(lambda: Source.from_iterator(lambda: (x * x for x in range(N)),
                                                                       replay="skip"),
                                          at=N // 2, storage=str(tmp_path))
    assert got == expected


def test_from_iterator_rejects_an_unknown_replay():
    with pytest.raises(ValueError, match="replay"):
        Source.from_iterator(lambda: iter(()), replay="rewind")
