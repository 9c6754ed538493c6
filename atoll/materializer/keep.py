"""Keep: the standard combiners for materialized values (Pekko's ``Keep``).

The traversal builders recognise these four by identity and compile them to cheap stack commands
(``Pop`` instead of a function call); any other two-argument function becomes a ``Compose``.
"""
from __future__ import annotations

from typing import Any, Tuple

from ..markers import NotUsed


class Keep:
    @staticmethod
    def left(left: Any, right: Any) -> Any:
        """Keep the materialized value of the left (upstream / this) side."""
        return left

    @staticmethod
    def right(left: Any, right: Any) -> Any:
        """Keep the materialized value of the right (the added) side."""
        return right

    @staticmethod
    def both(left: Any, right: Any) -> Tuple[Any, Any]:
        """Keep both, as a tuple ``(left, right)``."""
        return (left, right)

    @staticmethod
    def none(left: Any, right: Any) -> Any:
        """Keep neither: ``NotUsed``."""
        return NotUsed
