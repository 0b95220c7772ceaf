// torch.utils.checkpoint.checkpoint(function, *args, use_reentrant=None, context_fn=noop_context_fn,
// determinism_check="default", debug=False, early_stop=True, **kwargs), as TorchDynamo captures
// it: the function's call is traced inline and its nodes become a Region of the graph, which the
// conversion to FX moves into a subgraph called through torch.ops.higher_order.tag_activation_checkpoint
// (graph.cpp). The backend recomputes what the subgraph computes in the backward pass (eager's
// checkpoint runs the Python function again; the subgraph holds no Python, so a function with
// effects outside the graph breaks, as in TorchDynamo).
//
// Where the subgraph would not give eager's result, the call breaks and runs eagerly: the reentrant
// variant (use_reentrant=True, or not given) gives outputs that do not require grad when no tensor
// argument does, and it refuses keyword arguments.
#include "tracer/pycache.h"
#include "tracer/tensor_match.h"
#include "tracer/translator.h"
#include "tracer/values/kind.h"

namespace dv {

namespace {


PyObject* noop_context_fn() {
  static PyObject* fn = [] {
    Ref m = Ref::steal(PyImport_ImportModule("torch.utils.checkpoint"));
    PyObject* f = m ? PyObject_GetAttrString(m.get(), "noop_context_fn") : nullptr;  // kept
    if (!f) PyErr_Clear();
    return f;
  }();
  return fn;
}

// A module's attributes the checkpointed function sets (writes from index `from` on): kept when each
// sets the value the attribute already has (Swin's layers set their shift and window size in
// forward, the same ones every call), guarded to stay so -- eager's recompute in backward sets them
// again, which changes nothing. A write that changes one (a call counter) is an effect the recompute
// would repeat: null, or the attribute's name.
const std::string* module_write_changing(Translator& t, Frame& f, size_t from) {
  const auto& writes = t.output.side_effects.attr_writes;
  for (size_t i = from; i < writes.size(); ++i) {
    const auto& w = writes[i];
    if (w.owner->kind != VK::NNModule) continue;  // counted by EffectCount
    if (!w.owner->obj || !w.owner->source || !w.value || w.value->kind != VK::Const) return &w.name;
    Ref now = Ref::steal(PyObject_GetAttrString(w.owner->obj.get(), w.name.c_str()));
    if (!now) return PyErr_Clear(), &w.name;
    if (Py_TYPE(now.get()) != Py_TYPE(w.value->obj.get())) return &w.name;
    const int same = PyObject_RichCompareBool(now.get(), w.value->obj.get(), Py_EQ);
    if (same != 1) return PyErr_Clear(), &w.name;
    SourcePtr src = Source::attr(w.owner->source, w.name);
    t.add_guard(GuardKind::EQUALS_MATCH, src, now, f, src->text() + " == " + repr_of(now.get()));
  }
  return nullptr;
}

bool requires_grad(const VPtr& v) {
  if (v->kind != VK::Tensor || !v->obj) return false;
  Ref r = Ref::steal(PyObject_GetAttrString(v->obj.get(), "requires_grad"));
  if (!r) return PyErr_Clear(), false;
  return r.get() == Py_True;
}

}  // namespace

Status Translator::checkpoint_call(Frame& f, std::vector<VPtr> args, KwArgs kwargs, VPtr& out) {
  if (args.empty()) return brk(f, "DV0004", "torch.utils.checkpoint.checkpoint without the function as its first argument");
  VPtr fn = args[0];
  std::vector<VPtr> fargs(args.begin() + 1, args.end());
  KwArgs fkwargs;
  std::vector<std::pair<std::string, Ref>> own;  // checkpoint's keywords, given to the operator
  Ref context_fn;
  bool reentrant = true, debug = false;  // use_reentrant None or not given: eager's default, True
  for (auto& [k, v] : kwargs) {
    if (k == "use_reentrant" || k == "determinism_check" || k == "debug" || k == "early_stop" || k == "preserve_rng_state") {
      if (v->kind != VK::Const) return brk(f, "DV0004", "torch.utils.checkpoint with " + k + " that is not a constant");
      if (k == "use_reentrant" && v->obj.get() != Py_None) reentrant = PyObject_IsTrue(v->obj.get()) == 1;
      if (k == "debug") debug = PyObject_IsTrue(v->obj.get()) == 1;
      if (k == "use_reentrant" && v->obj.get() == Py_None) continue;
      own.emplace_back(k, v->obj);
    } else if (k == "context_fn") {
      std::optional<Ref> obj = to_python(v, false);
      if (!obj || !*obj) return brk(f, "DV0004", "torch.utils.checkpoint with a context_fn that cannot be given to the graph");
      if (obj->get() != noop_context_fn()) context_fn = *obj;
    } else {
      fkwargs.emplace_back(k, v);
    }
  }
  if (reentrant) {
    // eager's CheckpointFunction.apply: an autograd.Function over the positional arguments
    std::string keys;
    for (const auto& kv : fkwargs) keys += (keys.empty() ? "" : ",") + kv.first;
    if (!keys.empty()) return raise_new(f, PyExc_ValueError, "Unexpected keyword arguments: " + keys, "torch.utils.checkpoint");
    if (context_fn || debug)
      return raise_new(f, PyExc_ValueError, "Passing `context_fn` or `debug` is only supported when use_reentrant=False.",
                       "torch.utils.checkpoint");
    bool any = false;
    for (const VPtr& a : fargs) any |= requires_grad(a);
    if (grad_mode_enabled() && !any)
      return brk(f, "DV0004",
                 "torch.utils.checkpoint(use_reentrant=True) of arguments none of which requires grad: eager's outputs do not "
                 "require grad, the checkpointed graph's would",
                 "pass use_reentrant=False (recommended by PyTorch), or an argument that requires grad");
  }
  const EffectCount before(output.side_effects);
  const size_t writes_before = output.side_effects.attr_writes.size();
  const int begin = output.graph.num_placeholders() + output.graph.num_calls();
  if (Status s = call(f, fn, std::move(fargs), std::move(fkwargs), out)) return s;
  if (const char* what = EffectCount(output.side_effects).changed(before))
    return brk(f, "DV0008", std::string("torch.utils.checkpoint: the checkpointed function ") + what +
                                ", which its recompute in the backward pass would not repeat",
               "keep checkpointed functions free of effects outside their tensors (TorchDynamo breaks here too)");
  if (const std::string* name = module_write_changing(*this, f, writes_before))
    return brk(f, "DV0008", "torch.utils.checkpoint: the checkpointed function sets a module's " + *name +
                                " to a new value, which its recompute in the backward pass would set again",
               "keep checkpointed functions free of effects outside their tensors (TorchDynamo does not capture it either)");
  const int end = output.graph.num_placeholders() + output.graph.num_calls();
  output.graph.add_region(Region{begin, end, std::move(own), std::move(context_fn)});
  return std::nullopt;
}

}  // namespace dv
