// DeviceArray and the DLPack bridge (see device_array.h).
#include "device_array.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>

#include "internal.h"

namespace py = pybind11;

namespace halojit::python {
namespace {

constexpr const char *kCapsule = "dltensor";
constexpr const char *kUsedCapsule = "used_dltensor";

DType dtype_of_dlpack(const DLDataType &t) {
    if (t.lanes != 1) throw Error(ErrorKind::Value, "DLPack tensor has " + std::to_string(t.lanes) + " lanes; expected 1");
    switch (t.code) {
        case 0: case 1:
            if (t.bits == 8 || t.bits == 16 || t.bits == 32 || t.bits == 64) return DType{t.code, t.bits};
            break;
        case 2:
            if (t.bits == 16 || t.bits == 32 || t.bits == 64) return DType{2, t.bits};
            break;
        case 6:
            if (t.bits == 8) return DType{1, 1};  // bool, one byte per element
            break;
        default: break;
    }
    throw Error(ErrorKind::Value, "DLPack dtype (code " + std::to_string(t.code) + ", " + std::to_string(t.bits) +
                                      " bits) is not supported; expected bool, int, uint or float");
}

DLDataType dlpack_of(DType t) {
    if (t.code == 1 && t.bits == 1) return DLDataType{6, 8, 1};
    return DLDataType{t.code, t.bits, 1};
}

void fill_dims(const std::vector<int64_t> &shape, const std::vector<int64_t> &strides, int itemsize,
               std::vector<halide_dimension_t> &dims) {
    const int n = static_cast<int>(shape.size());
    dims.assign(n, halide_dimension_t{});
    for (int a = 0; a < n; a++) {
        halide_dimension_t &d = dims[n - 1 - a];  // Halide dim 0 = the last numpy axis
        d.min = 0;
        d.extent = static_cast<int32_t>(shape[a]);
        d.stride = static_cast<int32_t>(strides[a] / itemsize);
    }
}

// What a DLManagedTensor we hand out keeps alive: the Python DeviceArray.
struct Export {
    DLManagedTensor tensor;
    std::vector<int64_t> shape, strides;
    PyObject *owner;
};

void export_deleter(DLManagedTensor *t) {
    auto *e = static_cast<Export *>(t->manager_ctx);
    py::gil_scoped_acquire gil;
    Py_XDECREF(e->owner);
    delete e;
}

void capsule_destructor(PyObject *capsule) {
    if (!PyCapsule_IsValid(capsule, kCapsule)) return;  // consumed: the consumer calls the deleter
    auto *t = static_cast<DLManagedTensor *>(PyCapsule_GetPointer(capsule, kCapsule));
    if (t && t->deleter) t->deleter(t);
}

}  // namespace

DeviceArray::DeviceArray(DType dtype, std::vector<int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)), device_id_(device::current_device()) {
    strides_ = contiguous_strides(shape_.data(), static_cast<int>(shape_.size()), dtype_.itemsize());
    fill_dims(shape_, strides_, dtype_.itemsize(), dims_);
    owned_.type = detail::to_halide_type(dtype_);
    owned_.dimensions = static_cast<int>(shape_.size());
    owned_.dim = dims_.data();
    device::malloc_device(&owned_);
    data_ = reinterpret_cast<void *>(owned_.device);
}

DeviceArray::DeviceArray(DLManagedTensor *borrowed) : borrowed_(borrowed) {
    const DLTensor &t = borrowed->dl_tensor;
    try {
        if (t.device.device_type != kDLCUDA && t.device.device_type != kDLCUDAManaged) {
            throw Error(ErrorKind::Value, "DLPack tensor is on device type " + std::to_string(t.device.device_type) +
                                              "; expected a CUDA device (type 2). Pass host arrays as numpy arrays");
        }
        device_id_ = t.device.device_id;
        if (device_id_ != device::current_device()) {
            throw Error(ErrorKind::Device, "the array is on CUDA device " + std::to_string(device_id_) +
                                               ", kernels run on device " + std::to_string(device::current_device()) +
                                               " (set HL_GPU_DEVICE)");
        }
        dtype_ = dtype_of_dlpack(t.dtype);
        shape_.assign(t.shape, t.shape + t.ndim);
        if (t.strides) {
            for (int a = 0; a < t.ndim; a++) strides_.push_back(t.strides[a] * dtype_.itemsize());
        } else {
            strides_ = contiguous_strides(shape_.data(), t.ndim, dtype_.itemsize());
        }
        data_ = static_cast<char *>(t.data) + t.byte_offset;
        fill_dims(shape_, strides_, dtype_.itemsize(), dims_);
    } catch (...) {
        if (borrowed_->deleter) borrowed_->deleter(borrowed_);
        borrowed_ = nullptr;
        throw;
    }
}

DeviceArray::~DeviceArray() {
    if (borrowed_ && borrowed_->deleter) borrowed_->deleter(borrowed_);
    if (owned_.device) device::free_device(&owned_);
}

ArrayView DeviceArray::view() const {
    ArrayView v;
    v.data = data_;
    v.dtype = dtype_;
    v.ndim = static_cast<int>(shape_.size());
    v.shape = shape_.data();
    v.strides = strides_.data();
    v.on_device = true;
    return v;
}

halide_buffer_t DeviceArray::scratch(void *host) const {
    // the host side is C-contiguous: the device side must match it
    if (contiguous_strides(shape_.data(), static_cast<int>(shape_.size()), dtype_.itemsize()) != strides_) {
        throw Error(ErrorKind::Value, "copying a strided device array to or from the host is not supported; "
                                      "make it contiguous on the device first");
    }
    halide_buffer_t b{};
    b.host = static_cast<uint8_t *>(host);
    b.device = reinterpret_cast<uint64_t>(data_);
    b.device_interface = device::cuda_interface();
    b.type = detail::to_halide_type(dtype_);
    b.dimensions = static_cast<int>(shape_.size());
    b.dim = const_cast<halide_dimension_t *>(dims_.data());
    return b;
}

void DeviceArray::copy_to_host(void *host) const {
    halide_buffer_t b = scratch(host);
    b.flags = halide_buffer_flag_device_dirty;
    device::copy_to_host(&b);
}

void DeviceArray::copy_from_host(const void *host) {
    halide_buffer_t b = scratch(const_cast<void *>(host));
    b.flags = halide_buffer_flag_host_dirty;
    device::copy_to_device(&b);
    device::sync_device(&b);
}

void register_device_array(py::module_ &m) {
    py::class_<DeviceArray, std::shared_ptr<DeviceArray>>(m, "DeviceArray",
        "An array in CUDA device memory: a kernel's output kept on the device, or an array borrowed "
        "zero-copy from a DLPack producer. Hand it to CuPy/PyTorch/JAX with their from_dlpack; "
        "numpy.asarray(a) copies it to the host.")
        .def(py::init([](const std::vector<int64_t> &shape, const std::string &dtype) {
                 return std::make_shared<DeviceArray>(dtype_from_name(dtype), shape);
             }),
             py::arg("shape"), py::arg("dtype"), "uninitialised device memory (C-contiguous)")
        .def_property_readonly("shape", [](const DeviceArray &a) { return py::tuple(py::cast(a.shape())); })
        .def_property_readonly("dtype", [](const DeviceArray &a) { return py::dtype(dtype_name(a.dtype())); })
        .def_property_readonly("ndim", [](const DeviceArray &a) { return a.shape().size(); })
        .def_property_readonly("device_id", &DeviceArray::device_id)
        .def_property_readonly("data_ptr", [](const DeviceArray &a) { return reinterpret_cast<uintptr_t>(a.data()); })
        .def("__dlpack_device__", [](const DeviceArray &a) { return py::make_tuple(kDLCUDA, a.device_id()); })
        .def("__dlpack__",
             [](py::object self, py::object /*stream*/, py::object /*max_version*/, py::object dl_device,
                py::object copy) {
                 // Our kernels run on the legacy default stream and run()
                 // waits for device outputs, so no stream handshake is needed.
                 if (!copy.is_none() && copy.cast<bool>()) {
                     throw Error(ErrorKind::Value, "DeviceArray.__dlpack__(copy=True) is not supported");
                 }
                 if (!dl_device.is_none()) {
                     auto dev = dl_device.cast<std::pair<int, int>>();
                     auto &a = self.cast<DeviceArray &>();
                     if (dev.first != kDLCUDA || dev.second != a.device_id()) {
                         throw Error(ErrorKind::Value, "DeviceArray lives on CUDA device " +
                                                           std::to_string(a.device_id()) + "; cannot export to another device");
                     }
                 }
                 auto &a = self.cast<DeviceArray &>();
                 auto *e = new Export();
                 e->shape = a.shape();
                 for (int64_t s : a.strides()) e->strides.push_back(s / a.dtype().itemsize());
                 e->owner = self.ptr();
                 Py_INCREF(e->owner);
                 DLTensor &t = e->tensor.dl_tensor;
                 t.data = a.data();
                 t.device = DLDevice{kDLCUDA, a.device_id()};
                 t.ndim = static_cast<int32_t>(e->shape.size());
                 t.dtype = dlpack_of(a.dtype());
                 t.shape = e->shape.data();
                 t.strides = e->strides.data();
                 t.byte_offset = 0;
                 e->tensor.manager_ctx = e;
                 e->tensor.deleter = &export_deleter;
                 return py::reinterpret_steal<py::object>(PyCapsule_New(&e->tensor, kCapsule, &capsule_destructor));
             },
             py::kw_only(), py::arg("stream") = py::none(), py::arg("max_version") = py::none(),
             py::arg("dl_device") = py::none(), py::arg("copy") = py::none())
        .def("numpy", [](const DeviceArray &a) {
                 py::array out(py::dtype(dtype_name(a.dtype())), a.shape());
                 {
                     py::gil_scoped_release release;
                     if (out.size()) a.copy_to_host(out.mutable_data());
                 }
                 return out;
             }, "a host copy as a numpy array")
        .def("__array__", [](py::object self, py::object dtype, py::object /*copy*/) {
                 py::object arr = self.attr("numpy")();
                 return dtype.is_none() ? arr : arr.attr("astype")(dtype);
             }, py::arg("dtype") = py::none(), py::arg("copy") = py::none())
        .def("__repr__", [](const DeviceArray &a) {
            return "<halojit.DeviceArray " + shape_text(a.shape().data(), static_cast<int>(a.shape().size())) + " " +
                   dtype_name(a.dtype()) + " on cuda:" + std::to_string(a.device_id()) + ">";
        });

    m.def("from_dlpack", [](py::object obj) {
             if (!py::hasattr(obj, "__dlpack__")) {
                 throw Error(ErrorKind::Type, "expected an object with __dlpack__ (a CuPy, PyTorch or JAX array), got " +
                                                  py::str(py::type::of(obj).attr("__name__")).cast<std::string>());
             }
             py::object capsule;
             try {  // stream 1: make the producer's work visible to the legacy default stream we run on
                 capsule = obj.attr("__dlpack__")(py::arg("stream") = 1);
             } catch (py::error_already_set &) {
                 capsule = obj.attr("__dlpack__")();
             }
             if (!PyCapsule_IsValid(capsule.ptr(), kCapsule)) {
                 throw Error(ErrorKind::Value, "__dlpack__ did not return a 'dltensor' capsule");
             }
             auto *t = static_cast<DLManagedTensor *>(PyCapsule_GetPointer(capsule.ptr(), kCapsule));
             PyCapsule_SetName(capsule.ptr(), kUsedCapsule);
             return std::make_shared<DeviceArray>(t);
         }, py::arg("obj"),
         "borrow a CUDA array from any DLPack producer (zero copy); raises ValueError for host arrays");
    m.def("to_device", [](py::array arr) {
             arr = py::array::ensure(arr, py::array::c_style);
             DType dt = dtype_from_name(py::str(arr.dtype().attr("name")).cast<std::string>());
             std::vector<int64_t> shape(arr.shape(), arr.shape() + arr.ndim());
             auto out = std::make_shared<DeviceArray>(dt, shape);
             if (arr.size()) out->copy_from_host(arr.data());
             return out;
         }, py::arg("array"), "a device copy of a numpy array");
    m.def("cuda_devices", &device::device_description, "the CUDA devices this process sees, as text ('' without)");
}

}  // namespace halojit::python
