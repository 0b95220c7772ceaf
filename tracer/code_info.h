// Builds core's Python-free CodeInfo from a live code object (CPython 3.11 C API).
#pragma once
#include <Python.h>

#include "core/bytecode.h"

namespace dv {

// Fills every field, recursing into code objects among the consts when with_nested.
// with_reprs=false leaves const_reprs empty (enough for decoding, not for listings).
// False with a Python error set on failure.
bool fill_code_info(PyObject* code, bc::CodeInfo& info, bool with_nested, bool with_reprs);

}  // namespace dv
