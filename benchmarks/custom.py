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
"""
from __future__ import annotations

import functools
from typing import Dict, Optional

from ._common import Options, Result, Table, fmt_rate, fmt_ratio, fmt_secs, measure, out, progress

N = 300_000
N_QUICK = 30_000

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
    base = rates.get("generator")
    table = Table(["variant", "n", "ok", "best s", "median s", "elements/s", "vs generator", "what"])
    for row in res.rows:
        r = rates.get(row["variant"])
        table.add(row["variant"], f"{n:,}", "yes" if row["correct"] else "MISMATCH", fmt_secs(row["best_s"]),
                  fmt_secs(row["median_s"]), fmt_rate(r), fmt_ratio(r / base if r and base else None), row["what"])
    out(table.render())
    res.summary = {f"{k}_elements_per_s": v for k, v in rates.items()}
    for note in res.notes:
        out(f"note: {note}")
    return res
