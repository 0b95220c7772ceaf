// Result<T>: the return type for recoverable failures (bad bytecode, truncated tables, bad traces).
// An Error says what went wrong and where (a byte offset into the named input, or -1).
#pragma once
#include <string>
#include <utility>
#include <variant>

namespace dv {

struct Error {
  std::string what;   // human-readable: "truncated line table entry"
  std::string where;  // which input: "co_linetable", "co_code", ...
  long offset = -1;   // byte offset into `where`, or -1 when not applicable

  std::string message() const {
    std::string m = where.empty() ? what : where + ": " + what;
    if (offset >= 0) m += " (at byte " + std::to_string(offset) + ")";
    return m;
  }
};

template <class T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}            // NOLINT: implicit by design
  Result(Error err) : v_(std::move(err)) {}             // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  T& operator*() & { return std::get<0>(v_); }
  const T& operator*() const& { return std::get<0>(v_); }
  T&& operator*() && { return std::get<0>(std::move(v_)); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

inline Error make_error(std::string where, std::string what, long offset = -1) {
  return Error{std::move(what), std::move(where), offset};
}

}  // namespace dv
