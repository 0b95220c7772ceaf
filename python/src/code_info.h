// Builds core's Python-free CodeInfo from a live code object (CPython 3.11 C API).
#pragma once
#include <pybind11/pybind11.h>

#include "core/bytecode.h"

namespace dv::py {

// Fills every field, recursing into code objects among the consts. Throws py::error_already_set.
// with_reprs=false leaves const_reprs empty (enough for decoding, not for listings).
std::shared_ptr<bc::CodeInfo> code_info(pybind11::handle code, bool with_nested = true,
                                        bool with_reprs = true);

// The same, refilling `info` in place (its buffers keep their capacity between calls).
void fill_code_info(pybind11::handle code, bc::CodeInfo& info, bool with_nested, bool with_reprs);

// Raises ValueError carrying the error's message.
[[noreturn]] void raise(const dv::Error& e);

// Accepts a code object, function, method, generator or coroutine (like dis) -> code object.
pybind11::object as_code(pybind11::handle x);

}  // namespace dv::py
