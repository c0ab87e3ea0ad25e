// The one numpy-convention -> halide_buffer_t conversion (zero copy).
#include <climits>
#include <cstdint>
#include <string>

#include "internal.h"

namespace halojit::detail {

void to_halide_buffer(const ArrayView &view, const BufferName &what, halide_buffer_t *buf,
                      halide_dimension_t *dims) {
    auto fail = [&](const std::string &msg) { throw Error(ErrorKind::Value, what.str() + ": " + msg); };
    if (view.ndim < 0) fail("negative ndim");
    if (!view.data) fail("null data pointer");
    const halide_device_interface_t *iface = view.on_device ? device::cuda_interface() : nullptr;  // Halide would treat it as a bounds query
    const int64_t itemsize = view.dtype.itemsize();
    for (int axis = 0; axis < view.ndim; axis++) {
        const int64_t extent = view.shape[axis];
        const int64_t stride_bytes = view.strides[axis];
        if (extent < 0 || extent > INT32_MAX) {
            fail("axis " + std::to_string(axis) + " has extent " + std::to_string(extent) +
                 ", outside Halide's int32 range");
        }
        halide_dimension_t &d = dims[view.ndim - 1 - axis];  // Halide dim 0 = last numpy axis
        d.min = 0;
        d.extent = static_cast<int32_t>(extent);
        d.flags = 0;
        if (extent <= 1) {
            // numpy gives stride 0 to empty and broadcast axes, and any stride
            // to a size-1 one (a one-record structured field: 17 bytes); it is
            // never used, but Halide still asserts stride 1 on dim 0
            d.stride = axis == view.ndim - 1 ? 1 : 0;
            continue;
        }
        if (stride_bytes % itemsize != 0) {
            fail("axis " + std::to_string(axis) + " has a stride of " + std::to_string(stride_bytes) +
                 " bytes, not a multiple of the item size " + std::to_string(itemsize) +
                 "; copy it with np.ascontiguousarray");
        }
        const int64_t stride = stride_bytes / itemsize;
        if (stride < INT32_MIN || stride > INT32_MAX) {
            fail("axis " + std::to_string(axis) + " has a stride of " + std::to_string(stride) +
                 " elements, outside Halide's int32 range");
        }
        if (axis == view.ndim - 1 && stride != 1) {
            fail("the last axis has a stride of " + std::to_string(stride) +
                 " elements; kernels need stride 1 there; copy it with np.ascontiguousarray");
        }
        d.stride = static_cast<int32_t>(stride);
    }
    *buf = halide_buffer_t{};
    if (iface) {  // a device array: the kernel reads it in place, never copies it
        buf->device = reinterpret_cast<uint64_t>(view.data);
        buf->device_interface = iface;
    } else {
        buf->host = static_cast<uint8_t *>(view.data);
    }
    buf->type = to_halide_type(view.dtype);
    buf->dimensions = view.ndim;
    buf->dim = dims;
}

}  // namespace halojit::detail
