#!/usr/bin/env python3
"""Lists the skipped tests of ctest runs, with their reasons (issue 17).

  skip_summary.py JUNIT.xml...   (ctest --output-junit files; missing ones are ignored)

A test CTest skipped (exit 125, SKIP_RETURN_CODE) is listed with the last line of
its output that explains it ("SKIP...", "SKIPPED: ...", "... is missing", ...),
else its last output line; one that printed nothing is flagged as a silent skip.
A googletest case skipped inside a binary that passed ("[  SKIPPED ]") is listed
too. Always exits 0: it reports, the caller's status decides.
"""
import re
import sys
import xml.etree.ElementTree as ET

REASON = re.compile(r"skip|missing|not installed|needs |requires|cannot run|unavailable", re.I)


def reason_of(output):
    lines = [l.strip() for l in output.splitlines() if l.strip()]
    for i, line in enumerate(lines[:-1]):  # googletest: "file:line: Skipped" then the message
        if line.endswith(": Skipped") and not lines[i + 1].startswith("["):
            return lines[i + 1]
    for line in reversed(lines):
        if REASON.search(line) and not line.startswith("kept test directory"):
            return line
    return lines[-1] if lines else "(printed no reason: a silent skip)"


def skips(path):
    """[(test name, reason)] of one JUnit file."""
    found = []
    for case in ET.parse(path).getroot().iter("testcase"):
        out = case.findtext("system-out") or ""
        if case.find("skipped") is not None:
            found.append((case.get("name"), reason_of(out)))
        else:
            for m in re.finditer(r"^\[  SKIPPED \] (\S+)", out, re.M):
                found.append((f"{case.get('name')} [{m.group(1)}]", reason_of(out)))
    return found


def main(paths):
    found, unreadable = [], []
    for p in paths:
        try:
            found += skips(p)
        except FileNotFoundError:
            continue
        except ET.ParseError as e:
            unreadable.append(f"{p}: {e}")
    for u in unreadable:
        print(f"skip summary: cannot read {u}")
    if not found:
        print("== skipped tests: none ==")
        return 0
    print(f"== skipped tests: {len(found)} ==")
    for name, why in sorted(set(found)):
        print(f"  SKIPPED {name}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
