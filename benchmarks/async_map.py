"""``async``: ``map_async`` over an I/O-bound ``async def`` vs a hand-written asyncio loop.

10^5 ints (10^4 with ``--quick``) go through ``async def call(x)``: ``await asyncio.sleep(0.001)``, then
``x * 2`` - a stand-in for an HTTP or database call - with at most 64 calls in flight. Variants:

* atoll: ``Source.range(0, n).map_async(64, call).run_with(Sink.seq(), Materializer.local())`` (the
  coroutines run on Atoll's shared asyncio loop thread; results in element order);
* asyncio: the limit a user would write by hand - ``asyncio.Semaphore(64)`` around each call and one
  ``asyncio.gather`` over all of them, in ``asyncio.run`` (results in element order too).

Both results are checked against ``[2 * x for x in range(n)]`` before timing. Time is wall-clock (the work is
waiting), 1 warm-up + best of ``runs``; the ratio is atoll / asyncio in elements per second (target >= 0.8).
"""
from __future__ import annotations

import asyncio
import time
from typing import List

from ._common import Options, Result, Table, fmt_rate, fmt_ratio, out, progress

N = 100_000
N_QUICK = 10_000
PARALLELISM = 64
SLEEP_S = 0.001
TARGET = 0.8


async def call(x: int) -> int:
    await asyncio.sleep(SLEEP_S)
    return x * 2


def run_asyncio(n: int) -> List[int]:
    async def main():
        sem = asyncio.Semaphore(PARALLELISM)

        async def one(x):
            async with sem:
                return await call(x)

        return await asyncio.gather(*(one(x) for x in range(n)))

    return list(asyncio.run(main()))


def run_atoll(mat, n: int) -> List[int]:
    from atoll import Sink, Source

    return Source.range(0, n).map_async(PARALLELISM, call).run_with(Sink.seq(), mat).result()


def best_wall(fn, runs: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def run(opts: Options) -> Result:
    from atoll import Materializer

    n = N_QUICK if opts.quick else N
    runs = opts.runs
    res = Result("async", params={"n": n, "parallelism": PARALLELISM, "sleep_s": SLEEP_S, "runs": runs,
                                  "timer": "perf_counter (wall)"})
    out(f"async: {n:,} ints through an async def that sleeps {SLEEP_S * 1000:.0f} ms, {PARALLELISM} in flight; "
        f"wall-clock, 1 warm-up + best of {runs}")
    want = [2 * x for x in range(n)]
    mat = Materializer.local()
    try:
        progress("async: checking results")
        same_atoll = run_atoll(mat, n) == want
        same_asyncio = run_asyncio(n) == want
        if not (same_atoll and same_asyncio):
            res.ok = False
        progress("async: asyncio")
        t_asyncio = best_wall(lambda: run_asyncio(n), runs)
        progress("async: atoll")
        t_atoll = best_wall(lambda: run_atoll(mat, n), runs)
    finally:
        mat.shutdown()
    ideal = n / PARALLELISM * SLEEP_S
    table = Table(["variant", "n", "same", "best wall s", "elements/s", "vs asyncio", "what"])
    table.add("asyncio", f"{n:,}", "yes" if same_asyncio else "NO", f"{t_asyncio:.3f}", fmt_rate(n / t_asyncio),
              "1.000", "Semaphore(64) + gather in asyncio.run")
    ratio = t_asyncio / t_atoll
    table.add("atoll", f"{n:,}", "yes" if same_atoll else "NO", f"{t_atoll:.3f}", fmt_rate(n / t_atoll),
              fmt_ratio(ratio), "Source.range.map_async(64, call) -> Sink.seq(), Materializer.local()")
    out(table.render())
    out(f"atoll / asyncio: {ratio:.3f} (target >= {TARGET}); the sleeps alone take {ideal:.3f} s at 64 in flight")
    res.rows = [{"variant": "asyncio", "wall_s": t_asyncio}, {"variant": "atoll", "wall_s": t_atoll}]
    res.summary = {"atoll_over_asyncio": ratio, "target": TARGET, "ideal_s": ideal}
    return res
