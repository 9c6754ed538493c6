"""What a stage declares for checkpoints: ``NO_STATE`` and the check that a logic can be checkpointed.

A logic takes part in checkpoints by saving its state (``GraphStageLogic.save_to_snapshot`` /
``restore_from_snapshot``) or by declaring that it has none (``stateless = True`` on the logic or on its
``GraphStage``). Anything else would lose state silently on restore, so materializing a graph with
checkpointing on refuses it (Flink drops unmanaged fields without a word; we fail loudly instead).
"""
from __future__ import annotations

from typing import Any, Optional


class _NoState:
    __slots__ = ()

    def __repr__(self):
        return "NO_STATE"

    def __reduce__(self):
        return "NO_STATE"


#: ``save_to_snapshot``'s answer when a logic has nothing to save (a picklable singleton).
NO_STATE = _NoState()


def checkpoint_refusal(logic: Any, module: Optional[Any] = None) -> Optional[str]:
    """Why ``logic`` (created from ``module``) cannot be checkpointed, or None when it can."""
    if getattr(logic, "stateless", False) or getattr(module, "stateless", False):
        return None
    from .logic import GraphStageLogic

    cls = type(logic)
    if cls.save_to_snapshot is GraphStageLogic.save_to_snapshot:
        reason = "declares neither stateless = True nor save_to_snapshot/restore_from_snapshot"
    elif cls.restore_from_snapshot is GraphStageLogic.restore_from_snapshot:
        reason = "overrides save_to_snapshot but not restore_from_snapshot"
    else:
        return None
    # a built-in that cannot take part says why and what to use instead (``checkpoint_hint``)
    hint = getattr(logic, "checkpoint_hint", None) or getattr(module, "checkpoint_hint", None)
    return f"{reason}: {hint}" if hint else reason
