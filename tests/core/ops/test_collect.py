"""collect: ported from Pekko's FlowCollectSpec ("collect" as a randomized script, "restart when Collect
throws"); plus the chunk form's parity with the element-only run (as tests/core/ops/test_chunk_forms.py),
the stateless-form declaration ``recursively`` reads, and build-time validation."""
from __future__ import annotations

import random

import pytest
from chunk_kit import Boom, check, restarting, resuming
from ops_kit import RANDOM_TEST_RANGE, TE, fmat, run_script  # noqa: F401 - fmat is a fixture

from atoll import Attributes, Flow, Sink, Source, Supervision
from atoll._impl.ops.collection import Collect
from atoll._impl.ops.forms import expand
from atoll.testkit import TestSink

RESTART = Attributes.supervision_strategy(Supervision.restarting_decider)


def _even_square(x):
    return str(x * x) if x % 2 == 0 else None


@pytest.mark.parametrize("seed", RANDOM_TEST_RANGE)
def test_collect(fmat, seed):
    rng = random.Random(seed)
    phases = []
    for _ in RANDOM_TEST_RANGE:
        x = rng.randint(0, 9999)
        phases.append(([x], [str(x * x)] if x % 2 == 0 else []))
    run_script(fmat, lambda f: f.collect(_even_square), phases, seed=seed)


def test_restart_when_collect_throws(fmat):
    def pf(x):
        if x == 2:
            raise TE("")
        return x

    probe = Source.range(1, 4).collect(pf).with_attributes(RESTART).run_with(TestSink.probe(), fmat)
    probe.request(1).expect_next(1)
    probe.request(1).expect_next(3)
    probe.request(1).expect_complete()


def test_collect_stop_fails_with_the_exception(fmat):
    def pf(x):
        if x == 3:
            raise TE("boom")
        return x

    probe = Source.range(1, 6).collect(pf).run_with(TestSink.probe(), fmat)
    probe.request(5).expect_next(1, 2)
    assert probe.expect_error() == TE("boom")


def test_collect_keeps_falsy_results(fmat):
    assert Source.from_iterable([0, 1, 2]).collect(lambda x: x - 1 if x else 0).run_with(Sink.seq(), fmat).result(3) == [0, 0, 1]


# ---------------------------------------------------------------------------------------------- chunk form
DATA = list(range(1, 41))


def _collect_fn(x):
    return x * 3 if x % 3 else None


def _raising(x):
    if x % 7 == 0:
        raise Boom(x)
    return _collect_fn(x)


def test_chunk_form_matches_element_form():
    assert check(lambda f: f.collect(_collect_fn), DATA) == ("ok", [x * 3 for x in DATA if x % 3])


def test_chunk_form_drops_everything():
    assert check(lambda f: f.collect(lambda x: None), DATA) == ("ok", [])


@pytest.mark.parametrize("decider", [None, resuming, restarting])
def test_chunk_form_supervision(decider):
    got = check(lambda f: f.collect(_raising), DATA, decider)
    if decider is None:
        assert got[0] == "err" and got[1] == Boom(7)
    else:
        assert got == ("ok", [x * 3 for x in DATA if x % 3 and x % 7])


def test_stateless_form_expands_like_the_stage():
    out = []
    form = Collect(_collect_fn).stateless_form()
    for x in range(1, 10):
        expand([form], x, out.append)
    assert out == [x * 3 for x in range(1, 10) if x % 3]


def test_validation():
    with pytest.raises(TypeError, match="collect: argument 'fn' must be callable"):
        Source.empty().collect(3)
