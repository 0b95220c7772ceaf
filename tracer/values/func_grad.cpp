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
// (argnums, has_aux, mode, randomness), Python constants (mode: Translator::FuncMode; jacrev, jacfwd
// and hessian, made here too, are called in tracer/jacobians.cpp). What eager refuses (an output
// that is not a 0-d tensor, a differentiated argument that is not a pytree of tensors) is raised as
// eager raises it, or a break.
#include "tracer/functorch.h"
#include "tracer/rebuild.h"

namespace dv {

using cg::N;

using FuncMode = Translator::FuncMode;

using namespace functorch;  // NOLINT(google-build-using-namespace)

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
  } else if (mode == FuncMode::jacrev) {
    // chunk_size (None or a positive int) takes randomness's place in the tuple
    if (given[4] && !(given[4]->kind == VK::Const && given[4]->obj.get() == Py_False))
      return brk(f, "DV0004", what + " with _preallocate_and_copy", "not traced yet: the jacobian is computed eagerly");
    randomness = Ref::borrow(Py_None);
    if (given[3] && !(given[3]->kind == VK::Const && given[3]->obj.get() == Py_None)) {
      if (given[3]->kind != VK::Const || !PyLong_CheckExact(given[3]->obj.get())) return brk(f, "DV0004", what + " with a chunk_size that is not a constant int");
      if (PyLong_AsLong(given[3]->obj.get()) <= 0) return raise_new(f, PyExc_ValueError, "jacrev: `chunk_size` should be greater than 0.", what);
      randomness = given[3]->obj;
    }
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
  if (mode == FuncMode::vjp_fn) return call_vjp_fn(f, fn, std::move(args), std::move(kwargs), out);
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
    const FuncMode mode = static_cast<FuncMode>(PyLong_AsLong(PyTuple_GET_ITEM(v.obj.get(), 2)));
    if (mode == FuncMode::vjp_fn) {  // no function of its own: the outputs and primals it differentiates
      out += func_mode_name(mode);
      return;
    }
    out += func_mode_name(mode) + "(";
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
    if ((mode == FuncMode::jacrev && PyTuple_GET_ITEM(v->obj.get(), 1) == Py_True) || mode == FuncMode::jacfwd || mode == FuncMode::vjp_fn)
      return false;  // (jacfwd, vjp_fn: not rebuilt)
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
