"""Operators that reshape the sequence without user state: intersperse, zip_with_index, drop_repeated, log."""
from __future__ import annotations

import logging
import operator
from typing import Any, Callable, Optional

from ..stage.attributes import LogLevels
from ..stage.handlers import InHandler
from ..stage.supervision import Supervision, decide
from .base import FlowLogic, FlowStage, decider_of, require_callable

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
        stage = self

        class Logic(FlowLogic):
            def __init__(self):
                super().__init__(stage)
                self.set_handler(stage.in_, InHandler(on_push=self._first_push, on_upstream_finish=self._finish_empty))

            def _first_push(self):
                elem = self.grab(self.in_)
                if stage.start is not None:
                    self.emit_multiple(self.out, (stage.start, elem))
                else:
                    self.emit(self.out, elem)
                self.set_handler(self.in_, self)

            def _finish_empty(self):
                self.emit_multiple(self.out, [x for x in (stage.start, stage.end) if x is not None])
                self.complete_stage()

            def on_push(self):
                self.emit_multiple(self.out, (stage.inject, self.grab(self.in_)))

            def on_upstream_finish(self):
                if stage.end is not None:
                    self.emit(self.out, stage.end)
                self.complete_stage()

        return Logic()


class ZipWithIndex(FlowStage):
    """Pairs every element with its index: ``(elem, 0), (elem, 1), ...``.

    **Emits when** upstream emits. **Backpressures when** downstream backpressures.
    **Completes when** upstream completes. **Cancels when** downstream cancels."""

    def __init__(self):
        super().__init__("zip_with_index")

    def create_logic(self, attributes):
        class Logic(FlowLogic):
            index = 0

            def on_push(self):
                i = self.index
                self.index = i + 1
                self.push(self.out, (self.grab(self.in_), i))

        return Logic(self)


class DropRepeated(FlowStage):
    """Drops an element equal (by ``eq``, default ``==``) to the previous passed-on element.

    **Emits when** an element differs from the previous one. **Backpressures when** downstream
    backpressures. **Completes when** upstream completes. **Cancels when** downstream cancels.
    Supervision (of ``eq``): Resume/Restart skip the element."""

    def __init__(self, eq: Callable[[Any, Any], bool] = operator.eq):
        require_callable("drop_repeated", "eq", eq)
        super().__init__("drop_repeated")
        self.eq = eq

    def create_logic(self, attributes):
        eq = self.eq
        decider = decider_of(attributes)

        class Logic(FlowLogic):
            last = _UNSET

            def on_push(self):
                try:
                    elem = self.grab(self.in_)
                    if self.last is not _UNSET and eq(self.last, elem):
                        self.pull(self.in_)
                    else:
                        self.last = elem
                        self.push(self.out, elem)
                except Exception as e:  # noqa: BLE001
                    if decide(decider, e) == Supervision.STOP:
                        self.fail_stage(e)
                    else:
                        self.pull(self.in_)

        return Logic(self)


class Log(FlowStage):
    """Logs every element (``extract(elem)``), completion and failure to the Python logger
    ``atoll.log.<name>``; levels from ``Attributes.log_levels`` (default: DEBUG, DEBUG, ERROR).

    **Emits when** upstream emits. **Backpressures when** downstream backpressures.
    **Completes when** upstream completes. **Cancels when** downstream cancels."""

    def __init__(self, name: str, extract: Optional[Callable[[Any], Any]] = None, logger: Optional[logging.Logger] = None):
        if not isinstance(name, str) or not name:
            raise ValueError(f"log: argument 'name' must be a non-empty string, got {name!r}")
        if extract is not None:
            require_callable("log", "extract", extract)
        super().__init__("log")
        self.log_name = name
        self.extract = extract
        self.logger = logger

    def create_logic(self, attributes):
        stage = self
        levels = attributes.get(LogLevels) or LogLevels(logging.DEBUG, logging.DEBUG, logging.ERROR)
        logger = stage.logger or logging.getLogger(f"atoll.log.{stage.log_name}")
        decider = decider_of(attributes)

        class Logic(FlowLogic):
            def on_push(self):
                elem = self.grab(self.in_)
                if logger.isEnabledFor(levels.on_element):
                    try:
                        shown = stage.extract(elem) if stage.extract is not None else elem
                    except Exception as e:  # noqa: BLE001
                        if decide(decider, e) == Supervision.STOP:
                            self.fail_stage(e)
                        else:
                            self.pull(self.in_)
                        return
                    logger.log(levels.on_element, "[%s] Element: %r", stage.log_name, shown)
                self.push(self.out, elem)

            def on_upstream_finish(self):
                logger.log(levels.on_finish, "[%s] Upstream finished.", stage.log_name)
                self.complete_stage()

            def on_upstream_failure(self, exc):
                logger.log(levels.on_failure, "[%s] Upstream failed: %r", stage.log_name, exc)
                self.fail_stage(exc)

            def on_downstream_finish(self, cause):
                logger.log(levels.on_finish, "[%s] Downstream finished, cause: %r", stage.log_name, cause)
                self.cancel_stage(cause)

        return Logic(self)
