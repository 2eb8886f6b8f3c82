#!/usr/bin/env python3
"""Fails when a target the tree installs is missing from zarena_installable.

usage: check_install_set.py ROOT
scripts/demo.sh builds zarena_installable (cmake/install.cmake) so that `cmake --install`
works right after the demo; a target installed with install(TARGETS ...) but left out of
that list would make the install fail with "file cannot be found".
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
files = [p for p in root.rglob("*") if p.name == "CMakeLists.txt" or p.suffix == ".cmake"]
files = [p for p in files if not any(part.startswith("build") for part in p.relative_to(root).parts)]
installed = set()
for p in files:
    for m in re.finditer(r"^\s*install\(TARGETS\s+([^\s)]+)", p.read_text(), re.M):
        installed.add(m.group(1))
listed = set()
text = (root / "cmake" / "install.cmake").read_text()
for m in re.finditer(r"(?:set|list\(APPEND)\(?\s*ZARENA_INSTALLED_TARGETS\s+([^)]*)\)", text):
    listed.update(m.group(1).split())
missing = sorted(installed - listed)
print(f"installed targets: {sorted(installed)}; zarena_installable: {sorted(listed)}")
if missing:
    print(f"FAIL: installed but not in ZARENA_INSTALLED_TARGETS: {missing}")
    sys.exit(1)
