"""``recursively`` restores its loop: the queues, the root counter and the per-root counts, with the step
fused (stateless forms, expanded in place) or run as a substream (the cut waits while a step runs)."""
from __future__ import annotations

import pytest

from atoll import Source
from atoll.testkit.round_trip import checkpoint_round_trip


def _children(s):
    return s.filter(lambda x: x < 200).map_concat(lambda x: [2 * x, 2 * x + 1])


def _children_sub(s):
    # ``take`` has no stateless form: each expansion runs as a substream
    return s.filter(lambda x: x < 200).map_concat(lambda x: [2 * x, 2 * x + 1]).take(2)


BLUEPRINTS = {
    "fused": lambda: Source.range(1, 4).recursively(_children),
    "substream": lambda: Source.range(1, 4).recursively(_children_sub),
    "small_pending": lambda: Source.range(1, 4).recursively(_children, max_pending=3),
}


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("at", [0, 1, 7, 100, 300, 400])
@pytest.mark.parametrize("name", sorted(BLUEPRINTS))
def test_recursively_round_trip(name, at, fusion, tmp_path):
    expected, got = checkpoint_round_trip(BLUEPRINTS[name], at=at, storage=str(tmp_path), fusion=fusion)
    assert got == expected and len(expected) > 400
