#!/usr/bin/env python3
"""Each crate's `rust-version` must be at least what its dependencies declare, so that the MSRV
we publish is the one the code really needs. (Clippy's `incompatible_msrv` lint, part of
`cargo clippy`, checks our own use of the standard library against the same field.)"""
import json
import subprocess
import sys

def version(text):
    parts = [int(part) for part in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))

metadata = json.loads(subprocess.run(
    ["cargo", "metadata", "--format-version", "1"], check=True, capture_output=True, text=True).stdout)
packages = {p["id"]: p for p in metadata["packages"]}
nodes = {n["id"]: n for n in metadata["resolve"]["nodes"]}

def normal_closure(root):
    seen, todo = set(), [root]
    while todo:
        node = nodes[todo.pop()]
        for dep in node["deps"]:
            if any(kind["kind"] is None for kind in dep["dep_kinds"]) and dep["pkg"] not in seen:
                seen.add(dep["pkg"])
                todo.append(dep["pkg"])
    return seen

failed = False
for member in metadata["workspace_members"]:
    package = packages[member]
    ours = package.get("rust_version")
    if ours is None:
        print(f"{package['name']}: no rust-version", file=sys.stderr)
        failed = True
        continue
    needed = max(((packages[d].get("rust_version") or "0", packages[d]["name"]) for d in normal_closure(member)),
                 key=lambda v: version(v[0]), default=("0", "-"))
    if version(needed[0]) > version(ours):
        print(f"{package['name']}: rust-version {ours}, but {needed[1]} needs {needed[0]}", file=sys.stderr)
        failed = True
    else:
        print(f"{package['name']}: rust-version {ours} (dependencies need at most {needed[0]}, {needed[1]})")
sys.exit(1 if failed else 0)
