"""CUDA timing: the large bench workloads traced for ``host-cuda``, against
eager PyTorch and ``torch.compile`` on the same CUDA tensors, in one process.

Needs an NVIDIA GPU and PyTorch with CUDA. halojit reads the tensors in
place through DLPack; each result is checked against numpy first. Times are
ms a call: the best of 5 rounds of 30 calls, the device synchronized after
each round (a halojit call returns when its results are complete).

    python bench/cuda_torch.py [WORKLOAD ...]
"""

from __future__ import annotations

import functools
import sys
import time

import numpy as np

import halojit
from halojit.bench.peers import _torch_namespace
from halojit.bench.workloads import workloads


def per_call_ms(torch, fn, calls: int = 30, rounds: int = 5) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best * 1e3


def main(only: list[str]) -> None:
    try:
        import torch
    except ImportError:
        sys.exit("bench/cuda_torch.py needs PyTorch with CUDA (pip install torch)")
    if not torch.cuda.is_available():
        sys.exit("bench/cuda_torch.py needs a CUDA GPU visible to PyTorch")
    ns = _torch_namespace(torch)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, halojit {halojit.__version__}")
    print(f"{'workload':10s} {'halojit ms':>10s} {'eager ms':>9s} {'compile ms':>10s}  first call s")
    for w in workloads("large"):
        if only and w.name not in only:
            continue
        args = w.inputs()
        want = w.fn(*args)
        targs = [torch.from_numpy(a).cuda() for a in args]
        f = halojit.trace(w.fn, target="host-cuda")
        t0 = time.perf_counter()
        got = np.asarray(f(*targs))
        first = time.perf_counter() - t0
        tol = 2e-2 if w.kind != "memory" else 1e-3  # sums and matmuls: other orders
        scale = max(1.0, float(np.abs(want).max()))
        if not np.allclose(got, want, rtol=tol, atol=tol * scale):
            print(f"{w.name:10s} WRONG: max error {float(np.abs(got - want).max()):.3g}")
            continue
        eager = functools.partial(w.fn, xp=ns)
        torch._dynamo.reset()  # one workload at a time: no recompile limit across them
        compiled = torch.compile(eager, dynamic=False)
        with torch.no_grad():
            hj = per_call_ms(torch, lambda: f(*targs))
            te = per_call_ms(torch, lambda: eager(*targs))
            try:
                compiled(*targs)
                tc = per_call_ms(torch, lambda: compiled(*targs))
            except Exception as e:  # noqa: BLE001 - a peer's failure is reported, not fatal
                print(f"  torch.compile failed: {type(e).__name__}: {str(e)[:200]}")
                tc = float("nan")
        print(f"{w.name:10s} {hj:10.3f} {te:9.3f} {tc:10.3f}  {first:.2f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
