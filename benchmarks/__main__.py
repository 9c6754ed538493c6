"""``python -m benchmarks [name ...] [--list] [--quick] [--runs N] [--full] [--json PATH]``

With no name every registered benchmark runs, in registry order; otherwise the named ones. Each
prints a table of its cases side by side with the alternatives, measured in this one run. The exit
status is 1 when a benchmark failed or a check (e.g. all variants computing the same result) did not
hold; timings never decide the exit status.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from typing import Dict, Tuple

from ._common import Options, Result, machine_info, machine_line, out

#: name -> (module exposing ``run(Options) -> Result``, one-line description). Modules are imported
#: only when their benchmark runs (``linear`` does not need Ray).
BENCHMARKS: Dict[str, Tuple[str, str]] = {
    "linear": ("benchmarks.linear",
               "10^6 ints through map(+1).map(*2).filter(%3 != 0) into a sum: generator, RxPY, streamz, Atoll"),
    "raw_ray": ("benchmarks.raw_ray",
                "raw Ray baseline: actor -> actor pre-batched int lists, <= 16 calls in flight, B = 128/1024/4096"),
    "channel": ("benchmarks.channel",
                "10^6 ints across one island boundary vs raw Ray actor->actor with the same batch and window"),
    "channel_rows": ("benchmarks.channel_rows",
                     "10^6 dict rows of 4 fields across one island boundary: columnar frames vs row by row, raw Ray"),
    "materialize": ("benchmarks.materialize", "run() -> first element for graphs of 1, 4 and 8 islands"),
    "killswitch": ("benchmarks.killswitch", "shutdown() from the driver -> graph ended, busy infinite graph"),
    "memory": ("benchmarks.memory", "slow sink behind a fast source, 2 islands: peak RSS per actor, object store"),
    "graph": ("benchmarks.graph",
              "10^6 ints: Broadcast(2) -> two maps -> Zip -> fold, one island vs branches in their own islands"),
    "custom": ("benchmarks.custom",
               "3*10^5 ints through 3 user-written GraphStages without a chunk form: the element interpreter"),
    "spark": ("benchmarks.spark",
              "10^6 rows x 4 columns Spark -> map per row (2 islands) -> Spark vs Ray Data map_batches"),
    "demo": ("benchmarks.demo",
             "the demo's Spark job (3*10^5 events) end to end: this tree's demo vs the demo of 790e052"),
    "window": ("benchmarks.window",
               "10^6 events, 10 keys, 1 s disorder: tumbling/sliding/session keyed sums vs plain Python, Bytewax"),
    "pool": ("benchmarks.pool",
             "10^5 ints through a ~2 ms/batch-of-64 model on 2 actors: map_pool vs Ray Data map_batches, ActorPool"),
    "async": ("benchmarks.async_map",
              "10^5 ints through an async def sleeping 1 ms, 64 in flight: map_async vs asyncio Semaphore+gather"),
    "checkpoint": ("benchmarks.checkpoint",
                   "3*10^6 ints through 3 islands into a fold: checkpoint every 1 s vs off; checkpoint latency"),
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="./scripts/bench", description="Atoll benchmarks, side by side with the alternatives.")
    p.add_argument("names", nargs="*", metavar="name", help="benchmarks to run (default: all; see --list)")
    p.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    p.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    p.add_argument("--runs", type=int, default=None, help="timed runs per case after one warm-up (default 3, --quick 1)")
    p.add_argument("--full", action="store_true", help="run slow alternatives (streamz) at the full size too")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.list:
        width = max(len(n) for n in BENCHMARKS)
        for name, (_, what) in BENCHMARKS.items():
            print(f"{name.ljust(width)}  {what}")
        return 0
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    if args.runs is not None and args.runs < 1:
        print("--runs must be >= 1", file=sys.stderr)
        return 2
    names = args.names or list(BENCHMARKS)
    opts = Options(quick=args.quick, runs=args.runs or (1 if args.quick else 3), full=args.full)

    info = machine_info()
    out(machine_line(info))
    out(f"options: quick={opts.quick} runs={opts.runs} full={opts.full}")
    results = []
    status = 0
    for name in names:
        module, _ = BENCHMARKS[name]
        out("")
        out(f"== {name} " + "=" * max(0, 60 - len(name)))
        t0 = time.perf_counter()
        try:
            res = importlib.import_module(module).run(opts)
        except Exception as e:  # noqa: BLE001 - report and go on with the other benchmarks
            traceback.print_exc()
            res = Result(name, ok=False, notes=[f"failed: {e!r}"])
        if not res.ok:
            status = 1
            out(f"{name}: CHECK FAILED: " + "; ".join(res.notes))
        out(f"({name} took {time.perf_counter() - t0:.1f} s)")
        results.append(res)

    if args.json:
        doc = {"machine": info, "options": vars(opts), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
               "benchmarks": {r.name: r.to_json() for r in results}}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
        out(f"\nresults written to {args.json}")
    return status


if __name__ == "__main__":
    sys.exit(main())
