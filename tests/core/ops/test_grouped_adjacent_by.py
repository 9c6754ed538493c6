"""grouped_adjacent_by and grouped_adjacent_by_weighted: ported from Pekko's FlowGroupedAdjacentByWeightedSpec
(every case), plus a group finished while downstream is not ready (the pending group), the None-key and
negative-cost failures, signal holding and build-time validation."""
from __future__ import annotations

import pytest
from ops_kit import fmat  # noqa: F401 - fmat is a fixture

from atoll import Attributes, Keep, Source, Supervision
from atoll.testkit import TestSink, TestSource

STOP = Attributes.supervision_strategy(Supervision.stopping_decider)
RESUME = Attributes.supervision_strategy(Supervision.resuming_decider)
RESTART = Attributes.supervision_strategy(Supervision.restarting_decider)


def _probe(src, fmat):
    return src.run_with(TestSink.probe(), fmat)


def test_produce_no_group_when_source_is_empty(fmat):
    _probe(Source.empty().grouped_adjacent_by(lambda x: x), fmat).request(1).expect_complete()


def test_group_adjacent_elements_by_predicate(fmat):
    p = _probe(Source.from_iterable(["a", "a", "b", "b", "c", "c"]).grouped_adjacent_by(lambda x: x), fmat)
    p.request(6)
    p.expect_next(["a", "a"])
    p.expect_next(["b", "b"])
    p.expect_next(["c", "c"])
    p.expect_complete()


def test_group_by_leading_char(fmat):
    p = _probe(Source.from_iterable(["Hello", "Hi", "Greetings", "Hey"]).grouped_adjacent_by(lambda s: s[0]), fmat)
    p.request(4)
    p.expect_next(["Hello", "Hi"])
    p.expect_next(["Greetings"])
    p.expect_next(["Hey"])
    p.expect_complete()


def test_act_like_buffer_until_changed(fmat):
    p = _probe(Source.from_iterable([1, 1, 2, 2, 3, 3, 1]).grouped_adjacent_by(lambda x: x), fmat)
    p.request(7)
    p.expect_next([1, 1])
    p.expect_next([2, 2])
    p.expect_next([3, 3])
    p.expect_next([1])
    p.expect_complete()


def test_limit_the_chunk_size(fmat):
    src = Source.from_iterable(["Hello", "Hi", "Hey", "Greetings", "Hey"]).grouped_adjacent_by_weighted(
        lambda s: s[0], 2, lambda s: 1)
    p = _probe(src, fmat)
    p.request(5)
    p.expect_next(["Hello", "Hi"])
    p.expect_next(["Hey"])
    p.expect_next(["Greetings"])
    p.expect_next(["Hey"])
    p.expect_complete()


def test_handle_single_heavy_weighted_element(fmat):
    src = Source.from_iterable(["Hello", "HiHi", "Hi", "Hi", "Greetings", "Hey"]).grouped_adjacent_by_weighted(
        lambda s: s[0], 4, len)
    p = _probe(src, fmat)
    p.request(6)
    p.expect_next(["Hello"])
    p.expect_next(["HiHi"])
    p.expect_next(["Hi", "Hi"])
    p.expect_next(["Greetings"])
    p.expect_next(["Hey"])
    p.expect_complete()


class Boom(RuntimeError):
    pass


EX = Boom("cost boom")


def _cost_failing_at(n):
    def cost(e):
        if e == n:
            raise EX
        return 1

    return cost


@pytest.mark.parametrize("attrs", [STOP, None])
def test_fail_when_cost_throws_with_stop_or_default(fmat, attrs):
    src = Source.from_iterable([1, 2, 3]).grouped_adjacent_by_weighted(lambda e: "k", 2, _cost_failing_at(2))
    if attrs is not None:
        src = src.with_attributes(attrs)
    p = _probe(src, fmat)
    p.request(10)
    assert p.expect_error() is EX


def test_resume_when_cost_throws_and_keep_surrounding_groups(fmat):
    src = Source.from_iterable([1, 2, 3, 4, 5]).grouped_adjacent_by_weighted(lambda e: "k", 2, _cost_failing_at(3))
    p = _probe(src.with_attributes(RESUME), fmat)
    p.request(10)
    p.expect_next([1, 2])
    p.expect_next([4, 5])
    p.expect_complete()


def test_restart_when_cost_throws_and_drop_current_group(fmat):
    src = Source.from_iterable([1, 2, 3, 4, 5]).grouped_adjacent_by_weighted(lambda e: "k", 2, _cost_failing_at(3))
    p = _probe(src.with_attributes(RESTART), fmat)
    p.request(10)
    p.expect_next([4, 5])
    p.expect_complete()


def _key_failing_at_2(e):
    if e == 2:
        raise EX
    return e


def test_fail_when_key_throws_and_stop(fmat):
    p = _probe(Source.from_iterable([1, 1, 2, 3]).grouped_adjacent_by(_key_failing_at_2).with_attributes(STOP), fmat)
    p.request(10)
    assert p.expect_error() is EX


def test_resume_when_key_throws_and_skip_offending_elements(fmat):
    p = _probe(Source.from_iterable([1, 1, 2, 2, 3, 3]).grouped_adjacent_by(_key_failing_at_2).with_attributes(RESUME), fmat)
    p.request(10)
    p.expect_next([1, 1])
    p.expect_next([3, 3])
    p.expect_complete()


def test_resume_when_key_throws_on_the_last_element_and_flush_the_kept_group(fmat):
    p = _probe(Source.from_iterable([1, 1, 2]).grouped_adjacent_by(_key_failing_at_2).with_attributes(RESUME), fmat)
    p.request(10)
    p.expect_next([1, 1])
    p.expect_complete()


def test_restart_when_key_throws_and_drop_current_group(fmat):
    p = _probe(Source.from_iterable([1, 1, 2, 2, 3, 3]).grouped_adjacent_by(_key_failing_at_2).with_attributes(RESTART), fmat)
    p.request(10)
    p.expect_next([3, 3])
    p.expect_complete()


# ---------------------------------------------------------------------------------------------- beyond the spec
def test_heavy_element_after_a_group_leaves_a_pending_group_for_the_next_pull(fmat):
    # "abc" closes ["a"] (pushed) and weighs more than max_weight: it waits as the pending group
    src, p = (TestSource.probe().grouped_adjacent_by_weighted(lambda s: s[0], 2, len)
              .to_mat(TestSink.probe(), Keep.both).run(fmat))
    p.request(1)
    src.send_next("a")
    p.expect_no_message(0.05)
    src.send_next("abc")
    p.expect_next(["a"])
    p.expect_no_message(0.05)
    p.request(1)
    p.expect_next(["abc"])
    src.send_complete()
    p.request(1)
    p.expect_complete()


def test_pending_and_last_group_both_go_out_at_completion(fmat):
    src = Source.from_iterable(["a", "abc", "b"]).grouped_adjacent_by_weighted(lambda s: s[0], 2, len)
    p = _probe(src, fmat)
    p.request(10)
    p.expect_next(["a"])
    p.expect_next(["abc"])
    p.expect_next(["b"])
    p.expect_complete()


def test_none_key_fails(fmat):
    p = _probe(Source.from_iterable([1, 2]).grouped_adjacent_by(lambda e: None), fmat)
    p.request(1)
    err = p.expect_error()
    assert isinstance(err, ValueError) and str(err) == "Element key must not be null"


def test_negative_cost_fails(fmat):
    p = _probe(Source.from_iterable([1]).grouped_adjacent_by_weighted(lambda e: e, 3, lambda e: -2), fmat)
    p.request(1)
    err = p.expect_error()
    assert str(err) == "Negative weight [-2] for element [1] is not allowed"


def test_signal_waits_behind_the_group_holding_earlier_elements(fmat):
    src, p = (TestSource.probe().grouped_adjacent_by(lambda x: x)
              .to_mat(TestSink.probe(signals=True), Keep.both).run(fmat))
    p.request(5)
    src.send_next(1)
    src.send_watermark(10)
    src.send_next(1)
    p.expect_no_message(0.05)
    src.send_next(2)
    p.expect_next([1, 1])
    p.expect_watermark(10)
    src.send_complete()
    p.expect_next([2])
    p.expect_complete()


def test_validation():
    with pytest.raises(TypeError, match="grouped_adjacent_by: argument 'fn' must be callable"):
        Source.empty().grouped_adjacent_by(None)
    with pytest.raises(ValueError, match="grouped_adjacent_by_weighted: max_weight must be > 0, got 0"):
        Source.empty().grouped_adjacent_by_weighted(len, 0, len)
    with pytest.raises(TypeError, match="grouped_adjacent_by_weighted: argument 'cost' must be callable"):
        Source.empty().grouped_adjacent_by_weighted(len, 2, None)
