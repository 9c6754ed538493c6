"""Helpers for the async operator tests (a kit, no tests; named ``test_map_async_*`` to sit with the modules that
use it): a recording function whose futures the test completes (Pekko's
``Promise``\\ s), so completion order is chosen by the test and never by sleeping."""
from __future__ import annotations

import asyncio
import queue
import threading
from concurrent.futures import Future
from typing import Any

_SAME = object()


def done(value: Any) -> Future:
    """An already completed future (Pekko's ``Future.successful``)."""
    f: Future = Future()
    f.set_result(value)
    return f


def failed(exc: BaseException) -> Future:
    """An already failed future (Pekko's ``Future.failed``)."""
    f: Future = Future()
    f.set_exception(exc)
    return f


class Calls:
    """A function for the async operators: each call ``fn(x)`` (or ``fn(x, part)``) is recorded and
    returns a fresh ``Future`` that the test completes with ``complete(x)`` / ``fail(x, exc)``."""

    def __init__(self, key=lambda *args: args[0]):
        self.key = key
        self.q: "queue.Queue" = queue.Queue()
        self.futures: dict = {}
        self.seen: list = []
        self.lock = threading.Lock()

    def __call__(self, *args):
        f: Future = Future()
        k = self.key(*args)
        with self.lock:
            self.futures[k] = f
        self.q.put(k)
        return f

    def wait_for(self, *keys, timeout: float = 3.0) -> list:
        """Wait until ``fn`` was called for every key; returns the calls seen so far, in call order."""
        want = set(keys)
        while not want <= set(self.seen):
            try:
                self.seen.append(self.q.get(timeout=timeout))
            except queue.Empty:
                raise AssertionError(f"fn was not called for {sorted(want - set(self.seen))} (calls: {self.seen})") from None
        return list(self.seen)

    def expect_no_call(self, seconds: float = 0.1) -> None:
        try:
            k = self.q.get(timeout=seconds)
        except queue.Empty:
            return
        raise AssertionError(f"unexpected call of fn for {k!r} (calls before: {self.seen})")

    def complete(self, key, value: Any = _SAME) -> None:
        with self.lock:
            f = self.futures[key]
        f.set_result(key if value is _SAME else value)

    def fail(self, key, exc: BaseException) -> None:
        with self.lock:
            f = self.futures[key]
        f.set_exception(exc)


class Gate:
    """An asyncio-side gate: coroutines ``await gate.wait(key)`` until the test calls ``gate.open(key)``.
    The events are created on the loop that awaits them."""

    def __init__(self):
        self.lock = threading.Lock()
        self.events: dict = {}
        self.opened: set = set()
        self.cancelled: "queue.Queue" = queue.Queue()

    async def wait(self, key) -> None:
        loop = asyncio.get_running_loop()
        with self.lock:
            ev = self.events.setdefault(key, (asyncio.Event(), loop))[0]
            if key in self.opened:
                ev.set()
        try:
            await ev.wait()
        except asyncio.CancelledError:
            self.cancelled.put(key)
            raise

    def open(self, key) -> None:
        with self.lock:
            self.opened.add(key)
            entry = self.events.get(key)
        if entry is not None:
            ev, loop = entry
            loop.call_soon_threadsafe(ev.set)
