"""``memory``: a slow sink behind a fast source, 2 islands: memory must stay flat and bounded.

::

    Source.repeat(<10 KB bytes>).map(count produced).island()  ->  Sink.foreach(sleep 1 ms; count consumed)

The source could emit tens of thousands of elements per second, the sink takes about 1000 per second,
so the graph is held back by demand. Every second (``DURATION`` s, ``--quick``: 10 s) the driver samples:

- the RSS of each island's actor process (psutil / ``/proc``: anonymous memory and shared memory, the
  latter being touched object-store pages) and at the end its peak (``VmHWM``);
- the Ray object store: ``memory_summary(stats_only=True)`` (MiB and number of objects in plasma);
- four element counters: ``produced`` (counted in the source island right after the source),
  ``sent`` and ``received`` (the channel's boundaries, from ``RunningGraph.islands()``), ``consumed``
  (counted by the sink). The two user-code counters report to a small counter actor every
  ``EVERY`` elements.

The sink island's input buffer is set to ``BUFFER`` elements (``Materializer.ray(input_buffer=(16,
BUFFER))``, about 40 MB of 10 KB elements) so that the channel keeps refilling during the whole run
(with the default of 65536 elements the buffer alone is 0.65 GB and the sink needs more than a minute to
drain it, so the channel would sit idle for most of the run; ``--full`` adds that case for 30 s).

Checks: ``produced - consumed`` must stay within the channel's bound — twice the sink's input buffer
(demand is counted in elements: the source island emits only what the sink island requested, and the
sink island requests room as its buffer hands elements on; a fused consumer takes the whole buffer as
one chunk and works through it while the buffer refills, so up to two buffers' worth is in the sink
island) plus twice the counters' granularity — and memory must be
flat (the last third of the samples no higher than the middle third, 10% + 8 MiB slack; judged on full
runs only).

With ``--full`` two more cases run for ``EXTRA_DURATION`` s each: the default settings, and 10 KB
numpy arrays (each element travels as a Ray object reference, so the object store holds the
in-flight elements).
"""
from __future__ import annotations

import re
import time
from typing import Any, Dict, List, Optional

from ._common import Options, Result, Table, out, pids_alive, progress, run_graph, start_ray

DURATION = 60.0
DURATION_QUICK = 10.0
EXTRA_DURATION = 30.0
BUFFER = 4096
ELEMENT_BYTES = 10_000
SLEEP = 0.001
EVERY = 128  # the user-code counters report every EVERY elements
FLAT_SLACK = 1.10

_counter_class = None


def _counter():
    global _counter_class
    if _counter_class is None:
        import ray

        @ray.remote(num_cpus=0)
        class MemoryBenchCounter:
            def __init__(self):
                self.counts = {"produced": 0, "consumed": 0}

            def add(self, key: str, n: int) -> None:
                self.counts[key] += n

            def get(self) -> Dict[str, int]:
                return dict(self.counts)

        _counter_class = MemoryBenchCounter
    return _counter_class


def _counting(counter, key: str, sleep: float = 0.0):
    """A map/foreach function that counts elements (reporting every EVERY) and optionally sleeps."""
    state = [0]

    def fn(x):
        if sleep:
            time.sleep(sleep)
        state[0] += 1
        if state[0] % EVERY == 0:
            counter.add.remote(key, EVERY)
        return x

    return fn


def _proc_mem(pid: int) -> Optional[Dict[str, int]]:
    """RSS split (MiB): anon, shmem, total, and peak (VmHWM) of a local process."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
    except OSError:
        return None
    kb = lambda k: int(fields.get(k, "0 kB").split()[0])  # noqa: E731
    return {"anon": kb("RssAnon") >> 10, "shmem": kb("RssShmem") >> 10, "rss": kb("VmRSS") >> 10,
            "peak": kb("VmHWM") >> 10}


def _plasma() -> Dict[str, Optional[int]]:
    from ray._private.internal_api import memory_summary

    try:
        text = memory_summary(stats_only=True)
    except Exception:  # noqa: BLE001 - a sample without object store figures
        return {"mib": None, "objects": None}
    m = re.search(r"Plasma memory usage (\d+) MiB, (\d+) objects", text)
    return {"mib": int(m.group(1)), "objects": int(m.group(2))} if m else {"mib": None, "objects": None}


def _case(mat, name: str, payload: Any, duration: float, bound: int) -> Dict[str, Any]:
    import ray

    from atoll import Keep, Sink, Source

    counter = _counter().remote()
    ray.get(counter.get.remote())
    graph = (Source.repeat(payload).map(_counting(counter, "produced")).island()
             .to_mat(Sink.foreach(_counting(counter, "consumed", SLEEP)), Keep.right))
    done, handle, run_secs = run_graph(graph, mat)
    if handle is None:
        raise RuntimeError("memory: the infinite graph is not among mat.running_graphs()")
    pids = {i["name"]: i["pid"] for i in handle.islands()}
    roles: Dict[str, str] = {}
    samples: List[Dict[str, Any]] = []
    t0 = time.perf_counter()
    next_at = 0.0
    try:
        while True:
            now = time.perf_counter() - t0
            if now < next_at:
                time.sleep(next_at - now)
            t = time.perf_counter() - t0
            counts = ray.get(counter.get.remote())
            infos = handle.islands()
            sent = received = 0
            for i in infos:
                sent += i.get("elements_out", 0)
                received += i.get("elements_in", 0)
                if i.get("elements_out", 0) > 0:
                    roles[i["name"]] = "source"
                elif i.get("elements_in", 0) > 0:
                    roles[i["name"]] = "sink"
            s = {"t": t, "produced": counts["produced"], "sent": sent, "received": received,
                 "consumed": counts["consumed"], "mem": {n: _proc_mem(p) for n, p in pids.items()}}
            s["in_flight"] = s["produced"] - s["consumed"]
            s.update({f"plasma_{k}": v for k, v in _plasma().items()})
            samples.append(s)
            if t >= duration or done.done():
                break
            next_at += 1.0
    finally:
        peaks = {n: (_proc_mem(p) or {}).get("peak") for n, p in pids.items()}
        handle.cancel()
        handle.wait(60)
        deadline = time.monotonic() + 30
        while pids_alive(list(pids.values())) and time.monotonic() < deadline:
            time.sleep(0.01)
        ray.kill(counter, no_restart=True)
    if done.done() and done.exception() is not None and samples[-1]["t"] < duration:
        raise RuntimeError(f"memory/{name}: the graph failed after {samples[-1]['t']:.0f}s: {done.exception()!r}")

    by_role = {roles.get(n, f"island{k}"): n for k, n in enumerate(pids)}
    source, sink = by_role.get("source"), by_role.get("sink")

    def series(island, key):
        return [(s["mem"].get(island) or {}).get(key) or 0 for s in samples]

    def flat(values: List[float]) -> bool:
        third = max(1, len(values) // 3)
        mid, last = values[third:2 * third] or values, values[2 * third:] or values
        return max(last) <= max(mid) * FLAT_SLACK + 8  # +8 MiB: allocator noise

    rss_flat = all(flat(series(i, "rss")) for i in (source, sink) if i)
    plasma_flat = flat([s["plasma_mib"] or 0 for s in samples])
    max_in_flight = max(s["in_flight"] for s in samples)
    return {"case": name, "element": type(payload).__name__, "element_bytes": ELEMENT_BYTES,
            "duration_s": samples[-1]["t"], "run_s": run_secs, "samples": samples, "roles": by_role,
            "peak_rss_mib": {r: peaks.get(n) for r, n in by_role.items()},
            "max_rss_mib": {r: max(series(n, "rss")) for r, n in by_role.items()},
            "max_plasma_mib": max(s["plasma_mib"] or 0 for s in samples),
            "max_plasma_objects": max(s["plasma_objects"] or 0 for s in samples),
            "max_in_flight": max_in_flight, "bound": bound, "within_bound": max_in_flight <= bound,
            "rss_flat": rss_flat, "plasma_flat": plasma_flat,
            "consumed_per_s": samples[-1]["consumed"] / samples[-1]["t"] if samples[-1]["t"] else None}


def _render(case: Dict[str, Any]) -> str:
    samples = case["samples"]
    src, snk = case["roles"].get("source"), case["roles"].get("sink")
    table = Table(["t s", "source RSS MiB (anon/shm)", "sink RSS MiB (anon/shm)", "plasma MiB", "plasma objs",
                   "produced", "sent", "received", "consumed", "produced-consumed"])

    def mem(s, island):
        m = s["mem"].get(island) if island else None
        return f"{m['rss']} ({m['anon']}/{m['shmem']})" if m else "-"

    step = max(1, len(samples) // 6)
    picks = sorted(set(list(range(0, len(samples), step)) + [len(samples) // 2, len(samples) - 1]))
    for i in picks:
        s = samples[i]
        table.add(f"{s['t']:.0f}", mem(s, src), mem(s, snk), "-" if s["plasma_mib"] is None else s["plasma_mib"],
                  "-" if s["plasma_objects"] is None else f"{s['plasma_objects']:,}", f"{s['produced']:,}",
                  f"{s['sent']:,}", f"{s['received']:,}", f"{s['consumed']:,}", f"{s['in_flight']:,}")
    table.add("max", f"{case['max_rss_mib'].get('source', '-')}", f"{case['max_rss_mib'].get('sink', '-')}",
              case["max_plasma_mib"], f"{case['max_plasma_objects']:,}", "-", "-", "-", "-",
              f"{case['max_in_flight']:,}")
    return table.render()


def run(opts: Options) -> Result:
    import ray

    from atoll import Materializer

    duration = DURATION_QUICK if opts.quick else DURATION
    res = Result("memory", params={"duration_s": duration, "element_bytes": ELEMENT_BYTES, "sink_sleep_s": SLEEP,
                                   "input_buffer": BUFFER, "extra_cases": opts.full})
    out(f"memory: Source.repeat({ELEMENT_BYTES // 1000} KB bytes).island() -> Sink.foreach(sleep {SLEEP * 1000:.0f} ms), "
        f"Materializer.ray(input_buffer=(16, {BUFFER})); one sample per second for {duration:.0f} s"
        f"{'; then the default settings and numpy elements, 30 s each' if opts.full else ''}")
    progress("ray.init")
    started = start_ray()
    cases = []
    plan = [("bytes", "bytes", {"input_buffer": (16, BUFFER)}, duration)]
    if opts.full:
        plan += [("bytes-default", "bytes", {}, EXTRA_DURATION),
                 ("numpy", "numpy", {"input_buffer": (16, BUFFER)}, EXTRA_DURATION)]
    try:
        for name, kind, settings, secs in plan:
            mat = Materializer.ray(**settings)
            try:
                buffer = mat.settings.input_buffer[1]
                bound = 2 * buffer + 2 * EVERY  # buffer + the chunk a fused run holds + counter granularity
                if kind == "numpy":
                    import numpy as np

                    payload = np.zeros(ELEMENT_BYTES, np.uint8)
                else:
                    payload = bytes(ELEMENT_BYTES)
                progress(f"memory/{name} for {secs:.0f}s")
                case = _case(mat, name, payload, secs, bound)
                case.update({"settings": {k: list(v) for k, v in settings.items()}, "input_buffer": buffer,
                             "frame": mat.settings.frame_size})
                cases.append(case)
            finally:
                mat.shutdown()
    finally:
        if started:
            ray.shutdown()

    for case in cases:
        out(f"\n{case['case']}: {case['element']} elements of {ELEMENT_BYTES:,} B for {case['duration_s']:.0f} s, "
            f"sink consumed {case['consumed_per_s']:,.0f}/s; input buffer {case['input_buffer']:,} elements"
            f"{' (default)' if not case['settings'] else ''}, frame {case['frame']:,}")
        out(_render(case))
        out(f"peak RSS (VmHWM) MiB: source {case['peak_rss_mib'].get('source')}, sink {case['peak_rss_mib'].get('sink')}; "
            f"RSS flat: {'yes' if case['rss_flat'] else 'NO'}; object store flat: "
            f"{'yes' if case['plasma_flat'] else 'NO'}; produced-consumed max {case['max_in_flight']:,} vs bound "
            f"{case['bound']:,} (2 x input buffer + counter granularity): {'within' if case['within_bound'] else 'EXCEEDED'}")
        if not case["within_bound"]:
            res.ok = False
            res.notes.append(f"{case['case']}: produced-consumed reached {case['max_in_flight']:,} elements, more than "
                             f"the channel's bound {case['bound']:,} (2 x input buffer {case['input_buffer']:,} + {2 * EVERY} counter "
                             f"granularity)")
        if not opts.quick and not (case["rss_flat"] and case["plasma_flat"]):
            res.ok = False
            res.notes.append(f"{case['case']}: memory still growing in the last third of the run "
                             f"(RSS flat: {case['rss_flat']}, object store flat: {case['plasma_flat']})")
        res.rows.append(case)
    main = cases[0]
    res.summary = {"peak_rss_mib": main["peak_rss_mib"], "max_plasma_mib": main["max_plasma_mib"],
                   "max_in_flight": main["max_in_flight"], "bound": main["bound"],
                   "within_bound": main["within_bound"], "rss_flat": main["rss_flat"],
                   "plasma_flat": main["plasma_flat"]}
    if opts.quick:
        out("(quick: too short to judge flatness; that is judged on full runs only)")
    for note in res.notes:
        out(f"note: {note}")
    return res
