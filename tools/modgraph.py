#!/usr/bin/env python3
"""The workspace's module import graph (issue 41): lines per crate, the largest files, the
circles among a crate's modules, and the arrows that run back up (a module importing from one
of its ancestors).

A module is a source file (`src/a/b.rs` or `src/a/b/mod.rs` is `a::b`; `lib.rs`/`main.rs` is
the crate root). An arrow A -> B is any path in A's code (not its comments) that starts with
`crate::`, `super::` or `self::` and names B or something defined in B: the path is resolved to
the longest prefix that is a module; a path that starts with a child module's name counts
too (the prefix of a `use` group is not an arrow itself; nor is the path of a `pub(in path)`).
Test modules inside a file count as the file (their `super::` is the file's module). Paths
through another crate (`ecdn_node::...`) are crate arrows, not counted here. An arrow to an
ancestor (a child using its parent's items) is an arrow up, counted apart; circles are those
the remaining arrows make.

    python3 tools/modgraph.py            # the summary
    python3 tools/modgraph.py --circles  # and every circle's modules
"""

import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_GROUP = re.compile(r"\buse\s+((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*)\}", re.S)


def strip_comments(text):
    """The code without its comments, and without the paths of `pub(in path)` visibilities
    (they say who may see an item, not what it uses)."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"\bpub\(in [^)]*\)", "pub", text)
    return "\n".join(re.sub(r"//.*", "", line) for line in text.splitlines())


def module_of(src, path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] == "mod" or (len(rel) == 1 and rel[0] in ("lib", "main")):
        rel = rel[:-1]
    return tuple(rel)


def resolve(current, is_dir_module, head, rest, modules):
    if head == "crate":
        base = ()
    else:
        # `super` and `self` are relative to the module the file is; a file that is a
        # directory's `mod.rs` is that directory's module.
        base = current
        if head == "super":
            base = base[:-1]
        rest = list(rest)
        while rest and rest[0] == "super":
            base = base[:-1]
            rest.pop(0)
    parts = list(base) + [p for p in rest if p != "self"]
    for n in range(len(parts), -1, -1):
        if tuple(parts[:n]) in modules:
            return tuple(parts[:n])
    return None


def crate_graph(src):
    files = {}
    for d, _, names in os.walk(src):
        for n in names:
            if n.endswith(".rs"):
                p = os.path.join(d, n)
                files[module_of(src, p)] = p
    modules = set(files)
    edges = {m: set() for m in modules}
    for m, p in files.items():
        code = strip_comments(open(p, encoding="utf-8").read())
        # An inline test module (`#[cfg(test)] mod tests { ... }`, to the end of the file)
        # counts as the file: there `super::` is the file's module.
        t = re.search(r"#\[cfg\(test\)\]\s*mod \w+ \{", code)
        if t:
            code = code[: t.end()] + re.sub(r"\bsuper::", "self::", code[t.end():])
        refs = []
        for g in USE_GROUP.finditer(code):
            prefix = g.group(1).split("::")
            for item in re.split(r"[,\s]+", g.group(2)):
                item = item.split("::")
                if item and item[0] and item[0] != "self":
                    refs.append(prefix + [x for x in item if x and x != "{" and x != "}"])
                else:
                    refs.append(prefix)
        for r in PATH.finditer(code):
            # The prefix of a `use a::b::{c, d}` group is not an arrow of its own (its items
            # are counted above).
            if code.startswith("::{", r.end()):
                continue
            refs.append([r.group(1)] + r.group(2).split("::")[1:])
        # Paths that start with a child module's name (`hit::answer`, `use hit::X`).
        children = sorted({t[len(m)] for t in modules if len(t) == len(m) + 1 and t[: len(m)] == m})
        if children:
            child = re.compile(r"(?<![:\w])(" + "|".join(children) + r")((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
            for r in child.finditer(code):
                refs.append(["self", r.group(1)] + r.group(2).split("::")[1:])
            group = re.compile(r"\buse\s+(" + "|".join(children) + r")((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{")
            for r in group.finditer(code):
                refs.append(["self", r.group(1)] + r.group(2).split("::")[1:])
        for r in refs:
            t = resolve(m, p.endswith("mod.rs"), r[0], r[1:], modules)
            if t is not None and t != m:
                edges[m].add(t)
    return files, edges


def circles(edges):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def is_up(a, t):
    """Whether module `t` is an ancestor of module `a`."""
    return len(t) < len(a) and a[: len(t)] == t


def name(m):
    return "::".join(m) or "(root)"


def main():
    show = "--circles" in sys.argv
    crates_dir = os.path.join(ROOT, "crates")
    all_files = []
    total_circles = 0
    print(f"{'crate':<16} {'lines':>7} {'files':>5} {'circles':>7} {'in circles':>10} {'arrows up':>9}")
    for c in sorted(os.listdir(crates_dir)):
        src = os.path.join(crates_dir, c, "src")
        if not os.path.isdir(src):
            continue
        files, edges = crate_graph(src)
        lines = 0
        for m, p in files.items():
            n = sum(1 for _ in open(p, encoding="utf-8"))
            lines += n
            all_files.append((n, os.path.relpath(p, ROOT)))
        # Arrows up (to an ancestor) are counted apart; the circles are those the other
        # arrows make (sideways, or down to a descendant).
        cs = circles({a: {t for t in ts if not is_up(a, t)} for a, ts in edges.items()})
        total_circles += len(cs)
        up = sum(1 for a, ts in edges.items() for t in ts if is_up(a, t))
        print(f"{c:<16} {lines:>7} {len(files):>5} {len(cs):>7} {sum(map(len, cs)):>10} {up:>9}")
        if show:
            for comp in cs:
                print("    circle: " + ", ".join(name(m) for m in comp))
    print(f"circles in all: {total_circles}")
    print("largest files:")
    for n, p in sorted(all_files, reverse=True)[:10]:
        print(f"  {n:>6}  {p}")


if __name__ == "__main__":
    main()
