"""The part files of a Parquet dataset directory written under two-phase commit (``Sink.to_parquet`` with
checkpoints).

Each epoch (the elements between two checkpoint cuts) goes to a temporary ``_part-<seq>-<token>.parquet.inprogress``;
readers skip it (``pyarrow.dataset`` and Spark ignore names starting with ``_`` or ``.``). Phase 1 (``prepare``)
closes it, so its footer is written, and adds it to the parts *pending*; phase 2 (``commit``) renames it to
``part-<seq>.parquet``, where readers see it. A commit is idempotent: a part whose temporary is gone and whose
final name exists was committed before. ``rollback`` deletes every temporary not pending (what a failed
attempt wrote after the checkpoint it restarts from). ``seq`` numbers parts in stream order, so reading the
committed parts sorted by name gives the elements in the order they came; a fresh run numbers its parts after
the ones already committed in the directory. The directory belongs to one sink: two sinks writing into it
would delete each other's temporaries.
"""
from __future__ import annotations

import os
import re
import uuid
from typing import Any, Dict, List, Optional, Tuple

import pyarrow as pa

from ..errors import CheckpointError

__all__ = ["PartFiles"]

_FINAL = re.compile(r"^part-(\d+)\.parquet$")
_TEMP = re.compile(r"^_part-\d+-[0-9a-f]+\.parquet\.inprogress$")


def _resolve(path: str) -> Tuple[Any, str]:
    """``(pyarrow FileSystem, path in it)`` for a local path or a URI pyarrow understands."""
    import pyarrow.fs as pafs

    if "://" in path:
        return pafs.FileSystem.from_uri(path)
    return pafs.LocalFileSystem(), os.path.abspath(path)


class PartFiles:
    """The parts of one sink's dataset directory ``path``: the one being written, those pending commit, and
    the number of the next one. Not thread-safe: the sink's island thread uses it (and a restore, before)."""

    def __init__(self, path: str, op: str = "Sink.to_parquet"):
        self.path = path
        self.op = op
        self.fs, self.dir = _resolve(path)
        self.seq = 0
        self.writer = None
        self.open_name: Optional[str] = None  # the temporary being written (not prepared yet)
        self.pending: List[Tuple[str, str]] = []  # (temporary, final name) prepared, not committed

    # ------------------------------------------------------------------ state
    def state(self) -> Dict[str, Any]:
        """What a checkpoint keeps (call after ``prepare``: nothing is open then)."""
        return {"seq": self.seq, "pending": list(self.pending)}

    def restore(self, state: Dict[str, Any]) -> None:
        self.seq = state["seq"]
        self.pending = [tuple(p) for p in state["pending"]]

    def start_fresh(self) -> None:
        """A run that restores nothing: create the directory, delete temporaries left by an earlier attempt
        (nothing it wrote was committed, or this run would restore it), number the parts after the committed
        ones."""
        from pyarrow.fs import FileType

        info = self.fs.get_file_info(self.dir)
        if info.type == FileType.File:
            raise NotADirectoryError(f"{self.op}: with checkpoints the path is a dataset directory, but {self.path!r} "
                                     "is a file")
        self.fs.create_dir(self.dir, recursive=True)
        self.rollback()
        used = [int(m.group(1)) for m in map(_FINAL.match, self._names()) if m]
        self.seq = max(used, default=-1) + 1

    def _names(self) -> List[str]:
        from pyarrow.fs import FileSelector

        infos = self.fs.get_file_info(FileSelector(self.dir, allow_not_found=True))
        return [i.base_name for i in infos]

    def _full(self, name: str) -> str:
        return f"{self.dir.rstrip('/')}/{name}"

    # ------------------------------------------------------------------ writing
    def write(self, table: pa.Table) -> None:
        """Append ``table`` to the current epoch's part (opened on its first table: an empty epoch has no file)."""
        if self.writer is None:
            import pyarrow.parquet as pq

            self.open_name = f"_part-{self.seq:08d}-{uuid.uuid4().hex[:8]}.parquet.inprogress"
            self.writer = pq.ParquetWriter(self._full(self.open_name), table.schema, filesystem=self.fs)
        self.writer.write_table(table)

    def prepare(self) -> List[Tuple[str, str]]:
        """Phase 1: close the current part (if any) and make it pending; returns every pending part."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None
            self.pending.append((self.open_name, f"part-{self.seq:08d}.parquet"))
            self.open_name = None
            self.seq += 1
        return list(self.pending)

    def commit(self, parts: List[Tuple[str, str]], checkpoint_id: Optional[int] = None) -> None:
        """Phase 2: rename each prepared part to its final name (idempotent)."""
        from pyarrow.fs import FileType

        for temp, final in parts:
            src, dst = self._full(temp), self._full(final)
            if self.fs.get_file_info(src).type == FileType.NotFound:
                if self.fs.get_file_info(dst).type == FileType.NotFound:
                    where = "" if checkpoint_id is None else f" prepared by checkpoint {checkpoint_id}"
                    raise CheckpointError(f"{self.op}: part {temp}{where} is gone from {self.path} and {final} "
                                          "does not exist: another run or sink wrote into this directory")
            else:
                try:
                    self.fs.move(src, dst)
                except FileNotFoundError:
                    # committed meanwhile by another commit of the same checkpoint (a stopped run's last one)
                    if self.fs.get_file_info(dst).type == FileType.NotFound:
                        raise
            part = (temp, final)
            if part in self.pending:
                self.pending.remove(part)

    def rollback(self) -> None:
        """Delete every temporary of the directory that is neither pending nor being written."""
        keep = {t for t, _ in self.pending}
        if self.open_name is not None:
            keep.add(self.open_name)
        for name in self._names():
            if _TEMP.match(name) and name not in keep:
                self.fs.delete_file(self._full(name))

    def discard_open(self) -> None:
        """The stream stopped before the current part was prepared: close and delete it (a restore writes
        its elements again)."""
        writer, name = self.writer, self.open_name
        self.writer = self.open_name = None
        if writer is not None:
            try:
                writer.close()
            finally:
                self.fs.delete_file(self._full(name))
