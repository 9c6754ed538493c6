"""The island half of ``Sink.to_spark_stream``: elements staged as Parquet files for Spark's file stream source.

:class:`StagingSink` checks and gathers elements as ``Sink.to_spark`` does (:class:`~atoll.interop.arrow_blocks.
BlockLogic`: row dicts, Rows, Arrow, pandas; schema given or inferred from the first batch) and writes them, a
micro-batch at a time, as Parquet files into a staging directory that a Spark query reads with
``readStream.parquet(dir)`` and ``maxFilesPerTrigger=1``. A file is written under a hidden name (``.part-N...``,
which Spark's file index skips), given a modification time 1 ms after the previous file's (the file source orders
files by it) and renamed into place, so Spark sees whole files, in order, one per micro-batch.

The island and the driver (which watches the query's progress) share a mailbox (:class:`StagingBox`; in-process
for local islands, a ``num_cpus=0`` Ray actor for Ray islands): the driver posts how many files Spark has
committed, the island posts the inferred schema before its first file. The sink stops pulling while
``max_pending`` files wait for Spark and a full micro-batch is gathered: that is the backpressure.

**With checkpoints** (two-phase commit, exactly once into Spark's file and table sinks): a file is written under a
hidden name (``.pending-<n>-<token>.parquet``) and is *pending* until a checkpoint whose cut came after it
completes; ``snapshot_commit_finish`` then releases it (renamed to ``part-<n>-<token>.parquet``, where Spark sees
it), so Spark only ever reads rows a restore will not replay. The staging directory, the pending files and the
counts are the sink's state: a restored sink keeps its directory (it tells the driver, which starts the query on
it with the same ``checkpoint_location``, so Spark skips the files it has processed and reads the rest), releases
what the checkpoint prepared (idempotent: a file already released, or processed and deleted by Spark, is done) and
deletes the pending files written after the checkpoint. A sink whose ``max_pending`` files are written but not
released asks for a checkpoint; at the end of the stream it asks for one and completes once it released the last
file. ``committed`` is then Spark's absolute count of the directory's files (the driver reads it from the query's
checkpoint), comparable with the sink's count of files written, which survives restores.

**Restoring an older checkpoint** (any retained one, not the newest): the files released after its cut are Spark's
already (processed, or visible and read once the query restarts), so the restored sink must not stage their rows
again. Before it renames a release's files the sink records the last one's number and the stream's row count
through it in the directory's ledger (``.atoll-released.json``, hidden from Spark); a restore reads it, finishes a
release a crash cut short (a pending file the ledger counts is renamed, not deleted), numbers its next file after
the last one released, and skips that many rows of its restored buffers and of the replay - exact for a
deterministic replay, as a source's skip (``skip`` is saved with the state until it is spent). A prepared file of
the restored checkpoint that is gone although the ledger never counted it (deleted by the rollback of another
restore) fails the restore with ``CheckpointError`` instead of being taken as released.
"""
from __future__ import annotations

import json
import os
import re
import threading
import time
import uuid
from concurrent.futures import Future
from typing import Any, Callable, List, Optional, Tuple

import pyarrow as pa

from ..errors import CheckpointError, CheckpointMismatchError, CheckpointNotSupportedError
from .._impl.ops.base import SinkStage, complete_promise, new_promise
from ..stage.timers import TimerGraphStageLogic
from .arrow_blocks import BlockLogic
from .spark_on_demand import SparkJobError, _Box

__all__ = ["StagingBox", "StagingSink", "staging_box"]

_FLUSH = "flush"
_PENDING = re.compile(r"^\.pending-(\d+)-([0-9a-f]+)\.parquet$")
#: the sink's record of its releases (``files``: the last released file's number + 1, ``rows``: the stream's rows
#: through it, ``mtime_ns``: its modification time); Spark's file index skips names starting with "."
LEDGER = ".atoll-released.json"


def _part_number(hidden: str) -> int:
    m = _PENDING.match(hidden)
    if m is None:
        raise CheckpointError(f"Sink.to_spark_stream: {hidden!r} is not a staged file's name")
    return int(m.group(1))


def read_ledger(directory: str) -> Optional[dict]:
    """The ledger of ``directory`` (None: nothing was ever released into it by a sink that keeps one)."""
    try:
        with open(os.path.join(directory, LEDGER)) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def _write_ledger(directory: str, ledger: dict) -> None:
    tmp = os.path.join(directory, LEDGER + ".tmp")
    with open(tmp, "w") as f:
        json.dump(ledger, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(directory, LEDGER))


class StagingBox:
    """Committed-file counts from the driver to the island, the inferred schema back; thread-safe."""

    def __init__(self):
        self._cond = threading.Condition()
        self._committed = 0
        self._schema: Optional[pa.Schema] = None
        self._offer: Optional[Tuple[pa.Schema, str, int]] = None
        self._error: Optional[str] = None
        self._closed = False

    # island side
    def offer_schema(self, schema: pa.Schema) -> None:
        with self._cond:
            self._schema = schema
            self._cond.notify_all()

    def offer(self, schema: pa.Schema, directory: str, released: int, restored: bool = False) -> None:
        """With checkpoints: the query may start, reading ``directory`` (a restored sink's own) with ``schema``;
        ``released``: files the sink has released into it so far; ``restored``: the sink was restored from a
        checkpoint (False: a run that restored nothing, whose query location must hold no progress)."""
        with self._cond:
            self._offer = (schema, directory, released, restored)
            self._schema = schema
            self._cond.notify_all()

    def wait_committed(self, known: int, timeout: float) -> Tuple[int, Optional[str], bool]:
        """``(committed, error, closed)`` once more than ``known`` files were committed, the box was closed, or
        ``timeout`` passed."""
        with self._cond:
            self._cond.wait_for(lambda: self._committed > known or self._closed, timeout)
            return self._committed, self._error, self._closed

    # driver side
    def take_schema(self, timeout: float) -> Optional[pa.Schema]:
        with self._cond:
            self._cond.wait_for(lambda: self._schema is not None or self._closed, timeout)
            return self._schema

    def take_offer(self, timeout: float) -> Optional[Tuple[pa.Schema, str, int, bool]]:
        with self._cond:
            self._cond.wait_for(lambda: self._offer is not None or self._closed, timeout)
            return self._offer

    def set_committed(self, n: int) -> bool:
        """Post Spark's count; answers whether the island has offered its directory (``offer``)."""
        with self._cond:
            if n > self._committed:
                self._committed = n
                self._cond.notify_all()
            return self._offer is not None

    def close(self, error: Optional[str] = None) -> None:
        with self._cond:
            self._closed = True
            if error is not None and self._error is None:
                self._error = error
            self._cond.notify_all()


_remote_box = None


def staging_box(remote: bool) -> _Box:
    """A new mailbox: in-process, or a ``num_cpus=0`` threaded Ray actor for islands in other processes."""
    if not remote:
        return _Box(StagingBox(), False)
    global _remote_box
    if _remote_box is None:
        import ray

        _remote_box = ray.remote(num_cpus=0, max_concurrency=4)(StagingBox)
    return _Box(_remote_box.remote(), True)


class StagingSink(SinkStage):
    """Writes the stream as Parquet files into ``directory``: ``Future[(rows, files)]``, completed when upstream
    completed and every element is in a staged file.

    **Backpressures when** ``max_pending`` staged files are not yet committed by Spark and a micro-batch of
    ``rows_per_batch`` rows is gathered. **Completes** its future when upstream completed (the rest is staged
    then, even past ``max_pending``). **Cancels when** an element does not fit the schema, writing a file fails or
    the Spark query failed (:class:`~atoll.interop.spark_on_demand.SparkJobError` with Spark's message).
    """

    def __init__(self, schema: Optional[pa.Schema], directory: str, box: _Box, rows_per_batch: int,
                 max_batch_delay: float, max_pending: int, deferred: bool = False,
                 spark_checkpoint: Optional[str] = None):
        super().__init__("to_spark_stream")
        self.schema = schema
        self.directory = directory
        self.box = box
        self.rows_per_block = rows_per_batch
        self.max_batch_delay = max_batch_delay
        self.max_pending = max_pending
        #: the driver runs with checkpoints: it starts the query once the island offers its directory
        self.deferred = deferred
        #: the query's checkpoint_location (a restore must use the one its checkpoint was taken with)
        self.spark_checkpoint = spark_checkpoint

    def create_logic_and_materialized_value(self, attributes):
        promise = new_promise()
        return _StagingLogic(self, promise), promise


def _same_location(a: Optional[str], b: Optional[str]) -> bool:
    def norm(x: Optional[str]) -> Optional[str]:
        if x is None:
            return None
        if x.startswith("file:"):
            x = x[len("file:"):].lstrip("/")
            x = "/" + x
        return x.rstrip("/") if "://" in x else os.path.abspath(x)

    return norm(a) == norm(b)


class _StagingLogic(BlockLogic, TimerGraphStageLogic):
    def __init__(self, stage: StagingSink, promise: Future):
        super().__init__(stage, promise)
        self.stage = stage
        self.directory = stage.directory
        self.pending: List[pa.Table] = []  # checked tables not yet staged
        self.pending_rows = 0
        self.staged = 0  # files written (with checkpoints: released or prepared, across restores)
        self.rows_staged = 0
        self.committed = 0  # files Spark has committed (posted by the driver)
        self.due = False  # the batch delay passed while no file could be staged
        self.waiting = False  # a pull is owed once there is room
        self.schema_sent = False
        self.last_mtime_ns = 0
        self.stopping = threading.Event()
        # two-phase commit (with checkpoints, or restored from one)
        self.checkpointing = False
        self.request_checkpoint: Optional[Callable[..., None]] = None
        self.restored: Optional[dict] = None
        self.two_phase = False
        #: (hidden, visible name, the stream's rows through the file) written, not released
        self.prepared: List[tuple] = []
        self.released = 0  # files released to Spark
        #: the directory's ledger as this sink knows it (two-phase; see the module docstring), and whether it holds
        #: every release ever made into the directory (False: restored into a directory of a run that kept none)
        self.ledger = {"files": 0, "rows": 0, "mtime_ns": 0}
        self.ledger_complete = True
        self.skip = 0  # rows of the stream to drop: Spark has them from files released after the restored cut
        self.ended = False  # upstream finished: waiting for the release of the last files
        self.requested = False  # a checkpoint was asked for since the last release
        self.requested_final = False  # ... a final one (the stream had ended)
        self.started = False

    # ---------------------------------------------------------------- checkpoint hooks
    def checkpointing_enabled(self, request_checkpoint: Callable[..., None]) -> None:
        self.checkpointing = True
        self.request_checkpoint = request_checkpoint

    def save_to_snapshot(self) -> Any:
        return {"count": self.count, "schema": self.schema, "rows": list(self.rows), "rows_base": self.rows_base,
                "pending": list(self.pending), "directory": self.directory,
                "spark_checkpoint": self.stage.spark_checkpoint, "staged": self.staged,
                "rows_staged": self.rows_staged, "prepared": list(self.prepared), "released": self.released,
                "last_mtime_ns": self.last_mtime_ns, "ended": self.ended, "skip": self.skip}

    def restore_from_snapshot(self, state: Any) -> None:
        self.restored = state
        self.two_phase = True
        self.count, self.schema, self.rows_base = state["count"], state["schema"], state["rows_base"]
        self.rows, self.pending = list(state["rows"]), list(state["pending"])
        self.pending_rows = sum(t.num_rows for t in self.pending)
        self.directory = state["directory"]  # where the checkpointed files are, whatever this run was given
        self.staged, self.rows_staged = state["staged"], state["rows_staged"]
        self.prepared = [tuple(p) for p in state["prepared"]]
        self.released, self.last_mtime_ns, self.ended = state["released"], state["last_mtime_ns"], state["ended"]
        self.skip = state.get("skip", 0)
        ledger = read_ledger(self.directory)
        self.ledger_complete = ledger is not None
        if ledger is not None:
            self.ledger = ledger

    def snapshot_commit_prepare(self, checkpoint_id: int) -> Any:
        if not self.two_phase:
            return None
        self.due = True  # the epoch ends: what is gathered becomes a file now if Spark has room for it
        self._try_stage()
        return list(self.prepared) or None

    def snapshot_commit_finish(self, checkpoint_id: int, prepared: Any, success: bool) -> None:
        if not success or not prepared:
            return
        self._release(prepared)
        self.requested = self.requested_final = False
        self._complete_if_released()

    def rollback_uncommitted(self, restored_checkpoint_id: Optional[int]) -> None:
        """Delete the pending files the failed attempt wrote after the checkpoint (never seen by Spark) - apart from
        those a release the ledger counts had not renamed yet, which it renames - and, if files were released after
        the checkpoint's cut, go on after them (``_catch_up``)."""
        keep = {p[0] for p in self.prepared}
        try:
            names = sorted(os.listdir(self.directory))
        except FileNotFoundError:
            return
        for name in names:
            m = _PENDING.match(name)
            if m is None or name in keep:
                continue
            if int(m.group(1)) < self.ledger["files"]:  # released (the ledger is written first): finish the rename
                self._rename_released(name, f"part-{m.group(1)}-{m.group(2)}.parquet")
                continue
            try:
                os.remove(os.path.join(self.directory, name))
            except FileNotFoundError:
                pass
        if self.restored is not None:
            self._catch_up()

    def _catch_up(self) -> None:
        """A restored checkpoint older than the last release: Spark has the rows of the files released after its
        cut (or reads them once the query restarts). Number the next file after the last one released, and skip
        those rows: first in the restored buffers (oldest first), the rest in the replay (``_put``)."""
        files, rows = self.ledger["files"], self.ledger["rows"]
        if files <= self.staged:
            return
        self.skip += rows - self.rows_staged
        self.staged, self.rows_staged = files, rows
        self.released = max(self.released, files)
        self.last_mtime_ns = max(self.last_mtime_ns, self.ledger.get("mtime_ns", 0))
        n = self.skip
        while n and self.pending:
            t = self.pending[0]
            if t.num_rows <= n:
                self.pending.pop(0)
                n -= t.num_rows
                self.pending_rows -= t.num_rows
            else:
                self.pending[0] = t.slice(n)
                self.pending_rows -= n
                n = 0
        k = min(n, len(self.rows))  # one row per gathered element (batches went to ``pending``)
        if k:
            del self.rows[:k]
            self.rows_base += k
            n -= k
        self.skip = n

    def _next_mtime(self) -> int:
        """Spark's file source orders files by modification time (milliseconds): each one strictly later."""
        mtime = max(time.time_ns() // 1_000_000 * 1_000_000, self.last_mtime_ns + 1_000_000)
        self.last_mtime_ns = mtime
        return mtime

    def _rename_released(self, hidden: str, visible: str, mtime: Optional[int] = None) -> None:
        src = os.path.join(self.directory, hidden)
        mtime = self._next_mtime() if mtime is None else mtime
        os.utime(src, ns=(mtime, mtime))
        os.replace(src, os.path.join(self.directory, visible))

    def _release(self, prepared: List[tuple]) -> None:
        """Phase 2: make each prepared file visible to Spark, in order, after recording the release in the ledger
        (idempotent: a file gone that the ledger counts was released before, and maybe processed and deleted by
        Spark since)."""
        mine = set(self.prepared)
        due = [tuple(p) for p in prepared if tuple(p) in mine]  # others: released by an earlier commit
        if not due:
            return
        ledger = dict(self.ledger)
        mtimes = {}
        for part in due:
            number = _part_number(part[0])
            if os.path.exists(os.path.join(self.directory, part[0])):
                mtimes[part] = self._next_mtime()
            elif self.ledger_complete and number >= ledger["files"]:
                raise CheckpointError(
                    f"Sink.to_spark_stream: the staged file {part[0]} of the restored checkpoint is gone from "
                    f"{self.directory} but was never released to Spark (the rollback of another restore deletes "
                    "what it did not restore): its rows would be lost")
            if len(part) > 2 and number >= ledger["files"]:  # (a pair: prepared by a run that kept no ledger)
                ledger["files"], ledger["rows"] = number + 1, part[2]
        ledger["mtime_ns"] = max(self.last_mtime_ns, ledger.get("mtime_ns", 0))
        if ledger != self.ledger:
            _write_ledger(self.directory, ledger)  # first: a release the renames did not finish is still counted
            self.ledger = ledger
        for part in due:
            if part in mtimes:
                self._rename_released(part[0], part[1], mtimes[part])
            self.prepared.remove(part)
            self.released += 1

    def _complete_if_released(self) -> bool:
        if self.two_phase and self.ended and self.started and not self.prepared and not self._gathered() \
                and not self._finalized:
            complete_promise(self.promise, (self.rows_staged, self.staged))
            self.complete_stage()
            return True
        return False

    # ---------------------------------------------------------------- island thread
    def pre_start(self):
        self.started = True
        if self.restored is not None:
            if not _same_location(self.restored["spark_checkpoint"], self.stage.spark_checkpoint):
                self._fail(CheckpointMismatchError(
                    f"Sink.to_spark_stream: the checkpoint was taken with checkpoint_location "
                    f"{self.restored['spark_checkpoint']!r}, this run gives {self.stage.spark_checkpoint!r}; restore "
                    "with the same one (Spark's progress through the staged files is kept there)"))
                return
        elif self.checkpointing:
            self.two_phase = True
        if self.checkpointing and not self.stage.deferred:
            self._fail(CheckpointNotSupportedError("Sink.to_spark_stream: the island checkpoints but the driver "
                                                   "prepared the sink without checkpoints"))
            return
        committed = self.get_async_callback(self._on_committed)
        threading.Thread(target=self._watch, args=(committed,), daemon=True,
                         name="atoll-to-spark-stream-watch").start()
        if self.two_phase:  # the driver starts (or restarts) the query on this sink's directory
            if self.schema is not None:
                self._send_schema()
        else:
            self.schema_sent = self.stage.schema is not None  # the driver started the query with it
        if self._gathered():
            self.schedule_once(_FLUSH, self.stage.max_batch_delay)
        super().pre_start()

    def on_push(self):
        self._accepted([self.grab(self.in_)])

    def _on_push_chunk(self):
        self._accepted(self.grab(self.in_))

    def _accepted(self, elems) -> None:
        try:
            for elem in elems:
                self.accept(elem)
            if self._gathered() >= self.limit:
                self._try_stage()
            if self._gathered() and not self.is_timer_active(_FLUSH):
                self.schedule_once(_FLUSH, self.stage.max_batch_delay)
        except Exception as e:  # noqa: BLE001 - the stream fails with it
            self._fail(e)
            return
        if self._gathered() < self.limit:
            self._pull()
        else:
            self.waiting = True

    def _pull(self) -> None:
        """Ask for at most what fills the micro-batch being gathered (a chunk of that size in chunk form)."""
        self.waiting = False
        self._in_conns[0].demand = max(1, min(self.chunk_size, self.limit - self._gathered()))
        self.pull(self.in_)

    def on_timer(self, key: Any) -> None:
        self.due = True
        try:
            self._try_stage()
        except Exception as e:  # noqa: BLE001
            self._fail(e)

    def _on_committed(self, item: Any) -> None:
        if isinstance(item, BaseException):
            self._fail(item)
            return
        self.committed = max(self.committed, item)
        try:
            if self.due or self._gathered() >= self.limit:
                self._try_stage()
        except Exception as e:  # noqa: BLE001
            self._fail(e)
            return
        if self.waiting and self._gathered() < self.limit and not self.is_closed(self.in_):
            self._pull()

    def on_upstream_finish(self):
        try:
            self._try_stage(force=True)
        except Exception as e:  # noqa: BLE001
            self._fail(e)
            return
        if self.two_phase:
            self.ended = True
            if not self._complete_if_released():
                self.set_keep_going(True)  # alive, its inlet closed, until the last file is released
                self._ask_checkpoint()
            return
        complete_promise(self.promise, (self.rows_staged, self.staged))
        self.complete_stage()

    def _ask_checkpoint(self) -> None:
        """Ask for a checkpoint that releases the staged files, once until the next release: after the end of the
        stream a final one (taken at once), before it one that waits for ``min_pause`` (asked again as final when
        the stream ends meanwhile)."""
        final = self.ended
        if self.request_checkpoint is None or (self.requested and (self.requested_final or not final)):
            return
        self.requested, self.requested_final = True, final
        self.request_checkpoint(final=final)

    def post_stop(self):
        self.stopping.set()
        super().post_stop()

    # ---------------------------------------------------------------- staging
    def _put(self, table: pa.Table) -> None:  # BlockLogic hands over each checked table here
        if self.skip and table.num_rows:  # rows Spark has from files released after the restored cut
            k = min(self.skip, table.num_rows)
            self.skip -= k
            table = table.slice(k)
        if table.num_rows:
            self.pending.append(table)
            self.pending_rows += table.num_rows

    def _gathered(self) -> int:
        return self.pending_rows + len(self.rows)

    def _try_stage(self, force: bool = False) -> None:
        """Stage what is gathered, as files of at most ``rows_per_batch`` rows, while Spark has room for them
        (always when ``force``): full micro-batches, or everything once the batch delay passed."""
        self._flush_rows()
        while self.pending_rows and (force or self.staged - self.committed < self.stage.max_pending):
            if not (force or self.due or self.pending_rows >= self.limit):
                break
            self._write(self._take(self.limit))
        if not self.pending_rows:
            self.due = False
            self.cancel_timer(_FLUSH)
        elif self.prepared and self.staged - self.committed >= self.stage.max_pending:
            self._ask_checkpoint()  # Spark waits for files nobody released: a checkpoint releases them

    def _take(self, n: int) -> pa.Table:
        """The first ``n`` pending rows (or all of them) as one table."""
        out, rows = [], 0
        while self.pending and rows < n:
            t = self.pending[0]
            if rows + t.num_rows <= n:
                out.append(self.pending.pop(0))
                rows += t.num_rows
            else:
                out.append(t.slice(0, n - rows))
                self.pending[0] = t.slice(n - rows)
                rows = n
        self.pending_rows -= rows
        return out[0] if len(out) == 1 else pa.concat_tables(out)

    def _send_schema(self) -> None:
        if self.two_phase:  # the driver starts the query on this sink's directory
            self.stage.box.call("offer", self.schema, self.directory, self.released, self.restored is not None)
        else:
            self.stage.box.call("offer_schema", self.schema)  # the driver starts the query with it
        self.schema_sent = True

    def _write(self, table: pa.Table) -> None:
        import pyarrow.parquet as pq

        if not self.schema_sent:
            self._send_schema()
        if self.two_phase:  # pending until a checkpoint covering it completes
            token = uuid.uuid4().hex[:8]
            hidden = f".pending-{self.staged:08d}-{token}.parquet"
            pq.write_table(table, os.path.join(self.directory, hidden), coerce_timestamps="us")
            self.rows_staged += table.num_rows
            self.prepared.append((hidden, f"part-{self.staged:08d}-{token}.parquet", self.rows_staged))
            self.staged += 1
            if not self.checkpointing:  # restored into a run without checkpoints: nothing will commit it later
                self._release(self.prepared[-1:])
            return
        name = f"part-{self.staged:08d}.parquet"
        hidden = os.path.join(self.stage.directory, f".{name}.tmp")
        pq.write_table(table, hidden, coerce_timestamps="us")
        mtime = self._next_mtime()
        os.utime(hidden, ns=(mtime, mtime))
        os.replace(hidden, os.path.join(self.stage.directory, name))
        self.staged += 1
        self.rows_staged += table.num_rows

    # ---------------------------------------------------------------- helper thread
    def _watch(self, committed) -> None:
        """Waits on the mailbox for Spark's progress (and the query's failure) and reports it to the stage."""
        box, known = self.stage.box, 0
        while not self.stopping.is_set():
            try:
                n, error, closed = box.call("wait_committed", known, 1.0)
            except Exception as e:  # noqa: BLE001 - the mailbox is gone: the driver ended the query
                if not self.stopping.is_set():
                    committed.invoke(SparkJobError(f"to_spark_stream: lost the Spark query's driver: {e!r}"))
                return
            if error is not None:
                committed.invoke(SparkJobError(error))
                return
            if n > known:
                known = n
                committed.invoke(n)
            if closed:
                return
