// The symbolic interpreter: executes a frame's bytecode over Values, records tensor operations
// into a Graph and the assumptions it makes as Guards. One handler per opcode (handlers_*.cpp);
// an unsupported construct is a Break (a value, not an exception).
#pragma once
#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "core/break_ids.h"
#include "core/bytecode.h"
#include "core/observer.h"
#include "output_graph.h"
#include "value_builder.h"
#include "values.h"

namespace dv {

using breaks::BreakId;  // a graph-break id from core/break_ids.inc, checked at compile time

struct Break {
  std::string id;       // stable id from core/break_ids.inc (DV0001...; kStopId inside the engine)
  std::string message;
  std::string hint;
  std::string filename;
  int line = -1;
  uint32_t offset = 0;
  int step = -1;
  std::vector<std::string> user_stack;  // "file:line in fn", innermost last
  int root_ip = -1;  // instruction index of the root frame executing when it broke (-1: before any)
  // A Python exception raised in the trace (the eager frame raises the same one here): a handler of
  // a frame in the trace (try/except, the exception table) may catch it; uncaught, it is a break.
  Ref exc;
  // The breaking call reads the compiled frame itself (eval() of its names, sys._getframe()): the
  // frame is not split there (the call would see the transformed code's frame); it runs as it is.
  bool whole_frame = false;
  // Set: why the frame is not split at this break (it runs as it is), e.g. inside a torch function
  // mode's block, which the resume function could not enter again.
  std::string no_split;
  // A break outside the interpreter (no frame, no step): the table's hint when hint is empty.
  static Break of(BreakId id, std::string message, std::string hint = {});
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

// A module's forward hooks, in the order nn.Module._call_impl runs them (the global ones first).
struct ModuleHooks {
  struct Hook {
    Ref fn;
    bool with_kwargs = false;
    SourcePtr source;  // a module's own hook: its place in the module's hook dict (null: held as read)
  };
  std::vector<Hook> pre, post;
};

struct Frame {
  const CodeFacts* facts;
  std::vector<VPtr> locals;   // localsplus
  // The root frame's arguments not read yet (TorchDynamo's lazy locals): the object in slot i, its
  // locals[i] null until Translator::read_local wraps it (and guards it) on its first read. An
  // argument the code never reads adds no guard; one still unread at a break is reloaded by its
  // source (the frame's own slot). Empty for inlined frames.
  std::vector<Ref> unread;
  std::vector<int> unread_ids;  // the value ids an observer was given for them (report_step)
  std::vector<VPtr> stack;
  int ip = 0;                 // instruction index
  Ref globals, builtins;
  SourcePtr globals_source;   // null: the root frame's globals (G['name'])
  int depth = 0;
  Ref kw_names;               // pending KW_NAMES tuple
  VPtr result;                // set by RETURN_VALUE
  bool generator = false;     // a generator's frame: YIELD_VALUE suspends it (Translator::resume_generator)
  bool suspended = false;     // stopped at a YIELD_VALUE; `yielded` is the value
  bool resumed = false;       // ran before: a resume pushes the value sent (None)
  VPtr yielded;
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

extern const char* const kStopId;  // the Break id run_frame returns when it reaches stop_at
// The Break id of an attribute that does not exist (AttributeError in eager): hasattr() is False and
// getattr() with a default gives the default, where any other break of an attribute read stays a break.
inline constexpr BreakId kNoAttributeId{"DV0022"};

// The first stage of a compile: what to trace.
struct CaptureRequest {
  CompileId id;
  EngineObserver* obs = nullptr;  // null: no events (a restart that splits the frame is silent)
  PyObject* code = nullptr;
  PyObject* globals = nullptr;
  PyObject* builtins = nullptr;
  PyObject* const* args = nullptr;  // the frame's argument slots (borrowed for the call)
  PyObject* closure = nullptr;      // the function's closure tuple, or null
  FrameState* frame_state = nullptr;  // this code object's history (automatic dynamic shapes)
  DynamicMode dynamic_mode = DynamicMode::Auto;
  int stop_at = -1;  // stop before this root instruction index (a restart that splits the frame)
  // A restart: requires_grad_() on a tensor made in the graph breaks (a graph output that requires
  // grad came from one, which AOTAutograd would return without it: TorchDynamo restarts so too).
  bool requires_grad_breaks = false;
  bool dynamic = false;  // a fake-tensor capture whatever the history (a static one wanted it: retry_dynamic)
  bool static_floats = false;  // every float a constant (the backend could not take a symbolic one)
};

// What a trace produces, handed from stage to stage: the output graph (graph, guards, inputs, side
// effects) and how the trace ended -- the return value, a break, or (a restart with `stop_at`) the
// root frame's stack and locals before the breaking instruction. The later stages fill in the graph
// outputs, the FX module and the backend's compiled callable. Nothing here refers to the interpreter.
struct CaptureResult {
  OutputGraph out;
  std::optional<Break> brk;  // the break that ended the trace
  VPtr ret;                  // the frame's return value (no break, not stopped)
  bool stopped = false;      // stopped before CaptureRequest::stop_at
  bool retry_dynamic = false;  // a static capture reached a tensor of changed sizes: capture it again, dynamic
  std::vector<int> grad_leaves;  // the requires_grad_() nodes of tensors made in the graph (Translator::grad_leaf_nodes)
  // The thread's torch function mode stack after the graph: this many popped, then these pushed
  // (Translator::mode_stack_change; codegen's emit_head)
  int fn_mode_pops = 0;
  std::vector<VPtr> fn_mode_pushes;
  std::vector<VPtr> stack, locals;  // the root frame's state where it stopped
  Ref kw_names;              // a KW_NAMES tuple pending for the stopped CALL
  int steps = 0;
  // Filled by the later stages (lowering, backend):
  std::vector<int> outputs;  // graph output nodes
  Ref gm;                    // the torch.fx.GraphModule (null: no operator recorded)
  Ref compiled;              // what the transformed code calls (null when there is no graph)
};

// Runs the symbolic interpreter over the frame.
CaptureResult capture(const CaptureRequest& req);

// The interpreter: frames, dispatch and steps (handlers_*.cpp, calls.cpp, ops.cpp). It writes into
// an OutputGraph it does not own and builds values through its ValueBuilder.
class Translator {
 public:
  Translator(CompileId id, EngineObserver* obs, OutputGraph& output);
  ~Translator();  // leaves the torch.inference_mode blocks the trace entered and did not leave
  Translator(const Translator&) = delete;
  Translator& operator=(const Translator&) = delete;
  // Trace the root frame: `args` are the frame's argument values (borrowed for the call),
  // `closure` the function's closure tuple (or null). Fills `r` (its output graph is `output`).
  void run_root(PyObject* code, PyObject* globals, PyObject* builtins, PyObject* const* args, PyObject* closure,
                CaptureResult& r);

  OutputGraph& output;
  ValueBuilder builder{*this};
  int steps = 0;
  int stop_at = -1;  // stop before this root instruction index (see CaptureResult::stopped)
  bool requires_grad_breaks = false;  // CaptureRequest::requires_grad_breaks
  bool start_dynamic = false;  // CaptureRequest::dynamic
  std::vector<int> grad_leaf_nodes;    // requires_grad_() nodes of tensors made in the graph, traced
  bool dynamic() const { return output.dynamic(); }

  // --- used by the handlers ---
  using Status = std::optional<Break>;
  // A break at f's current instruction; an empty hint is the table's default hint for id.
  Status brk(Frame& f, BreakId id, std::string msg, std::string hint = {});
  // Raises a Python exception in the trace (what eager raises at this point): `exc` an exception
  // instance; raise_new makes type(msg); raise_current takes the Python error set now (a plain
  // break when none is set). `what` prefixes the message of the break it becomes when uncaught.
  Status raise(Frame& f, Ref exc, const std::string& what = {});
  Status raise_new(Frame& f, PyObject* type, const std::string& msg, const std::string& what = {});
  Status raise_current(Frame& f, const std::string& what);
  Status raise_key_error(Frame& f, PyObject* key, const std::string& what = {});  // KeyError(key)
  // The exception being handled (sys.exc_info()) by the innermost except/finally block the trace is
  // in; null when the trace is in none (what is handled outside it is unknown).
  VPtr exc_info;
  VPtr make(VK kind);
  VPtr constant(Ref obj);
  VPtr constant_steal(PyObject* obj);  // null stays null (error -> caller breaks)
  VPtr key_value(const Ref& k);  // a dict key as a value (a constant, or a class or function known by identity)
  // The key object a dict made or read in the trace holds for `v` (borrowed): dict_key's, or a tensor's
  // example or an nn.Module, keyed by identity and recorded with v (OutputGraph::key_values); null when
  // v cannot be a key.
  PyObject* key_of(const VPtr& v);
  // torch.optim's Optimizer._init_group(group, lists...) run eagerly, its lists filled with values
  // read from the optimizer (optimizer.cpp); `handled` false: not that call, or not one it can run.
  // A torch.autocast block made in the trace, entered (BEFORE_WITH) and left (its __exit__) (autocast.cpp).
  Status enter_autocast(Frame& f, const VPtr& mgr);
  Status exit_autocast(Frame& f, const VPtr& exit, VPtr& out);
  // A torch.inference_mode block, entered (BEFORE_WITH) and left (its __exit__) (inference_mode.cpp).
  Status enter_inference_mode(Frame& f, const VPtr& mgr);
  Status exit_inference_mode(Frame& f, const VPtr& exit, VPtr& out);
  void leave_inference_blocks(Frame& f);  // a capture stopped at a break: the graph leaves its open blocks
  void add_inference_exit_node(PyObject* exit_fn, int enter_node);
  // Tensor.register_hook(fn) on a tensor the graph made: fn traced as a subgraph of the gradient
  // (tensor_hooks.cpp). While a hook body is traced (pure_body_ > 0), what would change state outside
  // it breaks: pure_body_changes for an instruction, pure_body_method for a method called.
  Status register_tensor_hook(Frame& f, const VPtr& self, std::vector<VPtr>& args, std::vector<std::pair<std::string, VPtr>>& kwargs,
                              VPtr& out);
  bool pure_body_changes(Frame& f, const bc::Instr& in, Status& s);
  bool pure_body_method(Frame& f, const VPtr& m, Status& s);
  int pure_body_ = 0;     // hook bodies being traced
  int pure_begin_ = -1;   // the innermost one's first node (its gradient)
  // Torch function modes entered in the trace (fn_modes.cpp): pushed and popped by the inlined
  // __enter__/__exit__; while one is on the stack, dispatch_fn_mode inlines its __torch_function__
  // for a torch function, tensor method or operator (handled: it did; else record the call).
  Status enter_outer_modes(Frame& f);  // the modes entered outside the call, on the trace's stack first
  Status push_fn_mode(Frame& f, const VPtr& mode);
  Status pop_fn_mode(Frame& f, VPtr& out);
  bool fn_mode_active() const { return !fn_modes_.empty(); }
  Py_ssize_t fn_mode_depth() const { return static_cast<Py_ssize_t>(fn_modes_.size()); }
  Status dispatch_fn_mode(Frame& f, PyObject* target, const std::string& method, std::vector<VPtr>& args,
                          std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled);
  Status call_fn_mode(Frame& f, Ref func, std::vector<VPtr> args, std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out);
  // torch.nn.attention.sdpa_kernel(backends, set_priority): made (a call of constants), entered
  // (BEFORE_WITH) and left (its __exit__) (sdpa_kernel.cpp).
  Status make_sdpa_kernel(Frame& f, std::vector<VPtr>& args, std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out);
  Status enter_sdpa_kernel(Frame& f, const VPtr& mgr);
  Status exit_sdpa_kernel(Frame& f, const VPtr& exit, VPtr& out);
  // Pops a stack of blocks the trace entered for real, innermost first, putting back what each set;
  // a Python error pending (a trace that ended by an exception) is kept.
  template <class T, class F>
  static void unwind_blocks(std::vector<T>& entered, F put_back) {
    if (entered.empty()) return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    while (!entered.empty()) {
      if (!put_back(entered.back())) PyErr_Clear();
      entered.pop_back();
    }
    PyErr_Restore(type, value, tb);
  }
  void restore_sdpa_backends();  // what the trace left set (a break inside a block), put back
  // torch.autograd.graph.disable_saved_tensors_hooks(message): made, entered, left (saved_hooks_off.cpp)
  Status make_saved_hooks_off(Frame& f, std::vector<VPtr>& args, std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out);
  Status enter_saved_hooks_off(Frame& f, const VPtr& mgr);
  Status exit_saved_hooks_off(Frame& f, const VPtr& exit, VPtr& out);
  void restore_saved_hooks();  // what the trace left set, put back
  Status optimizer_init_group(Frame& f, const VPtr& fn, const std::vector<VPtr>& args,
                              const std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled);
  std::vector<Ref> made_keys_;  // tuples key_of built (kept while a dict value takes its own reference)
  std::unordered_map<const Value*, Ref> instance_keys_;  // the key token of each object made in the trace (key_of)
  // Objects from the frame compared by identity used as dict keys (key_of); once two of them, or one
  // and a dict from the frame holding such keys, meet, each is guarded by identity (identity_keys_meet)
  std::vector<VPtr> identity_keys_;
  bool identity_keys_met_ = false;
  void identity_key_used(const VPtr& v);
  void identity_keys_meet();  // a dict from the frame holding keys compared by identity was read
  VPtr wrap(Ref obj, SourcePtr source, Frame& f) { return builder.wrap(std::move(obj), std::move(source), f); }
  Status module_members(Frame& f, const VPtr& fn, const std::vector<VPtr>& args,
                        const std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled);
  Status store_attr(Frame& f, const VPtr& owner, const std::string& name, const VPtr& value);
  bool generic_getattr_ = false;  // the next getattr is object.__getattribute__'s (outside_object_builtin)
  // Objects from outside whose __dict__ the trace read, and the dict value it read (the real dict,
  // whose changes are replayed after the graph): assignments to their attributes are written into
  // it, and their attributes are read from it once the trace changed it (Translator::getattr).
  std::unordered_map<PyObject*, VPtr> dict_read_objects;
  Status write_through_dict(Frame& f, PyObject* o, const std::string& name, const VPtr& value);  // o.name = value, into it
  Status call_marked_constant(Frame& f, PyObject* func, const VPtr& self, const std::vector<VPtr>& args,
                              const std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out);
  Status call_regex_fold(Frame& f, PyObject* func, const VPtr& self, const std::vector<VPtr>& args,
                         const std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out);
  Status object_store_attr(Frame& f, const VPtr& owner, const std::string& name, const VPtr& value);  // object.__setattr__
  Status outside_object_builtin(Frame& f, PyObject* descr, const VPtr& self, std::vector<VPtr>& args,
                                std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled);
  // dict.get / __getitem__ / __contains__ of a dict (subclass) object reached from the frame: read
  // now from its storage, guarded by its keys and the item's own guards (dicts.cpp).
  Status outside_dict_read(Frame& f, const VPtr& self, const std::string& name, std::vector<VPtr>& args,
                           std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out);
  Status call_partial(Frame& f, PyObject* partial, const SourcePtr& src, std::vector<VPtr>& args,
                      std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out);
  Status call_super(Frame& f, std::vector<VPtr>& args, VPtr& out);
  // Calling a module with forward hooks: pre-hooks, forward, hooks, as nn.Module._call_impl
  // (tracer/module_hooks.cpp). module_hooks breaks on backward hooks.
  Status module_hooks(Frame& f, PyObject* module, const SourcePtr& module_source, ModuleHooks& out);
  Status call_with_hooks(Frame& f, const VPtr& module, const VPtr& forward, const ModuleHooks& hooks, std::vector<VPtr> args,
                         std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out);
  // copy.deepcopy(args...) (deep) or copy.copy(args...) of what the trace holds (tracer/values/copying.cpp).
  Status copy_value(Frame& f, std::vector<VPtr>& args, std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool deep);
  // functools.partial made in the trace over any values (tracer/values/partial.cpp): made, called,
  // its .func/.args/.keywords read.
  VPtr make_partial(VPtr fn, std::vector<VPtr> args, const std::vector<std::pair<std::string, VPtr>>& kwargs);
  Status call_partial_value(Frame& f, const VPtr& p, std::vector<VPtr> args, std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out);
  Status partial_getattr(Frame& f, const VPtr& p, const std::string& name, VPtr& out);
  // id(v): the real id of an object known by identity, or a fake id (tracer/values/fake_id.cpp).
  Status call_id(Frame& f, const VPtr& v, VPtr& out);
  Status call(Frame& f, VPtr fn, std::vector<VPtr> args, std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out);
  // Lazy dicts, lists and tuples from the frame (tracer/values/lazy_dict.cpp): realized before an
  // instruction or a call that may read more of one than one constant key (of a dict); `inlined`: the callee is user code traced
  // instruction by instruction (its arguments stay lazy).
  Status realize_read(Frame& f, const bc::Instr& in);
  bool keyword_order_unread(Frame& f, const bc::Instr& in);  // g(**d) into a callee without **kwargs
  // locals[slot], wrapped now if it is an argument not read yet (Frame::unread): a break where the
  // argument cannot be traced.
  Status read_local(Frame& f, int slot);
  static bool is_unread(const Frame& f, int slot) {  // an argument in `slot` not read yet
    return slot >= 0 && static_cast<size_t>(slot) < f.unread.size() && f.unread[static_cast<size_t>(slot)];
  }
  // Slot `slot` is assigned: an argument there not read yet never will be.
  void forget_unread(Frame& f, int slot) {
    if (is_unread(f, slot)) f.unread[static_cast<size_t>(slot)] = Ref();
  }
  // A stand-in for each argument still unread (an Object of that source), for a break's locals.
  void unread_as_sources(Frame& f);
  // At a split: the values not read yet that TorchDynamo reads as they cross into the resume function.
  Status realize_crossing(Frame& f);
  Status realize_call(Frame& f, const VPtr& fn, const std::vector<VPtr>& args,
                      const std::vector<std::pair<std::string, VPtr>>& kwargs, bool inlined);
  Status realize_value(Frame& f, const VPtr& v);  // every lazy dict, list and tuple v reaches
  // v itself, if a lazy dict, list or tuple, its items left as they are (values not read yet stay
  // so): what moves the items on without reading them (iteration, f(*args, **kwargs), {**d}).
  Status realize_shallow(Frame& f, const VPtr& v);
  Status realize_lazy(Frame& f, const VPtr& v) { return v && v->lazy ? realize_value(f, v) : std::nullopt; }
  Status realize_key(Frame& f, const VPtr& d, PyObject* key);
  // A Python function, inlined; what it returns is read (read_result) unless `read` is false (a
  // property's getter for LOAD_ATTR, whose answer only moves onto the stack)
  Status call_python(Frame& f, Ref fn, std::vector<VPtr> args, VPtr& out, bool read = true);
  Status read_result(Frame& f, const VPtr& out);  // what an inlined call returned, for C++ to read: a VK::Lazy read now
  // A generator's next item (ops.cpp). `sent`: the value send() gives (null: None; Null: none, on at a
  // handler); `raises`: an exception its body raises goes on out of it (else it is a break).
  Status resume_generator(Frame& f, const VPtr& it, VPtr sent = nullptr, bool raises = false);
  // gen.send(value) / gen.throw(exc): the item the generator yields next (ops.cpp)
  Status generator_send(Frame& f, const VPtr& it, bool thrown, const VPtr& value, VPtr& out);
  VPtr bound_method(VPtr self, Ref fn, std::string name);  // fn bound to self (a Method value)
  Status getattr(Frame& f, VPtr obj, const std::string& name, VPtr& out);
  Status np_scalar_binary(Frame& f, int op, VPtr& a, VPtr& b, VPtr& out, bool& handled);  // (ops.cpp)
  Status binary(Frame& f, int nb_op, VPtr a, VPtr b, VPtr& out);
  Status compare(Frame& f, int cmp, VPtr a, VPtr b, VPtr& out);
  Status subscr(Frame& f, VPtr obj, VPtr idx, VPtr& out);
  // An instance of a plain Python class made in the trace (VK::Instance): __init__ inlined.
  Status construct(Frame& f, const VPtr& cls, std::vector<VPtr> args, std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out);
  // A builtin method (object.__init__, object.__setattr__ ...) called on such an instance; `handled`
  // false: not one dynview follows.
  Status instance_builtin(Frame& f, PyObject* descr, const VPtr& self, std::vector<VPtr>& args,
                          std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled);
  // nn.Softmax(dim=-1) and other stateless torch.nn modules built from constants in the trace
  // (tracer/values/made_module.cpp); a break for any other module class.
  Status construct_module(Frame& f, PyObject* cls, std::vector<VPtr>& args, std::vector<std::pair<std::string, VPtr>>& kwargs,
                          VPtr& out);
  // Modules built in the trace whose Python __init__ was inlined (made_module.cpp): the real object
  // (nn.Module.__init__ run on it, nothing else) and the attributes the trace set on it, in order.
  // They live only in the trace: never written to the object; where the module leaves the graph,
  // codegen makes a new one and sets them on it (object_reconstruct). Kept in the OutputGraph.
  MadeModuleAttrs& made_module_attrs = output.made_module_attrs;
  std::vector<Ref> made_modules;  // the objects its keys name, kept alive for the trace (no address reused)
  void add_made_module(const Ref& m) {
    made_module_attrs[m.get()].clear();
    output.made_module_buffers[m.get()].clear();
    made_modules.push_back(m);
  }
  // A call of one of nn.Module's own methods on such a module: __init__ (already run) and
  // register_buffer (an attribute) answered, any other a break; `handled` false: not such a call.
  Status made_module_method(Frame& f, PyObject* func, const VPtr& module, const std::vector<VPtr>& args,
                            const std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled);
  // NumPy through torch._numpy, as TorchDynamo (tracer/values/ndarray.cpp): x.numpy(), np.<fn>(...)
  // (`handled` false: fn is no NumPy callable), ndarray attributes, methods and operators (`handled`
  // false: no ndarray operand) become graph nodes over the tensor behind the ndarray;
  // torch.from_numpy/as_tensor of an ndarray give that tensor back (`handled` false: not those).
  Status tensor_numpy(Frame& f, const VPtr& self, std::vector<VPtr>& args, std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out);
  // np.sqrt(lam) ... of NumPy scalar constants: computed now (values/ndarray.cpp); `folded` false: not such a call
  Status numpy_of_scalars(Frame& f, PyObject* fn, std::vector<VPtr>& args, std::vector<std::pair<std::string, VPtr>>& kwargs,
                          const std::string& what, VPtr& out, bool& folded);
  Status call_numpy(Frame& f, PyObject* fn, std::vector<VPtr>& args, std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out,
                    bool& handled);
  Status ndarray_to_tensor(Frame& f, PyObject* fn, std::vector<VPtr>& args, std::vector<std::pair<std::string, VPtr>>& kwargs,
                           VPtr& out, bool& handled);
  Status ndarray_getattr(Frame& f, const VPtr& self, const std::string& name, VPtr& out);
  Status ndarray_method(Frame& f, const VPtr& self, const std::string& name, std::vector<VPtr>& args,
                        std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out);
  Status ndarray_operator(Frame& f, const std::string& op, std::vector<VPtr> args, VPtr& out, bool& handled);
  VPtr tensor_of_ndarray(const VPtr& nd);  // the tensor behind an ndarray (same node)
  // a tensor's index with its arrays as tensors; a 0-d one in it is a break (ops.cpp)
  Status tensor_index(Frame& f, const VPtr& idx, VPtr& out);
  // Library callables followed by identity (tracer/values/library_calls.cpp): `handled` false for
  // any other callable.
  Status call_library(Frame& f, const VPtr& fn, std::vector<VPtr>& args, std::vector<std::pair<std::string, VPtr>>& kwargs,
                      VPtr& out, bool& handled);
  // collections.OrderedDict / defaultdict made in the trace (tracer/values/dict_kinds.cpp):
  // Dict values with obj = the class, defaults = the default_factory.
  Status construct_dict_kind(Frame& f, PyObject* cls, std::vector<VPtr>& args, std::vector<std::pair<std::string, VPtr>>& kwargs,
                             VPtr& out, bool& handled);
  Status dict_missing(Frame& f, const VPtr& d, const VPtr& key, VPtr& out);  // d[key] of an absent key
  Status ordered_dict_method(Frame& f, const VPtr& self, const std::string& name, std::vector<VPtr>& args,
                             std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled);
  // collections.deque made in the trace (tracer/values/deque.cpp): a List with obj = deque,
  // defaults = its maxlen.
  Status construct_deque(Frame& f, std::vector<VPtr>& args, std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out);
  Status deque_method(Frame& f, const VPtr& self, const std::string& name, std::vector<VPtr>& args,
                      std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out);
  // instances of tuple subclasses of Python code (namedtuples and others) made in the trace
  // (tracer/values/named_tuple.cpp): Tuple values with obj = the class, keys = a namedtuple's
  // fields, self = the class value.
  Status construct_namedtuple(Frame& f, const VPtr& cls, std::vector<VPtr>& args, std::vector<std::pair<std::string, VPtr>>& kwargs,
                              VPtr& out, bool& handled);
  Status namedtuple_new(Frame& f, std::vector<VPtr>& args, VPtr& out, bool& handled);  // tuple.__new__(cls, it)
  Status namedtuple_getattr(Frame& f, const VPtr& obj, const std::string& name, VPtr& out);
  // Lazy itertools (tracer/values/lazy_iters.cpp): made by make_lazy_itertool, stepped by
  // pull_itertool (one item, or the end).
  Status make_lazy_itertool(Frame& f, PyObject* fn, std::vector<VPtr>& args, std::vector<std::pair<std::string, VPtr>>& kwargs,
                            VPtr& out, bool& handled);
  Status pull_itertool(Frame& f, const VPtr& it);
  // Functions that make frozen objects from what the trace holds (inspect.signature): run now.
  Status call_frozen_maker(Frame& f, PyObject* fn, std::vector<VPtr>& args, std::vector<std::pair<std::string, VPtr>>& kwargs,
                           VPtr& out, bool& handled);
  // d.keys()/values()/items() as a live view, and what a view holds now (tracer/values/dict_view.cpp).
  VPtr dict_view(const VPtr& dict, const std::string& name);
  std::vector<VPtr> view_items(const Value& view);
  // keys - other, other & keys ... (nb: BINARY_OP's operator) and pair in d.items().
  Status view_set_operator(Frame& f, int nb, const VPtr& a, const VPtr& b, VPtr& out);
  Status view_compare(Frame& f, int cmp, const VPtr& a, const VPtr& b, VPtr& out);  // keys == {...}, keys <= s
  Status view_items_contains(Frame& f, const VPtr& view, const VPtr& item, bool& found);
  // The rest of what such an instance answers (tracer/values/instance.cpp).
  void attrs_changed(const VPtr& obj);  // an instance from the frame: its __dict__ is written back
  Status instance_getattr(Frame& f, const VPtr& obj, const std::string& name, VPtr& out);
  Status instance_setattr(Frame& f, const VPtr& obj, const std::string& name, const VPtr& value);
  Status instance_delattr(Frame& f, const VPtr& obj, const std::string& name);
  Status instance_generic_getattr(Frame& f, const VPtr& obj, const std::string& name, VPtr& out);  // object.__getattribute__
  Status instance_generic_delattr(Frame& f, const VPtr& obj, const std::string& name);             // object.__delattr__
  std::optional<Status> call_descriptor(Frame& f, SourcePtr cls, const std::string& name, PyObject* descr, const char* method,
                                        std::vector<VPtr> rest, VPtr& out);  // descr's own Python __get__/__set__
  // del obj.name (DELETE_ATTR, delattr()).
  Status delete_attr(Frame& f, const VPtr& owner, const std::string& name);
  Status instance_truth(Frame& f, const VPtr& obj, bool& out);
  Status instance_iterate(Frame& f, const VPtr& obj, VPtr& out, bool materialize, bool lazy_next = false);
  VPtr user_iterator(const VPtr& obj);
  // a <op> b where an operand's class defines the operator (op, its reflected and in-place forms:
  // "__add__", "__radd__", "__iadd__" or "") in Python: inlined (`handled` false otherwise).
  Status user_operator(Frame& f, const std::string& op, const std::string& reflected, const std::string& inplace,
                       VPtr a, VPtr b, VPtr& out, bool& handled);
  // obj.__name__(args) when obj is an instance of a Python class defining it in Python: inlined
  // (`handled` false otherwise: the caller goes on).
  Status call_dunder(Frame& f, const VPtr& obj, const char* name, std::vector<VPtr> args, VPtr& out, bool& handled);
  Status truth(Frame& f, VPtr v, bool& out);
  // An iterator over v (v itself when it is one; a lazy one is run to its end unless `materialize`
  // is false).
  Status iterate(Frame& f, VPtr v, VPtr& out, bool materialize = true);
  // Makes a lazy iterator's (map, filter) items up to index `want` (or its end): their functions run
  // now, in the order Python runs them.
  Status pull(Frame& f, const VPtr& it, size_t want);
  // A torch function or tensor method called with traced values: a call_function/call_method node
  // with its example value, or a break. graph_call checks the call first (grad-mode switches,
  // requires_grad), record_graph_call records it as it is.
  Status graph_call(Frame& f, Ref target, const std::string& method, std::vector<VPtr> args,
                    std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out);
  Status record_graph_call(Frame& f, Ref target, const std::string& method, std::vector<VPtr> args,
                           std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out);
  // A call_function node recorded as it is (no example computed, no argument checked), reported.
  int add_graph_call(PyObject* target, std::vector<ArgTree> args, Ref example);
  int add_graph_call_kw(PyObject* target, std::vector<ArgTree> args, std::vector<std::pair<std::string, ArgTree>> kwargs,
                        Ref example = {});  // no example: None
  // torch.vmap(fn, ...) made in the trace, and calling it (tracer/values/vmapped.cpp).
  Status make_vmapped(Frame& f, std::vector<VPtr> args, std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out);
  Status call_vmapped(Frame& f, const VPtr& fn, std::vector<VPtr> args, std::vector<std::pair<std::string, VPtr>> kwargs,
                      VPtr& out);
  // torch.func.grad / grad_and_value(fn, ...) made in the trace, and calling it (tracer/values/func_grad.cpp).
  enum class FuncMode { grad, grad_and_value, jacrev, jacfwd, vjp_fn };
  Status make_func_grad(Frame& f, FuncMode mode, std::vector<VPtr> args, std::vector<std::pair<std::string, VPtr>> kwargs,
                        VPtr& out);
  // grad_impl / grad_and_value_impl(func, argnums, has_aux, args, kwargs): what grad(f) made outside calls
  Status func_grad_impl(Frame& f, bool with_value, std::vector<VPtr> args, std::vector<std::pair<std::string, VPtr>> kwargs,
                        VPtr& out);
  Status call_jacfwd(Frame& f, const VPtr& fn, std::vector<VPtr> args, std::vector<std::pair<std::string, VPtr>> kwargs,
                     VPtr& out);
  Status make_hessian(Frame& f, std::vector<VPtr> args, std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out);
  Status call_jacrev(Frame& f, const VPtr& fn, std::vector<VPtr> args, std::vector<std::pair<std::string, VPtr>> kwargs,
                     VPtr& out);
  Status call_func_grad(Frame& f, const VPtr& fn, std::vector<VPtr> args, std::vector<std::pair<std::string, VPtr>> kwargs,
                        VPtr& out);
  // torch.func.functional_call(module, params_and_buffers, args, kwargs): the module called with
  // those tensors read in place of its own (tracer/functional_call.cpp).
  Status functional_call(Frame& f, std::vector<VPtr> args, std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out);
  // torch.func.jvp(func, primals, tangents, *, strict, has_aux) (tracer/jacobians.cpp).
  Status call_jvp(Frame& f, std::vector<VPtr> args, std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out);
  // torch.func.vjp(func, *primals, has_aux): (output, vjp_fn[, aux]); vjp_fn's call (jacobians.cpp).
  Status call_vjp(Frame& f, std::vector<VPtr> args, std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out);
  Status call_vjp_fn(Frame& f, const VPtr& fn, std::vector<VPtr> args, std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out);
  // torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=..., **kwargs): fn's call traced
  // inline, its nodes a Region of the graph (tag_activation_checkpoint's subgraph; checkpoint.cpp).
  Status checkpoint_call(Frame& f, std::vector<VPtr> args, std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out);
  // A draw of Python's random module (random.uniform(0, 1)) over constants: made by the compiled code
  // before its graph, a value not read yet in the trace (calls.cpp).
  Status random_draw(Frame& f, PyObject* fn, const char* name, const std::vector<VPtr>& args, VPtr& out);
  // A module attribute functional_call replaces while its module is called: true and `out` set.
  bool functional_override(const VPtr& module, const std::string& name, VPtr& out) const;
  bool functional_override(PyObject* module, const std::string& name, VPtr& out) const;
  // A module whose tensors functional_call replaces, read another way: its _parameters/_buffers are
  // dicts of the replacements (`handled`), its __dict__ a break.
  Status functional_member(Frame& f, const VPtr& module, const std::string& name, VPtr& out, bool& handled);
  bool functorch_level_busy();  // functorch is transforming for real (a transform here is left to eager)
  // The functorch transforms (vmap, grad) traced around the current step: their count is the level
  // the next one gets when the graph runs.
  int functorch_depth() const { return functorch_depth_; }
  int grad_depth() const { return grad_depth_; }
  int jvp_depth() const { return jvp_depth_; }
  void enter_transform(bool grad) { ++functorch_depth_, grad_depth_ += grad; }
  void exit_transform(bool grad) { --functorch_depth_, grad_depth_ -= grad; }
  // Fn.apply(*args) of a torch.autograd.Function subclass `cls`: one graph node (autograd_apply.cpp).
  Status autograd_forward_inlined(Frame& f, const VPtr& cls, const Ref& forward, std::vector<VPtr> args,
                                  std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out);
  Status autograd_function_apply(Frame& f, const VPtr& cls, std::vector<VPtr> args,
                                 std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out);
  Status run_frame(Frame& f);
  VPtr sym_value(Ref example, int node);   // a symbolic int/bool/float computed by graph node `node`
  Ref specialize(const VPtr& v);           // a Sym as a Python constant (the ShapeEnv guards its value)
  // Turns a metadata result (x.size(), x.shape, x.numel() ...) into Values: symbolic parts become
  // graph nodes (`l_x_.size(0)`), static parts constants.
  Status meta_result(Frame& f, const VPtr& self, const std::string& method, const std::vector<VPtr>& args, Ref r, VPtr& out);
  void announce(const VPtr& v);            // observer: the value's description, once
  int announce_unread(Frame& f, size_t i);  // observer: the id of argument i not read yet
  void report_step(Frame& f);              // observer: the step f is executing, with its stack
  // A guard created by the step being executed (null: one of that kind and source exists).
  Guard* add_guard(GuardKind kind, SourcePtr source, Ref value, Frame& f, std::string text = {});
  Status inline_call(Frame& f, VPtr fn, VPtr self, std::vector<VPtr> args,
                     std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out);
  std::optional<Ref> to_python(const VPtr& v, bool meta);  // real object for consts/containers; meta tensors
  bool to_arg(const VPtr& v, ArgTree& out);
  VPtr from_example(Frame& f, Ref example, int node, Ref device);
  Status as_ndarray(Frame& f, VPtr& v, const std::string& what);  // tensors of a result -> ndarrays
  Status ndarray_call(Frame& f, Ref target, std::vector<VPtr> args, std::vector<std::pair<std::string, VPtr>> kwargs,
                      const std::string& what, VPtr& out);
  bool is_tensor_value(const VPtr& v) const { return v && v->kind == VK::Tensor; }
  int current_line(const Frame& f) const;

 private:
  friend class ValueBuilder;
  template <VK>
  friend struct Kind;  // the value protocol's answers (tracer/values/kind.h)
  Status step(Frame& f);
  // A handler of `f` for an exception raised by its instruction `in`: unwinds the stack and jumps
  // there (true), or false when none covers it.
  bool catch_in(Frame& f, const bc::Instr& in, const Ref& exc);
  bool allow_ndarray_ = false;  // to_arg passes ndarrays as their tensors (inside ndarray_call only)

  CompileId id_;
  EngineObserver* obs_;
  int next_value_ = 1;
  Frame* root_ = nullptr;
  std::vector<Frame*> frames_;
  // The Cell value standing for each real cell met in the trace (the root frame's free variables,
  // the closures of functions called): one per cell, so a write through one is read through all.
  struct RealCell {
    Ref cell;           // the cell (Strong reference)
    VPtr value;         // its Cell value
    SourcePtr source;   // reads the cell object itself (identity guards), or null
  };
  std::vector<RealCell> real_cells_;
  // The Cell value for `cell`, reached by `source` (the cell object, or null): the one met before
  // when an identity guard can tie the two sources, else a new one (cell_of -2; `fresh` set: the
  // caller fills its contents).
  VPtr real_cell(Frame& f, PyObject* cell, const SourcePtr& source, bool& fresh);
  int cur_step_ = 0;
  int functorch_depth_ = 0;  // torch.vmap and torch.func.grad calls traced around the current step (functorch's level)
  int grad_depth_ = 0;       // the torch.func.grad calls among them
  int jvp_depth_ = 0;        // the jacfwd calls among them (a dual level is entered for real while one is traced)
  // functional_call's replacements, innermost last: (module, attribute name) -> the tensor read instead
  struct FunctionalOverride {
    PyObject* module;
    std::string name;
    VPtr value;
  };
  std::vector<FunctionalOverride> functional_overrides_;
  std::vector<std::shared_ptr<void>> inference_modes_;  // torch.inference_mode blocks entered for the trace, innermost last
  std::vector<VPtr> fn_modes_;  // torch function modes on the trace's stack, innermost last (off it while its handler runs)
  std::vector<VPtr> outer_modes_;  // those the thread's stack held as the call began (enter_outer_modes)
  void mode_stack_change(CaptureResult& r) const;
  std::vector<Ref> saved_hooks_restores_;  // disable_saved_tensors_hooks blocks entered for the trace: the message before (None: enabled)
  std::vector<std::pair<Ref, bool>> sdpa_restores_;  // sdpa_kernel blocks entered for the trace: (backends before, set_priority)
  // value (a constant: its object) -> (value kept alive, its fake id)
  std::unordered_map<const void*, std::pair<VPtr, VPtr>> fake_ids_;
#ifdef DV_CHECK_STACK
  void check_stack_effect(Frame& f, const bc::Instr& in, size_t before, bool jumped);
#endif
};

bool is_exact_const(PyObject* o);
// A set (exact) of numbers, strings, None, tuples and frozensets: a constant private to the trace
// (op_BUILD_SET, object_call.cpp)
bool set_of_constants(PyObject* r);
// A NumPy scalar (an instance of numpy.generic: np.float32(2.0), np.int64(3)): immutable, and guarded by
// value when it comes from the frame (ValueBuilder::wrap)
bool numpy_scalar(PyObject* o);
bool enum_member(PyObject* o);  // a member of an Enum that compares and hashes as the stdlib's (a constant)
bool const_key(PyObject* k);    // a dict key read as a constant: is_exact_const, an Enum member, or a tuple of them
// A torch getter of a process setting no guard checks (torch.get_float32_matmul_precision ...):
// called with no argument in the trace, a break, never a constant (object_call.cpp)
bool reads_torch_setting(PyObject* fn);
bool disabled_function(PyObject* fn);  // made by torch.compiler.disable: its call breaks, it is never traced
// torch._disable_dynamo's wrapper (its code is every such wrapper's, so eval_frame.cpp may mark the code
// as running without capture). A function that carries the disable attributes but has code of its own
// -- functools.wraps copies them: torch.optim's step hook around a disabled LBFGS.step -- is disabled
// at its calls only: its code is shared with functions that are not (every optimizer's step hook).
bool disable_wrapper(PyObject* fn);
// What torch.compile(fn) returned (TorchDynamo's wrapper of fn): fn, which a capture inlines as
// TorchDynamo does a nested torch.compile; null for anything else.
Ref compiled_original(PyObject* fn);
bool rnn_module(PyObject* o);  // a torch.nn.RNN, GRU or LSTM module: not traced, as TorchDynamo (value_builder.cpp)
// Dict keys the trace holds: hashable constants, and objects hashed and compared by identity that
// stay what they are (classes, functions, typing's special forms) (dicts.cpp).
bool identity_key(PyObject* o);
PyObject* dict_key(const VPtr& v);  // v's key object (borrowed), or null when v cannot be a key
// A fake id (id() of a value made in the trace), and the error using one as a number raises.
bool is_fake_id(PyObject* o);
Ref new_made_key();               // a key token for an object made in the trace (fake_id.cpp); null on error
bool is_made_key(PyObject* o);
// An object == compares by identity (object's __eq__) that can be hashed, not a class, function or
// tensor: an instance of a Python class without __eq__, an OpOverloadPacket, a functools.partial.
// A dict holds it as a key by identity (dicts.cpp).
bool identity_compared(PyObject* o);
bool is_numpy_callable(PyObject* o);  // a NumPy function or ufunc (not a class) (values/ndarray.cpp)
bool is_fake_id_error(PyObject* exc);
// A Python class whose instances the trace can build and follow: object's __new__, __setattr__,
// __getattribute__ and no __getattr__, an instance __dict__, every base a class like it (no builtin
// base: dict subclasses, exceptions, tensors), metaclass `type`.
bool plain_class(PyTypeObject* tp);
// The builtin base a plain class's instances are (dict or OrderedDict), or null (object).
PyTypeObject* builtin_base(PyTypeObject* tp);
Ref python_getter(PyObject* descr);
// An immutable library value (inspect.Signature, Parameter, a signature's parameters): read directly
// (tracer/values/frozen.cpp).
bool frozen_object(PyObject* o);
// An immutable value of a C class of the stdlib (re.Pattern, re.Match, datetime's, decimal.Decimal):
// a frozen object compared by value (its ==), which a guard checks without running Python
bool stdlib_value(PyObject* o);
// A builtin method bound to a live mutable object (not a module, class, set of constants or immutable value).
bool bound_to_mutable_object(PyObject* fn);
bool namedtuple_class(PyObject* o);  // a collections.namedtuple / typing.NamedTuple class
// A tuple subclass of Python code whose instances the trace holds as Tuples of their class (a
// namedtuple class, or `class Shape(tuple)`: tuple's item access, iteration and length) (named_tuple.cpp)
bool tuple_class(PyObject* o);
// The element count of a tensor or ndarray value, from its example; -1 when not known (a dynamic size)
long known_numel(const VPtr& v);
bool is_const_tree(PyObject* o);  // a constant, or a tuple or frozenset of constants (value_builder.cpp)
PyObject* tuple_new_fn();            // tuple.__new__ (borrowed)
bool endless_iter(const Value& it);  // a lazy iterator that never ends (itertools.count, repeat(x))
PyObject* deque_class();         // collections.deque (borrowed)
bool is_deque(const VPtr& v);    // a deque made in the trace
bool hashed_by_identity(PyTypeObject* tp);  // object's own __hash__ and __eq__ (values/set.cpp)
PyObject* ordered_dict_class();  // collections.OrderedDict (borrowed)
PyObject* defaultdict_class();   // collections.defaultdict (borrowed)
PyObject* dict_view_type(const std::string& name);  // dict_keys, dict_values, dict_items (borrowed)  // a property's fget when it is a Python function, else null
// An exception class whose __new__ and __init__ are builtin (calling it runs no user code).
bool simple_exception_class(PyObject* cls);
// d[key] = value (a repeated key keeps its place, the last value); false: comparing keys raised,
// nothing changed (error cleared)
bool dict_set(Value& d, Ref key, VPtr value);
std::string globals_text(PyObject* globals);  // G['module'].__dict__: a globals dict as a source names it
bool dict_erase(Value& d, PyObject* key);      // del d[key]; false when absent
long find_key(const Value& d, PyObject* key);  // index of key in d's keys; -1 absent, -2 comparing raised
int keys_equal(PyObject* a, PyObject* b);      // one dict key? (identity; a tensor only by identity; else ==); -1 raised
bool module_is_torch_mod(PyObject* mod);  // torch or torch.* module object
// torch's functions that are not graph operators, by identity (tracer/torch_special.cpp).
enum class TorchSpecial {
  none,
  graph_break,         // torch._dynamo.graph_break(): a break
  is_grad_enabled,     // the current grad mode, a constant (guarded by the global-state guard)
  is_tensor,           // torch.is_tensor(v): whether v is a traced tensor
  is_tensor_like,      // torch.overrides.is_tensor_like
  get_default_dtype,   // a constant
  is_compiling,        // torch.compiler.is_compiling() and aliases: True while capturing
  annotate,            // torch.jit.annotate(type, v) is v
  as_tensor,           // torch.as_tensor(tensor, dtype=, device=) is tensor.to(dtype=, device=)
  not_scripting,       // torch.jit.is_scripting() / is_tracing(): False while capturing
  has_torch_function,  // torch.overrides' dispatch tests
  group_by_device_and_dtype,  // torch._C._group_tensors_by_device_and_dtype: a dict of lists of the tensors given
  tensor_method,       // torch.numel(t): t.numel(), the tensor's own method (a size, symbolic where it is)
  of_examples,         // a Python value that depends only on the guarded type, dtype, device and layout of
                       // the tensors given: computed on their examples (_has_compatible_shallow_copy_type)
  vmap,                // torch.vmap / torch.func.vmap: a Vmapped value (tracer/values/vmapped.cpp)
  vmap_impl,           // functorch's vmap_impl(func, in_dims, out_dims, randomness, chunk_size, *args): a Vmapped called
  func_grad,           // torch.func.grad: a FuncGrad value (tracer/values/func_grad.cpp)
  func_grad_and_value, // torch.func.grad_and_value: a FuncGrad value
  func_jacrev,         // torch.func.jacrev: a FuncGrad value
  func_jacfwd,         // torch.func.jacfwd: a FuncGrad value
  func_hessian,        // torch.func.hessian(f): jacfwd(jacrev(f)), FuncGrad values
  func_eager,          // torch.func.linearize: a break
  func_jvp,            // torch.func.jvp: traced (jacobians.cpp)
  func_vjp,            // torch.func.vjp: traced (jacobians.cpp)
  checkpoint,          // torch.utils.checkpoint.checkpoint: a subgraph, as TorchDynamo's tag_activation_checkpoint
  functional_call,     // torch.func.functional_call (not the deprecated torch.nn.utils.stateless one, as TorchDynamo)
  grad_impl,           // functorch's grad_impl(func, argnums, has_aux, args, kwargs): a FuncGrad called
  grad_and_value_impl, // functorch's grad_and_value_impl(...): the same
  compile,             // torch.compile(fn) while capturing: fn itself, inlined where it is called (as TorchDynamo)
  effect,              // seeds, save/load, process settings: a break
  unguarded_state,     // reads state the guards do not check (torch.is_inference_mode_enabled): a break
  profiler_state,      // torch.autograd._profiler_enabled(): a constant, its value in the GLOBAL_STATE guard
  anomaly_state,       // torch.is_anomaly_enabled(): likewise
  sdpa_kernel,         // torch.nn.attention.sdpa_kernel(backends): a GradMode value (sdpa_kernel.cpp)
  saved_hooks_off,     // torch.autograd.graph.disable_saved_tensors_hooks(message): a GradMode value (saved_hooks_off.cpp)
  push_fn_mode,        // torch._C._push_on_torch_function_stack(mode): onto the trace's mode stack (fn_modes.cpp)
  pop_fn_mode,         // torch._C._pop_torch_function_stack(): off it
  handle_torch_function,  // torch.overrides.handle_torch_function(public_api, relevant_args, *args, **kwargs)
  fn_mode_state,       // torch._C._len_torch_function_stack / _is_torch_function_mode_enabled: of the trace's stack
  check,               // torch._check(cond, message) and _check_index/_value/_type/_not_implemented/_with: of a
                       // constant or symbolic condition, decided (guarded) while tracing
};
bool torch_function_mode_class(PyObject* o);  // a subclass of torch.overrides.TorchFunctionMode (fn_modes.cpp)
TorchSpecial torch_special(PyObject* fn);
// Grad mode (tracer/values/grad_mode.cpp, handlers_control.cpp). A GradMode value's `name` says what
// it is: "" a manager made by torch.no_grad() / enable_grad() (flag: the mode it enters);
// kGradSetEnabled one made by torch.set_grad_enabled(b), which set mode b as it was made (obj: the
// mode before, True/False, which its exit restores); kGradExit a with-block's bound __exit__ (flag:
// the mode it restores); kGradDecorated a function decorated by a manager (self: the function).
inline constexpr const char* kGradExit = "__exit__";
inline constexpr const char* kGradSetEnabled = "set_grad_enabled";
inline constexpr const char* kGradDecorated = "decorated";
// A torch.inference_mode block's __exit__ (flag: the mode; node: its _enter_inference_mode node) (inference_mode.cpp)
inline constexpr const char* kInferenceExit = "inference_exit";
PyObject* inference_mode_class();  // torch.inference_mode (borrowed)
bool is_inference_mode(PyObject* o);  // an instance of exactly it
// A torch.autocast block's __exit__ (obj: the autocast object; node: its _enter_autocast node) (autocast.cpp)
inline constexpr const char* kAutocastExit = "autocast_exit";
// torch.nn.attention.sdpa_kernel(...) (obj: the list of backends it enables; flag: set_priority) and
// its block's __exit__ (obj: the backends enabled before it) (sdpa_kernel.cpp)
inline constexpr const char* kSdpaKernel = "sdpa_kernel";
inline constexpr const char* kSdpaExit = "sdpa_exit";
// torch.autograd.graph.disable_saved_tensors_hooks(message) (obj: the message) and its block's
// __exit__ (obj: the message before it, None: hooks were enabled) (saved_hooks_off.cpp)
inline constexpr const char* kSavedHooksOff = "saved_hooks_off";
inline constexpr const char* kSavedHooksExit = "saved_hooks_exit";
PyObject* autocast_class();  // torch.amp.autocast_mode.autocast (borrowed)
bool autocast_spelling(PyObject* cls);  // that class, or torch.cpu.amp.autocast / torch.cuda.amp.autocast
bool is_autocast(PyObject* o);  // an instance of exactly one of them
PyObject* autocast_exit_class();  // dynview._runtime.AutocastExit (borrowed)
Translator::Status set_grad_mode(Translator& t, Frame& f, bool mode);  // a graph node, and the mode now
// The answers of two kinds of TorchSpecial, computed while tracing (torch_special.cpp).
Translator::Status group_by_device_and_dtype(Translator& t, Frame& f, PyObject* fn, const std::vector<VPtr>& args,
                                             const std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out);
Translator::Status answer_of_examples(Translator& t, Frame& f, PyObject* fn, const std::vector<VPtr>& args, VPtr& out);
bool outside_dict_read_method(const std::string& name);  // a dict method outside_dict_read answers
// A dict (subclass) object reached from the frame whose `method` is dict's own: outside_dict_read
// answers it.
bool outside_dict(const VPtr& v, const char* method);
bool is_view_name(const std::string& name);  // keys, values, items

// Opcode handlers, by family (handlers_*.cpp). Each returns a Break or nothing; `ins` is the
// instruction being executed; the frame's ip already points past it.
using Handler = Translator::Status (*)(Translator&, Frame&, const bc::Instr&);
Handler handler_for(bc::Name name);  // by version-neutral name: one table for every version

}  // namespace dv
