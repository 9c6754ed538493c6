"""Exceptions of Atoll, named after Pekko's with the ``Error`` suffix.

Stream failures travel as these (or any user exception) from the failing stage downstream, and as
cancellation causes upstream; the driver's futures raise the original exception object.
"""
from __future__ import annotations


class StreamError(Exception):
    """Base class of the errors Atoll itself raises while running a stream."""


class BufferOverflowError(StreamError):
    """A ``buffer(..., OverflowStrategy.fail)`` received an element while full."""


class StreamLimitReachedError(StreamError):
    """``limit(n)`` saw more than ``n`` elements."""

    def __init__(self, n: int):
        super().__init__(f"limit of {n} reached")
        self.n = n

    def __reduce__(self):
        return (type(self), (self.n,))


class AbruptStageTerminationError(StreamError):
    """A stage was stopped before it had completed or failed (its island was torn down)."""


def abrupt_termination(logic) -> AbruptStageTerminationError:
    """The error a stage's pending result fails with when the stage is stopped before finishing."""
    return AbruptStageTerminationError(f"stage {logic} was stopped before it finished (its island was torn down)")


class AbruptTerminationError(StreamError):
    """The island hosting a stream stopped while the stream was still running."""


class StreamDetachedError(StreamError):
    """An async callback or queue was used after its stage had stopped."""


class NeverMaterializedError(StreamError):
    """A value depending on materialization was asked for, but the stream never materialized."""


class MaterializationError(StreamError):
    """Building the running stream from a blueprint failed."""


class NoSuchElementError(StreamError, LookupError):
    """``Sink.head``/``Sink.last``/``Sink.reduce`` over an empty stream."""


class IllegalStateError(StreamError):
    """A call that is not allowed in the current state (e.g. materializing on a shut-down materializer)."""


class PortStateError(StreamError, ValueError):
    """A stage broke the port rules (push without demand, double pull, grab with nothing available)."""


class SpecViolationError(StreamError):
    """A Reactive Streams rule was broken on a channel (e.g. request(n) with n < 1)."""


class ProtocolError(StreamError):
    """A channel frame or demand signal arrived out of sequence (gap or duplicate)."""


class StreamTimeoutError(StreamError, TimeoutError):
    """Base class of the stream timeouts."""


class InitialTimeoutError(StreamTimeoutError):
    """The first element did not arrive in time."""


class CompletionTimeoutError(StreamTimeoutError):
    """The stream did not complete in time."""


class StreamIdleTimeoutError(StreamTimeoutError):
    """No element passed for the configured idle time."""


class BackpressureTimeoutError(StreamTimeoutError):
    """Downstream did not signal demand in time."""


class SubscriptionTimeoutError(StreamTimeoutError):
    """A channel endpoint was not subscribed in time."""


class PoolStartTimeoutError(StreamTimeoutError):
    """No worker of a ``map_pool`` became ready within ``ready_timeout`` (Ray could not place the actors)."""


class IslandScheduleTimeoutError(StreamTimeoutError):
    """An island's actor could not be scheduled (its resources are available nowhere) in time."""


class TooManySubstreamsOpenError(StreamError):
    """``group_by`` would open more substreams than allowed."""


class RateExceededError(StreamError):
    """``throttle`` in enforcing mode saw a rate above the limit."""


class MissingTimestampError(StreamError):
    """An event-time stage found no usable timestamp for an element (the timestamp function raised, or
    returned something that is not an int or float)."""


class TooManyWindowsError(StreamError):
    """A window operator would keep more open windows than its ``max_open_windows``."""


class PartitionOutOfBoundsError(StreamError, IndexError):
    """``Partition``'s function returned an index outside ``0 .. n-1``."""


class IslandDiedError(StreamError):
    """The Ray actor hosting an island died (crash, ``ray.kill``, node loss)."""

    def __init__(self, island: str, detail: str = ""):
        msg = f"island {island!r} died" + (f": {detail}" if detail else "")
        super().__init__(msg)
        self.island = island
        self.detail = detail

    def __reduce__(self):
        return (type(self), (self.island, self.detail))


class PoolWorkerDiedError(StreamError):
    """An element of ``map_pool`` killed the pool actor that ran it, again on every retry.

    ``index`` is the element's position in the operator's input (0-based); ``attempts`` how many actors it killed.
    The decider sees this error for that element (Resume/Restart drop it, Stop fails the stream)."""

    def __init__(self, index: int, attempts: int, detail: str = ""):
        msg = f"map_pool: element {index} killed {attempts} pool actor(s)" + (f": {detail}" if detail else "")
        super().__init__(msg)
        self.index = index
        self.attempts = attempts
        self.detail = detail

    def __reduce__(self):
        return (type(self), (self.index, self.attempts, self.detail))


class RayCallError(StreamError):
    """A Ray call made by an async operator failed with one of Ray's own errors (``ActorDiedError``,
    ``ObjectLostError``, ``TaskCancelledError``...), not with an exception of the called code. It carries
    the Ray error's type name (``ray_error``) and message; in the process where it was raised, the Ray
    error itself is its ``__cause__``. (A Ray error instance cannot be handed on to another island: Ray
    fails any call that gets one as an argument, so the stream would never hear of the failure.)"""

    def __init__(self, ray_error: str, message: str):
        super().__init__(f"{ray_error}: {message}" if message else ray_error)
        self.ray_error = ray_error
        self.remote_message = message

    def __reduce__(self):
        return (RayCallError, (self.ray_error, self.remote_message))


class NotAsyncResultError(StreamError, TypeError):
    """``fn`` returned something that is neither an awaitable, a Future nor an ObjectRef."""


class CheckpointError(StreamError):
    """A checkpoint could not be taken, written or restored (the stream itself may go on)."""


class CheckpointNotSupportedError(CheckpointError):
    """The graph cannot be checkpointed as built: a stage with undeclared state, a source that cannot
    replay, a stage that runs substreams. Raised when the graph is materialized, before anything runs."""


class CheckpointMismatchError(CheckpointError):
    """A checkpoint was taken from a different blueprint than the one asked to restore from it."""


class SourceReplayMismatchError(CheckpointError):
    """A source restored from a checkpoint cannot replay what it had read: its data changed since."""


class CheckpointCorruptedError(CheckpointError):
    """A checkpoint's data does not match its manifest (size or sha256): never restored silently."""


class CheckpointStorageError(CheckpointError):
    """The checkpoint storage cannot be reached or written."""


class CheckpointTimeoutError(CheckpointError, TimeoutError):
    """A checkpoint did not complete within its timeout; the message says what each island waits for."""


class RecoveryFailedError(StreamError):
    """The graph could not be recovered from its checkpoints (restart budget spent, no capacity);
    ``__cause__`` is the last failure."""


class NonFailureCancellation(Exception):
    """A cancellation cause that means "no more elements needed", not a failure."""


class NoMoreElementsNeeded(NonFailureCancellation):
    """Default cause of ``cancel(in)``: downstream simply needs no more elements."""

    def __init__(self, *args):
        super().__init__(*(args or ("no more elements needed",)))


class StageWasCompleted(NonFailureCancellation):
    """Cause used by ``complete_stage()`` when it cancels the stage's inputs."""

    def __init__(self, *args):
        super().__init__(*(args or ("stage was completed",)))


#: Shared instances used as cancellation causes (as Pekko's singletons).
NO_MORE_ELEMENTS_NEEDED = NoMoreElementsNeeded()
STAGE_WAS_COMPLETED = StageWasCompleted()
