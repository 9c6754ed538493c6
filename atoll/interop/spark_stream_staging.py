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
"""
from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future
from typing import Any, List, Optional, Tuple

import pyarrow as pa

from .._impl.ops.base import SinkStage, complete_promise, fail_promise, new_promise
from ..stage.timers import TimerGraphStageLogic
from .arrow_blocks import BlockLogic
from .spark_on_demand import SparkJobError, _Box

__all__ = ["StagingBox", "StagingSink", "staging_box"]

_FLUSH = "flush"


class StagingBox:
    """Committed-file counts from the driver to the island, the inferred schema back; thread-safe."""

    def __init__(self):
        self._cond = threading.Condition()
        self._committed = 0
        self._schema: Optional[pa.Schema] = None
        self._error: Optional[str] = None
        self._closed = False

    # island side
    def offer_schema(self, schema: pa.Schema) -> None:
        with self._cond:
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

    def set_committed(self, n: int) -> None:
        with self._cond:
            if n > self._committed:
                self._committed = n
                self._cond.notify_all()

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
                 max_batch_delay: float, max_pending: int):
        super().__init__("to_spark_stream")
        self.schema = schema
        self.directory = directory
        self.box = box
        self.rows_per_block = rows_per_batch
        self.max_batch_delay = max_batch_delay
        self.max_pending = max_pending

    def create_logic_and_materialized_value(self, attributes):
        promise = new_promise()
        return _StagingLogic(self, promise), promise


class _StagingLogic(BlockLogic, TimerGraphStageLogic):
    checkpoint_hint = ("the files staged for the Spark query are not part of Atoll's checkpoints; write with "
                       "Sink.to_parquet or Sink.to_spark in a checkpointed graph")

    def __init__(self, stage: StagingSink, promise: Future):
        super().__init__(stage, promise)
        self.stage = stage
        self.pending: List[pa.Table] = []  # checked tables not yet staged
        self.pending_rows = 0
        self.staged = 0  # files written
        self.rows_staged = 0
        self.committed = 0  # files Spark has committed (posted by the driver)
        self.due = False  # the batch delay passed while no file could be staged
        self.waiting = False  # a pull is owed once there is room
        self.schema_sent = stage.schema is not None
        self.last_mtime_ns = 0
        self.stopping = threading.Event()

    # ---------------------------------------------------------------- island thread
    def pre_start(self):
        committed = self.get_async_callback(self._on_committed)
        threading.Thread(target=self._watch, args=(committed,), daemon=True,
                         name="atoll-to-spark-stream-watch").start()
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
        complete_promise(self.promise, (self.rows_staged, self.staged))
        self.complete_stage()

    def _fail(self, e: BaseException) -> None:
        fail_promise(self.promise, e)
        self.fail_stage(e)

    def post_stop(self):
        self.stopping.set()
        super().post_stop()

    # ---------------------------------------------------------------- staging
    def _put(self, table: pa.Table) -> None:  # BlockLogic hands over each checked table here
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

    def _write(self, table: pa.Table) -> None:
        import pyarrow.parquet as pq

        if not self.schema_sent:
            self.stage.box.call("offer_schema", self.schema)  # the driver starts the query with it
            self.schema_sent = True
        name = f"part-{self.staged:08d}.parquet"
        hidden = os.path.join(self.stage.directory, f".{name}.tmp")
        pq.write_table(table, hidden, coerce_timestamps="us")
        # Spark's file source orders files by modification time (milliseconds): make each one strictly later
        mtime = max(time.time_ns() // 1_000_000 * 1_000_000, self.last_mtime_ns + 1_000_000)
        os.utime(hidden, ns=(mtime, mtime))
        self.last_mtime_ns = mtime
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
