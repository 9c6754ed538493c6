"""CPU seconds spent on a cold first result, per process: what bounds ``pool``'s cold figure on a small machine.

A cold first result is mostly process starts: every new Ray worker process pays Ray's own start (importing
``ray``, connecting its core worker) before the actor's code runs, and on a machine with few cores those starts
share the cores. :class:`CpuSampler` samples, every ``interval`` seconds while one run goes on, the CPU time
(user + system) of this process and of every process below it (the local Ray cluster that ``ray.init`` started:
GCS, raylet, agents, worker processes), so that a process which exits before the run ends (an actor killed when
its graph stops) still counts with its last sample. The sampling itself costs CPU, so the benchmark uses it only
in runs of its own, never in the timed ones.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Dict, List, Optional, Tuple


class CpuSampler:
    """CPU seconds of this process (less the sampler's own thread) and its descendants over one run
    (``with CpuSampler() as s: ...``).

    ``report()``: (driver CPU seconds, [(name, CPU seconds, started during the run) per other process that
    used at least ``min_cpu`` seconds]). A process started during the run counts with all its CPU (its start
    included); one alive before counts with what it used during the run."""

    def __init__(self, interval: float = 0.025, min_cpu: float = 0.02):
        import psutil

        self._psutil = psutil
        self.interval = interval
        self.min_cpu = min_cpu
        self._me = psutil.Process(os.getpid())
        self._procs: Dict[int, object] = {}
        self._first: Dict[int, float] = {}  # CPU at the first sample, for processes alive at the start
        self._last: Dict[int, float] = {}
        self._names: Dict[int, str] = {}
        self._new: Dict[int, bool] = {}
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._driver0 = 0.0
        self._driver = 0.0
        self._own = 0.0
        self._started = False  # False during the first sample: what it finds was alive before the run

    def _sample(self) -> None:
        psutil = self._psutil
        try:
            kids = self._me.children(recursive=True)
        except psutil.Error:
            return
        for p in kids:
            pid = p.pid
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    cpu = t.user + t.system
                    if pid not in self._last:  # first seen after the sample at the start: started during the run
                        new = self._started
                        self._new[pid] = new
                        self._first[pid] = 0.0 if new else cpu
                    self._names[pid] = p.name()
                    self._last[pid] = cpu
            except psutil.Error:
                continue  # exited: its last sample stays

    def _run(self) -> None:
        start = time.thread_time()
        while not self._stop.wait(self.interval):
            self._sample()
        self._own = time.thread_time() - start  # the sampler's CPU, not counted as the driver's

    def __enter__(self) -> "CpuSampler":
        self._sample()  # the processes alive at the start, and their CPU so far
        self._started = True
        self._driver0 = time.process_time()
        self._thread = threading.Thread(target=self._run, name="pool-cpu-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        driver = time.process_time() - self._driver0
        self._stop.set()
        self._thread.join()
        self._driver = max(0.0, driver - self._own)
        self._sample()

    def report(self) -> Tuple[float, List[Tuple[str, float, bool]]]:
        rows = []
        for pid, last in self._last.items():
            used = last - self._first[pid]
            if used >= self.min_cpu:
                rows.append((self._names.get(pid, "?"), used, self._new[pid]))
        rows.sort(key=lambda r: -r[1])
        return self._driver, rows


def summary(driver: float, rows: List[Tuple[str, float, bool]]) -> str:
    """One line: total CPU seconds, the driver's, and each process's (``*``: started during the run)."""
    total = driver + sum(r[1] for r in rows)
    parts = ", ".join(f"{name.replace('ray::', '')[:28]}{'*' if new else ''} {cpu:.2f}" for name, cpu, new in rows)
    return f"{total:.2f}s CPU = driver {driver:.2f} + {parts}"
