"""The channel codec's columnar frames: rows (dicts sharing their keys) travel as columns and come back exactly.

"Exactly" is checked by :func:`same`: equal values of the very same types, recursively, dict keys in the same
order (``==`` alone would let ``True`` pass for ``1``, a tuple for a list, or keys in another order).
"""
from __future__ import annotations

import collections
import datetime
import decimal

import pytest

from atoll._impl.actors import codec
from atoll._impl.islands.boundaries import FrameSignals, FrameTimestamps
from channel_kit import same


def roundtrip(frame):
    """``frame`` through ``encode_message``/``decode_message`` and through ``encode``/``decode``."""
    payload, refs = codec.encode_message(7, 11, frame)
    assert refs == []
    ch, seq, got = codec.decode_message(payload, None)
    assert (ch, seq) == (7, 11)
    payload2, refs2 = codec.encode(frame)
    got2 = codec.decode(payload2, refs2)
    assert same(got, got2)
    return got, payload


def old_payload(frame) -> bytes:
    """The row-by-row encoding (what every frame used before columnar frames)."""
    import msgpack

    return msgpack.packb([7, 11, frame], default=codec._encoder([]), strict_types=True, use_bin_type=True)


def rows(n, start=0):
    return [{"id": i, "twice": 2 * i, "name": f"user-{i}", "k": float(i % 7)} for i in range(start, start + n)]


def check(frame, columnar: bool):
    """``frame`` round-trips exactly, as columns when ``columnar`` (else row by row, as before)."""
    assert (codec.columns_of(frame) is not None) is columnar
    got, payload = roundtrip(frame)
    assert same(got, frame), (got[:3], frame[:3])
    assert type(got) is list
    if columnar:
        assert len(payload) < len(old_payload(frame)) or len(frame) < 64
    else:
        assert payload == old_payload(frame)
    # new objects: no row of the result is shared with another
    dict_rows = [r for r in got if type(r) is dict]
    assert len({id(r) for r in dict_rows}) == len(dict_rows)
    return got


def test_rows_of_four_fields_go_as_columns_and_come_back_exactly():
    got = check(rows(4096), columnar=True)
    assert [list(r) for r in got[:2]] == [["id", "twice", "name", "k"]] * 2


def test_values_keep_their_types_in_a_column():
    values = [True, False, 0, 1, -1, 2 ** 63 - 1, -2 ** 63, 2 ** 64 - 1, 1.0, 0.0, -0.0, float("nan"),
              float("inf"), None, "", "x", "ünïcødé", b"", b"\x00bytes", [1, [2, (3,)]],
              (1, "a", None), (), {"nested": {"deep": [1, 2.5, None, True]}}, {1: "int key", (1, 2): "tuple key"},
              decimal.Decimal("1.25"), datetime.date(2024, 1, 2), datetime.datetime(2024, 1, 2, 3, 4, 5),
              frozenset({1, 2}), {3, 4}, collections.OrderedDict(a=1), 1 + 2j]
    frame = [{"v": v, "i": i, "b": i % 2 == 0, "f": i * 0.5, "s": None if i % 3 else str(i)}
             for i, v in enumerate(values)]
    got = check(frame, columnar=True)
    assert type(got[0]["b"]) is bool and type(got[1]["i"]) is int and type(got[2]["f"]) is float
    assert got[0]["v"] is True and got[2]["v"] == 0 and type(got[2]["v"]) is int


def test_bytearray_comes_back_as_bytes_either_way():
    """msgpack packs a bytearray as binary (the row-by-row encoding did the same): bytes come back."""
    frame = [{"b": bytearray(b"x%d" % i)} for i in range(10)]
    got, _ = roundtrip(frame)
    import msgpack

    old = msgpack.unpackb(old_payload(frame), raw=False, strict_map_key=False)[2]
    assert same(got, old) and got[3]["b"] == b"x3"


def test_mixed_types_in_one_column():
    frame = [{"a": v, "b": str(i)} for i, v in enumerate([1, 1.0, True, None, "1", b"1", (1,), [1], {"1": 1}] * 4)]
    check(frame, columnar=True)


def test_key_order_is_kept_and_a_row_in_another_order_falls_back():
    frame = rows(64)
    check(frame, columnar=True)
    frame[40] = {"twice": 80, "id": 40, "name": "user-40", "k": 5.0}  # same keys, another order
    got = check(frame, columnar=False)
    assert list(got[40]) == ["twice", "id", "name", "k"] and list(got[39]) == ["id", "twice", "name", "k"]
    last = rows(64)
    last[-1] = {"id": 0, "twice": 0, "k": 0.0, "name": ""}  # the last two keys swapped
    assert list(check(last, columnar=False)[-1]) == ["id", "twice", "k", "name"]


@pytest.mark.parametrize("change", ["missing key", "extra key", "other key", "empty dict", "int keys",
                                    "bool vs int keys", "str subclass first key", "dict subclass row",
                                    "non-dict row"])
def test_heterogeneous_rows_fall_back_and_round_trip(change):
    class Key(str):
        pass

    frame = rows(32)
    r = dict(frame[10])
    if change == "missing key":
        del r["name"]
    elif change == "extra key":
        r["extra"] = 1
    elif change == "other key":
        r = {"id": 1, "twice": 2, "nom": "x", "k": 1.0}
    elif change == "empty dict":
        r = {}
    elif change == "int keys":
        frame = [{0: i, 1: -i} for i in range(32)]
        r = {0: 0, 1: 0}
    elif change == "bool vs int keys":
        frame = [{1: i} for i in range(32)]
        r = {True: 10}
    elif change == "str subclass first key":
        frame[0] = {Key("id"): 1, "twice": 2, "name": "x", "k": 1.0}
    elif change == "dict subclass row":
        r = collections.OrderedDict(r)
    else:
        r = ("id", 1)
    frame[10] = r
    got = check(frame, columnar=False)
    assert type(got[10]) is type(r)
    assert type(list(got[0])[0]) is type(list(frame[0])[0])


def test_a_later_row_with_an_equal_str_subclass_key_comes_back_equal():
    """Documented: only the first row's keys are checked for type; an equal str subclass key in a later row comes
    back as the str (the dicts are equal, key order and values exact)."""

    class Key(str):
        pass

    frame = rows(32)
    frame[10] = {Key("id"): 10, "twice": 20, "name": "user-10", "k": 3.0}
    got, _ = roundtrip(frame)
    assert got == frame and list(got[10]) == ["id", "twice", "name", "k"]
    assert all(same(g[k], f[k]) for g, f in zip(got, frame) for k in f)


def test_rows_with_keys_other_than_str_fall_back():
    check([{(1, 2): i} for i in range(16)], columnar=False)
    check([{1.5: i} for i in range(16)], columnar=False)
    check([{"a": i, 2: i} for i in range(16)], columnar=False)


def test_mixed_frames_fall_back():
    check(rows(10) + [1, 2, 3] + rows(10), columnar=False)
    check([1] + rows(20), columnar=False)
    check(["a string"] + rows(20), columnar=False)
    check([None] * 20, columnar=False)
    check(list(range(100)), columnar=False)


def test_frame_tails_travel_beside_the_columns():
    ts = FrameTimestamps(list(range(20)))
    sig = FrameSignals([(5, "sig")])
    frame = rows(20)
    for tail in ([sig], [ts], [ts, sig]):
        got = check(frame + tail, columnar=True)
        assert type(got[-1]) is type(tail[-1]) and len(got) == 20 + len(tail)
    check(frame + [ts, sig, 3], columnar=False)  # more tail items than a boundary adds
    check(frame + [{"x": 1}, sig], columnar=False)  # a row of other keys before the tail


def test_small_frames_stay_row_by_row():
    for n in range(codec.COLUMNS_MIN_ROWS):
        check(rows(n), columnar=False)
    check(rows(codec.COLUMNS_MIN_ROWS), columnar=True)
    check([], columnar=False)


@pytest.mark.parametrize("width", [1, 2, 17, 300])
def test_widths(width):
    frame = [{f"c{j}": i * width + j for j in range(width)} for i in range(20)]
    got = check(frame, columnar=True)
    assert list(got[3]) == [f"c{j}" for j in range(width)]


def test_large_frame():
    frame = [{"id": i, "s": "x" * (i % 50), "f": i / 3, "n": None if i % 5 else i, "b": bool(i & 1)}
             for i in range(200_000)]
    got = check(frame, columnar=True)
    assert got[-1] == frame[-1] and len(got) == len(frame)


def test_the_same_dict_object_repeated():
    row = {"a": 1, "b": [1, 2]}
    got = check([row] * 50, columnar=True)
    assert got[0] is not got[1] and got[0]["b"] is not got[1]["b"]


def test_decoded_keys_are_interned():
    got, _ = roundtrip(rows(16))
    assert all(k is sys_intern(k) for k in got[5])


def sys_intern(s):
    import sys

    return sys.intern(s)


def test_four_field_rows_make_a_smaller_payload():
    frame = rows(4096)
    payload, _ = codec.encode_message(1, 1, frame)
    assert len(payload) < 0.7 * len(old_payload(frame))
    assert len(payload) < 102_400  # Ray passes arguments up to 100 KiB inline


def test_columns_can_be_switched_off_and_either_encoding_decodes():
    frame = rows(100)
    columnar, _ = codec.encode_message(7, 11, frame)
    codec.set_columns(False)
    try:
        assert codec.columns_of(frame) is None
        plain, _ = codec.encode_message(7, 11, frame)
    finally:
        codec.set_columns(True)
    assert plain == old_payload(frame) and columnar != plain
    assert same(codec.decode_message(plain, None)[2], frame) and same(codec.decode_message(columnar, None)[2], frame)
