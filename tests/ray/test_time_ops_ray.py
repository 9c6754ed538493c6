"""Time-based and rate-decoupling operators on Ray, on real time: a few small cases with generous
bounds and no timing assertions beyond "eventually" (the exact timing cases run on virtual time in
tests/core/ops/). Each operator here runs in an island actor of its own or across a channel."""
from __future__ import annotations

import pytest

from atoll import Sink, Source
from atoll._impl.ops.delay import DelayOverflowStrategy
from atoll._impl.ops.throttle import ThrottleMode
from atoll.errors import CompletionTimeoutError, StreamIdleTimeoutError


def test_grouped_within_groups_a_slow_source(rmat):
    # 20 elements at 10/s take about 2 s; windows of 0.3 s cut them into several groups
    groups = (Source.range(1, 21).throttle(10, 1.0).island().grouped_within(100, 0.3).island()
              .run_with(Sink.seq(), rmat).result(60))
    assert [x for g in groups for x in g] == list(range(1, 21))
    assert all(groups) and len(groups) >= 2


def test_throttle_in_its_own_island(rmat):
    out = (Source.range(1, 11).island().throttle(20, 1.0, 1, ThrottleMode.shaping).island()
           .map(lambda x: x * 2).run_with(Sink.seq(), rmat).result(60))
    assert out == [2 * i for i in range(1, 11)]


def test_delay_and_initial_delay_across_islands(rmat):
    out = (Source.range(1, 6).initial_delay(0.1).island().delay(0.2, DelayOverflowStrategy.backpressure).island()
           .run_with(Sink.seq(), rmat).result(60))
    assert out == [1, 2, 3, 4, 5]


def test_idle_and_completion_timeouts_fail_on_ray(rmat):
    with pytest.raises(StreamIdleTimeoutError, match="No elements passed in the last 300 milliseconds."):
        Source.never().island().idle_timeout(0.3).run_with(Sink.ignore(), rmat).result(60)
    with pytest.raises(CompletionTimeoutError, match="The stream has not been completed in 300 milliseconds."):
        Source.never().completion_timeout(0.3).island().run_with(Sink.ignore(), rmat).result(60)


def test_conflate_and_keep_alive_across_islands(rmat):
    total = (Source.range(1, 1001).island().conflate(lambda a, b: a + b).island()
             .run_with(Sink.fold(0, lambda a, b: a + b), rmat).result(60))
    assert total == 500500
    out = (Source.single(1).concat(Source.single(2).initial_delay(1.0)).island().keep_alive(0.2, lambda: 0)
           .run_with(Sink.seq(), rmat).result(60))
    assert out[0] == 1 and out[-1] == 2 and 0 in out and set(out) == {0, 1, 2}
