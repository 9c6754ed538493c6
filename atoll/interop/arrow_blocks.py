"""Collecting a stream into Arrow blocks in the Ray object store: the island half of ``Sink.to_spark`` and
``Sink.to_ray_dataset``.

:class:`ArrowBlockSink` checks every element against the schema (given, or inferred from the first batch),
gathers rows into Arrow tables of up to ``rows_per_block`` rows, and ``ray.put``\\ s each block as soon as it is
full, so the data lives in the object store, not on any heap. The blocks belong to the process hosting the
island (Ray ties an object's life to its owner's, and Ray 2.56 removed ``ray.put(_owner=...)``), so a sink in an
island actor holds that actor (``DriverContext.hold_island``) after the stream ended until the driver has made
its own copies. Its materialized value is ``Future[(refs, schema)]``; the driver turns that into what the user
asked for (:func:`finish_on_driver`) and then releases the hold.
"""
from __future__ import annotations


import logging
import threading
from concurrent.futures import Future
from typing import Any, Callable, List, Optional

import pyarrow as pa

from ..stage.handlers import InHandler
from .._impl.ops.base import SinkStage, complete_promise, fail_promise, new_promise
from .._impl.ops.sinks import _PromiseSinkLogic
from ..windowing import Late, Window
from .errors import SchemaMismatchError

__all__ = ["ArrowBlockSink", "BlockLogic", "ROWS_PER_BLOCK", "finish_on_driver", "with_shape_of"]

log = logging.getLogger(__name__)

#: rows gathered into one Arrow block before it is put into the object store
ROWS_PER_BLOCK = 65536


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

    def __init__(self, name: str, schema: Optional[pa.Schema], rows_per_block: int = ROWS_PER_BLOCK):
        super().__init__(name)
        self.schema = schema
        self.rows_per_block = rows_per_block

    def create_logic_and_materialized_value(self, attributes):
        promise = new_promise()
        return BlockLogic(self, promise), promise


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

    chunk_size = 1

    def pre_start(self):
        self._in_conns[0].demand = self.chunk_size
        self.pull(self.in_)

    def on_push(self):
        try:
            self.accept(self.grab(self.in_))
        except Exception as e:  # noqa: BLE001 - the stream fails with it
            fail_promise(self.promise, e)
            self.fail_stage(e)
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
        try:
            for elem in self.grab(self.in_):
                self.accept(elem)
        except Exception as e:  # noqa: BLE001 - the stream fails with it, after the elements before it
            fail_promise(self.promise, e)
            self.fail_stage(e)
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
        elif _is_batch(elem):
            self._flush_rows()
            self._put(self._conform(elem, index))
        else:
            raise SchemaMismatchError(None, "a row dict, a pyspark Row, an atoll Window, a pyarrow Table/RecordBatch "
                                      "or a pandas DataFrame", type(elem).__name__, index)

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
        from .spark_conform import rows_to_table

        if self.schema is None:
            self.schema = _infer(rows, self.rows_base)
        try:
            table = rows_to_table(rows, self.schema)
        except SchemaMismatchError as e:
            raise SchemaMismatchError(e.column, e.expected, e.found, self.rows_base + (e.row or 0), None,
                                      e.detail) from None
        self.rows = []
        self._put(table)

    def _put(self, table: pa.Table) -> None:
        import ray

        self.refs.append(ray.put(table))

    def on_upstream_finish(self):
        try:
            value = self.final_value()
        except Exception as e:  # noqa: BLE001
            fail_promise(self.promise, e)
            self.fail_stage(e)
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


def finish_on_driver(name: str, future: Future, convert: Callable[[List[Any], Optional[pa.Schema]], Any],
                     hold: Any) -> Future:
    """A future of ``convert(refs, schema)``, run on a fresh driver thread once ``future`` (the sink's) is done;
    ``hold`` on the sink's island is released afterwards (``convert`` must have copied what it keeps) and before
    the returned future completes."""
    result: Future = Future()
    result.set_running_or_notify_cancel()

    def run(f: Future) -> None:
        try:
            exc = f.exception()
            if exc is None:
                refs, schema = f.result()
                value = convert(refs, schema)
                del refs
        except BaseException as e:  # noqa: BLE001 - the user's future carries it
            exc = e
        hold.release()
        if exc is not None:
            result.set_exception(exc)
        else:
            result.set_result(value)

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
