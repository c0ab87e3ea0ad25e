// halojit._rt.DeviceArray: an array in CUDA device memory, either allocated
// by the Halide runtime (a kernel's output kept on the device) or borrowed
// zero-copy from any DLPack producer (CuPy, PyTorch, JAX). It is a DLPack
// producer itself, so results go back the same way.
#pragma once

#include <pybind11/pybind11.h>

#include <HalideRuntime.h>

#include <string>
#include <vector>

#include "halojit/runtime.h"

namespace halojit::python {

// The DLPack ABI (dlpack.h, version 0.8 "unversioned" capsules).
struct DLDevice {
    int32_t device_type;  // 1 CPU, 2 CUDA, 13 CUDA managed
    int32_t device_id;
};
struct DLDataType {
    uint8_t code;  // 0 int, 1 uint, 2 float, 4 bfloat, 6 bool
    uint8_t bits;
    uint16_t lanes;
};
struct DLTensor {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides;  // elements; null = C-contiguous
    uint64_t byte_offset;
};
struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(DLManagedTensor *self);
};
constexpr int32_t kDLCPU = 1, kDLCUDA = 2, kDLCUDAManaged = 13;

class DeviceArray {
public:
    // Uninitialised device memory from the Halide runtime (C-contiguous).
    DeviceArray(DType dtype, std::vector<int64_t> shape);
    // Takes ownership of a consumed DLPack tensor on a CUDA device.
    explicit DeviceArray(DLManagedTensor *borrowed);
    ~DeviceArray();
    DeviceArray(const DeviceArray &) = delete;
    DeviceArray &operator=(const DeviceArray &) = delete;

    DType dtype() const { return dtype_; }
    const std::vector<int64_t> &shape() const { return shape_; }
    const std::vector<int64_t> &strides() const { return strides_; }  // bytes
    void *data() const { return data_; }
    int device_id() const { return device_id_; }
    ArrayView view() const;
    // Copies between host memory (C-contiguous, same shape and dtype) and this array.
    void copy_to_host(void *host) const;
    void copy_from_host(const void *host);

private:
    halide_buffer_t scratch(void *host) const;

    DType dtype_;
    std::vector<int64_t> shape_, strides_;
    std::vector<halide_dimension_t> dims_;
    halide_buffer_t owned_{};  // set when the Halide runtime allocated the memory
    DLManagedTensor *borrowed_ = nullptr;
    void *data_ = nullptr;
    int device_id_ = 0;
};

void register_device_array(pybind11::module_ &m);

}  // namespace halojit::python
