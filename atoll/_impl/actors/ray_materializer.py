"""RayMaterializer: every island of a graph becomes one Ray actor (``Materializer.ray()``).

The traversal is walked once on the driver with ``RecordingPhase`` plugins; then one ``IslandActor``
per island is created (options from the island's ``.island(**options)``), all plans are sent at once,
and ``run`` returns as soon as every island has started and reported its materialized values. The
graph's materialized value is computed on the driver with the traversal's stack language from those
values. An island whose actor cannot be scheduled within ``start_timeout`` seconds (resources nowhere
available) fails the run with ``IslandScheduleTimeoutError`` instead of hanging.

Island actors are reused: when a graph ends cleanly its actors are reset and kept in a ``WarmActorPool``
(by actor options) for ``warm_idle_timeout`` seconds, so the next graph starts without new worker
processes; ``warm_actors=n`` starts n ahead of the first graph; ``shutdown()`` kills the idle ones.
"""
from __future__ import annotations

import logging
import os
from typing import Any, Dict, Optional

import ray

from ... import _log_config
from ...materializer import phased
from ...materializer.debug import stderr_debug
from ...materializer.mat_values import resolve
from ...materializer.materializer import Materializer, MaterializerSettings
from ..islands.checkpoint_setup import (
    check_checkpointable,
    check_restorable,
    graph_name,
    load_restore,
    new_coordinator,
    open_storage,
    plan_stage_logics,
)
from ..islands.feedback import back_edge_channels
from ..islands.island_plan import GraphBuild
from ..ops.kill_switch import Abort, KillSwitchStage, Shutdown, SwitchCommand
from .exports import ExportedHandle, RemoteKillSwitch, import_value
from .attempt import IslandLauncher
from ...materializer.driver_prep import DriverContext
from .plan import RecordingPhase
from .recovery import GraphRecovery
from .running import RayIslandPort, RayRunningGraph
from .warm_pool import WarmActorPool, pool_key

log = logging.getLogger("atoll.ray")


#: the islands' chunk size when none is given: a chunked stage region handles lists of up to this many elements
#: (frames may be larger; an input boundary hands a frame on in slices of this size)
CHUNK_SIZE = 4096


class RaySettings(MaterializerSettings):
    """Materializer settings plus what only the Ray materializer uses.

    ``frame_size`` is the most elements a channel frame holds; the output boundary cuts frames smaller so that an
    encoded frame stays under ``boundaries.FRAME_BYTES`` (~90 KiB, below Ray's 100 KiB limit for inline call
    arguments), adapting to the bytes per element of the frames it sent: small elements (ints, short rows) travel
    16384 to a frame, large ones a few to a frame, one larger than the budget alone. Each call costs ~0.2 ms
    whatever it carries, so bigger frames of small elements are what makes a channel crossing cheap.
    ``chunk_size`` (default ``min(frame_size, CHUNK_SIZE)``) stays at today's 4096: a chunk is the work list of every
    stage in an island's chunked regions, and larger ones only add latency and per-chunk memory there; an input
    boundary slices a large frame into chunks (a list slice, far cheaper than a call).
    ``input_buffer=(initial, max)``: the elements an input boundary requests; with max 65536 up to four full
    frames of small elements are requested ahead, and it re-requests half its buffer at a time.
    Worst case per channel: in flight at most ``channel_window`` (16) frames, each under ~90 KiB encoded unless it
    is a single larger element (so ~1.4 MiB of small or mid-size elements); buffered at the receiver at most
    ``max`` (65536) elements, plus one chunk handed downstream (as before: the buffer is counted in elements, so
    its bytes are 65536 times the element size, e.g. ~4 MiB of ints, ~10 MiB of 4-field rows).
    ``channel_store_bytes``: the bytes a channel's elements passed by reference (numpy arrays, Arrow tables and
    batches, and bytes values of 100 KiB or more, at any depth of lists, tuples and dicts: the codec puts each one
    into Ray's object store) may hold in the store, in flight, buffered at the
    receiver and handed downstream in a chunk together. The output boundary pulls and sends such elements only
    while those it sent and the receiver has not consumed hold less than three quarters of it; the input boundary
    hands them on in chunks of at most a quarter of it and requests again as soon as it did. A channel thus holds
    at most this many bytes of the store; with elements larger than a quarter of it, the budget and one element
    (two elements when one is larger than the budget: each travels alone). The output boundary expects the next
    elements to hold what the last frames' did, so the frame in which such elements first appear, or suddenly grow,
    can take the channel past the budget by that frame. Elements that do not go through the store (ints, rows,
    ``bytes`` under 100 KiB, which msgpack carries in the frame) are bounded by ``input_buffer`` alone, as before. Default (``None``): ``min(64 MiB, the smallest node's object store / 8)``, taken when the materializer
    starts; 0 turns the budget off (``input_buffer`` alone then bounds them too: 65536 arrays of 1 MiB).
    """

    __slots__ = ("channel_window", "start_timeout", "default_num_cpus", "frame_size", "channel_store_bytes")

    def __init__(
        self,
        input_buffer=(16, 65536),
        frame_size: int = 16384,
        event_limit: int = 2000,
        fusion: bool = True,
        debug: bool = False,
        channel_window: int = 16,
        start_timeout: float = 60.0,
        default_num_cpus: float = 0,
        chunk_size: Optional[int] = None,
        channel_store_bytes: Optional[int] = None,
    ):
        if chunk_size is None:
            # islands chunk as before frames grew: a frame above this is handed on in slices
            chunk_size = min(frame_size, CHUNK_SIZE) if isinstance(frame_size, int) and frame_size >= 1 else 1024
        super().__init__(input_buffer=input_buffer, event_limit=event_limit, fusion=fusion, debug=debug,
                         chunk_size=chunk_size)
        if not isinstance(channel_window, int) or channel_window < 1:
            raise ValueError(f"Materializer.ray: channel_window must be an int >= 1, got {channel_window!r}")
        if start_timeout <= 0:
            raise ValueError(f"Materializer.ray: start_timeout must be > 0, got {start_timeout!r}")
        if not isinstance(frame_size, int) or frame_size < 1:
            raise ValueError(f"Materializer.ray: frame_size must be an int >= 1, got {frame_size!r}")
        if channel_store_bytes is not None and (
            not isinstance(channel_store_bytes, int) or isinstance(channel_store_bytes, bool) or channel_store_bytes < 0
        ):
            raise ValueError("Materializer.ray: channel_store_bytes must be None (the default budget) or an int of "
                             f"bytes >= 0 (0: no budget), got {channel_store_bytes!r}")
        self.frame_size = frame_size
        self.channel_store_bytes = channel_store_bytes
        self.channel_window = channel_window
        self.start_timeout = float(start_timeout)
        self.default_num_cpus = default_num_cpus


#: the channel store budget's default: at most this, ...
CHANNEL_STORE_BYTES = 64 * 1024 * 1024
#: ... and at most this fraction of the smallest node's object store
CHANNEL_STORE_SHARE = 8


def default_channel_store_bytes() -> int:
    """``RaySettings.channel_store_bytes``'s default in the connected Ray cluster: ``min(CHANNEL_STORE_BYTES, the
    smallest live node's object store / CHANNEL_STORE_SHARE)`` (``CHANNEL_STORE_BYTES`` when no node says)."""
    stores = [n.get("Resources", {}).get("object_store_memory") for n in ray.nodes() if n.get("Alive")]
    stores = [int(b) for b in stores if b]
    if not stores:
        return CHANNEL_STORE_BYTES
    return max(1, min(CHANNEL_STORE_BYTES, min(stores) // CHANNEL_STORE_SHARE))


def ensure_ray(address: Optional[str] = None, **init_kwargs) -> None:
    """Connect to Ray (``address``) or start a local Ray if none is running in this process."""
    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    kwargs = {"address": address}
    kwargs.update(init_kwargs)
    ray.init(**_log_config.ray_init_kwargs(kwargs))  # driver logs at WARNING unless ATOLL_DEBUG=1
    if kwargs.get("log_to_driver", True):
        _log_config.quiet_forwarded_ray_core_info()  # worker output still reaches the driver


class RayMaterializer(Materializer):
    """See the module docstring. ``address``: a Ray cluster address (``"auto"`` to join the local
    node's cluster); ``ray_init``: extra ``ray.init`` keyword arguments; ``reuse_actors``: keep the actors
    of cleanly ended graphs for the next ones (``warm_idle_timeout`` seconds); ``warm_actors``: island
    actors (default options) started now, ahead of the first graph; other keywords are settings
    (``input_buffer``, ``channel_window``, ``channel_store_bytes``, ``start_timeout``, ``fusion`` ...)."""

    def __init__(self, address: Optional[str] = None, ray_init: Optional[dict] = None, checkpoint=None,
                 reuse_actors: bool = True, warm_actors: int = 0, warm_idle_timeout: float = 60.0, **settings):
        super().__init__(RaySettings(**settings))
        if not isinstance(warm_actors, int) or isinstance(warm_actors, bool) or warm_actors < 0:
            raise ValueError(f"Materializer.ray: warm_actors must be an int >= 0, got {warm_actors!r}")
        if not isinstance(warm_idle_timeout, (int, float)) or warm_idle_timeout <= 0:
            raise ValueError(f"Materializer.ray: warm_idle_timeout must be > 0 seconds, got {warm_idle_timeout!r}")
        if warm_actors and not reuse_actors:
            raise ValueError("Materializer.ray: warm_actors needs reuse_actors=True")
        self.checkpoint = checkpoint
        self.address = address
        ensure_ray(address, **(ray_init or {}))
        if self.settings.channel_store_bytes is None:
            self.settings.channel_store_bytes = default_channel_store_bytes()
        self._pool: Optional[WarmActorPool] = WarmActorPool(float(warm_idle_timeout)) if reuse_actors else None
        if warm_actors:
            self._start_warm(warm_actors)

    def _start_warm(self, n: int) -> None:
        """Create ``n`` island actors with the default options and keep them in the pool (not waited for)."""
        from .island_actor import IslandActor

        opts = self._default_actor_options({})
        key = pool_key(opts)
        for i in range(n):
            actor = IslandActor.options(**opts).remote(f"warm-{i}")
            self._pool.add_fresh(key, actor, actor.ready.remote())

    def shutdown(self, cause: Optional[BaseException] = None) -> None:
        """Refuse new graphs, cancel the running ones and kill the warm actors."""
        super().shutdown(cause)
        if self._pool is not None:
            self._pool.shutdown()

    @property
    def warm_pool(self) -> Optional[WarmActorPool]:
        """The idle island actors kept for the next graphs (None with ``reuse_actors=False``)."""
        return self._pool

    def __repr__(self):
        return f"Materializer.ray(address={self.address!r})"

    def _actor_options(self, phase: RecordingPhase) -> Dict[str, Any]:
        return self._default_actor_options(phase.options)

    def _default_actor_options(self, island_options: Dict[str, Any]) -> Dict[str, Any]:
        """The Ray actor options of an island: its ``.island(...)`` options with the defaults, less ``name``, which
        names the island, not the actor. A Ray name is unique in the cluster: a blueprint with a named island could
        not run twice at once, and its actor could never be reused from the warm pool."""
        opts = {k: v for k, v in island_options.items() if k != "name"}
        opts.setdefault("num_cpus", self.settings.default_num_cpus)
        opts.setdefault("max_restarts", 0)
        opts.setdefault("max_task_retries", 0)
        return opts

    def materialize(self, graph, name: Optional[str] = None, restore_from: Any = None) -> Any:
        self._check_open()
        driver = DriverContext(self, remote=True)
        try:
            return self._materialize(graph, driver, name, restore_from)
        except BaseException:
            driver.abort()
            raise

    def _materialize(self, graph, driver: DriverContext, name: Optional[str] = None, restore_from: Any = None) -> Any:
        checkpointing = self.checkpoint is not None
        build = GraphBuild(self, graph_name(name, checkpointing))
        settings = self.settings
        restored_from = restore_storage = snapshots = None
        if restore_from is not None:
            restore_storage, restored_from, snapshots = load_restore(restore_from)
        mat, phases = phased.materialize(
            graph.builder.traversal,
            lambda tag, attrs, index: RecordingPhase(build, attrs, index),
            build.top_attributes,
            stderr_debug() if settings.debug else None,
            driver,
        )
        phases = [p for p in phases if not p.is_empty]
        ckpt = None
        if snapshots is not None:
            check_restorable(phases, snapshots, f"checkpoint {restored_from} of {restore_storage.base}")
        if checkpointing or snapshots is not None:
            check_checkpointable([(p.name, plan_stage_logics(p.finish_plan())) for p in phases])
        if checkpointing:
            storage, first_id = open_storage(self.checkpoint, build.name, restored_from)
            ckpt = {"storage": self.checkpoint.storage, "graph": build.name, "attempt": 0,
                    "aligned": self.checkpoint.guarantee == "exactly_once",
                    "logged": self.checkpoint.alignment == "logged",
                    "decline_after_failure": self.checkpoint.restart.on_stage_failure,
                    "feedback": sorted(back_edge_channels(build.plans))}
        launcher = IslandLauncher([(p.index, p.name, p.finish_plan(), self._actor_options(p), p.options)
                                   for p in phases], settings, ckpt, self._pool)
        islands, results = launcher.launch(0, snapshots, on_created=driver.islands_created)
        running = RayRunningGraph(build.name, islands, self._unregister, self._pool)
        if checkpointing:
            ports = [(i.index, i.name, RayIslandPort(i)) for i in islands]
            new_coordinator(self.checkpoint, storage, first_id, ports, running, restored_from, restore_storage).start()
        for hold in driver.holds:
            hold.bind(running.hold(hold.phase.index))
        for fn in driver.hand_over():
            running.add_cleanup(fn)
        known = {}
        for p, exported in zip(phases, results):
            future_for = running.future_for(p.index)
            for i, value in enumerate(exported):
                module = p.plan.stages[i].module
                shared = getattr(module, "shared", None) if isinstance(module, KillSwitchStage) else None
                if shared is not None and type(value) is ExportedHandle:
                    remote = RemoteKillSwitch(value)
                    running.register_handle(p.index, value.hid, remote)
                    self._link_shared_switch(shared, remote, running)
                    known[(p.index, i)] = shared
                else:
                    imported = import_value(value, future_for)
                    if type(value) is ExportedHandle:
                        running.register_handle(p.index, value.hid, imported)
                    known[(p.index, i)] = imported
        if checkpointing:
            running.enable_recovery(GraphRecovery(running, launcher, self.checkpoint.restart, restored_from,
                                                  restore_storage))
        self._register(running)
        launcher.run(islands)
        running.start_monitoring()
        return resolve(mat, known)

    @staticmethod
    def _link_shared_switch(shared, remote: RemoteKillSwitch, running: RayRunningGraph) -> None:
        """Make the driver's shared switch also trigger its copy inside the island actor."""

        def forward(command: SwitchCommand) -> None:
            match command:
                case Shutdown():
                    remote.shutdown()
                case Abort(cause=cause):
                    remote.abort(cause)

        signal = shared._signal
        key = signal.add(forward)
        if key is None:
            forward(signal.result)
        else:
            running.add_cleanup(lambda: signal.remove(key))

