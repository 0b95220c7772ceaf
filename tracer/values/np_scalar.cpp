// A numpy.float64 whose value is symbolic (VK::NpScalar): an argument that changed between compiles
// (a mixup `lam` drawn with np.random.beta each step), taken as a float argument is (a 0-d float64
// tensor input read with item(): self, a Sym), but still a NumPy scalar wherever eager could tell:
// type(), what leaves the graph (rebuilt as numpy.float64(<the float>)), arithmetic with numbers
// (np.float64 + 1 is an np.float64, a graph node). A torch operator reads it as the Python float it
// subclasses (its dtype rules are a float's), so it is the Sym there (Kind::graph_arg). Anywhere else
// -- a NumPy function, a method, torch.tensor(lam) (float64, where a float gives float32), a Python
// callable -- it is specialised: the constant it is, its value guarded, as before it changed.
#include <cstring>

#include "tracer/pycache.h"
#include "tracer/rebuild.h"
#include "tracer/values/kind.h"

namespace dv {

namespace {
PyObject* numpy_type(PyObject*& cache, const char* name) {  // numpy.<name>, kept for the process once NumPy is imported
  if (cache) return cache;
  static PyObject* numpy = PyUnicode_InternFromString("numpy");
  PyObject* np = PyImport_GetModule(numpy);
  if (!np) return PyErr_Clear(), nullptr;
  PyObject* t = PyObject_GetAttrString(np, name);
  Py_DECREF(np);
  if (!t || !PyType_Check(t)) return Py_XDECREF(t), PyErr_Clear(), nullptr;
  return cache = t;
}
}  // namespace

PyObject* numpy_float64_type() {
  static PyObject* type = nullptr;
  return numpy_type(type, "float64");
}

PyObject* numpy_int64_type() {
  static PyObject* type = nullptr;
  return numpy_type(type, "int64");
}

bool numpy_float64(PyObject* o) {
  PyObject* t = numpy_float64_type();
  return t && reinterpret_cast<PyObject*>(Py_TYPE(o)) == t;
}

bool numpy_int64(PyObject* o) {
  PyObject* t = numpy_int64_type();
  return t && reinterpret_cast<PyObject*>(Py_TYPE(o)) == t;
}

bool np_scalar_number(const VPtr& v) {
  return v->kind == VK::NpScalar && v->obj && (v->obj.get() == numpy_float64_type() || v->obj.get() == numpy_int64_type());
}

bool np_int_as_index(Translator& t, VPtr& v) {
  if (v->kind == VK::NpScalar && v->obj.get() == numpy_int64_type()) v = v->self;
  else if (v->kind == VK::Object && numpy_int64(v->obj.get())) v = t.constant_steal(PyNumber_Index(v->obj.get()));
  return v != nullptr || (PyErr_Clear(), false);
}

VPtr np_scalar_value(Translator& t, const VPtr& sym, PyObject* type) {
  VPtr v = t.make(VK::NpScalar);
  v->self = sym;
  v->obj = Ref::borrow(type);
  return v;
}

Ref np_scalar_specialized(Translator& t, const VPtr& v) {
  Ref r = t.specialize(v->self);  // the ShapeEnv guards the value
  return r ? Ref::steal(PyObject_CallOneArg(v->obj.get(), r.get())) : Ref();
}

Status np_scalar_constant(Translator& t, Frame& f, VPtr& v) {
  if (v->kind != VK::NpScalar) return std::nullopt;
  Ref r = np_scalar_specialized(t, v);
  if (!r) return PyErr_Clear(), t.brk(f, "DV0021", "cannot specialise a symbolic NumPy scalar");
  v = t.make(VK::Object);  // as ValueBuilder wraps a NumPy scalar it takes as a constant
  v->obj = r;
  return std::nullopt;
}

template <>
struct Kind<VK::NpScalar> {
  static void describe(const Value& v, std::string& out, int depth) {
    const char* name = v.obj && PyType_Check(v.obj.get()) ? reinterpret_cast<PyTypeObject*>(v.obj.get())->tp_name : "?";
    if (const char* dot = std::strrchr(name, '.')) name = dot + 1;  // numpy.float64: np.float64(...)
    out += std::string("np.") + name + "(";
    if (v.self) describe_into(*v.self, out, depth + 1);
    out += ")";
  }
  static PyObject* python_type(Translator& /*t*/, const VPtr& v) { return v->obj.get(); }
  static std::optional<Ref> as_python(Translator& t, const VPtr& v, bool meta) {
    if (meta) return v->self->obj;  // (a torch operator's example reads the float)
    Ref r = np_scalar_specialized(t, v);
    if (!r) return PyErr_Clear(), std::nullopt;
    return r;
  }
  static bool graph_arg(Translator& t, const VPtr& v, ArgTree& out) { return ops(VK::Sym).graph_arg(t, v->self, out); }
  static Status truth(Translator& t, Frame& f, const VPtr& v, bool& out) { return ops(VK::Sym).truth(t, f, v->self, out); }
  static constexpr auto iterate = no_answer::iterate;
  // lam.item(), lam.astype(...), lam.dtype: of the value, specialised
  static Status getattr(Translator& t, Frame& f, const VPtr& v, const std::string& name, VPtr& out) {
    VPtr c = v;
    if (Status s = np_scalar_constant(t, f, c)) return s;
    return ops(VK::Object).getattr(t, f, c, name, out);
  }
  static constexpr auto call = no_answer::call;
  static constexpr auto setattr = no_answer::setattr;
  static constexpr auto call_method = no_answer::call_method;
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    if (v->source) return r.e.source(*v->source);  // the argument itself
    r.e.callable_const(v->obj.get());
    if (!r.value(v->self)) return false;
    r.e.call(1);
    return true;
  }
};
DV_KIND(NpScalar, "NumPy scalar")

}  // namespace dv
