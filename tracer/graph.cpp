// Graph construction and the one-time conversion to torch.fx (see graph.h).
#include "graph.h"
#include "pycache.h"

#include <algorithm>
#include <cctype>
#include <unordered_map>

namespace dv {

std::string placeholder_name(const Source& s) {
  std::string t = s.text(), out;
  for (char c : t) {
    char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (std::isalnum(static_cast<unsigned char>(l))) out += l;
    else if (out.empty() || out.back() != '_') out += '_';
  }
  if (out.empty() || out.back() != '_') out += '_';
  return out;
}

int Graph::add_placeholder(SourcePtr source, Ref example, int step) {
  GraphNode n{GraphNode::Op::Placeholder, {}, placeholder_name(*source), {}, {}, std::move(source),
              std::move(example), step};
  nodes_.push_back(std::move(n));
  ++placeholders_;
  return static_cast<int>(nodes_.size()) - 1;
}

int Graph::add_call_function(Ref target, std::vector<ArgTree> args,
                             std::vector<std::pair<std::string, ArgTree>> kwargs, Ref example, int step) {
  nodes_.push_back(GraphNode{GraphNode::Op::CallFunction, std::move(target), {}, std::move(args), std::move(kwargs),
                             {}, std::move(example), step});
  return static_cast<int>(nodes_.size()) - 1;
}

int Graph::add_call_method(std::string method, std::vector<ArgTree> args,
                           std::vector<std::pair<std::string, ArgTree>> kwargs, Ref example, int step) {
  nodes_.push_back(GraphNode{GraphNode::Op::CallMethod, {}, std::move(method), std::move(args), std::move(kwargs),
                             {}, std::move(example), step});
  return static_cast<int>(nodes_.size()) - 1;
}

namespace {

void note_uses(const ArgTree& a, int user, std::vector<int>& max_use) {
  if (a.kind == ArgTree::Kind::Node) max_use[static_cast<size_t>(a.node)] = std::max(max_use[static_cast<size_t>(a.node)], user);
  for (const ArgTree& x : a.items) note_uses(x, user, max_use);
}

void collect_nodes(const ArgTree& a, std::vector<int>& out) {
  if (a.kind == ArgTree::Kind::Node) out.push_back(a.node);
  for (const ArgTree& x : a.items) collect_nodes(x, out);
}

bool set_meta(PyObject* node, const char* key, PyObject* value) {
  Ref meta = Ref::steal(PyObject_GetAttrString(node, "meta"));
  return meta && PyDict_SetItemString(meta.get(), key, value) == 0;
}

// One FX graph being built: the root's, or a region's subgraph (its parent the graph that calls
// it). Node ids are looked up in `env`; a subgraph's values from outside are its placeholders.
class Emitter {
 public:
  struct Shared {
    const std::vector<GraphNode>& nodes;
    std::vector<const Region*> regions;  // outermost first: by begin, then longest, then latest added
    std::vector<int> max_use;            // the last node that reads each node
    std::vector<char> is_output;         // returned by the root graph
    PyObject* fx_mod;
    PyObject* nn;
  };
  Emitter(Shared& sh, PyObject* graph, PyObject* owner, Emitter* parent) : sh_(sh), graph_(graph), owner_(owner), parent_(parent) {}

  // The FX node of node `id` here (borrowed), or null with an error set.
  PyObject* lookup(int id) {
    auto it = env_.find(id);
    if (it != env_.end()) return it->second.get();
    PyErr_Format(PyExc_RuntimeError, "dynview: graph node %d read before it is made", id);
    return nullptr;
  }

  // Nodes [lo, hi); regions inside, after position `after` in the outermost-first list, become calls.
  bool emit_range(int lo, int hi, size_t after) {
    for (int i = lo; i < hi;) {
      const GraphNode& n = sh_.nodes[static_cast<size_t>(i)];
      size_t pos = sh_.regions.size();
      for (size_t k = after; k < sh_.regions.size(); ++k)
        if (sh_.regions[k]->begin == i && sh_.regions[k]->end <= hi && sh_.regions[k]->end > i) {
          pos = k;
          break;
        }
      if (pos < sh_.regions.size()) {
        if (!emit_region(pos)) return false;
        i = sh_.regions[pos]->end;
        continue;
      }
      if (n.op != GraphNode::Op::Placeholder || !parent_) {  // a subgraph gets placeholders as inputs
        if (!emit_node(i)) return false;
      }
      ++i;
    }
    return true;
  }

  bool emit_node(int i) {
    const GraphNode& n = sh_.nodes[static_cast<size_t>(i)];
    Ref node;
    if (n.op == GraphNode::Op::Placeholder) {
      node = Ref::steal(PyObject_CallMethod(graph_, "placeholder", "s", n.method.c_str()));
    } else {
      Ref args = Ref::steal(PyTuple_New(n.args.size()));
      for (size_t k = 0; k < n.args.size(); ++k) {
        PyObject* v = convert(n.args[k]);
        if (!v) return false;
        PyTuple_SET_ITEM(args.get(), k, v);
      }
      Ref kwargs = Ref::steal(PyDict_New());
      for (const auto& [key, val] : n.kwargs) {
        Ref v = Ref::steal(convert(val));
        if (!v || PyDict_SetItemString(kwargs.get(), key.c_str(), v.get()) < 0) return false;
      }
      if (n.op == GraphNode::Op::CallFunction)
        node = Ref::steal(PyObject_CallMethod(graph_, "call_function", "OOO", n.target.get(), args.get(), kwargs.get()));
      else
        node = Ref::steal(PyObject_CallMethod(graph_, "call_method", "sOO", n.method.c_str(), args.get(), kwargs.get()));
    }
    return keep(i, std::move(node), n.example.get());
  }

  // `node`, the FX node made for node i (null: failed), with its example value and index as meta.
  bool keep(int i, Ref node, PyObject* example) {
    if (!node) return false;
    if (example && !set_meta(node.get(), "example_value", example)) return false;
    Ref index = Ref::steal(PyLong_FromLong(i));
    if (!index || !set_meta(node.get(), "dv_node", index.get())) return false;
    env_[i] = std::move(node);
    return true;
  }

  PyObject* convert(const ArgTree& a) {
    switch (a.kind) {
      case ArgTree::Kind::Node: return Py_XNewRef(lookup(a.node));
      case ArgTree::Kind::Const: {
        // a Python type where torch takes a dtype: that dtype (FX cannot print the type itself)
        PyObject* c = a.constant.get();
        if (Ref dtype = dtype_of_python_type(c)) return dtype.release();
        return Ref::borrow(c).release();
      }
      case ArgTree::Kind::Tuple:
      case ArgTree::Kind::List: {
        Ref out = Ref::steal(a.kind == ArgTree::Kind::Tuple ? PyTuple_New(a.items.size()) : PyList_New(a.items.size()));
        if (!out) return nullptr;
        for (size_t i = 0; i < a.items.size(); ++i) {
          PyObject* v = convert(a.items[i]);
          if (!v) return nullptr;
          if (a.kind == ArgTree::Kind::Tuple) PyTuple_SET_ITEM(out.get(), i, v);
          else PyList_SET_ITEM(out.get(), i, v);
        }
        return out.release();
      }
      case ArgTree::Kind::Dict: {
        Ref out = Ref::steal(PyDict_New());
        for (size_t i = 0; i < a.items.size(); ++i) {
          Ref v = Ref::steal(convert(a.items[i]));
          if (!v || PyDict_SetItem(out.get(), a.keys[i].get(), v.get()) < 0) return nullptr;
        }
        return out.release();
      }
      case ArgTree::Kind::Slice: {
        Ref s0 = Ref::steal(convert(a.items[0])), s1 = Ref::steal(convert(a.items[1])), s2 = Ref::steal(convert(a.items[2]));
        if (!s0 || !s1 || !s2) return nullptr;
        return PySlice_New(s0.get(), s1.get(), s2.get());
      }
    }
    return nullptr;
  }

 private:
  // Graph inputs first read inside a region [lo, hi) are the root's.
  bool root_placeholders(int lo, int hi) {
    if (!parent_)
      for (int i = lo; i < hi; ++i)
        if (sh_.nodes[static_cast<size_t>(i)].op == GraphNode::Op::Placeholder && !emit_node(i)) return false;
    return true;
  }

  // The inputs of a subgraph made of nodes [lo, hi) of a region that begins at `begin`: the values
  // they read from before it, and placeholders, in the order first read.
  std::vector<int> region_inputs(int lo, int begin, int hi) const {
    std::vector<int> inputs, refs;
    for (int i = lo; i < hi; ++i) {
      const GraphNode& n = sh_.nodes[static_cast<size_t>(i)];
      if (n.op == GraphNode::Op::Placeholder) continue;
      refs.clear();
      for (const ArgTree& a : n.args) collect_nodes(a, refs);
      for (const auto& kv : n.kwargs) collect_nodes(kv.second, refs);
      for (int id : refs)
        if ((id < begin || sh_.nodes[static_cast<size_t>(id)].op == GraphNode::Op::Placeholder) &&
            std::find(inputs.begin(), inputs.end(), id) == inputs.end())
          inputs.push_back(id);
    }
    return inputs;
  }

  // Each input a placeholder of the subgraph `sub` (named as the outer node), and the outer node
  // the operator's argument at `offset + k` of `hop_args`.
  bool bind_inputs(Emitter& child, PyObject* sub, const std::vector<int>& inputs, PyObject* hop_args, Py_ssize_t offset) {
    for (size_t k = 0; k < inputs.size(); ++k) {
      PyObject* outer = lookup(inputs[k]);
      if (!outer) return false;
      Ref name = Ref::steal(PyObject_GetAttrString(outer, "name"));
      Ref ph = name ? Ref::steal(PyObject_CallMethod(sub, "placeholder", "O", name.get())) : Ref();
      if (!ph) return false;
      const GraphNode& src = sh_.nodes[static_cast<size_t>(inputs[k])];
      if (src.example && !set_meta(ph.get(), "example_value", src.example.get())) return false;
      child.env_[inputs[k]] = std::move(ph);
      PyTuple_SET_ITEM(hop_args, offset + static_cast<Py_ssize_t>(k), Py_NewRef(outer));
    }
    return true;
  }

  // Region `pos` as TorchDynamo's graph holds a checkpointed function: wrap_body_N = GraphModule of
  // its nodes; tag_activation_checkpoint(wrap_body_N, *inputs, **checkpoint_kwargs); getitems.
  bool emit_region(size_t pos) {
    const Region& r = *sh_.regions[pos];
    if (r.hook_result > -2) return emit_hook(pos);
    if (!root_placeholders(r.begin, r.end)) return false;
    const std::vector<int> inputs = region_inputs(r.begin, r.begin, r.end);
    std::vector<int> outputs;  // read after it, or returned
    for (int i = r.begin; i < r.end; ++i)
      if (sh_.nodes[static_cast<size_t>(i)].op != GraphNode::Op::Placeholder &&
          (sh_.max_use[static_cast<size_t>(i)] >= r.end || sh_.is_output[static_cast<size_t>(i)]))
        outputs.push_back(i);
    Ref sub = Ref::steal(PyObject_CallMethod(sh_.fx_mod, "Graph", nullptr));
    Ref sub_owner = Ref::steal(PyObject_CallMethod(sh_.nn, "Module", nullptr));
    if (!sub || !sub_owner) return false;
    Emitter child(sh_, sub.get(), sub_owner.get(), this);
    Ref hop_args = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(inputs.size()) + 1));
    if (!hop_args || !bind_inputs(child, sub.get(), inputs, hop_args.get(), 1)) return false;
    if (!child.emit_range(r.begin, r.end, pos + 1)) return false;
    Ref outs = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(outputs.size())));
    Ref examples = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(outputs.size())));
    for (size_t k = 0; k < outputs.size(); ++k) {
      PyObject* o = child.lookup(outputs[k]);
      if (!o) return false;
      PyTuple_SET_ITEM(outs.get(), static_cast<Py_ssize_t>(k), Py_NewRef(o));
      PyObject* ex = sh_.nodes[static_cast<size_t>(outputs[k])].example.get();
      PyTuple_SET_ITEM(examples.get(), static_cast<Py_ssize_t>(k), Py_NewRef(ex ? ex : Py_None));
    }
    Ref out = Ref::steal(PyObject_CallMethod(sub.get(), "output", "(O)", outs.get()));
    Ref gm = out ? Ref::steal(PyObject_CallMethod(sh_.fx_mod, "GraphModule", "OO", sub_owner.get(), sub.get())) : Ref();
    if (!gm) return false;
    if (r.context_fn) {  // selective checkpointing: where TorchDynamo keeps it for the operator
      Ref meta = Ref::steal(PyObject_GetAttrString(gm.get(), "meta"));
      if (!meta || PyDict_SetItemString(meta.get(), "_checkpoint_context_fn", r.context_fn.get()) < 0) return false;
    }
    const std::string attr = "wrap_body_" + std::to_string(bodies_++);
    if (PyObject_SetAttrString(owner_, attr.c_str(), gm.get()) < 0) return false;
    Ref get = Ref::steal(PyObject_CallMethod(graph_, "get_attr", "s", attr.c_str()));
    if (!get) return false;
    PyTuple_SET_ITEM(hop_args.get(), 0, get.release());
    static PyObject* hop = [] {
      Ref m = Ref::steal(PyImport_ImportModule("torch._higher_order_ops.wrap"));
      return m ? PyObject_GetAttrString(m.get(), "tag_activation_checkpoint") : nullptr;  // kept
    }();
    static PyObject* getitem = [] {
      Ref m = Ref::steal(PyImport_ImportModule("operator"));
      return m ? PyObject_GetAttrString(m.get(), "getitem") : nullptr;  // kept
    }();
    if (!hop || !getitem) return false;
    Ref kwargs = Ref::steal(PyDict_New());
    for (const auto& [k, v] : r.kwargs)
      if (PyDict_SetItemString(kwargs.get(), k.c_str(), v.get()) < 0) return false;
    Ref call = Ref::steal(PyObject_CallMethod(graph_, "call_function", "OOO", hop, hop_args.get(), kwargs.get()));
    if (!call || !set_meta(call.get(), "example_value", examples.get())) return false;
    for (size_t k = 0; k < outputs.size(); ++k) {
      Ref idx = Ref::steal(Py_BuildValue("(On)", call.get(), static_cast<Py_ssize_t>(k)));
      Ref item = idx ? Ref::steal(PyObject_CallMethod(graph_, "call_function", "OO", getitem, idx.get())) : Ref();
      if (!keep(outputs[k], std::move(item), PyTuple_GET_ITEM(examples.get(), static_cast<Py_ssize_t>(k)))) return false;
    }
    return true;
  }

  // Region `pos` as TorchDynamo's graph holds a tensor hook: hook_body_N = GraphModule(grad, *the
  // values its body reads from before it) returning the new gradient or None; the tensor from then
  // on is torch.ops.higher_order.register_hook(tensor, hook_body_N, *those values).
  bool emit_hook(size_t pos) {
    const Region& r = *sh_.regions[pos];
    const int last = r.end - 1;  // the register_hook call
    if (!root_placeholders(r.begin, last)) return false;
    const std::vector<int> inputs = region_inputs(r.begin + 1, r.begin, last);  // (the gradient is its own input)
    const GraphNode& call_node = sh_.nodes[static_cast<size_t>(last)];
    if (call_node.args.empty() || call_node.args[0].kind != ArgTree::Kind::Node) {
      PyErr_SetString(PyExc_RuntimeError, "dynview: a register_hook node without its tensor");
      return false;
    }
    PyObject* tensor = lookup(call_node.args[0].node);
    if (!tensor) return false;
    Ref sub = Ref::steal(PyObject_CallMethod(sh_.fx_mod, "Graph", nullptr));
    Ref sub_owner = Ref::steal(PyObject_CallMethod(sh_.nn, "Module", nullptr));
    if (!sub || !sub_owner) return false;
    Emitter child(sh_, sub.get(), sub_owner.get(), this);
    Ref grad = Ref::steal(PyObject_CallMethod(sub.get(), "placeholder", "s", "grad"));
    if (!grad) return false;
    const GraphNode& g = sh_.nodes[static_cast<size_t>(r.begin)];
    if (g.example && !set_meta(grad.get(), "example_value", g.example.get())) return false;
    child.env_[r.begin] = std::move(grad);
    Ref hop_args = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(inputs.size()) + 2));
    if (!hop_args) return false;
    PyTuple_SET_ITEM(hop_args.get(), 0, Py_NewRef(tensor));
    if (!bind_inputs(child, sub.get(), inputs, hop_args.get(), 2)) return false;
    if (!child.emit_range(r.begin + 1, last, pos + 1)) return false;
    PyObject* result = r.hook_result >= 0 ? child.lookup(r.hook_result) : Py_None;
    if (!result) return false;
    Ref out = Ref::steal(PyObject_CallMethod(sub.get(), "output", "(O)", result));
    Ref gm = out ? Ref::steal(PyObject_CallMethod(sh_.fx_mod, "GraphModule", "OO", sub_owner.get(), sub.get())) : Ref();
    if (!gm) return false;
    const std::string attr = "hook_body_" + std::to_string(hooks_++);
    if (PyObject_SetAttrString(owner_, attr.c_str(), gm.get()) < 0) return false;
    Ref get = Ref::steal(PyObject_CallMethod(graph_, "get_attr", "s", attr.c_str()));
    if (!get) return false;
    PyTuple_SET_ITEM(hop_args.get(), 1, get.release());
    Ref no_kwargs = Ref::steal(PyDict_New());
    Ref call = no_kwargs ? Ref::steal(PyObject_CallMethod(graph_, "call_function", "OOO", call_node.target.get(), hop_args.get(),
                                                          no_kwargs.get()))
                         : Ref();
    return keep(last, std::move(call), call_node.example.get());
  }

  Shared& sh_;
  PyObject* graph_;
  PyObject* owner_;  // the module whose attributes the subgraphs are
  Emitter* parent_;
  std::unordered_map<int, Ref> env_;
  int bodies_ = 0;
  int hooks_ = 0;
};

}  // namespace

bool Graph::depends_on(int node, const std::vector<int>& sources) const {
  if (node < 0 || static_cast<size_t>(node) >= nodes_.size()) return true;  // not a node: cannot tell
  std::vector<char> seen(nodes_.size(), 0);
  std::vector<int> todo{node}, refs;
  while (!todo.empty()) {
    const int n = todo.back();
    todo.pop_back();
    if (seen[static_cast<size_t>(n)]) continue;
    seen[static_cast<size_t>(n)] = 1;
    if (std::find(sources.begin(), sources.end(), n) != sources.end()) return true;
    const GraphNode& g = nodes_[static_cast<size_t>(n)];
    if (g.op == GraphNode::Op::CallMethod && g.method == "detach") continue;  // x.detach() carries nothing of x back
    refs.clear();
    for (const ArgTree& a : nodes_[static_cast<size_t>(n)].args) collect_nodes(a, refs);
    for (const auto& kv : nodes_[static_cast<size_t>(n)].kwargs) collect_nodes(kv.second, refs);
    todo.insert(todo.end(), refs.begin(), refs.end());
  }
  return false;
}

bool Graph::mutates_from(int first) const {
  static PyObject* setitem = [] {
    Ref m = Ref::steal(PyImport_ImportModule("operator"));
    PyObject* s = m ? PyObject_GetAttrString(m.get(), "setitem") : nullptr;  // kept
    if (!s) PyErr_Clear();
    return s;
  }();
  auto in_place = [](const std::string& name) {
    return !name.empty() && name.back() == '_' && name.rfind("__", 0) != 0;
  };
  for (size_t i = static_cast<size_t>(std::max(first, 0)); i < nodes_.size(); ++i) {
    const GraphNode& n = nodes_[i];
    if (n.op == GraphNode::Op::Placeholder) continue;
    for (const auto& kv : n.kwargs)
      if (kv.first == "out") return true;
    if (n.op == GraphNode::Op::CallMethod) {
      if (in_place(n.method) || n.method == "__setitem__") return true;
      continue;
    }
    if (n.target.get() == setitem) return true;
    Ref name = Ref::steal(PyObject_GetAttrString(n.target.get(), "__name__"));
    if (!name || !PyUnicode_Check(name.get())) {
      PyErr_Clear();
      return true;  // a callable without a name: it may
    }
    if (in_place(str_of(name.get()))) return true;
  }
  return false;
}

PyObject* Graph::to_fx(const std::vector<int>& outputs) const {
  Ref fx_mod = Ref::steal(PyImport_ImportModule("torch.fx"));
  Ref nn = Ref::steal(PyImport_ImportModule("torch.nn"));
  if (!fx_mod || !nn) return nullptr;
  Ref graph = Ref::steal(PyObject_CallMethod(fx_mod.get(), "Graph", nullptr));
  Ref root = Ref::steal(PyObject_CallMethod(nn.get(), "Module", nullptr));
  if (!graph || !root) return nullptr;
  Emitter::Shared sh{nodes_, {}, std::vector<int>(nodes_.size(), -1), std::vector<char>(nodes_.size(), 0), fx_mod.get(), nn.get()};
  for (size_t i = 0; i < regions_.size(); ++i)
    if (regions_[i].end > regions_[i].begin) sh.regions.push_back(&regions_[i]);
  std::stable_sort(sh.regions.begin(), sh.regions.end(), [&](const Region* a, const Region* b) {
    if (a->begin != b->begin) return a->begin < b->begin;
    if (a->end != b->end) return a->end > b->end;
    return a > b;  // the same nodes twice (checkpoint of a function that only checkpoints): the later is outer
  });
  for (size_t j = 0; j < nodes_.size(); ++j) {
    for (const ArgTree& a : nodes_[j].args) note_uses(a, static_cast<int>(j), sh.max_use);
    for (const auto& kv : nodes_[j].kwargs) note_uses(kv.second, static_cast<int>(j), sh.max_use);
  }
  for (int o : outputs) sh.is_output[static_cast<size_t>(o)] = 1;
  Emitter root_emitter(sh, graph.get(), root.get(), nullptr);
  if (!root_emitter.emit_range(0, static_cast<int>(nodes_.size()), 0)) return nullptr;
  Ref outs = Ref::steal(PyTuple_New(outputs.size()));
  for (size_t i = 0; i < outputs.size(); ++i) {
    PyObject* o = root_emitter.lookup(outputs[i]);
    if (!o) return nullptr;
    PyObject* ex = nodes_[static_cast<size_t>(outputs[i])].example.get();
    if (ex && Py_TYPE(ex) == reinterpret_cast<PyTypeObject*>(py().sym_float.get())) {
      // A symbolic float leaves the graph as a 0-d float64 tensor (the transformed code reads it
      // with item()), as TorchDynamo returns one: backends (Inductor) return tensors and ints only.
      // Made as ones(()) * v: Inductor 2.13 bakes the value of torch.scalar_tensor(2.0 * s) at
      // compile time (torch.compile returns the first call's float then).
      static PyObject* ones = kept_attr("torch", "ones");
      static PyObject* mul = kept_attr("operator", "mul");
      static PyObject* float64 = kept_attr("torch", "float64");
      if (!ones || !mul || !float64) return nullptr;
      Ref ones_args = Ref::steal(Py_BuildValue("(())"));
      Ref kwargs = Ref::steal(Py_BuildValue("{s:O}", "dtype", float64));
      Ref one = ones_args && kwargs ? Ref::steal(PyObject_CallMethod(graph.get(), "call_function", "OOO", ones, ones_args.get(), kwargs.get()))
                                    : Ref();
      Ref args = one ? Ref::steal(PyTuple_Pack(2, one.get(), o)) : Ref();
      Ref wrapped = args ? Ref::steal(PyObject_CallMethod(graph.get(), "call_function", "OO", mul, args.get())) : Ref();
      if (!wrapped) return nullptr;
      PyTuple_SET_ITEM(outs.get(), i, wrapped.release());
      continue;
    }
    PyTuple_SET_ITEM(outs.get(), i, Py_NewRef(o));
  }
  Ref out = Ref::steal(PyObject_CallMethod(graph.get(), "output", "(O)", outs.get()));
  if (!out) return nullptr;
  return PyObject_CallMethod(fx_mod.get(), "GraphModule", "OO", root.get(), graph.get());
}

}  // namespace dv
