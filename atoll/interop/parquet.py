"""Parquet files as a source and a sink (pyarrow), for users who hand data to Spark and others through files.

Both run where their island runs, so the path must be reachable from that node (a shared file system or an
object store URI pyarrow understands on a cluster).
"""
from __future__ import annotations

import os
import uuid
from typing import Any, Iterator, List, Optional, Tuple

import pyarrow as pa

from .._impl.ops.base import SinkStage, new_promise
from .arrow_blocks import ROWS_PER_BLOCK, PartCommittingLogic
from .background_source import BackgroundSource
from .parquet_parts import PartFiles, SingleFile
from .spark_sink import arrow_schema_of

__all__ = ["parquet_source", "ParquetSink", "batches_as"]

FORMATS = ("rows", "arrow", "pandas")


def _check_path(path: Any, op: str) -> str:
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path:
        raise TypeError(f"{op}: path must be a non-empty string or path, got {path!r}")
    return path


def check_format(as_: Any, max_rows: Any, op: str) -> None:
    if as_ not in FORMATS:
        raise ValueError(f"{op}: as_ must be one of {FORMATS}, got {as_!r}")
    if max_rows is not None and (not isinstance(max_rows, int) or isinstance(max_rows, bool) or max_rows < 1):
        raise ValueError(f"{op}: max_rows_per_batch must be an int >= 1 or None, got {max_rows!r}")


def batches_as(batches: Iterator[Any], fmt: str) -> Iterator[Any]:
    """Arrow record batches/tables as chunks of row dicts (``rows``), record batches or pandas DataFrames."""
    for b in batches:
        if b.num_rows == 0:
            continue
        if fmt == "rows":
            yield b.to_pylist()
        elif fmt == "arrow":
            yield b if isinstance(b, pa.RecordBatch) else b.combine_chunks().to_batches()[0]
        else:
            yield b.to_pandas()


class _ParquetReader:
    def __init__(self, path: str, fmt: str, max_rows: int, columns: Optional[List[str]]):
        self.path, self.fmt, self.max_rows, self.columns = path, fmt, max_rows, columns

    def __call__(self) -> Iterator[Any]:
        import pyarrow.dataset as ds

        data = ds.dataset(self.path, format="parquet")
        return batches_as(data.to_batches(columns=self.columns, batch_size=self.max_rows), self.fmt)


def parquet_source(path: Any, as_: str = "rows", max_rows_per_batch: Optional[int] = None,
                   columns: Optional[List[str]] = None) -> BackgroundSource:
    """A stage reading a Parquet file or directory lazily, batch by batch, on demand (see ``Source.from_parquet``).

    **Emits when** downstream pulls (rows one by one; Arrow batches or pandas frames of at most
    ``max_rows_per_batch`` rows). **Completes when** every batch was read. **Fails when** the path cannot be read.
    """
    path = _check_path(path, "Source.from_parquet")
    check_format(as_, max_rows_per_batch, "Source.from_parquet")
    if columns is not None and (not isinstance(columns, (list, tuple)) or
                                not all(isinstance(c, str) for c in columns)):
        raise TypeError(f"Source.from_parquet: columns must be a list of column names, got {columns!r}")
    if max_rows_per_batch is None:
        max_rows_per_batch = 2048 if as_ == "rows" else 65536
    reader = _ParquetReader(path, as_, max_rows_per_batch, list(columns) if columns is not None else None)
    return BackgroundSource("from_parquet", reader, prefetch=2, chunked=as_ == "rows", replayable=True)


class ParquetSink(SinkStage):
    """Writes the stream to one Parquet file: ``Future[int]`` (rows written), completed when the file is closed.

    Elements are checked and gathered as for ``Sink.to_spark`` (row dicts, Rows, Arrow, pandas; ``schema`` given
    or inferred from the first batch; a mismatch fails the stream naming the column, types and element index),
    and written as row groups of up to ``rows_per_block`` rows. On failure the file is closed with the row groups
    written so far (as Pekko's file sinks leave a partial file).

    **With checkpoints** ``path`` is a dataset directory written exactly once by two-phase commit
    (:mod:`atoll.interop.parquet_parts`): each epoch's rows go to a hidden ``_part-*`` temporary, closed at the
    checkpoint's cut and renamed to ``part-<n>.parquet`` once the checkpoint is durable; a restore commits what
    the checkpoint prepared and deletes the temporaries written after it. At the end of the stream the sink
    asks for a checkpoint and completes (its future too) only once that checkpoint committed the last part, so
    a completed future means every row is visible. An empty epoch writes no file.

    **With checkpoints and** ``single_file=True`` ``path`` is one file, as without checkpoints: the epochs are
    committed as parts into a hidden directory beside it (``_<name>.parts``), and once the stream ended and the
    final checkpoint committed every part, they are concatenated in order into a hidden temporary beside the file
    that is renamed over ``path`` (readers see the previous file or the whole new one; an object store's rename
    is a copy); the parts are deleted then and the future completes. The file's footer names its parts, so a
    restore after the end (of the final checkpoint or an older one) leaves exactly the failure-free file. A
    file at ``path`` is replaced only by that rename; a directory there fails the sink. Without checkpoints
    ``single_file`` changes nothing (one file is written directly).

    **Backpressures when** a row group is being written. **Completes** its future when upstream completed and
    the file is closed (with checkpoints: the last part committed, and with ``single_file`` the file in place).
    **Cancels when** an element does not fit the schema or writing fails.
    """

    def __init__(self, path: Any, schema: Any = None, rows_per_block: int = ROWS_PER_BLOCK,
                 single_file: bool = False):
        super().__init__("to_parquet")
        self.path = _check_path(path, "Sink.to_parquet")
        self.schema = arrow_schema_of(schema, "Sink.to_parquet")
        if not isinstance(rows_per_block, int) or isinstance(rows_per_block, bool) or rows_per_block < 1:
            raise ValueError(f"Sink.to_parquet: rows_per_block must be an int >= 1, got {rows_per_block!r}")
        if not isinstance(single_file, bool):
            raise TypeError(f"Sink.to_parquet: single_file must be True or False, got {single_file!r}")
        if single_file and self.path.rstrip("/") != self.path:
            raise ValueError(f"Sink.to_parquet: single_file=True needs a file path, got the directory {self.path!r}")
        self.rows_per_block = rows_per_block
        self.single_file = single_file

    def create_logic_and_materialized_value(self, attributes):
        promise = new_promise()
        return _ParquetLogic(self, promise), promise


class _ParquetLogic(PartCommittingLogic):
    """One file without checkpoints; part files under two-phase commit with them (``parts``), also when a run
    without checkpoints restores a checkpoint (it then commits its last part itself at the end)."""

    def __init__(self, stage: ParquetSink, promise):
        super().__init__(stage, promise)
        self.path = stage.path
        self.writer = None
        self.written = 0
        self.single_file = stage.single_file
        self.single: Optional[SingleFile] = None  # with parts and single_file: the file they are merged into
        self.committed_parts: List[Tuple[str, str]] = []  # single_file: (temporary, final) committed, in order

    def _open_parts(self) -> PartFiles:
        if not self.single_file:
            return PartFiles(self.path)
        self.single = SingleFile(self.path, uuid.uuid4().hex[:16])
        self.single.start_fresh()
        return self.single.parts()

    def _committed_value(self) -> int:
        return self.written

    def save_to_snapshot(self) -> Any:
        state = {"written": self.written, "count": self.count, "schema": self.schema, "rows": list(self.rows),
                 "rows_base": self.rows_base, "ended": self.ended, "parts": self.parts.state()}
        if self.single is not None:
            state["single"] = {"token": self.single.token, "committed": list(self.committed_parts)}
        return state

    def restore_from_snapshot(self, state: Any) -> None:
        self.written, self.count, self.schema = state["written"], state["count"], state["schema"]
        self.rows, self.rows_base, self.ended = list(state["rows"]), state["rows_base"], state["ended"]
        single = state.get("single")
        if single is not None:  # the checkpoint's run merged into one file: so does this one, whatever it was given
            self.single = SingleFile(self.path, single["token"])
            self.committed_parts = [tuple(p) for p in single["committed"]]
            self.parts = self.single.parts()
            self.parts.fs.create_dir(self.parts.dir, recursive=True)  # gone if the checkpoint's run merged already
        else:
            self.parts = PartFiles(self.path)
        self.parts.restore(state["parts"])

    # ------------------------------------------------------------------ single file
    def _commit(self, prepared: List[Tuple[str, str]], checkpoint_id: Optional[int] = None) -> None:
        if self.single is None:
            super()._commit(prepared, checkpoint_id)
            return
        merged = None

        def in_file(temp: str) -> bool:  # parts gone from the directory may be in the merged file already
            nonlocal merged
            if merged is None:
                merged = {t for t, _ in self.single.merged_parts() or ()}
            return temp in merged

        self.parts.commit(prepared, checkpoint_id, merged=in_file)
        known = set(self.committed_parts)
        for part in prepared:
            if part not in known:
                known.add(part)
                self.committed_parts.append(tuple(part))

    def _complete_if_committed(self) -> bool:
        if self.single is not None and self.ended and self.started and not self.parts.pending \
                and self.parts.writer is None and not self._finalized:
            try:
                self.single.merge(self.parts, self.committed_parts, self.schema)
            except Exception as e:  # noqa: BLE001 - the sink fails with it (a restore merges again)
                self._fail(e)
                return True
        return super()._complete_if_committed()

    # ------------------------------------------------------------------ writing
    def _put(self, table: pa.Table) -> None:
        if self.parts is not None:
            self.parts.write(table)
            self.written += table.num_rows
            return
        import pyarrow.parquet as pq

        if self.writer is None:
            self.writer = pq.ParquetWriter(self.path, table.schema)
        self.writer.write_table(table)
        self.written += table.num_rows

    def _result(self) -> Any:
        if self.writer is None:
            import pyarrow.parquet as pq

            schema = self.schema if self.schema is not None else pa.schema([])
            pq.write_table(schema.empty_table(), self.path)
        else:
            self.writer.close()
            self.writer = None
        return self.written

    def release_files(self) -> None:
        if self.writer is not None:
            try:
                self.writer.close()  # the row groups written so far make a whole file
            except Exception:  # noqa: BLE001 - already failing
                pass
            self.writer = None
        super().release_files()
