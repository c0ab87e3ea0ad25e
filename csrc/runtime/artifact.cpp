// Artifacts (.hjm): one file holding a manifest (JSON) and blobs (kernel
// shared objects per CPU feature level, the Halide runtime, constants, test
// vectors). Layout, all integers little-endian:
//
//   0   8 bytes  magic "\x89HJM\r\n\x1a\n"
//   8   u32      format version (kArtifactFormat)
//   12  u32      header size (32)
//   16  u64      manifest size in bytes
//   24  u32      CRC-32 of the manifest
//   28  u32      reserved (0)
//   32  manifest, then blobs at the offsets the manifest lists, each with
//       its CRC-32.
//
// Kernels and the runtime are loaded from memory (memfd_create, or an
// unlinked temporary file where that is missing), never from a path a user
// could swap under us.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <array>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "halojit/runtime.h"
#include "internal.h"
#include "json.h"

namespace halojit {
namespace {

constexpr char kMagic[8] = {'\x89', 'H', 'J', 'M', '\r', '\n', '\x1a', '\n'};
constexpr size_t kHeaderSize = 32;

#if defined(__x86_64__)
constexpr const char *kArch = "x86-64";
#elif defined(__aarch64__)
constexpr const char *kArch = "arm-64";
#else
constexpr const char *kArch = "unknown";
#endif

[[noreturn]] void artifact_error(const std::string &path, const std::string &msg) {
    throw Error(ErrorKind::Artifact, "artifact '" + path + "': " + msg);
}

uint32_t crc32(const void *data, size_t n) {
    static const std::array<uint32_t, 256> table = [] {
        std::array<uint32_t, 256> t{};
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            t[i] = c;
        }
        return t;
    }();
    uint32_t c = 0xFFFFFFFFu;
    const auto *p = static_cast<const uint8_t *>(data);
    for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

template <typename T>
T read_le(const std::string &data, size_t at) {
    T v = 0;
    for (size_t i = 0; i < sizeof(T); i++) v |= static_cast<T>(static_cast<uint8_t>(data[at + i])) << (8 * i);
    return v;
}

std::string read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) artifact_error(path, "cannot be opened: " + std::string(std::strerror(errno)));
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) artifact_error(path, "read error");
    return ss.str();
}

}  // namespace

// A file descriptor holding `bytes`, reachable as /proc/self/fd/N, that
// disappears when closed.
class MemoryFile {
public:
    MemoryFile(const std::string &name, const std::string &bytes) {
#ifdef MFD_CLOEXEC
        fd_ = memfd_create(name.c_str(), MFD_CLOEXEC);
#endif
        if (fd_ < 0) {  // no memfd: an unlinked temporary file
            const char *dir = std::getenv("TMPDIR");
            std::string tmpl = std::string(dir && *dir ? dir : "/tmp") + "/halojit-XXXXXX";
            fd_ = mkstemp(tmpl.data());
            if (fd_ >= 0) unlink(tmpl.c_str());
        }
        if (fd_ < 0) throw Error(ErrorKind::Runtime, "cannot create a memory file: " + std::string(std::strerror(errno)));
        size_t done = 0;
        while (done < bytes.size()) {
            const ssize_t n = write(fd_, bytes.data() + done, bytes.size() - done);
            if (n <= 0) {
                close(fd_);
                throw Error(ErrorKind::Runtime, "cannot write a memory file: " + std::string(std::strerror(errno)));
            }
            done += static_cast<size_t>(n);
        }
    }
    ~MemoryFile() { close(fd_); }
    MemoryFile(const MemoryFile &) = delete;
    MemoryFile &operator=(const MemoryFile &) = delete;
    std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

private:
    int fd_ = -1;
};

namespace {

std::string join(const std::vector<std::string> &items, const char *sep = ", ") {
    std::string s;
    for (const auto &x : items) s += (s.empty() ? "" : sep) + x;
    return s;
}

std::string spec_text(const std::vector<TensorSpec> &specs) {
    std::vector<std::string> parts;
    for (const auto &t : specs) {
        parts.push_back(t.name + ": " + dtype_name(t.dtype) + shape_text(t.shape.data(), static_cast<int>(t.shape.size())));
    }
    return join(parts);
}

std::string view_text(const ArrayView &v) { return dtype_name(v.dtype) + shape_text(v.shape, v.ndim); }

bool matches(const TensorSpec &spec, const ArrayView &v) {
    if (!dtype_compatible(spec.dtype, v.dtype) || static_cast<size_t>(v.ndim) != spec.shape.size()) return false;
    for (int a = 0; a < v.ndim; a++) {
        if (v.shape[a] != spec.shape[a]) return false;
    }
    return true;
}

bool kernel_ready(const ArrayView &v) {
    return v.ndim == 0 || v.shape[v.ndim - 1] <= 1 || v.strides[v.ndim - 1] == v.dtype.itemsize();
}

TensorSpec tensor_spec(const json::Value &v, const std::string &name, const std::string &what) {
    return TensorSpec{name, dtype_from_name(v.at("dtype", what).as_string(what + ".dtype")),
                      v.at("shape", what).as_int_vector(what + ".shape")};
}

}  // namespace

bool cpu_has_feature(const std::string &name) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (name == "sse41") return __builtin_cpu_supports("sse4.1");
    if (name == "avx") return __builtin_cpu_supports("avx");
    if (name == "avx2") return __builtin_cpu_supports("avx2");
    if (name == "fma") return __builtin_cpu_supports("fma");
    if (name == "avx512f") return __builtin_cpu_supports("avx512f");
    if (name == "avx512bw") return __builtin_cpu_supports("avx512bw");
    if (name == "avx512dq") return __builtin_cpu_supports("avx512dq");
    if (name == "avx512vl") return __builtin_cpu_supports("avx512vl");
    if (name == "avx512cd") return __builtin_cpu_supports("avx512cd");
    if (name == "f16c") {
        unsigned a, b, c, d;
        return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) && __builtin_cpu_supports("avx");
    }
#else
    (void)name;
#endif
    return false;
}

Artifact::Artifact(const std::string &path, const std::string &level) : path_(path) {
    const std::string data = read_file(path);
    if (data.size() < kHeaderSize || std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0) {
        artifact_error(path, "not a halojit artifact (no .hjm header; " + std::to_string(data.size()) +
                                 " bytes); write one with TracedFunction.dump");
    }
    const uint32_t format = read_le<uint32_t>(data, 8);
    if (format > static_cast<uint32_t>(kArtifactFormat) || format == 0) {
        artifact_error(path, "format version " + std::to_string(format) + " is newer than this runtime reads (" +
                                 std::to_string(kArtifactFormat) + "); upgrade halojit (runtime " + kVersion + ")");
    }
    const uint32_t header_size = read_le<uint32_t>(data, 12);
    const uint64_t manifest_size = read_le<uint64_t>(data, 16);
    if (header_size != kHeaderSize || manifest_size > data.size() - kHeaderSize) {
        artifact_error(path, "truncated: the manifest needs " + std::to_string(manifest_size) + " bytes after the " +
                                 "header, the file has " + std::to_string(data.size() - kHeaderSize));
    }
    manifest_json_ = data.substr(kHeaderSize, manifest_size);
    if (crc32(manifest_json_.data(), manifest_json_.size()) != read_le<uint32_t>(data, 24)) {
        artifact_error(path, "corrupt: the manifest checksum does not match");
    }
    const json::Value m = json::parse(manifest_json_);
    const std::string M = "manifest";
    if (m.at("format", M).as_int(M + ".format") != format) artifact_error(path, "corrupt: format versions disagree");
    const int64_t file_size = m.at("file_size", M).as_int(M + ".file_size");
    if (file_size != static_cast<int64_t>(data.size())) {
        artifact_error(path, (file_size > static_cast<int64_t>(data.size()) ? "truncated" : "corrupt") +
                                 std::string(": expected ") + std::to_string(file_size) + " bytes, the file has " +
                                 std::to_string(data.size()));
    }
    const std::string arch = m.at("arch", M).as_string(M + ".arch");
    const std::string os = m.at("os", M).as_string(M + ".os");
    if (arch != kArch || os != "linux") {
        artifact_error(path, "built for " + arch + "-" + os + "; this machine is " + kArch + "-linux");
    }
    function_ = m.at("function", M).as_string(M + ".function");
    for (const auto &v : m.at("inputs", M).as_array(M + ".inputs")) input_names_.push_back(v.as_string(M + ".inputs[]"));
    for (const auto &v : m.at("outputs", M).as_array(M + ".outputs")) {
        output_names_.push_back(v.as_string(M + ".outputs[]"));
    }

    // Blobs: bounds now, checksums when used.
    const auto &blobs = m.at("blobs", M).as_array(M + ".blobs");
    for (size_t i = 0; i < blobs.size(); i++) {
        const std::string w = M + ".blobs[" + std::to_string(i) + "]";
        Blob b{static_cast<uint64_t>(blobs[i].at("offset", w).as_int(w + ".offset")),
               static_cast<uint64_t>(blobs[i].at("size", w).as_int(w + ".size")),
               static_cast<uint32_t>(blobs[i].at("crc32", w).as_int(w + ".crc32"))};
        if (b.offset > data.size() || b.size > data.size() - b.offset) {
            artifact_error(path, "truncated: blob " + std::to_string(i) + " lies past the end of the file");
        }
        blobs_.push_back(b);
    }
    auto blob_index = [&](const json::Value &v, const std::string &what) {
        const int64_t k = v.as_int(what);
        if (k < 0 || static_cast<size_t>(k) >= blobs_.size()) artifact_error(path, what + " names a missing blob");
        return static_cast<int>(k);
    };

    // Feature levels: the requested one, or the best this CPU runs.
    const char *env_level = std::getenv("HALOJIT_ARTIFACT_LEVEL");
    const std::string want = !level.empty() ? level : (env_level ? env_level : "");
    const auto &levels = m.at("levels", M).as_array(M + ".levels");
    int chosen = -1;
    for (size_t i = 0; i < levels.size(); i++) {
        const std::string w = M + ".levels[" + std::to_string(i) + "]";
        ArtifactLevel lv{levels[i].at("name", w).as_string(w + ".name"), levels[i].at("target", w).as_string(w + ".target"),
                         {}, true};
        for (const auto &f : levels[i].at("requires", w).as_array(w + ".requires")) {
            lv.requires_features.push_back(f.as_string(w + ".requires[]"));
            lv.supported = lv.supported && cpu_has_feature(lv.requires_features.back());
        }
        if (chosen < 0 && (want.empty() ? lv.supported : lv.name == want)) chosen = static_cast<int>(i);
        levels_.push_back(std::move(lv));
    }
    std::vector<std::string> described;
    for (const auto &lv : levels_) described.push_back(lv.name + " (needs " + join(lv.requires_features, "+") + ")");
    if (chosen < 0) {
        if (!want.empty()) {
            artifact_error(path, "has no feature level '" + want + "'; it has " + join(described));
        }
        artifact_error(path, "needs a CPU feature this machine lacks: it was built for " + join(described) +
                                 "; dump it again with a lower level in levels=");
    }
    if (!levels_[chosen].supported) {
        artifact_error(path, "feature level '" + levels_[chosen].name + "' needs " +
                                 join(levels_[chosen].requires_features, "+") + ", which this CPU lacks");
    }
    level_ = levels_[chosen].name;

    auto checked_blob = [&](int k) { return read_blob(k, &data); };

    // The Halide runtime (unless the process has one), then this level's kernels.
    // glibc's dlopen matches already-loaded objects by path name, so a
    // /proc/self/fd/N path must stay unique while its object is loaded: the
    // runtime's descriptor stays open for the life of the process, and each
    // kernel's for the life of this artifact.
    const auto &rt = m.at("runtime", M);
    const bool cuda = rt.at("target", M + ".runtime").as_string(M + ".runtime.target").find("cuda") != std::string::npos;
    // a CUDA artifact needs a runtime with Halide's CUDA half, even when a CPU one is loaded
    if (!runtime_loaded() || (cuda && !device::cuda_runtime_loaded())) {
        auto *file = new MemoryFile("halojit-runtime",
                                    checked_blob(blob_index(rt.at("blob", M + ".runtime"), M + ".runtime.blob")));
        load_runtime(file->path());  // never unloaded, so `file` is never freed
    }
    const auto &kernels = levels[chosen].at("kernels", M + ".levels[]").as_array(M + ".levels[].kernels");
    for (size_t k = 0; k < kernels.size(); k++) {
        const std::string w = M + ".levels[" + std::to_string(chosen) + "].kernels[" + std::to_string(k) + "]";
        const std::string name = kernels[k].at("name", w).as_string(w + ".name");
        files_.push_back(std::make_shared<MemoryFile>(name, checked_blob(blob_index(kernels[k].at("blob", w), w + ".blob"))));
        try {
            kernels_.push_back(std::make_shared<Kernel>(files_.back()->path(), name));
        } catch (const Error &e) {
            artifact_error(path, "kernel " + name + " (level " + level_ + ") does not load: " + e.what());
        }
    }

    // Constants.
    const auto &consts = m.at("constants", M).as_array(M + ".constants");
    for (size_t c = 0; c < consts.size(); c++) {
        const std::string w = M + ".constants[" + std::to_string(c) + "]";
        const TensorSpec spec = tensor_spec(consts[c], "", w);
        const std::string bytes = checked_blob(blob_index(consts[c].at("blob", w), w + ".blob"));
        Tensor t(spec.dtype, spec.shape);
        if (bytes.size() != t.nbytes()) artifact_error(path, "corrupt: " + w + " has the wrong size");
        std::memcpy(t.data(), bytes.data(), bytes.size());
        constants_.push_back(std::move(t));
    }

    // Specializations and their plans.
    const auto &specs = m.at("specializations", M).as_array(M + ".specializations");
    if (specs.empty()) artifact_error(path, "corrupt: no specializations");
    for (size_t s = 0; s < specs.size(); s++) {
        const std::string w = M + ".specializations[" + std::to_string(s) + "]";
        ArtifactSpecialization spec;
        const auto &ins = specs[s].at("inputs", w).as_array(w + ".inputs");
        const auto &outs = specs[s].at("outputs", w).as_array(w + ".outputs");
        if (ins.size() != input_names_.size() || outs.size() != output_names_.size()) {
            artifact_error(path, "corrupt: " + w + " has the wrong number of inputs or outputs");
        }
        for (size_t i = 0; i < ins.size(); i++) spec.inputs.push_back(tensor_spec(ins[i], input_names_[i], w + ".inputs[]"));
        for (size_t i = 0; i < outs.size(); i++) {
            spec.outputs.push_back(tensor_spec(outs[i], output_names_[i], w + ".outputs[]"));
            const std::string &src = outs[i].at("source", w).as_string(w + ".outputs[].source");
            const int64_t index = outs[i].at("index", w).as_int(w + ".outputs[].index");
            using S = ArtifactSpecialization::Source;
            const S kind = src == "plan" ? S::Plan : src == "input" ? S::Input : src == "constant" ? S::Constant
                                                                                 : S::Output;
            if (src != "plan" && src != "input" && src != "constant" && src != "output") {
                artifact_error(path, "corrupt: " + w + " has an output source '" + src + "'");
            }
            const size_t limit = kind == S::Input ? ins.size() : kind == S::Constant ? constants_.size() : outs.size();
            if (index < 0 || static_cast<size_t>(index) >= limit) artifact_error(path, "corrupt: " + w + " bad output index");
            spec.sources.emplace_back(kind, static_cast<int>(index));
        }
        for (const auto &c : specs[s].at("constants", w).as_array(w + ".constants")) {
            const int64_t k = c.as_int(w + ".constants[]");
            if (k < 0 || static_cast<size_t>(k) >= constants_.size()) artifact_error(path, "corrupt: " + w + " bad constant");
            spec.constants.push_back(static_cast<int>(k));
        }
        const int n_plan_in = static_cast<int>(ins.size() + spec.constants.size());
        const int n_plan_out = static_cast<int>(specs[s].at("plan_outputs", w).as_int(w + ".plan_outputs"));
        std::vector<BufferSpec> buffers(n_plan_in + std::max(n_plan_out, 0));
        for (const auto &b : specs[s].at("buffers", w).as_array(w + ".buffers")) {
            const TensorSpec t = tensor_spec(b, "", w + ".buffers[]");
            buffers.push_back(BufferSpec{true, t.shape, t.dtype});
        }
        std::vector<Step> steps;
        for (const auto &st : specs[s].at("steps", w).as_array(w + ".steps")) {
            steps.push_back(Step{static_cast<int>(st.at("kernel", w).as_int(w + ".steps[].kernel")),
                                 [&] {
                                     std::vector<int> ids;
                                     for (int64_t id : st.at("buffers", w).as_int_vector(w + ".steps[].buffers")) {
                                         ids.push_back(static_cast<int>(id));
                                     }
                                     return ids;
                                 }()});
        }
        try {
            spec.plan = std::make_shared<Plan>(kernels_, std::move(steps), std::move(buffers), n_plan_in, n_plan_out);
        } catch (const Error &e) {
            artifact_error(path, "corrupt: " + w + ": " + e.what());
        }
        specs_.push_back(std::move(spec));
    }

    // Test vectors: described now, read on demand.
    if (const json::Value *tvs = m.find("test_vectors")) {
        for (const auto &tv : tvs->as_array(M + ".test_vectors")) {
            const std::string w = M + ".test_vectors[]";
            StoredVector sv;
            const int64_t s = tv.at("specialization", w).as_int(w + ".specialization");
            if (s < 0 || static_cast<size_t>(s) >= specs_.size()) artifact_error(path, "corrupt: " + w + " bad specialization");
            sv.specialization = static_cast<int>(s);
            for (const char *part : {"inputs", "expected"}) {
                for (const auto &t : tv.at(part, w).as_array(w + "." + part)) {
                    const TensorSpec spec = tensor_spec(t, "", w + "." + part + "[]");
                    (std::strcmp(part, "inputs") == 0 ? sv.inputs : sv.expected)
                        .push_back(StoredTensor{blob_index(t.at("blob", w), w + ".blob"), spec.dtype, spec.shape});
                }
            }
            for (const auto &x : tv.at("rtol", w).as_array(w + ".rtol")) sv.rtol.push_back(x.as_double(w + ".rtol[]"));
            for (const auto &x : tv.at("atol", w).as_array(w + ".atol")) sv.atol.push_back(x.as_double(w + ".atol[]"));
            if (sv.inputs.size() != input_names_.size() || sv.expected.size() != output_names_.size() ||
                sv.rtol.size() != sv.expected.size() || sv.atol.size() != sv.expected.size()) {
                artifact_error(path, "corrupt: a test vector has the wrong number of arrays");
            }
            test_vectors_.push_back(std::move(sv));
        }
    }
}

Artifact::~Artifact() = default;

std::string Artifact::read_blob(int k, const std::string *data) const {
    const Blob &b = blobs_[k];
    std::string bytes;
    if (data) {
        bytes = data->substr(b.offset, b.size);
    } else {
        std::ifstream in(path_, std::ios::binary);
        if (!in) artifact_error(path_, "cannot be reopened to read a test vector");
        bytes.resize(b.size);
        in.seekg(static_cast<std::streamoff>(b.offset));
        in.read(bytes.data(), static_cast<std::streamsize>(b.size));
        if (static_cast<uint64_t>(in.gcount()) != b.size) artifact_error(path_, "truncated since it was loaded");
    }
    if (crc32(bytes.data(), bytes.size()) != b.crc32) {
        artifact_error(path_, "corrupt: blob " + std::to_string(k) + " fails its checksum");
    }
    return bytes;
}

int Artifact::find_specialization(const ArrayView *inputs, size_t n_inputs) const {
    for (size_t s = 0; s < specs_.size(); s++) {
        const auto &spec = specs_[s];
        if (n_inputs != spec.inputs.size()) continue;
        bool ok = true;
        for (size_t i = 0; ok && i < n_inputs; i++) ok = matches(spec.inputs[i], inputs[i]);
        if (ok) return static_cast<int>(s);
    }
    return -1;
}

const ArtifactSpecialization &Artifact::check_call(const ArrayView *inputs, size_t n_inputs, const ArrayView *outputs,
                                                   size_t n_outputs) const {
    if (n_inputs != input_names_.size()) {
        throw Error(ErrorKind::Value, function_ + ": expected " + std::to_string(input_names_.size()) + " inputs (" +
                                          join(input_names_) + "), got " + std::to_string(n_inputs));
    }
    const int s = find_specialization(inputs, n_inputs);
    if (s < 0) {
        std::vector<std::string> given, have;
        for (size_t i = 0; i < n_inputs; i++) given.push_back(input_names_[i] + ": " + view_text(inputs[i]));
        for (const auto &spec : specs_) have.push_back("[" + spec_text(spec.inputs) + "]");
        throw Error(ErrorKind::Value, function_ + ": no specialization for inputs [" + join(given) +
                                          "]; the artifact has " + join(have, " or ") +
                                          "; dump it with these shapes (extra_examples=) to add one");
    }
    const auto &spec = specs_[s];
    if (outputs) {
        if (n_outputs != output_names_.size()) {
            throw Error(ErrorKind::Value, function_ + ": expected " + std::to_string(output_names_.size()) +
                                              " outputs (" + join(output_names_) + "), got " + std::to_string(n_outputs));
        }
        for (size_t i = 0; i < n_outputs; i++) {
            if (!matches(spec.outputs[i], outputs[i])) {
                throw Error(ErrorKind::Value, function_ + ": output " + output_names_[i] + " must be " +
                                                  spec_text({spec.outputs[i]}) + ", got " + view_text(outputs[i]));
            }
            if (!outputs[i].writable) throw Error(ErrorKind::Value, function_ + ": output " + output_names_[i] + " is read-only");
            if (!outputs[i].data) {
                throw Error(ErrorKind::Value, function_ + ": output " + output_names_[i] + " has no data pointer");
            }
        }
    }
    for (size_t i = 0; i < n_inputs; i++) {
        if (!inputs[i].data) throw Error(ErrorKind::Value, function_ + ": input " + input_names_[i] + " has no data pointer");
    }
    return spec;
}

void Artifact::run(const ArrayView *inputs, size_t n_inputs, const ArrayView *outputs, size_t n_outputs) const {
    const ArtifactSpecialization &spec = check_call(inputs, n_inputs, outputs, n_outputs);
    using S = ArtifactSpecialization::Source;
    std::vector<Tensor> temps;  // keeps dense copies alive for the call
    temps.reserve(n_inputs + n_outputs);
    std::vector<ArrayView> plan_in;
    for (size_t i = 0; i < n_inputs; i++) {
        ArrayView v = inputs[i];
        v.dtype = spec.inputs[i].dtype;
        if (!kernel_ready(v)) {  // kernels need a dense last axis: copy
            temps.emplace_back(v.dtype, spec.inputs[i].shape);
            copy_array(temps.back().view(), v);
            v = temps.back().view();
        }
        plan_in.push_back(v);
    }
    for (int c : spec.constants) plan_in.push_back(constants_[c].view());

    const int n_plan_out = spec.plan->n_outputs();
    std::vector<ArrayView> plan_out(n_plan_out);
    std::vector<std::pair<int, int>> copy_back;  // (user output, temp index)
    for (size_t k = 0; k < n_outputs; k++) {
        if (spec.sources[k].first != S::Plan) continue;
        const ArrayView &o = outputs[k];
        bool direct = kernel_ready(o);
        for (size_t i = 0; direct && i < n_inputs; i++) direct = !may_overlap(o, inputs[i]);
        if (direct) {
            plan_out[spec.sources[k].second] = o;
        } else {
            temps.emplace_back(spec.outputs[k].dtype, spec.outputs[k].shape);
            plan_out[spec.sources[k].second] = temps.back().view();
            copy_back.emplace_back(static_cast<int>(k), static_cast<int>(temps.size() - 1));
        }
    }
    spec.plan->run(plan_in.data(), plan_in.size(), plan_out.data(), plan_out.size());
    for (auto [k, t] : copy_back) copy_array(outputs[k], temps[t].view());
    for (size_t k = 0; k < n_outputs; k++) {
        const auto [kind, index] = spec.sources[k];
        if (kind == S::Input) copy_array(outputs[k], ArrayView{inputs[index].data, outputs[k].dtype, inputs[index].ndim,
                                                                inputs[index].shape, inputs[index].strides, false});
        if (kind == S::Constant) copy_array(outputs[k], constants_[index].view());
        if (kind == S::Output) copy_array(outputs[k], outputs[index]);
    }
}

std::vector<Tensor> Artifact::run(const ArrayView *inputs, size_t n_inputs) const {
    const ArtifactSpecialization &spec = check_call(inputs, n_inputs, nullptr, 0);
    std::vector<Tensor> outs;
    std::vector<ArrayView> views;
    for (const auto &o : spec.outputs) {
        outs.emplace_back(o.dtype, o.shape);
        views.push_back(outs.back().view());
    }
    run(inputs, n_inputs, views.data(), views.size());
    return outs;
}

TestVector Artifact::test_vector(size_t i) const {
    if (i >= test_vectors_.size()) {
        throw Error(ErrorKind::Value, "test vector " + std::to_string(i) + " of " + std::to_string(test_vectors_.size()));
    }
    const StoredVector &sv = test_vectors_[i];
    TestVector tv{sv.specialization, {}, {}, sv.rtol, sv.atol};
    for (int part = 0; part < 2; part++) {
        for (const StoredTensor &st : part == 0 ? sv.inputs : sv.expected) {
            const std::string bytes = read_blob(st.blob, nullptr);
            Tensor t(st.dtype, st.shape);
            if (bytes.size() != t.nbytes()) artifact_error(path_, "corrupt: a test vector array has the wrong size");
            std::memcpy(t.data(), bytes.data(), bytes.size());
            (part == 0 ? tv.inputs : tv.expected).push_back(std::move(t));
        }
    }
    return tv;
}

}  // namespace halojit
