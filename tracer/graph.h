// The engine's own graph: placeholders (graph inputs with their sources), calls and the output.
// Built during symbolic execution; converted once, at the end, into a torch.fx.GraphModule.
#pragma once
#include <string>
#include <vector>

#include "source.h"

namespace dv {

// A call argument: a graph node, a Python constant, or a tuple/list/dict/slice of arguments.
struct ArgTree {
  enum class Kind : uint8_t { Node, Const, Tuple, List, Dict, Slice };
  Kind kind = Kind::Const;
  int node = -1;
  Ref constant;
  std::vector<ArgTree> items;  // Tuple/List/Slice(start, stop, step)/Dict values
  std::vector<Ref> keys;       // Dict keys
};

struct GraphNode {
  enum class Op : uint8_t { Placeholder, CallFunction, CallMethod };
  Op op;
  Ref target;            // CallFunction: the callable
  std::string method;    // CallMethod: method name; Placeholder: node name
  std::vector<ArgTree> args;
  std::vector<std::pair<std::string, ArgTree>> kwargs;
  SourcePtr source;      // Placeholder
  Ref example;           // example value (meta tensor) for shape/dtype/device metadata
  int step = -1;         // creating step
};

class Graph {
 public:
  int add_placeholder(SourcePtr source, Ref example, int step);
  int add_call_function(Ref target, std::vector<ArgTree> args,
                        std::vector<std::pair<std::string, ArgTree>> kwargs, Ref example, int step);
  int add_call_method(std::string method, std::vector<ArgTree> args,
                      std::vector<std::pair<std::string, ArgTree>> kwargs, Ref example, int step);
  const std::vector<GraphNode>& nodes() const { return nodes_; }
  int num_placeholders() const { return placeholders_; }
  int num_calls() const { return static_cast<int>(nodes_.size()) - placeholders_; }

  // Builds torch.fx.GraphModule; `outputs` are node ids returned as a tuple. New reference or
  // null with a Python error set.
  PyObject* to_fx(const std::vector<int>& outputs) const;

 private:
  std::vector<GraphNode> nodes_;
  int placeholders_ = 0;
};

std::string placeholder_name(const Source& s);  // L['self'].w -> l_self_w_

}  // namespace dv
