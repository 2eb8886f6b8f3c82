#!/usr/bin/env python3
"""Checks that each versioned struct in the current ABI description starts with exactly the
members of the baseline: same names, offsets and types, in order. Appending members is how
minor versions grow these structs; abi/zarena.abignore lets abidiff accept that growth, but
libabigail's "inserted at end" rule alone would also let a reorder or a retyped member
through when something is appended in the same change, so this closes that gap.

usage: abi_prefix_check.py <baseline.abi> <current.abi> <struct name>...
"""
import sys
import xml.etree.ElementTree as ET


def load(path):
    root = ET.parse(path).getroot()
    by_id = {}
    for el in root.iter():
        tid = el.get("id")
        if tid is not None:
            by_id[tid] = el
    return root, by_id


def type_name(by_id, tid, depth=0):
    """A textual type that does not depend on type-id numbering."""
    el = by_id.get(tid)
    if el is None or depth > 20:
        return "?" + str(tid)
    tag = el.tag
    if tag == "pointer-type-def":
        return type_name(by_id, el.get("type-id"), depth + 1) + "*"
    if tag == "qualified-type-def":
        quals = [q for q in ("const", "volatile") if el.get(q) == "yes"]
        return " ".join(quals) + " " + type_name(by_id, el.get("type-id"), depth + 1)
    if tag == "typedef-decl":
        # The header's own spelling (uint64_t); what it maps to is the platform's business
        # and compilers spell base types differently.
        return el.get("name")
    if tag == "array-type-def":
        return type_name(by_id, el.get("type-id"), depth + 1) + "[" + str(el.get("size-in-bits")) + "]"
    if tag == "function-type":
        parts = [type_name(by_id, p.get("type-id"), depth + 1) for p in el if p.tag == "parameter"]
        ret = [type_name(by_id, r.get("type-id"), depth + 1) for r in el if r.tag == "return"]
        return "fn(" + ",".join(parts) + ")->" + ",".join(ret)
    return tag + ":" + str(el.get("name")) + ":" + str(el.get("size-in-bits"))


def members(root, by_id, struct):
    for cls in root.iter("class-decl"):
        if cls.get("name") == struct and cls.get("is-declaration-only") != "yes":
            out = []
            for dm in cls.findall("data-member"):
                var = dm.find("var-decl")
                out.append((var.get("name"), int(dm.get("layout-offset-in-bits")),
                            type_name(by_id, var.get("type-id"))))
            return out
    return None


def main():
    base_path, cur_path, structs = sys.argv[1], sys.argv[2], sys.argv[3:]
    base, base_ids = load(base_path)
    cur, cur_ids = load(cur_path)
    bad = False
    for s in structs:
        old, new = members(base, base_ids, s), members(cur, cur_ids, s)
        if old is None:
            continue  # not in the baseline: nothing to preserve
        if new is None:
            print(f"FAIL: struct {s} is no longer described by the library")
            bad = True
            continue
        for i, m in enumerate(old):
            if i >= len(new) or new[i] != m:
                got = new[i] if i < len(new) else "(missing)"
                print(f"FAIL: struct {s} member #{i}: baseline {m}, now {got}")
                bad = True
                break
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
