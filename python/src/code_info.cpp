// CodeInfo from a live code object (see code_info.h).
#include "code_info.h"

#include <Python.h>

#include "core/opcodes.h"

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

static std::string str_of(PyObject* s) {
  Py_ssize_t n = 0;
  const char* c = PyUnicode_AsUTF8AndSize(s, &n);
  if (!c) throw pyb::error_already_set();
  return std::string(c, static_cast<size_t>(n));
}

static std::string bytes_of(PyObject* b) {
  char* c = nullptr;
  Py_ssize_t n = 0;
  if (PyBytes_AsStringAndSize(b, &c, &n) < 0) throw pyb::error_already_set();
  return std::string(c, static_cast<size_t>(n));
}

// co_code as the code.co_code getter returns it (Objects/codeobject.c deopt_code), read straight
// from the adaptive instructions with core's deopt table: no intermediate bytes object.
static std::string deoptimised_code(PyCodeObject* co) {
  const auto* units = reinterpret_cast<const uint8_t*>(co->co_code_adaptive);
  const Py_ssize_t n = Py_SIZE(co);  // code units
  std::string out(static_cast<size_t>(n) * 2, '\0');
  for (Py_ssize_t i = 0; i < n; ++i) {
    const bc::OpInfo& op = bc::op_info(units[2 * i]);
    out[2 * i] = static_cast<char>(op.deopt);
    out[2 * i + 1] = static_cast<char>(units[2 * i + 1]);
    if (op.name) i += bc::op_info(op.deopt).caches;  // cache units stay zero
  }
  return out;
}

static void strings_of(PyObject* tuple, std::vector<std::string>& out) {
  const Py_ssize_t n = PyTuple_GET_SIZE(tuple);
  out.reserve(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) out.push_back(str_of(PyTuple_GET_ITEM(tuple, i)));
}

// repr() of the constants that dominate co_consts, computed without a Python call; false for
// anything else. Matches Objects/unicodeobject.c unicode_repr for ASCII strings exactly.
static bool fast_repr(PyObject* o, std::string& out) {
  if (o == Py_None) return out.assign("None"), true;
  if (o == Py_True) return out.assign("True"), true;
  if (o == Py_False) return out.assign("False"), true;
  if (PyLong_CheckExact(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return false;
    }
    out = std::to_string(v);
    return true;
  }
  if (!PyUnicode_CheckExact(o) || !PyUnicode_IS_ASCII(o)) return false;
  const char* c = reinterpret_cast<const char*>(PyUnicode_1BYTE_DATA(o));
  const Py_ssize_t n = PyUnicode_GET_LENGTH(o);
  bool squote = false, dquote = false;
  for (Py_ssize_t i = 0; i < n; ++i) {
    squote |= c[i] == '\'';
    dquote |= c[i] == '"';
  }
  const char quote = (squote && !dquote) ? '"' : '\'';
  static const char* hex = "0123456789abcdef";
  out.clear();
  out.reserve(static_cast<size_t>(n) + 2);
  out.push_back(quote);
  for (Py_ssize_t i = 0; i < n; ++i) {
    const unsigned char ch = static_cast<unsigned char>(c[i]);
    if (ch == static_cast<unsigned char>(quote) || ch == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(ch));
    } else if (ch == '\t') {
      out += "\\t";
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (ch < ' ' || ch == 0x7f) {
      out += "\\x";
      out.push_back(hex[ch >> 4]);
      out.push_back(hex[ch & 15]);
    } else {
      out.push_back(static_cast<char>(ch));
    }
  }
  out.push_back(quote);
  return true;
}

std::shared_ptr<bc::CodeInfo> code_info(pyb::handle code, bool with_nested, bool with_reprs) {
  if (!PyCode_Check(code.ptr())) throw pyb::type_error("expected a code object");
  auto* co = reinterpret_cast<PyCodeObject*>(code.ptr());
  auto info = std::make_shared<bc::CodeInfo>();
  info->name = str_of(co->co_name);
  info->qualname = str_of(co->co_qualname);
  info->filename = str_of(co->co_filename);
  info->firstlineno = co->co_firstlineno;
  info->argcount = co->co_argcount;
  info->posonlyargcount = co->co_posonlyargcount;
  info->kwonlyargcount = co->co_kwonlyargcount;
  info->flags = co->co_flags;
  info->stacksize = co->co_stacksize;
  info->code = deoptimised_code(co);
  info->linetable = bytes_of(co->co_linetable);
  info->exceptiontable = bytes_of(co->co_exceptiontable);
  strings_of(co->co_names, info->names);
  strings_of(co->co_localsplusnames, info->localsplusnames);
  const std::string kinds = bytes_of(co->co_localspluskinds);
  info->localspluskinds.assign(kinds.begin(), kinds.end());
  Py_ssize_t nc = PyTuple_GET_SIZE(co->co_consts);
  info->const_code.assign(static_cast<size_t>(nc), -1);
  if (!with_reprs) nc = 0;
  info->const_reprs.reserve(static_cast<size_t>(nc));
  for (Py_ssize_t i = 0; i < nc; ++i) {
    PyObject* c = PyTuple_GET_ITEM(co->co_consts, i);
    info->const_reprs.emplace_back();
    if (!fast_repr(c, info->const_reprs.back())) {
      auto r = pyb::reinterpret_steal<pyb::object>(PyObject_Repr(c));
      if (!r) throw pyb::error_already_set();
      info->const_reprs.back() = str_of(r.ptr());
    }
    if (with_nested && PyCode_Check(c)) {
      info->const_code[static_cast<size_t>(i)] = static_cast<int32_t>(info->nested.size());
      info->nested.push_back(code_info(c, true, with_reprs));
      info->nested.back()->repr = info->const_reprs.back();  // the listing's "Disassembly of" header
    }
  }
  return info;
}

}  // namespace dv::py
