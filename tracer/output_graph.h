// The output graph of a capture (TorchDynamo's OutputGraph): what the interpreter produces as it
// runs -- the FX graph, the guards, the graph inputs with the real objects behind them, the side
// effects on objects from outside the frame, and the dynamic-shape state (the ShapeEnv and fake
// mode of python/dynview/_shapes.py). It outlives the interpreter: a CaptureResult owns it, and the
// later stages (backend, shape guards, codegen, the cache entry) read it from there.
#pragma once
#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "graph.h"
#include "guards.h"
#include "values.h"

namespace dv {

// Writes to objects that exist outside the frame, replayed by the transformed code after the graph
// runs, in order. Later reads in the trace see them.
struct SideEffects {
  struct AttrWrite {  // self.calls += 1, self.cache = y; del self.cache
    VPtr owner;
    std::string name;
    VPtr value;  // null: the attribute deleted (DELETE_ATTR)
  };
  std::vector<AttrWrite> attr_writes;
  struct GlobalWrite {  // global mode; mode = "eval" (STORE_GLOBAL, in the frame or a function it calls)
    Ref globals;        // the module's globals dict the name is stored in (Strong reference)
    std::string name;
    VPtr value;
  };
  std::vector<GlobalWrite> global_writes;
  // The value last stored to globals[name] in the trace, or null.
  VPtr global_written(PyObject* globals, const std::string& name) const {
    for (auto w = global_writes.rbegin(); w != global_writes.rend(); ++w)
      if (w->globals.get() == globals && w->name == name) return w->value;
    return nullptr;
  }
  std::vector<VPtr> mutated_lists;  // lists from outside the frame changed by append/extend/pop/insert
  std::vector<VPtr> mutated_dicts;  // dicts from outside the frame (the frame's **kwargs too) changed
  // Sets from outside the frame (ValueBuilder::wrap_set): the trace's copy and the items the real set
  // had; one whose copy differs at the end is written back (clear, then update with the new items).
  struct OutsideSet {
    VPtr value;
    Ref before;
  };
  std::vector<OutsideSet> outside_sets;
  bool set_changed(const OutsideSet& s) const {
    const int same = PyObject_RichCompareBool(s.value->obj.get(), s.before.get(), Py_EQ);
    if (same < 0) PyErr_Clear();
    return same != 1;
  }
  bool any_set_changed() const {
    for (const OutsideSet& s : outside_sets)
      if (set_changed(s)) return true;
    return false;
  }
  std::vector<VPtr> written_cells;  // the root frame's free variables (real cells) written by STORE_DEREF
  // Tensor.register_hook(hook) on a tensor from the frame (an input, a parameter): registered after
  // the graph, in order, as TorchDynamo replays it (the forward graph does not depend on it)
  struct TensorHook {
    VPtr tensor, hook;
  };
  std::vector<TensorHook> tensor_hooks;
  // Iterators from the frame (tuple iterators: value_builder.cpp): the `pos` items the trace took are
  // taken from the real one after the graph.
  std::vector<VPtr> advanced_iters;
  bool any_advanced() const {
    for (const VPtr& it : advanced_iters)
      if (it->pos > 0) return true;
    return false;
  }
  bool empty() const {
    return attr_writes.empty() && global_writes.empty() && mutated_lists.empty() && mutated_dicts.empty() && written_cells.empty() &&
           tensor_hooks.empty() && !any_advanced() && !any_set_changed();
  }
  void note_mutation(const VPtr& container) {  // a list or dict from outside the frame was changed
    auto& v = container->kind == VK::Dict ? mutated_dicts : mutated_lists;
    if (std::find(v.begin(), v.end(), container) == v.end()) v.push_back(container);
  }
};

// The effects on objects from outside the frame a trace has made so far, to tell whether a call made
// any (a checkpointed function, a tensor hook: their bodies run again, or later, without Python).
// Attribute writes of nn.Modules are not counted here (checkpoint.cpp tells them apart).
struct EffectCount {
  size_t attrs, globals, lists, dicts, cells, sets, hooks;
  long iters;
  explicit EffectCount(const SideEffects& s)
      : attrs(0), globals(s.global_writes.size()), lists(s.mutated_lists.size()),
        dicts(s.mutated_dicts.size()), cells(s.written_cells.size()), sets(0), hooks(s.tensor_hooks.size()), iters(0) {
    for (const auto& w : s.attr_writes) attrs += w.owner->kind == VK::NNModule ? 0 : 1;  // modules': module_writes_kept
    for (const auto& o : s.outside_sets) sets += s.set_changed(o) ? 1 : 0;
    for (const VPtr& it : s.advanced_iters) iters += it->pos;
  }
  const char* changed(const EffectCount& before) const {
    if (attrs != before.attrs) return "sets an attribute of an object from outside it";
    if (globals != before.globals) return "writes a global";
    if (lists != before.lists || dicts != before.dicts || sets != before.sets) return "changes a container from outside it";
    if (cells != before.cells) return "writes a free variable of the compiled function";
    if (iters != before.iters) return "advances an iterator from outside it";
    if (hooks != before.hooks) return "registers a hook on a tensor from outside it";
    return nullptr;
  }
};

class OutputGraph {
 public:
  Graph graph;
  std::vector<Guard> guards;
  std::vector<std::pair<SourcePtr, int>> inputs;  // graph placeholders: (source, node)
  std::vector<Ref> input_objects;                 // the real objects behind the placeholders
  SideEffects side_effects;
  // Draws of Python's random module the trace met (random.uniform(0, 1)), in order: (the bound
  // method, its argument tuple) each. The transformed code makes them before its graph, as eager
  // makes them, and the trace's values read them from there (Source::Kind::RandomDraw).
  std::vector<Ref> random_draws;
  // Dict keys that are values of the trace (tensors, nn.Modules; Translator::key_of): the key object
  // the trace's dicts hold -> the value, which codegen rebuilds for the key.
  std::unordered_map<PyObject*, VPtr> key_values;
  // Modules built in the trace whose Python __init__ was inlined (Translator::made_module_attrs):
  // the attributes the trace set on each, in order, and which of those entries are buffers
  // (register_buffer: 1 persistent, 2 not). Codegen makes such a module again from them where it
  // leaves the graph.
  MadeModuleAttrs made_module_attrs;
  std::unordered_map<PyObject*, std::vector<std::pair<size_t, int>>> made_module_buffers;

  // Adds a guard unless one of the same kind on the same source exists; returns it (null: a duplicate).
  Guard* add_guard(GuardKind kind, SourcePtr source, Ref value, int step, int line, std::string file, std::string text);
  // A graph input read from `source`: `example` is what the graph sees (meta or fake), `real` the object.
  int add_input(SourcePtr source, Ref example, Ref real, int step);

  // Dynamic shapes: set up when an input is symbolic in this compile.
  bool dynamic() const { return static_cast<bool>(shapes_); }
  PyObject* shapes() const { return shapes_.get(); }  // the DynamicShapes object (borrowed) or null
  bool start_dynamic(std::string& why);               // creates the DynamicShapes
  int sym_slot(SourcePtr source);                     // numbers a source its symbols read
  // After each step: ShapeEnv guards added by that step are attributed to it (step, file:line).
  bool shape_guards_pending() const {
    return shape_guard_list_ && PyList_GET_SIZE(shape_guard_list_.get()) != shape_guards_seen_;
  }
  // Notes the guards `step` added; true: one of them reads a random draw (ValueBuilder::wrap_draw).
  bool watch_shape_guards(int step, int line, const std::string& file);
  std::string root_file;  // where set-up shape guards are reported
  bool has_unbacked_symbols() const;  // a size depends on tensor values (unbacked symbols)

  // The backend call, inside a TracingContext as TorchDynamo's: fake example inputs with symbolic sizes
  // (dynamic) or with the real ones (static; the "eager" backend gets the real inputs). fullgraph lets a
  // static compile's fake mode make data-dependent sizes. New reference or null (error set).
  PyObject* compile_with_backend(PyObject* backend, PyObject* gm, bool fullgraph);
  // The ShapeEnv's guards, appended to `guards` once the backend ran. False: `why` says which failed.
  bool add_shape_guards(std::string& why);

 private:
  Ref shapes_;
  std::vector<SourcePtr> sym_sources_;
  Ref shape_guard_list_;  // the ShapeEnv's guard list, watched after each step
  Py_ssize_t shape_guards_seen_ = 0;
  std::unordered_map<int, std::string> shape_files_;  // step -> the file of the line noted with it
};

}  // namespace dv
