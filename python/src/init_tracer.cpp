// dynview._C capture-engine functions: thread mode, reset, config, compile records, cache info,
// and the DYNVIEW_LOGS observer (Python logging). A thin layer over tracer/engine.h.
#include <Python.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "tracer/engine.h"

namespace dv::py {
namespace pyb = pybind11;
using namespace pybind11::literals;

namespace {

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
  }
  void on_step(const StepEvent& e) override {
    if (on("steps")) log("steps", "TRACE " + e.id.str() + " depth=" + std::to_string(e.depth) + " offset=" + std::to_string(e.offset) + " op=" + std::to_string(e.opcode) + " stack=" + std::to_string(e.stack->size()));
  }
  void on_guard(const GuardEvent& e) override { if (on("guards")) log("guards", e.id.str() + " " + e.kind + ": " + e.text); }
  void on_break(const BreakEvent& e) override {
    if (on("graph_breaks")) log("graph_breaks", "Graph break " + e.break_id + " in " + e.id.str() + " at " + e.filename + ":" + std::to_string(e.line) + ": " + e.message + (e.hint.empty() ? "" : " (hint: " + e.hint + ")"));
  }
  void on_graph(const GraphEvent& e) override { if (on("graph_code")) log("graph_code", "TRACED GRAPH " + e.id.str() + "\n" + e.code); }
  void on_code(const CodeEvent& e) override { if (on("bytecode")) log("bytecode", "MODIFIED BYTECODE " + e.name + " " + e.id.str()); }

 private:
  std::vector<std::string> channels_;
};

LogObserver* g_log = nullptr;  // replaced, never destroyed at exit

pyb::dict record_dict(const CompileRecord& r) {
  return pyb::dict("compile_id"_a = r.id.str(), "qualname"_a = r.qualname, "filename"_a = r.filename,
                   "firstlineno"_a = r.firstlineno, "reason"_a = r.reason,
                   "graph"_a = r.graph_module ? pyb::reinterpret_borrow<pyb::object>(r.graph_module.get()) : pyb::none(),
                   "ops"_a = r.ops, "guards"_a = r.guards, "has_break"_a = r.has_break, "break_id"_a = r.break_id,
                   "break_message"_a = r.break_message, "break_hint"_a = r.break_hint, "break_stack"_a = r.break_stack,
                   "break_line"_a = r.break_line, "seconds"_a = r.seconds,
                   "transformed_code"_a = r.transformed_code ? pyb::reinterpret_borrow<pyb::object>(r.transformed_code.get()) : pyb::none());
}

}  // namespace

void init_tracer(pyb::module_& m) {
  m.def("_install", []() {
    if (!install_hook()) throw pyb::error_already_set();
  });
  m.def("_set_mode", [](bool enabled, pyb::object backend, bool fullgraph) {
    ThreadMode t;
    t.enabled = enabled;
    if (!backend.is_none()) t.backend = Ref::borrow(backend.ptr());
    t.fullgraph = fullgraph;
    ThreadMode prev = set_thread_mode(std::move(t));
    return pyb::make_tuple(prev.enabled, prev.backend ? pyb::reinterpret_borrow<pyb::object>(prev.backend.get()) : pyb::none(), prev.fullgraph);
  });
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
  m.def("_set_logs", [](std::vector<std::string> channels) {
    if (channels.empty()) {
      set_observer(nullptr);
      return;
    }
    g_log = new LogObserver(std::move(channels));
    set_observer(g_log);
  });
}

}  // namespace dv::py
