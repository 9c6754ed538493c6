"""Restart and retry with backoff: ``RestartSettings``, ``RestartSource``, ``RestartFlow``, ``RestartSink``
(Pekko's ``scaladsl.RestartSource``/``RestartFlow``/``RestartSink``) and ``RetryFlow``."""
from __future__ import annotations

from typing import Any, Callable

from .._impl.ops.restart import (
    RestartSettings,
    RestartWithBackoffFlow,
    RestartWithBackoffSink,
    RestartWithBackoffSource,
)
from .flow import Flow
from .sink import Sink
from .source import Source

__all__ = ["RestartSettings", "RestartSource", "RestartFlow", "RestartSink", "RetryFlow"]


def _factory(factory: Callable[[], Any], wrap: Callable[[Any], Any]) -> Callable[[], Any]:
    if not callable(factory):
        return factory  # the stage names the bad argument
    return lambda: wrap(factory())


class RestartSource:
    """A Source that runs the Source ``factory()`` returns again, with exponential backoff, when it
    ends (Pekko's ``RestartSource``). Materializes ``NotUsed``: the wrapped source's materialized value is
    not reachable (it changes with every restart)."""

    @staticmethod
    def with_backoff(settings: RestartSettings, factory: Callable[[], Any]) -> Source:
        """Restart when the wrapped source completes or fails (unless ``settings`` say no more)."""
        return Source.from_graph(RestartWithBackoffSource(settings, _factory(factory, Source.from_graph)))

    @staticmethod
    def on_failures_with_backoff(settings: RestartSettings, factory: Callable[[], Any]) -> Source:
        """Restart only when the wrapped source fails; its completion completes this one."""
        return Source.from_graph(RestartWithBackoffSource(settings, _factory(factory, Source.from_graph),
                                                          only_on_failures=True))


class RestartFlow:
    """A Flow that runs the Flow ``factory()`` returns again, with exponential backoff, when it completes,
    fails or cancels (Pekko's ``RestartFlow``). Restarts are lossy: elements in flight are lost."""

    @staticmethod
    def with_backoff(settings: RestartSettings, factory: Callable[[], Any], cancellation_delay: float = 0.05) -> Flow:
        """Restart when the wrapped flow completes, fails or cancels its upstream."""
        return Flow.from_graph(RestartWithBackoffFlow(settings, _factory(factory, Flow.from_graph),
                                                      cancellation_delay=cancellation_delay))

    @staticmethod
    def on_failures_with_backoff(settings: RestartSettings, factory: Callable[[], Any],
                                 cancellation_delay: float = 0.05) -> Flow:
        """Restart only when the wrapped flow fails."""
        return Flow.from_graph(RestartWithBackoffFlow(settings, _factory(factory, Flow.from_graph),
                                                      only_on_failures=True, cancellation_delay=cancellation_delay))


class RestartSink:
    """A Sink that runs the Sink ``factory()`` returns again, with exponential backoff, when it cancels
    (Pekko's ``RestartSink``); upstream completion or failure ends it."""

    @staticmethod
    def with_backoff(settings: RestartSettings, factory: Callable[[], Any]) -> Sink:
        """Restart when the wrapped sink cancels."""
        return Sink.from_graph(RestartWithBackoffSink(settings, _factory(factory, Sink.from_graph)))


class RetryFlow:
    """Retries elements through a flow with backoff (Pekko's ``RetryFlow``)."""

    @staticmethod
    def with_backoff(min_backoff: float, max_backoff: float, random_factor: float, max_retries: int, flow: Any,
                     decide_retry: Callable[[Any, Any], Any], rng: Any = None) -> Flow:
        """``flow`` (one output per input, one element inside at a time) wrapped so that
        ``decide_retry(in, out)`` returning an input (not ``None``) sends that input through ``flow`` again
        after ``min(max_backoff, min_backoff * 2**n) * (1 + random * random_factor)`` seconds, at most
        ``max_retries`` times; materializes ``flow``'s value. ``rng`` (a ``random.Random``) draws the jitter."""
        from .._impl.ops.retry_flow import RetryFlowCoordinator
        from .bidi_flow import BidiFlow
        from .keep import Keep

        coordinator = RetryFlowCoordinator(min_backoff, max_backoff, random_factor, max_retries, decide_retry, rng)
        shape = getattr(flow, "shape", None)
        if shape is None or len(shape.inlets) != 1 or len(shape.outlets) != 1:
            raise TypeError(f"RetryFlow.with_backoff: flow must be a Flow, got {flow!r}")
        return BidiFlow.from_graph(coordinator).join(Flow.from_graph(flow), Keep.right)
