"""``killswitch``: ``switch.shutdown()`` from the driver until the graph has ended and its actors are gone.

The graph (the issue's case, ``busy``) is infinite and busy::

    Source.repeat(1).map(+1).island()  ->  KillSwitches.single().map(id).island()  ->  Sink.ignore()
    \\_____ island A (source) _____/        \\_________ island B (switch) __________/      island C (sink)

After ``run()``, once island B has received elements (the graph is streaming) and a moment more, the
driver calls ``switch.shutdown()``. Measured from that call:

- ``call``     — ``shutdown()`` returned (a round trip to island B's actor);
- ``sink``     — the ``Sink.ignore()`` future completed on the driver (it must complete with ``Done``);
- ``graph``    — the running graph's completion (``RunningGraph.wait``): every island reported its end;
- ``gone``     — every island actor process has exited (checked with psutil on the pids the islands
                 reported; a local Ray). This is the figure of merit: target < 1 s (median and max).

Two backpressured variants (not part of the target; fewer runs) put a slow stage (1 ms sleep per
element) in island B, after the switch (``slow-after``) or before it (``slow-before``, fused with the
channel's input), so that island A is held back by demand and B's input buffer is full when the switch
is used.
"""
from __future__ import annotations

import statistics
import time
from typing import Dict, List

from ._common import Options, Result, Table, fmt_secs, out, pids_alive, progress, run_graph, start_ray

RUNS = 10
RUNS_QUICK = 3
VARIANT_RUNS = 3
VARIANT_RUNS_QUICK = 1
SETTLE = 0.5  # seconds of streaming after the first elements reached island B
TARGET = 1.0


def _slow(x):
    time.sleep(0.001)
    return x


def _graph(variant: str):
    from atoll import Keep, KillSwitches, Sink, Source

    up = Source.repeat(1).map(lambda x: x + 1).island()
    if variant == "slow-before":
        up = up.map(_slow)
    g = up.via_mat(KillSwitches.single(), Keep.right)
    if variant == "slow-after":
        g = g.map(_slow)
    g = g.map(lambda x: x).island()  # island B ends here: the sink is in island C (three islands)
    return g.to_mat(Sink.ignore(), Keep.both)


def _once(mat, variant: str) -> Dict[str, object]:
    from atoll.markers import Done

    (switch, done), handle, run_secs = run_graph(_graph(variant), mat)
    if handle is None:
        raise RuntimeError("killswitch: the infinite graph is not among mat.running_graphs()")
    deadline = time.monotonic() + 60
    while True:
        infos = handle.islands()
        received = sum(i.get("elements_in", 0) for i in infos)
        if received > 0 or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    time.sleep(SETTLE)
    infos = handle.islands()
    pids = [i["pid"] for i in infos if "pid" in i]
    received = sum(i.get("elements_in", 0) for i in infos)
    if len(pids) != 3 or received == 0:
        raise RuntimeError(f"killswitch: expected 3 busy islands, got {infos}")
    t0 = time.perf_counter()
    switch.shutdown()
    t_call = time.perf_counter() - t0
    value = done.result(timeout=60)
    t_sink = time.perf_counter() - t0
    ended = handle.wait(60)
    t_graph = time.perf_counter() - t0
    while pids_alive(pids) and time.perf_counter() - t0 < 60:
        time.sleep(0.002)
    t_gone = time.perf_counter() - t0
    left = pids_alive(pids)
    ok = value is Done and ended and handle.completion.exception() is None and not left
    return {"run_s": run_secs, "call_s": t_call, "sink_s": t_sink, "graph_s": t_graph, "gone_s": t_gone,
            "elements_before": received, "ok": ok,
            "problem": None if ok else f"sink value {value!r}, graph ended {ended}, "
                                       f"completion {handle.completion.exception()!r}, actors left {left}"}


def run(opts: Options) -> Result:
    import ray

    from atoll import Materializer

    plan = [("busy", RUNS_QUICK if opts.quick else RUNS),
            ("slow-after", VARIANT_RUNS_QUICK if opts.quick else VARIANT_RUNS),
            ("slow-before", VARIANT_RUNS_QUICK if opts.quick else VARIANT_RUNS)]
    res = Result("killswitch", params={"variants": dict(plan), "settle_s": SETTLE, "warmup": 1, "target_s": TARGET})
    out("killswitch: Source.repeat(1).map.island() -> KillSwitches.single().map.island() -> Sink.ignore(), "
        "3 islands, busy; "
        "shutdown() from the driver -> sink future, graph completion, actor processes gone; "
        f"1 warm-up, then {plan[0][1]} runs (+{plan[1][1]} per backpressured variant)")
    progress("ray.init")
    started = start_ray()
    samples: Dict[str, List[Dict[str, object]]] = {}
    try:
        mat = Materializer.ray()
        try:
            _once(mat, "busy")  # warm-up
            for variant, runs in plan:
                samples[variant] = []
                for i in range(runs):
                    progress(f"killswitch/{variant} run {i + 1}/{runs}")
                    s = _once(mat, variant)
                    samples[variant].append(s)
                    if not s["ok"]:
                        res.ok = False
                        res.notes.append(f"{variant} run {i + 1}: {s['problem']}")
        finally:
            mat.shutdown()
    finally:
        if started:
            ray.shutdown()

    table = Table(["variant", "runs", "call s", "sink s", "graph s", "gone s (median)", "gone s (max)",
                   "elements before"])
    for variant, _ in plan:
        s = samples[variant]
        med = lambda key: statistics.median(x[key] for x in s)  # noqa: E731
        row = {"variant": variant, "runs": len(s), **{f"{k}_times": [x[k] for x in s]
                                                          for k in ("call_s", "sink_s", "graph_s", "gone_s")},
               "call_median_s": med("call_s"), "sink_median_s": med("sink_s"), "graph_median_s": med("graph_s"),
               "gone_median_s": med("gone_s"), "gone_max_s": max(x["gone_s"] for x in s),
               "elements_before_median": med("elements_before")}
        res.rows.append(row)
        table.add(variant, len(s), fmt_secs(row["call_median_s"]), fmt_secs(row["sink_median_s"]),
                  fmt_secs(row["graph_median_s"]), fmt_secs(row["gone_median_s"]), fmt_secs(row["gone_max_s"]),
                  f"{row['elements_before_median']:,.0f}")
    out(table.render())
    out("(seconds from the shutdown() call; medians except 'gone s (max)'; 'elements before' = elements island B "
        "had received when the switch was used)")
    busy = res.rows[0]
    met = busy["gone_median_s"] < TARGET and busy["gone_max_s"] < TARGET
    res.summary = {"busy_gone_median_s": busy["gone_median_s"], "busy_gone_max_s": busy["gone_max_s"],
                   "target_s": TARGET, "target_met": met}
    out(f"busy: shutdown() -> graph ended and actors gone: median {busy['gone_median_s']:.3f} s, max "
        f"{busy['gone_max_s']:.3f} s (target < {TARGET:.0f} s: {'met' if met else 'NOT met'})")
    for note in res.notes:
        out(f"note: {note}")
    return res
