#!/usr/bin/env python3
"""The walk of one request through ecdn-node, from trace.py's hits: per thread, the call
stacks of ecdn-node frames at every function entry are replayed as calls and returns; a
step from one file to another is an entry (a call into the file) or a return (back to a
file the walk had left). Prints the files entered, entries per file, and the returns.

    analyze.py HITS.jsonl [ROOT_FILE,...]   # stacks rooted in these files are left out
"""
import json, sys, collections
hits = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
hits = [h for h in hits if "s" in h and h["s"]]
roots = collections.Counter(h["s"][0][0] for h in hits)
print("roots:", roots.most_common(12))
skip = set(sys.argv[2].split(",")) if len(sys.argv) > 2 else set()
stacks = {}
entries = collections.Counter()
returns = collections.Counter()
seq = []
for h in hits:
    s = [tuple(f) for f in h["s"]]
    if s[0][0] in skip:
        continue
    cur = stacks.get(h["t"], [])
    n = 0
    while n < len(cur) and n < len(s) - 1 and cur[n] == s[n]:
        n += 1
    # returns: pop down to the common prefix
    while len(cur) > n:
        top = cur.pop()
        if cur and cur[-1][0] != top[0]:
            returns[cur[-1][0]] += 1
            seq.append("<" + cur[-1][0])
    for f in s[n:]:
        if not cur or cur[-1][0] != f[0]:
            entries[f[0]] += 1
            seq.append(">" + f[0])
        cur.append(f)
    stacks[h["t"]] = cur
print("files entered: %d, entries: %d, returns to a file left: %d" % (len(entries), sum(entries.values()), sum(returns.values())))
for f, n in entries.most_common():
    print("  %4d entries %4d returns  %s" % (n, returns[f], f))
open(sys.argv[1] + ".seq", "w").write("\n".join(seq))
