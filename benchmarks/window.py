"""``window``: event-time windows, keyed sums over n events with bounded disorder.

The events are ``(key, value, ts)`` tuples: 10 keys (``"k0"`` .. ``"k9"``), ``value`` an int in
[0, 100), ``ts`` in ms. Element i has the base time ``t = i + 1000`` (1 ms apart) and
``ts = t - off`` with ``off`` uniform in [0, 1000] (seeded), so no element is more than 999 ms
behind the maximum seen before it: with bounded out-of-orderness B = 1000 ms nothing is late.
Keys come in bursts so that sessions close: time runs in 20 s periods cut into ten 2 s slots and key
j is active in the six slots ``(slot - j) % 10 < 6`` (12 s on, 8 s off); each element picks one of
the six active keys at random. Within a burst a key's elements are a few ms apart, between bursts at
least 7 s; the generator checks that no two consecutive elements of a key (in timestamp order) are
exactly the 5 s session gap apart, because there Bytewax and Atoll differ (Bytewax merges two
sessions exactly ``gap`` apart, Atoll does not).

Semantics (Atoll's, which the plain loop implements): watermark W = max ts seen - B means no element
with ts < W follows; windows are half-open [start, end), aligned to epoch 0, and fire when W >= end;
a session of a key is [first ts, last ts + gap), two elements in one session when their
[ts, ts + gap) intervals overlap. The results of every variant are the set of
``(key, start, end, sum)``; they are compared (as sorted lists) before anything is timed.

Workloads: ``tumbling`` 10 s, ``sliding-1s`` 10 s every 1 s, ``sliding-100ms`` 10 s every 100 ms
(the per-element cost of Atoll should not grow with the number of windows an element is in), and
``session`` gap 5 s. A last table takes the slide's cost apart: at slide 1 s, windows of 100 s (100 per element,
as many fired as with 10 s) against 10 s, for ``atoll`` and ``plain-running`` (checked equal). Variants, side
by side in this one run:

- ``atoll``       — ``Source.from_iterator(...).with_timestamps(ts, max_out_of_orderness=1000)
                    .tumbling_window / .sliding_window / .session_window(..., key=, aggregate=Aggregate.sum(...))``
                    into ``Sink.seq()`` on ``Materializer.local()``; the ``atoll.Window`` records are
                    turned into tuples (per window, not per element). Until that API exists the row
                    reads "not available (<error>)".
- ``plain``       — the limit: a hand-written loop, a per-key dict of window start -> sum (an element
                    is added to every window it is in), windows fired in (end, start) order as the
                    watermark passes their end; sessions as a per-key list of open sessions.
- ``plain-running`` — (sliding only) per-key panes of ``slide`` ms and a running sum of the next
                    window to fire: one pane update per element, and per window the pane leaving is
                    subtracted and the pane entering added (a sum is invertible). O(1) per element and
                    per window: what a flat per-element cost looks like in plain Python.
- ``plain-running-records`` — (sliding only) the same loop building each result as the ``atoll.Window``
                    record the window operators emit (``make_window``, the fastest way) and turning
                    the records into tuples at the end, as the ``atoll`` variant does: the limit for
                    an API with one record object per window (10x more windows at 100 ms are 10x more
                    records; this row shows what they cost a loop that does nothing else).
- ``bytewax``     — Bytewax 0.21 ``fold_window`` (builder 0, folder ``acc + value``, merger ``+``) with
                    ``EventClock`` and ``TumblingWindower`` / ``SlidingWindower`` (``align_to`` the
                    epoch) / ``SessionWindower``, ``TestingSource`` (batches of ``BYTEWAX_BATCH``) and
                    ``run_main`` (one worker, in this thread). The window metadata stream is joined to
                    the sums to get (start, end). Bytewax wants aware datetimes: the ts getter converts
                    ms to a UTC datetime for every element, which is part of its cost. Its clock is made
                    a pure event-time clock, as Atoll's: ``wait_for_system_duration`` = B (with 0 every
                    element behind the maximum would be late), ``now_getter`` constant (else the
                    watermark also moves with the wall clock, and an element near the bound can turn
                    late by the microseconds the run took), ``to_system_utc`` -> None (no wake-ups on
                    the 1970 close times; windows close on items and at EOF); ``ordered=False``
                    (a sum does not need timestamp order; the ordered mode also sorts). Bytewax's
                    session ``close_time`` is the last ts (inclusive): end = close_time + gap.
                    Bytewax is slow, so unless ``--full`` it runs at most ``BYTEWAX_CAP`` events (a
                    prefix of the same stream; its reference is computed on that prefix).
- ``pyflink``     — not run: ``apache-flink`` 2.3 installs (in a separate venv, ~30 s) but pins
                    apache-beam 2.61, which would downgrade protobuf, grpcio, pyarrow, pandas, numpy and
                    cloudpickle under Ray in this venv; the row says why.

Time is CPU time of this process (``time.process_time()``, all its threads; the machine is shared),
1 warm-up + best of ``runs``; events/s = n / best CPU seconds. Ratios: atoll/plain and atoll/bytewax
per workload, and per variant events/s at slide 100 ms over slide 1 s (1.0 = flat).
"""
from __future__ import annotations

import gc
import os
import random
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ._common import Options, Result, Table, Timing, fmt_rate, fmt_ratio, fmt_secs, out, progress

N = 1_000_000
N_QUICK = 100_000
#: ``ATOLL_WINDOW_N`` overrides n (development runs on the shared machine)
N_ENV = "ATOLL_WINDOW_N"
#: Bytewax runs at most this many events unless --full (it costs tens of us per element and window)
BYTEWAX_CAP = 200_000
BYTEWAX_BATCH = 1000
SEED = 20240611
KEYS = 10
BOUND = 1_000  # max out-of-orderness, ms
SIZE = 10_000  # window length, ms
GAP = 5_000  # session gap, ms
WIDE = 100_000  # the wide sliding window (slide 1 s): 10x the windows per element of SIZE, as many fired
PERIOD_SLOT = 2_000  # a key's activity changes every 2 s; 10 slots = a 20 s period; 6 on, 4 off
ACTIVE_SLOTS = 6

#: name -> (kind, size, slide or gap)
WORKLOADS: Dict[str, Tuple[str, int, int]] = {
    "tumbling": ("tumbling", SIZE, SIZE),
    "sliding-1s": ("sliding", SIZE, 1_000),
    "sliding-100ms": ("sliding", SIZE, 100),
    "session": ("session", 0, GAP),
}

Row = Tuple[str, int, int, int]  # (key, start, end, value)

PLAIN_WHAT = {
    "tumbling": "hand-written loop, per-key dict of window start -> sum",
    "sliding": "hand-written loop, per-key dict of window start -> sum, size/slide updates per element",
    "session": "hand-written loop, per-key list of open sessions [start, end, sum]",
}


# ---------------------------------------------------------------------------- data
def make_events(n: int, seed: int = SEED) -> List[Tuple[str, int, int]]:
    """n ``(key, value, ts)`` events as described in the module docstring; checks the disorder bound
    and that no key has two consecutive elements exactly ``GAP`` apart."""
    rng = random.Random(seed)
    names = [f"k{j}" for j in range(KEYS)]
    slots = KEYS
    active = [[names[j] for j in range(KEYS) if (s - j) % slots < ACTIVE_SLOTS] for s in range(slots)]
    period = PERIOD_SLOT * slots
    randrange = rng.randrange
    events = []
    append = events.append
    for i in range(n):
        t = i + BOUND
        keys = active[(t % period) // PERIOD_SLOT]
        append((keys[randrange(ACTIVE_SLOTS)], randrange(100), t - randrange(BOUND + 1)))
    # checks: nothing late, and the session data has no pair exactly GAP apart
    max_ts = None
    for _, _, ts in events:
        if max_ts is not None and ts < max_ts - BOUND:
            raise AssertionError(f"event at {ts} is late for watermark {max_ts - BOUND}")
        if max_ts is None or ts > max_ts:
            max_ts = ts
    per_key: Dict[str, List[int]] = {}
    for k, _, ts in events:
        per_key.setdefault(k, []).append(ts)
    for k, tss in per_key.items():
        tss.sort()
        if any(b - a == GAP for a, b in zip(tss, tss[1:])):
            raise AssertionError(f"key {k} has two elements exactly {GAP} ms apart (Bytewax would merge them)")
    return events


def key_of(e):
    return e[0]


def value_of(e):
    return e[1]


def ts_of(e):
    return e[2]


# ---------------------------------------------------------------------------- plain Python
def plain_sliding(events, size: int, slide: int, bound: int = BOUND) -> List[Row]:
    """Per-key dict of window start -> sum; every element is added to each of its ``size / slide``
    windows; at each grid point ``end`` <= watermark the windows [end - size, end) fire."""
    assert size % slide == 0
    wins: Dict[str, Dict[int, int]] = {}
    result: List[Row] = []
    append = result.append
    max_ts = None
    cursor = 0  # the next window end to fire
    first = size - slide
    for key, value, ts in events:
        d = wins.get(key)
        if d is None:
            d = wins[key] = {}
        last = ts - ts % slide
        for start in range(last - first, last + 1, slide):
            d[start] = d.get(start, 0) + value
        if max_ts is None or ts > max_ts:
            if max_ts is None:  # no window can end at or before the first watermark
                w = ts - bound
                cursor = w - w % slide + slide
            max_ts = ts
            w = ts - bound
            while cursor <= w:
                start = cursor - size
                for k, dd in wins.items():
                    if start in dd:
                        append((k, start, cursor, dd.pop(start)))
                cursor += slide
    rest = sorted((start + size, start, k, s) for k, dd in wins.items() for start, s in dd.items())
    result.extend((k, start, end, s) for end, start, k, s in rest)
    return result


def plain_running(events, size: int, slide: int, bound: int = BOUND, records: bool = False) -> List[Row]:
    """Per-key panes of ``slide`` ms (pane start -> [sum, count]) and a running [sum, count] of the next
    window to fire, [cursor - size, cursor): an element updates its pane, and the running sum when it
    falls in that window; at a grid point the window is emitted (if not empty), then slid by one pane:
    the pane leaving is subtracted (a sum is invertible), the pane entering added. O(1) per element and
    per window, whatever ``size / slide``.

    ``records=True``: each window is built as the ``atoll.Window`` record the window operators emit (the fastest
    way, ``make_window``) and the records are turned into tuples at the end, as the ``atoll`` variant does: the same
    loop paying for one record object per result, the limit for an API that emits a record per window."""
    assert size % slide == 0
    if records:
        from atoll.windowing.records import make_window
    panes: Dict[str, Dict[int, list]] = {}
    running: Dict[str, list] = {}
    result: List[Row] = []
    append = result.append
    max_ts = None
    cursor = 0

    def fire(end: int) -> None:
        start = end - size
        for k, d in panes.items():
            st = running[k]
            if st[1]:
                append(make_window(k, start, end, st[0]) if records else (k, start, end, st[0]))
            elif not d:
                continue
            old = d.pop(start, None)
            if old is not None:
                st[0] -= old[0]
                st[1] -= old[1]
            new = d.get(end)
            if new is not None:
                st[0] += new[0]
                st[1] += new[1]

    for key, value, ts in events:
        if max_ts is None:  # no window can end at or before the first watermark
            w = ts - bound
            cursor = w - w % slide + slide
        d = panes.get(key)
        if d is None:
            d = panes[key] = {}
            running[key] = [0, 0]
        p = ts - ts % slide
        c = d.get(p)
        if c is None:
            d[p] = [value, 1]
        else:
            c[0] += value
            c[1] += 1
        if cursor - size <= ts < cursor:
            st = running[key]
            st[0] += value
            st[1] += 1
        if max_ts is None or ts > max_ts:
            max_ts = ts
            w = ts - bound
            while cursor <= w:
                fire(cursor)
                cursor += slide
    if max_ts is not None:
        last = max((p for d in panes.values() for p in d), default=cursor - size)
        while cursor <= last + size:
            fire(cursor)
            cursor += slide
    if records:
        return [(w.key, w.start, w.end, w.value) for w in result]
    return result


def plain_session(events, gap: int, bound: int = BOUND) -> List[Row]:
    """Per-key list of open sessions ``[start, end, sum]`` (end = last ts + gap, half-open); an element
    joins every session its [ts, ts + gap) overlaps; sessions fire when the watermark reaches their end
    (``next_fire`` is a lower bound of the open sessions' ends: they only grow)."""
    sess: Dict[str, List[list]] = {}
    result: List[Row] = []
    max_ts = None
    next_fire = float("inf")
    for key, value, ts in events:
        lst = sess.get(key)
        if lst is None:
            lst = sess[key] = []
        e = ts + gap
        hit = None
        for w in lst:
            if w[0] < e and ts < w[1]:
                hit = w
                break
        if hit is None:
            lst.append([ts, e, value])
            if e < next_fire:
                next_fire = e
        else:
            if ts < hit[0]:
                hit[0] = ts
            if e > hit[1]:
                hit[1] = e
            hit[2] += value
            if len(lst) > 1:  # the element may bridge two sessions
                for x in [x for x in lst if x is not hit and x[0] < e and ts < x[1]]:
                    hit[0] = min(hit[0], x[0])
                    hit[1] = max(hit[1], x[1])
                    hit[2] += x[2]
                    lst.remove(x)
        if max_ts is None or ts > max_ts:
            max_ts = ts
            w = ts - bound
            if w >= next_fire:
                fired = []
                nf = float("inf")
                for k, l in sess.items():
                    keep = []
                    for x in l:
                        if x[1] <= w:
                            fired.append((x[1], x[0], k, x[2]))
                        else:
                            keep.append(x)
                            if x[1] < nf:
                                nf = x[1]
                    if len(keep) != len(l):
                        sess[k] = keep
                fired.sort()
                result.extend((k, s, en, v) for en, s, k, v in fired)
                next_fire = nf
    rest = sorted((x[1], x[0], k, x[2]) for k, l in sess.items() for x in l)
    result.extend((k, s, en, v) for en, s, k, v in rest)
    return result


def brute_force(kind: str, events, size: int, slide_or_gap: int) -> List[Row]:
    """Independent reference (sorting, no watermark): the windows' contents from the whole stream."""
    if kind == "session":
        per_key: Dict[str, List[Tuple[int, int]]] = {}
        for k, v, ts in events:
            per_key.setdefault(k, []).append((ts, v))
        rows = []
        for k, lst in per_key.items():
            lst.sort()
            start, last, acc = lst[0][0], lst[0][0], 0
            for ts, v in lst:
                if ts >= last + slide_or_gap:  # [last, last+gap) and [ts, ts+gap) do not overlap
                    rows.append((k, start, last + slide_or_gap, acc))
                    start, acc = ts, 0
                last, acc = ts, acc + v
            rows.append((k, start, last + slide_or_gap, acc))
        return sorted(rows)
    slide = slide_or_gap
    sums: Dict[Tuple[str, int], int] = {}
    for k, v, ts in events:
        last = ts - ts % slide
        for start in range(last - size + slide, last + 1, slide):
            sums[(k, start)] = sums.get((k, start), 0) + v
    return sorted((k, s, s + size, v) for (k, s), v in sums.items())


def make_plain(kind: str, size: int, slide_or_gap: int, running: bool = False,
               records: bool = False) -> Callable[[list], List[Row]]:
    if kind == "session":
        return lambda events: plain_session(events, slide_or_gap)
    if records:
        return lambda events: plain_running(events, size, slide_or_gap, records=True)
    fn = plain_running if running else plain_sliding
    return lambda events: fn(events, size, slide_or_gap)


# ---------------------------------------------------------------------------- Atoll
def make_atoll(kind: str, size: int, slide_or_gap: int, materializer) -> Callable[[list], List[Row]]:
    """The Atoll pipeline (the event-time window API of the windows issue) -> list of tuples."""
    from atoll import Aggregate, Sink, Source

    def run_atoll(events) -> List[Row]:
        src = Source.from_iterator(lambda: iter(events)).with_timestamps(ts_of, max_out_of_orderness=BOUND)
        agg = Aggregate.sum(value_of)
        if kind == "tumbling":
            flow = src.tumbling_window(size, key=key_of, aggregate=agg)
        elif kind == "sliding":
            flow = src.sliding_window(size, slide_or_gap, key=key_of, aggregate=agg)
        else:
            flow = src.session_window(slide_or_gap, key=key_of, aggregate=agg)
        windows = flow.run_with(Sink.seq(), materializer).result(timeout=3600)
        return [(w.key, w.start, w.end, w.value) for w in windows]

    return run_atoll


# ---------------------------------------------------------------------------- Bytewax
def make_bytewax(kind: str, size: int, slide_or_gap: int) -> Callable[[list], List[Row]]:
    from datetime import datetime, timedelta, timezone

    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.operators import windowing as win
    from bytewax.testing import TestingSink, TestingSource, run_main

    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    one_ms = timedelta(milliseconds=1)

    def ts_getter(e):  # ms -> aware datetime, per element (Bytewax's clock needs datetimes)
        return epoch + timedelta(milliseconds=e[2])

    def now_getter():
        return epoch

    def no_wakeup(_t):
        return None

    def folder(acc, e):
        return acc + e[1]

    def merger(a, b):
        return a + b

    def zero():
        return 0

    if kind == "tumbling":
        windower = win.TumblingWindower(length=timedelta(milliseconds=size), align_to=epoch)
    elif kind == "sliding":
        windower = win.SlidingWindower(length=timedelta(milliseconds=size),
                                       offset=timedelta(milliseconds=slide_or_gap), align_to=epoch)
    else:
        windower = win.SessionWindower(gap=timedelta(milliseconds=slide_or_gap))
    # a session's close_time is its last element's ts (inclusive): Atoll's end is that + gap
    end_extra = slide_or_gap if kind == "session" else 0

    def run_bytewax(events) -> List[Row]:
        clock = win.EventClock(ts_getter, wait_for_system_duration=timedelta(milliseconds=BOUND),
                               now_getter=now_getter, to_system_utc=no_wakeup)
        flow = Dataflow("window_bench")
        up = op.input("in", flow, TestingSource(events, batch_size=BYTEWAX_BATCH))
        keyed = op.key_on("key", up, key_of)
        wo = win.fold_window("sum", keyed, clock, windower, zero, folder, merger, ordered=False)
        down: list = []
        meta: list = []
        late: list = []
        op.output("down", wo.down, TestingSink(down))
        op.output("meta", wo.meta, TestingSink(meta))
        op.output("late", wo.late, TestingSink(late))
        run_main(flow)
        if late:
            raise AssertionError(f"bytewax: {len(late)} late elements, e.g. {late[0]!r}")
        sums = {(k, wid): v for k, (wid, v) in down}
        return [(k, (m.open_time - epoch) // one_ms, (m.close_time - epoch) // one_ms + end_extra, sums[(k, wid)])
                for k, (wid, m) in meta]

    return run_bytewax


# ---------------------------------------------------------------------------- timing
def measure_cpu(fn: Callable[[], Any], runs: int, warmup: int = 1) -> Tuple[Timing, List[float]]:
    """Like ``_common.measure`` but timed with ``time.process_time()`` (CPU seconds of this process,
    all threads; the machine is shared). Returns (CPU timing, wall seconds of the same runs)."""
    value = None
    for _ in range(warmup):
        value = fn()
    cpu, wall = [], []
    for _ in range(max(1, runs)):
        gc.collect()
        w0, c0 = time.perf_counter(), time.process_time()
        value = fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return Timing(cpu, value), wall


def _wide_windows(events: list, n: int, runs: int, rates: Dict[Tuple[str, str], Optional[float]],
                  summary: Dict[str, Any], res: Result) -> None:
    """The two causes of the slide's cost taken apart: at a fixed slide of 1 s, windows of ``WIDE`` instead of
    ``SIZE`` put 10x more windows around each element (100 instead of 10) but fire as many windows; the
    "100 ms / 1 s" ratio above has both 10x more windows per element and 10x more windows fired (records out)."""
    from atoll import Materializer

    progress(f"window: sliding {WIDE // 1000} s / 1 s (atoll, plain-running)")
    want = sorted(make_plain("sliding", WIDE, 1_000, running=True)(events))
    table = Table(["variant", f"{SIZE // 1000} s / 1 s ev/s", f"{WIDE // 1000} s / 1 s ev/s", "windows",
                   f"{WIDE // 1000} s / {SIZE // 1000} s"])
    mat = Materializer.local()
    try:
        for v, make in (("atoll", lambda: make_atoll("sliding", WIDE, 1_000, mat)),
                        ("plain-running", lambda: make_plain("sliding", WIDE, 1_000, running=True))):
            fn = make()
            got = sorted(fn(events))
            if got != want:
                res.ok = False
                res.notes.append(f"sliding {WIDE} / 1000: {v} gave {len(got)} windows vs {len(want)} expected")
            t, _ = measure_cpu(lambda: fn(events), runs=runs, warmup=0)
            narrow, wide = rates.get(("sliding-1s", v)), t.rate(n)
            ratio = wide / narrow if (narrow and wide) else None
            summary[f"sliding-{WIDE // 1000}s/{v}_events_per_s"] = wide
            summary[f"sliding/{v}_{WIDE // 1000}s_over_{SIZE // 1000}s"] = ratio
            table.add(v, fmt_rate(narrow), fmt_rate(wide), f"{len(got):,}", fmt_ratio(ratio))
    finally:
        mat.shutdown()
    out(f"slide 1 s, windows of {SIZE // 1000} s (10 per element) vs {WIDE // 1000} s (100 per element), "
        f"about as many windows fired; 1.0 = cost per element independent of the windows an element is in:")
    out(table.render())


def _short(e: BaseException) -> str:
    s = f"{type(e).__name__}: {e}"
    s = s.splitlines()[0] if s else type(e).__name__
    return s if len(s) <= 160 else s[:157] + "..."


def _pyflink_status() -> str:
    try:
        import pyflink  # noqa: F401
    except Exception as e:  # noqa: BLE001
        return (f"not installed ({_short(e)}; apache-flink 2.3 pins apache-beam 2.61, which would downgrade "
                f"protobuf, grpcio, pyarrow, pandas, numpy and cloudpickle under Ray in this venv, so it is "
                f"not in the 'bench' extra)")
    return "installed but not run (no PyFlink variant in this benchmark: see the module docstring)"


# ---------------------------------------------------------------------------- run
def run(opts: Options) -> Result:
    n = int(os.environ.get(N_ENV) or (N_QUICK if opts.quick else N))
    runs = opts.runs
    bw_n = n if opts.full else min(n, BYTEWAX_CAP)
    res = Result("window", params={"n": n, "runs": runs, "warmup": 1, "keys": KEYS, "bound_ms": BOUND,
                                   "size_ms": SIZE, "gap_ms": GAP, "bytewax_n": bw_n, "bytewax_batch": BYTEWAX_BATCH,
                                   "seed": SEED, "timer": "process_time"})
    out(f"window: {n:,} events, {KEYS} keys in bursts, ts 1 ms apart, disorder <= {BOUND} ms (none late); "
        f"keyed sums: tumbling {SIZE // 1000} s, sliding {SIZE // 1000} s / 1 s and / 100 ms, session gap "
        f"{GAP // 1000} s; CPU time (process_time), 1 warm-up + best of {runs}")

    progress(f"window: generating {n:,} events")
    events = make_events(n)

    # which alternatives are there
    unavailable: Dict[str, str] = {}
    mat = None
    try:
        from atoll import Materializer

        import atoll

        missing = [name for name in ("Aggregate", "Window") if not hasattr(atoll, name)]
        if missing:
            raise ImportError(f"cannot import name {', '.join(missing)} from 'atoll'")
        mat = Materializer.local()
    except Exception as e:  # noqa: BLE001 - the window API may not exist yet
        unavailable["atoll"] = f"not available ({_short(e)})"
    try:
        import bytewax  # noqa: F401
    except Exception as e:  # noqa: BLE001
        unavailable["bytewax"] = f"not installed: pip install -e '.[bench]' ({_short(e)})"
    unavailable["pyflink"] = _pyflink_status()

    refs: Dict[Tuple[str, int], List[Row]] = {}

    def reference(wl: str, size_n: int) -> List[Row]:
        if (wl, size_n) not in refs:
            kind, size, sg = WORKLOADS[wl]
            refs[(wl, size_n)] = sorted(make_plain(kind, size, sg)(events[:size_n]))
        return refs[(wl, size_n)]

    # the reference itself against a brute force (sorting, no watermark) on the full stream
    for wl, (kind, size, sg) in WORKLOADS.items():
        progress(f"window/{wl}: reference check")
        if reference(wl, n) != brute_force(kind, events, size, sg):
            res.ok = False
            res.notes.append(f"{wl}: the plain loop differs from the brute-force reference")

    rates: Dict[Tuple[str, str], Optional[float]] = {}
    table = Table(["workload", "variant", "n", "windows", "same", "best cpu s", "median cpu s", "events/s",
                   "vs plain", "what"])
    try:
        for wl, (kind, size, sg) in WORKLOADS.items():
            variants: List[Tuple[str, str, int, Optional[Callable[[], Callable[[list], List[Row]]]]]] = [
                ("atoll", "with_timestamps + *_window(Aggregate.sum), Materializer.local()", n,
                 (lambda k=kind, s=size, g=sg: make_atoll(k, s, g, mat))),
                ("plain", PLAIN_WHAT[kind], n, (lambda k=kind, s=size, g=sg: make_plain(k, s, g))),
            ]
            if kind == "sliding":
                variants.append(("plain-running", "hand-written loop, per-key panes + running window sum "
                                 "(subtract the pane leaving)", n,
                                 (lambda k=kind, s=size, g=sg: make_plain(k, s, g, running=True))))
                variants.append(("plain-running-records", "plain-running emitting atoll.Window records (make_window), "
                                 "turned into tuples as the atoll variant does", n,
                                 (lambda k=kind, s=size, g=sg: make_plain(k, s, g, records=True))))
            variants.append(("bytewax", f"fold_window, EventClock, TestingSource(batch {BYTEWAX_BATCH}), run_main",
                             bw_n, (lambda k=kind, s=size, g=sg: make_bytewax(k, s, g))))
            for name, what, size_n, factory in variants:
                row: Dict[str, Any] = {"workload": wl, "variant": name, "n": size_n, "what": what}
                if name in unavailable:
                    row["status"] = unavailable[name]
                    rates[(wl, name)] = None
                    res.rows.append(row)
                    table.add(wl, name, f"{size_n:,}", "-", "-", "-", "-", "-", "-", unavailable[name])
                    continue
                progress(f"window/{wl}/{name} (n={size_n:,})")
                data = events if size_n == n else events[:size_n]
                want = reference(wl, size_n)
                try:
                    fn = factory()
                    # warm-up run = the check, before any timing
                    got = sorted(fn(data))
                except Exception as e:  # noqa: BLE001 - an alternative that cannot run is reported, not fatal
                    if name == "atoll":
                        unavailable["atoll"] = f"not available ({_short(e)})"
                        msg = unavailable["atoll"]
                    else:
                        msg = f"failed ({_short(e)})"
                        res.ok = False
                        res.notes.append(f"{wl}/{name}: {msg}")
                    row["status"] = msg
                    rates[(wl, name)] = None
                    res.rows.append(row)
                    table.add(wl, name, f"{size_n:,}", "-", "-", "-", "-", "-", "-", msg)
                    continue
                same = got == want
                if not same:
                    res.ok = False
                    extra = sorted(set(got) - set(want))[:3]
                    lost = sorted(set(want) - set(got))[:3]
                    res.notes.append(f"{wl}/{name}: {len(got)} windows vs {len(want)} expected; "
                                     f"unexpected {extra}, missing {lost}")
                t, wall = measure_cpu(lambda: fn(data), runs=runs, warmup=0)
                rate = t.rate(size_n)
                rates[(wl, name)] = rate
                row.update({"status": "ok", "windows": len(got), "same": same, "cpu_times_s": t.times,
                            "wall_times_s": wall, "best_cpu_s": t.best, "median_cpu_s": t.median,
                            "events_per_s": rate})
                res.rows.append(row)
                table.add(wl, name, f"{size_n:,}", f"{len(got):,}", "yes" if same else "MISMATCH",
                          fmt_secs(t.best), fmt_secs(t.median), fmt_rate(rate), "", what)
    finally:
        if mat is not None:
            mat.shutdown()

    # the "vs plain" column, filled in now that every rate is known
    for tr, row in zip(table.rows, res.rows):
        r, base = rates.get((row["workload"], row["variant"])), rates.get((row["workload"], "plain"))
        ratio = r / base if (r and base) else None
        row["vs_plain"] = ratio
        tr[8] = fmt_ratio(ratio)
    out(table.render())
    for name in ("atoll", "bytewax", "pyflink"):
        if name in unavailable:
            out(f"{name}: {unavailable[name]}")

    summary: Dict[str, Any] = {f"{wl}/{v}_events_per_s": r for (wl, v), r in rates.items()}
    out("")
    ratios = Table(["workload", "atoll/plain", "atoll/plain-running", "atoll/bytewax", "bytewax/plain"])
    for wl in WORKLOADS:
        a, p, b = rates.get((wl, "atoll")), rates.get((wl, "plain")), rates.get((wl, "bytewax"))
        pr = rates.get((wl, "plain-running"))
        ap = a / p if (a and p) else None
        apr = a / pr if (a and pr) else None
        ab = a / b if (a and b) else None
        bp = b / p if (b and p) else None
        summary[f"{wl}/atoll_over_plain"] = ap
        summary[f"{wl}/atoll_over_bytewax"] = ab
        summary[f"{wl}/bytewax_over_plain"] = bp
        if (wl, "plain-running") in rates:
            summary[f"{wl}/atoll_over_plain_running"] = apr
        ratios.add(wl, fmt_ratio(ap), fmt_ratio(apr), fmt_ratio(ab), fmt_ratio(bp))
    out(ratios.render())
    out("")
    flat = Table(["variant", "slide 1 s ev/s", "slide 100 ms ev/s", "100 ms / 1 s"])
    for v in ("atoll", "plain", "plain-running", "plain-running-records", "bytewax"):
        one, tenth = rates.get(("sliding-1s", v)), rates.get(("sliding-100ms", v))
        ratio = tenth / one if (one and tenth) else None
        summary[f"sliding/{v}_100ms_over_1s"] = ratio
        flat.add(v, fmt_rate(one), fmt_rate(tenth), fmt_ratio(ratio))
    out("sliding 10 s windows, slide 1 s (10 windows per element) vs 100 ms (100 per element); "
        "1.0 = flat cost per element:")
    out(flat.render())
    if "atoll" not in unavailable:
        _wide_windows(events, n, runs, rates, summary, res)
    if bw_n != n:
        out(f"(bytewax ran the first {bw_n:,} events of the same stream; --full runs all {n:,})")
    res.summary = summary
    for note in res.notes:
        out(f"note: {note}")
    return res
