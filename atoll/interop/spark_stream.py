"""``Source.from_spark_stream``: the micro-batches of a Spark Structured Streaming query fed into a graph.

When the graph is materialized (on the driver, which owns the Spark session) the streaming DataFrame is started
as a query whose sink is ``foreachBatch``. For each micro-batch, the ``foreachBatch`` function (run by Spark on
the driver) has Spark compute the batch and cache it as Arrow data in its executors
(:class:`~atoll.interop.spark_partitions.SparkPartitions`), hands the batch to the island hosting the source
through a mailbox (in-process for the local materializer, a ``num_cpus=0`` Ray actor for Ray islands) and
**blocks until the island has taken it**: the island copies the batch's partitions into Ray (RayDP's fetch, from
the executors), acknowledges, then emits the rows. The function then releases Spark's cache and returns, so
Spark commits the batch and starts the next one. At most two micro-batches are in flight: one being emitted, the
next one computed and waiting -- that is the backpressure: a slow graph slows the query's triggers down.

The query stops when the graph ends, however it ends (completion downstream, cancellation, a kill switch, a
failure): the mailbox is closed (waking a ``foreachBatch`` call that waits) and ``query.stop()`` is called. The
source completes when the query stops by itself (``trigger={"availableNow": True}`` or ``{"once": True}`` after
the data available at start) and fails with the query's exception when the query fails.
"""
from __future__ import annotations

import collections
import logging
import threading
from typing import Any, Iterator, Mapping, Optional, Union

from ..errors import IllegalStateError
from .._impl.ops.base import SourceStage
from .arrow_blocks import with_shape_of
from .background_source import BackgroundSource
from .spark_on_demand import SparkJobError, _Box
from .spark_source import FORMATS, ROWS_SLICE, _PartitionReader

__all__ = ["SparkStreamSource", "check_trigger"]

log = logging.getLogger(__name__)

_TRIGGER_KEYS = ("processingTime", "once", "availableNow")


def check_trigger(trigger: Union[None, str, Mapping[str, Any]], op: str) -> dict:
    """``trigger`` as the keyword arguments of ``DataStreamWriter.trigger`` (empty: Spark's default, a
    micro-batch as soon as the previous one is done). A string is a processing-time interval (``"1 second"``)."""
    if trigger is None:
        return {}
    if isinstance(trigger, str):
        if not trigger.strip():
            raise ValueError(f"{op}: trigger must not be an empty string")
        return {"processingTime": trigger}
    if not isinstance(trigger, Mapping):
        raise TypeError(f"{op}: trigger must be None, a processing-time string such as '1 second', or a dict "
                        f"such as {{'availableNow': True}}, got {type(trigger).__name__}")
    if len(trigger) != 1 or next(iter(trigger)) not in _TRIGGER_KEYS:
        extra = " (continuous processing cannot feed foreachBatch)" if "continuous" in trigger else ""
        raise ValueError(f"{op}: trigger must have exactly one of the keys {_TRIGGER_KEYS}, got "
                         f"{dict(trigger)!r}{extra}")
    key, value = next(iter(trigger.items()))
    if key == "processingTime" and not (isinstance(value, str) and value.strip()):
        raise ValueError(f"{op}: trigger processingTime must be a non-empty string, got {value!r}")
    if key in ("once", "availableNow") and value is not True:
        raise ValueError(f"{op}: trigger {key} must be True, got {value!r}")
    return {key: value}


class _BatchBox:
    """One micro-batch at a time from the driver to the island, and its acknowledgement back; thread-safe."""

    def __init__(self):
        self._cond = threading.Condition()
        self._items: collections.deque = collections.deque()
        self._taken = -1
        self._closed = False

    # driver side
    def offer(self, item) -> None:
        with self._cond:
            self._items.append(item)
            self._cond.notify_all()

    def wait_taken(self, batch_id: int, timeout: float) -> Optional[bool]:
        """True once batch ``batch_id`` was taken, None when closed, False when ``timeout`` passed."""
        with self._cond:
            self._cond.wait_for(lambda: self._taken >= batch_id or self._closed, timeout)
            if self._taken >= batch_id:
                return True
            return None if self._closed else False

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # island side
    def take(self, timeout: float):
        """The next item, or None when ``timeout`` passed; ``("closed",)`` once closed."""
        with self._cond:
            self._cond.wait_for(lambda: self._items or self._closed, timeout)
            if self._items:
                return self._items.popleft()
            return ("closed",) if self._closed else None

    def ack(self, batch_id: int) -> None:
        with self._cond:
            self._taken = max(self._taken, batch_id)
            self._cond.notify_all()


_remote_box = None


def _box_actor_class():
    global _remote_box
    if _remote_box is None:
        import ray

        _remote_box = ray.remote(num_cpus=0, max_concurrency=4)(_BatchBox)
    return _remote_box


class _StreamTables:
    """Picklable, run on the source's helper thread: the tables of each micro-batch, in order."""

    def __init__(self, box: _Box):
        self.box = box

    def __call__(self) -> Iterator[Any]:
        import ray

        box = self.box
        while True:
            item = box.call("take", 1.0)
            if item is None:
                continue
            kind = item[0]
            if kind == "closed" or kind == "end":
                return
            if kind == "error":
                raise SparkJobError(item[1])
            _, batch_id, fetcher = item
            refs = [fetcher.fetch(i) for i in range(fetcher.num_partitions)]
            tables = ray.get(refs)
            box.call("ack", batch_id)  # the graph has the batch: Spark may go on with the next one
            del refs
            for table in tables:
                yield table


class SparkStreamSource(SourceStage):
    """Emits the rows of each micro-batch of a Structured Streaming query, batch after batch, as dicts (``rows``),
    ``pyarrow.RecordBatch``\\ es (``arrow``) or pandas DataFrames (``pandas``); see the module docstring.

    **Emits when** downstream pulls and a micro-batch's data is at hand. **Backpressures** the query: its next
    micro-batch waits (in ``foreachBatch``) until the graph has taken the previous one. **Completes when** the
    query stops by itself (``availableNow``/``once`` triggers). **Fails when** the query or a batch's Spark job
    fails (:class:`~atoll.interop.spark_on_demand.SparkJobError` with Spark's message). **Cancels** (stops the
    query) when downstream cancels or the graph ends any other way.
    """

    def __init__(self, streaming_df: Any, trigger: Union[None, str, Mapping[str, Any]] = None,
                 as_: str = "rows", max_rows_per_batch: Optional[int] = None,
                 checkpoint_location: Optional[str] = None):
        try:
            from pyspark.sql import DataFrame
        except ImportError as e:  # pragma: no cover - pyspark is a dependency
            raise IllegalStateError("Source.from_spark_stream needs pyspark") from e
        op = "Source.from_spark_stream"
        if not isinstance(streaming_df, DataFrame):
            raise TypeError(f"{op}: streaming_df must be a pyspark.sql.DataFrame, got {type(streaming_df).__name__}")
        if not streaming_df.isStreaming:
            raise ValueError(f"{op}: streaming_df is not a streaming DataFrame (it was not made with "
                             "spark.readStream); use Source.from_spark for it")
        if as_ not in FORMATS:
            raise ValueError(f"{op}: as_ must be one of {FORMATS}, got {as_!r}")
        if max_rows_per_batch is not None and (
                not isinstance(max_rows_per_batch, int) or isinstance(max_rows_per_batch, bool)
                or max_rows_per_batch < 1):
            raise ValueError(f"{op}: max_rows_per_batch must be an int >= 1 or None, got {max_rows_per_batch!r}")
        if checkpoint_location is not None and not (isinstance(checkpoint_location, str) and checkpoint_location):
            raise TypeError(f"{op}: checkpoint_location must be a non-empty string or None, "
                            f"got {checkpoint_location!r}")
        super().__init__("from_spark_stream")
        self.df = streaming_df
        self.trigger = check_trigger(trigger, op)
        self.fmt = as_
        self.max_rows = max_rows_per_batch or (ROWS_SLICE if as_ == "rows" else 10_000)
        self.checkpoint_location = checkpoint_location

    def prepare_on_driver(self, ctx):
        query = _StreamQuery(self.df, self.trigger, self.checkpoint_location, ctx.remote)
        ctx.on_end(query.stop)
        reader = _PartitionReader(_StreamTables(query.box), self.fmt, self.max_rows, query.timezone)
        query.start()
        stage = BackgroundSource("from_spark_stream", reader, prefetch=1, chunked=self.fmt == "rows",
                                 checkpoint_hint="a Structured Streaming query's micro-batches are not replayed by "
                                                 "Atoll's checkpoints; read a replayable source instead")
        return with_shape_of(stage, self), None

    def create_logic(self, attributes):
        raise IllegalStateError("Source.from_spark_stream must be materialized by a graph run from the driver "
                                "that holds the DataFrame's Spark session (not inside a substream)")

    def __reduce__(self):
        raise TypeError("Source.from_spark_stream holds a Spark DataFrame, which cannot be pickled; run the graph "
                        "from the driver that created it")


class _StreamQuery:
    """The driver's half: the running query, its ``foreachBatch`` function and the watcher of its end."""

    def __init__(self, df, trigger: dict, checkpoint_location: Optional[str], remote: bool):
        self.df = df
        self.trigger = trigger
        self.checkpoint_location = checkpoint_location
        self.timezone = df.sparkSession.conf.get("spark.sql.session.timeZone")
        self.box = _Box(_box_actor_class().remote(), True) if remote else _Box(_BatchBox(), False)
        self.query = None
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._watcher = None

    def start(self) -> None:
        writer = self.df.writeStream.foreachBatch(self._on_batch)
        if self.trigger:
            writer = writer.trigger(**self.trigger)
        if self.checkpoint_location:
            writer = writer.option("checkpointLocation", self.checkpoint_location)
        self.query = writer.start()
        self._watcher = threading.Thread(target=self._watch, daemon=True, name="atoll-from-spark-stream-watch")
        self._watcher.start()

    def _on_batch(self, batch_df, batch_id: int) -> None:
        """Run by Spark on the driver for each micro-batch: cache it, hand it over, wait until it was taken."""
        if self._stopped.is_set():
            return
        from .spark_partitions import SparkPartitions

        if batch_df._jdf.rdd().getNumPartitions() == 0:  # nothing in it (RayDP's prepare refuses such a batch)
            return
        parts = SparkPartitions(batch_df)
        try:
            self.box.call("offer", ("batch", int(batch_id), parts.fetcher))
            while not self._stopped.is_set():
                taken = self.box.call("wait_taken", int(batch_id), 0.5)
                if taken is not False:
                    break
        except Exception as e:  # noqa: BLE001 - the mailbox went away: the graph ended
            if not self._stopped.is_set():
                raise
            log.debug("from_spark_stream: batch %d handed over as the graph ended: %r", batch_id, e)
        finally:
            parts.release()

    def _watch(self) -> None:
        """The query ended (stopped by its trigger, failed, or stopped by :meth:`stop`): tell the island."""
        error = None
        try:
            self.query.awaitTermination()
        except Exception as e:  # noqa: BLE001 - the query's failure fails the stream
            error = str(getattr(e, "desc", None) or e)
        if self._stopped.is_set():
            return
        try:
            self.box.call("offer", ("error", f"the Spark streaming query failed: {error}") if error else ("end",))
        except Exception as e:  # noqa: BLE001
            log.debug("from_spark_stream: end of query not delivered: %r", e)

    def stop(self) -> None:
        """Stop the query and the mailbox; idempotent."""
        with self._lock:
            if self._stopped.is_set():
                return
            self._stopped.set()
        try:
            self.box.call("close")
        except Exception:  # noqa: BLE001
            pass
        if self.query is not None:
            try:
                self.query.stop()
            except Exception as e:  # noqa: BLE001 - a failed query is stopped already
                log.debug("from_spark_stream: stopping the query: %r", e)
        if self._watcher is not None:
            self._watcher.join(timeout=10)
        if self.box.remote:
            import ray

            try:
                ray.kill(self.box.target)
            except Exception:  # noqa: BLE001
                pass
