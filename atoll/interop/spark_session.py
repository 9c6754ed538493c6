"""Starting and stopping Spark on Ray (RayDP) for Atoll.

Spark enters and leaves Atoll streams through RayDP: Spark's executors run as Ray actors, so Spark partitions
can be fetched into the Ray object store and Arrow tables held in Ray can be read by Spark, without files in
between. :func:`session` starts that Spark-on-Ray session (or returns the one already running) with everything
RayDP 1.6.5 needs on this stack, so a user never has to know about it:

* a Java 17 (or newer) runtime, checked up front with a message saying what to install;
* the JVM options Java 17 needs for Spark and RayDP (``-XX:+IgnoreUnrecognizedVMOptions`` and the
  ``--add-opens=java.base/...=ALL-UNNAMED`` set of :data:`JAVA17_OPTIONS`), given to the Spark driver, the
  Spark executors and RayDP's application master, merged with the user's own options;
* ``PYSPARK_PYTHON`` / ``PYSPARK_DRIVER_PYTHON`` pointing at this interpreter, so Spark's Python workers run in
  the same environment as the driver;
* an existing Ray connection is joined (Ray is started with ``ray.init()`` only if it is not up yet).

Only one Spark session exists per process (a RayDP rule); :func:`stop` tears it down and leaves Ray running.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
import threading
from typing import Callable, Dict, List, Mapping, Optional, Tuple, Union

from atoll import _log_config
from atoll.interop.errors import SparkSetupError

__all__ = ["JAVA17_OPTIONS", "JAVA_OPTION_KEYS", "MIN_JAVA_VERSION", "check_java", "java_options", "session",
           "active_session", "stop", "on_stop"]

log = logging.getLogger(__name__)

#: Oldest Java the Spark edge runs on (RayDP 1.6.5 with Spark 3.5 is built and tested for Java 17).
MIN_JAVA_VERSION = 17

#: JVM options Spark 3.5 and RayDP need on Java 17+, from RayDP's documentation (doc/spark_on_ray.md).
JAVA17_OPTIONS: Tuple[str, ...] = (
    "-XX:+IgnoreUnrecognizedVMOptions",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.invoke=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.net=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.math=ALL-UNNAMED",
    "--add-opens=java.base/java.text=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.cs=ALL-UNNAMED",
    "--add-opens=java.base/sun.security.action=ALL-UNNAMED",
    "--add-opens=java.base/sun.util.calendar=ALL-UNNAMED",
)

#: The three JVMs RayDP starts: Spark driver, Spark executors (Ray Java actors), RayDP's application master.
JAVA_OPTION_KEYS: Tuple[str, ...] = (
    "spark.driver.extraJavaOptions",
    "spark.executor.extraJavaOptions",
    "spark.ray.raydp_app_master.extraJavaOptions",
)

_INSTALL_HINT = ("install a Java {min} (or newer) runtime, e.g. `apt-get install openjdk-{min}-jre-headless` "
                 "(Debian/Ubuntu) or `brew install openjdk@{min}` (macOS), then put its `java` on PATH or set "
                 "JAVA_HOME to it").format(min=MIN_JAVA_VERSION)

_lock = threading.RLock()


def _java_version(java: str) -> Tuple[int, str]:
    """(major version, the version line) of the ``java`` executable at ``java``."""
    try:
        proc = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        raise SparkSetupError(f"Spark on Ray needs Java {MIN_JAVA_VERSION}+, but running `{java} -version` "
                              f"failed ({exc}); {_INSTALL_HINT}.") from exc
    text = (proc.stderr or "") + (proc.stdout or "")
    m = re.search(r'version\s+"([^"]+)"', text)
    if m is None:
        raise SparkSetupError(f"Spark on Ray needs Java {MIN_JAVA_VERSION}+, but `{java} -version` printed no "
                              f"version ({text.strip()[:200]!r}); {_INSTALL_HINT}.")
    version = m.group(1)
    parts = re.findall(r"\d+", version)
    major = int(parts[0]) if parts else 0
    if major == 1 and len(parts) > 1:  # "1.8.0_392" is Java 8
        major = int(parts[1])
    return major, text.strip().splitlines()[0]


def check_java(min_version: int = MIN_JAVA_VERSION) -> int:
    """Check the Java runtime Spark and RayDP will use; return its major version.

    Spark's launcher runs ``$JAVA_HOME/bin/java`` when ``JAVA_HOME`` is set and ``java`` from ``PATH``
    otherwise, while RayDP's application master always runs ``java`` from ``PATH``: both are checked. Raises
    :class:`~atoll.interop.errors.SparkSetupError` saying what to install when Java is missing or too old.
    """
    candidates = []
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        home_java = os.path.join(java_home, "bin", "java")
        if not (os.path.isfile(home_java) and os.access(home_java, os.X_OK)):
            raise SparkSetupError(f"JAVA_HOME is {java_home!r} but {home_java} is not an executable; "
                                  f"{_INSTALL_HINT}.")
        candidates.append(("JAVA_HOME", home_java))
    path_java = shutil.which("java")
    if path_java is None:
        if java_home:
            raise SparkSetupError(f"JAVA_HOME is set but there is no `java` on PATH, which RayDP's application "
                                  f"master runs; add {os.path.join(java_home, 'bin')} to PATH, or "
                                  f"{_INSTALL_HINT}.")
        raise SparkSetupError(f"Spark on Ray needs Java {min_version}+ and no `java` was found (JAVA_HOME is not "
                              f"set and PATH has none); {_INSTALL_HINT}.")
    candidates.append(("PATH", path_java))
    majors = []
    for where, java in candidates:
        major, line = _java_version(java)
        if major < min_version:
            raise SparkSetupError(f"Spark on Ray needs Java {min_version}+, but the `java` from {where} ({java}) "
                                  f"is Java {major} ({line}); {_INSTALL_HINT}.")
        majors.append(major)
    return min(majors)


def java_options(user_options: Optional[str] = None) -> str:
    """:data:`JAVA17_OPTIONS` followed by the user's options (theirs come last, so they win), without repeats."""
    ours = list(JAVA17_OPTIONS)
    theirs = (user_options or "").split()
    return " ".join([o for o in ours if o not in theirs] + theirs)


def _merged_configs(configs: Optional[Mapping[str, str]]) -> Dict[str, str]:
    merged = {str(k): str(v) for k, v in (configs or {}).items()}
    for key in JAVA_OPTION_KEYS:
        merged[key] = java_options(merged.get(key))
    return _log_config.spark_log_configs(merged)  # Atoll's quiet log4j2 file for the driver JVM


def active_session():
    """The running Spark-on-Ray session, or ``None``.

    RayDP allows one Spark session per process and keeps it in ``raydp.context._global_spark_context`` (private);
    that is the only record, so a session started with ``raydp.init_spark`` directly is found too.
    """
    try:
        from raydp import context as raydp_context
    except ImportError:  # pragma: no cover
        return None
    ctx = getattr(raydp_context, "_global_spark_context", None)
    return getattr(ctx, "_spark_session", None) if ctx is not None else None


def session(app_name: str = "atoll", num_executors: int = 1, executor_cores: int = 1,
            executor_memory: Union[str, int] = "1g", configs: Optional[Mapping[str, str]] = None):
    """Start Spark on Ray through RayDP, or return the session already running; returns a ``SparkSession``.

    The arguments are those of ``raydp.init_spark`` (``configs`` are extra Spark configs); they only matter
    when a session is started. The Java 17 options of :data:`JAVA17_OPTIONS` are added to the driver's, the
    executors' and RayDP's application master's ``extraJavaOptions`` (after checking :func:`check_java`), and
    ``PYSPARK_PYTHON``/``PYSPARK_DRIVER_PYTHON`` default to ``sys.executable``. If Ray is not initialized it is
    started with ``ray.init()``; otherwise the running Ray is joined. Spark runs in RayDP's fault-tolerant mode,
    which :mod:`atoll.interop.spark_partitions` needs (it is not available under Ray Client).
    """
    if not isinstance(app_name, str) or not app_name:
        raise ValueError(f"session: app_name must be a non-empty string, got {app_name!r}")
    for name, value in (("num_executors", num_executors), ("executor_cores", executor_cores)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"session: {name} must be a positive int, got {value!r}")
    if configs is not None and not isinstance(configs, Mapping):
        raise TypeError(f"session: configs must be a mapping of Spark settings, got {type(configs).__name__}")
    with _lock:
        running = active_session()
        if running is not None:
            if running.sparkContext.appName != app_name:
                log.warning("session(%r): a Spark session %r is already running; returning it", app_name,
                            running.sparkContext.appName)
            return running
        java_home = os.environ.get("JAVA_HOME")
        if java_home:
            # RayDP's application master (a Ray actor) starts `java` from PATH: make that the JAVA_HOME one.
            # Ray workers inherit this only when Ray is started below, from this process.
            java_bin = os.path.join(java_home, "bin")
            path = os.environ.get("PATH", "")
            if path.split(os.pathsep)[0] != java_bin:
                os.environ["PATH"] = java_bin + os.pathsep + path
        check_java()
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        import ray
        import raydp

        if not ray.is_initialized():
            ray.init(**_log_config.ray_init_kwargs({}))
            _log_config.quiet_forwarded_ray_core_info()
        with _log_config.jvm_stderr_without_ray_core_info():  # the Spark driver JVM starts in here
            spark = raydp.init_spark(app_name, num_executors, executor_cores, executor_memory,
                                     configs=_merged_configs(configs))
        from .spark_on_demand import start_hub

        start_hub()  # the actor through which from_spark's islands reach this driver: it starts before a graph needs it
        return spark


#: Called (in order of registration) after the session stops, even if stopping failed; see :func:`on_stop`.
_stop_hooks: List[Callable[[], None]] = []


def on_stop(hook: Callable[[], None]) -> None:
    """Have ``hook()`` called whenever :func:`stop` ends the session. Modules that keep data for the session
    register here (:mod:`atoll.interop.spark_frames` releases its retained Arrow data), so this module never
    imports its users."""
    if hook not in _stop_hooks:
        _stop_hooks.append(hook)


def stop() -> None:
    """Stop the Spark-on-Ray session (``raydp.stop_spark``); Ray stays up. Does nothing if none is running.

    DataFrames built by :func:`atoll.interop.spark_frames.arrow_refs_to_spark` keep their Arrow data alive in
    Ray until then; stopping the session releases it (through the hooks registered with :func:`on_stop`).
    """
    with _lock:
        import raydp

        try:
            raydp.stop_spark()
        finally:
            for hook in list(_stop_hooks):
                hook()
