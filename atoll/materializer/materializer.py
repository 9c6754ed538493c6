"""Materializer: turns a runnable blueprint into running islands (Pekko's ``Materializer``).

``Materializer.local()`` runs each island on a thread of this process; ``Materializer.ray()`` runs
each island as a Ray actor. Both use the same traversal walk, island plugins and channel protocol, so
a graph gives the same results on either. The process-wide default (used by ``run()`` without an
argument) is created on first use; ``set_default_materializer`` replaces it.

Time: a materializer has a ``clock`` (``atoll.stage.clock``) that every island host it creates reads
time from (``host.now()``). ``Materializer.local(clock=ManualClock())`` runs a graph on the test
kit's virtual time; the Ray materializer's hosts always use real time.
"""
from __future__ import annotations

import os
import random
import threading
from abc import ABC, abstractmethod
from typing import Any, List, Optional

from ..errors import IllegalStateError
from ..stage.clock import REAL_CLOCK, Clock
from ..stage.attributes import Attributes, InputBuffer, SupervisionStrategy
from ..stage.supervision import Supervision


class MaterializerSettings:
    """Defaults a materializer applies to every graph it runs."""

    __slots__ = ("input_buffer", "input_buffer_given", "event_limit", "fusion", "debug", "chunk_size", "fuzzing")

    def __init__(self, input_buffer=None, event_limit: int = 2000, fusion: bool = True, debug: bool = False,
                 chunk_size: int = 1024, fuzzing=None):
        """``input_buffer=(initial, max)``: every stage's default input buffer (``Attributes.input_buffer``), (16, 16)
        as in Pekko when not given; given, it also sizes the channels between local islands, which otherwise grow
        to ``InProcessTransport.channel_buffer`` for small elements. ``fusion``: connections between operators with
        a chunk form move lists of elements (``atoll._impl.islands.chunking``); False moves one element per event everywhere (the reference the
        parity tests compare with). ``chunk_size``: the most elements a stage with unbounded demand
        (a fold, a seq sink) asks for per pull. ``fuzzing``: Pekko's fuzzing mode for tests - an int
        seed (or True for a random one) makes every interpreter dispatch its events in a shuffled, still
        legal order (see ``atoll._impl.islands.interpreter``); None/False is the normal mode unless the
        ``ATOLL_FUZZING`` environment variable holds a seed (to run a whole test suite fuzzed)."""
        self.input_buffer_given = input_buffer is not None
        initial, max_ = (16, 16) if input_buffer is None else input_buffer
        InputBuffer(initial, max_)  # validates
        if not isinstance(event_limit, int) or event_limit < 1:
            raise ValueError(f"Materializer: event_limit must be an int >= 1, got {event_limit!r}")
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"Materializer: chunk_size must be an int >= 1, got {chunk_size!r}")
        if fuzzing is None and os.environ.get("ATOLL_FUZZING"):
            fuzzing = int(os.environ["ATOLL_FUZZING"])
        if fuzzing is True:
            fuzzing = random.randrange(1 << 30)
        elif fuzzing is False:
            fuzzing = None
        elif fuzzing is not None and not isinstance(fuzzing, int):
            raise ValueError(f"Materializer: fuzzing must be None, a bool or an int seed, got {fuzzing!r}")
        self.fuzzing = fuzzing
        self.chunk_size = chunk_size
        self.input_buffer = (initial, max_)
        self.event_limit = event_limit
        self.fusion = bool(fusion)
        self.debug = bool(debug)

    def top_attributes(self) -> Attributes:
        """The least specific attributes of every graph: the defaults stages fall back on."""
        return Attributes(
            (
                InputBuffer(*self.input_buffer),
                SupervisionStrategy(Supervision.stopping_decider),
            )
        )


class Materializer(ABC):
    """Runs blueprints. Use ``Materializer.local()`` or ``Materializer.ray()``."""

    def __init__(self, settings: MaterializerSettings, clock: Optional[Clock] = None):
        self.settings = settings
        #: where the island hosts of this materializer read time (and, if driven, who fires timers)
        self.clock: Clock = clock if clock is not None else REAL_CLOCK
        self._lock = threading.Lock()
        self._running: List[Any] = []
        self._shutdown = False

    # ------------------------------------------------------------------ factories
    @staticmethod
    def local(clock: Optional[Clock] = None, checkpoint: Optional[Any] = None, **settings) -> "Materializer":
        """Every island on a thread of this process.

        ``clock``: the clock of every island host (and so of every substream, which runs on its
        parent's host); default real time. With ``atoll.testkit.ManualClock()`` timers fire only
        when the test advances the clock (``clock.advance(seconds)``). ``checkpoint``: a
        ``CheckpointSettings`` to checkpoint every graph this materializer runs."""
        from .._impl.islands.local_materializer import LocalMaterializer
        from ..checkpoint.settings import CheckpointSettings

        if clock is not None and not isinstance(clock, Clock):
            raise TypeError(f"Materializer.local: clock must be an atoll Clock, got {clock!r}")
        if checkpoint is not None and not isinstance(checkpoint, CheckpointSettings):
            raise TypeError(f"Materializer.local: checkpoint must be a CheckpointSettings, got {checkpoint!r}")
        m = LocalMaterializer(MaterializerSettings(**settings), checkpoint)
        if clock is not None:
            m.clock = clock
        return m

    @staticmethod
    def ray(address: Optional[str] = None, **settings) -> "Materializer":
        """Every island as a Ray actor; ``ray.init`` is called (locally, or at ``address``) if needed.

        The island hosts read time through the same ``host.now()`` as local ones, but always from a
        real clock: there is no manual (virtual) clock for Ray, since actors in other processes
        cannot share one. Timer tests use ``Materializer.local(clock=ManualClock())``."""
        from .._impl.actors.ray_materializer import RayMaterializer

        from ..checkpoint.settings import CheckpointSettings

        checkpoint = settings.get("checkpoint")
        if checkpoint is not None and not isinstance(checkpoint, CheckpointSettings):
            raise TypeError(f"Materializer.ray: checkpoint must be a CheckpointSettings, got {checkpoint!r}")
        return RayMaterializer(address=address, **settings)

    # ------------------------------------------------------------------ running
    @abstractmethod
    def materialize(self, graph, name: Optional[str] = None, restore_from: Any = None) -> Any:
        """Start ``graph`` (a RunnableGraph) and return its materialized value. ``name`` names the running graph
        (``running_graph(name)``; its checkpoints are stored under it); ``restore_from``: a checkpoint
        (``CheckpointInfo`` or path) whose state the graph starts from."""

    def _check_open(self) -> None:
        if self._shutdown:
            raise IllegalStateError("this materializer has been shut down; create a new one")

    def _register(self, running) -> None:
        from . import graph_registry

        with self._lock:
            self._running.append(running)
        graph_registry.graph_started(self, running)  # consoles and metrics see every graph

    def _unregister(self, running) -> None:
        with self._lock:
            if running in self._running:
                self._running.remove(running)

    def running_graphs(self) -> List[Any]:
        """Handles of the graphs started by this materializer that are still running."""
        with self._lock:
            return list(self._running)

    def running_graph(self, name: str) -> Any:
        """The running graph started with ``run(..., name=name)`` (``LookupError`` if none runs)."""
        for g in self.running_graphs():
            if g.name == name:
                return g
        raise LookupError(f"no graph named {name!r} is running on {self!r}")

    @staticmethod
    def latest_checkpoint(storage: Any, name: str) -> Optional[Any]:
        """The newest complete checkpoint of graph ``name`` under ``storage`` (None if there is none), as a
        ``CheckpointInfo`` to pass to ``run(..., restore_from=...)``."""
        from ..checkpoint.settings import CheckpointInfo
        from ..checkpoint.storage import CheckpointStorage

        st = CheckpointStorage(storage, name)
        cid = st.latest()
        if cid is None:
            return None
        return CheckpointInfo.from_manifest(st.read_manifest(cid), st.path(cid))

    @property
    def is_shutdown(self) -> bool:
        return self._shutdown

    def shutdown(self, cause: Optional[BaseException] = None) -> None:
        """Refuse new graphs and cancel the running ones. Their checkpoint coordinators have stopped when it
        returns (a checkpoint in progress abandoned): nothing writes to a checkpoint storage after it, so the
        storage may be removed then."""
        self._shutdown = True
        graphs = self.running_graphs()
        for g in graphs:
            g.cancel(cause)
        for g in graphs:
            g.stop_checkpoints()


_default: Optional[Materializer] = None
_default_lock = threading.Lock()


def default_materializer() -> Materializer:
    """The process-wide materializer used by ``run()`` without an argument: ``Materializer.ray()``,
    created on first use (which starts a local Ray if none is running). ``set_default_materializer``
    changes it, e.g. to ``Materializer.local()`` for quick scripts."""
    global _default
    with _default_lock:
        if _default is None or _default.is_shutdown:
            _default = Materializer.ray()
        return _default


def set_default_materializer(materializer: Optional[Materializer]) -> None:
    """Replace the process-wide default materializer (``None``: create a fresh one on next use)."""
    global _default
    if materializer is not None and not isinstance(materializer, Materializer):
        raise TypeError(f"set_default_materializer expects a Materializer, got {materializer!r}")
    with _default_lock:
        _default = materializer
