// dynview._C capture-engine functions: thread mode, reset, config, compile records, cache info,
// and the DYNVIEW_LOGS observer (Python logging). A thin layer over tracer/engine.h.
#include <Python.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <tuple>

#include "core/bytecode.h"
#include "core/opcodes.h"
#include "tracer/frame_shim.h"
#include "tracer/engine.h"

namespace dv::py {
namespace pyb = pybind11;
using namespace pybind11::literals;

namespace {

std::string op_name(int opcode) {
  const char* n = dv::bc::op_info(static_cast<uint8_t>(opcode), kPyVersion).name;
  return n ? n : "<" + std::to_string(opcode) + ">";
}

// DYNVIEW_LOGS: prints the selected events through logging.getLogger("dynview.<channel>").
class LogObserver : public EngineObserver {
 public:
  explicit LogObserver(std::vector<std::string> channels) : channels_(std::move(channels)) {}
  bool on(const char* c) const {
    for (const auto& x : channels_) if (x == c || x == "all") return true;
    return false;
  }
  void log(const char* channel, const std::string& msg) const {
    pyb::gil_scoped_acquire gil;
    try {
      pyb::module_::import("logging").attr("getLogger")(std::string("dynview.") + channel).attr("info")(msg);
    } catch (pyb::error_already_set&) {
      PyErr_Clear();
    }
  }
  void on_compile_start(const CompileStartEvent& e) override {
    if (on("recompiles") && e.reason != "first call") log("recompiles", e.reason);
    if (!on("bytecode")) return;
    codes_in_compile_ = 0;
    compile_file_ = e.filename;
    compile_name_ = e.qualname + " " + e.filename + " line " + std::to_string(e.firstlineno);
    log("bytecode", "ORIGINAL BYTECODE " + compile_name_ + " " + e.id.str() + " \n" + listing(e.code));
  }
  void on_step(const StepEvent& e) override {
    if (on("steps")) log("steps", "TRACE " + e.id.str() + " depth=" + std::to_string(e.depth) + " offset=" + std::to_string(e.offset) + " " + op_name(e.opcode) + " stack=" + std::to_string(e.stack->size()));
  }
  void on_guard(const GuardEvent& e) override { if (on("guards")) log("guards", e.id.str() + " " + e.kind + ": " + e.text); }
  void on_break(const BreakEvent& e) override {
    if (on("graph_breaks")) log("graph_breaks", "Graph break " + e.break_id + " in " + e.id.str() + " at " + e.filename + ":" + std::to_string(e.line) + ": " + e.message + (e.hint.empty() ? "" : " (hint: " + e.hint + ")"));
  }
  void on_graph(const GraphEvent& e) override { if (on("graph_code")) log("graph_code", "TRACED GRAPH " + e.id.str() + "\n" + e.code); }
  // bytecode: as TORCH_LOGS=bytecode, "ORIGINAL BYTECODE name file line N" and the dis listing when a
  // frame compiles, "MODIFIED BYTECODE ..." for its transformed code, then each resume function the
  // split generated ("RESUME FUNCTION BYTECODE ..."; it logs its own pair when it compiles).
  void on_code_object(const CodeObjectEvent& e) override {
    if (!on("bytecode") || !e.info || listings_.count(e.code)) return;
    auto text = bc::disassemble(*e.info, bc::DisOptions{false, -1});
    listings_[e.code] = text ? *text : "(not disassembled: " + text.error().message() + ")\n";
  }
  void on_compile_end(const CompileEndEvent&) override { codes_in_compile_ = -1; }
  void on_code(const CodeEvent& e) override {
    if (!on("bytecode")) return;
    const char* what = codes_in_compile_++ == 0 ? "MODIFIED BYTECODE" : "RESUME FUNCTION BYTECODE";
    const std::string name = codes_in_compile_ == 1 ? compile_name_ : e.name + " " + compile_file_;
    log("bytecode", std::string(what) + " " + name + " " + e.id.str() + " \n" + listing(e.code));
  }

 private:
  std::string listing(int code) const {
    auto it = listings_.find(code);
    return it == listings_.end() ? "(no code object recorded)\n" : it->second;
  }
  std::vector<std::string> channels_;
  std::map<int, std::string> listings_;  // code id -> dis listing (bytecode channel only)
  int codes_in_compile_ = -1;            // CodeEvents seen since the compile started (-1: none running)
  std::string compile_name_, compile_file_;
};

LogObserver* g_log = nullptr;  // replaced, never destroyed at exit

// Collects every event as a plain tuple, for tests that check the event stream is complete and
// ordered: (kind, compile_id, step, depth, offset_or_node, detail).
class CollectingObserver : public EngineObserver {
 public:
  std::vector<std::tuple<std::string, std::string, int, int, long, std::string>> events;
  void add(const char* k, const CompileId& id, int step, int depth, long x, std::string d) {
    events.emplace_back(k, id.str(), step, depth, x, std::move(d));
  }
  void on_compile_start(const CompileStartEvent& e) override { add("compile_start", e.id, -1, 0, 0, e.qualname); }
  void on_compile_end(const CompileEndEvent& e) override { add("compile_end", e.id, -1, 0, e.graphs, e.outcome); }
  void on_step(const StepEvent& e) override { add("step", e.id, e.step, e.depth, e.offset, std::to_string(e.stack->size())); }
  void on_guard(const GuardEvent& e) override { add("guard", e.id, e.step, 0, e.line, e.text); }
  void on_graph_node(const GraphNodeEvent& e) override { add("node", e.id, e.step, 0, e.node, e.op + " " + e.target); }
  void on_break(const BreakEvent& e) override { add("break", e.id, e.step, 0, e.line, e.break_id); }
  void on_graph(const GraphEvent& e) override { add("graph", e.id, -1, 0, e.ops, e.code); }
  void on_code(const CodeEvent& e) override { add("code", e.id, -1, 0, 0, e.name); }
  void on_cache(const CacheEvent& e) override {
    static const char* kinds[] = {"hit", "miss", "recompile", "limit", "eager"};
    add("cache", CompileId{}, -1, 0, e.entry, std::string(kinds[e.kind]) + " " + e.qualname);
  }
};
CollectingObserver* g_collect = nullptr;
EngineObserver* g_recorder = nullptr;  // owned by init_trace.cpp
EngineObserver* g_null = nullptr;      // a do-nothing observer, for the recording benchmark
FanOut* g_fanout = new FanOut();        // never destroyed (see eval_frame.cpp)

// The engine takes one observer: none, the only one, or a fan-out to all of them.
void refresh_observer() {
  std::vector<EngineObserver*> all;
  for (EngineObserver* o : {static_cast<EngineObserver*>(g_log), static_cast<EngineObserver*>(g_collect), g_recorder, g_null})
    if (o) all.push_back(o);
  if (all.empty()) return set_observer(nullptr);
  if (all.size() == 1) return set_observer(all[0]);
  set_observer(nullptr);
  g_fanout->to = all;
  set_observer(g_fanout);
}

pyb::dict record_dict(const CompileRecord& r) {
  return pyb::dict("compile_id"_a = r.id.str(), "qualname"_a = r.qualname, "filename"_a = r.filename,
                   "firstlineno"_a = r.firstlineno, "reason"_a = r.reason,
                   "graph"_a = r.graph_module ? pyb::reinterpret_borrow<pyb::object>(r.graph_module.get()) : pyb::none(),
                   "ops"_a = r.ops, "guards"_a = r.guards, "has_break"_a = r.has_break, "break_id"_a = r.break_id,
                   "break_message"_a = r.break_message, "break_hint"_a = r.break_hint, "break_stack"_a = r.break_stack,
                   "break_line"_a = r.break_line, "eager_why"_a = r.eager_why, "seconds"_a = r.seconds,
                   "transformed_code"_a = r.transformed_code ? pyb::reinterpret_borrow<pyb::object>(r.transformed_code.get()) : pyb::none());
}

// CompiledFunction: what dynview.compile(fn) returns. Calling it switches capture on for this
// thread, vectorcalls fn and restores the previous mode: re-entrant, thread-safe, and cheap (no
// Python frame of its own).
struct CompiledFunction {
  PyObject_HEAD
  PyObject* fn;        // Strong
  PyObject* backend;   // Strong
  int fullgraph;
  int dynamic;         // -1 None (automatic), 0 False, 1 True
  vectorcallfunc vectorcall;
  PyObject* dict;      // Strong: __wrapped__, __name__, ... (functools.update_wrapper)
};

// torch.compiler.set_stance, applied to the mode a compiled call starts (as torch.compile reads it
// at each call of its wrapper): the stance object torch._dynamo.eval_frame._stance holds is looked
// up per call (two dict lookups, no Python code runs; none before torch._dynamo is imported, as
// nothing can set a stance before), and its fields are read again only when set_stance put another
// object there. False: an error is set (a stance torch does not know).
bool apply_stance(ThreadMode& m) {
  static PyObject* module_name = PyUnicode_InternFromString("torch._dynamo.eval_frame");
  static PyObject* stance_name = PyUnicode_InternFromString("_stance");
  static PyObject* module_dict = nullptr;  // held for the process, with its module
  enum Kind { Default, ForceEager, EagerOnRecompile, FailOnRecompile, EagerThenCompile };
  static PyObject* seen = nullptr;         // Strong: the stance object last read
  static Kind seen_kind = Default;
  static PyObject* seen_backend = nullptr; // Strong: force_backend=, looked up as dynview.compile does
  if (!module_dict) {
    PyObject* mod = PyDict_GetItemWithError(PyImport_GetModuleDict(), module_name);  // borrowed
    if (!mod) return !PyErr_Occurred();
    if (!PyModule_Check(mod)) return true;
    Py_INCREF(mod);
    module_dict = PyModule_GetDict(mod);
  }
  PyObject* stance = PyDict_GetItemWithError(module_dict, stance_name);  // borrowed
  if (!stance) return !PyErr_Occurred();
  if (stance != seen) {
    Ref kind = Ref::steal(PyObject_GetAttrString(stance, "stance"));
    Ref backend = kind ? Ref::steal(PyObject_GetAttrString(stance, "backend")) : Ref();
    if (!backend) return false;
    const std::string k = PyUnicode_Check(kind.get()) ? PyUnicode_AsUTF8(kind.get()) : "?";
    Kind parsed;
    if (k == "default") parsed = Default;
    else if (k == "force_eager") parsed = ForceEager;
    else if (k == "eager_on_recompile") parsed = EagerOnRecompile;
    else if (k == "fail_on_recompile") parsed = FailOnRecompile;
    // (aot_eager_then_compile's first call runs eagerly here: the same values, without its memory saving)
    else if (k == "eager_then_compile" || k == "aot_eager_then_compile") parsed = EagerThenCompile;
    else {
      PyErr_Format(PyExc_RuntimeError, "invalid torch.compile stance '%s'", k.c_str());
      return false;
    }
    Ref looked_up;
    if (backend.get() != Py_None) {
      Ref engine = Ref::steal(PyImport_ImportModule("dynview._engine"));
      Ref lookup = engine ? Ref::steal(PyObject_GetAttrString(engine.get(), "_lookup_backend")) : Ref();
      looked_up = lookup ? Ref::steal(PyObject_CallOneArg(lookup.get(), backend.get())) : Ref();
      if (!looked_up) return false;
    }
    Py_XSETREF(seen_backend, looked_up.release());
    Py_INCREF(stance);
    Py_XSETREF(seen, stance);
    seen_kind = parsed;
  }
  switch (seen_kind) {
    case Default:
      if (seen_backend) m.backend = Ref::borrow(seen_backend);
      break;
    case ForceEager: m.enabled = false; break;
    case EagerOnRecompile: m.run_only = true; break;
    case FailOnRecompile: m.stance = ThreadMode::Stance::FailOnRecompile; break;
    case EagerThenCompile: m.stance = ThreadMode::Stance::EagerThenCompile; break;
  }
  return true;
}

PyObject* cf_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* c = reinterpret_cast<CompiledFunction*>(self);
  if (!install_hook()) return nullptr;
  ThreadMode m;
  m.enabled = true;
  m.backend = Ref::borrow(c->backend);
  m.fullgraph = c->fullgraph != 0;
  m.dynamic = static_cast<int8_t>(c->dynamic);
  if (!apply_stance(m)) return nullptr;
  ThreadMode prev = set_thread_mode(std::move(m));
  PyObject* r = PyObject_Vectorcall(c->fn, args, nargsf, kwnames);
  set_thread_mode(std::move(prev));
  return r;
}

int cf_traverse(PyObject* self, visitproc visit, void* arg) {
  auto* c = reinterpret_cast<CompiledFunction*>(self);
  Py_VISIT(c->fn);
  Py_VISIT(c->backend);
  Py_VISIT(c->dict);
  return 0;
}

int cf_clear(PyObject* self) {
  auto* c = reinterpret_cast<CompiledFunction*>(self);
  Py_CLEAR(c->fn);
  Py_CLEAR(c->backend);
  Py_CLEAR(c->dict);
  return 0;
}

void cf_dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  cf_clear(self);
  Py_TYPE(self)->tp_free(self);
}

PyObject* cf_new(PyTypeObject* type, PyObject* args, PyObject* kwds) {
  PyObject *fn, *backend;
  int fullgraph = 0;
  PyObject* dynamic = Py_None;
  static const char* kw[] = {"fn", "backend", "fullgraph", "dynamic", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|pO", const_cast<char**>(kw), &fn, &backend, &fullgraph, &dynamic)) return nullptr;
  auto* c = reinterpret_cast<CompiledFunction*>(type->tp_alloc(type, 0));
  if (!c) return nullptr;
  c->fn = Ref::borrow(fn).release();
  c->backend = Ref::borrow(backend).release();
  c->fullgraph = fullgraph;
  c->dynamic = dynamic == Py_None ? -1 : PyObject_IsTrue(dynamic) == 1 ? 1 : 0;
  c->vectorcall = cf_vectorcall;
  c->dict = PyDict_New();
  return reinterpret_cast<PyObject*>(c);
}

PyObject* cf_get_fn(PyObject* self, void*) { return Ref::borrow(reinterpret_cast<CompiledFunction*>(self)->fn).release(); }
PyObject* cf_descr_get(PyObject* self, PyObject* obj, PyObject*) {
  if (!obj || obj == Py_None) return Ref::borrow(self).release();
  return PyMethod_New(self, obj);
}

PyGetSetDef cf_getset[] = {{"_orig_fn", cf_get_fn, nullptr, nullptr, nullptr},
                           {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
                           {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject CompiledFunctionType = [] {
  PyTypeObject t{};  // zero-initialised; the head as PyVarObject_HEAD_INIT(nullptr, 0) sets it
  Py_SET_REFCNT(reinterpret_cast<PyObject*>(&t), 1);
  t.tp_name = "dynview._C.CompiledFunction";
  t.tp_basicsize = sizeof(CompiledFunction);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR;
  t.tp_vectorcall_offset = offsetof(CompiledFunction, vectorcall);
  t.tp_call = PyVectorcall_Call;
  t.tp_new = cf_new;
  t.tp_dealloc = cf_dealloc;
  t.tp_traverse = cf_traverse;
  t.tp_clear = cf_clear;
  t.tp_getset = cf_getset;
  t.tp_dictoffset = offsetof(CompiledFunction, dict);
  t.tp_descr_get = cf_descr_get;
  t.tp_doc = "A function compiled by dynview.compile: calls capture with its backend.";
  return t;
}();

}  // namespace

void set_recorder_observer(EngineObserver* o) {
  g_recorder = o;
  refresh_observer();
}

void init_tracer(pyb::module_& m) {
  if (PyType_Ready(&CompiledFunctionType) < 0) throw pyb::error_already_set();
  Py_INCREF(&CompiledFunctionType);
  m.add_object("CompiledFunction", reinterpret_cast<PyObject*>(&CompiledFunctionType));
  m.def("_install", []() {
    if (!install_hook()) throw pyb::error_already_set();
  });
  m.def("_set_mode", [](bool enabled, pyb::object backend, bool fullgraph, int dynamic) {
    ThreadMode t;
    t.enabled = enabled;
    if (!backend.is_none()) t.backend = Ref::borrow(backend.ptr());
    t.fullgraph = fullgraph;
    t.dynamic = static_cast<int8_t>(dynamic);
    if (enabled && !apply_stance(t)) throw pyb::error_already_set();
    ThreadMode prev = set_thread_mode(std::move(t));
    return pyb::make_tuple(prev.enabled, prev.backend ? pyb::reinterpret_borrow<pyb::object>(prev.backend.get()) : pyb::none(),
                           prev.fullgraph, static_cast<int>(prev.dynamic));
  }, pyb::arg("enabled"), pyb::arg("backend"), pyb::arg("fullgraph"), pyb::arg("dynamic") = -1);
  m.def("_hook_active", &hook_active, "Whether the PEP 523 hook is installed right now.");
  m.def("_set_unsupported", [](pyb::object exc) { set_unsupported_error(exc.ptr()); });
  m.def("reset", &reset_caches, "Drop every cache entry and compile record.");
  m.def("take_records", []() {
    pyb::list out;
    for (const CompileRecord& r : take_records()) out.append(record_dict(r));
    return out;
  });
  m.def("cache_entries", [](pyb::object code) {
    pyb::list out;
    for (auto& [hits, guards] : cache_entries(code.ptr())) out.append(pyb::dict("hits"_a = hits, "guards"_a = guards));
    return out;
  });
  m.def("_set_config", [](int limit, bool fail) {
    config().recompile_limit = limit;
    config().fail_on_recompile_limit = fail;
  });
  m.def("_collect_events", [](bool on) {
    g_collect = on ? new CollectingObserver() : nullptr;  // the previous one is leaked: events are rare in tests
    refresh_observer();
  });
  m.def("_take_events", []() {
    pyb::list out;
    if (!g_collect) return out;
    for (auto& [k, id, step, depth, x, d] : g_collect->events) out.append(pyb::make_tuple(k, id, step, depth, x, d));
    g_collect->events.clear();
    return out;
  });
  m.def("_null_observer", [](bool on) {
    static EngineObserver* null = new EngineObserver();  // every event ignored
    g_null = on ? null : nullptr;
    refresh_observer();
  }, "Install a do-nothing observer (measures what producing events costs the engine).");
  m.def("_set_logs", [](std::vector<std::string> channels) {
    g_log = channels.empty() ? nullptr : new LogObserver(std::move(channels));
    refresh_observer();
  });
}

}  // namespace dv::py
