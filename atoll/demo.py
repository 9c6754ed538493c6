"""The main job behind ``./scripts/demo``: a batch job across Ray islands, then an infinite graph
stopped from the driver with a kill switch (Spark joins in with issue 5's interop)."""
from __future__ import annotations

import argparse
import os
import sys
import time

from . import Keep, KillSwitches, Materializer, Sink, Source
from .materializer.progress import progress


def _count_alive_islands(graph) -> int:
    import ray

    alive = 0
    for a in graph.actor_handles():
        try:
            ray.get(a.info.remote(), timeout=5)
            alive += 1
        except Exception:  # noqa: BLE001 - dead actor: what we want
            pass
    return alive


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/demo", description=__doc__)
    parser.add_argument("--address", default=None, help="Ray cluster address ('auto' to join a running cluster)")
    parser.add_argument("--n", type=int, default=2_000_000, help="number of elements for the batch job")
    args = parser.parse_args(argv)

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    t0 = time.perf_counter()
    ray_init = {} if args.address else {"include_dashboard": False, "log_to_driver": False}
    mat = Materializer.ray(address=args.address, ray_init=ray_init)
    print(f"Ray ready in {time.perf_counter() - t0:.1f}s", flush=True)

    # 1. a batch job: parse -> enrich in one island, aggregate in another
    t1 = time.perf_counter()
    total = (
        Source.range(0, args.n)
        .map(lambda x: {"user": x % 1000, "amount": x % 97})
        .island(name="atoll-demo-parse")
        .filter(lambda e: e["amount"] > 10)
        .map(lambda e: e["amount"] * 2)
        .island(name="atoll-demo-enrich")
        .to_mat(Sink.fold(0, lambda a, b: a + b), Keep.right)
        .run(mat)
    )
    graph = mat.running_graphs()[0]
    with progress(graph, interval=1.0, out=sys.stdout, label="batch"):
        result = total.result()
    dt = time.perf_counter() - t1
    print(f"batch: {args.n:,} events through 3 islands -> {result:,} in {dt:.2f}s ({args.n / dt:,.0f} events/s)")

    # 2. an infinite graph, stopped from the driver
    switch, seen = (
        Source.repeat(1)
        .via_mat(KillSwitches.single(), Keep.right)
        .island(name="atoll-demo-infinite")
        .map(lambda x: x)
        .to_mat(Sink.fold(0, lambda a, b: a + b), Keep.both)
        .run(mat)
    )
    graph = mat.running_graphs()[0]
    with progress(graph, interval=0.5, out=sys.stdout, label="infinite"):
        time.sleep(1.6)
    t2 = time.perf_counter()
    switch.shutdown()
    n = seen.result(timeout=30)
    graph.wait(30)
    stop = time.perf_counter() - t2
    print(f"infinite graph: stopped by the kill switch after {n:,} elements; stop took {stop * 1000:.0f} ms; "
          f"island actors still alive: {_count_alive_islands(graph)}")
    mat.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
