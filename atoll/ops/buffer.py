"""buffer(size, strategy): a bounded queue that decouples upstream from downstream rate."""
from __future__ import annotations

import logging
from collections import deque

from ..errors import BufferOverflowError
from .base import FlowLogic, FlowStage, require_int

log = logging.getLogger("atoll.buffer")


class OverflowStrategy:
    """What ``buffer`` does when an element arrives while it is full (Pekko's ``OverflowStrategy``)."""

    __slots__ = ("kind",)

    KINDS = ("backpressure", "drop_head", "drop_tail", "drop_buffer", "fail")

    def __init__(self, kind: str):
        if kind not in self.KINDS:
            raise ValueError(f"OverflowStrategy: unknown kind {kind!r}; expected one of {self.KINDS}")
        self.kind = kind

    def __repr__(self):
        return f"OverflowStrategy.{self.kind}"

    def __eq__(self, other):
        return isinstance(other, OverflowStrategy) and other.kind == self.kind

    def __hash__(self):
        return hash(self.kind)


#: Stop pulling upstream while the buffer is full.
OverflowStrategy.backpressure = OverflowStrategy("backpressure")
#: Drop the oldest buffered element to make room.
OverflowStrategy.drop_head = OverflowStrategy("drop_head")
#: Drop the youngest buffered element to make room.
OverflowStrategy.drop_tail = OverflowStrategy("drop_tail")
#: Drop everything buffered to make room.
OverflowStrategy.drop_buffer = OverflowStrategy("drop_buffer")
#: Fail the stream with ``BufferOverflowError``.
OverflowStrategy.fail = OverflowStrategy("fail")


class Buffer(FlowStage):
    """Holds up to ``size`` elements while downstream is slower; ``strategy`` decides on overflow.

    **Emits when** downstream pulls and the buffer is not empty. **Backpressures when** the buffer is
    full and the strategy is ``backpressure``. **Completes when** upstream completes and the buffer
    is empty. **Cancels when** downstream cancels."""

    def __init__(self, size: int, strategy: OverflowStrategy):
        require_int("buffer", "size", size, 1)
        if not isinstance(strategy, OverflowStrategy):
            raise TypeError(f"buffer: argument 'strategy' must be an OverflowStrategy, got {strategy!r}")
        super().__init__("buffer")
        self.size = size
        self.strategy = strategy

    def create_logic(self, attributes):
        size = self.size
        kind = self.strategy.kind
        name = attributes.name_or_default("buffer")

        class Logic(FlowLogic):
            def pre_start(self):
                self.buf = deque()
                self.pull(self.in_)

            def on_push(self):
                elem = self.grab(self.in_)
                if self.is_available(self.out):
                    self.push(self.out, elem)
                    self.pull(self.in_)
                    return
                buf = self.buf
                full = len(buf) >= size
                if kind == "backpressure":
                    buf.append(elem)
                    if len(buf) < size:
                        self.pull(self.in_)
                    return
                if full:
                    if kind == "fail":
                        log.error("buffer %s is full (capacity %d): failing", name, size)
                        self.fail_stage(BufferOverflowError(f"Buffer overflow (max capacity was: {size})!"))
                        return
                    log.debug("buffer %s is full: %s", name, kind)
                    if kind == "drop_head":
                        buf.popleft()
                    elif kind == "drop_tail":
                        buf.pop()
                    else:
                        buf.clear()
                buf.append(elem)
                self.pull(self.in_)

            def on_pull(self):
                buf = self.buf
                if buf:
                    self.push(self.out, buf.popleft())
                if self.is_closed(self.in_):
                    if not buf:
                        self.complete_stage()
                elif not self.has_been_pulled(self.in_):
                    self.pull(self.in_)

            def on_upstream_finish(self):
                if not self.buf:
                    self.complete_stage()

        return Logic(self)
