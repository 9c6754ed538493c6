"""Attributes: an ordered list of settings attached to blueprints (Pekko's ``Attributes``).

The list is kept most specific first: ``outer.and_(inner)`` puts ``inner``'s entries in front, so
``get`` returns the setting closest to the stage. The materializer supplies defaults (input buffer,
supervision) when nothing in the graph sets them.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Optional, Type, TypeVar

A = TypeVar("A", bound="Attribute")


class Attribute:
    """Base of every attribute kind; attributes are immutable values."""

    __slots__ = ()

    def __eq__(self, other):
        return type(self) is type(other) and all(
            getattr(self, s) == getattr(other, s) for s in type(self).__slots__
        )

    def __hash__(self):
        return hash((type(self),) + tuple(repr(getattr(self, s)) for s in type(self).__slots__))

    def __repr__(self):
        fields = ", ".join(f"{s}={getattr(self, s)!r}" for s in type(self).__slots__)
        return f"{type(self).__name__}({fields})"

    def __reduce__(self):
        return (_rebuild, (type(self), tuple(getattr(self, s) for s in type(self).__slots__)))


def _rebuild(cls, values):
    obj = cls.__new__(cls)
    for s, v in zip(cls.__slots__, values):
        object.__setattr__(obj, s, v)
    return obj


class Name(Attribute):
    """The name of a stage or composite, used in logs, errors and island names."""

    __slots__ = ("value",)

    def __init__(self, value: str):
        if not isinstance(value, str) or not value:
            raise ValueError(f"Attributes.name: name must be a non-empty string, got {value!r}")
        self.value = value


class InputBuffer(Attribute):
    """Size of the buffer in front of a stage's input at an island boundary (elements)."""

    __slots__ = ("initial", "max")

    def __init__(self, initial: int, max: int):
        if not isinstance(initial, int) or initial < 1:
            raise ValueError(f"Attributes.input_buffer: initial must be an int >= 1, got {initial!r}")
        if not isinstance(max, int) or max < initial:
            raise ValueError(f"Attributes.input_buffer: max must be an int >= initial ({initial}), got {max!r}")
        self.initial = initial
        self.max = max


class SupervisionStrategy(Attribute):
    """Decider mapping an exception to ``Supervision.STOP``/``RESUME``/``RESTART``."""

    __slots__ = ("decider",)

    def __init__(self, decider: Callable[[BaseException], str]):
        if not callable(decider):
            raise ValueError(f"Attributes.supervision_strategy: decider must be callable, got {decider!r}")
        self.decider = decider


#: Options an island boundary may carry (``.island(**options)``): ``name`` names the island (in ``islands()``, progress
#: lines, the console, metrics, errors and ``kill_island``); the others are Ray actor options of its actor. An island's
#: actor is not a Ray named actor (a blueprint may run many times at once, and actors are reused), so there is no
#: ``namespace``.
ISLAND_OPTIONS = frozenset(
    {
        "num_cpus",
        "num_gpus",
        "memory",
        "resources",
        "scheduling_strategy",
        "name",
        "runtime_env",
        "accelerator_type",
        "label_selector",
    }
)


class AsyncBoundary(Attribute):
    """Marks an island boundary (Pekko's ``.async``) and carries the island's name and its actor's Ray options."""

    __slots__ = ("options",)

    def __init__(self, options: Optional[dict] = None):
        options = dict(options or {})
        unknown = sorted(set(options) - ISLAND_OPTIONS)
        if unknown:
            raise ValueError(
                f"island(): unknown option(s) {', '.join(map(repr, unknown))}; "
                f"allowed: {', '.join(sorted(ISLAND_OPTIONS))}"
            )
        for key in ("num_cpus", "num_gpus", "memory"):
            if key in options and (not isinstance(options[key], (int, float)) or options[key] < 0):
                raise ValueError(f"island(): option {key!r} must be a number >= 0, got {options[key]!r}")
        if "resources" in options and not isinstance(options["resources"], dict):
            raise ValueError(f"island(): option 'resources' must be a dict, got {options['resources']!r}")
        if "name" in options and not isinstance(options["name"], str):
            raise ValueError(f"island(): option 'name' must be a string, got {options['name']!r}")
        self.options = options

    def __hash__(self):
        return hash((AsyncBoundary, repr(sorted(self.options.items(), key=lambda kv: kv[0]))))


class LogLevels(Attribute):
    """Python logging levels used by ``log()`` for elements, completion and failure."""

    __slots__ = ("on_element", "on_finish", "on_failure")

    def __init__(self, on_element: int, on_finish: int, on_failure: int):
        self.on_element = on_element
        self.on_finish = on_finish
        self.on_failure = on_failure


class CancellationStrategy(Attribute):
    """What a stage does when downstream cancels (Pekko's ``CancellationStrategy``).

    ``"propagate_failure"`` (default) completes the stage for a non-failure cause and fails it
    otherwise; ``"complete_stage"`` always completes; ``"fail_stage"`` always fails.
    """

    __slots__ = ("strategy",)

    KINDS = ("propagate_failure", "complete_stage", "fail_stage")

    def __init__(self, strategy: str):
        if strategy not in self.KINDS:
            raise ValueError(f"Attributes.cancellation_strategy: expected one of {self.KINDS}, got {strategy!r}")
        self.strategy = strategy


class Attributes:
    """An immutable, ordered list of attributes (most specific first)."""

    __slots__ = ("attribute_list",)

    none: "Attributes"

    def __init__(self, attribute_list: Iterable[Attribute] = ()):
        self.attribute_list = tuple(attribute_list)

    # -- combination ------------------------------------------------------------------------
    def and_(self, other: "Attributes | Attribute") -> "Attributes":
        """These attributes refined by ``other`` (whose entries become the more specific ones)."""
        if isinstance(other, Attribute):
            return Attributes((other,) + self.attribute_list)
        if not other.attribute_list:
            return self
        if not self.attribute_list:
            return other
        return Attributes(other.attribute_list + self.attribute_list)

    __and__ = and_

    # -- queries ----------------------------------------------------------------------------
    def get(self, kind: Type[A], default: Any = None) -> Any:
        """The most specific attribute of ``kind``, or ``default``."""
        for a in self.attribute_list:
            if type(a) is kind:
                return a
        return default

    def get_first(self, kind: Type[A], default: Any = None) -> Any:
        """The least specific attribute of ``kind``, or ``default``."""
        for a in reversed(self.attribute_list):
            if type(a) is kind:
                return a
        return default

    def contains(self, attr: Attribute) -> bool:
        return attr in self.attribute_list

    @property
    def is_async(self) -> bool:
        """True when these attributes mark an island boundary."""
        return any(type(a) is AsyncBoundary for a in self.attribute_list)

    def name_or_default(self, default: str = "unnamed") -> str:
        n = self.get(Name)
        return n.value if n is not None else default

    def name_lifted(self) -> Optional[str]:
        """All names joined outermost-first with '-', as Pekko's ``nameLifted``."""
        names = [a.value for a in reversed(self.attribute_list) if type(a) is Name]
        return "-".join(names) if names else None

    def __iter__(self):
        return iter(self.attribute_list)

    def __len__(self):
        return len(self.attribute_list)

    def __eq__(self, other):
        return isinstance(other, Attributes) and self.attribute_list == other.attribute_list

    def __hash__(self):
        return hash(self.attribute_list)

    def __repr__(self):
        return f"Attributes({list(self.attribute_list)!r})"

    # -- factories --------------------------------------------------------------------------
    @staticmethod
    def name(name: str) -> "Attributes":
        return Attributes((Name(name),))

    @staticmethod
    def input_buffer(initial: int, max: int) -> "Attributes":
        return Attributes((InputBuffer(initial, max),))

    @staticmethod
    def supervision_strategy(decider: Callable[[BaseException], str]) -> "Attributes":
        return Attributes((SupervisionStrategy(decider),))

    @staticmethod
    def async_boundary(**options: Any) -> "Attributes":
        return Attributes((AsyncBoundary(options),))

    @staticmethod
    def log_levels(on_element: int = 10, on_finish: int = 10, on_failure: int = 40) -> "Attributes":
        return Attributes((LogLevels(on_element, on_finish, on_failure),))

    @staticmethod
    def cancellation_strategy(strategy: str) -> "Attributes":
        return Attributes((CancellationStrategy(strategy),))


Attributes.none = Attributes(())
