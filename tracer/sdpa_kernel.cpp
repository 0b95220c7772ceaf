// torch.nn.attention.sdpa_kernel blocks in the traced code, as TorchDynamo captures them
// (SDPAKernelVariable): entering one is a graph node torch.nn.attention._sdpa_kernel([backends], set_priority)
// whose backends are nodes _backend_from_string(name) (so that the graph names them by string), and
// leaving it is the same node with the backends enabled before it. While it is traced the block is
// entered for real, so that the example values are made as eager makes them there; what a capture
// leaves set (a break inside the block) is put back when the trace ends. A break inside the block
// splits it, as TorchDynamo splits it: the breaking instruction runs inside the block
// (dynview._runtime.SdpaKernelExit, made entered), which the transformed code leaves before the
// resume function enters it again.
#include "pycache.h"
#include "translator.h"
#include "values/kind.h"

namespace dv {

namespace {

PyObject* attention_attr(const char* name) { return kept_attr("torch.nn.attention", name); }

// The Python list of backends an argument names, as sdpa_kernel makes it: one SDPBackend, or a list of
// them without repeats (a tuple is eager's AssertionError: not followed).
Ref backend_list(const VPtr& v) {
  static PyObject* backend_type = attention_attr("SDPBackend");
  if (!backend_type) return Ref();
  auto is_backend = [&](const VPtr& x) {
    return x && x->obj && PyObject_TypeCheck(x->obj.get(), reinterpret_cast<PyTypeObject*>(backend_type)) &&
           (x->kind == VK::Const || x->kind == VK::Object);
  };
  Ref out = Ref::steal(PyList_New(0));
  if (!out) return Ref();
  if (is_backend(v)) {
    if (PyList_Append(out.get(), v->obj.get()) < 0) return Ref();
    return out;
  }
  auto add = [&](PyObject* b) {
    const int seen = PySequence_Contains(out.get(), b);
    return seen == 0 ? PyList_Append(out.get(), b) == 0 : seen == 1;
  };
  if (v->kind == VK::List && !v->lazy) {
    for (const VPtr& x : v->items)
      if (!is_backend(x) || !add(x->obj.get())) return Ref();
    return out;
  }
  if (v->kind == VK::Const && v->obj && PyList_Check(v->obj.get())) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v->obj.get()); ++i) {
      PyObject* b = PyList_GET_ITEM(v->obj.get(), i);
      if (!PyObject_TypeCheck(b, reinterpret_cast<PyTypeObject*>(backend_type)) || !add(b)) return Ref();
    }
    return out;
  }
  return Ref();
}

}  // namespace

// sdpa_kernel(backends, set_priority=False): the manager, holding what it will enable.
Translator::Status Translator::make_sdpa_kernel(Frame& f, std::vector<VPtr>& args, std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out) {
  VPtr backends = args.empty() ? nullptr : args[0];
  VPtr priority = args.size() > 1 ? args[1] : nullptr;
  if (args.size() > 2) return brk(f, "DV0009", "sdpa_kernel with more than two arguments");
  for (auto& [k, v] : kwargs) {
    if (k == "backends" && !backends) backends = v;
    else if (k == "set_priority" && !priority) priority = v;
    else return brk(f, "DV0009", "sdpa_kernel with keyword " + k);
  }
  Ref list = backends ? backend_list(backends) : Ref();
  if (!list) return PyErr_Clear(), brk(f, "DV0009", "sdpa_kernel of backends that are not SDPBackend constants");
  bool set_priority = false;
  if (priority) {
    if (priority->kind != VK::Const || !PyBool_Check(priority->obj.get()))
      return brk(f, "DV0009", "sdpa_kernel with a set_priority that is not a constant bool");
    set_priority = priority->obj.get() == Py_True;
  }
  out = make(VK::GradMode);
  out->name = kSdpaKernel;
  out->obj = list;
  out->flag = set_priority;
  return std::nullopt;
}

namespace {

// _sdpa_kernel([_backend_from_string(name) ...], set_priority): a node of the graph.
void add_sdpa_node(OutputGraph& output, EngineObserver* obs, const CompileId& id, int step, PyObject* backends, bool set_priority) {
  static PyObject* set_fn = attention_attr("_sdpa_kernel");
  static PyObject* from_string = attention_attr("_backend_from_string");
  ArgTree list;
  list.kind = ArgTree::Kind::List;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(backends); ++i) {
    Ref name = Ref::steal(PyObject_GetAttrString(PyList_GET_ITEM(backends, i), "name"));
    if (!name) {
      PyErr_Clear();
      continue;
    }
    ArgTree a;
    a.constant = name;
    std::vector<ArgTree> one;
    one.push_back(std::move(a));
    ArgTree node;
    node.kind = ArgTree::Kind::Node;
    node.node = output.graph.add_call_function(Ref::borrow(from_string), std::move(one), {}, Ref::borrow(Py_None), step);
    if (obs) obs->on_graph_node(GraphNodeEvent{id, node.node, step, "call_function", "torch.nn.attention._backend_from_string"});
    list.items.push_back(std::move(node));
  }
  ArgTree prio;
  prio.constant = Ref::borrow(set_priority ? Py_True : Py_False);
  std::vector<ArgTree> args;
  args.push_back(std::move(list));
  args.push_back(std::move(prio));
  const int n = output.graph.add_call_function(Ref::borrow(set_fn), std::move(args), {}, Ref::borrow(Py_None), step);
  if (obs) obs->on_graph_node(GraphNodeEvent{id, n, step, "call_function", "torch.nn.attention._sdpa_kernel"});
}

bool set_backends(PyObject* backends, bool set_priority) {
  static PyObject* set_fn = attention_attr("_sdpa_kernel");
  Ref r = set_fn ? Ref::steal(PyObject_CallFunction(set_fn, "OO", backends, set_priority ? Py_True : Py_False)) : Ref();
  return static_cast<bool>(r);
}

}  // namespace

// BEFORE_WITH on an sdpa_kernel manager: (mgr -- exit None).
Translator::Status Translator::enter_sdpa_kernel(Frame& f, const VPtr& mgr) {
  static PyObject* current = attention_attr("_cur_sdpa_kernel_backends");
  static PyObject* set_fn = attention_attr("_sdpa_kernel");
  static PyObject* from_string = attention_attr("_backend_from_string");
  if (!current || !set_fn || !from_string) return PyErr_Clear(), brk(f, "DV0009", "torch.nn.attention's sdpa_kernel helpers are missing");
  Ref kw = Ref::steal(Py_BuildValue("{s:O}", "with_priority", mgr->flag ? Py_True : Py_False));
  Ref none = Ref::steal(PyTuple_New(0));
  Ref before = kw && none ? Ref::steal(PyObject_Call(current, none.get(), kw.get())) : Ref();
  if (!before || !PyList_Check(before.get())) return PyErr_Clear(), brk(f, "DV0009", "the SDPA backends enabled now cannot be read");
  if (!set_backends(mgr->obj.get(), mgr->flag)) return raise_current(f, "sdpa_kernel");
  sdpa_restores_.emplace_back(before, mgr->flag);
  add_sdpa_node(output, obs_, id_, cur_step_, mgr->obj.get(), mgr->flag);
  VPtr exit = make(VK::GradMode);
  exit->name = kSdpaExit;
  exit->obj = before;
  exit->flag = mgr->flag;
  exit->self = constant(mgr->obj);  // the block's backends (a split block is entered again with them)
  f.stack.back() = exit;
  f.stack.push_back(make(VK::Dict));  // `with sdpa_kernel(...) as k`: k is the empty dict it yields
  return std::nullopt;
}

// The block's __exit__ (left normally or by an exception, which it does not suppress): the backends
// enabled before it, set again in the graph and for the trace.
Translator::Status Translator::exit_sdpa_kernel(Frame& f, const VPtr& exit, VPtr& out) {
  if (sdpa_restores_.empty()) return brk(f, "DV0009", "leaving an sdpa_kernel block the trace did not enter");
  sdpa_restores_.pop_back();  // blocks are left in the order they were entered, innermost first
  if (!set_backends(exit->obj.get(), exit->flag)) return raise_current(f, "sdpa_kernel.__exit__");
  add_sdpa_node(output, obs_, id_, cur_step_, exit->obj.get(), exit->flag);
  out = constant(Ref::borrow(Py_None));
  return std::nullopt;
}

void Translator::restore_sdpa_backends() {
  unwind_blocks(sdpa_restores_, [](const std::pair<Ref, bool>& before) { return set_backends(before.first.get(), before.second); });
}

}  // namespace dv
