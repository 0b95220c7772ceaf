// Ref: the one owning reference type for PyObject* in tracer/. Construct with Ref::steal (takes a
// new reference) or Ref::borrow (adds one); no implicit conversion from PyObject*.
#pragma once
#include <Python.h>

#include <string>
#include <utility>

namespace dv {

class Ref {
 public:
  Ref() = default;
  static Ref steal(PyObject* o) { return Ref(o); }
  static Ref borrow(PyObject* o) {
    Py_XINCREF(o);
    return Ref(o);
  }
  Ref(const Ref& r) : p_(r.p_) { Py_XINCREF(p_); }
  Ref(Ref&& r) noexcept : p_(std::exchange(r.p_, nullptr)) {}
  Ref& operator=(Ref r) noexcept {
    std::swap(p_, r.p_);
    return *this;
  }
  ~Ref() { Py_XDECREF(p_); }
  PyObject* get() const { return p_; }      // borrowed
  PyObject* release() { return std::exchange(p_, nullptr); }  // new reference to the caller
  explicit operator bool() const { return p_ != nullptr; }

 private:
  explicit Ref(PyObject* o) : p_(o) {}
  PyObject* p_ = nullptr;  // Strong reference (or null)
};

// Owned string of a Python str (empty on error, error cleared).
inline std::string str_of(PyObject* s) {
  if (!s || !PyUnicode_Check(s)) return {};
  Py_ssize_t n = 0;
  const char* c = PyUnicode_AsUTF8AndSize(s, &n);
  if (!c) {
    PyErr_Clear();
    return {};
  }
  return std::string(c, static_cast<size_t>(n));
}

// repr(o) as a std::string, never failing (errors become "<repr failed>").
inline std::string repr_of(PyObject* o) {
  Ref r = Ref::steal(PyObject_Repr(o));
  if (!r) {
    PyErr_Clear();
    return "<repr failed>";
  }
  return str_of(r.get());
}

// The keys of a dict, as a list, in the dict's own order: an OrderedDict's linked order (which
// move_to_end changes, not the storage's), read by OrderedDict's C iterator (no Python runs); null
// with the error set on failure.
inline Ref dict_keys_in_order(PyObject* d) {
  if (!PyODict_Check(d)) return Ref::steal(PyDict_Keys(d));
  Ref it = Ref::steal(PyODict_Type.tp_iter(d));
  return it ? Ref::steal(PySequence_List(it.get())) : Ref();
}

// Takes the pending Python exception (cleared) and returns its value; null when there was none.
inline Ref take_error() {
  PyObject *t, *v, *tb;
  PyErr_Fetch(&t, &v, &tb);
  PyErr_NormalizeException(&t, &v, &tb);
  Py_XDECREF(t);
  Py_XDECREF(tb);
  return Ref::steal(v);
}

}  // namespace dv
