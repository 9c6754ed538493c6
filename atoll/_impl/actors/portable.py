"""Exceptions that must cross process boundaries intact (same type, same message)."""
from __future__ import annotations

import cloudpickle

from ...errors import StreamError


class RemoteStreamError(StreamError):
    """Stands in for an exception whose type cannot be pickled; carries its type name and message."""

    def __init__(self, type_name: str, message: str):
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.remote_message = message

    def __reduce__(self):
        return (RemoteStreamError, (self.type_name, self.remote_message))


def portable_exception(exc: BaseException) -> BaseException:
    """``exc`` itself if it survives pickling, else a ``RemoteStreamError`` describing it."""
    try:
        back = cloudpickle.loads(cloudpickle.dumps(exc))
        if type(back) is type(exc):
            return exc
    except Exception:  # noqa: BLE001 - any pickling problem means: describe instead
        pass
    t = type(exc)
    return RemoteStreamError(f"{t.__module__}.{t.__qualname__}", str(exc))
