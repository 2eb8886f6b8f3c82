#!/usr/bin/env python3
"""Checks go/dlopen.h, the Go binding's table of the library's functions for the
zarena_dlopen build mode: every function the table loads (an X(name) row) is also
#defined to its loaded pointer there (else the binding's C code calls the symbol itself,
which links only when a libzarena is at hand: a dlopen build from another module fails to
link), every #define names a row, and every row is a symbol of cmake/zarena.map.

Usage: check_dlopen_table.py <repository root>
"""
import re
import sys


def main(root):
    with open(f"{root}/go/dlopen.h", encoding="utf-8") as f:
        text = f.read()
    rows = re.findall(r"\bX\((zarena_\w+)\)", text)
    defined = re.findall(r"^#define (zarena_\w+) \(\*zarena_go_dl_(\w+)\)", text, re.M)
    with open(f"{root}/cmake/zarena.map", encoding="utf-8") as f:
        exported = set(re.findall(r"\b(zarena_\w+);", f.read()))
    problems = []
    for name, target in defined:
        if name != target:
            problems.append(f"#define {name} points at zarena_go_dl_{target}")
    names = {n for n, _ in defined}
    problems += [f"X({n}) has no #define {n} (*zarena_go_dl_{n})" for n in rows if n not in names]
    problems += [f"#define {n} has no X({n}) row" for n in sorted(names - set(rows))]
    problems += [f"X({n}) is not in cmake/zarena.map" for n in rows if n not in exported]
    if len(rows) != len(set(rows)):
        problems.append("a function is listed twice")
    for p in problems:
        print(f"go/dlopen.h: {p}")
    if not rows:
        print("go/dlopen.h: no X(...) rows found")
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
