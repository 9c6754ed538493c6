"""The channel codec's ``datetime``/``date`` extension: values come back exactly (type, fields, microseconds,
``fold``, tzinfo and its name), row by row, in columnar frames and inside tuples; tzinfos other than a fixed-offset
``datetime.timezone`` and subclasses (pandas' ``Timestamp``) still travel pickled, unchanged."""
from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import msgpack
import pandas as pd
import pytest

from atoll._impl.actors import codec

UTC = dt.timezone.utc
VALUES = [
    dt.datetime(2024, 3, 10, 2, 30, 5, 123456),
    dt.datetime(2024, 11, 3, 1, 30, fold=1),  # a repeated wall-clock hour: fold says which
    dt.datetime.min,
    dt.datetime.max,
    dt.datetime(1970, 1, 1),
    dt.date(1, 1, 1),
    dt.date(9999, 12, 31),
    dt.date(2024, 2, 29),
    dt.datetime(2024, 1, 1, tzinfo=UTC),
    dt.datetime(2024, 1, 1, 12, 0, 0, 1, tzinfo=dt.timezone(dt.timedelta(hours=2))),
    dt.datetime(2024, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=-5, minutes=-30), "Somewhere")),
    dt.datetime(2024, 1, 1, fold=1, tzinfo=dt.timezone(dt.timedelta(seconds=1, microseconds=7))),
    dt.datetime(2024, 11, 3, 1, 30, fold=1, tzinfo=ZoneInfo("America/New_York")),  # pickled
    pd.Timestamp("2024-01-01 10:00:00.000001"),  # a datetime subclass: pickled
]


def exactly(a, b) -> bool:
    if type(a) is not type(b) or a != b:
        return False
    if isinstance(a, dt.datetime):
        return (a.fold, a.tzinfo, a.tzname(), a.utcoffset(), a.isoformat()) == (
            b.fold, b.tzinfo, b.tzname(), b.utcoffset(), b.isoformat())
    return True


def ext_codes(payload: bytes) -> set:
    codes = set()

    def hook(code, data):
        codes.add(code)
        return None

    msgpack.unpackb(payload, ext_hook=hook, raw=False, strict_map_key=False)
    return codes


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_a_value_round_trips_exactly(value):
    payload, refs = codec.encode([value])
    (back,) = codec.decode(payload, refs)
    assert exactly(back, value)
    pickled = type(value) not in (dt.datetime, dt.date) or (
        getattr(value, "tzinfo", None) is not None and type(value.tzinfo) is not dt.timezone)
    assert ext_codes(payload) == ({codec.EXT_PICKLE} if pickled else
                                  {codec.EXT_DATE if type(value) is dt.date else codec.EXT_DATETIME})


def test_utc_comes_back_as_the_utc_singleton():
    (back,) = codec.decode(*codec.encode([dt.datetime(2024, 5, 1, tzinfo=UTC)]))
    assert back.tzinfo is UTC


def test_rows_of_datetimes_go_as_columns_and_come_back_exactly():
    rows = [{"user": f"u{i}", "ts": dt.datetime(2024, 1, 1, 0, i % 60, 0, i), "day": dt.date(2024, 1, 1 + i % 28),
             "at": dt.datetime(2024, 1, 1, tzinfo=dt.timezone(dt.timedelta(minutes=i % 90)))} for i in range(100)]
    frame = rows + [(dt.date(2020, 1, 1), dt.datetime(2020, 1, 1, 1, fold=1))]
    assert codec.columns_of(frame) is not None
    payload, refs = codec.encode_message(3, 9, frame)
    ch, seq, back = codec.decode_message(payload, refs)
    assert (ch, seq, len(back)) == (3, 9, len(frame))
    for a, b in zip(back[:-1], rows):
        assert list(a) == list(b) and all(exactly(a[k], b[k]) for k in b)
    assert type(back[-1]) is tuple and all(exactly(x, y) for x, y in zip(back[-1], frame[-1]))
    assert codec.EXT_PICKLE not in ext_codes(payload)


def test_nested_values_round_trip_exactly():
    value = {"when": [dt.date(2024, 1, 2), (dt.datetime(2024, 1, 2, 3, 4, 5, 6), None)], "n": 1}
    (back,) = codec.decode(*codec.encode([value]))
    assert back == value and type(back["when"][1]) is tuple and exactly(back["when"][1][0], value["when"][1][0])
