#!/usr/bin/env python3
"""Samples /proc every 20 ms until SIGTERM and prints JSON: distinct compiler
processes seen (cc1/cc1plus/clang -cc1), their peak concurrency and peak
summed RSS. Used by demo.sh and bench.sh for contenders that have no counters
of their own."""
import json
import os
import signal
import sys
import time

NAMES = {"cc1", "cc1plus"}
running = True

def stop(*_):
    global running
    running = False

def sample():
    procs = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            if comm not in NAMES:
                continue
            rss_pages = int(stat[stat.rindex(")") + 2:].split()[21])
            procs[int(pid)] = rss_pages * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue
    return procs

def main():
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    seen, peak_n, peak_rss = set(), 0, 0
    while running:
        procs = sample()
        seen.update(procs)
        peak_n = max(peak_n, len(procs))
        peak_rss = max(peak_rss, sum(procs.values()))
        time.sleep(0.02)
    json.dump({"compilers_seen": len(seen), "peak_concurrent": peak_n,
               "peak_rss_bytes": peak_rss}, sys.stdout)
    sys.stdout.write("\n")

if __name__ == "__main__":
    main()
