"""``Sink.to_spark_stream``: a graph's output written by a Spark Structured Streaming query.

A Spark user writes a stream with ``df.writeStream.format(...).option("checkpointLocation", ...).start(path)``;
this sink runs exactly that query, with the graph as its input. The island hosting the sink stages the elements
as Parquet files in a directory of its own (:mod:`atoll.interop.spark_stream_staging`), a micro-batch per file;
the query reads that directory with Spark's file stream source (``maxFilesPerTrigger=1``, so one file per
micro-batch, in order; ``cleanSource=delete``, so Spark deletes each file once its batch is committed) and writes
to the sink the user named: a file format at ``path``, a ``table``, ``memory``/``console``/``noop``, or the
user's ``foreach_batch`` function.

**Why files:** the file source is Spark's own replayable source, so Spark's checkpoint and commit protocol apply
unchanged. **Delivery guarantee** without Atoll checkpoints (within one run of the graph): every element the sink
received is written exactly once by Spark's file and table sinks, at least once by ``foreach_batch`` (as Spark
documents for it). Elements staged when the graph fails or is killed are discarded. A failed graph is not resumed
from ``checkpoint_location`` (Atoll's sources do not replay into it): give each run a fresh location.

**With Atoll checkpoints** (``Materializer.*(checkpoint=CheckpointSettings(...))``) the guarantee holds across
failures, restores and automatic recoveries: every element is written exactly once by Spark's file and table sinks
(and reaches ``foreach_batch`` at least once, with the same ``batch_id`` when repeated, so a function that skips a
batch id it has written is exactly once). The sink commits in two phases (:mod:`atoll.interop.spark_stream_staging`):
a staged file becomes visible to Spark only once an Atoll checkpoint taken after it is complete, so Spark reads
only rows no restore replays; the staging directory is part of the sink's state, and a restored run starts the
query on it again with the same ``checkpoint_location`` (required with checkpoints; a run that restores nothing
needs one without progress, a restore the one its checkpoint was taken with), so Spark skips the files it has
processed and its own batch commit makes a batch it repeats idempotent. Rows reach Spark at the pace of the
checkpoints: a sink with ``max_pending_batches`` files waiting for release asks for a checkpoint (once
``CheckpointSettings.min_pause`` has passed), and at the end of the stream it asks for a final one; the future
completes once the query has processed every file. A graph that fails keeps its staging directory (a restore reads
it); ``staging_dir`` must then be durable and reachable by the restored run. Any retained checkpoint may be
restored, an older one too: the sink's ledger of its releases tells the restored sink which rows Spark already
has from files released after that checkpoint, and it skips them in the replay (unlike ``Sink.to_parquet``, which
writes such rows again, as Flink's two-phase-commit sinks do); this assumes a deterministic replay, as a source's
skip does.

The driver watches the query (its progress, every 0.1 s) and posts how many files Spark has committed to the
island, which stops pulling while ``max_pending_batches`` files wait and a micro-batch is gathered
(**backpressure**). When the graph completes, the query processes the rest and is stopped; when it fails or is
killed, the query is stopped at once; when the query fails (or is stopped by someone else), the graph fails with
:class:`~atoll.interop.spark_on_demand.SparkJobError` carrying Spark's message.

The staging directory must be reachable by the island's process and by Spark's executors (the same machine, or
``staging_dir`` on a shared file system).
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from ..errors import AbruptTerminationError, CheckpointError, CheckpointNotSupportedError, IllegalStateError
from .._impl.ops.base import SinkStage
from .arrow_blocks import with_shape_of
from .spark_on_demand import SparkJobError
from .spark_sink import arrow_schema_of
from .spark_stream import check_trigger
from .spark_stream_staging import StagingSink, staging_box

__all__ = ["SparkStreamSink", "SparkStreamWrite"]

log = logging.getLogger(__name__)

OP = "Sink.to_spark_stream"
#: Spark's built-in streaming sinks that write files at ``path``
FILE_FORMATS = ("parquet", "orc", "json", "csv", "text")
#: built-in sinks that need no path, and for which Spark makes a temporary checkpoint
DEBUG_FORMATS = ("memory", "console", "noop")
OUTPUT_MODES = ("append", "update")  # the query has no aggregation: "complete" does not apply
#: how often the driver reads the query's progress
POLL_SECONDS = 0.1
#: how long the driver waits for the sink's outcome after the graph ended before calling it lost
END_GRACE_SECONDS = 30.0


class SparkStreamWrite(Future):
    """``Sink.to_spark_stream``'s materialized value: a future of the number of rows the query wrote, completed
    once the graph completed, the query processed every element and was stopped; failed with the graph's error
    (or the query's, as :class:`~atoll.interop.spark_on_demand.SparkJobError`) once the query was stopped.
    :attr:`query` is the running ``StreamingQuery`` (see :meth:`wait_started`)."""

    def __init__(self):
        super().__init__()
        self.set_running_or_notify_cancel()
        self.query: Any = None
        self._started = threading.Event()

    @property
    def query_id(self) -> Optional[str]:
        """The query's ``id`` (stable across restarts from its checkpoint), or None before it started."""
        return None if self.query is None else self.query.id

    def wait_started(self, timeout: Optional[float] = None) -> Any:
        """The ``StreamingQuery`` once started (it starts with the first file when the schema is inferred);
        None if the graph ended without one. Raises ``TimeoutError`` after ``timeout`` seconds."""
        if not self._started.wait(timeout):
            raise TimeoutError(f"{OP}: the Spark query did not start within {timeout} s")
        return self.query


def _positive_int(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{OP}: {name} must be an int >= 1, got {value!r}")
    return value


def _optional_str(value: Any, name: str) -> Optional[str]:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if value is not None and not (isinstance(value, str) and value.strip()):
        raise TypeError(f"{OP}: {name} must be a non-empty string or None, got {value!r}")
    return value


class SparkStreamSink(SinkStage):
    """Writes the stream with a Spark Structured Streaming query (see the module docstring):
    :class:`SparkStreamWrite`, a future of the rows written.

    **Backpressures when** ``max_pending_batches`` micro-batches wait for Spark and the next one is gathered.
    **Completes** its future when upstream completed and the query has committed every element and stopped.
    **Cancels when** an element does not fit the schema or the query fails (the graph fails with Spark's
    message). The query is stopped however the graph ends (before the graph reports its end).

    **Checkpoints: exactly once** into Spark's file and table sinks (at least once into ``foreach_batch``, with
    stable batch ids) by two-phase commit: staged files are released to Spark when a checkpoint covering them
    completes, and a restore restarts the query on the sink's staging directory with the same
    ``checkpoint_location`` (required; see the module docstring). Rows reach Spark at checkpoint pace.
    """

    def __init__(self, spark: Any = None, *, path: Any = None, table: Optional[str] = None,
                 format: Optional[str] = None, foreach_batch: Optional[Callable[[Any, int], None]] = None,
                 checkpoint_location: Any = None, trigger: Union[None, str, Mapping[str, Any]] = None,
                 output_mode: str = "append", options: Optional[Mapping[str, Any]] = None,
                 partition_by: Optional[Sequence[str]] = None, query_name: Optional[str] = None,
                 schema: Any = None, rows_per_batch: int = 65536, max_batch_delay: float = 0.5,
                 max_pending_batches: int = 2, staging_dir: Any = None):
        super().__init__("to_spark_stream")
        self.path = _optional_str(path, "path")
        self.table = _optional_str(table, "table")
        self.query_name = _optional_str(query_name, "query_name")
        self.checkpoint_location = _optional_str(checkpoint_location, "checkpoint_location")
        self.staging_dir = _optional_str(staging_dir, "staging_dir")
        if format is not None and not (isinstance(format, str) and format.strip()):
            raise TypeError(f"{OP}: format must be a non-empty string or None, got {format!r}")
        if foreach_batch is not None and not callable(foreach_batch):
            raise TypeError(f"{OP}: foreach_batch must be a function (batch_df, batch_id), got {foreach_batch!r}")
        targets = [n for n, v in (("path", self.path), ("table", self.table), ("foreach_batch", foreach_batch))
                   if v is not None]
        if len(targets) > 1:
            raise ValueError(f"{OP}: give one of path, table and foreach_batch, got {' and '.join(targets)}")
        if foreach_batch is not None and format is not None:
            raise ValueError(f"{OP}: format {format!r} does not apply with foreach_batch (the function writes)")
        if format is None and self.path is not None:
            format = "parquet"
        if format is None and not targets:
            raise ValueError(f"{OP}: say where to write: path (with a format, parquet by default), table, "
                             f"foreach_batch, or format one of {DEBUG_FORMATS}")
        if format in DEBUG_FORMATS and (self.path or self.table):
            raise ValueError(f"{OP}: format {format!r} writes no path or table, got {targets[0]}")
        if format in FILE_FORMATS and not (self.path or self.table):
            raise ValueError(f"{OP}: format {format!r} needs a path")
        if format == "memory" and self.query_name is None:
            raise ValueError(f"{OP}: format 'memory' needs query_name (the name of the in-memory table)")
        if format is not None and format not in FILE_FORMATS + DEBUG_FORMATS:
            _check_format_exists(format, spark)
        if self.checkpoint_location is None and foreach_batch is None and format not in DEBUG_FORMATS:
            if not _default_checkpoint_root(spark):
                raise ValueError(f"{OP}: checkpoint_location is required to write {targets[0]} "
                                 f"{self.path or self.table!r} (Spark's checkpoint of the query's progress), unless "
                                 "spark.sql.streaming.checkpointLocation is set")
        if output_mode not in OUTPUT_MODES:
            raise ValueError(f"{OP}: output_mode must be one of {OUTPUT_MODES} (the query has no aggregation), "
                             f"got {output_mode!r}")
        self.trigger = check_trigger(trigger, OP)
        if set(self.trigger) & {"once", "availableNow"}:
            raise ValueError(f"{OP}: trigger {self.trigger!r} would stop the query before the graph ends; use None "
                             "or a processing-time interval such as '1 second'")
        if options is not None and not (isinstance(options, Mapping) and all(isinstance(k, str) for k in options)):
            raise TypeError(f"{OP}: options must be a dict of writer options, got {options!r}")
        if partition_by is not None and (isinstance(partition_by, str) or not all(
                isinstance(c, str) for c in partition_by)):
            raise TypeError(f"{OP}: partition_by must be a list of column names, got {partition_by!r}")
        if isinstance(max_batch_delay, bool) or not isinstance(max_batch_delay, (int, float)) or max_batch_delay <= 0:
            raise ValueError(f"{OP}: max_batch_delay must be a number of seconds > 0, got {max_batch_delay!r}")
        self.format = format
        self.foreach_batch = foreach_batch
        self.output_mode = output_mode
        self.options = {k: str(v) for k, v in (options or {}).items()}
        self.partition_by = list(partition_by) if partition_by is not None else None
        self.schema = arrow_schema_of(schema, OP)
        self.schema_given = schema
        self.rows_per_batch = _positive_int(rows_per_batch, "rows_per_batch")
        self.max_pending = _positive_int(max_pending_batches, "max_pending_batches")
        self.max_batch_delay = float(max_batch_delay)
        self.spark = spark

    def prepare_on_driver(self, ctx):
        spark = self.spark
        if spark is None:
            from .spark_session import active_session

            spark = active_session()
            if spark is None:
                raise IllegalStateError(f"{OP}: no Spark session is running; start one with "
                                        "atoll.interop.spark.session() or pass spark")
        deferred = getattr(ctx.materializer, "checkpoint", None) is not None
        if deferred and self.checkpoint_location is None:
            raise CheckpointNotSupportedError(
                f"{OP}: with checkpoints, give checkpoint_location (Spark's progress through the staged files must "
                "survive a restore together with them; a restored run passes the same one)")
        directory = tempfile.mkdtemp(prefix="atoll-to-spark-stream-", dir=self.staging_dir)
        box = staging_box(ctx.remote)
        writer = _QueryWriter(self, spark, directory, box, deferred)
        ctx.on_abort(writer.abort)
        ctx.on_end(writer.graph_ended)
        if self.schema is not None and not deferred:
            writer.start_query(self.schema_given)
        stage = StagingSink(self.schema, directory, box, self.rows_per_batch, self.max_batch_delay, self.max_pending,
                            deferred=deferred, spark_checkpoint=self.checkpoint_location)
        return with_shape_of(stage, self), writer.attach

    def create_logic_and_materialized_value(self, attributes):
        raise IllegalStateError(f"{OP} must be materialized by a graph run from the driver that holds the Spark "
                                "session (not inside a substream)")

    def __reduce__(self):
        raise TypeError(f"{OP} holds a Spark session, which cannot be pickled; run the graph from the driver")


def _default_checkpoint_root(spark: Any) -> Optional[str]:
    session = spark
    if session is None:
        from .spark_session import active_session

        session = active_session()
    if session is None:
        return None
    return session.conf.get("spark.sql.streaming.checkpointLocation", None)


def _check_format_exists(fmt: str, spark: Any) -> None:
    """Ask Spark whether a data source named ``fmt`` exists (a plugin such as ``delta`` or ``kafka``)."""
    session = spark
    if session is None:
        from .spark_session import active_session

        session = active_session()
    if session is None:
        raise ValueError(f"{OP}: format {fmt!r} is not one of Spark's built-in sinks {FILE_FORMATS + DEBUG_FORMATS} "
                         "and no Spark session is running to look it up")
    jvm = session.sparkContext._jvm
    try:
        jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            fmt, session._jsparkSession.sessionState().conf())
    except Exception as e:  # noqa: BLE001 - py4j wraps Spark's DATA_SOURCE_NOT_FOUND
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"{OP}: unknown format {fmt!r}: Spark has no data source of that name ({first})") from None


def _logged_batches(spark: Any, location: str, log_name: str) -> int:
    """How many micro-batches the query checkpointed at ``location`` has in its ``offsets`` (planned) or ``commits``
    (committed) log: the highest batch id + 1, 0 for a new location; read through Hadoop's file system API (any
    URI Spark accepts)."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    path = jvm.org.apache.hadoop.fs.Path(location.rstrip("/") + "/" + log_name)
    fs = path.getFileSystem(conf)
    if not fs.exists(path):
        return 0
    ids = [int(st.getPath().getName()) for st in fs.listStatus(path) if st.getPath().getName().isdigit()]
    return max(ids, default=-1) + 1


def _log_offset(offset: Any) -> Optional[int]:
    """The file stream source's offset (``{"logOffset": n}``, as a dict or JSON text) as ``n``."""
    if offset is None:
        return None
    if isinstance(offset, str):
        offset = json.loads(offset)
    return int(offset["logOffset"])


class _QueryWriter:
    """The driver's half: starts the query, posts its progress to the island, ends it with the graph."""

    def __init__(self, sink: SparkStreamSink, spark: Any, directory: str, box, deferred: bool = False):
        self.sink = sink
        self.spark = spark
        self.directory = directory  # made for this run; a restored sink reads its own (``read_dir``)
        self.read_dir = directory
        self.box = box
        #: with checkpoints: the query starts on the island's offer and counts the directory's files absolutely
        self.deferred = deferred
        self.floor = 0  # with checkpoints: files Spark had committed from the directory when the query started
        self.result = SparkStreamWrite()
        self.result._box_actor = box.target if box.remote else None  # for tests: the mailbox actor ends with it
        self.query = None
        self.base: Optional[int] = None  # the file source's log offset before the first staged file
        self.island: Optional[Future] = None
        self.wake = threading.Event()
        self.ended = threading.Event()  # the graph ended
        self.lock = threading.Lock()
        self.closed = False
        self.closed_event = threading.Event()  # the query is stopped and the user's future settled

    # ---------------------------------------------------------------- query
    def start_query(self, schema: Any, directory: Optional[str] = None) -> None:
        from .spark_types import to_spark_schema

        s = self.sink
        if directory is not None:
            self.read_dir = directory
        reader = (self.spark.readStream.schema(to_spark_schema(schema)).option("maxFilesPerTrigger", 1)
                  .option("cleanSource", "delete"))
        writer = reader.parquet(Path(self.read_dir).as_uri()).writeStream.outputMode(s.output_mode)
        if s.trigger:
            writer = writer.trigger(**s.trigger)
        if s.query_name:
            writer = writer.queryName(s.query_name)
        if s.checkpoint_location:
            writer = writer.option("checkpointLocation", s.checkpoint_location)
        for k, v in s.options.items():
            writer = writer.option(k, v)
        if s.partition_by:
            writer = writer.partitionBy(*s.partition_by)
        if s.foreach_batch is not None:
            query = writer.foreachBatch(s.foreach_batch).start()
        else:
            if s.format is not None:
                writer = writer.format(s.format)
            query = writer.toTable(s.table) if s.table else writer.start(s.path) if s.path else writer.start()
        self.query = query
        self.result.query = query
        self.result._started.set()

    def _start_offered(self, offer: Any) -> None:
        """With checkpoints: start the query on the directory the island offered, after checking that the
        query's checkpoint belongs to it (a run that restored nothing needs a location without progress; a
        restored one - of any retained checkpoint - goes on with the progress there, which the sink checked is
        its own location)."""
        schema, directory, _released, restored = offer
        location = self.sink.checkpoint_location
        planned = _logged_batches(self.spark, location, "offsets")
        if not restored and planned:
            raise CheckpointError(f"{OP}: checkpoint_location {location!r} holds the progress of an earlier query "
                                  f"({planned} micro-batches); with checkpoints a run that restores nothing needs a "
                                  "new location (a restored run the one its checkpoint was taken with)")
        # one file per micro-batch, from this directory only: batches committed = files committed
        self.floor = _logged_batches(self.spark, location, "commits")
        self.start_query(schema, directory)

    def _committed(self) -> int:
        """Files Spark has committed: the file source's log offset (one file per micro-batch) past its start
        (with checkpoints: since the directory's first file, across restarts of the query)."""
        progress = self.query.lastProgress
        if self.deferred:
            end = _log_offset(progress["sources"][0].get("endOffset")) if progress else None
            return max(self.floor, 0 if end is None else end + 1)
        if not progress:
            return 0
        if self.base is None:
            first = self.query.recentProgress[0]["sources"][0].get("startOffset")
            self.base = -1 if first is None else _log_offset(first)
        end = _log_offset(progress["sources"][0].get("endOffset"))
        return 0 if end is None else end - self.base

    def _query_error(self) -> SparkJobError:
        try:
            exc = self.query.exception()
        except Exception as e:  # noqa: BLE001
            exc = e
        if exc is None:
            return SparkJobError(f"{OP}: the Spark streaming query {self.query.id} was stopped before the graph ended")
        return SparkJobError(f"the Spark streaming query failed: {getattr(exc, 'desc', None) or exc}")

    # ---------------------------------------------------------------- graph events
    def attach(self, island: Future) -> SparkStreamWrite:
        """The island's future is known (``finish``): watch the query until the graph's outcome is settled."""
        self.island = island
        island.add_done_callback(lambda f: self.wake.set())
        threading.Thread(target=self._run, daemon=True, name="atoll-to-spark-stream").start()
        return self.result

    def graph_ended(self) -> None:
        """A clean-up of the graph (run before it reports its end): wake the watcher and wait until it stopped the
        query, so that a run started after the graph ended (a restore) never meets this run's query on the same
        checkpoint location."""
        self.ended.set()
        self.wake.set()
        if self.island is not None and not self.closed_event.wait(END_GRACE_SECONDS + 5.0):
            log.warning("%s: the graph ended but its Spark query %s was not stopped within %.0f s", OP,
                        None if self.query is None else self.query.id, END_GRACE_SECONDS + 5.0)

    def abort(self) -> None:
        self._close(AbruptTerminationError(f"{OP}: materializing the graph failed"))

    # ---------------------------------------------------------------- the watch
    def _run(self) -> None:
        error: Optional[BaseException] = None
        rows = 0
        try:
            rows = self._watch()
        except BaseException as e:  # noqa: BLE001 - the user's future carries it
            error = e
        self._close(error, rows)

    def _watch(self) -> int:
        island, box = self.island, self.box
        while self.query is None:  # the schema is inferred (or, with checkpoints, the island offers its directory)
            schema = box.call("take_offer" if self.deferred else "take_schema", POLL_SECONDS)
            if schema is None and island.done():
                schema = box.call("take_offer" if self.deferred else "take_schema", 0)
                if schema is None:
                    rows, files = island.result()  # raises the graph's error
                    if files:
                        raise IllegalStateError(f"{OP}: {files} files were staged but no schema was posted")
                    self.result._started.set()
                    return 0
            if schema is None:
                continue
            if self.deferred:
                self._start_offered(schema)
                continue
            offer = box.call("take_offer", 0)  # a sink restored into a run without checkpoints offers its own
            if offer is not None:
                self.deferred = True
                self._start_offered(offer)
            else:
                self.start_query(schema)
        ended_at = None
        while True:
            committed = self._committed()
            if box.call("set_committed", committed) and not self.deferred:
                # a sink restored into a run without checkpoints offers its own directory: the query started on
                # this run's (empty) one moves there
                self.query.stop()
                self.deferred = True
                self._start_offered(box.call("take_offer", 0))
                continue
            if island.done():
                rows, files = island.result()  # raises the graph's error
                if self.deferred:
                    return self._drain(rows)
                if committed >= files:
                    return rows
            if not self.query.isActive:
                raise self._query_error()
            if self.ended.is_set() and not island.done():
                ended_at = ended_at or time.monotonic()
                if time.monotonic() - ended_at > END_GRACE_SECONDS:
                    raise AbruptTerminationError(f"{OP}: the graph ended without the sink's outcome")
            self.wake.wait(POLL_SECONDS)
            self.wake.clear()

    def _drain(self, rows: int) -> int:
        """With checkpoints the sink completed once every file was released: wait until Spark processed them."""
        try:
            self.query.processAllAvailable()
        except Exception:  # noqa: BLE001 - the query failed: its own error says why
            raise self._query_error() from None
        if not self.query.isActive:
            raise self._query_error()
        self.box.call("set_committed", self._committed())
        return rows

    def _close(self, error: Optional[BaseException], rows: int = 0) -> None:
        """Stop the query, tell the island, clean up and settle the user's future; once."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
        try:
            self.box.call("close", None if error is None else str(error))
        except Exception as e:  # noqa: BLE001 - an actor already gone
            log.debug("%s: closing the mailbox: %r", OP, e)
        if self.query is not None:
            try:
                self.query.stop()
            except Exception as e:  # noqa: BLE001 - a failed query is stopped already
                log.debug("%s: stopping the query: %r", OP, e)
        if self.box.remote:
            import ray

            try:
                ray.kill(self.box.target)
            except Exception:  # noqa: BLE001
                pass
        if self.read_dir != self.directory:
            shutil.rmtree(self.directory, ignore_errors=True)  # made for this run, unused: the restored sink's read
        if error is None or not self.deferred:
            shutil.rmtree(self.read_dir, ignore_errors=True)
        else:
            log.info("%s: the graph did not complete; the staged files stay in %s for a restore", OP, self.read_dir)
        self.result._started.set()
        self.closed_event.set()
        if error is not None:
            self.result.set_exception(error)
        else:
            self.result.set_result(rows)
