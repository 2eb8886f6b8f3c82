#!/usr/bin/env python3
"""Trains one small transformer twice, in two processes: with PyTorch's default CUDA
allocator and with zarena as the allocator (zarena.torch.enable()); compares the losses
step by step, and reports step time and peak memory side by side, and zarena's free
accounting (no refused, invalid or stale free, no failed malloc may happen).

    python3 tests/pytorch/train_compare.py [--steps 200] [--json out.json]
    python3 tests/pytorch/train_compare.py --dry-run [--json out.json]
    python3 tests/pytorch/train_compare.py --vary-seq   # a new sequence length every step

The library is found as the zarena package finds it ($ZARENA_LIBRARY, or the checkout's
build tree: ZTEST_BUILD_DIR=build-dir; libzarena_torch.so next to it). Exit status: 0 pass,
1 fail, 77 skipped (no torch or no CUDA device; prints "skipped: ..."), which CTest reports
as skipped. --json FILE gets the verdict, every figure and both runs' data in every case
(also "skipped" and failed runs).

--dry-run needs neither torch nor a GPU: each run is a child process that makes synthetic
losses, and the zarena run drives libzarena_torch's malloc/free pair through ctypes on the
host backend (as PyTorch would call it) and reports its real stats, so the process plumbing,
the comparison, the table, the JSON and the exit status are exercised end to end.
--dry-run-fault injects a failure into the zarena run (to see the checks fire).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PACKAGE = os.path.join(ROOT, "python")
PASS, FAIL, SKIP = 0, 1, 77
MiB = 1 << 20
FAULTS = ("loss", "free", "crash")


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def timing(times, warmup):
    measured = times[warmup:] or times
    return {"step_ms": 1e3 * statistics.median(measured),
            "step_p90_ms": 1e3 * percentile(measured, 0.9), "timed_steps": len(measured)}


def collect_zarena_events(zarena):
    """zarena's log records of this process, kept for the report and echoed to stderr."""
    events = []

    def keep(rec):
        events.append({"event": rec.event, "level": rec.level, "message": rec.message,
                       "verdict": rec.fields.get("verdict")})
        print(f"zarena {rec.event}: {rec.message}", file=sys.stderr)

    zarena.set_log_callback(keep, zarena.LOG_INFO)
    return events


def handed_out_peak(s, info):
    """The most bytes zarena had handed out at once, as max_memory_allocated counts them:
    libzarena_torch's exact count of the blocks it handed out and PyTorch had not given back
    (zarena_torch_info.live_peak_bytes: region and overflow blocks, each its aligned size).
    Without it (an older libzarena_torch), the library's used peak plus the overflow peak,
    which is no like for like: it counts a step plan's zone whole, and with PyTorch's two
    threads (the autograd thread frees the forward's activations) it is a bound that climbs
    to the region's top (zarena.h, zarena_reset_peak_stats); it is reported beside."""
    if "live_peak_bytes" in info:
        return info["live_peak_bytes"]
    return used_peak(s)


def used_peak(s):
    """zarena_stats' used peak plus the overflow peak (see handed_out_peak)."""
    return s["used_peak_bytes"] + s["overflow_peak_bytes"]


# The first steps' figures, read at each boundary before it (the learning steps before a
# plan engages set the run's peaks: the issue 31 question is which of them does).
FIRST_STEPS = 6


def boundary_state(zarena_torch):
    """The device arena's region top, committed bytes, zone and the shim's live peak now."""
    try:
        s = zarena_torch.stats(0)
    except LookupError:
        return None
    info = zarena_torch.info(0).to_dict()
    return {"top": s.high_water_bytes, "committed": s.committed_bytes,
            "zone": s.plan_zone_bytes, "live_peak": info.get("live_peak_bytes", 0)}


def reserved_of(rep, committed_peak=0):
    """What zarena held of the device at most, as max_memory_reserved counts it: an
    expandable region its committed peak, a fixed one its capacity; plus the overflow peak.
    The arena is never reset, but a step plan engaging gives back what the first steps
    committed above its zone (a trim at that boundary), so the committed bytes at the end
    are not the peak: committed_peak is the most committed_bytes read just before each
    step boundary (within a step they only grow; they go down only at a boundary)."""
    s = rep["stats"]
    region = (max(committed_peak, s["committed_bytes"]) if rep["region"]["expandable"]
              else s["capacity_bytes"])
    return region + s["overflow_peak_bytes"]


def committed_now(zarena_torch):
    """The device arena's committed bytes now (0 before its first allocation)."""
    try:
        return zarena_torch.stats(0).committed_bytes
    except LookupError:
        return 0


def seq_of(step, vary):
    """The step's sequence length: 128, or with --vary-seq one of 64..128 changing every
    step (a batch of another length: every activation's shape changes), the same in both
    runs."""
    return 64 + (step * 37) % 65 if vary else 128


def child(mode, steps, warmup, vary=False):
    """One training run on the GPU; prints one JSON line."""
    sys.path.insert(0, PACKAGE)
    import torch

    events = []
    if mode == "zarena":
        import zarena
        import zarena.torch

        events = collect_zarena_events(zarena)
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

    losses, times, first_steps = [], [], []
    committed_peak = 0
    for step in range(steps):
        if mode == "zarena":  # before the boundary, which may give memory back
            committed_peak = max(committed_peak, committed_now(zarena.torch))
            if 0 < step <= FIRST_STEPS:
                first_steps.append(boundary_state(zarena.torch))
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        if mode == "zarena":
            zarena.torch.step()  # the step's start: a fact for the diagnosis, plans learn it
        n = seq_of(step, vary)
        start = torch.randint(0, vocab, (batch, 1), generator=gen)
        tokens = ((start + torch.arange(n + 1) * 7) % vocab).to(dev)  # learnable sequence
        x, y = tokens[:, :-1], tokens[:, 1:]
        h = model["encoder"](model["embed"](x), mask=mask[:n, :n], is_causal=True)
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
    out = {"mode": mode, "losses": losses, "device_used_bytes": total - free,
           "device": torch.cuda.get_device_name(dev), "torch": torch.__version__,
           "cuda": torch.version.cuda, "vary_seq": vary}
    out.update(timing(times, warmup))
    if mode == "zarena":
        rep = zarena.torch.report(0)
        s = rep["stats"]
        out.update(peak_bytes=handed_out_peak(s, rep["info"]), used_peak_bytes=used_peak(s),
                   top_bytes=s["high_water_bytes"],
                   reserved_bytes=reserved_of(rep, committed_peak),
                   committed_at_end_bytes=s["committed_bytes"], first_steps=first_steps,
                   stats=s, info=rep["info"], region=rep["region"], live_at_end=rep["live"],
                   stats_repr=repr(zarena.torch.stats(0)), zarena_events=events)
    else:
        out.update(peak_bytes=torch.cuda.max_memory_allocated(dev),
                   reserved_bytes=torch.cuda.max_memory_reserved(dev))
    print(json.dumps(out))


def child_dry(mode, steps, warmup, fault):
    """A run without torch: synthetic losses; the zarena run calls libzarena_torch's pair
    through ctypes (host backend) the way PyTorch calls it, so its figures are real."""
    losses = [4.0 * 0.99 ** step for step in range(steps)]
    out = {"mode": mode, "dry_run": True, "device": "host (dry run)", "torch": None,
           "cuda": None}
    sizes = [(1 + (i * 37) % 64) << 14 for i in range(24)]  # 16 KiB .. 1 MiB
    times = []
    if mode == "default":
        for _ in range(steps):
            t0 = time.perf_counter()
            sum(sizes)  # stands in for the step; the figures of a dry run mean nothing
            times.append(time.perf_counter() - t0)
        out.update(losses=losses, device_used_bytes=0, peak_bytes=sum(sizes),
                   reserved_bytes=sum(sizes))
        out.update(timing(times, warmup))
        print(json.dumps(out))
        return
    sys.path.insert(0, PACKAGE)
    import zarena
    import zarena.torch

    events = collect_zarena_events(zarena)
    lib = zarena.torch.library()
    weights = [lib.zarena_torch_malloc(256 << 10, 0, None) for _ in range(8)]
    committed_peak = 0
    first_steps = []
    for step in range(steps):
        committed_peak = max(committed_peak, committed_now(zarena.torch))
        if 0 < step <= FIRST_STEPS:
            first_steps.append(boundary_state(zarena.torch))
        t0 = time.perf_counter()
        zarena.torch.step()
        held = [lib.zarena_torch_malloc(n, 0, None) for n in sizes]
        for p, n in zip(held, sizes):
            lib.zarena_torch_free(p, n, 0, None)
        times.append(time.perf_counter() - t0)
    if fault == "loss":
        losses[steps // 2] *= 1.5
    elif fault == "free":
        lib.zarena_torch_free(weights[0] + 256, 16, 0, None)  # interior: refused
    elif fault == "crash":
        lib.zarena_torch_malloc(1 << 50, 0, None)  # 1 PiB: a failed malloc aborts
    rep = zarena.torch.report(0)
    s = rep["stats"]
    out.update(losses=losses, device_used_bytes=0,
               peak_bytes=handed_out_peak(s, rep["info"]), used_peak_bytes=used_peak(s),
               top_bytes=s["high_water_bytes"],
               reserved_bytes=reserved_of(rep, committed_peak),
               committed_at_end_bytes=s["committed_bytes"], first_steps=first_steps, stats=s,
               info=rep["info"], region=rep["region"], live_at_end=rep["live"],
               stats_repr=repr(zarena.torch.stats(0)), zarena_events=events)
    out.update(timing(times, warmup))
    print(json.dumps(out))


def run(mode, args):
    """Runs one child; (its JSON, its stderr, a failure text or None)."""
    env = dict(os.environ, CUBLAS_WORKSPACE_CONFIG=":4096:8", PYTHONDONTWRITEBYTECODE="1")
    if mode == "zarena":
        # The default is zarena.torch's own (the device's memory, committed on demand): the
        # issue's figures are for default settings. A dry run on the host names one.
        capacity_mib = args.capacity_mib or (2048 if args.dry_run else 0)
        if capacity_mib:
            env.setdefault("ZARENA_CAPACITY_BYTES", str(capacity_mib * MiB))
    cmd = [sys.executable, os.path.abspath(__file__), "--child", mode, "--steps",
           str(args.steps), "--warmup", str(args.warmup)]
    if args.vary_seq:
        cmd.append("--vary-seq")
    if args.dry_run:
        env["ZARENA_BACKEND"] = "host"
        cmd.append("--dry-run")
        if args.dry_run_fault and mode == "zarena":
            cmd += ["--dry-run-fault", args.dry_run_fault]
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return None, "", f"the {mode} run took longer than {args.timeout} s"
    if r.returncode != 0:
        tail = "\n".join(r.stderr.strip().splitlines()[-15:])
        return None, r.stderr, f"the {mode} run failed (exit {r.returncode}):\n{tail}"
    try:
        return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr, None
    except (ValueError, IndexError):
        return None, r.stderr, f"the {mode} run printed no result: {r.stdout[-500:]!r}"


def compare(default, ours, ours_err, rtol, require_joins):
    """(rows of the table, failures): every check of the comparison, nothing printed."""
    failures = []
    dl, zl = default["losses"], ours["losses"]
    diffs = [abs(a - b) / max(1.0, abs(a)) for a, b in zip(dl, zl)]
    worst = max(range(len(diffs)), key=diffs.__getitem__) if diffs else 0
    worst_diff = diffs[worst] if diffs else float("inf")
    if len(zl) != len(dl) or not diffs:
        failures.append(f"the runs made {len(dl)} and {len(zl)} steps")
    elif worst_diff > rtol:
        failures.append(f"losses differ: step {worst}: {dl[worst]} vs {zl[worst]} "
                        f"(relative {worst_diff:.2e} > {rtol})")
    if dl and not dl[-1] < dl[0]:
        failures.append("the model did not learn (loss did not fall); the comparison is void")
    s, info = ours["stats"], ours["info"]
    for key, value in (("failed_frees (refused by zarena)", info["failed_frees"]),
                       ("invalid_frees", s["invalid_frees"]), ("stale_frees", s["stale_frees"]),
                       ("failed_mallocs", info["failed_mallocs"])):
        if value != 0:
            failures.append(f"zarena {key} = {value}")
    if require_joins and info["stream_joins"] == 0:
        failures.append("the side stream's allocations were not ordered (stream_joins = 0)")
    shim_lines = [line for line in ours_err.splitlines() if line.startswith("zarena_torch:")]
    if shim_lines:
        failures.append("libzarena_torch reported: " + shim_lines[-1])

    from zarena import format_bytes as fmt
    warnings = {}
    for e in ours.get("zarena_events", []):
        if e["level"] >= 3:  # LOG_WARN
            key = e["event"] + (f" ({e['verdict']})" if e.get("verdict") else "")
            warnings[key] = warnings.get(key, 0) + 1
    agree = "yes" if diffs and worst_diff <= rtol else "NO"
    rows = [("", "default allocator", "zarena"),
            ("loss first / last", f"{dl[0]:.4f} / {dl[-1]:.4f}" if dl else "-",
             f"{zl[0]:.4f} / {zl[-1]:.4f}" if zl else "-"),
            (f"losses agree (rtol {rtol:g})", "", f"{agree}: max relative diff "
             f"{worst_diff:.2e} at step {worst}"),
            ("step time median / p90", f"{default['step_ms']:.2f} / {default['step_p90_ms']:.2f} ms",
             f"{ours['step_ms']:.2f} / {ours['step_p90_ms']:.2f} ms"),
            ("peak handed out", fmt(default["peak_bytes"]) + " (max_memory_allocated)",
             fmt(ours["peak_bytes"]) + (" (live blocks, libzarena_torch's count), "
                                        if "live_peak_bytes" in info else
                                        " (used peak + overflow peak), ")
             + f"{ratio(ours['peak_bytes'], default['peak_bytes'])}"),
            ("used peak (zone whole; a bound with threads)", "",
             fmt(ours.get("used_peak_bytes", 0))),
            ("region top (high water)", "", fmt(ours.get("top_bytes", 0))),
            ("after steps 1..6: top / committed / zone", "",
             ", ".join(f"{fmt(f['top'])} / {fmt(f['committed'])} / {fmt(f['zone'])}"
                       for f in ours.get("first_steps", []) if f) or "-"),
            ("reserved peak", fmt(default["reserved_bytes"]) + " (max_memory_reserved)",
             fmt(ours["reserved_bytes"]) + " (region or committed + overflow peak), "
             f"{ratio(ours['reserved_bytes'], default['reserved_bytes'])}"),
            ("device memory in use at end", fmt(default["device_used_bytes"]),
             fmt(ours["device_used_bytes"])),
            ("refused frees / invalid / stale", "",
             f"{info['failed_frees']} / {s['invalid_frees']} / {s['stale_frees']}"),
            ("failed mallocs", "", str(info["failed_mallocs"])),
            ("mallocs / frees / stream joins", "",
             f"{info['mallocs']} / {info['frees']} / {info['stream_joins']}"),
            ("overflow allocations / peak", "",
             f"{s['overflow_allocs']} / {fmt(s['overflow_peak_bytes'])}"),
            ("live at end (params, optimizer)", "",
             f"{ours['live_at_end']['blocks']} blocks, {fmt(ours['live_at_end']['bytes'])}"),
            ("step plans: steps / hits / misses", "",
             f"{s.get('plan_steps', 0)} / {s.get('plan_hits', 0)} / {s.get('plan_misses', 0)}"
             + (f" (first miss {s['plan_first_miss']})" if s.get("plan_first_miss") else "")),
            ("step plan / its lower bound", "",
             f"{fmt(s.get('plan_bytes', 0))} / {fmt(s.get('plan_lower_bound_bytes', 0))}"),
            ("zarena warnings", "",
             ", ".join(f"{k} x{n}" for k, n in sorted(warnings.items())) or "none")]
    return rows, failures


def ratio(a, b):
    return f"{a / b:.3f}x" if b else "-"


def table(rows):
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    return "\n".join(f"  {r[0]:<{w0}}  {r[1]:<{w1}}  {r[2]}".rstrip() for r in rows)


def write_json(path, report):
    if path:
        with open(path, "w") as f:
            json.dump(report, f, indent=1)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--capacity-mib", type=int, default=0,
                   help="zarena region when ZARENA_CAPACITY_BYTES is not set (0: zarena.torch's "
                        "default, the device's memory; 2048 for --dry-run)")
    p.add_argument("--rtol", type=float, default=1e-3,
                   help="largest relative loss difference accepted at any step")
    p.add_argument("--timeout", type=int, default=270, help="seconds per run")
    p.add_argument("--json", help="write the verdict and both runs' figures here")
    p.add_argument("--vary-seq", action="store_true",
                   help="a sequence length of 64..128 changing every step (shapes never "
                        "repeat from one step to the next)")
    p.add_argument("--dry-run", action="store_true",
                   help="no torch, no GPU: synthetic runs through the real shim (host)")
    p.add_argument("--dry-run-fault", choices=FAULTS, help=argparse.SUPPRESS)
    p.add_argument("--child", choices=("default", "zarena"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.steps < 2 or args.warmup < 0:
        p.error("--steps must be at least 2 and --warmup at least 0")
    if args.child:
        if args.dry_run:
            return child_dry(args.child, args.steps, args.warmup, args.dry_run_fault)
        return child(args.child, args.steps, args.warmup, args.vary_seq)

    report = {"result": None, "failures": [], "steps": args.steps, "warmup": args.warmup,
              "vary_seq": args.vary_seq, "rtol": args.rtol, "dry_run": args.dry_run, "python": platform.python_version()}

    def finish(code, result, lines=()):
        report["result"] = result
        for line in lines:
            print(line)
        write_json(args.json, report)
        return code

    if not args.dry_run:
        try:
            import torch
        except ImportError as e:
            report["reason"] = f"torch is not installed ({e})"
            return finish(SKIP, "skipped", [f"skipped: {report['reason']}"])
        if not torch.cuda.is_available():
            report["reason"] = "no CUDA device visible to torch"
            return finish(SKIP, "skipped", [f"skipped: {report['reason']}"])
        report["torch"] = torch.__version__
        report["cuda"] = torch.version.cuda
        report["device"] = torch.cuda.get_device_name(0)
        del torch  # the parent never touches CUDA; each run is its own process
    sys.path.insert(0, PACKAGE)
    try:
        import zarena
        import zarena.torch
        report["libzarena"] = zarena.library_path()
        report["zarena_version"] = zarena.version_string()
        report["shim"] = zarena.torch.library_path()
    except ImportError as e:
        report["failures"].append(str(e))
        return finish(FAIL, "fail", [f"FAIL: {e}"])
    where = ("dry run: synthetic losses, libzarena_torch on the host backend" if args.dry_run
             else f"torch {report['torch']} (CUDA {report['cuda']}) on {report['device']}")
    print(f"{where}; zarena {report['zarena_version']} {report['libzarena']}; "
          f"shim {report['shim']}")

    default, _, default_failure = run("default", args)
    ours, ours_err, ours_failure = run("zarena", args)
    report["default"], report["zarena"] = default, ours
    if default_failure or ours_failure:
        report["failures"] = [f for f in (default_failure, ours_failure) if f]
        return finish(FAIL, "fail", [f"FAIL: {f}" for f in report["failures"]])

    rows, failures = compare(default, ours, ours_err, args.rtol, require_joins=not args.dry_run)
    report["table"] = [list(r) for r in rows]
    report["failures"] = failures
    print(f"\n{args.steps} steps, timing after {args.warmup} warm-up steps")
    print(table(rows))
    print(f"  zarena stats: {ours['stats_repr']}")
    if failures:
        return finish(FAIL, "fail", [f"FAIL: {f}" for f in failures])
    diff = max(abs(a - b) / max(1.0, abs(a)) for a, b in zip(default["losses"], ours["losses"]))
    same = "bitwise identical" if diff == 0 else f"within {args.rtol:g}"
    return finish(PASS, "pass", [f"PASS: losses agree ({same}); no refused, invalid or stale "
                                 "frees; no failed mallocs"])


if __name__ == "__main__":
    sys.exit(main())
