"""Fetching the partitions of a Spark DataFrame into Ray one at a time, when asked.

``ray.data.from_spark`` (RayDP's ``from_spark_recoverable``) is a barrier: it returns only once every partition
has been copied into Ray. A stream wants the opposite: a partition when downstream asks for one, so that memory
in Ray stays bounded by demand. :class:`SparkPartitions` does what ``from_spark_recoverable`` does, split into
its two steps:

1. **prepare** (once, in the constructor, on the driver): RayDP's JVM helper
   ``ObjectStoreWriter.prepareRecoverableRDD`` converts the DataFrame to an RDD of Arrow record batches,
   persists it (``MEMORY_AND_DISK`` by default) and counts it. So **Spark computes the whole DataFrame up front
   and caches it, as Arrow IPC bytes, in its executors' block managers** -- that Spark work is not streamed;
   only the copy into Ray is. The call returns the RDD id, the number of partitions, the executor holding each
   one and the Arrow schema, and RayDP keeps a strong reference so Spark does not evict the cache early.
2. **fetch(i)** (any time, any order, from any Ray worker or the driver): a Ray task (``num_cpus=0``) runs
   RayDP's ``_fetch_arrow_table_from_executor``, which asks the executor actor holding partition ``i`` for its
   cached bytes, and returns them as a ``pyarrow.Table`` in the Ray object store (after rebuilding the rare
   columns Ray could not pickle efficiently, see ``_short_offsets``). The object is owned
   by whoever called ``fetch`` and has task lineage, so Ray can rebuild it if a node is lost (the executor
   recomputes a lost cache block through RayDP's driver agent).

:meth:`SparkPartitions.release` (or leaving the ``with`` block) unpersists the cache. The fetching half is a
plain, picklable :class:`PartitionFetcher`, so a stream stage running in an island actor can fetch partitions
while only the driver (which owns the Spark JVM) prepares and releases.

Private RayDP 1.6.5 APIs used: the JVM object ``org.apache.spark.sql.raydp.ObjectStoreWriter``
(``prepareRecoverableRDD``, ``releaseRecoverableRDD``, the ``RecoverableRDDInfo`` it returns) and
``raydp.spark.dataset._fetch_arrow_table_from_executor`` (its plain function, ``._function``, called inside
Atoll's own fetch task); from PySpark, ``SparkContext._jvm``,
``SparkContext._getJavaStorageLevel`` and ``DataFrame._jdf``.
"""
from __future__ import annotations

import dataclasses
import threading
from typing import List, Optional, Tuple

import pyarrow as pa

from atoll.errors import IllegalStateError
from atoll.interop.spark_types import to_arrow_schema

__all__ = ["PartitionFetcher", "SparkPartitions"]


_OFFSET_WIDTHS = (
    (pa.types.is_list, 4), (pa.types.is_map, 4), (pa.types.is_string, 4), (pa.types.is_binary, 4),
    (pa.types.is_large_list, 8), (pa.types.is_large_string, 8), (pa.types.is_large_binary, 8),
)


def _short_offsets(arr: pa.Array) -> bool:
    """Whether ``arr`` or a child has an offsets buffer shorter than ``length + 1`` entries.

    Spark's (Java) Arrow writer gives an empty *zero-length* list, map, string or binary array (for example the
    key column of an empty map) an empty offsets buffer. Arrow allows that, but Ray's optimized pickling of Arrow
    tables (``ray._private.arrow_serialization``) rebuilds offsets as ``length + 1`` values and fails on it (it
    then falls back to slower IPC pickling with a warning, or raises under pytest).
    """
    t = arr.type
    for is_type, width in _OFFSET_WIDTHS:
        if is_type(t):
            offsets = arr.buffers()[1]
            if offsets is None or offsets.size < (arr.offset + len(arr) + 1) * width:
                return True
            break
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
        return _short_offsets(arr.values)
    if pa.types.is_struct(t):
        return any(_short_offsets(arr.field(i)) for i in range(t.num_fields))
    return False


def _repair_offsets(table: pa.Table) -> pa.Table:
    """``table`` with the columns that have short offsets buffers (see :func:`_short_offsets`) rebuilt."""
    for i, column in enumerate(table.columns):
        if any(_short_offsets(chunk) for chunk in column.chunks):
            import numpy as np

            chunks = [c.take(pa.array(np.arange(len(c)))) if _short_offsets(c) else c for c in column.chunks]
            table = table.set_column(i, table.schema.field(i), pa.chunked_array(chunks, type=column.type))
    return table


def _fetch_partition(executor_actor_name: str, rdd_id: int, partition_id: int, schema_json: str,
                     driver_agent_url: str) -> pa.Table:
    """Ray task body: RayDP's fetch of one cached partition from its executor actor, then offsets repaired."""
    from raydp.spark.dataset import _fetch_arrow_table_from_executor

    table = _fetch_arrow_table_from_executor._function(executor_actor_name, rdd_id, partition_id, schema_json,
                                                       driver_agent_url)
    return _repair_offsets(table)


_fetch_remote = None


def _fetch_task():
    global _fetch_remote
    if _fetch_remote is None:
        import ray

        # max_retries=-1 as in RayDP: a lost partition object is rebuilt by re-running its fetch (lineage)
        _fetch_remote = ray.remote(max_retries=-1)(_fetch_partition)
    return _fetch_remote


@dataclasses.dataclass(frozen=True)
class PartitionFetcher:
    """What is needed to fetch the partitions of a prepared DataFrame; plain data, picklable, no JVM.

    ``schema`` is the Arrow schema of every fetched table (Spark's types as Spark writes them to Arrow, with
    time-zone-aware timestamps in the session time zone), also for a DataFrame without rows or partitions.
    """

    rdd_id: int
    schema: pa.Schema
    schema_json: str
    driver_agent_url: str
    executors: Tuple[str, ...]  # executor id holding each partition
    fetch_num_cpus: float = 0.0
    fetch_memory: float = 0.0

    @property
    def num_partitions(self) -> int:
        return len(self.executors)

    def fetch(self, i: int) -> "pa.Table":  # returns ray.ObjectRef[pa.Table]
        """Start fetching partition ``i``; return the ``ray.ObjectRef`` of its ``pyarrow.Table``.

        Partitions may be fetched in any order and more than once. An empty partition gives a table with no
        rows and the full schema. Errors (a released DataFrame, a dead executor) surface on ``ray.get``.
        """
        if isinstance(i, bool) or not isinstance(i, int):
            raise TypeError(f"fetch: partition index must be an int, got {type(i).__name__}")
        if not 0 <= i < len(self.executors):
            raise IndexError(f"fetch: partition {i} out of range (the DataFrame has {len(self.executors)})")
        options = {"num_cpus": self.fetch_num_cpus}
        if self.fetch_memory:
            options["memory"] = self.fetch_memory
        return _fetch_task().options(**options).remote(
            f"raydp-executor-{self.executors[i]}", self.rdd_id, i, self.schema_json, self.driver_agent_url)


class SparkPartitions:
    """A Spark DataFrame prepared for on-demand fetching of its partitions into Ray (see the module docstring).

    The constructor runs the Spark job that computes and caches the whole DataFrame (on the driver, where the
    DataFrame's session lives; it blocks until Spark is done). Then ``num_partitions``, ``schema`` and
    ``fetch(i) -> ray.ObjectRef[pyarrow.Table]`` are available, and :meth:`release` frees Spark's cache::

        with SparkPartitions(df) as parts:
            for i in range(parts.num_partitions):
                table = ray.get(parts.fetch(i))

    ``storage_level`` is where Spark keeps the cache (a ``pyspark.StorageLevel``, ``MEMORY_AND_DISK`` by default).
    ``fetch_num_cpus`` and ``fetch_memory`` are the Ray resources of each fetch task; by default RayDP's
    ``spark.ray.raydp_recoverable_fetch.task.resource.CPU``/``.memory`` settings, else 0 (the task only waits
    on an executor actor, and a CPU reservation could starve the executors it waits for).
    """

    def __init__(self, df, *, storage_level=None, fetch_num_cpus: Optional[float] = None,
                 fetch_memory: Optional[float] = None):
        from pyspark.sql import DataFrame
        from pyspark.storagelevel import StorageLevel

        if not isinstance(df, DataFrame):
            raise TypeError(f"SparkPartitions: df must be a pyspark DataFrame, got {type(df).__name__}")
        if storage_level is None:
            storage_level = StorageLevel.MEMORY_AND_DISK
        elif not isinstance(storage_level, StorageLevel):
            raise TypeError("SparkPartitions: storage_level must be a pyspark StorageLevel, "
                            f"got {type(storage_level).__name__}")
        spark = df.sparkSession
        sc = spark.sparkContext
        conf = sc.getConf()
        if fetch_num_cpus is None:
            fetch_num_cpus = float(conf.get("spark.ray.raydp_recoverable_fetch.task.resource.CPU", "0") or 0)
        if fetch_memory is None:
            from raydp.utils import parse_memory_size

            fetch_memory = float(parse_memory_size(
                conf.get("spark.ray.raydp_recoverable_fetch.task.resource.memory", "0") or "0"))
        if fetch_num_cpus < 0 or fetch_memory < 0:
            raise ValueError("SparkPartitions: fetch_num_cpus and fetch_memory must be >= 0")
        timezone = spark.conf.get("spark.sql.session.timeZone")
        schema = to_arrow_schema(df.schema, timezone=timezone)
        self._sc = sc
        self._lock = threading.Lock()
        self._released = False
        writer = sc._jvm.org.apache.spark.sql.raydp.ObjectStoreWriter
        from py4j.java_gateway import JavaClass

        if not isinstance(writer, JavaClass):  # py4j gives a JavaPackage for a class it cannot find
            raise IllegalStateError("SparkPartitions: the DataFrame's Spark session is not a RayDP (Spark on Ray) "
                                    "session; start one with atoll.interop.spark_session.session()")
        info = writer.prepareRecoverableRDD(df._jdf, sc._getJavaStorageLevel(storage_level))
        self._fetcher = PartitionFetcher(
            rdd_id=int(info.rddId()),
            schema=schema,
            schema_json=str(info.schemaJson()),
            driver_agent_url=str(info.driverAgentUrl()),
            executors=tuple(str(e) for e in info.locations()),
            fetch_num_cpus=float(fetch_num_cpus),
            fetch_memory=float(fetch_memory),
        )
        if int(info.numPartitions()) != len(self._fetcher.executors):  # pragma: no cover - RayDP invariant
            raise IllegalStateError(f"RayDP reported {info.numPartitions()} partitions but "
                                    f"{len(self._fetcher.executors)} locations")
        self.timezone: str = timezone

    # -- what the stream needs ---------------------------------------------------------------------------------
    @property
    def num_partitions(self) -> int:
        """How many partitions the DataFrame has (0 for some empty DataFrames)."""
        return self._fetcher.num_partitions

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema of every fetched table (see :class:`PartitionFetcher`)."""
        return self._fetcher.schema

    @property
    def rdd_id(self) -> int:
        """Spark's id of the cached Arrow RDD."""
        return self._fetcher.rdd_id

    @property
    def fetcher(self) -> PartitionFetcher:
        """The picklable fetching half, for use away from the driver (it stops working once released)."""
        self._check_open("fetcher")
        return self._fetcher

    @property
    def released(self) -> bool:
        return self._released

    def fetch(self, i: int):
        """Start fetching partition ``i``; return the ``ray.ObjectRef`` of its ``pyarrow.Table``.

        Any order, any number of times, until :meth:`release`. The ref is owned by the caller.
        """
        self._check_open("fetch")
        return self._fetcher.fetch(i)

    def fetch_all(self) -> List:
        """Refs of every partition, in order (a convenience; a stream fetches on demand instead)."""
        return [self.fetch(i) for i in range(self.num_partitions)]

    def release(self) -> None:
        """Unpersist Spark's cached copy of the DataFrame. Idempotent. Tables already fetched stay valid."""
        with self._lock:
            if self._released:
                return
            self._released = True
        if self._sc._jsc is None:  # the Spark session was stopped: its cache went with it
            return
        self._sc._jvm.org.apache.spark.sql.raydp.ObjectStoreWriter.releaseRecoverableRDD(self._fetcher.rdd_id)

    def _check_open(self, what: str) -> None:
        if self._released:
            raise IllegalStateError(f"SparkPartitions.{what}: the DataFrame's partitions were released")

    def __enter__(self) -> "SparkPartitions":
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "released" if self._released else "prepared"
        return f"SparkPartitions(rdd={self.rdd_id}, partitions={self.num_partitions}, {state})"
