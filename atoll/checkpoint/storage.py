"""CheckpointStorage: where a graph's checkpoints live, on any ``pyarrow.fs`` file system.

Layout under the storage root::

    <root>/<graph>/chk-00000042/island-003-a0.bin   # one blob per island (the attempt in the name)
                                _MANIFEST.json      # written last: the checkpoint is complete once it exists

A blob is written to a temporary name and renamed (atomic on local file systems; a single upload on object
stores becomes visible whole when closed). The manifest records every blob's size and sha256, which are
verified on restore: a damaged checkpoint is an error, never silently skipped (Jet's lesson, hazelcast#18675).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any, Dict, List, Optional, Tuple

from ..errors import CheckpointCorruptedError, CheckpointStorageError

MANIFEST = "_MANIFEST.json"
FORMAT = 1
_CHK = re.compile(r"^chk-(\d{8})$")


def chk_dir(checkpoint_id: int) -> str:
    return f"chk-{checkpoint_id:08d}"


def resolve_storage(spec: Any) -> Tuple[Any, str]:
    """``(pyarrow FileSystem, root path)`` of a storage spec: None (``.atoll/checkpoints`` under the working
    directory), a local path, a URI, or a ``(FileSystem, path)`` pair."""
    from pyarrow import fs as pafs

    if spec is None:
        spec = os.path.join(os.getcwd(), ".atoll", "checkpoints")
    if isinstance(spec, tuple):
        filesystem, path = spec
        if not isinstance(filesystem, pafs.FileSystem):
            raise TypeError(f"checkpoint storage: {filesystem!r} is not a pyarrow.fs.FileSystem")
        return filesystem, path.rstrip("/")
    if not isinstance(spec, str) or not spec:
        raise TypeError(f"checkpoint storage must be a path, a URI or a (FileSystem, path) pair, got {spec!r}")
    if "://" not in spec:
        return pafs.LocalFileSystem(), os.path.abspath(spec)
    try:
        filesystem, path = pafs.FileSystem.from_uri(spec)
    except Exception as e:  # noqa: BLE001 - any failure to reach the storage is reported the same way
        raise CheckpointStorageError(f"checkpoint storage {spec!r} cannot be reached: {e}") from e
    return filesystem, path.rstrip("/")


class CheckpointStorage:
    """The checkpoints of one graph (``graph``) under a storage root."""

    def __init__(self, spec: Any, graph: str):
        self.fs, self.root = resolve_storage(spec)
        self.graph = graph
        self.base = f"{self.root}/{graph}"
        self._local = type(self.fs).__name__ == "LocalFileSystem"

    def __repr__(self):
        return f"CheckpointStorage({self.base})"

    def path(self, checkpoint_id: int, name: str = "") -> str:
        d = f"{self.base}/{chk_dir(checkpoint_id)}"
        return f"{d}/{name}" if name else d

    def check_writable(self) -> None:
        """Create the graph's directory (raises ``CheckpointStorageError`` if it cannot be)."""
        try:
            self.fs.create_dir(self.base, recursive=True)
        except Exception as e:  # noqa: BLE001
            raise CheckpointStorageError(f"checkpoint storage {self.base!r} is not writable: {e}") from e

    # ------------------------------------------------------------------ writing
    def _write(self, path: str, data: bytes) -> None:
        parent = path.rsplit("/", 1)[0]
        self.fs.create_dir(parent, recursive=True)
        tmp = f"{path}.tmp" if self._local else path
        with self.fs.open_output_stream(tmp) as f:
            f.write(data)
        if tmp != path:
            self.fs.move(tmp, path)

    def write_blob(self, checkpoint_id: int, name: str, data: bytes) -> Dict[str, Any]:
        """Write one island's blob; returns its manifest entry (path relative to the checkpoint, size, sha256)."""
        try:
            self._write(self.path(checkpoint_id, name), data)
        except Exception as e:  # noqa: BLE001
            raise CheckpointStorageError(f"writing {self.path(checkpoint_id, name)!r} failed: {e}") from e
        return {"path": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}

    def write_manifest(self, checkpoint_id: int, manifest: Dict[str, Any]) -> None:
        """Write the completion marker of checkpoint ``checkpoint_id`` (last, after every blob)."""
        data = json.dumps(dict(manifest, format=FORMAT), indent=1, sort_keys=True).encode()
        try:
            self._write(self.path(checkpoint_id, MANIFEST), data)
        except Exception as e:  # noqa: BLE001
            raise CheckpointStorageError(f"writing the manifest of {self.path(checkpoint_id)!r} failed: {e}") from e

    # ------------------------------------------------------------------ reading
    def checkpoint_ids(self, complete_only: bool = True) -> List[int]:
        """Ids of the checkpoints under the graph's directory (only those with a manifest by default), ascending."""
        from pyarrow import fs as pafs

        try:
            infos = self.fs.get_file_info(pafs.FileSelector(self.base, allow_not_found=True))
        except Exception as e:  # noqa: BLE001
            raise CheckpointStorageError(f"listing {self.base!r} failed: {e}") from e
        ids = []
        for info in infos:
            m = _CHK.match(info.base_name)
            if m is None or info.type != pafs.FileType.Directory:
                continue
            cid = int(m.group(1))
            if not complete_only or self.fs.get_file_info(self.path(cid, MANIFEST)).type == pafs.FileType.File:
                ids.append(cid)
        return sorted(ids)

    def latest(self) -> Optional[int]:
        ids = self.checkpoint_ids()
        return ids[-1] if ids else None

    def read_manifest(self, checkpoint_id: int) -> Dict[str, Any]:
        path = self.path(checkpoint_id, MANIFEST)
        try:
            with self.fs.open_input_stream(path) as f:
                manifest = json.loads(f.read())
        except FileNotFoundError as e:
            raise CheckpointStorageError(f"{path!r} does not exist: checkpoint {checkpoint_id} is not complete") from e
        if manifest.get("format") != FORMAT:
            raise CheckpointCorruptedError(f"{path!r}: unknown checkpoint format {manifest.get('format')!r}")
        return manifest

    def read_blob(self, checkpoint_id: int, entry: Dict[str, Any]) -> bytes:
        """Read a blob and verify its size and sha256 against ``entry`` (its manifest entry)."""
        path = self.path(checkpoint_id, entry["path"])
        try:
            with self.fs.open_input_stream(path) as f:
                data = f.read()
        except FileNotFoundError as e:
            raise CheckpointCorruptedError(f"{path!r} listed in the manifest is missing") from e
        if len(data) != entry["size"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise CheckpointCorruptedError(
                f"{path!r} is damaged: {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()[:12]}..., the "
                f"manifest says {entry['size']} bytes, {entry['sha256'][:12]}..."
            )
        return data

    # ------------------------------------------------------------------ clean-up
    def delete(self, checkpoint_id: int) -> None:
        try:
            self.fs.delete_dir(self.path(checkpoint_id))
        except FileNotFoundError:
            pass

    def delete_all(self) -> None:
        try:
            self.fs.delete_dir(self.base)
        except FileNotFoundError:
            pass

    def prune(self, retained: int, keep: Optional[int] = None) -> None:
        """Delete complete checkpoints beyond the ``retained`` newest (never ``keep``), and incomplete ones older
        than the newest complete one."""
        complete = self.checkpoint_ids()
        if not complete:
            return
        newest = complete[-1]
        for cid in complete[:-retained]:
            if cid != keep:
                self.delete(cid)
        for cid in self.checkpoint_ids(complete_only=False):
            if cid < newest and cid not in complete and cid != keep:
                self.delete(cid)


def locate(restore_from: Any, storage_spec: Any = None) -> Tuple[CheckpointStorage, int]:
    """The storage and checkpoint id that ``restore_from`` names: a ``CheckpointInfo``, a checkpoint directory
    (``.../<graph>/chk-00000042``) or a graph directory (its latest complete checkpoint)."""
    path = getattr(restore_from, "path", restore_from)
    if not isinstance(path, str) or not path:
        raise TypeError(f"restore_from must be a CheckpointInfo or a checkpoint/graph path, got {restore_from!r}")
    path = path.rstrip("/")
    parent, last = path.rsplit("/", 1) if "/" in path else ("", path)
    m = _CHK.match(last)
    if m is not None:
        root, graph = parent.rsplit("/", 1)
        storage = CheckpointStorage(root, graph)
        cid = int(m.group(1))
        storage.read_manifest(cid)  # exists and complete
        return storage, cid
    root, graph = parent, last
    storage = CheckpointStorage(root or ".", graph)
    cid = storage.latest()
    if cid is None:
        raise CheckpointStorageError(f"no complete checkpoint under {storage.base!r}")
    return storage, cid
