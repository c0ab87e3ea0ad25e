// _rt.Dispatcher: the C call slot of a traced function (see dispatch.h).
#include "dispatch.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "internal.h"

namespace py = pybind11;

namespace halojit::python {

// See dispatch.h: a transposed view or a packed structured field is copied
// by the general path.
bool dense_last_axis(const PyObject *a, int itemsize) {
    const auto *p = py::detail::array_proxy(a);
    for (int d = 0; d < p->nd - 1; d++) {
        const int64_t items = p->strides[d] / itemsize;
        if (p->dimensions[d] > 1 &&
            (p->strides[d] % itemsize != 0 || items < INT32_MIN || items > INT32_MAX)) {
            return false;
        }
    }
    return p->nd == 0 || p->dimensions[p->nd - 1] <= 1 || p->strides[p->nd - 1] == itemsize;
}

DType numpy_dtype(const py::dtype &dt, const std::string &what);  // module.cpp

namespace {

// Traces being recorded, in any thread: a traced function called inside
// another one's trace is inlined by the general path (it must see tracers).
std::atomic<int> g_tracing{0};

// Plans whose arrays (caller buffers, and the largest value the graph
// computes, which the Python side passes as `work_bytes`) hold fewer bytes
// than this run with the GIL held: releasing and taking it back costs
// ~0.1 us, and work this small ends within a few microseconds.
constexpr int64_t kReleaseGilBytes = 256 << 10;

// An output the C path allocates. One the function returns as a view of its
// kernel's output (a reshape or transpose at the end, passes/views.py) has
// the view's byte `strides` and the kernel output's C-contiguous
// `base_shape` and `base_strides`, which the plan sees; else all three are
// empty.
struct OutSpec {
    std::vector<py::ssize_t> shape;
    py::dtype dtype;
    DType dt;
    std::vector<py::ssize_t> strides;
    std::vector<int64_t> base_shape, base_strides;
};

// One specialization the C path can run: its key (the arguments' ndim,
// shape and dtype) and what to run (a plan, or a Python callable taking the
// argument tuple).
struct Entry {
    size_t n_args = 0;
    std::vector<int> ndims, type_nums;
    std::vector<PyObject *> descrs;  // borrowed from `keep_descrs`
    std::vector<py::ssize_t> dims;      // every argument's shape, concatenated
    std::vector<DType> dtypes;
    std::vector<py::dtype> keep_descrs;

    std::shared_ptr<Plan> plan;  // null: `call` runs it
    py::object call;
    std::vector<py::array> consts;
    std::vector<ArrayView> const_views;
    std::vector<OutSpec> outs;
    bool leaf = true;
    py::object unflatten;
    bool release_gil = true;

    bool matches(PyObject *args, PyTypeObject *ndarray) const {
        if (static_cast<size_t>(PyTuple_GET_SIZE(args)) != n_args) return false;
        const py::ssize_t *d = dims.data();
        for (size_t i = 0; i < n_args; i++) {
            PyObject *a = PyTuple_GET_ITEM(args, i);
            if (Py_TYPE(a) != ndarray) return false;
            const auto *p = py::detail::array_proxy(a);
            if (p->nd != ndims[i]) return false;
            if (p->descr != descrs[i]) {  // builtin dtypes are singletons; else compare type and order
                const auto *dp = py::detail::array_descriptor_proxy(p->descr);
                if (dp->type_num != type_nums[i] || dp->byteorder == '>') return false;
            }
            for (int k = 0; k < p->nd; k++, d++) {
                if (p->dimensions[k] != *d) return false;
            }
        }
        return true;
    }
};

struct DispatcherObject {
    PyObject_HEAD
    std::vector<std::shared_ptr<Entry>> *entries;
    unsigned long long hits;
};

PyTypeObject DispatcherType = {PyVarObject_HEAD_INIT(nullptr, 0)};
PyObject *g_call_name = nullptr;  // "_call"
PyObject *g_out_name = nullptr;   // "out"
PyObject *g_empty_tuple = nullptr;

PyObject *slow_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    PyObject *method = PyObject_GetAttr(self, g_call_name);
    if (!method) return nullptr;
    PyObject *r = PyObject_Call(method, args, kwargs);
    Py_DECREF(method);
    return r;
}

ArrayView view_of_array(PyObject *a, DType dtype) {
    const auto *p = py::detail::array_proxy(a);
    ArrayView v;
    v.data = p->data;
    v.dtype = dtype;
    v.ndim = p->nd;
    v.shape = reinterpret_cast<const int64_t *>(p->dimensions);
    v.strides = reinterpret_cast<const int64_t *>(p->strides);
    v.writable = (p->flags & py::detail::npy_api::NPY_ARRAY_WRITEABLE_) != 0;
    return v;
}

// Whether the C path can write an entry's single output into `out` (the
// caller's out= array): an exact ndarray of the output's shape and dtype,
// writable, unit stride along a last axis longer than 1, sharing no memory
// with an input. Anything else goes to the general path, which explains or
// computes into a temporary first.
bool out_fits(const Entry &e, PyObject *out, PyObject *args, PyTypeObject *ndarray) {
    if (!e.plan || e.outs.size() != 1 || Py_TYPE(out) != ndarray) return false;
    const OutSpec &o = e.outs[0];
    if (!o.strides.empty()) return false;  // a view: the general path writes through its inverse
    const auto *p = py::detail::array_proxy(out);
    if (p->nd != static_cast<int>(o.shape.size())) return false;
    for (int k = 0; k < p->nd; k++) {
        if (p->dimensions[k] != o.shape[k]) return false;
    }
    if (p->descr != o.dtype.ptr()) {
        const auto *dp = py::detail::array_descriptor_proxy(p->descr);
        if (dp->type_num != o.dtype.num() || dp->byteorder == '>') return false;
    }
    if (!(p->flags & py::detail::npy_api::NPY_ARRAY_WRITEABLE_)) return false;
    if (!dense_last_axis(out, o.dt.itemsize())) return false;
    const ArrayView ov = view_of_array(out, o.dt);
    for (size_t i = 0; i < e.n_args; i++) {
        if (may_overlap(ov, view_of_array(PyTuple_GET_ITEM(args, i), e.dtypes[i]))) return false;
    }
    return true;
}

PyObject *run_entry(const std::shared_ptr<Entry> &e, PyObject *args, PyObject *given = nullptr) {
    if (!e->plan) return PyObject_CallOneArg(e->call.ptr(), args);
    const size_t n_in = e->n_args + e->consts.size();
    const size_t n_out = e->outs.size();
    detail::SmallBuffer<ArrayView, 16> ins(n_in);
    for (size_t i = 0; i < e->n_args; i++) ins[i] = view_of_array(PyTuple_GET_ITEM(args, i), e->dtypes[i]);
    for (size_t i = 0; i < e->consts.size(); i++) ins[e->n_args + i] = e->const_views[i];

    auto &api = py::detail::npy_api::get();
    detail::SmallBuffer<PyObject *, 8> outs(n_out);
    detail::SmallBuffer<ArrayView, 8> out_views(n_out);
    for (size_t k = 0; k < n_out; k++) {
        const OutSpec &o = e->outs[k];
        if (given) {  // out_fits checked it: the kernel writes the caller's array
            Py_INCREF(given);
            outs[k] = given;
            out_views[k] = view_of_array(given, o.dt);
            continue;
        }
        PyObject *descr = o.dtype.ptr();
        Py_INCREF(descr);  // stolen
        // with strides and no data numpy allocates the elements and lays them out so
        PyObject *arr = api.PyArray_NewFromDescr_(
            api.PyArray_Type_, descr, static_cast<int>(o.shape.size()), const_cast<py::ssize_t *>(o.shape.data()),
            o.strides.empty() ? nullptr : const_cast<py::ssize_t *>(o.strides.data()), nullptr, 0, nullptr);
        if (!arr) {
            for (size_t j = 0; j < k; j++) Py_DECREF(outs[j]);
            return nullptr;
        }
        outs[k] = arr;
        out_views[k] = view_of_array(arr, o.dt);
        if (!o.strides.empty()) {  // the kernel writes the same memory as its own C-contiguous output
            out_views[k].ndim = static_cast<int>(o.base_shape.size());
            out_views[k].shape = o.base_shape.data();
            out_views[k].strides = o.base_strides.data();
        }
    }
    auto drop_outs = [&] {
        for (size_t k = 0; k < n_out; k++) Py_DECREF(outs[k]);
    };
    try {
        if (e->release_gil) {
            py::gil_scoped_release release;
            e->plan->run(ins.data(), n_in, out_views.data(), n_out, false);
        } else {
            e->plan->run(ins.data(), n_in, out_views.data(), n_out, false);
        }
    } catch (const Error &err) {
        drop_outs();
        set_python_error(err);
        return nullptr;
    } catch (const std::exception &err) {
        drop_outs();
        PyErr_SetString(PyExc_RuntimeError, err.what());
        return nullptr;
    }
    // 0-d outputs come back as numpy scalars, as numpy's reductions return
    // them; an out= array comes back itself
    for (size_t k = 0; k < n_out && !given; k++) {
        if (e->outs[k].shape.empty()) {
            PyObject *s = PyObject_GetItem(outs[k], g_empty_tuple);
            Py_DECREF(outs[k]);
            outs[k] = s;
            if (!s) {
                for (size_t j = 0; j < n_out; j++) {
                    if (j != k) Py_XDECREF(outs[j]);
                }
                return nullptr;
            }
        }
    }
    if (e->leaf && n_out == 1) return outs[0];
    PyObject *list = PyList_New(static_cast<Py_ssize_t>(n_out));
    if (!list) {
        drop_outs();
        return nullptr;
    }
    for (size_t k = 0; k < n_out; k++) PyList_SET_ITEM(list, k, outs[k]);  // steals
    if (e->leaf) return list;
    PyObject *r = PyObject_CallOneArg(e->unflatten.ptr(), list);
    Py_DECREF(list);
    return r;
}

PyObject *dispatcher_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    auto *d = reinterpret_cast<DispatcherObject *>(self);
    if (g_tracing.load(std::memory_order_relaxed) > 0) return slow_call(self, args, kwargs);
    PyObject *given = nullptr;  // out=, the only keyword the C path takes
    if (kwargs && PyDict_GET_SIZE(kwargs)) {
        if (PyDict_GET_SIZE(kwargs) != 1 || !(given = PyDict_GetItemWithError(kwargs, g_out_name))) {
            return PyErr_Occurred() ? nullptr : slow_call(self, args, kwargs);
        }
        if (given == Py_None) given = nullptr;
    }
    PyTypeObject *ndarray = py::detail::npy_api::get().PyArray_Type_;
    for (const auto &e : *d->entries) {
        if (!e->matches(args, ndarray)) continue;
        for (size_t i = 0; i < e->n_args; i++) {
            if (!dense_last_axis(PyTuple_GET_ITEM(args, i), e->dtypes[i].itemsize())) {
                return slow_call(self, args, kwargs);
            }
        }
        if (given && !out_fits(*e, given, args, ndarray)) return slow_call(self, args, kwargs);
        d->hits++;
        std::shared_ptr<Entry> keep = e;  // a concurrent clear() must not free it mid-run
        return run_entry(keep, args, given);
    }
    return slow_call(self, args, kwargs);
}

PyObject *dispatcher_new(PyTypeObject *type, PyObject *, PyObject *) {
    PyObject *self = type->tp_alloc(type, 0);
    if (!self) return nullptr;
    auto *d = reinterpret_cast<DispatcherObject *>(self);
    d->entries = new std::vector<std::shared_ptr<Entry>>();
    d->hits = 0;
    return self;
}

int dispatcher_traverse(PyObject *self, visitproc visit, void *arg) {
    auto *d = reinterpret_cast<DispatcherObject *>(self);
    if (d->entries) {
        for (const auto &e : *d->entries) {
            Py_VISIT(e->call.ptr());
            Py_VISIT(e->unflatten.ptr());
        }
    }
    return 0;
}

int dispatcher_clear(PyObject *self) {
    auto *d = reinterpret_cast<DispatcherObject *>(self);
    if (d->entries) {
        std::vector<std::shared_ptr<Entry>> gone;
        gone.swap(*d->entries);  // entries' Python references drop here, the vector stays valid
    }
    return 0;
}

void dispatcher_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    dispatcher_clear(self);
    auto *d = reinterpret_cast<DispatcherObject *>(self);
    delete d->entries;
    d->entries = nullptr;
    Py_TYPE(self)->tp_free(self);
}

DispatcherObject *as_dispatcher(const py::handle &obj) {
    if (!PyObject_TypeCheck(obj.ptr(), &DispatcherType)) {
        throw py::type_error("expected a halojit._rt.Dispatcher");
    }
    return reinterpret_cast<DispatcherObject *>(obj.ptr());
}

// The Python side's registration, once per (function, argument shapes and
// dtypes) after a general-path call succeeded with them.
void dispatch_add(const py::handle &self, const py::tuple &example, const py::object &plan, const py::tuple &consts,
                  const py::list &out_specs, bool leaf, const py::object &unflatten, const py::object &call,
                  int64_t work_bytes) {
    DispatcherObject *d = as_dispatcher(self);
    auto e = std::make_shared<Entry>();
    e->n_args = example.size();
    for (const py::handle &h : example) {
        if (Py_TYPE(h.ptr()) != py::detail::npy_api::get().PyArray_Type_) {
            throw py::type_error("dispatch_add: the example arguments must be plain ndarrays");
        }
        auto a = py::reinterpret_borrow<py::array>(h);
        py::dtype dt = a.dtype();
        e->ndims.push_back(static_cast<int>(a.ndim()));
        e->type_nums.push_back(dt.num());
        e->descrs.push_back(dt.ptr());
        e->dtypes.push_back(numpy_dtype(dt, "argument"));
        e->keep_descrs.push_back(dt);
        for (py::ssize_t k = 0; k < a.ndim(); k++) e->dims.push_back(a.shape(k));
    }
    if (plan.is_none()) {
        if (call.is_none()) throw py::value_error("dispatch_add: needs a plan or a call");
        e->call = call;
    } else {
        e->plan = plan.cast<std::shared_ptr<Plan>>();
        if (e->plan->uses_device()) throw py::value_error("dispatch_add: CUDA plans take the general path");
        int64_t bytes = 0;
        for (const py::handle &h : example) bytes += py::reinterpret_borrow<py::array>(h).nbytes();
        for (const py::handle &h : consts) {
            auto a = py::array::ensure(h, py::array::c_style);
            if (!a) throw py::type_error("dispatch_add: constants must be numpy arrays");
            ArrayView v;
            v.data = const_cast<void *>(a.data());
            v.dtype = numpy_dtype(a.dtype(), "constant");
            v.ndim = static_cast<int>(a.ndim());
            v.shape = reinterpret_cast<const int64_t *>(a.shape());
            v.strides = reinterpret_cast<const int64_t *>(a.strides());
            v.writable = false;
            e->consts.push_back(a);
            e->const_views.push_back(v);
            bytes += a.nbytes();
        }
        for (const py::handle &h : out_specs) {
            auto t = py::reinterpret_borrow<py::tuple>(h);
            OutSpec o;
            o.shape = t[0].cast<std::vector<py::ssize_t>>();
            o.dtype = py::dtype::from_args(t[1]);
            o.dt = numpy_dtype(o.dtype, "output");  // refuses what a kernel cannot write
            int64_t n = o.dtype.itemsize();
            for (py::ssize_t x : o.shape) n *= x;
            if (t.size() == 4) {  // (shape, dtype, kernel output shape, byte strides): a view
                o.base_shape = t[2].cast<std::vector<int64_t>>();
                o.strides = t[3].cast<std::vector<py::ssize_t>>();
                int64_t m = o.dtype.itemsize();
                for (int64_t x : o.base_shape) m *= x;
                if (m != n || o.strides.size() != o.shape.size() || o.shape.empty() || o.base_shape.empty()) {
                    throw py::value_error("dispatch_add: a view output needs as many elements as its kernel "
                                          "output and one stride per axis");
                }
                o.base_strides = contiguous_strides(o.base_shape.data(), static_cast<int>(o.base_shape.size()),
                                                    static_cast<int>(o.dtype.itemsize()));
            } else if (t.size() != 2) {
                throw py::value_error("dispatch_add: an output spec is (shape, dtype) or (shape, dtype, "
                                      "kernel shape, strides)");
            }
            bytes += n;
            e->outs.push_back(std::move(o));
        }
        if (e->outs.empty()) throw py::value_error("dispatch_add: a plan entry needs outputs");
        e->leaf = leaf;
        e->unflatten = unflatten;
        if (!leaf && unflatten.is_none()) throw py::value_error("dispatch_add: a tree result needs unflatten");
        e->release_gil = std::max(bytes, work_bytes) >= kReleaseGilBytes;
    }
    d->entries->push_back(std::move(e));
}

}  // namespace

void register_dispatcher(py::module_ &m) {
    g_call_name = PyUnicode_InternFromString("_call");
    g_out_name = PyUnicode_InternFromString("out");
    g_empty_tuple = PyTuple_New(0);
    DispatcherType.tp_name = "halojit._rt.Dispatcher";
    DispatcherType.tp_basicsize = sizeof(DispatcherObject);
    DispatcherType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC;
    DispatcherType.tp_doc =
        "Base of a traced function: calls with plain ndarrays of a registered shape and dtype run "
        "their plan in C; every other call goes to self._call(*args, **kwargs).";
    DispatcherType.tp_new = dispatcher_new;
    DispatcherType.tp_dealloc = dispatcher_dealloc;
    DispatcherType.tp_traverse = dispatcher_traverse;
    DispatcherType.tp_clear = dispatcher_clear;
    DispatcherType.tp_call = dispatcher_call;
    if (PyType_Ready(&DispatcherType) < 0) throw py::error_already_set();
    Py_INCREF(&DispatcherType);
    m.attr("Dispatcher") = py::handle(reinterpret_cast<PyObject *>(&DispatcherType));

    m.def("dispatch_add", &dispatch_add, py::arg("dispatcher"), py::arg("example"), py::arg("plan"),
          py::arg("consts"), py::arg("out_specs"), py::arg("leaf"), py::arg("unflatten"), py::arg("call"),
          py::arg("work_bytes") = 0,
          "register a specialization with the C call path: example = the arguments of a call that "
          "succeeded; either plan (with consts, out_specs [(shape, dtype) or (shape, dtype, kernel shape, byte "
          "strides) for a view], leaf, unflatten) or call(args)");
    m.def(
        "dispatch_clear",
        [](const py::handle &self) {
            as_dispatcher(self);
            dispatcher_clear(self.ptr());
        },
        py::arg("dispatcher"), "forget every registered specialization");
    m.def(
        "dispatch_info", [](const py::handle &self) {
            DispatcherObject *d = as_dispatcher(self);
            py::list releases;
            for (const auto &e : *d->entries) releases.append(e->plan ? py::object(py::bool_(e->release_gil)) : py::object(py::none()));
            return py::make_tuple(d->entries->size(), d->hits, releases);
        },
        py::arg("dispatcher"),
        "(entries, calls served by the C path, per entry: whether its plan runs with the GIL released "
        "(None: a Python call))");
    m.def(
        "tracing", [](int delta) { return g_tracing.fetch_add(delta) + delta; }, py::arg("delta"),
        "add delta (+1 entering a trace, -1 leaving it) to the count of traces being recorded; "
        "while it is above zero every call takes the general path");
}

}  // namespace halojit::python
