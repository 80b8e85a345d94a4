#!/usr/bin/env python3
"""A test of test_slurm.py's cluster part: where the Slurm tools are missing,
or a daemon cannot start, the part is a real skip (exit 77, a skip
line, no traceback), and stopping the cluster runs no tool that is missing and
stops nothing that never started.

Each case runs `test_slurm.py --only cluster` with PATH set to a temporary
folder of its own (python3 and bash linked in, nothing of Slurm), plus, in
the second case, stubs of every Slurm tool that log their calls and of which
munged refuses to start."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
import pytest
from pytest_check import check

import testlib

DRIVER = os.path.join(HERE, "test_slurm.py")
TOOLS = ("munged", "slurmctld", "slurmd", "sbatch", "sinfo", "scontrol")


def bare_path(folder):
    """A PATH folder holding only python3 and bash (and whatever is added)."""
    bin_dir = os.path.join(folder, "bin")
    os.makedirs(bin_dir)
    os.symlink(sys.executable, os.path.join(bin_dir, "python3"))
    bash = shutil.which("bash")
    if bash:
        os.symlink(bash, os.path.join(bin_dir, "bash"))
    return bin_dir


def run_driver(memsnap, bin_dir):
    env = dict(os.environ, PATH=bin_dir)
    return subprocess.run([sys.executable, "-m", "pytest", "-c", os.path.join(os.path.dirname(HERE), "pytest.ini"),
                           "-q", DRIVER, "--memsnap", memsnap, "--part", "cluster"],
                          env=env, capture_output=True, text=True, timeout=120)


def is_clean_skip(name, got):
    out = got.stdout + got.stderr
    with check(name + ": exit 77 (skipped)"):
        assert got.returncode == testlib.SKIPPED, "exit %d: %s" % (got.returncode, out)
    with check(name + ": a skip line says why"):
        assert f"{testlib.ABSENT}: cluster: " in got.stdout, out
    with check(name + ": no traceback"):
        assert "Traceback" not in out, out


def no_tools(memsnap, scratch):
    bin_dir = bare_path(os.path.join(scratch, "none"))
    got = run_driver(memsnap, bin_dir)
    is_clean_skip("no Slurm tools", got)
    with check("no Slurm tools: the reason names the first missing tool"):
        assert f"{testlib.ABSENT}: cluster: munged is not installed" in got.stdout, got.stdout


def munged_fails(memsnap, scratch):
    bin_dir = bare_path(os.path.join(scratch, "stubs"))
    log = os.path.join(scratch, "calls.log")
    for tool in TOOLS:
        path = os.path.join(bin_dir, tool)
        with open(path, "w") as f:
            f.write("#!/bin/bash\necho \"%s $*\" >> %s\n" % (tool, log))
            if tool == "munged":
                f.write("echo 'munged: stub refuses to start' >&2\nexit 1\n")
        os.chmod(path, 0o755)
    got = run_driver(memsnap, bin_dir)
    is_clean_skip("munged cannot start", got)
    calls = []
    if os.path.exists(log):
        with open(log) as f:
            calls = [line.split()[0] for line in f if line.strip()]
    if os.geteuid() == 0:
        with check("munged cannot start: it says so"):
            assert f"{testlib.ABSENT}: cluster: munged did not start" in got.stdout, got.stdout
        with check("munged cannot start: munged was tried once and nothing was stopped"):
            assert calls == ["munged"], calls
    else:
        with check("not root: the reason is the uid, and no tool ran"):
            assert "runs its daemons as root" in got.stdout and calls == [], (got.stdout, calls)


def test_no_tools(memsnap, work):
    no_tools(memsnap, work)


def test_munged_fails(memsnap, work):
    munged_fails(memsnap, work)
