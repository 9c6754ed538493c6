"""Helpers for the operator conformance tests (ported from Pekko's Flow*Spec suites).

* ``TE``: the test exception (Pekko's ``TE``), equal by message.
* ``fmat``: a fixture running a test twice, on a local materializer with fusion (the default, where
  runs of map/filter/map_concat become one generated loop) and without it (every operator runs its
  own stage logic). Import it into a test module to use it.
* ``run_script``: a deterministic take on Pekko's ``ScriptedTest``: an operator is driven through
  probes phase by phase with randomly sized (seeded) demand, and its outputs and completion are
  checked in exact order.
"""
from __future__ import annotations

import random
from collections import deque
from typing import Any, Callable, List, Sequence, Tuple

import pytest

from atoll import Attributes, Flow, Keep, Materializer
from atoll.testkit import TestSink, TestSource, assert_all_stages_stopped

RANDOM_TEST_RANGE = range(1, 11)  # Pekko's TestConfig.RandomTestRange: 10 randomized runs


class TE(Exception):
    """The test exception; two are equal when their messages are."""

    def __eq__(self, other):
        return type(other) is type(self) and other.args == self.args

    def __hash__(self):
        return hash((type(self), self.args))


def make_materializer(fused: bool) -> Materializer:
    return Materializer.local(fusion=fused)


@pytest.fixture(params=["fused", "unfused"])
def fmat(request):
    m = make_materializer(request.param == "fused")
    yield m
    try:
        assert_all_stages_stopped(m, timeout=5.0)
    finally:
        m.shutdown()


Phase = Tuple[Sequence[Any], Sequence[Any]]


def run_script(
    mat,
    op: Callable[[Flow], Flow],
    phases: List[Phase],
    *,
    seed: int,
    max_request: int = 3,
    flush_on_complete: int = 0,
    completes_early: bool = False,
    input_buffer: Tuple[int, int] = (2, 2),
) -> None:
    """Drive ``op(Flow())`` with ``phases`` of ``(inputs, expected outputs)``.

    Before each phase some demand may be signalled ahead of the data; then the phase's inputs are
    sent (at most one of them while downstream has no demand) and its outputs requested (in random chunks of 1..``max_request``) and checked in order.
    The outputs of the last ``flush_on_complete`` phases are only expected once upstream completes.
    With ``completes_early`` the operator must complete (and cancel upstream) by itself after the
    last phase instead of upstream completing."""
    rng = random.Random(seed)
    graph = (
        TestSource.probe()
        .via(op(Flow()))
        .to_mat(TestSink.probe(), Keep.both)
        .add_attributes(Attributes.input_buffer(*input_buffer))
    )
    src, sink = graph.run(mat)
    state = {"outstanding": 0}
    due: deque = deque()
    held: list = []

    def request(k: int) -> None:
        sink.request(k)
        state["outstanding"] += k

    def drain() -> None:
        while state["outstanding"] and due:
            sink.expect_next(due.popleft())
            state["outstanding"] -= 1

    def drain_all() -> None:
        drain()
        while due:
            request(rng.randint(1, max_request))
            drain()

    first_held = len(phases) - flush_on_complete
    blind = 0  # inputs sent while downstream had no demand (they may wait in the input buffer)
    for i, (ins, outs) in enumerate(phases):
        if rng.random() < 0.5:
            request(rng.randint(1, max_request))
            drain()
        for x in ins:
            if state["outstanding"] == 0:
                if blind:
                    # operators pull upstream only for downstream demand: signal some before
                    # sending more, or the input buffer could fill up
                    request(rng.randint(1, max_request))
                    blind = 0
                else:
                    blind = 1
            src.send_next(x)
        (held if i >= first_held else due).extend(outs)
        drain_all()
    if completes_early:
        if state["outstanding"] == 0:
            request(1)
        sink.expect_complete()
        src.expect_cancellation()
        return
    src.send_complete()
    due.extend(held)
    drain_all()
    sink.expect_complete()
