// Fn.apply(*args) of a torch.autograd.Function subclass: one graph node calling Fn.apply (through
// dynview._runtime.autograd_function_apply), as TorchDynamo's autograd_function_apply op stands for
// the whole call: forward runs in the graph, and autograd records the user's backward. Read by
// Translator::call (calls.cpp); the breaks follow TorchDynamo's (variables/misc.py, higher_order_ops.py).
#include <functional>

#include "pycache.h"
#include "tracer/tensor_match.h"
#include "translator.h"

namespace dv {

namespace {

// torch.autograd.Function (a strong reference kept for the process), or null.
PyObject* function_class() {
  static PyObject* cls = [] {
    Ref mod = Ref::steal(PyImport_ImportModule("torch.autograd.function"));
    PyObject* c = mod ? PyObject_GetAttrString(mod.get(), "Function") : nullptr;
    PyErr_Clear();
    return c;
  }();
  return cls;
}

// Fn.vjp / Fn.jvp as TorchDynamo compares them with Function's (`Fn.vjp is not Function.vjp`).
bool overrides(PyObject* cls, const char* name) {
  Ref mine = Ref::steal(PyObject_GetAttrString(cls, name));
  Ref base = Ref::steal(PyObject_GetAttrString(function_class(), name));
  PyErr_Clear();
  return mine && base && mine.get() != base.get();
}

// Whether fn (a function, or a method's function) names `name` in its code (co_names: attribute
// reads and calls such as ctx.mark_dirty(...)). Read conservatively: any mention counts.
bool code_names(PyObject* fn, const char* name) {
  if (fn && PyMethod_Check(fn)) fn = PyMethod_GET_FUNCTION(fn);
  if (!fn || !PyFunction_Check(fn)) return false;
  PyObject* names = reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(fn))->co_names;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); ++i)
    if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(names, i), name) == 0) return true;
  return false;
}

// Whether fn's own code may change a list or dict it is given: it names a mutating method
// (append, update, ...) or stores or deletes an item (x[k] = v). Read conservatively.
bool may_mutate_containers(PyObject* fn) {
  if (fn && PyMethod_Check(fn)) fn = PyMethod_GET_FUNCTION(fn);
  if (!fn || !PyFunction_Check(fn)) return true;
  static const char* methods[] = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault",
                                  "popitem", "sort", "reverse", "__setitem__", "__delitem__", "__iadd__"};
  for (const char* m : methods)
    if (code_names(fn, m)) return true;
  static const std::pair<int, int> subscr_ops = [] {  // STORE_SUBSCR, DELETE_SUBSCR of this interpreter
    Ref opcode = Ref::steal(PyImport_ImportModule("opcode"));
    Ref opmap = opcode ? Ref::steal(PyObject_GetAttrString(opcode.get(), "opmap")) : Ref();
    PyObject* st = opmap ? PyDict_GetItemString(opmap.get(), "STORE_SUBSCR") : nullptr;
    PyObject* del = opmap ? PyDict_GetItemString(opmap.get(), "DELETE_SUBSCR") : nullptr;
    PyErr_Clear();
    return std::make_pair(st ? static_cast<int>(PyLong_AsLong(st)) : -1, del ? static_cast<int>(PyLong_AsLong(del)) : -1);
  }();
  Ref code = Ref::steal(PyObject_GetAttrString(PyFunction_GET_CODE(fn), "co_code"));
  if (!code || !PyBytes_Check(code.get()) || subscr_ops.first < 0) return PyErr_Clear(), true;
  const auto* b = reinterpret_cast<const unsigned char*>(PyBytes_AS_STRING(code.get()));
  for (Py_ssize_t i = 0; i + 1 < PyBytes_GET_SIZE(code.get()); i += 2)
    if (b[i] == subscr_ops.first || b[i] == subscr_ops.second) return true;
  return false;
}

}  // namespace

// Function.apply's function (the classmethod's __func__): what Fn.apply is bound to unless Fn
// defines its own apply.
PyObject* autograd_apply_function() {
  static PyObject* fn = [] {
    PyObject* cls = function_class();
    Ref m = cls ? Ref::steal(PyObject_GetAttrString(cls, "apply")) : Ref();
    PyObject* r = m && PyMethod_Check(m.get()) ? Py_NewRef(PyMethod_GET_FUNCTION(m.get())) : nullptr;
    PyErr_Clear();
    return r;
  }();
  return fn;
}

// A subclass of torch.autograd.Function (the class itself, not an instance).
bool is_autograd_function_class(PyObject* o) {
  PyObject* base = function_class();
  if (!o || !base || !PyType_Check(o)) return false;
  const int r = PyObject_IsSubclass(o, base);
  if (r < 0) PyErr_Clear();
  return r == 1;
}

Translator::Status Translator::autograd_function_apply(Frame& f, const VPtr& cls, std::vector<VPtr> args,
                                                       std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out) {
  PyObject* c = cls->obj.get();
  const std::string what = std::string(reinterpret_cast<PyTypeObject*>(c)->tp_name) + ".apply";
  Ref forward = Ref::steal(PyObject_GetAttrString(c, "forward"));
  PyErr_Clear();
  if (!forward || !(PyFunction_Check(forward.get()) || PyMethod_Check(forward.get())))
    return brk(f, "DV0004", what + ": forward is not a Python function or method",
               "TorchDynamo traces autograd.Function subclasses whose forward is a staticmethod or classmethod");
  // Outputs must be tensors the graph computes: an apply over constants alone is not a graph call.
  bool any_tensor = false, needs_grad = false;
  std::vector<PyObject*> seen;
  bool duplicate = false;
  std::function<void(const VPtr&, bool)> visit = [&](const VPtr& v, bool top_level) {
    if (v->kind == VK::Tensor) {
      any_tensor = true;
      Ref rg = Ref::steal(PyObject_GetAttrString(v->obj.get(), "requires_grad"));
      if (!rg || PyObject_IsTrue(rg.get()) != 0) needs_grad = true;  // unknown counts as requiring grad
      PyErr_Clear();
      if (top_level) {
        for (PyObject* s : seen) duplicate |= s == v->obj.get();
        seen.push_back(v->obj.get());
      }
    }
    for (const VPtr& x : v->items) visit(x, false);
  };
  for (const VPtr& a : args) visit(a, true);
  for (auto& kv : kwargs) visit(kv.second, true);
  if (!any_tensor)
    return brk(f, "DV0004", what + " without tensor arguments", "pass the tensors forward works on as arguments of apply");
  Ref grad_on = Ref::steal(PyObject_CallMethod(py().torch.get(), "is_grad_enabled", nullptr));
  if (!grad_on) return PyErr_Clear(), brk(f, "DV0019", "torch.is_grad_enabled() failed");
  if (needs_grad && PyObject_IsTrue(grad_on.get()) == 1) {
    // TorchDynamo traces forward and backward then, and refuses these:
    if (overrides(c, "vjp"))
      return brk(f, "DV0004", what + ": an autograd.Function with a custom vjp", "define backward instead of vjp");
    if (overrides(c, "jvp"))
      return brk(f, "DV0004", what + ": an autograd.Function with a custom jvp (forward-mode AD)",
                 "TorchDynamo does not trace custom jvp; call apply outside the compiled function");
    if (duplicate)
      return brk(f, "DV0004", what + ": the same tensor passed twice", "pass each tensor once (clone one of them)");
  }
  const bool grad_needed = needs_grad && PyObject_IsTrue(grad_on.get()) == 1;
  // TorchDynamo traces ctx.mark_dirty only when it traces backward too (an input requires grad).
  Ref setup = Ref::steal(PyObject_GetAttrString(c, "setup_context"));
  PyErr_Clear();
  if (!grad_needed && (code_names(forward.get(), "mark_dirty") || code_names(setup.get(), "mark_dirty")))
    return brk(f, "DV0004", what + ": forward calls ctx.mark_dirty while no input requires grad",
               "TorchDynamo traces ctx.mark_dirty only when an input requires grad; call apply outside the compiled function");
  // Arguments a graph node cannot take (a list of layers, a list forward appends to, a module, an
  // object), while no input requires grad and no functorch transform is traced around the call:
  // forward inlined (as TorchDynamo does without grad), under no_grad as Function.apply runs it.
  // A list or dict (forward may change it: the graph node would be given a copy) is one of those.
  std::function<bool(const VPtr&)> mutable_container = [&](const VPtr& v) {
    if (v->kind == VK::List || v->kind == VK::Dict) return true;
    if (v->kind == VK::Tuple)
      for (const VPtr& x : v->items)
        if (mutable_container(x)) return true;
    return false;
  };
  bool plain = true, mutable_arg = false;
  for (const VPtr& a : args) {
    ArgTree unused;
    plain &= to_arg(a, unused);
    mutable_arg |= mutable_container(a);
  }
  for (auto& kv : kwargs) {
    ArgTree unused;
    plain &= to_arg(kv.second, unused);
    mutable_arg |= mutable_container(kv.second);
  }
  if ((!plain || mutable_arg) && !grad_needed && functorch_depth() == 0 && !functorch_level_busy())
    return autograd_forward_inlined(f, cls, forward, std::move(args), std::move(kwargs), out);
  if (mutable_arg && may_mutate_containers(forward.get()))
    return brk(f, "DV0013", what + " given a list or dict that forward may change, while an input requires grad",
               "the graph's call is given a copy of it (TorchDynamo refuses side effects in forward too); pass tensors and constants");
  // Example tensors computed in the trace stand for non-leaf tensors when they require grad, as in
  // eager (an in-place forward with ctx.mark_dirty needs that); their copies keep node and device.
  for (VPtr& a : args) {
    if (a->kind != VK::Tensor || a->source) continue;
    Ref rg = Ref::steal(PyObject_GetAttrString(a->obj.get(), "requires_grad"));
    Ref leaf = Ref::steal(PyObject_GetAttrString(a->obj.get(), "is_leaf"));
    PyErr_Clear();
    if (!rg || !leaf || PyObject_IsTrue(rg.get()) != 1 || PyObject_IsTrue(leaf.get()) != 1) continue;
    Ref d = Ref::steal(PyObject_CallMethod(a->obj.get(), "detach", nullptr));
    Ref g = d ? Ref::steal(PyObject_CallMethod(d.get(), "requires_grad_", nullptr)) : Ref();
    Ref non_leaf = g ? Ref::steal(PyObject_CallMethod(g.get(), "clone", nullptr)) : Ref();
    if (!non_leaf) return PyErr_Clear(), brk(f, "DV0006", "could not make a non-leaf example tensor for " + what);
    VPtr copy = std::make_shared<Value>(*a);
    copy->obj = non_leaf;
    a = copy;
  }
  Ref rt = Ref::steal(PyImport_ImportModule("dynview._runtime"));
  Ref target = rt ? Ref::steal(PyObject_CallMethod(rt.get(), "autograd_function_apply", "O", c)) : Ref();
  if (!target) return PyErr_Clear(), brk(f, "DV0019", "dynview._runtime.autograd_function_apply failed for " + what);
  // The example value: apply itself, run on the meta example tensors (graph_call).
  return graph_call(f, target, "", std::move(args), std::move(kwargs), out);
}

// Fn.apply(*args) with no input requiring grad, forward inlined: a FunctionCtx made in the trace
// is its ctx (save_for_backward and the rest keep what they are given, as in eager, where nothing
// reads it back: no backward will run), forward runs under no_grad, and the mode is put back after.
// A Function with its own setup_context: forward(*args) without ctx (setup_context is only for
// backward).
Translator::Status Translator::autograd_forward_inlined(Frame& f, const VPtr& cls, const Ref& forward, std::vector<VPtr> args,
                                                        std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out) {
  PyObject* c = cls->obj.get();
  const std::vector<VPtr> inputs = args;
  VPtr ctx;
  if (!overrides(c, "setup_context")) {
    static PyObject* ctx_class = [] {
      Ref mod = Ref::steal(PyImport_ImportModule("torch.autograd.function"));
      PyObject* k = mod ? PyObject_GetAttrString(mod.get(), "FunctionCtx") : nullptr;  // kept for the process
      PyErr_Clear();
      return k;
    }();
    if (!ctx_class) return brk(f, "DV0019", "torch.autograd.function.FunctionCtx not found");
    VPtr ctx_cls = make(VK::Object);
    ctx_cls->obj = Ref::borrow(ctx_class);
    if (Status s = construct(f, ctx_cls, {}, {}, ctx)) return s;  // (a class of torch's: not constructed by a call)
    // ctx.needs_input_grad: False for each argument (none requires grad)
    Ref flags = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
    for (size_t i = 0; i < args.size(); ++i) PyTuple_SET_ITEM(flags.get(), i, Py_NewRef(Py_False));
    if (Status s = store_attr(f, ctx, "needs_input_grad", constant(flags))) return s;
    args.insert(args.begin(), ctx);
  }
  const bool prev = grad_mode_enabled();
  if (prev)
    if (Status s = set_grad_mode(*this, f, false)) return s;
  VPtr fwd = make(VK::Function);
  fwd->obj = forward;
  if (PyMethod_Check(forward.get())) {  // a classmethod: its function, given the class first
    fwd->obj = Ref::borrow(PyMethod_GET_FUNCTION(forward.get()));
    args.insert(args.begin(), cls);
  }
  Status s = call(f, fwd, std::move(args), std::move(kwargs), out);
  if (s && !s->exc) return s;  // a break: the trace is restarted to stop before this call
  if (prev)
    if (Status r = set_grad_mode(*this, f, true)) return r;
  if (s) return s;
  // An input forward returns as it is comes back as a view of it (Function.apply's view_as), but one
  // that forward marked dirty (ctx.mark_dirty), which is itself.
  std::vector<VPtr> dirty;
  if (ctx) {
    VPtr d;
    if (Status st = getattr(f, ctx, "dirty_tensors", d); !st && d && d->kind == VK::Tuple) dirty = d->items;
  }
  auto is_input = [&](const VPtr& v) {
    for (const VPtr& a : inputs)
      if (a->kind == VK::Tensor && v->kind == VK::Tensor && (a == v || (a->node >= 0 && a->node == v->node))) return true;
    return false;
  };
  auto rewrap = [&](VPtr& v) -> Status {
    if (v->kind != VK::Tensor || !is_input(v)) return std::nullopt;
    for (const VPtr& d : dirty)
      if (d == v || (d->kind == VK::Tensor && d->node >= 0 && d->node == v->node)) return std::nullopt;
    VPtr view_as;
    if (Status st = getattr(f, v, "view_as", view_as)) return st;
    return call(f, view_as, {v}, {}, v);
  };
  if (out->kind == VK::Tuple) {
    VPtr copy = make(VK::Tuple);
    copy->items = out->items;
    for (VPtr& v : copy->items)
      if (Status st = rewrap(v)) return st;
    out = copy;
    return std::nullopt;
  }
  return rewrap(out);
}

}  // namespace dv
