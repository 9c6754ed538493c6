"""Helpers for the GraphDSL conformance tests (imported by name, also inside Ray workers)."""
from __future__ import annotations

from atoll import GraphDSL, RunnableGraph, Source

#: how long "nothing happens" is watched for; a stall shows within it on both materializers
QUIET = 0.2


class TE(Exception):
    """The tests' own failure (Pekko's ``TestException``); equal by message so it survives pickling."""

    def __eq__(self, other):
        return type(other) is type(self) and other.args == self.args

    def __hash__(self):
        return hash((type(self), self.args))


TEST_EXCEPTION = TE("test")


def closed(build, *graphs, combine=None) -> RunnableGraph:
    """``RunnableGraph.from_graph(GraphDSL.create(build, *graphs, combine=combine))``."""
    return RunnableGraph.from_graph(GraphDSL.create(build, *graphs, combine=combine))


# ---------------------------------------------------------------------------------------------- publishers
# Pekko's BaseTwoStreamsSetup publishers as Sources: "immediately" ones complete/fail before any demand,
# "soon to" ones only when the stream asks for the first element.


def _empty_iter():
    return iter(())


class _Failing:
    """An iterator whose first ``next`` raises."""

    def __iter__(self):
        return self

    def __next__(self):
        raise TEST_EXCEPTION


def _failing_iter():
    return _Failing()


def completed_source():
    return Source.empty()


def soon_to_complete_source():
    return Source.from_iterator(_empty_iter)


def failed_source():
    return Source.failed(TEST_EXCEPTION)


def soon_to_fail_source():
    return Source.from_iterator(_failing_iter)


def nonempty_source(n: int = 4):
    return Source.from_iterable(range(1, n + 1))
