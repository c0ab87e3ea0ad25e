"""Stencil outputs with shifted rows (lowering.Lowerer._define_shifted): a
streamed 2-D output whose rows are not whole 16-byte multiples is written
by one update whose vector stores start at each row's 16-byte boundary.
Values against numpy for widths of every phase, one and many strips (the
last one overlapping), float64/int/uint8 element sizes, NaN and inf, every
out= layout (padded and reversed rows are written directly, with their own
strides), the template's parameters, the groups that keep plain rows, and
the LLVM rewrite that marks the shifted stores aligned."""

from __future__ import annotations

import numpy as np
import pytest

from halojit.generators import streaming

from helpers import assert_same
from helpers import one_group as traced, seeded_array as rand

pytestmark = pytest.mark.level3

SHIFTED = "rows shifted to 16-byte boundaries"


@pytest.fixture(autouse=True)
def _stream_small_outputs(monkeypatch):
    monkeypatch.setenv("HALOJIT_STREAM_STORES", "4096")


def blur(im):
    h = (im[:, :-2] + im[:, 1:-1] + im[:, 2:]) / 3
    return (h[:-2] + h[1:-1] + h[2:]) / 3


def box(im):  # integer-safe: sums only
    h = im[:, :-2] + im[:, 1:-1] + im[:, 2:]
    return h[:-2] + h[1:-1] * 2 + h[2:]


def check(fn, x, shifted=True, autoscheduler=None):
    keep = x.copy()
    f, g = traced(fn, x, autoscheduler=autoscheduler)
    assert g.scheduler.startswith("Stencil"), g.scheduler
    assert (SHIFTED in g.schedule) == shifted, g.schedule
    want = fn(x)
    for _ in range(2):  # the first call and the fast path
        assert_same(f(x), want)
    np.testing.assert_array_equal(x, keep)
    return f, want


@pytest.mark.parametrize("shape", [(300, 1100), (45, 1101), (131, 1103), (9, 1031)])
def test_blur_values_every_row_phase(shape):
    """Output rows of 1098, 1099, 1101 and 1029 floats: rows start at every
    offset from a 16-byte boundary; one strip (45 and 9 rows) and several
    with an overlapping last one."""
    x = rand(shape, seed=shape[1])
    x[3, 5], x[-1, -1], x[0, 0] = np.nan, np.inf, -np.inf
    check(blur, x)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int16, np.uint8])
def test_element_sizes(dtype):
    """2, 4, 8 and 16 elements to a 16-byte boundary (integer sums wrap as
    numpy's do)."""
    x = rand((70, 1063), dtype, seed=4)
    check(blur if np.dtype(dtype).kind == "f" else box, x)


OUT_LAYOUTS = {
    "aligned": lambda shape, dt: np.empty(shape, dt),
    # one element past a 16-byte boundary: written through an aligned copy
    "off_by_one": lambda shape, dt: np.empty(shape[0] * shape[1] + 1, dt)[1:].reshape(shape),
    # rows 4 bytes longer, and in reverse: the kernel takes these strides
    "padded_rows": lambda shape, dt: np.empty((shape[0], shape[1] + 1), dt)[:, :shape[1]],
    "reversed_rows": lambda shape, dt: np.empty(shape, dt)[::-1],
}


@pytest.mark.parametrize("layout", list(OUT_LAYOUTS))
def test_out_layouts(layout):
    x = rand((140, 1103), seed=5)
    f, want = check(blur, x)
    for _ in range(2):
        out = OUT_LAYOUTS[layout](want.shape, want.dtype)
        out[...] = -7
        assert f(x, out=out) is out
        assert_same(out, want)


@pytest.mark.parametrize("params", ["rows=7;vector=16;sliding=1", "rows=32;vector=32;sliding=0",
                                    "rows=1000;vector=64;sliding=1;prefetch=0"])
def test_template_parameters(params):
    x = rand((150, 1105), seed=6)
    check(blur, x, autoscheduler=f"Stencil;tile_x=0;{params}")


@pytest.mark.parametrize("shape, autoscheduler", [
    ((100, 1026), None),                          # output rows of 1024 floats: aligned as they are
    ((100, 301), None),                           # rows of few vectors
    ((100, 1101), "Stencil;rows=32;tile_x=64;vector=32;sliding=1"),  # x tiles
])
def test_plain_rows(shape, autoscheduler):
    check(blur, rand(shape, seed=7), shifted=False, autoscheduler=autoscheduler)


def test_not_streamed_plain_rows(monkeypatch):
    monkeypatch.setenv("HALOJIT_STREAM_STORES", "0")
    check(blur, rand((100, 1101), seed=8), shifted=False)


def test_mark_nontemporal_realigns_vector_stores_only():
    ir = "\n".join([
        "define void @k(ptr %p, ptr %q) {",
        "  store <16 x float> %v, ptr %p, align 4, !tbaa !5",
        "  store float %s, ptr %p, align 4, !tbaa !5",
        "  store <16 x float> %v, ptr %q, align 4, !tbaa !6",
        "  store <8 x float> %w, ptr %p, align 32, !tbaa !5",
        "  ret void",
        "}",
        '!1 = !{!"Halide buffer"}',
        '!2 = !{!"out", !1, i64 0}',
        '!3 = !{!"other", !1, i64 0}',
        "!5 = !{!2, !2, i64 0}",
        "!6 = !{!3, !3, i64 0}",
    ])
    text, streamed = streaming.mark_nontemporal(ir, ["out", "other"], realign=["out"])
    assert sorted(streamed) == ["other", "out"]
    stores = [line.strip() for line in text.splitlines() if line.strip().startswith("store")]
    assert stores[0].startswith("store <16 x float> %v, ptr %p, align 16,")  # raised
    assert "align 4," in stores[1]                                          # scalar: as it was
    assert "ptr %q, align 4," in stores[2]                                  # not realigned
    assert "align 32," in stores[3]                                         # never lowered
    # a shifted row's leftover columns (scalar stores) stay plain: streamed,
    # they halved the blur's speed on an Intel VM; the rest stream
    assert "!nontemporal" not in stores[1]
    assert all("!nontemporal" in s for k, s in enumerate(stores) if k != 1)


def test_row_shift():
    assert streaming.row_shift((10, 129), 4) == 4
    assert streaming.row_shift((10, 129), 8) == 2
    assert streaming.row_shift((10, 129), 1) == 16
    assert streaming.row_shift((10, 128), 4) == 0      # rows already 16-byte multiples
    assert streaming.row_shift((10, 10), 4) == 0       # narrower than 16 elements
    assert streaming.row_shift((3, 10, 129), 4) == 0   # 2-D only
    assert streaming.row_shift((10, 129), 16) == 0     # complex128: 16 bytes an element
