// Calling an object known by identity (VK::Object's call): builtins, torch functions and their
// special cases (torch.func, grad modes, autocast, inference_mode, ...), operator getters, classes,
// NumPy and pure builtins over constants.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "pycache.h"
#include "engine.h"
#include "handlers_common.h"
#include "translator.h"
#include "values/kind.h"

namespace dv {

namespace {

bool module_is_torch(PyObject* fn) {
  Ref mod = Ref::steal(PyObject_GetAttrString(fn, "__module__"));
  if (!mod) {
    PyErr_Clear();
    return false;
  }
  std::string m = str_of(mod.get());
  return m == "torch" || m.rfind("torch.", 0) == 0;
}

// An instance of a Python class of torch.nn (not a module: a hook object such as WeightNorm) whose
// __call__ is Python code. (torch's operators -- OpOverload, HigherOrderOperator -- are torch._ops
// objects with a Python __call__ too: they stay graph calls.)
bool torch_nn_python_callable(PyObject* o) {
  PyTypeObject* tp = Py_TYPE(o);
  if (PyType_Check(o) || !(tp->tp_flags & Py_TPFLAGS_HEAPTYPE)) return false;
  static PyObject* call_name = PyUnicode_InternFromString("__call__");
  PyObject* call = _PyType_Lookup(tp, call_name);
  if (!call || !PyFunction_Check(call)) return false;
  Ref mod = Ref::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(tp), "__module__"));
  if (!mod) return PyErr_Clear(), false;
  return str_of(mod.get()).rfind("torch.nn.", 0) == 0;
}

// torch.distributions classes: plain Python classes whose __init__ is inlined (as TorchDynamo).
bool module_is_distributions(PyObject* cls) {
  Ref mod = Ref::steal(PyObject_GetAttrString(cls, "__module__"));
  if (!mod) return PyErr_Clear(), false;
  return str_of(mod.get()).rfind("torch.distributions.", 0) == 0;
}

// torch.utils._pytree's TreeSpec and LeafSpec: frozen descriptions of a structure (pytree's
// flatten/unflatten, inlined), made from the classes and specs they describe as values are.
bool pytree_spec_class(PyObject* o) {
  static PyObject* const* specs = [] {
    static PyObject* s[2] = {nullptr, nullptr};
    Ref m = Ref::steal(PyImport_ImportModule("torch.utils._pytree"));
    if (m) {
      s[0] = PyObject_GetAttrString(m.get(), "TreeSpec");  // kept
      s[1] = PyObject_GetAttrString(m.get(), "LeafSpec");
    }
    PyErr_Clear();
    return s;
  }();
  return o && (o == specs[0] || o == specs[1]);
}

// operator.itemgetter objects: 1; attrgetter objects: 2; methodcaller objects: 3; else 0 (pure to
// construct from constants). The classes themselves count too.
int operator_getter(PyObject* o) {
  static PyObject* item = PyObject_GetAttrString(py().operator_mod.get(), "itemgetter");
  static PyObject* attr = PyObject_GetAttrString(py().operator_mod.get(), "attrgetter");
  static PyObject* caller = PyObject_GetAttrString(py().operator_mod.get(), "methodcaller");
  if (!item || !attr || !caller) return PyErr_Clear(), 0;
  PyObject* tp = PyType_Check(o) ? o : reinterpret_cast<PyObject*>(Py_TYPE(o));
  return tp == item ? 1 : tp == attr ? 2 : tp == caller ? 3 : 0;
}

bool is_tensor_method_descriptor(PyObject* fn) {
  Ref cls = Ref::steal(PyObject_GetAttrString(fn, "__objclass__"));
  if (!cls) {
    PyErr_Clear();
    return false;
  }
  return cls.get() == py().tensorbase.get() || cls.get() == py().torch_Tensor.get();
}

// Builtins that only iterate their one argument once (set, frozenset, str.join): given the items
// as a tuple they do the same.
static bool consumes_iterable(PyObject* o) {
  if (o == reinterpret_cast<PyObject*>(&PySet_Type) || o == reinterpret_cast<PyObject*>(&PyFrozenSet_Type)) return true;
  return PyCFunction_Check(o) && PyCFunction_GET_SELF(o) && PyUnicode_CheckExact(PyCFunction_GET_SELF(o)) &&
         std::strcmp(reinterpret_cast<PyCFunctionObject*>(o)->m_ml->ml_name, "join") == 0;
}

}  // namespace

Translator::Status call_builtin(Translator& t, Frame& f, PyObject* fn, std::vector<VPtr>& args,
                                std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled);  // builtins.cpp
Translator::Status sym_builtin(Translator& t, Frame& f, PyObject* fn, std::vector<VPtr>& args,
                               std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled);

// A new set (set(consts), a method of a set of constants) whose items are numbers, strings or tuples:
// a constant private to the trace, as op_BUILD_SET makes.
bool set_of_constants(PyObject* r) {
  if (!PySet_CheckExact(r)) return false;
  Ref it = Ref::steal(PyObject_GetIter(r));  // (_PySet_NextEntry is not in 3.13's headers)
  if (!it) return PyErr_Clear(), false;
  while (Ref key = Ref::steal(PyIter_Next(it.get()))) {
    PyObject* k = key.get();
    if (!(PyUnicode_CheckExact(k) || PyLong_Check(k) || PyFloat_CheckExact(k) || PyTuple_CheckExact(k) || k == Py_None ||
          PyFrozenSet_CheckExact(k)))
      return false;
  }
  if (PyErr_Occurred()) return PyErr_Clear(), false;
  return true;
}

// str.lower, int.bit_length, tuple.count ... taken from the class (sorted(names, key=str.lower)):
// pure over constants, as the bound methods of constants are.
static bool immutable_method_descriptor(PyObject* o) {
  if (!PyObject_TypeCheck(o, &PyMethodDescr_Type)) return false;
  PyTypeObject* tp = reinterpret_cast<PyDescrObject*>(o)->d_type;
  return tp == &PyUnicode_Type || tp == &PyBytes_Type || tp == &PyLong_Type || tp == &PyFloat_Type || tp == &PyTuple_Type ||
         tp == &PyFrozenSet_Type;
}

namespace {
// torch.autograd.profiler.record_function, and the profilers torch.profiler.profile and
// torch.autograd.profiler.profile: context managers TorchDynamo ignores while capturing
bool is_profiler_range(PyObject* o) {
  static PyObject* const record_function = kept_attr("torch.autograd.profiler", "record_function");
  static PyObject* const autograd_profile = kept_attr("torch.autograd.profiler", "profile");
  static PyObject* const profile = kept_attr("torch.profiler", "profile");
  PyErr_Clear();
  return o && (o == record_function || o == autograd_profile || o == profile);
}
}  // namespace

// A getter of torch that reads a process setting (torch.get_float32_matmul_precision(),
// torch.is_warn_always_enabled(), torch._C._get_cudnn_enabled() ...): called with no argument, its
// answer would be a constant of the graph that no guard checks, so a later call under another
// setting would reuse it (translator.h). The settings the GLOBAL_STATE guard checks, and facts fixed
// for the process (torch.cuda.is_available()), are read as constants.
bool reads_torch_setting(PyObject* fn) {
  std::string m, name;
  if (PyCFunction_Check(fn)) {
    PyObject* self = PyCFunction_GET_SELF(fn);
    const char* owner = self && PyModule_Check(self) ? PyModule_GetName(self) : nullptr;
    if (owner) {
      m = owner;
    } else {
      Ref mod = Ref::steal(PyObject_GetAttrString(fn, "__module__"));
      PyErr_Clear();
      if (mod && PyUnicode_Check(mod.get())) m = str_of(mod.get());
    }
    name = reinterpret_cast<PyCFunctionObject*>(fn)->m_ml->ml_name;
  } else if (PyFunction_Check(fn)) {
    PyObject* mod = PyDict_GetItemString(PyFunction_GET_GLOBALS(fn), "__name__");
    if (mod && PyUnicode_Check(mod)) m = str_of(mod);
    name = str_of(reinterpret_cast<PyFunctionObject*>(fn)->func_name);
    // torch's Python getters of settings the guards do not check (the C ones below by their prefix)
    static const std::unordered_set<std::string> python_getters = {
        "get_float32_matmul_precision", "is_warn_always_enabled", "get_default_device", "get_deterministic_debug_mode",
        "is_deterministic_algorithms_warn_only_enabled"};
    return (m == "torch" || m.rfind("torch.", 0) == 0) && python_getters.count(name);
  } else {
    return false;
  }
  if (m != "torch" && m.rfind("torch.", 0) != 0) return false;
  static const std::unordered_set<std::string> checked = {
      // the GLOBAL_STATE guard's own (grad mode, autocast, default dtype, threads, determinism)
      "is_grad_enabled", "get_default_dtype", "get_num_threads", "is_autocast_enabled", "is_autocast_cpu_enabled",
      "_is_any_autocast_enabled", "get_autocast_dtype", "get_autocast_cpu_dtype", "get_autocast_gpu_dtype",
      "is_autocast_cache_enabled", "_get_deterministic_algorithms",
      // fixed for the process, or for what the engine captures at all
      "_get_tracing_state", "_get_privateuse1_backend_name", "_are_functorch_transforms_active", "_get_cpu_capability",
      "_is_torch_function_enabled", "_is_torch_function_mode_enabled", "_is_torch_function_all_disabled",
      "_cuda_getDeviceCount", "_get_accelerator", "_has_torch_function"};
  if (checked.count(name)) return false;
  for (const char* prefix : {"_get_", "get_", "is_", "_is_", "are_", "_are_"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

// A C function called over constants runs once, at trace time, and its answer is a constant of the
// compiled code. That is right only when the answer depends on the arguments alone. The modules
// below hold such functions; any other C function (time.time, os.urandom, datetime.now, a
// third-party extension's) breaks instead, as TorchDynamo skips the C functions it does not know.
// Bound methods of immutable objects (str.join of a constant) are pure as well; those of mutable
// ones break earlier (bound_to_mutable_object).
bool folds_over_constants(PyObject* fn) {
  if (!PyCFunction_Check(fn)) return true;
  PyObject* self = PyCFunction_GET_SELF(fn);
  const char* name = reinterpret_cast<PyCFunctionObject*>(fn)->m_ml->ml_name;
  std::string m;
  if (self && PyModule_Check(self)) {
    const char* n = PyModule_GetName(self);
    if (!n) return PyErr_Clear(), false;
    m = n;
  } else if (self && PyType_Check(self)) {  // a class method of a C class: int.from_bytes, datetime.now
    Ref mod = Ref::steal(PyObject_GetAttrString(self, "__module__"));
    PyErr_Clear();
    if (mod && PyUnicode_Check(mod.get())) m = str_of(mod.get());
  } else if (self && !bound_to_mutable_object(fn)) {
    return true;  // a method of an immutable object
  } else {
    Ref mod = Ref::steal(PyObject_GetAttrString(fn, "__module__"));
    PyErr_Clear();
    if (mod && PyUnicode_Check(mod.get())) m = str_of(mod.get());
  }
  auto under = [&m](const char* pkg) {
    const size_t n = std::strlen(pkg);
    return m.compare(0, n, pkg) == 0 && (m.size() == n || m[n] == '.');
  };
  if (m == "builtins") {  // those that talk to the world outside, by name
    static const std::unordered_set<std::string> impure = {"input", "open", "print", "breakpoint", "__import__",
                                                           "exit", "quit", "help", "aiter", "anext"};
    return !impure.count(name);
  }
  if (m == "sys") {
    static const std::unordered_set<std::string> pure = {"intern", "getrecursionlimit", "getdefaultencoding",
                                                         "getfilesystemencoding", "getsizeof"};
    return pure.count(name) > 0;
  }
  if (m == "posix" || m == "nt") return std::strcmp(name, "fspath") == 0;  // (os.path.join's, on a str)
  if (under("numpy")) return !under("numpy.random");
  if (under("torch")) return true;  // settings are told apart by reads_torch_setting
  static const std::unordered_set<std::string> pure_modules = {
      "math", "cmath", "_operator", "operator", "itertools", "_functools", "functools", "_collections", "collections",
      "_bisect", "bisect", "_heapq", "heapq", "_struct", "struct", "binascii", "zlib", "unicodedata", "_string",
      "string", "_json", "json", "_sre", "re", "_abc", "abc", "_codecs", "codecs", "_statistics", "statistics",
      "typing", "_typing", "types", "_weakref", "copyreg", "numbers", "enum", "array", "keyword"};
  return pure_modules.count(m) > 0;
}

Status call_on_constants(Translator& t, Frame& f, PyObject* fn, const std::string& name, const std::vector<VPtr>& args,
                         const KwArgs& kwargs, Ref& result) {
  Ref pargs = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
  for (size_t i = 0; pargs && i < args.size(); ++i) {
    auto x = t.to_python(args[i], false);
    if (!x) return t.brk(f, "DV0013", "unsupported argument to " + name);
    PyTuple_SET_ITEM(pargs.get(), static_cast<Py_ssize_t>(i), x->release());
  }
  Ref pkw = Ref::steal(PyDict_New());
  if (!pargs || !pkw) return t.raise_current(f, name + "()");
  for (auto& [k, v] : kwargs) PyDict_SetItemString(pkw.get(), k.c_str(), v->obj.get());
  result = Ref::steal(PyObject_Call(fn, pargs.get(), pkw.get()));
  if (!result) return t.raise_current(f, name + "()");
  // It ran on copies of the lists it was given: one that changed them (heapq.heapify,
  // random.shuffle) changes nothing in the trace, so it breaks instead.
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i]->kind != VK::List && args[i]->kind != VK::Tuple) continue;
    auto fresh = t.to_python(args[i], false);
    const int same = fresh ? PyObject_RichCompareBool(fresh->get(), PyTuple_GET_ITEM(pargs.get(), i), Py_EQ) : -1;
    if (same != 1)
      return PyErr_Clear(), t.brk(f, "DV0008", "call to " + name + " that changes the list it is given",
                                "dynview evaluates builtins over constants on copies; mutate the list in Python code");
  }
  return std::nullopt;
}

// torch.tensor and torch._refs.tensor (borrowed, kept), or null
PyObject* tensor_factory() {
  static PyObject* t = kept_attr("torch", "tensor");
  return t;
}
PyObject* refs_tensor_factory() {
  static PyObject* t = kept_attr("torch._refs", "tensor");
  return t;
}

namespace {
// torch.tensor([x.sum(), x.max()]) of one-element tensors, or of NumPy scalars of arrays made in the
// trace: torch._refs.tensor, which builds it from them in the graph, as TorchDynamo records it
// (torch.tensor itself reads each as a number, which a graph cannot). Its example is torch.tensor
// over zeros of the elements' dtypes. Not handled: no tensor in it, a tensor of another size
// (eager's error, at the break), one that requires grad (eager's result does not), other keywords.
Status tensor_of_scalar_tensors(Translator& t, Frame& f, const VPtr& data, KwArgs& kwargs, VPtr& out, bool& handled) {
  static PyObject* zeros_fn = kept_attr("torch", "zeros");
  bool any = false;
  Ref device;
  std::function<Ref(const VPtr&, VPtr&)> scan = [&](const VPtr& v, VPtr& arg) -> Ref {
    if (v->kind == VK::Tensor || v->kind == VK::NdArray) {
      any = true;
      if (known_numel(v) != 1) return Ref();
      Ref grad = Ref::steal(PyObject_GetAttrString(v->obj.get(), "requires_grad"));
      Ref dtype = Ref::steal(PyObject_GetAttrString(v->obj.get(), "dtype"));
      if (!grad || !dtype) return PyErr_Clear(), Ref();
      if (grad.get() != Py_False) return Ref();
      if (!device) device = v->device;
      if (PyObject_RichCompareBool(device.get(), v->device.get(), Py_EQ) != 1) return PyErr_Clear(), Ref();
      arg = v->kind == VK::NdArray ? t.tensor_of_ndarray(v) : v;
      Ref kw = Ref::steal(Py_BuildValue("{s:O}", "dtype", dtype.get()));
      Ref shape = Ref::steal(PyTuple_New(0));
      Ref zeros = kw && shape && zeros_fn ? Ref::steal(PyObject_Call(zeros_fn, Ref::steal(PyTuple_Pack(1, shape.get())).get(), kw.get())) : Ref();
      if (!zeros) PyErr_Clear();
      return zeros;
    }
    if (v->kind == VK::Tuple || v->kind == VK::List) {
      VPtr copy = t.make(v->kind);
      Ref items = Ref::steal(PyList_New(0));
      for (const VPtr& x : v->items) {
        VPtr a;
        Ref e = scan(x, a);
        if (!e || PyList_Append(items.get(), e.get()) < 0) return PyErr_Clear(), Ref();
        copy->items.push_back(a);
      }
      arg = copy;
      return items;
    }
    if (v->kind == VK::Const && (PyLong_Check(v->obj.get()) || PyFloat_Check(v->obj.get()) || PyComplex_Check(v->obj.get()))) {
      arg = v;
      return v->obj;
    }
    return Ref();
  };
  VPtr arg;
  Ref example_data = scan(data, arg);
  if (!example_data || !any) return std::nullopt;
  Ref kw = Ref::steal(PyDict_New());
  std::vector<std::pair<std::string, ArgTree>> tkw;
  bool kw_device = false;
  for (auto& [k, v] : kwargs) {
    if ((k != "dtype" && k != "device") || v->kind != VK::Const) return std::nullopt;
    if (k == "device") {
      kw_device = true;
      device = Ref::steal(PyObject_CallFunctionObjArgs(py().torch_device.get(), v->obj.get(), nullptr));
      if (!device) return PyErr_Clear(), std::nullopt;
    } else if (PyDict_SetItemString(kw.get(), k.c_str(), v->obj.get()) < 0) {
      return PyErr_Clear(), std::nullopt;
    }
    ArgTree a;
    if (!t.to_arg(v, a)) return std::nullopt;
    tkw.emplace_back(k, std::move(a));
  }
  // No device given: torch.tensor's result is on the CPU, where torch._refs.tensor's is the elements'.
  if (!kw_device) {
    Ref dev_type = device ? Ref::steal(PyObject_GetAttrString(device.get(), "type")) : Ref();
    if (!dev_type || !PyUnicode_Check(dev_type.get()) || str_of(dev_type.get()) != "cpu") return PyErr_Clear(), std::nullopt;
  }
  static PyObject* refs_tensor = refs_tensor_factory();
  Ref example = Ref::steal(PyObject_Call(tensor_factory(), Ref::steal(PyTuple_Pack(1, example_data.get())).get(), kw.get()));
  if (example) example = Ref::steal(PyObject_CallMethod(example.get(), "to", "O", py().meta_str.get()));
  if (!example || !refs_tensor) return PyErr_Clear(), std::nullopt;
  ArgTree a;
  if (!t.to_arg(arg, a)) return std::nullopt;
  handled = true;
  const int n = t.add_graph_call_kw(refs_tensor, {std::move(a)}, std::move(tkw), example);
  out = t.from_example(f, example, n, device);
  return std::nullopt;
}
// operator.setitem(d, k, v), operator.getitem(xs, i), operator.mul(a, b), operator.contains(c, k),
// operator.is_(a, b) ... called as functions (functools.reduce(operator.mul, dims), a dispatch
// table of operators): the statement each spells, through the opcode's own handler, so that a
// list or dict is read or mutated as the statement would, a tensor makes a graph node, and
// constants fold. The arguments are pushed on the frame's stack for the handler and taken off again
// whatever it does (a break or a raise sees the stack as it was). Else `handled` stays false.
Status operator_function(Translator& t, Frame& f, PyObject* o, const std::vector<VPtr>& args, VPtr& out, bool& handled) {
  if (!PyCFunction_Check(o) || !reinterpret_cast<PyCFunctionObject*>(o)->m_module ||
      !PyUnicode_Check(reinterpret_cast<PyCFunctionObject*>(o)->m_module) ||
      str_of(reinterpret_cast<PyCFunctionObject*>(o)->m_module) != "_operator")
    return std::nullopt;
  const std::string name = reinterpret_cast<PyCFunctionObject*>(o)->m_ml->ml_name;
  using Handler = Status (*)(Translator&, Frame&, const Instr&);
  struct Spec {
    Handler op;
    size_t nargs;
    int arg;       // the instruction's oparg
    int index;     // its cmp_op index (COMPARE_OP)
    bool swapped;  // contains(a, b) is `b in a`
    bool result;   // pushes a result
  };
  static const std::unordered_map<std::string, Spec> specs = [] {
    std::unordered_map<std::string, Spec> m;
    const char* bin[] = {"add", "and_", "floordiv", "lshift", "matmul", "mul", "mod", "or_", "pow", "rshift", "sub", "truediv", "xor"};
    for (int i = 0; i < 13; ++i) {
      m[bin[i]] = {op_BINARY_OP, 2, i, 0, false, true};
      std::string in = std::string("i") + bin[i];
      if (in.back() == '_') in.pop_back();
      m[in] = {op_BINARY_OP, 2, i + 13, 0, false, true};
    }
    const char* cmp[] = {"lt", "le", "eq", "ne", "gt", "ge"};
    for (int i = 0; i < 6; ++i) m[cmp[i]] = {op_COMPARE_OP, 2, i, i, false, true};
    m["getitem"] = {op_BINARY_SUBSCR, 2, 0, 0, false, true};
    m["setitem"] = {op_STORE_SUBSCR, 3, 0, 0, false, false};
    m["delitem"] = {op_DELETE_SUBSCR, 2, 0, 0, false, false};
    m["contains"] = {op_CONTAINS_OP, 2, 0, 0, true, true};
    m["is_"] = {op_IS_OP, 2, 0, 0, false, true};
    m["is_not"] = {op_IS_OP, 2, 1, 0, false, true};
    m["not_"] = {op_UNARY_NOT, 1, 0, 0, false, true};
    m["neg"] = {op_UNARY_NEGATIVE, 1, 0, 0, false, true};
    m["pos"] = {op_UNARY_POSITIVE, 1, 0, 0, false, true};
    m["invert"] = {op_UNARY_INVERT, 1, 0, 0, false, true};
    m["inv"] = {op_UNARY_INVERT, 1, 0, 0, false, true};
    return m;
  }();
  auto it = specs.find(name);
  if (it == specs.end() || args.size() != it->second.nargs) return std::nullopt;
  const Spec& spec = it->second;
  handled = true;
  Instr in;
  in.arg = spec.arg;
  in.index = spec.index;
  const size_t depth = f.stack.size();
  if (name == "setitem") {  // setitem(a, b, c): `a[b] = c`, whose stack is (c a b)
    f.stack.insert(f.stack.end(), {args[2], args[0], args[1]});
  } else if (spec.swapped) {
    f.stack.insert(f.stack.end(), {args[1], args[0]});
  } else {
    f.stack.insert(f.stack.end(), args.begin(), args.end());
  }
  if (Status s = spec.op(t, f, in)) {
    f.stack.resize(std::min(depth, f.stack.size()));
    return s;
  }
  if (spec.result) {
    out = f.stack.back();
  } else {
    out = t.constant(Ref::borrow(Py_None));
  }
  f.stack.resize(depth);
  return std::nullopt;
}

}  // namespace

// Calling an object known by identity (VK::Object's call): builtins, torch functions and operators,
// classes, operator getters, NumPy ...
// numpy.iinfo and numpy.finfo (by name: NumPy need not be imported)
bool numpy_info_class(PyObject* o) {
  if (!o || !PyType_Check(o)) return false;
  const char* name = reinterpret_cast<PyTypeObject*>(o)->tp_name;
  if (std::strcmp(name, "iinfo") != 0 && std::strcmp(name, "finfo") != 0) return false;
  Ref mod = Ref::steal(PyObject_GetAttrString(o, "__module__"));
  PyErr_Clear();
  return mod && PyUnicode_Check(mod.get()) && str_of(mod.get()) == "numpy";
}

namespace {
bool numpy_dtype(PyObject* o) {  // a numpy.dtype instance (np.dtype("float32"), a.dtype)
  for (PyTypeObject* tp = Py_TYPE(o); tp; tp = tp->tp_base)
    if (std::strcmp(tp->tp_name, "numpy.dtype") == 0) return true;
  return false;
}
}  // namespace

bool numpy_dtype_factory(PyObject* fn) {
  static PyObject* const makes[] = {kept_attr("torch", "tensor"), kept_attr("torch", "as_tensor"), kept_attr("torch", "asarray")};
  PyErr_Clear();
  return std::find(std::begin(makes), std::end(makes), fn) != std::end(makes);
}

// min(1.0, lam) / max(step, 2) of NumPy scalars: as Python compares them, each against the winner
// so far (max: one strictly greater wins; min: strictly less), each comparison a guard -- the
// winner keeps its own type (np.float64 or the Python number), which only a branch can tell. A
// compile per side of the comparison, not per value. `handled` false: not such a call.
static Status np_scalar_min_max(Translator& t, Frame& f, PyObject* fn, const std::vector<VPtr>& args, const KwArgs& kwargs,
                                VPtr& out, bool& handled) {
  static PyObject* builtin_min = kept_attr("builtins", "min");
  static PyObject* builtin_max = kept_attr("builtins", "max");
  auto number = [](const VPtr& v) {
    return v->kind == VK::NpScalar || v->kind == VK::Sym ||
           (v->kind == VK::Const && (PyLong_CheckExact(v->obj.get()) || PyFloat_CheckExact(v->obj.get())));
  };
  handled = fn && (fn == builtin_min || fn == builtin_max) && kwargs.empty() && args.size() >= 2 &&
            std::any_of(args.begin(), args.end(), [](const VPtr& v) { return v->kind == VK::NpScalar; }) &&
            std::all_of(args.begin(), args.end(), number);
  if (!handled) return std::nullopt;
  VPtr acc = args[0];
  for (size_t i = 1; i < args.size(); ++i) {
    VPtr r;
    if (Status s = t.compare(f, fn == builtin_max ? Py_GT : Py_LT, args[i], acc, r)) return s;
    bool wins = false;
    if (Status s = t.truth(f, r, wins)) return s;
    if (wins) acc = args[i];
  }
  out = acc;
  return std::nullopt;
}

static bool numpy_floating(PyObject* o) {  // an np.float16/32/64 ... scalar (by its bases' names: NumPy may be unimported)
  for (PyTypeObject* tp = Py_TYPE(o); tp; tp = tp->tp_base)
    if (std::strcmp(tp->tp_name, "numpy.floating") == 0) return true;
  return false;
}

// np.sqrt(1. - lam), np.add(lam, 1), np.clip(lam, 0.2, 0.8) of a symbolic numpy.float64
// (values/np_scalar.cpp) and numbers: computed on the float it stands for, NumPy's type again, as eager
// gets from NumPy -- sqrt, sin, cos, tan, tanh, arctan, arcsin, arccos and log2 as math's functions of a
// symbolic float are (torch._sym_sqrt ... nodes), each guarded to the domain where NumPy's and math's
// agree (sqrt of a negative is NumPy's nan and warning, math's ValueError: that value is specialised,
// below); add, subtract and multiply as the operators; maximum, minimum and clip (np.minimum(np.maximum(a,
// lo), hi)) as comparisons, each a guard (the winner keeps its type, a bound an np.float64, as NumPy
// returns it). Other NumPy functions of it are given its constant (np_scalar_arguments) and computed
// then (Translator::numpy_of_scalars). `handled` false: not such a call.
static Status np_scalar_ufunc(Translator& t, Frame& f, PyObject* fn, const std::vector<VPtr>& args, const KwArgs& kwargs,
                              VPtr& out, bool& handled) {
  handled = false;
  PyObject* f64 = numpy_float64_type();
  if (!f64 || !kwargs.empty() || args.empty()) return std::nullopt;
  auto sym = [&](const VPtr& v) { return v->kind == VK::NpScalar && v->obj.get() == f64; };
  auto as_float64 = [&](const VPtr& number, VPtr& out) -> Status {  // a bound that won, as NumPy returns it
    out = t.make(VK::Object);
    out->obj = Ref::steal(PyObject_CallOneArg(f64, number->obj.get()));
    if (!out->obj) return PyErr_Clear(), t.brk(f, "DV0006", "a bound of a NumPy scalar as numpy.float64");
    return std::nullopt;
  };
  auto plain_number = [](const VPtr& v) {
    return v->kind == VK::Const && (PyLong_CheckExact(v->obj.get()) || PyFloat_CheckExact(v->obj.get()));
  };
  if (std::none_of(args.begin(), args.end(), sym) ||
      !std::all_of(args.begin(), args.end(), [&](const VPtr& v) { return sym(v) || plain_number(v); }))
    return std::nullopt;
  static PyObject* const ufunc_type = [] {
    PyObject* sqrt = kept_attr("numpy", "sqrt");
    PyObject* tp = sqrt ? reinterpret_cast<PyObject*>(Py_TYPE(sqrt)) : nullptr;
    Py_XDECREF(sqrt);
    return tp;  // (numpy.ufunc: NumPy stays imported for the process)
  }();
  static PyObject* const clip = kept_attr("numpy", "clip");
  if (fn == clip && clip && args.size() == 3 && sym(args[0]) && plain_number(args[1]) && plain_number(args[2])) {
    for (int i = 1; i < 3; ++i)  // (a NaN bound: NumPy's nan, left to it)
      if (std::isnan(PyFloat_AsDouble(args[i]->obj.get())) || PyErr_Occurred()) return PyErr_Clear(), std::nullopt;
    handled = true;
    VPtr acc = args[0];
    for (int side = 0; side < 2; ++side) {  // a < lo: lo; then acc > hi: hi
      VPtr r;
      if (Status s = t.compare(f, side == 0 ? Py_LT : Py_GT, acc, args[1 + side], r)) return s;
      bool wins = false;
      if (Status s = t.truth(f, r, wins)) return s;
      if (wins)
        if (Status s = as_float64(args[1 + side], acc)) return s;
    }
    out = acc;
    return std::nullopt;
  }
  if (!ufunc_type || reinterpret_cast<PyObject*>(Py_TYPE(fn)) != ufunc_type) return std::nullopt;
  Ref name_obj = Ref::steal(PyObject_GetAttrString(fn, "__name__"));
  if (!name_obj || !PyUnicode_Check(name_obj.get())) return PyErr_Clear(), std::nullopt;
  const std::string name = str_of(name_obj.get());
  if (args.size() == 2 && (name == "maximum" || name == "minimum")) {
    // of the scalar and a number: the number where it compares greater (less), a guard; else the
    // scalar -- a NaN one too, which NumPy propagates. (Of two symbolic scalars, or a NaN number:
    // specialised.)
    const int c = args[0]->kind == VK::Const ? 0 : 1;
    if (args[c]->kind != VK::Const || args[1 - c]->kind != VK::NpScalar) return std::nullopt;
    const double cv = PyFloat_AsDouble(args[c]->obj.get());
    if (PyErr_Occurred() || std::isnan(cv)) return PyErr_Clear(), std::nullopt;
    handled = true;
    VPtr r;
    if (Status s = t.compare(f, name == "maximum" ? Py_GT : Py_LT, args[c], args[1 - c], r)) return s;
    bool number = false;
    if (Status s = t.truth(f, r, number)) return s;
    if (number) return as_float64(args[c], out);
    out = args[1 - c];
    return std::nullopt;
  }
  if (args.size() == 2) {
    const int op = name == "add" ? 0 : name == "multiply" ? 5 : name == "subtract" ? 10 : -1;  // BINARY_OP's
    if (op < 0) return std::nullopt;
    handled = true;
    return t.binary(f, op, args[0], args[1], out);
  }
  struct Unary {
    const char* math;  // torch._sym_<math>
    double lo, hi;     // NumPy's and math's agree in [lo, hi]
    bool open_lo;      // (lo, hi]
  };
  static const std::unordered_map<std::string, Unary> unary = {
      {"sqrt", {"sqrt", 0.0, HUGE_VAL, false}}, {"sin", {"sin", -HUGE_VAL, HUGE_VAL, false}},
      {"cos", {"cos", -HUGE_VAL, HUGE_VAL, false}}, {"tan", {"tan", -HUGE_VAL, HUGE_VAL, false}},
      {"tanh", {"tanh", -HUGE_VAL, HUGE_VAL, false}}, {"arctan", {"atan", -HUGE_VAL, HUGE_VAL, false}},
      {"arcsin", {"asin", -1.0, 1.0, false}}, {"arccos", {"acos", -1.0, 1.0, false}}, {"log2", {"log2", 0.0, HUGE_VAL, true}}};
  auto it = unary.find(name);
  if (args.size() != 1 || it == unary.end()) return std::nullopt;
  const Unary& u = it->second;
  VPtr x = args[0]->self;
  for (int side = 0; side < 2; ++side) {  // within the domain (infinite bounds: none to check), each bound a guard
    const double bound = side == 0 ? u.lo : u.hi;
    if (std::isinf(bound)) continue;
    VPtr r;
    const int cmp = side == 0 ? (u.open_lo ? Py_GT : Py_GE) : Py_LE;
    if (Status s = t.compare(f, cmp, x, t.constant_steal(PyFloat_FromDouble(bound)), r)) return s;
    bool inside = false;
    if (Status s = t.truth(f, r, inside)) return s;
    if (!inside) return std::nullopt;  // (its constant, computed by NumPy: a break where it warns)
  }
  Ref target = Ref::steal(PyObject_GetAttrString(py().torch.get(), (std::string("_sym_") + u.math).c_str()));
  if (!target) return PyErr_Clear(), std::nullopt;
  handled = true;
  VPtr r;
  if (Status s = t.graph_call(f, target, "", {x}, {}, r)) return s;
  out = np_scalar_value(t, r, f64);
  return std::nullopt;
}

// numpy.float64 and int64 arguments whose value is symbolic (values/np_scalar.cpp) as `fn` reads them:
// a torch operator, the number it stands for (Kind<VK::NpScalar>::graph_arg, in containers too) -- but
// torch.tensor, as_tensor and asarray, which make a float64 tensor of a float64 where a float gives
// float32 (an int64's tensor is an int's); float(), int() and math's functions, its number (a symbolic number); operator's
// functions, as the operators (Translator::binary). Anything else is given its constant, the value
// guarded.
static Status np_scalar_arguments(Translator& t, Frame& f, PyObject* fn, std::vector<VPtr>& args, KwArgs& kwargs) {
  std::function<bool(const VPtr&)> any = [&](const VPtr& v) {
    if (v->kind == VK::NpScalar) return true;
    if (v->kind != VK::Tuple && v->kind != VK::List) return false;
    return std::any_of(v->items.begin(), v->items.end(), any);
  };
  if (std::none_of(args.begin(), args.end(), any) &&
      std::none_of(kwargs.begin(), kwargs.end(), [&](const auto& kv) { return any(kv.second); }))
    return std::nullopt;
  Ref mod = Ref::steal(PyObject_GetAttrString(fn, "__module__"));
  if (!mod) PyErr_Clear();
  const std::string module = mod && PyUnicode_Check(mod.get()) ? str_of(mod.get()) : "";
  if (module == "operator" || module == "_operator") return std::nullopt;
  static PyObject* const by_type[] = {kept_attr("builtins", "isinstance"), kept_attr("builtins", "type")};
  static PyObject* const abs_fn = kept_attr("builtins", "abs");
  PyErr_Clear();
  if (std::find(std::begin(by_type), std::end(by_type), fn) != std::end(by_type)) return std::nullopt;  // its python_type
  const bool torch_op = (module_is_torch(fn) || is_tensor_method_descriptor(fn)) && !numpy_dtype_factory(fn);
  if (torch_op) return std::nullopt;
  // torch.tensor, as_tensor, asarray of an np.int64: int64, as of an int (torch.tensor([t]) of a
  // timestep): its SymInt; of an np.float64, its constant (below: float64 where a float is float32)
  const bool reads_int64 = numpy_dtype_factory(fn);
  const bool reads_float = fn == reinterpret_cast<PyObject*>(&PyFloat_Type) || fn == reinterpret_cast<PyObject*>(&PyLong_Type) ||
                           module == "math";
  std::function<Status(VPtr&)> constants = [&](VPtr& v) -> Status {  // (in a container: the same value, specialised)
    if ((v->kind == VK::Tuple || v->kind == VK::List) && reads_int64 && !v->lazy) {
      VPtr copy = t.make(v->kind);  // (the call's own: an int64's SymInt must not replace it in the list the code holds)
      copy->items = v->items;
      copy->obj = v->obj;
      v = copy;
    }
    if (v->kind == VK::Tuple || v->kind == VK::List)
      for (VPtr& x : v->items)
        if (Status s = constants(x)) return s;
    if (reads_int64 && v->kind == VK::NpScalar && v->obj.get() == numpy_int64_type()) {
      v = v->self;
      return std::nullopt;
    }
    return np_scalar_constant(t, f, v);
  };
  auto give = [&](VPtr& v) -> Status {
    if (np_scalar_number(v) && reads_float) {
      v = v->self;
      return std::nullopt;
    }
    if (np_scalar_number(v) && fn == abs_fn) return std::nullopt;  // abs(k): NumPy's type again (builtins.cpp)
    return constants(v);
  };
  for (VPtr& a : args)
    if (Status s = give(a)) return s;
  for (auto& kv : kwargs)
    if (Status s = give(kv.second)) return s;
  return std::nullopt;
}

// torch.compile / dynview.compile(fn, backend=...) called in the trace: fn, captured with the rest
// (its options are moot), as TorchDynamo treats a nested torch.compile
Translator::Status compile_call(Translator& t, Frame& f, const std::vector<VPtr>& args, VPtr& out) {
  if (!args.empty() && (args[0]->kind == VK::Function || args[0]->kind == VK::NNModule || args[0]->kind == VK::Method)) {
    out = args[0];
    return std::nullopt;
  }
  return t.brk(f, "DV0004", "torch.compile(...) without a function to compile, while capturing",
               "call torch.compile outside the compiled function");
}


Status object_call(Translator& t, Frame& f, const VPtr& fn, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  PyObject* o = fn->obj.get();
  if (PyType_Check(o)) {
    // A TypedDict class (typing's and typing_extensions' metaclass has `__call__ = dict`): calling it
    // makes a plain dict of its arguments (LlavaImagePixelInputs(type=..., data=x))
    static PyObject* call_name = PyUnicode_InternFromString("__call__");
    if (_PyType_Lookup(Py_TYPE(o), call_name) == reinterpret_cast<PyObject*>(&PyDict_Type))
      return t.call(f, t.wrap(Ref::borrow(reinterpret_cast<PyObject*>(&PyDict_Type)), nullptr, f), std::move(args), std::move(kwargs), out);
  }
  if (o == reinterpret_cast<PyObject*>(&_PyWeakref_RefType) && args.size() == 1 && kwargs.empty()) {
    // weakref.ref(v): a reference the trace follows to v (values/weakref.cpp); a value that takes no
    // weak reference (an int, a tuple: eager raises TypeError) breaks
    const VPtr& v = args[0];
    if (v->kind == VK::Const || v->kind == VK::Tuple || v->kind == VK::List || v->kind == VK::Dict || v->kind == VK::Sym ||
        v->kind == VK::Lazy)
      return t.brk(f, "DV0004", std::string("weakref.ref of a ") + vk_name(v->kind));
    out = t.make(VK::WeakRef);
    out->self = v;
    return std::nullopt;
  }
  if (PyWeakref_CheckRef(o) && fn->source && args.empty() && kwargs.empty()) {
    // w() of a weakref from the frame: its referent, read through L['w']() and guarded as any value
    // is (a referent that died is None: the guard on it fails and the frame compiles again)
    t.add_guard(GuardKind::TYPE_MATCH, fn->source, Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o))), f,
                "___check_type_id(" + fn->source->text() + ", " + Py_TYPE(o)->tp_name + ")");
    static PyObject* call_fn = PyObject_GetAttrString(reinterpret_cast<PyObject*>(&_PyWeakref_RefType), "__call__");  // kept
    if (!call_fn) return PyErr_Clear(), t.brk(f, "DV0004", "calling a weakref");
    out = t.wrap(Ref::borrow(PyWeakref_GET_OBJECT(o)), Source::weakref_call(fn->source, Ref::borrow(call_fn)), f);
    if (!out) return t.brk(f, "DV0004", "calling a weakref: its referent cannot be traced");
    return std::nullopt;
  }
  if (std::strcmp(Py_TYPE(o)->tp_name, "dynview._C.CompiledFunction") == 0) {
    // dynview.compile(g) called in the trace (a submodule or helper compiled on its own, then the
    // whole model): g, inlined, as TorchDynamo inlines a torch.compile'd function's original
    Ref orig = Ref::steal(PyObject_GetAttrString(o, "_orig_fn"));
    VPtr inner = orig ? t.wrap(orig, fn->source ? Source::attr(fn->source, "_orig_fn") : nullptr, f) : nullptr;
    PyErr_Clear();
    if (!inner) return t.brk(f, "DV0004", "call to a function compiled by dynview.compile");
    return t.call(f, inner, std::move(args), std::move(kwargs), out);
  }
  static PyObject* const str_format_descr = [] {  // str.format (the same descriptor each read; kept for the process)
    PyObject* d = PyObject_GetAttrString(reinterpret_cast<PyObject*>(&PyUnicode_Type), "format");
    if (!d) PyErr_Clear();
    return d;
  }();
  if (o == str_format_descr && !args.empty() && args[0]->kind == VK::Const && PyUnicode_CheckExact(args[0]->obj.get())) {
    std::vector<VPtr> rest(args.begin() + 1, args.end());  // str.format(fmt, ...): as fmt.format(...)
    bool handled = false;
    if (Status s = str_format(t, f, args[0]->obj.get(), rest, kwargs, out, handled); s || handled) return s;
  }
  if (o && o == numpy_float64_type() && args.size() == 1 && kwargs.empty() &&
      (args[0]->kind == VK::NpScalar || (args[0]->kind == VK::Sym && sym_python_type(args[0]->obj.get()) == &PyFloat_Type))) {
    // np.float64(lam), np.float64(a float of sizes): the same number, NumPy's type
    out = args[0]->kind == VK::NpScalar ? args[0] : np_scalar_value(t, args[0], o);
    return std::nullopt;
  }
  bool min_max = false;
  if (Status s = np_scalar_min_max(t, f, o, args, kwargs, out, min_max); s || min_max) return s;
  bool np_ufunc = false;
  if (Status s = np_scalar_ufunc(t, f, o, args, kwargs, out, np_ufunc); s || np_ufunc) return s;
  if (Status s = np_scalar_arguments(t, f, o, args, kwargs)) return s;
  if (kwargs.empty()) {
    bool handled = false;
    if (Status s = operator_function(t, f, o, args, out, handled); s || handled) return s;
  }
  if (t.output.dynamic() && !module_is_torch(o) && !is_tensor_method_descriptor(o)) {
    // Python callables see Python values: symbolic ints are specialised (and guarded) here, as
    // TorchDynamo does for range(n) and the like -- but for the builtins that keep them symbolic.
    bool any_sym = false;
    for (const VPtr& a : args) {
      any_sym |= a->kind == VK::Sym;
      if (args.size() == 1 && (a->kind == VK::Tuple || a->kind == VK::List))  // min(sizes), max(shape[-2:])
        for (const VPtr& x : a->items) any_sym |= x->kind == VK::Sym;
    }
    if (any_sym) {
      bool handled = false;
      if (Status s = sym_builtin(t, f, o, args, kwargs, out, handled); s || handled) return s;
    }
    for (VPtr& a : args)
      if (a->kind == VK::Sym) {
        Ref r = t.specialize(a);
        if (!r) return t.brk(f, "DV0021", "cannot specialise a symbolic value for " + callable_name(o));
        a = t.constant(r);
      }
  }
  if (o == reinterpret_cast<PyObject*>(&PySuper_Type)) return t.call_super(f, args, out);
  if ((Py_IS_TYPE(o, &PyMethodDescr_Type) || Py_IS_TYPE(o, &PyWrapperDescr_Type)) && !args.empty() &&
      (args[0]->kind == VK::Dict || args[0]->kind == VK::List || args[0]->kind == VK::Tuple || args[0]->kind == VK::Const)) {
    // dict.get(d, k), list.append(l, x), set.issubset(q, p), str.join(sep, parts), set.__sub__(p, q): a builtin type's
    // method called with an instance of exactly that type first is that instance's method (for a
    // subclass, whose override was not what was called, this does not apply)
    PyTypeObject* owner = PyDescr_TYPE(o);
    if (ops(args[0]->kind).python_type(t, args[0]) == reinterpret_cast<PyObject*>(owner)) {
      VPtr self = args[0];
      args.erase(args.begin());
      return t.call(f, t.bound_method(self, Ref(), str_of(PyDescr_NAME(o))), std::move(args), std::move(kwargs), out);
    }
  }
  if (const int kind = operator_getter(o); kind == 3 && !PyType_Check(o) && args.size() == 1 && kwargs.empty()) {
    // operator.methodcaller(name, *args, **kwargs)(x): x.name(*args, **kwargs). Its __reduce__
    // gives (methodcaller, (name, *args)) or (partial(methodcaller, name, **kwargs), args).
    Ref red = Ref::steal(PyObject_CallMethod(o, "__reduce__", nullptr));
    if (!red || !PyTuple_Check(red.get()) || PyTuple_GET_SIZE(red.get()) < 2 || !PyTuple_Check(PyTuple_GET_ITEM(red.get(), 1)))
      return PyErr_Clear(), t.brk(f, "DV0004", "call of an operator.methodcaller");
    PyObject* head = PyTuple_GET_ITEM(red.get(), 0);
    PyObject* rest = PyTuple_GET_ITEM(red.get(), 1);
    Ref name, cargs, ckw;
    if (PyType_Check(head)) {
      if (PyTuple_GET_SIZE(rest) < 1) return t.brk(f, "DV0004", "call of an operator.methodcaller");
      name = Ref::borrow(PyTuple_GET_ITEM(rest, 0));
      cargs = Ref::steal(PyTuple_GetSlice(rest, 1, PyTuple_GET_SIZE(rest)));
    } else {
      Ref pargs = Ref::steal(PyObject_GetAttrString(head, "args"));
      ckw = Ref::steal(PyObject_GetAttrString(head, "keywords"));
      if (!pargs || !ckw || !PyTuple_Check(pargs.get()) || PyTuple_GET_SIZE(pargs.get()) < 1 || !PyDict_Check(ckw.get()))
        return PyErr_Clear(), t.brk(f, "DV0004", "call of an operator.methodcaller");
      name = Ref::borrow(PyTuple_GET_ITEM(pargs.get(), 0));
      cargs = Ref::borrow(rest);
    }
    if (!PyUnicode_Check(name.get())) return t.brk(f, "DV0004", "call of an operator.methodcaller");
    VPtr m;
    if (Status s = t.getattr(f, args[0], str_of(name.get()), m)) return s;
    std::vector<VPtr> margs;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(cargs.get()); ++i) {
      PyObject* a = PyTuple_GET_ITEM(cargs.get(), i);
      if (!is_exact_const(a)) return t.brk(f, "DV0004", "operator.methodcaller with a " + std::string(Py_TYPE(a)->tp_name) + " argument");
      margs.push_back(t.constant(Ref::borrow(a)));
    }
    std::vector<std::pair<std::string, VPtr>> mkw;
    if (ckw) {
      Py_ssize_t pos = 0;
      PyObject *k, *v;
      while (PyDict_Next(ckw.get(), &pos, &k, &v)) {
        if (!is_exact_const(v)) return t.brk(f, "DV0004", "operator.methodcaller with a " + std::string(Py_TYPE(v)->tp_name) + " argument");
        mkw.emplace_back(str_of(k), t.constant(Ref::borrow(v)));
      }
    }
    return t.call(f, m, std::move(margs), std::move(mkw), out);
  }
  if (const int kind = operator_getter(o); kind && kind != 3 && !PyType_Check(o) && args.size() == 1 && kwargs.empty()) {
    // operator.itemgetter(k...)(x) / attrgetter("a.b"...)(x): x[k] / x.a.b, one or a tuple
    Ref red = Ref::steal(PyObject_CallMethod(o, "__reduce__", nullptr));
    if (!red || !PyTuple_Check(red.get()) || PyTuple_GET_SIZE(red.get()) < 2 || !PyTuple_Check(PyTuple_GET_ITEM(red.get(), 1)))
      return PyErr_Clear(), t.brk(f, "DV0004", "call of an operator getter");
    PyObject* keys = PyTuple_GET_ITEM(red.get(), 1);
    std::vector<VPtr> got;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(keys); ++i) {
      PyObject* k = PyTuple_GET_ITEM(keys, i);
      VPtr v = args[0];
      if (kind == 1) {
        if (Status s = t.subscr(f, v, t.constant(Ref::borrow(k)), v)) return s;
      } else {
        std::string path = str_of(k);
        for (size_t start = 0; start <= path.size();) {
          const size_t dot = path.find('.', start);
          if (Status s = t.getattr(f, v, path.substr(start, dot - start), v)) return s;
          if (dot == std::string::npos) break;
          start = dot + 1;
        }
      }
      got.push_back(v);
    }
    if (got.size() == 1) {
      out = got[0];
    } else {
      out = t.make(VK::Tuple);
      out->items = std::move(got);
    }
    return std::nullopt;
  }
  if (fn->kind == VK::Object && Py_IS_TYPE(o, reinterpret_cast<PyTypeObject*>(py().functools_partial.get())))
    return t.call_partial(f, o, fn->source, args, kwargs, out);
  if (PyType_Check(o) && std::strncmp(reinterpret_cast<PyTypeObject*>(o)->tp_name, "torch.return_types.", 19) == 0 &&
      args.size() == 1 && kwargs.empty() && (args[0]->kind == VK::Tuple || args[0]->kind == VK::List)) {
    // torch.return_types.max((values, indices)) (pytree's unflatten of one): a named result of these
    // items, as an operator's is (its class in obj, its fields' names in keys)
    Ref n_seq = Ref::steal(PyObject_GetAttrString(o, "n_sequence_fields"));
    Ref fields = Ref::steal(PyObject_GetAttrString(o, "__match_args__"));
    PyErr_Clear();
    const Py_ssize_t n = n_seq && PyLong_Check(n_seq.get()) ? PyLong_AsSsize_t(n_seq.get()) : -1;
    if (n < 0 || !fields || !PyTuple_Check(fields.get()) || static_cast<Py_ssize_t>(args[0]->items.size()) != n)
      return t.brk(f, "DV0013", std::string("constructing ") + reinterpret_cast<PyTypeObject*>(o)->tp_name + " from other than its fields");
    out = t.make(VK::Tuple);
    out->obj = Ref::borrow(o);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fields.get()); ++i) out->keys.push_back(Ref::borrow(PyTuple_GET_ITEM(fields.get(), i)));
    out->items = args[0]->items;
    return std::nullopt;
  }
  bool handled = false;
  if (Status s = t.call_numpy(f, o, args, kwargs, out, handled); s || handled) return s;  // np.<fn>: torch._numpy
  if (Status s = t.ndarray_to_tensor(f, o, args, kwargs, out, handled); s || handled) return s;  // torch.from_numpy(nd)
  static PyObject* const exc_info_fn = kept_attr("sys", "exc_info");
  static PyObject* const exception_fn = kept_attr("sys", "exception");  // 3.12+
  if (exc_info_fn || exception_fn) PyErr_Clear();
  if ((o == exc_info_fn || o == exception_fn) && args.empty() && kwargs.empty()) {
    // sys.exc_info() / sys.exception() in an except block of the traced code: the exception it
    // handles (run at trace time they would see none)
    if (!t.exc_info || !t.exc_info->obj) {
      // none handled in the trace: none at all, as TorchDynamo takes it (ExitStack.__exit__ asks),
      // not whatever the caller handled while this was traced
      out = t.constant(o == exception_fn ? Ref::borrow(Py_None) : Ref::steal(PyTuple_Pack(3, Py_None, Py_None, Py_None)));
      return std::nullopt;
    }
    if (o == exception_fn) {
      out = t.exc_info;
      return std::nullopt;
    }
    VPtr tup = t.make(VK::Tuple);
    VPtr type = t.make(VK::Object);
    type->obj = Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(t.exc_info->obj.get())));
    // (an exception raised in the trace has not gone through a frame: no traceback yet)
    if (Ref tb = Ref::steal(PyException_GetTraceback(t.exc_info->obj.get())))
      return t.brk(f, "DV0010", "sys.exc_info() of an exception with a traceback");
    tup->items = {type, t.exc_info, t.constant(Ref::borrow(Py_None))};
    out = tup;
    return std::nullopt;
  }
  // collections.deque/OrderedDict/defaultdict, namedtuple classes, object(), lru_cache wrappers
  if (Status s = t.call_library(f, fn, args, kwargs, out, handled); s || handled) return s;
  if (Status s = call_builtin(t, f, o, args, kwargs, out, handled)) return s;
  if (handled) return std::nullopt;
  if (PyType_Check(o) && PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(o), reinterpret_cast<PyTypeObject*>(py().nn_Module.get())))
    return t.construct_module(f, o, args, kwargs, out);
  if (o == py().no_grad.get() || o == py().enable_grad.get()) {
    VPtr g = t.make(VK::GradMode);
    g->flag = o == py().enable_grad.get();
    out = g;
    // torch.no_grad(fn), as @torch.no_grad with no parentheses calls it: the decorated function,
    // as torch.no_grad()(fn) gives (Kind<VK::GradMode>::call)
    if (!args.empty() || !kwargs.empty()) return t.call(f, g, std::move(args), std::move(kwargs), out);
    return std::nullopt;
  }
  if (o == py().set_grad_enabled.get() && args.size() == 1 && kwargs.empty() && args[0]->kind == VK::Const) {
    // torch.set_grad_enabled(b) sets the mode as it is made (a statement, or a with-block's manager
    // whose exit restores the mode before it)
    VPtr g = t.make(VK::GradMode);
    g->name = kGradSetEnabled;
    g->flag = PyObject_IsTrue(args[0]->obj.get()) == 1;
    g->obj = Ref::borrow(grad_mode_enabled() ? Py_True : Py_False);
    if (Status s = set_grad_mode(t, f, g->flag)) return s;
    out = g;
    return std::nullopt;
  }
  if (autocast_spelling(o)) {
    // torch.autocast(device_type, dtype=..., enabled=..., cache_enabled=...) of constants: the real
    // object, made now (its __init__ reads the autocast state and checks its arguments); a with-block
    // on it is traced (autocast.cpp)
    bool consts = true;
    for (const VPtr& a : args) consts &= a->kind == VK::Const;
    for (auto& kv : kwargs) consts &= kv.second->kind == VK::Const;
    if (consts) {
      Ref r;
      if (Status s = call_on_constants(t, f, o, "torch.autocast", args, kwargs, r)) return s;
      out = t.make(VK::Object);
      out->obj = r;
      return std::nullopt;
    }
  }
  if (o == inference_mode_class() && args.size() <= 1 && kwargs.size() <= 1) {
    // torch.inference_mode() / inference_mode(False) / inference_mode(mode=b) of a constant: the real
    // object, made now (it holds only its mode); a with-block on it is traced (inference_mode.cpp).
    // inference_mode(fn), the decorator without parentheses, is followed as Python below.
    VPtr mode = !args.empty() ? args[0] : !kwargs.empty() && kwargs[0].first == "mode" ? kwargs[0].second : nullptr;
    if ((!args.empty() || !kwargs.empty()) && !mode) return t.brk(f, "DV0004", "torch.inference_mode with keyword " + kwargs[0].first);
    if (!mode || (mode->kind == VK::Const && PyBool_Check(mode->obj.get()))) {
      Ref r;
      if (Status s = call_on_constants(t, f, o, "torch.inference_mode", args, kwargs, r)) return s;
      out = t.make(VK::Object);
      out->obj = r;
      return std::nullopt;
    }
  }
  if (is_profiler_range(o)) {
    // torch.autograd.profiler.record_function(name) (Optimizer.step's wrapper), a profiler block
    // (torch.profiler.profile()): ignored while capturing as TorchDynamo ignores them -- a
    // contextlib.nullcontext() in their place.
    static PyObject* nullcontext = [] {
      Ref contextlib = Ref::steal(PyImport_ImportModule("contextlib"));
      PyObject* n = contextlib ? PyObject_GetAttrString(contextlib.get(), "nullcontext") : nullptr;  // kept
      PyErr_Clear();
      return n;
    }();
    if (!nullcontext) return t.brk(f, "DV0004", "constructing " + callable_name(o) + " inside the traced code");
    return t.call(f, t.wrap(Ref::borrow(nullcontext), nullptr, f), {}, {}, out);
  }
  const TorchSpecial special = torch_special(o);
  if (t.fn_mode_active() && (special == TorchSpecial::of_examples || special == TorchSpecial::tensor_method || special == TorchSpecial::as_tensor))
    // answered without a node, but overridable: eager gives them to a torch function mode (its
    // handler's call of the function comes back here with the mode off the stack)
    return t.call_fn_mode(f, Ref::borrow(o), std::move(args), std::move(kwargs), out);
  switch (special) {
    case TorchSpecial::none: break;
    case TorchSpecial::graph_break: return t.brk(f, "DV0026", "torch._dynamo.graph_break()");
    case TorchSpecial::sdpa_kernel: return t.make_sdpa_kernel(f, args, kwargs, out);
    case TorchSpecial::saved_hooks_off: return t.make_saved_hooks_off(f, args, kwargs, out);
    case TorchSpecial::vmap: return t.make_vmapped(f, std::move(args), std::move(kwargs), out);
    case TorchSpecial::vmap_impl: {
      if (args.size() < 5) return t.brk(f, "DV0004", "functorch's vmap_impl with these arguments");
      VPtr fn;
      if (Status s = t.make_vmapped(f, {args[0], args[1], args[2], args[3]}, {{"chunk_size", args[4]}}, fn)) return s;
      return t.call_vmapped(f, fn, std::vector<VPtr>(args.begin() + 5, args.end()), std::move(kwargs), out);
    }
    case TorchSpecial::func_grad: return t.make_func_grad(f, Translator::FuncMode::grad, std::move(args), std::move(kwargs), out);
    case TorchSpecial::func_grad_and_value:
      return t.make_func_grad(f, Translator::FuncMode::grad_and_value, std::move(args), std::move(kwargs), out);
    case TorchSpecial::func_eager:
      return t.brk(f, "DV0004", callable_name(o) + " is not traced (linearize)",
                   "it runs eagerly; torch.func.grad, grad_and_value, jvp, vjp, jacrev, jacfwd, hessian and vmap are traced");
    case TorchSpecial::func_jvp: return t.call_jvp(f, std::move(args), std::move(kwargs), out);
    case TorchSpecial::func_vjp: return t.call_vjp(f, std::move(args), std::move(kwargs), out);
    case TorchSpecial::func_jacfwd: return t.make_func_grad(f, Translator::FuncMode::jacfwd, std::move(args), std::move(kwargs), out);
    case TorchSpecial::func_hessian: return t.make_hessian(f, std::move(args), std::move(kwargs), out);
    case TorchSpecial::func_jacrev: return t.make_func_grad(f, Translator::FuncMode::jacrev, std::move(args), std::move(kwargs), out);
    case TorchSpecial::functional_call: return t.functional_call(f, std::move(args), std::move(kwargs), out);
    case TorchSpecial::checkpoint: return t.checkpoint_call(f, std::move(args), std::move(kwargs), out);
    case TorchSpecial::grad_impl: return t.func_grad_impl(f, false, std::move(args), std::move(kwargs), out);
    case TorchSpecial::grad_and_value_impl: return t.func_grad_impl(f, true, std::move(args), std::move(kwargs), out);
    case TorchSpecial::compile: return compile_call(t, f, args, out);
    case TorchSpecial::effect:
      return t.brk(f, "DV0004", callable_name(o) + " has effects outside the graph");
    case TorchSpecial::unguarded_state:  // its answer could not be kept: no guard checks that state on later calls
      return t.brk(f, "DV0004", callable_name(o) + " reads state the compiled code's guards do not check",
                   "TorchDynamo breaks the graph here too");
    case TorchSpecial::profiler_state:
    case TorchSpecial::anomaly_state: {
      // a constant of this capture; the GLOBAL_STATE guard checks it from now on (TorchDynamo guards
      // both: a call under the profiler or detect_anomaly compiles again)
      if (!args.empty() || !kwargs.empty()) return t.brk(f, "DV0004", "call to " + callable_name(o) + " with arguments");
      const bool on = special == TorchSpecial::profiler_state ? profiler_enabled() : anomaly_enabled();
      for (Guard& g : t.output.guards)
        if (g.kind == GuardKind::GLOBAL_STATE) (special == TorchSpecial::profiler_state ? g.state.profiler : g.state.anomaly) = on ? 1 : 0;
      out = t.constant(Ref::borrow(on ? Py_True : Py_False));
      return std::nullopt;
    }
    case TorchSpecial::is_grad_enabled:
    case TorchSpecial::get_default_dtype: out = t.constant_steal(PyObject_CallNoArgs(o)); return std::nullopt;
    case TorchSpecial::is_tensor:
      out = t.constant(Ref::borrow(args.size() == 1 && args[0]->kind == VK::Tensor ? Py_True : Py_False));
      return std::nullopt;
    case TorchSpecial::is_tensor_like: {  // a tensor, or a type with __torch_function__
      if (args.size() != 1 || !kwargs.empty()) break;
      const VPtr& a = args[0];
      bool like = a->kind == VK::Tensor;
      if (!like && a->kind != VK::Const && a->kind != VK::Sym && a->kind != VK::Tuple && a->kind != VK::List && a->kind != VK::Dict)
        return t.brk(f, "DV0004", "torch.overrides.is_tensor_like of a " + std::string(vk_name(a->kind)));
      out = t.constant(Ref::borrow(like ? Py_True : Py_False));
      return std::nullopt;
    }
    case TorchSpecial::group_by_device_and_dtype: return group_by_device_and_dtype(t, f, o, args, kwargs, out);
    case TorchSpecial::tensor_method:
      if (args.size() != 1 || !kwargs.empty() || args[0]->kind != VK::Tensor) break;
      return t.call(f, t.bound_method(args[0], Ref(), str_of(Ref::steal(PyObject_GetAttrString(o, "__name__")).get())), {}, {}, out);
    case TorchSpecial::of_examples:
      if (kwargs.size() == 1 && kwargs[0].first == "input" && args.empty()) args.push_back(kwargs[0].second);  // is_floating_point(input=x)
      else if (!kwargs.empty()) break;
      return answer_of_examples(t, f, o, args, out);
    case TorchSpecial::check: {
      // torch._check(cond, message) (transformers' torch_compilable_check calls it while compiling):
      // a condition that is a constant, or a symbolic one over sizes (decided now, and guarded), is
      // checked here -- true: None, and the message (a lambda, often over tensors) is never called;
      // false: a break, and eager raises the error with its message. A tensor condition (eager
      // raises: _check_tensor_all is for those) or any other goes the operator's way.
      static PyObject* check_with = kept_attr("torch", "_check_with");
      const size_t at = o == check_with ? 1 : 0;  // _check_with(error_type, cond, message)
      VPtr cond = args.size() > at ? args[at] : nullptr;
      for (auto& [k, v] : kwargs)
        if (k == "cond") cond = v;
      if (!cond || (cond->kind != VK::Const && cond->kind != VK::Sym)) break;
      // (eager raises a TypeError for a condition neither a bool nor a SymBool)
      if (cond->kind == VK::Const ? !PyBool_Check(cond->obj.get()) : std::string(Py_TYPE(cond->obj.get())->tp_name) != "SymBool") break;
      bool holds = false;
      if (Status s = t.truth(f, cond, holds)) return s;
      if (!holds) return t.brk(f, "DV0007", "torch._check of a condition that is false: eager raises its error here");
      out = t.constant(Ref::borrow(Py_None));
      return std::nullopt;
    }
    case TorchSpecial::is_compiling:  // model code takes its compile path
      out = t.constant(Ref::borrow(Py_True));
      return std::nullopt;
    case TorchSpecial::annotate:  // torch.jit.annotate(type, value) is value
      if (args.size() != 2 || !kwargs.empty()) break;
      out = args[1];
      return std::nullopt;
    case TorchSpecial::as_tensor: {
      // torch.as_tensor(t, dtype=None, device=None) of a tensor: t itself when neither differs, else a
      // copy converted, as t.to(dtype=, device=) (whose meta example works where as_tensor's refuses
      // to copy out of a meta tensor). Of anything else: the operator, as before.
      if (args.empty() || args.size() > 3 || args[0]->kind != VK::Tensor) break;
      static const char* names[] = {"data", "dtype", "device"};
      KwArgs to_kw;
      for (size_t i = 1; i < args.size(); ++i) to_kw.emplace_back(names[i], args[i]);
      bool ok = true;
      for (auto& [k, v] : kwargs) {
        ok &= (k == "dtype" || k == "device");
        to_kw.emplace_back(k, v);
      }
      if (!ok) break;
      KwArgs given;
      for (auto& [k, v] : to_kw)
        if (v->kind != VK::Const || v->obj.get() != Py_None) given.emplace_back(k, v);
      VPtr to;
      if (Status s = t.getattr(f, args[0], "to", to)) return s;
      return t.call(f, to, {}, std::move(given), out);
    }
    case TorchSpecial::not_scripting:  // torch.jit: neither while capturing
      out = t.constant(Ref::borrow(Py_False));
      return std::nullopt;
    case TorchSpecial::push_fn_mode:
      if (args.size() != 1 || !kwargs.empty()) break;
      if (Status s = t.push_fn_mode(f, args[0])) return s;
      out = t.constant(Ref::borrow(Py_None));
      return std::nullopt;
    case TorchSpecial::pop_fn_mode:
      if (!args.empty() || !kwargs.empty()) break;
      return t.pop_fn_mode(f, out);
    case TorchSpecial::fn_mode_state: {
      // the stack the trace keeps (a call under a mode entered outside never reaches the trace)
      if (!args.empty() || !kwargs.empty()) break;
      const Py_ssize_t n = t.fn_mode_depth();
      out = callable_name(o) == "_len_torch_function_stack" ? t.constant_steal(PyLong_FromSsize_t(n))
                                                             : t.constant(Ref::borrow(n > 0 ? Py_True : Py_False));
      return std::nullopt;
    }
    case TorchSpecial::handle_torch_function: {
      // reached from a Python torch function's has_torch_function branch: under a mode of the
      // trace, the mode's handler with func = the public function; else (an argument that defines
      // __torch_function__, which has_torch_function broke on) not traced
      if (args.size() < 2 || !t.fn_mode_active())
        return t.brk(f, "DV0004", "torch.overrides.handle_torch_function outside a torch function mode of the trace");
      if (args[0]->kind != VK::Const && args[0]->kind != VK::Object && args[0]->kind != VK::Function)
        return t.brk(f, "DV0004", "torch.overrides.handle_torch_function of a " + std::string(vk_name(args[0]->kind)));
      Ref api = args[0]->obj;
      std::vector<VPtr> rest(args.begin() + 2, args.end());
      return t.call_fn_mode(f, api, std::move(rest), std::move(kwargs), out);
    }
    case TorchSpecial::has_torch_function: {
      if (t.fn_mode_active()) {  // a mode of the trace: torch dispatches every call to it
        out = t.constant(Ref::borrow(Py_True));
        return std::nullopt;
      }
      // torch.overrides' dispatch test: traced tensors are plain tensors (TENSOR_MATCH checks
      // the exact type), so it is False unless an argument is some other object, which could
      // define __torch_function__.
      std::function<bool(const VPtr&)> plain = [&](const VPtr& v) {
        if (v->kind == VK::Tensor || v->kind == VK::Const || v->kind == VK::Sym) return true;
        if (v->kind == VK::Tuple || v->kind == VK::List) {
          for (const VPtr& i : v->items)
            if (!plain(i)) return false;
          return true;
        }
        return false;
      };
      bool all_plain = kwargs.empty();
      for (const VPtr& a : args) all_plain = all_plain && plain(a);
      if (!all_plain) return t.brk(f, "DV0004", callable_name(o) + " over values that may define __torch_function__");
      out = t.constant(Ref::borrow(Py_False));
      return std::nullopt;
    }
  }
  if (Py_TYPE(o) == method_wrapper_type() && args.size() == 1 && args[0]->kind == VK::Tensor && kwargs.empty()) {
    // Tensor.shape.__get__(x) and the like: what a torch function mode's handler is given for an
    // attribute read, called back -- the attribute of x
    Ref self = Ref::steal(PyObject_GetAttrString(o, "__self__"));
    Ref wname = Ref::steal(PyObject_GetAttrString(o, "__name__"));
    Ref dname = self ? Ref::steal(PyObject_GetAttrString(self.get(), "__name__")) : Ref();
    PyErr_Clear();
    if (wname && dname && PyUnicode_Check(dname.get()) && str_of(wname.get()) == "__get__" &&
        _PyType_Lookup(reinterpret_cast<PyTypeObject*>(py().torch_Tensor.get()), dname.get()) == self.get())
      return t.getattr(f, args[0], str_of(dname.get()), out);
  }
  if (PyFunction_Check(o) && !args.empty() && args[0]->obj && PyType_Check(args[0]->obj.get()) &&
      is_autograd_function_class(args[0]->obj.get()) && str_of(reinterpret_cast<PyFunctionObject*>(o)->func_name) == "apply") {
    // An autograd.Function's own apply (a classmethod override calling super().apply, reached
    // through a decorator's wrapper: torch's ModIndex) given its class: inlined, down to
    // Function.apply -- not a graph node, whose code could not name the class it is given
    VPtr fv = t.make(VK::Function);
    fv->obj = fn->obj;
    return t.inline_call(f, fv, nullptr, std::move(args), std::move(kwargs), out);
  }
  const bool torchy = module_is_torch(o) || is_tensor_method_descriptor(o);
  if (torchy && torch_nn_python_callable(o)) {
    // torch.nn's plain Python callables (weight_norm's WeightNorm and spectral_norm's SpectralNorm
    // forward pre-hooks, pruning methods): their __call__ inlined, as a user object's
    static PyObject* call_name = PyUnicode_InternFromString("__call__");
    return t.call(f, t.bound_method(fn, Ref::borrow(_PyType_Lookup(Py_TYPE(o), call_name)), "__call__"), std::move(args),
                  std::move(kwargs), out);
  }
  if (torchy && !PyType_Check(o)) {
    if (is_tensor_method_descriptor(o) && !args.empty() && args[0]->kind == VK::Tensor) {
      VPtr mv = t.bound_method(args[0], Ref(), str_of(Ref::steal(PyObject_GetAttrString(o, "__name__")).get()));
      args.erase(args.begin());
      return t.call(f, mv, std::move(args), std::move(kwargs), out);
    }
    static PyObject* const full_fn = kept_attr("torch", "full");
    if (o == full_fn && args.size() == 2 && args[1]->kind == VK::Tensor && args[1]->obj &&
        std::none_of(kwargs.begin(), kwargs.end(), [](const auto& kv) { return kv.first == "out" || kv.first == "requires_grad"; })) {
      // torch.full(size, t) of a 0-d floating tensor computed in the trace (a timestep, a
      // mean): torch.empty(size, ...).fill_(t) in the graph, as TorchDynamo decomposes it, rather
      // than reading t as a number (a break). Same dtype: a float fill value gives the default
      // dtype (or the one asked for), as empty does. Not of an int or bool tensor (full's dtype is
      // then int64 or bool, empty's is not), nor of one that requires grad (full reads its value
      // only; fill_ would carry its gradient).
      PyObject* ex = args[1]->obj.get();
      Ref dtype = Ref::steal(PyObject_GetAttrString(ex, "dtype"));
      Ref floating = dtype ? Ref::steal(PyObject_GetAttrString(dtype.get(), "is_floating_point")) : Ref();
      Ref grad = Ref::steal(PyObject_GetAttrString(ex, "requires_grad"));
      Ref dim = Ref::steal(PyObject_CallMethod(ex, "dim", nullptr));
      if (floating.get() == Py_True && grad.get() == Py_False && dim && PyLong_Check(dim.get()) && PyLong_AsLong(dim.get()) == 0) {
        static PyObject* const empty_fn = kept_attr("torch", "empty");
        VPtr empty;
        if (!empty_fn) return PyErr_Clear(), t.brk(f, "DV0004", "torch.full of a tensor: no torch.empty");
        if (Status s = t.graph_call(f, Ref::borrow(empty_fn), "", {args[0]}, kwargs, empty)) return s;
        return t.graph_call(f, {}, "fill_", {empty, args[1]}, {}, out);
      }
      PyErr_Clear();
    }
    if (numpy_dtype_factory(o) && !args.empty()) {
      // torch.tensor(np.float64(0.5)), torch.as_tensor(s), torch.tensor([np.float64(0.3), 1.0]):
      // float64, as NumPy's scalar types count in the dtype (of 0.5 or [0.3, 1.0], float32), and the
      // graph's code cannot spell a NumPy scalar. Of constants and NumPy scalars only: their numbers,
      // with the dtype torch gives their values unless one is given. NumPy scalars among other
      // values (tensors, sizes): a break.
      bool numpy = false, constants = true;
      std::function<void(const VPtr&)> scan = [&](const VPtr& v) {
        if (v->kind == VK::Tuple || v->kind == VK::List) {
          for (const VPtr& x : v->items) scan(x);
        } else if (v->kind == VK::Object && numpy_scalar(v->obj.get())) {
          numpy = true;
        } else {
          constants &= v->kind == VK::Const;
        }
      };
      scan(args[0]);
      if (numpy) {
        if (!constants) return t.brk(f, "DV0013", callable_name(o) + " of NumPy scalars among values of the trace");
        auto value = t.to_python(args[0], false);
        Ref made = value ? Ref::steal(PyObject_CallOneArg(o, value->get())) : Ref();
        Ref dtype = made ? Ref::steal(PyObject_GetAttrString(made.get(), "dtype")) : Ref();
        if (!dtype) return PyErr_Clear(), t.brk(f, "DV0013", callable_name(o) + " of NumPy scalars");
        std::function<bool(VPtr&)> numbers = [&](VPtr& v) {
          if (v->kind == VK::Tuple || v->kind == VK::List) {
            VPtr copy = t.make(v->kind);  // (the list itself is the code's)
            copy->items = v->items;
            for (VPtr& x : copy->items)
              if (!numbers(x)) return false;
            v = copy;
            return true;
          }
          if (v->kind != VK::Object) return true;
          Ref number = Ref::steal(PyObject_CallMethod(v->obj.get(), "item", nullptr));
          if (!number || !is_exact_const(number.get())) return PyErr_Clear(), false;
          v = t.constant(number);
          return true;
        };
        if (!numbers(args[0])) return t.brk(f, "DV0013", callable_name(o) + " of NumPy scalars");
        bool placed = false;
        for (auto& kv : kwargs)
          if (kv.first == "dtype") {
            placed = true;
            if (kv.second->kind == VK::Const && kv.second->obj.get() == Py_None) kv.second = t.constant(dtype);
          }
        if (!placed) kwargs.emplace_back("dtype", t.constant(dtype));
      }
    }
    if (o == tensor_factory() && args.size() == 1 && (args[0]->kind == VK::Tuple || args[0]->kind == VK::List)) {
      bool handled = false;
      if (Status s = tensor_of_scalar_tensors(t, f, args[0], kwargs, out, handled); s || handled) return s;
    }
    if (t.output.dynamic() && o == tensor_factory()) {
      // torch.tensor(n) / torch.tensor([n, 1]) of a symbolic size: torch._refs.tensor, which keeps
      // it symbolic (torch.tensor itself reads the Python value), as TorchDynamo records it
      std::function<bool(const VPtr&)> has_sym = [&](const VPtr& v) {
        if (v->kind == VK::Sym) return true;
        if (v->kind != VK::Tuple && v->kind != VK::List) return false;
        for (const VPtr& x : v->items)
          if (has_sym(x)) return true;
        return false;
      };
      if (!args.empty() && has_sym(args[0]))
        if (static PyObject* refs_tensor = refs_tensor_factory(); refs_tensor)
          return t.graph_call(f, Ref::borrow(refs_tensor), "", std::move(args), std::move(kwargs), out);
    }
    return t.graph_call(f, fn->obj, "", std::move(args), std::move(kwargs), out);
  }
  if (PyCFunction_Check(o) && reinterpret_cast<PyCFunctionObject*>(o)->m_module &&
      PyUnicode_Check(reinterpret_cast<PyCFunctionObject*>(o)->m_module) &&
      str_of(reinterpret_cast<PyCFunctionObject*>(o)->m_module) == "_operator") {
    // operator.add/mul/getitem ... passed around as values (functools.reduce(operator.add, ts)):
    // over tensors or symbolic ints they are graph operators; over constants they fold below.
    bool traced = false;
    for (const VPtr& a : args) traced |= a->kind == VK::Tensor || a->kind == VK::Sym;
    if (traced) return t.graph_call(f, fn->obj, "", std::move(args), std::move(kwargs), out);
  }
  if (!args.empty() && args[0]->kind == VK::Object && Py_IS_TYPE(o, &PyWrapperDescr_Type)) {
    bool handled = false;  // object.__setattr__(self, k, v) spelled out in the Python __setattr__ of an object from outside
    std::vector<VPtr> rest(args.begin() + 1, args.end());
    if (Status s = t.outside_object_builtin(f, o, args[0], rest, kwargs, out, handled)) return s;
    if (handled) return std::nullopt;
  }
  if (!args.empty() && args[0]->kind == VK::Instance && !PyType_Check(o)) {  // object.__setattr__(obj, ...) and the like
    bool handled = false;
    std::vector<VPtr> rest(args.begin() + 1, args.end());
    if (Status s = t.instance_builtin(f, o, args[0], rest, kwargs, out, handled)) return s;
    if (handled) return std::nullopt;
  }
  if (numpy_info_class(o)) {
    // np.iinfo(np.int16), np.finfo(a.dtype), np.finfo("float32"): an immutable description of a NumPy
    // dtype, made now from constant arguments (a dtype, a scalar type, its name), as TorchDynamo
    // makes it. Eager's error for an argument that is not a dtype is raised in the trace.
    bool all_const = true;
    for (auto& a : args)
      all_const &= a->kind == VK::Const || (a->kind == VK::Object && (PyType_Check(a->obj.get()) || numpy_dtype(a->obj.get())));
    for (auto& kv : kwargs) all_const &= kv.second->kind == VK::Const;
    if (all_const) {
      Ref r;
      if (Status s = call_on_constants(t, f, o, callable_name(o), args, kwargs, r)) return s;
      out = t.make(VK::Object);
      out->obj = r;
      return std::nullopt;
    }
  }
  if (PyType_Check(o) && (!module_is_torch(o) || module_is_distributions(o) || torch_function_mode_class(o)) &&
      plain_class(reinterpret_cast<PyTypeObject*>(o)))
    return t.construct(f, fn, std::move(args), std::move(kwargs), out);  // a user class: __init__ inlined
  if (PyCFunction_Check(o) && bound_to_mutable_object(o))
    return t.brk(f, "DV0008", "call to " + callable_name(o) + " of a " + Py_TYPE(PyCFunction_GET_SELF(o))->tp_name +
                                " object (a method that may mutate it runs once at trace time, not on every call)");
  PyObject* const fromkeys_cls = PyCFunction_Check(o) ? PyCFunction_GET_SELF(o) : nullptr;
  if (fromkeys_cls &&
      (fromkeys_cls == reinterpret_cast<PyObject*>(&PyDict_Type) || fromkeys_cls == ordered_dict_class() ||
       fromkeys_cls == defaultdict_class()) &&
      std::strcmp(reinterpret_cast<PyCFunctionObject*>(o)->m_ml->ml_name, "fromkeys") == 0 &&
      ((kwargs.empty() && (args.size() == 1 || args.size() == 2)) ||
       // OrderedDict.fromkeys(iterable, value=v): its value by keyword (dict's is positional-only)
       (fromkeys_cls == ordered_dict_class() && args.size() == 1 && kwargs.size() == 1 && kwargs[0].first == "value"))) {
    if (!kwargs.empty()) args.push_back(kwargs[0].second);
    // dict.fromkeys(iterable[, value]): a dict made in the trace, every key mapped to the one value
    // (transformers' cache layers: dict.fromkeys(range(n), False)); OrderedDict.fromkeys and
    // defaultdict.fromkeys make one of their class (a defaultdict with no default_factory)
    VPtr it;
    if (Status s = t.iterate(f, args[0], it)) return s;
    VPtr d = t.make(VK::Dict);
    const VPtr value = args.size() == 2 ? args[1] : t.constant(Ref::borrow(Py_None));
    for (size_t i = it->pos; i < it->items.size(); ++i) {
      PyObject* k = t.key_of(it->items[i]);
      if (!k) return t.brk(f, "DV0024", "dict.fromkeys with a key that is not a constant, tensor or module (a " + std::string(vk_name(it->items[i]->kind)) + ")");
      const long at = find_key(*d, k);
      if (at == -2) return t.brk(f, "DV0010", "comparing dict keys raised");
      if (at >= 0) continue;
      d->keys.push_back(Ref::borrow(k));
      d->items.push_back(value);
    }
    PyErr_Clear();
    it->pos = it->items.size();
    if (fromkeys_cls != reinterpret_cast<PyObject*>(&PyDict_Type)) {
      d->obj = Ref::borrow(fromkeys_cls);
      if (fromkeys_cls == defaultdict_class()) d->defaults = t.constant(Ref::borrow(Py_None));
    }
    out = d;
    return std::nullopt;
  }
  if (o == reinterpret_cast<PyObject*>(&PySet_Type) && args.size() == 1 && kwargs.empty() &&
      (args[0]->kind == VK::Set || args[0]->kind == VK::List || args[0]->kind == VK::Tuple || args[0]->kind == VK::Iter)) {
    // set(xs): its items one by one, a set of constants or a Set holding values (values/set.cpp)
    VPtr it;
    if (Status s = t.iterate(f, args[0], it)) return s;
    if (Status s = t.pull(f, it, SIZE_MAX)) return s;
    std::vector<VPtr> items(it->items.begin() + static_cast<long>(it->pos), it->items.end());
    it->pos = it->items.size();
    return make_set_value(t, f, items, out);
  }
  if (consumes_iterable(o) && args.size() == 1 && kwargs.empty() &&
      (args[0]->kind == VK::Iter || args[0]->kind == VK::Dict || args[0]->kind == VK::DictView ||
       (args[0]->kind == VK::Object && frozen_object(args[0]->obj.get())))) {
    // set(d), frozenset(d.keys()), "x".join(map(str, dims)): the iterable's items (a lazy
    // map's functions run now, and the iterator is used up), passed as a tuple when they are
    // all constants.
    VPtr it;
    if (Status s = t.iterate(f, args[0], it)) return s;
    Ref items = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(it->items.size() - it->pos)));
    for (size_t i = it->pos; i < it->items.size(); ++i) {
      if (it->items[i]->kind != VK::Const)
        return t.brk(f, "DV0013", callable_name(o) + "() over a " + vk_name(it->items[i]->kind));
      PyTuple_SET_ITEM(items.get(), static_cast<Py_ssize_t>(i - it->pos), Ref::borrow(it->items[i]->obj.get()).release());
    }
    it->pos = it->items.size();
    args[0] = t.constant(items);
  }
  if (o == py().torch_Size.get() && args.size() == 1 && kwargs.empty() && (args[0]->kind == VK::Tuple || args[0]->kind == VK::List)) {
    // torch.Size([b, 64]) of symbolic sizes and ints: a torch.Size of those values, as x.shape is one
    // (of constants only: made below, as any constructor over constants)
    bool symbolic = false, ints = true;
    for (const VPtr& x : args[0]->items) {
      const bool sym_int = x->kind == VK::Sym && x->obj && sym_python_type(x->obj.get()) == &PyLong_Type;
      symbolic |= sym_int;
      ints &= sym_int || (x->kind == VK::Const && PyLong_CheckExact(x->obj.get()));
    }
    if (symbolic && ints) {
      VPtr size = t.make(VK::Tuple);
      size->obj = py().torch_Size;
      size->items = args[0]->items;
      out = size;
      return std::nullopt;
    }
  }
  if (o == py().torch_Size.get() || PyType_Check(o) || PyCFunction_Check(o) || immutable_method_descriptor(o)) {
    // Pure constructors and builtin functions over constants (math.sqrt, slice, torch.Size ...).
    bool all_const = true;
    const bool spec = pytree_spec_class(o);  // its type argument is a class, its children specs
    for (auto& a : args)
      all_const &= a->kind == VK::Const || a->kind == VK::Tuple || a->kind == VK::List ||
                   (a->kind == VK::Object && (spec || numpy_scalar(a->obj.get()) || numpy_dtype(a->obj.get())));  // float(np.float32(2.0)), str(a.dtype)
    for (auto& kv : kwargs) all_const &= kv.second->kind == VK::Const;
    if (all_const && PyExceptionClass_Check(o) && !simple_exception_class(o))
      return t.brk(f, "DV0004", "constructing " + callable_name(o) + ": its __init__ or __new__ is Python code");
    if (all_const && args.empty() && kwargs.empty() && PyCFunction_Check(o) && reads_torch_setting(o))
      return t.brk(f, "DV0004", callable_name(o) + " reads a torch setting the compiled code's guards do not check",
                   "read it outside the compiled function and pass the value in");
    if (all_const && !folds_over_constants(o))
      return t.brk(f, "DV0004",
                   "call to " + callable_name(o) + ": a C function whose answer may change from call to call (the compiled code would keep the first)",
                   "call it outside the compiled function and pass its result in");
    if (all_const) {
      Ref r;
      if (Status s = call_on_constants(t, f, o, callable_name(o), args, kwargs, r)) return s;
      out = set_of_constants(r.get()) ? t.constant(r) : t.wrap(r, nullptr, f);  // set(sizes), a.union(b): as op_BUILD_SET
      if (!out) return t.brk(f, "DV0013", "unsupported result of " + callable_name(o));
      // Builtin functions and pure value types (range, slice, tuple, torch.Size, ...) only.
      // torch.finfo/iinfo(dtype) are immutable descriptions of a dtype: fine.
      // np.dtype("float32"): an immutable description of a NumPy dtype too
      const bool dtype_info = o == py().torch_finfo.get() || o == py().torch_iinfo.get() || numpy_dtype(r.get());
      if (out->kind == VK::Object && PyType_Check(o) && !PyRange_Check(r.get()) && !PyCFunction_Check(o) && !dtype_info &&
          !operator_getter(r.get()) && !PyExceptionInstance_Check(r.get()) && !spec &&
          !(numpy_floating(r.get()) && Py_TYPE(r.get()) == reinterpret_cast<PyTypeObject*>(o)))
        // np.float64(1.0), np.float32(lam): a NumPy float of its own type, as the builder takes one
        // (values/np_scalar.cpp). (np.int64(7): TorchDynamo makes a 0-d array, whose int() breaks)
        return t.brk(f, "DV0004", "constructing " + callable_name(o) + " inside the traced code");
      return std::nullopt;
    }
  }
  if (!PyType_Check(o) && (Py_TYPE(o)->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
    // an object passed in whose class (a list subclass: transformers' LogitsProcessorList) defines
    // __call__ in Python: inlined, as an instance's
    Ref name = Ref::steal(PyUnicode_InternFromString("__call__"));
    PyObject* dunder = name ? _PyType_Lookup(Py_TYPE(o), name.get()) : nullptr;
    if (dunder && PyFunction_Check(dunder))
      return t.call(f, t.bound_method(fn, Ref::borrow(dunder), "__call__"), std::move(args), std::move(kwargs), out);
  }
  return t.brk(f, "DV0004", "call to " + callable_name(o) + " is not supported",
             "dynview inlines Python functions and records torch operators; other callables break the graph");
}

}  // namespace dv
