"""The channel codec's numeric frames: frames of exact ints within int32 or exact floats travel as packed machine
values and come back as the very same Python values and types; anything else in a frame (a ``bool``, an int
subclass, an int past int32, a mixed frame) sends it the usual way, still exactly.

"Exactly" is checked by ``same`` (types all the way down; a float's sign and nan-ness too).
"""
from __future__ import annotations

import enum
import math

import msgpack
import pytest

from atoll._impl.actors import codec
from atoll._impl.islands.boundaries import FrameSignals, FrameTimestamps
from channel_kit import same


INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)


class MyInt(int):
    pass


class MyFloat(float):
    pass


class Colour(enum.IntEnum):
    RED = 1


def roundtrip(frame):
    """``frame`` through ``encode_message``/``decode_message`` and ``encode``/``decode``; the decoded frame and
    the message payload."""
    payload, refs = codec.encode_message(3, 5, frame)
    assert refs == []
    ch, seq, got = codec.decode_message(payload, None)
    assert (ch, seq) == (3, 5)
    payload2, refs2 = codec.encode(frame)
    got2 = codec.decode(payload2, refs2)
    assert same(got, frame), (got, frame)
    assert same(got2, frame), (got2, frame)
    return got, payload


def ext_code(payload: bytes):
    """The numeric kind of a message payload (``[ch, seq, kind, data(, tail)]``), or ``None`` when the frame went
    another way."""
    body = msgpack.unpackb(payload, raw=False, strict_map_key=False, ext_hook=lambda code, data: ("ext", code))
    if len(body) in (4, 5) and type(body[2]) is int:
        assert type(body[3]) is bytes
        return body[2]
    return None


#: a numeric frame's least length
N = codec.NUMERIC_MIN


def ints(n: int = N, start: int = 0) -> list:
    return list(range(start, start + n))


def floats(n: int = N) -> list:
    return [i / 4 for i in range(n)]


def test_small_ints_go_as_int32():
    frame = ints(N + 5, -5)
    got, payload = roundtrip(frame)
    assert ext_code(payload) == codec.NUM_INT32
    assert all(type(x) is int for x in got)


def test_int32_bounds_exactly():
    frame = [-(1 << 31), INT32_MAX] * N
    got, payload = roundtrip(frame)
    assert ext_code(payload) == codec.NUM_INT32


@pytest.mark.parametrize("past", [INT32_MAX + 1, -(1 << 31) - 1, 1 << 40, INT64_MIN, INT64_MAX])
def test_ints_past_int32_go_the_usual_way(past):
    for frame in ([past] + ints(), ints() + [past], ints(N // 2) + [past] + ints(N // 2)):
        got, payload = roundtrip(frame)
        assert ext_code(payload) is None
        assert got[frame.index(past)] == past


@pytest.mark.parametrize("big", [INT64_MAX + 1, INT64_MIN - 1, 1 << 64, 1 << 100, -(1 << 70)])
def test_ints_beyond_int64_go_the_usual_way(big):
    got, payload = roundtrip(ints() + [big])
    assert ext_code(payload) is None
    assert got[-1] == big and type(got[-1]) is int
    got, payload = roundtrip(ints(N // 2) + [big] + ints(N // 2))
    assert ext_code(payload) is None
    assert got[N // 2] == big


def test_floats_exact_including_specials():
    specials = [0.0, -0.0, math.nan, math.inf, -math.inf, 5e-324, 1.7976931348623157e308, 0.1, -2.5, 3.0]
    frame = specials + floats()
    got, payload = roundtrip(frame)
    assert ext_code(payload) == codec.NUM_FLOAT64
    assert math.copysign(1.0, got[1]) == -1.0
    assert math.isnan(got[2])
    assert all(type(x) is float for x in got)


@pytest.mark.parametrize("intruder", [True, False, MyInt(4), Colour.RED, 2.0, "7", None, (1,)])
@pytest.mark.parametrize("at", [0, 4, N - 1])
def test_a_non_exact_int_sends_the_frame_the_usual_way(intruder, at):
    frame = ints()
    frame[at] = intruder
    got, payload = roundtrip(frame)
    assert ext_code(payload) is None
    assert type(got[at]) is type(intruder)


@pytest.mark.parametrize("intruder", [1, True, MyFloat(1.5), None])
@pytest.mark.parametrize("at", [0, 3, N - 1])
def test_a_non_exact_float_sends_the_frame_the_usual_way(intruder, at):
    frame = floats()
    frame[at] = intruder
    got, payload = roundtrip(frame)
    assert ext_code(payload) is None
    assert type(got[at]) is type(intruder)


def test_bools_only_stay_bools():
    got, payload = roundtrip([True, False] * N)
    assert ext_code(payload) is None
    assert all(type(x) is bool for x in got)


def test_numpy_scalars_are_not_numbers_here():
    import numpy as np

    for frame in ([np.int64(i) for i in range(N)], [np.float64(i) for i in range(N)]):
        got, payload = roundtrip(frame)
        assert ext_code(payload) is None
        assert all(type(x) is type(frame[0]) for x in got)


def test_short_frames_go_the_usual_way():
    got, payload = roundtrip(ints(N - 1))
    assert ext_code(payload) is None
    got, payload = roundtrip(floats(N - 1))
    assert ext_code(payload) is None
    got, payload = roundtrip(ints(N))
    assert ext_code(payload) == codec.NUM_INT32


def test_tail_items_follow_the_numbers():
    ts = FrameTimestamps(ints(N, 100))
    sigs = FrameSignals([(3, "sig"), (N, "end")])
    for numbers, kind in ((ints(), codec.NUM_INT32), (floats(), codec.NUM_FLOAT64)):
        for tail in ([ts], [sigs], [ts, sigs]):
            got, payload = roundtrip(numbers + tail)
            body = msgpack.unpackb(payload, raw=False, ext_hook=lambda code, data: ("ext", code))
            assert len(body) == 5 and body[2] == kind and len(body[4]) == len(tail)
            assert [type(x) for x in got[N:]] == [type(x) for x in tail]


def test_more_tail_items_than_max_tail_go_the_usual_way():
    got, payload = roundtrip(ints() + ["a", "b", "c"])
    assert ext_code(payload) is None


def test_a_short_run_of_numbers_before_a_tail_goes_the_usual_way():
    got, payload = roundtrip(ints(N - 1) + [FrameSignals([(0, "s")])])
    assert ext_code(payload) is None


def test_mixed_ints_and_floats_go_the_usual_way():
    got, payload = roundtrip([1, 2.0] * N)
    assert ext_code(payload) is None
    assert [type(x) for x in got] == [int, float] * N


def test_decoded_frames_are_fresh_lists():
    for frame in (ints(), ints() + [FrameSignals([(N, "s")])]):
        payload, _ = codec.encode_message(1, 2, frame)
        _, _, a = codec.decode_message(payload, None)
        _, _, b = codec.decode_message(payload, None)
        a.append(99)
        assert type(a) is list and len(b) == len(frame)


def test_frame_sizes_changing_reuse_no_wrong_struct():
    for n in list(range(N, N + 3 * codec._MAX_STRUCTS // 2)) + [N, N + 1]:
        roundtrip(ints(n))
        roundtrip(floats(n))
    assert len(codec._STRUCTS) <= codec._MAX_STRUCTS


def test_switch_off_sends_the_usual_way():
    codec.set_numeric(False)
    try:
        got, payload = roundtrip(ints())
        assert ext_code(payload) is None
    finally:
        codec.set_numeric(True)
    got, payload = roundtrip(ints())
    assert ext_code(payload) == codec.NUM_INT32


def test_large_frame_int32_is_smaller_than_msgpack():
    frame = ints(16384, 1_000_000)
    got, payload = roundtrip(frame)
    old = msgpack.packb([3, 5, frame], use_bin_type=True)
    assert ext_code(payload) == codec.NUM_INT32
    assert len(payload) < len(old)
