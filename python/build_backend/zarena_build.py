"""A PEP 517 build backend for the zarena package, standard library only.

pip builds zarena with it without downloading anything (requires = []). It makes a wheel
of the zarena/ package; with the config setting (or environment variable)
  bundle-library=PATH        (ZARENA_BUNDLE_LIBRARY)        PATH -> zarena/libzarena.so.1
  bundle-torch-library=PATH  (ZARENA_BUNDLE_TORCH_LIBRARY)  PATH -> zarena/libzarena_torch.so
it also puts copies of the shared libraries next to the package, where the package looks
first after $ZARENA_LIBRARY; such a wheel is tagged for this platform instead of "any".
A relative PATH is read from the directory pip was run in (not python/, where pip runs
this backend), so from a checkout's root:
  pip install --config-settings bundle-library=build/capi/libzarena.so.1 \
      --config-settings bundle-torch-library=build/capi/libzarena_torch.so ./python
Editable installs (pip install -e) put python/ on sys.path through a .pth file.
"""

import base64
import hashlib
import io
import os
import re
import sysconfig
import zipfile

NAME = "zarena"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
SUMMARY = "GPU memory arena runtime behind a stable C ABI: Python bindings (ctypes)"
BUNDLES = {"bundle-library": ("ZARENA_BUNDLE_LIBRARY", "libzarena.so.1"),
           "bundle-torch-library": ("ZARENA_BUNDLE_TORCH_LIBRARY", "libzarena_torch.so")}


def _version():
    with open(os.path.join(HERE, NAME, "_version.py")) as f:
        return re.search(r'__version__ = "([^"]+)"', f.read()).group(1)


def _metadata():
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {_version()}\n"
            f"Summary: {SUMMARY}\nRequires-Python: >=3.8\nLicense: see the zarena sources\n")


def _caller_dir():
    """The directory pip was started from: pip runs this backend in python/, but a
    relative path on pip's command line is meant from where the user typed it. The shell's
    $PWD survives into the backend's process; the working directory is the fallback."""
    pwd = os.environ.get("PWD")
    if pwd and os.path.isabs(pwd) and os.path.isdir(pwd):
        return pwd
    return os.getcwd()


def _bundles(config_settings):
    out = []
    for key, (env, target) in BUNDLES.items():
        path = (config_settings or {}).get(key) or os.environ.get(env)
        if path:
            path = os.path.expanduser(path)
            tried = [path] if os.path.isabs(path) else [os.path.join(_caller_dir(), path)]
            if not os.path.isabs(path) and os.path.join(os.getcwd(), path) not in tried:
                tried.append(os.path.join(os.getcwd(), path))
            found = next((p for p in tried if os.path.isfile(p)), None)
            if found is None:
                raise FileNotFoundError(f"{key}={path}: no such file (looked for "
                                        f"{' and '.join(tried)}); build zarena first "
                                        "(./scripts/demo.sh) or give an absolute path")
            out.append((found, f"{NAME}/{target}"))
    return out


def _package_files():
    pkg = os.path.join(HERE, NAME)
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py"):
            yield os.path.join(pkg, name), f"{NAME}/{name}"


class _Wheel:
    def __init__(self, directory, tag):
        self.dist_info = f"{NAME}-{_version()}.dist-info"
        self.name = f"{NAME}-{_version()}-{tag}.whl"
        self.path = os.path.join(directory, self.name)
        self.tag = tag
        self.records = []
        self.zip = zipfile.ZipFile(self.path, "w", zipfile.ZIP_DEFLATED)

    def add(self, arcname, data, mode=0o644):
        info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = (0o100000 | mode) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.records.append(f"{arcname},sha256={digest},{len(data)}")

    def add_file(self, path, arcname, mode=0o644):
        with open(path, "rb") as f:
            self.add(arcname, f.read(), mode)

    def close(self):
        purelib = "true" if self.tag.endswith("-any") else "false"
        self.add(f"{self.dist_info}/METADATA", _metadata().encode())
        self.add(f"{self.dist_info}/WHEEL", (
            "Wheel-Version: 1.0\nGenerator: zarena_build\n"
            f"Root-Is-Purelib: {purelib}\nTag: {self.tag}\n").encode())
        record = f"{self.dist_info}/RECORD"
        self.zip.writestr(zipfile.ZipInfo(record, date_time=(2020, 1, 1, 0, 0, 0)),
                          "\n".join(self.records + [f"{record},,"]) + "\n")
        self.zip.close()
        return self.name


def _platform_tag():
    return "py3-none-" + re.sub(r"[-.]", "_", sysconfig.get_platform())


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    bundles = _bundles(config_settings)
    wheel = _Wheel(wheel_directory, _platform_tag() if bundles else "py3-none-any")
    for path, arcname in _package_files():
        wheel.add_file(path, arcname)
    for path, arcname in bundles:
        wheel.add_file(path, arcname, 0o755)
    return wheel.close()


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    wheel = _Wheel(wheel_directory, "py3-none-any")
    wheel.add(f"__editable__.{NAME}.pth", (HERE + "\n").encode())
    return wheel.close()


def build_sdist(sdist_directory, config_settings=None):
    import tarfile

    base = f"{NAME}-{_version()}"
    path = os.path.join(sdist_directory, base + ".tar.gz")
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        files = [(os.path.join(HERE, "pyproject.toml"), "pyproject.toml"),
                 (os.path.join(HERE, "build_backend", "zarena_build.py"),
                  "build_backend/zarena_build.py")] + list(_package_files())
        for src, arcname in files:
            tar.add(src, arcname=f"{base}/{arcname}")
        pkg_info = _metadata().encode()
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size = len(pkg_info)
        tar.addfile(info, io.BytesIO(pkg_info))
    return os.path.basename(path)
