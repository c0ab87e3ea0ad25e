// The shared Halide runtime: loading it, capturing its error messages, and
// its thread pool size. Kernels are built with `no_runtime` and resolve every
// halide_* symbol against the first runtime loaded RTLD_GLOBAL.
#include <dlfcn.h>
#include <sys/stat.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "internal.h"

namespace halojit {
namespace {

struct LoadedRuntime {
    std::string path;
    void *handle;
};

std::mutex g_mutex;                       // guards g_runtimes and g_last_error
std::vector<LoadedRuntime> g_runtimes;    // never unloaded: kernels point into them
std::string g_last_error;                 // most recent message from any thread
std::atomic<uint64_t> g_error_seq{0};     // bumped on every message

thread_local std::string t_error;         // messages raised on this thread
thread_local uint64_t t_error_seq_at_clear = 0;

extern "C" void halojit_error_handler(void * /*user_context*/, const char *msg) {
    std::string text = msg ? msg : "(no message)";
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    if (!t_error.empty()) t_error += "\n";
    t_error += text;
    std::lock_guard<std::mutex> lock(g_mutex);
    g_last_error = text;
    g_error_seq.fetch_add(1);
}

// Halide's heap allocations (compute_root intermediates such as a matmul's
// row-major copy of a transposed operand) go through halojit_malloc: large
// blocks are kept after free and handed to the next request that fits, so
// a call does not fault in fresh pages for them every time (a 64 MiB block
// costs ~10-25 ms of page faults on the 2-core VM, as much as the kernel
// that uses it). At most kCachedBlocks blocks and kCachedBytes bytes wait.
constexpr size_t kAlign = 128;               // > halide_malloc's 64 on x86
constexpr size_t kCacheMin = size_t(1) << 20;
constexpr size_t kCachedBlocks = 8;
constexpr size_t kCachedBytes = size_t(512) << 20;

struct Block {
    void *base;
    size_t cap;
};
std::mutex g_alloc_mutex;
std::vector<Block> g_cached;                 // oldest first
size_t g_cached_bytes = 0;

// base -> [cap, unused ...][user memory ... one kAlign of slack]
extern "C" void *halojit_malloc(void * /*user_context*/, size_t size) {
    size_t cap = (size + 2 * kAlign + kAlign - 1) / kAlign * kAlign;
    void *base = nullptr;
    if (cap >= kCacheMin) {
        std::lock_guard<std::mutex> lock(g_alloc_mutex);
        size_t best = g_cached.size();
        for (size_t i = 0; i < g_cached.size(); i++) {
            // fits, and not more than twice the request: big blocks stay for big requests
            if (g_cached[i].cap >= cap && g_cached[i].cap / 2 <= cap &&
                (best == g_cached.size() || g_cached[i].cap < g_cached[best].cap)) {
                best = i;
            }
        }
        if (best < g_cached.size()) {
            base = g_cached[best].base;
            cap = g_cached[best].cap;
            g_cached_bytes -= cap;
            g_cached.erase(g_cached.begin() + best);
        }
    }
    if (!base && posix_memalign(&base, kAlign, cap) != 0) return nullptr;
    *static_cast<size_t *>(base) = cap;
    return static_cast<char *>(base) + kAlign;
}

extern "C" void halojit_free(void * /*user_context*/, void *ptr) {
    if (!ptr) return;
    void *base = static_cast<char *>(ptr) - kAlign;
    size_t cap = *static_cast<size_t *>(base);
    if (cap < kCacheMin || cap > kCachedBytes) {
        free(base);
        return;
    }
    std::vector<void *> drop;
    {
        std::lock_guard<std::mutex> lock(g_alloc_mutex);
        g_cached.push_back({base, cap});
        g_cached_bytes += cap;
        while (g_cached.size() > kCachedBlocks || g_cached_bytes > kCachedBytes) {
            drop.push_back(g_cached.front().base);
            g_cached_bytes -= g_cached.front().cap;
            g_cached.erase(g_cached.begin());
        }
    }
    for (void *b : drop) free(b);
}

std::string canonical(const std::string &path) {
    char buf[PATH_MAX];
    return realpath(path.c_str(), buf) ? std::string(buf) : path;
}

}  // namespace

namespace detail {

void clear_kernel_error() {
    t_error.clear();
    t_error_seq_at_clear = g_error_seq.load();
}

std::string take_kernel_error() {
    if (!t_error.empty()) return std::exchange(t_error, std::string());
    if (g_error_seq.load() != t_error_seq_at_clear) {
        // The message came from a Halide worker thread (inside a parallel loop).
        std::lock_guard<std::mutex> lock(g_mutex);
        return g_last_error;
    }
    return {};
}

}  // namespace detail

void load_runtime(const std::string &path) {
    std::string key = canonical(path);
    std::lock_guard<std::mutex> lock(g_mutex);
    for (const auto &rt : g_runtimes) {
        if (rt.path == key) return;
    }
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
        throw Error(ErrorKind::Runtime, "Halide runtime '" + path + "' does not exist");
    }
    try {
        check_shared_object(path);
    } catch (const Error &e) {
        throw Error(ErrorKind::Runtime, std::string("cannot load Halide runtime: ") + e.what());
    }
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!handle) {
        const char *err = dlerror();
        throw Error(ErrorKind::Runtime, "cannot load Halide runtime '" + path + "': " + (err ? err : "?"));
    }
    using set_handler_fn = halide_error_handler_t (*)(halide_error_handler_t);
    auto set_handler = reinterpret_cast<set_handler_fn>(dlsym(handle, "halide_set_error_handler"));
    if (!set_handler) {
        dlclose(handle);
        throw Error(ErrorKind::Runtime,
                    "'" + path + "' is not a Halide runtime: it has no halide_set_error_handler");
    }
    set_handler(&halojit_error_handler);
    using set_malloc_fn = halide_malloc_t (*)(halide_malloc_t);
    using set_free_fn = halide_free_t (*)(halide_free_t);
    auto set_malloc = reinterpret_cast<set_malloc_fn>(dlsym(handle, "halide_set_custom_malloc"));
    auto set_free = reinterpret_cast<set_free_fn>(dlsym(handle, "halide_set_custom_free"));
    if (set_malloc && set_free) {  // both or neither: a block must be freed by its allocator
        set_malloc(&halojit_malloc);
        set_free(&halojit_free);
    }
    device::on_runtime_loaded(handle);
    g_runtimes.push_back({key, handle});
}

bool runtime_loaded() {
    std::lock_guard<std::mutex> lock(g_mutex);
    return !g_runtimes.empty();
}

int set_num_threads(int n) {
    if (n < 0) throw Error(ErrorKind::Value, "set_num_threads: expected n >= 0, got " + std::to_string(n));
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_runtimes.empty()) {
        throw Error(ErrorKind::Runtime, "set_num_threads: no Halide runtime loaded; call load_runtime first");
    }
    int old = -1;
    for (const auto &rt : g_runtimes) {
        auto fn = reinterpret_cast<int (*)(int)>(dlsym(rt.handle, "halide_set_num_threads"));
        if (!fn) continue;
        int prev = fn(n);
        if (old < 0) old = prev;
    }
    if (old < 0) throw Error(ErrorKind::Runtime, "set_num_threads: the Halide runtime has no halide_set_num_threads");
    return old;
}

}  // namespace halojit
