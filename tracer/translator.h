// The symbolic interpreter: executes a frame's bytecode over Values, records tensor operations
// into a Graph and the assumptions it makes as Guards. One handler per opcode (handlers_*.cpp);
// an unsupported construct is a Break (a value, not an exception).
#pragma once
#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "core/bytecode.h"
#include "graph.h"
#include "guards.h"
#include "core/observer.h"
#include "values.h"

namespace dv {

struct Break {
  std::string id;       // stable id: DV0001...
  std::string message;
  std::string hint;
  std::string filename;
  int line = -1;
  uint32_t offset = 0;
  int step = -1;
  std::vector<std::string> user_stack;  // "file:line in fn", innermost last
  int root_ip = -1;  // instruction index of the root frame executing when it broke (-1: before any)
};

// A decoded code object, cached per code object for the lifetime of the process.
struct CodeFacts {
  Ref code;  // Strong reference
  int id = 0;  // process-wide code object id (events, traces)
  mutable std::unique_ptr<bc::CodeInfo> info;  // filled when an observer first needs it
  bc::Decoded decoded;
  std::unordered_map<uint32_t, int> index_of;  // byte offset -> instruction index
  std::string filename, qualname;
};
const CodeFacts* code_facts(PyObject* code);  // null (Python error set) on failure
// Announces a code object to an observer (fills its CodeInfo on first use). False: Python error set.
bool announce_code(EngineObserver* obs, const CodeFacts* facts);

struct Frame {
  const CodeFacts* facts;
  std::vector<VPtr> locals;   // localsplus
  std::vector<VPtr> stack;
  int ip = 0;                 // instruction index
  Ref globals, builtins;
  SourcePtr globals_source;   // null: the root frame's globals (G['name'])
  int depth = 0;
  Ref kw_names;               // pending KW_NAMES tuple
  VPtr result;                // set by RETURN_VALUE
  std::vector<VPtr>* yields = nullptr;  // generator run to completion: the values it yields
  std::vector<std::pair<bool, bool>> grad_stack;  // with-blocks: (previous grad mode)
  int stack_drift = 0;        // checked builds: stack moves minus the table's stack effects
  // Observer bookkeeping: the step being executed, whether it was reported (a step that inlines
  // a call is reported when the callee starts), and the value ids last reported per local slot.
  int step_no = -1;
  const bc::Instr* executing = nullptr;
  bool reported = false;
  bool started = false;  // a step of this frame was reported
  std::vector<int> reported_locals;
};

// What earlier compiles of a code object saw of its inputs, by source text (TorchDynamo's automatic
// dynamic shapes): a size that differs between compiles becomes symbolic from then on (all sizes when
// the rank changes), and so does an int argument whose value changes.
struct SeenInput {
  bool is_int = false;
  int64_t value = 0;
  bool int_dynamic = false;
  std::vector<int64_t> sizes;
  uint64_t dynamic = 0;  // dims seen with different sizes
};
using FrameState = std::unordered_map<std::string, SeenInput>;
enum class DynamicMode : int8_t { Auto = -1, Off = 0, On = 1 };  // torch.compile(dynamic=None/False/True)

extern const char* const kStopId;  // the Break id run_frame returns when it reaches stop_at

struct TraceResult {
  std::optional<Break> brk;
  VPtr ret;  // the frame's return value when no break
  // Set when the trace stopped before the root instruction `Translator::stop_at` (a restart that
  // splits the frame at a break): the root frame's stack and locals before that instruction.
  bool stopped = false;
  std::vector<VPtr> stack, locals;
  Ref kw_names;  // a KW_NAMES tuple pending for the stopped CALL
};

class Translator {
 public:
  Translator(CompileId id, EngineObserver* obs);
  // Trace the root frame: `args` are the frame's argument values (borrowed for the call),
  // `closure` the function's closure tuple (or null).
  TraceResult run_root(PyObject* code, PyObject* globals, PyObject* builtins, PyObject* const* args, PyObject* closure);

  Graph graph;
  std::vector<Guard> guards;
  std::vector<std::pair<SourcePtr, int>> inputs;  // graph placeholders: (source, node)
  // Attribute assignments to objects that exist outside the frame (self.calls += 1, self.cache = y):
  // replayed by the transformed code after the graph runs, in order; later reads in the trace see
  // the assigned value.
  struct AttrWrite {
    VPtr owner;
    std::string name;
    VPtr value;
  };
  std::vector<AttrWrite> attr_writes;
  std::vector<VPtr> mutated_lists;  // lists from outside the frame changed by append/extend/pop/insert
  std::vector<Ref> input_objects;                 // the real objects behind the placeholders
  int steps = 0;
  int stop_at = -1;  // stop before this root instruction index (see TraceResult::stopped)
  FrameState* frame_state = nullptr;              // set by the caller: this code object's history
  DynamicMode dynamic_mode = DynamicMode::Auto;

  // Dynamic shapes: whether this compile has symbolic sizes/ints; the backend call (fake example
  // inputs, our fake mode current); the shape guards, appended to `guards` once the backend ran.
  bool dynamic() const { return static_cast<bool>(dyn_); }
  PyObject* compile_with_backend(PyObject* backend, PyObject* gm);  // new reference or null (error set)
  bool add_shape_guards(std::string& why);

  // --- used by the handlers ---
  using Status = std::optional<Break>;
  Status brk(Frame& f, const char* id, std::string msg, std::string hint = {});
  VPtr make(VK kind);
  VPtr constant(Ref obj);
  VPtr constant_steal(PyObject* obj);  // null stays null (error -> caller breaks)
  VPtr wrap(Ref obj, SourcePtr source, Frame& f);     // VariableBuilder: Python object + source -> Value (+guards)
  Status module_members(Frame& f, const VPtr& fn, const std::vector<VPtr>& args,
                        const std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled);
  Status store_attr(Frame& f, const VPtr& owner, const std::string& name, const VPtr& value);
  Status call_partial(Frame& f, PyObject* partial, std::vector<VPtr>& args,
                      std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out);
  Status call_super(Frame& f, std::vector<VPtr>& args, VPtr& out);
  Status call(Frame& f, VPtr fn, std::vector<VPtr> args, std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out);
  Status getattr(Frame& f, VPtr obj, const std::string& name, VPtr& out);
  Status binary(Frame& f, int nb_op, VPtr a, VPtr b, VPtr& out);
  Status compare(Frame& f, int cmp, VPtr a, VPtr b, VPtr& out);
  Status subscr(Frame& f, VPtr obj, VPtr idx, VPtr& out);
  Status truth(Frame& f, VPtr v, bool& out);
  Status iterate(Frame& f, VPtr v, VPtr& out);
  Status graph_call(Frame& f, Ref target, const std::string& method, std::vector<VPtr> args,
                    std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out);
  Status run_frame(Frame& f);
  VPtr sym_value(Ref example, int node);   // a symbolic int/bool/float computed by graph node `node`
  Ref specialize(const VPtr& v);           // a Sym as a Python constant (the ShapeEnv guards its value)
  // Turns a metadata result (x.size(), x.shape, x.numel() ...) into Values: symbolic parts become
  // graph nodes (`l_x_.size(0)`), static parts constants.
  Status meta_result(Frame& f, const VPtr& self, const std::string& method, const std::vector<VPtr>& args, Ref r, VPtr& out);
  void announce(const VPtr& v);            // observer: the value's description, once
  void report_step(Frame& f);              // observer: the step f is executing, with its stack
  void add_guard(GuardKind kind, SourcePtr source, Ref value, Frame& f, std::string text = {});
  bool is_tensor_value(const VPtr& v) const { return v && v->kind == VK::Tensor; }
  int current_line(const Frame& f) const;

 private:
  Status step(Frame& f);
  Status inline_call(Frame& f, VPtr fn, VPtr self, std::vector<VPtr> args,
                     std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out);
  std::optional<Ref> to_python(const VPtr& v, bool meta);  // real object for consts/containers; meta tensors
  bool to_arg(const VPtr& v, ArgTree& out);
  VPtr from_example(Frame& f, Ref example, int node, Ref device);

  CompileId id_;
  EngineObserver* obs_;
  int next_value_ = 1;
  std::unordered_map<std::string, VPtr> by_source_;  // source text -> value (dedup)
  std::unordered_map<PyObject*, VPtr> tensor_by_id_;  // input tensors by identity (aliasing)
  std::unordered_set<PyObject*> containers_seen_;     // input lists/dicts wrapped so far
  Frame* root_ = nullptr;
  std::vector<Frame*> frames_;
  int cur_step_ = 0;
  // Dynamic shapes: which sources are symbolic in this compile, and the Python DynamicShapes
  // (python/dynview/_shapes.py) that owns the ShapeEnv and fake mode; sym_sources_ numbers the
  // sources its symbols read (SHAPE_ENV guard refs).
  void plan_dynamic(PyObject* o, const std::string& text, int depth);
  std::unordered_map<std::string, uint64_t> dyn_dims_;
  std::unordered_set<std::string> dyn_ints_;
  Ref dyn_;
  std::vector<SourcePtr> sym_sources_;
  Ref dyn_guards_;             // the ShapeEnv's guard list, watched after each step
  Py_ssize_t dyn_guards_seen_ = 0;
  void note_shape_guards(Frame& f, int step);
  bool has_unbacked_symbols();
#ifdef DV_CHECK_STACK
  void check_stack_effect(Frame& f, const bc::Instr& in, size_t before, bool jumped);
#endif  // attribute new ShapeEnv guards to `step`
};

bool is_exact_const(PyObject* o);
bool module_is_torch_mod(PyObject* mod);  // torch or torch.* module object

// Opcode handlers, by family (handlers_*.cpp). Each returns a Break or nothing; `ins` is the
// instruction being executed; the frame's ip already points past it.
using Handler = Translator::Status (*)(Translator&, Frame&, const bc::Instr&);
Handler handler_for(bc::Name name);  // by version-neutral name: one table for every version

}  // namespace dv
