#!/usr/bin/env python3
"""A shot-noise web trace (Traverso et al., "Temporal locality in today's content caching", 2013):
objects are born uniformly over three days, each with a Pareto(ALPHA) number of requests spread
as a Poisson process over a lognormal lifetime (median LIFE seconds, sigma SIGMA). Object sizes
are drawn from SIZES, a file with one size in bytes per line (benches/adaptsize-grid.sh takes
them from the eu-7 footprint class). Requests whose object lives long look like IRM traffic; short
lives give the temporal locality that Che's approximation (AdaptSize's model) does not describe.

    shot-noise-trace.py OUT.csv OBJECTS ALPHA LIFE SIGMA SEED SIZES

Writes `time,id,size` CSV sorted by time (`ecdn trace convert OUT.csv OUT.bin` reads it).
"""
import math
import random
import sys


def main():
    if len(sys.argv) != 8:
        sys.exit(__doc__)
    out, objects, alpha, life, sigma, seed, sizes_file = sys.argv[1:]
    objects, alpha, life, sigma = int(objects), float(alpha), float(life), float(sigma)
    rng = random.Random(int(seed))
    with open(sizes_file) as f:
        sizes = [int(line) for line in f if line.strip()]
    if not sizes:
        sys.exit(f"{sizes_file}: no sizes")
    span = 3 * 86400.0
    requests = []
    for _ in range(objects):
        born = rng.uniform(0, span)
        count = min(int(rng.paretovariate(alpha)), 200_000)
        lifetime = life * math.exp(sigma * rng.gauss(0, 1))
        size = rng.choice(sizes)
        oid = rng.getrandbits(63)
        t = born
        for _ in range(count):
            requests.append((t, oid, size))
            t += rng.expovariate(count / lifetime)
    requests.sort()
    with open(out, "w") as f:
        f.write("time,id,size\n")
        for t, oid, size in requests:
            f.write(f"{int(t)},{oid},{size}\n")


if __name__ == "__main__":
    main()
