"""log: ported from Pekko's FlowLogSpec, adapted to Python logging.

``log(name)`` logs to the logger ``atoll.log.<name>`` (Pekko: the materializer's event stream with
source ``org.apache.pekko.stream.Log``); a custom ``logging.Logger`` plays the part of Pekko's custom
``LoggingAdapter``. The records are checked with pytest's ``caplog``.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest
from ops_kit import TE

from atoll import Attributes, Flow, Sink, Source, Supervision
from atoll._impl.ops.sequence import LOG_OFF

DEBUG, INFO, WARNING, ERROR = logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR


class TestException(RuntimeError):
    __test__ = False

    def __init__(self):
        super().__init__("Boom!")


def _records(caplog, logger_name):
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == logger_name]


@pytest.fixture
def debug_logs(caplog):
    caplog.set_level(DEBUG, logger="atoll.log")
    return caplog


# =========================================================================== on Flow
def test_log_on_flow_debugs_each_element(mat, debug_logs):
    debugging = Flow().log("my-debug")
    Source.range(1, 3).via(debugging).run_with(Sink.ignore(), mat).result(3)
    assert _records(debug_logs, "atoll.log.my-debug") == [
        (DEBUG, "[my-debug] Element: 1"),
        (DEBUG, "[my-debug] Element: 2"),
        (DEBUG, "[my-debug] Upstream finished."),
    ]


def test_log_on_flow_allows_disabling_element_logging(mat, debug_logs):
    disable_element_logging = Attributes.log_levels(on_element=LOG_OFF, on_finish=DEBUG, on_failure=DEBUG)
    debugging = Flow().log("my-debug")
    Source.range(1, 3).via(debugging).with_attributes(disable_element_logging).run_with(Sink.ignore(), mat).result(3)
    assert _records(debug_logs, "atoll.log.my-debug") == [(DEBUG, "[my-debug] Upstream finished.")]


def test_log_on_flow_debugs_each_element_in_a_chain_of_log_stages(mat, debug_logs):
    # Pekko's javadsl variant: log(name), log(name, extract), log(name, extract, adapter), log(name, adapter)
    important = logging.getLogger("com.example.ImportantLogger")
    important.setLevel(DEBUG)
    try:
        debugging = (
            Flow()
            .log("log-1")
            .log("log-2", lambda i: i)
            .log("log-3", lambda i: i, important)
            .log("log-4", logger=important)
        )
        Source.single(1).via(debugging).run_with(Sink.ignore(), mat).result(3)
    finally:
        important.setLevel(logging.NOTSET)
    msgs = [r.getMessage() for r in debug_logs.records if r.name in ("atoll.log.log-1", "atoll.log.log-2", important.name)]
    assert sum("Element: 1" in m for m in msgs) == 4
    assert sum("Upstream finished" in m for m in msgs) == 4


# =========================================================================== on Source
def test_log_on_source_debugs_each_element(mat, debug_logs):
    Source.range(1, 3).log("flow-s2").run_with(Sink.ignore(), mat).result(3)
    assert _records(debug_logs, "atoll.log.flow-s2") == [
        (DEBUG, "[flow-s2] Element: 1"),
        (DEBUG, "[flow-s2] Element: 2"),
        (DEBUG, "[flow-s2] Upstream finished."),
    ]


@dataclass
class Complex:
    a: int
    b: str


def test_log_on_source_allows_extracting_the_value_to_be_logged(mat, debug_logs):
    Source.single(Complex(1, "42")).log("flow-s3", lambda c: c.b).run_with(Sink.ignore(), mat).result(3)
    assert _records(debug_logs, "atoll.log.flow-s3") == [
        (DEBUG, "[flow-s3] Element: 42"),
        (DEBUG, "[flow-s3] Upstream finished."),
    ]


def test_log_on_source_logs_upstream_failure(mat, debug_logs):
    cause = TestException()
    fut = Source.failed(cause).log("flow-4").run_with(Sink.ignore(), mat)
    with pytest.raises(TestException):
        fut.result(3)
    records = [r for r in debug_logs.records if r.name == "atoll.log.flow-4"]
    assert [(r.levelno, r.getMessage()) for r in records] == [(ERROR, "[flow-4] Upstream failed.")]
    assert records[0].exc_info[1] is cause


def test_log_on_source_allows_passing_in_a_custom_logger(mat, caplog):
    important = logging.getLogger("com.example.ImportantLogger")
    caplog.set_level(DEBUG, logger=important.name)
    Source.single(42).log("flow-5", logger=important).run_with(Sink.ignore(), mat).result(3)
    assert _records(caplog, important.name) == [
        (DEBUG, "[flow-5] Element: 42"),
        (DEBUG, "[flow-5] Upstream finished."),
    ]
    assert _records(caplog, "atoll.log.flow-5") == []


def test_log_on_source_allows_configuring_log_levels_via_attributes(mat, debug_logs):
    log_attrs = Attributes.log_levels(on_element=WARNING, on_finish=INFO, on_failure=DEBUG)
    Source.single(42).log("flow-6").with_attributes(log_attrs).run_with(Sink.ignore(), mat).result(3)
    assert _records(debug_logs, "atoll.log.flow-6") == [
        (WARNING, "[flow-6] Element: 42"),
        (INFO, "[flow-6] Upstream finished."),
    ]
    fut = Source.failed(TestException()).log("flow-6e").with_attributes(log_attrs).run_with(Sink.ignore(), mat)
    with pytest.raises(TestException):
        fut.result(3)
    assert _records(debug_logs, "atoll.log.flow-6e") == [(DEBUG, "[flow-6e] Upstream failed, cause: TestException: Boom!")]


def test_log_on_source_follows_the_supervision_strategy_when_extract_throws(mat, debug_logs):
    def extract(_):
        raise TE("extract")

    fut = (
        Source.range(1, 6)
        .log("hi", extract)
        .with_attributes(Attributes.supervision_strategy(Supervision.resuming_decider))
        .run_with(Sink.fold(0, lambda a, b: a + b), mat)
    )
    assert fut.result(3) == 0


# =========================================================================== Atoll specifics
def test_log_runs_extract_whatever_the_logger_level_so_supervision_does_not_depend_on_it(mat, caplog):
    caplog.set_level(WARNING, logger="atoll.log.quiet")  # element records (DEBUG) are not emitted
    seen = []

    def extract(x):
        seen.append(x)
        if x == 2:
            raise TE("extract")
        return x

    fut = Source.range(1, 4).log("quiet", extract).run_with(Sink.seq(), mat)
    with pytest.raises(TE):
        fut.result(3)
    assert seen == [1, 2]
    assert _records(caplog, "atoll.log.quiet") == []


def test_log_logs_downstream_cancellation_with_its_cause(mat, debug_logs):
    out = Source.repeat(7).log("cancel").take(1).run_with(Sink.seq(), mat).result(3)
    assert out == [7]
    assert _records(debug_logs, "atoll.log.cancel") == [
        (DEBUG, "[cancel] Element: 7"),
        (DEBUG, "[cancel] Downstream finished, cause: StageWasCompleted: stage was completed"),
    ]


def test_log_passes_elements_and_failures_on_unchanged(mat):
    assert Source.range(0, 3).log("pass").run_with(Sink.seq(), mat).result(3) == [0, 1, 2]
    fut = Source.failed(TE("up")).log("pass").run_with(Sink.seq(), mat)
    with pytest.raises(TE, match="up"):
        fut.result(3)


def test_log_rejects_bad_arguments_at_build_time():
    with pytest.raises(ValueError, match=r"log: argument 'name' must be a non-empty string"):
        Flow().log("")
    with pytest.raises(ValueError, match=r"log: argument 'name' must be a non-empty string"):
        Flow().log(None)
    with pytest.raises(TypeError, match=r"log: argument 'extract' must be callable"):
        Flow().log("x", "attr")
    with pytest.raises(TypeError, match=r"log: argument 'logger' must be a logging.Logger"):
        Flow().log("x", logger="com.example")
