"""The async operators on Ray: an ObjectRef-returning function, an ``async def`` inside a Ray island, ``ask``
to a real Ray actor (replies, the actor's exception under Stop and Resume, a killed actor), and
``foreach_async``/``unfold_async`` in their own islands. The conformance cases are in tests/core/ops
(test_map_async*.py, test_ask.py ...); these check that the same operators work where the islands are
Ray actors and the results are ObjectRefs."""
from __future__ import annotations

import asyncio

import pytest
import ray

from atoll import Attributes, Materializer, Sink, Source, Supervision
from atoll._impl.ops.async_loop import RayCallError
from atoll.testkit import assert_all_stages_stopped

RESUME = Attributes.supervision_strategy(Supervision.resuming_decider)


class ActorError(Exception):
    pass


@ray.remote
def square(x):
    return x * x


@ray.remote
class Replier:
    def __call__(self, x):
        if x == 3:
            raise ActorError(f"Booming for {x}!")
        return ("Reply", x)

    def twice(self, x):
        return 2 * x


def test_map_async_with_object_refs_in_an_island(rmat):
    out = Source.range(0, 20).map_async(4, lambda x: square.remote(x)).island().run_with(Sink.seq(), rmat)
    assert out.result(60) == [x * x for x in range(20)]


def test_map_async_unordered_with_object_refs(rmat):
    out = Source.range(0, 20).map_async_unordered(4, lambda x: square.remote(x)).island().run_with(Sink.seq(), rmat)
    assert sorted(out.result(60)) == sorted(x * x for x in range(20))


def test_async_def_in_a_ray_island(rmat):
    async def fn(x):
        await asyncio.sleep(0)
        return x + 1

    out = Source.range(0, 10).island().map_async(3, fn).island().fold_async(0, _add).run_with(Sink.head(), rmat)
    assert out.result(60) == sum(range(1, 11))


async def _add(a, b):
    return a + b


def test_ask_a_ray_actor(rmat):
    actor = Replier.remote()
    try:
        out = Source.range(1, 6).ask(actor, 2, method="twice").island().run_with(Sink.seq(), rmat)
        assert out.result(60) == [2, 4, 6, 8, 10]
        resumed = Source.range(1, 6).ask(actor, 4).with_attributes(RESUME).island().run_with(Sink.seq(), rmat)
        assert resumed.result(60) == [("Reply", n) for n in (1, 2, 4, 5)]
        failed = Source.range(1, 6).ask(actor, 4).island().run_with(Sink.seq(), rmat)
        with pytest.raises(ActorError, match="Booming for 3!") as info:
            failed.result(60)
        assert type(info.value) is ActorError  # the actor's own exception, not Ray's RayTaskError wrapper
    finally:
        ray.kill(actor)


def test_ask_a_dead_actor_fails_the_stream(rmat):
    actor = Replier.remote()
    assert ray.get(actor.twice.remote(1)) == 2
    ray.kill(actor)
    out = Source.range(1, 3).ask(actor, 2, method="twice").island().run_with(Sink.seq(), rmat)
    with pytest.raises(RayCallError, match="ray.exceptions.ActorDiedError") as info:
        out.result(60)
    assert info.value.ray_error == "ray.exceptions.ActorDiedError"


def test_foreach_async_and_unfold_async_in_islands(rmat):
    async def step(s):
        return None if s == 5 else (s + 1, s)

    assert Source.unfold_async(0, step).island().run_with(Sink.seq(), rmat).result(60) == [0, 1, 2, 3, 4]
    done = Source.range(0, 5).island().run_with(Sink.foreach_async(2, lambda x: square.remote(x)), rmat)
    done.result(60)


def test_object_refs_on_the_local_materializer(ray_session):
    m = Materializer.local()
    try:
        out = Source.range(0, 10).map_async(3, lambda x: square.remote(x)).run_with(Sink.seq(), m)
        assert out.result(60) == [x * x for x in range(10)]
        assert_all_stages_stopped(m, timeout=10)
    finally:
        m.shutdown()
