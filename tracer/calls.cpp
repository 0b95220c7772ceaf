// Calls and the operations handlers share: graph calls with meta example values, inlining of user
// functions and nn.Module forwards, builtins, attributes, operators, truth and iteration.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <set>
#include <unordered_map>

#include "core/opcodes.h"
#include "pycache.h"
#include "tensor_match.h"
#include "engine.h"
#include "translator.h"
#include "values/kind.h"

namespace dv {

Ref pointwise_example(PyObject* target, const std::string& method, const std::vector<Ref>& args, bool has_kwargs);

// The source text of a globals dict other than the root frame's: G['module'].__dict__ for a module's
// own dict. Values read through a source are cached by its text, so a dict that is not its module's
// (exec'd code, a copied namespace, no __name__) gets its address in the text: two of them never
// share one.
std::string globals_text(PyObject* globals) {
  PyObject* name = PyDict_GetItemString(globals, "__name__");
  std::string n = name && PyUnicode_Check(name) ? str_of(name) : "";
  PyObject* mod = n.empty() ? nullptr : PyDict_GetItemString(PyImport_GetModuleDict(), n.c_str());
  if (!(mod && PyModule_Check(mod) && PyModule_GetDict(mod) == globals)) {
    char addr[32];
    std::snprintf(addr, sizeof addr, "@%p", static_cast<void*>(globals));
    n += addr;
  }
  return "G['" + n + "'].__dict__";
}

std::string callable_name(PyObject* fn) {
  Ref q = Ref::steal(PyObject_GetAttrString(fn, "__qualname__"));
  if (!q) {
    PyErr_Clear();
    q = Ref::steal(PyObject_GetAttrString(fn, "__name__"));
  }
  if (!q) {
    PyErr_Clear();
    return Py_TYPE(fn)->tp_name;
  }
  return str_of(q.get());
}

// ---- conversions --------------------------------------------------------------------------------

std::optional<Ref> Translator::to_python(const VPtr& v, bool meta) {
  return ops(v->kind).as_python(*this, v, meta);
}

bool Translator::to_arg(const VPtr& v, ArgTree& out) {
  return ops(v->kind).graph_arg(*this, v, out);
}

int Translator::add_graph_call_kw(PyObject* target, std::vector<ArgTree> args, std::vector<std::pair<std::string, ArgTree>> kwargs,
                                  Ref example) {
  if (!example) example = Ref::borrow(Py_None);
  const int n = output.graph.add_call_function(Ref::borrow(target), std::move(args), std::move(kwargs), std::move(example), cur_step_);
  if (obs_) obs_->on_graph_node(GraphNodeEvent{id_, n, cur_step_, "call_function", callable_name(target)});
  return n;
}

int Translator::add_graph_call(PyObject* target, std::vector<ArgTree> args, Ref example) {
  const int n = output.graph.add_call_function(Ref::borrow(target), std::move(args), {}, std::move(example), cur_step_);
  if (obs_) obs_->on_graph_node(GraphNodeEvent{id_, n, cur_step_, "call_function", callable_name(target)});
  return n;
}

VPtr Translator::from_example(Frame&, Ref example, int node, Ref device) {
  VPtr v = make(VK::Tensor);
  v->obj = std::move(example);
  v->node = node;
  v->device = std::move(device);
  if (obs_) announce(v);
  return v;
}

// ---- graph calls --------------------------------------------------------------------------------

namespace {
// A tensor method that returns the tensor itself when it has nothing to convert (dtype and device
// already those asked for). Another tensor given (x.to(y), x.type_as(y)) is on the same real device:
// the meta examples do not carry it.
bool is_self_conversion(const std::string& method, const std::vector<VPtr>& args, const KwArgs& kwargs) {
  static const char* const names[] = {"to", "type_as", "float", "double", "half", "bfloat16", "int", "long", "short",
                                      "char", "byte", "bool", "cfloat", "cdouble"};
  if (args.empty() || args[0]->kind != VK::Tensor ||
      std::none_of(std::begin(names), std::end(names), [&](const char* n) { return method == n; }))
    return false;
  auto same_device = [&](const VPtr& v) {
    return v->kind != VK::Tensor || PyObject_RichCompareBool(v->device.get(), args[0]->device.get(), Py_EQ) == 1;
  };
  for (size_t i = 1; i < args.size(); ++i)
    if (!same_device(args[i])) return PyErr_Clear(), false;
  for (const auto& kv : kwargs)
    if (!same_device(kv.second)) return PyErr_Clear(), false;
  return true;
}
// torch's pure arithmetic functions (no in-place form, nothing random), kept for the process.
const std::vector<PyObject*>& torch_arithmetic() {
  static const std::vector<PyObject*> fns = [] {
    std::vector<PyObject*> v;
    for (const char* n : {"add", "sub", "mul", "div", "floor_divide", "true_divide", "remainder", "fmod", "neg", "abs"})
      if (PyObject* fn = PyObject_GetAttrString(py().torch.get(), n)) v.push_back(fn);
    PyErr_Clear();
    return v;
  }();
  return fns;
}

// Pure arithmetic (no in-place form, nothing random) whose tensor arguments all hold real examples of
// at most one element (Python numbers through torch.div & co.) and the rest constants.
bool constant_arithmetic(PyObject* target, const std::string& method, const std::vector<VPtr>& args, const KwArgs& kwargs) {
  static const std::vector<PyObject*> fns = [] {
    std::vector<PyObject*> v = torch_arithmetic();
    for (const char* n : {"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "abs"})
      if (PyObject* fn = PyObject_GetAttrString(py().operator_mod.get(), n)) v.push_back(fn);  // kept for the process
    PyErr_Clear();
    return v;
  }();
  static const char* const methods[] = {"add", "sub", "mul", "div", "floor_divide", "true_divide", "remainder", "fmod",
                                        "neg", "abs", "__add__", "__sub__", "__mul__", "__truediv__", "__floordiv__",
                                        "__mod__", "__radd__", "__rsub__", "__rmul__", "__rtruediv__", "__rfloordiv__",
                                        "long", "int", "float", "double"};
  if (method.empty() ? std::find(fns.begin(), fns.end(), target) == fns.end()
                     : std::none_of(std::begin(methods), std::end(methods), [&](const char* n) { return method == n; }))
    return false;
  bool ok = true;
  auto small_real = [&](const VPtr& v) {
    if (v->kind == VK::Const) return PyLong_Check(v->obj.get()) || PyFloat_Check(v->obj.get());
    return v->kind == VK::Tensor && v->obj && is_small_real_tensor(v->obj.get());
  };
  for (const VPtr& a : args) ok = ok && small_real(a);
  for (const auto& kv : kwargs) ok = ok && (kv.second->kind == VK::Const || small_real(kv.second));
  return ok;
}

// A dynamic compile's fake mode and the Python dispatcher on for a scope, as TorchDynamo computes each
// example value (get_fake_value: `with fake_mode, enable_python_dispatcher()`): operators whose C++
// kernels refuse symbolic sizes run their Python meta registrations and decompositions instead
// (baddbmm expanding its input to sizes of symbols, bloom's ALiBi), and the factories those call
// (upsample's torch.arange(out_size)) make fakes of symbolic sizes rather than specialising them. An
// error the scope's call set is kept across the exits.
class FakeModeScope {
 public:
  explicit FakeModeScope(PyObject* shapes) {
    static PyObject* dispatcher = kept_attr("torch._C", "_EnablePythonDispatcher");
    Ref mode = shapes ? Ref::steal(PyObject_GetAttrString(shapes, "mode")) : Ref();
    if (!mode) PyErr_Clear();
    enter(mode);
    if (dispatcher) enter(Ref::steal(PyObject_CallNoArgs(dispatcher)));
  }
  ~FakeModeScope() {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    for (auto it = entered_.rbegin(); it != entered_.rend(); ++it) {
      Ref r = Ref::steal(PyObject_CallMethod(it->get(), "__exit__", "OOO", Py_None, Py_None, Py_None));
      if (!r) PyErr_Clear();
    }
    PyErr_Restore(type, value, tb);
  }
  FakeModeScope(const FakeModeScope&) = delete;
  FakeModeScope& operator=(const FakeModeScope&) = delete;

 private:
  void enter(Ref cm) {
    Ref r = cm ? Ref::steal(PyObject_CallMethod(cm.get(), "__enter__", nullptr)) : Ref();
    if (r) entered_.push_back(std::move(cm));
    else PyErr_Clear();
  }
  std::vector<Ref> entered_;
};

// target(*args, **kw) (or args[0].<method>(...)) on fake tensors of `device` (null: the CPU) standing for
// the meta examples in args (dynview._shapes.fake_example): a tuple (the result with meta tensors, the
// device of its first tensor or None); null with the Python error set.
Ref fake_example(PyObject* target, const std::string& method, PyObject* pargs, PyObject* pkw, PyObject* device) {
  static PyObject* fn = [] {
    Ref m = Ref::steal(PyImport_ImportModule("dynview._shapes"));
    PyObject* f = m ? PyObject_GetAttrString(m.get(), "fake_example") : nullptr;  // kept
    return f;
  }();
  if (!fn) return {};
  Ref dev = device ? Ref::borrow(device) : Ref::steal(PyObject_CallFunction(py().torch_device.get(), "s", "cpu"));
  Ref meth = method.empty() ? Ref::borrow(Py_None) : Ref::steal(PyUnicode_FromString(method.c_str()));
  if (!dev || !meth) return {};
  Ref pair = Ref::steal(PyObject_CallFunctionObjArgs(fn, target ? target : Py_None, meth.get(), pargs, pkw, dev.get(), nullptr));
  if (pair && (!PyTuple_Check(pair.get()) || PyTuple_GET_SIZE(pair.get()) != 2)) return {};
  return pair;
}

// Operators whose meta kernel lays its result out otherwise than the CPU/CUDA kernel for an input
// that is not contiguous (channels-last): convolutions, group_norm, pixel_shuffle. Given such an
// input, their example is computed on fake tensors (the Python meta registrations pick the layout).
bool layout_sensitive(PyObject* target, const std::string& method, PyObject* pargs) {
  static const std::vector<PyObject*> ops = [] {
    std::vector<PyObject*> v;
    Ref torch = Ref::steal(PyImport_ImportModule("torch"));
    Ref fn = Ref::steal(PyImport_ImportModule("torch.nn.functional"));
    for (const char* name : {"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
                             "convolution", "group_norm", "pixel_shuffle", "pixel_unshuffle"})
      for (PyObject* m : {torch.get(), fn.get()})
        if (PyObject* o = m ? PyObject_GetAttrString(m, name) : nullptr) v.push_back(o);  // kept
    PyErr_Clear();
    return v;
  }();
  if (!method.empty() || !target || std::find(ops.begin(), ops.end(), target) == ops.end()) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(pargs); ++i) {
    PyObject* a = PyTuple_GET_ITEM(pargs, i);
    if (!is_tensor(a)) continue;
    Ref c = Ref::steal(PyObject_CallMethod(a, "is_contiguous", nullptr));
    if (!c) return PyErr_Clear(), false;
    if (c.get() == Py_False) return true;
  }
  return false;
}

// Whether the generated code of the graph calls `target` itself. FX writes a callable from torch (its
// __module__ says so) by its qualified name, module + __name__, looked up again when the code runs: a
// torch function that functools.wraps dressed as another (torch.func.jacrev(torch.sin)'s wrapper
// carries torch.sin's __module__ and __name__) would be written `torch.sin` and the graph would call
// that instead. Such a target is not put in a graph.
bool fx_names_itself(PyObject* target) {
  static std::unordered_map<PyObject*, bool> known;
  if (auto it = known.find(target); it != known.end()) return it->second;
  static PyObject* is_from_torch = [] {
    Ref m = Ref::steal(PyImport_ImportModule("torch.fx.graph"));
    PyObject* fn = m ? PyObject_GetAttrString(m.get(), "_is_from_torch") : nullptr;  // kept
    if (!fn) PyErr_Clear();
    return fn;
  }();
  static PyObject* qualified_name = [] {
    Ref m = Ref::steal(PyImport_ImportModule("torch.fx.node"));
    PyObject* fn = m ? PyObject_GetAttrString(m.get(), "_get_qualified_name") : nullptr;  // kept
    if (!fn) PyErr_Clear();
    return fn;
  }();
  bool ok = true;
  Ref from_torch = is_from_torch ? Ref::steal(PyObject_CallOneArg(is_from_torch, target)) : Ref();
  if (from_torch && PyObject_IsTrue(from_torch.get()) == 1 && qualified_name && target != py().torch_device.get()) {
    Ref name = Ref::steal(PyObject_CallOneArg(qualified_name, target));
    std::string text = name && PyUnicode_Check(name.get()) ? str_of(name.get()) : "";
    Ref cur;
    size_t start = 0;
    while (!text.empty()) {  // torch.a.b.c from the torch module, as `import torch` in the generated code
      const size_t dot = text.find('.', start);
      const std::string part = text.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      cur = !cur ? (part == "torch" ? Ref::borrow(py().torch.get()) : Ref())
                 : Ref::steal(PyObject_GetAttrString(cur.get(), part.c_str()));
      if (!cur || dot == std::string::npos) break;
      start = dot + 1;
    }
    ok = cur && (cur.get() == target || PyObject_RichCompareBool(cur.get(), target, Py_EQ) == 1);
  }
  PyErr_Clear();
  // kept only for functions, classes and module-level builtins (a bound method of some object would
  // keep that object alive for the process)
  PyObject* self = PyCFunction_Check(target) ? PyCFunction_GET_SELF(target) : nullptr;
  if (PyFunction_Check(target) || PyType_Check(target) ||
      (PyCFunction_Check(target) && (!self || PyModule_Check(self) || PyType_Check(self)))) {
    Py_INCREF(target);  // the key stays valid
    known.emplace(target, ok);
  }
  return ok;
}

}  // namespace

// x[i] with i a 0-d integer tensor (or a tuple holding one) indexes as the int i holds (a select),
// which a meta example cannot read: its example is x[0]'s, the same shape and strides whichever int
// it holds (one out of range raises when the graph runs, as in eager). Null (no error set): no such
// index, or x[0] failed too.
static Ref int_index_example(PyObject* base, PyObject* idx) {
  auto int_scalar = [](PyObject* o) {
    if (!is_tensor(o)) return false;
    Ref dim = Ref::steal(PyObject_CallMethod(o, "dim", nullptr));
    Ref fp = Ref::steal(PyObject_CallMethod(o, "is_floating_point", nullptr));
    static PyObject* bool_dtype = PyObject_GetAttrString(py().torch.get(), "bool");  // kept
    Ref dt = Ref::steal(PyObject_GetAttrString(o, "dtype"));
    const bool is_bool = dt && dt.get() == bool_dtype;
    PyErr_Clear();
    return dim && PyLong_AsLong(dim.get()) == 0 && fp.get() == Py_False && !is_bool;
  };
  Ref zero = Ref::steal(PyLong_FromLong(0)), sub;
  if (int_scalar(idx)) {
    sub = zero;
  } else if (PyTuple_Check(idx)) {
    sub = Ref::steal(PyTuple_New(PyTuple_GET_SIZE(idx)));
    bool any = false;
    for (Py_ssize_t i = 0; sub && i < PyTuple_GET_SIZE(idx); ++i) {
      PyObject* x = PyTuple_GET_ITEM(idx, i);
      const bool scalar = int_scalar(x);
      any |= scalar;
      PyTuple_SET_ITEM(sub.get(), i, Ref::borrow(scalar ? zero.get() : x).release());
    }
    if (!any) sub = Ref();
  }
  Ref result = sub ? Ref::steal(PyObject_GetItem(base, sub.get())) : Ref();
  PyErr_Clear();
  return result;
}

Translator::Status Translator::graph_call(Frame& f, Ref target, const std::string& method, std::vector<VPtr> args,
                                          std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out) {
  if (fn_mode_active()) {  // under a torch function mode of the trace: its handler, as eager dispatches
    bool handled = false;
    if (Status s = dispatch_fn_mode(f, target.get(), method, args, kwargs, out, handled); s || handled) return s;
  }
  for (auto& [k, v] : kwargs)
    if (k == "dtype" && v->obj && (v->kind == VK::Object || v->kind == VK::Const)) {
      if (Ref dt = dtype_of_python_type(v->obj.get())) v = constant(dt);  // dtype=float: torch.float64
    }
  if (target && target.get() == py().set_grad_enabled_fn.get() && args.size() == 1 && args[0]->kind == VK::Const && kwargs.empty()) {
    // torch._C._set_grad_enabled(b) of a grad-mode with-block: a node of its own (it takes no tensor
    // and returns None), so the graph switches grad mode where the code does, as TorchDynamo's.
    ArgTree flag;
    if (!PyBool_Check(args[0]->obj.get()) || !to_arg(args[0], flag))
      return brk(f, "DV0019", "torch._C._set_grad_enabled with a flag that is not a constant bool");
    const int n = output.graph.add_call_function(target, {flag}, {}, Ref::borrow(Py_None), cur_step_);
    if (obs_) obs_->on_graph_node(GraphNodeEvent{id_, n, cur_step_, "call_function", "torch._C._set_grad_enabled"});
    // and the mode the rest of the trace sees (torch.is_grad_enabled(), requires_grad of results),
    // called directly too (a user context manager's __enter__)
    set_grad_mode_enabled(args[0]->obj.get() == Py_True);
    out = constant(Ref::borrow(Py_None));
    return std::nullopt;
  }
  const std::string what = method.empty() ? callable_name(target.get()) : "Tensor." + method;
  // Autograd leaves made in the graph: AOTAutograd (aot_eager, inductor) drops requires_grad on the
  // graph's outputs, so eager's leaf would come back without it. TorchDynamo breaks at a factory
  // given requires_grad=True, and at requires_grad_() that changes the flag (of an input, or of an
  // intermediate the graph returns): so does dynview, at either.
  auto wants_grad = [](const VPtr& v) { return v->kind == VK::Const && PyObject_IsTrue(v->obj.get()) == 1; };
  for (auto& [k, v] : kwargs)
    if (k == "requires_grad" && wants_grad(v) && method != "requires_grad_")
      return brk(f, "DV0004", what + "(..., requires_grad=True): a tensor that requires grad made inside the graph",
                 "create it outside the compiled function, or drop requires_grad=True (TorchDynamo breaks here too)");
  if (method == "requires_grad_" && !args.empty() && args[0]->kind == VK::Tensor && args[0]->obj) {
    VPtr flag = args.size() > 1 ? args[1] : nullptr;
    for (auto& [k, v] : kwargs)
      if (k == "requires_grad") flag = v;
    if (flag && flag->kind != VK::Const) return brk(f, "DV0008", "Tensor.requires_grad_() with a flag that is not a constant");
    const bool want = !flag || wants_grad(flag);
    Ref now = Ref::steal(PyObject_GetAttrString(args[0]->obj.get(), "requires_grad"));
    if (!now) PyErr_Clear();
    const bool changes = !now || (now.get() == Py_True) != want;
    if (changes && (args[0]->source || !want || !now || requires_grad_breaks))
      return brk(f, "DV0008", "Tensor.requires_grad_() changes whether a tensor requires grad inside the graph",
                 requires_grad_breaks ? "a graph output that requires grad comes from it, which the compiled graph would not keep; "
                                        "detach() it, or call requires_grad_() outside the compiled function (TorchDynamo breaks here too)"
                                      : "the compiled graph's outputs would not keep it; call requires_grad_() outside the compiled function "
                                        "(TorchDynamo breaks here too)");
    if (changes) {
      // A tensor made in the graph becomes a leaf that requires grad (transformers' MRA:
      // torch.zeros_like(q).requires_grad_()), as TorchDynamo traces it: the call between
      // set_inplace_requires_grad_allowed(True) and (the state before) nodes, which AOTAutograd's
      // functionalization needs; when a graph output that requires grad comes from it, the frame is
      // captured again with this a break (eval_frame.cpp).
      static PyObject* allow = kept_attr("torch._C._functorch", "set_inplace_requires_grad_allowed");
      static PyObject* allowed = kept_attr("torch._C._functorch", "get_inplace_requires_grad_allowed");
      Ref before = allowed ? Ref::steal(PyObject_CallNoArgs(allowed)) : Ref();
      if (!allow || !before) return PyErr_Clear(), brk(f, "DV0008", "Tensor.requires_grad_() of a tensor made in the graph (functorch's switch is missing)");
      auto switch_node = [&](PyObject* flag) {
        ArgTree a;
        a.constant = Ref::borrow(flag);
        const int n = output.graph.add_call_function(Ref::borrow(allow), {a}, {}, Ref::borrow(Py_None), cur_step_);
        if (obs_) obs_->on_graph_node(GraphNodeEvent{id_, n, cur_step_, "call_function", "torch._C._functorch.set_inplace_requires_grad_allowed"});
      };
      switch_node(Py_True);
      Ref on = Ref::steal(PyObject_CallOneArg(allow, Py_True));
      PyErr_Clear();
      std::vector<VPtr> same = args;
      Status s = record_graph_call(f, target, method, std::move(same), std::move(kwargs), out);
      Ref off = Ref::steal(PyObject_CallOneArg(allow, before.get()));
      PyErr_Clear();
      if (s) return s;
      switch_node(before.get());
      if (args[0]->node >= 0) grad_leaf_nodes.push_back(args[0]->node);  // the tensor itself (in place), and the call's result
      if (out && out->kind == VK::Tensor && out->node >= 0) grad_leaf_nodes.push_back(out->node);
      return std::nullopt;
    }
  }
  return record_graph_call(f, target, method, std::move(args), std::move(kwargs), out);
}

Translator::Status Translator::record_graph_call(Frame& f, Ref target, const std::string& method, std::vector<VPtr> args,
                                                 std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out) {
  std::vector<ArgTree> targs;
  std::vector<std::pair<std::string, ArgTree>> tkw;
  Ref device;
  bool any_tensor = false, any_sym = false;
  std::function<void(const VPtr&)> find_dev = [&](const VPtr& v) {
    any_sym |= v->kind == VK::Sym;
    if (v->kind == VK::Tensor || v->kind == VK::NdArray) {
      any_tensor = true;
      if (!device) device = v->device;
    }
    for (const VPtr& x : v->items) find_dev(x);
  };
  for (const VPtr& a : args) find_dev(a);
  for (auto& kv : kwargs) find_dev(kv.second);
  const std::string what = method.empty() ? callable_name(target.get()) : "Tensor." + method;
  if (method.empty() && disallowed_in_graph(target.get()))
    return brk(f, "DV0004", "call to " + what + ", marked torch._dynamo.disallow_in_graph",
               "it runs eagerly between graphs, as under torch.compile");
  if (method.empty() && !fx_names_itself(target.get()))
    return brk(f, "DV0004", "call to " + what + ": a function made by torch (a functools.wraps wrapper) that the graph's code would name as another",
               "a torch.func transform's result (jacrev(f), grad(f)) runs eagerly; call it outside the compiled function");
  for (const VPtr& a : args) {
    ArgTree t;
    if (!to_arg(a, t)) return brk(f, "DV0013", std::string("a ") + vk_name(a->kind) + " argument cannot be passed to " + what);
    targs.push_back(std::move(t));
  }
  static const std::set<std::string> python_keywords = {
      "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else",
      "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass",
      "raise", "return", "try", "while", "with", "yield"};
  for (auto& [k, v] : kwargs) {
    ArgTree t;
    if (python_keywords.count(k))  // p.random_(**{"from": a, "to": b}): the graph's Python code could not spell it
      return brk(f, "DV0013", "keyword argument '" + k + "' of " + what + " is a Python keyword, which the graph's code cannot name",
                 "pass it positionally (TorchDynamo does not capture this call either)");
    if (!to_arg(v, t)) return brk(f, "DV0013", "keyword argument '" + k + "' cannot be passed to " + what);
    tkw.emplace_back(k, std::move(t));
  }
  // Example value: run the op on meta tensors.
  Ref pargs = Ref::steal(PyTuple_New(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    auto x = to_python(args[i], true);
    if (!x) return brk(f, "DV0013", "cannot build example arguments for " + what);
    PyTuple_SET_ITEM(pargs.get(), i, x->release());
  }
  Ref pkw = Ref::steal(PyDict_New());
  bool has_device_kw = false;
  for (auto& [k, v] : kwargs) {
    auto x = to_python(v, true);
    if (!x) return brk(f, "DV0013", "cannot build example arguments for " + what);
    PyDict_SetItemString(pkw.get(), k.c_str(), x->get());
    if (k == "device") {
      has_device_kw = true;
      device = *x;
    }
  }
  Ref result;
  // Under autocast (the caller's, or a torch.autocast block of the trace) a meta example is never cast,
  // and a convolution's meta kernel drops a channels-last layout the CPU and CUDA kernels keep: the op
  // runs on fake tensors of the real device instead (fake_example). A failure there is a break, never
  // a meta example of the wrong dtype or layout.
  const bool on_fakes = !output.dynamic() && any_tensor && (autocast_on() || layout_sensitive(target.get(), method, pargs.get()));
  if (on_fakes) {
    Ref pair = fake_example(target.get(), method, pargs.get(), pkw.get(), device.get());
    if (!pair) {
      Ref rv = take_error();
      std::string why = rv ? repr_of(rv.get()) : "no result";
      if (why.size() > 300) why = why.substr(0, 300) + "...";
      return brk(f, "DV0006", "could not compute the example value of " + what + " on fake tensors: " + why,
                 "the operation failed on fake tensors (autocast, or a channels-last input); eager may fail too");
    }
    result = Ref::borrow(PyTuple_GET_ITEM(pair.get(), 0));
    if (PyTuple_GET_ITEM(pair.get(), 1) != Py_None) device = Ref::borrow(PyTuple_GET_ITEM(pair.get(), 1));
  }
  if (!on_fakes) {
    std::vector<Ref> ex;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(pargs.get()); ++i) ex.push_back(Ref::borrow(PyTuple_GET_ITEM(pargs.get(), i)));
    if (!output.dynamic() && any_tensor && constant_arithmetic(target.get(), method, args, kwargs)) {
      // Constant propagation, as fake tensors do for constants of at most one element: arithmetic of
      // 0-d tensors that hold real values (longformer's `torch.div(seq_len, w) - 1`, later `+ 1` as a
      // size) keeps the value, so a size or index taken from it is known.
      Ref rest = Ref::steal(PyTuple_GetSlice(pargs.get(), 1, PyTuple_GET_SIZE(pargs.get())));
      Ref m = method.empty() ? Ref() : Ref::steal(PyObject_GetAttrString(ex[0].get(), method.c_str()));
      result = method.empty() ? Ref::steal(PyObject_Call(target.get(), pargs.get(), pkw.get()))
                              : (m && rest ? Ref::steal(PyObject_Call(m.get(), rest.get(), pkw.get())) : Ref());
      if (result && !is_small_real_tensor(result.get())) result = Ref();
      PyErr_Clear();
    }
    // (Shape rules in C++ read static sizes: dynamic compiles run every op on fake tensors.)
    // (Not while a jacfwd is traced: its examples carry tangents, which only the op itself computes.)
    if (!result && !output.dynamic() && jvp_depth_ == 0) result = pointwise_example(target.get(), method, ex, PyDict_GET_SIZE(pkw.get()) > 0);
  }
  std::optional<FakeModeScope> fake_mode;  // (ops on symbolic sizes: as TorchDynamo's)
  if (!result && output.dynamic()) fake_mode.emplace(output.shapes());
  if (result) {
    // Pointwise fast path: the example value came from shape and dtype rules (pointwise.cpp).
  } else if (!method.empty()) {
    if (!output.dynamic() && any_tensor && method == "to") {
      // Meta examples stay on meta: the real device is tracked beside them (`device`).
      if (has_device_kw) PyDict_SetItemString(pkw.get(), "device", py().meta_str.get());
      for (Py_ssize_t i = 1; i < PyTuple_GET_SIZE(pargs.get()); ++i) {
        PyObject* a = PyTuple_GET_ITEM(pargs.get(), i);
        if (PyObject_TypeCheck(a, reinterpret_cast<PyTypeObject*>(py().torch_device.get())) ||
            (PyUnicode_Check(a) && i == 1)) {
          device = Ref::borrow(a);
          PyTuple_SetItem(pargs.get(), i, Ref::borrow(py().meta_str.get()).release());
        }
      }
    }
    Ref m = Ref::steal(PyObject_GetAttrString(PyTuple_GET_ITEM(pargs.get(), 0), method.c_str()));
    Ref rest = Ref::steal(PyTuple_GetSlice(pargs.get(), 1, PyTuple_GET_SIZE(pargs.get())));
    if (m && rest) result = Ref::steal(PyObject_Call(m.get(), rest.get(), pkw.get()));
  } else if (!any_tensor && output.dynamic()) {
    // Dynamic compile: factories and arithmetic on symbolic ints run under the fake mode.
    result = Ref::steal(PyObject_CallMethod(output.shapes(), "factory", "OOO", target.get(), pargs.get(), pkw.get()));
  } else if (!any_tensor) {
    // A factory (torch.zeros(3), torch.arange(n), torch.tensor([], device=d)): ask for a meta result
    // (an explicit device is the real one, kept beside it: `device`); fall back to a real one.
    // Only over plain values: a call given a live object (an optimizer, a generator, a module) and
    // no tensor would run here, once, at trace time -- its effects on that object lost on every
    // later call -- so it breaks instead.
    std::function<bool(const VPtr&)> plain = [&](const VPtr& v) {
      if (v->kind == VK::Const || v->kind == VK::Sym || v->kind == VK::Slice || v->kind == VK::Null || v->kind == VK::NpScalar) return true;
      if (v->obj && PyRange_Check(v->obj.get())) return true;  // torch.tensor(range(n)): an immutable constant
      // torch.full((2,), np.float64(0.5)): an immutable number -- but not to the factories whose dtype
      // is NumPy's (torch.tensor([np.float64(0.5)]) is float64, of 0.5 float32; the graph has the float)
      if (v->kind == VK::Object && numpy_scalar(v->obj.get())) return !numpy_dtype_factory(target.get());
      if (v->kind != VK::Tuple && v->kind != VK::List) return false;
      for (const VPtr& x : v->items)
        if (!plain(x)) return false;
      return true;
    };
    for (const VPtr& a : args)
      if (!plain(a)) return brk(f, "DV0004", "call to " + what + " with a " + vk_name(a->kind) + " argument and no tensor",
                                "it would run once, while tracing, not on every call");
    for (auto& [k, v] : kwargs)
      if (!plain(v)) return brk(f, "DV0004", "call to " + what + " with a " + vk_name(v->kind) + " keyword argument '" + k + "' and no tensor",
                                "it would run once, while tracing, not on every call");
    // Arithmetic of Python numbers (longformer's torch.div(seq_len, 2 * w, rounding_mode="trunc") as a
    // view size): the real 0-d CPU tensor is the example, as a fake tensor keeps its constant, so a
    // size or index taken from it is known; pure, so computing it now has no effect.
    const std::vector<PyObject*>& arithmetic = torch_arithmetic();
    bool numbers = std::find(arithmetic.begin(), arithmetic.end(), target.get()) != arithmetic.end();
    for (Py_ssize_t i = 0; numbers && i < PyTuple_GET_SIZE(pargs.get()); ++i) {
      PyObject* a = PyTuple_GET_ITEM(pargs.get(), i);
      numbers = (PyLong_CheckExact(a) || PyFloat_CheckExact(a)) && !PyBool_Check(a);
    }
    if (numbers) {
      result = Ref::steal(PyObject_Call(target.get(), pargs.get(), pkw.get()));
      if (!result) PyErr_Clear();
    }
    Ref kw2 = Ref::steal(PyDict_Copy(pkw.get()));
    PyDict_SetItemString(kw2.get(), "device", py().meta_str.get());
    if (!result) result = Ref::steal(PyObject_Call(target.get(), pargs.get(), kw2.get()));
    if (!result) {
      PyErr_Clear();
      result = Ref::steal(PyObject_Call(target.get(), pargs.get(), pkw.get()));
      if (result && is_tensor(result.get())) {
        if (!device) device = Ref::steal(PyObject_GetAttrString(result.get(), "device"));
        result = Ref::steal(PyObject_CallMethod(result.get(), "to", "O", py().meta_str.get()));
      }
    }
  } else {
    result = Ref::steal(PyObject_Call(target.get(), pargs.get(), pkw.get()));
    if (!result && !PyCFunction_Check(target.get()) && !output.dynamic()) {
      // Python code over the examples (an autograd.Function's forward: sew_d's XSoftmax fills with
      // torch.tensor(finfo.min)) may make a tensor with no device, a real CPU one, which a meta op
      // refuses beside meta tensors where a CPU or CUDA op takes it: again with meta as the default
      // device (torch.device's context), the first error kept if that fails too.
      Ref first = take_error();
      static PyObject* meta_device = PyObject_CallFunction(py().torch_device.get(), "s", "meta");  // kept
      Ref entered = meta_device ? Ref::steal(PyObject_CallMethod(meta_device, "__enter__", nullptr)) : Ref();
      if (entered) {
        result = Ref::steal(PyObject_Call(target.get(), pargs.get(), pkw.get()));
        Ref retry_error = result ? Ref() : take_error();
        Ref exited = Ref::steal(PyObject_CallMethod(meta_device, "__exit__", "OOO", Py_None, Py_None, Py_None));
        if (!exited) result = Ref();
      }
      PyErr_Clear();
      if (!result && first) PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(first.get())), first.get());
    }
  }
  if (!result && method.empty() && target.get() == py().getitem.get() && PyTuple_GET_SIZE(pargs.get()) == 2) {
    Ref first = take_error();  // (before asking anything of the index)
    result = int_index_example(PyTuple_GET_ITEM(pargs.get(), 0), PyTuple_GET_ITEM(pargs.get(), 1));
    if (!result && first) PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(first.get())), first.get());
  }
  fake_mode.reset();  // (keeps the error set)
  if (!result) {
    Ref rv = take_error();
    // Operators whose output size is a tensor value (TorchDynamo: "dynamic shape operator"): their
    // meta kernels refuse, and the reason is the data dependence, not the example.
    static const char* const data_dependent[] = {"nonzero", "argwhere", "masked_select", "unique", "unique_consecutive",
                                                 "bincount", "repeat_interleave"};  // (repeats given as a tensor)
    std::string op = method.empty() ? what.substr(what.rfind('.') + 1) : method;
    std::string why = rv ? repr_of(rv.get()) : "unknown error";
    // (also an index by a boolean mask, x[mask]: its meta kernel is nonzero's)
    if (std::any_of(std::begin(data_dependent), std::end(data_dependent), [&](const char* n) { return op == n; }) ||
        why.find("register_meta function for torch.nonzero()") != std::string::npos)
      return brk(f, "DV0003", "data-dependent output size (" + what + ")",
                 "the size depends on tensor values; dynview breaks the graph here like torch.compile");
    // An in-place foreach operator given its scalars as a tensor (torch.optim's foreach steps while
    // compiling: _foreach_addcdiv_(params, exp_avgs, denoms, step_size), step_size stacked on the CPU)
    // refuses the meta example of that tensor for not being on the CPU; it returns None.
    const bool foreach_in_place = method.empty() && op.rfind("_foreach_", 0) == 0 && op.back() == '_';
    if (foreach_in_place && why.find("Expected scalars to be on CPU") != std::string::npos) {
      result = Ref::borrow(Py_None);
    } else if (why.find("item() cannot be called on meta tensors") != std::string::npos ||
               why.find("_local_scalar_dense") != std::string::npos) {
      // a tensor argument read as a number (a Scalar parameter given a tensor: sub_(x, alpha=t)). A
      // 0-d int tensor that is a graph input (new_zeros(b, n, d) with n passed in: longformer's
      // max_num_global_attn_indices after its nonzero break) is read as TorchDynamo reads it, a
      // backed symbol: a static capture is made again with fake tensors, whose fake of it has one
      // (a computed tensor has none, and breaks there, as under torch.compile)
      std::function<bool(const VPtr&)> item_input = [&](const VPtr& v) {
        if (v->kind == VK::Tuple || v->kind == VK::List) return std::any_of(v->items.begin(), v->items.end(), item_input);
        if (v->kind != VK::Tensor || v->node < 0 || v->node >= static_cast<int>(output.graph.nodes().size()) ||
            output.graph.nodes()[static_cast<size_t>(v->node)].op != GraphNode::Op::Placeholder)
          return false;
        for (size_t i = 0; i < output.inputs.size(); ++i)
          if (output.inputs[i].second == v->node) return item_input_tensor(output.input_objects[i].get());
        return false;
      };
      const bool reads_input = std::any_of(args.begin(), args.end(), item_input) ||
                               std::any_of(kwargs.begin(), kwargs.end(), [&](const auto& kv) { return item_input(kv.second); });
      if (!output.dynamic() && reads_input) {
        builder.ask_dynamic();
        return brk(f, "DV0003", "an operator reads a tensor input as a number: captured again with dynamic shapes");
      }
      return brk(f, "DV0003", "data-dependent operator: " + what + " reads a tensor argument as a number",
                 "the result depends on tensor values; dynview breaks the graph here like torch.compile");
    } else {
      if (why.size() > 300) why = why.substr(0, 300) + "...";
      return brk(f, "DV0006", "could not compute the example value of " + what + ": " + why,
                 "the operator may be data-dependent or lack a meta kernel");
    }
  }
  if (!device) device = Ref::steal(PyObject_CallFunction(py().torch_device.get(), "s", "cpu"));
  if (!device) device = Ref::borrow(Py_None);
  if (device && PyUnicode_Check(device.get())) device = Ref::steal(PyObject_CallFunctionObjArgs(py().torch_device.get(), device.get(), nullptr));
  if (!device) {
    PyErr_Clear();
    device = Ref::borrow(Py_None);
  }
  auto add_node = [&](Ref example) {
    int n = method.empty() ? output.graph.add_call_function(target, targs, tkw, example, cur_step_)
                           : output.graph.add_call_method(method, targs, tkw, example, cur_step_);
    if (obs_) obs_->on_graph_node(GraphNodeEvent{id_, n, cur_step_, method.empty() ? "call_function" : "call_method", what});
    return n;
  };
  if (is_tensor(result.get()) && is_self_conversion(method, args, kwargs) && result.get() == PyTuple_GET_ITEM(pargs.get(), 0) &&
      PyObject_RichCompareBool(device.get(), args[0]->device.get(), Py_EQ) == 1) {
    // x.to(x.dtype), x.float() of a float tensor ...: eager returns x itself (`is` holds), so the
    // trace does too, with no node (Module.to's `param.data = param.to(...)` is then an assignment
    // of a tensor to itself). Dtype, device and layout are guarded, so this holds on every hit.
    out = args[0];
    return std::nullopt;
  }
  PyErr_Clear();
  if (is_tensor(result.get())) {
    out = from_example(f, result, add_node(result), device);
    return std::nullopt;
  }
  if (is_sym(result.get())) {  // x.size(0) * 2, x.numel(), s0 > 4 ...: computed by the graph
    out = sym_value(result, add_node(result));
    return std::nullopt;
  }
  if ((PyTuple_Check(result.get()) || PyList_Check(result.get())) && PySequence_Size(result.get()) > 0) {
    Ref seq = Ref::steal(PySequence_Fast(result.get(), ""));
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.get());
    bool all_tensors = true, some_tensor = false;  // tensors, or None for an output not asked for
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* item = PySequence_Fast_GET_ITEM(seq.get(), i);
      some_tensor |= is_tensor(item);
      all_tensors &= is_tensor(item) || item == Py_None;
    }
    if (all_tensors && some_tensor) {
      const int node = add_node(Ref::borrow(Py_None));
      VPtr tup = make(PyList_Check(result.get()) ? VK::List : VK::Tuple);
      if (PyTuple_Check(result.get()) && !PyTuple_CheckExact(result.get())) {
        // torch.return_types (topk(...).values, max(dim=...).indices): field names, in `keys`; the
        // class in `obj` (its type, and what rebuilds it alive across a break)
        tup->obj = Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(result.get())));
        Ref fields = Ref::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(result.get())), "__match_args__"));
        if (fields && PyTuple_Check(fields.get()))
          for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fields.get()); ++i) tup->keys.push_back(Ref::borrow(PyTuple_GET_ITEM(fields.get(), i)));
        PyErr_Clear();
      }
      for (Py_ssize_t i = 0; i < n; ++i) {
        ArgTree base;
        base.kind = ArgTree::Kind::Node;
        base.node = node;
        ArgTree idx;
        idx.constant = Ref::steal(PyLong_FromSsize_t(i));
        Ref ex = Ref::borrow(PySequence_Fast_GET_ITEM(seq.get(), i));
        if (ex.get() == Py_None) {
          tup->items.push_back(constant(ex));
          continue;
        }
        int gi = output.graph.add_call_function(py().getitem, {base, idx}, {}, ex, cur_step_);
        tup->items.push_back(from_example(f, ex, gi, device));
      }
      out = tup;
      return std::nullopt;
    }
  }
  if (result.get() == Py_None && any_tensor) {  // operator.setitem and in-place calls returning None
    add_node(Ref::borrow(Py_None));
    out = constant(Ref::borrow(Py_None));
    return std::nullopt;
  }
  if (any_tensor && method.empty() && PyFunction_Check(target.get())) {
    // A Python function of torch's that answers a Python value about its tensors
    // (torch.nn.init._calculate_correct_fan, fsdp's _same_storage_size): its body inlined, as
    // TorchDynamo inlines the torch functions it does not put in the graph, so what it reads of
    // them is guarded, or breaks where it reads their data.
    VPtr fv = make(VK::Function);
    fv->obj = target;
    return inline_call(f, fv, nullptr, std::move(args), std::move(kwargs), out);
  }
  if (is_tensor(result.get()) == false && any_tensor)
    return brk(f, "DV0006", what + " returned a " + std::string(Py_TYPE(result.get())->tp_name) + ", not a tensor",
               "operators that return Python values depend on tensor data");
  if (method.empty() && args.empty() && kwargs.empty() && reads_torch_setting(target.get()))
    return brk(f, "DV0004", what + " reads a torch setting the compiled code's guards do not check",
               "read it outside the compiled function and pass the value in");
  out = constant(result);
  return std::nullopt;
}

Translator::Status Translator::meta_result(Frame& f, const VPtr& self, const std::string& method,
                                           const std::vector<VPtr>& args, Ref r, VPtr& out) {
  PyObject* o = r.get();
  if (is_sym(o)) {
    std::vector<ArgTree> targs(1);
    targs[0].kind = ArgTree::Kind::Node;
    targs[0].node = self->node;
    for (const VPtr& a : args) {
      ArgTree t;
      if (!to_arg(a, t)) return brk(f, "DV0013", "unsupported argument to Tensor." + method);
      targs.push_back(std::move(t));
    }
    const int n = output.graph.add_call_method(method, std::move(targs), {}, r, cur_step_);
    if (obs_) obs_->on_graph_node(GraphNodeEvent{id_, n, cur_step_, "call_method", "Tensor." + method});
    out = sym_value(r, n);
    return std::nullopt;
  }
  if (PyTuple_Check(o) && args.empty() && (method == "size" || method == "stride")) {
    bool symbolic = false;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); ++i) symbolic |= is_sym(PyTuple_GET_ITEM(o, i));
    if (symbolic) {  // x.shape with symbolic sizes: a tuple of constants and l_x_.size(i) nodes
      VPtr tup = make(VK::Tuple);
      if (method == "size") tup->obj = py().torch_Size;  // a torch.Size, as eager's (isinstance, repr, rebuilt)
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); ++i) {
        PyObject* item = PyTuple_GET_ITEM(o, i);
        if (!is_sym(item)) {
          tup->items.push_back(constant(Ref::borrow(item)));
          continue;
        }
        VPtr d;
        if (Status s = meta_result(f, self, method, {constant_steal(PyLong_FromSsize_t(i))}, Ref::borrow(item), d)) return s;
        tup->items.push_back(d);
      }
      out = tup;
      return std::nullopt;
    }
  }
  out = constant(r);
  return std::nullopt;
}

// ---- calls --------------------------------------------------------------------------------------

// A function marked with torch._dynamo.assume_constant_result (its `_dynamo_marked_constant`; the
// install probes of transformers, is_torch_distributed_available) called with constant arguments:
// run now and its answer is a constant of the trace, as TorchDynamo's UserFunctionVariable does.
// Sets out when it ran; otherwise the function is inlined as any other.
Translator::Status Translator::call_marked_constant(Frame& f, PyObject* func, const VPtr& self, const std::vector<VPtr>& args,
                                                    const std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out) {
  PyObject* d = reinterpret_cast<PyFunctionObject*>(func)->func_dict;
  PyObject* mark = d ? PyDict_GetItemString(d, "_dynamo_marked_constant") : nullptr;
  if (!mark || PyObject_IsTrue(mark) != 1 || self) return PyErr_Clear(), std::nullopt;
  Ref pargs = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i]->kind != VK::Const || !args[i]->obj) return std::nullopt;
    PyTuple_SET_ITEM(pargs.get(), i, Ref::borrow(args[i]->obj.get()).release());
  }
  Ref pkw = Ref::steal(PyDict_New());
  for (const auto& [k, v] : kwargs) {
    if (v->kind != VK::Const || !v->obj) return std::nullopt;
    PyDict_SetItemString(pkw.get(), k.c_str(), v->obj.get());
  }
  Ref r = Ref::steal(PyObject_Call(func, pargs.get(), pkw.get()));
  if (!r) return raise_current(f, "calling " + callable_name(func));
  if (!is_exact_const(r.get())) return brk(f, "DV0004", "assume_constant_result function " + callable_name(func) + " returned a " + Py_TYPE(r.get())->tp_name);
  out = constant(r);
  return std::nullopt;
}

// re.match(pattern, name), re.sub(...), re.compile(...) and the other functions of the re module
// over constants (strings, flags, a compiled pattern): run now, as TorchDynamo folds them
// (RE_CONSTANT_FOLD_FNS). Inlined they reach re's module-level cache, which the trace cannot keep.
// Their answers are constants, or a Match or Pattern, immutable objects (frozen_object). Sets out
// when it ran.
Translator::Status Translator::call_regex_fold(Frame& f, PyObject* func, const VPtr& self, const std::vector<VPtr>& args,
                                               const std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out) {
  static const auto& fns = *[] {  // (never destroyed: its references outlive the interpreter)
    auto* v = new std::vector<Ref>();
    Ref re = Ref::steal(PyImport_ImportModule("re"));
    for (const char* n : {"search", "match", "fullmatch", "compile", "sub", "subn", "split", "findall", "escape"}) {
      Ref fn = re ? Ref::steal(PyObject_GetAttrString(re.get(), n)) : Ref();
      if (fn) v->push_back(std::move(fn));
    }
    PyErr_Clear();
    return v;
  }();
  if (self || std::none_of(fns.begin(), fns.end(), [func](const Ref& r) { return r.get() == func; })) return std::nullopt;
  auto folds = [](const VPtr& a) {
    return a->obj && (a->kind == VK::Const || (a->kind == VK::Object && (frozen_object(a->obj.get()) || PyLong_Check(a->obj.get()))));
  };
  for (const VPtr& a : args)  // (a name passed in, not read yet: read now, guarded by its value as TorchDynamo's)
    if (Status s = realize_value(f, a)) return s;
  for (const auto& kv : kwargs)
    if (Status s = realize_value(f, kv.second)) return s;
  for (const VPtr& a : args)
    if (!folds(a)) return std::nullopt;
  for (const auto& kv : kwargs)
    if (!folds(kv.second)) return std::nullopt;
  Ref r;  // (re.error for a bad pattern, raised in the trace as eager raises it)
  if (Status s = call_on_constants(*this, f, func, "re." + callable_name(func), args, kwargs, r)) return s;
  if (frozen_object(r.get())) {
    out = make(VK::Object);
    out->obj = r;
  } else {
    out = wrap(r, nullptr, f);  // a string, None, a list of strings (findall, split), a tuple (subn)
    if (!out) return brk(f, "DV0013", "unsupported result of re." + callable_name(func));
  }
  return std::nullopt;
}

Translator::Status Translator::inline_call(Frame& f, VPtr fn, VPtr self, std::vector<VPtr> args,
                                           std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out) {
  if (frames_.size() > 24) return brk(f, "DV0012", "inlining is nested too deeply", "recursion is not supported");
  // The caller's `out` may hold a value already (attrgetter's x.a.b reads each step into the same
  // variable): the paths below tell whether they answered by `out` being set.
  out.reset();
  PyObject* code;
  Ref globals;
  SourcePtr globals_source;
  std::vector<VPtr> defaults, cells;
  std::vector<std::pair<std::string, VPtr>> kwdefaults;
  if (fn->obj && PyFunction_Check(fn->obj.get())) {
    PyObject* func = fn->obj.get();
    if (PyObject* mod = PyFunction_GET_MODULE(func); mod && PyUnicode_Check(mod) && str_of(mod) == "logging")
      return brk(f, "DV0015", "call to logging." + callable_name(func) + "()", "logging is a side effect outside the graph");
    if (Status s = call_marked_constant(f, func, self, args, kwargs, out); s || out) return s;
    if (Status s = call_regex_fold(f, func, self, args, kwargs, out); s || out) return s;
    if (!made_module_attrs.empty()) {  // nn.Module's own methods on a module whose __init__ the trace inlined
      const VPtr& m = self ? self : (args.empty() ? nullptr : args[0]);
      if (m && m->kind == VK::NNModule && m->obj && made_module_attrs.count(m->obj.get())) {
        bool handled = false;
        std::vector<VPtr> rest(args.begin() + (self ? 0 : 1), args.end());
        if (Status s = made_module_method(f, func, m, rest, kwargs, out, handled); s || handled) return s;
      }
    }
    if (func == py().module_setattr.get() && kwargs.empty()) {
      // super().__setattr__(name, value) in a module class's own __setattr__ (or nn.Module.__setattr__
      // called by name): the assignment nn.Module's own __setattr__ makes, followed as for a module
      // whose class does not define one (object_setattr)
      const VPtr& m = self ? self : (args.empty() ? nullptr : args[0]);
      const size_t at = self ? 0 : 1;
      if (m && m->kind == VK::NNModule && args.size() == at + 2 && args[at]->kind == VK::Const && PyUnicode_Check(args[at]->obj.get())) {
        if (Status s = object_setattr(*this, f, m, str_of(args[at]->obj.get()), args[at + 1], /*module_own=*/true)) return s;
        out = constant(Ref::borrow(Py_None));
        return std::nullopt;
      }
    }
    if (func == module_getattr_fn() && kwargs.empty()) {  // super().__getattr__(name) in a module's own __getattr__
      const VPtr& m = self ? self : (args.empty() ? nullptr : args[0]);
      const VPtr& name = self ? (args.size() == 1 ? args[0] : nullptr) : (args.size() == 2 ? args[1] : nullptr);
      if (m && name && m->kind == VK::NNModule && name->kind == VK::Const && PyUnicode_Check(name->obj.get()))
        return module_getattr_call(*this, f, m, name, out);
    }
    code = PyFunction_GET_CODE(func);
    globals = Ref::borrow(PyFunction_GET_GLOBALS(func));
    // Defaults: constants, functions, classes and modules are read once (no source: the function
    // itself is guarded by identity). Others live on in the function between calls (a list that
    // a call appends to, a tensor): read from its __defaults__ / __kwdefaults__, guarded and written
    // back as objects from outside are, and tensors are graph inputs.
    auto default_source = [&](PyObject* holder, PyObject* v, PyObject* key, const char* what) -> SourcePtr {
      if (is_exact_const(v) || PyFunction_Check(v) || PyType_Check(v) || PyModule_Check(v) || PyCFunction_Check(v)) return nullptr;
      // (through the function's own source where it has one: f.__defaults__[0] read by the trace is then this value)
      return Source::item(fn->source ? Source::attr(fn->source, what) : Source::held(Ref::borrow(holder), callable_name(func) + "." + what),
                          Ref::borrow(key));
    };
    if (PyObject* d = PyFunction_GET_DEFAULTS(func)) {
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(d); ++i) {
        Ref idx = Ref::steal(PyLong_FromSsize_t(i));
        VPtr v = wrap(Ref::borrow(PyTuple_GET_ITEM(d, i)), default_source(d, PyTuple_GET_ITEM(d, i), idx.get(), "__defaults__"), f);
        if (!v) return brk(f, "DV0013", "unsupported default argument of " + callable_name(func));
        defaults.push_back(v);
      }
    }
    if (PyObject* kd = PyFunction_GET_KW_DEFAULTS(func)) {
      Py_ssize_t pos = 0;
      PyObject *k, *val;
      while (PyDict_Next(kd, &pos, &k, &val)) {
        VPtr v = wrap(Ref::borrow(val), default_source(kd, val, k, "__kwdefaults__"), f);
        if (!v) return brk(f, "DV0013", "unsupported keyword default of " + callable_name(func));
        kwdefaults.emplace_back(str_of(k), v);
      }
    }
    if (PyObject* cl = PyFunction_GET_CLOSURE(func)) {
      // A function without a source (a property's getter found on its class) holds its closure
      // itself: read through the function object, as its defaults are -- except a method's
      // __class__ cell, which zero-argument super() reads as its class.
      SourcePtr held = fn->source ? nullptr : Source::held(Ref::borrow(func), callable_name(func));
      Ref freevars = fn->source ? Ref() : Ref::steal(PyCode_GetFreevars(reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(func))));
      if (!fn->source && !freevars) PyErr_Clear();
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(cl); ++i) {
        bool fresh = false;
        SourcePtr cell_src = fn->source ? Source::item(Source::attr(fn->source, "__closure__"), Ref::steal(PyLong_FromSsize_t(i))) : nullptr;
        VPtr cell = real_cell(f, PyTuple_GET_ITEM(cl, i), cell_src, fresh);
        PyObject* contents = PyCell_GET(PyTuple_GET_ITEM(cl, i));
        if (!fresh) {  // met before (the root frame's own cell): its traced contents
          cells.push_back(cell);
          continue;
        }
        if (contents) {
          const bool class_cell = freevars && i < PyTuple_GET_SIZE(freevars.get()) &&
                                  PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(freevars.get(), i), "__class__") == 0;
          SourcePtr fn_src = fn->source ? fn->source : class_cell ? nullptr : held;
          VPtr v = wrap(Ref::borrow(contents), fn_src ? Source::fn_closure(fn_src, static_cast<int>(i), "") : nullptr, f);
          if (!v) return brk(f, "DV0013", "unsupported closure variable of " + callable_name(func), "tensors captured by closures of inlined functions need a source");
          cell->items.push_back(v);
        }
        cells.push_back(cell);
      }
    }
  } else {
    code = fn->obj.get();  // made by MAKE_FUNCTION
    globals = fn->globals;  // of the frame that made it, which may not be the caller's
    if (fn->defaults && fn->defaults->kind == VK::Const && PyTuple_Check(fn->defaults->obj.get())) {
      // defaults that are all constants: one LOAD_CONST of their tuple
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fn->defaults->obj.get()); ++i)
        defaults.push_back(constant(Ref::borrow(PyTuple_GET_ITEM(fn->defaults->obj.get(), i))));
    } else if (fn->defaults) {
      defaults = fn->defaults->items;
    }
    if (fn->kwdefaults)
      for (size_t i = 0; i < fn->kwdefaults->items.size(); ++i) kwdefaults.emplace_back(str_of(fn->kwdefaults->keys[i].get()), fn->kwdefaults->items[i]);
    cells = fn->cells;
  }
  // The globals it reads, guarded where they are: the root frame's (G['x']) or another module's dict.
  if (globals.get() != root_->globals.get()) globals_source = Source::held(globals, globals_text(globals.get()));
  auto* co = reinterpret_cast<PyCodeObject*>(code);
  if (co->co_flags & (CO_COROUTINE | CO_ASYNC_GENERATOR))
    return brk(f, "DV0004", "calling coroutine function " + str_of(co->co_qualname), "coroutines are not traced");
  // Generators (generator expressions, generator functions): a lazy iterator whose frame runs up to
  // its next yield each time an item is taken, as Python's (Translator::resume_generator).
  const bool generator = co->co_flags & CO_GENERATOR;
  const CodeFacts* facts = code_facts(code);
  if (!facts) return brk(f, "DV0019", "cannot decode " + str_of(co->co_qualname));
  if (self) args.insert(args.begin(), self);
  // Bind arguments (Python/ceval.c initialize_locals, simplified: no positional-only kw errors).
  Frame callee;
  callee.facts = facts;
  callee.globals = globals;
  callee.builtins = f.builtins;
  callee.globals_source = globals_source;
  callee.depth = f.depth + 1;
  const int nlocalsplus = static_cast<int>(PyTuple_GET_SIZE(co->co_localsplusnames));
  callee.locals.resize(nlocalsplus);
  const int argc = co->co_argcount, kwonly = co->co_kwonlyargcount;
  const bool varargs = co->co_flags & CO_VARARGS, varkw = co->co_flags & CO_VARKEYWORDS;
  auto name_at = [&](int i) { return str_of(PyTuple_GET_ITEM(co->co_localsplusnames, i)); };
  const std::string qn = str_of(co->co_qualname);
  VPtr extra = make(VK::Tuple);
  for (size_t i = 0; i < args.size(); ++i) {
    if (static_cast<int>(i) < argc) callee.locals[i] = args[i];
    else if (varargs) extra->items.push_back(args[i]);
    else return raise_new(f, PyExc_TypeError, qn + "() takes " + std::to_string(argc) + " positional arguments but " + std::to_string(args.size()) + " were given");
  }
  VPtr extra_kw = make(VK::Dict);
  for (auto& [k, v] : kwargs) {
    bool placed = false;
    for (int i = co->co_posonlyargcount; i < argc + kwonly; ++i) {
      if (name_at(i) == k) {
        if (callee.locals[i]) return raise_new(f, PyExc_TypeError, qn + "() got multiple values for argument '" + k + "'");
        callee.locals[i] = v;
        placed = true;
        break;
      }
    }
    if (!placed) {
      if (!varkw) return raise_new(f, PyExc_TypeError, qn + "() got an unexpected keyword argument '" + k + "'");
      extra_kw->keys.push_back(Ref::steal(PyUnicode_FromString(k.c_str())));
      extra_kw->items.push_back(v);
    }
  }
  const int ndef = static_cast<int>(defaults.size());
  for (int i = 0; i < argc; ++i) {
    if (callee.locals[i]) continue;
    const int d = i - (argc - ndef);
    if (d >= 0) callee.locals[i] = defaults[d];
    else return raise_new(f, PyExc_TypeError, qn + "() missing required argument '" + name_at(i) + "'");
  }
  for (int i = argc; i < argc + kwonly; ++i) {
    if (callee.locals[i]) continue;
    for (auto& [k, v] : kwdefaults)
      if (k == name_at(i)) callee.locals[i] = v;
    if (!callee.locals[i]) return raise_new(f, PyExc_TypeError, qn + "() missing keyword-only argument '" + name_at(i) + "'");
  }
  int slot = argc + kwonly;
  if (varargs) callee.locals[slot++] = extra;
  if (varkw) callee.locals[slot++] = extra_kw;
  const int nfree = co->co_nfreevars;
  for (int k = 0; k < nfree && k < static_cast<int>(cells.size()); ++k) callee.locals[nlocalsplus - nfree + k] = cells[k];
  if (generator) {  // nothing of its body runs until an item is taken
    callee.generator = true;
    VPtr it = make(VK::Iter);
    it->name = "generator";
    it->flag = true;
    it->frame = std::make_shared<Frame>(std::move(callee));
    out = it;
    return std::nullopt;
  }
  if (obs_) {
    if (!f.reported) report_step(f);  // the calling step, before the callee's steps
    if (!announce_code(obs_, facts)) PyErr_Clear();
  }
  frames_.push_back(&callee);
  const int caller_step = cur_step_;
  Status s = run_frame(callee);
  cur_step_ = caller_step;
  frames_.pop_back();
  if (s) return s;
  out = callee.result;
  return std::nullopt;
}

namespace {
// fn's id is in one of TorchDynamo's sets of callables (torch._dynamo.trace_rules.<name>, a
// FunctionIdSet read with `in`); `ids` holds the set for the process.
bool in_trace_rules_set(PyObject*& ids, bool& looked, const char* name, PyObject* fn) {
  if (!looked) {
    looked = true;
    Ref rules = Ref::steal(PyImport_ImportModule("torch._dynamo.trace_rules"));
    ids = rules ? PyObject_GetAttrString(rules.get(), name) : nullptr;  // kept for the process
    PyErr_Clear();
  }
  if (!ids) return false;
  Ref id = Ref::steal(PyLong_FromVoidPtr(fn));
  const int r = id ? PySequence_Contains(ids, id.get()) : -1;
  if (r < 0) PyErr_Clear();
  return r == 1;
}
}  // namespace

// torch.compiler.allow_in_graph(fn) / torch._dynamo.allow_in_graph: fn's id is in TorchDynamo's
// allowed set.
bool allowed_in_graph(PyObject* fn) {
  static PyObject* ids = nullptr;
  static bool looked = false;
  return in_trace_rules_set(ids, looked, "_allowed_callable_ids", fn);
}

// torch._dynamo.disallow_in_graph(fn): fn's id is in TorchDynamo's disallowed set; a call of it
// breaks the graph and runs eagerly.
bool disallowed_in_graph(PyObject* fn) {
  static PyObject* ids = nullptr;
  static bool looked = false;
  return in_trace_rules_set(ids, looked, "_disallowed_callable_ids", fn);
}

namespace {
// random.random(), random.uniform(a, b), random.randint(a, b), random.randrange(...) of the random
// module's own generator (the functions TorchDynamo draws before its graph): the method's name, or
// null for any other callable.
PyObject* random_generator() {  // random._inst, the generator the random module's functions are bound to (borrowed)
  static PyObject* const inst = kept_attr("random", "_inst");
  return inst;
}

const char* random_module_draw(const VPtr& fn) {
  PyObject* const inst = random_generator();
  static PyObject* const cls = kept_attr("random", "Random");
  if (!inst || !cls || !fn->obj) return nullptr;
  PyObject* o = fn->obj.get();
  if (PyCFunction_Check(o))  // random.random: a builtin method of the generator
    return PyCFunction_GET_SELF(o) == inst && std::strcmp(reinterpret_cast<PyCFunctionObject*>(o)->m_ml->ml_name, "random") == 0
               ? "random" : nullptr;
  PyObject* func = nullptr;  // random.uniform ...: Random's Python method, bound to the generator
  if (PyMethod_Check(o) && PyMethod_GET_SELF(o) == inst) func = PyMethod_GET_FUNCTION(o);
  else if (fn->kind == VK::Method && fn->self && fn->self->obj.get() == inst) func = o;
  if (!func) return nullptr;
  for (const char* name : {"uniform", "randint", "randrange"}) {
    Ref m = Ref::steal(PyObject_GetAttrString(cls, name));
    PyErr_Clear();
    if (m && m.get() == func) return name;
  }
  return nullptr;
}
}  // namespace

// A draw of the random module over constant arguments: the transformed code makes it before its
// graph (OutputGraph::random_draws), where eager's call would; the trace holds its value as one not
// read yet (its type known from the same draw on a copy of the generator), which may move, be stored
// and be returned, and whose reading breaks (ValueBuilder::realize_leaf): its value is only known
// when the compiled code runs. A model's layer drop drawn and then not used (`p = random.uniform(0,
// 1); if self.training and p < self.layerdrop`) is one graph, as in TorchDynamo.
Translator::Status Translator::random_draw(Frame& f, PyObject* fn, const char* name, const std::vector<VPtr>& args, VPtr& out) {
  Ref argt = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
  if (!argt) return raise_current(f, std::string("random.") + name + "()");
  for (size_t i = 0; i < args.size(); ++i)
    PyTuple_SET_ITEM(argt.get(), static_cast<Py_ssize_t>(i), Ref::borrow(args[i]->obj.get()).release());
  Ref mod = Ref::steal(PyImport_ImportModule("random"));
  Ref state = mod ? Ref::steal(PyObject_CallMethod(mod.get(), "getstate", nullptr)) : Ref();
  Ref copy = mod ? Ref::steal(PyObject_CallMethod(mod.get(), "Random", nullptr)) : Ref();
  Ref set = copy && state ? Ref::steal(PyObject_CallMethod(copy.get(), "setstate", "(O)", state.get())) : Ref();
  Ref method = set ? Ref::steal(PyObject_GetAttrString(copy.get(), name)) : Ref();
  if (!method) return raise_current(f, std::string("random.") + name + "()");
  Ref example = Ref::steal(PyObject_Call(method.get(), argt.get(), nullptr));
  if (!example) return raise_current(f, std::string("random.") + name + "()");  // (eager's error: randint(5, 1))
  Ref draw = Ref::steal(Py_BuildValue("(OO)", fn, argt.get()));
  if (!draw) return raise_current(f, std::string("random.") + name + "()");
  const int index = static_cast<int>(output.random_draws.size());
  output.random_draws.push_back(draw);
  out = builder.leaf(example, Source::random_draw(index, draw), f);
  if (!out) return brk(f, "DV0004", std::string("random.") + name + "()");
  return std::nullopt;
}

PyObject* autograd_apply_function();           // autograd_apply.cpp
bool library_callable(PyObject* o);            // values/library_calls.cpp
bool is_autograd_function_class(PyObject* o);  // autograd_apply.cpp

Translator::Status Translator::call(Frame& f, VPtr fn, std::vector<VPtr> args,
                                    std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out) {
  if (pure_body_ > 0 && fn->kind == VK::Method) {  // a tensor hook's body: no method that changes state
    Status s;
    if (pure_body_method(f, fn, s)) return s;
  }
  static PyObject* const script_function = kept_attr("torch.jit", "ScriptFunction");
  if (fn->obj && script_function && reinterpret_cast<PyObject*>(Py_TYPE(fn->obj.get())) == script_function) {
    // a @torch.jit.script function: its Python original (_torchdynamo_inline), inlined, as TorchDynamo
    // inlines it (the scripted code runs no Python the trace could follow)
    Ref orig = Ref::steal(PyObject_GetAttrString(fn->obj.get(), "_torchdynamo_inline"));
    PyErr_Clear();
    VPtr inner = orig && PyFunction_Check(orig.get())
                     ? wrap(orig, fn->source ? Source::attr(fn->source, "_torchdynamo_inline") : nullptr, f)
                     : nullptr;
    if (!inner) return brk(f, "DV0004", "call to a torch.jit.script function without its Python original");
    fn = inner;
  }
  if (const char* draw = random_module_draw(fn); draw && kwargs.empty()) {
    bool constants = true;
    for (const VPtr& a : args) constants &= a->kind == VK::Const;
    Ref bound = constants ? Ref::steal(PyObject_GetAttrString(random_generator(), draw)) : Ref();  // the generator's method
    PyErr_Clear();
    if (bound) return random_draw(f, bound.get(), draw, args, out);
  }
  bool handled = false;
  if (Status s = optimizer_init_group(f, fn, args, kwargs, out, handled); s || handled) return s;
  if (builder.any_lazy()) {
    // Lazy dicts stay lazy only into user code traced instruction by instruction (a function, a
    // module's forward or hooks, a bound user method): everything else may read them whole.
    const bool py_fn = fn->obj && PyFunction_Check(fn->obj.get());
    const bool inlined = (fn->kind == VK::Function && (!py_fn || (!library_callable(fn->obj.get()) && !allowed_in_graph(fn->obj.get())))) ||
                         fn->kind == VK::NNModule ||
                         (fn->kind == VK::Method && py_fn && fn->obj.get() != autograd_apply_function());
    if (Status s = realize_call(f, fn, args, kwargs, inlined)) return s;
  }
  return ops(fn->kind).call(*this, f, fn, args, kwargs, out);
}


VPtr Translator::real_cell(Frame& f, PyObject* cell, const SourcePtr& source, bool& fresh) {
  fresh = false;
  for (const RealCell& c : real_cells_) {
    if (c.cell.get() != cell) continue;
    // The same cell met again (a method of a class the frame defined, closing over the frame's
    // variable): its traced contents, which the trace may have written. Where either way to it has
    // no source, no guard ties them: the function reached is pinned by what led to it.
    if (!c.source || !source) return c.value;
    if (c.source->text() != source->text())
      if (Guard* g = add_guard(GuardKind::TENSOR_ALIASING, source, {}, f, source->text() + " is " + c.source->text())) {
        g->length = 1;
        g->refs = {SymRef{c.source}, SymRef{source}};
      }
    return c.value;
  }
  fresh = true;
  VPtr v = make(VK::Cell);
  v->cell_of = -2;
  v->obj = Ref::borrow(cell);  // (a nonlocal write is replayed on it after the graph)
  real_cells_.push_back(RealCell{Ref::borrow(cell), v, source});
  return v;
}

// super() and super(cls, self) in a method: a super object over the real class and instance, whose
// methods are inlined with the traced `self` (nn.Module forwards calling their base class's forward).
Translator::Status Translator::call_super(Frame& f, std::vector<VPtr>& args, VPtr& out) {
  VPtr cls, self;
  if (args.size() == 2) {
    cls = args[0];
    self = args[1];
  } else if (args.empty()) {
    auto* co = reinterpret_cast<PyCodeObject*>(f.facts->code.get());
    const int n = static_cast<int>(PyTuple_GET_SIZE(co->co_localsplusnames));
    for (int i = n - co->co_nfreevars; i < n && i < static_cast<int>(f.locals.size()); ++i)
      if (str_of(PyTuple_GET_ITEM(co->co_localsplusnames, i)) == "__class__" && f.locals[i] &&
          f.locals[i]->kind == VK::Cell && !f.locals[i]->items.empty())
        cls = f.locals[i]->items[0];
    if (co->co_argcount > 0 && !f.locals.empty()) {
      if (Status s = read_local(f, 0)) return s;
      self = f.locals[0];
    }
    if (self && self->kind == VK::Cell) self = self->items.empty() ? nullptr : self->items[0];
  }
  if (cls && self && cls->obj && PyType_Check(cls->obj.get()) && self->kind == VK::Instance) {
    // An object made in the trace: super(cls, its class) finds the attribute past cls in the MRO
    // (functions come back unbound and are bound to the traced object).
    if (!PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(self->obj.get()), reinterpret_cast<PyTypeObject*>(cls->obj.get())))
      return raise_new(f, PyExc_TypeError, "super(type, obj): obj must be an instance or subtype of type");
    Ref sup = Ref::steal(PyObject_CallFunctionObjArgs(reinterpret_cast<PyObject*>(&PySuper_Type), cls->obj.get(), self->obj.get(), nullptr));
    if (!sup) return raise_current(f, "super()");
    out = make(VK::Object);
    out->obj = sup;
    out->self = self;
    return std::nullopt;
  }
  if (!cls || !self || !cls->obj || !PyType_Check(cls->obj.get()) || !self->obj ||
      (self->kind != VK::NNModule && self->kind != VK::Object))
    return brk(f, "DV0004", "super() outside a method of a module or object", "call the base class's method explicitly");
  Ref sup = Ref::steal(PyObject_CallFunctionObjArgs(reinterpret_cast<PyObject*>(&PySuper_Type), cls->obj.get(), self->obj.get(), nullptr));
  if (!sup) {
    PyErr_Clear();
    return brk(f, "DV0010", "super() raised");
  }
  out = make(VK::Object);
  out->obj = sup;
  out->self = self;
  return std::nullopt;
}

// The source of the member at dotted `path` ("encoder.layer.0.weight") of `module` read from
// `source`: the path walked through _modules, its last part in `last_dict` (`reached`: the member). Null
// where a part is missing; the module's own for an empty path.
static SourcePtr member_source(PyObject* module, SourcePtr source, const std::string& path, const char* last_dict,
                               PyObject** reached = nullptr) {
  PyObject* member = module;
  for (size_t start = 0; source && !path.empty();) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const char* dict = dot == std::string::npos ? last_dict : "_modules";
    Ref d = Ref::steal(PyObject_GetAttrString(member, dict));
    member = d && PyDict_Check(d.get()) ? PyDict_GetItemString(d.get(), part.c_str()) : nullptr;
    PyErr_Clear();
    source = member ? Source::module_member(source, dict, part) : nullptr;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (reached) *reached = member;
  return source;
}

// nn.Module's own iterators (parameters(), named_children(), modules() ...), not overridden: their
// results come from the real module, each with its source (L['self'].a.b.weight) so that parameters
// are graph inputs and submodules can be called. TorchDynamo does the same instead of tracing
// module.py's generators (which build sets).
Translator::Status Translator::module_members(Frame& f, const VPtr& fn, const std::vector<VPtr>& args,
                                              const std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out,
                                              bool& handled) {
  static const char* kinds[][3] = {
      {"parameters", "named_parameters", "_parameters"}, {"named_parameters", "named_parameters", "_parameters"},
      {"buffers", "named_buffers", "_buffers"},          {"named_buffers", "named_buffers", "_buffers"},
      {"children", "named_children", "_modules"},        {"named_children", "named_children", "_modules"},
      {"modules", "named_modules", "_modules"},          {"named_modules", "named_modules", "_modules"}};
  const char* const* kind = nullptr;
  for (auto& k : kinds)
    if (fn->name == k[0]) kind = k;
  if (!kind) return std::nullopt;
  Ref base = Ref::steal(PyObject_GetAttrString(py().nn_Module.get(), kind[0]));
  if (!base || base.get() != fn->obj.get()) {  // overridden by the module's class: trace it
    PyErr_Clear();
    return std::nullopt;
  }
  handled = true;
  const VPtr& self = fn->self;
  if (auto made = made_module_attrs.find(self->obj.get()); made != made_module_attrs.end() && !made->second.empty())
    return brk(f, "DV0004", "Module." + fn->name + "() of a module built in the traced code that the trace set attributes on",
               "build the module in __init__");
  if (self->source) {  // the real module is read below: not one whose member dicts the trace changed
    const std::string under = self->source->text();
    for (const VPtr& d : output.side_effects.mutated_dicts) {
      const std::string text = d->source ? d->source->text() : "";
      if (text.rfind(under, 0) == 0 && (text.find("_parameters") != std::string::npos || text.find("_buffers") != std::string::npos ||
                                        text.find("_modules") != std::string::npos))
        return brk(f, "DV0004", "Module." + fn->name + "() after the traced code changed " + text);
    }
  }
  const bool named = std::string(kind[0]) == kind[1];
  // Arguments (recurse=False, remove_duplicate ...) are constants; a prefix would change the names.
  // A prefix (named_parameters(prefix="encoder")) is put before each name as the method does; the
  // members are walked by their unprefixed paths.
  Ref pkw = Ref::steal(PyDict_New());
  std::string prefix;
  for (auto& [k, v] : kwargs) {
    if (v->kind != VK::Const) return brk(f, "DV0004", "Module." + fn->name + "() with argument " + k);
    if (k == "prefix") {
      if (!named || !PyUnicode_Check(v->obj.get())) return brk(f, "DV0004", "Module." + fn->name + "() with a prefix that is not a str");
      prefix = str_of(v->obj.get());
      continue;
    }
    PyDict_SetItemString(pkw.get(), k.c_str(), v->obj.get());
  }
  if (!args.empty()) return brk(f, "DV0004", "Module." + fn->name + "() with positional arguments");
  Ref meth = Ref::steal(PyObject_GetAttrString(self->obj.get(), kind[1]));
  Ref empty = Ref::steal(PyTuple_New(0));
  Ref gen = meth ? Ref::steal(PyObject_Call(meth.get(), empty.get(), pkw.get())) : Ref();
  Ref items = gen ? Ref::steal(PySequence_List(gen.get())) : Ref();
  if (!items) {
    PyErr_Clear();
    return brk(f, "DV0010", "Module." + fn->name + "() raised");
  }
  // What the walk read holds while the member dicts it went through keep their entries in their
  // order (a parameter added, removed or reordered later is seen): DICT_KEYS on each.
  {
    const bool children = std::string(kind[0]).find("children") != std::string::npos;  // self's own only
    PyObject* recurse = PyDict_GetItemString(pkw.get(), "recurse");                    // parameters(recurse=False)
    const bool deep = !children && recurse != Py_False;
    Ref all = deep ? Ref::steal(PyObject_CallMethod(self->obj.get(), "named_modules", nullptr)) : Ref();
    Ref mods = all ? Ref::steal(PySequence_List(all.get())) : Ref();
    PyErr_Clear();
    std::vector<std::pair<PyObject*, SourcePtr>> walk = {{self->obj.get(), self->source}};
    for (Py_ssize_t i = 1; mods && i < PyList_GET_SIZE(mods.get()); ++i) {  // (the first is self)
      PyObject* sub = nullptr;
      SourcePtr src = member_source(self->obj.get(), self->source, str_of(PyTuple_GET_ITEM(PyList_GET_ITEM(mods.get(), i), 0)), "_modules", &sub);
      if (src) walk.emplace_back(sub, src);
    }
    for (auto& [m, src] : walk) {
      if (deep || std::string(kind[2]) == "_modules") guard_module_dict_keys(*this, f, m, src, "_modules");
      if (std::string(kind[2]) != "_modules") guard_module_dict_keys(*this, f, m, src, kind[2]);
    }
  }
  VPtr it = make(VK::Iter);
  it->name = "module_members";  // a generator in eager (its python_type), iterated as a list of its items
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items.get()); ++i) {
    PyObject* pair = PyList_GET_ITEM(items.get(), i);  // (dotted name, member)
    const std::string path = str_of(PyTuple_GET_ITEM(pair, 0));
    PyObject* member = PyTuple_GET_ITEM(pair, 1);
    SourcePtr src = member_source(self->obj.get(), self->source, path, kind[2]);  // (the last part in kind[2])
    VPtr v;
    if (!functional_overrides_.empty() && std::strcmp(kind[2], "_modules") != 0) {
      // inside functional_call: a parameter or buffer it replaces is the tensor given (as eager swaps
      // it into its module's dict). (Its holder found by the dotted path, whatever the sources.)
      PyObject* holder = self->obj.get();
      size_t from = 0;
      for (size_t dot; holder && (dot = path.find('.', from)) != std::string::npos; from = dot + 1) {
        Ref mods = Ref::steal(PyObject_GetAttrString(holder, "_modules"));
        holder = mods && PyDict_Check(mods.get()) ? PyDict_GetItemString(mods.get(), path.substr(from, dot - from).c_str()) : nullptr;
      }
      PyErr_Clear();
      if (holder) functional_override(holder, path.substr(from), v);
    }
    if (!v) v = path.empty() ? self : wrap(Ref::borrow(member), src, f);
    if (!v) return brk(f, "DV0013", "module member " + path + " cannot be traced");
    if (named) {
      VPtr tup = make(VK::Tuple);
      const std::string shown = prefix + (!prefix.empty() && !path.empty() ? "." : "") + path;
      tup->items = {prefix.empty() ? constant(Ref::borrow(PyTuple_GET_ITEM(pair, 0))) : constant_steal(PyUnicode_FromString(shown.c_str())), v};
      it->items.push_back(tup);
    } else {
      it->items.push_back(v);
    }
  }
  out = it;
  return std::nullopt;
}

// A functools.partial made in the trace (constant arguments, see builtins.cpp): its function called
// with the stored arguments first; call-site keywords override stored ones.
Translator::Status Translator::call_partial(Frame& f, PyObject* partial, const SourcePtr& src, std::vector<VPtr>& args,
                                            std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out) {
  Ref func = Ref::steal(PyObject_GetAttrString(partial, "func"));
  Ref pargs = Ref::steal(PyObject_GetAttrString(partial, "args"));
  Ref pkw = Ref::steal(PyObject_GetAttrString(partial, "keywords"));
  if (!func || !pargs || !pkw || !PyTuple_Check(pargs.get()) || !PyDict_Check(pkw.get())) {
    PyErr_Clear();
    return brk(f, "DV0004", "calling a functools.partial");
  }
  // What it holds, each read from the partial (guarded when it came from a source; a partial without
  // one was made of constants).
  VPtr fv = wrap(func, src ? Source::attr(src, "func") : nullptr, f);
  if (!fv) return brk(f, "DV0013", "the function of a functools.partial cannot be traced");
  std::vector<VPtr> all;
  SourcePtr args_src = src ? Source::attr(src, "args") : nullptr;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(pargs.get()); ++i) {
    VPtr a = wrap(Ref::borrow(PyTuple_GET_ITEM(pargs.get(), i)), args_src ? Source::item(args_src, Ref::steal(PyLong_FromSsize_t(i))) : nullptr, f);
    if (!a) return brk(f, "DV0013", "an argument bound by a functools.partial cannot be traced");
    all.push_back(a);
  }
  all.insert(all.end(), args.begin(), args.end());
  std::vector<std::pair<std::string, VPtr>> kw;
  Py_ssize_t pos = 0;
  PyObject *k, *v;
  SourcePtr kw_src = src ? Source::attr(src, "keywords") : nullptr;
  while (PyDict_Next(pkw.get(), &pos, &k, &v)) {
    VPtr a = wrap(Ref::borrow(v), kw_src ? Source::item(kw_src, Ref::borrow(k)) : nullptr, f);
    if (!a) return brk(f, "DV0013", "a keyword bound by a functools.partial cannot be traced");
    kw.emplace_back(str_of(k), a);
  }
  for (auto& kv : kwargs) {
    auto same = std::find_if(kw.begin(), kw.end(), [&](const auto& e) { return e.first == kv.first; });
    if (same != kw.end()) same->second = kv.second;
    else kw.push_back(kv);
  }
  return call(f, fv, std::move(all), std::move(kw), out);
}

}  // namespace dv
