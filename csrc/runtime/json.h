// A small JSON reader for artifact manifests: objects, arrays, strings
// (with \u escapes), integers, doubles, booleans and null. Manifests are
// written by halojit itself, so the reader aims at strictness and clear
// errors, not speed. Parse failures throw Error(Artifact).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace halojit::json {

struct Value {
    enum class Type { Null, Bool, Int, Double, String, Array, Object };

    Type type = Type::Null;
    bool boolean = false;
    int64_t integer = 0;
    double number = 0;
    std::string string;
    std::vector<Value> array;
    std::vector<std::pair<std::string, Value>> object;

    // Member `key` of an object, or nullptr when absent.
    const Value *find(const std::string &key) const;

    // Typed access; each throws Error(Artifact) naming `what` (a path such
    // as "manifest.inputs[0].shape") when the value has another type.
    const Value &at(const std::string &key, const std::string &what) const;
    int64_t as_int(const std::string &what) const;
    double as_double(const std::string &what) const;
    bool as_bool(const std::string &what) const;
    const std::string &as_string(const std::string &what) const;
    const std::vector<Value> &as_array(const std::string &what) const;
    std::vector<int64_t> as_int_vector(const std::string &what) const;
};

Value parse(const std::string &text);

}  // namespace halojit::json
