#!/usr/bin/env python3
"""Fails when the README's code examples drift from what is built and run.

usage: check_readme.py ROOT [LIBZARENA]
The C and Go blocks must equal examples/quickstart.c and examples/go/quickstart/main.go
(which are built and run elsewhere); what the shell blocks write into the checkout is
ignored by git; with LIBZARENA, the Python blocks are run against it (the zarena.torch one
only where torch is installed).
"""
import os
import pathlib
import re
import subprocess
import sys

root = pathlib.Path(sys.argv[1])
readme = (root / "README.md").read_text()
failed = False
for lang, path in [("c", "examples/quickstart.c"), ("go", "examples/go/quickstart/main.go")]:
    blocks = re.findall(r"```" + lang + r"\n(.*?)```", readme, re.S)
    if (root / path).read_text() not in blocks:
        print(f"README has no ```{lang} block identical to {path}")
        failed = True
    else:
        print(f"README {lang} example == {path}")
# What the README's shell starts write into the checkout (`-o quickstart`, `--svg x.svg`,
# `python3 -m venv .venv`, ...) is ignored by git, so following the README leaves the
# checkout clean.
written = set()
for block in re.findall(r"```sh\n(.*?)```", readme, re.S):
    written.update(re.findall(r"(?:\s-o|--svg|--chrome-trace|--json|-m venv)\s+([\w./-]+)", block))
written = sorted(w for w in written if not w.startswith(("/", "$", "build/")))
if (root / ".git").exists() and written:
    r = subprocess.run(["git", "-C", str(root), "check-ignore", "--no-index", *written],
                       capture_output=True, text=True)
    ignored = set(r.stdout.split())
    for w in written:
        print(f"README writes {w} into the checkout: "
              f"{'ignored by git' if w in ignored else 'NOT ignored: add it to .gitignore'}")
        failed = failed or w not in ignored
else:
    print("not a git checkout (or the README writes nothing): .gitignore not checked")
if len(sys.argv) > 2:
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    env = dict(os.environ, ZARENA_LIBRARY=sys.argv[2], ZARENA_BACKEND="host",
               ZARENA_LOG_LEVEL="warn", PYTHONPATH=str(root / "python"))
    import importlib.util
    have_torch = importlib.util.find_spec("torch") is not None
    for code in blocks:
        if "zarena.torch" in code and not have_torch:
            print("README python example with zarena.torch: skipped (torch not installed)")
            continue
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        print(f"README python example: exit {r.returncode}, output {r.stdout.strip()!r}")
        if r.returncode != 0:
            print(r.stderr)
            failed = True
sys.exit(1 if failed else 0)
