// Internal helpers of the runtime core shared between its translation units.
#pragma once

#include <HalideRuntime.h>

#include <cstddef>
#include <string>
#include <vector>

#include "halojit/runtime.h"

namespace halojit::detail {

// Kernel error capture: Halide's error handler (installed by load_runtime)
// appends to a thread-local buffer; when the failing code ran on a Halide
// worker thread, the most recent message from any thread is used instead.
void clear_kernel_error();
std::string take_kernel_error();

// The one conversion from a numpy-convention ArrayView to a halide_buffer_t
// (zero copy): Halide dimension 0 = the last numpy axis, strides in
// elements, min 0. `dims` must hold view.ndim entries. Throws Error(Value),
// naming `what`, for strides that are not whole elements, extents or strides
// outside int32, a null pointer, or a last axis whose stride is not 1 while
// its extent is > 1 (Halide kernels assume dim 0 is dense).
//
// The name is built only for an error message: a plan converts every caller
// buffer on every call, and formatting "plan input 3" each time cost more
// than the conversion (a 4K-element call spends ~1 us in Plan::run).
struct BufferName {
    const char *prefix;  // "plan input", "intermediate buffer", ...
    size_t index;
    std::string str() const { return std::string(prefix) + " " + std::to_string(index); }
};
void to_halide_buffer(const ArrayView &view, const BufferName &what, halide_buffer_t *buf,
                      halide_dimension_t *dims);

// Up to N elements on the stack, more on the heap: a small call's
// bookkeeping costs no allocation (each std::vector was ~40 ns of the ~1 us
// Plan::run spent above a 4K-element kernel, measured on the 2-core VM).
// Elements start uninitialized: every one used is written first.
template <typename T, size_t N>
class SmallBuffer {
public:
    explicit SmallBuffer(size_t n) : data_(n <= N ? local_ : (heap_.resize(n), heap_.data())) {}
    SmallBuffer(const SmallBuffer &) = delete;
    SmallBuffer &operator=(const SmallBuffer &) = delete;
    T *data() { return data_; }
    T &operator[](size_t i) { return data_[i]; }

private:
    T local_[N];
    std::vector<T> heap_;
    T *data_;
};

inline halide_type_t to_halide_type(DType t) {
    halide_type_t h;
    h.code = static_cast<halide_type_code_t>(t.code);
    h.bits = t.bits;
    h.lanes = 1;
    return h;
}

}  // namespace halojit::detail

// CUDA device support (cuda_device.cpp).
namespace halojit::device {

// Called for every Halide runtime loaded: a host-cuda one has its device
// functions resolved, kernels bound to primary contexts, and device
// allocations cached for reuse.
void on_runtime_loaded(void *handle);
bool cuda_runtime_loaded();
// Halide's CUDA device interface; throws Error(Device) without a CUDA runtime.
const halide_device_interface_t *cuda_interface();
// Throws Error(Device) with what is missing when a kernel for `kernel_target`
// (a Halide target string naming cuda_capability_NN) cannot run here.
void check_cuda_device(const std::string &kernel_target);
// "0: NVIDIA H100 (capability 9.0); ..." or "" without a driver or device.
std::string device_description();
void copy_to_host(halide_buffer_t *buf);  // when device-dirty; throws Error(Runtime)
void copy_to_device(halide_buffer_t *buf);  // when host-dirty (allocates when needed)
int current_device();  // HL_GPU_DEVICE, else 0: the device kernels run on
void free_device(halide_buffer_t *buf) noexcept;
void malloc_device(halide_buffer_t *buf);  // throws Error(Device/Runtime)
void sync_device(halide_buffer_t *buf);

}  // namespace halojit::device
