"""``checkpoint``: what checkpoints cost - throughput with a checkpoint every second vs checkpointing off, and
checkpoint latency.

3*10^6 ints (3*10^5 with ``--quick``) through 3 islands (``range -> island -> map -> island -> fold``) into a
sum, on ``Materializer.ray()`` and on ``Materializer.local()``, three variants each in this one run: no
checkpoint settings at all (the path as before checkpoints existed), checkpoint settings without an
interval (the checkpoint machinery wired but idle: the "hot path unchanged" check), and a checkpoint every
second. Latency: ``checkpoint_now()`` repeated on a running graph (trigger -> manifest durable, local file
system), p50 and p99. Every variant's sum is checked against the plain one.
"""
from __future__ import annotations

import operator
import statistics
import tempfile
import time
from typing import Any, Dict, List

from ._common import Options, Result, Table, fmt_rate, fmt_ratio, out, progress, start_ray

N = 3_000_000
N_QUICK = 300_000
LATENCY_SAMPLES = 40
THROUGHPUT_TARGET = 0.95
P50_TARGET_MS = 150
P99_TARGET_MS = 1000


def _graph(n: int):
    from atoll import Keep, Sink, Source

    return Source.range(0, n).island().map(lambda x: x % 1000).island().to_mat(Sink.fold(0, operator.add), Keep.right)


def _run(mat, n: int) -> int:
    return _graph(n).run(mat).result(600)


def _best(fn, runs: int) -> float:
    fn()  # warm-up
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _latencies(mat, samples: int) -> List[float]:
    """Seconds from trigger to durable manifest, ``samples`` times, on a graph that keeps running meanwhile."""
    from atoll import Keep, Source
    from atoll.testkit import TestSink

    probe = (Source.repeat(1).island().map(lambda x: x + 1).island().to_mat(TestSink.probe(), Keep.right)
             .run(mat, name="latency"))
    probe.request(10)
    probe.expect_next_n(10)
    g = mat.running_graph("latency")
    out_ = []
    for _ in range(samples):
        t0 = time.perf_counter()
        g.checkpoint_now(timeout=60)
        out_.append(time.perf_counter() - t0)
    g.cancel()
    g.wait(30)
    return out_


RECOVERY_TARGET_S = 3.0
RECOVERY_SAMPLES = 5


def _recovery_times(storage: str, samples: int) -> List[float]:
    """Seconds from ``ray.kill`` of the middle island to every island of the next attempt running (the
    driver's futures rebound, the interpreters started), with no back-off, ``samples`` times."""
    from atoll import CheckpointSettings, KillSwitches, Keep, Materializer, RestartPolicy, Sink, Source
    from atoll.testkit.chaos import kill_island

    mat = Materializer.ray(checkpoint=CheckpointSettings(storage=storage, restart=RestartPolicy(
        max_restarts=samples, backoff=0.0)))
    times = []
    try:
        switch, total = (Source.repeat(1).via_mat(KillSwitches.single(), Keep.right).island().map(lambda x: x + 1)
                         .island().to_mat(Sink.fold(0, operator.add), Keep.both)).run(mat, name="recovery")
        g = mat.running_graph("recovery")
        for k in range(samples):
            g.checkpoint_now(timeout=60)
            t0 = time.perf_counter()
            kill_island(g, 1)
            while g.attempt < k + 1:
                time.sleep(0.001)
            times.append(time.perf_counter() - t0)
        switch.shutdown()
        total.result(60)
    finally:
        mat.shutdown()
    return times


def run(opts: Options) -> Result:
    from atoll import CheckpointSettings, Materializer

    n = N_QUICK if opts.quick else N
    runs = opts.runs
    res = Result("checkpoint", params={"n": n, "runs": runs, "throughput_target": THROUGHPUT_TARGET,
                                       "p50_target_ms": P50_TARGET_MS, "p99_target_ms": P99_TARGET_MS})
    out(f"checkpoint: {n:,} ints through 3 islands into a fold; 1 warm-up, best of {runs}")
    started = start_ray()
    import ray

    storage = tempfile.mkdtemp(prefix="atoll-bench-ckpt-")
    want = sum(x % 1000 for x in range(n))
    table = Table(["materializer", "variant", "seconds", "ints/s", "vs off"])
    try:
        for kind, factory in (("ray", Materializer.ray), ("local", Materializer.local)):
            mats: Dict[str, Any] = {
                "off": factory(),
                "wired, no interval": factory(checkpoint=CheckpointSettings(storage=storage)),
                "every 1 s": factory(checkpoint=CheckpointSettings(storage=storage, interval=1.0)),
            }
            secs: Dict[str, float] = {}
            for variant, mat in mats.items():
                progress(f"checkpoint/{kind}/{variant}")
                got = _run(mat, n)
                if got != want:
                    res.ok = False
                    res.notes.append(f"{kind}/{variant}: sum {got} != {want}")
                secs[variant] = _best(lambda mat=mat: _run(mat, n), runs)
            for variant, s in secs.items():
                ratio = secs["off"] / s
                table.add(kind, variant, f"{s:.2f}", fmt_rate(n / s), fmt_ratio(ratio))
                res.rows.append({"materializer": kind, "variant": variant, "seconds": s, "ratio_vs_off": ratio})
            progress(f"checkpoint/{kind}/latency")
            lat = sorted(_latencies(mats["wired, no interval"], LATENCY_SAMPLES if not opts.quick else 10))
            p50 = statistics.median(lat) * 1000
            p99 = lat[min(len(lat) - 1, int(round(0.99 * (len(lat) - 1))))] * 1000
            res.summary[f"{kind}_every_1s_vs_off"] = secs["off"] / secs["every 1 s"]
            res.summary[f"{kind}_wired_vs_off"] = secs["off"] / secs["wired, no interval"]
            res.summary[f"{kind}_latency_p50_ms"] = p50
            res.summary[f"{kind}_latency_p99_ms"] = p99
            for mat in mats.values():
                mat.shutdown()
        out(table.render())
        for kind in ("ray", "local"):
            s = res.summary
            out(f"{kind}: every 1 s vs off {s[f'{kind}_every_1s_vs_off']:.3f} (target >= {THROUGHPUT_TARGET}); "
                f"wired vs off {s[f'{kind}_wired_vs_off']:.3f}; checkpoint latency p50 {s[f'{kind}_latency_p50_ms']:.0f} ms "
                f"(target <= {P50_TARGET_MS}), p99 {s[f'{kind}_latency_p99_ms']:.0f} ms (target <= {P99_TARGET_MS})")
        progress("checkpoint/ray/recovery")
        rec = sorted(_recovery_times(storage, RECOVERY_SAMPLES))
        res.summary["ray_recovery_median_s"] = statistics.median(rec)
        res.summary["ray_recovery_max_s"] = rec[-1]
        out(f"ray: kill -> next attempt running (3 islands, no back-off, {len(rec)} kills): median "
            f"{statistics.median(rec):.2f} s, max {rec[-1]:.2f} s (target <= {RECOVERY_TARGET_S:.0f} s + back-off)")
    finally:
        if started:
            ray.shutdown()
    return res
