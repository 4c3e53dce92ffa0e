#!/usr/bin/env python3
"""Checks the links of README.md and of every docs/*.md, so that moving a section cannot leave a
link behind: every relative link must name a file or folder of the checkout, and every `#anchor`
a heading of its target (its GitHub slug: lower case, punctuation dropped, spaces as hyphens, a
repeated heading numbered -1, -2, …). README.md is the front door and must not point outside the
repository: a link with a scheme, an autolink or a bare URL outside code fails it. Links in the
guides to other sites are not followed (nothing here goes online). Text in code blocks and code
spans is not a link.

Usage: scripts/check-links.py [file.md …]   (default: README.md and docs/*.md)
"""

import glob
import os
import re
import sys
import unicodedata

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
# `[text](target "title")` and `![alt](target)`; text may hold one level of brackets.
INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]*)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)", re.M)
HTML = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*[\"']([^\"']*)[\"']", re.I)
AUTOLINK = re.compile(r"<([a-zA-Z][a-zA-Z0-9+.-]{1,31}:[^\s<>]*)>")
BARE_URL = re.compile(r"(?<![\w/])(?:https?://|www\.)[^\s)>\]]+")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")


def prose_lines(text):
    """The file's lines with fenced code blocks blanked (numbering kept)."""
    lines, fence = [], None
    for line in text.split("\n"):
        match = FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)[0] * len(match.group(1))
            lines.append("")
        elif fence is not None:
            if match and match.group(1).startswith(fence) and not line.strip().strip(fence[0]):
                fence = None
            lines.append("")
        else:
            lines.append(line)
    return lines


def without_code_spans(line):
    """`line` with its code spans blanked: a run of backticks up to the same run."""
    return re.sub(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)", lambda m: " " * len(m.group(0)), line)


def slug(heading):
    """GitHub's anchor for a heading's text (github-slugger): the rendered text in lower case,
    every character that is not a letter, a mark, a number, a space, `-` or `_` dropped, and each
    space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link shows its text
    text = re.sub(r"<[^>]+>", "", text)  # HTML tags show nothing
    text = text.replace("`", "")
    text = re.sub(r"(\*{1,3})(\S.*?\S|\S)\1", r"\2", text)  # emphasis shows its text
    kept = (c for c in text.lower() if c in " -_" or unicodedata.category(c)[0] in "LMN")
    return "".join(kept).replace(" ", "-")


def anchors(path, cache={}):
    """Every anchor of the Markdown file at `path`."""
    if path not in cache:
        with open(path, encoding="utf-8") as f:
            lines = prose_lines(f.read())
        seen, found = {}, set()
        for index, line in enumerate(lines):
            match = HEADING.match(line)
            text = match.group(2) or "" if match else None
            following = lines[index + 1] if index + 1 < len(lines) else ""
            if match is None and line.strip() and re.match(r"^ {0,3}(=+|-+)\s*$", following):
                text = line.strip()  # a setext heading (a line of text underlined)
            if text is None:
                continue
            base = slug(text.strip())
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        found.update(re.findall(r"<a\s+(?:name|id)=[\"']([^\"']+)[\"']", "\n".join(lines)))
        cache[path] = found
    return cache[path]


def links(text):
    """(line number, target) of every link of a Markdown text, code left out."""
    found = []
    for number, line in enumerate(prose_lines(text), 1):
        line = without_code_spans(line)
        for pattern in (INLINE, HTML, AUTOLINK):
            found += [(number, m.group(1)) for m in pattern.finditer(line)]
        found += [(number, m.group(1)) for m in DEFINITION.finditer(line)]
    return [(n, t[1:-1] if t.startswith("<") and t.endswith(">") else t) for n, t in found]


def bare_urls(text):
    """(line number, URL) of every URL written outside code and outside a link's target."""
    found = []
    for number, line in enumerate(prose_lines(text), 1):
        line = without_code_spans(line)
        line = INLINE.sub("", HTML.sub("", AUTOLINK.sub("", line)))
        found += [(number, m.group(0)) for m in BARE_URL.finditer(line)]
    return found


def check(path):
    """The problems of the Markdown file at `path`, each a line of text."""
    shown = os.path.relpath(path, ROOT)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    front_door = shown == "README.md"
    problems = []
    for number, target in links(text):
        where = f"{shown}:{number}"
        if SCHEME.match(target) or target.startswith("//"):
            if front_door:
                problems.append(f"{where}: README.md links outside the repository: {target}")
            continue
        if not target:
            problems.append(f"{where}: an empty link")
            continue
        file, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        if not resolved.startswith(ROOT + os.sep) and resolved != ROOT:
            problems.append(f"{where}: {target} leaves the repository")
            continue
        if not os.path.exists(resolved):
            problems.append(f"{where}: {target}: no such file ({os.path.relpath(resolved, ROOT)})")
            continue
        if anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
            problems.append(f"{where}: {target}: {os.path.relpath(resolved, ROOT)} has no heading #{anchor}")
        elif anchor and not resolved.endswith(".md"):
            problems.append(f"{where}: {target}: an anchor into a file that is not Markdown")
    if front_door:
        problems += [f"{shown}:{n}: README.md names a URL outside the repository: {url}" for n, url in bare_urls(text)]
    return problems


def main():
    paths = sys.argv[1:] or ["README.md", *sorted(glob.glob("docs/*.md", root_dir=ROOT))]
    problems = []
    for path in paths:
        problems += check(os.path.join(ROOT, path) if not os.path.isabs(path) else path)
    for problem in problems:
        print(f"check-links: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)
    total = sum(len(links(open(os.path.join(ROOT, p), encoding="utf-8").read())) for p in paths)
    print(f"check-links: {len(paths)} files, {total} links, every relative one resolves, README.md stays inside")


if __name__ == "__main__":
    main()
