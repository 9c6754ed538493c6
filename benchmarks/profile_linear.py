"""cProfile of the Atoll variant of the ``linear`` benchmark, island thread included.

    .venv/bin/python -m benchmarks.profile_linear [--n 1000000] [--top 15] [--sort tottime] [--no-fusion]

``Materializer.local()`` runs the island on its own thread, which a driver-side ``cProfile`` does not
see; this wraps ``IslandHost.run_loop`` so each island thread gets its own profiler, and merges
those with the driver's. The user functions are defined one per line (cProfile names functions by
file, line and name, so lambdas sharing a line would be merged and their counts lost).
Not a registered benchmark: profiling overhead makes its timings meaningless, only the shares count.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats


def _inc(x):
    return x + 1


def _dbl(x):
    return x * 2


def _keep(x):
    return x % 3 != 0


def _add(a, b):
    return a + b


def profile_atoll_linear(n: int, fusion: bool = True) -> pstats.Stats:
    from atoll import Materializer, Sink, Source
    from atoll._impl.islands import thread_host

    profiles = []
    original = thread_host.IslandHost.run_loop

    def profiled_run_loop(self):
        prof = cProfile.Profile()
        profiles.append(prof)
        prof.enable()
        try:
            original(self)
        finally:
            prof.disable()

    thread_host.IslandHost.run_loop = profiled_run_loop
    mat = Materializer.local(fusion=fusion)
    driver = cProfile.Profile()
    try:
        driver.enable()
        total = (Source.range(0, n).map(_inc).map(_dbl).filter(_keep)
                 .run_with(Sink.fold(0, _add), mat)).result(timeout=600)
        driver.disable()
    finally:
        thread_host.IslandHost.run_loop = original
        mat.shutdown()
    from .linear import expected_sum

    assert total == expected_sum(n), (total, expected_sum(n))
    stats = pstats.Stats(driver)
    for p in profiles:
        stats.add(p)
    print(f"atoll linear (fusion={fusion}), n={n:,}: sum {total} (correct); {len(profiles)} island thread(s) profiled")
    return stats


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.profile_linear")
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--sort", default="tottime")
    p.add_argument("--no-fusion", action="store_true", help="Materializer.local(fusion=False): the interpreter path")
    a = p.parse_args(argv)
    profile_atoll_linear(a.n, fusion=not a.no_fusion).sort_stats(a.sort).print_stats(a.top)


if __name__ == "__main__":
    main()
