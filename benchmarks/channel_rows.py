"""``channel_rows``: n dict rows of 4 fields across exactly one island boundary, columnar frames against the
row-by-row encoding, and against raw Ray with the same batch and window.

``Source.range(0, n).map(make_row).island()`` is island A (rows ``{"id": int, "twice": int, "name": str,
"k": float}``), the sink (``Sink.fold`` adding ``row["twice"]``, or ``Sink.ignore()``) is island B; the only
traffic between the two Ray actors is the channel: frames at the default ``frame_size`` (16384 rows at most, cut
to stay under the channel's ~90 KiB byte budget: ~2000 of these rows as columns), at most ``channel_window``
(16) unconfirmed frames in flight. Each case runs twice: with columnar frames (the default:
keys once, one msgpack array per key, dicts rebuilt on B) and with the row-by-row encoding (one msgpack map per
row, what every frame used before); the row maker switches island A's codec when it is unpickled there
(``codec.set_columns``), so both run in the same Ray session.

Also printed: the codec alone on one 4096-row frame (encode and decode, both ways, and the payload size), and
``raw-ray-rows``: one actor building the same rows and pushing lists of ``batch`` of them to another (Ray's own
serialization, pickle) with at most 16 calls in flight, the receiver counting them.

Timing as in ``channel``: the Atoll clock starts when ``run()`` has returned and stops when the sink's future
completed on the driver; 1 warm-up and the best of ``runs``. Target (issue 14): >= 1M rows/s with columnar
frames, folding.
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Dict, List

from ._common import (Options, Result, Table, fmt_rate, fmt_ratio, fmt_secs, out, progress, run_graph, start_ray)

N = 1_000_000
N_QUICK = 100_000
FRAME = 4096  # rows in the codec micro-benchmark's frame and in raw Ray's batches
WINDOW = 16
TARGET_RATE = 1_000_000
NAMES = [f"user-{i}" for i in range(1024)]


def row_maker(columns: bool):
    """The row function for island A; switches the codec of the process it is built in (see the module doc)."""
    from atoll._impl.actors import codec

    codec.set_columns(columns)
    names = NAMES

    def make_row(i: int) -> Dict[str, Any]:
        return {"id": i, "twice": 2 * i, "name": names[i & 1023], "k": i * 0.5}

    return make_row


class RowMaker:
    """Picklable row function: unpickled (in island A) as ``row_maker(columns)``."""

    def __init__(self, columns: bool):
        self.columns = columns
        self._fn = None

    def __call__(self, i: int) -> Dict[str, Any]:
        if self._fn is None:
            self._fn = row_maker_no_switch()
        return self._fn(i)

    def __reduce__(self):
        return (row_maker, (self.columns,))


def row_maker_no_switch():
    names = NAMES
    return lambda i: {"id": i, "twice": 2 * i, "name": names[i & 1023], "k": i * 0.5}


def add_twice(acc: int, row: Dict[str, Any]) -> int:
    return acc + row["twice"]


def _atoll_once(mat, n: int, sink: str, columns: bool) -> Dict[str, float]:
    from atoll import Keep, Sink, Source

    s = Sink.fold(0, add_twice) if sink == "fold" else Sink.ignore()
    graph = Source.range(0, n).map(RowMaker(columns)).island().to_mat(s, Keep.right)
    t0 = time.perf_counter()
    fut, handle, run_secs = run_graph(graph, mat)
    t1 = time.perf_counter()
    value = fut.result(timeout=600)
    t2 = time.perf_counter()
    islands = None
    if handle is not None:
        handle.wait(60)  # the actors go back to the warm pool for the next run (not timed)
        islands = len(handle.islands())
    if sink == "fold" and value != n * (n - 1):
        raise RuntimeError(f"channel_rows: fold gave {value!r}, expected {n * (n - 1)}")
    return {"run_s": run_secs, "stream_s": t2 - t1, "total_s": t2 - t0, "islands": islands}


def _atoll_case(mat, n: int, sink: str, columns: bool, runs: int) -> Dict[str, object]:
    _atoll_once(mat, n, sink, columns)  # warm-up
    samples = [_atoll_once(mat, n, sink, columns) for _ in range(max(1, runs))]
    stream = [s["stream_s"] for s in samples]
    return {"stream_times_s": stream, "best_s": min(stream), "median_s": statistics.median(stream),
            "run_median_s": statistics.median(s["run_s"] for s in samples),
            "islands": [s["islands"] for s in samples], "elements_per_s": n / min(stream)}


def codec_micro(n_rows: int = FRAME, reps: int = 30) -> List[Dict[str, object]]:
    """The codec alone on one frame of ``n_rows`` rows, both ways: best encode/decode seconds and payload bytes."""
    from atoll._impl.actors import codec

    make = row_maker_no_switch()
    frame = [make(i) for i in range(n_rows)]
    res = []
    for columns in (True, False):
        codec.set_columns(columns)
        try:
            enc, dec = [], []
            payload = b""
            for _ in range(reps):
                t0 = time.perf_counter()
                payload, _ = codec.encode_message(1, 1, frame)
                t1 = time.perf_counter()
                got = codec.decode_message(payload, None)[2]
                t2 = time.perf_counter()
                enc.append(t1 - t0)
                dec.append(t2 - t1)
            if got != frame:
                raise RuntimeError("channel_rows: the codec changed the rows")
        finally:
            codec.set_columns(True)
        res.append({"encoding": "columns" if columns else "rows", "encode_s": min(enc), "decode_s": min(dec),
                     "bytes": len(payload)})
    return res


def _raw_classes():
    import ray

    @ray.remote(num_cpus=0)
    class RowReceiver:
        def __init__(self):
            self.count = 0

        def push(self, batch: list) -> None:
            self.count += len(batch)

        def stats(self) -> int:
            return self.count

    @ray.remote(num_cpus=0)
    class RowPusher:
        def __init__(self, receiver):
            self.receiver = receiver

        def push_all(self, n: int, batch: int, window: int) -> float:
            import collections

            make = row_maker_no_switch()
            t0 = time.perf_counter()
            pending: collections.deque = collections.deque()
            for start in range(0, n, batch):
                if len(pending) >= window:
                    ray.get(pending.popleft())
                pending.append(self.receiver.push.remote([make(i) for i in range(start, min(n, start + batch))]))
            ray.get(list(pending))
            ray.get(self.receiver.stats.remote())
            return time.perf_counter() - t0

    return RowReceiver, RowPusher


def raw_ray_rows(n: int, batch: int, runs: int) -> List[float]:
    import ray

    receiver_cls, pusher_cls = _raw_classes()
    receiver = receiver_cls.remote()
    pusher = pusher_cls.remote(receiver)
    try:
        ray.get(pusher.push_all.remote(min(n, 4 * WINDOW * batch), batch, WINDOW))  # warm-up
        times = [ray.get(pusher.push_all.remote(n, batch, WINDOW)) for _ in range(max(1, runs))]
        if ray.get(receiver.stats.remote()) < n:
            raise RuntimeError("channel_rows: raw Ray lost rows")
        return times
    finally:
        ray.kill(pusher)
        ray.kill(receiver)


def run(opts: Options) -> Result:
    import ray

    from atoll import Materializer

    n = N_QUICK if opts.quick else N
    runs = opts.runs
    res = Result("channel_rows", params={"n": n, "frame": FRAME, "window": WINDOW, "runs": runs, "warmup": 1,
                                         "target_rate": TARGET_RATE})
    out(f"channel_rows: {n:,} dict rows of 4 fields (int, int, str, float), Source.range.map(row) island -> sink "
        f"island (one boundary), default frame_size (byte budget), channel_window={WINDOW}; columnar frames vs row by row; "
        f"1 warm-up + best of {runs}")
    micro = codec_micro()
    mt = Table(["encoding", "rows", "encode ms", "decode ms", "rows/s encode", "rows/s decode", "payload bytes"])
    for m in micro:
        mt.add(m["encoding"], f"{FRAME:,}", f"{m['encode_s'] * 1e3:.3f}", f"{m['decode_s'] * 1e3:.3f}",
               fmt_rate(FRAME / m["encode_s"]), fmt_rate(FRAME / m["decode_s"]), f"{m['bytes']:,}")
    out("codec alone, one frame, one core:")
    out(mt.render())
    progress("ray.init")
    started = start_ray()
    rows: List[Dict[str, object]] = []
    try:
        progress("channel_rows/raw-ray-rows")
        times = raw_ray_rows(n, FRAME, runs)
        rows.append({"variant": "raw-ray-rows", "encoding": "pickle", "n": n, "times_s": times,
                     "best_s": min(times), "median_s": statistics.median(times), "elements_per_s": n / min(times)})
        mat = Materializer.ray(channel_window=WINDOW)
        try:
            for sink in ("fold", "ignore"):
                for columns in (True, False):
                    enc = "columns" if columns else "rows"
                    progress(f"channel_rows/atoll-{sink} {enc}")
                    case = _atoll_case(mat, n, sink, columns, runs)
                    case.update({"variant": f"atoll-{sink}", "encoding": enc, "n": n})
                    if any(i not in (None, 2) for i in case["islands"]):
                        res.ok = False
                        res.notes.append(f"atoll-{sink} {enc}: {case['islands']} islands, expected 2")
                    rows.append(case)
        finally:
            mat.shutdown()
    finally:
        if started:
            ray.shutdown()

    raw = rows[0]["elements_per_s"]
    by = {(r["variant"], r["encoding"]): r for r in rows}
    table = Table(["variant", "encoding", "n", "best s", "median s", "rows/s", "vs row by row", "vs raw Ray"])
    for r in rows:
        base = by.get((r["variant"], "rows"))
        table.add(r["variant"], r["encoding"], f"{r['n']:,}", fmt_secs(r["best_s"]), fmt_secs(r["median_s"]),
                  fmt_rate(r["elements_per_s"]),
                  fmt_ratio(r["elements_per_s"] / base["elements_per_s"]) if base else "-",
                  fmt_ratio(r["elements_per_s"] / raw) if r["variant"] != "raw-ray-rows" else "-")
    out(table.render())
    out("(atoll clock: run() returned -> sink future done on the driver; 'rows' = the row-by-row encoding, "
        "as before columnar frames; raw-ray-rows: pickled lists of the same rows, actor to actor, counted)")
    res.rows = rows + [{"variant": "codec", **m} for m in micro]
    new = by[("atoll-fold", "columns")]["elements_per_s"]
    old = by[("atoll-fold", "rows")]["elements_per_s"]
    met = new >= TARGET_RATE
    res.summary = {"columns_rows_per_s": new, "row_by_row_rows_per_s": old, "columns_over_rows": new / old,
                   "raw_ray_rows_per_s": raw, "target_met": met,
                   **{f"{r['variant']}_{r['encoding']}_rows_per_s": r["elements_per_s"] for r in rows}}
    out(f"atoll-fold: {fmt_rate(new)} rows/s with columnar frames, {fmt_rate(old)} rows/s row by row "
        f"({new / old:.2f}x) (target >= {fmt_rate(TARGET_RATE)}/s: {'met' if met else 'NOT met'})")
    for note in res.notes:
        out(f"note: {note}")
    return res
