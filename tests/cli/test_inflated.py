#!/usr/bin/env python3
"""Compressed input is read as it inflates and freed behind the reader
(issue 28): the VM then keeps no view into the inflated bytes, so a .gz or
.zst parse must say exactly what the plain file's parse says, on files large
enough that the release (every 2 MiB) and the inflater's hold (32 MiB ahead of
the reader) both happen, on a pickle written without a memo (every string a
fresh one, inside containers), and on one string longer than the hold (the
reader waits for more than 32 MiB ahead). Its peak memory stays near the plain
file's (skipped under ASan, whose quarantine keeps freed memory)."""
import gzip
import json
import os
import pickle
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

import pytest
from pytest_check import check

TIMEOUT = 300
GENERATOR = os.path.join(os.path.dirname(HERE), "gen", "make_snapshot.py")
# What differs between a file and its compressed copy, besides nothing.
FILE_FIELDS = ("file", "file_size_bytes", "compression")


def report(memsnap, command, path, plain):
    got = subprocess.run([memsnap, command, "--json", path], capture_output=True, timeout=TIMEOUT)
    if got.returncode != 0:
        return None, got.stderr.decode("utf-8", "replace")[-400:]
    # Suggested commands name the file they were run on.
    data = json.loads(got.stdout.decode().replace(os.path.basename(path), os.path.basename(plain)))
    for field in FILE_FIELDS:
        data.pop(field, None)
    return data, ""


def compressed_copies(plain):
    """The .gz (always) and .zst (where the zstd tool is) of `plain`."""
    copies = [plain + ".gz"]
    with open(plain, "rb") as source, gzip.open(copies[0], "wb", compresslevel=1) as target:
        shutil.copyfileobj(source, target, 1 << 20)
    if shutil.which("zstd"):
        subprocess.run(["zstd", "-q", "-f", "-1", plain, "-o", plain + ".zst"], check=True)
        copies.append(plain + ".zst")
    return copies


def same_reports(memsnap, plain, commands, what):
    copies = compressed_copies(plain)
    for command in commands:
        want, why = report(memsnap, command, plain, plain)
        if not check.is_true(want is not None, "%s: %s of the plain file: %s" % (what, command, why)):
            continue
        for copy in copies:
            got, why = report(memsnap, command, copy, plain)
            with check("%s: %s of the %s copy equals the plain file's" % (what, command,
                       copy.rsplit(".", 1)[1])):
                assert got == want, why or "reports differ"
    return copies


def peak_kib(memsnap, path):
    """Peak RSS of one `memsnap parse`, in a fresh interpreter whose only child it is."""
    measure = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    return int(subprocess.run([sys.executable, "-c", measure, memsnap, "parse", "--json", path],
                              capture_output=True, text=True, timeout=TIMEOUT).stdout)


def large_file(memsnap, work):
    # About 48 MB: past the 32 MiB the inflater may run ahead of the reader.
    plain = os.path.join(work, "large.pickle")
    subprocess.run([sys.executable, GENERATOR, "--out", plain, "--events", "450000", "--protocol", "4",
                    "--stacks", "all", "--sites", "400", "--steps", "600", "--seed", "5"],
                   check=True, timeout=TIMEOUT)
    copies = same_reports(memsnap, plain, ("parse", "explain", "segments"), "450k entries")
    if os.environ.get("MEMSNAP_SANITIZED") == "1":
        print("SKIP peak memory: ASan keeps freed memory in quarantine")
        return
    plain_peak = peak_kib(memsnap, plain)
    for copy in copies:
        got = peak_kib(memsnap, copy)
        # Held whole, the inflated pickle alone would add its 48 MB.
        with check("%s: peak %d MiB within 1.3x the plain file's %d MiB (+ 8 MiB)"
                   % (os.path.basename(copy), got >> 10, plain_peak >> 10)):
            assert got < plain_peak * 1.3 + (8 << 10), (got, plain_peak)


def without_memo(memsnap, work):
    # A pickler in fast mode memoizes nothing: every key, action and frame
    # name is a fresh string inside a container, so the VM must copy them
    # all out of the input it frees.
    source = os.path.join(work, "memo.pickle")
    subprocess.run([sys.executable, GENERATOR, "--out", source, "--events", "60000", "--protocol", "4",
                    "--stacks", "all", "--steps", "80", "--seed", "6"], check=True, timeout=TIMEOUT)
    with open(source, "rb") as f:
        data = pickle.load(f)
    plain = os.path.join(work, "no_memo.pickle")
    with open(plain, "wb") as f:
        pickler = pickle.Pickler(f, protocol=4)
        pickler.fast = True
        pickler.dump(data)
    with check("no memo: the file has no memo opcodes and is past the 2 MiB release step"):
        assert os.path.getsize(plain) > (4 << 20) and b"\x94" not in open(plain, "rb").read()[:4096], (
            os.path.getsize(plain))
    same_reports(memsnap, plain, ("parse", "segments"), "no memo")


def long_string(memsnap, work):
    # One 40 MiB frame name: the reader asks for more than the inflater's
    # 32 MiB hold, which must give way (a hang fails by the timeout).
    plain = os.path.join(work, "long.pickle")
    subprocess.run([sys.executable, GENERATOR, "--out", plain, "--events", "2000", "--seed", "7"],
                   check=True, timeout=TIMEOUT)
    with open(plain, "rb") as f:
        data = pickle.load(f)
    for entry in data["device_traces"][0]:
        if entry["action"] == "alloc" and entry["frames"]:
            entry["frames"] = [dict(entry["frames"][0], name="n" * (40 << 20))] + entry["frames"][1:]
            break
    with open(plain, "wb") as f:
        pickle.dump(data, f, protocol=4)
    same_reports(memsnap, plain, ("parse",), "a 40 MiB string")



def test_large_file(memsnap, work):
    large_file(memsnap, work)


def test_without_memo(memsnap, work):
    without_memo(memsnap, work)


def test_long_string(memsnap, work):
    long_string(memsnap, work)
