// Tensor.register_hook(fn) on a tensor the graph computes, as TorchDynamo 2.13 captures it: the hook
// is traced as a subgraph taking the gradient (and the values it reads from the graph), and the graph
// calls torch.ops.higher_order.register_hook(tensor, hook_body, *those) where the call is made, whose
// result stands for the tensor from then on. The hook runs in the backward pass as the subgraph, so
// its body may only compute on tensors: a body that changes state outside itself (a list it appends
// the gradient to, an attribute, a global, a tensor in place) breaks, as TorchDynamo's does. The
// handle it returns cannot be used in the trace (remove() breaks; TorchDynamo fails on it). A hook
// on a tensor from the frame (an input, a parameter) is registered for real after the graph, as
// TorchDynamo replays it (SideEffects::tensor_hooks): the forward graph does not depend on it, and
// the hook runs as Python in the backward pass.
#include "tracer/pycache.h"
#include "tracer/tensor_match.h"
#include "tracer/translator.h"
#include "tracer/values/kind.h"

namespace dv {

namespace {

PyObject* register_hook_op() {  // torch._higher_order_ops.register_hook.register_hook_op (kept)
  static PyObject* op = kept_attr("torch._higher_order_ops.register_hook", "register_hook_op");
  return op;
}

}  // namespace

Translator::Status Translator::register_tensor_hook(Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  if (args.size() != 1 || !kwargs.empty()) return brk(f, "DV0004", "Tensor.register_hook() with other than one hook");
  Ref rg = Ref::steal(PyObject_GetAttrString(self->obj.get(), "requires_grad"));
  if (!rg) return PyErr_Clear(), brk(f, "DV0006", "Tensor.register_hook(): the tensor's requires_grad cannot be read");
  if (rg.get() != Py_True)
    return raise_new(f, PyExc_RuntimeError, "cannot register a hook on a tensor that doesn't require gradient", "Tensor.register_hook");
  if (self->source) {  // an input or parameter: registered for real after the graph (codegen.cpp)
    if (pure_body_ > 0) return brk(f, "DV0008", "a tensor hook registers a hook on a tensor from outside it");
    output.side_effects.tensor_hooks.push_back(SideEffects::TensorHook{self, args[0]});
    out = make(VK::HookHandle);
    return std::nullopt;
  }
  if (self->node < 0) return brk(f, "DV0004", "Tensor.register_hook() on a tensor that is not in the graph");
  if (!register_hook_op()) return PyErr_Clear(), brk(f, "DV0004", "Tensor.register_hook(): torch's register_hook operator is missing");
  if (pure_body_ > 0) return brk(f, "DV0004", "Tensor.register_hook() inside a tensor hook");
  // The gradient the hook is given: a tensor like this one, not requiring grad (hooks run with grad
  // mode off); its node is the subgraph's first input.
  static PyObject* empty_like = kept_attr("torch", "empty_like");
  Ref ex = empty_like ? Ref::steal(PyObject_CallOneArg(empty_like, self->obj.get())) : Ref();
  if (!ex) return PyErr_Clear(), brk(f, "DV0006", "Tensor.register_hook(): no example gradient");
  ArgTree of_self;
  of_self.kind = ArgTree::Kind::Node;
  of_self.node = self->node;
  const int begin = output.graph.add_call_function(Ref::borrow(empty_like), {of_self}, {}, ex, cur_step_);
  VPtr grad = make(VK::Tensor);
  grad->obj = ex;
  grad->node = begin;
  grad->device = self->device;
  const EffectCount before(output.side_effects);
  const size_t writes = output.side_effects.attr_writes.size();
  const bool grad_was = grad_mode_enabled();
  set_grad_mode_enabled(false);
  ++pure_body_;
  const int outer_begin = pure_begin_;
  pure_begin_ = begin;
  VPtr r;
  Status s = call(f, args[0], {grad}, {}, r);
  pure_begin_ = outer_begin;
  --pure_body_;
  set_grad_mode_enabled(grad_was);
  if (s) return s;
  if (const char* what = EffectCount(output.side_effects).changed(before); what || output.side_effects.attr_writes.size() != writes)
    return brk(f, "DV0008", std::string("a tensor hook ") + (what ? what : "sets an attribute") +
                                ", which its graph would not do when the hook runs in the backward pass",
               "keep the hook a function of the gradient (TorchDynamo breaks here too)");
  int result = -1;  // None: the gradient is kept
  if (r->kind == VK::Tensor && r->node >= 0) result = r->node;
  else if (!(r->kind == VK::Const && r->obj.get() == Py_None))
    return brk(f, "DV0013", std::string("a tensor hook returning a ") + vk_name(r->kind) + " (a hook returns a tensor or None)");
  // the call itself: its result is the tensor from here on
  const int hooked = output.graph.add_call_function(Ref::borrow(register_hook_op()), {of_self}, {}, self->obj, cur_step_);
  if (obs_) obs_->on_graph_node(GraphNodeEvent{id_, hooked, cur_step_, "call_function", "torch.ops.higher_order.register_hook"});
  Region region;
  region.begin = begin;
  region.end = hooked + 1;
  region.hook_result = result;
  output.graph.add_region(std::move(region));
  self->node = hooked;
  out = make(VK::HookHandle);
  return std::nullopt;
}

bool Translator::pure_body_changes(Frame& f, const bc::Instr& in, Status& s) {
  using N = bc::Name;
  switch (in.name) {
    case N::STORE_ATTR: case N::DELETE_ATTR: case N::STORE_SUBSCR: case N::DELETE_SUBSCR: case N::STORE_SLICE:
    case N::STORE_GLOBAL: case N::DELETE_GLOBAL: case N::STORE_DEREF: case N::DELETE_DEREF:
      s = brk(f, "DV0008", std::string("a tensor hook changes state outside itself (") +
                               std::string(bc::op_name(in.opcode, f.facts->decoded.version)) +
                               "), which its graph would not do when the hook runs in the backward pass",
              "keep the hook a function of the gradient (TorchDynamo breaks here too)");
      return true;
    default: return false;
  }
}

bool Translator::pure_body_method(Frame& f, const VPtr& m, Status& s) {
  static const char* const reads[] = {"get", "keys", "values", "items", "index", "count", "copy", "format", "join", "split",
                                      "startswith", "endswith", "__getitem__", "__contains__", "__len__", nullptr};
  const VPtr& self = m->self;
  if (!self || (m->obj && PyFunction_Check(m->obj.get()))) return false;  // a Python method: inlined, checked as it runs
  if (self->kind == VK::Tensor) {  // in place on a tensor the hook did not make: it would run in the backward pass
    const std::string& n = m->name;
    if (n.size() > 1 && n.back() == '_' && n.rfind("__", 0) != 0 && self->node < pure_begin_) {
      s = brk(f, "DV0008", "a tensor hook changes a tensor from outside itself in place (Tensor." + n + ")",
              "keep the hook a function of the gradient (TorchDynamo breaks here too)");
      return true;
    }
    return false;
  }
  if (self->kind != VK::List && self->kind != VK::Dict && self->kind != VK::Set && self->kind != VK::Instance && self->kind != VK::Iter)
    return false;
  for (const char* const* r = reads; *r; ++r)
    if (m->name == *r) return false;
  s = brk(f, "DV0008", "a tensor hook calls " + m->name + "() of a " + vk_name(self->kind) +
                           ", which may change it: its graph would not when the hook runs in the backward pass",
          "keep the hook a function of the gradient (TorchDynamo breaks here too)");
  return true;
}

}  // namespace dv
