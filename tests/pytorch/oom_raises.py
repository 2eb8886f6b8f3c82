#!/usr/bin/env python3
"""A failed allocation under zarena.torch raises in Python, and the process goes on.

With a 64 MiB arena and overflow refused, a 256 MiB tensor cannot be served: PyTorch must
raise (RuntimeError with zarena's message, verdict and fix; torch.cuda.OutOfMemoryError is
accepted too) instead of the process aborting or a tensor at address 0 appearing. After
it, tensors that fit are served and computed on, the failure is counted once, and nothing
is freed twice. Also prints zarena.torch.memory_summary().

    python3 tests/pytorch/oom_raises.py

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
    # The arena of cuda:0 is configured from the environment at its first allocation.
    os.environ.update(ZARENA_CAPACITY_BYTES="64MiB", ZARENA_OVERFLOW_POLICY="refuse",
                      ZARENA_LOG_LEVEL="warn")
    import zarena.torch

    zarena.torch.enable()
    keep = torch.ones(4 * MiB // 4, device="cuda")  # 4 MiB
    failures = []
    raised = None
    try:
        big = torch.empty(256 * MiB, dtype=torch.uint8, device="cuda")
        failures.append(f"a 256 MiB tensor in a 64 MiB arena was served at {big.data_ptr():#x}")
    except (RuntimeError, torch.cuda.OutOfMemoryError) as e:
        raised = e
    if raised is not None:
        text = str(raised)
        print(f"raised {type(raised).__name__}: {text[:300]}")
        for want in ("zarena_torch: malloc(", "out of memory", "verdict=", "; fix: "):
            if want not in text:
                failures.append(f"the error lacks {want!r}")
    # The process and the device go on.
    x = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
    total = float((x * 2).sum().item())
    torch.cuda.synchronize()
    if total != float((1 << 20) * ((1 << 20) - 1)):
        failures.append(f"computation after the failure gave {total}")
    if float(keep.sum().item()) != 4 * MiB // 4:
        failures.append("a tensor allocated before the failure changed")
    info = zarena.torch.info(0)
    stats = zarena.torch.stats(0)
    print(zarena.torch.memory_summary(0))
    if info.failed_mallocs != 1:
        failures.append(f"failed_mallocs {info.failed_mallocs}, want 1")
    if info.failed_frees or stats.invalid_frees or stats.stale_frees:
        failures.append(f"bad frees: {info}, invalid {stats.invalid_frees}, "
                        f"stale {stats.stale_frees}")
    for f in failures:
        print("FAIL:", f)
    print("oom_raises:", "FAIL" if failures else "PASS")
    return FAIL if failures else PASS


if __name__ == "__main__":
    sys.exit(main())
