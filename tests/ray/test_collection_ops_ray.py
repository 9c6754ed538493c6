"""Collection, resource, restart and retry operators on Ray: a few small cases in island actors of their own,
on real time with small backoffs and no timing assertions (the exact cases run on virtual time in
tests/core/ops/)."""
from __future__ import annotations

import itertools

from atoll import Flow, Keep, Sink, Source
from atoll.dsl.restart import RestartSettings, RestartSource, RetryFlow


class Boom(Exception):
    pass


def _flaky_factory():
    attempts = itertools.count()

    def factory():
        n = next(attempts)

        def fail(x):
            if x == "fail":
                raise Boom(n)
            return x

        return Source.from_iterable([n, "fail"] if n < 2 else [n, "done"]).map(fail)

    return factory


def test_restart_source_whose_inner_source_fails_in_its_own_island(rmat):
    src = RestartSource.on_failures_with_backoff(RestartSettings(0.05, 0.1, 0), _flaky_factory()).island()
    assert src.map(lambda x: x).run_with(Sink.seq(), rmat).result(60) == [0, 1, 2, "done"]


def test_retry_flow_in_an_island(rmat):
    retry = RetryFlow.with_backoff(0.01, 0.05, 0, 5, Flow().map(lambda i: i // 2),
                                   lambda i, out: out if out > 0 else None)
    out = Source.from_iterable([5, 2, 9]).island().via(retry).island().run_with(Sink.seq(), rmat).result(60)
    assert out == [0, 0, 0]


def test_collection_operators_across_islands(rmat):
    out = (Source.range(0, 20).collect(lambda x: x if x % 3 else None).island()
           .grouped_adjacent_by(lambda x: x // 5).island()
           .run_with(Sink.seq(), rmat).result(60))
    assert out == [[1, 2, 4], [5, 7, 8], [10, 11, 13, 14], [16, 17, 19]]
    assert Source.range(0, 100).island().run_with(Sink.count(), rmat).result(60) == 100
    assert Source.range(0, 100).island().take_last(3).run_with(Sink.seq(), rmat).result(60) == [[97, 98, 99]]


def test_unfold_resource_in_an_island(rmat):
    class Lines:
        def __init__(self):
            self.it = iter(["a", "b", "c"])

    out = (Source.unfold_resource(Lines, lambda r: next(r.it, None), lambda r: None).island()
           .map(str.upper).run_with(Sink.seq(), rmat).result(60))
    assert out == ["A", "B", "C"]


def test_maybe_promise_completed_from_the_driver_reaches_its_island(rmat):
    promise, head = Source.maybe().island().to_mat(Sink.head_option(), Keep.both).run(rmat)
    assert promise.try_complete(5) is True
    assert head.result(60) == 5
