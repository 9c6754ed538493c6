"""``custom``: n ints through three user-written ``GraphStage``s with no chunk form into a fold.

The stages are map-like push/pull handlers as a user writes them (``on_push``: grab, compute, push;
``on_pull``: pull), so they run element by element in the graph interpreter; the range source and the
fold around them have chunk forms, and the kernel puts adapters at the borders. Side by side:

- ``generator``     — the same three functions as a plain generator chain + ``functools.reduce``;
- ``atoll-custom``  — ``Source.range -> Custom(inc) -> Custom(dbl) -> Custom(neg) -> Sink.fold``,
                      ``Materializer.local()``;
- ``atoll-builtin`` — the same chain with the built-in ``map`` (chunk form), for reference;
- ``atoll-mixed``   — ``Source.range -> map(inc) -> Custom(dbl) -> map(neg) -> Sink.fold``: built-in stages
                      with chunk forms between a user stage and the source/sink (regions where no chunk
                      could hold more than one element run element by element).

The kernel issue's target is ``atoll-custom`` >= 2x *the interpreter of the day the issue was filed*, commit
``BASELINE_REV``. When this is a git checkout holding that commit, the same ``atoll-custom`` pipeline also runs on
that commit's ``atoll`` package (``git archive`` into a temporary directory) and on this tree's, each in a fresh
process of this Python, alternately (``BASELINE_ROUNDS`` rounds, one warm-up and ``runs`` timed runs each); the rows
``custom@this-tree`` and ``custom@<rev>`` hold the best of all rounds, and the target line their ratio. Elsewhere
(no git, a shallow clone) those rows say why they did not run.
"""
from __future__ import annotations

import functools
import json
import os
import statistics
import subprocess
import sys
from typing import Dict, Optional, Tuple

from ._common import Options, Result, Table, fmt_rate, fmt_ratio, fmt_secs, measure, out, progress
from .baseline_tree import BASELINE_REV, REPO, alternate

N = 300_000
N_QUICK = 30_000
BASELINE_ROUNDS = 2
TARGET_RATIO = 2.0  # atoll-custom against the interpreter of BASELINE_REV

inc = lambda x: x + 1  # noqa: E731
dbl = lambda x: x * 2  # noqa: E731
neg = lambda x: -x  # noqa: E731
add = lambda a, b: a + b  # noqa: E731


def expected(n: int) -> int:
    return -sum(2 * (x + 1) for x in range(n))


def custom_stage(fn):
    """A map-like stage written the way a user writes one: a GraphStage with its own handlers."""
    from atoll.stage import GraphStage, GraphStageLogic, InHandler, OutHandler
    from atoll.stage.attributes import Attributes
    from atoll.stage.ports import Inlet, Outlet
    from atoll.stage.shapes import FlowShape

    class CustomMap(GraphStage):
        def __init__(self):
            self.in_ = Inlet("custom.in")
            self.out = Outlet("custom.out")
            self.shape = FlowShape(self.in_, self.out)
            self.initial_attributes = Attributes.name("custom")

        def create_logic(self, attributes):
            stage = self

            class Logic(GraphStageLogic, InHandler, OutHandler):
                def __init__(self):
                    super().__init__(stage.shape)
                    self.set_handler(stage.in_, self)
                    self.set_handler(stage.out, self)

                def on_push(self):
                    self.push(stage.out, fn(self.grab(stage.in_)))

                def on_pull(self):
                    self.pull(stage.in_)

            return Logic()

    return CustomMap()


def run_generator(n: int) -> int:
    s1 = (inc(x) for x in range(n))
    s2 = (dbl(x) for x in s1)
    s3 = (neg(x) for x in s2)
    return functools.reduce(add, s3, 0)


def make_atoll(materializer, custom):
    """``custom``: True (three custom stages), False (three built-in maps) or ``"mixed"`` (map, custom, map)."""
    from atoll import Flow, Sink, Source

    def run_atoll(n: int) -> int:
        src = Source.range(0, n)
        if custom == "mixed":
            src = src.map(inc).via(Flow.from_graph(custom_stage(dbl))).map(neg)
        elif custom:
            src = src.via(Flow.from_graph(custom_stage(inc))).via(Flow.from_graph(custom_stage(dbl))).via(
                Flow.from_graph(custom_stage(neg)))
        else:
            src = src.map(inc).map(dbl).map(neg)
        return src.run_with(Sink.fold(0, add), materializer).result(timeout=600)

    return run_atoll


# ---------------------------------------------------------------------------- against an earlier interpreter
_WORKER = """
import gc, json, sys, time
tree, n, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sys.path.insert(0, tree)
import atoll
assert atoll.__file__.startswith(tree), atoll.__file__
from atoll import Materializer
from benchmarks.custom import expected, make_atoll
mat = Materializer.local()
try:
    f = make_atoll(mat, True)
    f(n)
    walls, cpus = [], []
    for _ in range(runs):
        gc.collect()
        t, c = time.perf_counter(), time.process_time()
        value = f(n)
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
finally:
    mat.shutdown()
print(json.dumps({"ok": value == expected(n), "walls": walls, "cpus": cpus}))
"""


def run_in_tree(tree: str, n: int, runs: int) -> Tuple[bool, list, list]:
    """The ``atoll-custom`` pipeline on the ``atoll`` package under ``tree``, in a fresh process: (result correct,
    wall seconds per timed run, CPU seconds per timed run)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO  # the benchmarks package; the worker puts ``tree`` before it
    proc = subprocess.run([sys.executable, "-c", _WORKER, tree, str(n), str(runs)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"the run on {tree} failed: {proc.stderr.strip()[-2000:]}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    return res["ok"], res["walls"], res["cpus"]


def run(opts: Options) -> Result:
    from atoll import Materializer

    n = N_QUICK if opts.quick else N
    runs = opts.runs
    res = Result("custom", params={"n": n, "runs": runs, "warmup": 1})
    out(f"custom: {n:,} ints -> 3 user-written GraphStages (no chunk form) -> fold; 1 warm-up + best of {runs}")
    mat = Materializer.local()
    variants = [
        ("generator", "plain generator chain + functools.reduce", run_generator),
        ("atoll-custom", "3 custom GraphStages, Materializer.local()", make_atoll(mat, True)),
        ("atoll-builtin", "the same with built-in map (chunk form)", make_atoll(mat, False)),
        ("atoll-mixed", "map -> 1 custom GraphStage -> map", make_atoll(mat, "mixed")),
    ]
    rates: Dict[str, Optional[float]] = {}
    try:
        for name, what, fn in variants:
            progress(f"custom/{name} (n={n:,})")
            t = measure(lambda: fn(n), runs=runs, warmup=1)
            ok = t.value == expected(n)
            if not ok:
                res.ok = False
                res.notes.append(f"{name}: {t.value!r} != expected {expected(n)}")
            rates[name] = t.rate(n)
            res.rows.append({"variant": name, "what": what, "n": n, "correct": ok, "best_s": t.best,
                             "median_s": t.median, "elements_per_s": rates[name]})
    finally:
        mat.shutdown()
    try:
        rounds = alternate(BASELINE_ROUNDS, lambda tree: run_in_tree(tree, n, runs), f"custom/atoll-custom (n={n:,})")
        baseline = {name: (all(r[0] for r in rs), [t for r in rs for t in r[1]], [t for r in rs for t in r[2]])
                    for name, rs in rounds.items()}  # name -> (every result correct, walls, cpus)
    except RuntimeError as e:
        baseline = None
        res.notes.append(f"custom@{BASELINE_REV} not run: {e}")
    if baseline is not None:
        for name, (ok, walls, cpus) in baseline.items():
            variant = f"custom@{name}"
            if not ok:
                res.ok = False
                res.notes.append(f"{variant}: a wrong result")
            rates[variant] = n / min(walls)
            what = ("atoll-custom on this tree's atoll, in a fresh process" if name == "this-tree" else
                    f"atoll-custom on {name}'s atoll (git archive), the interpreter before the kernel issue")
            res.rows.append({"variant": variant, "what": what, "n": n, "correct": ok, "best_s": min(walls),
                             "median_s": statistics.median(walls), "elements_per_s": rates[variant],
                             "best_cpu_s": min(cpus)})
    base = rates.get("generator")
    table = Table(["variant", "n", "ok", "best s", "median s", "elements/s", "vs generator", "what"])
    for row in res.rows:
        r = rates.get(row["variant"])
        table.add(row["variant"], f"{n:,}", "yes" if row["correct"] else "MISMATCH", fmt_secs(row["best_s"]),
                  fmt_secs(row["median_s"]), fmt_rate(r), fmt_ratio(r / base if r and base else None), row["what"])
    out(table.render())
    res.summary = {f"{k}_elements_per_s": v for k, v in rates.items()}
    if baseline is not None:
        now, then = (min(baseline[k][1]) for k in ("this-tree", BASELINE_REV))
        now_cpu, then_cpu = (min(baseline[k][2]) for k in ("this-tree", BASELINE_REV))
        ratio, cpu_ratio = then / now, then_cpu / now_cpu
        res.summary["vs_baseline"] = ratio
        res.summary["vs_baseline_cpu"] = cpu_ratio
        out(f"target: atoll-custom >= {TARGET_RATIO:g}x the interpreter of {BASELINE_REV}: {fmt_ratio(ratio)}x by wall "
            f"time ({fmt_secs(now)} vs {fmt_secs(then)} s), {fmt_ratio(cpu_ratio)}x by CPU time "
            f"({fmt_secs(now_cpu)} vs {fmt_secs(then_cpu)} s); best of {BASELINE_ROUNDS} alternating rounds of {runs}")
    for note in res.notes:
        out(f"note: {note}")
    return res
