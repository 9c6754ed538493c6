"""map_remote on Ray: one Ray task per element, from a Ray island and from the local materializer with Ray
initialised; order, supervision of a task's exception (its own type, not RayTaskError), task options,
a callable object, and ``fetch=False`` passing ObjectRefs downstream. The stream-semantics cases run
in-process in tests/core/ops/test_map_async_remote.py."""
from __future__ import annotations

import os

import pytest
import ray

from atoll import Attributes, Materializer, Sink, Source, Supervision
from atoll.testkit import assert_all_stages_stopped

RESUME = Attributes.supervision_strategy(Supervision.resuming_decider)
TASK = {"num_cpus": 0.1}  # the module's Ray session has 4 CPUs, islands take some


class TaskError(Exception):
    pass


def _square_or_fail(x):
    if x == 3:
        raise TaskError(f"bad {x}")
    return x * x


class Scale:
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return self.k * x


def test_ordered_and_unordered_in_an_island(rmat):
    out = Source.range(0, 12).map_remote(lambda x: x * x, parallelism=4, **TASK).island().run_with(Sink.seq(), rmat)
    assert out.result(60) == [x * x for x in range(12)]
    out = Source.range(0, 12).map_remote(lambda x: x * x, parallelism=4, ordered=False, **TASK).island() \
        .run_with(Sink.seq(), rmat)
    assert sorted(out.result(60)) == [x * x for x in range(12)]


def test_a_task_exception_fails_the_stream_with_its_own_type_and_resume_drops_it(rmat):
    failed = Source.range(0, 6).map_remote(_square_or_fail, parallelism=2, **TASK).island().run_with(Sink.seq(), rmat)
    with pytest.raises(TaskError, match="bad 3") as info:
        failed.result(60)
    assert type(info.value) is TaskError
    resumed = Source.range(0, 6).map_remote(_square_or_fail, parallelism=2, **TASK).with_attributes(RESUME).island() \
        .run_with(Sink.seq(), rmat)
    assert resumed.result(60) == [0, 1, 4, 16, 25]


def _fetched(ref):
    assert isinstance(ref, ray.ObjectRef), ref
    return ray.get(ref)


def test_a_callable_object_and_fetch_false_passing_object_refs(rmat):
    """The next stage gets ObjectRefs and fetches them itself. It runs in the same island: ObjectRefs as
    elements do not cross island channels yet (a kernel gap, reported with a repro)."""
    out = Source.range(1, 5).map_remote(Scale(3), parallelism=2, fetch=False, **TASK) \
        .map(_fetched).island().run_with(Sink.seq(), rmat)
    assert out.result(60) == [3, 6, 9, 12]


def test_tasks_from_the_local_materializer_when_ray_is_initialised(ray_session):
    m = Materializer.local()
    try:
        pids = Source.range(0, 4).map_remote(lambda _: os.getpid(), parallelism=2, **TASK).run_with(Sink.seq(), m)
        assert os.getpid() not in pids.result(60)  # each element ran in a Ray worker, not on a local thread
        assert_all_stages_stopped(m, timeout=10)
    finally:
        m.shutdown()
