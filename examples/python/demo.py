#!/usr/bin/env python3
"""A training loop on zarena from Python: upload "weights", mark the step boundary, then
per-sample activations that are freed or reclaimed by a reset after each sample.

    python3 examples/python/demo.py   # after a build into build/ (or set ZARENA_LIBRARY)
"""
import os
import random
import sys

# The package in this checkout (python/zarena); an installed one (pip install ./python)
# is used when this file is run from elsewhere.
_CHECKOUT_PACKAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")
if os.path.isdir(_CHECKOUT_PACKAGE):
    sys.path.insert(0, _CHECKOUT_PACKAGE)
import zarena  # noqa: E402

MiB = 1 << 20


def main(samples=8, layers=12):
    events = []
    zarena.set_log_callback(events.append, zarena.LOG_INFO)
    rng = random.Random(7)
    with zarena.Arena(capacity_bytes=256 * MiB, backend=zarena.BACKEND_HOST,
                      name="python-demo") as arena:
        weights = [arena.alloc(4 * MiB) for _ in range(layers)]
        arena.mark_step_boundary()
        for sample in range(samples):
            activations = [arena.alloc(rng.randrange(64 << 10, 2 * MiB)) for _ in range(layers)]
            for buf in activations[::2]:  # some are freed early and reused within the sample
                arena.free(buf)
            grads = [arena.alloc(rng.randrange(64 << 10, MiB)) for _ in range(layers)]
            assert all(g % 256 == 0 for g in grads)
            arena.reset()  # reclaims everything above the weights
        s = arena.stats()
        print(f"zarena {zarena.version_string()}: {len(weights)} weight buffers, "
              f"{samples} samples, epoch {arena.epoch}")
        print(f"  {s!r}")
        print(arena.format_stats(), end="")  # the library's table (zarena_format_stats)
        try:
            arena.free(weights[0] + 8)
        except zarena.NotOwnedError as e:
            print(f"  interior free refused as expected: {e.detail}")
    zarena.set_log_callback(None)
    print("log events:", ", ".join(sorted({e.event for e in events})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
