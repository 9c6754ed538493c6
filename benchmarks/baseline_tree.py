"""An earlier commit's ``atoll`` package, for benchmarks whose target is a ratio to the code of the day an issue was filed.

``BASELINE_REV`` is 790e052, the last commit before the work on issues 9-14 (kernel, event time, checkpoints,
operators, console, Spark edge v2) began: "today's interpreter" of the kernel issue's ``custom`` target and
"today's demo" of the Spark issue's demo target. ``baseline_tree`` extracts its ``atoll`` package with
``git archive`` into a temporary directory; a checkout without that commit (no git, a shallow clone) raises
``RuntimeError`` saying why, and the benchmark prints that instead of the row. ``alternate`` runs a measurement on
this tree and on that commit's, in turns.
"""
from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from typing import Any, Callable, Dict, Iterator, List

from ._common import progress

#: the code the issues' "today" figures were measured on
BASELINE_REV = "790e052"
#: the repository root (what ``git archive`` reads)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@contextlib.contextmanager
def baseline_tree(rev: str = BASELINE_REV) -> Iterator[str]:
    """A directory holding ``rev``'s ``atoll`` package (put it first on ``sys.path``), removed on exit."""
    try:
        proc = subprocess.run(["git", "-C", REPO, "archive", "--format=tar", rev, "atoll"], capture_output=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"git archive {rev}: {e}") from None
    if proc.returncode != 0:
        raise RuntimeError(f"git archive {rev}: {proc.stderr.decode(errors='replace').strip()}")
    tmp = tempfile.mkdtemp(prefix=f"atoll-{rev}-")
    try:
        with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
            if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: refuse links and paths out of ``tmp``
                tar.extractall(tmp, filter="data")
            else:  # pragma: no cover - git's archive of this repository's own tree
                tar.extractall(tmp)
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def alternate(rounds: int, measure: Callable[[str], Any], label: str) -> Dict[str, List[Any]]:
    """``measure(tree)`` on this tree (``"this-tree"``) and on ``BASELINE_REV``'s, in turns, ``rounds`` times each (the
    machine's load drifts over minutes): name -> what each call returned, in order."""
    with baseline_tree() as old:
        trees = {"this-tree": REPO, BASELINE_REV: old}
        got: Dict[str, List[Any]] = {name: [] for name in trees}
        for _ in range(rounds):
            for name, tree in trees.items():
                progress(f"{label} on {name}")
                got[name].append(measure(tree))
        return got
