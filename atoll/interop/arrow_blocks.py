"""Collecting a stream into Arrow blocks in the Ray object store: the island half of ``Sink.to_spark`` and
``Sink.to_ray_dataset``.

:class:`ArrowBlockSink` checks every element against the schema (given, or inferred from the first batch),
gathers rows into Arrow tables of up to ``rows_per_block`` rows, and ``ray.put``\\ s each block as soon as it is
full, so the data lives in the object store, not on any heap. The blocks belong to the process hosting the
island (Ray ties an object's life to its owner's, and Ray 2.56 removed ``ray.put(_owner=...)``), so a sink in an
island actor holds that actor (``DriverContext.hold_island``) after the stream ended until the driver has made
its own copies. Its materialized value is ``Future[(refs, schema)]``; the driver turns that into what the user
asked for (:func:`finish_on_driver`) and then releases the hold.

**With checkpoints** (:class:`CommittingBlockLogic`) object refs cannot be the sink's state: a restored sink runs
in a new island actor, and the blocks the killed one put died with it. So each block is written instead as a
Parquet part into a directory among the graph's checkpoints (:class:`BlockStore`,
``<storage>/<graph>/_sink-blocks/<op>-<token>``) through the Parquet sink's two-phase commit
(:class:`~atoll.interop.parquet_parts.PartFiles`): a block is a hidden temporary *pending* until the checkpoint
covering it completes, then renamed (committed); the snapshot holds only part names. At the end of the stream the
sink asks for a final checkpoint and completes its future with the committed parts (:class:`CommittedBlocks`)
once that checkpoint committed the last one; the driver then reads them into blocks it owns (a Ray task per
part) and builds the result from those only. The directory is deleted with the graph's checkpoints (when it
succeeded and they are not retained), after the driver has read it.
"""
from __future__ import annotations


import logging
import threading
import uuid
from concurrent.futures import Future
from typing import Any, Callable, List, Optional, Tuple

import pyarrow as pa

from ..errors import IllegalStateError
from ..stage.handlers import InHandler
from .._impl.ops.base import SinkStage, complete_promise, fail_promise, new_promise
from .._impl.ops.sinks import _PromiseSinkLogic
from ..windowing import Late, Window
from .errors import SchemaMismatchError
from .task_groups import map_grouped, returns

__all__ = ["ArrowBlockSink", "BlockLogic", "BlockStore", "CommittedBlocks", "CommittingBlockLogic", "ROWS_PER_BLOCK",
           "block_store_for", "finish_on_driver", "with_shape_of"]

log = logging.getLogger(__name__)

#: rows gathered into one Arrow block before it is put into the object store
ROWS_PER_BLOCK = 65536
#: the stream's first rows are checked against a given schema as soon as they arrive (converted and dropped; they
#: are converted again with their block): a stream whose rows do not fit fails at once, not when the first block
#: fills (``rows_per_block`` rows later, or at the end of the stream)
CHECK_FIRST_ROWS = 1024


def _is_row(elem: Any) -> bool:
    return isinstance(elem, dict) or (isinstance(elem, tuple) and hasattr(elem, "asDict"))


def window_row(w: Window) -> dict:
    """A fired event-time window as a row: its fields flattened to columns key, start, end, value, timing
    (``superseded`` stays out: a session's replaced windows are for upserting sinks). ``Late`` records become
    rows of value, timestamp and watermark."""
    return {"key": w.key, "start": w.start, "end": w.end, "value": w.value, "timing": w.timing}


def _is_batch(elem: Any) -> bool:
    if isinstance(elem, (pa.Table, pa.RecordBatch)):
        return True
    pd = _pandas()
    return pd is not None and isinstance(elem, pd.DataFrame)


def _pandas():
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas comes with the dev extra and Ray Data
        return None
    return pd


class ArrowBlockSink(SinkStage):
    """Collects the stream into Arrow blocks in the object store: ``Future[(list of ObjectRef, pa.Schema)]``.

    Elements may be row dicts (or ``pyspark.sql.Row``), ``pyarrow`` tables/record batches or pandas DataFrames,
    mixed freely; each is checked against ``schema`` (an Arrow schema; ``None`` infers it from the first element
    or first block of rows) and a mismatch fails the stream with a
    :class:`~atoll.interop.errors.SchemaMismatchError` naming the column, the expected and found types and the
    element's index. Nothing is coerced.

    **Backpressures** never (rows are gathered, blocks put away as they fill). **Completes** its future when
    upstream completes; fails it with upstream's failure or the mismatch. **Cancels when** an element does not
    fit.
    """

    def __init__(self, name: str, schema: Optional[pa.Schema], rows_per_block: int = ROWS_PER_BLOCK,
                 store: Optional["BlockStore"] = None):
        super().__init__(name)
        self.schema = schema
        self.rows_per_block = rows_per_block
        #: where blocks go under checkpoints (None: the materializer has no checkpoint settings)
        self.store = store

    def create_logic_and_materialized_value(self, attributes):
        promise = new_promise()
        return CommittingBlockLogic(self, promise), promise


class BlockLogic(_PromiseSinkLogic):
    """Checks and gathers elements into Arrow tables; ``_put`` stores each table, ``_result`` is the value."""

    def __init__(self, stage: ArrowBlockSink, promise: Future):
        super().__init__(stage, promise)
        self.schema = stage.schema
        self.limit = stage.rows_per_block
        self.rows: List[Any] = []
        self.rows_base = 0  # element index of rows[0]
        self.count = 0  # elements seen
        self.refs: List[Any] = []
        #: the first rows were checked (``CHECK_FIRST_ROWS``); nothing to check early when the schema is to be
        #: inferred (from the first block)
        self.first_checked = self.schema is None

    chunk_size = 1

    def pre_start(self):
        self._in_conns[0].demand = self.chunk_size
        self.pull(self.in_)

    def _fail(self, e: BaseException) -> None:
        """Fail the stream with ``e``, the sink's open files closed first: when the driver's future fails, what
        was written is already whole on disk."""
        self.release_files()
        fail_promise(self.promise, e)
        self.fail_stage(e)

    def on_upstream_failure(self, exc):
        self._fail(exc)

    def release_files(self) -> None:
        """Close or discard what the sink holds open (called on failure and at stop; idempotent)."""

    def post_stop(self):
        self.release_files()
        super().post_stop()

    def on_push(self):
        try:
            self.accept(self.grab(self.in_))
        except Exception as e:  # noqa: BLE001 - the stream fails with it
            self._fail(e)
            return
        self.pull(self.in_)

    # chunk form: a chunk of up to ``chunk_size`` elements per pull, checked and gathered in order
    def chunk_capable(self) -> bool:
        return True

    def enable_chunks(self, chunk_size: int) -> None:
        self.chunk_size = chunk_size
        self.set_handler(self.in_, InHandler(on_push=self._on_push_chunk, on_upstream_finish=self.on_upstream_finish,
                                             on_upstream_failure=self.on_upstream_failure))

    def _on_push_chunk(self):
        chunk = self.grab(self.in_)
        try:
            if type(chunk) is list and chunk and type(chunk[0]) is dict and len(set(map(type, chunk))) == 1:
                self._accept_dicts(chunk)  # plain dicts only (checked at C speed): gathered as a whole
            else:
                for elem in chunk:
                    self.accept(elem)
        except Exception as e:  # noqa: BLE001 - the stream fails with it, after the elements before it
            self._fail(e)
            return
        self._in_conns[0].demand = self.chunk_size
        self.pull(self.in_)

    def accept(self, elem: Any) -> None:
        """Check and gather one element (raises ``SchemaMismatchError`` when it does not fit)."""
        index = self.count
        self.count += 1
        if type(elem) is Window:
            elem = window_row(elem)
        elif type(elem) is Late:
            elem = {"value": elem.value, "timestamp": elem.timestamp, "watermark": elem.watermark}
        if type(elem) is dict or _is_row(elem):
            if not self.rows:
                self.rows_base = index
            self.rows.append(elem)
            if len(self.rows) >= self.limit:
                self._flush_rows()
            elif not self.first_checked:
                self._check_first_rows()
        elif _is_batch(elem):
            self._flush_rows()
            self._put(self._conform(elem, index))
        else:
            raise SchemaMismatchError(None, "a row dict, a pyspark Row, an atoll Window, a pyarrow Table/RecordBatch "
                                      "or a pandas DataFrame", type(elem).__name__, index)

    def _accept_dicts(self, chunk: List[dict]) -> None:
        """``accept`` of each row dict of ``chunk`` in order, by slices: the same blocks, flushed at the same rows."""
        rows, limit = self.rows, self.limit
        start, n = 0, len(chunk)
        while start < n:
            if not rows:
                self.rows_base = self.count
            take = min(n - start, max(1, limit - len(rows)))
            rows.extend(chunk[start:start + take] if start or take < n else chunk)
            self.count += take
            start += take
            if len(rows) >= limit:
                self._flush_rows()
                rows = self.rows
        if not self.first_checked and rows:
            self._check_first_rows()

    def final_value(self) -> Any:
        """Flush what is gathered and return the sink's value (raises like ``accept``)."""
        self._flush_rows()
        return self._result()

    def _conform(self, batch: Any, index: int) -> pa.Table:
        from .spark_conform import conform

        if self.schema is None:
            if isinstance(batch, pa.RecordBatch):
                self.schema = batch.schema
            elif isinstance(batch, pa.Table):
                self.schema = batch.schema
            else:
                self.schema = pa.Schema.from_pandas(batch, preserve_index=False)
        return conform(batch, self.schema, element_index=index)

    def _flush_rows(self) -> None:
        rows = self.rows
        if not rows:
            return
        if self.schema is None:
            self.schema = _infer(rows, self.rows_base)
        table = self._rows_table(rows)
        self.first_checked = True
        self.rows = []
        self._put(table)

    def _check_first_rows(self) -> None:
        """Check the first gathered rows against the schema now, once (``CHECK_FIRST_ROWS``)."""
        self.first_checked = True
        self._rows_table(self.rows[:CHECK_FIRST_ROWS])

    def _rows_table(self, rows: List[Any]) -> pa.Table:
        """``rows`` (from ``rows[0]``: element ``rows_base``) as a table of the schema; a row that does not fit raises
        ``SchemaMismatchError`` naming its element."""
        from .spark_conform import rows_to_table

        try:
            return rows_to_table(rows, self.schema)
        except SchemaMismatchError as e:
            raise SchemaMismatchError(e.column, e.expected, e.found, self.rows_base + (e.row or 0), None,
                                      e.detail) from None

    def _put(self, table: pa.Table) -> None:
        import ray

        self.refs.append(ray.put(table))

    def on_upstream_finish(self):
        try:
            value = self.final_value()
        except Exception as e:  # noqa: BLE001
            self._fail(e)
            return
        complete_promise(self.promise, value)
        self.complete_stage()

    def _result(self) -> Any:
        return (self.refs, self.schema)


def _infer(rows: List[Any], base: int) -> pa.Schema:
    """The Arrow schema of the first block of rows (what ``pa.Table.from_pylist`` infers)."""
    dicts = [r.asDict(recursive=True) if hasattr(r, "asDict") else r for r in rows]
    try:
        return pa.Table.from_pylist(dicts).schema
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise SchemaMismatchError(None, "rows of one inferable schema", f"rows Arrow cannot type ({e})",
                                  base, None, "give the sink a schema") from None


# ---------------------------------------------------------------------------------------------- with checkpoints
class BlockStore:
    """The directory (on a ``pyarrow.fs`` file system) where one sink's blocks are written under checkpoints.
    Picklable: it travels with the stage to the island and with the sink's state into snapshots."""

    __slots__ = ("fs", "dir", "op")

    def __init__(self, fs: Any, dir: str, op: str):
        self.fs, self.dir, self.op = fs, dir, op

    def __repr__(self):
        return f"BlockStore({self.dir})"

    def __getstate__(self):
        return (self.fs, self.dir, self.op)

    def __setstate__(self, state):
        self.fs, self.dir, self.op = state

    def parts(self):
        """A :class:`~atoll.interop.parquet_parts.PartFiles` on this directory."""
        from .parquet_parts import PartFiles

        parts = PartFiles(self.dir, op=self.op)
        parts.fs, parts.dir = self.fs, self.dir.rstrip("/")
        return parts

    def delete(self) -> None:
        try:
            self.fs.delete_dir(self.dir)
        except FileNotFoundError:
            pass


def block_store_for(ctx: Any, op: str) -> Optional[BlockStore]:
    """The block directory of a sink being prepared on the driver (``ctx``: its ``DriverContext``), under the
    materializer's checkpoint storage, or None when it runs without checkpoints. The directory is created by
    the sink when it starts (a restored sink keeps using the one in its state)."""
    settings = getattr(ctx.materializer, "checkpoint", None)
    if settings is None:
        return None
    from ..checkpoint.storage import resolve_storage

    fs, root = resolve_storage(settings.storage)
    graph = getattr(getattr(ctx.phase, "build", None), "name", None) or "graph"
    return BlockStore(fs, f"{root}/{graph}/_sink-blocks/{op}-{uuid.uuid4().hex[:12]}", f"Sink.{op}")


class CommittedBlocks:
    """A checkpointed block sink's value: the committed parts of ``store`` (names in stream order) and the
    schema. ``load()`` (driver) reads them into Arrow blocks owned by the caller."""

    def __init__(self, store: BlockStore, names: List[str], schema: Optional[pa.Schema]):
        self.store, self.names, self.schema = store, names, schema

    def load(self) -> List[Any]:
        """One ``ObjectRef`` of a ``pyarrow.Table`` per committed part, in order: read by Ray tasks (no CPU
        reserved, so they run while the islands hold every core) whose results this process owns."""
        if not self.names:
            return []
        global _read_task
        import ray

        if _read_task is None:
            _read_task = ray.remote(num_cpus=0)(_read_parts)
        base = self.store.dir.rstrip("/")
        refs = map_grouped(_read_task, [f"{base}/{n}" for n in self.names], self.store.fs)
        ray.wait(refs, num_returns=len(refs), fetch_local=False)
        return refs


def _read_parts(fs: Any, *paths: str) -> Any:
    """Ray task body: the Parquet parts at ``paths``, one table each (a few tasks read every part: see
    :mod:`atoll.interop.task_groups`)."""
    import pyarrow.parquet as pq

    return returns([pq.read_table(path, filesystem=fs) for path in paths])


_read_task = None


class PartCommittingLogic(BlockLogic):
    """A block sink under two-phase commit (the Parquet sink and the Spark / Ray Dataset sinks share it): with
    checkpoints (or restored from one) its rows go into Parquet parts (``parts``, a ``PartFiles``) that
    ``snapshot_commit_prepare`` closes and ``snapshot_commit_finish`` commits; at the end of the stream the sink
    stays alive, asks for a checkpoint and completes its future with ``_committed_value()`` once every part is
    committed (a run without checkpoints restored from one commits its last part itself). Subclasses open the
    parts (``_open_parts``), say what the future gets and save their own state."""

    def __init__(self, stage: Any, promise: Future):
        super().__init__(stage, promise)
        self.parts = None  # PartFiles: with checkpoints, or restored from a checkpoint
        self.checkpointing = False
        self.request_checkpoint: Optional[Callable[..., None]] = None
        self.ended = False  # upstream finished: the sink waits for the commit of its last parts
        self.started = False

    def _open_parts(self) -> Any:
        """The ``PartFiles`` of a run that restored nothing (checkpointing is on)."""
        raise NotImplementedError

    def _committed_value(self) -> Any:
        """What the future completes with once every part is committed."""
        raise NotImplementedError

    # ------------------------------------------------------------------ checkpoint hooks
    def checkpointing_enabled(self, request_checkpoint: Callable[..., None]) -> None:
        self.checkpointing = True
        self.request_checkpoint = request_checkpoint

    def pre_start(self):
        self.started = True
        if self.checkpointing and self.parts is None:
            try:
                parts = self._open_parts()
                parts.start_fresh()  # rollback_uncommitted(None): nothing restored, nothing of ours is pending
            except Exception as e:  # noqa: BLE001 - the sink fails with it
                self._fail(e)
                return
            self.parts = parts
        super().pre_start()

    def snapshot_commit_prepare(self, checkpoint_id: int) -> Any:
        self._flush_rows()  # the epoch ends here: what was gathered goes into its part (an empty epoch has none)
        return self.parts.prepare() or None

    def snapshot_commit_finish(self, checkpoint_id: int, prepared: Any, success: bool) -> None:
        if not success or not prepared:
            return
        self._commit(prepared, checkpoint_id)
        self._complete_if_committed()

    def rollback_uncommitted(self, restored_checkpoint_id: Optional[int]) -> None:
        if self.parts is not None:
            self.parts.rollback()

    def _commit(self, prepared: List[Tuple[str, str]], checkpoint_id: Optional[int] = None) -> None:
        self.parts.commit(prepared, checkpoint_id)

    def _complete_if_committed(self) -> bool:
        """Upstream finished and every part is committed: complete the future, then the stage."""
        if self.ended and self.started and not self.parts.pending and self.parts.writer is None \
                and not self._finalized:
            complete_promise(self.promise, self._committed_value())
            self.complete_stage()
            return True
        return False

    def on_upstream_finish(self):
        if self.parts is None:
            super().on_upstream_finish()
            return
        try:
            self._flush_rows()
            if not self.checkpointing:  # restored into a run without checkpoints: commit the rest now
                self._commit(self.parts.prepare())
        except Exception as e:  # noqa: BLE001
            self._fail(e)
            return
        self.ended = True
        if not self._complete_if_committed():
            self.set_keep_going(True)  # alive, its inlet closed, until the last part is committed
            self.request_checkpoint(final=True)

    def release_files(self) -> None:
        if self.parts is not None:
            try:
                self.parts.discard_open()  # not prepared: a restore writes these rows again
            except Exception:  # noqa: BLE001 - already stopping
                pass


class CommittingBlockLogic(PartCommittingLogic):
    """``BlockLogic`` without checkpoints; under checkpoints (or restored from one) every block is a Parquet
    part of the sink's :class:`BlockStore` written by two-phase commit: closed as soon as it is full and
    *pending* until a checkpoint covering it completes (``snapshot_commit_finish`` renames them and adds them to
    ``committed``). The snapshot holds the rows not yet in a block, the schema and part names, never object
    refs. The future completes with :class:`CommittedBlocks` once every part is committed."""

    def __init__(self, stage: ArrowBlockSink, promise: Future):
        super().__init__(stage, promise)
        self.op = stage.store.op if stage.store is not None else f"Sink.{stage.name}"
        self.store: Optional[BlockStore] = stage.store
        self.committed: List[str] = []  # final part names, in stream order

    def _open_parts(self) -> Any:
        if self.store is None:
            raise IllegalStateError(f"{self.op}: checkpointing is on but the sink was prepared without "
                                    "checkpoint storage")
        return self.store.parts()

    def _committed_value(self) -> Any:
        return CommittedBlocks(self.store, sorted(self.committed), self.schema)

    def save_to_snapshot(self) -> Any:
        return {"count": self.count, "schema": self.schema, "rows": list(self.rows), "rows_base": self.rows_base,
                "ended": self.ended, "store": self.store, "parts": self.parts.state(),
                "committed": list(self.committed)}

    def restore_from_snapshot(self, state: Any) -> None:
        self.count, self.schema, self.ended = state["count"], state["schema"], state["ended"]
        self.rows, self.rows_base = list(state["rows"]), state["rows_base"]
        self.store = state["store"]  # the directory the checkpointed parts are in, whatever this run was given
        self.committed = list(state["committed"])
        self.parts = self.store.parts()
        self.parts.restore(state["parts"])

    def _commit(self, prepared: List[Tuple[str, str]], checkpoint_id: Optional[int] = None) -> None:
        super()._commit(prepared, checkpoint_id)
        known = set(self.committed)
        for _, final in prepared:
            if final not in known:
                known.add(final)
                self.committed.append(final)

    def _put(self, table: pa.Table) -> None:
        if self.parts is None:
            super()._put(table)
            return
        self.parts.write(table)
        self.parts.prepare()  # one part per block: closed now, pending until a checkpoint covers it


#: how long the graph's end waits for the driver to read a finished sink's committed parts before the
#: checkpoints (and the parts with them) are deleted
LOAD_WAIT_S = 300.0


class DriverBlocks:
    """The driver's side of a checkpointed block sink. Its directory lives under the graph's checkpoints and is
    deleted with them (when the graph succeeded and they are not retained); ``graph_ended`` runs among the
    graph's clean-ups, before that deletion, and waits until the driver has read the committed parts of a sink
    that completed (``loaded``)."""

    def __init__(self):
        self.loaded = threading.Event()
        self.future: Optional[Future] = None

    def graph_ended(self) -> None:
        f = self.future
        if f is None or not f.done() or f.cancelled() or f.exception() is not None:
            return  # nothing will be read
        if not self.loaded.wait(LOAD_WAIT_S):
            log.warning("the graph ended but the driver has not read the committed blocks of its sink within "
                        "%.0f s; they may be deleted with the checkpoints", LOAD_WAIT_S)


def prepare_block_sink(ctx: Any, op: str, schema: Optional[pa.Schema], rows_per_block: int, blueprint: Any,
                       convert: Callable[[List[Any], Optional[pa.Schema], bool], Any]):
    """``prepare_on_driver`` of ``Sink.to_spark``/``Sink.to_ray_dataset``: the island stage and the driver's
    finish (``convert(refs, schema, owned)``; ``owned``: the refs belong to this process already)."""
    hold = ctx.hold_island()
    store = block_store_for(ctx, op)
    blocks = None
    if store is not None:
        blocks = DriverBlocks()
        ctx.on_end(blocks.graph_ended)
    stage = with_shape_of(ArrowBlockSink(op, schema, rows_per_block, store), blueprint)
    return stage, lambda future: finish_on_driver(op, future, convert, hold, blocks)


def finish_on_driver(name: str, future: Future, convert: Callable[[List[Any], Optional[pa.Schema], bool], Any],
                     hold: Any, blocks: Optional[DriverBlocks] = None) -> Future:
    """A future of ``convert(refs, schema, owned)``, run on a fresh driver thread once ``future`` (the sink's) is
    done; ``hold`` on the sink's island is released afterwards (``convert`` must have copied what it keeps) and
    before the returned future completes. A checkpointed sink's value (:class:`CommittedBlocks`) is read into
    blocks owned by this process first (``owned``); ``blocks`` learns when its directory is no longer needed."""
    result: Future = Future()
    result.set_running_or_notify_cancel()

    def run(f: Future) -> None:
        try:
            exc = f.exception()
            if exc is None:
                got = f.result()
                if isinstance(got, CommittedBlocks):
                    try:
                        refs, schema = got.load(), got.schema
                    finally:
                        if blocks is not None:
                            blocks.loaded.set()
                    value = convert(refs, schema, True)
                else:
                    refs, schema = got
                    value = convert(refs, schema, False)
                del refs
        except BaseException as e:  # noqa: BLE001 - the user's future carries it
            exc = e
        hold.release()
        if exc is not None:
            result.set_exception(exc)
        else:
            result.set_result(value)

    if blocks is not None:
        blocks.future = future
    future.add_done_callback(
        lambda f: threading.Thread(target=run, args=(f,), daemon=True, name=f"atoll-{name}-finish").start())
    return result


def with_shape_of(stage: Any, blueprint: Any) -> Any:
    """``stage`` given ``blueprint``'s ports, shape and attributes (what ``prepare_on_driver`` returns)."""
    for attr in ("in_", "out"):
        if hasattr(blueprint, attr):
            setattr(stage, attr, getattr(blueprint, attr))
    stage.shape = blueprint.shape
    stage.initial_attributes = blueprint.initial_attributes
    return stage
