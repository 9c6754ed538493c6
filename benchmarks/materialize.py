"""``materialize``: how long a graph takes to start on Ray, for 1, 4 and 8 islands.

The graph is ``Source.repeat(1)`` followed by k - 1 ``map(+1).island()`` (so k islands, a chain), then
a ``map`` that stamps the element with ``time.time()`` in the last island, then ``Sink.head()``.
Per run it measures, from the ``run()`` call on the driver:

- ``run()``        — how long the call takes (it returns once every island actor is up, has built its
                     island and reported its materialized values, and its interpreter was started);
- ``first elem``   — when the first element reached the sink island (the stamp; same machine, same
                     wall clock);
- ``head future``  — when the ``Sink.head()`` future completed on the driver.

Two materializers: *cold* (``reuse_actors=False``: new actors for every graph, the previous graph's
actor processes waited for until gone) and *warm* (the default: a cleanly ended graph's actors are reset
and reused by the next graph; the warm-up round fills the pool). The target (issue 13): from the second
graph on, run() -> first element < 100 ms per island; after the warm materializer's ``shutdown()`` no
island actor process may be left.

*Back to back* (a third materializer, warm, its pool empty at first): ``BACK_TO_BACK`` graphs of 2 islands
(``Source.range(0, 1000).island()`` into a fold), each started as soon as the previous one's future completed,
without waiting for that graph to end (as a script running jobs one after the other does): the median and max
``run()`` and how many islands got a fresh actor (the previous graph's actors are still on their way back when its
future completes; the pool waits for them).

The reference is raw Ray: create k empty actors (``num_cpus=0``, as the islands) and call one method
on each; the time until all answered is the floor any design that starts new actors pays (mostly new
worker processes: on a small machine they start one after the other). One warm-up round, then the median
(and max) of ``runs`` rounds; sizes interleaved so that machine noise spreads over all of them.
"""
from __future__ import annotations

import statistics
import time
from typing import Dict, List

from ._common import (Options, Result, Table, actor_pids, fmt_secs, out, progress, run_graph, start_ray,
                      wait_actors_gone)

SIZES = (1, 4, 8)
BACK_TO_BACK = 10  # graphs started one right after the other's result
MIN_RUNS = 3  # full runs: at least this many rounds (a median of 1 says little)

_raw_actor = None


def _raw_actor_class():
    global _raw_actor
    if _raw_actor is None:
        import ray

        @ray.remote(num_cpus=0)
        class BareActor:
            def ready(self) -> bool:
                return True

        _raw_actor = BareActor
    return _raw_actor


def _graph(k: int):
    from atoll import Keep, Sink, Source

    g = Source.repeat(1)
    for _ in range(k - 1):
        g = g.map(lambda x: x + 1).island()
    return g.map(lambda x: (x, time.time())).to_mat(Sink.head(), Keep.right)


def _atoll_once(mat, k: int, cold: bool, keep: int = 0) -> Dict[str, float]:
    graph = _graph(k)
    wall0 = time.time()
    t0 = time.perf_counter()
    fut, handle, run_secs = run_graph(graph, mat)
    value, stamp = fut.result(timeout=120)
    head_secs = time.perf_counter() - t0
    islands = len(handle.islands()) if handle is not None else None
    if value != k:
        raise RuntimeError(f"materialize: {k} islands gave first element {value!r}, expected {k}")
    # let the graph end (the head cancelled the chain): its actors go back to the pool (warm) or are
    # killed (cold: wait until their processes are gone - all but the ``keep`` idle warm ones - before the next run)
    deadline = time.monotonic() + 60
    while mat.running_graphs() and time.monotonic() < deadline:
        time.sleep(0.005)
    if cold:
        while len(actor_pids("ray::IslandActor")) > keep and time.monotonic() < deadline:
            time.sleep(0.01)
    return {"run_s": run_secs, "first_s": stamp - wall0, "head_s": head_secs, "islands": islands}


def _back_to_back(mat, graphs: int) -> Dict[str, float]:
    """``graphs`` 2-island graphs, each run as soon as the previous one's future completed: run() seconds and the
    islands that did not get a warm actor (the first graph's two included: the pool starts empty)."""
    import operator

    from atoll import Keep, Sink, Source

    pool = mat.warm_pool
    runs = []
    fresh = 0
    for _ in range(graphs):
        graph = Source.range(0, 1000).island().to_mat(Sink.fold(0, operator.add), Keep.right)
        reused = pool.reused
        t0 = time.perf_counter()
        fut = graph.run(mat)
        runs.append(time.perf_counter() - t0)
        fresh += 2 - (pool.reused - reused)
        if fut.result(timeout=120) != 499500:
            raise RuntimeError("materialize: the back-to-back graph gave a wrong sum")
    return {"run_median_s": statistics.median(runs), "run_max_s": max(runs), "fresh_islands": fresh}


def _raw_once(k: int) -> float:
    import ray

    cls = _raw_actor_class()
    t0 = time.perf_counter()
    actors = [cls.remote() for _ in range(k)]
    ray.get([a.ready.remote() for a in actors])
    secs = time.perf_counter() - t0
    for a in actors:
        ray.kill(a, no_restart=True)
    wait_actors_gone("ray::BareActor")
    return secs


def run(opts: Options) -> Result:
    import ray

    from atoll import Materializer

    runs = opts.runs if opts.quick else max(MIN_RUNS, opts.runs)
    res = Result("materialize", params={"sizes": list(SIZES), "runs": runs, "warmup": 1})
    out(f"materialize: Source.repeat(1) -> (k-1) x map.island() -> stamp -> Sink.head(), k = "
        f"{', '.join(map(str, SIZES))}; raw Ray: k empty actors ready; 1 warm-up round + median of {runs}")
    progress("ray.init")
    started = start_ray()
    cold: Dict[int, List[Dict[str, float]]] = {k: [] for k in SIZES}
    warm: Dict[int, List[Dict[str, float]]] = {k: [] for k in SIZES}
    raw: Dict[int, List[float]] = {k: [] for k in SIZES}
    left_after_shutdown = None
    try:
        cold_mat = Materializer.ray(reuse_actors=False)
        warm_mat = Materializer.ray()
        try:
            for r in range(runs + 1):
                for k in SIZES:
                    progress(f"materialize round {r}{' (warm-up)' if r == 0 else ''}: {k} island(s)")
                    a = _atoll_once(cold_mat, k, cold=True, keep=warm_mat.warm_pool.idle_count())
                    w = _atoll_once(warm_mat, k, cold=False)
                    b = _raw_once(k)
                    if r > 0:
                        cold[k].append(a)
                        warm[k].append(w)
                        raw[k].append(b)
                    for x in (a, w):
                        if x["islands"] not in (None, k):
                            res.ok = False
                            res.notes.append(f"{k} islands expected, the graph had {x['islands']}")
            progress(f"materialize: {BACK_TO_BACK} graphs back to back")
            b2b_mat = Materializer.ray()  # a pool of its own, empty at first (the warm one holds 8 idle actors)
            try:
                b2b = _back_to_back(b2b_mat, BACK_TO_BACK)
            finally:
                b2b_mat.shutdown()
        finally:
            cold_mat.shutdown()
            warm_mat.shutdown()
            wait_actors_gone("ray::IslandActor")
            left_after_shutdown = len(actor_pids("ray::IslandActor"))
    finally:
        if started:
            ray.shutdown()

    table = Table(["islands", "cold first elem s", "warm run() s", "warm first elem s", "warm max first s",
                   "warm first / island ms", "raw Ray k actors s", "target < 100 ms/island"])
    for k in SIZES:
        c, w = cold[k], warm[k]
        med = lambda s, key: statistics.median(x[key] for x in s)  # noqa: E731
        row = {"islands": k, "cold_first_element_s": [x["first_s"] for x in c],
               "warm_first_element_s": [x["first_s"] for x in w], "warm_run_s": [x["run_s"] for x in w],
               "raw_actors_ready_s": raw[k],
               "cold_first_element_median_s": med(c, "first_s"), "cold_run_median_s": med(c, "run_s"),
               "warm_run_median_s": med(w, "run_s"), "warm_first_element_median_s": med(w, "first_s"),
               "warm_first_element_max_s": max(x["first_s"] for x in w),
               "raw_actors_ready_median_s": statistics.median(raw[k])}
        row["warm_first_per_island_ms"] = 1000 * row["warm_first_element_median_s"] / k
        row["target_met"] = row["warm_first_per_island_ms"] < 100
        res.rows.append(row)
        table.add(k, fmt_secs(row["cold_first_element_median_s"]), fmt_secs(row["warm_run_median_s"]),
                  fmt_secs(row["warm_first_element_median_s"]), fmt_secs(row["warm_first_element_max_s"]),
                  f"{row['warm_first_per_island_ms']:.1f}", fmt_secs(row["raw_actors_ready_median_s"]),
                  "met" if row["target_met"] else "NOT met")
    out(table.render())
    out("(medians over the timed rounds; 'first elem' = run() call -> first element at the sink island; cold: new "
        "actors per graph; warm: actors of the previous graphs reused)")
    out(f"back to back: {BACK_TO_BACK} graphs of 2 islands, each run() as soon as the previous future completed: "
        f"run() median {fmt_secs(b2b['run_median_s'])}, max {fmt_secs(b2b['run_max_s'])}; islands started on a fresh "
        f"actor: {b2b['fresh_islands']} of {2 * BACK_TO_BACK} (2: the first graph's)")
    out(f"island actor processes left after both materializers' shutdown(): {left_after_shutdown}")
    if left_after_shutdown:
        res.ok = False
        res.notes.append(f"{left_after_shutdown} island actor process(es) left after shutdown")
    res.summary = {f"islands_{r['islands']}_warm_first_element_s": r["warm_first_element_median_s"] for r in res.rows}
    res.summary.update({f"islands_{r['islands']}_cold_first_element_s": r["cold_first_element_median_s"]
                        for r in res.rows})
    res.summary["actors_left_after_shutdown"] = left_after_shutdown
    res.summary.update({f"back_to_back_{key}": value for key, value in b2b.items()})
    for note in res.notes:
        out(f"note: {note}")
    return res
