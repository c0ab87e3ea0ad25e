// pybind11 module halojit._rt: the Python face of the runtime core.
// numpy <-> Halide buffers happens in view_of (numpy -> ArrayView) and
// detail::to_halide_buffer (ArrayView -> halide_buffer_t) only.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "device_array.h"
#include "dispatch.h"
#include "halojit/runtime.h"

namespace py = pybind11;
using namespace halojit;

#ifndef HALOJIT_HALIDE_RUNTIME_HEADER
#define HALOJIT_HALIDE_RUNTIME_HEADER ""
#endif

namespace halojit::python {

// numpy dtype -> Halide element type. Booleans travel as one-byte uint1;
// the plan sets the exact type (uint1 or uint8) the kernel asks for.
DType numpy_dtype(const py::dtype &dt, const std::string &what) {
    const char kind = dt.kind();
    const int bits = static_cast<int>(dt.itemsize()) * 8;
    const char order = dt.byteorder();
    if (order == '>') {
        throw Error(ErrorKind::Value, what + ": big-endian arrays are not supported; use arr.astype(arr.dtype.newbyteorder('='))");
    }
    switch (kind) {
        case 'b': return DType{1, 1};
        case 'i': if (bits <= 64) return DType{0, static_cast<uint8_t>(bits)}; break;
        case 'u': if (bits <= 64) return DType{1, static_cast<uint8_t>(bits)}; break;
        case 'f': if (bits == 16 || bits == 32 || bits == 64) return DType{2, static_cast<uint8_t>(bits)}; break;
        case 'V':
            if (py::str(dt.attr("name")).cast<std::string>() == "bfloat16") return DType{4, 16};
            break;
        default: break;
    }
    throw Error(ErrorKind::Value, what + ": dtype " + py::str(dt).cast<std::string>() + " is not supported");
}

void set_python_error(const Error &e) {
    if (e.kind() == ErrorKind::Artifact || e.kind() == ErrorKind::Device) {
        py::object cls = py::module_::import("halojit.errors")
                             .attr(e.kind() == ErrorKind::Artifact ? "ArtifactError" : "DeviceError");
        PyErr_SetString(cls.ptr(), e.what());
        return;
    }
    PyObject *type = e.kind() == ErrorKind::Value  ? PyExc_ValueError
                     : e.kind() == ErrorKind::Type ? PyExc_TypeError
                                                   : PyExc_RuntimeError;
    PyErr_SetString(type, e.what());
}

}  // namespace halojit::python

namespace {

using python::numpy_dtype;

static_assert(sizeof(py::ssize_t) == sizeof(int64_t), "ArrayView borrows numpy's shape/strides arrays");

// The numpy side of the conversion: borrow the array's pointer, shape and
// byte strides (zero copy). `keep` holds the references for the call.
ArrayView view_of(py::handle obj, const std::string &what, std::vector<py::array> &keep) {
    if (py::isinstance<python::DeviceArray>(obj)) return obj.cast<const python::DeviceArray &>().view();
    if (!py::isinstance<py::array>(obj)) {
        throw Error(ErrorKind::Type, what + ": expected a numpy array, got " +
                                         py::str(py::type::of(obj).attr("__name__")).cast<std::string>());
    }
    keep.push_back(py::reinterpret_borrow<py::array>(obj));
    const py::array &arr = keep.back();
    ArrayView v;
    v.data = const_cast<void *>(arr.data());
    v.dtype = numpy_dtype(arr.dtype(), what);
    v.ndim = static_cast<int>(arr.ndim());
    v.shape = reinterpret_cast<const int64_t *>(arr.shape());
    v.strides = reinterpret_cast<const int64_t *>(arr.strides());
    v.writable = arr.writeable();
    return v;
}

std::string fspath(const py::object &path) {
    return py::str(py::module_::import("os").attr("fspath")(path)).cast<std::string>();
}

std::shared_ptr<Plan> make_plan(std::vector<std::shared_ptr<Kernel>> kernels, const py::sequence &steps,
                                const py::sequence &buffers, int n_inputs, int n_outputs) {
    std::vector<Step> cpp_steps;
    for (py::handle item : steps) {
        auto t = py::reinterpret_borrow<py::sequence>(item);
        if (py::len(t) != 2) throw Error(ErrorKind::Value, "Plan: each step is (kernel index, [buffer ids])");
        cpp_steps.push_back({t[0].cast<int>(), t[1].cast<std::vector<int>>()});
    }
    std::vector<BufferSpec> specs;
    py::object np_dtype = py::module_::import("numpy").attr("dtype");
    for (py::handle item : buffers) {
        BufferSpec spec;
        if (!item.is_none()) {
            auto t = py::reinterpret_borrow<py::sequence>(item);
            if (py::len(t) != 2) throw Error(ErrorKind::Value, "Plan: each buffer is (shape, dtype) or None");
            spec.known = true;
            spec.shape = t[0].cast<std::vector<int64_t>>();
            // A name is taken as is ("bfloat16" needs no ml_dtypes); anything
            // else goes through numpy.dtype (np.float32, np.dtype("f4"), ...).
            py::object dt = t[1];
            spec.dtype = dtype_from_name(py::isinstance<py::str>(dt) ? dt.cast<std::string>()
                                                                     : np_dtype(dt).attr("name").cast<std::string>());
        }
        specs.push_back(std::move(spec));
    }
    return std::make_shared<Plan>(std::move(kernels), std::move(cpp_steps), std::move(specs), n_inputs, n_outputs);
}

std::vector<ArrayView> views_of(const py::sequence &arrays, const char *what, std::vector<py::array> &keep) {
    std::vector<ArrayView> out;
    for (size_t i = 0; i < py::len(arrays); i++) {
        out.push_back(view_of(arrays[i], std::string(what) + " " + std::to_string(i), keep));
    }
    return out;
}

py::array to_numpy(const Tensor &t) {
    py::tuple shape(t.shape().size());
    for (size_t i = 0; i < t.shape().size(); i++) shape[i] = t.shape()[i];
    py::array out = py::module_::import("numpy").attr("empty")(shape, dtype_name(t.dtype()));
    std::memcpy(out.mutable_data(), t.data(), t.nbytes());
    return out;
}

// With `contiguous`, an input array whose last axis (extent > 1) is not unit
// strided, or with a stride that is not a whole number of items (a field of
// a packed structured array: rows 17 bytes apart), is first copied in C
// order, as np.ascontiguousarray would; the copy lives in `keep` for the
// call. Saves the Python side a strides check per input per call (~80 ns
// each, measured on the 2-core VM).
py::handle contiguous_input(py::handle obj, std::vector<py::array> &keep) {
    if (!py::isinstance<py::array>(obj)) return obj;  // view_of explains
    auto arr = py::reinterpret_borrow<py::array>(obj);
    if (halojit::python::dense_last_axis(arr.ptr(), static_cast<int>(arr.itemsize()))) return obj;
    py::array copy = py::array::ensure(obj, py::array::c_style);
    if (!copy) throw Error(ErrorKind::Runtime, "could not copy a strided input to C order");
    keep.push_back(std::move(copy));
    return keep.back();
}

void run_plan(Plan &plan, const py::sequence &inputs, const py::sequence &outputs, bool profile,
              bool contiguous) {
    std::vector<py::array> keep;
    keep.reserve(2 * py::len(inputs) + py::len(outputs));
    std::vector<ArrayView> in, out;
    for (size_t i = 0; i < py::len(inputs); i++) {
        py::object obj = inputs[i];
        in.push_back(view_of(contiguous ? contiguous_input(obj, keep) : obj, "plan input " + std::to_string(i), keep));
    }
    for (size_t i = 0; i < py::len(outputs); i++) {
        out.push_back(view_of(outputs[i], "plan output " + std::to_string(i), keep));
    }
    py::gil_scoped_release release;
    plan.run(in.data(), in.size(), out.data(), out.size(), profile);
}

}  // namespace

PYBIND11_MODULE(_rt, m) {
    m.doc() = "halojit C++ runtime: load AOT Halide kernels and run plans of them";

    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const Error &e) {
            python::set_python_error(e);
        }
    });
    python::register_dispatcher(m);

    m.def("version", [] { return std::string(kVersion); }, "halojit runtime version");
    m.def("halide_runtime_header", [] { return std::string(HALOJIT_HALIDE_RUNTIME_HEADER); },
          "path of the HalideRuntime.h this module was built against");
    m.def("load_runtime", [](const py::object &path) { load_runtime(fspath(path)); }, py::arg("path"),
          "dlopen the shared Halide runtime (RTLD_GLOBAL) once per path and capture its error messages");
    m.def("check_shared_object", [](const py::object &path) { check_shared_object(fspath(path)); }, py::arg("path"),
          "raise RuntimeError unless path is a complete ELF shared object for this machine");
    m.def("runtime_loaded", &runtime_loaded, "whether a Halide runtime has been loaded");
    m.def("set_num_threads", &set_num_threads, py::arg("n"),
          "halide_set_num_threads in the loaded runtime; returns the previous value (0 = default)");

    py::class_<Kernel, std::shared_ptr<Kernel>>(m, "Kernel")
        .def(py::init([](const py::object &so_path, const std::string &fn_name) {
                 return std::make_shared<Kernel>(fspath(so_path), fn_name);
             }),
             py::arg("so_path"), py::arg("fn_name"))
        .def_property_readonly("name", &Kernel::name)
        .def_property_readonly("path", &Kernel::path)
        .def_property_readonly("target", &Kernel::target)
        .def_property_readonly(
            "arguments",
            [](const Kernel &k) {
                py::list out;
                for (const ArgInfo &a : k.arguments()) {
                    out.append(py::make_tuple(a.name, static_cast<int>(a.kind), a.dimensions,
                                              static_cast<int>(a.dtype.code), static_cast<int>(a.dtype.bits)));
                }
                return out;
            },
            "[(name, kind, dimensions, type_code, type_bits)]; kind 0 scalar, 1 input, 2 output")
        .def("__repr__", [](const Kernel &k) { return "<halojit._rt.Kernel " + k.name() + " from " + k.path() + ">"; });

    py::class_<Plan, std::shared_ptr<Plan>>(m, "Plan")
        .def(py::init(&make_plan), py::arg("kernels"), py::arg("steps"), py::arg("buffers"), py::arg("n_inputs"),
             py::arg("n_outputs"))
        .def("run", &run_plan, py::arg("inputs"), py::arg("outputs"), py::arg("profile") = false,
             py::arg("contiguous") = false,
             "run every step once, GIL released; validates all buffers before any kernel runs; "
             "contiguous: copy inputs whose last axis is strided instead of refusing them")
        .def("last_timings", &Plan::last_timings, "seconds per step of the last profiled run")
        .def_property_readonly("n_inputs", &Plan::n_inputs)
        .def_property_readonly("n_outputs", &Plan::n_outputs)
        .def_property_readonly("n_steps", &Plan::n_steps)
        .def_property_readonly("n_buffers", &Plan::n_buffers)
        .def_property_readonly("workspace_bytes", &Plan::workspace_bytes)
        .def_property_readonly("uses_device", &Plan::uses_device, "whether a kernel runs on a CUDA device")
        .def_property_readonly("kernels", &Plan::kernels);

    py::class_<Artifact, std::shared_ptr<Artifact>>(m, "Artifact")
        .def(py::init([](const py::object &path, const std::string &level) {
                 std::string p = fspath(path);
                 py::gil_scoped_release release;
                 return std::make_shared<Artifact>(p, level);
             }),
             py::arg("path"), py::arg("level") = "",
             "read, verify and load an artifact (.hjm) for one CPU feature level")
        .def_property_readonly("path", &Artifact::path)
        .def_property_readonly("manifest", &Artifact::manifest_json, "the manifest (JSON text)")
        .def_property_readonly("level", &Artifact::level, "the feature level whose kernels are loaded")
        .def_property_readonly(
            "levels",
            [](const Artifact &a) {
                py::list out;
                for (const auto &lv : a.levels()) {
                    out.append(py::make_tuple(lv.name, lv.target, lv.requires_features, lv.supported));
                }
                return out;
            },
            "[(name, target, required CPU features, supported here)]")
        .def_property_readonly("num_test_vectors", &Artifact::num_test_vectors)
        .def(
            "find_specialization",
            [](const Artifact &a, const py::sequence &inputs) {
                std::vector<py::array> keep;
                auto in = views_of(inputs, "input", keep);
                return a.find_specialization(in.data(), in.size());
            },
            py::arg("inputs"), "index of the specialization matching these arrays, or -1")
        .def(
            "run",
            [](const Artifact &a, const py::sequence &inputs, const py::sequence &outputs) {
                std::vector<py::array> keep;
                auto in = views_of(inputs, "input", keep);
                auto out = views_of(outputs, "output", keep);
                py::gil_scoped_release release;
                a.run(in.data(), in.size(), out.data(), out.size());
            },
            py::arg("inputs"), py::arg("outputs"), "run into caller-owned outputs, GIL released")
        .def(
            "test_vector",
            [](const Artifact &a, size_t i) {
                TestVector tv = a.test_vector(i);
                py::list ins, expected;
                for (const auto &t : tv.inputs) ins.append(to_numpy(t));
                for (const auto &t : tv.expected) expected.append(to_numpy(t));
                return py::make_tuple(tv.specialization, ins, expected, tv.rtol, tv.atol);
            },
            py::arg("i"), "(specialization, inputs, expected outputs, rtol, atol) of test vector i");

    m.def(
        "allclose",
        [](const py::object &got, const py::object &want, double rtol, double atol) {
            std::vector<py::array> keep;
            ArrayView g = view_of(got, "got", keep), w = view_of(want, "want", keep);
            std::string why;
            const bool ok = allclose(g, w, rtol, atol, &why);
            return py::make_tuple(ok, why);
        },
        py::arg("got"), py::arg("want"), py::arg("rtol"), py::arg("atol"),
        "(close, why): the runtime's allclose, as the C API and test vectors use it");
    python::register_device_array(m);
    m.def("cpu_has_feature", &cpu_has_feature, py::arg("name"), "whether this CPU has an artifact feature name");
    m.attr("ARTIFACT_FORMAT") = kArtifactFormat;
}
