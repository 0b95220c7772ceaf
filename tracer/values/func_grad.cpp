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

using FuncMode = Translator::FuncMode;

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
  PyObject* jacrev = attr_of("torch._functorch.eager_transforms", "jacrev");
  PyObject* lazy = attr_of("torch._functorch.predispatch", "lazy_load_decompositions");
  PyObject* vmap_inc = attr_of("torch._functorch.predispatch", "_vmap_increment_nesting");
  PyObject* vmap_dec = attr_of("torch._functorch.predispatch", "_vmap_decrement_nesting");
  PyObject* add_batch = attr_of("torch._functorch.predispatch", "_add_batch_dim");
  PyObject* remove_batch = attr_of("torch._functorch.predispatch", "_remove_batch_dim");
  // forward mode (jacfwd): the graph's steps, and LibTorch's own calls for the trace-time examples
  PyObject* jvp_inc = attr_of("torch._functorch.predispatch", "_jvp_increment_nesting");
  PyObject* jvp_dec = attr_of("torch._functorch.predispatch", "_jvp_decrement_nesting");
  PyObject* enter_dual = attr_of("torch._functorch.predispatch", "_enter_dual_level");
  PyObject* exit_dual = attr_of("torch._functorch.predispatch", "_exit_dual_level");
  PyObject* make_dual = attr_of("torch._functorch.predispatch", "_make_dual");
  PyObject* unpack_dual = attr_of("torch._functorch.predispatch", "_unpack_dual");
  PyObject* load_decompositions = attr_of("torch.autograd.forward_ad", "_maybe_load_decompositions");
  PyObject* set_fwd = attr_of("torch._C", "_set_fwd_grad_enabled");
  PyObject* is_fwd = attr_of("torch._C", "_is_fwd_grad_enabled");
  PyObject* real_enter_dual = attr_of("torch._C", "_enter_dual_level");
  PyObject* real_exit_dual = attr_of("torch._C", "_exit_dual_level");
  PyObject* real_make_dual = attr_of("torch", "_make_dual");
  PyObject* real_unpack_dual = attr_of("torch", "_unpack_dual");
  bool ok() const {
    return hooks_disable && hooks_enable && hooks_message && inc && dec && wrap && allow_inplace && set_requires_grad &&
           autograd_grad && unwrap && grad && grad_and_value && jacrev && lazy && vmap_inc && vmap_dec && add_batch && remove_batch &&
           jvp_inc && jvp_dec && enter_dual && exit_dual && make_dual && unpack_dual && load_decompositions && set_fwd && is_fwd &&
           real_enter_dual && real_exit_dual && real_make_dual && real_unpack_dual;
  }
};
const Steps& grad_steps() {
  static const Steps* s = new Steps();
  return *s;
}

std::string func_mode_name(FuncMode m) {
  switch (m) {
    case FuncMode::grad: return "torch.func.grad";
    case FuncMode::grad_and_value: return "torch.func.grad_and_value";
    case FuncMode::jacrev: return "torch.func.jacrev";
    case FuncMode::jacfwd: return "torch.func.jacfwd";
  }
  return "torch.func";
}

// functorch's message for saved-tensor hooks inside its transforms (the decorator on grad_and_value_impl)
constexpr const char* kHooksMessage =
    "torch.func.{grad, vjp, jacrev, hessian} don't yet support saved tensor hooks. Please open an issue with your use case.";

// The example of _remove_batch_dim(x, level, n, dim): x's with a dimension of n at dim, made from
// x by unsqueeze/expand so that a tangent it has (forward mode) is kept.
Ref batched_example(PyObject* x, long n, long dim) {
  Ref u = Ref::steal(PyObject_CallMethod(x, "unsqueeze", "l", dim));
  Ref sizes = u ? Ref::steal(PySequence_List(Ref::steal(PyObject_GetAttrString(u.get(), "shape")).get())) : Ref();
  if (!sizes) return Ref();
  PyList_SetItem(sizes.get(), dim, PyLong_FromLong(n));
  Ref e = Ref::steal(PyObject_CallMethod(u.get(), "expand", "O", sizes.get()));
  return e ? Ref::steal(PyObject_CallMethod(e.get(), "contiguous", nullptr)) : Ref();
}

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
  // A new example like ex, a leaf; while a jacfwd is traced (a dual level entered for real) it keeps
  // ex's tangent, as functorch's wrappers keep the dual they wrap. (Only whether an output has a
  // tangent is read off these examples, and a missing one is a break: call_jacfwd.)
  Ref fresh(PyObject* ex) {
    Ref d = Ref::steal(PyObject_CallMethod(ex, "detach", nullptr));
    if (!d || t.jvp_depth() == 0) return d;
    Ref pt = Ref::steal(PyObject_CallFunction(grad_steps().real_unpack_dual, "Oi", ex, 0));
    if (!pt || !PyTuple_Check(pt.get()) || PyTuple_GET_SIZE(pt.get()) != 2) return Ref();
    PyObject* tangent = PyTuple_GET_ITEM(pt.get(), 1);
    if (tangent == Py_None) return d;
    Ref kw = Ref::steal(Py_BuildValue("{s:i}", "level", 0));
    Ref a = Ref::steal(PyTuple_Pack(2, d.get(), tangent));
    return kw && a ? Ref::steal(PyObject_Call(grad_steps().real_make_dual, a.get(), kw.get())) : Ref();
  }
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
    Ref ex = fresh(v->obj.get());
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
    Ref ex = outer_requires_grad ? v->obj : fresh(v->obj.get());
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

// One functorch grad level traced, the part grad_and_value_impl and _vjp_with_argnums share: the
// saved-tensor hooks disabled, _grad_increment_nesting, grad mode on, every tensor argument wrapped,
// the differentiated ones made to require grad; then the function inlined; close() undoes it all in
// the graph. Anything that stops the call after open() must close (an exception) or restart the
// trace (a break: nothing recorded is kept).
struct GradLevel : GradCall {
  GradLevel(Translator& tr, Frame& fr) : GradCall(tr, fr, tr.functorch_depth() + 1) {}
  Ref message, prev_message;
  bool grad_was = true;
  bool single = true;          // argnums is one int
  std::vector<long> which;     // the differentiated arguments' positions
  VPtr diff;                   // a tuple of the differentiated (wrapped) arguments, in argnums' order

  Status open(const std::string& what, PyObject* argnums, const std::vector<VPtr>& args, const KwArgs& kwargs,
              std::vector<VPtr>& wrapped, KwArgs& wrapped_kw) {
    if (t.functorch_level_busy()) return t.brk(f, "DV0004", what + " inside code functorch is transforming");
    const long nargs = static_cast<long>(args.size());  // argnums checked as functorch's _slice_argnums checks them
    single = PyLong_CheckExact(argnums);
    for (Py_ssize_t i = 0; i < (single ? 1 : PyTuple_GET_SIZE(argnums)); ++i) {
      long a = PyLong_AsLong(single ? argnums : PyTuple_GET_ITEM(argnums, i));
      if (a < 0) a += nargs;
      if (a < 0 || a >= nargs || std::find(which.begin(), which.end(), a) != which.end())
        return t.brk(f, "DV0004", what + " with argnums out of range or repeated", "eager raises; check argnums against the arguments given");
      which.push_back(a);
    }
    const Steps& st = grad_steps();
    message = Ref::steal(PyUnicode_FromString(kHooksMessage));
    // the saved-tensor hooks message in force before (an enclosing grad traced here set functorch's)
    prev_message = t.grad_depth() > 0 ? message : Ref::steal(PyObject_CallNoArgs(st.hooks_message));
    if (!prev_message) return PyErr_Clear(), t.brk(f, "DV0004", what + ": the saved-tensor hooks state cannot be read");
    grad_was = grad_mode_enabled();
    node(st.hooks_disable, {arg(message.get())});
    node(st.inc, {});
    if (!grad_was)
      if (Status s = set_grad_mode(t, f, true)) return s;
    auto wrap_leaf = [&](const VPtr& x, VPtr& o) { return wrap(x, o); };
    for (const VPtr& a : args) {
      VPtr w;
      if (!map(a, wrap_leaf, w)) return t.brk(f, "DV0004", why);
      wrapped.push_back(w);
    }
    for (auto& [k, a] : kwargs) {
      VPtr w;
      if (!map(a, wrap_leaf, w)) return t.brk(f, "DV0004", why);
      wrapped_kw.emplace_back(k, w);
    }
    diff = t.make(VK::Tuple);
    for (long a : which) {
      VPtr d;
      if (!map(wrapped[static_cast<size_t>(a)], [&](const VPtr& x, VPtr& o) { return differentiable(x, o); }, d))
        return t.brk(f, "DV0004", why, "eager raises: the arguments differentiated must be tensors or tuples, lists and dicts of them");
      diff->items.push_back(d);
    }
    return std::nullopt;
  }
  // the function inlined one level deeper; an exception leaves through functorch's `with` blocks,
  // closed before it reaches a handler around the call, as in eager (a break needs nothing)
  Status call(const VPtr& fn, std::vector<VPtr> wrapped, KwArgs wrapped_kw, VPtr& res) {
    t.enter_transform(true);
    Status s = t.call(f, fn, std::move(wrapped), std::move(wrapped_kw), res);
    t.exit_transform(true);
    if (s && s->exc)
      if (Status r = close()) return r;
    return s;
  }
  Status close() {
    const Steps& st = grad_steps();
    if (!grad_was)
      if (Status s = set_grad_mode(t, f, false)) return s;
    node(st.dec, {});
    if (prev_message.get() == Py_None) node(st.hooks_enable, {});
    else node(st.hooks_disable, {arg(prev_message.get())});
    return std::nullopt;
  }
};

}  // namespace

Translator::Status Translator::make_func_grad(Frame& f, FuncMode mode, std::vector<VPtr> args, KwArgs kwargs, VPtr& out) {
  // torch.func.grad(func, argnums=0, has_aux=False) / grad_and_value(...) /
  // jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False)
  const std::string what = func_mode_name(mode);
  // jacrev: func, argnums, *, has_aux, chunk_size, _preallocate_and_copy; jacfwd: func, argnums,
  // has_aux, *, randomness; grad / grad_and_value: func, argnums, has_aux
  static const char* const jacrev_names[] = {"func", "argnums", "has_aux", "chunk_size", "_preallocate_and_copy"};
  static const char* const jacfwd_names[] = {"func", "argnums", "has_aux", "randomness", ""};
  const char* const* names = mode == FuncMode::jacfwd ? jacfwd_names : jacrev_names;
  const size_t positional = mode == FuncMode::jacrev ? 2 : 3;
  const size_t known = mode == FuncMode::jacrev ? 5 : mode == FuncMode::jacfwd ? 4 : 3;
  VPtr given[5];
  for (size_t i = 0; i < args.size(); ++i) {
    if (i >= positional) return brk(f, "DV0004", what + " with these arguments", "eager raises");
    given[i] = args[i];
  }
  for (auto& [k, v] : kwargs) {
    auto it = std::find_if(names, names + known, [&](const char* n) { return k == n; });
    if (it == names + known || given[it - names]) return brk(f, "DV0004", what + " with keyword " + k);
    given[it - names] = v;
  }
  if (!given[0]) return brk(f, "DV0004", what + " without a function");
  if (!grad_steps().ok()) return brk(f, "DV0004", what + ": functorch's functions are missing");
  Ref argnums = Ref::steal(PyLong_FromLong(0));
  if (given[1]) {
    auto c = to_python(given[1], false);
    if (!c || !is_argnums(c->get()))
      return PyErr_Clear(), brk(f, "DV0004", what + " with argnums that are not an int or a tuple of ints");
    argnums = *c;
  }
  PyObject* has_aux = Py_False;
  if (given[2]) {
    if (given[2]->kind != VK::Const || !PyBool_Check(given[2]->obj.get()))
      return brk(f, "DV0004", what + " with has_aux that is not a constant bool");
    has_aux = given[2]->obj.get();
  }
  Ref randomness = Ref::steal(PyUnicode_FromString("error"));
  if (mode == FuncMode::jacfwd && given[3]) {
    if (given[3]->kind != VK::Const || !PyUnicode_Check(given[3]->obj.get())) return brk(f, "DV0004", what + " with a randomness that is not a constant str");
    randomness = given[3]->obj;
  } else if (mode == FuncMode::jacrev && ((given[3] && !(given[3]->kind == VK::Const && given[3]->obj.get() == Py_None)) ||
                                          (given[4] && !(given[4]->kind == VK::Const && given[4]->obj.get() == Py_False)))) {
    return brk(f, "DV0004", what + " with a chunk_size or _preallocate_and_copy", "not traced yet: the jacobian is computed eagerly");
  }
  VPtr v = make(VK::FuncGrad);
  v->self = given[0];
  v->obj = Ref::steal(Py_BuildValue("(OOiO)", argnums.get(), has_aux, static_cast<int>(mode), randomness.get()));
  if (!v->obj) return brk(f, "DV0004", what + ": " + repr_of(take_error().get()));
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
  if (Status s = make_func_grad(f, with_value ? FuncMode::grad_and_value : FuncMode::grad, {args[0], args[1], args[2]}, {}, fn)) return s;
  return call_func_grad(f, fn, cargs->items, std::move(kw), out);
}

Translator::Status Translator::call_func_grad(Frame& f, const VPtr& fn, std::vector<VPtr> args, KwArgs kwargs, VPtr& out) {
  PyObject* argnums = PyTuple_GET_ITEM(fn->obj.get(), 0);
  const bool has_aux = PyTuple_GET_ITEM(fn->obj.get(), 1) == Py_True;
  const FuncMode mode = static_cast<FuncMode>(PyLong_AsLong(PyTuple_GET_ITEM(fn->obj.get(), 2)));
  if (mode == FuncMode::jacrev) return call_jacrev(f, fn, std::move(args), std::move(kwargs), out);
  if (mode == FuncMode::jacfwd) return call_jacfwd(f, fn, std::move(args), std::move(kwargs), out);
  const bool with_value = mode == FuncMode::grad_and_value;
  const std::string what = func_mode_name(mode);
  GradLevel c(*this, f);
  std::vector<VPtr> wrapped;
  KwArgs wrapped_kw;
  if (Status s = c.open(what, argnums, args, kwargs, wrapped, wrapped_kw)) return s;
  VPtr res;
  if (Status s = c.call(fn->self, std::move(wrapped), std::move(wrapped_kw), res)) return s;
  const VPtr& diff = c.diff;
  const bool single = c.single;
  auto close = [&] { return c.close(); };
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
  if (Status g = graph_call(f, Ref::borrow(grad_steps().autograd_grad), "", {outs, ins}, {{"create_graph", constant(Ref::borrow(Py_True))}}, grads))
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

// jacrev(func, argnums, has_aux)(*args), as functorch's jacrev runs it and TorchDynamo records it:
// the vjp of func (one grad level, closed), a standard basis of the outputs (new_zeros, diagonal
// fill_, view), the vjp's _autograd_grad vmapped over the basis (one vmap level), and each input's
// stacked rows split per output and viewed as output shape + input shape. The arguments
// differentiated are tensors (not pytrees of them: a break), the outputs tensors or tuples, lists
// and dicts of them; chunk_size was refused when the jacrev was made.
Translator::Status Translator::call_jacrev(Frame& f, const VPtr& fn, std::vector<VPtr> args, KwArgs kwargs, VPtr& out) {
  const std::string what = "torch.func.jacrev";
  PyObject* argnums = PyTuple_GET_ITEM(fn->obj.get(), 0);
  const bool has_aux = PyTuple_GET_ITEM(fn->obj.get(), 1) == Py_True;
  if (!kwargs.empty()) return brk(f, "DV0004", what + " called with keyword arguments", "eager raises: jacrev's function takes positional arguments");
  const Steps& st = grad_steps();
  GradLevel c(*this, f);
  std::vector<VPtr> wrapped;
  KwArgs none;
  if (Status s = c.open(what, argnums, args, kwargs, wrapped, none)) return s;
  for (const VPtr& d : c.diff->items)
    if (d->kind != VK::Tensor) return brk(f, "DV0004", what + " with respect to a " + std::string(vk_name(d->kind)), "differentiate tensors");
  VPtr res;
  if (Status s = c.call(fn->self, std::move(wrapped), {}, res)) return s;
  VPtr output = res, aux, aux_out;
  if (has_aux) {
    if (res->kind != VK::Tuple || res->items.size() != 2)
      return brk(f, "DV0004", what + " with has_aux of a function that does not return a pair (output, aux)", "eager raises");
    output = res->items[0];
    aux = res->items[1];
    bool bad = false;
    if (!c.map(aux, [&](const VPtr& x, VPtr& o) { return x->kind == VK::Tensor ? c.unwrap(x, o) : (bad = true, o = x, true); }, aux_out) || bad)
      return brk(f, "DV0004", what + " with an aux output that is not tensors", "eager raises");
  }
  std::vector<VPtr> flat_out;
  c.flatten(output, flat_out);
  std::vector<long> numels;
  std::vector<Ref> shapes;
  long total = 0;
  for (const VPtr& o : flat_out) {
    if (o->kind != VK::Tensor) return brk(f, "DV0004", what + " of a function returning a " + std::string(vk_name(o->kind)), "eager raises");
    Ref fp = Ref::steal(PyObject_CallMethod(o->obj.get(), "is_floating_point", nullptr));
    Ref n = Ref::steal(PyObject_CallMethod(o->obj.get(), "numel", nullptr));
    Ref shape = Ref::steal(PyObject_GetAttrString(o->obj.get(), "shape"));
    if (!fp || !n || !shape || !PyLong_CheckExact(n.get())) return PyErr_Clear(), brk(f, "DV0004", what + " of an output of symbolic size");
    if (fp.get() != Py_True) {  // functorch's vjp raises, inside its `with` blocks (closed first)
      Ref cx = Ref::steal(PyObject_CallMethod(o->obj.get(), "is_complex", nullptr));
      Ref dtype = Ref::steal(PyObject_GetAttrString(o->obj.get(), "dtype"));
      if (!cx || !dtype) return PyErr_Clear(), brk(f, "DV0004", what + ": no dtype of an output");
      if (cx.get() != Py_True) {
        if (Status s = c.close()) return s;
        return raise_new(f, PyExc_RuntimeError,
                         "vjp(f, ...): All outputs of f must be floating-point or complex Tensors, got Tensor with dtype " + str_of(Ref::steal(PyObject_Str(dtype.get())).get()), what);
      }
    }
    numels.push_back(PyLong_AsLong(n.get()));
    shapes.push_back(Ref::steal(PySequence_Tuple(shape.get())));
    total += numels.back();
  }
  if (flat_out.empty()) return brk(f, "DV0004", what + " of a function with no tensor output", "eager raises");
  std::vector<VPtr> results;
  for (const VPtr& o : flat_out) {
    VPtr r;
    if (!c.unwrap(o, r)) return brk(f, "DV0004", c.why);
    results.push_back(r);
  }
  if (Status s = c.close()) return s;
  auto num = [&](long v) { return constant_steal(PyLong_FromLong(v)); };
  auto method = [&](const VPtr& self, const char* name, std::vector<VPtr> a, KwArgs kw, VPtr& r) {
    a.insert(a.begin(), self);
    return graph_call(f, Ref::borrow(Py_None), name, std::move(a), std::move(kw), r);
  };
  // the standard basis: for output i, rows [start_i, start_i + numel_i) of the identity, shaped
  std::vector<VPtr> chunks, basis;
  for (size_t i = 0; i < results.size(); ++i) {
    VPtr z;
    if (Status s = method(results[i], "new_zeros", {num(total), num(numels[i])}, {}, z)) return s;
    chunks.push_back(z);
  }
  long diag = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    VPtr d, filled;
    if (Status s = method(chunks[i], "diagonal", {num(diag)}, {}, d)) return s;
    if (Status s = method(d, "fill_", {num(1)}, {}, filled)) return s;
    diag -= numels[i];
  }
  for (size_t i = 0; i < chunks.size(); ++i) {
    std::vector<VPtr> dims{num(total)};
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(shapes[i].get()); ++k) dims.push_back(constant(Ref::borrow(PyTuple_GET_ITEM(shapes[i].get(), k))));
    VPtr b;
    if (Status s = method(chunks[i], "view", dims, {}, b)) return s;
    basis.push_back(b);
  }
  // vmap(vjp_fn)(basis): one vmap level over the basis rows
  const int vl = functorch_depth_ + 1;
  Ref level = Ref::steal(PyLong_FromLong(vl)), zero = Ref::steal(PyLong_FromLong(0)), error = Ref::steal(PyUnicode_FromString("error"));
  c.node(st.lazy, {});
  c.node(st.vmap_inc, {c.arg_long(total), c.arg(error.get())});
  VPtr cotangents = make(VK::List), outs = make(VK::List), ins = make(VK::List);
  for (size_t i = 0; i < basis.size(); ++i) {
    Ref ex = Ref::steal(PyObject_CallMethod(flat_out[i]->obj.get(), "new_empty", "(O)", shapes[i].get()));
    if (!ex) return PyErr_Clear(), brk(f, "DV0006", what + ": no example of a basis row");
    const int n = add_graph_call(st.add_batch, {c.arg(basis[i]), c.arg(zero.get()), c.arg(level.get())}, ex);
    cotangents->items.push_back(from_example(f, ex, n, basis[i]->device));
  }
  outs->items = flat_out;
  ins->items = c.diff->items;
  VPtr grads;
  enter_transform(false);
  Status g = graph_call(f, Ref::borrow(st.autograd_grad), "", {outs, ins, cotangents},
                        {{"retain_graph", constant(Ref::borrow(Py_True))}, {"create_graph", constant(Ref::borrow(grad_mode_enabled() ? Py_True : Py_False))}},
                        grads);
  exit_transform(false);
  if (g) return g;
  if (grads->kind != VK::Tuple || grads->items.size() != ins->items.size()) return brk(f, "DV0004", what + ": the vjp's results are not one per input");
  std::vector<VPtr> stacked;  // per input: (total, *input shape)
  for (const VPtr& gi : grads->items) {
    Ref ex = batched_example(gi->obj.get(), total, 0);
    if (!ex) return PyErr_Clear(), brk(f, "DV0006", what + ": no example of a jacobian");
    const int n = add_graph_call(st.remove_batch, {c.arg(gi), c.arg(level.get()), c.arg_long(total), c.arg(zero.get())}, ex);
    stacked.push_back(from_example(f, ex, n, gi->device));
  }
  c.node(st.vmap_dec, {});
  // each input's rows split per output, viewed as output shape + input shape
  std::vector<std::vector<VPtr>> jac(flat_out.size());  // [output][input]
  for (size_t j = 0; j < stacked.size(); ++j) {
    VPtr sizes = make(VK::List);
    for (long n : numels) sizes->items.push_back(num(n));
    VPtr parts;
    if (Status s = method(stacked[j], "split", {sizes}, {{"dim", num(0)}}, parts)) return s;
    if (parts->kind != VK::Tuple || parts->items.size() != flat_out.size()) return brk(f, "DV0004", what + ": the split jacobian has the wrong parts");
    Ref in_shape = Ref::steal(PyObject_GetAttrString(c.diff->items[j]->obj.get(), "shape"));
    for (size_t i = 0; i < flat_out.size(); ++i) {
      Ref full = in_shape ? Ref::steal(PySequence_Concat(shapes[i].get(), Ref::steal(PySequence_Tuple(in_shape.get())).get())) : Ref();
      if (!full) return PyErr_Clear(), brk(f, "DV0006", what + ": no shape of a jacobian");
      VPtr v;
      if (Status s = method(parts->items[i], "view", {constant(full)}, {}, v)) return s;
      jac[i].push_back(v);
    }
  }
  std::vector<VPtr> per_output;
  for (auto& row : jac) {
    if (c.single) {
      per_output.push_back(row[0]);
    } else {
      VPtr tup = make(VK::Tuple);
      tup->items = row;
      per_output.push_back(tup);
    }
  }
  size_t k = 0;
  VPtr output_input = c.unflatten(output, per_output, k);
  if (has_aux) {
    out = make(VK::Tuple);
    out->items = {output_input, aux_out};
  } else {
    out = output_input;
  }
  return std::nullopt;
}

Translator::Status Translator::make_hessian(Frame& f, std::vector<VPtr> args, KwArgs kwargs, VPtr& out) {
  // torch.func.hessian(func, argnums=0) is jacfwd(jacrev(func, argnums), argnums)
  if (args.size() > 2) return brk(f, "DV0004", "torch.func.hessian with these arguments", "eager raises");
  VPtr given[2];
  for (size_t i = 0; i < args.size(); ++i) given[i] = args[i];
  for (auto& [k, v] : kwargs) {
    const int i = k == "func" ? 0 : k == "argnums" ? 1 : -1;
    if (i < 0 || given[i]) return brk(f, "DV0004", "torch.func.hessian with keyword " + k, "eager raises");
    given[i] = v;
  }
  if (!given[0]) return brk(f, "DV0004", "torch.func.hessian without a function", "eager raises");
  std::vector<VPtr> inner{given[0]};
  if (given[1]) inner.push_back(given[1]);
  VPtr rev;
  if (Status s = make_func_grad(f, FuncMode::jacrev, inner, {}, rev)) return s;
  std::vector<VPtr> outer{rev};
  if (given[1]) outer.push_back(given[1]);
  return make_func_grad(f, FuncMode::jacfwd, outer, {}, out);
}

namespace {
void output_graph_exit_dual(Translator& t, PyObject* exit_dual, long level) {  // _exit_dual_level(level=...): keyword-only
  ArgTree lv;
  t.to_arg(t.constant_steal(PyLong_FromLong(level)), lv);
  t.add_graph_call_kw(exit_dual, {}, {{"level", lv}});
}
}  // namespace

// jacfwd(func, argnums, has_aux, randomness)(*args), as functorch's jacfwd runs it and TorchDynamo
// records it: a standard basis of the differentiated inputs, vmapped (one vmap level) through one
// jvp of func (a jvp level: forward grad on, a dual level entered, each input made a dual of its
// basis row, func inlined, each output's tangent unpacked), each output's stacked tangents moved
// to the last dimension, split per input and unflattened to the input's shape. The examples are
// computed under a dual level entered for real while func is traced (meta tensors carry tangents);
// an output the examples give no tangent is a break, never a guess. Inputs differentiated are
// tensors; a jacfwd inside another's function (nested forward mode) breaks.
Translator::Status Translator::call_jacfwd(Frame& f, const VPtr& fn, std::vector<VPtr> args, KwArgs kwargs, VPtr& out) {
  const std::string what = "torch.func.jacfwd";
  PyObject* argnums = PyTuple_GET_ITEM(fn->obj.get(), 0);
  const bool has_aux = PyTuple_GET_ITEM(fn->obj.get(), 1) == Py_True;
  PyObject* randomness = PyTuple_GET_ITEM(fn->obj.get(), 3);
  const Steps& st = grad_steps();
  if (!kwargs.empty()) return brk(f, "DV0004", what + " called with keyword arguments", "eager raises: jacfwd's function takes positional arguments");
  if (jvp_depth_ > 0) return brk(f, "DV0004", what + " inside a function jacfwd is tracing (nested forward mode)", "it runs eagerly");
  if (functorch_level_busy()) return brk(f, "DV0004", what + " inside code functorch is transforming");
  Ref fwd_on = Ref::steal(PyObject_CallNoArgs(st.is_fwd));
  if (!fwd_on || fwd_on.get() != Py_True) return PyErr_Clear(), brk(f, "DV0004", what + " with forward-mode AD disabled");
  // the differentiated inputs, as _slice_argnums takes them
  const long nargs = static_cast<long>(args.size());
  const bool single = PyLong_CheckExact(argnums);
  std::vector<long> which;
  for (Py_ssize_t i = 0; i < (single ? 1 : PyTuple_GET_SIZE(argnums)); ++i) {
    long a = PyLong_AsLong(single ? argnums : PyTuple_GET_ITEM(argnums, i));
    if (a < 0) a += nargs;
    if (a < 0 || a >= nargs || std::find(which.begin(), which.end(), a) != which.end())
      return brk(f, "DV0004", what + " with argnums out of range or repeated", "eager raises");
    which.push_back(a);
  }
  std::vector<VPtr> primals;
  std::vector<long> numels;
  std::vector<Ref> shapes;
  long total = 0;
  for (long a : which) {
    const VPtr& p = args[static_cast<size_t>(a)];
    if (p->kind != VK::Tensor) return brk(f, "DV0004", what + " with respect to a " + std::string(vk_name(p->kind)), "differentiate tensors");
    Ref n = Ref::steal(PyObject_CallMethod(p->obj.get(), "numel", nullptr));
    Ref shape = Ref::steal(PyObject_GetAttrString(p->obj.get(), "shape"));
    if (!n || !shape || !PyLong_CheckExact(n.get())) return PyErr_Clear(), brk(f, "DV0004", what + " of an input of symbolic size");
    primals.push_back(p);
    numels.push_back(PyLong_AsLong(n.get()));
    shapes.push_back(Ref::steal(PySequence_Tuple(shape.get())));
    total += numels.back();
  }
  GradCall c(*this, f, 0);
  auto num = [&](long v) { return constant_steal(PyLong_FromLong(v)); };
  auto method = [&](const VPtr& self, const char* name, std::vector<VPtr> a, KwArgs kw, VPtr& r) {
    a.insert(a.begin(), self);
    return graph_call(f, Ref::borrow(Py_None), name, std::move(a), std::move(kw), r);
  };
  // the standard basis of the inputs
  std::vector<VPtr> chunks, basis;
  for (size_t j = 0; j < primals.size(); ++j) {
    VPtr z;
    if (Status s = method(primals[j], "new_zeros", {num(total), num(numels[j])}, {}, z)) return s;
    chunks.push_back(z);
  }
  long diag = 0;
  for (size_t j = 0; j < chunks.size(); ++j) {
    VPtr d, filled;
    if (Status s = method(chunks[j], "diagonal", {num(diag)}, {}, d)) return s;
    if (Status s = method(d, "fill_", {num(1)}, {}, filled)) return s;
    diag -= numels[j];
  }
  for (size_t j = 0; j < chunks.size(); ++j) {
    std::vector<VPtr> dims{num(total)};
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(shapes[j].get()); ++k) dims.push_back(constant(Ref::borrow(PyTuple_GET_ITEM(shapes[j].get(), k))));
    VPtr b;
    if (Status s = method(chunks[j], "view", dims, {}, b)) return s;
    basis.push_back(b);
  }
  // vmap(push_jvp)(basis)
  const int vl = functorch_depth_ + 1, jl = vl + 1;
  Ref vlevel = Ref::steal(PyLong_FromLong(vl)), zero = Ref::steal(PyLong_FromLong(0));
  c.node(st.lazy, {});
  c.node(st.vmap_inc, {c.arg_long(total), c.arg(randomness)});
  std::vector<VPtr> tangents;
  for (size_t j = 0; j < basis.size(); ++j) {
    Ref ex = Ref::steal(PyObject_CallMethod(primals[j]->obj.get(), "new_empty", "(O)", shapes[j].get()));
    if (!ex) return PyErr_Clear(), brk(f, "DV0006", what + ": no example of a basis row");
    const int n = add_graph_call(st.add_batch, {c.arg(basis[j]), c.arg(zero.get()), c.arg(vlevel.get())}, ex);
    tangents.push_back(from_example(f, ex, n, basis[j]->device));
  }
  // the jvp level (functorch's _jvp_with_argnums)
  c.level = jl;
  c.node(st.jvp_inc, {});
  c.node(st.set_fwd, {c.arg(Py_True)});
  c.node(st.enter_dual, {});
  Ref lv = Ref::steal(PyObject_CallNoArgs(st.real_enter_dual));  // examples carry tangents from here
  if (!lv) return PyErr_Clear(), brk(f, "DV0004", what + ": a dual level cannot be entered");
  const long real_level = PyLong_AsLong(lv.get());
  auto exit_real = [&] {
    Ref kw = Ref::steal(Py_BuildValue("{s:l}", "level", real_level));
    Ref none = Ref::steal(PyTuple_New(0));
    Ref r = kw && none ? Ref::steal(PyObject_Call(st.real_exit_dual, none.get(), kw.get())) : Ref();
    if (!r) PyErr_Clear();
  };
  // From here every way out exits the real dual level first.
  Status s = [&]() -> Status {
    c.node(st.load_decompositions, {});
    std::vector<VPtr> duals;
    for (size_t j = 0; j < primals.size(); ++j) {
      VPtr d;
      if (Status e = graph_call(f, Ref::borrow(st.make_dual), "", {primals[j], tangents[j]}, {{"level", num(0)}}, d)) return e;
      duals.push_back(d);
    }
    std::vector<VPtr> wrapped;  // every tensor argument wrapped at the jvp level, the differentiated ones replaced by their duals
    for (const VPtr& a : args) {
      VPtr w;
      if (!c.map(a, [&](const VPtr& x, VPtr& o) { return c.wrap(x, o); }, w)) return brk(f, "DV0004", c.why);
      wrapped.push_back(w);
    }
    for (size_t j = 0; j < which.size(); ++j) wrapped[static_cast<size_t>(which[j])] = duals[j];
    VPtr res;
    functorch_depth_ += 2;  // the vmap level and the jvp level
    ++jvp_depth_;
    Status r = call(f, fn->self, std::move(wrapped), {}, res);
    --jvp_depth_;
    functorch_depth_ -= 2;
    if (r) return r->exc ? brk(f, "DV0004", what + ": the function raised", "it runs eagerly") : r;
    VPtr output = res, aux, aux_out;
    if (has_aux) {
      if (res->kind != VK::Tuple || res->items.size() != 2)
        return brk(f, "DV0004", what + " with has_aux of a function that does not return a pair (output, aux)", "eager raises");
      output = res->items[0];
      aux = res->items[1];
      bool bad = false;
      if (!c.map(aux, [&](const VPtr& x, VPtr& o) { return x->kind == VK::Tensor ? c.unwrap(x, o) : (bad = true, o = x, true); }, aux_out) || bad)
        return brk(f, "DV0004", what + " with an aux output that is not tensors", "eager raises");
    }
    std::vector<VPtr> flat_out;
    c.flatten(output, flat_out);
    if (flat_out.empty()) return brk(f, "DV0004", what + " of a function with no tensor output", "eager raises");
    std::vector<VPtr> tangents_out;
    for (const VPtr& o : flat_out) {
      if (o->kind != VK::Tensor) return brk(f, "DV0004", what + " of a function returning a " + std::string(vk_name(o->kind)), "eager raises");
      VPtr pt;
      if (Status e = graph_call(f, Ref::borrow(st.unpack_dual), "", {o}, {{"level", num(0)}}, pt)) return e;
      if (pt->kind != VK::Tuple || pt->items.size() != 2 || pt->items[1]->kind != VK::Tensor)
        return brk(f, "DV0004", what + ": an output whose tangent the trace cannot tell (a constant output, or one computed where tangents are not traced)",
                   "it runs eagerly");
      VPtr primal_u, tangent_u;
      if (!c.unwrap(pt->items[0], primal_u) || !c.unwrap(pt->items[1], tangent_u)) return brk(f, "DV0004", c.why);
      tangents_out.push_back(tangent_u);
    }
    output_graph_exit_dual(*this, st.exit_dual, real_level);
    // leave the jvp level, then the vmap level
    c.node(st.set_fwd, {c.arg(Py_True)});
    c.node(st.jvp_dec, {});
    std::vector<VPtr> stacked;
    for (const VPtr& tg : tangents_out) {
      Ref ex = batched_example(tg->obj.get(), total, 0);
      if (!ex) return PyErr_Clear(), brk(f, "DV0006", what + ": no example of a jacobian");
      const int n = add_graph_call(st.remove_batch, {c.arg(tg), c.arg(vlevel.get()), c.arg_long(total), c.arg(zero.get())}, ex);
      stacked.push_back(from_example(f, ex, n, tg->device));
    }
    VPtr aux_final;
    if (has_aux) {  // vmap batches the aux too; functorch keeps its first row
      bool ok = true;
      auto first_row = [&](const VPtr& x, VPtr& o) -> bool {
        Ref ex = batched_example(x->obj.get(), total, 0);
        if (!ex) return ok = false;
        const int n = add_graph_call(st.remove_batch, {c.arg(x), c.arg(vlevel.get()), c.arg_long(total), c.arg(zero.get())}, ex);
        VPtr b = from_example(f, ex, n, x->device);
        VPtr idx = num(0);
        return !graph_call(f, Ref::borrow(py().getitem.get()), "", {b, idx}, {}, o);
      };
      if (!c.map(aux_out, first_row, aux_final) || !ok) return brk(f, "DV0004", what + ": the aux output cannot be traced");
    }
    c.node(st.vmap_dec, {});
    // per output: tangents moved last, split per input, unflattened to each input's shape
    std::vector<VPtr> per_output;
    for (size_t i = 0; i < stacked.size(); ++i) {
      VPtr moved, parts;
      if (Status e = method(stacked[i], "movedim", {num(0), num(-1)}, {}, moved)) return e;
      VPtr sizes = make(VK::List);
      for (long n : numels) sizes->items.push_back(num(n));
      if (Status e = method(moved, "split", {sizes}, {{"dim", num(-1)}}, parts)) return e;
      if (parts->kind != VK::Tuple || parts->items.size() != primals.size()) return brk(f, "DV0004", what + ": the split jacobian has the wrong parts");
      VPtr row = make(VK::Tuple);
      for (size_t j = 0; j < primals.size(); ++j) {
        VPtr v;
        if (PyTuple_GET_SIZE(shapes[j].get()) == 0) {
          if (Status e = method(parts->items[j], "squeeze", {num(-1)}, {}, v)) return e;
        } else if (Status e = method(parts->items[j], "unflatten", {num(-1), constant(shapes[j])}, {}, v)) {
          return e;
        }
        row->items.push_back(v);
      }
      per_output.push_back(single ? row->items[0] : row);
    }
    size_t k = 0;
    VPtr output_input = c.unflatten(output, per_output, k);
    if (has_aux) {
      out = make(VK::Tuple);
      out->items = {output_input, aux_final};
    } else {
      out = output_input;
    }
    return std::nullopt;
  }();
  exit_real();
  return s;
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
    out += func_mode_name(static_cast<FuncMode>(PyLong_AsLong(PyTuple_GET_ITEM(v.obj.get(), 2)))) + "(";
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
    // (jacrev's has_aux is keyword-only: one with has_aux is not rebuilt)
    const FuncMode mode = static_cast<FuncMode>(PyLong_AsLong(PyTuple_GET_ITEM(v->obj.get(), 2)));
    if ((mode == FuncMode::jacrev && PyTuple_GET_ITEM(v->obj.get(), 1) == Py_True) || mode == FuncMode::jacfwd) return false;  // (jacfwd: not rebuilt)
    PyObject* maker = mode == FuncMode::grad ? grad_steps().grad : mode == FuncMode::grad_and_value ? grad_steps().grad_and_value : grad_steps().jacrev;
    if (!maker) return false;
    r.e.callable_const(maker);
    if (!r.value(v->self)) return false;
    const int n = mode == FuncMode::jacrev ? 1 : 2;
    for (int i = 0; i < n; ++i) r.e.emit(N::LOAD_CONST, r.e.konst(PyTuple_GET_ITEM(v->obj.get(), i)));
    r.e.call(n + 1);
    return r.remember(v);
  }
};
DV_KIND(FuncGrad, "torch.func.grad function")

}  // namespace dv
