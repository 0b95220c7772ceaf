// Torch function modes entered in the traced code (`with SomeMode():`, a TorchFunctionMode subclass:
// transformers' masks under TransformGetItemToIndex, a user's logging or rewriting mode), as
// TorchDynamo traces them (TorchFunctionModeStackVariable): the mode is an object made in the trace;
// its __enter__/__exit__ are inlined, and their torch._C._push_on_torch_function_stack /
// _pop_torch_function_stack move it onto and off a stack the trace keeps (nothing is pushed for
// real: the graph holds what the mode's handler did). While the stack is not empty, each torch
// function, tensor method and operator on tensors is dispatched as eager dispatches it: the
// innermost mode's __torch_function__(func, types, args, kwargs) is inlined with that mode off the
// stack (so `func(*args, **kwargs)` inside it reaches the modes below, then the graph), with func
// the object eager passes (an operator's Tensor method, found by running it under a mode once;
// 1 + x is Tensor.add(x, 1), 2 - x Tensor.__rsub__(x, 2)). types is () for plain tensors, as
// TorchDynamo passes it. A break inside a mode's block runs the frame eagerly (the resume function
// could not enter the mode again), and so does reading a tensor's attributes under a mode (eager
// calls the handler with a getset descriptor's __get__, which the trace does not dispatch).
#include "tracer/pycache.h"
#include "tracer/translator.h"
#include "tracer/values/kind.h"

namespace dv {

namespace {

PyObject* mode_base() {  // torch.overrides.TorchFunctionMode (kept)
  static PyObject* base = kept_attr("torch.overrides", "TorchFunctionMode");
  return base;
}

// What dynview._runtime.<fn>() returns, made once and kept (null: it failed).
PyObject* runtime_table(const char* fn) {
  Ref rt = Ref::steal(PyImport_ImportModule("dynview._runtime"));
  PyObject* r = rt ? PyObject_CallMethod(rt.get(), fn, nullptr) : nullptr;
  if (!r) PyErr_Clear();
  return r;
}

// {operator function: (func, func of the reflected form or None)} (kept).
PyObject* operator_funcs() {
  static PyObject* table = [] {
    PyObject* r = runtime_table("torch_function_operators");
    if (r && PyDict_Check(r)) return r;
    Py_XDECREF(r);
    return PyDict_New();
  }();
  return table;
}

bool module_starts(PyObject* o, const char* prefix) {
  Ref mod = Ref::steal(PyObject_GetAttrString(o, "__module__"));
  if (!mod || !PyUnicode_Check(mod.get())) return PyErr_Clear(), false;
  return str_of(mod.get()).rfind(prefix, 0) == 0;
}

}  // namespace

bool torch_function_mode_class(PyObject* o) {
  PyObject* base = mode_base();
  if (!base || !PyType_Check(o)) return false;
  const int r = PyObject_IsSubclass(o, base);
  if (r < 0) PyErr_Clear();
  return r == 1;
}

// The torch function modes on the thread's stack when the call began (held off it while the capture
// runs): each is the object at ___get_torch_function_mode_stack_at(i), its type guarded, as
// TorchDynamo guards the mode stack (TORCH_FUNCTION_MODE_STACK: the number of modes, in the global
// state guard, and their types). A break inside its block splits the frame: the mode is on the
// thread's stack for real around the code that runs eagerly and the resume function.
Translator::Status Translator::enter_outer_modes(Frame& f) {
  const Py_ssize_t n = torch_function_mode_depth();
  if (n == 0) return std::nullopt;
  static PyObject* stack_at = kept_attr("torch._C", "_get_function_stack_at");
  if (!stack_at) return brk(f, "DV0004", "torch._C._get_function_stack_at is missing");
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* m = torch_function_mode_at(i);
    SourcePtr src = Source::fn_mode(static_cast<int>(i), Ref::borrow(stack_at));
    add_guard(GuardKind::TYPE_MATCH, src, Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(m))), f,
              "___check_type_id(" + src->text() + ", " + Py_TYPE(m)->tp_name + ")");
    VPtr v = wrap(Ref::borrow(m), src, f);
    if (!v) return brk(f, "DV0013", std::string("a torch function mode of type ") + Py_TYPE(m)->tp_name + " cannot be traced");
    fn_modes_.push_back(v);
  }
  outer_modes_ = fn_modes_;
  return std::nullopt;
}

Translator::Status Translator::push_fn_mode(Frame& f, const VPtr& mode) {
  if (mode->kind != VK::Instance || !torch_function_mode_class(mode->obj.get()))
    return brk(f, "DV0004", "pushing a torch function mode the trace did not make",
               "enter the mode inside the compiled function (with Mode(): ...), or outside it");
  fn_modes_.push_back(mode);
  return std::nullopt;
}

Translator::Status Translator::pop_fn_mode(Frame& f, VPtr& out) {
  if (fn_modes_.empty()) return brk(f, "DV0004", "leaving a torch function mode the trace did not enter");
  out = fn_modes_.back();
  fn_modes_.pop_back();
  return std::nullopt;
}

// The func eager's dispatch passes for a call the engine records (graph_call's target or method),
// and whether its operands are swapped (a reflected operator); null: eager does not dispatch it.
Ref fn_mode_func(PyObject* target, const std::string& method, const std::vector<VPtr>& args, bool& swap) {
  swap = false;
  if (!method.empty()) {
    Ref fn = Ref::steal(PyObject_GetAttrString(py().torch_Tensor.get(), method.c_str()));
    if (!fn) PyErr_Clear();
    return fn;
  }
  if (!target) return Ref();
  if (target == py().set_grad_enabled_fn.get()) return Ref();
  if (PyObject* row = PyDict_GetItemWithError(operator_funcs(), target)) {
    if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 2) return Ref();
    if (!args.empty() && args[0]->kind != VK::Tensor && args.size() == 2 && args[1]->kind == VK::Tensor) {
      if (PyTuple_GET_ITEM(row, 1) == Py_None) return Ref();
      swap = true;
      return Ref::borrow(PyTuple_GET_ITEM(row, 1));
    }
    return Ref::borrow(PyTuple_GET_ITEM(row, 0));
  }
  PyErr_Clear();
  // A Python function reaches a mode only through its own handle_torch_function (torch.overrides'
  // overridable functions); torch.compiler.is_exporting and the like do not.
  if (PyFunction_Check(target)) {
    static PyObject* overridable = runtime_table("overridable_python_functions");
    const int in = overridable ? PySet_Contains(overridable, target) : 0;
    if (in < 0) PyErr_Clear();
    if (in != 1) return Ref();
  }
  // torch's functions (torch.*, torch.nn.functional.*, torch.ops.*): a mode sees factories too. Not
  // functorch's own steps (vmap's batching calls), which eager makes below the dispatch.
  if (!module_starts(target, "torch") || module_starts(target, "torch._functorch") || module_starts(target, "torch._C._functorch"))
    return Ref();
  return Ref::borrow(target);
}

Translator::Status Translator::call_fn_mode(Frame& f, Ref func, std::vector<VPtr> args, KwArgs kwargs, VPtr& out) {
  VPtr mode = fn_modes_.back();
  static PyObject* name = PyUnicode_InternFromString("__torch_function__");
  // (a mode made in the trace is an Instance of its class; one from outside, the object itself)
  auto* type = mode->kind == VK::Instance ? reinterpret_cast<PyTypeObject*>(mode->obj.get()) : Py_TYPE(mode->obj.get());
  PyObject* handler = _PyType_Lookup(type, name);
  if (!handler || !PyFunction_Check(handler))
    return brk(f, "DV0004", std::string("a torch function mode whose __torch_function__ is not a Python function (") + type->tp_name + ")");
  VPtr pos = make(VK::Tuple);
  pos->items = std::move(args);
  VPtr kw = constant(Ref::borrow(Py_None));
  if (!kwargs.empty()) {
    kw = make(VK::Dict);
    for (auto& [k, v] : kwargs)
      if (!dict_set(*kw, Ref::steal(PyUnicode_FromString(k.c_str())), v)) return brk(f, "DV0010", "comparing dict keys raised");
  }
  VPtr types = constant(Ref::steal(PyTuple_New(0)));
  VPtr fn = wrap(func, nullptr, f);  // a torch function or Tensor method, called by the handler as any callable
  if (!fn) return brk(f, "DV0013", "the function a torch function mode is given cannot be traced (" + repr_of(func.get()) + ")");
  // The mode is off the stack while its handler runs (torch's _pop_mode_temporarily), back after.
  fn_modes_.pop_back();
  Status s = call(f, bound_method(mode, Ref::borrow(handler), "__torch_function__"), {fn, types, pos, kw}, {}, out);
  fn_modes_.push_back(mode);
  return s;
}

Translator::Status Translator::dispatch_fn_mode(Frame& f, PyObject* target, const std::string& method, std::vector<VPtr>& args,
                                                KwArgs& kwargs, VPtr& out, bool& handled) {
  handled = false;
  if (fn_modes_.empty()) return std::nullopt;
  bool swap = false;
  Ref func = fn_mode_func(target, method, args, swap);
  if (!func) return std::nullopt;
  handled = true;
  std::vector<VPtr> a = args;
  if (swap) std::swap(a[0], a[1]);
  return call_fn_mode(f, std::move(func), std::move(a), kwargs, out);
}

}  // namespace dv
