// Kernel: one AOT Halide pipeline loaded from a shared object through its
// `<fn>_argv` entry point, described by `<fn>_metadata`.
#include <dlfcn.h>
#include <sys/stat.h>

#include <string>

#include "internal.h"

namespace halojit {

Kernel::Kernel(const std::string &so_path, const std::string &fn_name) : path_(so_path), name_(fn_name) {
    struct stat st;
    if (stat(so_path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
        throw Error(ErrorKind::Runtime, "kernel file '" + so_path + "' does not exist");
    }
    try {
        check_shared_object(so_path);
    } catch (const Error &e) {
        throw Error(ErrorKind::Runtime, std::string("cannot load kernel: ") + e.what());
    }
    // RTLD_LOCAL: kernels never provide symbols to each other; their halide_*
    // imports resolve against the runtime loaded RTLD_GLOBAL.
    handle_ = dlopen(so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) {
        const char *err = dlerror();
        std::string msg = "cannot load kernel '" + so_path + "': " + (err ? err : "?");
        if (!runtime_loaded()) msg += " (no Halide runtime is loaded yet; load_runtime must come first)";
        throw Error(ErrorKind::Runtime, msg);
    }
    auto fail = [&](const std::string &msg) {
        dlclose(handle_);
        handle_ = nullptr;
        throw Error(ErrorKind::Runtime, "kernel '" + so_path + "': " + msg);
    };
    argv_fn_ = reinterpret_cast<int (*)(void **)>(dlsym(handle_, (fn_name + "_argv").c_str()));
    using metadata_fn = const halide_filter_metadata_t *(*)();
    auto meta_fn = reinterpret_cast<metadata_fn>(dlsym(handle_, (fn_name + "_metadata").c_str()));
    if (!argv_fn_ || !meta_fn) fail("no symbols " + fn_name + "_argv/" + fn_name + "_metadata (wrong fn_name?)");

    const halide_filter_metadata_t *md = meta_fn();
    if (!md || md->version != 1) {
        fail("unsupported Halide metadata version " + std::to_string(md ? md->version : -1) + " (expected 1)");
    }
    if (md->num_arguments < 0 || (md->num_arguments > 0 && !md->arguments)) fail("corrupt metadata");
    target_ = md->target ? md->target : "";
    args_.reserve(md->num_arguments);
    for (int i = 0; i < md->num_arguments; i++) {
        const halide_filter_argument_t &a = md->arguments[i];
        if (!a.name || a.kind < 0 || a.kind > 2 || a.dimensions < 0) fail("corrupt metadata");
        args_.push_back({a.name, static_cast<ArgKind>(a.kind), a.dimensions, DType{a.type.code, a.type.bits}});
    }
}

Kernel::~Kernel() {
    // Safe on CPU: the runtime keeps no pointers into a kernel after it returns.
    if (handle_) dlclose(handle_);
}

int Kernel::call(void **args) const { return argv_fn_(args); }

}  // namespace halojit
