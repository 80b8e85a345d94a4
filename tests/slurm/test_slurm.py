#!/usr/bin/env python3
"""tools/slurm: the map step (memsnap-summarize.sbatch as a job array) and
the reduce (memsnap-ranks.sbatch) give what `memsnap ranks` gives on the same
files. Part `by_hand`: the array's tasks run one after another with
SLURM_ARRAY_TASK_ID set by hand (no Slurm needed). Part `cluster`: a
single-node Slurm cluster (munged, slurmctld, slurmd from Debian's slurm-wlm
packages) started on 127.0.0.1 in a temporary folder, tools/slurm/submit.sh
submits the array and the dependent reduce, and the test waits for the
reduce's ranks.json; skipped (exit 77) with the reason when the daemons are
not installed or cannot start here."""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
import pytest
from pytest_check import check

import testlib

REPO = os.path.dirname(os.path.dirname(HERE))
SLURM_TOOLS = os.path.join(REPO, "tools", "slurm")
GEN = os.path.join(REPO, "tests", "gen", "make_ranks.py")


def make_run(folder, ranks):
    subprocess.run([sys.executable, GEN, "--out", folder, "--ranks", str(ranks), "--stages", "4",
                    "--outlier", "5", "--events", "400"], check=True)


def ranks_json(memsnap, folder):
    got = subprocess.run([memsnap, "ranks", "--json", folder], capture_output=True, text=True, timeout=300)
    return json.loads(got.stdout) if got.returncode == 0 else None


def by_hand(memsnap, work):
    snapshots = os.path.join(work, "hand", "snapshots")
    summaries = os.path.join(work, "hand", "summaries")
    make_run(snapshots, 16)
    env = dict(os.environ, MEMSNAP=memsnap, SLURM_ARRAY_TASK_COUNT="3", SLURM_ARRAY_TASK_MIN="0",
               SLURM_CPUS_PER_TASK="1")
    outputs = []
    for task in range(3):
        got = subprocess.run(["bash", os.path.join(SLURM_TOOLS, "memsnap-summarize.sbatch"), snapshots, summaries],
                             env=dict(env, SLURM_ARRAY_TASK_ID=str(task)), capture_output=True, text=True, timeout=300)
        outputs.append(got)
        with check("by hand: array task %d of 3 exits 0" % task):
            assert got.returncode == 0, got.stderr
    shares = [int(o.stdout.split(": ")[2].split(" of ")[0]) if o.returncode == 0 else -1 for o in outputs]
    with check("by hand: the 16 files are shared 6/5/5 among the 3 tasks"):
        assert shares == [6, 5, 5], [o.stdout for o in outputs]
    with check("by hand: one summary per file"):
        assert len([n for n in os.listdir(summaries) if n.endswith(".summary.json")]) == 16
    reduce_out = os.path.join(summaries, "ranks.json")
    got = subprocess.run(["bash", os.path.join(SLURM_TOOLS, "memsnap-ranks.sbatch"), summaries, reduce_out],
                         env=dict(os.environ, MEMSNAP=memsnap), capture_output=True, text=True, timeout=300)
    with check("by hand: the reduce exits 0 and prints the text report"):
        assert (got.returncode == 0
                and "ranks: 16 files read" in got.stdout), got.stderr
    with open(reduce_out) as f:
        reduced = json.load(f)
    with check("by hand: the reduce's ranks.json equals memsnap ranks on the pickles"):
        assert reduced == ranks_json(memsnap, snapshots)
    with check("by hand: ranks over the summary folder leaves ranks.json alone"):
        assert ranks_json(memsnap, summaries) == reduced
    got = subprocess.run(["bash", os.path.join(SLURM_TOOLS, "memsnap-summarize.sbatch"), snapshots],
                         capture_output=True, text=True)
    with check("by hand: a missing argument is a usage error"):
        assert got.returncode == 2 and "usage:" in got.stderr


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """munged + slurmctld + slurmd on 127.0.0.1, all state under `folder`."""

    def __init__(self, folder):
        self.folder = folder
        self.conf = os.path.join(folder, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.munge_socket = os.path.join(folder, "munge", "munge.socket")
        # What start() brought up, in order: stop() touches only these, so a
        # skip (a tool missing, a daemon that would not start) runs nothing
        # that is not installed and stops nothing that never ran.
        self.started = []

    def why_not(self):
        for tool in ("munged", "slurmctld", "slurmd", "sbatch", "sinfo", "scontrol"):
            if shutil.which(tool) is None:
                return "%s is not installed (Debian: slurmctld slurmd slurm-client munge)" % tool
        if os.geteuid() != 0:
            return "the single-node cluster runs its daemons as root, and this is uid %d" % os.geteuid()
        return None

    def start(self):
        for sub in ("munge", "state", "spool", "log"):
            os.makedirs(os.path.join(self.folder, sub), exist_ok=True)
        key = os.path.join(self.folder, "munge", "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o600)
        os.chmod(os.path.join(self.folder, "munge"), 0o700)
        m = os.path.join(self.folder, "munge")
        got = subprocess.run(["munged", "--force", "--socket=" + self.munge_socket, "--key-file=" + key,
                              "--log-file=" + os.path.join(m, "munged.log"), "--pid-file=" + os.path.join(m, "munged.pid"),
                              "--seed-file=" + os.path.join(m, "munged.seed")], capture_output=True, text=True)
        if got.returncode != 0:
            return "munged did not start: " + (got.stderr.strip() or "exit %d" % got.returncode)
        self.started.append("munged")
        f = self.folder
        cpus = os.cpu_count() or 1
        with open(self.conf, "w") as out:
            out.write("\n".join([
                "ClusterName=memsnaptest",
                "SlurmctldHost=localhost(127.0.0.1)",
                "SlurmctldPort=%d" % free_port(), "SlurmdPort=%d" % free_port(),
                "AuthType=auth/munge", "AuthInfo=socket=" + self.munge_socket, "CredType=cred/munge",
                "SlurmUser=root", "SlurmdUser=root",
                "StateSaveLocation=%s/state" % f, "SlurmdSpoolDir=%s/spool" % f,
                "SlurmctldPidFile=%s/slurmctld.pid" % f, "SlurmdPidFile=%s/slurmd.pid" % f,
                "SlurmctldLogFile=%s/log/slurmctld.log" % f, "SlurmdLogFile=%s/log/slurmd.log" % f,
                "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
                "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
                "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
                "MpiDefault=none", "SwitchType=switch/none", "ReturnToService=2",
                "NodeName=localhost NodeAddr=127.0.0.1 CPUs=%d State=UNKNOWN" % cpus,
                "PartitionName=memsnap Nodes=localhost Default=YES MaxTime=INFINITE State=UP", ""]))
        for daemon in ("slurmctld", "slurmd"):
            got = subprocess.run([daemon, "-f", self.conf], env=self.env, capture_output=True, text=True)
            if got.returncode != 0:
                return "%s did not start: %s" % (daemon, got.stderr.strip() or self.log_tail(daemon))
            self.started.append(daemon)
        deadline = time.time() + 60
        while time.time() < deadline:
            got = subprocess.run(["sinfo", "-h", "-o", "%T"], env=self.env, capture_output=True, text=True)
            if got.returncode == 0 and got.stdout.strip() in ("idle", "mixed", "allocated"):
                return None
            time.sleep(0.5)
        return "the node did not come up within 60 s: " + self.log_tail("slurmd")

    def log_tail(self, daemon):
        path = os.path.join(self.folder, "log", daemon + ".log")
        if not os.path.exists(path):
            return "(no %s log)" % daemon
        with open(path, errors="replace") as f:
            return " | ".join(f.read().splitlines()[-4:])

    def stop(self):
        """Stops the daemons that start() brought up (none after a skip
        before start), newest first; a tool that is not installed is never
        run."""
        if "slurmctld" in self.started and shutil.which("scontrol"):
            subprocess.run(["scontrol", "shutdown"], env=self.env, capture_output=True, timeout=60)
        pid_files = {"slurmctld": "slurmctld.pid", "slurmd": "slurmd.pid",
                     "munged": os.path.join("munge", "munged.pid")}
        for daemon in reversed(self.started):
            if daemon == "munged" and shutil.which("munged"):
                subprocess.run(["munged", "--stop", "--socket=" + self.munge_socket], capture_output=True,
                               timeout=60)
            path = os.path.join(self.folder, pid_files[daemon])
            try:
                with open(path) as f:
                    pid = int(f.read().strip())
            except (OSError, ValueError):
                continue
            for attempt in range(50):
                try:
                    os.kill(pid, 0)
                except OSError:
                    break
                if attempt == 20:
                    try:
                        os.kill(pid, 15)
                    except OSError:
                        break
                time.sleep(0.1)
        self.started = []


def cluster(memsnap, work):
    """The job array on a cluster started here; the reason it could not start, or None."""
    folder = tempfile.mkdtemp(prefix="memsnap_slurm_")
    c = Cluster(folder)
    reason = c.why_not()
    if reason is None:
        reason = c.start()
    if reason is not None:
        c.stop()
        shutil.rmtree(folder, ignore_errors=True)
        return reason
    try:
        snapshots = os.path.join(work, "cluster", "snapshots")
        summaries = os.path.join(work, "cluster", "summaries")
        make_run(snapshots, 24)
        env = dict(c.env, MEMSNAP=memsnap)
        got = subprocess.run(["bash", os.path.join(SLURM_TOOLS, "submit.sh"), snapshots, summaries, "4", "--",
                              "--chdir=" + folder], env=env, capture_output=True, text=True, timeout=120)
        with check("cluster: submit.sh submits the array and the reduce"):
            assert (got.returncode == 0
                    and "map: job array" in got.stdout), got.stderr + got.stdout
        result = os.path.join(summaries, "ranks.json")
        deadline = time.time() + 600
        while time.time() < deadline and not os.path.exists(result):
            time.sleep(1)
        logs = " ".join(sorted(n for n in os.listdir(folder) if n.endswith(".out")))
        assert os.path.exists(result), "cluster: the reduce wrote ranks.json (job logs: %s): %s" % (
            logs, c.log_tail("slurmctld"))
        with open(result) as f:
            reduced = json.load(f)
        with check("cluster: 24 summaries from 4 array tasks"):
            assert (len([n for n in os.listdir(summaries) if n.endswith(".summary.json")]) == 24
                    and len([n for n in os.listdir(folder) if n.startswith("memsnap-summarize-")]) == 4)
        with check("cluster: the reduce equals memsnap ranks run directly on the pickles"):
            assert reduced == ranks_json(memsnap, snapshots)
        with check("cluster: it names rank 5 the outlier"):
            assert [o["rank"] for o in reduced["outliers"]] == [5], reduced["outliers"]
    finally:
        c.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return None


def test_the_job_array_tasks_run_by_hand(memsnap, work):
    by_hand(memsnap, work)


@pytest.mark.part("cluster")
def test_the_job_array_on_a_real_cluster(memsnap, work):
    reason = cluster(memsnap, work)
    if reason:
        testlib.skip_absent("cluster: " + reason)
