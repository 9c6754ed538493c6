"""``map_pool``: elements through a pool of stateful workers - Ray actors, each built once by ``factory()``
(a model loads once per actor) - with an exact bound on the elements held, per-element supervision and
a ``PoolControl`` materialized value. Design: ``operators.md`` section 3.2-3.5.

**Where the workers run.** When ``ray`` is initialised in the process running the stage (a Ray island
actor, or a local materializer in a driver that called ``ray.init``) the workers are Ray actors, created
with ``max_restarts=0, max_task_retries=0`` so that Atoll knows which elements an actor death lost.
Without Ray (``Materializer.local()`` and ``not ray.is_initialized()``) the same stage runs on local
daemon threads, one per worker, each with its own ``factory()`` instance: ordering, the bound,
supervision, batching and scaling are the same and are tested in-process; actor death cannot happen
there, and ``fetch=False`` emits the values themselves (there is no object store).

**Machinery.** Readiness and call results (an ``ObjectRef`` or a ``concurrent.futures.Future``) are
resolved by :class:`.async_loop.Resolver` - ``ref.future()``, never a blocking ``ray.get`` on the island
thread - and handled on the island thread. Timers (``batch_timeout``, ``idle_timeout``,
``ready_timeout``) use the stage timer API, so ``ManualClock`` drives them in tests.

**Where this differs from the design (``operators.md`` 3.2-3.5), and why.**

* ``max_concurrency``, ``init_retries``, ``max_consecutive_init_failures`` and ``wait_ready`` are not
  arguments (the brief's signature has none): calls run one at a time per actor, a worker whose
  ``factory()`` fails is replaced at once, the stream fails with ``factory``'s original exception after
  ``MAX_INIT_FAILURES`` (3) consecutive failed starts with no success in between, and dispatch starts
  as soon as one worker is ready.
* A call that fails is retried (``retry_exceptions``) on whichever worker is free first, not
  preferably on another one; the decider is asked once per failed call (a batch shares its verdict).
* An actor death is charged to the elements of the *oldest* call in flight on that actor (calls run
  in order, one at a time, so that is the call that was running); the elements of its other calls are
  re-dispatched without a charge. ``PoolWorkerDiedError(index, attempts)`` goes to the decider once an
  element was charged ``max_retries + 1`` deaths.
* ``restarts()`` counts replacements of workers that had been ready (after a death or a Restart
  decision); a worker whose start failed is replaced without counting.
* ``resize(n)`` makes the pool a fixed pool of ``n`` from then on (``min = max = n``; the bound on held
  elements follows the new ``max``). ``n = 0`` pauses the stage.
* Batches follow ``grouped_within(batch_size, batch_timeout)``: a full batch goes as soon as a worker
  has a free slot; a partial one waits for more elements until its oldest element has waited
  ``batch_timeout`` seconds, and goes at once when it cannot grow (upstream finished, or the stage
  holds ``parallelism`` elements). Elements whose wait is over go as soon as a slot frees. Without
  ``batch_timeout`` a partial batch waits until it is full or cannot grow (Ray Data's ``batch_size``):
  sending whatever waits as soon as a slot frees gave mostly 1-element calls in the benchmark (a slot
  frees, then elements arrive one by one), which for a fixed per-call cost halves throughput.
* ``fetch=False`` cannot see a ``None`` result without fetching it: each call also returns the list of
  "result is None" flags (a tiny extra return), so ``None`` results are dropped there too.
* Signals (watermarks, barriers) keep their place as in ``map_async`` (its ``_Epochs``): a signal goes
  out once every element that arrived before it has left the stage, and no result of an element that
  arrived after it goes out before it (unordered: such results wait). Results keep their element's
  event timestamp.
* ``PoolStartTimeoutError`` is defined here (``atoll.errors`` is not this work's file).

**Chunk form.** Between chunk-capable neighbours (DESIGN.md section 4) the stage takes a pushed list whole:
each element becomes one held item as in the element form (the unit of order, supervision, retries and
death charges stays the element), batches are cut from the waiting queue as before, and a pull for ``n``
is answered with one list of up to ``n`` results in element order (ordered), cut where a held signal
stands between two results. Upstream is asked for ``bound - held`` elements, so the bound holds exactly;
event timestamps travel as the list beside each chunk.

**Start on Ray islands.** Creating a Ray actor costs a worker process and the imports of ``factory``'s
module (about half a second on a small machine), and so does the island actor that runs the stage. When
a graph is materialized from the driver onto Ray islands, ``prepare_on_driver`` creates the first ``min``
pool actors right there, so that they start while the island actor starts instead of after it; the
island's stage adopts them (a dead one is replaced, not counted as a failed start: a restarted attempt
gets the handles an earlier attempt may have killed). The driver kills them once the graph has ended,
whatever happened to the island. Later and replacement actors are created by the island, as before.
Ray starts only as many worker processes at a time as the node has cores, so the driver creates the pool
actors right after the island actors when the materializer offers ``ctx.on_islands_created`` (the island,
which the first result needs as much as one pool actor, is not queued behind the second pool actor); a
handle whose actor was never created (materialization failed first) is neither adopted nor killed. The
pool actor class travels by value and imports nothing of Atoll in the worker (``pool_worker``).
"""
from __future__ import annotations

import copy
import math
import threading
from collections import deque
from typing import Any, Optional

from ...errors import PoolStartTimeoutError, PoolWorkerDiedError  # noqa: F401 - PoolStartTimeoutError re-exported
from ...stage.handlers import InHandler, OutHandler
from ...stage.supervision import Supervision, decide
from ...stage.timers import TimerGraphStageLogic
from .actor_pool import RayWorker, factory_name, is_actor_death, new_worker, original_error, ray_active
from .async_loop import Resolver, outcome
from .async_map import _Epochs, log_resumed
from .base import FlowStage, decider_of, require_bool, require_callable, require_int
from .pool_control import PoolControl
from .timeouts import require_duration

OP = "map_pool"
#: consecutive failed worker starts (``factory()`` raised, or the actor died before it was ready) that fail the stream
MAX_INIT_FAILURES = 3

_NOT_YET = object()
_EPS = 1e-9
_STARTING, _READY, _DEAD = "starting", "ready", "dead"


# =========================================================================== validation
def _check_size(size: Any):
    def bad():
        return ValueError(f"{OP}: size must be >= 1 or (min, max) with 0 <= min <= max, max >= 1, got {size!r}")

    if isinstance(size, tuple):
        if len(size) != 2 or any(isinstance(v, bool) or not isinstance(v, int) for v in size):
            raise bad()
        lo, hi = size
        if not (0 <= lo <= hi and hi >= 1):
            raise bad()
        return lo, hi
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise bad()
    return size, size


def _check_number(arg: str, value: Any, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{OP}: argument {arg!r} must be a number >= 0, got {value!r}")


def _check_exceptions(value: Any) -> tuple:
    if isinstance(value, type) and issubclass(value, BaseException):
        return (value,)
    if isinstance(value, tuple) and all(isinstance(v, type) and issubclass(v, BaseException) for v in value):
        return value
    raise TypeError(f"{OP}: argument 'retry_exceptions' must be an exception class or a tuple of them, got {value!r}")


def _warm_key(options: dict):
    """The warm-pool key of pool actors with these options; never equal to an island actor's key. None
    (never kept warm): options not comparable by value, or actors asking for GPUs or custom resources - an
    idle warm actor keeps what it asked for until it is taken or its idle time is over, and a GPU is too
    dear to hold idle."""
    import pickle

    if options.get("num_gpus") or options.get("resources"):
        return None
    try:
        return ("atoll.map_pool", pickle.dumps(sorted(options.items()), protocol=5))
    except Exception:  # noqa: BLE001 - e.g. a scheduling strategy holding a handle
        return None


class MapPool(FlowStage):
    """Emits ``getattr(factory(), method)(elem)`` for every element, computed by a pool of workers (Ray
    actors; local threads without Ray), each built once by ``factory()``. With ``batch_size=b`` the
    workers get lists of up to ``b`` elements and return lists of the same length, emitted one by one.
    ``ordered=True`` emits in element order (a reorder buffer), ``ordered=False`` in completion order.
    A ``None`` result is dropped. The stage holds at most ``parallelism = max_size *
    max_in_flight_per_actor * (batch_size or 1)`` elements (in flight, waiting for a worker slot, or
    done and not yet emitted). Materializes a :class:`PoolControl`.

    **Emits when** the result for the oldest held element (ordered) or any result (unordered) has come
    back and downstream is ready. **Backpressures when** ``parallelism`` elements are held (and, ordered,
    the oldest one's result is not there). **Completes when** upstream completes and every held element
    was emitted or dropped. **Cancels when** downstream cancels. Every worker is killed when the stage
    stops, however it stops.

    Supervision: ``fn`` raising an exception in ``retry_exceptions`` is retried up to ``max_retries``
    times; otherwise the decider decides: Stop fails the stream at once, Resume drops the element(s)
    of the failed call, Restart drops them and replaces the worker. An actor death re-dispatches the
    lost elements and replaces the actor; an element charged with more than ``max_retries`` deaths
    goes to the decider as ``PoolWorkerDiedError``. ``factory()`` failing ``MAX_INIT_FAILURES`` times in
    a row fails the stream with its exception (not a decider case, as Pekko's resource creation)."""

    def __init__(self, factory: Any, *, size: Any = 1, ordered: bool = True, max_in_flight_per_actor: int = 2,
                 method: str = "__call__", batch_size: Optional[int] = None, batch_timeout: Optional[float] = None,
                 num_cpus: float = 1, num_gpus: float = 0, memory: Optional[float] = None,
                 resources: Optional[dict] = None, runtime_env: Optional[dict] = None, scheduling_strategy: Any = None,
                 max_retries: int = 3, retry_exceptions: Any = (), idle_timeout: Optional[float] = 60.0,
                 ready_timeout: float = 600.0, fetch: bool = True):
        require_callable(OP, "factory", factory)
        self.min_size, self.max_size = _check_size(size)
        require_bool(OP, "ordered", ordered)
        require_int(OP, "max_in_flight_per_actor", max_in_flight_per_actor, 1)
        if not isinstance(method, str) or not method:
            raise TypeError(f"{OP}: argument 'method' must be a method name, got {method!r}")
        if batch_size is not None:
            require_int(OP, "batch_size", batch_size, 1)
        if batch_timeout is not None:
            if batch_size is None:
                raise ValueError(f"{OP}: argument 'batch_timeout' needs batch_size, got batch_size=None")
            batch_timeout = require_duration(OP, "batch_timeout", batch_timeout)
        _check_number("num_cpus", num_cpus)
        _check_number("num_gpus", num_gpus)
        _check_number("memory", memory, optional=True)
        if resources is not None and not isinstance(resources, dict):
            raise TypeError(f"{OP}: argument 'resources' must be a dict, got {resources!r}")
        if runtime_env is not None and not isinstance(runtime_env, dict):
            raise TypeError(f"{OP}: argument 'runtime_env' must be a dict, got {runtime_env!r}")
        require_int(OP, "max_retries", max_retries, 0)
        self.retry_exceptions = _check_exceptions(retry_exceptions)
        if idle_timeout is not None:
            idle_timeout = require_duration(OP, "idle_timeout", idle_timeout)
        ready_timeout = require_duration(OP, "ready_timeout", ready_timeout)
        require_bool(OP, "fetch", fetch)
        super().__init__(OP)
        self.factory = factory
        self.name_ = f"{OP}({factory_name(factory)})"
        self.ordered = ordered
        self.max_in_flight = max_in_flight_per_actor
        self.method = method
        self.batch_size = batch_size
        self.batch_timeout = batch_timeout
        self.max_retries = max_retries
        self.idle_timeout = idle_timeout
        self.ready_timeout = ready_timeout
        self.fetch = fetch
        options: dict = {"num_cpus": num_cpus, "num_gpus": num_gpus}
        if memory is not None:
            options["memory"] = memory
        if resources is not None:
            options["resources"] = resources
        if runtime_env is not None:
            options["runtime_env"] = runtime_env
        if scheduling_strategy is not None:
            options["scheduling_strategy"] = scheduling_strategy
        self.options = options
        #: pool actors the driver started for this materialization (``prepare_on_driver``); adopted by the logic
        self.prestarted: tuple = ()

    def prepare_on_driver(self, ctx):
        """On Ray islands: start the first ``min`` pool actors from the driver, so that they start while the
        island actor does (see the module docstring); the driver kills them when the graph has ended. They
        are created right after the island actors when the materializer says when that is
        (``ctx.on_islands_created``), else now."""
        if not ctx.remote or self.min_size == 0 or not ray_active():
            return self, None
        pool = getattr(ctx.materializer, "warm_pool", None)  # the Ray materializer's warm actors (None: no reuse)
        if pool is not None and not (hasattr(pool, "take") and hasattr(pool, "add_fresh")):
            pool = None
        key = _warm_key(self.options) if pool is not None else None
        workers = tuple(RayWorker.later() for _ in range(self.min_size))

        def create() -> None:
            for w in workers:
                if w.actor is None:
                    w.create(self.factory, self.method, self.options, actor=pool.take(key) if key else None)

        after_islands = getattr(ctx, "on_islands_created", None)
        if callable(after_islands):
            after_islands(create)
        else:
            create()

        def end() -> None:
            for w in workers:
                if key is None:
                    w.kill()
                else:
                    w.give_back(pool, key)  # kept warm only if the island released it

        ctx.on_end(end)
        stage = copy.copy(self)  # same shape and ports; this copy carries the handles
        stage.prestarted = workers
        return stage, None

    @property
    def parallelism(self) -> int:
        return self.max_size * self.max_in_flight * (self.batch_size or 1)

    def create_logic_and_materialized_value(self, attributes):
        control = PoolControl()
        return _MapPoolLogic(self, decider_of(attributes), control), control


# =========================================================================== logic
class _Item:
    """One held element: its input index, the result once known, retries and charged deaths."""

    __slots__ = ("seq", "elem", "value", "arrived", "retries", "deaths", "epoch", "ts")

    def __init__(self, seq: int, elem: Any, arrived: float, epoch, ts):
        self.seq = seq
        self.elem = elem
        self.value = _NOT_YET
        self.arrived = arrived
        self.retries = 0
        self.deaths = 0
        self.epoch = epoch
        self.ts = ts


class _Worker:
    __slots__ = ("wid", "handle", "state", "calls", "prestarted")

    def __init__(self, wid: int, handle, prestarted: bool = False):
        self.wid = wid
        self.handle = handle
        self.state = _STARTING
        self.calls: list = []  # in dispatch order
        self.prestarted = prestarted  # started by the driver (``MapPool.prepare_on_driver``)


class _Call:
    __slots__ = ("worker", "items", "refs", "live")

    def __init__(self, worker: _Worker, items: list):
        self.worker = worker
        self.items = items
        self.refs = None
        self.live = True


class _MapPoolLogic(TimerGraphStageLogic, InHandler, OutHandler):
    pulls_ahead = True  # chunk regions: asks for as many elements as the pool may hold

    def __init__(self, stage: MapPool, decider, control: PoolControl):
        super().__init__(stage.shape)
        self.stage = stage
        self.in_ = stage.in_
        self.out = stage.out
        self.set_handler(self.in_, self)
        self.set_handler(self.out, self)
        self.decider = decider
        self.control = control
        self.min = stage.min_size
        self.max = stage.max_size
        self.mif = stage.max_in_flight
        self.b = stage.batch_size
        self.batched = stage.batch_size is not None
        self.resolver = Resolver(self, stage.name_, self._completed)
        self.workers: dict = {}  # wid -> _Worker, in wid order
        self.next_wid = 0
        self.waiting: deque = deque()  # items waiting for a worker slot
        self.out_q: deque = deque()  # ordered: every held item in order; unordered: the done items of the front epoch
        self.later: list = []  # unordered: done items of epochs behind a held signal
        self.epochs = _Epochs()
        self.held = 0
        self.seq = 0
        self.in_flight = 0
        self.restarts = 0
        self.init_failures = 0
        self.demanded = False
        self.stopped = False
        self.use_ray = False
        self.fetch = stage.fetch
        self.prestarted = list(stage.prestarted)  # the driver's actors, adopted by the first starts
        self.batch_timer_for: Optional[_Item] = None
        self._progressing = False
        self._again = False
        self.bound = stage.parallelism  # the most elements held (follows ``max`` on resize)
        self.clean = False  # the stage completed or downstream cancelled (no failure): actors may be kept warm
        self.chunked = False  # the chunk form runs (``enable_chunks``)
        self.stamped = False  # event time: results carry their element's timestamp

    # ------------------------------------------------------------------ the chunk form
    # A pushed chunk becomes one ``_Item`` per element (the unit of order, supervision, retries and
    # death charges stays the element); batches are cut from the waiting queue as in the element form.
    # A pull for ``n`` is answered with one chunk of up to ``n`` results in order, cut at an epoch
    # boundary so that a held signal goes out between the elements it came between. Upstream is asked
    # for what the bound leaves room for (``bound - held``), so the bound holds exactly.
    def chunk_capable(self) -> bool:
        return True

    def chunk_timestamps(self) -> bool:
        return True

    def enable_chunks(self, chunk_size: int) -> None:
        self.chunked = True
        self.set_handler(self.in_, InHandler(on_push=self._on_push_chunk, on_upstream_finish=self.on_upstream_finish,
                                             on_upstream_failure=self.on_upstream_failure))
        self.set_handler(self.out, OutHandler(on_pull=self._on_pull_chunk,
                                              on_downstream_finish=self.on_downstream_finish))

    def enable_event_time(self) -> None:
        super().enable_event_time()
        self.stamped = True

    def _on_push_chunk(self) -> None:
        chunk = self.grab(self.in_)
        stamps = self._ts if self.stamped else None
        n = len(chunk)
        ep = self.epochs.q[-1]  # ``_Epochs.arrive`` for the whole chunk: signals come between chunks
        ep.pending += n
        arrived = self.interpreter.host.now() if self.stage.batch_timeout is not None else 0.0
        seq = self.seq
        if stamps is None:
            items = [_Item(seq + k, x, arrived, ep, None) for k, x in enumerate(chunk)]
        else:
            items = [_Item(seq + k, x, arrived, ep, t) for k, (x, t) in enumerate(zip(chunk, stamps))]
        self.seq = seq + n
        self.held += n
        self.waiting.extend(items)
        if self.stage.ordered:
            self.out_q.extend(items)
        self._progress()

    def _on_pull_chunk(self) -> None:
        self.demanded = True
        q = self.out_q
        if (not q or q[0].value is _NOT_YET) and not self.is_closed(self.in_):
            # hot path: nothing to emit, nothing to dispatch anew: only pull
            if self.held < self.bound and not self.has_been_pulled(self.in_):
                self.pull_chunk(self.in_, self.bound - self.held)
            return
        self._progress()

    def _emit_chunk(self) -> None:
        """Push the results in front (ordered: in element order) as chunks of at most the demand, each
        within one epoch; dropped elements (``None``) leave without output."""
        q = self.out_q
        out = self.out
        while q and self.is_available(out):
            first = q[0]
            if first.value is _NOT_YET:
                return
            ep = first.epoch
            n = self.demand_of(out)
            vals: list = []
            taken: list = []
            while q:
                item = q[0]
                if item.value is _NOT_YET or item.epoch is not ep or len(vals) >= n:
                    break
                q.popleft()
                taken.append(item)
                if item.value is not None:
                    vals.append(item.value)
            if vals:
                if self.stamped:
                    ts = [i.ts for i in taken if i.value is not None]
                    self._ts = ts if any(t is not None for t in ts) else None
                self.push(out, vals)
            self.held -= len(taken)
            ep.pending -= len(taken) - 1  # every taken item leaves; ``_left`` takes the last one off
            self._left(first)

    # ------------------------------------------------------------------ checkpoint state
    # Every held element: its result once done, else the element itself (waiting for a worker); the signals
    # held behind them. The actors are not state: a restored stage starts its own. A call in flight cannot
    # be saved, so the cut waits for it (calls end by themselves; once the stage holds its maximum with a
    # stalled downstream, nothing new is dispatched).
    def ready_for_snapshot(self) -> bool:
        return self.in_flight == 0

    def save_to_snapshot(self):
        ep = self.epochs
        items = {id(i): i for i in list(self.out_q) + list(self.later) + list(self.waiting)}
        saved = [(i.seq, i.value is not _NOT_YET, i.elem if i.value is _NOT_YET else i.value, ep.index(i.epoch),
                  i.ts, i.retries, i.deaths) for i in sorted(items.values(), key=lambda i: i.seq)]
        return {"epochs": ep.save(), "items": saved, "seq": self.seq, "restarts": self.restarts}

    def restore_from_snapshot(self, state) -> None:
        ep = self.epochs
        ep.restore(state["epochs"])
        self.seq, self.restarts = state["seq"], state["restarts"]
        front = ep.front
        for seq, done, x, e, ts, retries, deaths in state["items"]:
            item = _Item(seq, None if done else x, 0.0, ep.q[e], ts)
            item.retries, item.deaths = retries, deaths
            self.held += 1
            if done:
                item.value = x
            else:
                self.waiting.append(item)
            if self.stage.ordered:
                self.out_q.append(item)
            elif done:
                (self.out_q if item.epoch is front else self.later).append(item)

    # ------------------------------------------------------------------ lifecycle
    def pre_start(self) -> None:
        if self.waiting and self.stage.batch_timeout is not None:
            now = self.interpreter.host.now()  # a restored partial batch waits its timeout from the restore
            for item in self.waiting:
                item.arrived = now
        self.use_ray = ray_active()
        self.fetch = self.stage.fetch or not self.use_ray
        self.control._island_thread = threading.get_ident()
        self.control._resize = self.get_async_callback(self._on_resize)
        while self._alive() < self.min and not self.stopped:  # a start may complete synchronously
            self._start_worker()
        self._sync_control()

    def post_stop(self) -> None:
        self.stopped = True
        self.resolver.stop()
        for h in self.prestarted:  # never adopted (a resize to fewer before they were needed)
            h.kill()
        self.prestarted = []
        workers, self.workers = list(self.workers.values()), {}
        for w in workers:
            if w.prestarted and self.clean and w.state == _READY:
                w.handle.release()  # the driver's actor: it may keep it warm for the next graph (actor_pool)
            else:
                w.handle.kill()
            w.state = _DEAD
        self.in_flight = 0
        c = self.control
        c._stopped = True
        c._size = 0
        c._in_flight = 0
        c._restarts = self.restarts

    def _fail(self, exc: BaseException) -> None:
        self.stopped = True
        self.fail_stage(exc)

    # ------------------------------------------------------------------ ports
    def on_push(self) -> None:
        elem = self.grab(self.in_)
        item = _Item(self.seq, elem, self.interpreter.host.now() if self.stage.batch_timeout is not None else 0.0,
                     self.epochs.arrive(), self._ts)
        self.seq += 1
        self.held += 1
        waiting = self.waiting
        waiting.append(item)
        if self.stage.ordered:
            self.out_q.append(item)
        b = self.b
        if (b is not None and len(waiting) < b and self.held < self.bound
                and (self.stage.batch_timeout is None or self.batch_timer_for is waiting[0])):
            # hot path: a partial batch that cannot go yet (its timer, if any, is armed): only pull
            if not self.has_been_pulled(self.in_):
                self.pull(self.in_)
            return
        self._progress()

    def on_pull(self) -> None:
        self.demanded = True
        q = self.out_q
        if (not q or q[0].value is _NOT_YET) and not self.is_closed(self.in_):
            # hot path: nothing to emit, nothing to dispatch anew: only pull
            if self.held < self.bound and not self.has_been_pulled(self.in_):
                self.pull(self.in_)
            return
        self._progress()

    def on_upstream_finish(self) -> None:
        self._progress()

    def on_downstream_finish(self, cause: BaseException) -> None:
        self.clean = True  # a cancel, not a failure
        super().on_downstream_finish(cause)

    def on_signal(self, signal) -> None:
        self.epochs.signal(self, signal)

    def on_timer(self, key: Any) -> None:
        if key == "batch":
            self.batch_timer_for = None
        elif key[0] == "ready":
            w = self.workers.get(key[1])
            if w is not None and w.state == _STARTING and not any(x.state == _READY for x in self.workers.values()):
                self._fail(PoolStartTimeoutError(
                    f"{self.stage.name_}: no pool worker was ready within {self.stage.ready_timeout} s "
                    f"(each worker asks for {self.stage.options})"))
                return
        elif key[0] == "idle":
            w = self.workers.get(key[1])
            if w is not None and w.state == _READY and not w.calls and self._alive() > self.min:
                self._remove_worker(w)
        self._progress()

    def _on_resize(self, n: int) -> None:
        if self.stopped:
            return
        self.min = self.max = n
        self.bound = n * self.mif * (self.b or 1)
        excess = self._alive() - n
        if excess > 0:
            # stop starting workers first, then idle ones, then the least busy; highest id first
            ws = sorted(self.workers.values(), key=lambda w: (w.state == _READY, len(w.calls), -w.wid))
            for w in ws[:excess]:
                self._remove_worker(w)
        self._progress()

    # ------------------------------------------------------------------ workers
    def _alive(self) -> int:
        return len(self.workers)

    def _start_worker(self) -> None:
        if self.stopped:
            return
        st = self.stage
        wid = self.next_wid
        self.next_wid += 1
        handle = self.prestarted.pop(0) if self.prestarted and self.use_ray else None
        if handle is not None and handle.actor is not None:
            w = _Worker(wid, handle, prestarted=True)
        else:  # no driver handle left (or one whose actor was never created: nothing to adopt)
            w = _Worker(wid, new_worker(st.factory, st.method, st.options, self.use_ray))
        self.workers[wid] = w
        self.schedule_once(("ready", wid), st.ready_timeout)
        fut = self.resolver.resolve(w.handle.start(), (w, None))
        if fut is not None:
            self._completed((w, None), fut)

    def _remove_worker(self, w: _Worker) -> None:
        """Stop ``w``; the elements of its calls go back to the front of the waiting queue, uncharged."""
        self.workers.pop(w.wid, None)
        w.state = _DEAD
        self.cancel_timer(("ready", w.wid))
        self.cancel_timer(("idle", w.wid))
        lost = []
        for call in w.calls:
            call.live = False
            lost.extend(call.items)
            self.in_flight -= len(call.items)
        w.calls = []
        self._requeue(lost)
        w.handle.kill()

    def _replace(self, w: _Worker) -> None:
        self._remove_worker(w)
        self.restarts += 1
        if self._alive() < self.max:
            self._start_worker()

    def _requeue(self, items: list) -> None:
        if items:
            items.sort(key=lambda i: i.seq)
            self.waiting.extendleft(reversed(items))

    def _free_worker(self) -> Optional[_Worker]:
        best = None
        for w in self.workers.values():
            if w.state == _READY and len(w.calls) < self.mif and (best is None or len(w.calls) < len(best.calls)):
                best = w
        return best

    # ------------------------------------------------------------------ completions
    def _completed(self, token, fut) -> None:
        w, call = token
        if self.stopped:
            return
        if call is None:
            self._ready_done(w, fut)
        elif call.live:
            self._call_done(call, fut)
        self._progress()

    def _ready_done(self, w: _Worker, fut) -> None:
        if w.state != _STARTING:
            return  # stopped meanwhile
        self.cancel_timer(("ready", w.wid))
        _, exc = outcome(fut)
        if exc is None:
            w.state = _READY
            self.init_failures = 0
            self._idle(w)
            return
        self.workers.pop(w.wid, None)
        w.state = _DEAD
        w.handle.kill()
        if w.prestarted and is_actor_death(exc):
            return  # the driver's actor is gone (e.g. killed by an earlier attempt): replaced, not a failed start
        self.init_failures += 1
        if self.init_failures >= MAX_INIT_FAILURES:
            self._fail(original_error(exc))

    def _call_done(self, call: _Call, fut) -> None:
        w = call.worker
        value, exc = outcome(fut)
        if exc is not None and is_actor_death(exc):
            self._worker_died(w, exc)
            return
        w.calls.remove(call)
        call.live = False
        items = call.items
        self.in_flight -= len(items)
        if exc is None:
            if call.refs is None:
                results = value
            else:
                results = [None if is_none else ref for ref, is_none in zip(call.refs, value)]
            for item, r in zip(items, results):
                self._done(item, r)
            self._idle(w)
            return
        exc = original_error(exc)
        retry = isinstance(exc, self.stage.retry_exceptions)
        again = [i for i in items if retry and i.retries < self.stage.max_retries]
        for i in again:
            i.retries += 1
        self._requeue(again)
        rest = [i for i in items if i not in again]
        if rest:
            d = decide(self.decider, exc)
            if d == Supervision.STOP:
                self._fail(exc)
                return
            log_resumed(self, self.stage.name_, exc)
            for i in rest:
                self._done(i, None)
            if d == Supervision.RESTART and w.state != _DEAD:
                self._replace(w)
                return
        self._idle(w)

    def _worker_died(self, w: _Worker, exc: BaseException) -> None:
        """``w`` is gone: the oldest call (the one running) is charged, every element goes back."""
        if w.state == _DEAD:
            return
        blamed = list(w.calls[0].items) if w.calls else []
        detail = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
        self._replace(w)  # requeues the elements of every call
        for item in blamed:
            item.deaths += 1
            if item.deaths <= self.stage.max_retries:
                continue
            err = PoolWorkerDiedError(item.seq, item.deaths, detail)
            d = decide(self.decider, err)
            if d == Supervision.STOP:
                self._fail(err)
                return
            log_resumed(self, self.stage.name_, err)
            self.waiting.remove(item)
            self._done(item, None)

    def _done(self, item: _Item, value: Any) -> None:
        item.value = value
        item.elem = None
        if not self.stage.ordered:
            (self.out_q if item.epoch is self.epochs.front else self.later).append(item)

    def _idle(self, w: _Worker) -> None:
        if (not w.calls and w.state == _READY and self.stage.idle_timeout is not None and self.min < self.max):
            self.schedule_once(("idle", w.wid), self.stage.idle_timeout)

    # ------------------------------------------------------------------ progress
    def _progress(self) -> None:
        """Dispatch, emit, pull and complete as far as possible (re-entrant calls are folded in)."""
        if self._progressing:
            self._again = True
            return
        self._progressing = True
        try:
            while not self.stopped:
                self._again = False
                self._dispatch()
                if self.stopped:
                    return
                if self.chunked:
                    self._emit_chunk()
                else:
                    self._emit()
                if not self._again:
                    break
        finally:
            self._progressing = False
        if self.stopped:
            return
        if self.is_closed(self.in_):
            if self.held == 0:
                self.stopped = True
                self.clean = True
                self.complete_stage()
                return
        elif self.demanded and self.held < self.bound and not self.has_been_pulled(self.in_):
            if self.chunked:
                self.pull_chunk(self.in_, self.bound - self.held)
            else:
                self.pull(self.in_)
        self._sync_control()

    def _batch_due(self) -> bool:
        """Whether the waiting elements may go now: a full batch, or a partial one that cannot grow
        (upstream finished, the stage holds ``parallelism`` elements) or whose oldest element has
        waited ``batch_timeout`` (never, without one)."""
        b = self.b
        if b is None or len(self.waiting) >= b:
            return True
        if self.is_closed(self.in_) or self.held >= self.bound:
            return True
        t = self.stage.batch_timeout
        return t is not None and self.interpreter.host.now() >= self.waiting[0].arrived + t - _EPS

    def _dispatch(self) -> None:
        waiting = self.waiting
        n = self.b or 1
        while waiting:
            if not self._batch_due():
                head = waiting[0]
                if self.batch_timer_for is not head and self.stage.batch_timeout is not None:
                    self.batch_timer_for = head
                    delay = head.arrived + self.stage.batch_timeout - self.interpreter.host.now()
                    self.schedule_once("batch", max(0.0, delay))
                break
            w = self._free_worker()
            if w is None:
                self._scale_up()
                break
            items = [waiting.popleft() for _ in range(min(n, len(waiting)))]
            self._send(w, items)
            if self.stopped:
                return
        if not waiting and self.batch_timer_for is not None:
            self.batch_timer_for = None
            self.cancel_timer("batch")
        while self._alive() < self.min and not self.stopped:
            self._start_worker()

    def _scale_up(self) -> None:
        calls_waiting = -(-len(self.waiting) // (self.b or 1))
        pending = sum(1 for w in self.workers.values() if w.state == _STARTING)
        need = -(-max(0, calls_waiting - pending * self.mif) // self.mif)
        for _ in range(min(need, self.max - self._alive())):
            if self.stopped:
                return
            self._start_worker()

    def _send(self, w: _Worker, items: list) -> None:
        call = _Call(w, items)
        w.calls.append(call)
        self.in_flight += len(items)
        self.cancel_timer(("idle", w.wid))
        try:
            status, call.refs = w.handle.call([i.elem for i in items], self.batched, self.fetch)
            fut = self.resolver.resolve(status, (w, call))
        except Exception as e:  # noqa: BLE001 - e.g. an element Ray cannot serialize: a failure of this call
            from concurrent.futures import Future

            fut = Future()
            fut.set_exception(e)
        if fut is not None:
            self._completed((w, call), fut)

    def _emit(self) -> None:
        q = self.out_q
        while q:
            item = q[0]
            if item.value is _NOT_YET:
                return
            if item.value is not None:
                if not self.is_available(self.out):
                    return
                self.push(self.out, item.value, item.ts)
            q.popleft()
            self.held -= 1
            self._left(item)

    def _left(self, item: _Item) -> None:
        """``item`` left the stage: the signals behind it may go; unordered, the results of the epoch
        that is now in front may go too."""
        epochs = self.epochs
        front = epochs.front
        epochs.leave(self, item.epoch)
        if self.later and epochs.front is not front:
            new_front = epochs.front
            self.out_q.extend(x for x in self.later if x.epoch is new_front)
            self.later = [x for x in self.later if x.epoch is not new_front]

    def _sync_control(self) -> None:
        c = self.control
        c._size = len(self.workers)
        c._in_flight = self.in_flight
        c._restarts = self.restarts
