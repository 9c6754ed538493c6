"""Kill switches: stop a running stream from outside (Pekko's ``KillSwitches``).

``shutdown()`` completes downstream and cancels upstream; ``abort(exc)`` fails downstream with
``exc`` and cancels upstream. Only the first call of either has an effect. The switch stage itself
is a pass-through that neither buffers nor changes backpressure.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Optional, Union

from ...errors import StageWasCompleted
from .base import ChunkFlow, FlowLogic, FlowStage


@dataclass(frozen=True, slots=True)
class Shutdown:
    """What ``shutdown()`` triggers: complete downstream, cancel upstream."""


@dataclass(frozen=True, slots=True)
class Abort:
    """What ``abort(cause)`` triggers: fail downstream with ``cause``, cancel upstream."""

    cause: BaseException


#: the command a switch was triggered with (it reaches the switch stages, and the copies of a shared
#: switch in island actors)
SwitchCommand = Union[Shutdown, Abort]


class KillSwitch:
    """Interface of both switch kinds."""

    def shutdown(self) -> None:
        raise TypeError("abstract")

    def abort(self, exc: BaseException) -> None:
        raise TypeError("abstract")


class _Signal:
    """First-call-wins termination signal with listeners (thread-safe)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.result: Optional[SwitchCommand] = None
        self._listeners: dict = {}
        self._next = 0

    def trigger(self, result: SwitchCommand) -> bool:
        with self._lock:
            if self.result is not None:
                return False
            self.result = result
            listeners = list(self._listeners.values())
        for cb in listeners:
            cb(result)
        return True

    def add(self, cb) -> Optional[int]:
        """Register ``cb``; returns a key, or None if already triggered (then act on ``result``)."""
        with self._lock:
            if self.result is not None:
                return None
            key = self._next
            self._next += 1
            self._listeners[key] = cb
            return key

    def remove(self, key) -> None:
        with self._lock:
            self._listeners.pop(key, None)


def _check_exc(exc) -> None:
    if not isinstance(exc, BaseException):
        raise TypeError(f"abort: expected an exception, got {exc!r}")


class UniqueKillSwitch(KillSwitch):
    """Controls the one stream it was materialized in."""

    def __init__(self):
        self._signal = _Signal()

    def shutdown(self) -> None:
        """Complete downstream and cancel upstream (ignored if the switch was already used)."""
        self._signal.trigger(Shutdown())

    def abort(self, exc: BaseException) -> None:
        """Fail downstream with ``exc`` and cancel upstream (ignored if the switch was already used)."""
        _check_exc(exc)
        self._signal.trigger(Abort(exc))

    def __repr__(self):
        return "UniqueKillSwitch"


class SharedKillSwitch(KillSwitch):
    """Controls every stream that includes one of its ``flow()`` stages, including streams
    materialized after it was triggered (they stop immediately)."""

    def __init__(self, name: str):
        if not isinstance(name, str):
            raise TypeError(f"KillSwitches.shared: argument 'name' must be a string, got {name!r}")
        if not name:
            raise ValueError("KillSwitches.shared: argument 'name' must not be empty")
        self.name = name
        self._signal = _Signal()

    def shutdown(self) -> None:
        self._signal.trigger(Shutdown())

    def abort(self, exc: BaseException) -> None:
        _check_exc(exc)
        self._signal.trigger(Abort(exc))

    def __reduce__(self):
        # a copy in another process (an island actor) starts in the same state; the Ray
        # materializer links the driver's switch to the copies in the islands it starts
        return (_restore_shared, (self.name, self._signal.result))

    def flow(self):
        """A pass-through Flow controlled by this switch; it materializes the switch itself."""
        from ...dsl.flow import Flow

        return Flow.from_graph(KillSwitchStage(self, f"kill_switch.{self.name}"))

    def __repr__(self):
        return f"SharedKillSwitch({self.name})"


def _restore_shared(name: str, result: Optional[SwitchCommand]) -> "SharedKillSwitch":
    switch = SharedKillSwitch(name)
    switch._signal.result = result
    return switch


class KillSwitchStage(FlowStage):
    """The pass-through stage behind both switch kinds.

    **Emits when** upstream emits. **Backpressures when** downstream backpressures.
    **Completes when** upstream completes or the switch is shut down. **Fails when** upstream fails
    or the switch is aborted. **Cancels when** downstream cancels or the switch is used."""

    def __init__(self, shared: Optional[SharedKillSwitch] = None, name: str = "kill_switch"):
        super().__init__(name)
        self.shared = shared

    def create_logic_and_materialized_value(self, attributes):
        switch = self.shared if self.shared is not None else UniqueKillSwitch()
        return _KillSwitchLogic(self, switch._signal), switch


class _KillSwitchLogic(ChunkFlow, FlowLogic):
    stateless = True  # the switch itself is a materialized value, not stage state
    """Pass-through; the switch's command arrives as an async callback, between two interpreter
    events, so it never falls inside a chunk: what was pushed on before it is delivered first (the
    interpreter delivers a pending push before the close), what upstream has pushed but this stage
    has not handled yet is dropped with the cancellation, as in the element form.

    Chunk form: a pull asks upstream for what downstream accepts, a chunk is pushed on unchanged."""

    def __init__(self, stage: KillSwitchStage, signal: _Signal):
        super().__init__(stage)
        self.signal = signal
        self.key = None  # our listener in ``signal`` while the stage runs

    def pre_start(self):
        cb = self.get_async_callback(self._on_switch)
        self.key = self.signal.add(cb.invoke)
        if self.key is None:
            self._on_switch(self.signal.result)

    def _on_switch(self, command: SwitchCommand) -> None:
        if isinstance(command, Shutdown):
            self.complete_stage()
        else:
            self.fail_stage(command.cause)

    def on_push(self):
        self.push(self.out, self.grab(self.in_))

    def on_push_chunk(self):
        self.push(self.out, self.grab(self.in_))  # at most the demand downstream asked for

    def post_stop(self):
        if self.key is not None:
            self.signal.remove(self.key)
            self.key = None


class KillSwitches:
    """Factories of kill switches."""

    @staticmethod
    def single():
        """A pass-through Flow materializing a ``UniqueKillSwitch``."""
        from ...dsl.flow import Flow

        return Flow.from_graph(KillSwitchStage())

    @staticmethod
    def shared(name: str) -> SharedKillSwitch:
        """A ``SharedKillSwitch``; put ``switch.flow()`` into every stream it should control."""
        return SharedKillSwitch(name)


__all__ = ["KillSwitch", "UniqueKillSwitch", "SharedKillSwitch", "KillSwitches", "KillSwitchStage", "StageWasCompleted"]
