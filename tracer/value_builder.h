// The value builder (TorchDynamo's VariableBuilder): Python objects reached from sources become
// Values with guards; tensors become graph inputs of the output graph. One per capture, owned by
// the interpreter (Translator), whose step and observer it reports with.
#pragma once
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "values.h"

namespace dv {

class Translator;
struct Frame;

bool is_optimizer(PyObject* o);  // a torch.optim.Optimizer (optimizer.cpp)

// What earlier compiles of a code object saw of its inputs, by source text (TorchDynamo's automatic
// dynamic shapes): a size that differs between compiles becomes symbolic from then on (all sizes when
// the rank changes), and so does an int or float argument whose value changes.
struct SeenInput {
  bool is_int = false;
  bool is_float = false;
  int64_t value = 0;
  double fvalue = 0;
  bool int_dynamic = false;  // (an int's or a float's)
  std::vector<int64_t> sizes, strides;
  uint64_t dynamic = 0;          // dims seen with different sizes
  uint64_t dynamic_strides = 0;  // dims seen with different strides
};
using FrameState = std::unordered_map<std::string, SeenInput>;
enum class DynamicMode : int8_t { Auto = -1, Off = 0, On = 1 };  // torch.compile(dynamic=None/False/True)

// Where note_input puts what it decides for this compile (null: nowhere, the history only).
struct DynamicPlan {
  std::unordered_set<std::string>* planned = nullptr;              // sources compared
  std::unordered_map<std::string, uint64_t>* dims = nullptr;       // source -> symbolic dims
  std::unordered_map<std::string, uint64_t>* strides = nullptr;    // source -> symbolic strides
  std::unordered_set<std::string>* ints = nullptr;                 // symbolic int and float sources
};
// Automatic dynamic shapes: compares an input (`text`: its source, L['x']) with what earlier calls
// saw (`fs`, updated) and plans which of its sizes, strides and ints are symbolic (force: all).
void note_input(FrameState& fs, PyObject* o, const std::string& text, bool force, int depth, const DynamicPlan& plan);
// The history of a call that compiled nothing (set_stance("eager_then_compile")'s first call of a
// code): its arguments noted as a compile notes them, so that the next compile makes what changed
// symbolic.
void note_arguments(FrameState& fs, PyCodeObject* co, PyObject* const* locals);
std::string argument_text(PyCodeObject* co, int i);  // L['name'] of argument i

class ValueBuilder {
 public:
  explicit ValueBuilder(Translator& t) : t_(t) {}
  // `obj` read from `source` (null: made in the trace, no guard possible). Null result: the object
  // cannot be traced (the caller breaks with a reason).
  VPtr wrap(Ref obj, SourcePtr source, Frame& f);
  // Automatic dynamic shapes: compares an argument with what earlier compiles saw (`state`, updated)
  // and plans which of its sizes and ints are symbolic in this compile.
  void plan_dynamic(PyObject* o, const std::string& text, int depth);
  // A tensor reached below what plan_dynamic walked (an attribute of an object argument: a KV cache's
  // layers[i].keys): compared with earlier compiles as it is wrapped, as TorchDynamo's automatic
  // dynamic shapes compare every tensor source. Symbolic now in a dynamic compile; in a static one
  // its changed sizes are recorded and the frame is captured again (wants_dynamic), dynamic then.
  void plan_reached(PyObject* o, const std::string& text);
  // A lazy dict (Value::lazy) read at one constant key: that entry wrapped (and guarded present) or
  // its absence guarded. False: the entry cannot be traced.
  bool realize_entry(const VPtr& d, PyObject* key, Frame& f);
  // All of a lazy dict's entries, in order, and DICT_KEYS on its key list (the eager behaviour); all
  // of a lazy list's or tuple's items, and LENGTH_CHECK; a value not read yet (VK::Lazy): what wrap
  // makes of it, in place.
  // `items` false: the items stay values not read yet (read by what moves them on: iteration,
  // f(*args, **kwargs), {**d}); true: they are read too.
  bool realize(const VPtr& d, Frame& f, bool items = true);
  // An item of a list, tuple or dict from the frame, at `source`: a number, string or None as a value
  // not read yet (VK::Lazy, unguarded until realize), anything else wrapped now.
  VPtr leaf(Ref obj, SourcePtr source, Frame& f);
  // A lazy list's or tuple's length (LENGTH_CHECK, once) and its item i (wrapped and guarded alone, as
  // TorchDynamo's lazy items): len(l) and l[0] read no more of it. -1 / null: it cannot be traced.
  Py_ssize_t sequence_length(const VPtr& v, Frame& f);
  // len() of a lazy dict: its length and the presence of each of its keys guarded (its key set,
  // in any order, as TorchDynamo guards a dict whose order nothing read), the dict left lazy. -1:
  // not so (a key of another type; the trace wrote to it): the caller realizes it.
  Py_ssize_t dict_length(const VPtr& d, Frame& f);
  VPtr sequence_item(const VPtr& v, Py_ssize_t i, Frame& f);
  bool any_lazy() const { return any_lazy_; }
  // The value a tensor from the frame is in this trace (wrapped once per object), or null.
  VPtr tensor_value(PyObject* o) const {
    auto it = tensor_by_id_.find(o);
    return it == tensor_by_id_.end() ? nullptr : it->second;
  }
  // The value a container from the frame (a list or dict, read once per object) is in this trace, or null.
  VPtr container_value(PyObject* o) const {
    auto it = containers_seen_.find(o);
    return it == containers_seen_.end() ? nullptr : it->second.second;
  }
  // The real object of a container read from the frame (a lazy one's, or the one it was read from), or null.
  PyObject* real_container(const VPtr& v) const {
    if (v->lazy) return v->lazy.get();
    for (const auto& [o, seen] : containers_seen_)
      if (seen.second == v) return o;
    return nullptr;
  }
  // Whether a value was read from a source whose text starts with `prefix`.
  bool read_under(const std::string& prefix) const {
    for (const auto& kv : by_source_)
      if (kv.first.rfind(prefix, 0) == 0) return true;
    return false;
  }
  bool has_dynamic_plan() const { return !dyn_dims_.empty() || !dyn_strides_.empty() || !dyn_ints_.empty(); }
  // A static compile reached a tensor whose sizes changed since an earlier compile (plan_reached):
  // the frame is captured again, as a dynamic compile (eval_frame.cpp).
  bool wants_dynamic() const { return wants_dynamic_; }
  // An operator of a static compile read a 0-d int tensor input as a number (a size given as a
  // tensor): captured again with fake tensors, whose fake of it answers item() with a symbol
  // (DynamicShapes.tensor) -- with dynamic=False too, as TorchDynamo's fake of it has one then (no
  // size is made symbolic by it: the plan stays empty).
  void ask_dynamic() { wants_dynamic_ = true; }
  // Some input of an earlier compile became symbolic (seen with two sizes): this compile is a
  // dynamic one, for the tensors reached below the arguments too (plan_reached).
  bool history_dynamic() const {
    if (frame_state)
      for (const auto& kv : *frame_state)
        if (kv.second.dynamic || kv.second.int_dynamic) return true;
    return false;
  }

  FrameState* frame_state = nullptr;  // this code object's history (null: none kept)
  DynamicMode dynamic_mode = DynamicMode::Auto;
  bool static_floats = false;  // CaptureRequest::static_floats

 private:
  std::unordered_set<std::string> planned_;  // tensor sources plan_dynamic compared already
  bool wants_dynamic_ = false;
  // One per kind of object (wrap dispatches by exact type, then a short fallback list).
  VPtr wrap_tensor(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_none(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_bool(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_int(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_numpy_float64(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_numpy_int64(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr numpy_constant(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_float(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  void plan_number(const Ref& obj, const SourcePtr& source, const std::string& key);
  VPtr int_input(const Ref& obj, const SourcePtr& source, const std::string& key, const Ref& sym);
  VPtr float_input(const Ref& obj, const SourcePtr& source, const std::string& key, PyObject* made, PyObject* fullprec);
  VPtr wrap_draw(const Ref& obj, const SourcePtr& source, Frame& f);
  VPtr wrap_constant(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_enum_member(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_sequence(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  bool dynamic_items(PyObject* o, const SourcePtr& source, const std::string& key) const;
  VPtr wrap_slice(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_set(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_set_of_objects(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_deque(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_dict(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_module(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_function(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_method(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_builtin(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_tuple_iterator(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_range_iterator(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_ndarray(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_grad_restore(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_autocast_exit(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_object(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_dict_kind(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_dict_instance(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr wrap_list_instance(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr subclass_instance(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f);
  // Every entry of `d` (a dict or a dict subclass's storage), in order, wrapped from its item source
  // (`storage`: dict.__getitem__) into keys/items, and DICT_KEYS on `dsource`; false: an entry
  // cannot be traced.
  bool wrap_entries(PyObject* d, const SourcePtr& dsource, bool storage, std::vector<Ref>& keys, std::vector<VPtr>& items,
                    Frame& f, bool leaves = false);
  bool realize_sequence(const VPtr& v, Frame& f, bool items);
  bool realize_leaf(const VPtr& v, Frame& f);
  bool realize_items(const std::vector<VPtr>& items, Frame& f);  // the values not read yet among them
 public:
  void settle(const VPtr& v);  // a tuple argument read whole, all constants: a constant again
 private:
  void capturable_group(const VPtr& d);  // an optimizer's param group: 'capturable' reads True
  static bool storage_order(PyObject* od);  // an OrderedDict iterates in its storage's order
  VPtr shared_container(PyObject* o, const SourcePtr& source, const std::string& key, Frame& f);
  VPtr remember(const SourcePtr& source, const std::string& key, VPtr val);  // kept by source, announced

  Translator& t_;
  bool ok_ = true;  // shared_container: false when the container cannot be traced
  std::unordered_map<std::string, VPtr> by_source_;   // source text -> value (dedup)
  std::unordered_map<PyObject*, VPtr> tensor_by_id_;  // input tensors by identity (aliasing)
  // input lists/dicts wrapped so far and their values (the object kept alive: a freed one's address
  // could be reused)
  std::unordered_map<PyObject*, std::pair<Ref, VPtr>> containers_seen_;
  std::unordered_map<std::string, uint64_t> dyn_dims_;  // source -> symbolic dims
  // source -> dims whose strides are symbolic: changed between compiles while every size stayed the
  // same (a slice x[:, 0] of a tensor whose middle size varies), as TorchDynamo's automatic dynamic
  // strides (only where the sizes are all static)
  std::unordered_map<std::string, uint64_t> dyn_strides_;
  std::unordered_set<std::string> dyn_ints_;            // int and float sources that are symbolic
  bool any_lazy_ = false;                               // a lazy dict, list or tuple was made (the interpreter checks reads)
  std::unordered_set<std::string> probed_absent_;       // "source|repr(key)" guarded absent
};

}  // namespace dv
