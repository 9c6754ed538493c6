"""buffer(size, strategy): a bounded queue that decouples upstream from downstream rate."""
from __future__ import annotations

import logging
from collections import deque

from ...errors import BufferOverflowError
from .base import FlowLogic, FlowStage, require_int
from .base import ChunkFlow

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
        return _BufferLogic(self, attributes.name_or_default("buffer"))


class _Held:
    """A control signal waiting in the buffer behind the elements that arrived before it."""

    __slots__ = ("signal",)

    def __init__(self, signal):
        self.signal = signal

    def __reduce__(self):
        return (_Held, (self.signal,))


class _Stamped:
    """Event-time graphs: a buffered element with its timestamp (the element form pushes it later)."""

    __slots__ = ("elem", "ts")

    def __init__(self, elem, ts):
        self.elem = elem
        self.ts = ts

    def __reduce__(self):
        return (_Stamped, (self.elem, self.ts))


class _BufferLogic(ChunkFlow, FlowLogic):
    """The queue holds elements and, behind them, the signals that arrived after them (``_Held``);
    a signal at the head goes out at once, so the head is always an element. Chunk form: a pull
    asks for the free room (one element when the queue is full and the strategy drops, so a chunk
    never overflows a queue that one element at a time would not); a chunk push takes the head elements up to the demand, stopping at a signal."""
    pulls_ahead = True  # chunk regions: asks for the free room, not for what downstream wants

    def __init__(self, stage: Buffer, name: str):
        super().__init__(stage)
        self.size = stage.size
        self.kind = stage.strategy.kind
        self.name = name
        self.buf: deque = deque()
        self.count = 0  # elements in buf

    def pre_start(self):
        if self.kind != "backpressure" or self.count < self.size:  # restored full: the first pull pulls
            self._pull_up()

    def _pull_up(self) -> None:
        if self.chunked:
            room = self.size - self.count
            self.pull_chunk(self.in_, room if room > 0 else 1)
        else:
            self.pull(self.in_)

    def _release(self) -> None:
        buf = self.buf
        while buf and type(buf[0]) is _Held:
            self.emit_signal(self.out, buf.popleft().signal)

    def on_signal(self, signal) -> None:
        if self.count == 0:
            self.emit_signal(self.out, signal)
        else:
            self.buf.append(_Held(signal))

    def _insert(self, elem) -> bool:
        """Queue ``elem`` by the overflow strategy; False when the stage failed."""
        buf, size, kind = self.buf, self.size, self.kind
        if kind != "backpressure" and self.count >= size:
            if kind == "fail":
                log.error("buffer %s is full (capacity %d): failing", self.name, size)
                self.fail_stage(BufferOverflowError(f"Buffer overflow (max capacity was: {size})!"))
                return False
            log.debug("buffer %s is full: %s", self.name, kind)
            if kind == "drop_head":
                buf.popleft()
                self.count -= 1
                self._release()
            elif kind == "drop_tail":
                i = len(buf) - 1
                while type(buf[i]) is _Held:
                    i -= 1
                del buf[i]
                self.count -= 1
                if i == 0:
                    self._release()
            else:
                for item in buf:
                    if type(item) is _Held:
                        self.emit_signal(self.out, item.signal)
                buf.clear()
                self.count = 0
        buf.append(elem)
        self.count += 1
        return True

    def _pull_after_push(self) -> None:
        if self.kind != "backpressure" or self.count < self.size:
            self._pull_up()

    #: event time: buffered elements keep their timestamps (``_Stamped``); the chunk form has none,
    #: so in event-time graphs the buffer runs element-wise
    stamped = False

    def enable_event_time(self) -> None:
        super().enable_event_time()
        self.stamped = True

    def on_push(self):
        elem = self.grab(self.in_)
        if self.is_available(self.out):
            self.push(self.out, elem)
            self.pull(self.in_)
            return
        if self.stamped:
            elem = _Stamped(elem, self._ts)
        if self._insert(elem):
            self._pull_after_push()

    def on_push_chunk(self):
        chunk = self.grab(self.in_)
        start = 0
        if self.is_available(self.out):  # then the queue is empty
            d = self._out_conns[0].demand
            if len(chunk) <= d:
                self.push(self.out, chunk)
                self._pull_up()
                return
            self.push(self.out, chunk[:d])
            start = d
        for i in range(start, len(chunk)):
            if not self._insert(chunk[i]):
                return
        self._pull_after_push()

    def _after_pull(self) -> None:
        if self.is_closed(self.in_):
            if not self.count:
                self.complete_stage()
        elif not self.has_been_pulled(self.in_):
            self._pull_up()

    def on_pull(self):
        if self.count:
            self.count -= 1
            x = self.buf.popleft()
            if type(x) is _Stamped:
                self.push(self.out, x.elem, x.ts)
            else:
                self.push(self.out, x)
            self._release()
        self._after_pull()

    def on_pull_chunk(self):
        if self.count:
            buf = self.buf
            d = self._out_conns[0].demand
            out = []
            while buf and len(out) < d and type(buf[0]) is not _Held:
                out.append(buf.popleft())
            self.count -= len(out)
            self.push(self.out, out)
            self._release()
        self._after_pull()

    def on_upstream_finish(self):
        if not self.count:
            self.complete_stage()

    def reset_state(self) -> None:
        self.buf.clear()
        self.count = 0

    def save_to_snapshot(self):
        return list(self.buf)

    def restore_from_snapshot(self, state) -> None:
        self.buf = deque(state)
        self.count = sum(1 for x in self.buf if type(x) is not _Held)
