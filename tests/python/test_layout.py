"""The ctypes structs against the C compiler's layout of zarena.h (and zarena_graph.h,
zarena_torch.h).

No number here is written by hand: the field names come from the headers themselves, and a
probe program compiled from them prints sizeof, _Alignof and each field's offsetof/sizeof.
CTest sets CC to the compiler of the build (tests/python.cmake); run by hand, $CC or cc is
used, and the case skips only when there is no compiler at all.
"""
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support import ROOT, zarena  # noqa: E402
import zarena.torch  # noqa: E402  (needs no torch)
from zarena import _structs  # noqa: E402

ZARENA_H = os.path.join(ROOT, "capi", "include", "zarena", "zarena.h")
GRAPH_H = os.path.join(ROOT, "capi", "include", "zarena", "zarena_graph.h")
TORCH_H = os.path.join(ROOT, "zarena_torch", "zarena_torch.h")

# Each C struct and its mirror. Versioned structs may grow at the end; only zarena_stats
# may be ahead of its mirror (others append counters; the reader passes its own struct_size
# and never sees the tail). Every other mirror must equal the header exactly.
MIRRORS = dict(_structs.C_STRUCTS, zarena_torch_info=zarena.torch.Info)
MAY_GROW = {"zarena_stats"}


def header_structs(path):
    """{struct name: [field names in order]} for every `typedef struct X {...} X;`."""
    with open(path) as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    out = {}
    for name, body in re.findall(r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*\1\s*;", text, re.S):
        fields = []
        for decl in body.split(";"):
            decl = decl.strip()
            if not decl:
                continue
            m = re.search(r"(\w+)\s*$", decl)
            if m is None or "(" in decl or "[" in decl:
                raise AssertionError(f"{name}: cannot read the declaration {decl!r}")
            fields.append(m.group(1))
        out[name] = fields
    return out


def probe_source(structs):
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "zarena/zarena.h"',
             '#include "zarena/zarena_graph.h"', '#include "zarena_torch.h"', "int main(void) {",
             '  printf("{");']
    for i, (name, fields) in enumerate(structs.items()):
        sep = "," if i else ""
        lines.append(f'  printf("{sep}\\"{name}\\": {{\\"size\\": %zu, \\"align\\": %zu, '
                     f'\\"fields\\": [", sizeof({name}), (size_t)_Alignof({name}));')
        for j, field in enumerate(fields):
            fsep = "," if j else ""
            lines.append(f'  printf("{fsep}[\\"{field}\\", %zu, %zu]", offsetof({name}, {field}), '
                         f'sizeof(((const {name}*)0)->{field}));')
        lines.append('  printf("]}");')
    lines += ['  printf("}\\n");', "  return 0;", "}"]
    return "\n".join(lines) + "\n"


def compiler():
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


class LayoutTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.header = header_structs(ZARENA_H)
        cls.header.update(header_structs(GRAPH_H))
        cls.header.update(header_structs(TORCH_H))
        cc = compiler()
        if cc is None:
            raise unittest.SkipTest("no C compiler (set CC)")
        with tempfile.TemporaryDirectory(prefix="zarena-layout-") as tmp:
            src, exe = os.path.join(tmp, "probe.c"), os.path.join(tmp, "probe")
            with open(src, "w") as f:
                f.write(probe_source(cls.header))
            r = subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "-I",
                                os.path.join(ROOT, "capi", "include"), "-I",
                                os.path.dirname(TORCH_H), src, "-o", exe],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise AssertionError(f"the layout probe did not compile ({cc}):\n{r.stderr}")
            cls.c = json.loads(subprocess.run([exe], capture_output=True, text=True,
                                              check=True).stdout)

    def test_parser_found_every_field(self):
        # Between consecutive fields only padding (less than the next field's size, which is
        # its alignment here), and the last field ends within the struct's tail padding: a
        # field the parser missed would leave a hole or a tail.
        for name, c in self.c.items():
            with self.subTest(struct=name):
                end = 0
                for field, off, size in c["fields"]:
                    self.assertGreaterEqual(off, end, f"{field} overlaps the field before")
                    self.assertLess(off - end, max(size, 1), f"a hole before {field}")
                    end = off + size
                self.assertLess(c["size"] - end, c["align"], "fields missing at the end")

    def test_every_c_struct_has_a_mirror(self):
        self.assertEqual(set(self.c), set(MIRRORS),
                         "a struct in zarena.h/zarena_torch.h has no ctypes mirror (or the "
                         "other way round)")

    def test_field_names_offsets_and_sizes(self):
        for name, mirror in MIRRORS.items():
            with self.subTest(struct=name):
                c = self.c[name]
                py = [(f, getattr(mirror, f).offset, getattr(mirror, f).size)
                      for f, _ in mirror._fields_]
                want = [tuple(x) for x in c["fields"]]
                if name in MAY_GROW:
                    self.assertEqual(py, want[:len(py)], "the mirror is not a prefix of C")
                    self.assertLessEqual(ctypes.sizeof(mirror), c["size"])
                else:
                    self.assertEqual(py, want)
                    self.assertEqual(ctypes.sizeof(mirror), c["size"])
                self.assertEqual(ctypes.alignment(mirror), c["align"])

    def test_stats_mirror_covers_the_header(self):
        c = [f for f, _, _ in self.c["zarena_stats"]["fields"]]
        missing = c[len(_structs.Stats._fields_):]
        if missing:
            self.skipTest(f"zarena_stats has fields zarena.Stats does not read yet: {missing}")
        self.assertEqual(ctypes.sizeof(_structs.Stats), self.c["zarena_stats"]["size"])

    def test_library_fills_the_mirrors_size(self):
        lib = zarena.library()
        cfg = zarena.Config()
        lib.zarena_config_init_sized(ctypes.byref(cfg), ctypes.sizeof(cfg))
        self.assertEqual(cfg.struct_size, self.c["zarena_config"]["size"])
        self.assertEqual((cfg.alignment, cfg.reserved0), (256, 0))
        # The exported zarena_config_init fills the 1.0.0 layout: everything before the 1.1
        # fields, and nothing of them.
        old = zarena.Config()
        old.poison_word = 0xDEAD
        lib.zarena_config_init(ctypes.byref(old))
        offsets = {f: off for f, off, _ in self.c["zarena_config"]["fields"]}
        self.assertEqual(old.struct_size, offsets["poison_word"])
        self.assertEqual(old.poison_word, 0xDEAD)

    def test_parser_reads_declarations(self):
        got = header_structs(ZARENA_H)
        self.assertEqual(got["zarena_block"], ["ptr", "epoch", "size", "flags", "tag"])
        self.assertEqual(got["zarena_config"][-1], "trace_file")


if __name__ == "__main__":
    unittest.main()
