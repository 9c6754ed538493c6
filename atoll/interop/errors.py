"""Errors raised at Atoll's Spark/RayDP edge.

Both errors can cross process boundaries (an island actor validating a batch raises them, the driver sees the
same type), so each one pickles through its constructor arguments.
"""
from __future__ import annotations

from typing import Optional

from atoll.errors import StreamError


class SchemaMismatchError(StreamError):
    """Data did not match the schema it was declared to have.

    Raised by :mod:`atoll.interop.spark_conform` when a batch (an Arrow table or record batch, a list of rows, a
    pandas DataFrame) meant for a Spark DataFrame of a known schema has a column of another type, a column too
    many or too few, a null where the schema forbids one, or a Python value of the wrong type. Nothing is ever
    coerced to make data fit: the data is refused and this error says where.

    Attributes (``None`` when they do not apply):
      * ``column`` -- the column, with a dotted path for nested fields (``"point.x"``, ``"tags.element"``,
        ``"attrs.value"``).
      * ``expected`` -- the expected type as text (an Arrow type, with ``not null`` when the field is required).
      * ``found`` -- what was there instead: a type, ``null``, ``no such column``, or a Python value's type.
      * ``element_index`` -- the position of the offending element in the stream (given by the caller).
      * ``row`` -- the row inside that element (a batch holds many rows).
    """

    def __init__(self, column: Optional[str], expected: Optional[str], found: Optional[str],
                 element_index: Optional[int] = None, row: Optional[int] = None, detail: Optional[str] = None):
        self.column = column
        self.expected = expected
        self.found = found
        self.element_index = element_index
        self.row = row
        self.detail = detail
        where = []
        if element_index is not None:
            where.append(f"element {element_index}")
        if row is not None:
            where.append(f"row {row}")
        if column is not None:
            where.append(f"column {column!r}")
        text = ", ".join(where) if where else "schema"
        text += f": expected {expected}, found {found}"
        if detail:
            text += f" ({detail})"
        super().__init__(text)

    def with_element_index(self, element_index: Optional[int]) -> "SchemaMismatchError":
        """The same mismatch, located at stream element ``element_index``."""
        return SchemaMismatchError(self.column, self.expected, self.found, element_index, self.row, self.detail)

    def __reduce__(self):
        return (type(self), (self.column, self.expected, self.found, self.element_index, self.row, self.detail))


class SparkSetupError(StreamError, RuntimeError):
    """Spark on Ray cannot start here (no Java, a Java older than 17, ...); the message says what to install."""
