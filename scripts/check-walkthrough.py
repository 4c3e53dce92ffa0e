#!/usr/bin/env python3
"""Runs the README's walkthrough as written against genjobs on the embedded default, so that the
README cannot drift from the service: the `sh` block under "### Walkthrough" runs in one bash
process (only the placeholder key and the port are replaced), every curl must get a 2xx answer,
and every `# {...}` line after a command must match what the command printed: each of its fields
present with that value, a `…` in a string standing for any text.

Usage: scripts/check-walkthrough.py [path to the genjobs binary]
"""

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MARK = "@@walkthrough-command-{}@@"


def fail(message):
    print(f"check-walkthrough: {message}", file=sys.stderr)
    sys.exit(1)


def walkthrough_block(readme):
    """The first ```sh block after the "### Walkthrough" heading."""
    after = readme.split("\n### Walkthrough\n", 1)
    if len(after) != 2:
        fail("the README has no ### Walkthrough section")
    match = re.search(r"```sh\n(.*?)```", after[1], re.S)
    if not match:
        fail("the walkthrough has no sh block")
    return match.group(1)


def commands(block):
    """The block's commands (continuation lines joined), each with the `# {...}` or `# [...]`
    lines right after it, which are what it prints."""
    found, continued, answerable = [], None, False
    for line in block.splitlines():
        stripped = line.strip()
        if continued is not None:
            continued.append(line)
        elif stripped.startswith(("# {", "# [")):
            if not answerable:
                fail(f"an expected answer follows no command: {stripped}")
            found[-1][1].append(stripped[2:])
            continue
        elif stripped.startswith("#") or not stripped:
            answerable = False
            continue
        else:
            continued = [line]
        if not line.endswith("\\"):
            found.append(("\n".join(continued), []))
            continued, answerable = None, True
    return found


def matches(expected, actual):
    """Whether `actual` has every field of `expected` with its value; `…` in a string is any text."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and matches(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) >= len(expected) and all(
            matches(e, a) for e, a in zip(expected, actual))
    if isinstance(expected, str) and "…" in expected:
        head, tail = expected.split("…", 1)
        return isinstance(actual, str) and actual.startswith(head) and actual.endswith(tail.replace("…", ""))
    return expected == actual


def start(binary):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    printed = tempfile.TemporaryFile(mode="w+")
    env = {"PATH": os.environ["PATH"], "GENJOBS_BIND": f"127.0.0.1:{port}", "RUST_LOG": "warn"}
    process = subprocess.Popen([binary], stdout=printed, stderr=subprocess.DEVNULL, env=env)
    for _ in range(100):
        printed.seek(0)
        key = re.search(r"^demo user API key: (\S+)$", printed.read(), re.M)
        if key:
            return process, port, key.group(1)
        if process.poll() is not None:
            fail("genjobs exited at start")
        time.sleep(0.1)
    process.kill()
    fail("genjobs did not print the demo user's key")


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/debug/genjobs")
    if not os.access(binary, os.X_OK):
        fail(f"no genjobs binary at {binary} (cargo build -p genjobs)")
    for tool in ("curl", "jq"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            fail(f"{tool} is missing: cargo xtask setup installs it")
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        steps = commands(walkthrough_block(f.read()))
    process, port, key = start(binary)
    try:
        script = ["set -euo pipefail", "curl() { command curl --fail-with-body \"$@\"; }"]
        for index, (command, _) in enumerate(steps):
            command = command.replace("localhost:8080", f"127.0.0.1:{port}")
            command = re.sub(r"^KEY=gj_….*$", f"KEY={key}", command)
            script += [command, f"printf '\\n{MARK.format(index)}\\n'"]
        ran = subprocess.run(["bash", "-c", "\n".join(script)], capture_output=True, text=True, timeout=180)
        if ran.returncode != 0:
            done = ran.stdout.count("@@walkthrough-command-")
            fail(f"command {done + 1} failed: {steps[done][0]}\n{ran.stdout[-2000:]}\n{ran.stderr[-2000:]}")
        outputs = re.split(r"\n@@walkthrough-command-\d+@@\n", ran.stdout)
        checked = 0
        for (command, expected), output in zip(steps, outputs):
            for line in expected:
                answer = json.loads(output.strip().splitlines()[-1] if output.strip() else "null")
                if not matches(json.loads(line), answer):
                    fail(f"{command}\nprinted {output.strip()}\nnot {line}")
                checked += 1
        print(f"check-walkthrough: {len(steps)} commands ran, {checked} answers as the README shows them")
    finally:
        process.kill()
        process.wait()


if __name__ == "__main__":
    main()
