"""Spark on Ray for Atoll: ``session()`` starts (or returns) the RayDP Spark session with everything Java 17
needs, ``stop()`` ends it. DataFrames enter a graph with ``Source.from_spark`` and leave it with
``Sink.to_spark``."""
from .spark_session import active_session, check_java, session, stop

__all__ = ["session", "stop", "active_session", "check_java"]
