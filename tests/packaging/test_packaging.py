"""Packaging: the wheel that `pip install .` builds, the `python -m atoll` command line, and installing Atoll on a
Ray cluster through a ``runtime_env`` (the README's "Running on a cluster").

The wheel is built once per module from a copy of the sources (so no ``build/`` is left in the checkout); the Ray
test starts one local Ray whose job ``runtime_env`` ships the wheel's ``atoll`` package (``py_modules``) and a
directory with a tiny module (``working_dir``), as one would to a cluster whose nodes lack the code, and shuts it
down.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: Distributions only the test suite and the benchmarks need: none may be an unconditional requirement.
DEV_ONLY = ("pytest", "pytest-timeout", "reactivex", "streamz", "bytewax")

#: The user code the island actor imports on the cluster: shipped in the job's working_dir, found nowhere else.
PROBE_MODULE = '''
import os

import atoll


def describe(x):
    """x doubled, with where this worker found atoll and its working directory."""
    return {"x": x * 2, "atoll": atoll.__file__, "cwd": os.getcwd()}
'''


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """``pip wheel <copy of the sources> --no-deps``: the wheel `pip install .` would install."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "atoll", src / "atoll", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--quiet", "-w", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"pip wheel failed:\n{proc.stdout}\n{proc.stderr}"
    (whl,) = out.glob("atoll-*.whl")
    return whl


def _metadata(whl: Path):
    with zipfile.ZipFile(whl) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return Parser().parsestr(z.read(name).decode())


def test_wheel_requires_no_test_or_benchmark_dependency(wheel):
    import atoll

    meta = _metadata(wheel)
    assert meta["Name"] == "atoll" and meta["Version"] == atoll.__version__
    requires = meta.get_all("Requires-Dist")
    unconditional = [r for r in requires if "extra ==" not in r]
    names = {r.split(";")[0].split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip().lower()
             for r in unconditional}
    assert not names & set(DEV_ONLY), unconditional  # those only behind the dev / bench extras
    assert names == {"ray", "raydp", "pyspark", "msgpack", "pyarrow", "cloudpickle"}, unconditional
    assert {"dev", "bench"} <= set(meta.get_all("Provides-Extra"))
    assert any(r.startswith("pytest") and 'extra == "dev"' in r for r in requires)
    assert any(r.startswith("bytewax") and 'extra == "bench"' in r for r in requires)


def test_wheel_ships_the_package_data_and_the_command_but_no_tests(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        entry_points = next(z.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
        log4j = z.read("atoll/interop/log4j2.properties").decode()
    assert {"atoll/__main__.py", "atoll/_log_config.py", "atoll/demo.py"} <= names
    assert "rootLogger.level" in log4j
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "scripts/"))]
    assert "atoll = atoll.__main__:main" in entry_points


def test_log4j_file_the_spark_session_passes_is_the_package_data(monkeypatch):
    from atoll import _log_config

    monkeypatch.delenv("ATOLL_DEBUG", raising=False)
    monkeypatch.delenv("SPARK_LOG4J_CONFIG_FILE_NAME", raising=False)

    configs = _log_config.spark_log_configs({})
    assert Path(configs["spark.log4j.config.file.name"]) == _log_config.LOG4J2_PROPERTIES
    assert _log_config.LOG4J2_PROPERTIES.is_file()
    assert configs["spark.ui.showConsoleProgress"] == "false"
    # the user's choice wins
    assert _log_config.spark_log_configs({"spark.log4j.config.file.name": "mine.properties"})[
        "spark.log4j.config.file.name"] == "mine.properties"


def test_python_m_atoll_version_and_demo_help():
    import atoll

    run = dict(capture_output=True, text=True, timeout=120, cwd=REPO)
    version = subprocess.run([sys.executable, "-m", "atoll", "--version"], **run)
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"atoll {atoll.__version__}"
    demo = subprocess.run([sys.executable, "-m", "atoll", "demo", "--help"], **run)
    assert demo.returncode == 0, demo.stderr
    assert "--address" in demo.stdout and "--events" in demo.stdout
    bad = subprocess.run([sys.executable, "-m", "atoll", "no-such-command"], **run)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_ray_init_defaults_quiet_the_driver_unless_atoll_debug(monkeypatch):
    import logging

    from atoll import _log_config

    monkeypatch.delenv("ATOLL_DEBUG", raising=False)
    assert _log_config.ray_init_kwargs({})["logging_level"] == logging.WARNING
    assert _log_config.ray_init_kwargs({"logging_level": logging.DEBUG})["logging_level"] == logging.DEBUG
    assert "log_to_driver" not in _log_config.ray_init_kwargs({})  # worker output still reaches the driver
    monkeypatch.setenv("ATOLL_DEBUG", "1")
    assert _log_config.ray_init_kwargs({}) == {}
    assert _log_config.spark_log_configs({}) == {}


def test_ray_core_info_lines_are_recognised_and_nothing_else():
    from atoll._log_config import RAY_CORE_INFO

    assert RAY_CORE_INFO.match("[2026-11-24 22:43:22,090 I 23873 23927] gcs_client.cc:96: GcsClient has no "
                               "Cluster ID set, and won't fetch from GCS.")
    for line in ("[2026-11-24 22:43:22,090 W 23873 23927] gcs_client.cc:96: a warning",
                 "[2026-11-24 22:43:22,090 E 23873 23927] core_worker.cc:1: an error",
                 "Traceback (most recent call last):",
                 "26/11/24 22:43:19 ERROR SparkContext: Error initializing SparkContext."):
        assert not RAY_CORE_INFO.match(line), line


@pytest.fixture(scope="module")
def cluster_with_runtime_env(wheel, tmp_path_factory):
    """A local Ray whose job runtime_env ships the wheel's package (``py_modules``) and the user's code
    (``working_dir``), so island actors import both from what Ray distributed; shut down after the module's last
    test."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    if ray.is_initialized():
        ray.shutdown()
    app = tmp_path_factory.mktemp("app")
    (app / "atoll_probe.py").write_text(PROBE_MODULE)
    unpacked = tmp_path_factory.mktemp("unpacked")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(unpacked)
    # the wheel's package directory, not the .whl: Ray pip-installs a .whl in py_modules with all its
    # dependencies (Ray, PySpark ... ~1 GB per session directory)
    ray.init(address="local", num_cpus=2, include_dashboard=False,
             runtime_env={"working_dir": str(app), "py_modules": [str(unpacked / "atoll")]})
    sys.path.insert(0, str(app))  # the driver pickles the probe's function by reference, so it imports it too
    try:
        yield app
    finally:
        sys.path.remove(str(app))
        sys.modules.pop("atoll_probe", None)
        ray.shutdown()


def test_island_actor_imports_atoll_from_the_wheel_and_user_code_from_the_working_dir(cluster_with_runtime_env):
    import atoll_probe

    from atoll import Materializer, Sink, Source
    from atoll.testkit import assert_all_stages_stopped

    mat = Materializer.ray(start_timeout=120)
    try:
        out = (Source.range(0, 5).map(atoll_probe.describe).island(name="packaging-probe")
               .run_with(Sink.seq(), mat).result(timeout=180))
        assert_all_stages_stopped(mat, timeout=15.0)
    finally:
        mat.shutdown()
    assert [o["x"] for o in out] == [0, 2, 4, 6, 8]
    where = {o["atoll"] for o in out}
    assert len(where) == 1
    (atoll_file,) = where
    # the island's atoll is the wheel's package Ray shipped for the job, not this checkout (the editable install)
    assert "runtime_resources" in atoll_file and not atoll_file.startswith(str(REPO)), atoll_file
    assert "runtime_resources" in out[0]["cwd"], out[0]["cwd"]
