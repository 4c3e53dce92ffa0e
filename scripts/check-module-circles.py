#!/usr/bin/env python3
"""Fails when the top-level modules of a crate import each other in a circle.

A module is `src/<name>.rs` or `src/<name>/`; module A depends on B when any of A's files names
`crate::B` outside comments and unit tests (which may reach anywhere). Names both sides need
belong in a module both depend on, so that each module can be read, and changed, knowing only
what is below it (docs/architecture.md, "Modules inside a crate").

Usage: scripts/check-module-circles.py   (from anywhere in the checkout)
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
CRATE_PATH = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")


def dependencies(src):
    modules = {}
    for path in src.rglob("*.rs"):
        first = path.relative_to(src).parts[0]
        if first in ("lib.rs", "main.rs"):
            continue
        modules.setdefault(first.removesuffix(".rs"), []).append(path)
    edges = {name: set() for name in modules}
    for name, paths in modules.items():
        for path in paths:
            code = path.read_text(errors="replace").split("#[cfg(test)]")[0]
            code = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith("//"))
            edges[name] |= {other for other in CRATE_PATH.findall(code) if other in modules and other != name}
    return edges


def circles(edges):
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(edges[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def main():
    problems = []
    for src in sorted(ROOT.glob("crates/*/src")):
        edges = dependencies(src)
        for component in circles(edges):
            uses = [f"{a} -> {b}" for a in component for b in sorted(edges[a]) if b in component]
            problems.append(f"{src.parent.name}: {' <-> '.join(component)} ({', '.join(uses)})")
    if problems:
        print("check-module-circles: modules that import each other:", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        sys.exit(1)
    print("check-module-circles: no crate's modules import each other in a circle")


if __name__ == "__main__":
    main()
