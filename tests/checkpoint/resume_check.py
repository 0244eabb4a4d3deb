#!/usr/bin/env python3
"""Two result records of the same run, one never stopped and one killed and resumed: every value
must be identical but the wall-clock ones (times, rates, start time) and what names files or the
resumes themselves. Exit 0 when they are, 1 with every differing path listed.

usage: resume_check.py REFERENCE.json RESUMED.json [--min-resumes N]
"""
import json
import re
import sys

# wall-clock figures and names of files: not part of what a resume must reproduce
IGNORED = re.compile(
    r"(^|/)(started_at|\w*time_s|\w*time_per_step_s|samples_per_s|saved_to|resumed_at_steps|resumed_from|"
    r"\w*_Bps|speedup|efficiency|driver_used_bytes_\w+|git_dirty|git_commit|checkpoints)(/\w+)*$")


def flat(o, path=""):
    if isinstance(o, dict):
        for k, v in o.items():
            yield from flat(v, path + "/" + k)
    elif isinstance(o, list):
        for i, v in enumerate(o):
            yield from flat(v, path + "/" + str(i))
    else:
        yield path, o


def main():
    args = sys.argv[1:]
    min_resumes = 0
    if "--min-resumes" in args:
        i = args.index("--min-resumes")
        min_resumes = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    ref, got = (json.load(open(p)) for p in args)
    a = {k: v for k, v in flat(ref) if not IGNORED.search(k)}
    b = {k: v for k, v in flat(got) if not IGNORED.search(k)}
    diff = sorted(k for k in set(a) | set(b) if a.get(k, "<absent>") != b.get(k, "<absent>"))
    for k in diff[:40]:
        print(f"differs: {k}: {a.get(k, '<absent>')!r} vs {b.get(k, '<absent>')!r}")
    n = len(got.get("resumed_at_steps", []))
    if n < min_resumes:
        print(f"the resumed record lists {n} resumes, expected at least {min_resumes}")
        return 1
    if diff:
        print(f"{len(diff)} values differ")
        return 1
    print(f"records identical but wall-clock times ({len(a)} values, {n} resumes at steps "
          f"{got.get('resumed_at_steps', [])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
