#!/usr/bin/env python3
"""Trains one small transformer twice, in two processes: with PyTorch's default CUDA
allocator and with zarena as the allocator (zarena.torch.enable()); compares the losses
step by step, and reports step time and peak memory side by side, and zarena's free
accounting (no refused, invalid or stale free may happen).

    python3 tests/pytorch/train_compare.py [--steps 200] [--json out.json]

The library is found as the zarena package finds it ($ZARENA_LIBRARY, or the checkout's
build tree: ZARENA_BUILD_DIR=build-dir). Exit status: 0 pass, 1 fail, 77 skipped (no torch
or no CUDA device; prints "skipped: ..."), which CTest reports as skipped.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SKIP = 77
MiB = 1 << 20


def skip(why):
    print(f"skipped: {why}")
    sys.exit(SKIP)


def child(mode, steps, warmup):
    """One training run; prints one JSON line."""
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import torch

    if mode == "zarena":
        import zarena
        import zarena.torch

        zarena.torch.enable()  # before the first CUDA tensor
    torch.manual_seed(0)
    # Same kernels in both runs, and deterministic ones where torch has them (a kernel
    # without a deterministic variant warns instead of failing: warn_only).
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.enable_flash_sdp(False)
    torch.backends.cuda.enable_mem_efficient_sdp(False)
    if hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
        torch.backends.cuda.enable_cudnn_sdp(False)
    torch.backends.cuda.enable_math_sdp(True)
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)

    vocab, seq, batch, width = 512, 128, 32, 256
    embed = torch.nn.Embedding(vocab, width)
    layer = torch.nn.TransformerEncoderLayer(width, 8, 4 * width, dropout=0.0,
                                             batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
    head = torch.nn.Linear(width, vocab)
    model = torch.nn.ModuleDict({"embed": embed, "encoder": encoder, "head": head}).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    gen = torch.Generator(device="cpu").manual_seed(1)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(seq, device=dev)
    side = torch.cuda.Stream(dev)

    losses, times = [], []
    for step in range(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        start = torch.randint(0, vocab, (batch, 1), generator=gen)
        tokens = ((start + torch.arange(seq + 1) * 7) % vocab).to(dev)  # learnable sequence
        x, y = tokens[:, :-1], tokens[:, 1:]
        h = model["encoder"](model["embed"](x), mask=mask, is_causal=True)
        loss = torch.nn.functional.cross_entropy(model["head"](h).reshape(-1, vocab),
                                                 y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        # Work on a second stream, with its own allocations freed there (exercises the
        # stream ordering of zarena.torch); the same in both runs, not part of the loss.
        side.wait_stream(torch.cuda.current_stream())
        fill = float(step % 7 + 1)  # every partial sum stays an exact float32 integer
        with torch.cuda.stream(side):
            scratch = torch.ones(1 << 18, device=dev) * fill
            check = scratch.sum()
        torch.cuda.current_stream().wait_stream(side)
        if check.item() != fill * (1 << 18):
            raise SystemExit(f"side-stream result wrong at step {step}: {check.item()}")
        del scratch, check
        losses.append(loss.item())
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)

    free, total = torch.cuda.mem_get_info(dev)
    out = {"mode": mode, "losses": losses,
           "step_ms": 1e3 * statistics.median(times[warmup:]),
           "device_used_bytes": total - free}
    if mode == "zarena":
        s, info = zarena.torch.stats(0), zarena.torch.info(0)
        out.update(peak_bytes=s.high_water_bytes + s.overflow_peak_bytes,
                   reserved_bytes=s.capacity_bytes + s.overflow_peak_bytes,
                   stats=s.to_dict(), info=info.to_dict(), stats_repr=repr(s))
    else:
        out.update(peak_bytes=torch.cuda.max_memory_allocated(dev),
                   reserved_bytes=torch.cuda.max_memory_reserved(dev))
    print(json.dumps(out))


def run(mode, args):
    env = dict(os.environ, CUBLAS_WORKSPACE_CONFIG=":4096:8", PYTHONDONTWRITEBYTECODE="1")
    if mode == "zarena":
        env.setdefault("ZARENA_CAPACITY_BYTES", str(args.capacity_mib * MiB))
    cmd = [sys.executable, os.path.abspath(__file__), "--child", mode, "--steps",
           str(args.steps), "--warmup", str(args.warmup)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    if r.returncode != 0:
        print(f"--- {mode} run failed (exit {r.returncode}) ---\n{r.stdout}\n{r.stderr}")
        return None, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--capacity-mib", type=int, default=2048,
                   help="zarena region when ZARENA_CAPACITY_BYTES is not set")
    p.add_argument("--rtol", type=float, default=1e-3,
                   help="largest relative loss difference accepted at any step")
    p.add_argument("--timeout", type=int, default=540)
    p.add_argument("--json", help="write both runs' figures here")
    p.add_argument("--child", choices=("default", "zarena"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args.child, args.steps, args.warmup)

    try:
        import torch
    except ImportError as e:
        skip(f"torch is not installed ({e})")
    if not torch.cuda.is_available():
        skip("no CUDA device visible to torch")
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import zarena.torch

    try:
        print(f"torch {torch.__version__} (CUDA {torch.version.cuda}) on "
              f"{torch.cuda.get_device_name(0)}; libzarena {zarena.library_path()}; "
              f"shim {zarena.torch.library_path()}")
    except ImportError as e:
        print(f"FAIL: {e}")
        return 1
    del torch  # the parent never touches CUDA; each run is its own process

    default, _ = run("default", args)
    ours, ours_err = run("zarena", args)
    if default is None or ours is None:
        return 1

    failures = []
    diffs = [abs(a - b) / max(1.0, abs(a)) for a, b in zip(default["losses"], ours["losses"])]
    worst = max(range(len(diffs)), key=diffs.__getitem__)
    if len(ours["losses"]) != len(default["losses"]) or diffs[worst] > args.rtol:
        failures.append(f"losses differ: step {worst}: {default['losses'][worst]} vs "
                        f"{ours['losses'][worst]} (relative {diffs[worst]:.2e} > {args.rtol})")
    if not default["losses"][-1] < default["losses"][0]:
        failures.append("the model did not learn (loss did not fall); the comparison is void")
    s, info = ours["stats"], ours["info"]
    for key, value in (("invalid_frees", s["invalid_frees"]), ("stale_frees", s["stale_frees"]),
                       ("failed_frees", info["failed_frees"]),
                       ("failed_mallocs", info["failed_mallocs"])):
        if value != 0:
            failures.append(f"zarena {key} = {value}")
    if info["stream_joins"] == 0:
        failures.append("the side stream's allocations were not ordered (stream_joins = 0)")
    if "zarena_torch:" in ours_err:
        failures.append("libzarena_torch reported: " + ours_err.strip().splitlines()[-1])

    fmt = zarena.format_bytes
    rows = [("", "default allocator", "zarena"),
            ("loss first / last", f"{default['losses'][0]:.4f} / {default['losses'][-1]:.4f}",
             f"{ours['losses'][0]:.4f} / {ours['losses'][-1]:.4f}"),
            ("max relative loss diff", "", f"{diffs[worst]:.2e} (step {worst})"),
            ("step time (median)", f"{default['step_ms']:.2f} ms", f"{ours['step_ms']:.2f} ms"),
            ("peak allocated", fmt(default["peak_bytes"]) + " (max_memory_allocated)",
             fmt(ours["peak_bytes"]) + " (high water + overflow peak)"),
            ("reserved", fmt(default["reserved_bytes"]) + " (max_memory_reserved)",
             fmt(ours["reserved_bytes"]) + " (region + overflow peak)"),
            ("device memory in use at end (all processes)", fmt(default["device_used_bytes"]),
             fmt(ours["device_used_bytes"])),
            ("frees refused / invalid / stale", "",
             f"{info['failed_frees']} / {s['invalid_frees']} / {s['stale_frees']}"),
            ("mallocs / frees / stream joins", "",
             f"{info['mallocs']} / {info['frees']} / {info['stream_joins']}"),
            ("overflow allocations", "", str(s["overflow_allocs"]))]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    print(f"\n{args.steps} steps, timing after {args.warmup} warm-up steps")
    for r in rows:
        print(f"  {r[0]:<{w0}}  {r[1]:<{w1}}  {r[2]}")
    print(f"  zarena stats: {ours['stats_repr']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"default": default, "zarena": ours, "rtol": args.rtol}, f, indent=1)
    if failures:
        for f in failures:
            print("FAIL:", f)
        return 1
    same = "bitwise identical" if diffs[worst] == 0 else f"within {args.rtol}"
    print(f"PASS: losses agree ({same}), no refused/invalid/stale frees")
    return 0


if __name__ == "__main__":
    sys.exit(main())
