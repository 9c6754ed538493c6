"""What a cut records as waiting in a connection: an element pushed and not yet delivered, or delivered and not yet
grabbed - not the element a stage skipped by pulling again without grabbing it.

``drop`` skips elements that way (as Pekko's does: a pull discards an element not grabbed), so its connection's slot
still referred to the last skipped element while the stage waited for the next one; the cut took that element for
one in flight and the restore pushed it again, where ``drop`` counted it a second time and let one element it should
have dropped through (``drop(16)`` after a channel restored as ``869, 870, ...`` instead of ``870, 871, ...``)."""
from __future__ import annotations

import pytest

from atoll import Source
from atoll._impl.islands.checkpointer import _connection_contents
from atoll.stage._connection import EMPTY, IN_READY, OUT_READY, PULLING, PUSHING
from atoll.testkit.round_trip import checkpoint_round_trip


def _dropped_behind_a_channel():
    return Source.from_iterable(list(range(854, 1104))).island().drop(16).concat(Source.range(5000, 5300)).take(51)


@pytest.mark.parametrize("fusion", [False, True])
@pytest.mark.parametrize("at", [0, 7, 40])
def test_a_drop_behind_a_channel_restores_exactly(at, fusion, tmp_path):
    expected, got = checkpoint_round_trip(_dropped_behind_a_channel, at, storage=str(tmp_path), fusion=fusion,
                                          chunk_size=64)
    assert expected == list(range(870, 921))
    assert got == expected


class _Conn:
    def __init__(self, state, slot):
        self.state, self.slot = state, slot
        self.chunked = False
        self.ts = None
        self.signals = None
        self.signals_before = 0


@pytest.mark.parametrize("state,recorded", [(PUSHING, True), (IN_READY, True), (PULLING, False), (OUT_READY, False)])
def test_an_element_counts_as_in_flight_only_until_the_stage_pulls_again(state, recorded):
    contents = _connection_contents(_Conn(state, 861))
    assert (contents is not None and contents[0] == [861]) is recorded
    assert _connection_contents(_Conn(state, EMPTY)) is None
