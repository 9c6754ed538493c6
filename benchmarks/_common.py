"""What every benchmark shares: options, timing, the machine description and plain-text tables."""
from __future__ import annotations

import gc
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence


@dataclass
class Options:
    """Command-line options a benchmark sees."""

    quick: bool = False  # small sizes: a smoke run
    runs: int = 3  # timed runs per case, after one warm-up
    full: bool = False  # also run slow alternatives at the full size (otherwise they are capped)


@dataclass
class Timing:
    """The timed runs of one case: every duration (seconds) and the value the last run returned."""

    times: List[float]
    value: Any = None

    @property
    def best(self) -> float:
        return min(self.times)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    def rate(self, n: int) -> float:
        """Elements per second of the best run."""
        return n / self.best if self.best > 0 else float("inf")


def measure(fn: Callable[[], Any], runs: int = 3, warmup: int = 1) -> Timing:
    """Call ``fn`` ``warmup`` times untimed, then ``runs`` times timed (garbage collected before each
    run, the collector left on as in real use). Returns the durations and the last run's value."""
    value = None
    for _ in range(warmup):
        value = fn()
    times = []
    for _ in range(max(1, runs)):
        gc.collect()
        t0 = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t0)
    return Timing(times, value)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(dist: str) -> Optional[str]:
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception:  # noqa: BLE001 - not installed
        return None


def machine_info() -> Dict[str, Any]:
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "cpu": _cpu_model(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "versions": {d: _version(d) for d in ("atoll", "ray", "reactivex", "streamz")},
    }


def machine_line(info: Dict[str, Any]) -> str:
    vers = ", ".join(f"{k} {v}" for k, v in info["versions"].items() if v)
    cores = f"{info['cores']} cores"
    if info["usable_cores"] != info["cores"]:
        cores += f" ({info['usable_cores']} usable)"
    return (f"machine: {cores}, {info['cpu']}; {info['implementation']} {info['python']}; "
            f"{info['platform']}\nversions: {vers}")


# ---------------------------------------------------------------------------- formatting
def fmt_rate(x: Optional[float]) -> str:
    """Elements per second with thousands separators (``-`` when missing)."""
    if x is None:
        return "-"
    return f"{x:,.0f}"


def fmt_secs(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.4f}"


def fmt_ratio(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.3f}"


class Table:
    """A plain-text table with aligned columns: text columns left, numeric-looking ones right."""

    def __init__(self, headers: Sequence[str]):
        self.headers = list(headers)
        self.rows: List[List[str]] = []

    def add(self, *cells: Any) -> None:
        if len(cells) != len(self.headers):
            raise ValueError(f"Table.add: {len(cells)} cells for {len(self.headers)} columns")
        self.rows.append([str(c) for c in cells])

    @staticmethod
    def _numeric(cell: str) -> bool:
        s = cell.replace(",", "").replace(".", "").replace("x", "").replace("-", "").replace("%", "")
        return s.isdigit() or cell == "-"

    def render(self) -> str:
        cols = list(zip(self.headers, *self.rows)) if self.rows else [(h,) for h in self.headers]
        widths = [max(len(c) for c in col) for col in cols]
        right = [bool(self.rows) and all(self._numeric(r[i]) for r in self.rows) for i in range(len(self.headers))]

        def line(cells):
            out = []
            for i, c in enumerate(cells):
                out.append(c.rjust(widths[i]) if right[i] else c.ljust(widths[i]))
            return "  ".join(out).rstrip()

        sep = "  ".join("-" * w for w in widths)
        return "\n".join([line(self.headers), sep] + [line(r) for r in self.rows])


def out(*parts: Any) -> None:
    """Print and flush (benchmarks are long; show progress as it comes)."""
    print(*parts, flush=True)


def progress(msg: str) -> None:
    """A progress note on stderr, so that stdout keeps only the tables."""
    print(f"  .. {msg}", file=sys.stderr, flush=True)


@dataclass
class Result:
    """What a benchmark returns (and what ``--json`` writes)."""

    name: str
    params: Dict[str, Any] = field(default_factory=dict)
    rows: List[Dict[str, Any]] = field(default_factory=list)
    summary: Dict[str, Any] = field(default_factory=dict)
    ok: bool = True  # every check (e.g. equal results across variants) passed
    notes: List[str] = field(default_factory=list)

    def to_json(self) -> Dict[str, Any]:
        return {"name": self.name, "params": self.params, "rows": self.rows, "summary": self.summary,
                "ok": self.ok, "notes": self.notes}


# ---------------------------------------------------------------------------- Ray helpers
def start_ray(num_cpus: int = 4) -> bool:
    """``ray.init`` a local Ray (no dashboard, worker logs not forwarded) unless one is up; returns True
    when it started one (the caller shuts it down at the end of its ``run``)."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    if ray.is_initialized():
        return False
    ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    return True


def run_graph(graph: Any, mat: Any) -> "tuple":
    """``graph.run(mat)`` and the running-graph handle it started (found among ``mat.running_graphs()``
    by difference; None when the graph already ended before ``run`` returned). Returns
    (materialized value, handle or None, seconds the ``run`` call took)."""
    before = {id(g) for g in mat.running_graphs()}
    t0 = time.perf_counter()
    value = graph.run(mat)
    secs = time.perf_counter() - t0
    new = [g for g in mat.running_graphs() if id(g) not in before]
    return value, (new[0] if len(new) == 1 else None), secs


def pids_alive(pids: Sequence[int]) -> List[int]:
    """The pids among ``pids`` whose process still exists and is not a zombie (this machine only)."""
    import psutil

    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.Error:
            pass
    return alive


def actor_pids(prefix: str = "ray::IslandActor") -> List[int]:
    """Pids of the live Ray actor processes whose title starts with ``prefix`` among this process's
    descendants (the workers of a Ray that this driver started; this machine only)."""
    import psutil

    pids = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            cmd = p.cmdline()
        except psutil.Error:
            continue
        if cmd and cmd[0].startswith(prefix):
            pids.append(p.pid)
    return pids


def wait_actors_gone(prefix: str = "ray::IslandActor", timeout: float = 30.0) -> float:
    """Wait until no actor process of ``prefix`` is left (see ``actor_pids``); returns the seconds waited."""
    t0 = time.perf_counter()
    while actor_pids(prefix) and time.perf_counter() - t0 < timeout:
        time.sleep(0.01)
    return time.perf_counter() - t0


def wait_islands_settled(mat, timeout: float = 30.0) -> float:
    """Wait until no island actor process of this driver is left but the idle ones the materializer keeps warm
    for the next graph (``Materializer.ray(reuse_actors=True)``, the default), so that a run does not share the
    CPUs with the previous run's teardown; returns the seconds waited. (Waiting for *every* island actor to be
    gone, as ``wait_actors_gone`` does, always ran into its timeout: the warm ones stay.)"""
    t0 = time.perf_counter()
    pool = getattr(mat, "warm_pool", None)
    while time.perf_counter() - t0 < timeout:
        if len(actor_pids("ray::IslandActor")) <= (pool.idle_count() if pool is not None else 0):
            break
        time.sleep(0.01)
    return time.perf_counter() - t0
