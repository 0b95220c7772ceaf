// PEP 523 frame hook (CPython 3.11-3.13), per-code cache in co_extra and the compile driver.
// Hit path: code extra -> guard tree over the frame's fast locals -> call the transformed function
// with the frame's argument slots. No Python code runs there besides the cached code itself.
// Frame internals are read through the per-version shim (frame_shim.h).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <Python.h>

#include <chrono>
#include <mutex>
#include <unordered_set>

#include "codegen.h"
#include "resume.h"
#include "core/bytecode.h"
#include "engine.h"
#include "frame_shim.h"
#include "pycache.h"
#include "tensor_match.h"
#include "translator.h"

namespace dv {

namespace {

std::string describe_backend(PyObject* b);  // below

struct Entry {
  std::unique_ptr<GuardTree> guards;
  Ref fn;  // transformed function (Strong)
  Ref backend;  // the backend it was compiled for: a call under another one misses (TorchDynamo's BACKEND_MATCH)
  int hits = 0;
  CompileId id;
};

struct CodeState {
  // Skip: never captured (stdlib, torch internals, generators); Eager: captured nothing (a break),
  // runs as it is; NoGraph: nothing for a graph (no tensor within reach, or a capture without an
  // operator), runs as it is, quietly (TorchDynamo's skipped frames); Disabled: torch.compiler.disable
  // -- it and every frame it calls run without dynview; RunOnly: the recompile limit was reached --
  // its cache entries still serve the calls whose guards pass, and any other call runs as it is with
  // every frame it calls using only what is already compiled (TorchDynamo's RUN_ONLY). reset() clears
  // Eager, NoGraph and RunOnly.
  enum Action { Default, Skip, Eager, NoGraph, Disabled, RunOnly } action = Default;
  bool top_only = false;   // torch.nn module code: captured only as the first frame of a compiled call
  std::vector<std::unique_ptr<Entry>> entries;  // most recently used first
  int frame_id = -1;
  int recompiles = 0;
  std::string eager_reason;
  std::string parent;      // resume functions: the compile and break that made it
  FrameState frame_state;  // inputs earlier compiles saw (automatic dynamic shapes)
  bool delayed = false;    // a cache miss ran as it is under set_stance("eager_then_compile")
};

Py_ssize_t g_extra_index = -1;
EvalFrameFn g_previous = nullptr;
bool g_installed = false;
EngineConfig g_config;
EngineObserver* g_observer = nullptr;
// Process-lifetime objects holding Python references are allocated once and never destroyed:
// static destructors run after Py_Finalize, when touching a Python object is no longer allowed.
Ref& g_unsupported = *new Ref();
int g_next_frame_id = 0;
std::vector<CompileRecord>& g_records = *new std::vector<CompileRecord>();
std::vector<CodeState*>& g_states = *new std::vector<CodeState*>();  // every state, for reset()
thread_local ThreadMode* t_mode_ptr = nullptr;
ThreadMode& mode() {
  if (!t_mode_ptr) t_mode_ptr = new ThreadMode();  // per thread, intentionally not freed (see above)
  return *t_mode_ptr;
}
thread_local bool t_busy = false;  // compiling or running cached code: do not intercept

// While guards run: a guard that reads an attribute through a class's own __getattr__ (peft's
// PeftModel forwards missing names to its model) runs Python, which is not a frame of the program's
// to capture (TorchDynamo turns its callback off around its guards too).
struct GuardsRunning {
  bool was = t_busy;
  GuardsRunning() { t_busy = true; }
  ~GuardsRunning() { t_busy = was; }
  GuardsRunning(const GuardsRunning&) = delete;
  GuardsRunning& operator=(const GuardsRunning&) = delete;
};
std::string g_skip_prefixes[3];

void free_state(void* p) {
  auto* s = static_cast<CodeState*>(p);
  auto it = std::find(g_states.begin(), g_states.end(), s);
  if (it != g_states.end()) g_states.erase(it);
  delete s;
}

CodeState* state_of(PyCodeObject* co, bool create) {
  void* extra = nullptr;
  if (_PyCode_GetExtra(reinterpret_cast<PyObject*>(co), g_extra_index, &extra) < 0) {
    PyErr_Clear();
    return nullptr;
  }
  if (extra || !create) return static_cast<CodeState*>(extra);
  auto* s = new CodeState();
  if (_PyCode_SetExtra(reinterpret_cast<PyObject*>(co), g_extra_index, s) < 0) {
    PyErr_Clear();
    delete s;
    return nullptr;
  }
  g_states.push_back(s);
  return s;
}

// 0: capture; 1: never capture; 2: capture only as the first frame of a compiled call (torch's nn
// module forwards: dynview.compile(nn.Linear(...)) captures it, an eager frame's call does not).
int skip_file(PyCodeObject* co) {
  std::string fn = str_of(co->co_filename);
  if (fn.empty() || fn[0] == '<') return fn.rfind("<frozen", 0) == 0;
  auto under = [&](const std::string& p) { return !p.empty() && fn.rfind(p, 0) == 0; };
  if (under(g_skip_prefixes[2])) return true;  // dynview itself
  if (under(g_skip_prefixes[1])) {
    // torch: only nn module forwards may be roots (nn.Sequential, nn.Linear ...), not the
    // module-call machinery in module.py, whose hook checks are not guarded yet.
    const std::string rest = fn.substr(g_skip_prefixes[1].size());
    if (rest.rfind("optim/", 0) == 0) return 0;  // torch.optim: captured (a step as TorchDynamo compiles it)
    return rest.rfind("nn/modules/", 0) != 0 || rest == "nn/modules/module.py" ? 1 : 2;
  }
  if (fn.find("/site-packages/numpy/") != std::string::npos) return 1;  // NumPy's own Python (TorchDynamo skips it too)
  return under(g_skip_prefixes[0]) && fn.find("/site-packages/") == std::string::npos;  // the stdlib
}

// torch.compiler.disable(fn, recursive=False) wraps fn in a function of one code (torch's
// nonrecursive_disable_wrapper, itself never captured: a torch file) that calls it: a frame of fn
// called from there runs as it is, on a cache miss, and the frames it calls are captured, as
// TorchDynamo's convert_frame decides by its caller's code. The code is known once torch._dynamo
// is imported (nothing can make such a wrapper before); the caller is the thread's current frame,
// as this frame is not entered yet.
bool called_by_nonrecursive_disable() {
  static PyObject* code = nullptr;  // kept for the process
  if (!code) {
    Ref mod = Ref::steal(PyImport_GetModule(Ref::steal(PyUnicode_FromString("torch._dynamo.decorators")).get()));
    Ref c = mod ? Ref::steal(PyObject_GetAttrString(mod.get(), "_nonrecursive_disable_wrapper_code")) : Ref();
    PyErr_Clear();
    if (!c || !PyCode_Check(c.get())) return false;
    code = c.release();
  }
  PyFrameObject* caller = PyEval_GetFrame();  // borrowed
  if (!caller) return false;
  Ref caller_code = Ref::steal(reinterpret_cast<PyObject*>(PyFrame_GetCode(caller)));
  return caller_code.get() == code;
}

// TorchDynamo's has_tensor_in_frame: whether a frame can give a graph at all. A value holds a tensor
// when it is a tensor, an nn.Module (or a subclass of one), a NumPy array or scalar, or an exact
// list, tuple, dict or named tuple holding one; other objects are taken not to.
bool holds_tensor(PyObject* o, std::unordered_set<PyObject*>& seen) {
  if (!seen.insert(o).second) return false;
  PyTypeObject* module = reinterpret_cast<PyTypeObject*>(py().nn_Module.get());
  if (is_tensor(o) || PyObject_TypeCheck(o, module)) return true;
  if (PyType_Check(o) && PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(o), module)) return true;
  if (std::strncmp(Py_TYPE(o)->tp_name, "numpy.", 6) == 0) return true;  // numpy.ndarray, numpy.float32 ...
  const bool named_tuple = PyTuple_Check(o) && PyObject_HasAttrString(reinterpret_cast<PyObject*>(Py_TYPE(o)), "_fields");
  if (PyList_CheckExact(o) || PyTuple_CheckExact(o) || named_tuple) {
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i)
      if (holds_tensor(PySequence_Fast_GET_ITEM(o, i), seen)) return true;
  } else if (PyDict_CheckExact(o)) {
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(o, &pos, &k, &v))
      if (holds_tensor(v, seen)) return true;
  }
  return false;
}

// ... among the arguments and free variables of a frame about to start, or a name of its code that is
// a global torch or NumPy module (a function that makes tensors without being given one).
bool frame_has_tensors(PyCodeObject* co, PyObject* const* locals, int nargs, PyObject* globals, PyObject* closure) {
  PyObject* names = co->co_names;
  for (Py_ssize_t i = 0; globals && PyDict_Check(globals) && i < PyTuple_GET_SIZE(names); ++i) {
    PyObject* g = PyDict_GetItem(globals, PyTuple_GET_ITEM(names, i));  // borrowed; no exception
    if (!g || !PyModule_Check(g)) continue;
    const char* name = PyModule_GetName(g);
    if (!name) {
      PyErr_Clear();
      continue;
    }
    for (const char* root : {"torch", "numpy"}) {
      const size_t n = std::strlen(root);
      if (std::strncmp(name, root, n) == 0 && (name[n] == 0 || name[n] == '.')) return true;
    }
  }
  std::unordered_set<PyObject*> seen;
  for (int i = 0; i < nargs; ++i)
    if (locals[i] && holds_tensor(locals[i], seen)) return true;
  for (Py_ssize_t i = 0; closure && PyTuple_Check(closure) && i < PyTuple_GET_SIZE(closure); ++i) {
    PyObject* cell = PyTuple_GET_ITEM(closure, i);
    if (PyCell_Check(cell) && PyCell_GET(cell) && holds_tensor(PyCell_GET(cell), seen)) return true;
  }
  return false;
}

int nargs_of(PyCodeObject* co) {
  return co->co_argcount + co->co_kwonlyargcount + ((co->co_flags & CO_VARARGS) ? 1 : 0) +
         ((co->co_flags & CO_VARKEYWORDS) ? 1 : 0);
}

PyObject* run_entry(Entry& e, _PyInterpreterFrame* frame, int nargs, bool hit = true) {
  if (hit) ++e.hits;
  // One entry serves every function object of its code: the transformed function reads the calling
  // function's closure cells, not those of the function it was compiled for. (The cells are copied
  // into the new frame as it starts, so a nested call with another closure cannot disturb it.)
  auto* fn = reinterpret_cast<PyFunctionObject*>(e.fn.get());
  PyObject* cells = shim::frame_closure(frame);
  if (fn->func_closure != cells) {
    Py_XINCREF(cells);
    Py_XSETREF(fn->func_closure, cells);
  }
  return PyObject_Vectorcall(e.fn.get(), shim::frame_locals(frame), static_cast<size_t>(nargs), nullptr);
}

// The compiled graph as the transformed code calls it: nothing it runs is intercepted (code run by
// the transformed code itself, such as resume functions, is). When an operator in it raises, the
// vmap levels and grad mode its nodes set are put back as eager's with-blocks put them back.
PyObject* call_graph(PyObject* compiled, PyObject* const* args, Py_ssize_t n) {
  const bool was_busy = t_busy;
  t_busy = true;
  // The graph holds what the handlers of the torch function modes around the call did: none sees its operators
  std::optional<ModesTakenOff> modes_off;
  if (torch_function_mode_active()) modes_off.emplace(false);
  const GraphRunState before = graph_run_state();
  PyObject* r = PyObject_Vectorcall(compiled, args, static_cast<size_t>(n), nullptr);
  if (!r) restore_graph_run_state(before);
  t_busy = was_busy;
  return r;
}
PyMethodDef g_call_graph_def = {"__compiled_graph", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(call_graph)),
                                METH_FASTCALL, nullptr};


// Graph outputs: the tensor nodes inside `v` (containers walked), appended once each.
void add_outputs(const VPtr& v, std::vector<int>& outputs, const MadeModuleAttrs* made = nullptr) {
  for (int n : output_nodes(v, made))
    if (std::find(outputs.begin(), outputs.end(), n) == outputs.end()) outputs.push_back(n);
}

// ---- the compile pipeline: capture -> outputs -> FX + backend -> shape guards -> codegen -------

// The graph outputs of a capture: the tensors in its return value or, for a capture stopped at a
// break, in the stack and locals that cross it (inputs among those are reloaded from their
// sources, not passed through the graph); then the values written to outside objects.
std::vector<int> plan_outputs(const CaptureResult& c) {
  std::vector<int> outputs;
  const MadeModuleAttrs* made = &c.out.made_module_attrs;
  if (c.stopped) {
    for (const VPtr& v : c.stack) add_outputs(v, outputs, made);
    for (const VPtr& v : c.locals) add_outputs(v, outputs, made);
  } else {
    add_outputs(c.ret, outputs, made);
  }
  for (const auto& w : c.out.side_effects.attr_writes) {
    if (w.value) add_outputs(w.value, outputs, made);
    if (w.owner->kind == VK::Tensor) add_outputs(w.owner, outputs);  // an attribute set on a tensor: set on the real one
  }
  for (const auto& w : c.out.side_effects.global_writes) add_outputs(w.value, outputs, made);
  for (const VPtr& l : c.out.side_effects.mutated_lists) add_outputs(l, outputs, made);
  for (const VPtr& d : c.out.side_effects.mutated_dicts) add_outputs(d, outputs, made);
  for (const VPtr& cell : c.out.side_effects.written_cells) add_outputs(cell, outputs, made);
  if (c.stopped) {
    const auto& nodes = c.out.graph.nodes();
    std::erase_if(outputs, [&](int n) { return nodes[static_cast<size_t>(n)].op == GraphNode::Op::Placeholder; });
  }
  return outputs;
}

// Whether a graph output that requires grad comes from a requires_grad_() leaf made in the graph
// (its node, or one computed from it): AOTAutograd's functionalization would return it without
// requires_grad, so the capture is made again with that call a break (TorchDynamo's
// _check_requires_grad_intermediate_outputs, which restarts the analysis so).
bool grad_leaf_leaks(const CaptureResult& c) {
  if (c.grad_leaves.empty()) return false;
  const auto& nodes = c.out.graph.nodes();
  for (int n : plan_outputs(c)) {
    if (n < 0 || static_cast<size_t>(n) >= nodes.size() || !c.out.graph.depends_on(n, c.grad_leaves)) continue;
    PyObject* ex = nodes[static_cast<size_t>(n)].example.get();
    Ref rg = ex ? Ref::steal(PyObject_GetAttrString(ex, "requires_grad")) : Ref();
    if (!rg) PyErr_Clear();
    if (rg && rg.get() == Py_True) return true;
  }
  return false;
}


// FX module and the backend's callable (wrapped so the transformed code's call of it is never
// intercepted), then the ShapeEnv's guards. No operator recorded: no graph (as TorchDynamo).
// False with a Python error set: the backend failed (the user's error, raised as torch.compile
// does); false with `why` set: a shape guard cannot be expressed.
// The graph's calls other than torch._C._set_grad_enabled. The graph before a break that only sets
// the grad mode is not compiled: TorchDynamo's cleanup_graph erases a mode set and set back (its
// graph leaves the block at the break) and the graph has no output; the transformed code sets the
// mode the capture ended in. (A whole frame's is: TorchDynamo returns its inputs from one.)
int compute_calls(const Graph& g) {
  int n = 0;
  for (const GraphNode& node : g.nodes())
    if (node.op != GraphNode::Op::Placeholder && !(node.op == GraphNode::Op::CallFunction && node.target.get() == py().set_grad_enabled_fn.get())) ++n;
  return n;
}

bool lower(CaptureResult& c, PyObject* backend, std::string& why) {
  if ((c.stopped ? compute_calls(c.out.graph) : c.out.graph.num_calls()) > 0) {
    c.gm = Ref::steal(c.out.graph.to_fx(c.outputs));
    if (c.gm) c.compiled = Ref::steal(c.out.compile_with_backend(backend, c.gm.get(), mode().fullgraph));
    if (c.compiled) c.compiled = Ref::steal(PyCFunction_New(&g_call_graph_def, c.compiled.get()));
    if (!c.gm || !c.compiled) return false;
  }
  return c.out.add_shape_guards(why);
}

std::string location(PyCodeObject* co) {
  return str_of(co->co_filename) + ":" + std::to_string(co->co_firstlineno);
}

// The graph as the observer sees it: FX node names, ops, targets, args and example meta, each
// node with the symbolic step that created it. Python errors are cleared (events are best effort).
GraphEvent graph_event(CompileId id, PyObject* gm, const Graph& graph) {
  GraphEvent ev{id, "", graph.num_calls(), {}};
  Ref code = Ref::steal(PyObject_GetAttrString(gm, "code"));
  if (code) ev.code = str_of(code.get());
  // the checkpointed functions' subgraphs (wrap_body_N), nested ones too, after the graph's code
  std::vector<std::pair<std::string, Ref>> bodies;
  for (int k = 0;; ++k) {
    Ref b = Ref::steal(PyObject_GetAttrString(gm, ("wrap_body_" + std::to_string(k)).c_str()));
    if (!b) break;
    bodies.emplace_back("wrap_body_" + std::to_string(k), std::move(b));
  }
  PyErr_Clear();
  for (size_t k = 0; k < bodies.size(); ++k) {
    Ref bc = Ref::steal(PyObject_GetAttrString(bodies[k].second.get(), "code"));
    if (bc) ev.code += "\n# " + bodies[k].first + ":" + str_of(bc.get());
    for (int j = 0;; ++j) {
      Ref inner = Ref::steal(PyObject_GetAttrString(bodies[k].second.get(), ("wrap_body_" + std::to_string(j)).c_str()));
      if (!inner) break;
      bodies.emplace_back(bodies[k].first + ".wrap_body_" + std::to_string(j), std::move(inner));
    }
    PyErr_Clear();
  }
  Ref g = Ref::steal(PyObject_GetAttrString(gm, "graph"));
  Ref nodes = g ? Ref::steal(PyObject_GetAttrString(g.get(), "nodes")) : Ref();
  Ref it = nodes ? Ref::steal(PyObject_GetIter(nodes.get())) : Ref();
  size_t i = 0;
  while (it) {
    Ref n = Ref::steal(PyIter_Next(it.get()));
    if (!n) break;
    GraphNodeInfo info;
    Ref name = Ref::steal(PyObject_GetAttrString(n.get(), "name"));
    Ref op = Ref::steal(PyObject_GetAttrString(n.get(), "op"));
    Ref target = Ref::steal(PyObject_GetAttrString(n.get(), "target"));
    Ref args = Ref::steal(PyObject_GetAttrString(n.get(), "args"));
    Ref kwargs = Ref::steal(PyObject_GetAttrString(n.get(), "kwargs"));
    info.name = str_of(name.get());
    info.op = str_of(op.get());
    if (target && PyUnicode_Check(target.get())) info.target = str_of(target.get());
    else if (target) {
      Ref qn = Ref::steal(PyObject_GetAttrString(target.get(), "__qualname__"));
      if (!qn) {  // a callable object (torch._numpy's wrappers): its __name__, as FX's code names it
        PyErr_Clear();
        qn = Ref::steal(PyObject_GetAttrString(target.get(), "__name__"));
      }
      PyErr_Clear();
      Ref mod = Ref::steal(PyObject_GetAttrString(target.get(), "__module__"));
      PyErr_Clear();
      if (qn && PyUnicode_Check(qn.get())) info.target = (mod && PyUnicode_Check(mod.get()) ? str_of(mod.get()) + "." : "") + str_of(qn.get());
      else info.target = repr_of(target.get());
    }
    if (args) info.args = repr_of(args.get());
    if (kwargs && PyDict_Check(kwargs.get()) && PyDict_Size(kwargs.get()) > 0) info.args += " " + repr_of(kwargs.get());
    // the node it was made from (a checkpointed function's call and getitems take its place)
    Ref meta = Ref::steal(PyObject_GetAttrString(n.get(), "meta"));
    PyObject* at = meta && PyDict_Check(meta.get()) ? PyDict_GetItemString(meta.get(), "dv_node") : nullptr;
    const long index = at && PyLong_Check(at) ? PyLong_AsLong(at) : -1;
    if (index >= 0 && static_cast<size_t>(index) < graph.nodes().size()) {
      const GraphNode& gn = graph.nodes()[static_cast<size_t>(index)];
      info.step = gn.step;
      if (gn.example) info.meta = tensor_meta_text(gn.example.get(), nullptr);
    }
    PyErr_Clear();
    ev.nodes.push_back(std::move(info));
    ++i;
  }
  PyErr_Clear();
  return ev;
}

int code_id(PyCodeObject* co) {
  const CodeFacts* f = code_facts(reinterpret_cast<PyObject*>(co));
  if (!f) PyErr_Clear();
  return f ? f->id : -1;
}

// The guards a compile keeps, reported once it knows them (a split compile keeps those of its
// restarted trace, which stops before the break).
void report_guards(CompileId id, const std::vector<Guard>& guards) {
  if (!g_observer) return;
  for (const Guard& g : guards) g_observer->on_guard(GuardEvent{id, guard_kind_name(g.kind), g.text, g.step, g.line, g.file});
}

// fullgraph=True: the break becomes a dynview.Unsupported exception (made by
// dynview._engine._new_unsupported: a torch._dynamo.exc.Unsupported too where torch._dynamo is imported).
void raise_unsupported(const Break& brk) {
  const std::string title(breaks::title(brk.id));  // "" for an id the table does not know
  std::string msg = brk.id + (title.empty() ? "" : " (" + title + ")") + ": " + brk.message +
                    (brk.hint.empty() ? "" : "\n  hint: " + brk.hint) + "\n  at " + brk.filename + ":" + std::to_string(brk.line);
  Ref args = Ref::steal(Py_BuildValue("(s)", msg.c_str()));
  Ref exc = Ref::steal(PyObject_Call(g_unsupported.get(), args.get(), nullptr));
  if (!exc) return;
  PyObject_SetAttrString(exc.get(), "break_id", Ref::steal(PyUnicode_FromString(brk.id.c_str())).get());
  PyObject_SetAttrString(exc.get(), "title", Ref::steal(PyUnicode_FromString(title.c_str())).get());
  PyObject_SetAttrString(exc.get(), "message", Ref::steal(PyUnicode_FromString(brk.message.c_str())).get());
  PyObject_SetAttrString(exc.get(), "hint", Ref::steal(PyUnicode_FromString(brk.hint.c_str())).get());
  PyObject_SetAttrString(exc.get(), "lineno", Ref::steal(PyLong_FromLong(brk.line)).get());
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.get())), exc.get());
}

// Compiles the frame as a pipeline of values: capture -> CaptureResult -> outputs -> FX + backend
// -> shape guards -> codegen -> cache entry. A break splits the frame: a second capture stops
// before the breaking root instruction, and its result is compiled and continued in resume
// functions. On success adds an entry and returns it; returns nullptr with *eager=true to run the
// frame eagerly, or with a Python error set (a backend error; fullgraph's Unsupported).
// `static_floats`: a second attempt, after the backend could not take a symbolic float as a tensor
// (*retry set: AOTAutograd's TensorifyScalarRestartAnalysis), with every float a constant, as
// TorchDynamo restarts its analysis with the float specialized.
Entry* compile_frame_once(CodeState& st, PyCodeObject* co, _PyInterpreterFrame* frame, const std::string& reason, bool* eager,
                          bool static_floats, bool* retry) {
  *eager = false;
  // The torch function modes around the call are traced (Translator::enter_outer_modes) and held off
  // the thread's stack meanwhile: the examples' operators and the backend's compile do not reach them.
  ModesTakenOff modes_held(/*held=*/true);
  SavedHooksStateKept saved_hooks_kept;
  if (st.frame_id < 0) st.frame_id = g_next_frame_id++;
  CompileId id{st.frame_id, static_cast<int>(st.entries.size()) + st.recompiles};
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&]() { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  CompileRecord rec;
  rec.id = id;
  rec.qualname = str_of(co->co_qualname);
  rec.filename = str_of(co->co_filename);
  rec.firstlineno = co->co_firstlineno;
  rec.reason = reason;
  auto* code = reinterpret_cast<PyObject*>(co);
  const CodeFacts* facts = code_facts(code);
  if (!facts) PyErr_Clear();
  if (g_observer && !static_floats) {  // (the second attempt is the same compile: its steps were recorded)
    if (facts && !announce_code(g_observer, facts)) PyErr_Clear();
    g_observer->on_compile_start(CompileStartEvent{id, rec.qualname, rec.filename, rec.firstlineno, reason, facts ? facts->id : -1});
  }
  PyObject* closure = shim::frame_closure(frame);
  PyObject* const globals = shim::frame_globals(frame);
  CaptureRequest req;
  req.id = id;
  req.obs = g_observer;
  req.code = code;
  req.globals = globals;
  req.builtins = shim::frame_builtins(frame);
  req.args = shim::frame_locals(frame);
  req.closure = closure;
  req.frame_state = &st.frame_state;
  req.dynamic_mode = static_cast<DynamicMode>(mode().dynamic);
  req.static_floats = static_floats;
  if (static_floats) req.obs = nullptr;
  // Each capture runs from the grad mode the frame starts in; the mode it ends in is what the
  // transformed code must leave (a resume function may leave a with-block the frame entered).
  const bool grad_before = grad_mode_enabled();
  // (a torch.autocast block of the trace is entered for real while it is traced, so that example
  // values see it: what the capture left entered, a break inside the block, is left here)
  const AutocastState autocast_before = autocast_state();
  auto run_capture = [&](const CaptureRequest& r, int& grad_change) {
    CaptureResult c = capture(r);
    restore_autocast_state(autocast_before);
    const bool grad_after = grad_mode_enabled();
    set_grad_mode_enabled(grad_before);
    grad_change = grad_after != grad_before ? int(grad_after) : -1;
    return c;
  };
  // A fake-tensor error of the backend (AOTAutograd meeting a data-dependent output, an operator
  // without a fake kernel: TorchDynamo's exceptions_allowed_to_be_fallback) is a break, as in
  // torch.compile: the frame runs eagerly, with a warning. So is a guard on a data-dependent
  // symbol (AOTAutograd reading a 0-d int tensor input as an index, A[t], in a dynamic compile,
  // where torch.compile hands the backend real inputs and compiles). Any other backend error is
  // raised.
  auto backend_fallback = [&](std::string& why) -> bool {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);  // (held across the import below, which runs with no error set)
    static PyObject* allowed = [] {
      Ref exc = Ref::steal(PyImport_ImportModule("torch._dynamo.exc"));
      Ref fallback = exc ? Ref::steal(PyObject_GetAttrString(exc.get(), "exceptions_allowed_to_be_fallback")) : Ref();
      PyObject* data_guard = kept_attr("torch.fx.experimental.symbolic_shapes", "GuardOnDataDependentSymNode");
      if (!fallback || !data_guard || !PyTuple_Check(fallback.get())) return PyErr_Clear(), fallback.release();  // kept
      PyObject* a = PySequence_Concat(fallback.get(), Ref::steal(PyTuple_Pack(1, data_guard)).get());  // kept
      PyErr_Clear();
      return a;
    }();
    if (!type || !allowed || !PyErr_GivenExceptionMatches(type, allowed)) {
      PyErr_Restore(type, value, tb);
      return false;
    }
    PyErr_Restore(type, value, tb);
    Ref err = take_error();
    Ref text = err ? Ref::steal(PyObject_Str(err.get())) : Ref();
    if (!text) PyErr_Clear();
    std::string first = text ? str_of(text.get()) : std::string();
    first = first.substr(0, first.find('\n'));
    why = "backend " + describe_backend(mode().backend.get()) + " failed with " + (err ? Py_TYPE(err.get())->tp_name : "?") +
          (first.empty() ? "" : ": " + first);
    const std::string warning = "dynview: " + rec.qualname + " runs eagerly: " + why;
    if (PyErr_WarnEx(PyExc_UserWarning, warning.c_str(), 1) < 0) PyErr_Clear();
    return true;
  };
  auto backend_error = [&]() -> Entry* {
    if (!static_floats) {
      PyObject *type, *value, *tb;
      PyErr_Fetch(&type, &value, &tb);  // (held across the import below, which runs with no error set)
      static PyObject* tensorify = kept_attr("torch._dynamo.exc", "TensorifyScalarRestartAnalysis");
      if (tensorify && type && PyErr_GivenExceptionMatches(type, tensorify)) {  // (compiled again, floats constant)
        Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
        *retry = true;
        return nullptr;
      }
      PyErr_Restore(type, value, tb);
    }
    // Backend failures are errors of the user's configuration: surface them like torch.compile.
    if (g_observer) g_observer->on_compile_end(CompileEndEvent{id, "error", 0, 0, elapsed()});
    return nullptr;
  };
  int grad_change = -1;
  CaptureResult first = run_capture(req, grad_change);
  if (first.retry_dynamic) {
    // A tensor below the arguments (a KV cache's) changed sizes since an earlier compile: this one is
    // a dynamic compile (automatic dynamic shapes, as TorchDynamo marks any tensor source); its steps
    // were recorded by the first capture.
    req.dynamic = true;  // (and so each restart below)
    CaptureRequest again = req;
    again.obs = nullptr;
    first = run_capture(again, grad_change);
  }
  bool requires_grad_breaks = false;
  // Captured again with requires_grad_() of a tensor made in the graph a break: when an output that
  // requires grad comes from it, and (conservatively) in a frame that breaks, whose split keeps the
  // tensor live across the break.
  if (!first.grad_leaves.empty() && (first.brk || grad_leaf_leaks(first))) {
    CaptureRequest again = req;
    again.obs = nullptr;
    again.requires_grad_breaks = requires_grad_breaks = true;
    first = run_capture(again, grad_change);
  }
  std::optional<Break> brk = first.brk;
  if (!brk && first.out.graph.num_calls() == 0 && first.out.side_effects.empty() && grad_change < 0 && st.entries.empty()) {
    // Nothing for a graph (TorchDynamo's SkipFrame "no content in function call"): the frame runs as
    // it is, now and on later calls (until reset), whatever they pass -- as under torch.compile. (A
    // code that has compiled entries keeps them: this capture is an entry without a graph, where
    // TorchDynamo would run every later call eagerly.)
    rec.seconds = elapsed();
    rec.eager_why = "no tensor operations";
    if (g_observer) g_observer->on_compile_end(CompileEndEvent{id, "no graph", 0, 0, rec.seconds});
    g_records.push_back(rec);
    st.action = CodeState::NoGraph;
    st.eager_reason = "no tensor operations to compile";
    *eager = true;
    return nullptr;
  }
  std::optional<CaptureResult> split;  // the restarted capture of a split frame
  const CaptureResult* kept = &first;  // the capture whose graph and guards the entry keeps
  std::optional<Transformed> tf;
  std::string no_split;  // why a break did not split the frame
  if (!brk) {
    first.outputs = plan_outputs(first);
    std::string why;
    if (!lower(first, mode().backend.get(), why)) {
      if (PyErr_Occurred() && !backend_fallback(why)) return backend_error();
      brk = why.rfind("backend ", 0) == 0
                ? Break::of("DV0027", why)
                : Break::of("DV0021", "dynamic shapes: a guard cannot be expressed (" + why + ")", "mark the input static, or compile with dynamic=False");
      brk->filename = rec.filename;
    }
    if (!brk) tf = generate(code, globals, closure, first, grad_change, why);
    if (!brk && !tf) {
      brk = Break::of("DV0020", "cannot generate code: " + why);
      brk->filename = rec.filename;
    }
  } else if (!mode().fullgraph) {
    // Split the frame at the break: capture again up to the breaking root instruction, compile what
    // came before it, and continue in resume functions (TorchDynamo's partial graphs).
    SplitPlan plan;
    if (!facts) no_split = "cannot decode the code object";
    else if (brk->root_ip < 0) no_split = "the break is before the first instruction";
    else if (brk->whole_frame) no_split = "the call reads the compiled frame itself";
    else if (!brk->no_split.empty()) no_split = brk->no_split;
    else if (brk->exc)  // TorchDynamo's observed exception that no frame of the trace catches: the frame runs eagerly,
      // where the code before the raise may take another path (is_compiling() is False there)
      no_split = std::string("its code raises ") + Py_TYPE(brk->exc.get())->tp_name + " and does not catch it";
    else plan_split(*facts, brk->root_ip, plan, no_split);
    if (no_split.empty()) {
      CaptureRequest again = req;
      again.obs = nullptr;  // the steps up to the break were recorded by the first capture
      again.stop_at = plan.index;
      again.requires_grad_breaks = requires_grad_breaks;
      split.emplace(run_capture(again, grad_change));
      CaptureResult& c = *split;
      if (!c.stopped) no_split = "the second trace did not reach the break";
      else if (plan.kind == SplitPlan::Generic && c.out.graph.num_calls() == 0) no_split = "nothing to compile before the break";
      if (no_split.empty()) {
        c.outputs = plan_outputs(c);
        std::string why;
        if (!lower(c, mode().backend.get(), why)) {
          if (PyErr_Occurred() && !backend_fallback(why)) return backend_error();
          no_split = why.rfind("backend ", 0) == 0 ? why : "dynamic shapes: " + why;
        } else if (!(tf = generate_split(*facts, globals, closure, c, plan, grad_change, why))) {
          no_split = why;
        } else {
          kept = &c;
        }
      }
    }
  }
  rec.seconds = elapsed();
  for (const Guard& g : kept->out.guards) rec.guards.push_back(g.text);
  report_guards(id, kept->out.guards);
  if (brk) {
    rec.has_break = true;
    rec.break_id = brk->id;
    rec.break_message = brk->message;
    rec.break_hint = brk->hint;
    rec.break_stack = brk->user_stack;
    rec.break_line = brk->line;
    if (g_observer)
      g_observer->on_break(BreakEvent{id, brk->id, brk->message, brk->hint, brk->filename, brk->step, brk->line, brk->offset, brk->user_stack});
  }
  if (brk && !tf) {
    if (!no_split.empty() && !mode().fullgraph) rec.eager_why = no_split;
    if (g_observer)
      g_observer->on_compile_end(CompileEndEvent{id, "break (eager)", 0, static_cast<int>(kept->out.guards.size()), rec.seconds});
    g_records.push_back(rec);
    if (mode().fullgraph) return raise_unsupported(*brk), nullptr;
    st.action = CodeState::Eager;
    st.eager_reason = brk->id + ": " + brk->message + (no_split.empty() ? "" : " (" + no_split + ")");
    *eager = true;
    return nullptr;
  }
  const CaptureResult& c = *kept;
  rec.graph_module = c.gm;
  for (const GraphNode& n : c.out.graph.nodes()) {
    if (n.op == GraphNode::Op::CallFunction) {
      Ref nm = Ref::steal(PyObject_GetAttrString(n.target.get(), "__name__"));
      if (!nm) PyErr_Clear();
      rec.ops.push_back(nm ? str_of(nm.get()) : repr_of(n.target.get()));
    } else if (n.op == GraphNode::Op::CallMethod) {
      rec.ops.push_back(n.method);
    }
  }
  rec.transformed_code = tf->code;
  if (g_observer) {
    if (c.gm) g_observer->on_graph(graph_event(id, c.gm.get(), c.out.graph));
    const CodeFacts* gen = code_facts(tf->code.get());
    if (!gen || !announce_code(g_observer, gen)) PyErr_Clear();
    g_observer->on_code(CodeEvent{id, str_of(reinterpret_cast<PyCodeObject*>(tf->code.get())->co_name), "", gen ? gen->id : -1});
    for (const ResumeInfo& r : tf->resumes) {
      const CodeFacts* rf = code_facts(r.code.get());
      if (!rf || !announce_code(g_observer, rf)) PyErr_Clear();
      g_observer->on_code(CodeEvent{id, str_of(reinterpret_cast<PyCodeObject*>(r.code.get())->co_name), "", rf ? rf->id : -1});
    }
    const char* outcome = brk ? (c.gm ? "graph + break (split)" : "break (split)") : (c.gm ? "graph" : "no graph");
    g_observer->on_compile_end(CompileEndEvent{id, outcome, c.gm ? 1 : 0, static_cast<int>(c.out.guards.size()), rec.seconds});
  }
  for (const ResumeInfo& r : tf->resumes) {
    CodeState* rs = state_of(reinterpret_cast<PyCodeObject*>(r.code.get()), true);
    if (!rs) continue;
    if (r.eager) rs->action = CodeState::Skip;  // the rest of the frame runs eagerly
    if (rs->parent.empty()) rs->parent = "resume function of " + id.str() + " after the graph break at " + rec.filename + ":" + std::to_string(rec.break_line);
  }
  g_records.push_back(std::move(rec));
  auto e = std::make_unique<Entry>();
  e->guards = std::make_unique<GuardTree>(c.out.guards);
  e->fn = tf->function;
  e->backend = Ref::borrow(mode().backend.get());
  e->id = id;
  // Mark the transformed code so the hook never compiles it.
  CodeState* ts = state_of(reinterpret_cast<PyCodeObject*>(tf->code.get()), true);
  if (ts) ts->action = CodeState::Skip;
  st.entries.insert(st.entries.begin(), std::move(e));
  return st.entries.front().get();
}

// Forgets the floats AOTAutograd asked to specialize (its TensorifyState, process-wide), as
// TorchDynamo forgets them after each frame: left set, they make the next compile's pass specialize
// the float inside the graph instead of asking for a restart, and an Inductor cache hit on that graph
// then skips the pass and returns the specialized kernel for every value.
void forget_tensorify_state() {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);  // (the compile may return with an error set)
  PyObject* mod = PyImport_GetModule(Ref::steal(PyUnicode_FromString("torch._dynamo.symbolic_convert")).get());
  Ref state = mod ? Ref::steal(PyObject_GetAttrString(mod, "TensorifyState")) : Ref();
  Ref r = state ? Ref::steal(PyObject_CallMethod(state.get(), "clear", nullptr)) : Ref();
  Py_XDECREF(mod);
  PyErr_Clear();
  PyErr_Restore(type, value, tb);
}

Entry* compile_frame(CodeState& st, PyCodeObject* co, _PyInterpreterFrame* frame, const std::string& reason, bool* eager) {
  bool retry = false;
  Entry* e = compile_frame_once(st, co, frame, reason, eager, /*static_floats=*/false, &retry);
  if (retry) e = compile_frame_once(st, co, frame, reason, eager, /*static_floats=*/true, &retry);
  forget_tensorify_state();
  return e;
}

// The first entry compiled for the thread's backend whose guards pass, moved to the front (most
// recently used first); null if none. Past the recompile limit too, another backend's entry never
// serves (as in TorchDynamo: such a call runs eagerly).
Entry* find_entry(CodeState& st, PyCodeObject* co, const FrameView& view) {
  PyObject* backend = mode().backend.get();
  for (size_t i = 0; i < st.entries.size(); ++i) {
    if (st.entries[i]->backend.get() != backend) continue;
    bool pass;
    {
      GuardsRunning running;
      pass = st.entries[i]->guards->check(view);
    }
    if (!pass) continue;
    if (i) std::rotate(st.entries.begin(), st.entries.begin() + static_cast<long>(i), st.entries.begin() + static_cast<long>(i) + 1);
    Entry* e = st.entries.front().get();
    if (g_observer) g_observer->on_cache(CacheEvent{CacheEvent::Hit, str_of(co->co_qualname), str_of(co->co_filename), co->co_firstlineno, static_cast<int>(i), {}, e->id, {}, code_id(co)});
    return e;
  }
  return nullptr;
}

// A backend as a recompile reason names it: a function by its qualified name, anything else by its
// type's (nothing of the object's own Python runs).
std::string describe_backend(PyObject* b) {
  if (!b) return "?";
  if (PyFunction_Check(b)) return str_of(reinterpret_cast<PyFunctionObject*>(b)->func_qualname);
  return std::string(Py_TYPE(b)->tp_name) + " object";
}

// Runs a frame as it is, with every frame it calls limited to the cache entries already compiled.
PyObject* run_only(PyThreadState* ts, _PyInterpreterFrame* frame, int throwflag) {
  const bool was = mode().run_only;
  mode().run_only = true;
  PyObject* r = g_previous(ts, frame, throwflag);
  mode().run_only = was;
  return r;
}

// A cache miss: wait for any compile in progress (one at a time, process-wide, as TorchDynamo's
// compile lock), look at the cache again (another thread may have compiled this code meanwhile),
// then compile or run eagerly.
PyObject* miss(PyThreadState* ts, _PyInterpreterFrame* frame, int throwflag, CodeState* st, const FrameView& view, int nargs) {
  static std::recursive_mutex compile_lock;
  PyCodeObject* co = shim::frame_code(frame);
  auto fallback = [&]() { return g_previous(ts, frame, throwflag); };
  auto done = [&](PyObject* r) { return shim::finish_unevaluated(ts, frame, r, g_previous); };
  std::unique_lock<std::recursive_mutex> lock(compile_lock, std::try_to_lock);
  if (!lock.owns_lock()) {
    PyThreadState* save = PyEval_SaveThread();
    lock.lock();
    PyEval_RestoreThread(save);
    if (st->action != CodeState::Default) {
      lock.unlock();
      return st->action == CodeState::RunOnly ? run_only(ts, frame, throwflag) : fallback();
    }
    if (Entry* e = find_entry(*st, co, view)) {
      lock.unlock();
      return done(run_entry(*e, frame, nargs));
    }
  }
  std::string reason = st->parent.empty() ? "first call" : st->parent;
  std::vector<std::string> failures;
  std::vector<int> failed;
  CompileId failed_entry;
  // An entry's guard failures; one whose guards pass was compiled for another backend.
  auto failures_of = [&](const Entry& e, std::vector<int>* which) {
    std::vector<std::string> f;
    {
      GuardsRunning running;
      f = e.guards->failures(view, which);
    }
    if (f.empty() && e.backend.get() != mode().backend.get())
      f.push_back("BACKEND_MATCH: compiled for backend " + describe_backend(e.backend.get()) + ", called with " +
                  describe_backend(mode().backend.get()));
    return f;
  };
  if (mode().stance == ThreadMode::Stance::FailOnRecompile) {  // (torch's message, its guard failures listed alike)
    std::string msg = "Detected recompile when torch.compile stance is 'fail_on_recompile'. filename: '" +
                      str_of(co->co_filename) + "', function name: '" + str_of(co->co_name) +
                      "', line number: " + std::to_string(co->co_firstlineno);
    if (!st->entries.empty()) msg += "\n    triggered by the following guard failure(s):";
    for (const auto& entry : st->entries) {
      const std::string id = entry->id.str().substr(1, entry->id.str().size() - 2);
      for (const std::string& f : failures_of(*entry, nullptr)) msg += "\n    - " + id + ": " + f;
    }
    lock.unlock();
    PyErr_SetString(PyExc_RuntimeError, msg.c_str());
    return done(nullptr);
  }
  if (!st->entries.empty()) {
    failures = failures_of(*st->entries.front(), &failed);
    failed_entry = st->entries.front()->id;
    reason = "Recompiling function " + str_of(co->co_name) + " in " + location(co) +
             "\n    triggered by the following guard failure(s):";
    // Every cache entry's failure, most recently used first (as torch.compile lists them).
    for (const auto& entry : st->entries) {
      const std::string id = entry->id.str().substr(1, entry->id.str().size() - 2);
      for (const std::string& f : entry.get() == st->entries.front().get() ? failures : failures_of(*entry, nullptr))
        reason += "\n    - " + id + ": " + f;
    }
    if (static_cast<int>(st->entries.size()) >= g_config.recompile_limit) {
      if (g_observer) g_observer->on_cache(CacheEvent{CacheEvent::LimitHit, str_of(co->co_qualname), str_of(co->co_filename), co->co_firstlineno, -1, failures, failed_entry, failed, code_id(co)});
      std::string msg = "dynview: recompile_limit reached (" + std::to_string(g_config.recompile_limit) + ") for " +
                        str_of(co->co_qualname) + " in " + location(co) + "; last failing guard: " +
                        (failures.empty() ? "?" : failures.front()) +
                        ". Calls its compiled entries do not fit run eagerly from now on, compiling nothing below them.";
      lock.unlock();
      if (g_config.fail_on_recompile_limit) {
        PyErr_SetString(PyExc_RuntimeError, msg.c_str());
        return done(nullptr);
      }
      st->action = CodeState::RunOnly;
      st->eager_reason = "recompile_limit reached";
      if (PyErr_WarnEx(PyExc_UserWarning, msg.c_str(), 1) < 0) return done(nullptr);
      return run_only(ts, frame, throwflag);
    }
    if (g_observer) g_observer->on_cache(CacheEvent{CacheEvent::Recompile, str_of(co->co_qualname), str_of(co->co_filename), co->co_firstlineno, -1, failures, failed_entry, failed, code_id(co)});
  } else if (g_observer) {
    g_observer->on_cache(CacheEvent{CacheEvent::Miss, str_of(co->co_qualname), str_of(co->co_filename), co->co_firstlineno, -1, {}, {}, {}, code_id(co)});
  }
  bool eager = false;
  t_busy = true;  // nothing the compile runs is intercepted
  Entry* e = compile_frame(*st, co, frame, reason, &eager);
  t_busy = false;
  lock.unlock();
  if (e) return done(run_entry(*e, frame, nargs, /*hit=*/false));
  if (eager) return fallback();
  if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "dynview: compilation failed");
  return done(nullptr);
}

// torch._dynamo.config.disable (TORCH_COMPILE_DISABLE=1 sets it at import): a frame that would be
// compiled runs as it is (cache hits before the miss still served), as TorchDynamo's convert_frame
// skips it. Read at a cache miss only; before torch._dynamo is imported, from the environment.
bool compiling_disabled() {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  bool disabled = false;
  Ref cfg = Ref::steal(PyImport_GetModule(Ref::steal(PyUnicode_FromString("torch._dynamo.config")).get()));
  if (cfg) {
    Ref v = Ref::steal(PyObject_GetAttrString(cfg.get(), "disable"));
    disabled = v && PyObject_IsTrue(v.get()) == 1;
  } else {
    const char* env = std::getenv("TORCH_COMPILE_DISABLE");
    disabled = env && std::strcmp(env, "1") == 0;
  }
  PyErr_Clear();
  PyErr_Restore(type, value, tb);
  return disabled;
}

PyObject* dv_eval_frame(PyThreadState* ts, _PyInterpreterFrame* frame, int throwflag) {
  auto fallback = [&]() { return g_previous(ts, frame, throwflag); };
  if (throwflag || !mode().enabled || t_busy || !shim::owned_by_thread(frame) || functorch_active() ||
      (torch_function_mode_active() && !torch_function_modes_traceable()))
    return fallback();
  PyCodeObject* co = shim::frame_code(frame);
  CodeState* st = state_of(co, false);
  if (st && st->action == CodeState::Disabled) {  // torch.compiler.disable: nothing below it is captured
    mode().enabled = false;
    PyObject* r = fallback();
    mode().enabled = true;
    return r;
  }
  if (st && st->action != CodeState::Default && st->action != CodeState::RunOnly) {
    // A frame that runs as it is was still the first one entered (torch's nn code below it is not a root)
    if (st->action == CodeState::Eager || st->action == CodeState::NoGraph) mode().at_top = false;
    // Calls of a frame that runs eagerly are runtime events, as cache hits are.
    if (st->action == CodeState::Eager && g_observer)
      g_observer->on_cache(CacheEvent{CacheEvent::EagerRun, str_of(co->co_qualname), str_of(co->co_filename), co->co_firstlineno, -1, {}, {}, {}, code_id(co)});
    return fallback();
  }
  if (!st) {
    const int skip = (co->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) ? 1 : skip_file(co);
    if (skip == 1) {
      if ((st = state_of(co, true))) st->action = CodeState::Skip;
      return fallback();
    }
    if (skip == 2 && (st = state_of(co, true))) st->top_only = true;
  }
  const bool top = mode().at_top;
  mode().at_top = false;
  if (st && st->top_only && !top) return fallback();
  if (!shim::is_fresh(frame)) return fallback();  // a resumed frame
  const int nargs = nargs_of(co);
  PyObject* const* locals = shim::frame_locals(frame);
  FrameView view{locals, shim::frame_globals(frame), shim::frame_builtins(frame), shim::frame_closure(frame)};
  if (st) {
    if (Entry* e = find_entry(*st, co, view)) return shim::finish_unevaluated(ts, frame, run_entry(*e, frame, nargs), g_previous);
  }
  if (mode().run_only || (st && st->action == CodeState::RunOnly)) {  // below (or at) a frame past its recompile limit
    if (st && st->action == CodeState::RunOnly && g_observer)
      g_observer->on_cache(CacheEvent{CacheEvent::EagerRun, str_of(co->co_qualname), str_of(co->co_filename), co->co_firstlineno, -1, {}, {}, {}, code_id(co)});
    return run_only(ts, frame, throwflag);
  }
  if (!st && !(st = state_of(co, true))) return fallback();
  if (called_by_nonrecursive_disable()) return fallback();  // (that call only; what it calls is captured)
  if (!top && st->entries.empty() && !frame_has_tensors(co, locals, nargs, view.globals, view.closure)) {
    // TorchDynamo skips such a frame, now and on later calls (until reset); the function compiled
    // is tried whatever it is given (its always_optimize_code_objects)
    st->action = CodeState::NoGraph;
    st->eager_reason = "no tensor in its arguments or free variables, and no torch module among its globals";
    return fallback();
  }
  if (compiling_disabled()) {  // torch._dynamo.config.disable (TORCH_COMPILE_DISABLE=1)
    // as TorchDynamo skips the code then: its later calls run as it is too, until reset
    st->action = CodeState::NoGraph;
    st->eager_reason = "torch._dynamo.config.disable was set at a cache miss";
    return fallback();
  }
  if (mode().stance == ThreadMode::Stance::EagerThenCompile && !st->delayed) {
    // set_stance("eager_then_compile"): the first miss runs as it is, its arguments noted, so that the
    // compile at the next one makes what changed between the two symbolic from the start
    st->delayed = true;
    note_arguments(st->frame_state, co, locals);
    if (PyErr_Occurred()) PyErr_Clear();
    if (g_observer)
      g_observer->on_cache(CacheEvent{CacheEvent::EagerRun, str_of(co->co_qualname), str_of(co->co_filename), co->co_firstlineno, -1, {}, {}, {}, code_id(co)});
    return fallback();
  }
  try {
    return miss(ts, frame, throwflag, st, view, nargs);
  } catch (const std::exception& ex) {
    PyErr_Format(PyExc_RuntimeError, "dynview: internal error while compiling %U (%U:%d): %s", co->co_qualname,
                 co->co_filename, co->co_firstlineno, ex.what());
  } catch (...) {
    PyErr_Format(PyExc_RuntimeError, "dynview: internal error while compiling %U (%U:%d)", co->co_qualname,
                 co->co_filename, co->co_firstlineno);
  }
  t_busy = false;
  return shim::finish_unevaluated(ts, frame, nullptr, g_previous);
}

}  // namespace

EngineConfig& config() { return g_config; }

// The hook is installed only while some thread has capture enabled: while any eval-frame hook is
// installed, CPython stops inlining Python-to-Python calls for every thread of the process.
// (Mode changes happen with the GIL held, so a plain counter suffices.)
int g_enabled_threads = 0;

void apply_hook() {
  if (!g_installed) return;
  EvalFrameFn current = shim::get_eval_frame();
  if (g_enabled_threads > 0 && current != dv_eval_frame) {
    g_previous = current;
    shim::set_eval_frame(dv_eval_frame);
  } else if (g_enabled_threads == 0 && current == dv_eval_frame) {
    shim::set_eval_frame(g_previous);
  }
}

ThreadMode set_thread_mode(ThreadMode m) {
  ThreadMode prev = mode();
  const bool was = prev.enabled, now = m.enabled;
  mode() = std::move(m);
  if (was != now) {
    g_enabled_threads += now ? 1 : -1;
    apply_hook();
  }
  return prev;
}

bool hook_active() {
  return shim::get_eval_frame() == dv_eval_frame;
}

void set_observer(EngineObserver* obs) { g_observer = obs; }
void set_unsupported_error(PyObject* exc_type) { g_unsupported = Ref::borrow(exc_type); }

void mark_disabled(PyObject* code) {
  if (!code || !PyCode_Check(code)) return;
  if (CodeState* st = state_of(reinterpret_cast<PyCodeObject*>(code), true)) st->action = CodeState::Disabled;
  PyErr_Clear();
}

void reset_caches() {
  // Destroying an entry can free a transformed code object, whose co_extra free function edits
  // g_states: collect the entries first, destroy them after the loop.
  std::vector<std::unique_ptr<Entry>> doomed;
  for (CodeState* s : g_states) {
    for (auto& e : s->entries) doomed.push_back(std::move(e));
    s->entries.clear();
    if (s->action == CodeState::Eager || s->action == CodeState::NoGraph || s->action == CodeState::RunOnly)
      s->action = CodeState::Default;  // Skip is a fixed rule
    s->recompiles = 0;
    s->frame_id = -1;
    s->frame_state.clear();
    s->delayed = false;
  }
  g_next_frame_id = 0;
  g_records.clear();
}

std::vector<CompileRecord> take_records() {
  std::vector<CompileRecord> r;
  r.swap(g_records);
  return r;
}

std::vector<std::pair<int, std::vector<std::string>>> cache_entries(PyObject* code) {
  std::vector<std::pair<int, std::vector<std::string>>> out;
  if (!PyCode_Check(code)) return out;
  CodeState* st = state_of(reinterpret_cast<PyCodeObject*>(code), false);
  if (!st) return out;
  for (auto& e : st->entries) {
    std::vector<std::string> texts;
    for (const Guard& g : e->guards->guards()) texts.push_back(g.text);
    out.emplace_back(e->hits, texts);
  }
  return out;
}

bool install_hook() {
  if (g_installed) return true;
  if (!py_init()) return false;
  g_extra_index = _PyEval_RequestCodeExtraIndex(free_state);
  if (g_extra_index < 0) return false;
  // Files whose frames are never compiled: the stdlib, torch, dynview itself.
  Ref sysconfig = Ref::steal(PyImport_ImportModule("sysconfig"));
  Ref paths = sysconfig ? Ref::steal(PyObject_CallMethod(sysconfig.get(), "get_paths", nullptr)) : Ref();
  if (paths) g_skip_prefixes[0] = str_of(PyDict_GetItemString(paths.get(), "stdlib")) + "/";
  Ref tfile = Ref::steal(PyObject_GetAttrString(py().torch.get(), "__file__"));
  if (tfile) {
    std::string t = str_of(tfile.get());
    g_skip_prefixes[1] = t.substr(0, t.rfind('/') + 1);
  }
  Ref dv = Ref::steal(PyImport_ImportModule("dynview"));
  Ref dfile = dv ? Ref::steal(PyObject_GetAttrString(dv.get(), "__file__")) : Ref();
  if (dfile) {
    std::string d = str_of(dfile.get());
    g_skip_prefixes[2] = d.substr(0, d.rfind('/') + 1);
  }
  // torch.compiler.disable's wrapper (one code object for every disabled function): it and all it
  // calls run without dynview, as torch.compile runs them without TorchDynamo.
  Ref dynamo = Ref::steal(PyImport_ImportModule("torch._dynamo"));
  Ref builtins_mod = Ref::steal(PyImport_ImportModule("builtins"));
  Ref len_fn = builtins_mod ? Ref::steal(PyObject_GetAttrString(builtins_mod.get(), "len")) : Ref();
  Ref wrapper = dynamo && len_fn ? Ref::steal(PyObject_CallMethod(dynamo.get(), "disable", "O", len_fn.get())) : Ref();
  Ref wrapper_code = wrapper ? Ref::steal(PyObject_GetAttrString(wrapper.get(), "__code__")) : Ref();
  PyErr_Clear();
  if (wrapper_code) mark_disabled(wrapper_code.get());
  PyErr_Clear();
  g_previous = shim::get_eval_frame();
  g_installed = true;
  apply_hook();  // a thread may have enabled capture before set-up finished
  return true;
}

}  // namespace dv
