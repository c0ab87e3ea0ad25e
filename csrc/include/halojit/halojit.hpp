// halojit embedding API for C++: a thin header-only layer over the C ABI
// (halojit/halojit.h) with RAII and exceptions on this side of the ABI.
//
//   hj::Artifact model("model.hjm");
//   std::vector<float> x(4 * 1024), y(4 * 1024);
//   model.run({hj::ArrayRef(x.data(), {4, 1024})}, {hj::ArrayRef(y.data(), {4, 1024})});
//   std::vector<hj::Tensor> outs = model.run({hj::ArrayRef(x.data(), {4, 1024})});  // runtime-owned
//
// Errors throw hj::Error with the runtime's message and status.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "halojit.h"

namespace hj {

class Error : public std::runtime_error {
public:
    Error(hj_status status, const std::string &message) : std::runtime_error(message), status_(status) {}
    hj_status status() const { return status_; }

private:
    hj_status status_;
};

inline void check(hj_status status) {
    if (status != HJ_OK) throw Error(status, hj_last_error());
}

template <typename T>
struct dtype_of;
template <> struct dtype_of<bool> { static constexpr hj_dtype value = HJ_BOOL; };
template <> struct dtype_of<int8_t> { static constexpr hj_dtype value = HJ_INT8; };
template <> struct dtype_of<int16_t> { static constexpr hj_dtype value = HJ_INT16; };
template <> struct dtype_of<int32_t> { static constexpr hj_dtype value = HJ_INT32; };
template <> struct dtype_of<int64_t> { static constexpr hj_dtype value = HJ_INT64; };
template <> struct dtype_of<uint8_t> { static constexpr hj_dtype value = HJ_UINT8; };
template <> struct dtype_of<uint16_t> { static constexpr hj_dtype value = HJ_UINT16; };
template <> struct dtype_of<uint32_t> { static constexpr hj_dtype value = HJ_UINT32; };
template <> struct dtype_of<uint64_t> { static constexpr hj_dtype value = HJ_UINT64; };
template <> struct dtype_of<float> { static constexpr hj_dtype value = HJ_FLOAT32; };
template <> struct dtype_of<double> { static constexpr hj_dtype value = HJ_FLOAT64; };

// A borrowed array: the caller's memory, shape in C order, strides in bytes
// (empty: C-contiguous). It owns copies of shape and strides, so it may be
// built from temporaries.
class ArrayRef {
public:
    ArrayRef(void *data, hj_dtype dtype, std::vector<int64_t> shape, std::vector<int64_t> strides = {})
        : data_(data), dtype_(dtype), shape_(std::move(shape)), strides_(std::move(strides)) {}
    template <typename T>
    ArrayRef(T *data, std::vector<int64_t> shape, std::vector<int64_t> strides = {})
        : ArrayRef(const_cast<void *>(static_cast<const void *>(data)), dtype_of<std::remove_const_t<T>>::value,
                   std::move(shape), std::move(strides)) {}
    explicit ArrayRef(const hj_array &a)
        : data_(a.data), dtype_(a.dtype), shape_(a.shape, a.shape + a.ndim),
          strides_(a.strides ? std::vector<int64_t>(a.strides, a.strides + a.ndim) : std::vector<int64_t>{}) {}

    hj_array raw() const {
        return hj_array{data_, dtype_, static_cast<int32_t>(shape_.size()), shape_.data(),
                        strides_.empty() ? nullptr : strides_.data()};
    }
    hj_dtype dtype() const { return dtype_; }
    const std::vector<int64_t> &shape() const { return shape_; }

private:
    void *data_;
    hj_dtype dtype_;
    std::vector<int64_t> shape_, strides_;
};

// An array owned by the runtime (outputs of run(), test vectors).
class Tensor {
public:
    explicit Tensor(hj_tensor *t) : t_(t, &hj_tensor_free) {}
    hj_array raw() const { return hj_tensor_array(t_.get()); }
    ArrayRef ref() const { return ArrayRef(raw()); }
    hj_dtype dtype() const { return raw().dtype; }
    std::vector<int64_t> shape() const {
        const hj_array a = raw();
        return std::vector<int64_t>(a.shape, a.shape + a.ndim);
    }
    int64_t size() const {
        int64_t n = 1;
        for (int64_t e : shape()) n *= e;
        return n;
    }
    void *data() const { return raw().data; }
    template <typename T>
    T *data() const {
        if (dtype_of<T>::value != dtype()) {
            throw Error(HJ_ERROR_TYPE, std::string("tensor holds ") + hj_dtype_name(dtype()) + ", not " +
                                           hj_dtype_name(dtype_of<T>::value));
        }
        return static_cast<T *>(data());
    }

private:
    std::shared_ptr<hj_tensor> t_;
};

struct TensorInfo {
    std::string name;
    hj_dtype dtype;
    std::vector<int64_t> shape;
};

struct TestVector {
    std::vector<Tensor> inputs, expected;
    std::vector<double> rtol, atol;
};

inline std::vector<hj_array> raw_arrays(const std::vector<ArrayRef> &arrays) {
    std::vector<hj_array> out;
    out.reserve(arrays.size());
    for (const auto &a : arrays) out.push_back(a.raw());
    return out;
}

// numpy.allclose(got, expected, rtol, atol, equal_nan=True); `why` gets the first difference.
inline bool allclose(const ArrayRef &got, const ArrayRef &expected, double rtol, double atol,
                     std::string *why = nullptr) {
    const hj_array g = got.raw(), e = expected.raw();
    int close = 0;
    check(hj_allclose(&g, &e, rtol, atol, &close));
    if (!close && why) *why = hj_last_error();
    return close != 0;
}

class Artifact {
public:
    // Loads `path` for `level` ("" = the best this CPU runs).
    explicit Artifact(const std::string &path, const std::string &level = "") {
        hj_artifact *a = nullptr;
        check(hj_artifact_open(path.c_str(), level.empty() ? nullptr : level.c_str(), &a));
        a_.reset(a, &hj_artifact_close);
    }

    std::string function() const { return hj_artifact_function(a_.get()); }
    std::string level() const { return hj_artifact_level(a_.get()); }
    size_t num_inputs() const { return hj_artifact_num_inputs(a_.get()); }
    size_t num_outputs() const { return hj_artifact_num_outputs(a_.get()); }
    size_t num_specializations() const { return hj_artifact_num_specializations(a_.get()); }

    // Names, dtypes and shapes of specialization `spec`.
    std::vector<TensorInfo> inputs(size_t spec = 0) const { return infos(spec, true); }
    std::vector<TensorInfo> outputs(size_t spec = 0) const { return infos(spec, false); }

    // Runs on caller-owned outputs (written in place).
    void run(const std::vector<ArrayRef> &inputs, const std::vector<ArrayRef> &outputs) const {
        const auto in = raw_arrays(inputs), out = raw_arrays(outputs);
        check(hj_artifact_run(a_.get(), in.data(), in.size(), out.data(), out.size()));
    }

    // Runs into fresh runtime-owned outputs.
    std::vector<Tensor> run(const std::vector<ArrayRef> &inputs) const {
        const auto in = raw_arrays(inputs);
        std::vector<hj_tensor *> out(num_outputs(), nullptr);
        check(hj_artifact_run_alloc(a_.get(), in.data(), in.size(), out.data(), out.size()));
        std::vector<Tensor> tensors;
        for (hj_tensor *t : out) tensors.emplace_back(t);
        return tensors;
    }

    size_t num_test_vectors() const { return hj_artifact_num_test_vectors(a_.get()); }

    TestVector test_vector(size_t i) const {
        std::vector<hj_tensor *> in(num_inputs(), nullptr), expected(num_outputs(), nullptr);
        TestVector tv;
        tv.rtol.resize(num_outputs());
        tv.atol.resize(num_outputs());
        check(hj_artifact_test_vector(a_.get(), i, in.data(), in.size(), expected.data(), expected.size(),
                                      tv.rtol.data(), tv.atol.data()));
        for (hj_tensor *t : in) tv.inputs.emplace_back(t);
        for (hj_tensor *t : expected) tv.expected.emplace_back(t);
        return tv;
    }

    hj_artifact *raw() const { return a_.get(); }

private:
    std::vector<TensorInfo> infos(size_t spec, bool input) const {
        std::vector<TensorInfo> out;
        const size_t n = input ? num_inputs() : num_outputs();
        for (size_t i = 0; i < n; i++) {
            TensorInfo info;
            int32_t ndim = 0;
            const int64_t *shape = nullptr;
            check((input ? hj_artifact_input_spec : hj_artifact_output_spec)(a_.get(), spec, i, &info.dtype, &ndim,
                                                                             &shape));
            info.name = input ? hj_artifact_input_name(a_.get(), i) : hj_artifact_output_name(a_.get(), i);
            info.shape.assign(shape, shape + ndim);
            out.push_back(std::move(info));
        }
        return out;
    }

    std::shared_ptr<hj_artifact> a_;
};

}  // namespace hj
