"""The pool benchmark's CPU sampler (``benchmarks.pool_cpu``): a child process started during a run is counted
with its CPU and marked new; one alive before the run counts only what it used during it."""
import subprocess
import sys

import psutil

from benchmarks.pool_cpu import CpuSampler, summary

#: a fixed amount of work, then wait for stdin to close (so the child is alive at the sampler's last sample)
BURN = "s = 0\nfor i in range(3_000_000):\n    s += i\nprint('done', flush=True)\nimport sys; sys.stdin.read()\n"


def _start(code: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "done"
    return p


def _stop(p: subprocess.Popen) -> None:
    p.stdin.close()
    p.wait(timeout=30)
    p.stdout.close()


def test_child_started_during_the_run_is_counted_as_new():
    sampler = CpuSampler(min_cpu=0.0)
    with sampler:
        child = _start(BURN)
    try:
        child_name = psutil.Process(child.pid).name()
        driver, rows = sampler.report()
    finally:
        _stop(child)
    mine = [r for r in rows if r[0] == child_name]
    assert len(mine) == 1
    name, cpu, new = mine[0]
    assert new is True
    assert cpu > 0.0
    assert driver >= 0.0
    assert f"{name[:28]}* {cpu:.2f}" in summary(driver, rows)


def test_child_alive_before_counts_only_its_cpu_during_the_run():
    child = _start(BURN)  # its work is done before the run starts
    try:
        sampler = CpuSampler(min_cpu=0.0)
        with sampler:
            pass  # the child, waiting on stdin, uses (almost) nothing meanwhile
        _driver, rows = sampler.report()
        before = [r for r in rows if r[2] is False]
        assert before, "the child alive before the run is listed"
        assert all(not new for _n, _c, new in before)
        # its work (before the run) is not counted
        t = psutil.Process(child.pid).cpu_times()
        assert t.user + t.system > max(c for _n, c, _new in before)
    finally:
        _stop(child)
