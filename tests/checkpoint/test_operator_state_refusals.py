"""Which DSL operators checkpoints still refuse: an explicit list, so that a regression or a newly
converted operator shows up here. Each blueprint is materialized with checkpointing on."""
from __future__ import annotations

import operator
from concurrent.futures import Future

import pytest

from atoll import Flow, Materializer, OverflowStrategy, Sink, Source
from atoll.checkpoint import CheckpointSettings
from atoll.errors import CheckpointNotSupportedError


def _done_future():
    f = Future()
    f.set_result(1)
    return f


BLUEPRINTS = {
    "range": lambda: Source.range(0, 5),
    "from_iterable_list": lambda: Source.from_iterable([1, 2]),
    "from_iterable_iterator": lambda: Source.from_iterable(iter([1, 2])),
    "from_iterator": lambda: Source.from_iterator(lambda: iter([1, 2])),
    "from_iterator_replay": lambda: Source.from_iterator(lambda: iter([1, 2]), replay="skip"),
    "from_future": lambda: Source.from_future(_done_future()),
    "single": lambda: Source.single(1),
    "empty": lambda: Source.empty(),
    "unfold": lambda: Source.unfold(0, lambda s: None if s > 3 else (s + 1, s)),
    "map": lambda: Source.range(0, 5).map(lambda x: x + 1),
    "filter": lambda: Source.range(0, 5).filter(lambda x: x % 2),
    "scan": lambda: Source.range(0, 5).scan(0, operator.add),
    "fold": lambda: Source.range(0, 5).fold(0, operator.add),
    "grouped": lambda: Source.range(0, 5).grouped(2),
    "take": lambda: Source.range(0, 5).take(2),
    "map_concat": lambda: Source.range(0, 5).map_concat(lambda x: [x]),
    "buffer": lambda: Source.range(0, 5).buffer(2, OverflowStrategy.backpressure),
    "zip": lambda: Source.range(0, 5).zip(Source.range(0, 5)),
    "merge": lambda: Source.range(0, 5).merge(Source.range(0, 5)),
    "concat": lambda: Source.range(0, 5).concat(Source.range(0, 5)),
    "interleave": lambda: Source.range(0, 5).interleave(Source.range(0, 5), 1),
    "map_async": lambda: Source.range(0, 5).map_async(2, _done),
}


def _done(x):
    f = Future()
    f.set_result(x)
    return f


#: operators still refused in this landing (see the report of issue 12)
EXPECTED_REFUSED = {"from_iterable_iterator", "from_iterator", "from_future", "concat", "map_async"}


def _refused(make, storage) -> bool:
    m = Materializer.local(checkpoint=CheckpointSettings(storage=storage))
    try:
        make().run_with(Sink.ignore(), m).result(10)
        return False
    except CheckpointNotSupportedError:
        return True
    finally:
        m.shutdown()


def test_the_refused_operators_are_exactly_the_expected_ones(tmp_path):
    refused = {name for name, make in BLUEPRINTS.items() if _refused(make, str(tmp_path / name))}
    assert refused == EXPECTED_REFUSED
