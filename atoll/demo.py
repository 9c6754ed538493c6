"""The main job behind ``./scripts/demo`` (in-process for now; Ray and Spark join in later issues)."""
from __future__ import annotations

import argparse
import time

from . import Keep, KillSwitches, Materializer, Sink, Source


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/demo", description=__doc__)
    parser.add_argument("--n", type=int, default=1_000_000, help="number of elements for the batch job")
    args = parser.parse_args(argv)

    mat = Materializer.local()
    t0 = time.perf_counter()
    total = (
        Source.range(0, args.n)
        .map(lambda x: x + 1)
        .island()
        .map(lambda x: x * 2)
        .filter(lambda x: x % 3 != 0)
        .run_with(Sink.fold(0, lambda a, b: a + b), mat)
        .result()
    )
    dt = time.perf_counter() - t0
    print(f"batch: {args.n:,} elements in 2 islands -> sum {total:,} in {dt:.2f}s ({args.n / dt:,.0f} elements/s)")

    switch, done = (
        Source.repeat(1)
        .via_mat(KillSwitches.single(), Keep.right)
        .island()
        .to_mat(Sink.fold(0, lambda a, b: a + b), Keep.both)
        .run(mat)
    )
    time.sleep(0.5)
    t1 = time.perf_counter()
    switch.shutdown()
    seen = done.result(timeout=10)
    print(f"infinite graph: stopped by kill switch in {(time.perf_counter() - t1) * 1000:.1f} ms after {seen:,} elements")
    mat.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
