// A string formatted from values of the trace (VK::StrFormat): f"{x.shape}", "{} {}".format(n, t).
// As TorchDynamo's StringFormatVariable, the text is made after the graph by the transformed code
// (`fmt.format(*args, **kwargs)`), so a format of a symbolic size neither breaks nor specialises the
// compile. obj = the format string; items = its arguments, positional first, then the keyword ones
// named by keys (one key each, in order).
//
// Unlike TorchDynamo's, it never formats a value that may change before the graph's end: the
// arguments are symbolic numbers, tensors of exact type torch.Tensor that do not require grad (each a
// clone in the graph, so that an in-place op after the format does not show), NumPy scalars (a
// symbolic one is rebuilt as NumPy's type), containers of those (copied) and other formatted strings. Anything else, a tensor that requires grad (its text names its
// grad_fn, which only eager knows) or a format the arguments' types refuse, breaks as before.
#include "tracer/pycache.h"
#include "tracer/rebuild.h"
#include "tracer/values/kind.h"

namespace dv {

using cg::N;

namespace {

// Stands for `v` where the format is tried on placeholders (same type and shape, any value), or null:
// `v` cannot be formatted later. `out` gets what the value holds when formatted after the graph.
Ref stand_in(Translator& t, Frame& f, const VPtr& v, VPtr& out, Translator::Status& st) {
  switch (v->kind) {
    case VK::Const: out = v; return v->obj;
    case VK::StrFormat: out = v; return Ref::steal(PyUnicode_FromString(""));
    case VK::Object:  // a NumPy scalar (immutable): itself, formatted by its own type after the graph
      if (!v->obj || !numpy_scalar(v->obj.get())) return Ref();
      out = v;
      return v->obj;
    case VK::NpScalar: {  // a symbolic NumPy float64 or int64: the number, as NumPy's type after the graph
      out = v;
      Ref zero = Ref::steal(v->obj.get() == numpy_int64_type() ? PyLong_FromLong(0) : PyFloat_FromDouble(0.0));
      return zero ? Ref::steal(PyObject_CallOneArg(v->obj.get(), zero.get())) : Ref();
    }
    case VK::Sym: {
      out = v;
      PyObject* tp = ops(VK::Sym).python_type(t, v);
      if (tp == reinterpret_cast<PyObject*>(&PyBool_Type)) return Ref::borrow(Py_False);
      if (tp == reinterpret_cast<PyObject*>(&PyFloat_Type)) return Ref::steal(PyFloat_FromDouble(0.0));
      return tp ? Ref::steal(PyLong_FromLong(0)) : Ref();
    }
    case VK::Tensor: {
      if (ops(VK::Tensor).python_type(t, v) != py().torch_Tensor.get() || !v->obj) return Ref();
      Ref rg = Ref::steal(PyObject_GetAttrString(v->obj.get(), "requires_grad"));
      if (!rg || rg.get() != Py_False) return PyErr_Clear(), Ref();
      static PyObject* clone = PyObject_GetAttrString(py().torch.get(), "clone");  // kept for the process
      if (!clone) return PyErr_Clear(), Ref();
      if ((st = t.graph_call(f, Ref::borrow(clone), "", {v}, {}, out))) return Ref();
      // Tensor.__format__: a 0-d tensor formats its item(); any other its text (a spec: TypeError)
      Ref dim = Ref::steal(PyObject_CallMethod(v->obj.get(), "dim", nullptr));
      if (!dim) return PyErr_Clear(), Ref();
      if (PyLong_AsLong(dim.get()) != 0) return v->obj;
      Ref fp = Ref::steal(PyObject_CallMethod(v->obj.get(), "is_floating_point", nullptr));
      Ref cx = Ref::steal(PyObject_CallMethod(v->obj.get(), "is_complex", nullptr));
      Ref dt = Ref::steal(PyObject_GetAttrString(v->obj.get(), "dtype"));
      if (!fp || !cx || !dt) return PyErr_Clear(), Ref();
      static PyObject* bool_dtype = PyObject_GetAttrString(py().torch.get(), "bool");
      if (cx.get() == Py_True) return Ref::steal(PyComplex_FromDoubles(0.0, 0.0));
      if (fp.get() == Py_True) return Ref::steal(PyFloat_FromDouble(0.0));
      if (dt.get() == bool_dtype) return Ref::borrow(Py_False);
      return Ref::steal(PyLong_FromLong(0));
    }
    case VK::Tuple:
    case VK::List: {
      const bool size = v->kind == VK::Tuple && v->obj.get() == py().torch_Size.get();
      if (v->obj && !size) return Ref();  // namedtuples, deques ...: their own __format__
      if (v->lazy) return Ref();  // a list or tuple from the frame not read yet
      VPtr copy = t.make(v->kind);  // the items now: a list appended to later formats as it was
      copy->obj = v->obj;
      Ref items = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(v->items.size())));
      for (size_t i = 0; i < v->items.size(); ++i) {
        VPtr item;
        Ref s = stand_in(t, f, v->items[i], item, st);
        if (!s) return Ref();
        copy->items.push_back(item);
        PyTuple_SET_ITEM(items.get(), static_cast<Py_ssize_t>(i), s.release());
      }
      out = copy;
      if (size) {
        for (size_t i = 0; i < v->items.size(); ++i)
          if (!PyLong_Check(PyTuple_GET_ITEM(items.get(), static_cast<Py_ssize_t>(i)))) return Ref();
        return Ref::steal(PyObject_CallOneArg(py().torch_Size.get(), items.get()));
      }
      return v->kind == VK::Tuple ? items : Ref::steal(PySequence_List(items.get()));
    }
    default: return Ref();
  }
}

bool all_constant(const std::vector<VPtr>& args, const KwArgs& kwargs) {
  for (const VPtr& a : args)
    if (a->kind != VK::Const) return false;
  for (const auto& kv : kwargs)
    if (kv.second->kind != VK::Const) return false;
  return true;
}

}  // namespace

Status str_format(Translator& t, Frame& f, PyObject* fmt, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out, bool& handled) {
  handled = false;
  if (!PyUnicode_CheckExact(fmt) || all_constant(args, kwargs)) return std::nullopt;  // folded as a pure call
  // Fields that read attributes or items of an argument ("{0.shape}", "{d[k]}") would read them later
  static PyObject* parser = [] {
    Ref mod = Ref::steal(PyImport_ImportModule("_string"));
    PyObject* p = mod ? PyObject_GetAttrString(mod.get(), "formatter_parser") : nullptr;  // kept for the process
    if (!p) PyErr_Clear();
    return p;
  }();
  Ref fields = parser ? Ref::steal(PySequence_List(Ref::steal(PyObject_CallOneArg(parser, fmt)).get())) : Ref();
  if (!fields) {
    PyErr_Clear();
    return std::nullopt;
  }
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(fields.get()); ++i) {
    PyObject* name = PyTuple_GET_ITEM(PyList_GET_ITEM(fields.get(), i), 1);
    if (name != Py_None && (PyUnicode_FindChar(name, '.', 0, PyUnicode_GET_LENGTH(name), 1) >= 0 ||
                            PyUnicode_FindChar(name, '[', 0, PyUnicode_GET_LENGTH(name), 1) >= 0))
      return t.brk(f, "DV0023", "str.format field reading an attribute or item of a traced value");
  }
  VPtr r = t.make(VK::StrFormat);
  r->obj = Ref::borrow(fmt);
  Ref pargs = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
  Ref pkw = Ref::steal(PyDict_New());
  auto add = [&](const VPtr& a, Ref& stand, Status& st) {
    VPtr held;
    stand = stand_in(t, f, a, held, st);
    if (!stand) return false;
    r->items.push_back(held);
    return true;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    Ref s;
    Status st;
    if (!add(args[i], s, st))
      return st ? st : t.brk(f, "DV0023", std::string("str.format of a ") + vk_name(args[i]->kind) + " that may change before the graph ends");
    PyTuple_SET_ITEM(pargs.get(), static_cast<Py_ssize_t>(i), s.release());
  }
  for (const auto& [k, v] : kwargs) {
    Ref s;
    Status st;
    if (!add(v, s, st))
      return st ? st : t.brk(f, "DV0023", std::string("str.format of a ") + vk_name(v->kind) + " that may change before the graph ends");
    r->keys.push_back(Ref::steal(PyUnicode_FromString(k.c_str())));
    PyDict_SetItemString(pkw.get(), k.c_str(), s.get());
  }
  // The format must accept arguments of these types (eager raises where it does not)
  static PyObject* format_name = PyUnicode_InternFromString("format");
  Ref bound = Ref::steal(PyObject_GetAttr(fmt, format_name));
  Ref tried = bound ? Ref::steal(PyObject_Call(bound.get(), pargs.get(), pkw.get())) : Ref();
  if (!tried) {
    PyErr_Clear();
    return t.brk(f, "DV0023", "str.format of traced values that their types refuse");
  }
  handled = true;
  out = r;
  return std::nullopt;
}

template <>
struct Kind<VK::StrFormat> {
  static void describe(const Value& v, std::string& out, int depth) {
    out += v.obj ? repr_of(v.obj.get()) : "''";
    out += ".format(";
    for (size_t i = 0; i < v.items.size(); ++i) {
      if (i) out += ", ";
      const size_t kw = v.items.size() - v.keys.size();
      if (i >= kw) out += repr_of(v.keys[i - kw].get()) + "=";
      describe_into(*v.items[i], out, depth + 1);
    }
    out += ")";
  }
  static PyObject* python_type(Translator& /*t*/, const VPtr& /*v*/) { return reinterpret_cast<PyObject*>(&PyUnicode_Type); }
  static constexpr auto as_python = no_answer::as_python;  // its text is made after the graph
  static constexpr auto graph_arg = no_answer::graph_arg;
  static Status truth(Translator& t, Frame& f, const VPtr& /*v*/, bool& /*out*/) {
    return t.brk(f, "DV0023", "truth of a string formatted from traced values");
  }
  static constexpr auto iterate = no_answer::iterate;
  static constexpr auto getattr = no_answer::getattr;
  static constexpr auto setattr = no_answer::setattr;
  static constexpr auto call = no_answer::call;
  static constexpr auto call_method = no_answer::call_method;
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    // str.format(fmt, *(args...), **{k: v ...})
    static PyObject* format = PyObject_GetAttrString(reinterpret_cast<PyObject*>(&PyUnicode_Type), "format");  // kept
    if (!format) return PyErr_Clear(), false;
    r.e.callable_const(format);
    r.e.emit(N::LOAD_CONST, r.e.konst(v->obj.get()));
    const size_t npos = v->items.size() - v->keys.size();
    for (size_t i = 0; i < npos; ++i)
      if (!r.value(v->items[i])) return false;
    r.e.emit(N::BUILD_TUPLE, static_cast<int>(npos + 1));
    for (size_t i = npos; i < v->items.size(); ++i) {
      r.e.emit(N::LOAD_CONST, r.e.konst(v->keys[i - npos].get()));
      if (!r.value(v->items[i])) return false;
    }
    r.e.emit(N::BUILD_MAP, static_cast<int>(v->keys.size()));
    r.e.emit(N::CALL_FUNCTION_EX, 1);
    return r.remember(v);
  }
};
DV_KIND(StrFormat, "formatted string")

}  // namespace dv
