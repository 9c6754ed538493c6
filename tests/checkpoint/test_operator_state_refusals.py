"""Which DSL operators checkpoints still refuse: an explicit list, so that a regression or a newly
converted operator shows up here. Each blueprint is materialized with checkpointing on."""
from __future__ import annotations

import operator
from concurrent.futures import Future

import pytest

from atoll import Aggregate, Flow, Materializer, OverflowStrategy, Sink, Source
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
    "map_async_unordered": lambda: Source.range(0, 5).map_async_unordered(2, _done),
    "map_async_partitioned": lambda: Source.range(0, 5).map_async_partitioned(2, lambda x: x % 2,
                                                                              lambda x, p: _done(x)),
    "fold_async": lambda: Source.range(0, 5).fold_async(0, lambda a, x: _done(a + x)),
    "scan_async": lambda: Source.range(0, 5).scan_async(0, lambda a, x: _done(a + x)),
    "unfold_async": lambda: Source.unfold_async(0, lambda s: _done(None if s > 3 else (s + 1, s))),
    "unfold_resource_async": lambda: Source.unfold_resource_async(lambda: _done([1]), lambda r: _done(None),
                                                                   lambda r: _done(None)),
    "map_remote": lambda: Source.range(0, 5).map_remote(abs, parallelism=2),
    "map_pool": lambda: Source.range(0, 5).map_pool(_Abs, size=1),
    "prepend": lambda: Source.range(0, 5).prepend(Source.range(0, 5)),
    "merge_sorted": lambda: Source.range(0, 5).merge_sorted(Source.range(0, 5)),
    "zip_latest": lambda: Source.range(0, 5).zip_latest(Source.range(0, 5)),
    "or_else": lambda: Source.empty().or_else(Source.range(0, 5)),
    "recursively": lambda: Source.range(0, 5).recursively(lambda s: s.filter(lambda x: x < 3).map(lambda x: x + 5)),
    "with_timestamps": lambda: Source.range(0, 5).with_timestamps(lambda x: x),
    "tumbling_window": lambda: Source.range(0, 5).with_timestamps(lambda x: x).tumbling_window(2),
    "session_window": lambda: Source.range(0, 5).with_timestamps(lambda x: x).session_window(
        2, aggregate=Aggregate.count()),
}


class _Abs:
    def __call__(self, x):
        return abs(x)


def _done(x):
    f = Future()
    f.set_result(x)
    return f


#: operators still refused (see the report of issue 12): sources that cannot replay, an open resource
EXPECTED_REFUSED = {"from_iterable_iterator", "from_iterator", "from_future", "unfold_resource_async"}


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
