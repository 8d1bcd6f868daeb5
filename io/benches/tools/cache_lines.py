#!/usr/bin/env python3
"""The data cache lines one case's timed calls touch, from a valgrind lackey trace.

    valgrind --tool=lackey --trace-mem=yes --log-file=lackey.log \
        io/benches/target/release/limit_bench --icount 6400 --case shape4 --batch 64
    python3 io/benches/tools/cache_lines.py io/benches/target/release/limit_bench lackey.log 6400

Counts the loads and stores made by instructions of the Ergon `timed_calls` (where
the charge path is inlined), by 64-byte line. A line touched by every call is on
the path; the stack lines hold the returned ticket and the bench's `black_box`
slot. valgrind maps a PIE executable at 0x108000 (amd64).
"""
import subprocess
import sys
from collections import Counter

BASE = 0x108000


def main():
    binary, log, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
    nm = subprocess.run(["nm", "-C", "-S", binary], capture_output=True, text=True).stdout
    lo = hi = None
    for line in nm.splitlines():
        if "Ergon as limit_bench::cases::Case>::timed_calls" in line:
            addr, size = line.split()[:2]
            lo = BASE + int(addr, 16)
            hi = lo + int(size, 16)
    if lo is None:
        sys.exit("no Ergon timed_calls symbol")
    touched, kinds, inside = Counter(), {}, False
    with open(log) as f:
        for line in f:
            if line.startswith("I"):
                pc = int(line.split()[1].split(",")[0], 16)
                inside = lo <= pc < hi
            elif inside and line[:2] in (" L", " S", " M"):
                kind, rest = line.split()
                addr, size = rest.split(",")
                addr, size = int(addr, 16), int(size)
                for l in range(addr // 64, (addr + size - 1) // 64 + 1):
                    touched[l] += 1
                    kinds.setdefault(l, set()).add(kind)
    if not touched:
        sys.exit("no access from timed_calls: is the PIE base right?")
    every = [l for l in touched if touched[l] >= calls]
    stack = [l for l in every if l * 64 >= 0x1000000000]
    for l in sorted(touched):
        where = "stack" if l * 64 >= 0x1000000000 else "heap"
        mark = "every call" if touched[l] >= calls else ""
        print(f"{l * 64:#014x} {where:5} {''.join(sorted(kinds[l])):3} {touched[l] / calls:6.2f}/call {mark}")
    print(f"lines touched by every call: {len(every)} ({len(every) - len(stack)} budget, {len(stack)} stack)")


main()
