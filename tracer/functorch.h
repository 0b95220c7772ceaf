// What tracing torch.func's transforms shares (tracer/values/func_grad.cpp: grad, grad_and_value,
// the FuncGrad kind; tracer/jacobians.cpp: jacrev, jacfwd, hessian): the functorch functions the
// graph calls, and one grad level traced (GradCall, GradLevel) -- functorch's own steps recorded
// around the inlined function, as TorchDynamo records them.
#pragma once
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "tracer/pycache.h"
#include "tracer/tensor_match.h"
#include "tracer/translator.h"
#include "tracer/values/kind.h"

namespace dv::functorch {

inline PyObject* attr_of(const char* module, const char* name) { return kept_attr(module, name); }

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
  // jacrev's chunks (chunk_size): one row squeezed and its result unsqueezed; chunks concatenated
  PyObject* squeeze = attr_of("torch", "squeeze");
  PyObject* unsqueeze = attr_of("torch", "unsqueeze");
  PyObject* cat = attr_of("torch", "cat");
  bool ok() const {
    return hooks_disable && hooks_enable && hooks_message && inc && dec && wrap && allow_inplace && set_requires_grad &&
           autograd_grad && unwrap && grad && grad_and_value && jacrev && lazy && vmap_inc && vmap_dec && add_batch && remove_batch &&
           jvp_inc && jvp_dec && enter_dual && exit_dual && make_dual && unpack_dual && load_decompositions && set_fwd && is_fwd &&
           real_enter_dual && real_exit_dual && real_make_dual && real_unpack_dual && squeeze && unsqueeze && cat;
  }
};
inline const Steps& grad_steps() {
  static const Steps* s = new Steps();
  return *s;
}

inline std::string func_mode_name(Translator::FuncMode m) {
  using FuncMode = Translator::FuncMode;
  switch (m) {
    case FuncMode::grad: return "torch.func.grad";
    case FuncMode::grad_and_value: return "torch.func.grad_and_value";
    case FuncMode::jacrev: return "torch.func.jacrev";
    case FuncMode::jacfwd: return "torch.func.jacfwd";
    case FuncMode::vjp_fn: return "torch.func.vjp's vjp_fn";
  }
  return "torch.func";
}

// functorch's message for saved-tensor hooks inside its transforms (the decorator on grad_and_value_impl)
constexpr const char* kHooksMessage =
    "torch.func.{grad, vjp, jacrev, hessian} don't yet support saved tensor hooks. Please open an issue with your use case.";

// The example of _remove_batch_dim(x, level, n, dim): x's with a dimension of n at dim, made from
// x by unsqueeze/expand so that a tangent it has (forward mode) is kept.
inline Ref batched_example(PyObject* x, long n, long dim) {
  Ref u = Ref::steal(PyObject_CallMethod(x, "unsqueeze", "l", dim));
  Ref sizes = u ? Ref::steal(PySequence_List(Ref::steal(PyObject_GetAttrString(u.get(), "shape")).get())) : Ref();
  if (!sizes) return Ref();
  PyList_SetItem(sizes.get(), dim, PyLong_FromLong(n));
  Ref e = Ref::steal(PyObject_CallMethod(u.get(), "expand", "O", sizes.get()));
  return e ? Ref::steal(PyObject_CallMethod(e.get(), "contiguous", nullptr)) : Ref();
}

inline bool is_argnums(PyObject* o) {  // an int, or a non-empty tuple of ints
  if (PyLong_CheckExact(o)) return true;
  if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) == 0) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); ++i)
    if (!PyLong_CheckExact(PyTuple_GET_ITEM(o, i))) return false;
  return true;
}

// The positions argnums (an int or a tuple of ints, is_argnums) names among n arguments, as
// functorch's _slice_argnums checks them: negative ones counted from the end; false: one out of
// range or repeated (eager raises).
inline bool argnum_positions(PyObject* argnums, size_t n, std::vector<long>& which) {
  const long nargs = static_cast<long>(n);
  const bool single = PyLong_CheckExact(argnums);
  for (Py_ssize_t i = 0; i < (single ? 1 : PyTuple_GET_SIZE(argnums)); ++i) {
    long a = PyLong_AsLong(single ? argnums : PyTuple_GET_ITEM(argnums, i));
    if (a < 0) a += nargs;
    if (a < 0 || a >= nargs || std::find(which.begin(), which.end(), a) != which.end()) return false;
    which.push_back(a);
  }
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
  // (output, aux) of a has_aux function, aux's tensors unwrapped (functorch's
  // _undo_create_differentiable of aux); false (`why` set): not a pair, or aux holds another value
  // (eager raises)
  bool split_aux(const VPtr& res, VPtr& output, VPtr& aux_out) {
    if (res->kind != VK::Tuple || res->items.size() != 2) return why = "has_aux of a function that does not return a pair (output, aux)", false;
    output = res->items[0];
    bool bad = false;
    auto leaf = [&](const VPtr& x, VPtr& o) { return x->kind == VK::Tensor ? unwrap(x, o) : (bad = true, o = x, true); };
    if (!map(res->items[1], leaf, aux_out)) return false;
    if (bad) return why = "an aux output that is not tensors", false;
    return true;
  }
  // functorch's tree spec equality, tensors at the leaves: tuples, lists and plain dicts of the same
  // lengths and keys (jvp's primals and tangents, vjp's outputs and cotangents)
  bool same_structure(const VPtr& a, const VPtr& b) {
    const bool ca = a->kind == VK::Tuple || a->kind == VK::List || a->kind == VK::Dict;
    const bool cb = b->kind == VK::Tuple || b->kind == VK::List || b->kind == VK::Dict;
    if (ca != cb) return false;
    if (!ca) return a->kind == VK::Tensor && b->kind == VK::Tensor;
    for (const VPtr* v : {&a, &b})
      if ((*v)->lazy && !t.builder.realize(*v, f)) return false;
    if (a->kind != b->kind || a->items.size() != b->items.size() || a->keys.size() != b->keys.size() || a->obj || b->obj) return false;
    for (size_t i = 0; i < a->keys.size(); ++i)
      if (PyObject_RichCompareBool(a->keys[i].get(), b->keys[i].get(), Py_EQ) != 1) return PyErr_Clear(), false;
    for (size_t i = 0; i < a->items.size(); ++i)
      if (!same_structure(a->items[i], b->items[i])) return false;
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
    single = PyLong_CheckExact(argnums);
    if (!argnum_positions(argnums, args.size(), which))
      return t.brk(f, "DV0004", what + " with argnums out of range or repeated", "eager raises; check argnums against the arguments given");
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

// The standard basis functorch's jacobians use (_construct_standard_basis_for): for tensor i of
// `of` (numels[i] elements, shape shapes[i]), rows [start_i, start_i + numels[i]) of the identity
// of size `total`, made on it (new_zeros, diagonal fill_) and viewed as (total, *shape). A chunk
// of it (_chunked_standard_basis_for_, jacrev's chunk_size): `rows` rows from row `first`.
inline Status standard_basis(Translator& t, Frame& f, const std::vector<VPtr>& of, const std::vector<long>& numels,
                             const std::vector<Ref>& shapes, long total, std::vector<VPtr>& basis, long rows = -1, long first = 0) {
  auto num = [&](long v) { return t.constant_steal(PyLong_FromLong(v)); };
  auto method = [&](const VPtr& self, const char* name, std::vector<VPtr> a, VPtr& r) {
    a.insert(a.begin(), self);
    return t.graph_call(f, Ref::borrow(Py_None), name, std::move(a), {}, r);
  };
  if (rows < 0) rows = total;
  std::vector<VPtr> chunks;
  for (size_t i = 0; i < of.size(); ++i) {
    VPtr z;
    if (Status s = method(of[i], "new_zeros", {num(rows), num(numels[i])}, z)) return s;
    chunks.push_back(z);
  }
  long diag = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    VPtr d, filled;
    if (Status s = method(chunks[i], "diagonal", {num(diag + first)}, d)) return s;
    if (Status s = method(d, "fill_", {num(1)}, filled)) return s;
    diag -= numels[i];
  }
  for (size_t i = 0; i < chunks.size(); ++i) {
    std::vector<VPtr> dims{num(rows)};
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(shapes[i].get()); ++k) dims.push_back(t.constant(Ref::borrow(PyTuple_GET_ITEM(shapes[i].get(), k))));
    VPtr b;
    if (Status s = method(chunks[i], "view", dims, b)) return s;
    basis.push_back(b);
  }
  return std::nullopt;
}

}  // namespace dv::functorch
