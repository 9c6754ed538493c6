"""How loud Atoll's dependencies are: Ray's driver logging, Ray's C++ core in the JVMs, and Spark's log4j.

Quiet by default - warnings and errors only from Ray's driver, errors only from Spark's driver JVM - so that a
demo or a test run shows Atoll's own lines and real failures. ``ATOLL_DEBUG=1`` turns all of it back up for
diagnosis. Nothing here hides errors: exceptions, worker output (``log_to_driver``) and ERROR lines still
reach the driver.
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
from pathlib import Path
from typing import Dict, Iterator, MutableMapping

__all__ = ["LOG4J2_PROPERTIES", "debug", "ray_init_kwargs", "quiet_forwarded_ray_core_info", "spark_log_configs",
           "jvm_stderr_without_ray_core_info"]

#: The log4j2 configuration shipped with the package (package data) for the Spark driver JVM.
LOG4J2_PROPERTIES = Path(__file__).resolve().parent / "interop" / "log4j2.properties"

#: RayDP's Spark config naming the log4j2 file of the Spark driver JVM (``-Dlog4j2.configurationFile``).
RAYDP_SPARK_LOG4J_KEY = "spark.log4j.config.file.name"


def debug() -> bool:
    """True when ``ATOLL_DEBUG`` is set to anything but ``""``/``0``/``false``/``no``: log everything."""
    return os.environ.get("ATOLL_DEBUG", "").strip().lower() not in ("", "0", "false", "no")


def ray_init_kwargs(kwargs: MutableMapping) -> MutableMapping:
    """``kwargs`` for ``ray.init`` with Atoll's default driver log level (WARNING; Ray's INFO under
    ``ATOLL_DEBUG``) where the caller set none. Worker output still reaches the driver."""
    if not debug():
        kwargs.setdefault("logging_level", logging.WARNING)
    return kwargs


#: An INFO line of Ray's C++ core (``[2026-01-01 10:00:00,123 I 4242 4243] gcs_client.cc:96: ...``). The JVMs
#: RayDP starts load Ray's core worker library, which prints such lines to stderr before its logging is set up
#: (``RAY_BACKEND_LOG_LEVEL`` is read only after them); warnings (`` W ``) and errors (`` E ``) do not match.
RAY_CORE_INFO = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ I \d+ \d+\] \S+\.cc:\d+: ")


def quiet_forwarded_ray_core_info() -> None:
    """Drop Ray C++ INFO lines (:data:`RAY_CORE_INFO`) from the worker output Ray forwards to this driver
    (``log_to_driver``): RayDP's application master and Spark's executor JVMs print them. Every other line -
    worker tracebacks, prints, warnings - is still printed. Does nothing under ``ATOLL_DEBUG`` or if Ray's
    (private) dispatcher is not where Ray 2.60 has it."""
    if debug():
        return
    try:
        from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher
    except ImportError:  # pragma: no cover - another Ray version
        return
    with dispatcher._lock:
        handlers = dispatcher.handlers
        for i, (name, handler) in enumerate(handlers):
            if name == "ray_print_logs" and not getattr(handler, "_atoll_filter", False):
                def filtered(data, _print=handler):
                    lines = data.get("lines")
                    if lines:
                        kept = [line for line in lines if not RAY_CORE_INFO.match(line)]
                        if not kept:
                            return
                        data = dict(data, lines=kept)
                    _print(data)

                filtered._atoll_filter = True
                handlers[i] = (name, filtered)


@contextlib.contextmanager
def jvm_stderr_without_ray_core_info() -> Iterator[None]:
    """While inside, this process's stderr (file descriptor 2) is a pipe whose lines a daemon thread copies to
    the real stderr, leaving out Ray C++ INFO lines (:data:`RAY_CORE_INFO`). A process started inside (the
    Spark driver JVM that ``raydp.init_spark`` launches) keeps writing through the filter for its whole life;
    this process gets its own stderr back on leaving. Everything else, errors included, passes unchanged.
    Under ``ATOLL_DEBUG`` nothing is filtered."""
    if debug():
        yield
        return
    sys.stderr.flush()
    try:
        real = os.dup(2)
    except OSError:  # no stderr at all (a detached process): nothing to keep clean
        yield
        return
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    threading.Thread(target=_copy_filtered, args=(read_end, real), name="atoll-jvm-stderr", daemon=True).start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(real, 2)  # the pipe stays open in the JVM; the thread ends when the JVM exits


def _copy_filtered(read_end: int, real: int) -> None:
    """Copy lines from ``read_end`` to ``real`` without Ray C++ INFO lines, until every writer has closed."""
    with os.fdopen(read_end, "rb", buffering=0) as src, os.fdopen(real, "wb", buffering=0) as dst:
        pending = b""
        while True:
            chunk = src.read(65536)
            if not chunk:
                break
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            out = [line + b"\n" for line in lines
                   if not RAY_CORE_INFO.match(line.decode("utf-8", "replace"))]
            if out:
                try:
                    dst.write(b"".join(out))
                except OSError:  # the real stderr is gone: keep draining so the JVM never blocks
                    pass
        if pending:
            with contextlib.suppress(OSError):
                dst.write(pending)


def spark_log_configs(configs: Dict[str, str]) -> Dict[str, str]:
    """Spark ``configs`` (as given to RayDP) with Atoll's log4j2 file for the Spark driver, unless the user
    named one (the config, or RayDP's ``SPARK_LOG4J_CONFIG_FILE_NAME`` environment variable), and without
    Spark's console progress bar unless asked for. Under ``ATOLL_DEBUG`` they are left as they are (RayDP's
    and Spark's own logging)."""
    if debug():
        return configs
    if RAYDP_SPARK_LOG4J_KEY not in configs and "SPARK_LOG4J_CONFIG_FILE_NAME" not in os.environ:
        configs[RAYDP_SPARK_LOG4J_KEY] = str(LOG4J2_PROPERTIES)
    configs.setdefault("spark.ui.showConsoleProgress", "false")  # Spark's progress bar over Atoll's lines
    return configs
