#!/usr/bin/env python3
"""Runs the README's walkthrough as written against genjobs on the embedded default, so that the
documentation cannot drift from the service. The `sh` block under "### Walkthrough" in README.md,
then the first one under "## Outputs that never expire" in docs/deployment.md, run in one bash
process (only the placeholder key and the port are replaced). In the walkthrough every curl must get a 2xx answer, and every `# {...}` after
a command must match what it printed: each of its fields present with that value, a `…` in a
string standing for any text. The outputs section shows a production answer (fal's URLs and
sizes), so there only its fields are checked: each must be in the answer.

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
# The sections run, in order: (file, heading, whether answers are checked value for value).
SECTIONS = [
    ("README.md", "\n### Walkthrough\n", True),
    ("docs/deployment.md", "\n## Outputs that never expire\n", False),
]


def fail(message):
    print(f"check-walkthrough: {message}", file=sys.stderr)
    sys.exit(1)


def first_sh_block(path, heading):
    """The first ```sh block after `heading` in the file at `path` (from the checkout's root)."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        after = f.read().split(heading, 1)
    if len(after) != 2:
        fail(f"{path} has no {heading.strip()} section")
    match = re.search(r"```sh\n(.*?)```", after[1], re.S)
    if not match:
        fail(f"{heading.strip()} in {path} has no sh block")
    return match.group(1)


def commands(block):
    """The block's commands (continuation lines joined), each with the answers shown right after
    it: a `# {` or `# [` comment, with the comment lines that continue it."""
    found, continued, answer = [], None, None
    for line in block.splitlines():
        stripped = line.strip()
        opens = continued is None and answer is None and stripped.startswith(("# {", "# ["))
        if opens and (not found or found[-1][2]):
            fail(f"an answer shown follows no command: {stripped}")
        if opens or answer is not None:
            if not stripped.startswith("#"):
                fail(f"an answer shown is not JSON: {' '.join(answer)}")
            answer = (answer or []) + [stripped[1:].strip()]
            try:
                found[-1][1].append(json.loads(" ".join(answer)))
                answer = None
            except json.JSONDecodeError:
                pass
            continue
        if continued is not None:
            continued.append(line)
        elif stripped.startswith("#") or not stripped:
            if found:
                found[-1][2] = True
            continue
        else:
            continued = [line]
        if not line.endswith("\\"):
            found.append(["\n".join(continued), [], False])
            continued = None
    return [(command, answers) for command, answers, _ in found]


def matches(expected, actual, values):
    """Whether `actual` has every field of `expected` (with its value when `values`); `…` in a
    string stands for any text."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and matches(v, actual[k], values) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) >= len(expected) and all(
            matches(e, a, values) for e, a in zip(expected, actual))
    if not values:
        return True
    if isinstance(expected, str) and "…" in expected:
        head, tail = expected.split("…", 1)
        return isinstance(actual, str) and actual.startswith(head) and actual.endswith(tail.replace("…", ""))
    return expected == actual


def printed_json(output):
    """What a command printed, as JSON: the whole of it, or else its last line."""
    text = output.strip() or "null"
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return json.loads(text.splitlines()[-1])


def start(binary):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    printed = tempfile.TemporaryFile(mode="w+")
    # Any free port for the simulator too: a genjobs started by hand may hold its fixed one.
    env = {"PATH": os.environ["PATH"], "GENJOBS_BIND": f"127.0.0.1:{port}", "GENJOBS_SIM_PORT": "0", "RUST_LOG": "warn"}
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
    binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/debug/genjobs"))
    if not os.access(binary, os.X_OK):
        fail(f"no genjobs binary at {binary} (cargo build -p genjobs)")
    for tool in ("curl", "jq"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            fail(f"{tool} is missing: cargo xtask setup installs it")
    steps = []
    for path, heading, values in SECTIONS:
        steps += [(command, answers, values) for command, answers in commands(first_sh_block(path, heading))]
    process, port, key = start(binary)
    try:
        script = ["set -euo pipefail"]
        strict = None
        for index, (command, _, values) in enumerate(steps):
            if values != strict:
                # Only the walkthrough's calls must all succeed: the outputs section shows a 403.
                fail_fast = "--fail-with-body " if values else ""
                script.append(f'curl() {{ command curl {fail_fast}"$@"; }}')
                strict = values
            command = command.replace("localhost:8080", f"127.0.0.1:{port}")
            command = re.sub(r"^KEY=gj_….*$", f"KEY={key}", command)
            script += [command, f"printf '\\n{MARK.format(index)}\\n'"]
        with tempfile.TemporaryDirectory() as scratch:
            ran = subprocess.run(["bash", "-c", "\n".join(script)], capture_output=True, text=True, timeout=180,
                                 cwd=scratch)
        if ran.returncode != 0:
            done = ran.stdout.count("@@walkthrough-command-")
            fail(f"command {done + 1} failed: {steps[done][0]}\n{ran.stdout[-2000:]}\n{ran.stderr[-2000:]}")
        outputs = re.split(r"\n@@walkthrough-command-\d+@@\n", ran.stdout)
        checked = 0
        for (command, answers, values), output in zip(steps, outputs):
            for answer in answers:
                if not matches(answer, printed_json(output), values):
                    fail(f"{command}\nprinted {output.strip()}\nnot {json.dumps(answer, ensure_ascii=False)}")
                checked += 1
        print(f"check-walkthrough: {len(steps)} commands ran, {checked} answers as the documentation shows them")
    finally:
        process.kill()
        process.wait()


if __name__ == "__main__":
    main()
