// EngineObserver: the engine reports everything it does through this interface. The engine holds
// a non-owning pointer that is null in production; every event site is `if (observer)`. Events are
// plain structs of data the engine already has. Implementations: the headless logger
// (DYNVIEW_LOGS, python/src/init_tracer.cpp) and, in a later issue, the .dyn recorder.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dv {

struct CompileId {
  int frame = 0, recompile = 0;
  std::string str() const { return "[" + std::to_string(frame) + "/" + std::to_string(recompile) + "]"; }
};

struct CompileStartEvent {
  CompileId id;
  std::string qualname, filename;
  int firstlineno;
  std::string reason;  // "first call" or the guard failures that caused the recompile
};
struct CompileEndEvent {
  CompileId id;
  std::string outcome;  // "graph", "no graph", "break (eager)", "error"
  int graphs = 0, guards = 0;
  double seconds = 0;
};
struct StepEvent {
  CompileId id;
  int step, depth;
  uint32_t offset;
  uint8_t opcode;
  int32_t arg;
  int line;
  const std::vector<int>* stack;  // value ids, bottom first (borrowed for the call)
};
struct ValueEvent {
  int id, step;
  const char* kind;
  std::string repr, source;
  int node;
};
struct GuardEvent {
  CompileId id;
  std::string kind, text;
  int step, line;
};
struct GraphNodeEvent {
  CompileId id;
  int node, step;
  std::string op, target;
};
struct BreakEvent {
  CompileId id;
  std::string break_id, message, hint, filename;
  int step, line;
  uint32_t offset;
};
struct GraphEvent {
  CompileId id;
  std::string code;  // the FX GraphModule's Python code
  int ops;
};
struct CodeEvent {
  CompileId id;
  std::string name, listing;  // generated code object and its disassembly
};
struct CacheEvent {
  enum Kind { Hit, Miss, Recompile, LimitHit } kind;
  std::string qualname, filename;
  int firstlineno;
  int entry;                     // Hit: index of the entry
  std::vector<std::string> failures;  // Recompile/LimitHit
};

class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  virtual void on_compile_start(const CompileStartEvent&) {}
  virtual void on_compile_end(const CompileEndEvent&) {}
  virtual void on_step(const StepEvent&) {}
  virtual void on_value(const ValueEvent&) {}
  virtual void on_guard(const GuardEvent&) {}
  virtual void on_graph_node(const GraphNodeEvent&) {}
  virtual void on_break(const BreakEvent&) {}
  virtual void on_graph(const GraphEvent&) {}
  virtual void on_code(const CodeEvent&) {}
  virtual void on_cache(const CacheEvent&) {}
};

}  // namespace dv
