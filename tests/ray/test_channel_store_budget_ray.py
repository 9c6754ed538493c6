"""A channel of large elements (passed through Ray's object store by reference) holds a bounded number of bytes of
the store, with ``Materializer.ray()``'s defaults, whatever its input buffer in elements: a stream of 4x the store's
capacity in 1 MiB numpy arrays, Arrow record batches or `bytes` values crosses from one island to a slower one
without spilling.

The module runs in a Ray session of its own with a small object store (``STORE_BYTES``), sampled every 50 ms while
the stream runs: primary copies (``held``: objects some process references, what Ray must keep or spill), spilled
bytes and fallback bytes (objects allocated outside the store because it was full)."""
from __future__ import annotations

import threading
import time

import pytest
import ray

from atoll import Materializer, Sink, Source
from atoll.testkit import assert_all_stages_stopped
from ray_start import start_local_ray

#: Ray's smallest object store (78643200 bytes) rounded up: the stream below is 4x this
STORE_BYTES = 80 * 1024 * 1024
MIB = 1024 * 1024
ELEMENT = MIB


@pytest.fixture(scope="module")
def ray_session():
    """Ray with a small object store (2 CPUs, no dashboard), for this module only."""
    start_local_ray(__file__, num_cpus=2, include_dashboard=False, object_store_memory=STORE_BYTES)
    yield
    ray.shutdown()


def store_stats() -> dict:
    """The object store's figures (one node), in bytes (as in tests/interop/test_spark_on_demand.py)."""
    from ray._private.internal_api import get_memory_info_reply, get_state_from_address

    stats = get_memory_info_reply(get_state_from_address(ray.get_runtime_context().gcs_address)).store_stats
    return {"used": stats.object_store_bytes_used, "avail": stats.object_store_bytes_avail,
            "held": stats.object_store_bytes_primary_copy, "spilled": stats.spilled_bytes_total,
            "fallback": stats.object_store_bytes_fallback}


def numpy_element(i: int):
    import numpy as np

    return np.full(ELEMENT // 8, i, dtype=np.int64)  # 1 MiB


def arrow_element(i: int):
    import numpy as np
    import pyarrow as pa

    return pa.record_batch([pa.array(np.full(ELEMENT // 8, i, dtype=np.int64))], names=["v"])  # 1 MiB


def bytes_element(i: int) -> bytes:
    return i.to_bytes(8, "big") * (ELEMENT // 8)  # 1 MiB: msgpack would pack it into the frame's payload itself


def first_value(x) -> int:
    if isinstance(x, bytes):
        return int.from_bytes(x[:8], "big")
    return int(x[0]) if not hasattr(x, "column") else x.column(0)[0].as_py()


class StoreSampler:
    """Samples the store every 50 ms from a thread while in a ``with`` block: the peak of each figure; and, with a
    materializer, the most elements its graphs' input boundaries held buffered (``buffered``, from the islands'
    own reports)."""

    def __init__(self, mat=None):
        self.before = store_stats()
        self.peak = dict(self.before)
        self.buffered = 0
        self._mat = mat
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._done.wait(0.05):
            now = store_stats()
            for k in ("used", "held", "fallback"):
                self.peak[k] = max(self.peak[k], now[k])
            for graph in self._mat.running_graphs() if self._mat is not None else ():
                for island in graph.islands():
                    for inp in island.get("inputs") or ():
                        self.buffered = max(self.buffered, inp["buffered"])

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()
        self.after = store_stats()


def slow(x):
    time.sleep(0.02)  # the consumer is slower than the source: the channel fills up to what it may hold
    return first_value(x)


@pytest.mark.parametrize("make", [numpy_element, arrow_element, bytes_element], ids=["numpy", "arrow", "bytes"])
def test_a_stream_of_4x_the_store_in_large_elements_crosses_a_channel_to_a_slow_consumer(ray_session, make):
    capacity = int(ray.cluster_resources()["object_store_memory"])  # (used + avail grows once objects were freed)
    n = 4 * capacity // ELEMENT + 1
    m = Materializer.ray(start_timeout=60)
    try:
        budget = m.settings.channel_store_bytes
        assert budget == min(64 * MIB, capacity // 8)
        with StoreSampler(m) as store:
            total = (Source.range(0, n).map(make).island()
                     .map(slow).run_with(Sink.fold(0, lambda a, b: a + b), m).result(300))
    finally:
        assert_all_stages_stopped(m, timeout=15.0)
        m.shutdown()
    assert total == n * (n - 1) // 2
    # In flight, buffered at the receiver and handed downstream in a chunk, the channel holds at most its budget
    # (1 MiB elements are below a quarter of it, so they fit it exactly, see RaySettings); the store holds those
    # and the header of each (a few hundred bytes).
    bound = budget + 64 * 1024
    held = store.peak["held"] - store.before["held"]
    spilled = store.after["spilled"] - store.before["spilled"]
    print(f"\n{make.__name__}: store {capacity / MIB:.0f} MiB, stream {n * ELEMENT / MIB:.0f} MiB; channel budget "
          f"{budget / MIB:.1f} MiB; peak held {held / MIB:.1f} MiB (bound {bound / MIB:.1f}), peak used "
          f"{store.peak['used'] / MIB:.1f} MiB, spilled {spilled / MIB:.1f} MiB, "
          f"peak fallback {store.peak['fallback'] / MIB:.1f} MiB; at most {store.buffered} elements buffered")
    assert held <= bound
    assert spilled == 0
    assert store.peak["fallback"] == 0
    # the receiver's buffer is what the publisher may have sent and the receiver not handed on: its share of the
    # budget (three quarters; by elements its input buffer would take 65536)
    assert store.buffered * ELEMENT <= budget - budget // 4


def mixed_element(i: int):
    """Ints, 200 KB bytes and numpy arrays of 64 KiB to 3 MiB (both passed by reference), in runs of varying length:
    the sizes the sender expects are wrong now and then."""
    import numpy as np

    run = (i // 7) % 4 if i % 97 else 3
    if run == 0:
        return i
    if run == 1:
        return i.to_bytes(4, "big") * 50_000
    return np.full((1 + (i * 37) % 48) * 8192, i, dtype=np.int64)


def signature(x):
    if isinstance(x, int):
        return ("int", x)
    if isinstance(x, bytes):
        return ("bytes", len(x), int.from_bytes(x[:4], "big"))
    return ("array", len(x), int(x[0]), int(x[-1]))


def test_large_and_small_elements_mixed_arrive_exactly_in_order(ray_session):
    n = 1500
    m = Materializer.ray(start_timeout=60)
    try:
        with StoreSampler() as store:
            got = (Source.range(0, n).map(mixed_element).island()
                   .map(signature).run_with(Sink.seq(), m).result(300))
    finally:
        assert_all_stages_stopped(m, timeout=15.0)
        m.shutdown()
    assert got == [signature(mixed_element(i)) for i in range(n)]
    assert store.after["spilled"] == store.before["spilled"]


def test_a_frame_reports_the_store_bytes_of_what_it_put_there(ray_session):
    import numpy as np
    import pyarrow as pa

    from atoll._impl.actors.codec import decode_message, encode_message

    batch = pa.record_batch([pa.array(np.arange(40_000, dtype=np.int64))], names=["v"])  # 320,000 bytes
    passed = ray.put(np.zeros(10))  # an ObjectRef element: someone else's object, not counted
    frame = [1, np.zeros(1000), batch.slice(0, 10_000), (np.ones(10), np.ones(20)), passed, b"w" * 200_000]
    sizes: list = []
    payload, refs = encode_message(3, 0, frame, sizes)
    # the array, the slice's own rows (not its parent's buffers), the tuple's two arrays and the large bytes value
    # (which msgpack would have packed into the payload); each object counted once although the frame was encoded
    # twice (the first payload came out large)
    assert sizes == [8_000, 80_000, 80, 160, 200_000]
    assert len(refs) == 6 and len(payload) < 1_000
    ch, seq, got = decode_message(payload, refs)
    assert (ch, seq, got[0], got[2].num_rows, got[4], got[5]) == (3, 0, 1, 10_000, passed, b"w" * 200_000)
    assert type(got[5]) is bytes


def test_large_bytes_values_go_through_the_store_at_any_depth_and_arrive_as_they_left(ray_session):
    from atoll._impl.actors.codec import LARGE_BYTES, decode_message, encode, decode, encode_message

    big = b"b" * LARGE_BYTES
    rows = [{"id": i, "blob": big if i == 3 else b"s", "meta": (i, [bytearray(b"a" * LARGE_BYTES)] if i == 5 else [])}
            for i in range(10)]
    frame = rows + [(memoryview(b"m" * (LARGE_BYTES + 1)), "x"), b"c" * (LARGE_BYTES - 1), "tail"]
    before = [dict(r) for r in rows]
    sizes: list = []
    payload, refs = encode_message(7, 2, frame, sizes)
    # the three large values by reference (bytearray and memoryview copied to bytes first); the one just under
    # ``LARGE_BYTES`` stays in the payload
    assert sizes == [LARGE_BYTES, LARGE_BYTES, LARGE_BYTES + 1]
    assert len(refs) == 3 and LARGE_BYTES - 1 < len(payload) < LARGE_BYTES + 1_000
    ch, seq, got = decode_message(payload, refs)
    # as through msgpack: bytearray and memoryview arrive as bytes, everything else as it was
    expected = [dict(r, meta=(r["meta"][0], [bytes(b) for b in r["meta"][1]])) for r in rows]
    expected += [(b"m" * (LARGE_BYTES + 1), "x"), b"c" * (LARGE_BYTES - 1), "tail"]
    assert (ch, seq) == (7, 2) and got == expected
    assert [type(x["blob"]) for x in got[:10]] == [bytes] * 10 and type(got[5]["meta"][1][0]) is bytes
    assert type(got[10]) is tuple and type(got[10][0]) is bytes
    # the caller's rows were not changed (the containers holding a large value were copied for the encoding)
    assert rows == before and type(rows[5]["meta"][1][0]) is bytearray
    # the frame codec without a channel does the same
    payload2, refs2 = encode(frame)
    assert len(refs2) == 3 and decode(payload2, refs2) == expected


def test_a_large_payload_of_small_values_is_encoded_once(ray_session):
    from atoll._impl.actors import codec

    frame = [{"k": i, "v": "x" * 100} for i in range(2_000)]  # ~230 KB of rows, no value large on its own
    calls = []
    real = codec.encode_message

    def counting(*args):
        calls.append(args[:2])
        return real(*args)

    codec.encode_message = counting  # what a second encoding would call
    try:
        sizes: list = []
        payload, refs = counting(1, 0, frame, sizes)
    finally:
        codec.encode_message = real
    assert calls == [(1, 0)] and refs == [] and sizes == [] and len(payload) > codec.LARGE_BYTES
    assert codec.decode_message(payload, refs)[2] == frame
