"""``Source.unfold_async`` and ``Source.unfold_resource_async``: Pekko's ``UnfoldAsync``
(``impl/Unfold.scala``) and ``UnfoldResourceAsyncSource``.

The user functions return an awaitable, a ``concurrent.futures.Future`` or a ``ray.ObjectRef`` (see
:mod:`.async_loop`); their completions come back to the stage on its island thread.
"""
from __future__ import annotations

from typing import Any, Callable

from ...stage.handlers import OutHandler
from ...stage.logic import GraphStageLogic
from ...stage.supervision import Supervision, decide
from .async_loop import Resolver, outcome, run_detached
from .async_map import log_resumed
from .base import SourceStage, decider_of, require_callable, snapshot_copy


class UnfoldAsync(SourceStage):
    """Pekko's ``unfoldAsync``: at each pull, ``fn(state)`` gives (asynchronously) ``(next_state, elem)``
    to emit ``elem``, or ``None`` to complete. ``fn`` runs once per pull, never ahead of demand, from
    ``state`` again in every materialization.

    **Emits when** downstream pulls and the result of ``fn`` arrives as a pair. **Completes when** it
    arrives as ``None``. **Fails when** ``fn`` raises or its result fails (no supervision, as Pekko)."""

    op = "Source.unfold_async"

    def __init__(self, state: Any, fn: Callable[[Any], Any]):
        require_callable(self.op, "fn", fn)
        super().__init__("unfold_async")
        self.state = state
        self.fn = fn

    def create_logic(self, attributes):
        return _UnfoldAsyncLogic(self)


class _UnfoldAsyncLogic(GraphStageLogic, OutHandler):
    op = "Source.unfold_async"

    def __init__(self, stage: UnfoldAsync):
        super().__init__(stage.shape)
        self.out = stage.out
        self.fn = stage.fn
        self.state = stage.state
        self.set_handler(stage.out, self)
        self.resolver = Resolver(self, self.op, self._completed)

    busy = False  # a call of fn is in flight

    # checkpoint state: the unfold state (a copy: the next call starts from it); the cut waits for a call
    # in flight, which ends by itself
    def save_to_snapshot(self):
        return snapshot_copy(self.state)

    def restore_from_snapshot(self, state) -> None:
        self.state = state

    def ready_for_snapshot(self) -> bool:
        return not self.busy

    def on_pull(self) -> None:
        self.busy = True
        fut = self.resolver.resolve(self.fn(self.state), None)  # raising fails the stage
        if fut is not None:
            self._completed(None, fut)

    def _completed(self, _token, fut) -> None:
        self.busy = False
        value, exc = outcome(fut)
        if exc is not None:
            self.fail_stage(exc)
            return
        if value is None:
            self.complete(self.out)
            return
        try:
            state, elem = value
        except (TypeError, ValueError):
            self.fail_stage(TypeError(f"{self.op}: fn must give (next_state, element) or None, got {value!r}"))
            return
        self.state = state
        self.push(self.out, elem)

    def post_stop(self) -> None:
        self.resolver.stop()


class UnfoldResourceAsync(SourceStage):
    """Pekko's ``unfoldResourceAsync``: ``create()`` opens a resource (asynchronously), then each pull
    reads ``read(resource)``: an element, or ``None`` at the end, when ``close(resource)`` runs and the
    stream completes once it has finished. All three return an awaitable, a Future or an ObjectRef.

    The resource is closed exactly once: at the end of the data, on Restart, or when the stream stops
    for any other reason (downstream cancels, a failure) - then ``close`` is started without waiting
    for it. A resource created after the stage stopped is closed at once.

    **Emits when** downstream pulls and ``read`` gives an element. **Completes when** ``read`` gives
    ``None`` and ``close`` finished. **Fails when** ``create`` or ``close`` fails (not supervised), or
    ``read`` fails and the decider says Stop. Supervision of ``read``: Resume reads again from the same
    resource, Restart closes it (waiting for ``close``) and creates a new one."""

    op = "Source.unfold_resource_async"

    def __init__(self, create: Callable[[], Any], read: Callable[[Any], Any], close: Callable[[Any], Any]):
        require_callable(self.op, "create", create)
        require_callable(self.op, "read", read)
        require_callable(self.op, "close", close)
        super().__init__("unfold_resource_async")
        self.create = create
        self.read = read
        self.close = close

    def create_logic(self, attributes):
        return _UnfoldResourceAsyncLogic(self, decider_of(attributes))


_CREATED, _READ, _CLOSED, _RESTART_CLOSED = "created", "read", "closed", "restart_closed"
_NONE = object()


class _UnfoldResourceAsyncLogic(GraphStageLogic, OutHandler):
    checkpoint_hint = ("an open resource's read position cannot be saved; use Source.unfold_async with a "
                       "picklable state that reopens the resource at its position")
    op = "Source.unfold_resource_async"

    def __init__(self, stage: UnfoldResourceAsync, decider):
        super().__init__(stage.shape)
        self.out = stage.out
        self.create = stage.create
        self.read = stage.read
        self.close = stage.close
        self.decider = decider
        self.resource = _NONE  # the open resource (None is a legal resource)
        self.reading = False
        self.creating = None  # the future of a create not handled yet
        self.read_fut = None  # the future of the read in flight
        self.set_handler(stage.out, self)
        self.resolver = Resolver(self, self.op, self._completed)

    def pre_start(self) -> None:
        self._create()

    def _create(self) -> None:
        try:
            fut = self.resolver.resolve(self.create(), _CREATED)
        except Exception as e:  # noqa: BLE001 - create raising fails the stream (not supervised)
            self.fail_stage(e)
            return
        self.creating = self.resolver.last
        if fut is not None:
            self._completed(_CREATED, fut)

    def _close(self, kind: str) -> None:
        resource, self.resource = self.resource, _NONE
        try:
            fut = self.resolver.resolve(self.close(resource), kind)
        except Exception as e:  # noqa: BLE001 - close raising fails the stream (not supervised)
            self.fail_stage(e)
            return
        if fut is not None:
            self._completed(kind, fut)

    def on_pull(self) -> None:
        if self.resource is _NONE or self.reading:
            return  # the read starts once the resource is there (creating, restarting or closing)
        self.reading = True
        try:
            fut = self.resolver.resolve(self.read(self.resource), _READ)
            self.read_fut = self.resolver.last
        except Exception as e:  # noqa: BLE001 - read raised: supervised like a failed read
            self._read_failed(e)
            return
        if fut is not None:
            self._completed(_READ, fut)

    def _completed(self, kind: str, fut) -> None:
        value, exc = outcome(fut)
        if kind is _READ:
            self.reading = False
            self.read_fut = None
            if exc is not None:
                self._read_failed(exc)
            elif value is None:
                self._close(_CLOSED)  # end of the data: close, then complete
            else:
                self.push(self.out, value)
        elif kind is _CREATED:
            self.creating = None
            if exc is not None:
                self.fail_stage(exc)
                return
            self.resource = value
            if self.is_available(self.out):
                self.on_pull()
        elif exc is not None:  # a close failed
            self.fail_stage(exc)
        elif kind is _CLOSED:
            self.complete_stage()
        else:  # closed for a restart
            self._create()

    def _read_failed(self, exc: BaseException) -> None:
        self.reading = False
        d = decide(self.decider, exc)
        if d == Supervision.STOP:
            self.fail_stage(exc)
            return
        log_resumed(self, self.op, exc)
        if d == Supervision.RESTART:
            self._close(_RESTART_CLOSED)
        else:
            self.on_pull()

    def post_stop(self) -> None:
        resolver = self.resolver
        close = self.close
        if self.resource is not _NONE:
            resource, self.resource = self.resource, _NONE
            try:
                if self.reading and self.read_fut is not None:
                    # Pekko: a read in flight is waited for before the resource is closed
                    resolver.detach(self.read_fut, lambda _v, r=resource: close(r), always=True)
                else:
                    run_detached(close(resource))
            except Exception:  # noqa: BLE001 - the stream has ended; nothing to report a failed close to
                pass
        if self.creating is not None:
            # a create still running (or done, its result not handled yet): close what it makes
            resolver.detach(self.creating, close)
            self.creating = None
        resolver.stop()
