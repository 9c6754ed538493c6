"""Partitions of a Spark DataFrame computed by Spark only when a stream's demand reaches them.

``Source.from_spark(df)`` (without ``cache=True``) reads a DataFrame through this module. Nothing is computed when
the graph starts; for each partition ``i`` that demand reaches:

1. **the driver runs a Spark job for partition ``i`` only**: the DataFrame's Arrow-batch RDD
   (``Dataset.toArrowBatchRdd``, the RDD RayDP's recoverable path uses, marked ``MEMORY_AND_DISK``) wrapped in a
   ``PartitionPruningRDD`` that keeps partition ``i`` alone (its filter is a Scala ``Set(i)``, a serializable
   ``Int => Boolean`` py4j can build), and ``count()`` on it: one Spark task, which computes partition ``i`` on an
   executor and leaves its Arrow IPC batches in that executor's block manager. The driver's heap sees the count.
2. **the executor writes the Arrow data into Ray**: the hub actor (below; with a local mailbox, or fetch
   resources configured, a Ray task, as RayDP's ``_fetch_arrow_table_from_executor`` in
   :mod:`~atoll.interop.spark_partitions`) calls the executor actor's ``getRDDPartition`` (RayDP's executors
   are Ray actors): the executor returns the block's bytes as a Ray object, the hub hands them on as they came (a
   ``pyarrow.Buffer`` owned by the stream's island, which reads it into a table without a copy). (A task needed a
   worker process, on a small machine often a new one, ~0.5-1.5 s for each partition on the stream's path: Ray
   reaps idle workers after a second.)
3. once the island has the table, the driver **removes the block** from the executor, so Spark holds at most
   the partitions in flight.

How demand reaches the driver: the island reading the partitions (possibly a Ray actor in another process) and
the driver (the only process with the Spark JVM) talk through a mailbox: an in-process object for the local
materializer, a small Ray actor (``num_cpus=0``, threaded) for Ray islands. The island asks for partitions
``0 .. prefetch_partitions-1`` when it starts and for partition ``i + prefetch_partitions`` once it has emitted
partition ``i``; a driver thread takes the requests and runs each partition's job on a pool of
``prefetch_partitions`` threads (jobs of one source run concurrently, in the job group :attr:`job_group`). The
jobs of the first ``prefetch_partitions`` partitions, which the island asks for whatever its demand, start when
the graph is materialized instead, one after the other, while the island starts (the first element arrives
sooner); each partition's job runs once. With Ray islands even the Spark side's preparation (the Arrow RDD, which
a new session's driver JVM took ~0.6 s to plan) runs in the background while the island actors start: their
plans are sent once it is done (``DriverContext.before_plans_sent``; its error fails the materialization, as
before). In the demo (cold, 2 cores) the stream's first element came ~0.3 s sooner (4.21 -> 3.89 s, three runs
each), not the 0.8 s the actors used to wait: the JVM and the starting worker processes share the cores. With
Ray islands the mailboxes of all of a driver's sources live in one long-lived actor (:class:`MailboxHub`, started
with the Spark session), so a graph run starts no actor of its own. So at most ``prefetch_partitions + 1``
partitions have been computed beyond what downstream has taken (the one being emitted and those asked ahead), and
Ray holds at most two of them plus the channel buffers.

Measured (tests/interop/test_spark_on_demand.py): with one element requested from a DataFrame of 64 partitions,
Spark ran tasks for 3 partitions (3 single-task jobs). A DataFrame of 4x the object store's size (400 MiB through
a 100 MiB store) streams through with every row and the store holds only what is in flight: the next partition's
table, the executor's replies the hub is copying (each released by reference counting as soon as it is copied: Ray
hands the executor's ``byte[]`` over as raw bytes, copied into the hub) and the batches in the channel to the next
island (bounded in bytes by the channel's store budget, ``Materializer.ray(channel_store_bytes=...)``) - 4-5 MiB
of primary copies at the peak against a bound of 28.6 MiB (derived in the test), nothing spilled, with a consumer as
fast as Spark or slower. (Until the channel codec's msgpack hooks stopped referring to themselves, a reference cycle
kept every batch sent across islands referenced until Python's cyclic garbage collector ran: the store filled and Ray
spilled 868-936 MiB for that 404 MiB DataFrame. The executor's reply, blamed for it before, never stayed.) A batch
crossing islands is a slice of its partition's table; the codec puts only its rows into the store (Arrow pickles a
slice with its parent's buffers whole, which made each quarter-partition batch a partition's size).

What is not streamed: a DataFrame whose plan has a shuffle runs the shuffle's map side whole with the first
partition's job (Spark's stage boundary; later jobs reuse the shuffle files). A partition's job that fails fails
the stream with Spark's message (:class:`SparkJobError`); the jobs still running are cancelled when the graph
ends. Recovery: a fetched table lost with its node cannot be rebuilt from the executor (the block is gone); use
``cache=True`` (:mod:`~atoll.interop.spark_partitions`) for that and for DataFrames expensive to recompute.

Private APIs used: PySpark's ``DataFrame._jdf``, ``SparkContext._jvm``/``_jsc``/``_getJavaStorageLevel``; Spark's
``Dataset.toArrowBatchRdd`` (``private[sql]``, public in bytecode), ``PartitionPruningRDD.create``,
``BlockManagerMaster.getLocations``/``removeBlock``; RayDP 1.6.5's ``ObjectStoreWriter.toArrowSchema``,
``ObjectStoreWriter.driverAgentUrl`` and the executor actors' ``getRDDPartition`` (through RayDP's fetch task);
Ray's ``global_worker.set_load_code_from_local`` (what RayDP's ``_enable_load_code_from_local`` calls).
"""
from __future__ import annotations

import collections
import concurrent.futures
import itertools
import logging
import threading
import uuid
from typing import Any, Iterator, List, Optional, Tuple

import pyarrow as pa

from atoll.errors import IllegalStateError, StreamError

__all__ = ["SparkJobError", "OnDemandPartitions", "PartitionClient"]

log = logging.getLogger(__name__)

#: prefix of the Spark job group of each on-demand source (the rest is unique per materialization)
JOB_GROUP_PREFIX = "atoll-from-spark-"


class SparkJobError(StreamError):
    """A Spark job that computed a partition for ``Source.from_spark`` failed; the message is Spark's."""


class _Closed(Exception):
    pass


class Mailbox:
    """Requests from the island to the driver and answers back; thread-safe. Used in-process (local islands) or
    as a Ray actor (Ray islands)."""

    def __init__(self):
        self._cond = threading.Condition()
        self._requests: collections.deque = collections.deque()
        self._answers: dict = {}
        self._closed = False

    # island side
    def want(self, i: int) -> None:
        with self._cond:
            self._requests.append(("want", i))
            self._cond.notify_all()

    def done(self, i: int) -> None:
        with self._cond:
            self._requests.append(("done", i))
            self._cond.notify_all()

    def answer(self, i: int, timeout: Optional[float] = None):
        """``(executor_id, error)`` for partition ``i``; ``None`` if not there within ``timeout`` (0: poll)."""
        with self._cond:
            if not self._cond.wait_for(lambda: i in self._answers or self._closed, timeout):
                return None
            if i in self._answers:
                return self._answers.pop(i)
            return (None, "closed")

    # driver side
    def requests(self, timeout: float) -> List[Tuple[str, int]]:
        with self._cond:
            self._cond.wait_for(lambda: self._requests or self._closed, timeout)
            out = list(self._requests)
            self._requests.clear()
            return out

    def reply(self, i: int, executor: Optional[str], error: Optional[str]) -> None:
        with self._cond:
            self._answers[i] = (executor, error)
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class MailboxHub:
    """The mailboxes of a driver's on-demand sources, one per source key, in one long-lived Ray actor (``num_cpus=0``,
    threaded): a source's mailbox is opened when it is prepared and closed when its graph ends, so running a graph
    starts no actor (a new one took 0.6-2 s to start, on the path to the first element, and ~0.5 s of CPU). A call
    for a key not open (closed, or never opened) finds it closed."""

    def __init__(self):
        self._lock = threading.Lock()
        self._boxes: dict = {}

    def _box(self, key: str) -> Optional[Mailbox]:
        with self._lock:
            return self._boxes.get(key)

    def open(self, key: str) -> None:
        with self._lock:
            self._boxes.setdefault(key, Mailbox())

    def close(self, key: str) -> None:
        with self._lock:
            box = self._boxes.pop(key, None)
        if box is not None:
            box.close()  # wakes the calls waiting on it

    def want(self, key: str, i: int) -> None:
        box = self._box(key)
        if box is not None:
            box.want(i)

    def done(self, key: str, i: int) -> None:
        box = self._box(key)
        if box is not None:
            box.done(i)

    def answer(self, key: str, i: int, timeout: Optional[float] = None):
        box = self._box(key)
        return (None, "closed") if box is None else box.answer(i, timeout)

    def requests(self, key: str, timeout: float) -> List[Tuple[str, int]]:
        box = self._box(key)
        return [] if box is None else box.requests(timeout)

    def reply(self, key: str, i: int, executor: Optional[str], error: Optional[str]) -> None:
        box = self._box(key)
        if box is not None:
            box.reply(i, executor, error)

    def open_keys(self) -> int:
        with self._lock:
            return len(self._boxes)

    def fetch(self, executor_actor_name: str, rdd_id: int, partition_id: int, schema_json: str,
              driver_agent_url: str) -> pa.Buffer:
        """A computed partition's Arrow IPC stream (``pa.Buffer``, see :func:`_fetch_from_executor`), read from the
        executor actor holding it (the caller owns the returned object). Done here rather than in a Ray task: the
        hub's process is up for the whole Spark session, where a task needed a worker process, often a new one
        (~0.5-1.5 s of start and CPU per partition on a small machine, on the stream's path: Ray reaps idle workers
        after a second)."""
        return _fetch_from_executor(executor_actor_name, rdd_id, partition_id, schema_json, driver_agent_url)

    def encode(self, start: int, schema: pa.Schema, *tables: Any) -> tuple:
        """``to_spark``'s encoding of a group of tables for Spark's reader
        (:func:`atoll.interop.spark_frames.encode_group`), here for the same reason as :meth:`fetch`: an
        encoding task needed a worker process (0.5-1 s to start one, when the stream had ended)."""
        from .spark_frames import encode_group

        return encode_group(start, schema, *tables)


#: threads of the hub actor: each open source holds at most two in a waiting call at a time (the island's
#: ``answer``, bounded by ``ANSWER_WAIT_S``, and the driver's ``requests``, bounded by 0.5 s)
HUB_CONCURRENCY = 64
#: the longest an island's ``answer`` call waits in the hub before it asks again (no hub thread is held for long)
ANSWER_WAIT_S = 2.0

_hub_lock = threading.Lock()
_hub: Optional[Tuple[Any, Any]] = None  # (the Ray cluster and job it was made in, the actor handle)


def _hub_actor(renew: bool = False) -> Any:
    """This driver's :class:`MailboxHub` actor, created on first use (and again in a new Ray session, or with
    ``renew`` when the previous one died)."""
    global _hub
    import ray

    ctx = ray.get_runtime_context()
    session = (ctx.gcs_address, ctx.get_job_id())
    with _hub_lock:
        if _hub is None or _hub[0] != session or renew:
            actor = ray.remote(num_cpus=0, max_concurrency=HUB_CONCURRENCY)(MailboxHub).options(name=None).remote()
            # an actor's first call costs it ~0.1 s more than the next ones (measured on the hub, whatever the
            # method): paid now, while the actor starts, instead of by the first source's ``open`` in ``run()``
            actor.open_keys.remote()
            _hub = (session, actor)
            from .spark_session import on_stop

            on_stop(stop_hub)
        return _hub[1]


def running_hub() -> Optional[Any]:
    """This driver's hub actor if it has one in the current Ray session (started with the Spark session), else
    None; never creates one."""
    import ray

    hub = _hub
    if hub is None or not ray.is_initialized():
        return None
    ctx = ray.get_runtime_context()
    return hub[1] if hub[0] == (ctx.gcs_address, ctx.get_job_id()) else None


def start_hub() -> None:
    """Create the hub actor now if Ray is running (it then starts while other things do, e.g. the Spark session)."""
    import ray

    if ray.is_initialized():
        _hub_actor()


def stop_hub() -> None:
    """Kill this driver's hub actor if it has one (called when the Spark session stops: the hub serves the
    session's sources, so it ends with it; the next ``from_spark`` run creates a new one)."""
    global _hub
    with _hub_lock:
        hub, _hub = _hub, None
    if hub is None:
        return
    import ray

    if ray.is_initialized():
        try:
            ray.kill(hub[1], no_restart=True)
        except Exception:  # noqa: BLE001 - already gone with an earlier Ray session
            pass


class _Box:
    """The same calls on a local :class:`Mailbox` or a Ray actor handle of one (or, with ``key``, on that key's
    mailbox in a :class:`MailboxHub` actor)."""

    def __init__(self, target, remote: bool, key: Optional[str] = None):
        self.target = target
        self.remote = remote
        self.key = key

    def call(self, name: str, *args, wait: bool = True):
        if not self.remote:
            return getattr(self.target, name)(*args)
        import ray

        if self.key is not None:
            args = (self.key,) + args
        ref = getattr(self.target, name).remote(*args)
        return ray.get(ref) if wait else None

    def answer(self, i: int):
        """Wait for partition ``i``'s answer (in bounded waits when the mailbox is remote)."""
        if not self.remote:
            return self.call("answer", i, None)
        while True:
            got = self.call("answer", i, ANSWER_WAIT_S)
            if got is not None:
                return got


class PartitionClient:
    """The island's half: asks for partitions ahead of demand and yields their tables in order. Picklable when
    the mailbox is a Ray actor; pickling it (sending the island its plan) waits until the driver has prepared the
    Spark side (the Arrow RDD's id, its number of partitions, the schema and address RayDP's reader needs)."""

    def __init__(self, box: _Box, prefetch: int, schema: pa.Schema, fetch_num_cpus: float, fetch_memory: float):
        self.box = box
        self.prefetch = prefetch
        self.schema = schema
        self.fetch_num_cpus = fetch_num_cpus
        self.fetch_memory = fetch_memory
        self.rdd_id = -1
        self.num_partitions = 0
        self.schema_json = ""
        self.driver_agent_url = ""
        self._ready: Optional[threading.Event] = threading.Event()  # None once prepared and sent
        self._error: Optional[BaseException] = None

    def prepared(self, rdd_id: int, num_partitions: int, schema_json: str, driver_agent_url: str) -> None:
        """The driver's side: the Spark side is ready."""
        self.rdd_id, self.num_partitions = rdd_id, num_partitions
        self.schema_json, self.driver_agent_url = schema_json, driver_agent_url
        self._ready.set()

    def failed(self, error: BaseException) -> None:
        """The driver's side: preparing the Spark side failed with ``error``."""
        self._error = error
        self._ready.set()

    def wait_prepared(self) -> None:
        """Return once the Spark side is prepared; raise the error that failed it."""
        ready = self._ready
        if ready is not None:
            ready.wait()
        if self._error is not None:
            raise self._error

    def __getstate__(self) -> dict:
        self.wait_prepared()
        state = dict(self.__dict__)
        state["_ready"] = None
        return state

    def _fetch(self, i: int, answer) -> Any:
        executor, error = answer
        if error is not None:
            if error == "closed":
                raise IllegalStateError("from_spark: the partition server was closed (the graph ended)")
            raise SparkJobError(error)
        box = self.box
        if box.remote and box.key is not None and not self.fetch_num_cpus and not self.fetch_memory:
            # the hub reads it (no Ray resources asked for the fetch: nothing a task would reserve)
            return box.target.fetch.remote(f"raydp-executor-{executor}", self.rdd_id, i, self.schema_json,
                                           self.driver_agent_url)
        options = {"num_cpus": self.fetch_num_cpus}
        if self.fetch_memory:
            options["memory"] = self.fetch_memory
        return _fetch_task().options(**options).remote(f"raydp-executor-{executor}", self.rdd_id, i,
                                                       self.schema_json, self.driver_agent_url)

    def tables(self) -> Iterator[pa.Table]:
        """Partition tables in order, each requested from Spark ``prefetch`` partitions ahead of the one being
        consumed; the next one is asked for when the generator is resumed after yielding the previous one."""
        import ray

        self.wait_prepared()
        n, box = self.num_partitions, self.box
        for i in range(min(self.prefetch, n)):
            box.call("want", i, wait=False)
        refs: dict = {}
        for i in range(n):
            if i not in refs:
                refs[i] = self._fetch(i, box.answer(i))
            if i + 1 < n and i + 1 not in refs:  # copy the next one into Ray while this one is consumed
                ready = box.call("answer", i + 1, 0)
                if ready is not None:
                    refs[i + 1] = self._fetch(i + 1, ready)
            table = partition_table(ray.get(refs.pop(i)))
            box.call("done", i, wait=False)
            yield table
            del table
            if i + self.prefetch < n:
                box.call("want", i + self.prefetch, wait=False)


def _fetch_from_executor(executor_actor_name: str, rdd_id: int, partition_id: int, schema_json: str,
                         driver_agent_url: str) -> pa.Buffer:
    """The executor actor's Arrow IPC stream of a partition (RayDP's ``getRDDPartition``), as a ``pa.Buffer``
    (:func:`partition_table` reads it); run in the hub actor (:meth:`MailboxHub.fetch`) or in a Ray task. As RayDP's
    ``_fetch_arrow_table_from_executor``, but the reply object is let go of once its bytes are here (Ray hands the
    executor's ``byte[]`` over as raw bytes, copied into this process): the store holds a partition's reply only
    while it is copied. The stream is returned as it came, not read into a table here: Ray pickles a buffer as one
    out-of-band block, while a table goes through Ray's Arrow reducer, whose offsets handling imports
    ``pyarrow.compute`` and with it pandas (~0.3 s of the hub's CPU with its first partition, on a Spark source's
    way to its first element). (No ``gc.collect()``: nothing here makes a reference cycle, and a collection in the
    long-lived hub, ~110k objects, took 50-550 ms a partition on a loaded 2-core machine.)"""
    import ray

    # what RayDP's _enable_load_code_from_local does (cross-language calls), without importing raydp.spark.dataset:
    # that imports all of Ray Data, ~1 s in each new process, on the path to a stream's first element
    ray._private.worker.global_worker.set_load_code_from_local(True)
    actor = ray.get_actor(executor_actor_name)
    ref = actor.getRDDPartition.remote(rdd_id, partition_id, schema_json, driver_agent_url)
    data = ray.get(ref)
    del ref, actor
    return pa.py_buffer(data)


def partition_table(stream: pa.Buffer) -> pa.Table:
    """The table of a partition's Arrow IPC stream (:func:`_fetch_from_executor`): read without a copy, Spark's
    schema metadata dropped, short offsets buffers repaired (``spark_partitions._repair_offsets``)."""
    from .spark_partitions import _repair_offsets

    return _repair_offsets(pa.ipc.open_stream(stream).read_all().replace_schema_metadata())


_fetch_remote = None


def _fetch_task():
    global _fetch_remote
    if _fetch_remote is None:
        import ray

        _fetch_remote = ray.remote(max_retries=0)(_fetch_from_executor)
    return _fetch_remote


def _java_error_text(exc: BaseException) -> str:
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            text = str(java.toString())
        except Exception:  # noqa: BLE001 - the gateway may be gone
            text = str(exc)
    else:
        text = f"{type(exc).__name__}: {exc}"
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("at ")]
    return "\n".join(lines[:40])


class OnDemandPartitions:
    """The driver's half (see the module docstring): prepares the Arrow RDD, serves partition requests with
    Spark jobs, removes fetched blocks; :meth:`close` cancels running jobs and unpersists."""

    _ids = itertools.count()

    def __init__(self, df, *, prefetch: int = 2, remote: bool = False, storage_level=None):
        from pyspark.sql import DataFrame
        from pyspark.storagelevel import StorageLevel

        if not isinstance(df, DataFrame):
            raise TypeError(f"from_spark: df must be a pyspark DataFrame, got {type(df).__name__}")
        from .spark_types import to_arrow_schema

        spark = df.sparkSession
        sc = spark.sparkContext
        jvm = sc._jvm
        writer = jvm.org.apache.spark.sql.raydp.ObjectStoreWriter
        from py4j.java_gateway import JavaClass

        if not isinstance(writer, JavaClass):
            raise IllegalStateError("from_spark: the DataFrame's Spark session is not a RayDP (Spark on Ray) "
                                    "session; start one with atoll.interop.spark_session.session()")
        conf = sc.getConf()
        fetch_num_cpus = float(conf.get("spark.ray.raydp_recoverable_fetch.task.resource.CPU", "0") or 0)
        from raydp.utils import parse_memory_size

        fetch_memory = float(parse_memory_size(
            conf.get("spark.ray.raydp_recoverable_fetch.task.resource.memory", "0") or "0"))
        self.timezone: str = spark.conf.get("spark.sql.session.timeZone")
        self.schema: pa.Schema = to_arrow_schema(df.schema, timezone=self.timezone)
        self._df = df
        self._writer = writer
        self._storage_level = sc._getJavaStorageLevel(storage_level or StorageLevel.MEMORY_AND_DISK)
        self._sc = sc
        self._jvm = jvm
        self._rdd = None
        self.job_group: str = f"{JOB_GROUP_PREFIX}{uuid.uuid4().hex[:12]}-{next(self._ids)}"
        self.prefetch = prefetch
        self._closed = False
        self._lock = threading.Lock()
        if remote:
            self._box = _Box(self._open_hub(), True, self.job_group)
        else:
            self._box = _Box(Mailbox(), False)
        self.client = PartitionClient(self._box, prefetch, self.schema, fetch_num_cpus, fetch_memory)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=prefetch,
                                                           thread_name_prefix="atoll-from-spark-job")
        self._thread = threading.Thread(target=self._serve, daemon=True, name="atoll-from-spark-server")
        self._prestarted: set = set()
        if remote:  # prepared while the island actors start (see the module docstring); ``prepared()`` waits
            self._pool.submit(self._prepare_in_background)
        else:  # in-process islands start in no time: prepare now (an error is raised by ``run()`` itself)
            try:
                self._prepare()
            except BaseException:
                self._pool.shutdown(wait=False)
                raise
            first = self._start()
            if first:
                self._pool.submit(self._compute_each, first)

    def _prepare(self) -> None:
        """The Spark side of the source: the DataFrame's Arrow-batch RDD (planned by the driver's JVM, ~0.6 s
        of a new session's CPU), marked for storage, and what the island needs to read its blocks."""
        df, writer = self._df, self._writer
        rdd = df._jdf.toArrowBatchRdd()
        rdd.persist(self._storage_level)
        self._rdd = rdd
        schema_json = str(writer.toArrowSchema(df._jdf).toJson())
        agent_url = writer.driverAgentUrl()
        self.client.prepared(int(rdd.id()), int(rdd.getNumPartitions()), schema_json,
                             str(agent_url) if agent_url is not None else "")

    def _prepare_in_background(self) -> None:
        try:
            self._prepare()
        except BaseException as e:  # noqa: BLE001 - raised by ``prepared()`` (materialization fails with it)
            self.client.failed(e)
            return
        self._compute_each(self._start())  # (on this pool thread: the first partitions' jobs, one after the other)

    def _start(self) -> List[int]:
        """Serve the island's requests. The island asks for the first ``prefetch`` partitions as soon as it
        starts, whatever its demand: their jobs start now, while the island starts, one after the other
        (partition 0 first: run at once they share the executors' cores and the first element waits for
        both), and the island's first request for each is not served twice. Only the first: an island of a
        restarted attempt (recovery) asks for them again, and its requests are served as any other. Returns
        those first partitions, for the caller to compute (none once closed)."""
        first = list(range(min(self.prefetch, self.client.num_partitions)))
        with self._lock:
            if self._closed:
                return []
            self._prestarted = set(first)
            self._thread.start()
        return first

    def prepared(self) -> None:
        """Wait until the Spark side is prepared; raises the error that failed it (e.g. Spark's analysis error).
        Ray materializations wait here once the island actors were created, before their plans are sent."""
        self.client.wait_prepared()

    @property
    def rdd_id(self) -> int:
        """The id of the DataFrame's Arrow-batch RDD (waits for the prepare)."""
        self.prepared()
        return self.client.rdd_id

    @property
    def num_partitions(self) -> int:
        """How many partitions the DataFrame has (waits for the prepare)."""
        self.prepared()
        return self.client.num_partitions

    def _open_hub(self) -> Any:
        """The hub actor, with this source's mailbox open in it (opened before any other call: the hub's threads
        may run one caller's calls out of order)."""
        import ray

        try:
            hub = _hub_actor()
            ray.get(hub.open.remote(self.job_group))
        except ray.exceptions.RayActorError:  # the hub died (killed): a new one
            hub = _hub_actor(renew=True)
            ray.get(hub.open.remote(self.job_group))
        return hub

    # ------------------------------------------------------------------------------------------------ driver loop
    def _serve(self) -> None:
        box = self._box
        while not self._closed:
            try:
                requests = box.call("requests", 0.5)
            except Exception as e:  # noqa: BLE001 - the mailbox actor is gone: the graph ended
                if not self._closed:
                    log.debug("from_spark: mailbox unreachable: %r", e)
                return
            for kind, i in requests:
                if self._closed:
                    return
                if kind == "want":
                    if i in self._prestarted:  # computing since materialization: this request is answered by it
                        self._prestarted.discard(i)
                        continue
                    try:
                        self._pool.submit(self._compute, i)
                    except RuntimeError:  # the pool was shut down: closing
                        return
                else:
                    self._remove_block(i)

    def _compute_each(self, partitions: List[int]) -> None:
        for i in partitions:
            self._compute(i)

    def _compute(self, i: int) -> None:
        if self._closed:
            return
        sc, jvm = self._sc, self._jvm
        try:
            sc.setJobGroup(self.job_group, f"Atoll from_spark: partition {i}", True)
            keep = jvm.scala.collection.immutable.Set.Set1(i)  # a serializable Int => Boolean
            jvm.org.apache.spark.rdd.PartitionPruningRDD.create(self._rdd, keep).count()
            locations = self._master().getLocations(jvm.org.apache.spark.storage.RDDBlockId(self.rdd_id, i))
            if locations.size() == 0:
                raise IllegalStateError(f"from_spark: Spark computed partition {i} but stored it nowhere")
            answer = (str(locations.head().executorId()), None)
        except BaseException as e:  # noqa: BLE001 - reported to the island, which fails the stream
            if self._closed:
                return
            answer = (None, f"Spark job for partition {i} failed: {_java_error_text(e)}")
        try:
            self._box.call("reply", i, answer[0], answer[1], wait=False)
        except Exception as e:  # noqa: BLE001 - mailbox gone: the graph ended
            log.debug("from_spark: reply for partition %d lost: %r", i, e)

    def _master(self):
        return self._sc._jsc.sc().env().blockManager().master()

    def _remove_block(self, i: int) -> None:
        try:
            self._master().removeBlock(self._jvm.org.apache.spark.storage.RDDBlockId(self.rdd_id, i))
        except Exception as e:  # noqa: BLE001 - the unpersist at close frees it anyway
            log.debug("from_spark: removing partition %d's block failed: %r", i, e)

    # -------------------------------------------------------------------------------------------------- closing
    def close(self) -> None:
        """Stop serving, cancel this source's running Spark jobs, unpersist, stop the mailbox. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._box.call("close", wait=not self._box.remote)
        except Exception:  # noqa: BLE001
            pass
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._sc._jsc is not None:
            try:
                self._sc.cancelJobGroup(self.job_group)
            except Exception as e:  # noqa: BLE001
                log.debug("from_spark: cancelling jobs failed: %r", e)
        if self._thread.ident is not None:  # started (under the lock: it never starts once closed)
            self._thread.join(timeout=5)
        self._pool.shutdown(wait=True)  # (waits for a prepare still running in the background)
        if self._rdd is not None and self._sc._jsc is not None:
            try:
                self._rdd.unpersist(False)
            except Exception as e:  # noqa: BLE001
                log.debug("from_spark: unpersist failed: %r", e)

    def __enter__(self) -> "OnDemandPartitions":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
