"""Brute-force models for the event-time conformance tests (imported by name: this directory is no package).

``model_fixed`` replays the spec (docs: event-time.md section 1) literally, element by element, for
tumbling and sliding windows fed by ``with_timestamps(max_out_of_orderness=B)``: the watermark after each
element is ``max ts seen - B`` (emitted only when it grows), windows are half-open, fire at the first
``W >= end`` in ``(end, start, creation)`` order, expire at ``W >= end + L``; an element whose windows
all expired is late; an element for a fired, unexpired window fires it again as ``late``.
"""
from __future__ import annotations

import math

from atoll import Late, Window


def windows_of(ts, size, slide, offset=0):
    """The ``(start, end)`` of every window ``[offset + k*slide, +size)`` containing ``ts``, by start."""
    last = offset + math.floor((ts - offset) / slide) * slide
    out = []
    start = last
    while start > ts - size:
        out.append((start, start + size))
        start -= slide
    return sorted(out)


def model_fixed(events, ts_fn, size, slide=None, *, bound=0, key=None, create=list, add=None, result=None,
                allowed_lateness=0, accumulate=True):
    """Expected (results, late_elements, partially_late) of a tumbling (slide=None) / sliding window."""
    slide = size if slide is None else slide
    key = key or (lambda e: None)
    add = add or (lambda acc, e: acc + [e])
    result = result or (lambda acc: acc)
    w = -math.inf
    max_ts = -math.inf
    state = {}  # (k, start, end) -> dict(acc, delta, fired, order)
    order = 0
    out, late, partial = [], [], 0

    def fire(due):
        for (k, s, e), st in due:
            acc = st["acc"] if accumulate else st["delta"]
            out.append(Window(k, s, e, result(acc), "on_time"))
            st["fired"] = True
            st["delta"] = create()

    for elem in events:
        ts = ts_fn(elem)
        k = key(elem)
        wins = windows_of(ts, size, slide)
        live = [(s, e) for s, e in wins if not e + allowed_lateness <= w]
        if not live:
            late.append(Late(elem, ts, w))
        else:
            if len(live) < len(wins):
                partial += 1
            for s, e in live:
                st = state.get((k, s, e))
                if st is None:
                    st = state[(k, s, e)] = dict(acc=create(), delta=create(), fired=False, order=order)
                    order += 1
                st["acc"] = add(st["acc"], elem)
                st["delta"] = add(st["delta"], elem)
                if st["fired"] or e <= w:  # a window the watermark passed fires at once, as late
                    acc = st["acc"] if accumulate else st["delta"]
                    out.append(Window(k, s, e, result(acc), "late"))
                    st["delta"] = create()
                    st["fired"] = True
        max_ts = max(max_ts, ts)
        nw = max_ts - bound
        if nw > w:
            w = nw
            due = sorted(((kk, st) for kk, st in state.items() if not st["fired"] and kk[2] <= w),
                         key=lambda it: (it[0][2], it[0][1], it[1]["order"]))
            fire(due)
            for kk in [kk for kk in state if kk[2] + allowed_lateness <= w]:
                del state[kk]
    due = sorted(((kk, st) for kk, st in state.items() if not st["fired"]),
                 key=lambda it: (it[0][2], it[0][1], it[1]["order"]))
    fire(due)
    return out, late, partial


def counting(**kw):
    """``model_fixed`` with a count aggregate."""
    return model_fixed(create=lambda: 0, add=lambda a, e: a + 1, **kw)
