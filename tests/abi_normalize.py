#!/usr/bin/env python3
"""Lets abidiff accept the one struct change minor versions may make: appending members to
a versioned struct (struct_size tells the library how much of it the caller has).

For each named struct, checks that the current ABI description starts with exactly the
baseline's members (same names, offsets and types, in order), then writes a copy of the
current description with those structs cut back to the baseline's members and size. abidiff
on that copy sees no appended members, and still sees every other change. (libabigail's
own "has_data_member_inserted_at = end" suppression also hides reorders, so it is not used.)

usage: abi_normalize.py <baseline.abi> <current.abi> <normalized out.abi> <struct name>...
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


def definitions(root, struct):
    return [c for c in root.iter("class-decl")
            if c.get("name") == struct and c.get("is-declaration-only") != "yes"]


def members(by_id, cls):
    out = []
    for dm in cls.findall("data-member"):
        var = dm.find("var-decl")
        out.append((var.get("name"), int(dm.get("layout-offset-in-bits")),
                    type_name(by_id, var.get("type-id"))))
    return out


def main():
    base_path, cur_path, out_path, structs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    base, base_ids = load(base_path)
    tree = ET.parse(cur_path)
    cur = tree.getroot()
    cur_ids = {el.get("id"): el for el in cur.iter() if el.get("id") is not None}
    bad = False
    for s in structs:
        old_defs = definitions(base, s)
        if not old_defs:
            continue  # not in the baseline: nothing to preserve
        old_cls = old_defs[0]
        old = members(base_ids, old_cls)
        new_defs = definitions(cur, s)
        if not new_defs:
            print(f"FAIL: struct {s} is no longer described by the library (if the debug info "
                  "has only a declaration of it, build with full type info, e.g. clang "
                  "-fstandalone-debug)")
            bad = True
        for cls in new_defs:
            new = members(cur_ids, cls)
            for i, m in enumerate(old):
                if i >= len(new) or new[i] != m:
                    got = new[i] if i < len(new) else "(missing)"
                    print(f"FAIL: struct {s} member #{i}: baseline {m}, now {got}")
                    bad = True
                    break
            else:
                if len(new) > len(old):
                    print(f"note: {s} appends {[m[0] for m in new[len(old):]]} (compatible)")
                for dm in cls.findall("data-member")[len(old):]:
                    cls.remove(dm)
                cls.set("size-in-bits", old_cls.get("size-in-bits"))
    tree.write(out_path, encoding="unicode")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
