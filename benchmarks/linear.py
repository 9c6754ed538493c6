"""``linear``: n ints through ``map(+1) . map(*2) . filter(% 3 != 0)`` into a fold (sum).

The same work, with the same Python lambdas (user code is Python in every case), measured side by
side in one process:

- ``generator``  — a plain Python generator chain folded with ``functools.reduce`` (the baseline);
- ``loop``       — one hand-written ``for`` loop calling the lambdas (the floor for Python user code);
- ``builtins``   — ``map``/``filter`` builtins folded with ``functools.reduce`` (for reference);
- ``rxpy``       — RxPY (``reactivex``): ``from_iterable(range(n)).pipe(map, map, filter, reduce)``;
- ``streamz``    — ``Stream().map().map().filter().accumulate()`` with a sink keeping the last sum,
                   fed by ``emit`` n times;
- ``atoll``      — ``Source.range(0, n).map().map().filter().run_with(Sink.fold(...), Materializer.local())``
                   (materialization and the wait for the fold's future included); the chain is fused
                   into one generated loop (``atoll._impl.islands.fusion``);
- ``atoll-unfused`` — the same with ``Materializer.local(fusion=False)``: every stage runs in the graph
                   interpreter (what any non-fusible chain pays). Reference only, not the target.

Each case is warmed up once and then timed ``runs`` times; elements/s is n / best time. Every case
must produce the same sum (checked against a closed-form reference). The figure of merit is the
ratio atoll/generator (target >= 0.85: the kernel issue's "stays >= 0.85x the generator chain").

streamz costs ~20 us per element here, so unless ``--full`` it runs at most ``STREAMZ_CAP`` elements
(the row shows its n; a rate is a rate).
"""
from __future__ import annotations

import functools
from typing import Callable, Dict, Optional

from ._common import Options, Result, Table, fmt_rate, fmt_ratio, fmt_secs, measure, out, progress

N = 1_000_000
N_QUICK = 100_000
STREAMZ_CAP = 100_000
STREAMZ_CAP_QUICK = 10_000
TARGET = 0.85

# the user code, shared by every variant
inc = lambda x: x + 1  # noqa: E731
dbl = lambda x: x * 2  # noqa: E731
keep = lambda x: x % 3 != 0  # noqa: E731
add = lambda a, b: a + b  # noqa: E731


def expected_sum(n: int) -> int:
    """sum of 2k for k in 1..n with k % 3 != 0 (2k % 3 != 0 iff k % 3 != 0), in closed form."""
    total = n * (n + 1)  # 2 * (1 + ... + n)
    m = n // 3
    return total - 6 * m * (m + 1) // 2  # minus 2 * (3 + 6 + ... + 3m)


# ---------------------------------------------------------------------------- the variants
def run_generator(n: int) -> int:
    s1 = (inc(x) for x in range(n))
    s2 = (dbl(x) for x in s1)
    s3 = (x for x in s2 if keep(x))
    return functools.reduce(add, s3, 0)


def run_loop(n: int) -> int:
    acc = 0
    for x in range(n):
        y = dbl(inc(x))
        if keep(y):
            acc = add(acc, y)
    return acc


def run_builtins(n: int) -> int:
    return functools.reduce(add, filter(keep, map(dbl, map(inc, range(n)))), 0)


def run_rxpy(n: int) -> int:
    import reactivex
    from reactivex import operators as ops

    return reactivex.from_iterable(range(n)).pipe(
        ops.map(inc), ops.map(dbl), ops.filter(keep), ops.reduce(add, 0)
    ).run()


def run_streamz(n: int) -> int:
    from streamz import Stream

    source = Stream()
    last = [0]

    def keep_last(v):
        last[0] = v

    source.map(inc).map(dbl).filter(keep).accumulate(add, start=0).sink(keep_last)
    emit = source.emit
    for i in range(n):
        emit(i)
    return last[0]


def make_atoll(materializer) -> Callable[[int], int]:
    from atoll import Sink, Source

    def run_atoll(n: int) -> int:
        fut = (Source.range(0, n).map(lambda x: x + 1).map(lambda x: x * 2).filter(lambda x: x % 3 != 0)
               .run_with(Sink.fold(0, lambda a, b: a + b), materializer))
        return fut.result(timeout=600)

    return run_atoll


def _available(module: str) -> bool:
    try:
        __import__(module)
        return True
    except ImportError:
        return False


# ---------------------------------------------------------------------------- the benchmark
def run(opts: Options) -> Result:
    from atoll import Materializer

    n = N_QUICK if opts.quick else N
    cap = None if opts.full else (STREAMZ_CAP_QUICK if opts.quick else STREAMZ_CAP)
    runs = opts.runs
    res = Result("linear", params={"n": n, "runs": runs, "warmup": 1, "target_atoll_over_generator": TARGET,
                                   "streamz_n": min(n, cap) if cap else n})
    out(f"linear: {n:,} ints -> map(+1) -> map(*2) -> filter(%3 != 0) -> fold(+); "
        f"1 warm-up + best of {runs}")

    mat = Materializer.local()
    mat_unfused = Materializer.local(fusion=False)
    variants = [
        ("generator", "plain Python generator chain + functools.reduce", run_generator, n, None),
        ("loop", "hand-written for loop calling the same lambdas", run_loop, n, None),
        ("builtins", "map()/filter() builtins + functools.reduce", run_builtins, n, None),
        ("rxpy", "reactivex from_iterable.pipe(map, map, filter, reduce)", run_rxpy, n, "reactivex"),
        ("streamz", "streamz Stream.map.map.filter.accumulate + sink", run_streamz,
         min(n, cap) if cap else n, "streamz"),
        ("atoll", "Source.range.map.map.filter.run_with(Sink.fold), Materializer.local()",
         make_atoll(mat), n, "atoll"),
        ("atoll-unfused", "the same on Materializer.local(fusion=False): the graph interpreter",
         make_atoll(mat_unfused), n, "atoll"),
    ]
    rates: Dict[str, Optional[float]] = {}
    try:
        for name, what, fn, size, module in variants:
            if module and not _available(module):
                res.notes.append(f"{name}: {module} not installed, skipped")
                res.rows.append({"variant": name, "what": what, "n": size, "skipped": True})
                rates[name] = None
                continue
            progress(f"linear/{name} (n={size:,})")
            t = measure(lambda: fn(size), runs=runs, warmup=1)
            want = expected_sum(size)
            ok = t.value == want
            if not ok:
                res.ok = False
                res.notes.append(f"{name}: sum {t.value!r} != expected {want}")
            rates[name] = t.rate(size)
            res.rows.append({"variant": name, "what": what, "n": size, "result": t.value, "expected": want,
                             "correct": ok, "times_s": t.times, "best_s": t.best, "median_s": t.median,
                             "elements_per_s": rates[name]})
    finally:
        mat.shutdown()
        mat_unfused.shutdown()

    base = rates.get("generator")
    table = Table(["variant", "n", "sum ok", "best s", "median s", "elements/s", "vs generator", "what"])
    for row in res.rows:
        r = rates.get(row["variant"])
        ratio = (r / base) if (r and base) else None
        row["vs_generator"] = ratio
        if row.get("skipped"):
            table.add(row["variant"], f"{row['n']:,}", "skipped", "-", "-", "-", "-", row["what"])
            continue
        table.add(row["variant"], f"{row['n']:,}", "yes" if row["correct"] else "MISMATCH",
                  fmt_secs(row["best_s"]), fmt_secs(row["median_s"]), fmt_rate(r), fmt_ratio(ratio), row["what"])
    out(table.render())

    atoll_ratio = (rates["atoll"] / base) if (rates.get("atoll") and base) else None
    unfused_ratio = (rates["atoll-unfused"] / base) if (rates.get("atoll-unfused") and base) else None
    res.summary = {"atoll_over_generator": atoll_ratio, "target": TARGET,
                   "target_met": atoll_ratio is not None and atoll_ratio >= TARGET,
                   "atoll_unfused_over_generator": unfused_ratio,
                   **{f"{k}_elements_per_s": v for k, v in rates.items()}}
    for other in ("rxpy", "streamz", "atoll-unfused"):
        if rates.get("atoll") and rates.get(other):
            res.summary[f"atoll_over_{other}"] = rates["atoll"] / rates[other]
    if atoll_ratio is not None:
        verdict = "met" if atoll_ratio >= TARGET else "NOT met"
        extra = "".join(f", atoll/{o} = {res.summary[f'atoll_over_{o}']:.2f}"
                        for o in ("rxpy", "streamz", "atoll-unfused") if f"atoll_over_{o}" in res.summary)
        out(f"atoll/generator = {atoll_ratio:.3f} (target >= {TARGET}: {verdict}){extra}")
    if unfused_ratio is not None:
        out(f"atoll-unfused/generator = {unfused_ratio:.3f} (the interpreter without fusion; reference)")
    for note in res.notes:
        out(f"note: {note}")
    return res
