#!/usr/bin/env python3
"""libCacheSim's miss ratios for the golden tests (crates/ecdn-sim/tests/golden.rs).

    python3 -m venv /tmp/lcs && /tmp/lcs/bin/pip install libcachesim==0.3.5
    /tmp/lcs/bin/python benches/libcachesim-golden.py tests/data/cloudPhysicsIO.oracleGeneral.bin \
        LRU,FIFO,Clock,Sieve,S3FIFO,TwoQ

Prints, for each policy and cache size (1, 16, 256 MiB), libCacheSim's miss ratio and byte miss
ratio on the oracleGeneral trace, no warm-up, to 4 decimals.
"""
import sys

import libcachesim as lcs

trace, names = sys.argv[1], sys.argv[2].split(",")
for name in names:
    for mib in (1, 16, 256):
        reader = lcs.TraceReader(trace, lcs.TraceType.ORACLE_GENERAL_TRACE)
        miss, byte_miss = getattr(lcs, name)(mib << 20).process_trace(reader)
        print(f"{name} {mib}MiB {miss:.4f} {byte_miss:.4f}")
