#!/usr/bin/env python3
"""train_compare.py's model in graph mode (issue 33): one training step captured into a CUDA
graph once and replayed, with zarena's step plan as the graph's memory, against the same
steps run eagerly, and PyTorch's own graph capture (caching allocator + graph pool) beside it.

    python3 tests/pytorch/graph_compare.py [--steps 150] [--warmup 20] [--json out.json]
    python3 tests/pytorch/graph_compare.py --dry-run [--json out.json]

Four runs, one process each, the same static-input step (the batch copied into a tensor made
before the steps, the loss and the side stream's check copied into two more; the step's own
tensors die within it or, the gradients, in the next step's zero_grad), all on one
non-default stream, AdamW(capturable=True):
  eager         PyTorch's caching allocator, every step eager
  zarena        zarena.torch (ZARENA_PLAN=1), every step eager: the planned baseline
  zarena-graph  zarena.torch (ZARENA_PLAN=1): eager steps until the plan is ready, then the
                step captured with zarena.torch.graph (one graph per phase of the plan's
                period) and replayed with zarena.torch.replay for every later step
  torch-graph   the caching allocator: 3 eager warm-up steps, then torch.cuda.graph with
                its private pool, replayed
Checks (exit 1 on any): every run's losses bitwise equal to eager's; the zarena-graph run
captured (one graph per phase) and replayed every later step; no refused, invalid or stale
free and no failed malloc in the zarena runs. Figures (the issue's targets, reported, not
checked): zarena-graph's device memory against zarena eager's (target <= 1.02x) and against
torch-graph's reserved; step times of all four (target: zarena-graph <= zarena eager).
Also reported: whether libzarena_torch's tensor.record_stream hook took (record_stream_status)
and whether a record_stream call reached it.

If a run fails, its stderr's last lines say which call failed and why (e.g. the capture's
refused allocation: zarena's message with expected and got, verdict graph_capture).
--dry-run needs neither torch nor a GPU: the zarena runs drive libzarena_torch's malloc/free
and its capture calls through ctypes on the host backend (where a capture is a declared
mode), so the plumbing, the checks, the table and the JSON are exercised end to end.
Exit status: 0 pass, 1 fail, 77 skipped (no torch or no CUDA device).
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_compare as tc  # noqa: E402  (its helpers: timing, reserved_of, the table)

ROOT = tc.ROOT
PACKAGE = tc.PACKAGE
PASS, FAIL, SKIP = 0, 1, 77
MiB = 1 << 20
MODES = ("eager", "zarena", "zarena-graph", "torch-graph")
FAULTS = ("deviate", "loss", "teardown", "generator")


def child(mode, steps, warmup):
    """One run on the GPU; prints one JSON line."""
    sys.path.insert(0, PACKAGE)
    import torch

    events = []
    zarena = None
    if mode.startswith("zarena"):
        import zarena
        import zarena.torch

        events = tc.collect_zarena_events(zarena)
        zarena.torch.enable()  # before the first CUDA tensor; also hooks record_stream
    torch.manual_seed(0)
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
    stream = torch.cuda.Stream(dev)  # every run's work: a graph is captured on a side stream
    side = torch.cuda.Stream(dev)
    vocab, seq, batch, width = 512, 128, 32, 256
    gen = torch.Generator(device="cpu").manual_seed(1)

    with torch.cuda.stream(stream):
        embed = torch.nn.Embedding(vocab, width)
        layer = torch.nn.TransformerEncoderLayer(width, 8, 4 * width, dropout=0.0,
                                                 batch_first=True)
        encoder = torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
        head = torch.nn.Linear(width, vocab)
        model = torch.nn.ModuleDict({"embed": embed, "encoder": encoder, "head": head}).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, capturable=True)
        mask = torch.nn.Transformer.generate_square_subsequent_mask(seq, device=dev)
        tokens_in = torch.zeros((batch, seq + 1), dtype=torch.long, device=dev)
        fill_in = torch.zeros((), device=dev)
        loss_out = torch.zeros((), device=dev)
        check_out = torch.zeros((), device=dev)

    def load(step):
        start = torch.randint(0, vocab, (batch, 1), generator=gen)
        tokens_in.copy_((start + torch.arange(seq + 1) * 7) % vocab)
        fill_in.fill_(float(step % 7 + 1))  # every partial sum stays an exact float32 integer

    def train_step():
        x, y = tokens_in[:, :-1], tokens_in[:, 1:]
        h = model["encoder"](model["embed"](x), mask=mask, is_causal=True)
        loss = torch.nn.functional.cross_entropy(model["head"](h).reshape(-1, vocab),
                                                 y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss_out.copy_(loss.detach())
        # Work on a second stream with its own allocations freed there (in a zarena capture:
        # the free's stream ordering becomes an edge of the graph).
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            scratch = torch.ones(1 << 18, device=dev) * fill_in
            check = scratch.sum()
        torch.cuda.current_stream().wait_stream(side)
        check_out.copy_(check)

    def read(step):
        fill = float(step % 7 + 1)
        if check_out.item() != fill * (1 << 18):
            raise SystemExit(f"side-stream result wrong at step {step}: {check_out.item()}")
        return loss_out.item()

    losses, times, kinds = [], [], []
    graphs = {}  # phase -> CUDAGraph (zarena-graph); or the one graph (torch-graph)
    capture_ms = []
    with torch.cuda.stream(stream):
        for step in range(steps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            if zarena is not None:
                zarena.torch.step()
            load(step)
            kind = "eager"
            if mode == "zarena-graph":
                info = zarena.torch.graph_info(0)
                if info.phase in graphs:
                    zarena.torch.replay(graphs[info.phase])
                    kind = "replay"
                elif info.ready and len(graphs) < info.period:
                    c0 = time.perf_counter()
                    g = torch.cuda.CUDAGraph()
                    with zarena.torch.graph(g, stream=stream):
                        train_step()
                    zarena.torch.replay(g)  # the first launch: the captured step
                    capture_ms.append(1e3 * (time.perf_counter() - c0))
                    graphs[info.phase] = g
                    kind = "capture"
                else:
                    train_step()
            elif mode == "torch-graph":
                if graphs:
                    graphs[0].replay()
                    kind = "replay"
                elif step >= 3:  # the documented warm-up: 3 eager steps on the side stream
                    c0 = time.perf_counter()
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g, stream=stream):
                        train_step()
                    g.replay()
                    capture_ms.append(1e3 * (time.perf_counter() - c0))
                    graphs[0] = g
                    kind = "capture"
                else:
                    train_step()
            else:
                train_step()
            losses.append(read(step))
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            kinds.append(kind)

    free, total = torch.cuda.mem_get_info(dev)
    out = {"mode": mode, "losses": losses, "kinds": kinds, "device_used_bytes": total - free,
           "device": torch.cuda.get_device_name(dev), "torch": torch.__version__,
           "cuda": torch.version.cuda, "capture_ms": capture_ms}
    replay_times = [t for t, k in zip(times, kinds) if k == "replay"]
    eager_times = [t for t, k in zip(times, kinds) if k == "eager"]
    out.update(tc.timing(times, warmup))
    out["replay_step_ms"] = 1e3 * tc.statistics.median(replay_times) if replay_times else None
    out["eager_step_ms"] = 1e3 * tc.statistics.median(eager_times[warmup:] or eager_times) \
        if eager_times else None
    if zarena is not None:
        ok, why = zarena.torch.record_stream_status()
        before = zarena.torch.info(0).record_streams
        with torch.cuda.stream(side):
            t = torch.ones(1024, device=dev)
        t.record_stream(stream)
        del t
        rep = zarena.torch.report(0)
        s = rep["stats"]
        out.update(peak_bytes=tc.handed_out_peak(s, rep["info"]),
                   top_bytes=s["high_water_bytes"], reserved_bytes=tc.reserved_of(rep),
                   stats=s, info=rep["info"],
                   region=rep["region"], live_at_end=rep["live"],
                   graph_info=zarena.torch.graph_info(0).to_dict(),
                   record_stream={"hooked": ok, "why": why,
                                  "forwarded": zarena.torch.info(0).record_streams - before},
                   zarena_events=events)
        for g in graphs.values():
            zarena.torch.release(g)
    else:
        out.update(peak_bytes=torch.cuda.max_memory_allocated(dev),
                   reserved_bytes=torch.cuda.max_memory_reserved(dev))
    print(json.dumps(out))


def child_dry(mode, steps, warmup, fault):
    """A run without torch: synthetic losses; the zarena runs call libzarena_torch through
    ctypes on the host backend as PyTorch would, capturing and replaying with its calls."""
    losses = [4.0 * 0.99 ** step for step in range(steps)]
    out = {"mode": mode, "dry_run": True, "device": "host (dry run)", "torch": None,
           "cuda": None, "capture_ms": []}
    sizes = [(1 + (i * 37) % 64) << 14 for i in range(24)]  # 16 KiB .. 1 MiB
    times, kinds = [], []
    if not mode.startswith("zarena"):
        for _ in range(steps):
            t0 = time.perf_counter()
            sum(sizes)
            times.append(time.perf_counter() - t0)
            kinds.append("eager" if mode == "eager" else "replay")
        out.update(losses=losses, kinds=kinds, device_used_bytes=0, peak_bytes=sum(sizes),
                   reserved_bytes=sum(sizes), replay_step_ms=None, eager_step_ms=None)
        out.update(tc.timing(times, warmup))
        print(json.dumps(out))
        return
    sys.path.insert(0, PACKAGE)
    import ctypes

    import zarena
    import zarena.torch

    events = tc.collect_zarena_events(zarena)
    lib = zarena.torch.library()
    weights = [lib.zarena_torch_malloc(256 << 10, 0, None) for _ in range(8)]
    arena = zarena.torch.arena(0)
    graph = [0, 0]  # per phase: the arena's graph id
    grad = [None]  # a block that lives into the next step (freed by its "zero_grad")
    seed = [None]  # the generator's graph seed and offset (zarena-graph)

    def run_step(deviate=False):
        if grad[0] is not None:
            lib.zarena_torch_free(grad[0], 4096, 0, None)
        held = []
        for i, n in enumerate(sizes):
            p = lib.zarena_torch_malloc(n + (256 if deviate and i == 5 else 0), 0, None)
            held.append((p, n))
        grad[0] = lib.zarena_torch_malloc(4096, 0, None)
        for p, n in held:
            lib.zarena_torch_free(p, n, 0, None)

    for step in range(steps):
        t0 = time.perf_counter()
        zarena.torch.step()
        kind = "eager"
        if mode == "zarena-graph":
            info = arena.graph_info()
            if graph[info.phase]:
                arena.graph_replay(graph[info.phase])
                kind = "replay"
            elif info.ready and sum(1 for g in graph if g) < info.period:
                if seed[0] is None:
                    # What torch's generator does at the first capture_begin (two 8-byte
                    # tensors kept while a graph is registered); zarena.torch.graph makes
                    # them unplanned. The fault makes them plain: the plan's step ends.
                    was = lib.zarena_torch_set_unplanned(0 if fault == "generator" else 1)
                    seed[0] = [lib.zarena_torch_malloc(8, 0, None) for _ in range(2)]
                    lib.zarena_torch_set_unplanned(was)
                zarena._library.check(lib.zarena_torch_capture_begin(0, None),
                                      "zarena_torch_capture_begin")
                run_step(deviate=fault == "deviate")  # a refused malloc aborts the process
                out_id = ctypes.c_uint32(0)
                zarena._library.check(lib.zarena_torch_capture_end(0, 1, ctypes.byref(out_id)),
                                      "zarena_torch_capture_end")
                graph[info.phase] = out_id.value
                arena.graph_replay(out_id.value)  # the first launch
                kind = "capture"
            else:
                run_step()
        else:
            run_step()
        times.append(time.perf_counter() - t0)
        kinds.append(kind)
    if fault == "loss":
        losses[steps // 2] *= 1.5
    for g in graph:
        if g:
            arena.graph_release(g)
    for p in seed[0] or []:
        lib.zarena_torch_free(p, 8, 0, None)
    rep = zarena.torch.report(0)
    s = rep["stats"]
    out.update(losses=losses, kinds=kinds, device_used_bytes=0,
               peak_bytes=tc.handed_out_peak(s, rep["info"]),
               top_bytes=s["high_water_bytes"], reserved_bytes=tc.reserved_of(rep), stats=s,
               info=rep["info"],
               region=rep["region"], live_at_end=rep["live"],
               graph_info=arena.graph_info().to_dict(),
               record_stream={"hooked": False, "why": "dry run (no torch)", "forwarded": 0},
               zarena_events=events, replay_step_ms=None, eager_step_ms=None)
    out.update(tc.timing(times, warmup))
    del weights
    print(json.dumps(out))
    if fault == "teardown":  # what a crash at interpreter exit looks like to the parent
        sys.stdout.flush()
        sys.stderr.write("terminate called after throwing an instance of 'c10::Error'\n")
        sys.stderr.flush()
        os.abort()


def why_failed(stdout, stderr):
    """What a failed child said: the lines from its first error (an exception's message,
    a C++ terminate's what(), a Python traceback) on, then its last lines, and whether it
    had printed its result (a crash at interpreter exit, after the run, says so)."""
    lines = stderr.strip().splitlines()
    first = next((i for i, line in enumerate(lines)
                  if re.search(r"terminate called|what\(\)|Traceback|Error|error|abort", line)),
                 None)
    head = lines[first:first + 25] if first is not None else []
    tail = [line for line in lines[-10:] if line not in head]
    printed = any(line.startswith("{") for line in stdout.strip().splitlines()[-1:])
    where = ("after it printed its result (at teardown)" if printed
             else "before it printed its result")
    return "\n".join([f"it failed {where}"] + head + (["..."] if tail else []) + tail)


def run(mode, args):
    """Runs one child; (its JSON, its stderr, a failure text or None)."""
    # TORCH_SHOW_CPP_STACKTRACES: a c10 error names the C++ frames that raised it.
    env = dict(os.environ, CUBLAS_WORKSPACE_CONFIG=":4096:8", PYTHONDONTWRITEBYTECODE="1",
               TORCH_SHOW_CPP_STACKTRACES="1")
    if mode.startswith("zarena"):
        env.setdefault("ZARENA_CAPACITY_BYTES", str(args.capacity_mib * MiB))
        env["ZARENA_PLAN"] = "1"
    cmd = [sys.executable, os.path.abspath(__file__), "--child", mode, "--steps",
           str(args.steps), "--warmup", str(args.warmup)]
    if args.dry_run:
        env["ZARENA_BACKEND"] = "host"
        cmd.append("--dry-run")
        if args.dry_run_fault and mode == "zarena-graph":
            cmd += ["--dry-run-fault", args.dry_run_fault]
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return None, "", f"the {mode} run took longer than {args.timeout} s"
    try:
        result = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        result = None
    if r.returncode != 0:
        # A run that printed its result and then failed (at interpreter exit) still fails,
        # but its figures are kept in the report.
        return result, r.stderr, f"the {mode} run failed (exit {r.returncode}):\n" + \
            why_failed(r.stdout, r.stderr)
    if result is None:
        return None, r.stderr, f"the {mode} run printed no result: {r.stdout[-500:]!r}"
    return result, r.stderr, None


def ratio(a, b):
    return a / b if a and b else None


def compare(runs, errs):
    """(rows of the table, failures, figures)."""
    from zarena import format_bytes as fmt
    failures = []
    base = runs["eager"]["losses"]
    for mode in MODES[1:]:
        ls = runs[mode]["losses"]
        diff = [i for i, (a, b) in enumerate(zip(base, ls)) if a != b]
        if len(ls) != len(base):
            failures.append(f"{mode}: {len(ls)} steps against eager's {len(base)}")
        elif diff:
            i = diff[0]
            failures.append(f"{mode}: losses differ from eager at {len(diff)} steps, first "
                            f"step {i}: {base[i]!r} vs {ls[i]!r}")
    if base and not base[-1] < base[0]:
        failures.append("the model did not learn (loss did not fall); the comparison is void")
    zg = runs["zarena-graph"]
    captures = zg["kinds"].count("capture")
    period = zg["graph_info"]["period"]
    if captures == 0:
        failures.append("zarena-graph never captured (the plan never became ready)")
    elif captures != period:
        failures.append(f"zarena-graph captured {captures} times for a plan of period {period}")
    first = zg["kinds"].index("capture") if captures else len(zg["kinds"])
    after = zg["kinds"][first:]
    if captures and any(k == "eager" for k in after):
        failures.append("zarena-graph ran eager steps after its capture (a replay was refused?)")
    for mode in ("zarena", "zarena-graph"):
        s, info = runs[mode]["stats"], runs[mode]["info"]
        for key, value in (("failed_frees", info["failed_frees"]),
                           ("invalid_frees", s["invalid_frees"]),
                           ("stale_frees", s["stale_frees"]),
                           ("failed_mallocs", info["failed_mallocs"])):
            if value != 0:
                failures.append(f"{mode}: zarena {key} = {value}")
        shim = [x for x in errs[mode].splitlines() if x.startswith("zarena_torch:")]
        if shim:
            failures.append(f"{mode}: libzarena_torch reported: {shim[-1]}")
    figures = {
        "zarena_graph_vs_zarena_reserved": ratio(zg["reserved_bytes"],
                                                 runs["zarena"]["reserved_bytes"]),
        "zarena_graph_vs_torch_graph_reserved": ratio(zg["reserved_bytes"],
                                                      runs["torch-graph"]["reserved_bytes"]),
        "zarena_graph_vs_zarena_step": ratio(zg["replay_step_ms"], runs["zarena"]["step_ms"]),
        "zarena_graph_vs_torch_graph_step": ratio(zg["replay_step_ms"],
                                                  runs["torch-graph"]["replay_step_ms"]),
    }
    figures["memory_target_met"] = (figures["zarena_graph_vs_zarena_reserved"] or 9) <= 1.02
    figures["step_target_met"] = (figures["zarena_graph_vs_zarena_step"] or 9) <= 1.0

    def ms(x):
        return f"{x:.2f} ms" if x else "-"

    rows = [("", "step median (replayed)", "peak handed out / reserved (zarena: top)")]
    for mode in MODES:
        r = runs[mode]
        rows.append((mode, f"{r['step_ms']:.2f} ms ({ms(r.get('replay_step_ms'))})",
                     f"{fmt(r['peak_bytes'])} / {fmt(r['reserved_bytes'])}"
                     + (f" ({fmt(r['top_bytes'])})" if r.get("top_bytes") else "")))
    rs = zg["record_stream"]
    rows += [
        ("losses bitwise equal to eager", "", "yes" if not any("losses" in f for f in failures)
         else "NO"),
        ("zarena-graph captures / period / replays", "",
         f"{captures} / {period} / {zg['kinds'].count('replay')}"),
        ("capture time", "", ", ".join(f"{x:.1f} ms" for x in zg["capture_ms"]) or "-"),
        ("zarena-graph vs zarena reserved (<= 1.02)", "",
         f"{figures['zarena_graph_vs_zarena_reserved'] or 0:.3f}"),
        ("zarena-graph vs torch-graph reserved", "",
         f"{figures['zarena_graph_vs_torch_graph_reserved'] or 0:.3f}"),
        ("zarena-graph replay vs zarena eager step (<= 1)", "",
         f"{figures['zarena_graph_vs_zarena_step'] or 0:.3f}"),
        ("capture joins / joins skipped", "",
         f"{zg['info']['capture_joins']} / {zg['info']['joins_skipped']}"),
        ("record_stream hook / forwarded", "",
         f"{'yes' if rs['hooked'] else 'no: ' + rs['why']} / {rs['forwarded']}"),
    ]
    return rows, failures, figures


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--capacity-mib", type=int, default=2048,
                   help="zarena region when ZARENA_CAPACITY_BYTES is not set")
    p.add_argument("--timeout", type=int, default=270, help="seconds per run")
    p.add_argument("--json", help="write the verdict and every run's figures here")
    p.add_argument("--dry-run", action="store_true",
                   help="no torch, no GPU: synthetic runs through the real shim (host)")
    p.add_argument("--dry-run-fault", choices=FAULTS, help=argparse.SUPPRESS)
    p.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.steps < 8 or args.warmup < 0:
        p.error("--steps must be at least 8 and --warmup at least 0")
    if args.child:
        if args.dry_run:
            return child_dry(args.child, args.steps, args.warmup, args.dry_run_fault)
        return child(args.child, args.steps, args.warmup)

    report = {"result": None, "failures": [], "steps": args.steps, "warmup": args.warmup,
              "dry_run": args.dry_run, "python": platform.python_version()}

    def finish(code, result, lines=()):
        report["result"] = result
        for line in lines:
            print(line)
        tc.write_json(args.json, report)
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
        report.update(torch=torch.__version__, cuda=torch.version.cuda,
                      device=torch.cuda.get_device_name(0))
        del torch
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
    print(f"{where}; zarena {report['zarena_version']} {report['libzarena']}")

    runs, errs, failed = {}, {}, []
    for mode in MODES:
        runs[mode], errs[mode], failure = run(mode, args)
        report[mode] = runs[mode]
        if failure:
            failed.append(failure)
    if failed and not all(runs.values()):
        report["failures"] = failed
        return finish(FAIL, "fail", [f"FAIL: {f}" for f in failed])
    rows, failures, figures = compare(runs, errs)
    failures = failed + failures  # a run that failed after printing its result still fails
    report.update(table=[list(r) for r in rows], failures=failures, figures=figures)
    print(f"\n{args.steps} steps, step medians after {args.warmup} warm-up steps")
    print(tc.table(rows))
    if failures:
        return finish(FAIL, "fail", [f"FAIL: {f}" for f in failures])
    return finish(PASS, "pass", ["PASS: every run's losses bitwise equal to eager's; "
                                 "zarena-graph captured once per phase and replayed the rest"])


if __name__ == "__main__":
    sys.exit(main())
