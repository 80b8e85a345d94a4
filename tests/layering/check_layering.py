#!/usr/bin/env python3
"""The layering rule of docs/layering.md, checked on every #include "...".

Layers, bottom up: util, io, pickle, snapshot, analysis, then report and
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
RANKS = [["util"], ["io"], ["pickle"], ["snapshot"], ["analysis"], ["report", "formats"], ["runs"],
         ["cli"], ["main", "python"]]
RANK = {name: rank for rank, names in enumerate(RANKS) for name in names}

# Layer of each public header, by what it is about.
PUBLIC_HEADERS = {
    "memsnap/error.h": "util",
    "memsnap/bytes.h": "util",
    "memsnap/version.h": "util",
    "memsnap/model.h": "snapshot",
    "memsnap/load.h": "snapshot",
    "memsnap/replay.h": "analysis",
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
SOURCE_SUFFIXES = (".h", ".cc", ".h.in")


def layer_of_include(path):
    """Layer of an include path as written ("analysis/x.h", "memsnap/model.h")."""
    if path.startswith("memsnap/"):
        return PUBLIC_HEADERS.get(path)
    top = path.split("/", 1)[0]
    return top if top in RANK and "/" in path else None


def layer_of_file(root, file):
    rel = os.path.relpath(file, root).replace(os.sep, "/")
    if rel.startswith("include/"):
        return PUBLIC_HEADERS.get(rel[len("include/"):].removesuffix(".in")), True, rel
    if rel == "src/main.cc":
        return "main", False, rel
    if rel.startswith("python/src/"):
        return "python", False, rel
    parts = rel.split("/")
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
    """An upward include and a public header reaching into src/ must both fail."""
    work = tempfile.mkdtemp(prefix="memsnap_layering_")
    try:
        os.makedirs(os.path.join(work, "src", "pickle"))
        os.makedirs(os.path.join(work, "src", "snapshot"))
        os.makedirs(os.path.join(work, "include", "memsnap"))
        os.makedirs(os.path.join(work, "src", "analysis"))
        os.makedirs(os.path.join(work, "src", "formats"))
        with open(os.path.join(work, "src", "formats", "summary_json.h"), "w") as f:
            f.write('#include "analysis/run_summary.h"\n#include "report/format.h"\n')
        with open(os.path.join(work, "src", "analysis", "run_summary.h"), "w") as f:
            f.write('#include "formats/summary_json.h"\n')  # analysis reads no file format
        with open(os.path.join(work, "src", "snapshot", "decoder.h"), "w") as f:
            f.write('#include "pickle/vm.h"\n#include "memsnap/model.h"\n')
        with open(os.path.join(work, "src", "pickle", "vm.h"), "w") as f:
            f.write('#include "snapshot/decoder.h"\n')  # the pickle layer knows no snapshot
        with open(os.path.join(work, "include", "memsnap", "model.h"), "w") as f:
            f.write('#include "analysis/sources.h"\n')
        problems, _ = check(work)
        expected = [
            'src/pickle/vm.h (pickle) includes "snapshot/decoder.h" (snapshot): upward include',
            'include/memsnap/model.h (snapshot) includes "analysis/sources.h" (analysis): upward include',
            'src/analysis/run_summary.h (analysis) includes "formats/summary_json.h" (formats): upward include',
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
