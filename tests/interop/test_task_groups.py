"""map_grouped: the driver's per-block Ray work (reading committed parts, adopting refs, encoding for Spark) runs
in few tasks of contiguous groups, one ref per item in order, whatever the count (1 item: a single return)."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import ray  # noqa: E402

from atoll.interop.task_groups import PER_TASK, groups, map_grouped, returns  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def ray_session():
    started = not ray.is_initialized()
    if started:
        ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    yield
    if started:
        ray.shutdown()


@pytest.mark.parametrize("n", [1, 2, 3, 17, 40])
def test_one_ref_per_item_in_order_from_one_task_per_group(n):
    def tagged(base, *items):  # defined here: shipped to the worker by value, not by this test module's name
        """Each item with ``base`` added, and its group's first item (the items of one task share it)."""
        return returns([(base + x, items[0]) for x in items])

    task = ray.remote(num_cpus=0)(tagged)
    refs = map_grouped(task, list(range(n)), 100)
    got = ray.get(refs)
    assert [v for v, _first in got] == [100 + x for x in range(n)]
    assert [first for _v, first in got] == [g.start for g in groups(n) for _ in g]  # one task per group
    assert len(groups(n)) == min(n, max(2, -(-n // PER_TASK)))
