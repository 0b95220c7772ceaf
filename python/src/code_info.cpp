// CodeInfo from a live code object (see code_info.h).
#include "code_info.h"

#include <Python.h>

#include "tracer/code_info.h"

namespace dv::py {
namespace pyb = pybind11;

[[noreturn]] void raise(const dv::Error& e) { throw pyb::value_error(e.message()); }

pyb::object as_code(pyb::handle x) {
  if (PyCode_Check(x.ptr())) return pyb::reinterpret_borrow<pyb::object>(x);
  pyb::object o = pyb::reinterpret_borrow<pyb::object>(x);
  if (pyb::hasattr(o, "__func__")) o = o.attr("__func__");
  for (const char* a : {"__code__", "gi_code", "ag_code", "cr_code"}) {
    if (pyb::hasattr(o, a)) return o.attr(a);
  }
  throw pyb::type_error("expected a code object, function, method, generator or coroutine");
}

void fill_code_info(pyb::handle code, bc::CodeInfo& info, bool with_nested, bool with_reprs) {
  if (!dv::fill_code_info(code.ptr(), info, with_nested, with_reprs)) throw pyb::error_already_set();
}

std::shared_ptr<bc::CodeInfo> code_info(pyb::handle code, bool with_nested, bool with_reprs) {
  auto info = std::make_shared<bc::CodeInfo>();
  fill_code_info(code, *info, with_nested, with_reprs);
  return info;
}

}  // namespace dv::py
