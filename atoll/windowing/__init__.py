"""Event-time windows: window shapes, aggregations, result records and counters (no runtime imports)."""
from .aggregate import Aggregate
from .records import Late, Window
from .specs import Session, Sliding, Tumbling, validate_window_options
from .stats import WindowStats

__all__ = ["Aggregate", "Late", "Session", "Sliding", "Tumbling", "Window", "WindowStats",
           "validate_window_options"]
