"""Whether a stream's elements are large: what a channel between local islands asks about its first element before
it asks for many elements ahead (``InputBoundary(grow_to=...)``)."""
from __future__ import annotations

import sys
from itertools import islice
from typing import Any

#: an element of this many bytes or more is large
LARGE_ELEMENT = 64 * 1024
#: items of a list, tuple or dict element looked at (its first ones)
ITEMS_LOOKED_AT = 64


def is_large_element(elem: Any) -> bool:
    """Whether ``elem`` holds ``LARGE_ELEMENT`` bytes or more by ``sys.getsizeof``, which counts the buffers of
    numpy arrays that own their data, Arrow tables, batches and arrays, pandas frames, ``bytes`` and ``str``: the
    element itself or, for a ``list``, ``tuple`` or ``dict`` (a row), one of its first ``ITEMS_LOOKED_AT`` items or
    values. Deeper nesting is not looked at."""
    getsizeof = sys.getsizeof
    if getsizeof(elem, 0) >= LARGE_ELEMENT:
        return True
    t = type(elem)
    if t is dict:
        items = islice(elem.values(), ITEMS_LOOKED_AT)
    elif t is list or t is tuple:
        items = elem[:ITEMS_LOOKED_AT]
    else:
        return False
    return any(getsizeof(v, 0) >= LARGE_ELEMENT for v in items)
