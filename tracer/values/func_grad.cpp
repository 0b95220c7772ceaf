// torch.func.grad(fn, argnums, has_aux) and grad_and_value(...) made in the trace (VK::FuncGrad), as
// TorchDynamo traces them: calling one records functorch's own steps into the graph around the
// inlined function, the steps of functorch's grad_and_value_impl --
//   _saved_tensors_hooks_disable(msg), _grad_increment_nesting(), _wrap_for_grad(x, level) of every
//   tensor argument, requires_grad_() of the differentiated ones (set_inplace_requires_grad_allowed
//   around _set_tensor_requires_grad), the function's operators, _autograd_grad((out,), diff_args,
//   create_graph=True), _unwrap_for_grad of the gradients, the output and the aux tensors,
//   _grad_decrement_nesting(), and the saved-tensor hooks put back --
// with grad mode on around them (torch.enable_grad() in functorch: a _set_grad_enabled pair when
// the caller's mode is off). Nothing of functorch runs while tracing: a wrapped input is a fresh meta
// example, the differentiated ones requiring grad, and the gradients' examples come from autograd
// run over the meta examples. The graph does the transform when it runs. self = the function; obj =
// (argnums, has_aux, with_value), Python constants. What eager refuses (an output that is not a 0-d
// tensor, a differentiated argument that is not a pytree of tensors) is a break: eager raises it.
#include <functional>

#include "tracer/pycache.h"
#include "tracer/rebuild.h"
#include "tracer/tensor_match.h"
#include "tracer/translator.h"
#include "tracer/values/kind.h"

namespace dv {

using cg::N;

namespace {

PyObject* attr_of(const char* module, const char* name) {  // module.name, kept for the process (or null)
  Ref m = Ref::steal(PyImport_ImportModule(module));
  PyObject* fn = m ? PyObject_GetAttrString(m.get(), name) : nullptr;  // kept
  if (!fn) PyErr_Clear();
  return fn;
}

struct Steps {  // the functions the graph calls, looked up once
  PyObject* hooks_disable = attr_of("torch._C._autograd", "_saved_tensors_hooks_disable");
  PyObject* hooks_enable = attr_of("torch._C._autograd", "_saved_tensors_hooks_enable");
  PyObject* hooks_message = attr_of("torch._C._autograd", "_saved_tensors_hooks_get_disabled_error_message");
  PyObject* inc = attr_of("torch._C._functorch", "_grad_increment_nesting");
  PyObject* dec = attr_of("torch._C._functorch", "_grad_decrement_nesting");
  PyObject* wrap = attr_of("torch._C._functorch", "_wrap_for_grad");
  PyObject* allow_inplace = attr_of("torch._C._functorch", "set_inplace_requires_grad_allowed");
  PyObject* set_requires_grad = attr_of("torch._functorch.eager_transforms", "_set_tensor_requires_grad");
  PyObject* autograd_grad = attr_of("torch._functorch.eager_transforms", "_autograd_grad");
  PyObject* unwrap = attr_of("torch._functorch.predispatch", "_unwrap_for_grad");
  PyObject* grad = attr_of("torch._functorch.apis", "grad");
  PyObject* grad_and_value = attr_of("torch._functorch.apis", "grad_and_value");
  bool ok() const {
    return hooks_disable && hooks_enable && hooks_message && inc && dec && wrap && allow_inplace && set_requires_grad &&
           autograd_grad && unwrap && grad && grad_and_value;
  }
};
const Steps& grad_steps() {
  static const Steps* s = new Steps();
  return *s;
}

// functorch's message for saved-tensor hooks inside its transforms (the decorator on grad_and_value_impl)
constexpr const char* kHooksMessage =
    "torch.func.{grad, vjp, jacrev, hessian} don't yet support saved tensor hooks. Please open an issue with your use case.";

bool is_argnums(PyObject* o) {  // an int, or a non-empty tuple of ints
  if (PyLong_CheckExact(o)) return true;
  if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) == 0) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); ++i)
    if (!PyLong_CheckExact(PyTuple_GET_ITEM(o, i))) return false;
  return true;
}

struct GradCall {
  GradCall(Translator& tr, Frame& fr, int lv) : t(tr), f(fr), level(lv) {}
  Translator& t;
  Frame& f;
  int level;
  std::string why;               // set: the call breaks with this reason
  bool outer_requires_grad = false;  // a tensor argument requires grad outside the transform

  void node(PyObject* target, std::vector<ArgTree> args) { t.add_graph_call(target, std::move(args), Ref::borrow(Py_None)); }
  ArgTree arg(const VPtr& v) {
    ArgTree a;
    t.to_arg(v, a);
    return a;
  }
  ArgTree arg(PyObject* constant) { return arg(t.constant(Ref::borrow(constant))); }
  ArgTree arg_long(long v) { return arg(t.constant_steal(PyLong_FromLong(v))); }

  // functorch's pytree of an argument: tuples, lists and dicts (plain ones) are rebuilt, anything else
  // is a leaf. `fn` maps a leaf.
  bool map(const VPtr& v, const std::function<bool(const VPtr&, VPtr&)>& fn, VPtr& out) {
    if ((v->kind == VK::Dict || v->kind == VK::Tuple || v->kind == VK::List) && v->lazy) {
      const bool ok = t.builder.realize(v, f);
      if (!ok) return why = std::string("torch.func.grad of a ") + vk_name(v->kind) + " argument that cannot be traced", false;
    }
    if (v->kind == VK::Dict && v->obj)  // an OrderedDict or defaultdict: its kind is not rebuilt
      return why = "torch.func.grad of an OrderedDict or defaultdict argument", false;
    if (v->kind == VK::Tuple || v->kind == VK::List || v->kind == VK::Dict) {
      out = t.make(v->kind);
      out->keys = v->keys;
      for (const VPtr& x : v->items) {
        VPtr y;
        if (!map(x, fn, y)) return false;
        out->items.push_back(y);
      }
      return true;
    }
    return fn(v, out);
  }

  // _wrap_for_grad(x, level): a fresh example of x's sizes, strides and dtype (not requiring grad,
  // as a tensor new to the level)
  bool wrap(const VPtr& v, VPtr& out) {
    if (v->kind != VK::Tensor) return out = v, true;
    Ref req = Ref::steal(PyObject_GetAttrString(v->obj.get(), "requires_grad"));
    outer_requires_grad |= req && req.get() == Py_True;
    Ref ex = Ref::steal(PyObject_CallMethod(v->obj.get(), "detach", nullptr));
    if (!ex) return PyErr_Clear(), why = "torch.func.grad: no example of an argument", false;
    const int n = t.add_graph_call(grad_steps().wrap, {arg(v), arg_long(level)}, ex);
    out = t.from_example(f, ex, n, v->device);
    return true;
  }
  // requires_grad_() of a differentiated input, in the graph and on its example
  bool differentiable(const VPtr& v, VPtr& out) {
    if (v->kind != VK::Tensor) return why = std::string("torch.func.grad with respect to a ") + vk_name(v->kind), false;
    node(grad_steps().allow_inplace, {arg(Py_True)});
    node(grad_steps().set_requires_grad, {arg(v)});
    node(grad_steps().allow_inplace, {arg(Py_False)});
    Ref r = Ref::steal(PyObject_CallMethod(v->obj.get(), "requires_grad_", nullptr));
    if (!r) return PyErr_Clear(), why = "torch.func.grad: requires_grad_() of an argument's example failed", false;
    out = v;
    return true;
  }
  // _unwrap_for_grad(x, level): x's example, detached unless a tensor argument requires grad outside
  bool unwrap(const VPtr& v, VPtr& out) {
    if (v->kind != VK::Tensor) return out = v, true;
    Ref ex = outer_requires_grad ? v->obj : Ref::steal(PyObject_CallMethod(v->obj.get(), "detach", nullptr));
    if (!ex) return PyErr_Clear(), why = "torch.func.grad: no example of an output", false;
    const int n = t.add_graph_call(grad_steps().unwrap, {arg(v), arg_long(level)}, ex);
    out = t.from_example(f, ex, n, v->device);
    return true;
  }
  void flatten(const VPtr& v, std::vector<VPtr>& leaves) {
    if (v->kind == VK::Tuple || v->kind == VK::List || v->kind == VK::Dict) {
      for (const VPtr& x : v->items) flatten(x, leaves);
      return;
    }
    leaves.push_back(v);
  }
  VPtr unflatten(const VPtr& like, const std::vector<VPtr>& leaves, size_t& k) {
    if (like->kind == VK::Tuple || like->kind == VK::List || like->kind == VK::Dict) {
      VPtr c = t.make(like->kind);
      c->keys = like->keys;
      for (const VPtr& x : like->items) c->items.push_back(unflatten(x, leaves, k));
      return c;
    }
    return leaves[k++];
  }
};

}  // namespace

Translator::Status Translator::make_func_grad(Frame& f, bool with_value, std::vector<VPtr> args, KwArgs kwargs, VPtr& out) {
  // torch.func.grad(func, argnums=0, has_aux=False) / grad_and_value(...)
  const char* what = with_value ? "torch.func.grad_and_value" : "torch.func.grad";
  static const char* const names[] = {"func", "argnums", "has_aux"};
  VPtr given[3];
  for (size_t i = 0; i < args.size(); ++i) {
    if (i >= 3) return brk(f, "DV0004", std::string(what) + " with these arguments");
    given[i] = args[i];
  }
  for (auto& [k, v] : kwargs) {
    auto it = std::find_if(std::begin(names), std::end(names), [&](const char* n) { return k == n; });
    if (it == std::end(names) || given[it - std::begin(names)]) return brk(f, "DV0004", std::string(what) + " with keyword " + k);
    given[it - std::begin(names)] = v;
  }
  if (!given[0]) return brk(f, "DV0004", std::string(what) + " without a function");
  if (!grad_steps().ok()) return brk(f, "DV0004", std::string(what) + ": functorch's functions are missing");
  Ref argnums = Ref::steal(PyLong_FromLong(0));
  if (given[1]) {
    auto c = to_python(given[1], false);
    if (!c || !is_argnums(c->get()))
      return PyErr_Clear(), brk(f, "DV0004", std::string(what) + " with argnums that are not an int or a tuple of ints");
    argnums = *c;
  }
  PyObject* has_aux = Py_False;
  if (given[2]) {
    if (given[2]->kind != VK::Const || !PyBool_Check(given[2]->obj.get()))
      return brk(f, "DV0004", std::string(what) + " with has_aux that is not a constant bool");
    has_aux = given[2]->obj.get();
  }
  VPtr v = make(VK::FuncGrad);
  v->self = given[0];
  v->obj = Ref::steal(PyTuple_Pack(3, argnums.get(), has_aux, with_value ? Py_True : Py_False));
  if (!v->obj) return brk(f, "DV0004", std::string(what) + ": " + repr_of(take_error().get()));
  out = v;
  return std::nullopt;
}

Translator::Status Translator::func_grad_impl(Frame& f, bool with_value, std::vector<VPtr> args, KwArgs kwargs, VPtr& out) {
  const char* what = with_value ? "grad_and_value_impl" : "grad_impl";
  if (args.size() != 5 || !kwargs.empty()) return brk(f, "DV0004", std::string("functorch's ") + what + " with these arguments");
  const VPtr& cargs = args[3];
  const VPtr& ckw = args[4];
  if (cargs->kind != VK::Tuple || (cargs->lazy && !builder.realize(cargs, f)) || ckw->kind != VK::Dict || (ckw->lazy && !builder.realize(ckw, f)))
    return brk(f, "DV0004", std::string("functorch's ") + what + " with arguments that are not a tuple and a dict");
  KwArgs kw;
  for (size_t i = 0; i < ckw->keys.size(); ++i) {
    if (!PyUnicode_Check(ckw->keys[i].get())) return brk(f, "DV0004", std::string("functorch's ") + what + " with a keyword that is not a str");
    kw.emplace_back(str_of(ckw->keys[i].get()), ckw->items[i]);
  }
  VPtr fn;
  if (Status s = make_func_grad(f, with_value, {args[0], args[1], args[2]}, {}, fn)) return s;
  return call_func_grad(f, fn, cargs->items, std::move(kw), out);
}

Translator::Status Translator::call_func_grad(Frame& f, const VPtr& fn, std::vector<VPtr> args, KwArgs kwargs, VPtr& out) {
  PyObject* argnums = PyTuple_GET_ITEM(fn->obj.get(), 0);
  const bool has_aux = PyTuple_GET_ITEM(fn->obj.get(), 1) == Py_True;
  const bool with_value = PyTuple_GET_ITEM(fn->obj.get(), 2) == Py_True;
  const std::string what = with_value ? "torch.func.grad_and_value" : "torch.func.grad";
  if (functorch_level_busy()) return brk(f, "DV0004", what + " inside code functorch is transforming");
  // the differentiated arguments: argnums checked as functorch's _slice_argnums checks them
  const long nargs = static_cast<long>(args.size());
  std::vector<long> which;
  const bool single = PyLong_CheckExact(argnums);
  for (Py_ssize_t i = 0; i < (single ? 1 : PyTuple_GET_SIZE(argnums)); ++i) {
    long a = PyLong_AsLong(single ? argnums : PyTuple_GET_ITEM(argnums, i));
    if (a < 0) a += nargs;
    if (a < 0 || a >= nargs || std::find(which.begin(), which.end(), a) != which.end())
      return brk(f, "DV0004", what + " with argnums out of range or repeated", "eager raises; check argnums against the arguments given");
    which.push_back(a);
  }
  GradCall c(*this, f, functorch_depth_ + 1);
  const Steps& st = grad_steps();
  Ref message = Ref::steal(PyUnicode_FromString(kHooksMessage));
  // the saved-tensor hooks message in force before (an enclosing grad traced here set functorch's)
  Ref prev_message = grad_depth_ > 0 ? message : Ref::steal(PyObject_CallNoArgs(st.hooks_message));
  if (!prev_message) return PyErr_Clear(), brk(f, "DV0004", what + ": the saved-tensor hooks state cannot be read");
  const bool grad_was = grad_mode_enabled();
  // From here the graph has the transform's nodes: anything that stops the call must close them
  // (an exception) or restart the trace (a break: nothing recorded is kept).
  c.node(st.hooks_disable, {c.arg(message.get())});
  c.node(st.inc, {});
  if (!grad_was)
    if (Status s = set_grad_mode(*this, f, true)) return s;
  auto close = [&]() -> Status {
    if (!grad_was)
      if (Status s = set_grad_mode(*this, f, false)) return s;
    c.node(st.dec, {});
    if (prev_message.get() == Py_None) c.node(st.hooks_enable, {});
    else c.node(st.hooks_disable, {c.arg(prev_message.get())});
    return std::nullopt;
  };
  std::vector<VPtr> wrapped;
  for (const VPtr& a : args) {
    VPtr w;
    if (!c.map(a, [&](const VPtr& x, VPtr& o) { return c.wrap(x, o); }, w)) return brk(f, "DV0004", c.why);
    wrapped.push_back(w);
  }
  KwArgs wrapped_kw;
  for (auto& [k, a] : kwargs) {
    VPtr w;
    if (!c.map(a, [&](const VPtr& x, VPtr& o) { return c.wrap(x, o); }, w)) return brk(f, "DV0004", c.why);
    wrapped_kw.emplace_back(k, w);
  }
  VPtr diff = make(VK::Tuple);  // the differentiated arguments: one, or a tuple of them
  for (long a : which) {
    VPtr d;
    if (!c.map(wrapped[static_cast<size_t>(a)], [&](const VPtr& x, VPtr& o) { return c.differentiable(x, o); }, d))
      return brk(f, "DV0004", c.why, "eager raises: the arguments differentiated must be tensors or tuples, lists and dicts of them");
    diff->items.push_back(d);
  }
  ++functorch_depth_;
  ++grad_depth_;
  VPtr res;
  Status s = call(f, fn->self, std::move(wrapped), std::move(wrapped_kw), res);
  --grad_depth_;
  --functorch_depth_;
  if (s) {
    // An exception leaves through functorch's `with` blocks: the level is closed and the modes put
    // back before it reaches a handler around the call, as in eager. A break needs nothing.
    if (s->exc)
      if (Status r = close()) return r;
    return s;
  }
  // What functorch checks of the result, raised as it raises them (after leaving its `with` blocks)
  auto type_name = [&](const VPtr& v) {
    PyObject* tp = ops(v->kind).python_type(*this, v);
    return tp ? repr_of(tp) : std::string("<unknown>");
  };
  auto plain = [](const VPtr& v) {  // a value whose type the trace knows to be no tensor and no tuple subclass
    return v->kind == VK::Const || v->kind == VK::Sym || v->kind == VK::List || v->kind == VK::Dict || v->kind == VK::Tuple;
  };
  std::string raised;
  VPtr output = res, aux;
  if (has_aux) {
    if (res->kind == VK::Tuple && res->items.size() == 2) {
      output = res->items[0];
      aux = res->items[1];
    } else if (plain(res) || res->kind == VK::Tensor) {
      raised = "grad_and_value(f)(*args): output of function f should be a tuple: (output, aux) if has_aux is True";
    } else {
      return brk(f, "DV0004", what + " with has_aux of a function returning a " + std::string(vk_name(res->kind)));
    }
  }
  if (raised.empty() && output->kind != VK::Tensor) {
    if (!plain(output)) return brk(f, "DV0004", what + " of a function returning a " + std::string(vk_name(output->kind)));
    raised = "grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got " + type_name(output);
  }
  if (raised.empty()) {
    Ref dim = Ref::steal(PyObject_CallMethod(output->obj.get(), "dim", nullptr));
    if (!dim) return PyErr_Clear(), brk(f, "DV0004", what + ": no dim() of the output's example");
    if (PyLong_AsLong(dim.get()) != 0)
      raised = "grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got tensor with " +
               std::to_string(PyLong_AsLong(dim.get())) + " dims. Maybe you wanted to use the vjp or jacrev APIs instead?";
  }
  if (!raised.empty()) {
    if (Status r = close()) return r;
    return raise_new(f, PyExc_RuntimeError, raised, what);
  }
  std::vector<VPtr> flat;
  for (const VPtr& d : diff->items) c.flatten(d, flat);
  VPtr outs = make(VK::Tuple), ins = make(VK::List);
  outs->items.push_back(output);
  ins->items = flat;
  VPtr grads;
  if (Status g = graph_call(f, Ref::borrow(st.autograd_grad), "", {outs, ins}, {{"create_graph", constant(Ref::borrow(Py_True))}}, grads))
    return g;
  if (grads->kind != VK::Tuple || grads->items.size() != flat.size())
    return brk(f, "DV0004", what + ": the gradients are not one per input");
  size_t k = 0;
  VPtr grad_input = c.unflatten(single ? diff->items[0] : diff, grads->items, k);
  VPtr g_out, o_out, a_out;
  auto unwrap = [&](const VPtr& x, VPtr& o) { return c.unwrap(x, o); };
  if (!c.map(grad_input, unwrap, g_out) || !c.map(output, unwrap, o_out)) return brk(f, "DV0004", c.why);
  if (aux) {  // functorch unwraps the aux pytree's tensors and raises on any other leaf (None too)
    bool bad = false;
    std::string bad_type;
    auto unwrap_aux = [&](const VPtr& x, VPtr& o) {
      if (x->kind == VK::Tensor) return c.unwrap(x, o);
      if (x->kind != VK::Const && x->kind != VK::Sym) return c.why = what + " with an aux output holding a " + vk_name(x->kind), false;
      if (!bad) bad_type = type_name(x);
      bad = true;
      return o = x, true;
    };
    if (!c.map(aux, unwrap_aux, a_out)) return brk(f, "DV0004", c.why);
    if (bad) {
      if (Status r = close()) return r;
      return raise_new(f, PyExc_RuntimeError, "Expected tensors, got unsupported type " + bad_type, what);
    }
  }
  if (Status r = close()) return r;
  VPtr value = o_out;
  if (has_aux) {
    value = make(VK::Tuple);
    value->items = {o_out, a_out};
  }
  if (with_value) {  // (grads, output) or (grads, (output, aux))
    out = make(VK::Tuple);
    out->items = {g_out, value};
  } else if (has_aux) {  // (grads, aux)
    out = make(VK::Tuple);
    out->items = {g_out, a_out};
  } else {
    out = g_out;
  }
  return std::nullopt;
}

bool Translator::functorch_level_busy() {
  // A frame compiled while functorch is already transforming it is left to eager (eval_frame.cpp);
  // this is a transform reached while nothing of functorch is active for real.
  static PyObject* current_level = attr_of("torch._C._functorch", "maybe_current_level");
  Ref cur = current_level ? Ref::steal(PyObject_CallNoArgs(current_level)) : Ref();
  if (!cur) PyErr_Clear();
  return !cur || cur.get() != Py_None;
}

// ---- the protocol (kind.h) ----

template <>
struct Kind<VK::FuncGrad> {
  static void describe(const Value& v, std::string& out, int depth) {
    out += PyTuple_GET_ITEM(v.obj.get(), 2) == Py_True ? "torch.func.grad_and_value(" : "torch.func.grad(";
    if (v.self) describe_into(*v.self, out, depth + 1);
    out += ", argnums=" + repr_of(PyTuple_GET_ITEM(v.obj.get(), 0)) + ", has_aux=" + repr_of(PyTuple_GET_ITEM(v.obj.get(), 1)) + ")";
  }
  static PyObject* python_type(Translator& /*t*/, const VPtr& /*v*/) {
    return reinterpret_cast<PyObject*>(&PyFunction_Type);  // grad returns a Python function (functools.wraps)
  }
  static constexpr auto as_python = no_answer::as_python;
  static constexpr auto graph_arg = no_answer::graph_arg;
  static constexpr auto truth = always_true;
  static constexpr auto iterate = no_answer::iterate;
  static constexpr auto getattr = no_answer::getattr;
  static Status call(Translator& t, Frame& f, const VPtr& fn, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
    return t.call_func_grad(f, fn, std::move(args), std::move(kwargs), out);
  }
  static constexpr auto setattr = no_answer::setattr;
  static constexpr auto call_method = no_answer::call_method;
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    // torch.func.grad(func, argnums, has_aux) / grad_and_value(...)
    PyObject* maker = PyTuple_GET_ITEM(v->obj.get(), 2) == Py_True ? grad_steps().grad_and_value : grad_steps().grad;
    if (!maker) return false;
    r.e.callable_const(maker);
    if (!r.value(v->self)) return false;
    for (int i = 0; i < 2; ++i) r.e.emit(N::LOAD_CONST, r.e.konst(PyTuple_GET_ITEM(v->obj.get(), i)));
    r.e.call(3);
    return r.remember(v);
  }
};
DV_KIND(FuncGrad, "torch.func.grad function")

}  // namespace dv
