#!/usr/bin/env python3
"""Checks that zarena.h's table of contents lists every section of the header, by number and
title, and nothing else: the sections are the blocks that open with a line of '=' and a line
" * N. Title"; the contents are the "N. Title" entries (one or two a line) at the top.

Usage: check_header_toc.py <repository root>
"""
import re
import sys


def main(root):
    with open(f"{root}/capi/include/zarena/zarena.h", encoding="utf-8") as f:
        text = f.read()
    sections = re.findall(r"/\* =+\n \* (\d+b?)\. ([^\n]+?)\s*\n", text)
    head = text[: text.index("*/")]  # the opening comment
    toc = "".join(line + "\n" for line in head.split("\n") if re.match(r" \*\s+\d+b?\. ", line))
    listed = re.findall(r"(\d+b?)\. ([A-Z][^\n]*?)(?=\s{2,}\d+b?\. |\s*\n)", toc)
    problems = []
    if not sections:
        problems.append("no section found (a '/* ====' line followed by ' * N. Title')")
    want = [(n, t.strip()) for n, t in sections]
    have = {(n, t.strip()) for n, t in listed}
    problems += [f"section {n}. {t} is not in the table of contents" for n, t in want
                 if (n, t) not in have]
    problems += [f"the table of contents lists {n}. {t}, which no section is" for n, t in
                 sorted(have - set(want))]
    for p in problems:
        print(f"zarena.h: {p}")
    if not problems:
        print(f"zarena.h: the table of contents lists its {len(want)} sections")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
