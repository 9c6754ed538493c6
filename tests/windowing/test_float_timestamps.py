"""Float timestamps through every window engine: the same firings as int timestamps.

Each random script of int timestamps and watermarks is run twice per engine: as it is, and with every timestamp
and watermark plus 0.5. With sizes, slides, gaps and lateness in whole units the half shift keeps every decision
(an element ``k + 0.5`` falls in the windows ``k`` falls in, is late exactly when ``k`` is, a window ending at
``e`` fires at ``w + 0.5`` exactly when at ``w``), so the firings must be the same: grid windows with the same
bounds, sessions shifted by 0.5, the same values, timings and late elements. Sliding windows failed at a key's
first element (``range`` refused float window starts)."""
from __future__ import annotations

import random

import pytest

from atoll import Aggregate, Late
from atoll._impl.ops.window_engine import WindowEngine
from atoll.windowing import Session, Sliding, Tumbling

from .kit import EARLY, END, drive, el, wm

ENGINES = {
    "tumbling": lambda: (Tumbling(10), dict(allowed_lateness=5, divert_late=True)),
    "tumbling-early": lambda: (Tumbling(10), dict(early_count=3)),
    "sliding-panes": lambda: (Sliding(12, 4), dict(allowed_lateness=6, divert_late=True)),
    "sliding-panes-discarding": lambda: (Sliding(12, 3, 1), dict(accumulate=False)),
    "sliding-per-window": lambda: (Sliding(10, 4), dict(allowed_lateness=5, early_count=2, divert_late=True)),
    "session": lambda: (Session(4), dict(allowed_lateness=5, divert_late=True)),
    "session-early": lambda: (Session(6), dict(early_count=2)),
    "sliding-ticks": lambda: (Sliding(12, 4), dict(early_every=1.0)),  # EARLY steps: processing-time firings
}
AGGREGATES = {
    "sum": lambda: Aggregate.sum(lambda e: e[1]),
    "collect": lambda: Aggregate.collect(),
}


def _script(seed: int, n: int = 250) -> list:
    rnd = random.Random(seed)
    steps, high = [], 0
    for i in range(n):
        ts = high + rnd.randint(-15, 5)
        high = max(high, ts)
        steps.append(el((rnd.randrange(3), i), ts))
        if rnd.random() < 0.3:
            steps.append(wm(high - rnd.randint(0, 8)))
        if rnd.random() < 0.03:
            steps.append(EARLY)
    return steps + [END]


def _shifted(script: list) -> list:
    return [(s[0], s[1], s[2] + 0.5) if s[0] == "e" else ("w", s[1] + 0.5) if s[0] == "w" else s for s in script]


def _rows(out: list, session: bool) -> list:
    """Firings as comparable rows; a float run's session bounds shifted back by 0.5 (its windows start at an element)."""
    rows = []
    for rec, _ts in out:
        if type(rec) is Late:
            rows.append(("late", rec.value, rec.timestamp - 0.5 if type(rec.timestamp) is float else rec.timestamp))
            continue
        back = 0.5 if session and type(rec.start) is float else 0
        value = sorted(rec.value) if type(rec.value) is list else rec.value
        rows.append((rec.key, rec.start - back, rec.end - back, value, rec.timing,
                     tuple((s - back, e - back) for s, e in rec.superseded)))
    return rows


@pytest.mark.parametrize("aggregate", sorted(AGGREGATES))
@pytest.mark.parametrize("kind", sorted(ENGINES))
@pytest.mark.parametrize("seed", range(4))
def test_float_timestamps_fire_what_int_timestamps_fire(kind, aggregate, seed):
    script = _script(seed)
    if "early_every" not in ENGINES[kind]()[1]:
        script = [step for step in script if step is not EARLY]
    runs = []
    for steps in (script, _shifted(script)):
        spec, options = ENGINES[kind]()
        engine = WindowEngine("w", spec, lambda e: e[0], AGGREGATES[aggregate](), **options)
        runs.append(_rows(drive(engine, steps), session=kind.startswith("session")))
    ints, floats = runs
    assert floats == ints
    assert any(row[0] != "late" for row in ints)
