#!/usr/bin/env python3
"""Checks that the includes of src/ follow the layer map of docs/ARCHITECTURE.md.

The map is the table under "## The layers" in docs/ARCHITECTURE.md (one row per folder:
| `folder/` | job | may include |); it is read from there, so the document and the check
cannot disagree. Fails (exit 1, one line per problem) when:
  - a file in src/<folder>/ includes "<other>/..." and <other> is not in its folder's
    "may include" list (an include running up the layers, or sideways where none is
    allowed);
  - src/ has a folder the map does not list, or the map lists one src/ does not have;
  - the files of src/ include each other in a cycle.
The public header ("zarena/...") may be included anywhere.

Usage: check_layers.py <repository root>
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
ROW = re.compile(r"^\|\s*`([a-z_]+)/`\s*\|[^|]*\|([^|]*)\|\s*$")


def read_map(doc_path):
    """{folder: set of folders it may include}, in the order of the table."""
    layers = {}
    in_section = False
    with open(doc_path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("## "):
                in_section = line.strip() == "## The layers"
                continue
            m = ROW.match(line.rstrip("\n")) if in_section else None
            if not m:
                continue
            allowed = set(re.findall(r"`([a-z_]+)/?`", m.group(2)))
            layers[m.group(1)] = allowed
    return layers


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    src = os.path.join(root, "src")
    layers = read_map(os.path.join(root, "docs", "ARCHITECTURE.md"))
    problems = []
    if not layers:
        print("check_layers: no layer table under '## The layers' in docs/ARCHITECTURE.md")
        return 1
    folders = sorted(
        d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)) and d != "__pycache__")
    for d in folders:
        if d not in layers:
            problems.append(f"src/{d}/ is not in the layer map of docs/ARCHITECTURE.md")
    for d in layers:
        if d not in folders:
            problems.append(f"the layer map lists {d}/, which src/ does not have")
        for other in layers[d]:
            if other not in layers:
                problems.append(f"the layer map lets {d}/ include {other}/, which it does not list")

    graph = {}  # file (relative to src) -> files of src it includes
    for d in folders:
        for name in sorted(os.listdir(os.path.join(src, d))):
            if not name.endswith((".h", ".cpp")):
                continue
            rel = f"{d}/{name}"
            with open(os.path.join(src, rel), encoding="utf-8") as f:
                text = f.read()
            graph[rel] = []
            for inc in INCLUDE.findall(text):
                folder = inc.split("/", 1)[0] if "/" in inc else None
                if folder == "zarena":
                    continue  # the public header
                if folder is None or not os.path.exists(os.path.join(src, inc)):
                    problems.append(f'src/{rel}: #include "{inc}" does not name a file of src/ '
                                    f'by its folder ("layer/file.h")')
                    continue
                graph[rel].append(inc)
                if folder != d and folder not in layers.get(d, set()):
                    problems.append(f'src/{rel}: #include "{inc}": {d}/ may not include '
                                    f"{folder}/ (docs/ARCHITECTURE.md, \"The layers\")")

    # Include cycles between files (depth-first search, colours: 1 on the path, 2 done).
    colour = {}
    path = []

    def visit(node):
        colour[node] = 1
        path.append(node)
        for nxt in graph.get(node, []):
            if colour.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt]
                problems.append("include cycle: " + " -> ".join(cycle))
            elif nxt not in colour:
                visit(nxt)
        path.pop()
        colour[node] = 2

    for node in sorted(graph):
        if node not in colour:
            visit(node)

    for p in problems:
        print(p)
    if problems:
        print(f"check_layers: {len(problems)} problem(s)")
        return 1
    print(f"check_layers: {len(graph)} files in {len(folders)} layers, every include points down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
