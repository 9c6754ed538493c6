"""``raw_ray``: the raw Ray baseline for the ``channel`` benchmark.

One actor pushes pre-batched lists of ints (``batch`` ints per call) to another actor, keeping at
most ``window`` calls in flight with ``ray.wait``; the receiver counts and sums what it gets. This is
the best an actor-to-actor element stream can do on Ray without any protocol on top, so Atoll's
channel (frames + demand) is measured against it.

``raw_ray_push(n, batch, window)`` assumes Ray is initialized and returns elements/s; the registered
benchmark initializes a local Ray, runs batch sizes 128/1024/4096 and shuts Ray down again.
"""
from __future__ import annotations

import operator
import os
import statistics
import time
from typing import List, Tuple

from ._common import Options, Result, Table, fmt_rate, fmt_ratio, fmt_secs, out, progress

N = 1_000_000
N_QUICK = 100_000
BATCHES = (128, 1024, 4096)
WINDOW = 16

_actor_classes = None


def _classes():
    """The two actor classes, defined on first use so that importing this module does not need Ray."""
    global _actor_classes
    if _actor_classes is None:
        import ray

        @ray.remote(num_cpus=0)
        class RawReceiver:
            def __init__(self):
                self.count = 0
                self.total = 0
                self.work = "sum"

            def ready(self) -> bool:
                return True

            def reset(self, work: str = "sum") -> None:
                self.count = 0
                self.total = 0
                self.work = work

            def push(self, batch: list) -> None:
                self.count += len(batch)
                work = self.work
                if work == "fold":  # what Sink.fold(0, operator.add) does: the function per element
                    acc = self.total
                    add = operator.add
                    for x in batch:
                        acc = add(acc, x)
                    self.total = acc
                elif work == "sum":
                    self.total += sum(batch)
                # "count": nothing per element (what Sink.ignore does)

            def stats(self) -> Tuple[int, int]:
                return self.count, self.total

        @ray.remote(num_cpus=0)
        class RawPusher:
            def __init__(self, receiver):
                self.receiver = receiver

            def ready(self) -> bool:
                return True

            def push_all(self, n: int, batch: int, window: int, work: str = "sum") -> Tuple[float, int, int]:
                """Push range(n) in lists of ``batch`` with at most ``window`` calls in flight; return
                (seconds from the first call until the receiver has counted everything, count, sum).
                ``work="sum"``: lists built before the clock starts, the receiver sums them with ``sum``;
                "fold"/"count": each list is built in the timed loop (as a range source does) and the
                receiver folds it with ``operator.add`` per element / only counts it."""
                prebuilt = work == "sum"
                batches = [list(range(i, min(i + batch, n))) for i in range(0, n, batch)] if prebuilt else None
                push = self.receiver.push.remote
                ray.get(self.receiver.reset.remote(work))
                pending: list = []
                t0 = time.perf_counter()
                for i in range(0, n, batch):
                    b = batches[i // batch] if prebuilt else list(range(i, min(i + batch, n)))
                    if len(pending) >= window:
                        _, pending = ray.wait(pending, num_returns=1)
                    pending.append(push(b))
                ray.get(pending)
                count, total = ray.get(self.receiver.stats.remote())
                return time.perf_counter() - t0, count, total

        _actor_classes = (RawReceiver, RawPusher)
    return _actor_classes


def raw_ray_push_times(n: int, batch: int = 1024, window: int = WINDOW, *, runs: int = 1,
                       warmup: bool = True, work: str = "sum") -> List[float]:
    """Durations (seconds) of ``runs`` pushes of n ints on one fresh pair of actors (num_cpus=0),
    after a short untimed warm-up push; checks that every element arrived; kills the actors.
    ``work``: see ``RawPusher.push_all`` ("sum": pre-built lists summed with ``sum``; "fold" / "count":
    lists built while timed, folded per element / only counted by the receiver)."""
    import ray

    if n <= 0 or batch <= 0 or window <= 0:
        raise ValueError(f"raw_ray_push: n, batch and window must be > 0, got {n}, {batch}, {window}")
    RawReceiver, RawPusher = _classes()
    receiver = RawReceiver.remote()
    pusher = RawPusher.remote(receiver)
    try:
        ray.get([receiver.ready.remote(), pusher.ready.remote()])
        if warmup:
            ray.get(pusher.push_all.remote(min(n, 4 * window * batch), batch, window, work))
        times = []
        want = n * (n - 1) // 2
        for _ in range(max(1, runs)):
            secs, count, total = ray.get(pusher.push_all.remote(n, batch, window, work))
            if count != n or (work != "count" and total != want):
                raise RuntimeError(f"raw_ray_push: receiver got {count} elements summing to {total}, "
                                   f"expected {n} summing to {want}")
            times.append(secs)
        return times
    finally:
        ray.kill(pusher)
        ray.kill(receiver)


def raw_ray_push(n: int, batch: int = 1024, window: int = WINDOW, *, runs: int = 1) -> float:
    """Elements/s of the best of ``runs`` pushes of n ints (batches of ``batch``, at most ``window``
    calls in flight) from one actor to another. Assumes Ray is initialized."""
    return n / min(raw_ray_push_times(n, batch, window, runs=runs))


def init_local_ray() -> bool:
    """``ray.init`` a local Ray for a benchmark unless one is up; returns True when it started one
    (the caller then shuts it down)."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    if ray.is_initialized():
        return False
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    return True


def run(opts: Options) -> Result:
    import ray

    n = N_QUICK if opts.quick else N
    runs = opts.runs
    res = Result("raw_ray", params={"n": n, "window": WINDOW, "batches": list(BATCHES), "runs": runs, "warmup": 1})
    out(f"raw_ray: {n:,} ints from one Ray actor to another in pre-built lists, at most {WINDOW} calls "
        f"in flight (ray.wait); 1 warm-up + best of {runs}")
    progress("ray.init")
    started = init_local_ray()
    try:
        rates = {}
        for b in BATCHES:
            progress(f"raw_ray batch={b}")
            times = raw_ray_push_times(n, b, WINDOW, runs=runs)
            calls = -(-n // b)
            best = min(times)
            rates[b] = n / best
            res.rows.append({"batch": b, "window": WINDOW, "n": n, "calls": calls, "times_s": times,
                             "best_s": best, "median_s": statistics.median(times),
                             "elements_per_s": rates[b], "calls_per_s": calls / best})
    finally:
        if started:
            ray.shutdown()
    base = rates.get(1024)
    table = Table(["batch", "window", "n", "calls", "best s", "median s", "elements/s", "calls/s", "vs B=1024"])
    for row in res.rows:
        ratio = row["elements_per_s"] / base if base else None
        row["vs_batch_1024"] = ratio
        table.add(f"{row['batch']:,}", row["window"], f"{row['n']:,}", f"{row['calls']:,}", fmt_secs(row["best_s"]),
                  fmt_secs(row["median_s"]), fmt_rate(row["elements_per_s"]), fmt_rate(row["calls_per_s"]),
                  fmt_ratio(ratio))
    out(table.render())
    res.summary = {f"batch_{b}_elements_per_s": r for b, r in rates.items()}
    return res
