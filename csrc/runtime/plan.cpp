// Plan: a fixed sequence of kernel steps over caller buffers (inputs,
// outputs) and plan-owned intermediates, executed in one call.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "internal.h"

namespace halojit {

// One set of intermediate buffers. A call owns one exclusively, so
// concurrent calls never share intermediates.
struct Workspace {
    std::vector<Tensor> memory;
    std::vector<halide_buffer_t> bufs;
    std::vector<halide_dimension_t> dims;  // bufs[i].dim points in here; never resized

    // CUDA plans keep intermediates on the device between calls
    ~Workspace() {
        for (halide_buffer_t &b : bufs) device::free_device(&b);
    }
};

namespace {

constexpr size_t kAlign = 64;

std::string describe(DType t, int ndim) {
    return dtype_name(t) + " with " + std::to_string(ndim) + (ndim == 1 ? " dim" : " dims");
}

size_t spec_bytes(const BufferSpec &spec) {
    size_t n = spec.dtype.itemsize();
    for (int64_t e : spec.shape) n *= static_cast<size_t>(e);
    return n;
}

}  // namespace

Plan::Plan(std::vector<std::shared_ptr<Kernel>> kernels, std::vector<Step> steps,
           std::vector<BufferSpec> buffers, int n_inputs, int n_outputs)
    : kernels_(std::move(kernels)), steps_(std::move(steps)), buffers_(std::move(buffers)),
      n_inputs_(n_inputs), n_outputs_(n_outputs) {
    auto fail = [](const std::string &msg) { throw Error(ErrorKind::Value, "Plan: " + msg); };
    const int n_io = n_inputs + n_outputs;
    if (n_inputs < 0 || n_outputs < 0 || static_cast<size_t>(n_io) > buffers_.size()) {
        fail("n_inputs=" + std::to_string(n_inputs) + " and n_outputs=" + std::to_string(n_outputs) +
             " do not fit in " + std::to_string(buffers_.size()) + " buffers");
    }
    for (size_t k = 0; k < kernels_.size(); k++) {
        if (!kernels_[k]) fail("kernel " + std::to_string(k) + " is null");
        if (device_target_.empty() && kernels_[k]->target().find("cuda") != std::string::npos) {
            device_target_ = kernels_[k]->target();
        }
    }
    for (size_t b = n_io; b < buffers_.size(); b++) {
        const BufferSpec &spec = buffers_[b];
        if (!spec.known) fail("intermediate buffer " + std::to_string(b) + " needs a shape and dtype");
        for (int64_t e : spec.shape) {
            if (e < 0 || e > INT32_MAX) fail("intermediate buffer " + std::to_string(b) + " has a bad extent");
        }
    }
    for (size_t s = 0; s < steps_.size(); s++) {
        const Step &step = steps_[s];
        if (step.kernel < 0 || static_cast<size_t>(step.kernel) >= kernels_.size()) {
            fail("step " + std::to_string(s) + " names kernel " + std::to_string(step.kernel) + " of " +
                 std::to_string(kernels_.size()));
        }
        const Kernel &kernel = *kernels_[step.kernel];
        const auto &args = kernel.arguments();
        if (step.buffers.size() != args.size()) {
            fail("step " + std::to_string(s) + ": kernel '" + kernel.name() + "' takes " +
                 std::to_string(args.size()) + " buffers, the step binds " + std::to_string(step.buffers.size()));
        }
        max_args_ = std::max(max_args_, args.size());
        for (size_t i = 0; i < args.size(); i++) {
            const ArgInfo &arg = args[i];
            const int b = step.buffers[i];
            const std::string where = "step " + std::to_string(s) + " kernel " + std::to_string(step.kernel) +
                                      " argument '" + arg.name + "'";
            if (arg.kind == ArgKind::InputScalar) fail(where + " is a scalar; plans pass buffers only");
            if (b < 0 || static_cast<size_t>(b) >= buffers_.size()) {
                fail(where + " is bound to buffer " + std::to_string(b) + " of " + std::to_string(buffers_.size()));
            }
            if (arg.kind == ArgKind::OutputBuffer && b < n_inputs) {
                fail(where + " is an output bound to plan input " + std::to_string(b));
            }
            const BufferSpec &spec = buffers_[b];
            if (spec.known && (!dtype_compatible(arg.dtype, spec.dtype) ||
                               spec.shape.size() != static_cast<size_t>(arg.dimensions))) {
                fail(where + ": expected " + describe(arg.dtype, arg.dimensions) + ", buffer " + std::to_string(b) +
                     " is " + describe(spec.dtype, static_cast<int>(spec.shape.size())));
            }
        }
    }
}

Plan::~Plan() = default;

size_t Plan::workspace_bytes() const {
    size_t total = 0;
    for (size_t b = n_inputs_ + n_outputs_; b < buffers_.size(); b++) {
        total += (std::max<size_t>(spec_bytes(buffers_[b]), 1) + kAlign - 1) / kAlign * kAlign;
    }
    return total;
}

std::unique_ptr<Workspace> Plan::acquire_workspace() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!pool_.empty()) {
            auto ws = std::move(pool_.back());
            pool_.pop_back();
            return ws;
        }
    }
    const size_t first = n_inputs_ + n_outputs_;
    const size_t n = buffers_.size() - first;
    auto ws = std::make_unique<Workspace>();
    size_t total_dims = 0;
    for (size_t b = first; b < buffers_.size(); b++) total_dims += buffers_[b].shape.size();
    ws->dims.resize(total_dims);
    ws->bufs.resize(n);
    ws->memory.reserve(n);
    size_t dim_at = 0;
    for (size_t i = 0; i < n; i++) {
        const BufferSpec &spec = buffers_[first + i];
        ws->memory.emplace_back(spec.dtype, spec.shape);
        const int ndim = static_cast<int>(spec.shape.size());
        const ArrayView view = ws->memory.back().view();
        detail::to_halide_buffer(view, detail::BufferName{"intermediate buffer", first + i}, &ws->bufs[i],
                                 ws->dims.data() + dim_at);
        dim_at += ndim;
    }
    return ws;
}

void Plan::release_workspace(std::unique_ptr<Workspace> ws) {
    std::lock_guard<std::mutex> lock(mutex_);
    pool_.push_back(std::move(ws));
}

void Plan::run(const ArrayView *inputs, size_t n_inputs, const ArrayView *outputs, size_t n_outputs,
               bool profile) {
    if (n_inputs != static_cast<size_t>(n_inputs_) || n_outputs != static_cast<size_t>(n_outputs_)) {
        throw Error(ErrorKind::Value, "plan takes " + std::to_string(n_inputs_) + " inputs and " +
                                          std::to_string(n_outputs_) + " outputs, got " + std::to_string(n_inputs) +
                                          " and " + std::to_string(n_outputs));
    }
    const size_t n_io = n_inputs + n_outputs;
    auto view_of = [&](size_t b) -> const ArrayView & { return b < n_inputs ? inputs[b] : outputs[b - n_inputs]; };
    auto name_of = [&](size_t b) {
        return b < n_inputs ? detail::BufferName{"plan input", b} : detail::BufferName{"plan output", b - n_inputs};
    };

    // 1. Convert and check every caller buffer before any kernel runs.
    size_t total_dims = 0;
    for (size_t b = 0; b < n_io; b++) total_dims += std::max(view_of(b).ndim, 0);
    detail::SmallBuffer<halide_buffer_t, 16> bufs(n_io);
    detail::SmallBuffer<halide_dimension_t, 64> dims(total_dims);
    size_t dim_at = 0;
    for (size_t b = 0; b < n_io; b++) {
        const ArrayView &v = view_of(b);
        if (b >= n_inputs && !v.writable) throw Error(ErrorKind::Value, name_of(b).str() + " is read-only");
        const BufferSpec &spec = buffers_[b];
        if (spec.known) {
            bool same = dtype_compatible(spec.dtype, v.dtype) && spec.shape.size() == static_cast<size_t>(v.ndim);
            for (int a = 0; same && a < v.ndim; a++) same = spec.shape[a] == v.shape[a];
            if (!same) {
                throw Error(ErrorKind::Value, name_of(b).str() + ": expected shape " +
                                                  shape_text(spec.shape.data(), static_cast<int>(spec.shape.size())) +
                                                  " " + dtype_name(spec.dtype) + ", got shape " +
                                                  shape_text(v.shape, v.ndim) + " " + dtype_name(v.dtype));
            }
        }
        if (v.on_device && !uses_device()) {
            throw Error(ErrorKind::Value, name_of(b).str() + " is a CUDA device array, but this function was "
                                                             "compiled for the CPU; trace it with target='host-cuda'");
        }
        detail::to_halide_buffer(v, name_of(b), &bufs[b], dims.data() + dim_at);
        // a host input of a CUDA plan: the first kernel that reads it copies it over
        if (uses_device() && b < n_inputs && bufs[b].host) bufs[b].flags |= halide_buffer_flag_host_dirty;
        dim_at += v.ndim;
    }
    if (uses_device()) device::check_cuda_device(device_target_);
    // 2. Check every binding of a caller buffer against the kernel's metadata.
    for (const Step &step : steps_) {
        const auto &args = kernels_[step.kernel]->arguments();
        for (size_t i = 0; i < args.size(); i++) {
            const size_t b = step.buffers[i];
            if (b >= n_io) continue;  // intermediates were checked at construction
            const ArrayView &v = view_of(b);
            if (!dtype_compatible(args[i].dtype, v.dtype) || v.ndim != args[i].dimensions) {
                throw Error(ErrorKind::Value, "kernel " + std::to_string(step.kernel) + " argument '" + args[i].name +
                                                  "': expected " + describe(args[i].dtype, args[i].dimensions) +
                                                  ", got " + describe(v.dtype, v.ndim) + " (" + name_of(b).str() +
                                                  ")");
            }
        }
    }

    // 3. Run the steps on a workspace of our own (a plan without
    // intermediates needs none, and skips the pool's lock).
    struct Lease {
        Plan *plan;
        std::unique_ptr<Workspace> ws;
        ~Lease() {
            if (ws) plan->release_workspace(std::move(ws));
        }
    } lease{this, buffers_.size() > n_io ? acquire_workspace() : nullptr};
    // Device copies of host arrays live for this call only (Halide caches the
    // allocations for reuse); device arrays given by the caller are theirs.
    struct DeviceCopies {
        halide_buffer_t *bufs;
        size_t n;
        ~DeviceCopies() {
            for (size_t b = 0; bufs && b < n; b++) {
                if (bufs[b].host) device::free_device(&bufs[b]);
            }
        }
    } device_copies{uses_device() ? bufs.data() : nullptr, n_io};
    detail::SmallBuffer<void *, 16> argv(max_args_);
    std::vector<double> timings(profile ? steps_.size() : 0);
    for (size_t s = 0; s < steps_.size(); s++) {
        const Step &step = steps_[s];
        const Kernel &kernel = *kernels_[step.kernel];
        const auto &args = kernel.arguments();
        for (size_t i = 0; i < args.size(); i++) {
            const size_t b = step.buffers[i];
            halide_buffer_t *buf = b < n_io ? &bufs[b] : &lease.ws->bufs[b - n_io];
            buf->type = detail::to_halide_type(args[i].dtype);  // bool arrays may feed uint1 or uint8
            argv[i] = buf;
        }
        detail::clear_kernel_error();
        std::chrono::steady_clock::time_point t0;
        if (profile) t0 = std::chrono::steady_clock::now();
        const int rc = kernel.call(argv.data());
        if (profile && rc == 0 && uses_device()) {  // GPU launches are asynchronous
            device::sync_device(static_cast<halide_buffer_t *>(argv[args.size() - 1]));
        }
        if (profile) timings[s] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (rc != 0) {
            std::string msg = detail::take_kernel_error();
            if (msg.empty()) msg = "(Halide gave no message)";
            throw Error(ErrorKind::Runtime, "kernel '" + kernel.name() + "' (step " + std::to_string(s) +
                                                ") failed with Halide error " + std::to_string(rc) + ": " + msg);
        }
    }
    if (uses_device()) {
        for (size_t b = n_inputs; b < n_io; b++) {
            if (bufs[b].host) {
                device::copy_to_host(&bufs[b]);
            } else {
                device::sync_device(&bufs[b]);  // a device output is complete when run() returns
            }
        }
    }
    if (profile) {
        std::lock_guard<std::mutex> lock(mutex_);
        timings_ = std::move(timings);
    }
}

std::vector<double> Plan::last_timings() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return timings_;
}

}  // namespace halojit
