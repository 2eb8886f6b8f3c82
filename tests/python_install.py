#!/usr/bin/env python3
"""Installs python/ with pip the way a user would, offline, and uses it from outside the
source tree: once finding the library through $ZARENA_LIBRARY, once through the copy
bundled next to the package (pip --config-settings bundle-library=...).

usage: python_install.py SOURCE_ROOT LIBZARENA [LIBZARENA_TORCH]
"""
import json
import os
import subprocess
import sys
import tempfile

root, lib = sys.argv[1], os.path.realpath(sys.argv[2])
torch_lib = os.path.realpath(sys.argv[3]) if len(sys.argv) > 3 else None

USE = r"""
import json, sys, zarena
with zarena.Arena(backend=zarena.BACKEND_HOST, capacity_bytes=1 << 20, name="installed") as a:
    p = a.alloc(4096)
    a.free(p)
    q = a.alloc(100)
    a.reset()
    b = a.alloc_ex(64)  # a 1.1 call: the whole package (zarena/blocks.py, ...) was installed
    a.free_at(b)
    s = a.stats()
print(json.dumps({"package": zarena.__file__, "library": zarena.library_path(),
                  "version": zarena.version_string(), "epoch": s.epoch, "hits": s.hits,
                  "live": s.live_allocs, "block_epoch": b.epoch, "repr": repr(s)}))
"""


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("ZARENA_LIBRARY", "ZTEST_BUILD_DIR", "LD_LIBRARY_PATH", "PYTHONPATH")}
    env.update(PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1", ZARENA_LOG_LEVEL="warn")
    env.update(extra)
    return env


def pip_install(target, *extra, cwd=None, expect_ok=True):
    """pip install python/ into target; cwd: the directory pip is typed in (a shell sets
    $PWD to it, as here)."""
    cmd = [sys.executable, "-m", "pip", "install", "--no-index", "--no-cache-dir", "--quiet",
           "--target", target, *extra, os.path.join(root, "python")]
    print("$", f"(cd {cwd or os.getcwd()};", " ".join(cmd) + ")")
    env = clean_env(PWD=cwd) if cwd else clean_env()
    r = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    if expect_ok and r.returncode != 0:
        print(r.stdout, r.stderr)
        fail("pip install (is python3-pip installed? scripts/deps.sh installs it)")
    return r


def use(target, workdir, **env):
    r = subprocess.run([sys.executable, "-c", USE], cwd=workdir, capture_output=True, text=True,
                       env=clean_env(PYTHONPATH=target, **env), timeout=120)
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        fail("using the installed package")
    out = json.loads(r.stdout)
    print("  ->", out)
    if not out["package"].startswith(os.path.realpath(target) + os.sep):
        fail(f"imported {out['package']}, not the installed copy under {target}")
    if (out["epoch"], out["hits"], out["live"], out["block_epoch"]) != (1, 3, 0, 1):
        fail(f"unexpected stats after alloc/free/reset: {out}")
    return out


with tempfile.TemporaryDirectory(prefix="zarena-pip-") as tmp:
    tmp = os.path.realpath(tmp)
    workdir = os.path.join(tmp, "elsewhere")
    os.mkdir(workdir)

    print("== pure-Python install, library through $ZARENA_LIBRARY")
    plain = os.path.join(tmp, "plain")
    pip_install(plain)
    if os.path.exists(os.path.join(plain, "zarena", "libzarena.so.1")):
        fail("the plain install carries a library copy")
    out = use(plain, workdir, ZARENA_LIBRARY=lib)
    if out["library"] != lib:
        fail(f"loaded {out['library']}, not $ZARENA_LIBRARY {lib}")

    print("== install with the library bundled next to the package (paths relative to the"
          " directory pip is run in, as the README writes them)")
    bundled = os.path.join(tmp, "bundled")
    here = os.path.dirname(lib)
    extra = ["--config-settings", f"bundle-library={os.path.relpath(lib, here)}"]
    if torch_lib:
        extra += ["--config-settings", f"bundle-torch-library={os.path.relpath(torch_lib, here)}"]
    pip_install(bundled, *extra, cwd=here)

    print("== a bundle path that does not exist: one clear error naming it")
    r = pip_install(os.path.join(tmp, "missing"), "--config-settings",
                    "bundle-library=nowhere/libzarena.so.1", cwd=workdir, expect_ok=False)
    if r.returncode == 0:
        fail("a missing bundle-library was accepted")
    if os.path.join(workdir, "nowhere", "libzarena.so.1") not in r.stdout + r.stderr:
        print(r.stdout, r.stderr)
        fail("the error does not name the path looked for")
    out = use(bundled, workdir)
    if out["library"] != os.path.join(bundled, "zarena", "libzarena.so.1"):
        fail(f"loaded {out['library']}, not the bundled copy")
    if torch_lib:
        r = subprocess.run([sys.executable, "-c", "import zarena.torch as t; "
                            "print(t.library_path()); print(len(t.candidates()), "
                            "len(set(t.candidates())))"], cwd=workdir, capture_output=True,
                           text=True, env=clean_env(PYTHONPATH=bundled), timeout=60)
        want = os.path.join(bundled, "zarena", "libzarena_torch.so")
        lines = r.stdout.split("\n")
        if r.returncode != 0 or lines[0] != want:
            print(r.stdout, r.stderr)
            fail(f"zarena.torch did not load the bundled {want}")
        n, distinct = lines[1].split()
        if n != distinct:
            fail(f"zarena.torch looks in the same place twice: {r.stdout}")
        print("  -> zarena.torch uses", want)
print("python package install and import OK")
