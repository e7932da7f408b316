"""Summarise and compare test-suite runs written by run_suites.sh: per run the test count by outcome, the sum of the
per-test times, the process's wall and user+sys time; for each pair of runs the tests both have (same module and
name) and their summed times; the slowest modules.

Usage: python research/speed/test_suite/compare_runs.py OUT LABEL [LABEL ...]"""

import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from itertools import combinations
from pathlib import Path


def load(out: Path, label: str):
    cases = {}
    for case in ET.parse(out / f"{label}.xml").getroot().iter("testcase"):
        outcome = "passed"
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "failed"
        elif case.find("skipped") is not None:
            outcome = "skipped"
        cases[(case.get("classname"), case.get("name"))] = (float(case.get("time")), outcome)
    time_v = (out / f"{label}.time").read_text()
    cpu = sum(float(re.search(rf"{kind} time \(seconds\): ([\d.]+)", time_v).group(1)) for kind in ("User", "System"))
    wall = re.search(r"Elapsed \(wall clock\) time .*: ([\d:.]+)", time_v).group(1)
    return cases, cpu, wall


def module(classname: str) -> str:
    parts = classname.split(".")
    return ".".join(parts[:-1]) if parts[-1][:1].isupper() else classname  # drop a test class


def main(out: str, *labels: str) -> None:
    out = Path(out)
    runs = {label: load(out, label) for label in labels}
    print("| run | tests | passed / skipped / failed | sum of test times (s) | wall | user+sys (s) |")
    print("|---|---|---|---|---|---|")
    for label, (cases, cpu, wall) in runs.items():
        counts = Counter(outcome for _, outcome in cases.values())
        total = sum(t for t, _ in cases.values())
        print(
            f"| {label} | {len(cases)} | {counts['passed']} / {counts['skipped']} / {counts['failed']} | "
            f"{total:.0f} | {wall} | {cpu:.0f} |"
        )
    for a, b in combinations(labels, 2):
        common = runs[a][0].keys() & runs[b][0].keys()
        ta, tb = (sum(runs[x][0][k][0] for k in common) for x in (a, b))
        print(f"\ntests in both {a} and {b} (same module and name): {len(common)}; {a} {ta:.0f} s, {b} {tb:.0f} s")
    for label, (cases, _, _) in runs.items():
        modules = defaultdict(float)
        for (classname, _), (t, _) in cases.items():
            modules[module(classname)] += t
        print(
            f"\n{label}, slowest modules: "
            + ", ".join(
                f"{name.removeprefix('tests.')} {t:.0f} s"
                for name, t in sorted(modules.items(), key=lambda kv: -kv[1])[:6]
            )
        )


if __name__ == "__main__":
    main(*sys.argv[1:])
