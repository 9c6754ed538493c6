"""Operators that reshape the sequence without user state: intersperse, zip_with_index, drop_repeated, log."""
from __future__ import annotations

import logging
import operator
from typing import Any, Callable, Optional

from ...stage.attributes import LogLevels
from ...stage.handlers import InHandler
from ...stage.supervision import supervise
from .base import FlowLogic, FlowStage, decider_of, require_callable, snapshot_copy
from ...stage.supervision import supervise_chunk
from .base import ChunkFlow

_UNSET = object()


class Intersperse(FlowStage):
    """Puts ``inject`` between consecutive elements, and ``start``/``end`` (if given) around them;
    ``start`` and ``end`` are emitted even for an empty stream.

    **Emits when** upstream emits (or when an injected element is due). **Backpressures when**
    downstream backpressures. **Completes when** upstream completes and ``end`` was emitted.
    **Cancels when** downstream cancels."""

    def __init__(self, start: Any, inject: Any, end: Any):
        if inject is None:
            raise ValueError("intersperse: argument 'inject' must not be None")
        super().__init__("intersperse")
        self.start = start
        self.inject = inject
        self.end = end

    def create_logic(self, attributes):
        return _IntersperseLogic(self)


class _IntersperseLogic(FlowLogic):
    expands = True  # a separator between elements, the start and end markers

    def __init__(self, stage: Intersperse):
        super().__init__(stage)
        self.start, self.inject, self.end = stage.start, stage.inject, stage.end
        self.set_handler(stage.in_, InHandler(on_push=self._first_push, on_upstream_finish=self._finish_empty))

    started = False  # the first element went through (start was emitted before it)

    def _first_push(self):
        elem = self.grab(self.in_)
        if self.start is not None:
            self.emit_multiple(self.out, (self.start, elem))
        else:
            self.emit(self.out, elem)
        self.started = True
        self.set_handler(self.in_, self)

    def save_to_snapshot(self):
        return self.started

    def restore_from_snapshot(self, state) -> None:
        if state:
            self.started = True
            self.set_handler(self.in_, self)

    def _finish_empty(self):
        self.emit_multiple(self.out, [x for x in (self.start, self.end) if x is not None])
        self.complete_stage()

    def on_push(self):
        self.emit_multiple(self.out, (self.inject, self.grab(self.in_)))

    def on_upstream_finish(self):
        if self.end is not None:
            self.emit(self.out, self.end)
        self.complete_stage()


class ZipWithIndex(FlowStage):
    """Pairs every element with its index: ``(elem, 0), (elem, 1), ...``.

    **Emits when** upstream emits. **Backpressures when** downstream backpressures.
    **Completes when** upstream completes. **Cancels when** downstream cancels."""

    def __init__(self):
        super().__init__("zip_with_index")

    def create_logic(self, attributes):
        return _ZipWithIndexLogic(self)


class _ZipWithIndexLogic(ChunkFlow, FlowLogic):
    """Chunk form: demand passes straight upstream, each chunk is paired with the next indices."""

    def __init__(self, stage: ZipWithIndex):
        super().__init__(stage)
        self.index = 0

    def on_push(self):
        i = self.index
        self.index = i + 1
        self.push(self.out, (self.grab(self.in_), i))

    def on_push_chunk(self):
        chunk = self.grab(self.in_)
        i = self.index
        self.index = i + len(chunk)
        self.push(self.out, list(zip(chunk, range(i, i + len(chunk)))))

    def reset_state(self) -> None:
        self.index = 0

    def save_to_snapshot(self):
        return self.index

    def restore_from_snapshot(self, state) -> None:
        self.index = state


class DropRepeated(FlowStage):
    """Drops an element when ``eq(previous, elem)`` holds (default ``==``), where ``previous`` is the
    element received just before it (passed on or dropped), as Pekko's ``dropRepeated``.

    **Emits when** an element is not equal to the previous one (the first element always).
    **Backpressures when** downstream backpressures. **Completes when** upstream completes.
    **Cancels when** downstream cancels. Supervision (of ``eq``): Resume drops the element and keeps
    the previous one; Restart drops it and forgets the previous one (the next element passes)."""

    def __init__(self, eq: Callable[[Any, Any], bool] = operator.eq):
        require_callable("drop_repeated", "eq", eq)
        super().__init__("drop_repeated")
        self.eq = eq

    def create_logic(self, attributes):
        return _DropRepeatedLogic(self, decider_of(attributes))


class _DropRepeatedLogic(FlowLogic):
    def __init__(self, stage: DropRepeated, decider):
        super().__init__(stage)
        self.eq = stage.eq
        self.decider = decider
        self.last = _UNSET

    def on_push(self):
        elem = self.grab(self.in_)
        last = self.last
        if last is _UNSET:
            self.last = elem
            self.push(self.out, elem)
            return
        try:
            repeated = self.eq(last, elem)
        except Exception as e:  # noqa: BLE001
            if supervise(self, self.decider, e):
                self.pull(self.in_)
            return
        self.last = elem
        if repeated:
            self.pull(self.in_)
        else:
            self.push(self.out, elem)

    def reset_state(self) -> None:
        self.last = _UNSET

    def save_to_snapshot(self):
        return None if self.last is _UNSET else (snapshot_copy(self.last),)

    def restore_from_snapshot(self, state) -> None:
        self.last = _UNSET if state is None else state[0]


LOG_OFF = -1
"""A ``LogLevels`` level that turns that kind of ``log()`` message off (Pekko's ``LogLevels.Off``);
any negative level does, and Python's logging never emits a record below level 0 either."""


class Log(FlowStage):
    """Logs every element (``extract(elem)``), upstream completion and failure, and downstream
    cancellation to the Python logger ``atoll.log.<name>`` (or to ``logger``); the levels come from
    ``Attributes.log_levels`` (default: DEBUG for elements and completion, ERROR for failure; a
    negative level such as ``LOG_OFF`` turns that kind of message off).

    Messages: ``[name] Element: <extracted>``, ``[name] Upstream finished.``, ``[name] Upstream
    failed.`` (at ERROR or above, with the exception attached) or ``[name] Upstream failed, cause:
    <Type>: <message>`` (below ERROR), ``[name] Downstream finished, cause: <Type>: <message>``.
    As in Pekko, ``extract`` runs for every element unless element logging is off, whatever the
    logger's configured level, so supervision decisions do not depend on logging configuration.

    **Emits when** upstream emits. **Backpressures when** downstream backpressures.
    **Completes when** upstream completes. **Cancels when** downstream cancels.
    Supervision (of ``extract``): Resume and Restart drop the element."""

    def __init__(self, name: str, extract: Optional[Callable[[Any], Any]] = None, logger: Optional[logging.Logger] = None):
        if not isinstance(name, str) or not name:
            raise ValueError(f"log: argument 'name' must be a non-empty string, got {name!r}")
        if extract is not None:
            require_callable("log", "extract", extract)
        if logger is not None and not isinstance(logger, (logging.Logger, logging.LoggerAdapter)):
            raise TypeError(f"log: argument 'logger' must be a logging.Logger, got {logger!r}")
        super().__init__("log")
        self.log_name = name
        self.extract = extract
        self.logger = logger

    def create_logic(self, attributes):
        stage = self
        name = stage.log_name
        extract = stage.extract
        levels = attributes.get(LogLevels) or LogLevels(logging.DEBUG, logging.DEBUG, logging.ERROR)
        on_element, on_finish, on_failure = levels.on_element, levels.on_finish, levels.on_failure
        logger = stage.logger or logging.getLogger(f"atoll.log.{name}")
        decider = decider_of(attributes)
        return _LogLogic(self, name, extract, on_element, on_finish, on_failure, logger, decider)


def _cause_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class _LogLogic(ChunkFlow, FlowLogic):
    """Chunk form: demand passes straight upstream; every element of a chunk is logged in order,
    ``extract`` supervised per element (Stop pushes the elements before it, then fails)."""

    stateless = True

    def __init__(self, stage: "Log", name, extract, on_element, on_finish, on_failure, logger, decider):
        super().__init__(stage)
        self.name = name
        self.extract = extract
        self.on_element = on_element
        self.on_finish = on_finish
        self.on_failure = on_failure
        self.logger = logger
        self.decider = decider

    def _log_element(self, elem) -> None:
        if self.on_element >= 0:
            extract = self.extract
            self.logger.log(self.on_element, "[%s] Element: %s", self.name, extract(elem) if extract is not None else elem)

    def on_push(self):
        try:
            elem = self.grab(self.in_)
            self._log_element(elem)
            self.push(self.out, elem)
        except Exception as e:  # noqa: BLE001
            if supervise(self, self.decider, e):
                self.pull(self.in_)

    def on_push_chunk(self):
        chunk = self.grab(self.in_)
        if self.on_element < 0:
            self.push(self.out, chunk)
            return
        res: list = []
        for x in chunk:
            try:
                self._log_element(x)
            except Exception as e:  # noqa: BLE001
                if not supervise_chunk(self, e, res):
                    return
                continue
            res.append(x)
        if res:
            self.push(self.out, res if len(res) < len(chunk) else chunk)
        else:
            self.pull_again()

    def on_upstream_finish(self):
        if self.on_finish >= 0:
            self.logger.log(self.on_finish, "[%s] Upstream finished.", self.name)
        self.complete_stage()

    def on_upstream_failure(self, exc):
        if self.on_failure >= logging.ERROR:
            self.logger.log(self.on_failure, "[%s] Upstream failed.", self.name, exc_info=exc)
        elif self.on_failure >= 0:
            self.logger.log(self.on_failure, "[%s] Upstream failed, cause: %s", self.name, _cause_text(exc))
        self.fail_stage(exc)

    def on_downstream_finish(self, cause):
        if self.on_finish >= 0:
            self.logger.log(self.on_finish, "[%s] Downstream finished, cause: %s", self.name, _cause_text(cause))
        self.cancel_stage(cause)
