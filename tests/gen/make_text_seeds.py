#!/usr/bin/env python3
"""Seeds for the files memsnap reads besides snapshots (fuzz/text_inputs.h):
run summaries, budgets, --category-rules files and patterns, each behind its
tag line, including the shapes that once crashed or hung (issue "Hostile
input, round three"): deep nesting, a many-part dotted TOML key, a long
traceback, nested quantifiers, long subjects, control characters.

    python3 tests/gen/make_text_seeds.py --memsnap build/memsnap fuzz/corpus

The summary and budget seeds are memsnap's own output for a small generated
snapshot, so that mutations start from a file the reader accepts.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memsnap", required=True)
    parser.add_argument("out")
    args = parser.parse_args()
    seeds = {}
    with tempfile.TemporaryDirectory() as work:
        snapshot = os.path.join(work, "run_3.pickle")
        subprocess.run([sys.executable, os.path.join(HERE, "make_snapshot.py"), "--out", snapshot,
                        "--events", "60", "--steps", "2", "--marks", "--oom", "--seed", "11"], check=True)
        summary = subprocess.run([args.memsnap, "summarize", "--json", snapshot], check=True,
                                 capture_output=True).stdout.decode()
        budget = subprocess.run([args.memsnap, "check", "--write-budget", snapshot], check=True,
                                capture_output=True).stdout.decode()
    document = json.loads(summary)
    seeds["summary"] = summary
    seeds["summary_min"] = json.dumps(document, separators=(",", ":"))
    document["allocator_settings"] = {"a": [[[[[[1]]]]]]}
    document["warnings"] = ["line\nbreak \x1b[31m", "::error::x"]
    document["unmeasurable"] = {"absolute": "x", "reserved": None, "fragmentation": None, "trace": "y"}
    seeds["summary_deep"] = json.dumps(document)
    seeds["summary_bom"] = "\ufeff" + summary
    seeds["budget_toml"] = budget
    seeds["budget_json"] = json.dumps({"max_peak": "12GiB", "max_growth": "5%", "no_oom": True,
                                       "category": {"activation": "1GiB"}})
    seeds["budget_dotted"] = "a" + ".b" * 40 + " = 1\n[category]\n\"act\\nivation\" = \"1MiB\"\n"
    seeds["rules"] = ("# comment\nactivation frame ^forward@\nparameter cpp at::native::\n"
                      "communication annotation ^nccl:all_reduce\ninput metadata batch=(\\d+)\n")
    seeds["rules_bad"] = "activation frame (a+)+$\nweights frame x\nparameter nowhere y\n\x00 frame z\n"
    seeds["regex_nested"] = "^(a+)+$\n" + "a" * 40 + "!"
    seeds["regex_rank"] = r"(?:rank|_)(\d{1,6})(\.[A-Za-z0-9]+)*$" + "\nnode3_rank12.pickle.gz"
    seeds["regex_traceback"] = ".*\n" + "".join(
        '  File "/home/me/m%d.py", line %d, in f%d\n    x = y\n' % (i, i, i) for i in range(40))
    seeds["regex_classes"] = "[[:alpha:]]\\pL\\d{2,}(?i)x|y*?\n\xff\xfe text"
    for name, text in seeds.items():
        tag = name.split("_")[0]
        with open(os.path.join(args.out, "seed_text_%s" % name), "wb") as f:
            f.write(("#%s\n" % tag).encode() + text.encode("utf-8", "surrogateescape"))
    print("wrote %d seeds to %s" % (len(seeds), args.out))


if __name__ == "__main__":
    main()
