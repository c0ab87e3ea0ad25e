// Strict recursive-descent JSON reader (see json.h).
#include "json.h"

#include <cerrno>
#include <cstdlib>
#include <string>

#include "halojit/runtime.h"

namespace halojit::json {
namespace {

constexpr int kMaxDepth = 64;

class Parser {
public:
    explicit Parser(const std::string &text) : s_(text) {}

    Value parse_document() {
        Value v = value(0);
        skip_ws();
        if (pos_ != s_.size()) fail("unexpected text after the end");
        return v;
    }

private:
    [[noreturn]] void fail(const std::string &msg) const {
        throw Error(ErrorKind::Artifact, "manifest is not valid JSON at byte " + std::to_string(pos_) + ": " + msg);
    }

    void skip_ws() {
        while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) {
            pos_++;
        }
    }

    bool consume(const char *word) {
        size_t n = std::char_traits<char>::length(word);
        if (s_.compare(pos_, n, word) != 0) return false;
        pos_ += n;
        return true;
    }

    Value value(int depth) {
        if (depth > kMaxDepth) fail("nested too deeply");
        skip_ws();
        if (pos_ >= s_.size()) fail("unexpected end");
        Value v;
        const char c = s_[pos_];
        if (c == '{') {
            v.type = Value::Type::Object;
            pos_++;
            skip_ws();
            if (pos_ < s_.size() && s_[pos_] == '}') {
                pos_++;
                return v;
            }
            while (true) {
                skip_ws();
                if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string key");
                std::string key = string();
                skip_ws();
                if (pos_ >= s_.size() || s_[pos_] != ':') fail("expected ':'");
                pos_++;
                v.object.emplace_back(std::move(key), value(depth + 1));
                skip_ws();
                if (pos_ < s_.size() && s_[pos_] == ',') {
                    pos_++;
                } else if (pos_ < s_.size() && s_[pos_] == '}') {
                    pos_++;
                    return v;
                } else {
                    fail("expected ',' or '}'");
                }
            }
        }
        if (c == '[') {
            v.type = Value::Type::Array;
            pos_++;
            skip_ws();
            if (pos_ < s_.size() && s_[pos_] == ']') {
                pos_++;
                return v;
            }
            while (true) {
                v.array.push_back(value(depth + 1));
                skip_ws();
                if (pos_ < s_.size() && s_[pos_] == ',') {
                    pos_++;
                } else if (pos_ < s_.size() && s_[pos_] == ']') {
                    pos_++;
                    return v;
                } else {
                    fail("expected ',' or ']'");
                }
            }
        }
        if (c == '"') {
            v.type = Value::Type::String;
            v.string = string();
            return v;
        }
        if (consume("true")) {
            v.type = Value::Type::Bool;
            v.boolean = true;
            return v;
        }
        if (consume("false")) {
            v.type = Value::Type::Bool;
            return v;
        }
        if (consume("null")) return v;
        return number();
    }

    Value number() {
        const size_t start = pos_;
        bool is_int = true;
        if (pos_ < s_.size() && s_[pos_] == '-') pos_++;
        while (pos_ < s_.size()) {
            const char c = s_[pos_];
            if (c >= '0' && c <= '9') {
                pos_++;
            } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
                is_int = false;
                pos_++;
            } else {
                break;
            }
        }
        const std::string text = s_.substr(start, pos_ - start);
        if (text.empty() || text == "-") fail("expected a value");
        Value v;
        char *end = nullptr;
        errno = 0;
        if (is_int) {
            v.type = Value::Type::Int;
            v.integer = std::strtoll(text.c_str(), &end, 10);
            v.number = static_cast<double>(v.integer);
        } else {
            v.type = Value::Type::Double;
            v.number = std::strtod(text.c_str(), &end);
        }
        if (errno != 0 || end != text.c_str() + text.size()) fail("bad number '" + text + "'");
        return v;
    }

    static void append_utf8(std::string &out, uint32_t cp) {
        if (cp < 0x80) {
            out += static_cast<char>(cp);
        } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
            out += static_cast<char>(0xF0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        }
    }

    uint32_t hex4() {
        if (pos_ + 4 > s_.size()) fail("short \\u escape");
        uint32_t cp = 0;
        for (int i = 0; i < 4; i++) {
            const char c = s_[pos_++];
            cp <<= 4;
            if (c >= '0' && c <= '9') cp |= c - '0';
            else if (c >= 'a' && c <= 'f') cp |= c - 'a' + 10;
            else if (c >= 'A' && c <= 'F') cp |= c - 'A' + 10;
            else fail("bad \\u escape");
        }
        return cp;
    }

    std::string string() {
        pos_++;  // opening quote
        std::string out;
        while (true) {
            if (pos_ >= s_.size()) fail("unterminated string");
            const char c = s_[pos_++];
            if (c == '"') return out;
            if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
            if (c != '\\') {
                out += c;
                continue;
            }
            if (pos_ >= s_.size()) fail("unterminated escape");
            const char e = s_[pos_++];
            switch (e) {
                case '"': out += '"'; break;
                case '\\': out += '\\'; break;
                case '/': out += '/'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'n': out += '\n'; break;
                case 'r': out += '\r'; break;
                case 't': out += '\t'; break;
                case 'u': {
                    uint32_t cp = hex4();
                    if (cp >= 0xD800 && cp < 0xDC00 && pos_ + 1 < s_.size() && s_[pos_] == '\\' &&
                        s_[pos_ + 1] == 'u') {
                        pos_ += 2;
                        const uint32_t low = hex4();
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                    }
                    append_utf8(out, cp);
                    break;
                }
                default: fail(std::string("bad escape \\") + e);
            }
        }
    }

    const std::string &s_;
    size_t pos_ = 0;
};

[[noreturn]] void type_error(const std::string &what, const char *expected) {
    throw Error(ErrorKind::Artifact, "manifest: " + what + " should be " + expected);
}

}  // namespace

const Value *Value::find(const std::string &key) const {
    if (type != Type::Object) return nullptr;
    for (const auto &[k, v] : object) {
        if (k == key) return &v;
    }
    return nullptr;
}

const Value &Value::at(const std::string &key, const std::string &what) const {
    if (type != Type::Object) type_error(what, "an object");
    const Value *v = find(key);
    if (!v) throw Error(ErrorKind::Artifact, "manifest: " + what + " has no '" + key + "'");
    return *v;
}

int64_t Value::as_int(const std::string &what) const {
    if (type != Type::Int) type_error(what, "an integer");
    return integer;
}

double Value::as_double(const std::string &what) const {
    if (type != Type::Int && type != Type::Double) type_error(what, "a number");
    return number;
}

bool Value::as_bool(const std::string &what) const {
    if (type != Type::Bool) type_error(what, "true or false");
    return boolean;
}

const std::string &Value::as_string(const std::string &what) const {
    if (type != Type::String) type_error(what, "a string");
    return string;
}

const std::vector<Value> &Value::as_array(const std::string &what) const {
    if (type != Type::Array) type_error(what, "an array");
    return array;
}

std::vector<int64_t> Value::as_int_vector(const std::string &what) const {
    std::vector<int64_t> out;
    const auto &items = as_array(what);
    for (size_t i = 0; i < items.size(); i++) out.push_back(items[i].as_int(what + "[" + std::to_string(i) + "]"));
    return out;
}

Value parse(const std::string &text) { return Parser(text).parse_document(); }

}  // namespace halojit::json
