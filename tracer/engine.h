// The engine's entry points: the PEP 523 frame hook with its per-code cache in co_extra, the
// per-thread mode, and the records explain() reads. Used by python/src/init_tracer.cpp.
#pragma once
#include <string>
#include <vector>

#include "core/observer.h"
#include "pyref.h"

namespace dv {

struct CompileRecord {
  CompileId id;
  std::string qualname, filename;
  int firstlineno = 0;
  std::string reason;           // why it compiled
  Ref graph_module;             // the torch.fx.GraphModule (or empty)
  std::vector<std::string> ops; // call targets per node
  std::vector<std::string> guards;
  bool has_break = false;
  std::string break_id, break_message, break_hint;
  std::vector<std::string> break_stack;
  int break_line = -1;
  std::string eager_why;        // a break that did not split the frame: why it runs eagerly
  double seconds = 0;
  Ref transformed_code;
};

struct EngineConfig {
  int recompile_limit = 8;
  bool fail_on_recompile_limit = false;
};

EngineConfig& config();
// Enable/disable capture on this thread; returns the previous state. `backend` is borrowed and
// kept while enabled; fullgraph raises dynview.Unsupported at the first break.
struct ThreadMode {
  bool enabled = false;
  Ref backend;
  bool fullgraph = false;
  int8_t dynamic = -1;  // torch.compile's dynamic=: -1 None (automatic), 0 False, 1 True
  bool at_top = true;   // no frame entered yet: torch's own nn modules may be roots only here
  bool run_only = false;  // inside a frame past its recompile limit: cache hits only, nothing compiled
  // torch.compiler.set_stance as the compiled call found it: "fail_on_recompile" raises where a frame
  // would be compiled; "eager_then_compile" runs each code's first cache miss as it is, noting its
  // arguments for automatic dynamic shapes. ("force_eager" turns capture off for the call,
  // "eager_on_recompile" is run_only, force_backend= replaces the backend.)
  enum class Stance : int8_t { Default, FailOnRecompile, EagerThenCompile } stance = Stance::Default;
};
ThreadMode set_thread_mode(ThreadMode m);
void set_observer(EngineObserver* obs);  // non-owning; null disables events
void set_unsupported_error(PyObject* exc_type);  // dynview.Unsupported
void reset_caches();
// torch.compiler.disable / torch._dynamo.disable on a function whose code is `code`: its frames, and
// every frame they call, run without dynview (a rule that outlives reset_caches, as Skip does).
void mark_disabled(PyObject* code);
std::vector<CompileRecord> take_records();
// Cache entries of a code object: (hits, guard texts) per entry.
std::vector<std::pair<int, std::vector<std::string>>> cache_entries(PyObject* code);
bool install_hook();  // one-time set-up (idempotent); the hook itself follows set_thread_mode
bool hook_active();   // the eval-frame hook is installed right now

}  // namespace dv
