"""The async family restores exactly: completed results waiting for demand are state (so a stalled
downstream cannot keep a stage from being ready), calls in flight make the cut wait; round trips fused
and unfused with functions that complete at once, later on a thread, or as coroutines."""
from __future__ import annotations

import asyncio
import operator
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from operator_state_kit import Run, run_cut  # noqa: E402

from atoll import Sink, Source  # noqa: E402
from atoll._impl.ops.async_map import MapAsync, MapAsyncPartitioned, MapAsyncUnordered  # noqa: E402
from atoll.testkit.round_trip import checkpoint_round_trip  # noqa: E402

N = 40
_POOL = ThreadPoolExecutor(4)


def _done(x):
    f = Future()
    f.set_result(x * 10)
    return f


def _later(x):
    return _POOL.submit(operator.mul, x, 10)


async def _coro(x):
    await asyncio.sleep(0)
    return x * 10


def _odd_none(x):
    f = Future()
    f.set_result(None if x % 7 == 3 else x)
    return f


async def _add(acc, x):
    return acc + x


def _unfold(s):
    f = Future()
    f.set_result(None if s >= N else (s + 1, s * s))
    return f


class _Double:
    def __call__(self, x):
        return x * 2


class _DoubleBatch:
    def __call__(self, xs):
        return [x * 2 for x in xs]


BLUEPRINTS = {
    "map_async_done": lambda: Source.range(0, N).map_async(4, _done),
    "map_async_thread": lambda: Source.range(0, N).map_async(4, _later),
    "map_async_coro": lambda: Source.range(0, N).map_async(3, _coro),
    "map_async_none": lambda: Source.range(0, N).map_async(2, _odd_none),
    "map_async_unordered": lambda: Source.range(0, N).map_async_unordered(4, _later),
    "map_async_partitioned": lambda: Source.range(0, N).map_async_partitioned(4, lambda x: x % 3,
                                                                              lambda x, p: _later(x)),
    "fold_async": lambda: Source.range(0, N).fold_async(0, _add),
    "scan_async": lambda: Source.range(0, N).scan_async(0, _add),
    "unfold_async": lambda: Source.unfold_async(0, _unfold),
    "map_remote_local": lambda: Source.range(0, N).map_remote(operator.neg, parallelism=3),
    "map_pool_local": lambda: Source.range(0, N).map_pool(_Double, size=2),
    "map_pool_batched": lambda: Source.range(0, N).map_pool(_DoubleBatch, size=2, batch_size=3),
}
UNORDERED = {"map_async_unordered"}


def _ats(name):
    n = {"fold_async": 1, "scan_async": N + 1, "map_async_none": N - len([x for x in range(N) if x % 7 == 3])}
    last = n.get(name, N) - 1
    return sorted(x for x in {0, 1, last // 2, last} if x <= last)


CASES = [(name, at) for name in sorted(BLUEPRINTS) for at in _ats(name)]


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("name,at", CASES)
def test_async_round_trip(name, at, fusion, tmp_path):
    expected, got = checkpoint_round_trip(BLUEPRINTS[name], at=at, storage=str(tmp_path), fusion=fusion)
    if name in UNORDERED:
        assert sorted(got) == sorted(expected)
    else:
        assert got == expected


@pytest.mark.parametrize("fusion", [True, False])
def test_fold_async_into_a_sink_at_the_first_element(fusion, tmp_path):
    expected, got = checkpoint_round_trip(lambda: Source.range(0, N).map_async(2, _later), at=0,
                                          sink=lambda: Sink.fold(0, operator.add), storage=str(tmp_path),
                                          fusion=fusion)
    assert got == expected == 10 * sum(range(N))


# ---------------------------------------------------------------------------------------------- one logic
@pytest.mark.parametrize("make", [lambda: MapAsync(3, _done), lambda: MapAsyncUnordered(3, _done),
                                  lambda: MapAsyncPartitioned(3, lambda x: x % 2, lambda x, p: _done(x))],
                         ids=["ordered", "unordered", "partitioned"])
def test_results_waiting_for_a_stalled_downstream_are_state_not_in_flight(make):
    first, second, state = run_cut(make, [[1, 2, 3, 4, 5, 6]], [6], demand_before=[1])
    assert first.outputs() == [10]  # downstream took one and stalled; three results wait in the stage
    assert first.outputs() + second.outputs() == [10, 20, 30, 40, 50, 60]


def test_map_async_with_a_call_in_flight_is_not_ready_until_it_completes():
    fut = Future()
    r = Run(MapAsync(2, lambda x: fut))
    r.pump([[1]], complete=False, demand=[1])
    assert not r.logic.ready_for_snapshot()
    fut.set_result(5)
    r.kit.host.run_posted()
    assert r.logic.ready_for_snapshot()
