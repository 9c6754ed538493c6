"""Progress of a running graph for scripts: a live bar per island, or one line per interval.

``with progress(graph): ...`` (or ``p = progress(graph); p.start(); ...; p.stop()``; also
``atoll.progress(graph)``) reads ``graph.islands()`` every ``interval`` seconds. On a terminal it redraws one
tqdm-style line per island in place::

    atoll-demo-enrich     [##########----------]  52%  104.0k/200.0k  41.2k/s  ETA 2s
    atoll-demo-aggregate  in 103.9k  41.0k/s -> out 17.3k  8.5k/s  buffer 38%
    graph-1-island-0      in 17.2k  8.5k/s

elsewhere (a log, a pipe) it prints one line per interval: ``[spark job] enrich 41.2k/s 52% ETA 2s | ...``.

What an island counts: elements received through its input channels, else what its own sources emitted
(ranges and sequences tell, see ``ThreadHost.info``), and elements sent through its output channels. An island
whose counters did not move but whose interpreter processed events shows its events per second, so a
working island never reads ``0/s``; one where nothing moved reads ``waiting`` (nothing yet) or ``idle``.
ETA: when the island's sources know their size (``expected`` in its info), or from ``total=`` (the number
of elements the graph's sources will emit: a Spark DataFrame's ``count()``, a Parquet dataset's row count),
which applies to the islands without input channels.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Dict, List, Optional, TextIO, Tuple


def _num(n: float) -> str:
    if n >= 1e6:
        return f"{n / 1e6:.1f}M"
    if n >= 1e3:
        return f"{n / 1e3:.1f}k"
    return f"{n:.0f}"


def _rate(n: float) -> str:
    return _num(n) + "/s"


def _eta(seconds: float) -> str:
    s = int(seconds + 0.5)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


class IslandFigures:
    """One island between two reads: totals, rates and what the bar shows."""

    __slots__ = ("name", "state", "done_in", "done_out", "rate_in", "rate_out", "events_rate", "expected",
                 "has_inputs", "has_outputs", "buffer_fill", "moved")

    def __init__(self, info: dict, prev: Optional[Tuple[float, int, int, int]], now: float,
                 total: Optional[int] = None):
        self.name = info.get("name", "?")
        self.state = info.get("state")
        self.has_inputs = bool(info.get("inputs")) or bool(info.get("elements_in"))
        self.has_outputs = bool(info.get("outputs")) or bool(info.get("elements_out"))
        self.done_in = info.get("elements_in", 0) if self.has_inputs else info.get("source_elements", 0)
        self.done_out = info.get("elements_out", 0)
        events = info.get("events", 0)
        self.expected = info.get("expected")
        if self.expected is None and total is not None and not self.has_inputs:
            self.expected = total
        self.buffer_fill = info.get("buffer_fill")
        self.rate_in = self.rate_out = self.events_rate = 0.0
        self.moved = self.done_in > 0 or self.done_out > 0
        if prev is not None and now > prev[0]:
            dt = now - prev[0]
            self.rate_in = max(0, self.done_in - prev[1]) / dt
            self.rate_out = max(0, self.done_out - prev[2]) / dt
            self.events_rate = max(0, events - prev[3]) / dt

    @staticmethod
    def key(info: dict, now: float) -> Tuple[float, int, int, int]:
        has_inputs = bool(info.get("inputs")) or bool(info.get("elements_in"))
        done_in = info.get("elements_in", 0) if has_inputs else info.get("source_elements", 0)
        return now, done_in, info.get("elements_out", 0), info.get("events", 0)

    @property
    def running(self) -> bool:
        return self.state in (None, "running")

    def _done_rate(self) -> Tuple[int, float]:
        """What the ETA counts: elements taken in; for a source island whose sources do not count, what it
        sent (one out per source element: an approximation when its stages filter or expand)."""
        if not self.has_inputs and not self.done_in:
            return self.done_out, self.rate_out
        return self.done_in, self.rate_in

    def fraction(self) -> Optional[float]:
        return min(1.0, self._done_rate()[0] / self.expected) if self.expected else None

    def eta(self) -> Optional[float]:
        done, rate = self._done_rate()
        if not self.expected or not rate:
            return None
        return max(0.0, self.expected - done) / rate

    def short(self) -> str:
        """``enrich 41.2k/s -> 41.0k/s 52% ETA 2s`` (the one-line form's part)."""
        if not self.running:
            return f"{self.name} {self.state}"
        if self.rate_in == 0 and self.rate_out == 0:
            if self.events_rate > 0:
                return f"{self.name} busy {_num(self.events_rate)} events/s"
            return f"{self.name} {'idle' if self.moved else 'waiting'}"
        if self.has_outputs and (self.has_inputs or self.done_in):
            text = f"{self.name} {_rate(self.rate_in)} -> {_rate(self.rate_out)}"
        elif self.has_outputs:
            text = f"{self.name} -> {_rate(self.rate_out)}"
        else:
            text = f"{self.name} {_rate(self.rate_in)}"
        if self.expected:
            text += f" {100 * self.fraction():.0f}%"
            eta = self.eta()
            if eta is not None:
                text += f" ETA {_eta(eta)}"
        return text

    def bar(self, width: int, name_width: int) -> str:
        """The island's line in the live form."""
        head = self.name.ljust(name_width)
        if not self.running:
            return f"{head}  {self.state}: in {_num(self.done_in)}, out {_num(self.done_out)}"
        if self.expected:
            frac = self.fraction()
            fill = int(frac * width)
            eta = self.eta()
            done, rate = self._done_rate()
            text = (f"{head}  [{'#' * fill}{'-' * (width - fill)}] {100 * frac:3.0f}%  "
                    f"{_num(done)}/{_num(self.expected)}  {_rate(rate)}"
                    + (f"  ETA {_eta(eta)}" if eta is not None else ""))
            if self.has_outputs:
                text += f"  -> {_rate(self.rate_out)}"
            return text
        parts = []
        if self.has_inputs or self.done_in:
            parts.append(f"in {_num(self.done_in)}  {_rate(self.rate_in)}")
        if self.has_outputs:
            parts.append(f"out {_num(self.done_out)}  {_rate(self.rate_out)}")
        text = f"{head}  " + " -> ".join(parts)
        if self.rate_in == 0 and self.rate_out == 0:
            if self.events_rate > 0:
                text += f"  (busy: {_num(self.events_rate)} events/s)"
            else:
                text += "  (idle)" if self.moved else "  (waiting)"
        if self.buffer_fill is not None:
            text += f"  buffer {100 * self.buffer_fill:.0f}%"
        return text


class progress:
    """Watch ``graph`` (a running graph handle) every ``interval`` seconds. ``out``: where to write
    (default stderr); ``label``: the one-line form's prefix (default the graph's name); ``live``: redraw a
    bar per island in place (default: when ``out`` is a terminal); ``total``: how many elements the graph's
    sources emit, for the ETA when they cannot tell."""

    BAR_WIDTH = 20

    def __init__(self, graph, interval: float = 1.0, out: Optional[TextIO] = None, label: Optional[str] = None,
                 live: Optional[bool] = None, total: Optional[int] = None):
        self.graph = graph
        self.interval = interval
        self.out = out or sys.stderr
        self.label = label or getattr(graph, "name", "graph")
        isatty = getattr(self.out, "isatty", None)
        self.live = bool(isatty()) if live is None and callable(isatty) else bool(live)
        self.total = total
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._last: Dict[str, Tuple[float, int, int, int]] = {}
        self._drawn = 0  # lines of the live form on screen
        self.lines = 0

    def figures(self) -> List[IslandFigures]:
        """Every island's figures since the previous call (rates are 0 on the first)."""
        now = time.monotonic()
        out = []
        for info in self.graph.islands():
            name = info.get("name", "?")
            out.append(IslandFigures(info, self._last.get(name), now, self.total))
            self._last[name] = IslandFigures.key(info, now)
        return out

    def line(self) -> str:
        """One progress line (rates since the previous call; empty on the first call)."""
        first = not self._last
        figs = self.figures()
        if first:
            return ""
        return f"[{self.label}] " + " | ".join(f.short() for f in figs) if figs else ""

    def bars(self) -> List[str]:
        """The live form's lines (rates since the previous call)."""
        figs = self.figures()
        width = max((len(f.name) for f in figs), default=0)
        return [f.bar(self.BAR_WIDTH, width) for f in figs]

    def _draw(self, lines: List[str]) -> None:
        buf = []
        if self._drawn:
            buf.append(f"\x1b[{self._drawn}F")  # back to the first line drawn
        for text in lines:
            buf.append("\x1b[2K" + text + "\n")
        self.out.write("".join(buf))
        self.out.flush()
        self._drawn = len(lines)
        self.lines += 1

    def _tick(self) -> None:
        if self.live:
            self._draw(self.bars())
        else:
            text = self.line()
            if text:
                print(text, file=self.out, flush=True)
                self.lines += 1

    def _run(self) -> None:
        if self.live:
            self._draw(self.bars())
        else:
            self.line()
        while not self._stop.wait(self.interval):
            if not self.graph.is_running:
                break
            self._tick()
        if self.live:
            try:
                self._draw(self.bars())  # the final figures
            except Exception:  # noqa: BLE001 - the graph's handle may be gone
                pass

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
