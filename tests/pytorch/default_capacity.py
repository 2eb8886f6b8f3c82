#!/usr/bin/env python3
"""zarena.torch's default capacity on a GPU: with no ZARENA_CAPACITY_BYTES the arena of
cuda:0 may grow to the device's memory (its capacity is cudaMemGetInfo's total, rounded down
to 2 MiB) while committing only what PyTorch holds, and torch.cuda.empty_cache() gives back
what is committed above the region's top.

    python3 tests/pytorch/default_capacity.py

Exit status: 0 pass, 1 fail, 77 skipped (no torch or no CUDA device; prints "skipped:").
The library is found as the zarena package finds it ($ZARENA_LIBRARY,
$ZARENA_TORCH_LIBRARY, or the checkout's build tree).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
PASS, FAIL, SKIP = 0, 1, 77
MiB = 1 << 20


def main():
    try:
        import torch
    except ImportError:
        print("skipped: torch is not installed")
        return SKIP
    if not torch.cuda.is_available():
        print("skipped: no CUDA device")
        return SKIP
    for name in ("ZARENA_CAPACITY_BYTES", "ZERFOO_ARENA_SIZE_GB", "ZARENA_EXPANDABLE",
                 "ZARENA_OVERFLOW_RETAIN_BYTES", "ZERFOO_OVERFLOW_POOL_RETAIN_GB"):
        os.environ.pop(name, None)
    os.environ["ZARENA_LOG_LEVEL"] = "warn"
    import zarena.torch

    zarena.torch.enable()
    failures = []
    want = zarena.torch.default_capacity(0)
    keep = torch.ones(MiB, device="cuda")  # 4 MiB: creates the arena
    _, total = torch.cuda.mem_get_info(0)
    device = total // (2 * MiB) * (2 * MiB)
    stats, region = zarena.torch.stats(0), zarena.torch.region(0)
    print(f"device {total} bytes; default_capacity {want}; arena capacity "
          f"{stats.capacity_bytes}, committed {region.committed_bytes}")
    if want != device or stats.capacity_bytes != device:
        failures.append(f"capacity {stats.capacity_bytes} (default_capacity {want}), want the "
                        f"device's {device}")
    if not region.expandable or region.committed_bytes > 256 * MiB:
        failures.append(f"expandable {region.expandable}, committed {region.committed_bytes}")
    # 1 GiB of tensors (the old default capacity), freed, then empty_cache.
    big = [torch.empty(256 * MiB, dtype=torch.uint8, device="cuda") for _ in range(4)]
    torch.cuda.synchronize()
    high = zarena.torch.region(0).committed_bytes
    if high < 1024 * MiB or zarena.torch.stats(0).overflow_allocs != 0:
        failures.append(f"1 GiB of tensors: committed {high}, overflow "
                        f"{zarena.torch.stats(0).overflow_allocs}")
    del big
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    after = zarena.torch.region(0).committed_bytes
    print(f"committed {high} with 1 GiB of tensors, {after} after empty_cache")
    if after >= high or after > 256 * MiB:
        failures.append(f"empty_cache left {after} committed (was {high})")
    if float(keep.sum().item()) != MiB:
        failures.append("a live tensor changed across empty_cache")
    print(zarena.torch.memory_summary(0))
    for f in failures:
        print("FAIL:", f)
    print("default_capacity:", "FAIL" if failures else "PASS")
    return FAIL if failures else PASS


if __name__ == "__main__":
    sys.exit(main())
