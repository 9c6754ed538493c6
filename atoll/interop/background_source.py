"""A source whose elements come from a blocking iterator run on a helper thread, a few chunks ahead of demand.

Reading a file, waiting for a Ray object or for a Spark partition blocks; doing that on the island's thread
would stall every other stage of the island. :class:`BackgroundSource` runs ``factory()`` and its iterator on a
thread of its own, which produces at most ``prefetch`` chunks beyond what downstream has taken (a semaphore of
credits), and hands each chunk to the stage through an async callback. A chunk is a list of elements emitted one
by one (``chunked=True``) or a single element. Nothing is produced before the stage starts, and the thread stops
(closing the iterator) when the stage stops for any reason.

With ``replayable=True`` (the factory yields the same elements every time it is called: a Parquet dataset, a
deterministic Spark DataFrame) the stage takes part in checkpoints: its state is the number of elements it
emitted, and after a restore the helper thread skips that many elements of a fresh iterator before producing.
The skip reads what it skips (a Spark DataFrame's earlier partitions are fetched or computed again): a restore
costs time proportional to the position, not to the rest of the stream.
"""
from __future__ import annotations

import collections
import threading
from typing import Any, Callable, Iterator

from ..errors import PortStateError
from .._impl.ops.base import SourceStage
from ..stage.handlers import OutHandler
from ..stage.logic import GraphStageLogic

__all__ = ["BackgroundSource"]

_DONE = object()


class BackgroundSource(SourceStage):
    """Emits what a blocking iterator yields, produced on a helper thread up to ``prefetch`` chunks ahead.

    **Emits when** a produced element is at hand and downstream pulls. **Backpressures** the producing thread
    when ``prefetch`` chunks are waiting. **Completes when** the iterator is exhausted and every element was
    emitted. **Fails when** ``factory`` or the iterator raises (with that exception, after the elements produced
    before it). **Cancels** (stops the thread and closes the iterator) when downstream cancels.
    """

    def __init__(self, name: str, factory: Callable[[], Iterator[Any]], *, prefetch: int = 2,
                 chunked: bool = False, replayable: bool = False, checkpoint_hint: str = ""):
        if not callable(factory):
            raise TypeError(f"{name}: factory must be callable, got {factory!r}")
        if not isinstance(prefetch, int) or isinstance(prefetch, bool) or prefetch < 1:
            raise ValueError(f"{name}: prefetch must be an int >= 1, got {prefetch!r}")
        super().__init__(name)
        self.factory = factory
        self.prefetch = prefetch
        self.chunked = chunked
        self.replayable = replayable
        self.checkpoint_hint = checkpoint_hint or (
            "its elements cannot be read again from the same position after a restore")

    def create_logic(self, attributes):
        return _ReplayableBackgroundLogic(self) if self.replayable else _BackgroundLogic(self)


class _BackgroundLogic(GraphStageLogic, OutHandler):
    #: chunk form (set by the island's chunk negotiation): each pull takes a list of at most its demand
    chunked = False

    def __init__(self, stage: BackgroundSource):
        super().__init__(stage.shape)
        self.stage = stage
        self.out = stage.out
        self.set_handler(stage.out, self)
        self.chunks: collections.deque = collections.deque()
        self.cur: list = []  # the chunk being emitted (chunked mode) and the position in it
        self.pos = 0
        self.finished = False
        self.error = None
        self.credits = threading.Semaphore(stage.prefetch)
        self.stopping = threading.Event()
        self.thread = None
        self.emitted = 0  # elements pushed downstream (a replayable source's checkpoint state)
        self.skip = 0  # after a restore: elements the helper thread skips before producing

    def pre_start(self) -> None:
        deliver = self.get_async_callback(self._arrived)
        self.thread = threading.Thread(target=self._produce, args=(deliver,), daemon=True,
                                       name=f"atoll-{self.stage.name}")
        self.thread.start()

    # ---------------------------------------------------------------- helper thread
    def _produce(self, deliver) -> None:
        stage, credits, stopping = self.stage, self.credits, self.stopping
        it = None
        try:
            it = iter(stage.factory())
            if self.skip:
                it = _skipped(it, self.skip, stage.chunked, stage.name)
            while True:
                credits.acquire()
                if stopping.is_set():
                    return
                item = next(it, _DONE)
                if item is _DONE or stopping.is_set():
                    break
                deliver.invoke(item)
            deliver.invoke(_DONE)
        except BaseException as e:  # noqa: BLE001 - the stage fails with it, on its own thread
            deliver.invoke(_Failure(e))
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # noqa: BLE001 - already ending
                    pass

    # ---------------------------------------------------------------- island thread
    def _arrived(self, item) -> None:
        if item is _DONE:
            self.finished = True
        elif type(item) is _Failure:
            self.finished = True
            self.error = item.error
        else:
            self.chunks.append(item)
        if self.is_available(self.out):
            self.on_pull()
        elif self.finished and not self.chunks and self.pos >= len(self.cur):
            self._end()

    def _next(self):
        """The next element at hand, or ``_DONE`` when none is."""
        if self.stage.chunked:
            while self.pos >= len(self.cur):
                if not self.chunks:
                    return _DONE
                self.cur = self.chunks.popleft()
                self.pos = 0
                self.credits.release()
            elem = self.cur[self.pos]
            self.pos += 1
            return elem
        if not self.chunks:
            return _DONE
        self.credits.release()
        return self.chunks.popleft()

    def _take_chunk(self, limit: int):
        """Up to ``limit`` elements at hand as one non-empty list, or ``_DONE`` when none is."""
        out: list = []
        if self.stage.chunked:
            while len(out) < limit:
                if self.pos < len(self.cur):
                    take = self.cur[self.pos:self.pos + limit - len(out)]
                    out.extend(take)
                    self.pos += len(take)
                    continue
                if not self.chunks:
                    break
                self.cur = self.chunks.popleft()
                self.pos = 0
                self.credits.release()
        else:
            chunks = self.chunks
            while chunks and len(out) < limit:
                out.append(chunks.popleft())
                self.credits.release()
        return out or _DONE

    def chunk_capable(self) -> bool:
        return True

    def enable_chunks(self, chunk_size: int) -> None:
        self.chunked = True

    def _on_pull_chunked(self) -> None:
        chunk = self._take_chunk(self._out_conns[0].demand)
        if chunk is _DONE:
            if self.finished:
                self._end()
            return
        for i, elem in enumerate(chunk):
            if elem is None:
                if i:
                    self.push(self.out, chunk[:i])
                self.fail_stage(PortStateError(
                    f"{self.stage.name}: the iterator yielded None; elements must not be None "
                    "(Reactive Streams rule 2.13)"))
                return
        self.emitted += len(chunk)
        self.push(self.out, chunk)
        if self.finished and not self.chunks and self.pos >= len(self.cur):
            self._end()

    def on_pull(self) -> None:
        if self.chunked:
            self._on_pull_chunked()
            return
        elem = self._next()
        if elem is not _DONE:
            if elem is None:
                self.fail_stage(PortStateError(
                    f"{self.stage.name}: the iterator yielded None; elements must not be None "
                    "(Reactive Streams rule 2.13)"))
                return
            self.emitted += 1
            self.push(self.out, elem)
            if self.finished and not self.chunks and self.pos >= len(self.cur):
                self._end()  # that was the last element: complete now, not at the next pull
            return
        if self.finished:
            self._end()

    def _end(self) -> None:
        if self.error is not None:
            self.fail_stage(self.error)
        else:
            self.complete_stage()

    def post_stop(self) -> None:
        self.stopping.set()
        self.credits.release()


class _ReplayableBackgroundLogic(_BackgroundLogic):
    """A background source whose factory replays: saves how many elements it emitted, skips them after a restore."""

    def save_to_snapshot(self) -> int:
        return self.emitted

    def restore_from_snapshot(self, state: int) -> None:
        self.emitted = self.skip = state


def _skipped(it: Iterator[Any], n: int, chunked: bool, name: str) -> Iterator[Any]:
    """``it`` without its first ``n`` elements (in chunked mode each item is a list of elements)."""
    left = n
    for item in it:
        if left <= 0:
            yield item
            continue
        size = len(item) if chunked else 1
        if size <= left:
            left -= size
            continue
        rest = item[left:]
        left = 0
        yield rest
    if left > 0:
        from ..errors import SourceReplayMismatchError

        raise SourceReplayMismatchError(f"{name}: the checkpoint was taken after {n} elements, but a replay yields only "
                                f"{n - left}: the source's data changed since")


class _Failure:
    __slots__ = ("error",)

    def __init__(self, error: BaseException):
        self.error = error
