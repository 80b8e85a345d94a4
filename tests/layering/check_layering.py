#!/usr/bin/env python3
"""The layering rule of docs/layering.md, checked on every #include "...".

Layers, bottom up: util, io, pickle, snapshot, analysis in two (its core:
the replay, sources and keys, categories, segments, steps, the allocator's
state, FileAnalysis; then its reports: one result per report), then report and
formats side by side (one rank), runs (many files at once, for every front
end), cli, and above them src/main.cc and the Python
extension (python/src/: memsnap._core). A file may
include its own rank and the ranks below, never one above. Public headers (include/memsnap/*.h) belong to the
layer named in PUBLIC_HEADERS and may include only other public headers,
since they are installed without src/.

  check_layering.py [--root DIR]     check the tree; exit 1 listing violations
  check_layering.py --self-test      plant an upward include in a copy of the
                                     rule's inputs and check that it is caught
"""
import argparse
import os
import re
import shutil
import sys
import tempfile

# Each rank's layers; report (renderers) and formats (the files memsnap writes
# and reads back: run summaries, budgets) share one.
RANKS = [["util"], ["io"], ["pickle"], ["snapshot"], ["analysis/core"], ["analysis/reports"],
         ["report", "formats"], ["runs"], ["service"], ["serve"], ["cli"], ["main", "python"]]
RANK = {name: rank for rank, names in enumerate(RANKS) for name in names}

# Layer of each public header, by what it is about.
PUBLIC_HEADERS = {
    "memsnap/error.h": "util",
    "memsnap/bytes.h": "util",
    "memsnap/version.h": "util",
    "memsnap/model.h": "snapshot",
    "memsnap/load.h": "snapshot",
    "memsnap/replay.h": "analysis/core",
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)

# PyTorch's allocator policy lives in one file: its constants and the rules
# named after PyTorch's functions are defined there and nowhere else (a
# second copy drifts: issue 58 found three of the split rule).
POLICY_FILES = ("src/analysis/core/pytorch_allocator_policy.h",
                "src/analysis/core/pytorch_allocator_policy.cc")
POLICY_DEFINITION = re.compile(
    r"\bk(?:MinBlockSize|SmallSize|SmallBuffer|LargeBuffer|MinLargeAlloc|RoundLarge)\s*=|"
    r"^[\w:<>\s]*\b(?:should_split|round_size|allocation_size|roundup_power2_next_division)"
    r"\s*\([^;{]*\)\s*(?:const\s*)?\{", re.MULTILINE)
SOURCE_SUFFIXES = (".h", ".cc", ".h.in")


def layer_of_include(path):
    """Layer of an include path as written ("analysis/x.h", "memsnap/model.h")."""
    if path.startswith("memsnap/"):
        return PUBLIC_HEADERS.get(path)
    parts = path.split("/")
    if parts[0] == "analysis":  # analysis/core/x.h or analysis/reports/x.h, nothing else
        return "/".join(parts[:2]) if len(parts) == 3 and "/".join(parts[:2]) in RANK else None
    return parts[0] if parts[0] in RANK and len(parts) > 1 else None


def layer_of_file(root, file):
    rel = os.path.relpath(file, root).replace(os.sep, "/")
    if rel.startswith("include/"):
        return PUBLIC_HEADERS.get(rel[len("include/"):].removesuffix(".in")), True, rel
    if rel == "src/main.cc":
        return "main", False, rel
    if rel.startswith("python/src/"):
        return "python", False, rel
    parts = rel.split("/")
    if len(parts) > 3 and parts[1] == "analysis":
        sub = "analysis/" + parts[2]
        return (sub if sub in RANK else None), False, rel
    return (parts[1] if len(parts) > 2 and parts[1] in RANK else None), False, rel


def check(root):
    problems = []
    files = []
    for top in ("include", "src", os.path.join("python", "src")):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            files += [os.path.join(dirpath, n) for n in names if n.endswith(SOURCE_SUFFIXES)]
    for file in sorted(files):
        layer, public, rel = layer_of_file(root, file)
        if layer is None:
            problems.append(f"{rel}: not in a known layer (add it to tests/layering/check_layering.py)")
            continue
        with open(file, encoding="utf-8") as f:
            text = f.read()
        if rel not in POLICY_FILES:
            for found in POLICY_DEFINITION.finditer(text):
                problems.append(f"{rel}: defines PyTorch's allocator policy ({found.group(0).strip()[:60]}) "
                                f"outside {POLICY_FILES[0]}")
        for included in INCLUDE.findall(text):
            target = layer_of_include(included)
            if target is None:
                problems.append(f'{rel}: includes "{included}", which is in no known layer')
            elif RANK[target] > RANK[layer]:
                problems.append(f'{rel} ({layer}) includes "{included}" ({target}): upward include')
            elif public and not included.startswith("memsnap/"):
                problems.append(f'{rel}: public header includes private "{included}"')
    return problems, len(files)


def self_test():
    """Upward includes (a report included by the analysis core among them) and a
    public header reaching into src/ must all fail."""
    work = tempfile.mkdtemp(prefix="memsnap_layering_")
    try:
        def plant(rel, text):
            os.makedirs(os.path.join(work, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(work, rel), "w") as f:
                f.write(text)

        plant("src/formats/summary_json.h",
              '#include "analysis/reports/run_summary.h"\n#include "report/format.h"\n')
        plant("src/analysis/reports/run_summary.h",
              '#include "formats/summary_json.h"\n')  # analysis reads no file format
        plant("src/analysis/core/sources.h",
              '#include "analysis/reports/segment_report.h"\n')  # the core needs no report
        plant("src/analysis/reports/segment_report.h", '#include "analysis/core/sources.h"\n')
        plant("src/snapshot/decoder.h", '#include "pickle/vm.h"\n#include "memsnap/model.h"\n')
        plant("src/pickle/vm.h", '#include "snapshot/decoder.h"\n')  # the pickle layer knows no snapshot
        plant("include/memsnap/model.h", '#include "analysis/core/sources.h"\n')
        plant("src/analysis/core/allocator_walk.h",
              "constexpr uint64_t kMinBlockSize = 512;\n")  # the policy's constant, twice
        plant("src/analysis/core/pytorch_allocator_policy.h",
              "inline constexpr uint64_t kMinBlockSize = 512;\n"
              "constexpr bool should_split(bool small, uint64_t remaining) {\n  return small;\n}\n")
        problems, _ = check(work)
        expected = [
            'src/pickle/vm.h (pickle) includes "snapshot/decoder.h" (snapshot): upward include',
            'include/memsnap/model.h (snapshot) includes "analysis/core/sources.h" (analysis/core): upward include',
            'src/analysis/reports/run_summary.h (analysis/reports) includes "formats/summary_json.h" (formats): upward include',
            'src/analysis/core/sources.h (analysis/core) includes "analysis/reports/segment_report.h" (analysis/reports): upward include',
            "src/analysis/core/allocator_walk.h: defines PyTorch's allocator policy (kMinBlockSize =) "
            "outside src/analysis/core/pytorch_allocator_policy.h",
        ]
        missing = [e for e in expected if e not in problems]
        for line in problems:
            print("caught: " + line)
        if missing or len(problems) != len(expected):
            print("FAIL: expected exactly " + "; ".join(expected))
            return 1
        print("self-test: %d planted violations caught, 0 false alarms" % len(expected))
        return 0
    finally:
        shutil.rmtree(work)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    problems, count = check(args.root)
    for line in problems:
        print("FAIL " + line)
    print(f"{count} files checked, {len(problems)} layering violations")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
