// torch.autograd.graph.disable_saved_tensors_hooks(message) blocks in the traced code, as
// TorchDynamo captures them (DisabledSavedTensorsHooksVariable): entering one is a graph node
// torch._C._autograd._saved_tensors_hooks_disable(message), and leaving it a node that puts back what
// was set before -- _saved_tensors_hooks_enable(), or _saved_tensors_hooks_disable(the message before).
// While it is traced the block is entered for real (a saved_tensors_hooks block inside it raises
// eager's RuntimeError); what a capture leaves set (a break inside the block) is put back when the
// trace ends. A break inside the block splits it, as TorchDynamo splits it: the breaking
// instruction runs inside the block (dynview._runtime.SavedHooksExit, made entered), which the
// transformed code leaves before the resume function enters it again.
#include "pycache.h"
#include "translator.h"
#include "values/kind.h"

namespace dv {

namespace {

PyObject* autograd_attr(const char* name) { return kept_attr("torch._C._autograd", name); }

// Sets the message (None: hooks enabled) for real, as the block's code does; false: it raised.
bool set_disabled(PyObject* message) {
  static PyObject* disable = autograd_attr("_saved_tensors_hooks_disable");
  static PyObject* enable = autograd_attr("_saved_tensors_hooks_enable");
  if (!disable || !enable) return PyErr_SetString(PyExc_RuntimeError, "torch._C._autograd's saved-tensor hook switches are missing"), false;
  Ref r = Ref::steal(message == Py_None ? PyObject_CallNoArgs(enable) : PyObject_CallOneArg(disable, message));
  return static_cast<bool>(r);
}

// The graph's node for the same (its FX code calls the function itself).
void add_node(OutputGraph& output, EngineObserver* obs, const CompileId& id, int step, PyObject* message) {
  static PyObject* disable = autograd_attr("_saved_tensors_hooks_disable");
  static PyObject* enable = autograd_attr("_saved_tensors_hooks_enable");
  std::vector<ArgTree> args;
  if (message != Py_None) {
    ArgTree a;
    a.constant = Ref::borrow(message);
    args.push_back(std::move(a));
  }
  const bool off = message != Py_None;
  const int n = output.graph.add_call_function(Ref::borrow(off ? disable : enable), std::move(args), {}, Ref::borrow(Py_None), step);
  if (obs)
    obs->on_graph_node(GraphNodeEvent{id, n, step, "call_function",
                                      off ? "torch._C._autograd._saved_tensors_hooks_disable" : "torch._C._autograd._saved_tensors_hooks_enable"});
}

}  // namespace

// disable_saved_tensors_hooks(error_message): the manager, holding the message (a constant str).
Translator::Status Translator::make_saved_hooks_off(Frame& f, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  VPtr message = args.size() == 1 ? args[0] : nullptr;
  for (auto& [k, v] : kwargs) {
    if (k != "error_message" || message) return brk(f, "DV0009", "disable_saved_tensors_hooks with keyword " + k);
    message = v;
  }
  if (args.size() > 1 || !message || message->kind != VK::Const || !PyUnicode_Check(message->obj.get()))
    return brk(f, "DV0009", "disable_saved_tensors_hooks without one constant str message");
  out = make(VK::GradMode);
  out->name = kSavedHooksOff;
  out->obj = message->obj;
  return std::nullopt;
}

// BEFORE_WITH on it: (mgr -- exit None).
Translator::Status Translator::enter_saved_hooks_off(Frame& f, const VPtr& mgr) {
  static PyObject* current = autograd_attr("_saved_tensors_hooks_get_disabled_error_message");
  if (!current) return brk(f, "DV0009", "torch._C._autograd._saved_tensors_hooks_get_disabled_error_message is missing");
  Ref before = Ref::steal(PyObject_CallNoArgs(current));
  if (!before || (before.get() != Py_None && !PyUnicode_Check(before.get())))
    return PyErr_Clear(), brk(f, "DV0009", "the saved-tensor hooks' state cannot be read");
  if (!set_disabled(mgr->obj.get())) return raise_current(f, "disable_saved_tensors_hooks");
  saved_hooks_restores_.push_back(before);
  add_node(output, obs_, id_, cur_step_, mgr->obj.get());
  VPtr exit = make(VK::GradMode);
  exit->name = kSavedHooksExit;
  exit->obj = before;
  exit->self = constant(mgr->obj);  // the message (a split block is entered again with it)
  f.stack.back() = exit;
  f.stack.push_back(constant(Ref::borrow(Py_None)));  // what the generator yields
  return std::nullopt;
}

// The block's __exit__ (left normally or by an exception, which it does not suppress).
Translator::Status Translator::exit_saved_hooks_off(Frame& f, const VPtr& exit, VPtr& out) {
  if (saved_hooks_restores_.empty()) return brk(f, "DV0009", "leaving a disable_saved_tensors_hooks block the trace did not enter");
  saved_hooks_restores_.pop_back();  // innermost first
  if (!set_disabled(exit->obj.get())) return raise_current(f, "disable_saved_tensors_hooks.__exit__");
  add_node(output, obs_, id_, cur_step_, exit->obj.get());
  out = constant(Ref::borrow(Py_None));
  return std::nullopt;
}

void Translator::restore_saved_hooks() {
  unwind_blocks(saved_hooks_restores_, [](const Ref& before) { return set_disabled(before.get()); });
}

}  // namespace dv
