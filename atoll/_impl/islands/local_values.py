"""What the driver holds of a recovering local graph's materialized values, so that a restart can rebind them.

A local graph that may restart (``local_recovery``) does not hand the user its stages' own objects: each attempt
creates new ones. The user gets, by the same rule as ``Materializer.ray()``'s exports: plain values as they are;
for a ``Future`` a driver promise of its own, completed (once) from the attempt that gets there (the graph forwards
it, ``LocalRecoveringGraph``); a shared kill switch as it is (it lives on the driver and every attempt's stage
listens to it); any other object (unique kill switch, probe, queue, statistics ...) as a ``LocalHandle``, a proxy
that forwards to the current attempt's object, waits while a restart replaces it, and is rebound to the next one.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any, Optional

from ...markers import Done, NotUsed
from ..ops.kill_switch import KillSwitch, SharedKillSwitch

_PLAIN = (type(None), bool, int, float, str, bytes)

#: what ``classify`` says a materialized value is
PLAIN, FUTURE, HANDLE = 0, 1, 2


def classify(value: Any) -> int:
    """``PLAIN`` (the user gets the value itself), ``FUTURE`` (a driver promise) or ``HANDLE`` (a proxy)."""
    if value is NotUsed or value is Done or type(value) in _PLAIN or isinstance(value, SharedKillSwitch):
        return PLAIN
    if isinstance(value, Future):
        return FUTURE
    return HANDLE


def handle_for(value: Any) -> "LocalHandle":
    """The proxy of an object of attempt 0."""
    return LocalKillSwitch(value) if isinstance(value, KillSwitch) else LocalHandle(value)


class LocalHandle:
    """Proxy of a stage's materialized object in a recovering local graph: attribute reads and method calls go to
    the current attempt's object (a method returning its object returns the proxy). While a restart replaces the
    object, calls wait for ``_rebind`` (at most ``RECOVERY_WAIT`` seconds, then they reach the old object)."""

    RECOVERY_WAIT = 120.0

    def __init__(self, target: Any):
        object.__setattr__(self, "_target", target)
        live = threading.Event()
        live.set()
        object.__setattr__(self, "_live", live)

    def __repr__(self):
        return f"Local{type(self._target).__name__}"

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        live = self._live
        if not live.is_set():
            live.wait(self.RECOVERY_WAIT)
        target = self._target
        attr = getattr(target, name)
        if not callable(attr):
            return attr
        proxy = self

        def call(*args, **kwargs):
            result = attr(*args, **kwargs)
            return proxy if result is target else result

        return call

    def _suspend(self) -> None:
        """A restart is replacing the object: calls wait for ``_rebind``."""
        self._live.clear()

    def _rebind(self, target: Any) -> None:
        """The next attempt's object answers from now on."""
        object.__setattr__(self, "_target", target)
        self._live.set()

    def _detached(self) -> None:
        """The graph ended for good: calls go to the last object, without waiting."""
        self._live.set()


class LocalKillSwitch(LocalHandle, KillSwitch):
    """A unique kill switch of a recovering local graph. The first command is remembered: a restart re-applies it
    to the next attempt's switch, and an ``abort`` keeps the graph from restarting at all (as on Ray)."""

    def __init__(self, target: Any):
        super().__init__(target)
        object.__setattr__(self, "_command", None)  # ("shutdown",) or ("abort", exc): the first one issued

    def shutdown(self) -> None:
        if self._command is None:
            object.__setattr__(self, "_command", ("shutdown",))
        self._apply()

    def abort(self, exc: BaseException) -> None:
        if not isinstance(exc, BaseException):
            raise TypeError(f"abort: expected an exception, got {exc!r}")
        if self._command is None:
            object.__setattr__(self, "_command", ("abort", exc))
        self._apply()

    def _apply(self) -> None:
        if not self._live.is_set():
            return  # restarting: ``_rebind`` applies the command to the next attempt's switch
        command = self._command
        if command[0] == "shutdown":
            self._target.shutdown()
        else:
            self._target.abort(command[1])

    def _rebind(self, target: Any) -> None:
        super()._rebind(target)
        if self._command is not None:
            self._apply()

    @property
    def aborted(self) -> bool:
        """``abort`` was called (a graph whose switch aborted does not restart)."""
        return self._command is not None and self._command[0] == "abort"

    @property
    def abort_cause(self) -> Optional[BaseException]:
        """The exception ``abort`` was given (None: not aborted)."""
        return self._command[1] if self.aborted else None

    @property
    def command(self) -> Optional[tuple]:
        return self._command
