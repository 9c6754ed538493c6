"""Exceptions that must cross process boundaries intact (same type, same message): Ray calls between islands, and the
failures a checkpoint records of the stages that had finished."""
from __future__ import annotations

import sys

import cloudpickle

from .errors import StreamError


class RemoteStreamError(StreamError):
    """Stands in for an exception whose type cannot be pickled; carries its type name and message."""

    def __init__(self, type_name: str, message: str):
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.remote_message = message

    def __reduce__(self):
        return (RemoteStreamError, (self.type_name, self.remote_message))


def portable_exception(exc: BaseException) -> BaseException:
    """``exc`` itself if it survives pickling, else a ``RemoteStreamError`` describing it.

    Ray's own errors cannot travel as values: Ray serializes a ``RayError`` specially, and a call that
    carries one as an argument fails with it instead of delivering it (a stage failing with a task's error
    would never reach the driver). A ``RayTaskError`` becomes the exception the task raised (its
    ``cause``); any other Ray error (``ActorDiedError``, ``ObjectLostError`` ...) a ``RemoteStreamError``
    with its type and message."""
    ray = sys.modules.get("ray")
    if ray is not None:
        ray_error = ray.exceptions.RayError
        if isinstance(exc, ray_error):
            cause = getattr(exc, "cause", None)
            if isinstance(cause, BaseException) and not isinstance(cause, ray_error):
                return portable_exception(cause)
            t = type(exc)
            return RemoteStreamError(f"{t.__module__}.{t.__qualname__}", str(exc))
    try:
        back = cloudpickle.loads(cloudpickle.dumps(exc))
        if type(back) is type(exc):
            return exc
    except Exception:  # noqa: BLE001 - any pickling problem means: describe instead
        pass
    t = type(exc)
    return RemoteStreamError(f"{t.__module__}.{t.__qualname__}", str(exc))
