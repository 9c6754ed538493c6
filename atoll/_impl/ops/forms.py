"""Declared forms of stateless operators: what a stage does to one element, as a small frozen value.

A stage that transforms elements one at a time without state (``map``, ``filter``, ``filter_not``,
``map_concat``, the identity) declares it with ``stateless_form()``. Whoever wants to run such a chain
outside the interpreter - ``recursively`` expands its step directly when the step is such a chain -
reads the declarations instead of recognising operator classes, so a new stateless operator only
declares its form.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List, Optional

from ...errors import PortStateError

MAP = "map"
FILTER = "filter"
MAP_CONCAT = "map_concat"
IDENTITY = "identity"


@dataclass(frozen=True)
class StatelessForm:
    """``kind`` is one of ``map``, ``filter``, ``map_concat``, ``identity``; ``fn`` the user function;
    ``negate`` inverts a filter (``filter_not``); ``name`` names the stage in errors."""

    kind: str
    fn: Optional[Callable[[Any], Any]] = None
    negate: bool = False
    name: str = ""


def expand(forms: List[StatelessForm], elem: Any, emit: Callable[[Any], None]) -> None:
    """Apply ``forms`` in order to ``elem``, calling ``emit`` for every output, in the order and with the
    calls the stages themselves would make (a ``None`` result fails as a push of ``None`` would)."""
    _expand(forms, 0, elem, emit)


def _expand(forms, i: int, x: Any, emit) -> None:
    n = len(forms)
    while i < n:
        f = forms[i]
        kind = f.kind
        if kind == MAP:
            x = f.fn(x)
            if x is None:
                raise _none_error(f.name)
        elif kind == FILTER:
            if bool(f.fn(x)) == f.negate:
                return
        elif kind == MAP_CONCAT:
            for y in f.fn(x):
                if y is None:
                    raise _none_error(f.name)
                _expand(forms, i + 1, y, emit)
            return
        i += 1
    emit(x)


def _none_error(name: str) -> PortStateError:
    return PortStateError(
        f"Cannot push None to port ({name}.out) of stage {name}: elements must not be None (Reactive Streams rule 2.13)"
    )
