// torch.autocast blocks in the traced code, as TorchDynamo captures them: a block made in the trace
// (constant arguments) is a pair of graph nodes, torch.amp.autocast_mode._enter_autocast(device,
// dtype, enabled, cache_enabled) and _exit_autocast(<that node>), around the operators it encloses.
// While it is traced the block is entered for real, so that example values (computed on fake tensors
// under autocast, calls.cpp) and torch.is_autocast_enabled() see it; what a capture leaves entered
// (a break inside the block) is put back after it (eval_frame.cpp).
#include "codegen.h"
#include "rebuild.h"
#include "pycache.h"
#include "tensor_match.h"
#include "translator.h"
#include "values/kind.h"

namespace dv {

namespace {

PyObject* autocast_attr(const char* name) { return kept_attr("torch.amp.autocast_mode", name); }

}  // namespace

PyObject* autocast_class() {
  static PyObject* c = autocast_attr("autocast");
  return c;
}

PyObject* autocast_exit_class() {
  static PyObject* c = cg::runtime_attr("AutocastExit");  // kept
  return c;
}

// torch.cpu.amp.autocast / torch.cuda.amp.autocast: the deprecated spellings, subclasses that only
// fix the device (their __enter__/__exit__ call autocast's)
bool autocast_spelling(PyObject* cls) {
  static PyObject* const* classes = [] {
    static PyObject* c[3] = {nullptr, nullptr, nullptr};
    c[0] = autocast_class();
    for (int i = 0; i < 2; ++i) {
      Ref m = Ref::steal(PyImport_ImportModule(i == 0 ? "torch.cpu.amp.autocast_mode" : "torch.cuda.amp.autocast_mode"));
      c[i + 1] = m ? PyObject_GetAttrString(m.get(), "autocast") : nullptr;  // kept
      PyErr_Clear();
    }
    return c;
  }();
  return cls && (cls == classes[0] || cls == classes[1] || cls == classes[2]);
}

bool is_autocast(PyObject* o) {
  return o && autocast_class() && autocast_spelling(reinterpret_cast<PyObject*>(Py_TYPE(o)));
}

// BEFORE_WITH on an autocast object, made in the trace or read from outside it (a global, the cell of
// @torch.autocast(...)'s wrapper; its settings guarded): (mgr -- exit mgr). The block is entered for
// real on a twin made from those settings -- the caller's object is not touched while tracing.
Translator::Status Translator::enter_autocast(Frame& f, const VPtr& mgr) {
  static PyObject* enter = autocast_attr("_enter_autocast");
  PyObject* o = mgr->obj.get();
  Ref device = Ref::steal(PyObject_GetAttrString(o, "device"));
  Ref dtype = Ref::steal(PyObject_GetAttrString(o, "fast_dtype"));
  Ref enabled = Ref::steal(PyObject_GetAttrString(o, "_enabled"));
  Ref cache = Ref::steal(PyObject_GetAttrString(o, "_cache_enabled"));
  if (!enter || !device || !dtype || !enabled || !cache)
    return PyErr_Clear(), brk(f, "DV0009", "a torch.autocast object without the state its __enter__ reads");
  std::vector<ArgTree> args;
  const char* names[] = {"device", "fast_dtype", "_enabled", "_cache_enabled"};
  int i = 0;
  for (PyObject* a : {device.get(), dtype.get(), enabled.get(), cache.get()}) {
    if (mgr->source) {
      const SourcePtr s = Source::attr(mgr->source, names[i]);
      add_guard(GuardKind::EQUALS_MATCH, s, Ref::borrow(a), f, s->text() + " == " + repr_of(a));
    }
    ++i;
    ArgTree t;
    t.constant = Ref::borrow(a);
    args.push_back(std::move(t));
  }
  Ref kw = Ref::steal(Py_BuildValue("{s:O,s:O,s:O}", "dtype", dtype.get(), "enabled", enabled.get(), "cache_enabled", cache.get()));
  Ref pos = Ref::steal(PyTuple_Pack(1, device.get()));
  Ref twin = kw && pos ? Ref::steal(PyObject_Call(autocast_class(), pos.get(), kw.get())) : Ref();
  if (!twin) return raise_current(f, "torch.autocast");
  o = twin.get();
  Ref entered = Ref::steal(PyObject_CallMethod(o, "__enter__", nullptr));
  if (!entered) return raise_current(f, "torch.autocast.__enter__");
  // its exit, as the state __enter__ recorded (what a resume function is given when a break splits
  // the block): dynview._runtime.AutocastExit(device, prev, prev_dtype, prev_cache)
  Ref prev = Ref::steal(PyObject_GetAttrString(o, "prev"));
  Ref prev_dtype = Ref::steal(PyObject_GetAttrString(o, "prev_fastdtype"));
  Ref prev_cache = Ref::steal(PyObject_GetAttrString(o, "prev_cache_enabled"));
  Ref leave = prev && prev_dtype && prev_cache && autocast_exit_class()
                  ? Ref::steal(PyObject_CallFunctionObjArgs(autocast_exit_class(), device.get(), prev.get(), prev_dtype.get(),
                                                            prev_cache.get(), nullptr))
                  : Ref();
  if (!leave) {
    PyErr_Clear();
    Ref undone = Ref::steal(PyObject_CallMethod(o, "__exit__", "OOO", Py_None, Py_None, Py_None));
    PyErr_Clear();
    return brk(f, "DV0009", "a torch.autocast object without the state its __exit__ restores");
  }
  const int n = output.graph.add_call_function(Ref::borrow(enter), std::move(args), {}, Ref::borrow(Py_None), cur_step_);
  if (obs_) obs_->on_graph_node(GraphNodeEvent{id_, n, cur_step_, "call_function", "torch.amp.autocast_mode._enter_autocast"});
  VPtr exit = make(VK::GradMode);
  exit->name = kAutocastExit;
  exit->obj = leave;
  exit->node = n;
  f.stack.back() = exit;
  f.stack.push_back(mgr);  // `with torch.autocast(...) as ac`: the object itself
  return std::nullopt;
}

// The block's __exit__ (left normally or by an exception, which it does not suppress): the
// _exit_autocast node of its _enter_autocast node, or in a resume function (the block entered by the
// graph before the break; exit->node -1) dynview._runtime.autocast_exit(<the state it restores>).
Translator::Status Translator::exit_autocast(Frame& f, const VPtr& exit, VPtr& out) {
  static PyObject* exit_fn = autocast_attr("_exit_autocast");
  static PyObject* restore_fn = cg::runtime_attr("autocast_exit");  // kept
  if (!exit_fn || !restore_fn) return brk(f, "DV0009", "torch.amp.autocast_mode._exit_autocast is missing");
  std::vector<ArgTree> args;
  if (exit->node >= 0) {
    ArgTree mode;
    mode.kind = ArgTree::Kind::Node;
    mode.node = exit->node;
    args.push_back(std::move(mode));
  } else {
    Ref state = Ref::steal(PyObject_GetAttrString(exit->obj.get(), "state"));
    if (!state || !PyTuple_Check(state.get())) return PyErr_Clear(), brk(f, "DV0009", "an autocast exit without its state");
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(state.get()); ++i) {
      ArgTree a;
      a.constant = Ref::borrow(PyTuple_GET_ITEM(state.get(), i));
      args.push_back(std::move(a));
    }
  }
  Ref done = Ref::steal(PyObject_CallFunctionObjArgs(exit->obj.get(), Py_None, Py_None, Py_None, nullptr));
  if (!done) return raise_current(f, "torch.autocast.__exit__");
  PyObject* target = exit->node >= 0 ? exit_fn : restore_fn;
  const int n = output.graph.add_call_function(Ref::borrow(target), std::move(args), {}, Ref::borrow(Py_None), cur_step_);
  if (obs_) obs_->on_graph_node(GraphNodeEvent{id_, n, cur_step_, "call_function", exit->node >= 0 ? "torch.amp.autocast_mode._exit_autocast" : "dynview._runtime.autocast_exit"});
  out = constant(Ref::borrow(Py_False));
  return std::nullopt;
}

}  // namespace dv
