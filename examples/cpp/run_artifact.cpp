// run_artifact ARTIFACT [--level NAME] [--threads N] [--save DIR]
//
// Loads an artifact written by `TracedFunction.dump`, prints its inputs and
// outputs, then runs every test vector it carries through the C++ API and
// compares the results with the expected outputs recorded by dump. Exits 0
// when all of them match, 1 when one does not, 2 on an error. With --save,
// the outputs of test vector 0 are written to DIR/<output name>.bin (raw,
// C order) for comparison elsewhere.
//
// It shows both ways to run: into outputs the runtime allocates, and into
// buffers the caller owns (here std::vector storage).
#include <halojit/halojit.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string shape_text(const std::vector<int64_t> &shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); i++) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

// Runs test vector `i` both ways; returns the number of mismatching outputs.
int check_vector(const hj::Artifact &model, size_t i) {
    const hj::TestVector tv = model.test_vector(i);
    std::vector<hj::ArrayRef> inputs;
    for (const auto &t : tv.inputs) inputs.push_back(t.ref());

    // 1. Runtime-allocated outputs.
    const std::vector<hj::Tensor> outputs = model.run(inputs);

    // 2. Caller-owned outputs: plain byte buffers shaped like the expected ones.
    std::vector<std::vector<unsigned char>> storage;
    std::vector<hj::ArrayRef> mine;
    for (const auto &e : tv.expected) {
        storage.emplace_back(static_cast<size_t>(e.size()) * hj_dtype_size(e.dtype()));
        mine.emplace_back(storage.back().data(), e.dtype(), e.shape());
    }
    model.run(inputs, mine);

    int bad = 0;
    for (size_t k = 0; k < tv.expected.size(); k++) {
        for (const hj::ArrayRef &got : {outputs[k].ref(), mine[k]}) {
            std::string why;
            if (!hj::allclose(got, tv.expected[k].ref(), tv.rtol[k], tv.atol[k], &why)) {
                std::printf("  vector %zu output %zu: MISMATCH (%s)\n", i, k, why.c_str());
                bad++;
            }
        }
    }
    if (!bad) std::printf("  vector %zu: %zu output(s) match\n", i, tv.expected.size());
    return bad;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s ARTIFACT [--level NAME] [--threads N]\n", argv[0]);
        return 2;
    }
    std::string level, save;
    int threads = 1;
    for (int a = 2; a + 1 < argc; a += 2) {
        if (std::strcmp(argv[a], "--level") == 0) level = argv[a + 1];
        if (std::strcmp(argv[a], "--threads") == 0) threads = std::atoi(argv[a + 1]);
        if (std::strcmp(argv[a], "--save") == 0) save = argv[a + 1];
    }
    try {
        hj::Artifact model(argv[1], level);
        std::printf("%s: function %s, level %s, %zu specialization(s), %zu test vector(s)\n", argv[1],
                    model.function().c_str(), model.level().c_str(), model.num_specializations(),
                    model.num_test_vectors());
        for (const auto &in : model.inputs()) {
            std::printf("  input  %s: %s %s\n", in.name.c_str(), hj_dtype_name(in.dtype), shape_text(in.shape).c_str());
        }
        for (const auto &out : model.outputs()) {
            std::printf("  output %s: %s %s\n", out.name.c_str(), hj_dtype_name(out.dtype), shape_text(out.shape).c_str());
        }
        if (model.num_test_vectors() == 0) {
            std::printf("no test vectors (dumped with test_vectors=False)\n");
            return 1;
        }
        // The same artifact from several threads at once: runs are thread-safe.
        // Exceptions must not leave a thread: each keeps its first error.
        std::vector<int> failures(threads > 0 ? threads : 1, 0);
        std::vector<std::string> errors(failures.size());
        std::vector<std::thread> pool;
        for (size_t t = 0; t < failures.size(); t++) {
            pool.emplace_back([&, t] {
                try {
                    for (size_t i = 0; i < model.num_test_vectors(); i++) failures[t] += check_vector(model, i);
                } catch (const hj::Error &e) {
                    errors[t] = e.what();
                }
            });
        }
        for (auto &th : pool) th.join();
        for (const auto &e : errors) {
            if (!e.empty()) throw hj::Error(HJ_ERROR_RUNTIME, e);
        }
        int bad = 0;
        for (int f : failures) bad += f;
        if (!save.empty()) {
            const hj::TestVector tv = model.test_vector(0);
            std::vector<hj::ArrayRef> inputs;
            for (const auto &t : tv.inputs) inputs.push_back(t.ref());
            const std::vector<hj::Tensor> outs = model.run(inputs);
            const auto names = model.outputs();
            for (size_t k = 0; k < outs.size(); k++) {
                std::ofstream f(save + "/" + names[k].name + ".bin", std::ios::binary);
                f.write(static_cast<const char *>(outs[k].data()),
                        static_cast<std::streamsize>(outs[k].size() * hj_dtype_size(outs[k].dtype())));
            }
        }
        std::printf(bad ? "FAILED: %d mismatch(es)\n" : "all test vectors match\n", bad);
        return bad ? 1 : 0;
    } catch (const hj::Error &e) {
        std::fprintf(stderr, "error (status %d): %s\n", static_cast<int>(e.status()), e.what());
        return 2;
    }
}
