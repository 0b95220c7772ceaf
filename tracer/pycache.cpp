// Looks up the Python objects the tracer needs (see pycache.h).
#include "pycache.h"

namespace dv {
namespace {
Py& g_py = *new Py();  // never destroyed: static destructors run after Py_Finalize
bool g_ready = false;

bool get(Ref& out, PyObject* from, const char* name) {
  out = Ref::steal(PyObject_GetAttrString(from, name));
  return static_cast<bool>(out);
}
}  // namespace

bool py_init() {
  if (g_ready) return true;
  Py p;
  p.torch = Ref::steal(PyImport_ImportModule("torch"));
  Ref nn = Ref::steal(PyImport_ImportModule("torch.nn"));
  Ref C = Ref::steal(PyImport_ImportModule("torch._C"));
  p.operator_mod = Ref::steal(PyImport_ImportModule("operator"));
  p.builtins = Ref::steal(PyImport_ImportModule("builtins"));
  Ref functools = Ref::steal(PyImport_ImportModule("functools"));
  Ref enum_mod = Ref::steal(PyImport_ImportModule("enum"));
  if (!p.torch || !nn || !C || !p.operator_mod || !p.builtins || !functools || !enum_mod) return false;
  if (!get(p.torch_Tensor, p.torch.get(), "Tensor") || !get(p.torch_Size, p.torch.get(), "Size") ||
      !get(p.torch_dtype, p.torch.get(), "dtype") || !get(p.torch_device, p.torch.get(), "device") ||
      !get(p.nn_Module, nn.get(), "Module") || !get(p.nn_Parameter, nn.get(), "Parameter") ||
      !get(p.no_grad, p.torch.get(), "no_grad") || !get(p.enable_grad, p.torch.get(), "enable_grad") ||
      !get(p.set_grad_enabled, p.torch.get(), "set_grad_enabled") ||
      !get(p.set_grad_enabled_fn, C.get(), "_set_grad_enabled") || !get(p.tensorbase, C.get(), "TensorBase") ||
      !get(p.functools_partial, functools.get(), "partial") || !get(p.functools_reduce, functools.get(), "reduce") ||
      !get(p.torch_finfo, p.torch.get(), "finfo") || !get(p.torch_iinfo, p.torch.get(), "iinfo") ||
      !get(p.module_setattr, p.nn_Module.get(), "__setattr__") ||
      !get(p.object_setattr, reinterpret_cast<PyObject*>(&PyBaseObject_Type), "__setattr__") ||
      !get(p.getitem, p.operator_mod.get(), "getitem") || !get(p.setitem, p.operator_mod.get(), "setitem") ||
      !get(p.getattr_fn, p.builtins.get(), "getattr") || !get(p.sym_int, p.torch.get(), "SymInt") ||
      !get(p.sym_bool, p.torch.get(), "SymBool") || !get(p.sym_float, p.torch.get(), "SymFloat") ||
      !get(p.enum_meta, enum_mod.get(), "EnumMeta") || !get(p.torch_layout, p.torch.get(), "layout") ||
      !get(p.torch_memory_format, p.torch.get(), "memory_format"))
    return false;
  p.meta_str = Ref::steal(PyUnicode_InternFromString("meta"));
  g_py = std::move(p);
  g_ready = true;
  return true;
}

const Py& py() { return g_py; }

PyTypeObject* method_wrapper_type() {
  static PyTypeObject* const tp = [] {
    Ref one = Ref::steal(PyLong_FromLong(1));
    Ref m = one ? Ref::steal(PyObject_GetAttrString(one.get(), "__add__")) : Ref();
    if (!m) PyErr_Clear();
    return m ? Py_TYPE(m.get()) : nullptr;
  }();
  return tp;
}

PyObject* kept_attr(const char* module, const char* name) {
  Ref m = Ref::steal(PyImport_ImportModule(module));
  PyObject* a = m ? PyObject_GetAttrString(m.get(), name) : nullptr;
  if (!a) PyErr_Clear();
  return a;
}

Ref dtype_of_python_type(PyObject* o) {
  const char* dt = o == reinterpret_cast<PyObject*>(&PyBool_Type)      ? "bool"
                   : o == reinterpret_cast<PyObject*>(&PyLong_Type)    ? "int64"
                   : o == reinterpret_cast<PyObject*>(&PyFloat_Type)   ? "float64"
                   : o == reinterpret_cast<PyObject*>(&PyComplex_Type) ? "complex128"
                                                                       : nullptr;
  return dt ? Ref::steal(PyObject_GetAttrString(py().torch.get(), dt)) : Ref();
}

bool is_sym(PyObject* o) {
  PyObject* t = reinterpret_cast<PyObject*>(Py_TYPE(o));
  return t == g_py.sym_int.get() || t == g_py.sym_bool.get() || t == g_py.sym_float.get();
}

PyTypeObject* sym_python_type(PyObject* o) {
  PyObject* t = reinterpret_cast<PyObject*>(Py_TYPE(o));
  return t == g_py.sym_int.get() ? &PyLong_Type : t == g_py.sym_float.get() ? &PyFloat_Type : t == g_py.sym_bool.get() ? &PyBool_Type : nullptr;
}

}  // namespace dv
