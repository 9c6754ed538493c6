"""A compact progress line for a running graph: elements/s in and out of each island.

``with progress(graph): ...`` (or ``p = progress(graph); p.start(); ...; p.stop()``) prints, every
``interval`` seconds, one line such as ``[graph-3] enrich 41.2k/s -> 41.0k/s | aggregate 40.9k/s``,
using the counters of each island's channel boundaries (``RunningGraph.islands()``).
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Optional, TextIO


def _rate(n: float) -> str:
    if n >= 1e6:
        return f"{n / 1e6:.1f}M/s"
    if n >= 1e3:
        return f"{n / 1e3:.1f}k/s"
    return f"{n:.0f}/s"


class progress:
    def __init__(self, graph, interval: float = 1.0, out: Optional[TextIO] = None, label: Optional[str] = None):
        self.graph = graph
        self.interval = interval
        self.out = out or sys.stderr
        self.label = label or getattr(graph, "name", "graph")
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._last = {}
        self.lines = 0

    def line(self) -> str:
        """One progress line (rates since the previous call)."""
        now = time.monotonic()
        parts = []
        for info in self.graph.islands():
            name = info.get("name", "?")
            ins, outs = info.get("elements_in", 0), info.get("elements_out", 0)
            prev = self._last.get(name)
            self._last[name] = (now, ins, outs)
            if prev is None or now <= prev[0]:
                continue
            dt = now - prev[0]
            rin, rout = (ins - prev[1]) / dt, (outs - prev[2]) / dt
            if info.get("state") not in (None, "running"):
                parts.append(f"{name} {info.get('state')}")
            elif ins and outs:
                parts.append(f"{name} {_rate(rin)} -> {_rate(rout)}")
            elif outs:
                parts.append(f"{name} -> {_rate(rout)}")
            else:
                parts.append(f"{name} {_rate(rin)}")
        return f"[{self.label}] " + " | ".join(parts) if parts else ""

    def _run(self) -> None:
        self.line()
        while not self._stop.wait(self.interval):
            if not self.graph.is_running:
                return
            text = self.line()
            if text:
                print(text, file=self.out, flush=True)
                self.lines += 1

    def start(self) -> "progress":
        self._thread = threading.Thread(target=self._run, name="atoll-progress", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "progress":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
