// The C ABI (halojit/halojit.h) over the runtime core. Every entry point
// runs inside `guarded`, which turns exceptions into status codes and the
// thread-local last-error message.
#include <halojit/halojit.h>

#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "halojit/runtime.h"

struct hj_artifact {
    std::unique_ptr<halojit::Artifact> impl;
};

struct hj_tensor {
    halojit::Tensor tensor;
    halojit::ArrayView view;
};

namespace {

using halojit::DType;
using halojit::Error;
using halojit::ErrorKind;

thread_local std::string t_last_error;

constexpr DType kDTypes[] = {{1, 1},  {0, 8},  {0, 16}, {0, 32}, {0, 64},  {1, 8},
                             {1, 16}, {1, 32}, {1, 64}, {2, 16}, {2, 32}, {2, 64}};
constexpr const char *kDTypeNames[] = {"bool",   "int8",   "int16",   "int32",   "int64",   "uint8",
                                       "uint16", "uint32", "uint64", "float16", "float32", "float64"};
constexpr int kNumDTypes = 12;

template <typename Fn>
hj_status guarded(Fn fn) {
    try {
        fn();
        t_last_error.clear();
        return HJ_OK;
    } catch (const Error &e) {
        t_last_error = e.what();
        switch (e.kind()) {
            case ErrorKind::Value: return HJ_ERROR_VALUE;
            case ErrorKind::Type: return HJ_ERROR_TYPE;
            case ErrorKind::Runtime: return HJ_ERROR_RUNTIME;
            case ErrorKind::Artifact: return HJ_ERROR_ARTIFACT;
            case ErrorKind::Device: return HJ_ERROR_DEVICE;
        }
        return HJ_ERROR_UNKNOWN;
    } catch (const std::bad_alloc &) {
        t_last_error = "out of memory";
        return HJ_ERROR_OUT_OF_MEMORY;
    } catch (const std::exception &e) {
        t_last_error = e.what();
        return HJ_ERROR_UNKNOWN;
    } catch (...) {
        t_last_error = "unknown error";
        return HJ_ERROR_UNKNOWN;
    }
}

void require(bool ok, const std::string &msg) {
    if (!ok) throw Error(ErrorKind::Value, msg);
}

DType to_dtype(hj_dtype d, const std::string &what) {
    require(static_cast<int>(d) >= 0 && static_cast<int>(d) < kNumDTypes,
            what + ": dtype " + std::to_string(static_cast<int>(d)) + " is not an hj_dtype");
    return kDTypes[d];
}

hj_dtype from_dtype(DType t) {
    for (int i = 0; i < kNumDTypes; i++) {
        if (kDTypes[i] == t) return static_cast<hj_dtype>(i);
    }
    if (t.code == 1 && t.bits == 8) return HJ_UINT8;
    throw Error(ErrorKind::Value, "dtype " + halojit::dtype_name(t) + " has no hj_dtype");
}

// hj_arrays -> ArrayViews; NULL strides become C-contiguous ones kept in `strides`.
std::vector<halojit::ArrayView> views(const hj_array *arrays, size_t n, bool writable, const char *what,
                                      std::vector<std::vector<int64_t>> &strides) {
    require(n == 0 || arrays, std::string(what) + " is NULL");
    std::vector<halojit::ArrayView> out;
    strides.reserve(strides.size() + n);
    for (size_t i = 0; i < n; i++) {
        const hj_array &a = arrays[i];
        const std::string name = std::string(what) + "[" + std::to_string(i) + "]";
        require(a.ndim >= 0 && a.ndim <= 32, name + ": ndim " + std::to_string(a.ndim) + " is outside 0..32");
        require(a.ndim == 0 || a.shape, name + ": shape is NULL");
        halojit::ArrayView v;
        v.data = a.data;
        v.dtype = to_dtype(a.dtype, name);
        v.ndim = a.ndim;
        v.shape = a.shape;
        v.writable = writable;
        if (a.strides) {
            v.strides = a.strides;
        } else {
            for (int axis = 0; axis < a.ndim; axis++) require(a.shape[axis] >= 0, name + ": negative extent");
            strides.push_back(halojit::contiguous_strides(a.shape, a.ndim, v.dtype.itemsize()));
            v.strides = strides.back().data();
        }
        out.push_back(v);
    }
    return out;
}

const halojit::Artifact &impl(const hj_artifact *a) {
    if (!a || !a->impl) throw Error(ErrorKind::Value, "artifact is NULL");
    return *a->impl;
}

hj_tensor *new_tensor(halojit::Tensor t) {
    auto *out = new hj_tensor{std::move(t), {}};
    out->view = out->tensor.view();
    return out;
}

hj_status spec_of(const hj_artifact *artifact, size_t spec, size_t i, bool input, hj_dtype *dtype, int32_t *ndim,
                  const int64_t **shape) {
    return guarded([&] {
        const auto &specs = impl(artifact).specializations();
        require(spec < specs.size(), "specialization " + std::to_string(spec) + " of " + std::to_string(specs.size()));
        const auto &list = input ? specs[spec].inputs : specs[spec].outputs;
        require(i < list.size(), std::string(input ? "input " : "output ") + std::to_string(i) + " of " +
                                     std::to_string(list.size()));
        if (dtype) *dtype = from_dtype(list[i].dtype);
        if (ndim) *ndim = static_cast<int32_t>(list[i].shape.size());
        if (shape) *shape = list[i].shape.data();
    });
}

}  // namespace

extern "C" {

int hj_abi_version(void) { return HJ_ABI_VERSION; }
const char *hj_version(void) { return halojit::kVersion; }
const char *hj_last_error(void) { return t_last_error.c_str(); }

const char *hj_dtype_name(hj_dtype dtype) {
    const int d = static_cast<int>(dtype);
    return d >= 0 && d < kNumDTypes ? kDTypeNames[d] : "?";
}

size_t hj_dtype_size(hj_dtype dtype) {
    const int d = static_cast<int>(dtype);
    return d >= 0 && d < kNumDTypes ? static_cast<size_t>(kDTypes[d].itemsize()) : 0;
}

hj_status hj_artifact_open(const char *path, const char *level, hj_artifact **out) {
    return guarded([&] {
        require(path && out, "hj_artifact_open: path and out must not be NULL");
        *out = nullptr;
        auto a = std::make_unique<hj_artifact>();
        a->impl = std::make_unique<halojit::Artifact>(path, level ? level : "");
        *out = a.release();
    });
}

void hj_artifact_close(hj_artifact *artifact) { delete artifact; }

const char *hj_artifact_function(const hj_artifact *a) { return a && a->impl ? a->impl->function_name().c_str() : nullptr; }
const char *hj_artifact_level(const hj_artifact *a) { return a && a->impl ? a->impl->level().c_str() : nullptr; }
size_t hj_artifact_num_inputs(const hj_artifact *a) { return a && a->impl ? a->impl->input_names().size() : 0; }
size_t hj_artifact_num_outputs(const hj_artifact *a) { return a && a->impl ? a->impl->output_names().size() : 0; }

const char *hj_artifact_input_name(const hj_artifact *a, size_t i) {
    return a && a->impl && i < a->impl->input_names().size() ? a->impl->input_names()[i].c_str() : nullptr;
}

const char *hj_artifact_output_name(const hj_artifact *a, size_t i) {
    return a && a->impl && i < a->impl->output_names().size() ? a->impl->output_names()[i].c_str() : nullptr;
}

size_t hj_artifact_num_specializations(const hj_artifact *a) {
    return a && a->impl ? a->impl->specializations().size() : 0;
}

hj_status hj_artifact_input_spec(const hj_artifact *a, size_t spec, size_t i, hj_dtype *dtype, int32_t *ndim,
                                 const int64_t **shape) {
    return spec_of(a, spec, i, true, dtype, ndim, shape);
}

hj_status hj_artifact_output_spec(const hj_artifact *a, size_t spec, size_t i, hj_dtype *dtype, int32_t *ndim,
                                  const int64_t **shape) {
    return spec_of(a, spec, i, false, dtype, ndim, shape);
}

int64_t hj_artifact_find_specialization(const hj_artifact *a, const hj_array *inputs, size_t n_inputs) {
    int64_t found = -1;
    guarded([&] {
        std::vector<std::vector<int64_t>> strides;
        const auto in = views(inputs, n_inputs, false, "inputs", strides);
        found = impl(a).find_specialization(in.data(), in.size());
    });
    return found;
}

hj_status hj_artifact_run(const hj_artifact *a, const hj_array *inputs, size_t n_inputs, const hj_array *outputs,
                          size_t n_outputs) {
    return guarded([&] {
        std::vector<std::vector<int64_t>> strides;
        const auto in = views(inputs, n_inputs, false, "inputs", strides);
        const auto out = views(outputs, n_outputs, true, "outputs", strides);
        impl(a).run(in.data(), in.size(), out.data(), out.size());
    });
}

hj_status hj_artifact_run_alloc(const hj_artifact *a, const hj_array *inputs, size_t n_inputs, hj_tensor **outputs,
                                size_t n_outputs) {
    return guarded([&] {
        const auto &art = impl(a);
        require(outputs, "outputs is NULL");
        require(n_outputs == art.output_names().size(), "expected room for " +
                                                            std::to_string(art.output_names().size()) +
                                                            " outputs, got " + std::to_string(n_outputs));
        for (size_t k = 0; k < n_outputs; k++) outputs[k] = nullptr;
        std::vector<std::vector<int64_t>> strides;
        const auto in = views(inputs, n_inputs, false, "inputs", strides);
        auto results = art.run(in.data(), in.size());
        for (size_t k = 0; k < n_outputs; k++) outputs[k] = new_tensor(std::move(results[k]));
    });
}

size_t hj_artifact_num_test_vectors(const hj_artifact *a) { return a && a->impl ? a->impl->num_test_vectors() : 0; }

hj_status hj_artifact_test_vector(const hj_artifact *a, size_t i, hj_tensor **inputs, size_t n_inputs,
                                  hj_tensor **expected, size_t n_outputs, double *rtol, double *atol) {
    return guarded([&] {
        const auto &art = impl(a);
        require(n_inputs == art.input_names().size() && n_outputs == art.output_names().size(),
                "test vector: expected room for " + std::to_string(art.input_names().size()) + " inputs and " +
                    std::to_string(art.output_names().size()) + " outputs");
        require((n_inputs == 0 || inputs) && (n_outputs == 0 || expected), "test vector: NULL arrays");
        halojit::TestVector tv = art.test_vector(i);
        for (size_t k = 0; k < n_inputs; k++) inputs[k] = new_tensor(std::move(tv.inputs[k]));
        for (size_t k = 0; k < n_outputs; k++) {
            expected[k] = new_tensor(std::move(tv.expected[k]));
            if (rtol) rtol[k] = tv.rtol[k];
            if (atol) atol[k] = tv.atol[k];
        }
    });
}

hj_array hj_tensor_array(const hj_tensor *t) {
    if (!t) return hj_array{nullptr, HJ_BOOL, 0, nullptr, nullptr};
    return hj_array{t->view.data, from_dtype(t->view.dtype), t->view.ndim, t->view.shape, t->view.strides};
}

void hj_tensor_free(hj_tensor *t) { delete t; }

hj_status hj_allclose(const hj_array *got, const hj_array *expected, double rtol, double atol, int *close) {
    std::string why;
    const hj_status status = guarded([&] {
        require(got && expected && close, "hj_allclose: NULL argument");
        std::vector<std::vector<int64_t>> strides;
        const auto g = views(got, 1, false, "got", strides);
        const auto e = views(expected, 1, false, "expected", strides);
        *close = halojit::allclose(g[0], e[0], rtol, atol, &why) ? 1 : 0;
    });
    if (status == HJ_OK && !*close) t_last_error = why;
    return status;
}

hj_status hj_set_num_threads(int n) {
    return guarded([&] { halojit::set_num_threads(n); });
}

}  // extern "C"
