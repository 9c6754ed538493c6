"""Frame codec for channels between island actors.

A frame (a list of elements) travels as msgpack bytes plus a list of Ray object references:

* msgpack's own types go as themselves; ``strict_types`` keeps tuples tuples and subclasses exact
  (a tuple is an extension holding its items, anything msgpack does not know is cloudpickled);
* ``datetime`` and ``date`` values (exactly those types: a subclass such as pandas' ``Timestamp`` is pickled) go as
  the bytes of their pickled state (the fields, microseconds and ``fold``), read back by the types' own
  constructors; a ``datetime``'s tzinfo is kept when it is ``None`` or a fixed-offset ``datetime.timezone`` (offset
  and name), any other tzinfo is pickled with its datetime. (Cloudpickling a datetime cost ~7 us, 11% of the demo's
  aggregate island; the state ~0.3 us to encode, ~0.1 us to decode);
* numpy arrays, Arrow tables/record batches and bytes-likes of ``LARGE_BYTES`` or more are put in the
  object store and travel as references, so they are never copied through msgpack and are read
  zero-copy on the receiving side (a ``bytes`` value comes back as a copy of the stored one). msgpack packs
  ``bytes``, ``bytearray`` and ``memoryview`` itself, without asking the hook, so a frame whose payload came
  out ``LARGE_BYTES`` or more (frames are cut below that by their elements' sizes, so this is a frame holding
  a large element) is encoded again with each such value of ``LARGE_BYTES`` or more, at any depth of lists,
  tuples and dict values, marked for the store (``_LargeBytes``): large ``bytes`` count in a channel's store
  budget as arrays do, instead of riding in payloads bounded only by the channel's window. They arrive as
  ``bytes``, as they do through msgpack. The reference list is a separate call argument, so Ray tracks the
  references (the receiver borrows them). ``encode_message`` can report the bytes each one takes in the store
  (``stored_size``): a channel bounds what its elements hold there with them (``boundaries``, DESIGN 6);
* an element that is itself a Ray ``ObjectRef`` (``map_remote(fetch=False)``, ``ray.put`` in a ``map``) goes
  in the same list inside a ``PassedRef`` holder: Ray tracks it as a nested reference, and the receiver gets
  the ref back without fetching its value (an ObjectRef pickled into the payload would lose its owner).

``encode_message`` puts the channel id and the frame's sequence number into the same payload, so that a
frame is a single small call argument (Ray deserializes every call argument on its own).

**Columnar frames.** A frame whose elements are plain dicts with the same ``str`` keys in the same order (rows:
what ``Source.from_spark`` and most user maps give), optionally followed by up to two non-dict tail items
(a boundary's ``FrameTimestamps``/``FrameSignals``), travels as columns: the keys once, then one msgpack array
of values per key, each value encoded exactly as in a row (same rules, same extensions), and the tail items as
themselves. The receiver builds the dicts again with a comprehension specialised to the number of keys: equal
dicts, same key order, same value types. The choice is made per frame by :func:`columns_of`, a check at C speed
(``map``/``zip``/``count`` over the frame); any frame that does not fit goes row by row as before. (Keys are
checked for type in the first row; a later row's key equal to it is taken as that key: an equal ``str``
subclass key there comes back as the ``str``.)

Measured (4096 rows of 4 fields int/int/str/float, one core, a process holding 300k live objects as an island
does): row by row encodes in ~0.43 ms and decodes in ~1.03 ms; columns encode in ~0.70 ms and decode in
~0.66 ms (7% less CPU per frame in all, and the receiving side, often the busier one, does 35% less), and the
payload is 40% smaller. Both sides keep the cyclic garbage collector off while they walk or build the rows:
with it on, the check's per-row iterators set off a dozen collections a frame, each walking the island's live
objects, and columns cost the sender 2-4x more. Typed buffers for int/float columns (``array``) and pickled
columns were measured too and were slower to encode for no gain in decoding; Arrow record batches lose Python
types (``int`` vs ``bool``, nested values) and cost ~5 ms per frame to build. ``benchmarks/channel_rows.py``
measures both encodings end to end.

**Numeric frames.** A frame of at least ``NUMERIC_MIN`` elements that are all exact ``int`` (not ``bool``, not a
subclass, not a numpy integer) within int32, or all exact ``float``, optionally followed by up to two boundary tail
items, travels as its kind (int32 or float64) and one bytes value holding the elements as little-endian machine
values (``struct.pack``), then the tail items as themselves; the receiver reads them back with ``array.frombytes``
+ ``tolist``: the same ints and floats (a float's bits exactly: ``-0.0``, ``nan``, ``inf``). A ``bool``, any other
type or an int past int32 among the elements sends the frame the usual way. Ints past int32 are left to msgpack on
purpose: ``struct`` converts an int of two or more 30-bit digits several times slower (int64 packing measured
~77 us per 4096 against msgpack's ~50 us). The exact-type check (``list(map(type, frame)).count``) is about half
the encoding cost. Measured per frame of 4096 (A/B in one process, medians): ints between 65536 and 2**31 encode in
~46 us against ~49 us and decode in ~35 us against ~46 us, 20% smaller (msgpack spends five bytes on each; a
16384-element frame stays under the byte budget); floats ~44 us against ~52 us and ~36 us against ~50 us; ints
below 65536 (one to three msgpack bytes) encode ~7 us slower and decode ~9 us faster.
"""
from __future__ import annotations

import datetime as _dt
import gc
import os
import struct
import sys
import weakref
from array import array as _array
from typing import Any, Callable, Dict, List, Optional, Tuple

import cloudpickle
import msgpack

EXT_PICKLE = 1
EXT_REF = 2
EXT_TUPLE = 3
#: a ``datetime`` (exactly that type) without tzinfo or with a fixed-offset ``datetime.timezone``: its pickled state
EXT_DATETIME = 4
#: a ``date`` (exactly that type): its pickled state
EXT_DATE = 5
#: a numeric frame's kind (module docstring): its elements are little-endian int32 / float64 values
NUM_INT32 = 0
NUM_FLOAT64 = 1

#: the size of a datetime's pickled state (``datetime(state[, tzinfo])`` makes it again, ~55 ns; a date's: 4 bytes)
_DT_STATE = 10
_datetime = _dt.datetime
_date = _dt.date
_timezone = _dt.timezone

LARGE_BYTES = 100 * 1024

#: columnar frames on (``ATOLL_FRAME_COLUMNS=0`` in an island's environment, or :func:`set_columns`, turns them
#: off for the frames that process sends: the row-by-row encoding, e.g. to compare; decoding reads both)
COLUMNS = os.environ.get("ATOLL_FRAME_COLUMNS", "1") != "0"
#: a frame of at least this many rows goes as columns (below, the check costs more than it saves)
COLUMNS_MIN_ROWS = 8
#: frames with up to this many trailing non-dict items (boundary tails) still go as columns
MAX_TAIL = 2
#: numeric frames on (``ATOLL_FRAME_NUMERIC=0`` or :func:`set_numeric` turns them off for the frames that process
#: sends; decoding reads both)
NUMERIC = os.environ.get("ATOLL_FRAME_NUMERIC", "1") != "0"
#: a frame of at least this many numbers goes as a numeric frame (below, the check and the pack cost more than the
#: decoding saves: measured encode + decode break even between 256 and 384 ints)
NUMERIC_MIN = 256
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_struct_error = struct.error
#: array typecodes of the numeric kinds (``i`` is 4 bytes and ``d`` 8 on every platform Ray runs on)
_TYPECODES = ("i", "d")
_BIG_ENDIAN = sys.byteorder == "big"
#: ``struct.Struct`` per (kind, count): packing through one skips the format string's build and cache lookup
_STRUCTS: Dict[Tuple[int, int], struct.Struct] = {}
_MAX_STRUCTS = 64

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


class _LargeBytes:
    """A ``bytes``/``bytearray``/``memoryview`` value of ``LARGE_BYTES`` or more, marked to go through the object store
    (msgpack packs those types itself and never hands them to the hook)."""

    __slots__ = ("data",)

    def __init__(self, data):
        self.data = data



def _large_bytes_marked(value: Any) -> Any:
    """``value`` with every ``bytes``/``bytearray``/``memoryview`` of ``LARGE_BYTES`` or more in it, at any depth of
    lists, tuples and dict values (exactly those types), replaced by a ``_LargeBytes`` holder; the containers holding
    one are copied (the caller's objects are never changed), ``value`` itself comes back when nothing was replaced."""
    t = type(value)
    if t is bytes or t is bytearray or t is memoryview:
        return _LargeBytes(value) if (value.nbytes if t is memoryview else len(value)) >= LARGE_BYTES else value
    if t is list or t is tuple:
        out = None
        for i, v in enumerate(value):
            w = _large_bytes_marked(v)
            if w is not v:
                if out is None:
                    out = list(value)
                out[i] = w
        if out is None:
            return value
        return out if t is list else tuple(out)
    if t is dict:
        out = None
        for k, v in value.items():
            w = _large_bytes_marked(v)
            if w is not v:
                if out is None:
                    out = dict(value)
                out[k] = w
        return value if out is None else out
    return value


def _may_hold_large_bytes(payload: bytes) -> bool:
    """Whether ``payload`` may hold a bytes value of ``LARGE_BYTES`` or more packed by msgpack: one always starts with a
    ``bin 32`` header (``0xc6`` and its length, big-endian) whose length fits in what follows it. A C-speed search for
    the marker byte; a match that is not a header (the byte inside other data) only costs the exact check after it."""
    find = payload.find
    end = len(payload)
    i = find(b"\xc6")
    while 0 <= i <= end - 5:
        n = int.from_bytes(payload[i + 1:i + 5], "big")
        if LARGE_BYTES <= n <= end - i - 5:
            return True
        i = find(b"\xc6", i + 1)
    return False


def _large_bytes_to_store(payload: bytes, frame: List[Any]) -> Optional[List[Any]]:
    """For a frame whose encoding ``payload`` came out ``LARGE_BYTES`` or more: ``frame`` with its large bytes values
    marked for the object store (module docstring), to be encoded again; ``None`` when it holds none."""
    if not _may_hold_large_bytes(payload):
        return None
    marked = _large_bytes_marked(frame)
    return None if marked is frame else marked


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


def stored_size(obj: Any) -> int:
    """The bytes ``obj``, an object the encoder puts into the object store, occupies there (its data; the few hundred
    bytes of Ray's and pickle's headers are not counted): a bytes-like's length; an Arrow table's or batch's buffers
    (what it pickles with: a slice's parent buffers, ``_compacted`` leaves up to twice its rows' bytes) or its rows'
    bytes when more (a buffer shared by several columns or chunks counts once in the first, each time in the
    second); a numpy array's ``nbytes``."""
    if isinstance(obj, (bytes, bytearray)):
        return len(obj)
    if isinstance(obj, memoryview):
        return obj.nbytes
    pa = _pa
    if pa is not None and isinstance(obj, (pa.Table, pa.RecordBatch)):
        return max(obj.get_total_buffer_size(), obj.nbytes)
    return int(getattr(obj, "nbytes", 0) or 0)


def _encoder(refs: list, sizes: Optional[list] = None):
    global _LARGE
    if _LARGE is None:
        _LARGE = _large_types()
    large = _LARGE
    object_ref = _object_ref_type()

    def default(obj):
        t = type(obj)
        if t is tuple:
            return msgpack.ExtType(EXT_TUPLE, msgpack.packb(list(obj), default=itself(), strict_types=True,
                                                            use_bin_type=True))
        if t is _datetime:
            packed = _pack_datetime(obj)
            if packed is not None:
                return packed
        elif t is _date:
            return msgpack.ExtType(EXT_DATE, obj.__reduce_ex__(4)[1][0])
        elif t is _LargeBytes:
            obj = obj.data
            if type(obj) is not bytes:
                obj = bytes(obj)  # a bytearray or memoryview arrives as bytes, as through msgpack
        if isinstance(obj, large) or (isinstance(obj, (bytes, bytearray, memoryview)) and len(obj) >= LARGE_BYTES):
            import ray

            obj = _compacted(obj)
            refs.append(ray.put(obj))
            if sizes is not None:
                sizes.append(stored_size(obj))
            return msgpack.ExtType(EXT_REF, msgpack.packb(len(refs) - 1))
        if object_ref is not None and isinstance(obj, object_ref):
            refs.append(PassedRef(obj))
            return msgpack.ExtType(EXT_REF, msgpack.packb(len(refs) - 1))
        return msgpack.ExtType(EXT_PICKLE, cloudpickle.dumps(obj))

    # the hook reaches itself (tuples recurse) through a weak reference: a closure holding itself is a reference
    # cycle, which kept ``refs`` - the frame's objects in the object store - alive after the frame was sent, until
    # the cyclic garbage collector ran (the store filled with sent frames and Ray spilled them)
    itself = weakref.ref(default)
    return default


def _compacted(obj: Any) -> Any:
    """``obj``, or for an Arrow table or batch that is a slice of larger buffers a copy holding only its own rows:
    Arrow pickles a slice with its parent's buffers whole, so a quarter of a Spark partition would go into the
    object store as the whole partition (chunks of a table are compacted one by one, the chunking kept)."""
    pa = _pa
    if pa is None or not isinstance(obj, (pa.Table, pa.RecordBatch)) or not hasattr(pa, "concat_batches"):
        return obj
    if obj.get_total_buffer_size() <= 2 * obj.nbytes + 65536:
        return obj
    if isinstance(obj, pa.RecordBatch):
        return pa.concat_batches([obj])
    return pa.Table.from_batches([pa.concat_batches([b]) for b in obj.to_batches()], schema=obj.schema)


def _pack_datetime(d: _dt.datetime) -> Optional[msgpack.ExtType]:
    """``d`` as an ``EXT_DATETIME``: the 10 bytes of its pickled state (fields, microseconds, ``fold``), then a fixed-
    offset timezone's offset and name; ``None`` for another tzinfo (it is pickled)."""
    state = d.__reduce_ex__(4)[1]
    if len(state) == 1:
        return msgpack.ExtType(EXT_DATETIME, state[0])
    tz = state[1]
    if type(tz) is not _timezone:
        return None
    # timezone(offset[, name]): what it was made with (timezone.utc is timezone(timedelta(0)), the same object)
    args = tz.__getinitargs__()
    off = args[0]
    extra = [off.days, off.seconds, off.microseconds] + ([args[1]] if len(args) > 1 else [])
    return msgpack.ExtType(EXT_DATETIME, state[0] + msgpack.packb(extra, use_bin_type=True))


def _unpack_datetime(data: bytes) -> _dt.datetime:
    if len(data) == _DT_STATE:
        return _datetime(data)
    extra = msgpack.unpackb(data[_DT_STATE:], raw=False)
    return _datetime(data[:_DT_STATE], _timezone(_dt.timedelta(extra[0], extra[1], extra[2]), *extra[3:]))


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
        if code == EXT_DATETIME:
            return _unpack_datetime(data)
        if code == EXT_TUPLE:
            return tuple(msgpack.unpackb(data, ext_hook=itself(), raw=False, strict_map_key=False))
        if code == EXT_DATE:
            return _date(data)
        if code == EXT_REF:
            return fetched[msgpack.unpackb(data)]
        if code == EXT_PICKLE:
            return cloudpickle.loads(data)
        raise ValueError(f"unknown frame extension type {code}")

    # through a weak reference, as the encoder's hook: a cycle kept ``fetched`` - zero-copy views of the frame's
    # objects in the object store - alive after the frame was decoded, until the cyclic garbage collector ran
    itself = weakref.ref(ext_hook)
    return ext_hook


def _numbers(kind: int, data: bytes) -> list:
    """The elements of a numeric frame: exact ``int``/``float`` values."""
    a = _array(_TYPECODES[kind])
    a.frombytes(data)
    if _BIG_ENDIAN:  # pragma: no cover - the values travel little-endian
        a.byteswap()
    return a.tolist()


def _struct(kind: int, n: int) -> struct.Struct:
    st = _STRUCTS.get((kind, n))
    if st is None:
        if len(_STRUCTS) >= _MAX_STRUCTS:
            _STRUCTS.clear()
        st = _STRUCTS[(kind, n)] = struct.Struct(f"<{n}{_TYPECODES[kind]}")
    return st


def numeric_of(frame: List[Any]) -> Optional[Tuple[int, bytes, list]]:
    """``(kind, data, tail)`` when ``frame`` is at least ``NUMERIC_MIN`` exact ``int`` values within int32 or exact
    ``float`` values, followed by at most ``MAX_TAIL`` items of other types (``tail``); ``None`` otherwise."""
    n = len(frame)
    if n < NUMERIC_MIN or not NUMERIC:
        return None
    t = type(frame[0])
    if t is not int and t is not float:
        return None
    split = _split_tail(frame, t, NUMERIC_MIN)
    if split is None:
        return None
    frame, tail = split
    n = len(frame)
    # ints past int32 go the usual way: struct converts an int of more than one 30-bit digit ~4x slower than one of
    # one digit, and msgpack then encodes faster than the type check and the pack together (first and last
    # element here, before the check; any other element by the pack)
    if t is int and not (_INT32_MIN <= frame[0] <= _INT32_MAX and _INT32_MIN <= frame[n - 1] <= _INT32_MAX):
        return None
    if list(map(type, frame)).count(t) != n:
        return None  # another type among the elements (bool, a subclass, numpy scalars ...)
    if t is float:
        return NUM_FLOAT64, _struct(NUM_FLOAT64, n).pack(*frame), tail
    try:
        return NUM_INT32, _struct(NUM_INT32, n).pack(*frame), tail
    except _struct_error:
        return None  # an element past int32


def _split_tail(frame: List[Any], body_type: type, least: int) -> Optional[Tuple[List[Any], list]]:
    """``(body, tail)``: ``frame`` less its trailing items of types other than ``body_type`` (boundary tail items,
    at most ``MAX_TAIL``; ``frame[0]`` is of ``body_type``, so the search stops before it); ``None`` when more
    trail or fewer than ``least`` elements remain."""
    n = len(frame)
    k = 0
    while k <= MAX_TAIL and type(frame[n - 1 - k]) is not body_type:
        k += 1
    if not k:
        return frame, []
    if k > MAX_TAIL or n - k < least:
        return None
    return frame[:n - k], frame[n - k:]


def set_numeric(enabled: bool) -> None:
    """Send frames of plain ints/floats as numeric frames (the default) or the usual way, from this process on (for
    measurements)."""
    global NUMERIC
    NUMERIC = bool(enabled)


def set_columns(enabled: bool) -> None:
    """Send rows as columns (the default) or row by row, from this process on (for measurements)."""
    global COLUMNS
    COLUMNS = bool(enabled)


def columns_of(frame: List[Any]) -> Optional[Tuple[list, list, list]]:
    """``(keys, columns, tail)`` when ``frame`` is at least ``COLUMNS_MIN_ROWS`` plain dicts with the same ``str``
    keys in the same order (at least one key), followed by at most ``MAX_TAIL`` non-dict items (``tail``);
    ``None`` otherwise. ``columns[i]`` lists the rows' values for ``keys[i]``, in row order."""
    n = len(frame)
    if n < COLUMNS_MIN_ROWS or type(frame[0]) is not dict or not COLUMNS:
        return None
    split = _split_tail(frame, dict, COLUMNS_MIN_ROWS)
    if split is None:
        return None
    frame, tail = split
    n = len(frame)
    first = frame[0]
    width = len(first)
    if not width:
        return None
    if len(set(map(type, frame))) != 1 or len(set(map(len, frame))) != 1:
        return None  # a non-dict (or dict subclass) among the rows, or rows of different sizes
    # rows of one size: position i of every row's key sequence must equal the first row's key i, an exact str
    # (equal to it, a later row's key is a str too, or a str subclass: see the module docstring)
    keys = list(first)
    for k in keys:
        if type(k) is not str:
            return None
    # zip(*frame) makes an iterator per row: keep the cyclic collector from running a dozen times meanwhile
    enabled = gc.isenabled()
    if enabled:
        gc.disable()
    try:
        for k, at_i in zip(keys, zip(*frame)):
            if at_i.count(k) != n:
                return None
    finally:
        if enabled:
            gc.enable()
    return keys, [[r[k] for r in frame] for k in keys], tail


from ..._rows import rows_of  # noqa: E402 - the builder of columnar frames (shared with interop)


def encode(frame: List[Any]) -> Tuple[bytes, list]:
    """``frame`` -> (payload, object refs); rows sharing their keys go as columns (``[keys, tail, *columns]``),
    plain numbers as ``[kind, data, tail]``, anything else as ``[frame]``. Large bytes values go through the store
    as in :func:`encode_message`."""
    refs: list = []
    nums = None
    cols = columns_of(frame)
    if cols is not None:
        body = [cols[0], cols[2], *cols[1]]
    else:
        nums = numeric_of(frame)
        body = [frame] if nums is None else list(nums)
    payload = msgpack.packb(body, default=_encoder(refs), strict_types=True, use_bin_type=True)
    if len(payload) >= LARGE_BYTES and nums is None:
        marked = _large_bytes_to_store(payload, frame)
        if marked is not None:
            return encode(marked)
    return payload, refs


def _frame_of(body: list, start: int) -> List[Any]:
    """The frame in ``body[start:]``: ``[frame]``, ``[kind, data, tail]`` or ``[keys, tail, *columns]``."""
    if len(body) == start + 1:
        return body[start]
    if type(body[start]) is int:
        frame = _numbers(body[start], body[start + 1])
        frame += body[start + 2]
        return frame
    return rows_of(body[start], body[start + 2:], body[start + 1])


def decode(payload: bytes, refs: list) -> List[Any]:
    """(payload, object refs) -> frame; referenced payloads are fetched (zero-copy when possible)."""
    return _frame_of(msgpack.unpackb(payload, ext_hook=_ext_hook(refs), raw=False, strict_map_key=False), 0)


def encode_message(ch: int, seq: int, frame: List[Any], sizes: Optional[list] = None) -> Tuple[bytes, list]:
    """Frame ``seq`` of channel ``ch`` -> (payload, object refs): one bytes value carries the channel
    id, the sequence number and the frame, so that a frame is one small call argument (Ray
    deserializes each call argument separately). ``sizes``: a list to which the bytes of each object the frame put
    into the object store are appended (``stored_size``; an element that is itself an ``ObjectRef`` was put there by
    someone else and is not counted)."""
    refs: list = []
    nums = None
    cols = columns_of(frame)
    if cols is not None:
        body = [ch, seq, cols[0], cols[2], *cols[1]]
    else:
        nums = numeric_of(frame)
        if nums is None:
            body = [ch, seq, frame]
        elif nums[2]:
            body = [ch, seq, nums[0], nums[1], nums[2]]
        else:  # ints, floats and bytes only: no extension hook needed
            return msgpack.packb([ch, seq, nums[0], nums[1]], use_bin_type=True), refs
    payload = msgpack.packb(body, default=_encoder(refs, sizes), strict_types=True, use_bin_type=True)
    if len(payload) >= LARGE_BYTES and nums is None:
        marked = _large_bytes_to_store(payload, frame)
        if marked is not None:
            # the refs of this first encoding are dropped (Ray frees their objects), the sizes it reported forgotten
            if sizes is not None:
                sizes.clear()
            return encode_message(ch, seq, marked, sizes)
    return payload, refs


def decode_message(payload: bytes, refs: Optional[list]) -> Tuple[int, int, List[Any]]:
    """(payload, object refs) of ``encode_message`` -> (channel id, sequence number, frame)."""
    body = msgpack.unpackb(payload, ext_hook=_ext_hook(refs), raw=False, strict_map_key=False, use_list=True)
    n = len(body)
    if n == 3:
        return body[0], body[1], body[2]
    if n == 4:  # numbers
        return body[0], body[1], _numbers(body[2], body[3])
    if type(body[2]) is int:  # numbers and their tail
        frame = _numbers(body[2], body[3])
        frame += body[4]
        return body[0], body[1], frame
    return body[0], body[1], rows_of(body[2], body[4:], body[3])
