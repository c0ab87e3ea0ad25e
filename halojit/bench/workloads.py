"""The benchmark workloads: plain numpy functions and their inputs at each size.

Every function takes the array namespace as ``xp`` (numpy by default) so JAX
and torch run the very same code; halojit traces the numpy version.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

# rows of (rows, 1024) arrays, the side of the square ones, and the MLP's
# (batch, d_model, d_hidden). large: 16M float32 elements (64 MiB) per array.
SIZES = {
    "large": {"rows": 16384, "side": 4096, "mlp": (512, 1024, 4096)},
    "small": {"rows": 4, "side": 64, "mlp": (16, 64, 256)},
    "tiny": {"rows": 2, "side": 16, "mlp": (2, 16, 32)},  # tests only
}

# kinds decide which roofline and targets apply
MEMORY, REDUCTION, MATMUL = "memory", "reduction", "matmul"


def chain(a, b, c, xp=np):
    return xp.exp(a * b + 1) * c - a / (1 + xp.abs(b))


def gelu(x, xp=np):
    return 0.5 * x * (1 + xp.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def softmax(x, xp=np):
    e = xp.exp(x - xp.max(x, axis=-1, keepdims=True))
    return e / xp.sum(e, axis=-1, keepdims=True)


def layernorm(x, g, b, xp=np):
    m = xp.mean(x, axis=-1, keepdims=True)
    v = xp.var(x, axis=-1, keepdims=True)
    return (x - m) / xp.sqrt(v + 1e-5) * g + b


def row_sum(x, xp=np):
    return xp.sum(x, axis=1)


def full_sum(x, xp=np):
    return xp.sum(x)


def bias_relu(x, b, xp=np):
    return xp.maximum(x + b, 0)


def blur3x3(img, xp=np):
    bx = (img[:, :-2] + img[:, 1:-1] + img[:, 2:]) / 3
    return (bx[:-2] + bx[1:-1] + bx[2:]) / 3


def mlp(x, w1, b1, w2, xp=np):
    return gelu(x @ w1 + b1, xp) @ w2


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    fn: Callable
    kind: str
    make: Callable  # rng -> list of float32 input arrays
    multi_op: bool = True

    def inputs(self, seed: int = 0) -> list[np.ndarray]:
        return self.make(np.random.default_rng(seed))


def workloads(size: str) -> list[Workload]:
    """The suite at ``size`` ("large", "small" or "tiny"), in report order."""
    s = SIZES[size]
    rows, side = s["rows"], s["side"]
    batch, d, hidden = s["mlp"]

    def f32(rng, *shape, scale=1.0):
        x = rng.standard_normal(shape, dtype=np.float32)
        return x * np.float32(scale) if scale != 1.0 else x

    return [
        Workload("chain", "exp(a*b+1)*c - a/(1+abs(b))", chain, MEMORY,
                 lambda r: [f32(r, rows, 1024) for _ in range(3)]),
        Workload("gelu", "tanh-GELU", gelu, MEMORY, lambda r: [f32(r, rows, 1024)]),
        Workload("softmax", "softmax over the last axis", softmax, MEMORY,
                 lambda r: [f32(r, rows, 1024)]),
        Workload("layernorm", "layernorm with gamma/beta", layernorm, MEMORY,
                 lambda r: [f32(r, rows, 1024), f32(r, 1024), f32(r, 1024)]),
        Workload("row_sum", "sum over axis 1", row_sum, REDUCTION,
                 lambda r: [f32(r, side, side)], multi_op=False),
        Workload("full_sum", "full sum", full_sum, REDUCTION,
                 lambda r: [f32(r, side, side)], multi_op=False),
        Workload("bias_relu", "relu(x + b), broadcast bias", bias_relu, MEMORY,
                 lambda r: [f32(r, rows, 1024), f32(r, 1024)]),
        Workload("blur3x3", "separable 3x3 blur, numpy slicing", blur3x3, MEMORY,
                 lambda r: [f32(r, side, side)]),
        Workload("mlp", "gelu(x @ W1 + b1) @ W2", mlp, MATMUL,
                 lambda r: [f32(r, batch, d), f32(r, d, hidden, scale=d ** -0.5),
                            f32(r, hidden), f32(r, hidden, d, scale=hidden ** -0.5)]),
    ]


def mlp_flops(args) -> float:
    """Floating-point operations of the two matmuls (the GELU is noise)."""
    x, w1, _, w2 = args
    return 2.0 * x.shape[0] * w1.shape[0] * w1.shape[1] + 2.0 * x.shape[0] * w2.shape[0] * w2.shape[1]
