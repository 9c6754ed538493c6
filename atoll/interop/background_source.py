"""A source whose elements come from a blocking iterator run on a helper thread, a few chunks ahead of demand.

Reading a file, waiting for a Ray object or for a Spark partition blocks; doing that on the island's thread
would stall every other stage of the island. :class:`BackgroundSource` runs ``factory()`` and its iterator on a
thread of its own, which produces at most ``prefetch`` chunks beyond what downstream has taken (a semaphore of
credits), and hands each chunk to the stage through an async callback. A chunk is a list of elements emitted one
by one (``chunked=True``) or a single element. Nothing is produced before the stage starts, and the thread stops
(closing the iterator) when the stage stops for any reason.

With ``replayable=True`` (the factory yields the same elements every time it is called: a Parquet dataset, a
deterministic Spark DataFrame or Ray Dataset) the stage takes part in checkpoints: its state is the number of elements it
emitted, and after a restore the helper thread skips that many elements of a fresh iterator before producing.
The skip reads what it skips (a Spark DataFrame's earlier partitions are fetched or computed again): a restore
costs time proportional to the position, not to the rest of the stream.

**Replay verification.** A factory may yield its items wrapped in :class:`Digested` (the item, a digest of its
data, and a way to digest its first ``k`` elements): the stage then keeps, per *segment* (a run of items the
factory marks, e.g. a Spark partition), the element range and a digest chained over the items' digests, folded
as items are emitted, and saves them with the count. On a restore the skip computes the same digests for the
elements it skips and fails with :class:`~atoll.errors.SourceReplayMismatchError` at the first segment whose
content differs, naming the rows it covers: a changed source is detected even when it still has as many
elements. A snapshot of an older version (a bare count) restores without the check. Digests serve checkpoints and
restores only: a factory that has an ``undigested()`` method (returning the same factory without the digests) is
replaced by it in a run that neither checkpoints nor restores, so that run does not compute them.
"""
from __future__ import annotations

import collections
import hashlib
import threading
from typing import Any, Callable, Iterator, List, Optional

from ..errors import PortStateError
from .._impl.ops.base import SourceStage
from ..stage.handlers import OutHandler
from ..stage.logic import GraphStageLogic

__all__ = ["BackgroundSource", "Digested"]

_DONE = object()


class Digested:
    """An item of a replayable factory with the digest of its data (see the module docstring).

    ``digest``: bytes identifying the item's content; ``partial(k)``: the digest of its first ``k`` elements (a
    chunked item of which a checkpoint cut took only a part; must not depend on when it is called); ``segment``:
    True when the item starts a new segment, the unit a mismatch is reported in."""

    __slots__ = ("item", "digest", "partial", "segment", "offset", "base")

    def __init__(self, item: Any, digest: bytes, partial: Optional[Callable[[int], bytes]] = None,
                 segment: bool = False):
        self.item = item
        self.digest = digest
        self.partial = partial
        self.segment = segment
        #: set by a restore's skip on the rest of an item it cut: the elements cut away (``digest`` and ``partial``
        #: are still the whole item's) and the segments of the elements before the item
        self.offset = 0
        self.base: Optional["_Digests"] = None


def _chain(prev: bytes, digest: bytes) -> bytes:
    return hashlib.blake2b(prev + digest, digest_size=16).digest()


class _Digests:
    """Segments of emitted elements: ``[start, end, chained digest]`` each, in order."""

    __slots__ = ("segments",)

    def __init__(self, segments: Optional[list] = None):
        self.segments: List[list] = segments if segments is not None else []

    def add(self, start: int, end: int, digest: bytes, segment: bool) -> None:
        segs = self.segments
        if segment or not segs:
            segs.append([start, end, _chain(b"", digest)])
        else:
            last = segs[-1]
            last[1] = end
            last[2] = _chain(last[2], digest)

    def state(self) -> list:
        return [(a, b, d.hex()) for a, b, d in self.segments]

    def copy(self) -> "_Digests":
        return _Digests([list(s) for s in self.segments])


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
        self.expected: Optional[list] = None  # after a restore: the snapshot's segments, checked by the skip
        self.arrived = 0  # elements delivered by the helper thread (Digested items: their digests are in marks)
        self.marks: collections.deque = collections.deque()  # (start, end, Digested) of items not yet emitted whole
        self.digests = _Digests()  # segments of the items emitted whole
        self.verifiable = True  # False after a restore from a snapshot without segments: nothing to chain onto

    def pre_start(self) -> None:
        deliver = self.get_async_callback(self._arrived)
        self.thread = threading.Thread(target=self._produce, args=(deliver,), daemon=True,
                                       name=f"atoll-{self.stage.name}")
        self.thread.start()

    # ---------------------------------------------------------------- helper thread
    def _produce(self, deliver) -> None:
        stage, credits, stopping = self.stage, self.credits, self.stopping
        it = source = None
        try:
            it = source = iter(self._factory()())
            if self.skip:
                it = _skipped(it, self.skip, stage.chunked, stage.name, self.expected)
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
            # the skip's wrapper, then the factory's iterator: a skip that failed (a replay mismatch) does not
            # close it, and its traceback would keep it (and what it reads from) alive
            for each in (it, source) if it is not source else (it,):
                close = getattr(each, "close", None)
                if close is not None:
                    try:
                        close()
                    except Exception:  # noqa: BLE001 - already ending
                        pass

    def _factory(self) -> Callable[[], Iterator[Any]]:
        """The factory this run calls (helper thread, once)."""
        return self.stage.factory

    # ---------------------------------------------------------------- island thread
    def _arrived(self, item) -> None:
        if item is _DONE:
            self.finished = True
        elif type(item) is _Failure:
            self.finished = True
            self.error = item.error
        else:
            if type(item) is Digested:
                item = self._mark(item) if self.verifiable else item.item
            self.chunks.append(item)
        if self.is_available(self.out):
            self.on_pull()
        elif self.finished and not self.chunks and self.pos >= len(self.cur):
            self._end()

    def _mark(self, d: "Digested") -> Any:
        """Note a digested item's element range (the items before it emitted whole are folded in); its item."""
        item = d.item
        if d.base is not None:  # the rest of an item a restore's skip cut: the whole item is marked
            self.digests = d.base
        start = self.arrived - d.offset
        self.arrived = end = self.arrived + (len(item) if self.stage.chunked else 1)
        marks = self.marks
        marks.append((start, end, d))
        emitted = self.emitted
        while marks and marks[0][1] <= emitted:
            a, b, done = marks.popleft()
            self.digests.add(a, b, done.digest, done.segment)
        return item

    def digest_state(self) -> list:
        """The segments of the elements emitted so far (the item being emitted: its emitted part)."""
        emitted = self.emitted
        marks = self.marks
        while marks and marks[0][1] <= emitted:
            a, b, done = marks.popleft()
            self.digests.add(a, b, done.digest, done.segment)
        if not marks or marks[0][0] >= emitted:
            return self.digests.state()
        a, _, part = marks[0]
        if part.partial is None:
            return self.digests.state()
        cut = self.digests.copy()
        cut.add(a, emitted, part.partial(emitted - a), part.segment)
        return cut.state()

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

    #: the island runs with checkpoints (told before ``pre_start``)
    checkpointed = False
    #: this run restores a snapshot (even one taken before anything was emitted)
    restored = False

    def checkpointing_enabled(self, request_checkpoint: Callable[[], None]) -> None:
        self.checkpointed = True

    def _factory(self) -> Callable[[], Iterator[Any]]:
        factory = self.stage.factory
        if self.checkpointed or self.restored:
            return factory  # digests are saved with checkpoints, or checked by this restore's skip
        undigested = getattr(factory, "undigested", None)
        return factory if undigested is None else undigested()

    def save_to_snapshot(self):
        segments = self.digest_state() if self.verifiable else None
        return {"emitted": self.emitted, "segments": segments} if segments else self.emitted

    def restore_from_snapshot(self, state) -> None:
        self.restored = True
        if isinstance(state, dict):
            self.expected = [(a, b, bytes.fromhex(d)) for a, b, d in state.get("segments") or ()] or None
            state = state["emitted"]
        self.emitted = self.skip = self.arrived = state
        if self.expected:
            self.digests = _Digests([list(s) for s in self.expected])
        elif state:
            self.verifiable = False  # an older snapshot (a bare count): later snapshots stay bare counts too


def _skipped(it: Iterator[Any], n: int, chunked: bool, name: str, expected: Optional[list] = None) -> Iterator[Any]:
    """``it`` without its first ``n`` elements (in chunked mode each item is a list of elements). With ``expected``
    (the snapshot's segments) the skipped elements' digests must match them (see the module docstring)."""
    from ..errors import SourceReplayMismatchError

    left = n
    seen = _Digests() if expected else None
    checked = 0  # segments of ``expected`` verified

    def mismatch(a: int, b: int):
        return SourceReplayMismatchError(
            f"{name}: the replay after a restore differs from the checkpointed run in elements {a}..{b - 1} (the "
            f"first {a} of the {n} elements emitted before the checkpoint are the same): the source's data changed "
            f"since the checkpoint")

    def verify(final: bool) -> None:
        nonlocal checked
        segs = seen.segments
        upto = len(segs) if final else len(segs) - 1  # the last one may still grow
        while checked < upto:
            got = segs[checked]
            if checked >= len(expected) or list(got) != list(expected[checked]):
                raise mismatch(got[0], got[1] if checked >= len(expected) else max(got[1], expected[checked][1]))
            checked += 1
        if final and checked < len(expected):
            raise mismatch(expected[checked][0], expected[checked][1])

    for item in it:
        digested = type(item) is Digested
        if left <= 0:
            yield item  # a Digested one too: the stage marks it
            continue
        d = item if digested else None
        if digested:
            item = item.item
        size = len(item) if chunked else 1
        start = n - left
        if size <= left:
            left -= size
            if seen is not None and d is not None:
                seen.add(start, start + size, d.digest, d.segment)
                verify(final=left == 0)
            continue
        rest = item[left:]
        if seen is not None:
            base = seen.copy()
            if d is not None and d.partial is not None:
                seen.add(start, start + left, d.partial(left), d.segment)
            verify(final=True)
            if d is not None:
                cut = Digested(rest, d.digest, d.partial, d.segment)
                cut.offset, cut.base = left, base
                rest = cut
        left = 0
        yield rest
    if left > 0:
        raise SourceReplayMismatchError(f"{name}: the checkpoint was taken after {n} elements, but a replay yields only "
                                        f"{n - left}: the source's data changed since")
    if seen is not None:
        verify(final=True)


class _Failure:
    __slots__ = ("error",)

    def __init__(self, error: BaseException):
        self.error = error
