// Graph construction and the one-time conversion to torch.fx (see graph.h).
#include "graph.h"

#include <cctype>

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

PyObject* convert(const ArgTree& a, const std::vector<Ref>& fx) {
  switch (a.kind) {
    case ArgTree::Kind::Node: return Ref::borrow(fx[a.node].get()).release();
    case ArgTree::Kind::Const: return Ref::borrow(a.constant.get()).release();
    case ArgTree::Kind::Tuple:
    case ArgTree::Kind::List: {
      Ref out = Ref::steal(a.kind == ArgTree::Kind::Tuple ? PyTuple_New(a.items.size()) : PyList_New(a.items.size()));
      if (!out) return nullptr;
      for (size_t i = 0; i < a.items.size(); ++i) {
        PyObject* v = convert(a.items[i], fx);
        if (!v) return nullptr;
        if (a.kind == ArgTree::Kind::Tuple) PyTuple_SET_ITEM(out.get(), i, v);
        else PyList_SET_ITEM(out.get(), i, v);
      }
      return out.release();
    }
    case ArgTree::Kind::Dict: {
      Ref out = Ref::steal(PyDict_New());
      for (size_t i = 0; i < a.items.size(); ++i) {
        Ref v = Ref::steal(convert(a.items[i], fx));
        if (!v || PyDict_SetItem(out.get(), a.keys[i].get(), v.get()) < 0) return nullptr;
      }
      return out.release();
    }
    case ArgTree::Kind::Slice: {
      Ref s0 = Ref::steal(convert(a.items[0], fx)), s1 = Ref::steal(convert(a.items[1], fx)),
          s2 = Ref::steal(convert(a.items[2], fx));
      if (!s0 || !s1 || !s2) return nullptr;
      return PySlice_New(s0.get(), s1.get(), s2.get());
    }
  }
  return nullptr;
}

}  // namespace

PyObject* Graph::to_fx(const std::vector<int>& outputs) const {
  Ref fx_mod = Ref::steal(PyImport_ImportModule("torch.fx"));
  Ref nn = Ref::steal(PyImport_ImportModule("torch.nn"));
  if (!fx_mod || !nn) return nullptr;
  Ref graph = Ref::steal(PyObject_CallMethod(fx_mod.get(), "Graph", nullptr));
  if (!graph) return nullptr;
  std::vector<Ref> fx(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const GraphNode& n = nodes_[i];
    Ref node;
    if (n.op == GraphNode::Op::Placeholder) {
      node = Ref::steal(PyObject_CallMethod(graph.get(), "placeholder", "s", n.method.c_str()));
    } else {
      Ref args = Ref::steal(PyTuple_New(n.args.size()));
      for (size_t k = 0; k < n.args.size(); ++k) {
        PyObject* v = convert(n.args[k], fx);
        if (!v) return nullptr;
        PyTuple_SET_ITEM(args.get(), k, v);
      }
      Ref kwargs = Ref::steal(PyDict_New());
      for (const auto& [key, val] : n.kwargs) {
        Ref v = Ref::steal(convert(val, fx));
        if (!v || PyDict_SetItemString(kwargs.get(), key.c_str(), v.get()) < 0) return nullptr;
      }
      if (n.op == GraphNode::Op::CallFunction)
        node = Ref::steal(PyObject_CallMethod(graph.get(), "call_function", "OOO", n.target.get(), args.get(), kwargs.get()));
      else
        node = Ref::steal(PyObject_CallMethod(graph.get(), "call_method", "sOO", n.method.c_str(), args.get(), kwargs.get()));
    }
    if (!node) return nullptr;
    if (n.example) {
      Ref meta = Ref::steal(PyObject_GetAttrString(node.get(), "meta"));
      if (!meta || PyDict_SetItemString(meta.get(), "example_value", n.example.get()) < 0) return nullptr;
    }
    fx[i] = std::move(node);
  }
  Ref outs = Ref::steal(PyTuple_New(outputs.size()));
  for (size_t i = 0; i < outputs.size(); ++i) PyTuple_SET_ITEM(outs.get(), i, Ref::borrow(fx[outputs[i]].get()).release());
  Ref out = Ref::steal(PyObject_CallMethod(graph.get(), "output", "(O)", outs.get()));
  if (!out) return nullptr;
  Ref root = Ref::steal(PyObject_CallMethod(nn.get(), "Module", nullptr));
  if (!root) return nullptr;
  return PyObject_CallMethod(fx_mod.get(), "GraphModule", "OO", root.get(), graph.get());
}

}  // namespace dv
