// torch.optim's Optimizer._init_group, run eagerly while tracing, as TorchDynamo's OptimizerVariable
// runs it: it gathers what a step reads (the parameters with a gradient, the gradients, each one's
// state tensors) into lists the step made, and creates the state on the first step -- which, traced,
// would be new tensors of this trace and a recompile on the second step. The lists it filled come
// back as values read from the optimizer (param_groups[i]['params'][j], its .grad, state[p][name]),
// guarded as such: each gradient (a tensor or None), the state's keys (by identity) and entries.
#include "tensor_match.h"
#include "translator.h"

namespace dv {

namespace {

PyObject* optimizer_class() {
  static PyObject* c = [] {
    Ref m = Ref::steal(PyImport_ImportModule("torch.optim.optimizer"));
    PyObject* c = m ? PyObject_GetAttrString(m.get(), "Optimizer") : nullptr;  // kept for the process
    if (!c) PyErr_Clear();
    return c;
  }();
  return c;
}

bool named(PyObject* fn, const char* name) {
  return PyFunction_Check(fn) && PyUnicode_CompareWithASCIIString(reinterpret_cast<PyFunctionObject*>(fn)->func_name, name) == 0;
}

}  // namespace

bool is_optimizer(PyObject* o) {
  PyObject* cls = optimizer_class();
  return cls && PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(cls));
}

Translator::Status Translator::optimizer_init_group(Frame& f, const VPtr& fn, const std::vector<VPtr>& args,
                                                    const std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out,
                                                    bool& handled) {
  handled = false;
  if (fn->kind != VK::Method || !fn->obj || !named(fn->obj.get(), "_init_group") || !fn->self || !fn->self->obj ||
      !fn->self->source || !kwargs.empty() || args.empty())
    return std::nullopt;
  PyObject* opt = fn->self->obj.get();
  if (!is_optimizer(opt)) return std::nullopt;
  // Its arguments as Python values: the group (one of the optimizer's param_groups, read from it),
  // constants, and the empty lists the step made for it to fill. Anything else: traced as it is.
  const VPtr& group = args[0];
  PyObject* real_group = group->kind == VK::Dict && group->source ? builder.real_container(group) : nullptr;
  Ref groups = Ref::steal(PyObject_GetAttrString(opt, "param_groups"));
  if (!groups) return PyErr_Clear(), std::nullopt;
  bool member = false;
  for (Py_ssize_t i = 0; real_group && PyList_Check(groups.get()) && i < PyList_GET_SIZE(groups.get()); ++i)
    member |= PyList_GET_ITEM(groups.get(), i) == real_group;
  if (!member) return std::nullopt;
  const SideEffects& se = output.side_effects;
  // (a change the trace has not made yet, or a read of the state, would not see what it does)
  if (!se.mutated_dicts.empty() || !se.mutated_lists.empty() || !se.attr_writes.empty() || !se.outside_sets.empty() ||
      builder.read_under(fn->self->source->text() + ".state"))
    return std::nullopt;
  Ref pargs = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(args.size()) + 1));
  if (!pargs) return PyErr_Clear(), std::nullopt;
  PyTuple_SET_ITEM(pargs.get(), 0, Ref::borrow(opt).release());
  PyTuple_SET_ITEM(pargs.get(), 1, Ref::borrow(real_group).release());
  std::vector<std::pair<VPtr, Ref>> filled;  // the step's lists and the real lists given for them
  for (size_t i = 1; i < args.size(); ++i) {
    const VPtr& a = args[i];
    Ref real;
    if (a->kind == VK::List && a->items.empty() && !a->source && !a->lazy) {
      real = Ref::steal(PyList_New(0));
      filled.emplace_back(a, real);
    } else if (a->kind == VK::Const) {
      real = a->obj;
    } else {
      return std::nullopt;
    }
    PyTuple_SET_ITEM(pargs.get(), static_cast<Py_ssize_t>(i) + 1, real.release());
  }
  handled = true;
  Ref r = Ref::steal(PyObject_Call(fn->obj.get(), pargs.get(), nullptr));
  if (!r) return raise_current(f, "Optimizer._init_group");
  // What it read, read again through sources: the group's parameters and their gradients, then the
  // state (its keys are those parameters, aliased to them) with each parameter's entries.
  const std::string what = "the state of " + fn->self->source->text();
  Ref params = Ref::steal(PyObject_GetItem(real_group, Ref::steal(PyUnicode_FromString("params")).get()));
  if (!params || !PyList_Check(params.get())) return PyErr_Clear(), brk(f, "DV0005", what + ": a group's params is not a list");
  const SourcePtr params_src = Source::item(group->source, Ref::steal(PyUnicode_FromString("params")));
  for (Py_ssize_t j = 0; j < PyList_GET_SIZE(params.get()); ++j) {
    Ref p = Ref::borrow(PyList_GET_ITEM(params.get(), j));
    const SourcePtr p_src = Source::item(params_src, Ref::steal(PyLong_FromSsize_t(j)));
    Ref grad = Ref::steal(PyObject_GetAttrString(p.get(), "grad"));
    if (!grad) return PyErr_Clear(), brk(f, "DV0005", what + ": a parameter without .grad");
    if (!wrap(p, p_src, f) || !wrap(grad, Source::attr(p_src, "grad"), f))
      return brk(f, "DV0005", what + ": a parameter or its gradient cannot be traced");
  }
  Ref state = Ref::steal(PyObject_GetAttrString(opt, "state"));
  VPtr sv = state ? wrap(state, Source::attr(fn->self->source, "state"), f) : nullptr;
  if (!sv || sv->kind != VK::Dict || !builder.realize(sv, f)) return PyErr_Clear(), brk(f, "DV0005", what + " cannot be traced");
  for (const VPtr& entry : sv->items)
    if (entry->kind != VK::Dict || !builder.realize(entry, f)) return brk(f, "DV0005", what + ": an entry that is not a dict");
  for (auto& [list, real] : filled) {
    std::vector<VPtr> items;
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(real.get()); ++j) {
      PyObject* x = PyList_GET_ITEM(real.get(), j);
      VPtr v = is_tensor(x) ? builder.tensor_value(x) : is_exact_const(x) ? constant(Ref::borrow(x)) : nullptr;
      if (!v) return brk(f, "DV0005", what + ": _init_group gave a " + std::string(Py_TYPE(x)->tp_name) + " read from nowhere");
      items.push_back(v);
    }
    list->items = std::move(items);
  }
  bool constant_result = is_exact_const(r.get());  // has_complex; Adagrad's (has_sparse_grad, has_complex)
  if (PyTuple_CheckExact(r.get())) {
    constant_result = true;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(r.get()); ++i) constant_result &= is_exact_const(PyTuple_GET_ITEM(r.get(), i));
  }
  if (!constant_result) return brk(f, "DV0005", "Optimizer._init_group returned a " + std::string(Py_TYPE(r.get())->tp_name));
  out = constant(r);
  return std::nullopt;
}

}  // namespace dv
