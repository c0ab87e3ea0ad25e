"""The contenders: numpy, halojit and the peers a numpy user could reach for.

A peer turns (workload, inputs) into a zero-argument callable that returns a
numpy-comparable result, or raises ``Skip`` with a note. Peers that are not
installed are skipped with a note; none is required but numpy and halojit.
"""

from __future__ import annotations

import functools
import os
import types

import numpy as np

from . import workloads as W


class Skip(Exception):
    """This peer does not run this workload (the message says why)."""


class Peer:
    name = "?"
    label = "?"  # what the table calls it

    def available(self) -> str | None:
        """None when usable, else a note on why it is skipped."""
        return None

    def version(self) -> str:
        return ""

    def prepare(self, w: W.Workload, args: list):
        raise NotImplementedError

    def to_numpy(self, result):
        return np.asarray(result)


def _installed(module):
    try:
        return __import__(module), None
    except Exception as e:  # ImportError, or a broken install
        return None, f"{module} not installed ({type(e).__name__}: {e}); pip install \"halojit[bench]\""


class NumpyPeer(Peer):
    name = label = "numpy"

    def version(self):
        return np.__version__

    def prepare(self, w, args):
        return functools.partial(w.fn, *args)


class HalojitPeer(Peer):
    name = label = "halojit"

    def version(self):
        import halojit
        return halojit.__version__

    def prepare(self, w, args):
        import halojit
        self.traced = halojit.trace(w.fn)
        return functools.partial(self.traced, *args)


class NumexprPeer(Peer):
    """numexpr for the elementwise parts, numpy for what numexpr cannot express
    (row max/mean/var, matmul), as a numexpr user writes it."""
    name = label = "numexpr"

    def available(self):
        self.ne, note = _installed("numexpr")
        return note

    def version(self):
        return self.ne.__version__

    def prepare(self, w, args):
        ev = self.ne.evaluate
        gelu = "0.5*v*(1+tanh(0.7978845608*(v+0.044715*v*v*v)))"
        n = w.name
        if n == "chain":
            a, b, c = args
            return lambda: ev("exp(a*b+1)*c - a/(1+abs(b))", local_dict=dict(a=a, b=b, c=c))
        if n == "gelu":
            return lambda: ev(gelu, local_dict=dict(v=args[0]))
        if n == "softmax":
            x = args[0]

            def softmax():
                m = x.max(axis=-1, keepdims=True)
                e = ev("exp(x - m)", local_dict=dict(x=x, m=m))
                s = e.sum(axis=-1, keepdims=True)
                return ev("e / s", local_dict=dict(e=e, s=s), out=e)
            return softmax
        if n == "layernorm":
            x, g, b = args

            def layernorm():
                m = x.mean(axis=-1, keepdims=True)
                v = x.var(axis=-1, keepdims=True) + np.float32(1e-5)
                return ev("(x - m) / sqrt(v) * g + b", local_dict=dict(x=x, m=m, v=v, g=g, b=b))
            return layernorm
        if n == "row_sum":
            return lambda: ev("sum(x, axis=1)", local_dict=dict(x=args[0]))
        if n == "full_sum":
            return lambda: ev("sum(x)", local_dict=dict(x=args[0]))
        if n == "bias_relu":
            x, b = args
            return lambda: ev("where(x + b > 0, x + b, 0)", local_dict=dict(x=x, b=b))
        if n == "blur3x3":
            img = args[0]

            def blur():
                bx = ev("(a + b + c) / 3", local_dict=dict(a=img[:, :-2], b=img[:, 1:-1], c=img[:, 2:]))
                return ev("(a + b + c) / 3", local_dict=dict(a=bx[:-2], b=bx[1:-1], c=bx[2:]))
            return blur
        if n == "mlp":
            x, w1, b1, w2 = args

            def mlp():
                h = x @ w1
                h += b1
                return ev(gelu, local_dict=dict(v=h), out=h) @ w2
            return mlp
        raise Skip(f"no numexpr version of {n}")


class NumbaPeer(Peer):
    """Loops written for ``@njit(parallel=True, fastmath=False)``; matmuls by
    numpy's BLAS around them (numba's own np.dot needs SciPy)."""
    name = label = "numba"

    def available(self):
        self.nb, note = _installed("numba")
        return note

    def version(self):
        return self.nb.__version__

    def prepare(self, w, args):
        k = _numba_kernels(self.nb)
        n = w.name
        if n in ("chain", "gelu", "layernorm", "bias_relu", "softmax"):
            kernel = getattr(k, n)
            shape = args[0].shape

            def run():
                out = np.empty(shape, np.float32)
                kernel(*args, out)
                return out
            return run
        if n == "row_sum":
            return functools.partial(k.row_sum, args[0])
        if n == "full_sum":
            return functools.partial(k.full_sum, args[0])
        if n == "blur3x3":
            return functools.partial(k.blur3x3, args[0])
        if n == "mlp":
            x, w1, b1, w2 = args

            def mlp():
                h = x @ w1
                k.bias_gelu(h, b1)
                return h @ w2
            return mlp
        raise Skip(f"no numba version of {n}")


@functools.cache
def _numba_kernels(nb):
    """Compiled lazily (on first call, which the suite times apart)."""
    jit = nb.njit(parallel=True, fastmath=False)
    prange = nb.prange
    f32 = np.float32
    half, one, three, c0, c1, eps = f32(0.5), f32(1), f32(3), f32(0.7978845608), f32(0.044715), f32(1e-5)

    @jit
    def chain(a, b, c, out):
        for i in prange(a.shape[0]):
            for j in range(a.shape[1]):
                out[i, j] = np.exp(a[i, j] * b[i, j] + one) * c[i, j] - a[i, j] / (one + abs(b[i, j]))

    @jit
    def gelu(x, out):
        for i in prange(x.shape[0]):
            for j in range(x.shape[1]):
                v = x[i, j]
                out[i, j] = half * v * (one + np.tanh(c0 * (v + c1 * v * v * v)))

    @jit
    def bias_gelu(h, b):  # in place, for the MLP
        for i in prange(h.shape[0]):
            for j in range(h.shape[1]):
                v = h[i, j] + b[j]
                h[i, j] = half * v * (one + np.tanh(c0 * (v + c1 * v * v * v)))

    @jit
    def softmax(x, out):
        for i in prange(x.shape[0]):
            m = x[i, 0]
            for j in range(x.shape[1]):
                m = max(m, x[i, j])
            s = 0.0
            for j in range(x.shape[1]):
                e = np.exp(x[i, j] - m)
                out[i, j] = e
                s += e
            inv = f32(1.0 / s)
            for j in range(x.shape[1]):
                out[i, j] *= inv

    @jit
    def layernorm(x, g, b, out):
        n = x.shape[1]
        for i in prange(x.shape[0]):
            s = 0.0
            for j in range(n):
                s += x[i, j]
            m = f32(s / n)
            q = 0.0
            for j in range(n):
                d = x[i, j] - m
                q += d * d
            r = f32(1.0 / np.sqrt(q / n + eps))
            for j in range(n):
                out[i, j] = (x[i, j] - m) * r * g[j] + b[j]

    @jit
    def bias_relu(x, b, out):
        for i in prange(x.shape[0]):
            for j in range(x.shape[1]):
                out[i, j] = max(x[i, j] + b[j], f32(0))

    @jit
    def row_sum(x):
        out = np.empty(x.shape[0], np.float32)
        for i in prange(x.shape[0]):
            s = 0.0  # float64 accumulator: a float32 running sum loses digits
            for j in range(x.shape[1]):
                s += x[i, j]
            out[i] = s
        return out

    @jit
    def full_sum(x):
        s = 0.0
        for i in prange(x.shape[0]):
            for j in range(x.shape[1]):
                s += x[i, j]
        return f32(s)

    @jit
    def blur3x3(img):
        h, w = img.shape
        bx = np.empty((h, w - 2), np.float32)
        for i in prange(h):
            for j in range(w - 2):
                bx[i, j] = (img[i, j] + img[i, j + 1] + img[i, j + 2]) / three
        out = np.empty((h - 2, w - 2), np.float32)
        for i in prange(h - 2):
            for j in range(w - 2):
                out[i, j] = (bx[i, j] + bx[i + 1, j] + bx[i + 2, j]) / three
        return out

    return types.SimpleNamespace(**{f.__name__: f for f in (
        chain, gelu, bias_gelu, softmax, layernorm, bias_relu, row_sum, full_sum, blur3x3)})


class JaxPeer(Peer):
    """``jax.jit`` of the same function on jax.numpy, CPU device."""
    name, label = "jax", "jax.jit"

    def available(self):
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        self.jax, note = _installed("jax")
        return note

    def version(self):
        return self.jax.__version__

    def prepare(self, w, args):
        jnp = self.jax.numpy
        f = self.jax.jit(functools.partial(w.fn, xp=jnp))
        dargs = [self.jax.device_put(a) for a in args]
        return lambda: f(*dargs).block_until_ready()


class TorchPeer(Peer):
    """``torch.compile`` (inductor, CPU) of the same function on torch ops."""
    name, label = "torch", "torch.compile"

    def available(self):
        self.torch, note = _installed("torch")
        if self.torch is not None:
            self.torch.set_num_threads(os.cpu_count() or 1)
        return note

    def version(self):
        return self.torch.__version__

    def prepare(self, w, args):
        torch = self.torch
        ns = _torch_namespace(torch)
        torch._dynamo.reset()  # one workload, one shape at a time: no recompile limit, no
        # automatic dynamic shapes (which would give a slower shape-generic kernel)
        f = torch.compile(functools.partial(w.fn, xp=ns), dynamic=False)
        targs = [torch.from_numpy(a) for a in args]

        def run():
            with torch.no_grad():
                return f(*targs)
        return run

    def to_numpy(self, result):
        return result.detach().numpy()


def _torch_namespace(torch):
    """The few numpy-named functions the workloads call, spelled for torch."""
    def dims(axis):
        return {} if axis is None else {"dim": axis}
    return types.SimpleNamespace(
        exp=torch.exp, abs=torch.abs, tanh=torch.tanh, sqrt=torch.sqrt,
        max=lambda x, axis=None, keepdims=False: torch.amax(x, **dims(axis), keepdim=keepdims),
        sum=lambda x, axis=None, keepdims=False: (torch.sum(x) if axis is None
                                                  else torch.sum(x, dim=axis, keepdim=keepdims)),
        mean=lambda x, axis=None, keepdims=False: torch.mean(x, **dims(axis), keepdim=keepdims),
        var=lambda x, axis=None, keepdims=False: torch.var(x, **dims(axis), keepdim=keepdims,
                                                           correction=0),
        maximum=lambda x, y: (torch.clamp_min(x, y) if isinstance(y, (int, float))
                              else torch.maximum(x, y)),
    )


def default_peers() -> list[Peer]:
    """numpy first (the reference), halojit next, then the peers."""
    return [NumpyPeer(), HalojitPeer(), NumexprPeer(), NumbaPeer(), JaxPeer(), TorchPeer()]


PEER_NAMES = [p.name for p in default_peers()]
