// numpy dtype names <-> Halide element types.
#include <utility>

#include "halojit/runtime.h"

namespace halojit {
namespace {

constexpr std::pair<const char *, DType> kNames[] = {
    {"bool", {1, 1}},      {"int8", {0, 8}},     {"int16", {0, 16}},   {"int32", {0, 32}},
    {"int64", {0, 64}},    {"uint8", {1, 8}},    {"uint16", {1, 16}},  {"uint32", {1, 32}},
    {"uint64", {1, 64}},   {"float16", {2, 16}}, {"float32", {2, 32}}, {"float64", {2, 64}},
    {"bfloat16", {4, 16}},
};

bool is_byte_bool(DType t) { return t.code == 1 && (t.bits == 1 || t.bits == 8); }

}  // namespace

std::string dtype_name(DType t) {
    for (const auto &[name, dtype] : kNames) {
        if (dtype == t) return name;
    }
    static const char *codes[] = {"int", "uint", "float", "handle", "bfloat"};
    std::string code = t.code < 5 ? codes[t.code] : "code" + std::to_string(t.code) + "_";
    return code + std::to_string(t.bits);
}

DType dtype_from_name(const std::string &name) {
    for (const auto &[n, dtype] : kNames) {
        if (name == n) return dtype;
    }
    std::string valid;
    for (const auto &[n, dtype] : kNames) valid += (valid.empty() ? "" : ", ") + std::string(n);
    throw Error(ErrorKind::Value, "unknown dtype '" + name + "'; expected one of " + valid);
}

bool dtype_compatible(DType expected, DType given) {
    return expected == given || (is_byte_bool(expected) && is_byte_bool(given));
}

}  // namespace halojit
