// torch.func.jacrev, jacfwd and hessian (hessian = jacfwd(jacrev(f))) called in the trace, as
// functorch runs them and TorchDynamo records them: functorch's steps in the graph around the
// inlined function (the values they are called through: FuncGrad, tracer/values/func_grad.cpp).
#include "tracer/functorch.h"

namespace dv {

using namespace functorch;  // NOLINT(google-build-using-namespace): this file is functorch's tracing
using FuncMode = Translator::FuncMode;
using Status = Translator::Status;

namespace {

// func's result as the transforms take it: split from its aux (has_aux, aux unwrapped), its tensors
// flat; none, or another value among them, breaks (eager raises).
Status tensor_outputs(Translator& t, Frame& f, GradCall& c, const std::string& what, const VPtr& res, bool has_aux, VPtr& output,
                      VPtr& aux_out, std::vector<VPtr>& flat_out) {
  output = res;
  if (has_aux && !c.split_aux(res, output, aux_out)) return t.brk(f, "DV0004", what + " with " + c.why, "eager raises");
  c.flatten(output, flat_out);
  if (flat_out.empty()) return t.brk(f, "DV0004", what + " of a function with no tensor output", "eager raises");
  for (const VPtr& o : flat_out)
    if (o->kind != VK::Tensor) return t.brk(f, "DV0004", what + " of a function returning a " + std::string(vk_name(o->kind)), "eager raises");
  return std::nullopt;
}

// The outputs of one jvp, as _jvp_with_argnums takes them (jvp, and jacfwd's push_jvp): each
// output's dual unpacked; an output without a tangent gets zeros_like(primal) as functorch's
// safe_unpack_dual gives it, only where the graph shows it computed from none of the duals with
// nothing written in place since they were made (a tangent the examples lost is never read as
// zero: a break); then the primals unwrapped, then the tangents.
Status jvp_outputs(Translator& t, Frame& f, GradCall& c, const std::string& what, const std::vector<VPtr>& flat_out, bool strict,
                   const std::vector<int>& dual_nodes, int traced_from, std::vector<VPtr>& primals_out, std::vector<VPtr>& tangents_out) {
  const Steps& st = grad_steps();
  VPtr level0 = t.constant_steal(PyLong_FromLong(0));
  for (const VPtr& o : flat_out) {
    VPtr pt;
    if (Status e = t.graph_call(f, Ref::borrow(st.unpack_dual), "", {o}, {{"level", level0}}, pt)) return e;
    if (pt->kind != VK::Tuple || pt->items.size() != 2) return t.brk(f, "DV0004", what + ": _unpack_dual gave no (primal, tangent) pair");
    VPtr tangent = pt->items[1];
    if (tangent->kind != VK::Tensor) {
      if (strict) return t.brk(f, "DV0004", what + "(strict=True) of an output independent of the inputs", "eager raises");
      if (t.output.graph.depends_on(o->node, dual_nodes) || t.output.graph.mutates_from(traced_from))
        return t.brk(f, "DV0004", what + ": an output computed from the inputs whose tangent the trace cannot tell", "it runs eagerly");
      static PyObject* zeros_like = PyObject_GetAttrString(py().torch.get(), "zeros_like");  // kept
      if (!zeros_like) return PyErr_Clear(), t.brk(f, "DV0019", "torch.zeros_like is missing");
      if (Status e = t.graph_call(f, Ref::borrow(zeros_like), "", {pt->items[0]}, {}, tangent)) return e;
    }
    primals_out.push_back(pt->items[0]);
    tangents_out.push_back(tangent);
  }
  for (auto* list : {&primals_out, &tangents_out})
    for (VPtr& v : *list) {
      VPtr u;
      if (!c.unwrap(v, u)) return t.brk(f, "DV0004", c.why);
      v = u;
    }
  return std::nullopt;
}

// A dual level entered for real while a function is traced under a jvp (its meta examples carry
// tangents), exited on every way out (jacfwd, jvp).
struct RealDualLevel {
  long level = -1;
  bool enter() {
    Ref lv = Ref::steal(PyObject_CallNoArgs(grad_steps().real_enter_dual));
    if (!lv) return PyErr_Clear(), false;
    level = PyLong_AsLong(lv.get());
    return true;
  }
  ~RealDualLevel() {
    if (level < 0) return;
    Ref kw = Ref::steal(Py_BuildValue("{s:l}", "level", level));
    Ref none = Ref::steal(PyTuple_New(0));
    Ref r = kw && none ? Ref::steal(PyObject_Call(grad_steps().real_exit_dual, none.get(), kw.get())) : Ref();
    if (!r) PyErr_Clear();
  }
};

}  // namespace

// jacrev(func, argnums, has_aux)(*args), as functorch's jacrev runs it and TorchDynamo records it:
// the vjp of func (one grad level, closed), a standard basis of the outputs (new_zeros, diagonal
// fill_, view), the vjp's _autograd_grad vmapped over the basis (one vmap level), and each input's
// stacked rows split per output and viewed as output shape + input shape. The arguments
// differentiated are tensors (not pytrees of them: a break), the outputs tensors or tuples, lists
// and dicts of them; chunk_size splits the basis as functorch does.
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
  // the differentiated inputs' tensors, flat (an argument may be a tuple, list or dict of them:
  // functorch's tree_flatten of the primals)
  std::vector<VPtr> flat_in;
  for (const VPtr& d : c.diff->items) c.flatten(d, flat_in);
  for (const VPtr& d : flat_in)
    if (d->kind != VK::Tensor) return brk(f, "DV0004", what + " with respect to a " + std::string(vk_name(d->kind)), "eager raises: differentiate tensors");
  VPtr res;
  if (Status s = c.call(fn->self, std::move(wrapped), {}, res)) return s;
  VPtr output, aux_out;
  std::vector<VPtr> flat_out;
  if (Status s = tensor_outputs(*this, f, c, what, res, has_aux, output, aux_out, flat_out)) return s;
  std::vector<long> numels;
  std::vector<Ref> shapes;
  long total = 0;
  for (const VPtr& o : flat_out) {
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
  // the basis in chunks of chunk_size rows (one chunk: all of them), each through the vjp: vmapped
  // over its rows, or (chunk_size 1) called on the one row squeezed and the result unsqueezed; the
  // chunks' results concatenated per input (functorch's compute_jacobian_stacked)
  PyObject* chunk_arg = PyTuple_GET_ITEM(fn->obj.get(), 3);
  const long chunk = chunk_arg == Py_None ? 0 : PyLong_AsLong(chunk_arg);
  std::vector<long> chunk_rows;
  if (chunk > 0 && chunk < total) {
    for (long r = total; r > 0; r -= chunk) chunk_rows.push_back(std::min(chunk, r));
  } else {
    chunk_rows.push_back(total);
  }
  Ref zero = Ref::steal(PyLong_FromLong(0)), error = Ref::steal(PyUnicode_FromString("error"));
  VPtr outs = make(VK::List), ins = make(VK::List);
  outs->items = flat_out;
  ins->items = flat_in;
  std::vector<std::vector<VPtr>> chunked(flat_in.size());  // per input, per chunk: (rows, *input shape)
  for (size_t ci = 0; ci < chunk_rows.size(); ++ci) {
    const long rows = chunk_rows[ci];
    std::vector<VPtr> basis;  // of the outputs
    if (Status s = standard_basis(*this, f, results, numels, shapes, total, basis, rows, static_cast<long>(ci) * (chunk > 0 ? chunk : total)))
      return s;
    const bool one_row = chunk == 1;
    const int vl = functorch_depth_ + 1;
    Ref level = Ref::steal(PyLong_FromLong(vl));
    VPtr cotangents = make(VK::List);
    if (one_row) {
      for (const VPtr& b : basis) {
        VPtr sq;
        if (Status s = graph_call(f, Ref::borrow(st.squeeze), "", {b, num(0)}, {}, sq)) return s;
        cotangents->items.push_back(sq);
      }
    } else {
      // vmap(vjp_fn)(basis): one vmap level over the basis rows
      c.node(st.lazy, {});
      c.node(st.vmap_inc, {c.arg_long(rows), c.arg(error.get())});
      for (size_t i = 0; i < basis.size(); ++i) {
        Ref ex = Ref::steal(PyObject_CallMethod(flat_out[i]->obj.get(), "new_empty", "(O)", shapes[i].get()));
        if (!ex) return PyErr_Clear(), brk(f, "DV0006", what + ": no example of a basis row");
        const int n = add_graph_call(st.add_batch, {c.arg(basis[i]), c.arg(zero.get()), c.arg(level.get())}, ex);
        cotangents->items.push_back(from_example(f, ex, n, basis[i]->device));
      }
    }
    VPtr grads;
    enter_transform(false);
    Status g = graph_call(f, Ref::borrow(st.autograd_grad), "", {outs, ins, cotangents},
                          {{"retain_graph", constant(Ref::borrow(Py_True))}, {"create_graph", constant(Ref::borrow(grad_mode_enabled() ? Py_True : Py_False))}},
                          grads);
    exit_transform(false);
    if (g) return g;
    if (grads->kind != VK::Tuple || grads->items.size() != ins->items.size()) return brk(f, "DV0004", what + ": the vjp's results are not one per input");
    for (size_t j = 0; j < grads->items.size(); ++j) {
      const VPtr& gi = grads->items[j];
      if (gi->kind != VK::Tensor) return brk(f, "DV0004", what + ": an input the outputs do not depend on", "it runs eagerly");
      VPtr r;
      if (one_row) {
        if (Status s = graph_call(f, Ref::borrow(st.unsqueeze), "", {gi, num(0)}, {}, r)) return s;
      } else {
        Ref ex = batched_example(gi->obj.get(), rows, 0);
        if (!ex) return PyErr_Clear(), brk(f, "DV0006", what + ": no example of a jacobian");
        const int n = add_graph_call(st.remove_batch, {c.arg(gi), c.arg(level.get()), c.arg_long(rows), c.arg(zero.get())}, ex);
        r = from_example(f, ex, n, gi->device);
      }
      chunked[j].push_back(r);
    }
    if (!one_row) c.node(st.vmap_dec, {});
  }
  std::vector<VPtr> stacked;  // per input: (total, *input shape)
  for (auto& parts : chunked) {
    if (parts.size() == 1) {
      stacked.push_back(parts[0]);
      continue;
    }
    VPtr tup = make(VK::Tuple), r;
    tup->items = parts;
    if (Status s = graph_call(f, Ref::borrow(st.cat), "", {tup, num(0)}, {}, r)) return s;
    stacked.push_back(r);
  }
  // each input's rows split per output, viewed as output shape + input shape
  std::vector<std::vector<VPtr>> jac(flat_out.size());  // [output][input]
  std::vector<VPtr> split_parts;  // all inputs' splits, then their views (functorch's order)
  for (size_t j = 0; j < stacked.size(); ++j) {
    VPtr sizes = make(VK::List);
    for (long n : numels) sizes->items.push_back(num(n));
    VPtr parts;
    if (Status s = method(stacked[j], "split", {sizes}, {{"dim", num(0)}}, parts)) return s;
    if (parts->kind != VK::Tuple || parts->items.size() != flat_out.size()) return brk(f, "DV0004", what + ": the split jacobian has the wrong parts");
    split_parts.push_back(parts);
  }
  for (size_t j = 0; j < stacked.size(); ++j) {
    const VPtr& parts = split_parts[j];
    Ref in_shape = Ref::steal(PyObject_GetAttrString(flat_in[j]->obj.get(), "shape"));
    for (size_t i = 0; i < flat_out.size(); ++i) {
      Ref full = in_shape ? Ref::steal(PySequence_Concat(shapes[i].get(), Ref::steal(PySequence_Tuple(in_shape.get())).get())) : Ref();
      if (!full) return PyErr_Clear(), brk(f, "DV0006", what + ": no shape of a jacobian");
      VPtr v;
      if (Status s = method(parts->items[i], "view", {constant(full)}, {}, v)) return s;
      jac[i].push_back(v);
    }
  }
  // per output: the jacobians in the structure of the differentiated arguments (one argument's, or
  // a tuple of them)
  std::vector<VPtr> per_output;
  for (auto& row : jac) {
    size_t at = 0;
    VPtr tup = make(VK::Tuple);
    for (const VPtr& d : c.diff->items) tup->items.push_back(c.unflatten(d, row, at));
    per_output.push_back(c.single ? tup->items[0] : tup);
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
// an output the examples give no tangent is zeros where the graph shows it independent of the
// inputs, else a break, never a guess. Inputs differentiated are tensors or tuples, lists and dicts
// of them; a jacfwd inside another's function (nested forward mode) breaks.
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
  const bool single = PyLong_CheckExact(argnums);
  std::vector<long> which;
  if (!argnum_positions(argnums, args.size(), which)) return brk(f, "DV0004", what + " with argnums out of range or repeated", "eager raises");
  // each a tensor or a tuple, list or dict of them (functorch's tree_flatten of the primals): the
  // leaves, flat, in argnums' order
  GradCall c(*this, f, 0);
  std::vector<VPtr> primals;
  std::vector<long> numels;
  std::vector<Ref> shapes;
  long total = 0;
  for (long a : which) {
    VPtr tree;
    if (!c.map(args[static_cast<size_t>(a)], [](const VPtr& x, VPtr& o) { return o = x, true; }, tree))
      return brk(f, "DV0004", what + " with respect to an argument that cannot be traced");
    args[static_cast<size_t>(a)] = tree;  // realized: the structure the jacobians are given back in
    std::vector<VPtr> leaves;
    c.flatten(tree, leaves);
    if (leaves.empty()) return brk(f, "DV0004", what + " with respect to an empty container", "eager raises");
    for (const VPtr& p : leaves) {
      if (p->kind != VK::Tensor) return brk(f, "DV0004", what + " with respect to a " + std::string(vk_name(p->kind)), "differentiate tensors");
      Ref n = Ref::steal(PyObject_CallMethod(p->obj.get(), "numel", nullptr));
      Ref shape = Ref::steal(PyObject_GetAttrString(p->obj.get(), "shape"));
      if (!n || !shape || !PyLong_CheckExact(n.get())) return PyErr_Clear(), brk(f, "DV0004", what + " of an input of symbolic size");
      primals.push_back(p);
      numels.push_back(PyLong_AsLong(n.get()));
      shapes.push_back(Ref::steal(PySequence_Tuple(shape.get())));
      total += numels.back();
    }
  }
  auto num = [&](long v) { return constant_steal(PyLong_FromLong(v)); };
  auto method = [&](const VPtr& self, const char* name, std::vector<VPtr> a, KwArgs kw, VPtr& r) {
    a.insert(a.begin(), self);
    return graph_call(f, Ref::borrow(Py_None), name, std::move(a), std::move(kw), r);
  };
  std::vector<VPtr> basis;  // of the inputs
  if (Status s = standard_basis(*this, f, primals, numels, shapes, total, basis)) return s;
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
  RealDualLevel dual;  // examples carry tangents from here; every way out exits it
  if (!dual.enter()) return brk(f, "DV0004", what + ": a dual level cannot be entered");
  const long real_level = dual.level;
  Status s = [&]() -> Status {
    std::vector<VPtr> duals;
    for (size_t j = 0; j < primals.size(); ++j) {  // fwAD.make_dual: decompositions loaded, then the dual
      c.node(st.load_decompositions, {});
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
    size_t at = 0;  // each differentiated argument in its structure, of duals
    for (size_t j = 0; j < which.size(); ++j) wrapped[static_cast<size_t>(which[j])] = c.unflatten(args[static_cast<size_t>(which[j])], duals, at);
    std::vector<int> dual_nodes;
    for (const VPtr& d : duals) dual_nodes.push_back(d->node);
    const int traced_from = output.graph.num_placeholders() + output.graph.num_calls();
    VPtr res;
    functorch_depth_ += 2;  // the vmap level and the jvp level
    ++jvp_depth_;
    Status r = call(f, fn->self, std::move(wrapped), {}, res);
    --jvp_depth_;
    functorch_depth_ -= 2;
    if (r) return r->exc ? brk(f, "DV0004", what + ": the function raised", "it runs eagerly") : r;
    VPtr output, aux_out;
    std::vector<VPtr> flat_out, primals_out, tangents_out;
    if (Status e = tensor_outputs(*this, f, c, what, res, has_aux, output, aux_out, flat_out)) return e;
    if (Status e = jvp_outputs(*this, f, c, what, flat_out, false, dual_nodes, traced_from, primals_out, tangents_out)) return e;
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
      size_t at = 0;  // per differentiated argument, in its structure
      VPtr per_arg = make(VK::Tuple);
      for (long a : which) per_arg->items.push_back(c.unflatten(args[static_cast<size_t>(a)], row->items, at));
      per_output.push_back(single ? per_arg->items[0] : per_arg);
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
  return s;
}

// torch.func.jvp(func, primals, tangents, *, strict=False, has_aux=False), as functorch's
// _jvp_with_argnums runs it and TorchDynamo records it: a jvp level (forward grad on, a dual level
// entered), each primal made a dual of its tangent, func inlined on the duals, each output's dual
// unpacked (no tangent: zeros_like of the primal where the graph shows it computed from none of the
// duals, as call_jacfwd), primals then tangents unwrapped, the level left. Returns (output,
// jvp_out) or with has_aux (output, jvp_out, aux). The examples carry tangents (a dual level is
// entered for real while func is traced). A jvp inside a function jvp or jacfwd is tracing breaks.
Translator::Status Translator::call_jvp(Frame& f, std::vector<VPtr> args, KwArgs kwargs, VPtr& out) {
  const std::string what = "torch.func.jvp";
  const std::string jvp_str = "jvp(f, primals, tangents)";
  enum { kFunc, kPrimals, kTangents, kStrict, kAux, kCount };
  VPtr given[kCount];
  if (args.size() > 3) return brk(f, "DV0004", what + " with more than three positional arguments", "eager raises");
  for (size_t i = 0; i < args.size(); ++i) given[i] = args[i];
  for (auto& [k, v] : kwargs) {
    int i = k == "func" ? kFunc : k == "primals" ? kPrimals : k == "tangents" ? kTangents : k == "strict" ? kStrict : k == "has_aux" ? kAux : -1;
    if (i < 0 || given[i]) return brk(f, "DV0004", what + " with keyword " + k, "eager raises");
    given[i] = v;
  }
  if (!given[kFunc] || !given[kPrimals] || !given[kTangents]) return brk(f, "DV0004", what + " without its function, primals or tangents", "eager raises");
  auto flag = [&](int i, bool& v) {
    if (!given[i]) return v = false, true;
    if (given[i]->kind != VK::Const || !PyBool_Check(given[i]->obj.get())) return false;
    v = given[i]->obj.get() == Py_True;
    return true;
  };
  bool strict = false, has_aux = false;
  if (!flag(kStrict, strict) || !flag(kAux, has_aux)) return brk(f, "DV0004", what + " with strict or has_aux that is not a constant bool");
  const Steps& st = grad_steps();
  if (!st.ok()) return brk(f, "DV0004", what + ": functorch's functions are missing");
  if (jvp_depth_ > 0) return brk(f, "DV0004", what + " inside a function jvp or jacfwd is tracing (nested forward mode)", "it runs eagerly");
  if (functorch_level_busy()) return brk(f, "DV0004", what + " inside code functorch is transforming");
  Ref fwd_on = Ref::steal(PyObject_CallNoArgs(st.is_fwd));
  if (!fwd_on || fwd_on.get() != Py_True) return PyErr_Clear(), brk(f, "DV0004", what + " with forward-mode AD disabled");
  VPtr primals = given[kPrimals], tangents = given[kTangents];
  for (VPtr* v : {&primals, &tangents})
    if (((*v)->kind == VK::Tuple || (*v)->kind == VK::List || (*v)->kind == VK::Dict) && (*v)->lazy && !builder.realize(*v, f))
      return brk(f, "DV0004", what + " of primals or tangents that cannot be traced");
  if (primals->kind != VK::Tuple) {
    if (primals->kind == VK::Const && PyTuple_Check(primals->obj.get()))
      return brk(f, "DV0004", what + " of primals that are constants", "eager raises: primals must be tensors");
    return raise_new(f, PyExc_RuntimeError, jvp_str + ": Expected primals to be a tuple. E.g. it should be valid to call f(*primals).", what);
  }
  GradCall c(*this, f, functorch_depth_ + 1);
  if (!c.same_structure(primals, tangents))
    return brk(f, "DV0004", what + " of primals and tangents that are not tensors in the same structure", "eager raises");
  std::vector<VPtr> flat_p, flat_t;
  c.flatten(primals, flat_p);
  c.flatten(tangents, flat_t);
  if (flat_p.empty()) return brk(f, "DV0004", what + " of no primals", "eager raises");
  for (const VPtr& v : flat_p) {  // outputs require grad outside where an input does (jvp composes with autograd)
    Ref req = Ref::steal(PyObject_GetAttrString(v->obj.get(), "requires_grad"));
    c.outer_requires_grad |= req && req.get() == Py_True;
  }
  for (const VPtr& v : flat_t) {
    Ref req = Ref::steal(PyObject_GetAttrString(v->obj.get(), "requires_grad"));
    c.outer_requires_grad |= req && req.get() == Py_True;
  }
  PyErr_Clear();
  auto num = [&](long v) { return constant_steal(PyLong_FromLong(v)); };
  c.node(st.jvp_inc, {});
  c.node(st.set_fwd, {c.arg(Py_True)});
  c.node(st.enter_dual, {});
  RealDualLevel dual;  // examples carry tangents from here; every way out exits it
  if (!dual.enter()) return brk(f, "DV0004", what + ": a dual level cannot be entered");
  const long real_level = dual.level;
  Status s = [&]() -> Status {
    std::vector<VPtr> duals;
    for (size_t j = 0; j < flat_p.size(); ++j) {  // fwAD.make_dual: decompositions loaded, then the dual
      c.node(st.load_decompositions, {});
      VPtr d;
      if (Status e = graph_call(f, Ref::borrow(st.make_dual), "", {flat_p[j], flat_t[j]}, {{"level", num(0)}}, d)) return e;
      duals.push_back(d);
    }
    size_t k = 0;
    VPtr dual_args = c.unflatten(primals, duals, k);
    const int traced_from = output.graph.num_placeholders() + output.graph.num_calls();
    std::vector<int> dual_nodes;
    for (const VPtr& d : duals) dual_nodes.push_back(d->node);
    VPtr res;
    functorch_depth_ += 1;
    ++jvp_depth_;
    Status r = call(f, given[kFunc], dual_args->items, {}, res);
    --jvp_depth_;
    functorch_depth_ -= 1;
    if (r) return r->exc ? brk(f, "DV0004", what + ": the function raised", "it runs eagerly") : r;
    VPtr result, aux_out;
    std::vector<VPtr> flat_out, primals_out, tangents_out;
    if (Status e = tensor_outputs(*this, f, c, what, res, has_aux, result, aux_out, flat_out)) return e;
    if (Status e = jvp_outputs(*this, f, c, what, flat_out, strict, dual_nodes, traced_from, primals_out, tangents_out)) return e;
    output_graph_exit_dual(*this, st.exit_dual, real_level);
    c.node(st.set_fwd, {c.arg(Py_True)});
    c.node(st.jvp_dec, {});
    out = make(VK::Tuple);
    size_t a = 0, b = 0;
    out->items = {c.unflatten(result, primals_out, a), c.unflatten(result, tangents_out, b)};
    if (has_aux) out->items.push_back(aux_out);
    return std::nullopt;
  }();
  return s;
}

// torch.func.vjp(func, *primals, has_aux=False), as functorch's _vjp_with_argnums runs it and
// TorchDynamo records it: one grad level (as jacrev's first half) around func, the outputs
// unwrapped; returns (output, vjp_fn[, aux]). vjp_fn (a FuncGrad of mode vjp_fn: items = the
// outputs as func returned them at the level, and the differentiated primals) is called later in
// the trace: call_vjp_fn.
Translator::Status Translator::call_vjp(Frame& f, std::vector<VPtr> args, KwArgs kwargs, VPtr& out) {
  const std::string what = "torch.func.vjp";
  bool has_aux = false;
  for (auto& [k, v] : kwargs) {
    if (k != "has_aux") return brk(f, "DV0004", what + " with keyword " + k, "eager raises");
    if (v->kind != VK::Const || !PyBool_Check(v->obj.get())) return brk(f, "DV0004", what + " with has_aux that is not a constant bool");
    has_aux = v->obj.get() == Py_True;
  }
  if (args.size() < 2) return brk(f, "DV0004", what + " without primals", "eager raises");
  if (!grad_steps().ok()) return brk(f, "DV0004", what + ": functorch's functions are missing");
  VPtr func = args[0];
  std::vector<VPtr> primals(args.begin() + 1, args.end());
  Ref argnums = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(primals.size())));
  for (size_t i = 0; i < primals.size(); ++i) PyTuple_SET_ITEM(argnums.get(), static_cast<Py_ssize_t>(i), PyLong_FromSsize_t(static_cast<Py_ssize_t>(i)));
  GradLevel c(*this, f);
  std::vector<VPtr> wrapped;
  KwArgs none;
  if (Status s = c.open(what, argnums.get(), primals, {}, wrapped, none)) return s;
  VPtr res;
  if (Status s = c.call(func, std::move(wrapped), {}, res)) return s;
  VPtr output, aux_out;
  std::vector<VPtr> flat_out;
  if (Status s = tensor_outputs(*this, f, c, what, res, has_aux, output, aux_out, flat_out)) return s;
  std::vector<VPtr> results;
  for (const VPtr& o : flat_out) {
    VPtr r;
    if (!c.unwrap(o, r)) return brk(f, "DV0004", c.why);
    results.push_back(r);
  }
  for (const VPtr& o : flat_out) {  // functorch checks the outputs' dtypes inside its `with` blocks, raising after them
    Ref fp = Ref::steal(PyObject_CallMethod(o->obj.get(), "is_floating_point", nullptr));
    Ref cx = Ref::steal(PyObject_CallMethod(o->obj.get(), "is_complex", nullptr));
    Ref dtype = Ref::steal(PyObject_GetAttrString(o->obj.get(), "dtype"));
    if (!fp || !cx || !dtype) return PyErr_Clear(), brk(f, "DV0004", what + ": no dtype of an output");
    if (fp.get() != Py_True && cx.get() != Py_True) {
      if (Status s = c.close()) return s;
      return raise_new(f, PyExc_RuntimeError,
                       "vjp(f, ...): All outputs of f must be floating-point or complex Tensors, got Tensor with dtype " +
                           str_of(Ref::steal(PyObject_Str(dtype.get())).get()),
                       what);
    }
  }
  if (Status s = c.close()) return s;
  VPtr fn = make(VK::FuncGrad);
  fn->obj = Ref::steal(Py_BuildValue("(OOiO)", Py_None, has_aux ? Py_True : Py_False, static_cast<int>(FuncMode::vjp_fn), Py_None));
  if (!fn->obj) return PyErr_Clear(), brk(f, "DV0019", what + ": no vjp_fn");
  fn->items = {output, c.diff};
  size_t k = 0;
  out = make(VK::Tuple);
  out->items = {c.unflatten(output, results, k), fn};
  if (has_aux) out->items.push_back(aux_out);
  return std::nullopt;
}

// vjp_fn(cotangents, retain_graph=True, create_graph=None): _autograd_grad of the outputs vjp kept
// (at their grad level) with respect to the primals, the cotangents in the outputs' structure;
// the gradients one per primal, in a tuple.
Translator::Status Translator::call_vjp_fn(Frame& f, const VPtr& fn, std::vector<VPtr> args, KwArgs kwargs, VPtr& out) {
  const std::string what = "torch.func.vjp's vjp_fn";
  enum { kCot, kRetain, kCreate, kCount };
  VPtr given[kCount];
  if (args.size() > 3) return brk(f, "DV0004", what + " with more than three arguments", "eager raises");
  for (size_t i = 0; i < args.size(); ++i) given[i] = args[i];
  for (auto& [k, v] : kwargs) {
    int i = k == "cotangents" ? kCot : k == "retain_graph" ? kRetain : k == "create_graph" ? kCreate : -1;
    if (i < 0 || given[i]) return brk(f, "DV0004", what + " with keyword " + k, "eager raises");
    given[i] = v;
  }
  if (!given[kCot]) return brk(f, "DV0004", what + " without cotangents", "eager raises");
  bool retain = true, create = grad_mode_enabled();
  for (int i : {kRetain, kCreate}) {
    if (!given[i] || (i == kCreate && given[i]->kind == VK::Const && given[i]->obj.get() == Py_None)) continue;
    if (given[i]->kind != VK::Const || !PyBool_Check(given[i]->obj.get()))
      return brk(f, "DV0004", what + " with retain_graph or create_graph that is not a constant bool");
    (i == kRetain ? retain : create) = given[i]->obj.get() == Py_True;
  }
  const Steps& st = grad_steps();
  GradCall c(*this, f, 0);
  const VPtr& output = fn->items[0];
  const VPtr& diff = fn->items[1];
  if (!c.same_structure(output, given[kCot])) {
    // eager's RuntimeError where the pytree specs differ (computed by functorch's own functions on
    // the examples); otherwise (non-tensor cotangents in the same structure) a break, eager raises
    static PyObject* flatten = attr_of("torch._functorch.eager_transforms", "tree_flatten");
    static PyObject* pprint = attr_of("torch._functorch.eager_transforms", "treespec_pprint");
    std::optional<Ref> o = to_python(output, true), ct = to_python(given[kCot], true);
    Ref fo = flatten && o && *o ? Ref::steal(PyObject_CallOneArg(flatten, o->get())) : Ref();
    Ref fc = flatten && ct && *ct ? Ref::steal(PyObject_CallOneArg(flatten, ct->get())) : Ref();
    if (fo && fc && PyTuple_Check(fo.get()) && PyTuple_Check(fc.get()) && PyTuple_GET_SIZE(fo.get()) == 2 && PyTuple_GET_SIZE(fc.get()) == 2 && pprint) {
      PyObject* so = PyTuple_GET_ITEM(fo.get(), 1);
      PyObject* sc = PyTuple_GET_ITEM(fc.get(), 1);
      if (PyObject_RichCompareBool(so, sc, Py_NE) == 1) {
        Ref po = Ref::steal(PyObject_CallOneArg(pprint, so)), pc = Ref::steal(PyObject_CallOneArg(pprint, sc));
        if (po && pc)
          return raise_new(f, PyExc_RuntimeError,
                           "Expected pytree structure of cotangents to be the same as pytree structure of outputs to the function. cotangents: " +
                               str_of(Ref::steal(PyObject_Str(pc.get())).get()) + ", primal output: " + str_of(Ref::steal(PyObject_Str(po.get())).get()),
                           what);
      }
    }
    PyErr_Clear();
    return brk(f, "DV0004", what + " of cotangents that are not tensors in the structure of the outputs", "eager raises");
  }
  VPtr outs = make(VK::List), ins = make(VK::List), cts = make(VK::List);
  c.flatten(output, outs->items);
  c.flatten(diff, ins->items);
  c.flatten(given[kCot], cts->items);
  VPtr grads;
  enter_transform(false);
  Status g = graph_call(f, Ref::borrow(st.autograd_grad), "", {outs, ins, cts},
                        {{"retain_graph", constant(Ref::borrow(retain ? Py_True : Py_False))}, {"create_graph", constant(Ref::borrow(create ? Py_True : Py_False))}},
                        grads);
  exit_transform(false);
  if (g) return g;
  if (grads->kind != VK::Tuple || grads->items.size() != ins->items.size()) return brk(f, "DV0004", what + ": the vjp's results are not one per primal");
  size_t k = 0;
  out = c.unflatten(diff, grads->items, k);
  return std::nullopt;
}

}  // namespace dv
