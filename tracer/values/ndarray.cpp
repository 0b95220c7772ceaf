// numpy.ndarray values (VK::NdArray), as TorchDynamo traces NumPy through torch._numpy: inside the
// graph an ndarray is the tensor behind it; x.numpy(), np.<fn>(...), ndarray methods, attributes,
// operators and subscripts become graph nodes calling TorchDynamo's wrappers (numpy_to_tensor_wrapper,
// numpy_method_wrapper, numpy_operator_wrapper, numpy_attr_wrapper), taken from dynview._numpy;
// torch.from_numpy / torch.as_tensor give the tensor back; codegen turns an ndarray that leaves the
// graph into a numpy.ndarray (dynview._numpy.to_numpy). Where TorchDynamo breaks, or where its result
// could differ from eager NumPy, this breaks with the reason.
#include <cstring>
#include <functional>
#include <set>

#include "tracer/pycache.h"
#include "tracer/translator.h"
#include "tracer/rebuild.h"
#include "tracer/values/kind.h"

namespace dv {

using cg::N;

namespace {

using Status = Translator::Status;
using Kwargs = std::vector<std::pair<std::string, VPtr>>;

PyObject* helpers() {  // dynview._numpy (borrowed, kept for the process; null with no error set: missing)
  static PyObject* mod = [] {
    PyObject* m = PyImport_ImportModule("dynview._numpy");
    if (!m) PyErr_Clear();
    return m;
  }();
  return mod;
}

// dynview._numpy.<name>(args...): a new reference, or null (error cleared).
Ref helper(const char* name, PyObject* arg) {
  if (!helpers()) return {};
  Ref fn = Ref::steal(PyObject_GetAttrString(helpers(), name));
  Ref r = fn ? Ref::steal(arg ? PyObject_CallOneArg(fn.get(), arg) : PyObject_CallNoArgs(fn.get())) : Ref();
  if (!r) PyErr_Clear();
  return r;
}

bool numpy_type_name(PyObject* o) { return std::strncmp(Py_TYPE(o)->tp_name, "numpy.", 6) == 0; }

// ndarray methods that leave the graph or that torch._numpy does not model (TorchDynamo breaks on
// tostring/tobytes/__delattr__ and delegates tolist/__iter__ to the tensor, which breaks on them).
const char* kBreakingMethods[] = {"tolist", "item", "itemset", "tobytes", "tostring", "tofile", "dump", "dumps", "__iter__",
                                  "__delattr__", "resize", "view", "__array__", "__reduce__", "__reduce_ex__", "__setstate__",
                                  "setflags", "getfield", "setfield", "byteswap", "newbyteorder", "__bool__", "__int__",
                                  "__float__", "__index__", "__complex__", "__hash__", nullptr};

bool in_list(const char* const* list, const std::string& s) {
  for (const char* const* n = list; *n; ++n)
    if (s == *n) return true;
  return false;
}

}  // namespace

bool is_numpy_callable(PyObject* o) {
  if (!o || PyType_Check(o)) return false;
  if (std::strcmp(Py_TYPE(o)->tp_name, "numpy.ufunc") == 0) return true;
  Ref mod = Ref::steal(PyObject_GetAttrString(o, "__module__"));
  if (!mod) return PyErr_Clear(), false;
  if (!PyUnicode_Check(mod.get())) return false;
  const std::string m = str_of(mod.get());
  return (m == "numpy" || m.rfind("numpy.", 0) == 0) && PyCallable_Check(o);
}

VPtr Translator::tensor_of_ndarray(const VPtr& nd) {
  VPtr t = make(VK::Tensor);
  t->obj = nd->obj;
  t->node = nd->node;
  t->device = nd->device;
  return t;
}

// A graph call's result as ndarrays: tensors become NdArray values (also inside a tuple or list,
// np.nonzero's), None and constants stay.
// A 0-d result is a NumPy scalar (numpy.float64 ...) where NumPy gives one: from indexing, ufuncs,
// operators and reductions, not from the functions that make or reshape arrays (flag: a scalar;
// reconstructed by dynview._numpy.to_numpy_scalar).
bool gives_numpy_scalar(const std::string& what) {
  static const std::set<std::string> arrays = {
      "numpy.array", "numpy.asarray", "numpy.asanyarray", "numpy.ascontiguousarray", "numpy.asfortranarray", "numpy.copy",
      "numpy.zeros", "numpy.ones", "numpy.empty", "numpy.full", "numpy.zeros_like", "numpy.ones_like", "numpy.empty_like",
      "numpy.full_like", "numpy.reshape", "numpy.squeeze", "numpy.broadcast_to", "numpy.transpose", "numpy.atleast_1d",
      "ndarray.copy", "ndarray.reshape", "ndarray.squeeze", "ndarray.astype", "ndarray.view", "ndarray.transpose",
      "ndarray.T", "ndarray.real", "ndarray.imag", "ndarray.conj", "Tensor.numpy()"};
  return arrays.count(what) == 0;
}

Status Translator::as_ndarray(Frame& f, VPtr& v, const std::string& what) {
  if (v->kind == VK::Tensor) {
    VPtr nd = make(VK::NdArray);
    nd->obj = v->obj;
    nd->node = v->node;
    nd->device = v->device;
    if (gives_numpy_scalar(what)) {
      Ref dim = Ref::steal(PyObject_CallMethod(v->obj.get(), "dim", nullptr));
      if (!dim) PyErr_Clear();
      nd->flag = dim && PyLong_Check(dim.get()) && PyLong_AsLong(dim.get()) == 0;
    }
    if (obs_) announce(nd);
    v = nd;
    return std::nullopt;
  }
  if (v->kind == VK::Tuple || v->kind == VK::List) {
    for (VPtr& x : v->items)
      if (Status s = as_ndarray(f, x, what)) return s;
    return std::nullopt;
  }
  if (v->kind == VK::Const) return std::nullopt;
  return brk(f, "DV0006", what + " gave a " + vk_name(v->kind) + ", not an ndarray");
}

// One graph node calling `target` (a torch._numpy wrapper) over ndarrays, numbers and constants.
Status Translator::ndarray_call(Frame& f, Ref target, std::vector<VPtr> args, Kwargs kwargs, const std::string& what,
                                VPtr& out) {
  if (!target) return brk(f, "DV0019", "no torch._numpy wrapper for " + what);
  std::function<Status(VPtr&)> fix = [&](VPtr& a) -> Status {
    switch (a->kind) {
      case VK::Tensor:  // np.sin(tensor) is a Tensor in eager (Tensor.__array_wrap__); the wrapper gives an ndarray
        return brk(f, "DV0013", "a torch.Tensor passed to " + what,
                   "NumPy on a tensor returns what torch's __array_wrap__ makes; call .numpy() on it first");
      case VK::Object:
        if (a->obj && (numpy_type_name(a->obj.get()) || PyType_Check(a->obj.get()))) {
          if (Ref name = helper("dtype_name", a->obj.get()); name && name.get() != Py_None) {  // np.float32 -> "float32"
            a = constant(name);
            return std::nullopt;
          }
        }
        return brk(f, "DV0013", std::string("a ") + (a->obj ? Py_TYPE(a->obj.get())->tp_name : "?") + " passed to " + what);
      case VK::Tuple: case VK::List: {
        VPtr copy = make(a->kind);
        copy->items = a->items;
        for (VPtr& x : copy->items)
          if (Status s = fix(x)) return s;
        a = copy;
        return std::nullopt;
      }
      case VK::NdArray: case VK::Const: case VK::Sym: case VK::Slice: return std::nullopt;
      default: return brk(f, "DV0013", std::string("a ") + vk_name(a->kind) + " passed to " + what);
    }
  };
  // np.ones_like(x), np.full_like(x, v), np.asarray(x), np.array(x) of a tensor: NumPy reads it
  // through Tensor.__array__, as x.numpy() (so eager's errors for a tensor that requires grad or is
  // not on the CPU are x.numpy()'s), and gives an ndarray.
  static const std::set<std::string> reads_array = {"numpy.ones_like", "numpy.zeros_like", "numpy.full_like",
                                                    "numpy.asarray", "numpy.array"};
  if (!args.empty() && args[0]->kind == VK::Tensor && reads_array.count(what)) {
    std::vector<VPtr> none;
    Kwargs no_kw;
    VPtr nd;
    if (Status s = tensor_numpy(f, args[0], none, no_kw, nd)) return s;
    args[0] = nd;
  }
  for (VPtr& a : args)
    if (Status s = fix(a)) return s;
  for (auto& kv : kwargs) {
    if (kv.first == "out") return brk(f, "DV0008", what + " with out=", "assign the result instead of passing out=");
    if (Status s = fix(kv.second)) return s;
  }
  // torch._numpy makes float32 (torch's default dtype) where NumPy makes float64 from integers
  // (`a / 2` of an int array; TorchDynamo returns the float32): a result eager never gives, so a
  // break. Inputs of a 32-bit or smaller float type, or a dtype named in the call, may make float32.
  bool may_make_float32 = false;
  std::function<void(const VPtr&)> scan = [&](const VPtr& a) {
    if (a->kind == VK::NdArray) {
      Ref dt = Ref::steal(PyObject_GetAttrString(a->obj.get(), "dtype"));
      Ref fp = dt ? Ref::steal(PyObject_GetAttrString(dt.get(), "is_floating_point")) : Ref();
      Ref cx = dt ? Ref::steal(PyObject_GetAttrString(dt.get(), "is_complex")) : Ref();
      Ref size = dt ? Ref::steal(PyObject_GetAttrString(dt.get(), "itemsize")) : Ref();
      PyErr_Clear();
      const long bytes = size ? PyLong_AsLong(size.get()) : 8;
      PyErr_Clear();
      if ((fp.get() == Py_True && bytes <= 4) || (cx.get() == Py_True && bytes <= 8)) may_make_float32 = true;
    }
    if (a->kind == VK::Const && PyUnicode_Check(a->obj.get())) may_make_float32 = true;
    for (const VPtr& x : a->items) scan(x);
  };
  for (const VPtr& a : args) scan(a);
  for (auto& kv : kwargs) scan(kv.second);
  allow_ndarray_ = true;
  Status s = graph_call(f, std::move(target), "", std::move(args), std::move(kwargs), out);
  allow_ndarray_ = false;
  if (s) return s;
  if (!may_make_float32 && out->kind == VK::Tensor) {
    Ref dt = Ref::steal(PyObject_GetAttrString(out->obj.get(), "dtype"));
    Ref f32 = Ref::steal(PyObject_GetAttrString(py().torch.get(), "float32"));
    PyErr_Clear();
    if (dt && dt.get() == f32.get())
      return brk(f, "DV0006", what + " gives float32 in torch._numpy where NumPy gives float64",
                 "cast first (a.astype(np.float64) / 2), or compute it with torch on a float64 tensor");
  }
  return as_ndarray(f, out, what);
}

// x.numpy(force=False): a view of x marked as an ndarray (TorchDynamo's view_as node); force=True
// detaches and moves it to the CPU.
Status Translator::tensor_numpy(Frame& f, const VPtr& self, std::vector<VPtr>& args, Kwargs& kwargs, VPtr& out) {
  bool force = false;
  if (!args.empty() || kwargs.size() > 1 || (kwargs.size() == 1 && kwargs[0].first != "force"))
    return brk(f, "DV0013", "Tensor.numpy() takes only force=");
  if (!kwargs.empty()) {
    if (kwargs[0].second->kind != VK::Const || !PyBool_Check(kwargs[0].second->obj.get()))
      return brk(f, "DV0013", "Tensor.numpy(force=) with a non-constant flag");
    force = kwargs[0].second->obj.get() == Py_True;
  }
  if (!helpers()) return brk(f, "DV0004", "Tensor.numpy() without NumPy installed", "install NumPy");
  Ref layout = Ref::steal(PyObject_GetAttrString(self->obj.get(), "layout"));
  Ref strided = Ref::steal(PyObject_GetAttrString(py().torch.get(), "strided"));
  PyErr_Clear();
  if (!layout || layout.get() != strided.get()) return raise_new(f, PyExc_TypeError, "can't convert a non-strided tensor to numpy. Use Tensor.to_dense() first");
  if (!force) {
    // Eager raises on these (TorchDynamo does not check, and the compiled code would not raise).
    Ref dtype = Ref::steal(PyObject_GetAttrString(self->device.get(), "type"));
    PyErr_Clear();
    if (!dtype || str_of(dtype.get()) != "cpu")
      return brk(f, "DV0003", "Tensor.numpy() of a tensor on " + (dtype ? str_of(dtype.get()) : std::string("?")),
                 "eager raises: NumPy arrays live on the CPU; use .cpu().numpy() or numpy(force=True)");
    Ref rg = Ref::steal(PyObject_GetAttrString(self->obj.get(), "requires_grad"));
    PyErr_Clear();
    if (rg && rg.get() == Py_True)
      return brk(f, "DV0003", "Tensor.numpy() of a tensor that requires grad", "eager raises: use .detach().numpy()");
    Ref bound = Ref::steal(PyObject_CallMethod(self->obj.get(), "is_conj", nullptr));
    PyErr_Clear();
    if (bound && bound.get() == Py_True) return brk(f, "DV0003", "Tensor.numpy() of a conjugated tensor", "eager raises: use .resolve_conj()");
    if (Status s = graph_call(f, {}, "view_as", {self, self}, {}, out)) return s;
  } else {
    VPtr detached;
    if (Status s = graph_call(f, {}, "detach", {self}, {}, detached)) return s;
    // .cpu() as Tensor.to("cpu"): the example stays on meta, the real device is tracked beside it
    if (Status s = graph_call(f, {}, "to", {detached, constant_steal(PyUnicode_FromString("cpu"))}, {}, out)) return s;
  }
  return as_ndarray(f, out, "Tensor.numpy()");
}

// np.sqrt(lam), np.clip(lam, 0.2, 0.8), np.maximum(lam, 0.5) of NumPy scalars known as constants (an
// np.float64 argument, guarded by value) and numbers: computed now, NumPy's scalar the result, as
// eager computes it -- with each floating-point error NumPy does not ignore raising, so that where
// NumPy would warn (np.sqrt(-1.0) is nan and a RuntimeWarning each call) this breaks and eager
// warns. A symbolic NumPy scalar (values/np_scalar.cpp) here is given its constant; the functions
// that keep one symbolic are object_call's (np_scalar_ufunc). `folded` false: not such a call (an
// array among the arguments, a result that is not a scalar), left to torch._numpy.
Status Translator::numpy_of_scalars(Frame& f, PyObject* fn, std::vector<VPtr>& args, Kwargs& kwargs, const std::string& what,
                                    VPtr& out, bool& folded) {
  folded = false;
  auto scalar = [](const VPtr& v) { return (v->kind == VK::Object && v->obj && numpy_scalar(v->obj.get())) || v->kind == VK::NpScalar; };
  auto plain = [](const VPtr& v) {
    PyObject* o = v->obj.get();
    return v->kind == VK::Const && (o == Py_None || PyBool_Check(o) || PyLong_CheckExact(o) || PyFloat_CheckExact(o));
  };
  bool any = false;
  for (const VPtr& a : args) {
    if (!scalar(a) && !plain(a)) return PyErr_Clear(), std::nullopt;
    any |= scalar(a);
  }
  for (const auto& kv : kwargs)
    if (!plain(kv.second) || kv.first == "out") return std::nullopt;
  PyErr_Clear();
  if (!any) return std::nullopt;
  for (VPtr& a : args)
    if (Status s = np_scalar_constant(*this, f, a)) return s;
  Ref pargs = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
  for (size_t i = 0; i < args.size(); ++i) PyTuple_SET_ITEM(pargs.get(), i, Ref::borrow(args[i]->obj.get()).release());
  Ref pkw = Ref::steal(PyDict_New());
  for (auto& [k, v] : kwargs) PyDict_SetItemString(pkw.get(), k.c_str(), v->obj.get());
  static PyObject* seterr = kept_attr("numpy", "seterr");
  static PyObject* geterr = kept_attr("numpy", "geterr");
  if (!seterr || !geterr) return std::nullopt;
  // each floating-point error NumPy does not ignore now (by default all but underflow) raises
  Ref no_args = Ref::steal(PyTuple_New(0));
  Ref now = Ref::steal(PyObject_CallNoArgs(geterr));
  Ref raising = Ref::steal(PyDict_New());
  if (!now || !PyDict_Check(now.get()) || !raising) return PyErr_Clear(), std::nullopt;
  static PyObject* ignore = PyUnicode_InternFromString("ignore");
  static PyObject* raise = PyUnicode_InternFromString("raise");
  PyObject *key, *setting;
  for (Py_ssize_t pos = 0; PyDict_Next(now.get(), &pos, &key, &setting);)
    if (PyDict_SetItem(raising.get(), key, PyObject_RichCompareBool(setting, ignore, Py_EQ) == 1 ? ignore : raise) < 0)
      return PyErr_Clear(), std::nullopt;
  Ref old = Ref::steal(PyObject_Call(seterr, no_args.get(), raising.get()));
  if (!old) return PyErr_Clear(), std::nullopt;
  Ref r = Ref::steal(PyObject_Call(fn, pargs.get(), pkw.get()));
  std::string err;
  if (!r) {  // the exception's type and message, for the break's reason
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    Ref text = value ? Ref::steal(PyObject_Str(value)) : Ref();
    err = std::string(type ? reinterpret_cast<PyTypeObject*>(type)->tp_name : "error") +
          (text && PyUnicode_Check(text.get()) ? ": " + str_of(text.get()) : "");
    Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
    PyErr_Clear();
  }
  Ref restored = Ref::steal(PyObject_Call(seterr, no_args.get(), old.get()));
  if (!restored) PyErr_Clear();
  if (!r) return brk(f, "DV0006", what + " of these constants: " + err, "NumPy warns or raises here; eager does it");
  folded = true;
  PyObject* o = r.get();
  if (numpy_scalar(o)) {
    out = make(VK::Object);  // as ValueBuilder wraps a NumPy scalar it takes as a constant
    out->obj = r;
    return std::nullopt;
  }
  PyErr_Clear();
  if (o == Py_None || PyBool_Check(o) || PyLong_CheckExact(o) || PyFloat_CheckExact(o)) {
    out = constant(r);
    return std::nullopt;
  }
  folded = false;  // an array (np.array(lam), np.atleast_1d): torch._numpy's
  return std::nullopt;
}

// np.<fn>(...): torch._numpy's function as a graph node (TorchDynamo's NumpyVariable.call_function).
Status Translator::call_numpy(Frame& f, PyObject* fn, std::vector<VPtr>& args, Kwargs& kwargs, VPtr& out, bool& handled) {
  handled = false;
  if (!helpers() || !is_numpy_callable(fn)) return std::nullopt;
  handled = true;
  Ref name_obj = Ref::steal(PyObject_GetAttrString(fn, "__name__"));
  PyErr_Clear();
  const std::string what = "numpy." + (name_obj && PyUnicode_Check(name_obj.get()) ? str_of(name_obj.get()) : std::string("?"));
  Ref tnp = helper("tnp_function", fn);
  if (!tnp || tnp.get() == Py_None)
    return brk(f, "DV0004", what + " is not in torch._numpy (as torch.compile, dynview cannot trace it)",
               "call it outside the compiled function, or use a torch operator");
  Ref random = helper("is_random", tnp.get());
  if (random && random.get() == Py_True)
    return brk(f, "DV0004", what + ": NumPy's random stream cannot be reproduced in the graph",
               "draw the random numbers outside the compiled function, or use torch's random functions");
  bool folded = false;
  if (Status s = numpy_of_scalars(f, fn, args, kwargs, what, out, folded); s || folded) return s;
  for (auto& kv : kwargs) {  // TorchDynamo's patch_args: np.clip's a_min/a_max are torch._numpy's min/max
    if (what == "numpy.clip" && kv.first == "a_min") kv.first = "min";
    if (what == "numpy.clip" && kv.first == "a_max") kv.first = "max";
  }
  Ref wrapper = helper("function_wrapper", tnp.get());
  return ndarray_call(f, wrapper, args, kwargs, what, out);
}

// torch.from_numpy(nd) / torch.as_tensor(nd, ...): the tensor behind the ndarray (a torch.as_tensor node);
// torch.tensor(nd, ...): a copy of it (a torch.tensor node over the tensor, as TorchDynamo records it).
Status Translator::ndarray_to_tensor(Frame& f, PyObject* fn, std::vector<VPtr>& args, Kwargs& kwargs, VPtr& out, bool& handled) {
  handled = false;
  if (args.empty() || args[0]->kind != VK::NdArray) return std::nullopt;
  Ref from_numpy = Ref::steal(PyObject_GetAttrString(py().torch.get(), "from_numpy"));
  Ref as_tensor = Ref::steal(PyObject_GetAttrString(py().torch.get(), "as_tensor"));
  PyErr_Clear();
  Ref tensor = Ref::steal(PyObject_GetAttrString(py().torch.get(), "tensor"));
  PyErr_Clear();
  if (fn != from_numpy.get() && fn != as_tensor.get() && fn != tensor.get()) return std::nullopt;
  handled = true;
  if (fn == from_numpy.get() && (args.size() != 1 || !kwargs.empty())) return brk(f, "DV0013", "torch.from_numpy takes one ndarray");
  std::vector<VPtr> a = args;
  a[0] = tensor_of_ndarray(args[0]);
  return graph_call(f, fn == tensor.get() ? tensor : as_tensor, "", std::move(a), kwargs, out);
}

Status Translator::ndarray_getattr(Frame& f, const VPtr& self, const std::string& name, VPtr& out) {
  PyObject* ex = self->obj.get();
  if (name == "T" || name == "real" || name == "imag") {
    Ref wrapper = helper("attr_wrapper", nullptr);
    return ndarray_call(f, wrapper, {self, constant_steal(PyUnicode_FromString(name.c_str()))}, {}, "ndarray." + name, out);
  }
  if (name == "shape") {
    Ref r = Ref::steal(PyObject_GetAttrString(ex, "shape"));
    if (!r) return PyErr_Clear(), brk(f, "DV0005", "ndarray.shape");
    if (Status s = meta_result(f, tensor_of_ndarray(self), "size", {}, r, out)) return s;
    if (out->kind == VK::Const && PyTuple_Check(out->obj.get()))  // a plain tuple, as NumPy's (not torch.Size)
      out = constant_steal(PySequence_Tuple(out->obj.get()));
    else if (out->kind == VK::Tuple)
      out->obj = Ref();
    return std::nullopt;
  }
  if (name == "ndim" || name == "size" || name == "itemsize" || name == "nbytes") {
    const char* m = name == "ndim" ? "dim" : name == "size" ? "numel" : "element_size";
    Ref r = Ref::steal(PyObject_CallMethod(ex, m, nullptr));
    if (r && name == "nbytes") {
      Ref n = Ref::steal(PyObject_CallMethod(ex, "numel", nullptr));
      r = n ? Ref::steal(PyNumber_Multiply(r.get(), n.get())) : Ref();
    }
    if (!r) return PyErr_Clear(), brk(f, "DV0005", "ndarray." + name);
    // (the size of a dynamic shape: the tensor's numel in the graph, a symbolic int, as x.shape's sizes)
    if (is_sym(r.get()) && name == "size") return meta_result(f, tensor_of_ndarray(self), "numel", {}, r, out);
    if (is_sym(r.get())) return brk(f, "DV0021", "ndarray." + name + " of a dynamic shape");
    out = constant(r);
    return std::nullopt;
  }
  if (name == "strides") {  // the tensor's strides in bytes, as NumPy gives them (of the array the graph's tensor becomes)
    Ref st = Ref::steal(PyObject_CallMethod(ex, "stride", nullptr));
    Ref size = Ref::steal(PyObject_CallMethod(ex, "element_size", nullptr));
    Ref r = st && size && PyTuple_Check(st.get()) ? Ref::steal(PyTuple_New(PyTuple_GET_SIZE(st.get()))) : Ref();
    for (Py_ssize_t i = 0; r && i < PyTuple_GET_SIZE(st.get()); ++i) {
      PyObject* s = PyTuple_GET_ITEM(st.get(), i);
      if (is_sym(s)) return brk(f, "DV0021", "ndarray.strides of a dynamic shape");
      PyObject* bytes = PyNumber_Multiply(s, size.get());
      if (!bytes) r = Ref();
      else PyTuple_SET_ITEM(r.get(), i, bytes);
    }
    if (!r) return PyErr_Clear(), brk(f, "DV0005", "ndarray.strides");
    out = constant(r);
    return std::nullopt;
  }
  if (name == "dtype") {  // a numpy.dtype, from the tensor's guarded dtype
    Ref dt = helper("array_dtype", ex);
    if (!dt) return brk(f, "DV0005", "ndarray.dtype of a tensor whose dtype NumPy lacks");
    out = make(VK::Object);
    out->obj = dt;
    return std::nullopt;
  }
  if (name == "base" || name == "flags" || name == "__version__" || name == "flat" ||
      name == "ctypes" || name == "data")
    return brk(f, "DV0005", "ndarray." + name + " is not traced by dynview",
               "read it outside the compiled function, or convert with torch.from_numpy and use the tensor's attribute");
  static PyObject* nd_type = [] {
    Ref np = Ref::steal(PyImport_ImportModule("numpy"));
    PyObject* t = np ? PyObject_GetAttrString(np.get(), "ndarray") : nullptr;
    if (!t) PyErr_Clear();
    return t;
  }();
  Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
  PyObject* attr = nd_type ? _PyType_Lookup(reinterpret_cast<PyTypeObject*>(nd_type), nm.get()) : nullptr;
  if (!attr) return brk(f, kNoAttributeId, "'numpy.ndarray' object has no attribute '" + name + "'");
  if (!PyCallable_Check(attr)) return brk(f, "DV0005", "ndarray." + name + " is not traced");
  VPtr mv = make(VK::Method);
  mv->self = self;
  mv->name = name;
  out = mv;
  return std::nullopt;
}

Status Translator::ndarray_method(Frame& f, const VPtr& self, const std::string& name, std::vector<VPtr>& args, Kwargs& kwargs,
                                  VPtr& out) {
  if (in_list(kBreakingMethods, name))
    return brk(f, "DV0003", "ndarray." + name + "() leaves the graph or is not modelled in torch._numpy",
               "keep the computation in arrays, or call it outside the compiled function");
  if (name == "astype") {
    VPtr dt = !args.empty() ? args[0] : nullptr;
    for (auto& kv : kwargs)
      if (kv.first == "dtype") dt = kv.second;
    const bool object = dt && ((dt->kind == VK::Const && PyUnicode_Check(dt->obj.get()) && str_of(dt->obj.get()) == "O") ||
                               (dt->obj && dt->obj.get() == reinterpret_cast<PyObject*>(&PyBaseObject_Type)));
    if (object) return brk(f, "DV0013", "ndarray.astype(object): no tensor holds Python objects", "convert outside the compiled function");
    // a Python type is NumPy's dtype for it (astype(float) is float64, astype(int) int64 here, as np.dtype(int) says)
    if (dt && (dt->kind == VK::Const || dt->kind == VK::Object) && dt->obj && PyType_Check(dt->obj.get()) &&
        std::strncmp(reinterpret_cast<PyTypeObject*>(dt->obj.get())->tp_name, "numpy.", 6) != 0) {
      Ref np = Ref::steal(PyImport_ImportModule("numpy"));
      Ref npdt = np ? Ref::steal(PyObject_CallMethod(np.get(), "dtype", "O", dt->obj.get())) : Ref();
      Ref nm = npdt ? Ref::steal(PyObject_GetAttrString(npdt.get(), "name")) : Ref();
      if (!nm) return PyErr_Clear(), brk(f, "DV0013", "ndarray.astype(" + str_of(dt->obj.get()) + "): not a NumPy dtype");
      VPtr named = constant(nm);
      if (!args.empty() && args[0] == dt) args[0] = named;
      for (auto& kv : kwargs)
        if (kv.first == "dtype") kv.second = named;
    }
  }
  if (name == "__len__") {
    Ref shape = Ref::steal(PyObject_GetAttrString(self->obj.get(), "shape"));
    if (!shape || PyTuple_GET_SIZE(shape.get()) == 0) return PyErr_Clear(), raise_new(f, PyExc_TypeError, "len() of unsized object");
    if (is_sym(PyTuple_GET_ITEM(shape.get(), 0))) return brk(f, "DV0021", "len() of an ndarray with a dynamic size");
    out = constant(Ref::borrow(PyTuple_GET_ITEM(shape.get(), 0)));
    return std::nullopt;
  }
  Ref wrapper = helper("method_wrapper", Ref::steal(PyUnicode_FromString(name.c_str())).get());
  std::vector<VPtr> a{self};
  a.insert(a.end(), args.begin(), args.end());
  return ndarray_call(f, wrapper, std::move(a), kwargs, "ndarray." + name, out);
}

// operator.<op>(operands) with an ndarray operand and no tensor one: numpy_operator_wrapper(op).
// With a tensor operand the ndarray is the tensor behind it and the tensor operator runs (as
// TorchDynamo; eager's Tensor operators convert the ndarray too). `handled` false: not one of these.
namespace {
// A NumPy scalar (nd.sum(), nd[i, j]) beside a tensor: torch takes it as a Python number of its kind
// (a wrapped number), the graph as a 0-d tensor. The two promote alike but where the scalar's kind is
// above the tensor's (int tensor * np.float64 is float32 in eager, float64 as a 0-d tensor), or beside
// another 0-d tensor: there, the reason (the caller breaks, and eager computes it). `tensor` and
// `scalar` are their examples.
std::optional<std::string> scalar_promotes_otherwise(PyObject* tensor, PyObject* scalar) {
  static PyObject* result_type = kept_attr("torch", "result_type");
  static PyObject* torch_bool = kept_attr("torch", "bool");
  Ref dt = Ref::steal(PyObject_GetAttrString(scalar, "dtype"));
  Ref fp = dt ? Ref::steal(PyObject_GetAttrString(dt.get(), "is_floating_point")) : Ref();
  Ref cx = dt ? Ref::steal(PyObject_GetAttrString(dt.get(), "is_complex")) : Ref();
  Ref as_number = !fp || !cx            ? Ref()
                  : cx.get() == Py_True ? Ref::steal(PyComplex_FromDoubles(1.0, 0.0))
                  : fp.get() == Py_True ? Ref::steal(PyFloat_FromDouble(1.0))
                  : dt.get() == torch_bool ? Ref::borrow(Py_True)
                                           : Ref::steal(PyLong_FromLong(1));
  Ref eager = as_number && result_type ? Ref::steal(PyObject_CallFunctionObjArgs(result_type, tensor, as_number.get(), nullptr)) : Ref();
  Ref graph = eager ? Ref::steal(PyObject_CallFunctionObjArgs(result_type, tensor, scalar, nullptr)) : Ref();
  if (!graph) return PyErr_Clear(), std::string("tensor and a NumPy scalar whose promotions could not be compared");
  if (eager.get() == graph.get()) return std::nullopt;
  return repr_of(Ref::steal(PyObject_GetAttrString(tensor, "dtype")).get()) + " tensor and a NumPy scalar of dtype " +
         repr_of(dt.get()) + ": eager promotes the scalar as a Python number, to " + repr_of(eager.get());
}
}  // namespace

Status Translator::ndarray_operator(Frame& f, const std::string& op, std::vector<VPtr> args, VPtr& out, bool& handled) {
  bool nd = false, tensor = false;
  for (const VPtr& a : args) {
    nd |= a->kind == VK::NdArray;
    tensor |= a->kind == VK::Tensor;
  }
  handled = nd;
  if (!nd) return std::nullopt;
  if (tensor) {
    if (op.rfind("i", 0) == 0 && args[0]->kind == VK::NdArray)  // nd += t: NumPy's in-place add keeps nd an ndarray
      return brk(f, "DV0018", "in-place operator." + op + " of an ndarray with a tensor");
    for (int i = 0; args.size() == 2 && i < 2; ++i)
      if (args[i]->kind == VK::NdArray && args[i]->flag && args[1 - i]->kind == VK::Tensor)
        if (auto why = scalar_promotes_otherwise(args[1 - i]->obj.get(), args[i]->obj.get()))
          return brk(f, "DV0018", "operator." + op + " of a " + *why, "convert the scalar first (float(s)), or cast the tensor");
    for (VPtr& a : args)
      if (a->kind == VK::NdArray) a = tensor_of_ndarray(a);
    return graph_call(f, Ref::steal(PyObject_GetAttrString(py().operator_mod.get(), op.c_str())), "", std::move(args), {}, out);
  }
  for (const VPtr& a : args)
    if (a->kind != VK::NdArray && a->kind != VK::Const && a->kind != VK::Sym && a->kind != VK::Slice && a->kind != VK::Tuple)
      return brk(f, "DV0018", "operator." + op + " of an ndarray and a " + vk_name(a->kind));
  Ref wrapper = helper("operator_wrapper", Ref::steal(PyUnicode_FromString(op.c_str())).get());
  return ndarray_call(f, wrapper, std::move(args), {}, "ndarray operator." + op, out);
}

// ---- the protocol (kind.h) ----

template <>
struct Kind<VK::NdArray> {
  static void describe(const Value& v, std::string& out, int /*depth*/) {
    out += "ndarray " + (v.obj ? tensor_meta_text(v.obj.get(), v.device.get()) : std::string()); return;
  }
  static PyObject* python_type(Translator& /*t*/, const VPtr& /*v*/) {
    static PyObject* nd = [] {
      Ref np = Ref::steal(PyImport_ImportModule("numpy"));
      PyObject* t = np ? PyObject_GetAttrString(np.get(), "ndarray") : nullptr;
      if (!t) PyErr_Clear();
      return t;
    }();
    return nd;
  }
  static std::optional<Ref> as_python(Translator& /*t*/, const VPtr& v, bool meta) {
    return meta ? std::optional<Ref>(v->obj) : std::nullopt;
  }
  static bool graph_arg(Translator& t, const VPtr& v, ArgTree& out) {
    // only to torch._numpy's wrappers (ndarray.cpp): no torch function takes an ndarray
    if (!t.allow_ndarray_) return false;
    out.kind = ArgTree::Kind::Node;
    out.node = v->node;
    return true;
  }
  static Status truth(Translator& t, Frame& f, const VPtr& /*v*/, bool& /*out*/) {
    return t.brk(f, "DV0002", "data-dependent control flow: branching on an ndarray's value",
    "use np.where; torch.compile breaks the graph here too");
  }
  static Status iterate(Translator& t, Frame& f, const VPtr& v, VPtr& out, bool /*materialize*/) {
    VPtr it = t.make(VK::Iter);
    // its rows, nd[0], nd[1] ... (TorchDynamo unpacks it as a tensor: ndarray.__getitem__ nodes)
    Ref shape = Ref::steal(PyObject_GetAttrString(v->obj.get(), "shape"));
    if (!shape || PyTuple_GET_SIZE(shape.get()) == 0) return PyErr_Clear(), t.raise_new(f, PyExc_TypeError, "iteration over a 0-d array");
    if (is_sym(PyTuple_GET_ITEM(shape.get(), 0))) return t.brk(f, "DV0021", "iterating over an ndarray of a dynamic size");
    const long n = PyLong_AsLong(PyTuple_GET_ITEM(shape.get(), 0));
    for (long i = 0; i < n; ++i) {
      VPtr item;
      std::vector<VPtr> idx{t.constant_steal(PyLong_FromLong(i))};
      std::vector<std::pair<std::string, VPtr>> none;
      if (Status s = t.ndarray_method(f, v, "__getitem__", idx, none, item)) return s;
      it->items.push_back(item);
    }
    out = it;
    return std::nullopt;
  }
  static Status getattr(Translator& t, Frame& f, const VPtr& obj, const std::string& name, VPtr& out) {
    return t.ndarray_getattr(f, obj, name, out);
  }
  static constexpr auto call = no_answer::call;
  static constexpr auto setattr = no_answer::setattr;
  static Status call_method(Translator& t, Frame& f, const VPtr& m, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
    return t.ndarray_method(f, m->self, m->name, args, kwargs, out);
  }
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    // the ndarray argument itself, or dynview._numpy.to_numpy(graph output)
    auto it = std::find(r.outputs.begin(), r.outputs.end(), v->node);
    if (v->source) return r.e.source(*v->source);
    auto helper = [](const char* name) {
      Ref mod = Ref::steal(PyImport_ImportModule("dynview._numpy"));
      PyObject* m = mod ? PyObject_GetAttrString(mod.get(), name) : nullptr;
      if (!m) PyErr_Clear();
      return m;
    };
    static PyObject* to_numpy = helper("to_numpy");
    static PyObject* to_numpy_scalar = helper("to_numpy_scalar");
    PyObject* convert = v->flag ? to_numpy_scalar : to_numpy;  // a 0-d result that NumPy gives as a scalar
    if (it == r.outputs.end() || !r.compiled || !convert) return false;
    r.e.callable_const(convert);
    r.e.emit(N::LOAD_FAST, r.outs_slot);
    r.e.load_int(it - r.outputs.begin());
    r.e.emit(N::BINARY_SUBSCR);
    r.e.call(1);
    return r.remember(v);
  }
};
DV_KIND(NdArray, "ndarray")

}  // namespace dv
