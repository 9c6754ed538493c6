"""Frame codec for channels between island actors.

A frame (a list of elements) travels as msgpack bytes plus a list of Ray object references:

* msgpack's own types go as themselves; ``strict_types`` keeps tuples tuples and subclasses exact
  (a tuple is an extension holding its items, anything msgpack does not know is cloudpickled);
* numpy arrays, Arrow tables/record batches and bytes-likes of ``large_bytes`` or more are put in the
  object store and travel as references, so they are never copied through msgpack and are read
  zero-copy on the receiving side. The reference list is a separate call argument, so Ray tracks the
  references (the receiver borrows them);
* an element that is itself a Ray ``ObjectRef`` (``map_remote(fetch=False)``, ``ray.put`` in a ``map``) goes
  in the same list inside a ``PassedRef`` holder: Ray tracks it as a nested reference, and the receiver gets
  the ref back without fetching its value (an ObjectRef pickled into the payload would lose its owner).

``encode_message`` puts the channel id and the frame's sequence number into the same payload, so that a
frame is a single small call argument (Ray deserializes every call argument on its own).
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

import cloudpickle
import msgpack

EXT_PICKLE = 1
EXT_REF = 2
EXT_TUPLE = 3

LARGE_BYTES = 100 * 1024

_np = None
_pa = None


def _large_types():
    """numpy/pyarrow types that always travel by reference (imported lazily)."""
    global _np, _pa
    types = []
    try:
        import numpy as np

        _np = np
        types.append(np.ndarray)
    except ImportError:  # pragma: no cover - numpy is a dependency of pyarrow
        pass
    try:
        import pyarrow as pa

        _pa = pa
        types.extend([pa.Table, pa.RecordBatch])
    except ImportError:  # pragma: no cover
        pass
    return tuple(types)


_LARGE = None


class PassedRef:
    """An element that is an ``ObjectRef``: it travels in the reference list as it is, never fetched."""

    __slots__ = ("ref",)

    def __init__(self, ref):
        self.ref = ref

    def __reduce__(self):
        return (PassedRef, (self.ref,))


def _object_ref_type():
    import sys

    ray = sys.modules.get("ray")
    return None if ray is None else ray.ObjectRef


def _encoder(refs: list):
    global _LARGE
    if _LARGE is None:
        _LARGE = _large_types()
    large = _LARGE
    object_ref = _object_ref_type()

    def default(obj):
        if type(obj) is tuple:
            return msgpack.ExtType(EXT_TUPLE, msgpack.packb(list(obj), default=default, strict_types=True, use_bin_type=True))
        if isinstance(obj, large) or (isinstance(obj, (bytes, bytearray, memoryview)) and len(obj) >= LARGE_BYTES):
            import ray

            refs.append(ray.put(obj))
            return msgpack.ExtType(EXT_REF, msgpack.packb(len(refs) - 1))
        if object_ref is not None and isinstance(obj, object_ref):
            refs.append(PassedRef(obj))
            return msgpack.ExtType(EXT_REF, msgpack.packb(len(refs) - 1))
        return msgpack.ExtType(EXT_PICKLE, cloudpickle.dumps(obj))

    return default


def _ext_hook(refs: list):
    fetched = None
    if refs:
        import ray

        fetch = [i for i, r in enumerate(refs) if type(r) is not PassedRef]
        fetched = [r.ref if type(r) is PassedRef else None for r in refs]
        if fetch:
            for i, value in zip(fetch, ray.get([refs[i] for i in fetch])):
                fetched[i] = value

    def ext_hook(code, data):
        if code == EXT_TUPLE:
            return tuple(msgpack.unpackb(data, ext_hook=ext_hook, raw=False, strict_map_key=False))
        if code == EXT_REF:
            return fetched[msgpack.unpackb(data)]
        if code == EXT_PICKLE:
            return cloudpickle.loads(data)
        raise ValueError(f"unknown frame extension type {code}")

    return ext_hook


def encode(frame: List[Any]) -> Tuple[bytes, list]:
    """``frame`` -> (payload, object refs)."""
    refs: list = []
    payload = msgpack.packb(frame, default=_encoder(refs), strict_types=True, use_bin_type=True)
    return payload, refs


def decode(payload: bytes, refs: list) -> List[Any]:
    """(payload, object refs) -> frame; referenced payloads are fetched (zero-copy when possible)."""
    return msgpack.unpackb(payload, ext_hook=_ext_hook(refs), raw=False, strict_map_key=False)


def encode_message(ch: int, seq: int, frame: List[Any]) -> Tuple[bytes, list]:
    """Frame ``seq`` of channel ``ch`` -> (payload, object refs): one bytes value carries the channel
    id, the sequence number and the frame, so that a frame is one small call argument (Ray
    deserializes each call argument separately)."""
    refs: list = []
    payload = msgpack.packb([ch, seq, frame], default=_encoder(refs), strict_types=True, use_bin_type=True)
    return payload, refs


def decode_message(payload: bytes, refs: Optional[list]) -> Tuple[int, int, List[Any]]:
    """(payload, object refs) of ``encode_message`` -> (channel id, sequence number, frame)."""
    ch, seq, frame = msgpack.unpackb(payload, ext_hook=_ext_hook(refs), raw=False, strict_map_key=False,
                                     use_list=True)
    return ch, seq, frame
