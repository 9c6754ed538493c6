"""Few Ray tasks for many blocks: a list of items cut into contiguous groups, one task per group.

Ray starts a new worker process (about 0.5 s of CPU on a small machine, seconds when the machine is busy) for
every task that finds no idle worker, at most as many at once as the node has CPUs. One task per block over
dozens of blocks therefore waits for a process per block; a few tasks of many blocks each run on the workers
there are. Used wherever the driver hands a stream's blocks to Ray tasks (reading committed parts, adopting
refs, encoding Arrow for Spark)."""
from __future__ import annotations

from typing import Any, List, Sequence

#: items taken by one task at most (a group list has at least two groups when there are two items or more)
PER_TASK = 16


def groups(n: int, per_task: int = PER_TASK) -> List[range]:
    """``range(n)`` cut into contiguous groups, one per task: at least two (when ``n`` > 1), each of at most
    ``per_task`` positions, sizes differing by one at most."""
    tasks = min(n, max(2, -(-n // per_task)))
    size, extra = divmod(n, tasks)
    out, start = [], 0
    for t in range(tasks):
        end = start + size + (1 if t < extra else 0)
        out.append(range(start, end))
        start = end
    return out


def returns(values: Sequence[Any]) -> Any:
    """What a grouped task body returns for ``values`` (one per item): Ray wants the value itself for
    ``num_returns=1`` and a tuple otherwise."""
    return values[0] if len(values) == 1 else tuple(values)


def map_grouped(task: Any, items: Sequence[Any], *lead: Any) -> List[Any]:
    """One ``ObjectRef`` per item, in order, from calls ``task.remote(*lead, *group)`` over :func:`groups` of
    ``items`` (``task``'s body ends with :func:`returns`, one value per item of its group)."""
    refs: List[Any] = []
    for group in groups(len(items)):
        out = task.options(num_returns=len(group)).remote(*lead, *items[group.start:group.stop])
        if len(group) == 1:
            refs.append(out)
        else:
            refs.extend(out)
    return refs
