// halojit runtime core: load AOT Halide kernels (.so built with `no_runtime`)
// and execute plans of kernel steps over caller and runtime-owned buffers.
//
// This header is the C++ face of the runtime and has no Python and no Halide
// types in it, so an embedding program needs only this header and the
// compiled core. Every failure is a halojit::Error carrying a kind (how a
// binding should surface it) and a message that says what was expected and
// what was given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace halojit {

inline constexpr const char *kVersion = "0.1.0";

// ---------------------------------------------------------------- errors

enum class ErrorKind {
    Value,    // bad argument value: dtype, ndim, shape, strides, counts
    Type,     // an argument of the wrong kind of object
    Runtime,  // a kernel failed, or a file/symbol could not be loaded
    Artifact, // an artifact that is truncated, corrupt, foreign, newer, or for another CPU
    Device,   // a CUDA kernel cannot run here: no driver, no device, or an older device
};

class Error : public std::runtime_error {
public:
    Error(ErrorKind kind, const std::string &message) : std::runtime_error(message), kind_(kind) {}
    ErrorKind kind() const { return kind_; }

private:
    ErrorKind kind_;
};

// ---------------------------------------------------------------- dtypes

// Element type in Halide's encoding (halide_type_code_t + bits), lanes = 1.
// code: 0 int, 1 uint, 2 float, 3 handle, 4 bfloat.
struct DType {
    uint8_t code = 0;
    uint8_t bits = 0;

    int itemsize() const { return (bits + 7) / 8; }
    bool operator==(const DType &o) const { return code == o.code && bits == o.bits; }
    bool operator!=(const DType &o) const { return !(*this == o); }
};

// numpy-style names: "float32", "int64", "bool" (= uint1, stored as one byte),
// "bfloat16". dtype_from_name throws Error(Value) for unknown names.
std::string dtype_name(DType t);
DType dtype_from_name(const std::string &name);

// A numpy-style shape: "(4, 1024)", "(3,)", "()".
std::string shape_text(const int64_t *shape, int ndim);

// True when an array of `given` may be passed where a kernel expects
// `expected`: equal types, or one-byte booleans (numpy bool / uint8) for a
// kernel argument of Halide Bool (uint1) or UInt(8).
bool dtype_compatible(DType expected, DType given);

// ---------------------------------------------------------------- arrays

// A borrowed strided array in numpy conventions: axis order as numpy (the
// last axis is the fastest, i.e. Halide dimension 0), strides in BYTES and
// possibly negative or zero. `data` points at element [0, 0, ...].
struct ArrayView {
    void *data = nullptr;
    DType dtype;
    int ndim = 0;
    const int64_t *shape = nullptr;    // ndim entries
    const int64_t *strides = nullptr;  // ndim entries, bytes
    bool writable = true;
    bool on_device = false;  // data is a CUDA device pointer (DLPack), not host memory
};

// Byte strides of a C-contiguous array (empty axes count as extent 1).
std::vector<int64_t> contiguous_strides(const int64_t *shape, int ndim, int itemsize);

// An owned, C-contiguous, 64-byte aligned array.
class Tensor {
public:
    Tensor() = default;
    Tensor(DType dtype, std::vector<int64_t> shape);  // uninitialized memory

    DType dtype() const { return dtype_; }
    const std::vector<int64_t> &shape() const { return shape_; }
    int64_t size() const;  // elements
    size_t nbytes() const { return static_cast<size_t>(size()) * dtype_.itemsize(); }
    void *data() const { return memory_.get(); }
    ArrayView view() const;

private:
    DType dtype_;
    std::vector<int64_t> shape_, strides_;
    std::shared_ptr<void> memory_;
};

// Element-wise copy between two arrays of the same dtype and shape with any
// strides (the destination must be writable). Throws Error(Value) otherwise.
void copy_array(const ArrayView &dst, const ArrayView &src);

// Whether the byte ranges of two arrays can overlap (a conservative test).
bool may_overlap(const ArrayView &a, const ArrayView &b);

// numpy.allclose with equal_nan: |got - want| <= atol + rtol * |want| for
// floats (NaN matches NaN, inf matches the same inf), exact for integers and
// booleans. On a mismatch returns false and, when `why` is given, says where.
bool allclose(const ArrayView &got, const ArrayView &want, double rtol, double atol, std::string *why = nullptr);

// ---------------------------------------------------------------- files

// Refuses (Error(Runtime)) a file that is not a complete ELF shared object
// for this machine: truncated files would crash inside dlopen. Kernel and
// load_runtime call it before dlopen.
void check_shared_object(const std::string &path);

// ---------------------------------------------------------------- Halide runtime

// dlopen the shared Halide runtime (RTLD_NOW | RTLD_GLOBAL) once per path and
// route Halide's error handler into halojit so kernel failures carry
// Halide's message. Must precede loading kernels compiled with no_runtime.
void load_runtime(const std::string &path);
bool runtime_loaded();
// halide_set_num_threads on every loaded runtime; returns the previous value
// of the first one (0 = Halide's default, one per core).
int set_num_threads(int n);

// ---------------------------------------------------------------- kernels

enum class ArgKind : int32_t { InputScalar = 0, InputBuffer = 1, OutputBuffer = 2 };

struct ArgInfo {
    std::string name;
    ArgKind kind;
    int dimensions;
    DType dtype;
};

// One AOT pipeline from a shared object: `<fn>_argv` and `<fn>_metadata`.
class Kernel {
public:
    Kernel(const std::string &so_path, const std::string &fn_name);
    ~Kernel();
    Kernel(const Kernel &) = delete;
    Kernel &operator=(const Kernel &) = delete;

    const std::string &path() const { return path_; }
    const std::string &name() const { return name_; }
    const std::string &target() const { return target_; }
    const std::vector<ArgInfo> &arguments() const { return args_; }

    // Calls `<fn>_argv(args)`; returns Halide's status (0 = success).
    int call(void **args) const;

private:
    std::string path_, name_, target_;
    void *handle_ = nullptr;
    int (*argv_fn_)(void **) = nullptr;
    std::vector<ArgInfo> args_;
};

// ---------------------------------------------------------------- plans

struct Step {
    int kernel;                    // index into the plan's kernels
    std::vector<int> buffers;      // one buffer id per kernel argument, in order
};

struct BufferSpec {
    bool known = false;            // false: no run-time check (inputs/outputs only)
    std::vector<int64_t> shape;    // numpy order
    DType dtype;
};

struct Workspace;  // one set of intermediate buffers (defined in plan.cpp)

// Buffer ids: [0, n_inputs) inputs and [n_inputs, n_inputs + n_outputs)
// outputs, both given per call; every later id is an intermediate, allocated
// by the plan (64-byte aligned, C-contiguous) from buffers[id] and reused
// across calls. Concurrent run() calls are safe: each takes its own
// workspace from a mutex-protected free list.
class Plan {
public:
    Plan(std::vector<std::shared_ptr<Kernel>> kernels, std::vector<Step> steps,
         std::vector<BufferSpec> buffers, int n_inputs, int n_outputs);
    ~Plan();
    Plan(const Plan &) = delete;
    Plan &operator=(const Plan &) = delete;

    // Validates every input and output against every kernel argument it is
    // bound to, then runs the steps in order. Throws Error(Value) before any
    // kernel runs on a mismatch; Error(Runtime) with Halide's message when a
    // kernel fails. With `profile`, wall time per step is recorded.
    void run(const ArrayView *inputs, size_t n_inputs, const ArrayView *outputs, size_t n_outputs,
             bool profile = false);
    // Seconds per step of the last profiled run (empty before one).
    std::vector<double> last_timings() const;

    int n_inputs() const { return n_inputs_; }
    int n_outputs() const { return n_outputs_; }
    size_t n_steps() const { return steps_.size(); }
    size_t n_buffers() const { return buffers_.size(); }
    const std::vector<std::shared_ptr<Kernel>> &kernels() const { return kernels_; }
    // Bytes of one workspace (all intermediates of one concurrent call).
    size_t workspace_bytes() const;
    // Whether a kernel runs on a CUDA device: host inputs are copied to the
    // device and host outputs back, inside run().
    bool uses_device() const { return !device_target_.empty(); }

private:
    std::unique_ptr<Workspace> acquire_workspace();
    void release_workspace(std::unique_ptr<Workspace> ws);

    std::vector<std::shared_ptr<Kernel>> kernels_;
    std::vector<Step> steps_;
    std::vector<BufferSpec> buffers_;
    int n_inputs_, n_outputs_;
    size_t max_args_ = 0;

    mutable std::mutex mutex_;  // guards pool_ and timings_
    std::vector<std::unique_ptr<Workspace>> pool_;
    std::vector<double> timings_;
    std::string device_target_;  // a CUDA kernel's target; empty for a CPU-only plan
};

// ---------------------------------------------------------------- artifacts

inline constexpr int kArtifactFormat = 1;  // newest artifact format this runtime reads

struct TensorSpec {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
};

// One specialization of an artifact: fixed input and output shapes, and the
// plan that computes them. Outputs come from the plan, or are copies of an
// input, a constant or an earlier output (a value returned twice).
struct ArtifactSpecialization {
    enum class Source : int { Plan = 0, Input = 1, Constant = 2, Output = 3 };
    std::vector<TensorSpec> inputs, outputs;
    std::vector<std::pair<Source, int>> sources;  // per output
    std::vector<int> constants;                   // plan inputs after the user's inputs
    std::shared_ptr<Plan> plan;
};

struct ArtifactLevel {
    std::string name, target;
    std::vector<std::string> requires_features;  // CPU features, e.g. "avx2"
    bool supported;                             // by this CPU
};

class MemoryFile;  // an in-memory file kernels are loaded from (artifact.cpp)

struct TestVector {
    int specialization;
    std::vector<Tensor> inputs, expected;
    std::vector<double> rtol, atol;  // per output
};

// An artifact written by `TracedFunction.dump`: read and verified whole
// (header, format version, checksums, architecture) at construction, which
// then loads the kernels of one feature level: `level` if given, else the
// HALOJIT_ARTIFACT_LEVEL environment variable, else the best level this CPU
// supports. The artifact's own Halide runtime is loaded unless one already
// is. Every problem with the file is an Error(Artifact). run() is const and
// safe to call from several threads at once.
class Artifact {
public:
    explicit Artifact(const std::string &path, const std::string &level = "");
    ~Artifact();
    Artifact(const Artifact &) = delete;
    Artifact &operator=(const Artifact &) = delete;

    const std::string &path() const { return path_; }
    const std::string &manifest_json() const { return manifest_json_; }
    const std::string &function_name() const { return function_; }
    const std::string &level() const { return level_; }
    const std::vector<ArtifactLevel> &levels() const { return levels_; }
    const std::vector<std::string> &input_names() const { return input_names_; }
    const std::vector<std::string> &output_names() const { return output_names_; }
    const std::vector<ArtifactSpecialization> &specializations() const { return specs_; }
    size_t num_test_vectors() const { return test_vectors_.size(); }

    // The specialization whose input shapes and dtypes match, or -1.
    int find_specialization(const ArrayView *inputs, size_t n_inputs) const;

    // Runs on caller-owned outputs (any strides; written through a
    // temporary where a kernel cannot write them directly). Every input and
    // output is checked before any kernel runs.
    void run(const ArrayView *inputs, size_t n_inputs, const ArrayView *outputs, size_t n_outputs) const;
    // Runs into fresh outputs allocated here.
    std::vector<Tensor> run(const ArrayView *inputs, size_t n_inputs) const;

    // Test vector i, read (and checksummed) from the file on demand.
    TestVector test_vector(size_t i) const;

private:
    const ArtifactSpecialization &check_call(const ArrayView *inputs, size_t n_inputs, const ArrayView *outputs,
                                             size_t n_outputs) const;

    struct Blob {
        uint64_t offset, size;
        uint32_t crc32;
    };
    struct StoredTensor {
        int blob;
        DType dtype;
        std::vector<int64_t> shape;
    };
    struct StoredVector {
        int specialization;
        std::vector<StoredTensor> inputs, expected;
        std::vector<double> rtol, atol;
    };
    std::string read_blob(int blob, const std::string *data) const;

    std::string path_, manifest_json_, function_, level_;
    std::vector<ArtifactLevel> levels_;
    std::vector<std::string> input_names_, output_names_;
    std::vector<Blob> blobs_;
    std::vector<Tensor> constants_;
    std::vector<std::shared_ptr<MemoryFile>> files_;  // kernel images; outlive the kernels
    std::vector<std::shared_ptr<Kernel>> kernels_;
    std::vector<ArtifactSpecialization> specs_;
    std::vector<StoredVector> test_vectors_;
};

// CPU feature names as artifacts spell them ("sse41", "avx", "avx2", "fma",
// "f16c", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"); false
// for names this runtime does not know.
bool cpu_has_feature(const std::string &name);

}  // namespace halojit
