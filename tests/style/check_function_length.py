#!/usr/bin/env python3
"""Functions in src/, python/src/ and include/ are at most LIMIT lines
(DESIGN.md's style: each function does one thing).

Reads the clang-formatted sources (.cc and .h): a function is a definition
whose body ends at the first later line that is its first line's indentation
followed by exactly "}". At namespace scope (column 0: the code does not
indent namespaces) and in the body of every class, struct or union defined
there, at any depth of nesting and any indentation: a member function written
inside its class is read as Class::name (Outer::Inner::name when nested).
Lambdas and local classes count in the function that holds them. Functions
longer than LIMIT that are listed in KNOWN_LONG (debt being paid, each with
its length when listed) may stay as long as they do not grow; any other is a
failure, and so is a listed one that grew or is gone (take it off the list).

  check_function_length.py [--root DIR] [--limit 80] [--report]
  check_function_length.py --self-test   plant long and short functions (one
                                         at namespace scope, one a member
                                         written in its class, one in a nested
                                         class) in a scratch tree: exactly the
                                         long ones must be caught
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
              "using", "static_assert", "extern", "typedef")
CLASS_START = re.compile(r"^(?:class|struct|union)\s+(?:\[\[[^\]]*\]\]\s*)?([A-Za-z_]\w*)")
ENUM_START = re.compile(r"^enum\b")
# How many lines a signature (or a class head) may take before its "{".
HEAD_LINES = 20


def indentation(line):
    return len(line) - len(line.lstrip(" "))


def head_end(lines, i):
    """The line that opens the body of the definition starting at line i (it
    ends with "{"), or None: a declaration (";"), a body on one line ("}"),
    or no "{" within HEAD_LINES lines."""
    for j in range(i, min(len(lines), i + HEAD_LINES)):
        text = lines[j].rstrip()
        if text.endswith("{"):
            return j
        if text.endswith((";", "}")):
            return None
    return None


def closing(lines, j, close):
    """The first line after j that is exactly `close`, or None."""
    for k in range(j + 1, len(lines)):
        if lines[k] == close:
            return k
    return None


def scope_functions(lines, start, end, indent, prefix, found):
    """Appends (name, first line, line count) of the functions defined in
    lines[start:end] at `indent` (a namespace's or a class's body), reading
    the classes defined there too."""
    i = start
    while i < end:
        line = lines[i]
        if not line.strip() or indentation(line) != indent:
            i += 1
            continue
        text = line[indent:]
        nested = CLASS_START.match(text) or ENUM_START.match(text)
        if nested is not None:
            j = head_end(lines, i)
            k = closing(lines, j, " " * indent + "};") if j is not None else None
            if k is None:
                i += 1
                continue
            if not ENUM_START.match(text):
                scope_functions(lines, j + 1, k, indent + 2, prefix + nested.group(1) + "::", found)
            i = k + 1
            continue
        match = SIGNATURE.match(text)
        if match is None or text.startswith(SKIP_START) or text.rstrip().endswith(";"):
            i += 1
            continue
        j = head_end(lines, i)
        k = closing(lines, j, " " * indent + "}") if j is not None else None
        if k is None or k > end:
            i += 1
            continue
        found.append((prefix + match.group(1), i + 1, k - i + 1))
        i = k + 1


def functions(path):
    """(name, first line, line count) of each function defined at namespace
    scope or in a class body."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    found = []
    scope_functions(lines, 0, len(lines), 0, "", found)
    return found


def over_limit(root, limit):
    """{"path:function": (lines, first line)} of the functions over `limit`."""
    over = {}
    for top in ("src", os.path.join("python", "src"), "include"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith((".cc", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                for function, line, count in functions(path):
                    key = f"{rel}:{function}"
                    if count > limit and count > over.get(key, (0, 0))[0]:
                        over[key] = (count, line)
    return over


def self_test():
    work = tempfile.mkdtemp(prefix="memsnap_function_length_")
    try:
        os.makedirs(os.path.join(work, "src", "analysis"))

        def body(indent):
            return "".join(f"{indent}total += {i};\n" for i in range(LIMIT))

        with open(os.path.join(work, "src", "analysis", "planted.cc"), "w") as f:
            f.write("namespace memsnap {\n\nint short_one(int x) {\n  return x;\n}\n\n"
                    "std::vector<int> long_one(const Snapshot& snapshot,\n"
                    "                          int device) {\n  int total = 0;\n" + body("  ") +
                    "  return {total};\n}\n\n"
                    # A class in a .cc file: a short member, a one-line one, a
                    # declaration and a long member written in the class.
                    "class Decoder {\n public:\n  int size() const { return size_; }\n"
                    "  void forward(int x);\n  int short_member(int x) {\n    return x;\n  }\n\n"
                    " private:\n  void long_member(Vm& vm,\n                   Value raw) {\n"
                    "    int total = 0;\n" + body("    ") + "    size_ = total;\n  }\n\n"
                    "  int size_ = 0;\n};\n\n}  // namespace memsnap\n")
        # A header: a struct nested in a class, its long member deeper still;
        # a long lambda and a local class count in the function that holds them.
        with open(os.path.join(work, "src", "analysis", "planted.h"), "w") as f:
            f.write("namespace memsnap {\n\nclass Outer {\n public:\n  struct Inner {\n"
                    "    int nested_long() {\n      int total = 0;\n" + body("      ") +
                    "      return total;\n    }\n  };\n\n"
                    "  int holds_a_lambda() {\n    auto add = [&](int total) {\n" + body("      ") +
                    "      return total;\n    };\n    return add(0);\n  }\n};\n\n"
                    "inline int holds_a_local_class() {\n  struct Local {\n    int short_local() {\n"
                    "      return 1;\n    }\n  };\n  return Local().short_local();\n}\n\n"
                    "}  // namespace memsnap\n")
        over = over_limit(work, LIMIT)
        expected = {"src/analysis/planted.cc:long_one", "src/analysis/planted.cc:Decoder::long_member",
                    "src/analysis/planted.h:Outer::Inner::nested_long", "src/analysis/planted.h:Outer::holds_a_lambda"}
        if set(over) != expected:
            print(f"FAIL: expected exactly {sorted(expected)}, found {sorted(over)}")
            return 1
        for key in sorted(expected):
            print(f"self-test: the planted {over[key][0]}-line {key.split(':', 1)[1]} is caught")
        print("self-test: the short ones, the one-line member, the declaration and the local class are not")
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
