"""``NotUsed`` and ``Done``: the two marker values of Pekko's materialized-value vocabulary."""
from __future__ import annotations


class _Marker:
    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    def __repr__(self) -> str:
        return self._name

    def __reduce__(self):
        return (_lookup, (self._name,))


def _lookup(name: str) -> "_Marker":
    return NotUsed if name == "NotUsed" else Done


#: Materialized value of stages that materialize nothing useful.
NotUsed = _Marker("NotUsed")
#: Successful completion value of ``Future[Done]`` (``Sink.ignore``, ``watch_termination`` ...).
Done = _Marker("Done")
