#!/usr/bin/env python3
"""The allocator's state over time (`memsnap segments --time T`, the history
check) against a reference written here.

Part `generated`: a small caching allocator in Python (explicit block lists,
best fit, split, merge, pending frees, empty_cache, two streams, a private
pool), written from PyTorch's documented rules and independent of memsnap's
gap-based replay, runs a random workload and writes the trace and the dump.
memsnap must replay the trace to the dump exactly, and its state at chosen
times (reserved, allocated, awaiting free, free, the largest free block, every
segment) must equal the simulator's; reserved over time must equal parse's.
Then the refusals and the honest failures: a trace that starts late (blocks
already there), a dump that disagrees with its trace, no times, bad --time.

Part `fixtures`: on every real fixture and device whose dump lists block
addresses, the trace replays to the dump block for block."""
import json
import os
import pickle
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

import pytest
from pytest_check import check

import testlib

run = testlib.run_memsnap

KiB, MiB = 1 << 10, 1 << 20
SMALL_SIZE = MiB          # requests up to this use the small pool (2 MiB segments)
MIN_BLOCK = 512
BASE_ADDRESS = 0x7F0000000000


def next_power2_division(size, divisions):
    """PyTorch's roundup_power2_next_division."""
    if size & (size - 1) == 0:
        return size
    floor = 1 << (size.bit_length() - 1)
    step = floor >> (divisions.bit_length() - 1)
    if step == 0:
        return floor << 1
    down = size & ~(step - 1)
    return size if down == size else down + step


def rounded(request, divisions=None):
    """PyTorch's round_size; divisions: roundup_power2_divisions per interval from 1 MiB."""
    if request < MIN_BLOCK:
        return MIN_BLOCK
    if divisions:
        k = min(max(request.bit_length() - 1 - 20, 0), 15)
        if divisions[k] > 1 and request > MIN_BLOCK * divisions[k]:
            return next_power2_division(request, divisions[k])
    return -(-request // MIN_BLOCK) * MIN_BLOCK


def segment_size_for(size):
    if size <= SMALL_SIZE:
        return 2 * MiB
    if size < 10 * MiB:
        return 20 * MiB
    return -(-size // (2 * MiB)) * (2 * MiB)


class Allocator:
    """Segments hold explicit block lists [address, size, requested, state]
    (state: free, allocated, pending); a free merges with free neighbours."""

    def __init__(self, rng, max_split_size=None, divisions=None):
        self.rng = rng
        self.max_split_size = max_split_size  # None: unlimited
        self.divisions = divisions  # roundup_power2_divisions, 16 intervals from 1 MiB; None: off
        self.unsplit = 0  # blocks left whole because of max_split_size
        self.power2_rounded = 0  # requests rounded past 512 bytes by the divisions
        self.segments = {}  # address -> dict(size, stream, pool, small, blocks)
        self.next_address = BASE_ADDRESS
        self.trace = []
        self.recording = True
        self.clock_us = 1_000_000

    def record(self, action, address, size, stream, pool=(0, 0)):
        self.clock_us += self.rng.randint(50, 400)
        if self.recording:
            entry = {"action": action, "addr": address, "size": size, "stream": stream,
                     "time_us": self.clock_us, "frames": []}
            if pool != (0, 0):
                entry["pool_id"] = pool
            self.trace.append(entry)

    def usable(self, block_size, size):
        """max_split_size: small requests never take an oversize block; large
        ones only one within 20 MiB of their size (max_non_split_rounding)."""
        if self.max_split_size is None or block_size < self.max_split_size:
            return True
        return size >= self.max_split_size and block_size < size + 20 * MiB

    def malloc(self, request, stream, pool=(0, 0)):
        size = rounded(request, self.divisions)
        if size != rounded(request):
            self.power2_rounded += 1
        small = size <= SMALL_SIZE
        best = None
        for address, seg in self.segments.items():
            if seg["stream"] != stream or seg["pool"] != pool or seg["small"] != small:
                continue
            for block in seg["blocks"]:
                if block[3] == "free" and block[1] >= size and (small or self.usable(block[1], size)):
                    if best is None or (block[1], block[0]) < (best[1][1], best[1][0]):
                        best = (seg, block)
        if best is None:
            total = segment_size_for(size)
            address = self.next_address
            self.next_address += total + self.rng.choice([0, 0, 2 * MiB])
            seg = {"size": total, "stream": stream, "pool": pool, "small": small,
                   "blocks": [[address, total, 0, "free"]]}
            self.segments[address] = seg
            self.record("segment_alloc", address, total, stream, pool)
            best = (seg, seg["blocks"][0])
        seg, block = best
        remaining = block[1] - size
        split = remaining >= MIN_BLOCK if small else remaining > SMALL_SIZE
        if split and not small and self.max_split_size is not None and size >= self.max_split_size:
            split = False
            self.unsplit += 1
        if split:
            rest = [block[0] + size, remaining, 0, "free"]
            block[1] = size
            seg["blocks"].insert(seg["blocks"].index(block) + 1, rest)
        block[2] = request
        block[3] = "allocated"
        self.record("alloc", block[0], request, stream, pool)
        return block[0]

    def find(self, address):
        for seg in self.segments.values():
            for block in seg["blocks"]:
                if block[0] == address:
                    return seg, block
        raise KeyError(address)

    def free(self, address, pending=False):
        seg, block = self.find(address)
        self.record("free_requested", address, block[2], seg["stream"], seg["pool"])
        block[3] = "pending"
        if not pending:
            self.complete(address)

    def complete(self, address):
        seg, block = self.find(address)
        self.record("free_completed", address, block[2], seg["stream"], seg["pool"])
        block[2] = 0
        block[3] = "free"
        blocks = seg["blocks"]
        i = blocks.index(block)
        if i + 1 < len(blocks) and blocks[i + 1][3] == "free":
            block[1] += blocks.pop(i + 1)[1]
        if i > 0 and blocks[i - 1][3] == "free":
            blocks[i - 1][1] += blocks.pop(i)[1]

    def empty_cache(self):
        for address in sorted(self.segments):
            seg = self.segments[address]
            if all(b[3] == "free" for b in seg["blocks"]):
                self.record("segment_free", address, seg["size"], seg["stream"], seg["pool"])
                del self.segments[address]

    # What memsnap reports for a moment, from the explicit blocks.
    def state(self):
        totals = dict(reserved=0, allocated=0, awaiting_free=0, free=0, largest_free_block=0, blocks=0)
        rows = {}
        for address, seg in self.segments.items():
            row = dict(reserved=seg["size"], allocated=0, awaiting_free=0, free=0, largest_free_block=0,
                       blocks=len(seg["blocks"]))
            for _, size, _, state in seg["blocks"]:
                if state == "allocated":
                    row["allocated"] += size
                elif state == "pending":
                    row["awaiting_free"] += size
                else:
                    row["free"] += size
                    row["largest_free_block"] = max(row["largest_free_block"], size)
            rows[address] = row
            for key in totals:
                totals[key] = max(totals[key], row[key]) if key == "largest_free_block" else totals[key] + row[key]
        return totals, rows

    def reserved(self):
        return sum(seg["size"] for seg in self.segments.values())

    def dump(self):
        names = {"allocated": "active_allocated", "pending": "active_pending_free", "free": "inactive"}
        segments = []
        for address in sorted(self.segments):
            seg = self.segments[address]
            blocks = [{"address": a, "size": s, "requested_size": r, "state": names[st], "frames": []}
                      for a, s, r, st in seg["blocks"]]
            allocated = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
            active = sum(b["size"] for b in blocks if b["state"] != "inactive")
            segments.append({"device": 0, "address": address, "total_size": seg["size"],
                             "allocated_size": allocated, "active_size": active,
                             "requested_size": sum(b["requested_size"] for b in blocks),
                             "stream": seg["stream"], "segment_type": "small" if seg["small"] else "large",
                             "segment_pool_id": seg["pool"], "is_expandable": False,
                             "frames": [], "blocks": blocks})
        document = {"segments": segments, "device_traces": [self.trace]}
        if self.max_split_size is not None or self.divisions is not None:
            # As _dump_snapshot writes them (PyTorch 2.1+).
            document["allocator_settings"] = {
                "max_split_size": self.max_split_size if self.max_split_size is not None else -1,
                "expandable_segments": False,
                "roundup_power2_divisions": {str(1 << k): d for k, d in enumerate(self.divisions or [0] * 16)}}
        return document


def workload(seed, operations, warmup=0, **settings):
    """Returns the allocator after `operations` random steps, and the
    simulator's state after chosen numbers of trace entries."""
    rng = random.Random(seed)
    sim = Allocator(rng, **settings)
    live, pending = [], []
    checkpoints = {}
    sim.recording = warmup == 0
    for step in range(warmup + operations):
        if step == warmup:
            sim.recording = True
        roll = rng.random()
        if roll < 0.5 or not live:
            kind = rng.random()
            if kind < 0.5:
                request = rng.randint(1, 600 * KiB)
            elif kind < 0.85:
                request = rng.randint(1 * MiB, 12 * MiB)
            else:
                request = rng.randint(12 * MiB, 90 * MiB)
            stream = rng.choice([0, 0, 0, 7])
            pool = (1, 0) if rng.random() < 0.08 else (0, 0)
            live.append(sim.malloc(request, stream, pool))
        elif roll < 0.9:
            address = live.pop(rng.randrange(len(live)))
            if rng.random() < 0.15:
                sim.free(address, pending=True)
                pending.append(address)
            else:
                sim.free(address)
        elif roll < 0.97 and pending:
            sim.complete(pending.pop(0))
        elif roll >= 0.97:
            sim.empty_cache()
        if sim.recording and rng.random() < 0.03:
            checkpoints[len(sim.trace)] = sim.state()
    return sim, checkpoints


def write(work, name, document):
    path = os.path.join(work, name)
    with open(path, "wb") as f:
        pickle.dump(document, f, protocol=4)
    return path


def segments_json(memsnap, path, *extra):
    got = run(memsnap, ["segments", "--json", "--top", "1000000", *extra, path])
    if got.returncode != 0:
        return None, got.stderr.strip()
    return json.loads(got.stdout), ""


def compare_state(name, report, expected):
    totals, rows = expected
    keys = list(totals)
    got_totals = {k: report["totals"][k] for k in keys}
    got_rows = {s["address"]: {k: s[k] for k in keys} for s in report["segments"]}
    problems = []
    if got_totals != totals:
        problems.append("totals %s, simulator %s" % (got_totals, totals))
    if got_rows != rows:
        wrong = sorted(set(got_rows) ^ set(rows)) + [a for a in rows if a in got_rows and got_rows[a] != rows[a]]
        problems.append("%d segments differ, first %s: %s vs %s" % (
            len(wrong), hex(wrong[0]), got_rows.get(wrong[0]), rows.get(wrong[0])))
    return check.is_true(not problems, "%s: %s" % (name, "; ".join(problems)[:700]))


# Seed 4 runs under PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:24,roundup_power2_divisions:[...]:
# blocks for requests of 24 MiB or more are never split, and requests round to 4, 8 or 2
# divisions of their power-of-two interval.
SETTINGS = {4: dict(max_split_size=24 * MiB, divisions=[4, 8, 8, 2] + [4] * 12)}


def replay_matches_a_simulated_allocator(memsnap, work):
    for seed in (1, 2, 3, 4):
        sim, checkpoints = workload(seed, 2500, **SETTINGS.get(seed, {}))
        if seed in SETTINGS:
            with check("seed %d: the settings were exercised (%d blocks left whole, %d power-2 roundings)"
                       % (seed, sim.unsplit, sim.power2_rounded)):
                assert sim.unsplit > 0 and sim.power2_rounded > 0
        path = write(work, "history-%d.pickle" % seed, sim.dump())
        report, error = segments_json(memsnap, path)
        if not check.is_true(report is not None, "seed %d: segments --json runs: %s" % (seed, error)):
            continue
        history = report["history"]
        with check("seed %d: the trace replays to the dump block for block (%d entries)" % (seed, history["entries"])):
            assert (history["exact"] and history["misfits_backward"] == 0 and history["misfits_forward"] == 0
                    and history["entries"] == len(sim.trace) and history["segments_at_start"] == 0
                    and history["rounding"] == "cuda"), history
        t0 = sim.trace[0]["time_us"]
        compared = 0
        chosen = sorted(checkpoints)
        for position in chosen[::max(1, len(chosen) // 12)]:
            seconds = (sim.trace[position - 1]["time_us"] - t0) / 1e6
            at, error = segments_json(memsnap, path, "--time", repr(seconds))
            if at is None or at["position"] != position:
                check.fail("seed %d: --time %s is after entry %d: %s" % (seed, seconds, position, error or at["position"]))
                continue
            compared += compare_state("seed %d: the state after %d entries (t=%.6f s) equals the simulator's"
                                      % (seed, position, seconds), at, checkpoints[position])
        with check("seed %d: states compared at 8 or more times" % seed):
            assert compared >= 8, compared
        # Reserved over time: parse's peak against the simulator's.
        peak = reserved = 0
        for entry in sim.trace:
            if entry["action"] == "segment_alloc":
                reserved += entry["size"]
            elif entry["action"] == "segment_free":
                reserved -= entry["size"]
            peak = max(peak, reserved)
        parsed = run(memsnap, ["parse", "--json", path])
        got = json.loads(parsed.stdout)["reserved"] if parsed.returncode == 0 else None
        with check("seed %d: parse's reserved peak equals the simulator's (%d)" % (seed, peak)):
            assert got is not None and got["peak"] == peak and got["at_dump"] == sim.reserved(), got

def late_start(memsnap, work):
    # Recording starts after 600 operations: the blocks already there come
    # from the dump walked back; the round trip still holds.
    sim, checkpoints = workload(11, 1500, warmup=600)
    path = write(work, "history-late.pickle", sim.dump())
    report, error = segments_json(memsnap, path)
    assert report is not None, "late start: segments --json runs: %s" % error
    history = report["history"]
    with check("late start: exact, with what was there before the first entry counted"):
        assert history["exact"] and history["segments_at_start"] > 0 and history["blocks_at_start"] > 0, history
    text = run(memsnap, ["segments", path]).stdout
    with check("late start: the text says recording started late"):
        assert "recording started late" in text, text[-600:]
    last = max(checkpoints)
    t0 = sim.trace[0]["time_us"]
    at, error = segments_json(memsnap, path, "--time", repr((sim.trace[last - 1]["time_us"] - t0) / 1e6))
    if check.is_true(at is not None, "late start: --time runs: %s" % error):
        # Totals of reserved and allocated bytes do not depend on the sizes
        # of blocks allocated before the trace, once none of those is live.
        totals = checkpoints[last][0]
        with check("late start: reserved at a late checkpoint equals the simulator's"):
            assert at["totals"]["reserved"] == totals["reserved"], (at["totals"], totals)


def disagreeing_dump(memsnap, work):
    sim, _ = workload(5, 800)
    document = sim.dump()
    victim = None
    for segment in document["segments"]:
        for block in segment["blocks"]:
            if block["state"] == "active_allocated" and victim is None:
                victim = block
    victim["size"] += MIN_BLOCK  # the dump now says a larger block
    path = write(work, "history-disagreeing.pickle", document)
    report, error = segments_json(memsnap, path)
    if check.is_true(report is not None, "disagreeing dump: segments --json runs: %s" % error):
        history = report["history"]
        with check("disagreeing dump: not exact, and the first difference names the block"):
            assert (not history["exact"] and history["differences"] >= 1
                    and ("%#x" % victim["address"]) in (history["first_difference"] or "")), history
    text = run(memsnap, ["segments", path]).stdout
    with check("disagreeing dump: the text says the states at other times are approximate"):
        assert "does not reproduce the dump" in text and "first difference" in text, text[-800:]


def refusals(memsnap, work):
    sim, _ = workload(7, 300)
    document = sim.dump()
    for entry in document["device_traces"][0]:
        del entry["time_us"]
    path = write(work, "history-no-time.pickle", document)
    got = run(memsnap, ["segments", "--time", "1", path])
    with check("no time_us: --time exits 1 naming the cause"):
        assert got.returncode == 1 and "time_us" in got.stderr, (got.returncode, got.stderr)
    got = run(memsnap, ["segments", "--time", "-1", path])
    with check("--time -1 is a usage error (exit 2)"):
        assert got.returncode == 2, (got.returncode, got.stderr)
    sim, _ = workload(8, 300)
    path = write(work, "history-late-time.pickle", sim.dump())
    got = run(memsnap, ["segments", "--time", "1e9", path])
    with check("--time past the end: the state at the last entry, said so"):
        assert got.returncode == 0 and "past the trace's end" in got.stdout, got.stdout[:400]
    at, _ = segments_json(memsnap, path, "--time", "1e9")
    dump, _ = segments_json(memsnap, path)
    with check("--time past the end gives the dump's totals"):
        assert (at is not None and dump is not None and at["totals"] == dump["totals"]
                and at["position"] == len(sim.trace)), (at and at["totals"], dump and dump["totals"])
    got = run(memsnap, ["segments", "--time", "1", write(work, "history-segments-only.pickle",
                                                           sim.dump()["segments"])])
    with check("a segments-only file: --time exits 1 saying there is no trace"):
        assert got.returncode == 1 and "no trace entries" in got.stderr, (got.returncode, got.stderr)


def segment_devices(parsed):
    """The devices that have segments, from `parse --json`: its per-device
    rows when the file has several devices, else its one device."""
    rows = parsed.get("per_device") or [{"device": parsed["device"], "segments": parsed["segments"]}]
    return sorted(row["device"] for row in rows if row["segments"]["count"] > 0)


def fixtures(memsnap, folder):
    replayed = exact = 0
    for name in sorted(os.listdir(folder)):
        if not name.endswith((".pickle", ".pkl")):
            continue
        path = os.path.join(folder, name)
        # The devices with segments: parse --json lists them (shared with the
        # other drivers), where `dump` would print the whole file as JSON.
        parsed, _ = testlib.parse_json(memsnap, path)
        if parsed is None:
            continue
        for device in segment_devices(parsed):
            report, error = segments_json(memsnap, path, "--device", str(device))
            if not check.is_true(report is not None, "%s device %d: segments --json runs: %s" % (name, device, error)):
                continue
            history = report["history"]
            if not history["replayable"]:
                with check("%s device %d: not replayable, with the reason" % (name, device)):
                    assert bool(history["reason"]), history
                continue
            replayed += 1
            exact += check.is_true(
                history["exact"] and history["misfits_forward"] == 0 and history["misfits_backward"] == 0,
                "%s device %d: the trace (%d entries) replays to the dump block for block: %s"
                % (name, device, history["entries"], history))
    with check("the replay was checked on every fixture with block addresses"):
        assert replayed >= 40, replayed



def test_replay_matches_a_simulated_allocator(memsnap, work):
    replay_matches_a_simulated_allocator(memsnap, work)


def test_late_start(memsnap, work):
    late_start(memsnap, work)


def test_disagreeing_dump(memsnap, work):
    disagreeing_dump(memsnap, work)


def test_refusals(memsnap, work):
    refusals(memsnap, work)


@pytest.mark.fixtures
def test_every_fixture(memsnap, fixtures_dir):
    fixtures(memsnap, fixtures_dir)
