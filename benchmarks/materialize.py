"""``materialize``: how long a graph takes to start on Ray, for 1, 4 and 8 islands.

The graph is ``Source.repeat(1)`` followed by k - 1 ``map(+1).island()`` (so k islands, a chain), then
a ``map`` that stamps the element with ``time.time()`` in the last island, then ``Sink.head()``.
Per run it measures, from the ``run()`` call on the driver:

- ``run()``        — how long the call takes (it returns once every island actor is up, has built its
                     island and reported its materialized values, and its interpreter was started);
- ``first elem``   — when the first element reached the sink island (the stamp; same machine, same
                     wall clock);
- ``head future``  — when the ``Sink.head()`` future completed on the driver.

The reference is raw Ray: create k empty actors (``num_cpus=0``, as the islands) and call one method
on each; the time until all answered is the floor any actor-per-island design pays (mostly new worker
processes: on a small machine they start one after the other). Between runs the previous graph is
waited for (until its actor processes are gone). One warm-up round, then the median (and max) of ``runs`` rounds; sizes
interleaved so that machine noise spreads over all of them.
"""
from __future__ import annotations

import statistics
import time
from typing import Dict, List

from ._common import Options, Result, Table, fmt_secs, out, progress, run_graph, start_ray, wait_actors_gone

SIZES = (1, 4, 8)
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


def _atoll_once(mat, k: int) -> Dict[str, float]:
    graph = _graph(k)
    wall0 = time.time()
    t0 = time.perf_counter()
    fut, handle, run_secs = run_graph(graph, mat)
    value, stamp = fut.result(timeout=120)
    head_secs = time.perf_counter() - t0
    islands = len(handle.islands()) if handle is not None else None
    if value != k:
        raise RuntimeError(f"materialize: {k} islands gave first element {value!r}, expected {k}")
    # let the graph end (the head cancelled the chain) and its actors go before the next run
    deadline = time.monotonic() + 60
    while mat.running_graphs() and time.monotonic() < deadline:
        time.sleep(0.005)
    wait_actors_gone("ray::IslandActor")
    return {"run_s": run_secs, "first_s": stamp - wall0, "head_s": head_secs, "islands": islands}


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
    samples: Dict[int, List[Dict[str, float]]] = {k: [] for k in SIZES}
    raw: Dict[int, List[float]] = {k: [] for k in SIZES}
    try:
        mat = Materializer.ray()
        try:
            for r in range(runs + 1):
                for k in SIZES:
                    progress(f"materialize round {r}{' (warm-up)' if r == 0 else ''}: {k} island(s)")
                    a = _atoll_once(mat, k)
                    b = _raw_once(k)
                    if r > 0:
                        samples[k].append(a)
                        raw[k].append(b)
                    if a["islands"] not in (None, k):
                        res.ok = False
                        res.notes.append(f"{k} islands expected, the graph had {a['islands']}")
        finally:
            mat.shutdown()
    finally:
        if started:
            ray.shutdown()

    table = Table(["islands", "run() s", "first elem s", "max first s", "head future s", "raw Ray k actors s",
                   "first - raw s"])
    for k in SIZES:
        s = samples[k]
        med = lambda key: statistics.median(x[key] for x in s)  # noqa: E731
        row = {"islands": k, "run_s": [x["run_s"] for x in s], "first_element_s": [x["first_s"] for x in s],
               "head_future_s": [x["head_s"] for x in s], "raw_actors_ready_s": raw[k],
               "run_median_s": med("run_s"), "first_element_median_s": med("first_s"),
               "first_element_max_s": max(x["first_s"] for x in s), "head_future_median_s": med("head_s"),
               "raw_actors_ready_median_s": statistics.median(raw[k])}
        row["first_minus_raw_s"] = row["first_element_median_s"] - row["raw_actors_ready_median_s"]
        res.rows.append(row)
        table.add(k, fmt_secs(row["run_median_s"]), fmt_secs(row["first_element_median_s"]),
                  fmt_secs(row["first_element_max_s"]), fmt_secs(row["head_future_median_s"]),
                  fmt_secs(row["raw_actors_ready_median_s"]), fmt_secs(row["first_minus_raw_s"]))
    out(table.render())
    out("(medians over the timed rounds; 'first elem' = run() call -> first element at the sink island; "
        "'first - raw' = what Atoll adds to starting k bare actors)")
    res.summary = {f"islands_{r['islands']}_first_element_s": r["first_element_median_s"] for r in res.rows}
    res.summary.update({f"islands_{r['islands']}_run_s": r["run_median_s"] for r in res.rows})
    for note in res.notes:
        out(f"note: {note}")
    return res
