#!/usr/bin/env python3
"""Fails when the README's code examples drift from the files that are built and run."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
readme = (root / "README.md").read_text()
checks = [("c", "examples/quickstart.c")]
if (root / "examples/go/quickstart/main.go").exists():
    checks.append(("go", "examples/go/quickstart/main.go"))
failed = False
for lang, path in checks:
    blocks = re.findall(r"```" + lang + r"\n(.*?)```", readme, re.S)
    text = (root / path).read_text()
    if text not in blocks:
        print(f"README has no ```{lang} block identical to {path}")
        failed = True
    else:
        print(f"README {lang} example == {path}")
sys.exit(1 if failed else 0)
