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

:class:`SingleFile` (``Sink.to_parquet(path, single_file=True)`` with checkpoints) keeps the parts in a hidden
directory beside the file (``_<name>.parts``) and, once the stream ended and every part is committed, concatenates
them in order into a hidden temporary beside the file and renames it over ``path`` (readers see the old file or
the whole new one, never a partial one), then deletes the parts. The file's footer records the run's token and
its parts (``atoll.to_parquet.parts``), so a restore after the merge recognises parts that are already in the file:
a restore of the final checkpoint merges nothing again, and a restore of an older one rebuilds the file from the
rows the file already holds for the parts before its cut and the parts written after it.
"""
from __future__ import annotations

import json
import os
import re
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple

import pyarrow as pa

from ..errors import CheckpointError

__all__ = ["PartFiles", "SingleFile"]

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

    def __init__(self, path: str, op: str = "Sink.to_parquet", replace: bool = False):
        self.path = path
        self.op = op
        #: a fresh start deletes the committed parts too and numbers from 0 (the parts of one file, not a dataset)
        self.replace = replace
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
        if self.replace:
            for name in self._names():
                if _FINAL.match(name):
                    self.fs.delete_file(self._full(name))
            self.seq = 0
            return
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

    def commit(self, parts: List[Tuple[str, str]], checkpoint_id: Optional[int] = None,
               merged: Optional[Callable[[str], bool]] = None) -> None:
        """Phase 2: rename each prepared part to its final name (idempotent). ``merged(temp)``: whether a part
        whose temporary and final name are both gone was merged into a single file already (committed)."""
        from pyarrow.fs import FileType

        for temp, final in parts:
            src, dst = self._full(temp), self._full(final)
            if self.fs.get_file_info(src).type == FileType.NotFound:
                if self.fs.get_file_info(dst).type == FileType.NotFound and not (merged is not None and merged(temp)):
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

    def exists(self, name: str) -> bool:
        from pyarrow.fs import FileType

        return self.fs.get_file_info(self._full(name)).type != FileType.NotFound

    def delete_all(self) -> None:
        """Delete the directory with everything in it (the parts of a single file, once merged)."""
        try:
            self.fs.delete_dir(self.dir)
        except FileNotFoundError:
            pass


#: the key of a merged file's footer metadata: ``{"token": run token, "parts": [[temporary name, rows], ...]}``
MERGE_KEY = b"atoll.to_parquet.parts"


def _split(path: str) -> Tuple[str, str]:
    """``(parent, base name)`` of a local path (made absolute) or a URI."""
    if "://" in path:
        parent, _, base = path.rstrip("/").rpartition("/")
        return parent, base
    full = os.path.abspath(path)
    return os.path.dirname(full), os.path.basename(full)


class SingleFile:
    """One Parquet file at ``path`` assembled at the end of the stream from the committed parts of the hidden
    directory ``_<name>.parts`` beside it (see the module docstring). ``token`` names the run (kept in the
    sink's state): the merge writes ``_<name>.<token>.inprogress`` beside the file and renames it over ``path``."""

    def __init__(self, path: str, token: str, op: str = "Sink.to_parquet"):
        self.path, self.token, self.op = path, token, op
        self.parent, self.base = _split(path)
        self.parts_path = f"{self.parent.rstrip('/')}/_{self.base}.parts"
        self.fs, self.file = _resolve(path)

    def parts(self) -> PartFiles:
        return PartFiles(self.parts_path, op=self.op, replace=True)

    def _temp(self) -> str:
        return f"{_resolve(self.parent)[1].rstrip('/')}/_{self.base}.{self.token}.inprogress"

    def start_fresh(self) -> None:
        """A run that restores nothing: ``path`` must not be a directory; merge temporaries left by earlier runs
        are deleted (the parts directory is emptied by ``PartFiles.start_fresh``)."""
        from pyarrow.fs import FileSelector, FileType

        if self.fs.get_file_info(self.file).type == FileType.Directory:
            raise IsADirectoryError(f"{self.op}: single_file=True writes one file, but {self.path!r} is a directory "
                                    "(leave single_file out to write a dataset directory there)")
        pattern = re.compile(r"^_" + re.escape(self.base) + r"\.[0-9a-f]+\.inprogress$")
        parent = _resolve(self.parent)[1]
        for info in self.fs.get_file_info(FileSelector(parent, allow_not_found=True)):
            if info.type == FileType.File and pattern.match(info.base_name):
                self.fs.delete_file(info.path)

    def merged_parts(self) -> Optional[List[Tuple[str, int]]]:
        """The parts (temporary name, rows) this run's merge put into the file at ``path``, or None when the file
        is missing or another run wrote it."""
        import pyarrow.parquet as pq
        from pyarrow.fs import FileType

        if self.fs.get_file_info(self.file).type != FileType.File:
            return None
        try:
            meta = pq.read_schema(self.file, filesystem=self.fs).metadata or {}
            record = json.loads(meta[MERGE_KEY])
        except Exception:  # noqa: BLE001 - not a Parquet file of ours
            return None
        if record.get("token") != self.token:
            return None
        return [(t, int(n)) for t, n in record["parts"]]

    def merge(self, parts: PartFiles, committed: List[Tuple[str, str]], schema: Optional[pa.Schema]) -> None:
        """Concatenate ``committed`` (temporary, final name) in order into the file at ``path``: each from its final
        part, or from the rows the file already holds for it; nothing to do when the file holds exactly these
        parts. The parts directory is deleted afterwards."""
        import pyarrow.parquet as pq

        existing = self.merged_parts()
        if existing is not None and [t for t, _ in existing] == [t for t, _ in committed]:
            parts.delete_all()  # merged before (a restore after the end): only the clean-up may be left
            return
        old: Dict[str, Tuple[int, int]] = {}
        start = 0
        for temp, rows in existing or ():
            old[temp] = (start, rows)
            start += rows
        sources: List[Tuple[str, str]] = []  # ("part", final) or ("old", temp)
        record: List[List[Any]] = []
        for temp, final in committed:
            if parts.exists(final):
                sources.append(("part", final))
                record.append([temp, pq.read_metadata(parts._full(final), filesystem=parts.fs).num_rows])
            elif temp in old:
                sources.append(("old", temp))
                record.append([temp, old[temp][1]])
            else:
                raise CheckpointError(f"{self.op}: part {final} of {self.path} is neither in {self.parts_path} nor "
                                      "in the file: another run or sink wrote there")
        meta = {MERGE_KEY: json.dumps({"token": self.token, "parts": record}).encode()}
        temp_path = self._temp()
        old_table = None
        writer = None
        try:
            for kind, name in sources:
                if kind == "part":
                    table = pq.read_table(parts._full(name), filesystem=parts.fs)
                else:
                    if old_table is None:
                        old_table = pq.read_table(self.file, filesystem=self.fs)
                    table = old_table.slice(*old[name])
                table = table.replace_schema_metadata({**(table.schema.metadata or {}), **meta})
                if writer is None:
                    writer = pq.ParquetWriter(temp_path, table.schema, filesystem=self.fs)
                writer.write_table(table)
            if writer is None:
                empty = (schema if schema is not None else pa.schema([])).empty_table()
                empty = empty.replace_schema_metadata({**(empty.schema.metadata or {}), **meta})
                writer = pq.ParquetWriter(temp_path, empty.schema, filesystem=self.fs)
                writer.write_table(empty)
            writer.close()
            writer = None
        finally:
            if writer is not None:
                try:
                    writer.close()
                finally:
                    self.fs.delete_file(temp_path)
        del old_table
        self.fs.move(temp_path, self.file)
        parts.delete_all()
