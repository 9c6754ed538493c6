"""What a user configures for checkpoints (``CheckpointSettings``, ``RestartPolicy``) and what a completed
checkpoint reports (``CheckpointInfo``)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple, Union

_GUARANTEES = ("exactly_once", "at_least_once")
_ALIGNMENTS = ("aligned", "logged")


def _positive(owner: str, name: str, value: Any, allow_none: bool = False, allow_zero: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (value == 0 and not allow_zero):
        need = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{owner}: {name} must be a number {need}{' or None' if allow_none else ''}, got {value!r}")


@dataclass(frozen=True)
class RestartPolicy:
    """How often a graph that lost an island may be restarted from its last checkpoint, and how long to
    wait before each attempt: ``min(max_backoff, backoff * 2**(r-1)) * (1 +- jitter)``. ``within``
    (seconds) counts only the restarts of that recent window against ``max_restarts``.
    ``on_stage_failure``: also restart when a stage fails (off by default: a deterministic poison element
    would fail again on replay, as Pekko's supervision assumes). With it, an island that a failure travelled
    through declines every later checkpoint, so that the restart goes back to a cut taken before the failure."""

    max_restarts: int = 3
    within: Optional[float] = None
    backoff: float = 0.1
    max_backoff: float = 10.0
    jitter: float = 0.1
    on_stage_failure: bool = False

    def __post_init__(self):
        if isinstance(self.max_restarts, bool) or not isinstance(self.max_restarts, int) or self.max_restarts < 0:
            raise ValueError(f"RestartPolicy: max_restarts must be an int >= 0, got {self.max_restarts!r}")
        _positive("RestartPolicy", "within", self.within, allow_none=True)
        _positive("RestartPolicy", "backoff", self.backoff, allow_zero=True)
        _positive("RestartPolicy", "max_backoff", self.max_backoff, allow_zero=True)
        if isinstance(self.jitter, bool) or not isinstance(self.jitter, (int, float)) or not 0 <= self.jitter < 1:
            raise ValueError(f"RestartPolicy: jitter must be a number in [0, 1), got {self.jitter!r}")


@dataclass(frozen=True)
class CheckpointSettings:
    """Checkpointing of a materializer's graphs.

    ``interval``: seconds between checkpoints (None: only on request, ``checkpoint_now()``).
    ``storage``: where checkpoints go - a ``pyarrow.fs`` URI (``file:///...``, ``s3://...``), a local path, a
    ``(pyarrow.fs.FileSystem, path)`` pair, or None for ``.atoll/checkpoints`` under the working directory.
    ``timeout``: seconds a checkpoint may take before it is aborted. ``retained``: complete checkpoints kept
    per graph (older ones are deleted once a newer one is durable). ``retain_on_success``: keep the graph's
    checkpoints after it completed (otherwise they are deleted). ``guarantee``: ``"exactly_once"`` (an input
    that delivered a barrier waits until every input of its island has) or ``"at_least_once"`` (inputs never
    wait: no stall behind a slow input, but a restore repeats what a faster input delivered after its
    barrier before the cut). ``alignment`` (exactly-once): ``"aligned"`` (inputs wait as said) or
    ``"logged"`` (no input waits: an island cuts at the first barrier and records what its other inputs
    deliver until their barriers come, as the channels' state - Chandy-Lamport; costs a copy of those
    elements in the checkpoint). ``min_pause``: seconds from the end of one checkpoint (completed or aborted) to
    the start of the next one the graph takes by itself, as Flink's minimum pause between checkpoints: a periodic
    trigger that comes sooner is skipped (the next interval tries again), and a checkpoint a stage asks for
    (``request_checkpoint()``, e.g. ``Sink.to_spark_stream`` with ``max_pending_batches`` files waiting for
    release) is taken once the pause has passed. Never held back: ``checkpoint_now``/``stop_with_checkpoint``, and
    the final checkpoint a two-phase-commit sink asks for at the end of its input (``request_checkpoint(final=
    True)``: the stream's end does not wait for the pause). ``restart``: the ``RestartPolicy`` of automatic
    recovery."""

    interval: Optional[float] = None
    storage: Union[None, str, Tuple[Any, str]] = None
    timeout: float = 60.0
    retained: int = 2
    retain_on_success: bool = False
    guarantee: str = "exactly_once"
    alignment: str = "aligned"
    min_pause: float = 0.0
    tolerable_failures: int = 3
    restart: RestartPolicy = field(default_factory=RestartPolicy)

    def __post_init__(self):
        _positive("CheckpointSettings", "interval", self.interval, allow_none=True)
        _positive("CheckpointSettings", "timeout", self.timeout)
        _positive("CheckpointSettings", "min_pause", self.min_pause, allow_zero=True)
        for name in ("retained", "tolerable_failures"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < (1 if name == "retained" else 0):
                raise ValueError(f"CheckpointSettings: {name} must be an int >= {1 if name == 'retained' else 0}, got {v!r}")
        if self.guarantee not in _GUARANTEES:
            raise ValueError(f"CheckpointSettings: guarantee must be one of {_GUARANTEES}, got {self.guarantee!r}")
        if self.alignment not in _ALIGNMENTS:
            raise ValueError(f"CheckpointSettings: alignment must be one of {_ALIGNMENTS}, got {self.alignment!r}")
        if self.alignment == "logged" and self.guarantee != "exactly_once":
            raise ValueError("CheckpointSettings: alignment='logged' is a way to get exactly-once without blocking; "
                             f"it needs guarantee='exactly_once', got {self.guarantee!r}")
        if not isinstance(self.restart, RestartPolicy):
            raise TypeError(f"CheckpointSettings: restart must be a RestartPolicy, got {self.restart!r}")
        s = self.storage
        if isinstance(s, os.PathLike):
            object.__setattr__(self, "storage", os.fspath(s))
            s = self.storage
        if s is not None and not isinstance(s, str) and not (isinstance(s, tuple) and len(s) == 2 and isinstance(s[1], str)):
            raise TypeError(f"CheckpointSettings: storage must be a URI or path string, a (pyarrow FileSystem, path) "
                            f"pair or None, got {s!r}")


@dataclass(frozen=True)
class CheckpointInfo:
    """A completed checkpoint: its id, the graph it belongs to, where it is (``path``, a URI or path under the
    storage), when it was taken and how large it is, and per island what was written."""

    id: int
    graph: str
    path: str
    attempt: int = 0
    started: float = 0.0
    completed: float = 0.0
    bytes: int = 0
    islands: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    finished_islands: List[str] = field(default_factory=list)

    @classmethod
    def from_manifest(cls, manifest: Dict[str, Any], path: str, completed: Optional[float] = None) -> "CheckpointInfo":
        """The info a checkpoint's manifest (``_MANIFEST.json``, at ``path``) describes."""
        islands = {e.get("name", i): e for i, e in manifest["islands"].items()}
        return cls(id=manifest["checkpoint_id"], graph=manifest["graph"], path=path, attempt=manifest.get("attempt", 0),
                   started=manifest.get("started", 0.0),
                   completed=manifest.get("created", 0.0) if completed is None else completed,
                   bytes=sum(e["size"] for e in islands.values()), islands=islands,
                   finished_islands=[n for n, e in islands.items() if e.get("finished")])

    @property
    def duration(self) -> float:
        """Seconds from the trigger to the manifest being durable."""
        return self.completed - self.started
