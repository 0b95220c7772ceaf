// CodeInfo (core's Python-free description of a code object) from a live code object, through
// the CPython 3.11-3.13 C API. Used by the engine's events (code objects in traces) and by python/src.
#include "code_info.h"

#include <cstdio>

#include "core/opcodes.h"
#include "frame_shim.h"
#include "pyref.h"

namespace dv {
namespace {

struct PyFail {};  // a Python error is set; unwinds to fill_code_info (never leaves this file)

// Assign helpers that reuse the destination's capacity (the listing path refills one CodeInfo).
void assign_str(std::string& dst, PyObject* s) {
  Py_ssize_t n = 0;
  const char* c = PyUnicode_AsUTF8AndSize(s, &n);
  if (!c) throw PyFail{};
  dst.assign(c, static_cast<size_t>(n));
}

void assign_bytes(std::string& dst, PyObject* b) {
  char* c = nullptr;
  Py_ssize_t n = 0;
  if (PyBytes_AsStringAndSize(b, &c, &n) < 0) throw PyFail{};
  dst.assign(c, static_cast<size_t>(n));
}

// co_code as the code.co_code getter returns it (Objects/codeobject.c deopt_code), read straight
// from the adaptive instructions with core's deopt table: no intermediate bytes object.
void deoptimised_code(PyCodeObject* co, std::string& out) {
  if constexpr (kPyVersion != bc::Version::py311) {
    // 3.12+: instrumented opcodes (sys.monitoring) need the interpreter's own deopt.
    Ref raw = Ref::steal(PyCode_GetCode(co));
    if (!raw) throw PyFail{};
    assign_bytes(out, raw.get());
    return;
  }
  const auto* units = reinterpret_cast<const uint8_t*>(co->co_code_adaptive);
  const Py_ssize_t n = Py_SIZE(co);  // code units
  out.assign(static_cast<size_t>(n) * 2, '\0');
  for (Py_ssize_t i = 0; i < n; ++i) {
    const bc::OpInfo& op = bc::op_info(units[2 * i]);
    out[2 * i] = static_cast<char>(op.deopt);
    out[2 * i + 1] = static_cast<char>(units[2 * i + 1]);
    if (op.name) i += bc::op_info(op.deopt).caches;  // cache units stay zero
  }
}

void strings_of(PyObject* tuple, std::vector<std::string>& out) {
  const Py_ssize_t n = PyTuple_GET_SIZE(tuple);
  out.resize(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) assign_str(out[static_cast<size_t>(i)], PyTuple_GET_ITEM(tuple, i));
}

// repr() of the constants that dominate co_consts, computed without a Python call; false for
// anything else. Matches Objects/unicodeobject.c unicode_repr for ASCII strings exactly.
bool fast_repr(PyObject* o, std::string& out) {
  if (o == Py_None) return out.assign("None"), true;
  if (PyCode_Check(o)) {  // Objects/codeobject.c code_repr: "<code object %U at %p, file \"%U\", line %d>"
    auto* co = reinterpret_cast<PyCodeObject*>(o);
    if (!PyUnicode_Check(co->co_name) || !PyUnicode_Check(co->co_filename)) return false;
    char ptr[32];
    std::snprintf(ptr, sizeof ptr, "%p", static_cast<void*>(o));
    std::string p = ptr;
    if (p.size() > 1 && p[1] == 'X') p[1] = 'x';
    else if (p.size() < 2 || p[1] != 'x') p = "0x" + p;
    std::string name, file;
    assign_str(name, co->co_name);
    assign_str(file, co->co_filename);
    out = "<code object " + name + " at " + p + ", file \"" + file + "\", line " +
          std::to_string(co->co_firstlineno != 0 ? co->co_firstlineno : -1) + ">";
    return true;
  }
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
  const char* hex = "0123456789abcdef";
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

void fill(PyObject* code, bc::CodeInfo& info, bool with_nested, bool with_reprs) {
  auto* co = reinterpret_cast<PyCodeObject*>(code);
  info.version = kPyVersion;
  assign_str(info.name, co->co_name);
  assign_str(info.qualname, co->co_qualname);
  assign_str(info.filename, co->co_filename);
  info.firstlineno = co->co_firstlineno;
  info.argcount = co->co_argcount;
  info.posonlyargcount = co->co_posonlyargcount;
  info.kwonlyargcount = co->co_kwonlyargcount;
  info.flags = co->co_flags;
  info.stacksize = co->co_stacksize;
  deoptimised_code(co, info.code);
  assign_bytes(info.linetable, co->co_linetable);
  assign_bytes(info.exceptiontable, co->co_exceptiontable);
  strings_of(co->co_names, info.names);
  strings_of(co->co_localsplusnames, info.localsplusnames);
  char* kinds = nullptr;
  Py_ssize_t nkinds = 0;
  if (PyBytes_AsStringAndSize(co->co_localspluskinds, &kinds, &nkinds) < 0) throw PyFail{};
  info.localspluskinds.assign(kinds, kinds + nkinds);
  Py_ssize_t nc = PyTuple_GET_SIZE(co->co_consts);
  info.const_code.assign(static_cast<size_t>(nc), -1);
  info.nested.clear();
  if (!with_reprs) nc = 0;
  info.const_reprs.resize(static_cast<size_t>(nc));
  for (Py_ssize_t i = 0; i < nc; ++i) {
    PyObject* c = PyTuple_GET_ITEM(co->co_consts, i);
    std::string& r = info.const_reprs[static_cast<size_t>(i)];
    if (!fast_repr(c, r)) {
      Ref rep = Ref::steal(PyObject_Repr(c));
      if (!rep) throw PyFail{};
      assign_str(r, rep.get());
    }
    if (with_nested && PyCode_Check(c)) {
      info.const_code[static_cast<size_t>(i)] = static_cast<int32_t>(info.nested.size());
      auto child = std::make_shared<bc::CodeInfo>();
      fill(c, *child, true, with_reprs);
      child->repr = r;  // the listing's "Disassembly of" header
      info.nested.push_back(std::move(child));
    }
  }
}

}  // namespace

bool fill_code_info(PyObject* code, bc::CodeInfo& info, bool with_nested, bool with_reprs) {
  if (!PyCode_Check(code)) {
    PyErr_SetString(PyExc_TypeError, "expected a code object");
    return false;
  }
  try {
    fill(code, info, with_nested, with_reprs);
    return true;
  } catch (const PyFail&) {
    return false;
  }
}

}  // namespace dv
