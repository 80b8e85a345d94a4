#!/usr/bin/env python3
"""Functions in src/ and python/src/ are at most LIMIT lines (DESIGN.md's style:
each function does one thing).

Reads the clang-formatted sources: a function is a definition that starts at
column 0 (the code does not indent namespaces) and whose body ends at the
first later line that is exactly "}"; lambdas and local classes count in the
function that holds them. Member functions written inside their class (in
headers, indented) are not read. Functions longer than LIMIT that are listed in
KNOWN_LONG (debt being paid, each with its length when listed) may stay as
long as they do not grow; any other is a failure, and so is a listed one that
grew or is gone (take it off the list).

  check_function_length.py [--root DIR] [--limit 80] [--report]
  check_function_length.py --self-test   plant a long function and a short one
                                         in a scratch tree: exactly the long
                                         one must be caught
"""
import argparse
import os
import re
import shutil
import sys
import tempfile

LIMIT = 80

# name -> lines when listed: shrink or split them, then take them off.
KNOWN_LONG = {
}

SIGNATURE = re.compile(r"^(?:[A-Za-z_][\w:<>,\s\*&~\[\]]*?\b)?([A-Za-z_~][\w:~]*(?:operator\S*)?)\s*\(")
SKIP_START = ("namespace", "struct", "class", "enum", "union", "template", "#", "//", "}",
              "using", "static_assert", "extern", "typedef", "constexpr", "inline constexpr")


def functions(path):
    """(name, first line, line count) of each function defined at column 0."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    found = []
    i = 0
    while i < len(lines):
        line = lines[i]
        match = SIGNATURE.match(line) if line and not line[0].isspace() else None
        if match is None or line.startswith(SKIP_START) or line.rstrip().endswith(";"):
            i += 1
            continue
        # The signature may go on over several lines; the body opens with "{".
        j = i
        while j < len(lines) and not lines[j].rstrip().endswith("{"):
            if lines[j].rstrip().endswith(";"):
                break
            j += 1
        if j >= len(lines) or not lines[j].rstrip().endswith("{") or j - i > 8:
            i += 1
            continue
        k = j + 1
        while k < len(lines) and lines[k] != "}":
            k += 1
        found.append((match.group(1), i + 1, k - i + 1))
        i = k + 1
    return found


def over_limit(root, limit):
    """{"path:function": (lines, first line)} of the functions over `limit`."""
    over = {}
    for top in ("src", os.path.join("python", "src")):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith(".cc"):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                for function, line, count in functions(path):
                    if count > limit:
                        over[f"{rel}:{function}"] = (count, line)
    return over


def self_test():
    work = tempfile.mkdtemp(prefix="memsnap_function_length_")
    try:
        os.makedirs(os.path.join(work, "src", "analysis"))
        body = "".join(f"  total += {i};\n" for i in range(LIMIT))
        with open(os.path.join(work, "src", "analysis", "planted.cc"), "w") as f:
            f.write("namespace memsnap {\n\nint short_one(int x) {\n  return x;\n}\n\n"
                    "std::vector<int> long_one(const Snapshot& snapshot,\n"
                    "                          int device) {\n  int total = 0;\n" + body +
                    "  return {total};\n}\n\n}  // namespace memsnap\n")
        over = over_limit(work, LIMIT)
        expected = {"src/analysis/planted.cc:long_one"}
        if set(over) != expected:
            print(f"FAIL: expected exactly {sorted(expected)}, found {sorted(over)}")
            return 1
        print(f"self-test: the planted {over['src/analysis/planted.cc:long_one'][0]}-line "
              "function is caught, the short one is not")
        return 0
    finally:
        shutil.rmtree(work)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    parser.add_argument("--limit", type=int, default=LIMIT)
    parser.add_argument("--report", action="store_true", help="list every function over the limit")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    over = over_limit(args.root, args.limit)
    problems = []
    for key, (count, line) in sorted(over.items()):
        listed = KNOWN_LONG.get(key)
        if listed is None:
            problems.append(f"{key} (line {line}) is {count} lines, over {args.limit}")
        elif count > listed:
            problems.append(f"{key} (line {line}) grew to {count} lines (listed at {listed})")
    for key in sorted(set(KNOWN_LONG) - set(over)):
        problems.append(f"{key} is listed in KNOWN_LONG but no longer over {args.limit}: "
                        "take it off the list")
    if args.report:
        for key, (count, line) in sorted(over.items(), key=lambda kv: -kv[1][0]):
            print(f"    {key!r}: {count},")
    for problem in problems:
        print("FAIL " + problem)
    print(f"{len(over)} functions over {args.limit} lines ({len(KNOWN_LONG)} listed as debt), "
          f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
