"""The ``recursively`` loop the recovery tests kill (local and Ray): each root ``(r, 1)`` grows the binary tree
``(r, 1 .. 2*DEPTH-1)``, and the checks of an output against the failure-free one."""
from __future__ import annotations

from collections import Counter

DEPTH = 16  # a root (r, 1) grows the binary tree (r, 1..2*DEPTH-1): 31 elements


def children(e):
    return [(e[0], 2 * e[1]), (e[0], 2 * e[1] + 1)]


def step(s):
    return s.filter(lambda e: e[1] < DEPTH).map_concat(children)


def step_substream(s):
    # ``take`` has no stateless form: each expansion runs as a substream (a cut waits while one runs)
    return s.filter(lambda e: e[1] < DEPTH).map_concat(children).take(2)


STEPS = {"fused": step, "substream": step_substream}


def total(roots: int) -> int:
    """Elements of the whole output for ``roots`` roots."""
    return roots * (2 * DEPTH - 1)


def check_exact(got, expected, roots: int) -> None:
    """``got`` equals the failure-free ``expected`` in everything ``recursively`` defines: the multiset, each
    root's descendants in breadth-first order, the roots in upstream order."""
    assert Counter(got) == Counter(expected)
    assert len(got) == total(roots)  # each element once (they are all distinct)
    per_root = {}
    for r, v in got:
        per_root.setdefault(r, []).append(v)
    per_root_expected = {}
    for r, v in expected:
        per_root_expected.setdefault(r, []).append(v)
    assert per_root == per_root_expected
    assert all(vs == list(range(1, 2 * DEPTH)) for vs in per_root.values())  # breadth first: 1, 2, 3, ...
    assert list(per_root) == list(range(roots))  # the roots in upstream order (dicts keep first appearance)
