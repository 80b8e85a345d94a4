#!/usr/bin/env python3
"""Write one snapshot per rank of a pipeline-parallel run, with numbers known
in advance: rank r is in stage r // (ranks / stages); each stage holds its own
weights (allocated before the first step, never freed) and makes its own
activations in every step (allocated, then freed); chosen outlier ranks also
make one larger activation from a line of their own in the last step. So a
rank's absolute peak is weights + activations (+ the outlier's extra), its
sources are its stage's lines, and the ranks fall into one group per stage
plus one per outlier.

  make_ranks.py --out DIR --ranks 64 --stages 4 --outlier 37 [--events 2000]

--manifest writes the expected peak, stage and largest source of every rank."""
import argparse
import json
import os
import pickle

MiB = 1 << 20
T0 = 1_700_000_000_000_000


FUNCTION = "stage{stage}_forward"  # --function: the model's function name (`forward` makes them activations)


def frames(stage, line):
    return [{"name": FUNCTION.format(stage=stage), "filename": f"/work/model/stage{stage}.py", "line": line},
            {"name": "train_step", "filename": "/work/train.py", "line": 88}]


def rank_snapshot(rank, stage, steps, per_step, outlier, extra_bytes):
    weights = [(64 + 16 * stage) * MiB, 32 * MiB]  # two weight tensors per stage
    activation = (48 + 8 * stage) * MiB  # per allocation
    trace, marks, t = [], [], T0
    addr = 0x7F0000000000 + rank * (1 << 36)
    live = []
    for k, size in enumerate(weights):
        trace.append({"action": "alloc", "addr": addr, "size": size, "stream": 0, "time_us": t,
                      "frames": frames(stage, 10 + k)})
        live.append((addr, size))
        addr += size
        t += 100
    peak = sum(weights)
    for step in range(steps):
        marks.append({"name": f"ProfilerStep#{step}", "stage": "START", "device": 0, "time_us": t})
        t += 10
        made = []
        for j in range(per_step):
            trace.append({"action": "alloc", "addr": addr, "size": activation, "stream": 0, "time_us": t,
                          "frames": frames(stage, 40 + j % 3)})
            made.append((addr, activation))
            addr += activation
            t += 50
        extra = outlier and step == steps - 1
        if extra:
            trace.append({"action": "alloc", "addr": addr, "size": extra_bytes, "stream": 0, "time_us": t,
                          "frames": frames(stage, 99)})
            made.append((addr, extra_bytes))
            addr += extra_bytes
            t += 50
        peak = max(peak, sum(weights) + sum(size for _, size in made))
        for a, size in reversed(made):
            trace.append({"action": "free_requested", "addr": a, "size": size, "stream": 0, "time_us": t,
                          "frames": frames(stage, 60)})
            trace.append({"action": "free_completed", "addr": a, "size": size, "stream": 0, "time_us": t + 1,
                          "frames": frames(stage, 60)})
            t += 20
        marks.append({"name": f"ProfilerStep#{step}", "stage": "END", "device": 0, "time_us": t})
        t += 10
    # The dump: the weights live in one segment sized to the peak.
    base = 0x7F0000000000 + rank * (1 << 36)
    blocks = [{"address": a, "size": s, "requested_size": s, "state": "active_allocated", "frames": []}
              for a, s in live]
    used = sum(s for _, s in live)
    reserved = -(-peak // (2 * MiB)) * (2 * MiB)
    blocks.append({"address": base + used, "size": reserved - used, "requested_size": 0, "state": "inactive",
                   "frames": []})
    segment = {"device": 0, "address": base, "total_size": reserved, "allocated_size": used,
               "active_size": used, "requested_size": used, "stream": 0, "segment_type": "large",
               "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": blocks}
    snapshot = {"segments": [segment], "device_traces": [trace], "external_annotations": marks,
                "allocator_settings": {"expandable_segments": False}}
    largest_line = 10 if weights[0] >= per_step // 3 * activation else 40
    return snapshot, peak, largest_line


def main():
    global FUNCTION
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--outlier", type=int, action="append", default=[])
    parser.add_argument("--extra-mib", type=int, default=900, help="the outlier's extra activation")
    parser.add_argument("--events", type=int, default=2000, help="trace entries per rank, about")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every rank's activations count")
    parser.add_argument("--grow-rank", type=int, action="append", default=[],
                        help="ranks whose outlier extra is added (same as --outlier)")
    parser.add_argument("--prefix", default="snapshot_")
    parser.add_argument("--manifest")
    parser.add_argument("--function", default=FUNCTION,
                        help="the model function's name, {stage} for the stage (default %(default)s); "
                             "`forward` makes memsnap categorise the allocations as activations")
    args = parser.parse_args()
    FUNCTION = args.function
    os.makedirs(args.out, exist_ok=True)
    per_step = 6
    steps = max(1, args.events // (2 + 3 * per_step))
    outliers = set(args.outlier) | set(args.grow_rank)
    manifest = {}
    for rank in range(args.ranks):
        stage = rank * args.stages // args.ranks
        snapshot, peak, _ = rank_snapshot(rank, stage, steps, max(1, round(per_step * args.scale)),
                                          rank in outliers, args.extra_mib * MiB)
        path = os.path.join(args.out, f"{args.prefix}{rank}.pickle")
        with open(path, "wb") as f:
            pickle.dump(snapshot, f, protocol=4)
        manifest[rank] = {"file": path, "stage": stage, "peak": peak, "outlier": rank in outliers}
    if args.manifest:
        with open(args.manifest, "w") as f:
            json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
