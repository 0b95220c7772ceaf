// The engine's own graph: placeholders (graph inputs with their sources), calls and the output.
// Built during symbolic execution; converted once, at the end, into a torch.fx.GraphModule.
// Regions (torch.utils.checkpoint's calls) are runs of nodes the conversion moves into a subgraph
// called through torch.ops.higher_order.tag_activation_checkpoint, as TorchDynamo's graph holds them.
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

// Nodes [begin, end) traced from one checkpointed function: a subgraph taking the values it reads
// from outside (earlier nodes, placeholders) and giving back those read after it or returned. Or
// a tensor hook's body (hook_result > -2).
struct Region {
  int begin = 0, end = 0;
  std::vector<std::pair<std::string, Ref>> kwargs;  // checkpoint's own (use_reentrant ...), constants
  Ref context_fn;                                   // selective checkpointing's, or null
  // A tensor hook's body instead (tensor_hooks.cpp): node `begin` is the gradient it is given, nodes up
  // to end - 1 its body, node end - 1 the register_hook call on the tensor; hook_result the node it
  // returns (-1: None). -2: a checkpointed function's region.
  int hook_result = -2;
};

class Graph {
 public:
  int add_placeholder(SourcePtr source, Ref example, int step);
  int add_call_function(Ref target, std::vector<ArgTree> args,
                        std::vector<std::pair<std::string, ArgTree>> kwargs, Ref example, int step);
  int add_call_method(std::string method, std::vector<ArgTree> args,
                      std::vector<std::pair<std::string, ArgTree>> kwargs, Ref example, int step);
  const std::vector<GraphNode>& nodes() const { return nodes_; }
  // Regions nest (a checkpoint inside a checkpointed function); added when their function returned.
  void add_region(Region r) { regions_.push_back(std::move(r)); }
  const std::vector<Region>& regions() const { return regions_; }
  int num_placeholders() const { return placeholders_; }
  int num_calls() const { return static_cast<int>(nodes_.size()) - placeholders_; }

  // Whether node `node` is computed, through any chain of calls, from one of `sources` (not
  // through a detach()).
  bool depends_on(int node, const std::vector<int>& sources) const;
  // Whether a call from node `first` on may write a tensor in place (a method or function whose
  // name ends in '_', operator.setitem, an out= argument): data flow alone no longer tells origins.
  bool mutates_from(int first) const;
  // Builds torch.fx.GraphModule; `outputs` are node ids returned as a tuple. New reference or
  // null with a Python error set. Each FX node made from a node has meta["dv_node"] = its index.
  PyObject* to_fx(const std::vector<int>& outputs) const;

 private:
  std::vector<GraphNode> nodes_;
  std::vector<Region> regions_;
  int placeholders_ = 0;
};

std::string placeholder_name(const Source& s);  // L['self'].w -> l_self_w_

}  // namespace dv
