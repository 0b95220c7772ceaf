// torch.inference_mode blocks in the traced code, as TorchDynamo captures them: a block made in the
// trace (a constant mode) is a pair of graph nodes, torch.autograd.grad_mode._enter_inference_mode(mode)
// and _exit_inference_mode(<that node>), around the operators it encloses. While it is traced the
// block is entered for real (c10::InferenceMode), so that example values are made as eager makes
// them there (no autograd, inference tensors); what a capture leaves entered (a break inside the
// block) is left when the trace ends. A break inside the block splits it as TorchDynamo does: the
// graph before the break leaves the block (_exit_inference_mode at its end), the transformed code
// runs the breaking instruction inside the block entered again (dynview._runtime.InferenceModeExit),
// and the resume function's prologue enters it once more, so its graph has the pair of nodes too
// (resume.cpp).
#include "pycache.h"
#include "tensor_match.h"
#include "translator.h"
#include "values/kind.h"

namespace dv {

namespace {

PyObject* grad_mode_attr(const char* name) { return kept_attr("torch.autograd.grad_mode", name); }

}  // namespace

PyObject* inference_mode_class() {
  static PyObject* c = grad_mode_attr("inference_mode");
  return c;
}

bool is_inference_mode(PyObject* o) {
  return o && inference_mode_class() && reinterpret_cast<PyObject*>(Py_TYPE(o)) == inference_mode_class();
}

// BEFORE_WITH on a torch.inference_mode object, made in the trace or read from outside it (its mode
// guarded): (mgr -- exit None).
Translator::Status Translator::enter_inference_mode(Frame& f, const VPtr& mgr) {
  static PyObject* enter = grad_mode_attr("_enter_inference_mode");
  Ref mode = Ref::steal(PyObject_GetAttrString(mgr->obj.get(), "mode"));
  if (!enter || !mode || !PyBool_Check(mode.get()))
    return PyErr_Clear(), brk(f, "DV0009", "a torch.inference_mode object without a bool mode");
  if (mgr->source) {
    const SourcePtr s = Source::attr(mgr->source, "mode");
    add_guard(GuardKind::ID_MATCH, s, mode, f, s->text() + " is " + repr_of(mode.get()));
  }
  ArgTree a;
  a.constant = mode;
  std::vector<ArgTree> args;
  args.push_back(std::move(a));
  const int n = output.graph.add_call_function(Ref::borrow(enter), std::move(args), {}, Ref::borrow(Py_None), cur_step_);
  if (obs_) obs_->on_graph_node(GraphNodeEvent{id_, n, cur_step_, "call_function", "torch.autograd.grad_mode._enter_inference_mode"});
  inference_modes_.push_back(dv::enter_inference_mode(mode.get() == Py_True));
  VPtr exit = make(VK::GradMode);
  exit->name = kInferenceExit;
  exit->node = n;
  exit->flag = mode.get() == Py_True;
  f.stack.back() = exit;
  f.stack.push_back(constant(Ref::borrow(Py_None)));  // `with torch.inference_mode() as m`: m is None
  return std::nullopt;
}

// The block's __exit__ (left normally or by an exception, which it does not suppress): the
// _exit_inference_mode node of its _enter_inference_mode node; the mode entered for the trace is left.
Translator::Status Translator::exit_inference_mode(Frame& f, const VPtr& exit, VPtr& out) {
  static PyObject* exit_fn = grad_mode_attr("_exit_inference_mode");
  if (!exit_fn) return brk(f, "DV0009", "torch.autograd.grad_mode._exit_inference_mode is missing");
  if (inference_modes_.empty()) return brk(f, "DV0009", "leaving a torch.inference_mode block the trace did not enter");
  inference_modes_.pop_back();  // blocks are left in the order they were entered, innermost first
  add_inference_exit_node(exit_fn, exit->node);
  out = constant(Ref::borrow(Py_False));
  return std::nullopt;
}

// A capture stopped at a break inside torch.inference_mode blocks of the root frame: its graph
// leaves them, innermost first (their __exit__ values stay on the stack for the split).
void Translator::leave_inference_blocks(Frame& f) {
  static PyObject* exit_fn = grad_mode_attr("_exit_inference_mode");
  if (!exit_fn) return;
  for (auto it = f.stack.rbegin(); it != f.stack.rend(); ++it) {
    const VPtr& v = *it;
    if (!v || v->kind != VK::GradMode || v->name != kInferenceExit || v->node < 0) continue;
    add_inference_exit_node(exit_fn, v->node);
  }
}

// The _exit_inference_mode(<its _enter_inference_mode node>) node that leaves a block.
void Translator::add_inference_exit_node(PyObject* exit_fn, int enter_node) {
  ArgTree a;
  a.kind = ArgTree::Kind::Node;
  a.node = enter_node;
  std::vector<ArgTree> args;
  args.push_back(std::move(a));
  const int n = output.graph.add_call_function(Ref::borrow(exit_fn), std::move(args), {}, Ref::borrow(Py_None), cur_step_);
  if (obs_) obs_->on_graph_node(GraphNodeEvent{id_, n, cur_step_, "call_function", "torch.autograd.grad_mode._exit_inference_mode"});
}

Translator::~Translator() {
  while (!inference_modes_.empty()) inference_modes_.pop_back();  // left innermost first
  restore_sdpa_backends();
  restore_saved_hooks();
}

}  // namespace dv
