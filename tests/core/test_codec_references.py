"""The channel codec lets go of a frame's references when the frame is done with: its msgpack hooks are freed by
reference counting, not left to the cyclic garbage collector. (Self-referencing hooks were a reference cycle that
kept each sent frame's object refs, and each received frame's fetched values - zero-copy views of object-store
objects - alive until the collector ran: a stream of large elements across islands filled the store and Ray
spilled them.)"""
from __future__ import annotations

import gc
import weakref

import msgpack

from atoll._impl.actors import codec


class Value:
    """An element that travels by reference (as a ``PassedRef``, which needs no Ray here)."""

    def __eq__(self, other):
        return type(other) is Value


def test_the_hooks_are_freed_without_the_cyclic_collector():
    enabled = gc.isenabled()
    gc.disable()
    try:
        refs: list = []
        encoder = codec._encoder(refs)
        gone = weakref.ref(encoder)
        assert msgpack.unpackb(msgpack.packb([(1, (2, 3))], default=encoder, strict_types=True, use_bin_type=True),
                               ext_hook=codec._ext_hook(None), raw=False) == [(1, (2, 3))]
        del encoder
        assert gone() is None
        decoder = codec._ext_hook([])
        gone = weakref.ref(decoder)
        del decoder
        assert gone() is None
    finally:
        if enabled:
            gc.enable()


def test_a_decoded_frames_fetched_values_go_with_the_frame():
    enabled = gc.isenabled()
    gc.disable()
    try:
        value = Value()
        alive = weakref.ref(value)
        payload = msgpack.packb([7, 0, [(1, msgpack.ExtType(codec.EXT_REF, msgpack.packb(0)))]], use_bin_type=True)
        refs = [codec.PassedRef(value)]
        del value
        ch, seq, frame = codec.decode_message(payload, refs)
        assert (ch, seq) == (7, 0) and frame[0][0] == 1 and frame[0][1] is alive()
        del frame, refs
        assert alive() is None
    finally:
        if enabled:
            gc.enable()


def test_an_arrow_slice_goes_into_the_store_with_only_its_own_rows():
    """Arrow pickles a slice of a table or batch with its parent's buffers whole; the codec compacts it before
    putting it into the object store (a quarter of a partition is not stored as the whole partition)."""
    import pickle

    import pyarrow as pa

    codec._encoder([])  # loads the large types (and pyarrow) as a frame would
    table = pa.table({"id": pa.array(range(40_000)), "pad": pa.array(["x" * 16] * 40_000),
                      "maybe": pa.array([None if i % 3 else i for i in range(40_000)])})
    batch = table.to_batches()[0].slice(10_000, 10_000)
    small = codec._compacted(batch)
    assert small.equals(batch) and small.schema == batch.schema
    assert len(pickle.dumps(small)) < len(pickle.dumps(batch)) / 3
    chunked = pa.Table.from_batches([table.to_batches()[0].slice(0, 5_000), batch])
    small = codec._compacted(chunked)
    assert small.equals(chunked) and [b.num_rows for b in small.to_batches()] == [5_000, 10_000]
    assert len(pickle.dumps(small)) < len(pickle.dumps(chunked)) / 2
    whole = table.to_batches()[0]
    assert codec._compacted(whole) is whole and codec._compacted(table) is table  # nothing to drop: no copy
