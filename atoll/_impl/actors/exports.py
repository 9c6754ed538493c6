"""Materialized values of stages living in island actors, as seen from the driver.

In the actor, ``ExportTable.export`` turns each stage's materialized value into something picklable:
plain values travel as they are; a ``concurrent.futures.Future`` becomes an id whose outcome the actor
reports through its ``poll`` events; any other object (kill switch, cancellable, test probe, queue ...)
stays in the actor and is exported as a handle. On the driver, ``RemoteHandle`` forwards method calls
to the object in the actor (from the driver or any other Ray task/actor: it pickles) and returns the
original result or raises the original exception.
"""
from __future__ import annotations

import itertools
import threading
from concurrent.futures import Future
from typing import Any, Callable, Dict, Optional

from ...errors import StreamDetachedError
from ...markers import Done, NotUsed
from ..ops.kill_switch import KillSwitch
from .messages import CallResult, Detached, Raised, Returned, ReturnedSelf
from ..._portable import portable_exception

_PLAIN = (type(None), bool, int, float, str, bytes)


class ExportedFuture:
    __slots__ = ("fid",)

    def __init__(self, fid: int):
        self.fid = fid


class ExportedHandle:
    __slots__ = ("actor", "hid", "type_name", "island", "is_kill_switch", "fields")

    def __init__(self, actor, hid: int, type_name: str, island: str, is_kill_switch: bool, fields=()):
        self.actor = actor
        self.hid = hid
        self.type_name = type_name
        self.island = island
        self.is_kill_switch = is_kill_switch
        #: data attributes the proxy reads from the object (``__atoll_remote_fields__``), e.g. live counters
        self.fields = fields


class ExportTable:
    """Actor side: the futures and handles of the island's materialized values.

    When the island ends, ``detach`` takes a final copy of every handle that offers one
    (``__atoll_detach__``, e.g. test probes with events not consumed yet); the copies travel to
    the driver with the island's end event, and later calls on the proxies run on those copies, so
    nothing needs the actor after its island ended. Calls that arrive after ``detach`` answer
    ``Detached()`` and are retried by the proxy on the copy."""

    def __init__(self):
        self._ids = itertools.count()
        self.handles: Dict[int, Any] = {}
        self.on_future_done: Optional[Callable[[int, Future], None]] = None
        self._lock = threading.Lock()
        self._detached = False

    def reset(self) -> None:
        """Forget the ended island's handles (the actor is lent to another graph); ids keep counting, so a
        late call for an old handle never reaches a new one."""
        with self._lock:
            self.handles = {}
            self._detached = False

    def detach(self) -> Dict[int, Any]:
        with self._lock:
            self._detached = True
            copies = {}
            for hid, obj in self.handles.items():
                fn = getattr(obj, "__atoll_detach__", None)
                if fn is not None:
                    copies[hid] = fn()
            return copies

    def export(self, value: Any, actor, island: str) -> Any:
        if value is NotUsed or value is Done or type(value) in _PLAIN:
            return value
        if isinstance(value, Future):
            fid = next(self._ids)
            value.add_done_callback(lambda f, fid=fid: self.on_future_done(fid, f))
            return ExportedFuture(fid)
        hid = next(self._ids)
        self.handles[hid] = value
        return ExportedHandle(actor, hid, type(value).__name__, island, isinstance(value, KillSwitch),
                              tuple(getattr(type(value), "__atoll_remote_fields__", ())))

    def call(self, hid: int, method: str, args, kwargs) -> CallResult:
        """Call ``method`` on handle ``hid``; the outcome as a typed result for the driver's proxy."""
        with self._lock:
            obj = self.handles.get(hid)
            if self._detached or obj is None:
                return Detached()  # (an unknown id: a handle of an earlier island of this reused actor)
            try:
                result = getattr(obj, method)(*args, **kwargs)
            except BaseException as e:  # noqa: BLE001 - the caller gets the original exception
                return Raised(portable_exception(e))
            if result is obj:
                return ReturnedSelf()
            return Returned(result)


class RemoteHandle:
    """Driver-side proxy of an object living in an island actor: call its methods as usual, and read
    the data attributes its class lists in ``__atoll_remote_fields__`` (each read asks the actor: a
    live value). After the island ended, calls and reads go to the object's final copy if it left one."""

    DETACH_WAIT = 10.0
    #: how long a call waits for a recovering graph to bind the handle to its new island actor
    RECOVERY_WAIT = 120.0

    def __init__(self, exported: ExportedHandle):
        self._x = exported
        self._copy = None
        self._copy_ready = threading.Event()
        self._live = threading.Event()  # cleared while recovery replaces the island's actor
        self._live.set()

    def __repr__(self):
        return f"Remote{self._x.type_name}(island={self._x.island})"

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._x.fields:
            return self._call("__getattribute__", (name,), {})
        return lambda *args, **kwargs: self._call(name, args, kwargs)

    def __reduce__(self):
        return (_rebuild_handle, (self._x, self._copy))

    def _detached(self, copy) -> None:
        """The island ended; ``copy`` (or None) answers from now on (called by the graph monitor)."""
        self._copy = copy
        self._copy_ready.set()
        self._live.set()

    def _suspend(self) -> None:
        """Recovery is replacing the island's actor: calls wait for ``_rebind``."""
        self._live.clear()

    def _rebind(self, exported: ExportedHandle) -> None:
        """Recovery started the island again: the same object now lives in the new actor as ``exported``."""
        self._x = exported
        self._live.set()

    def _call_copy(self, method: str, args, kwargs):
        x = self._x
        if self._copy is None:
            raise StreamDetachedError(f"{x.type_name} of island {x.island!r}: the island has stopped")
        result = getattr(self._copy, method)(*args, **kwargs)
        return self if result is self._copy else result

    def _call(self, method: str, args, kwargs):
        import ray
        from ray.exceptions import RayActorError

        if not self._live.is_set():
            self._live.wait(self.RECOVERY_WAIT)
        x = self._x
        if self._copy_ready.is_set():
            return self._call_copy(method, args, kwargs)
        try:
            result: CallResult = ray.get(x.actor.call_handle.remote(x.hid, method, args, kwargs))
        except RayActorError:
            result = Detached()
        match result:
            case Returned(value=value):
                return value
            case ReturnedSelf():
                return self
            case Raised(error=error):
                raise error
            case Detached():
                self._copy_ready.wait(self.DETACH_WAIT)
                return self._call_copy(method, args, kwargs)
        raise TypeError(f"{self!r}.{method}: unexpected call result {result!r}")


def _rebuild_handle(exported, copy):
    h = RemoteKillSwitch(exported) if exported.is_kill_switch else RemoteHandle(exported)
    if copy is not None:
        h._detached(copy)
    return h


class RemoteKillSwitch(RemoteHandle, KillSwitch):
    """A kill switch in an island actor. Using it after its island stopped does nothing (as Pekko). The first
    command is remembered: a graph that recovers re-applies it to the island's new actor (Pekko's switches also
    act once), and an ``abort`` stops the graph from recovering at all."""

    def __init__(self, exported: ExportedHandle):
        super().__init__(exported)
        self._command: Optional[tuple] = None  # ("shutdown",) or ("abort", exc): the first one issued

    def shutdown(self) -> None:
        if self._command is None:
            self._command = ("shutdown",)
        self._apply("shutdown", ())

    def abort(self, exc: BaseException) -> None:
        if not isinstance(exc, BaseException):
            raise TypeError(f"abort: expected an exception, got {exc!r}")
        if self._command is None:
            self._command = ("abort", exc)
        self._apply("abort", (exc,))

    def _apply(self, method: str, args: tuple) -> None:
        if not self._live.is_set():
            return  # recovering: ``_rebind`` re-applies the command to the new actor
        try:
            self._call(method, args, {})
        except StreamDetachedError:
            pass

    def _rebind(self, exported: ExportedHandle) -> None:
        super()._rebind(exported)
        if self._command is not None:
            self._apply(self._command[0], self._command[1:])

    @property
    def aborted(self) -> bool:
        """``abort`` was called (a graph whose switch aborted does not recover)."""
        return self._command is not None and self._command[0] == "abort"

    @property
    def abort_cause(self) -> Optional[BaseException]:
        """The exception ``abort`` was given (None: not aborted)."""
        return self._command[1] if self.aborted else None


def import_value(value: Any, future_for: Callable[[ExportedFuture], Future]) -> Any:
    """Driver side: the usable form of an exported value."""
    if type(value) is ExportedFuture:
        return future_for(value)
    if type(value) is ExportedHandle:
        return RemoteKillSwitch(value) if value.is_kill_switch else RemoteHandle(value)
    return value
