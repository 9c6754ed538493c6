"""``pool``: a stateful "model" on a pool of 2 Ray actors: Atoll ``map_pool`` vs Ray Data vs ``ray.util.ActorPool``.

10^5 ints (10^4 with ``--quick``) go through ``Model``, a class whose constructor builds its state once per
actor and whose call costs about 2 ms of CPU per batch of 64 (a busy loop, not a sleep) and returns
``[x * 3 + offset for x in batch]``. Variants, each starting its own 2 actors inside the timed run:

* atoll: ``Source.range(n).map_pool(Model, size=2, batch_size=64).run_with(Sink.seq())`` on
  ``Materializer.ray()`` (the island driving the pool asks for ``num_cpus=0``) - and the same graph on
  ``Materializer.local()`` (the island in the driver, the pool actors on Ray) as a second row;
* ray-data: ``ray.data.from_items(...).map_batches(Model, batch_size=64, compute=ActorPoolStrategy(size=2))``,
  then ``take_all()``;
* actor-pool: ``ray.util.ActorPool`` of 2 actors mapping the pre-cut batches of 64 (one call in flight per actor).

All results are checked against the plain-Python result before timing (Ray Data's in sorted order: it
does not keep the order unless ``preserve_order`` is set). Also measured: the time from the start to the
first result (Atoll ``Sink.head()`` vs Ray Data's first row from ``iter_rows``), and the most elements
the Atoll stage held (pulled minus emitted, counted around the stage on the local materializer; the
bound is ``2 actors x 2 in flight x 64 = 256``).

**First result, cold and warm.** Every Ray Data run starts its own 2 actors (new worker processes), so
its first result is always a cold one; its best of ``runs`` is the figure. Atoll's cold first result is
measured the same way: ``runs`` times, each on a fresh ``Materializer.ray`` (no Atoll actor alive: new
island actors, new pool actors), interleaved with Ray Data's runs (so that the load of the machine falls
on both alike), each run of either side after the same pause, and the best is the figure. Three Atoll
graphs: the throughput graph above (``.island(num_cpus=0)`` puts ``Source.range -> map_pool`` in one
island and ``Sink.head`` in a second one: 2 island actors + 2 pool actors = 4 new worker processes), the
same graph without ``.island`` (one island actor + 2 pool actors) and ``Materializer.local`` (the island
in the driver, 2 new pool actors per run, as Ray Data's executor in the driver with its 2 actors). The
warm figure: runs that find the actors the previous run left in the materializer's warm pool.

**CPU to the first result.** A cold first result is mostly worker-process starts (Ray's own start of a
worker costs about 0.35 s of CPU before any actor code runs, an empty actor about 0.45 s), and on a machine
with few cores they share the cores, so the cold figures follow the CPU the run spends. The benchmark runs
each cold variant again (``CPU_RUNS`` times, untimed: the sampling costs CPU) with the CPU of the driver and
of every process of the Ray session sampled (``pool_cpu``), and prints it per process: how many worker
processes each side starts, and what each costs.

**Bytecode.** Installing a wheel writes the ``.pyc`` files of its modules; an editable install does not,
and with ``PYTHONDONTWRITEBYTECODE=1`` (set in some environments, this project's sandbox among them) no
process ever writes them, so every new Ray worker process that imports Atoll compiled its ~180 modules
from source (about 0.3 s of CPU per process on a small machine), while Ray's and Ray Data's modules come
compiled by pip. The benchmark compiles Atoll's bytecode before measuring (``compileall``, as a wheel
install does), so both sides load bytecode.

``Materializer.ray`` keeps the actors of cleanly ended graphs warm for the next graphs (island actors, and
the pool actors the driver started): they hold their CPUs while idle. So that nothing of Atoll's holds
resources while another variant runs, its Ray materializer is shut down (idle actors killed) before every
run of another variant, and Atoll's timed runs start on a fresh one: the first is *cold* (new island actors,
new pool actors - reported apart), the later ones find what the earlier left, as a repeated job would; the
best of them is the figure compared with Ray Data's best.
"""
from __future__ import annotations

import os
import statistics
import time
from typing import Any, Dict, List

from ._common import Options, Result, Table, fmt_rate, fmt_ratio, out, progress, start_ray

N = 100_000
N_QUICK = 10_000
BATCH = 64
ACTORS = 2
CALL_COST_S = 0.002
THROUGHPUT_TARGET = 1.2
FIRST_TARGET = 0.5
#: seconds every first-result run (either side) waits before it starts: the processes of the actors killed
#: before it exit meanwhile, so that each run starts from the same state of Ray's worker pool
SETTLE_S = 1.0
#: cold first-result runs measured again with the CPU of every process sampled (``pool_cpu``), per variant
CPU_RUNS = 2


def compile_bytecode() -> tuple:
    """Write the bytecode of Atoll's and the benchmarks' modules (what installing a wheel does; see the
    module docstring). Returns (modules (re)compiled now, .pyc files of Atoll's modules)."""
    import compileall
    import contextlib
    import io

    import atoll

    start = time.time() - 1.0
    roots = [os.path.dirname(atoll.__file__), os.path.dirname(os.path.abspath(__file__))]
    with contextlib.redirect_stdout(io.StringIO()):
        for root in roots:
            compileall.compile_dir(root, quiet=1)
    pycs = [os.path.join(d, f) for d, _sub, files in os.walk(os.path.dirname(atoll.__file__))
            for f in files if f.endswith(".pyc")]
    return sum(1 for f in pycs if os.path.getmtime(f) >= start), len(pycs)


class Model:
    """The stateful "model": state built once per actor; ~2 ms of CPU per call (a batch of up to 64)."""

    def __init__(self, offset: int = 1):
        self.offset = offset
        self.table = [i * 3 for i in range(1000)]  # "weights", built once

    def __call__(self, batch: List[int]) -> List[int]:
        end = time.perf_counter() + CALL_COST_S
        while time.perf_counter() < end:  # busy: CPU, not a sleep
            pass
        return [x * 3 + self.offset for x in batch]


class RayDataModel:
    """Ray Data's side: the same ``Model`` on the ``item`` column of a numpy batch."""

    def __init__(self):
        self.model = Model()

    def __call__(self, batch: Dict[str, Any]) -> Dict[str, Any]:
        import numpy as np

        return {"item": np.asarray(self.model(batch["item"].tolist()), dtype=np.int64)}


def expected(n: int) -> List[int]:
    return [x * 3 + 1 for x in range(n)]


def run_atoll(mat, n: int, island: bool) -> List[int]:
    from atoll import Sink, Source

    g = Source.range(0, n).map_pool(Model, size=ACTORS, batch_size=BATCH)
    if island:
        g = g.island(num_cpus=0)
    return g.run_with(Sink.seq(), mat).result()


def atoll_first(mat, n: int, island: bool = True) -> float:
    from atoll import Sink, Source

    t0 = time.perf_counter()
    g = Source.range(0, n).map_pool(Model, size=ACTORS, batch_size=BATCH)
    if island:
        g = g.island(num_cpus=0)
    g.run_with(Sink.head(), mat).result()
    return time.perf_counter() - t0


def atoll_held(n: int) -> tuple:
    """(max held, result) on the local materializer: pulled and emitted counted around the stage."""
    from atoll import Materializer, Sink, Source

    count = {"pulled": 0, "emitted": 0, "max": 0}

    def pulled(x):
        count["pulled"] += 1
        count["max"] = max(count["max"], count["pulled"] - count["emitted"])
        return x

    def emitted(x):
        count["emitted"] += 1
        return x

    mat = Materializer.local()
    try:
        got = Source.range(0, n).map(pulled).map_pool(Model, size=ACTORS, batch_size=BATCH).map(emitted) \
            .run_with(Sink.seq(), mat).result()
    finally:
        mat.shutdown()
    return count["max"], got


def _ray_data_ds(n: int):
    import ray.data
    from ray.data import ActorPoolStrategy

    return ray.data.from_items(list(range(n))).map_batches(
        RayDataModel, batch_size=BATCH, batch_format="numpy", compute=ActorPoolStrategy(size=ACTORS))


def run_ray_data(n: int) -> List[int]:
    return [int(r["item"]) for r in _ray_data_ds(n).take_all()]


def ray_data_first(n: int) -> float:
    """Seconds from the start to the first row (every run starts its own actors: a cold start)."""
    t0 = time.perf_counter()
    for _row in _ray_data_ds(n).iter_rows():
        break
    return time.perf_counter() - t0


def run_actor_pool(n: int) -> List[int]:
    import ray
    from ray.util import ActorPool

    remote = ray.remote(num_cpus=1)(Model)
    actors = [remote.remote() for _ in range(ACTORS)]
    try:
        pool = ActorPool(actors)
        batches = [list(range(i, min(i + BATCH, n))) for i in range(0, n, BATCH)]
        got: List[int] = []
        for part in pool.map(lambda a, b: a.__call__.remote(b), batches):
            got.extend(part)
        return got
    finally:
        for a in actors:
            ray.kill(a)


def _wait_warm(mat, k: int, timeout: float = 10.0) -> None:
    """Wait until ``mat``'s warm pool holds ``k`` idle actors (the previous graph's actors are given back
    asynchronously once it ended), at most ``timeout`` seconds."""
    pool = getattr(mat, "warm_pool", None)
    end = time.monotonic() + timeout
    while pool is not None and pool.idle_count() < k and time.monotonic() < end:
        time.sleep(0.02)


def _best(fn, runs: int) -> tuple:
    times, value = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t0)
    return times, value


def run(opts: Options) -> Result:
    import logging

    import ray

    from atoll import Materializer

    n = N_QUICK if opts.quick else N
    runs = opts.runs
    res = Result("pool", params={"n": n, "batch": BATCH, "actors": ACTORS, "call_cost_s": CALL_COST_S, "runs": runs,
                                 "throughput_target": THROUGHPUT_TARGET, "first_target": FIRST_TARGET})
    out(f"pool: {n:,} ints, Model ~{CALL_COST_S * 1000:.0f} ms CPU per batch of {BATCH}, {ACTORS} actors; "
        f"1 warm-up, best of {runs}")
    compiled, pycs = compile_bytecode()
    out(f"bytecode: {compiled} of Atoll's modules (re)compiled now, {pycs} .pyc files (see the docstring)")
    started = start_ray()
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    import ray.data

    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    mats = {"ray": Materializer.ray()}
    lmat = Materializer.local()

    def fresh_ray_mat() -> None:
        """Shut Atoll's Ray materializer down (its idle warm actors killed) and start a new one."""
        mats["ray"].shutdown()
        mats["ray"] = Materializer.ray()

    variants = {
        "atoll": lambda k: run_atoll(mats["ray"], k, island=True),
        "atoll-local": lambda k: run_atoll(lmat, k, island=False),
        "ray-data": run_ray_data,
        "actor-pool": run_actor_pool,
    }
    try:
        want = expected(n)
        progress("checking results")
        for name, fn in variants.items():
            if not name.startswith("atoll"):
                fresh_ray_mat()
            got = fn(n)
            ok = sorted(got) == want if name == "ray-data" else got == want
            if not ok:
                res.ok = False
                res.notes.append(f"{name}: result differs from the expected one (len {len(got)})")
        times: Dict[str, list] = {}
        for name, fn in variants.items():
            progress(f"pool/{name}")
            if name != "atoll-local":  # atoll's first timed run is cold (reported apart), the others' all are
                fresh_ray_mat()
            times[name], _ = _best(lambda fn=fn: fn(n), runs)
        progress("first results, cold")

        def cold_ray(island: bool) -> float:
            fresh_ray_mat()  # no Atoll actor alive: new island actors, new pool actors
            time.sleep(SETTLE_S)
            return atoll_first(mats["ray"], n, island=island)

        def cold_local() -> float:
            time.sleep(SETTLE_S)  # Materializer.local keeps no pool actor: every run starts 2 new ones
            return atoll_first(lmat, n, island=False)

        def cold_rd() -> float:
            fresh_ray_mat()  # nothing of Atoll's alive or holding CPUs
            time.sleep(SETTLE_S)
            return ray_data_first(n)

        cold_variants = {"atoll": lambda: cold_ray(True), "atoll-1-island": lambda: cold_ray(False),
                         "atoll-local": cold_local, "ray-data": cold_rd}
        colds: Dict[str, list] = {k: [] for k in cold_variants}
        for _ in range(runs):  # interleaved: the machine's load falls on every variant alike
            for name, fn in cold_variants.items():
                colds[name].append(fn())
        progress("first results, cold: CPU per process")
        from .pool_cpu import CpuSampler

        cpu_runs: Dict[str, list] = {k: [] for k in cold_variants}
        for _ in range(min(runs, CPU_RUNS)):  # runs of their own: the sampling costs CPU
            for name, fn in cold_variants.items():
                sampler = CpuSampler()
                if name != "atoll-local":
                    fresh_ray_mat()  # as in the timed cold runs: no Atoll actor alive
                time.sleep(SETTLE_S)
                with sampler:
                    if name == "ray-data":
                        ray_data_first(n)
                    else:
                        atoll_first(mats["ray"] if name != "atoll-local" else lmat, n, island=name == "atoll")
                cpu_runs[name].append(sampler.report())
        progress("first results, warm")
        fresh_ray_mat()
        atoll_first(mats["ray"], n)  # cold: leaves its actors warm for the next runs
        firsts = []
        for _ in range(runs):
            _wait_warm(mats["ray"], 2 + ACTORS)  # 2 island actors and the pool actors, given back
            firsts.append(atoll_first(mats["ray"], n))
        first_atoll = min(firsts)
        first_local = min(colds["atoll-local"])
        first_rd = min(colds["ray-data"])
        first_cold = min(colds["atoll"])
        progress("max held")
        held, got = atoll_held(n)
        if got != want:
            res.ok = False
            res.notes.append("atoll (held count run): result differs")
    finally:
        mats["ray"].shutdown()
        lmat.shutdown()
        if started:
            ray.shutdown()

    best = {k: min(v) for k, v in times.items()}
    rates = {k: n / v for k, v in best.items()}
    what = {
        "atoll": "map_pool(Model, size=2, batch_size=64) in an island (Materializer.ray)",
        "atoll-local": "the same on Materializer.local (island in the driver, actors on Ray)",
        "ray-data": "from_items -> map_batches(Model, 64, ActorPoolStrategy(size=2)) -> take_all",
        "actor-pool": "ray.util.ActorPool(2 actors).map over batches of 64",
    }
    table = Table(["variant", "elements", "best s", "elements/s", "vs Ray Data", "what"])
    for k in variants:
        table.add(k, f"{n:,}", f"{best[k]:.2f}", fmt_rate(rates[k]), fmt_ratio(rates[k] / rates["ray-data"]),
                  what[k])
    out(table.render())
    ratio = rates["atoll"] / rates["ray-data"]
    first_share = first_atoll / first_rd
    met = "met" if ratio >= THROUGHPUT_TARGET else "NOT met"
    cold_rate = n / times["atoll"][0]
    out(f"atoll's first timed run, cold (fresh Materializer.ray: new island and pool actors): "
        f"{times['atoll'][0]:.2f}s = {fmt_rate(cold_rate)}/s = {cold_rate / rates['ray-data']:.3f}x ray-data's best")
    out(f"atoll/ray-data = {ratio:.3f} (target >= {THROUGHPUT_TARGET}: {met}); "
        f"atoll/actor-pool = {rates['atoll'] / rates['actor-pool']:.3f}")
    def verdict(share: float) -> str:
        return f"target < {FIRST_TARGET}x: {'met' if share < FIRST_TARGET else 'NOT met'}"

    def runs_of(ts: list) -> str:
        return ", ".join(f"{t:.2f}" for t in ts) + f" (median {statistics.median(ts):.2f})"

    out(f"first result, warm (the previous run's actors in the warm pool): atoll {first_atoll:.2f}s, ray-data "
        f"{first_rd:.2f}s (always cold) = {first_share:.2f}x ({verdict(first_share)}); runs {runs_of(firsts)}")
    out(f"first result, cold (best of {runs}, each run of either side with new actors; ray-data {first_rd:.2f}s, "
        f"runs {runs_of(colds['ray-data'])}):")
    cold_what = {"atoll": "2 islands (the throughput graph): 4 new worker processes",
                 "atoll-1-island": "the same graph without .island(): 3 new worker processes",
                 "atoll-local": "island in the driver, as Ray Data's executor: 2 new worker processes"}
    for k, what in cold_what.items():
        share = min(colds[k]) / first_rd
        out(f"  {k:<15} {min(colds[k]):.2f}s = {share:.2f}x ({verdict(share)}); {what}; runs {runs_of(colds[k])}")
    from .pool_cpu import summary

    def cpu_total(rep) -> float:
        return rep[0] + sum(r[1] for r in rep[1])

    cpu_best = {k: min(v, key=cpu_total) for k, v in cpu_runs.items()}
    out(f"CPU to the first result, cold (runs of their own, of {min(runs, CPU_RUNS)} per variant the one with the least "
        "CPU; every process of the Ray session and the driver sampled; * = process started during the run, counted "
        "with its start; a worker Ray had started idle before the run counts without it):")
    for k, rep in cpu_best.items():
        out(f"  {k:<15} {summary(*rep)}; {cpu_total(rep) / cpu_total(cpu_best['ray-data']):.2f}x ray-data's")
    out(f"most elements held by the atoll stage: {held} (bound {ACTORS * 2 * BATCH})")
    res.rows = [{"variant": k, "times_s": times[k], "best_s": best[k], "elements_per_s": rates[k]} for k in variants]
    res.summary = {"atoll_over_ray_data": ratio, "throughput_target_met": ratio >= THROUGHPUT_TARGET,
                   "atoll_over_actor_pool": rates["atoll"] / rates["actor-pool"],
                   "first_result_atoll_s": first_atoll, "first_result_ray_data_s": first_rd,
                   "first_result_share": first_share, "first_result_atoll_local_s": first_local,
                   "first_result_atoll_cold_s": first_cold, "first_result_cold_share": first_cold / first_rd,
                   "first_result_atoll_runs_s": firsts,
                   "first_result_cold_runs_s": colds,
                   "first_result_cold_best_s": {k: min(v) for k, v in colds.items()},
                   "first_result_cold_shares": {k: min(v) / first_rd for k, v in colds.items()},
                   "atoll_modules_compiled": compiled,
                   "first_target_met": first_share < FIRST_TARGET,
                   "first_cold_target_met": {k: min(v) / first_rd < FIRST_TARGET for k, v in colds.items()
                                             if k != "ray-data"},
                   "atoll_cold_run_s": times["atoll"][0], "atoll_cold_over_ray_data": cold_rate / rates["ray-data"],
                   "max_held": held, "held_bound": ACTORS * 2 * BATCH,
                   "first_result_cold_cpu_s": {k: {"driver": rep[0], "processes": rep[1], "total": cpu_total(rep)}
                                               for k, rep in cpu_best.items()}}
    for note in res.notes:
        out(f"note: {note}")
    return res
