// Owned tensors and the strided helpers artifacts need: copies between any
// strides, an overlap test, and numpy-style allclose.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "halojit/runtime.h"

namespace halojit {
namespace {

constexpr size_t kAlign = 64;

// Calls fn(offset_a, offset_b, flat_index) for every element, in C order.
template <typename Fn>
void for_each_element(int ndim, const int64_t *shape, const int64_t *strides_a, const int64_t *strides_b, Fn fn) {
    for (int a = 0; a < ndim; a++) {
        if (shape[a] == 0) return;
    }
    std::vector<int64_t> index(ndim, 0);
    int64_t off_a = 0, off_b = 0, flat = 0;
    while (true) {
        fn(off_a, off_b, flat++);
        int axis = ndim - 1;
        for (; axis >= 0; axis--) {
            if (++index[axis] < shape[axis]) {
                off_a += strides_a[axis];
                off_b += strides_b[axis];
                break;
            }
            off_a -= strides_a[axis] * (shape[axis] - 1);
            off_b -= strides_b[axis] * (shape[axis] - 1);
            index[axis] = 0;
        }
        if (axis < 0) return;
    }
}

float half_to_float(uint16_t h) {
    const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {  // subnormal: renormalize
            int e = -1;
            uint32_t m = mant;
            do {
                e++;
                m <<= 1;
            } while (!(m & 0x400));
            bits = sign | ((127 - 15 - e) << 23) | ((m & 0x3FF) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7F800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

double load_float(const uint8_t *p, DType t) {
    if (t.code == 2 && t.bits == 64) {
        double d;
        std::memcpy(&d, p, 8);
        return d;
    }
    if (t.code == 2 && t.bits == 32) {
        float f;
        std::memcpy(&f, p, 4);
        return f;
    }
    uint16_t h;
    std::memcpy(&h, p, 2);
    if (t.code == 2) return half_to_float(h);
    const uint32_t bits = static_cast<uint32_t>(h) << 16;  // bfloat16
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

}  // namespace

std::string shape_text(const int64_t *shape, int ndim) {
    std::string s = "(";
    for (int i = 0; i < ndim; i++) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + (ndim == 1 ? ",)" : ")");
}

std::vector<int64_t> contiguous_strides(const int64_t *shape, int ndim, int itemsize) {
    std::vector<int64_t> strides(ndim);
    int64_t stride = itemsize;
    for (int axis = ndim - 1; axis >= 0; axis--) {
        strides[axis] = stride;
        stride *= std::max<int64_t>(shape[axis], 1);
    }
    return strides;
}

Tensor::Tensor(DType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
    for (int64_t e : shape_) {
        if (e < 0) throw Error(ErrorKind::Value, "Tensor: negative extent");
    }
    strides_ = contiguous_strides(shape_.data(), static_cast<int>(shape_.size()), dtype_.itemsize());
    const size_t bytes = (std::max<size_t>(nbytes(), 1) + kAlign - 1) / kAlign * kAlign;
    void *p = std::aligned_alloc(kAlign, bytes);
    if (!p) throw Error(ErrorKind::Runtime, "out of memory allocating " + std::to_string(bytes) + " bytes");
    memory_.reset(p, std::free);
}

int64_t Tensor::size() const {
    int64_t n = 1;
    for (int64_t e : shape_) n *= e;
    return n;
}

ArrayView Tensor::view() const {
    return ArrayView{memory_.get(), dtype_, static_cast<int>(shape_.size()), shape_.data(), strides_.data(), true};
}

void copy_array(const ArrayView &dst, const ArrayView &src) {
    bool same = dst.ndim == src.ndim && dst.dtype == src.dtype;
    for (int a = 0; same && a < dst.ndim; a++) same = dst.shape[a] == src.shape[a];
    if (!same) {
        throw Error(ErrorKind::Value, "copy: shapes or dtypes differ: " + dtype_name(dst.dtype) +
                                          shape_text(dst.shape, dst.ndim) + " <- " + dtype_name(src.dtype) +
                                          shape_text(src.shape, src.ndim));
    }
    if (!dst.writable) throw Error(ErrorKind::Value, "copy: the destination is read-only");
    const size_t item = dst.dtype.itemsize();
    auto *d = static_cast<uint8_t *>(dst.data);
    const auto *s = static_cast<const uint8_t *>(src.data);
    for_each_element(dst.ndim, dst.shape, dst.strides, src.strides,
                     [&](int64_t od, int64_t os, int64_t) { std::memcpy(d + od, s + os, item); });
}

bool may_overlap(const ArrayView &a, const ArrayView &b) {
    auto range = [](const ArrayView &v, uintptr_t &lo, uintptr_t &hi) {
        int64_t low = 0, high = 0;
        for (int i = 0; i < v.ndim; i++) {
            if (v.shape[i] == 0) return false;
            const int64_t span = v.strides[i] * (v.shape[i] - 1);
            (span < 0 ? low : high) += span;
        }
        lo = reinterpret_cast<uintptr_t>(v.data) + low;
        hi = reinterpret_cast<uintptr_t>(v.data) + high + v.dtype.itemsize();
        return true;
    };
    uintptr_t alo, ahi, blo, bhi;
    if (!range(a, alo, ahi) || !range(b, blo, bhi)) return false;
    return alo < bhi && blo < ahi;
}

bool allclose(const ArrayView &got, const ArrayView &want, double rtol, double atol, std::string *why) {
    auto say = [&](const std::string &msg) {
        if (why) *why = msg;
        return false;
    };
    bool same = got.ndim == want.ndim && dtype_compatible(want.dtype, got.dtype);
    for (int a = 0; same && a < got.ndim; a++) same = got.shape[a] == want.shape[a];
    if (!same) {
        return say("got " + dtype_name(got.dtype) + shape_text(got.shape, got.ndim) + ", expected " +
                   dtype_name(want.dtype) + shape_text(want.shape, want.ndim));
    }
    const auto *g = static_cast<const uint8_t *>(got.data);
    const auto *w = static_cast<const uint8_t *>(want.data);
    const DType t = want.dtype;
    const bool is_float = t.code == 2 || t.code == 4;
    const size_t item = t.itemsize();
    bool ok = true;
    int64_t bad = -1;
    double bad_got = 0, bad_want = 0;
    for_each_element(got.ndim, got.shape, got.strides, want.strides, [&](int64_t og, int64_t ow, int64_t flat) {
        if (!ok) return;
        if (is_float) {
            const double x = load_float(g + og, t), y = load_float(w + ow, t);
            bool close;
            if (std::isnan(x) || std::isnan(y)) close = std::isnan(x) && std::isnan(y);
            else if (std::isinf(x) || std::isinf(y)) close = x == y;
            else close = std::fabs(x - y) <= atol + rtol * std::fabs(y);
            if (!close) {
                ok = false;
                bad = flat;
                bad_got = x;
                bad_want = y;
            }
        } else if (std::memcmp(g + og, w + ow, item) != 0) {
            const bool is_bool = t.code == 1 && t.bits <= 8;
            if (!(is_bool && (g[og] != 0) == (w[ow] != 0))) {
                ok = false;
                bad = flat;
            }
        }
    });
    if (ok) return true;
    std::string msg = "element " + std::to_string(bad) + " (flat index) differs";
    if (is_float) msg += ": got " + std::to_string(bad_got) + ", expected " + std::to_string(bad_want);
    return say(msg);
}

}  // namespace halojit
