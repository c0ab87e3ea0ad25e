// CUDA support of the runtime: the device half of the Halide runtime
// (found when a host-cuda runtime is loaded), the NVIDIA driver probe that
// gives a clear error before any kernel runs, and the context policy.
//
// Kernels run in each device's *primary* context, the one the CUDA runtime
// API shares with CuPy, PyTorch and JAX, so device pointers handed over by
// DLPack are valid in our kernels and ours in theirs. Halide's default
// would create a private context (cuCtxCreate). Kernels use the legacy
// default stream, so their work is ordered with every blocking stream.
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "internal.h"

namespace halojit::device {
namespace {

using CUresult = int;
using CUdevice = int;
using CUcontext = void *;
constexpr int kAttrCapabilityMajor = 75;
constexpr int kAttrCapabilityMinor = 76;

struct Driver {
    bool probed = false;
    std::string problem;  // why no kernel can run; empty when one can
    std::vector<int> capabilities;  // per device, major * 10 + minor
    std::vector<std::string> names;
    CUresult (*cuDeviceGet)(CUdevice *, int) = nullptr;
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice) = nullptr;
};

struct HalideDeviceApi {
    const halide_device_interface_t *(*cuda_interface)() = nullptr;
    int (*copy_to_host)(void *, halide_buffer_t *) = nullptr;
    int (*copy_to_device)(void *, halide_buffer_t *, const halide_device_interface_t *) = nullptr;
    int (*device_free)(void *, halide_buffer_t *) = nullptr;
    int (*device_malloc)(void *, halide_buffer_t *, const halide_device_interface_t *) = nullptr;
    int (*device_sync)(void *, halide_buffer_t *) = nullptr;
    int (*get_gpu_device)(void *) = nullptr;
};

std::mutex g_mutex;
Driver g_driver;
HalideDeviceApi g_api;
std::vector<CUcontext> g_primary;  // per device, retained once, never released

template <typename F>
void sym(void *lib, const char *name, F *out) {
    *out = reinterpret_cast<F>(dlsym(lib, name));
}

void probe_locked() {
    if (g_driver.probed) return;
    g_driver.probed = true;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
        const char *err = dlerror();
        g_driver.problem = std::string("no NVIDIA driver: libcuda.so.1 could not be loaded (") + (err ? err : "?") +
                           "); install the NVIDIA driver or use a machine with a GPU";
        return;
    }
    CUresult (*cuInit)(unsigned) = nullptr;
    CUresult (*cuDeviceGetCount)(int *) = nullptr;
    CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice) = nullptr;
    CUresult (*cuDeviceGetName)(char *, int, CUdevice) = nullptr;
    sym(lib, "cuInit", &cuInit);
    sym(lib, "cuDeviceGetCount", &cuDeviceGetCount);
    sym(lib, "cuDeviceGetAttribute", &cuDeviceGetAttribute);
    sym(lib, "cuDeviceGetName", &cuDeviceGetName);
    sym(lib, "cuDeviceGet", &g_driver.cuDeviceGet);
    sym(lib, "cuDevicePrimaryCtxRetain", &g_driver.cuDevicePrimaryCtxRetain);
    if (!cuInit || !cuDeviceGetCount || !cuDeviceGetAttribute || !cuDeviceGetName || !g_driver.cuDeviceGet ||
        !g_driver.cuDevicePrimaryCtxRetain) {
        g_driver.problem = "libcuda.so.1 lacks the driver API halojit needs (cuInit, cuDevicePrimaryCtxRetain, ...)";
        return;
    }
    if (CUresult rc = cuInit(0); rc != 0) {
        g_driver.problem = "the NVIDIA driver failed to initialise (cuInit returned CUDA error " + std::to_string(rc) +
                           ")";
        return;
    }
    int count = 0;
    if (cuDeviceGetCount(&count) != 0 || count <= 0) {
        g_driver.problem = "the NVIDIA driver reports no CUDA device (check CUDA_VISIBLE_DEVICES)";
        return;
    }
    for (int i = 0; i < count; i++) {
        CUdevice dev = 0;
        int major = 0, minor = 0;
        char name[256] = {0};
        g_driver.cuDeviceGet(&dev, i);
        cuDeviceGetAttribute(&major, kAttrCapabilityMajor, dev);
        cuDeviceGetAttribute(&minor, kAttrCapabilityMinor, dev);
        cuDeviceGetName(name, sizeof(name) - 1, dev);
        g_driver.capabilities.push_back(major * 10 + minor);
        g_driver.names.push_back(name);
    }
}

int current_device_index(void *user_context) {
    int d = g_api.get_gpu_device ? g_api.get_gpu_device(user_context) : -1;
    return d < 0 ? 0 : d;
}

// halide_cuda_acquire_context replacement: the device's primary context.
int acquire_primary_context(void *user_context, void **ctx, bool create) {
    const int d = current_device_index(user_context);
    std::lock_guard<std::mutex> lock(g_mutex);
    if (static_cast<size_t>(d) < g_primary.size() && g_primary[d]) {
        *ctx = g_primary[d];
        return 0;
    }
    *ctx = nullptr;
    if (!create) return 0;
    probe_locked();
    if (!g_driver.problem.empty() || static_cast<size_t>(d) >= g_driver.capabilities.size()) return -1;
    CUdevice dev = 0;
    CUcontext primary = nullptr;
    if (g_driver.cuDeviceGet(&dev, d) != 0 || g_driver.cuDevicePrimaryCtxRetain(&primary, dev) != 0) return -1;
    if (g_primary.size() <= static_cast<size_t>(d)) g_primary.resize(d + 1, nullptr);
    g_primary[d] = primary;
    *ctx = primary;
    return 0;
}

int release_context(void *) { return 0; }

int capability_of(const std::string &target) {
    const std::string key = "cuda_capability_";
    const size_t at = target.find(key);
    return at == std::string::npos ? 0 : std::atoi(target.c_str() + at + key.size());
}

}  // namespace

void on_runtime_loaded(void *handle) {
    auto cuda_interface = reinterpret_cast<const halide_device_interface_t *(*)()>(
        dlsym(handle, "halide_cuda_device_interface"));
    if (!cuda_interface) return;  // a CPU-only runtime
    using acquire_t = int (*)(void *, void **, bool);
    using release_t = int (*)(void *);
    auto set_acquire = reinterpret_cast<acquire_t (*)(acquire_t)>(dlsym(handle, "halide_set_cuda_acquire_context"));
    auto set_release = reinterpret_cast<release_t (*)(release_t)>(dlsym(handle, "halide_set_cuda_release_context"));
    auto reuse = reinterpret_cast<int (*)(void *, bool)>(dlsym(handle, "halide_reuse_device_allocations"));
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_api.cuda_interface) return;
    HalideDeviceApi api;
    api.cuda_interface = cuda_interface;
    sym(handle, "halide_copy_to_host", &api.copy_to_host);
    sym(handle, "halide_copy_to_device", &api.copy_to_device);
    sym(handle, "halide_device_free", &api.device_free);
    sym(handle, "halide_device_malloc", &api.device_malloc);
    sym(handle, "halide_device_sync", &api.device_sync);
    sym(handle, "halide_get_gpu_device", &api.get_gpu_device);
    if (!api.copy_to_host || !api.copy_to_device || !api.device_free || !api.device_malloc || !api.device_sync || !set_acquire ||
        !set_release) {
        throw Error(ErrorKind::Runtime, "the CUDA Halide runtime lacks halide_copy_to_host, halide_device_free, "
                                        "halide_set_cuda_acquire_context or a sibling; rebuild the kernel cache");
    }
    set_acquire(&acquire_primary_context);
    set_release(&release_context);
    // device allocations go back to a per-size cache instead of cuMemFree:
    // inputs copied in per call then cost no cudaMalloc
    if (reuse) reuse(nullptr, true);
    g_api = api;
}

bool cuda_runtime_loaded() {
    std::lock_guard<std::mutex> lock(g_mutex);
    return g_api.cuda_interface != nullptr;
}

const halide_device_interface_t *cuda_interface() {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!g_api.cuda_interface) {
        throw Error(ErrorKind::Device, "no CUDA Halide runtime is loaded: compile a function for target='host-cuda' "
                                       "first, or load a CUDA artifact");
    }
    return g_api.cuda_interface();
}

void check_cuda_device(const std::string &kernel_target) {
    std::lock_guard<std::mutex> lock(g_mutex);
    probe_locked();
    if (!g_driver.problem.empty()) {
        throw Error(ErrorKind::Device, "cannot run a CUDA kernel: " + g_driver.problem +
                                           ". Trace with target='host' to run on the CPU.");
    }
    const int d = current_device();
    if (static_cast<size_t>(d) >= g_driver.capabilities.size()) {
        const char *env = std::getenv("HL_GPU_DEVICE");
        throw Error(ErrorKind::Device, "HL_GPU_DEVICE=" + std::string(env ? env : "") + " names CUDA device " +
                                           std::to_string(d) + ", but this machine has " +
                                           std::to_string(g_driver.capabilities.size()));
    }
    const int need = capability_of(kernel_target), have = g_driver.capabilities[d];
    if (need > have) {
        throw Error(ErrorKind::Device,
                    "the kernels were compiled for CUDA capability " + std::to_string(need / 10) + "." +
                        std::to_string(need % 10) + ", but device " + std::to_string(d) + " (" + g_driver.names[d] +
                        ") has " + std::to_string(have / 10) + "." + std::to_string(have % 10) +
                        "; recompile for it (HALOJIT_CUDA_CAPABILITY or a cuda_capability_NN target)");
    }
}

std::string device_description() {
    std::lock_guard<std::mutex> lock(g_mutex);
    probe_locked();
    if (!g_driver.problem.empty()) return "";
    std::string out;
    for (size_t i = 0; i < g_driver.names.size(); i++) {
        if (!out.empty()) out += "; ";
        out += std::to_string(i) + ": " + g_driver.names[i] + " (capability " +
               std::to_string(g_driver.capabilities[i] / 10) + "." + std::to_string(g_driver.capabilities[i] % 10) + ")";
    }
    return out;
}

namespace {
void check(int rc, const char *what) {
    if (rc != 0) {
        std::string msg = detail::take_kernel_error();
        throw Error(ErrorKind::Runtime, std::string(what) + " failed with Halide error " + std::to_string(rc) +
                                            (msg.empty() ? "" : ": " + msg));
    }
}
}  // namespace

void copy_to_host(halide_buffer_t *buf) {
    if (!buf->device || !(buf->flags & halide_buffer_flag_device_dirty)) return;
    detail::clear_kernel_error();
    check(g_api.copy_to_host(nullptr, buf), "copying a result from the GPU");
}

void copy_to_device(halide_buffer_t *buf) {
    const halide_device_interface_t *iface = cuda_interface();
    detail::clear_kernel_error();
    check(g_api.copy_to_device(nullptr, buf, iface), "copying an array to the GPU");
}

int current_device() {
    const char *env = std::getenv("HL_GPU_DEVICE");
    const int d = env && *env ? std::atoi(env) : 0;
    return d < 0 ? 0 : d;
}

void free_device(halide_buffer_t *buf) noexcept {
    if (buf->device && g_api.device_free) g_api.device_free(nullptr, buf);
}

void malloc_device(halide_buffer_t *buf) {
    const halide_device_interface_t *iface = cuda_interface();
    detail::clear_kernel_error();
    check(g_api.device_malloc(nullptr, buf, iface), "allocating GPU memory");
}

void sync_device(halide_buffer_t *buf) {
    if (!g_api.device_sync) return;
    detail::clear_kernel_error();
    check(g_api.device_sync(nullptr, buf), "waiting for the GPU");
}

}  // namespace halojit::device
