// EngineObserver: the engine reports everything it does through this interface. The engine holds
// a non-owning pointer that is null in production; every event site is `if (observer)`. Events are
// plain structs of data the engine already has (no Python objects). Implementations: the headless
// logger (DYNVIEW_LOGS, python/src/init_tracer.cpp), the .dyn recorder (recorder/), and a fan-out
// that feeds several at once.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/bytecode.h"

namespace dv {

struct CompileId {
  int frame = 0, recompile = 0;
  std::string str() const { return "[" + std::to_string(frame) + "/" + std::to_string(recompile) + "]"; }
};

// A code object the engine traced or generated, announced before any step refers to its id.
// Ids are process-wide and stable; the same code object may be announced more than once.
struct CodeObjectEvent {
  int code;
  const bc::CodeInfo* info;  // borrowed for the call
};
struct CompileStartEvent {
  CompileId id;
  std::string qualname, filename;
  int firstlineno;
  std::string reason;  // "first call" or the guard failures that caused the recompile
  int code = -1;       // id of the frame's code object
};
struct CompileEndEvent {
  CompileId id;
  std::string outcome;  // "graph", "no graph", "break (eager)", "error"
  int graphs = 0, guards = 0;
  double seconds = 0;
};
// One symbolic instruction, reported with the stack after it. A step that inlines a call is
// reported when the callee is entered (its stack then holds neither the callable, its arguments
// nor the result), so steps arrive in step order; the callee's steps follow at depth + 1.
struct StepEvent {
  CompileId id;
  int step, depth;
  bool frame_start;  // the first step of a frame (the root frame or an inlined callee)
  int code;  // code object id (see CodeObjectEvent)
  uint32_t offset;
  uint8_t opcode;
  int32_t arg;
  int line;
  const std::vector<int>* stack;                         // value ids, bottom first (borrowed)
  const std::vector<std::pair<int, int>>* locals;        // (slot, value id or 0) changed by the step
};
// A value the symbolic stack or a local slot holds, announced before the first step showing it.
struct ValueEvent {
  int id, step;
  const char* kind;
  std::string repr, source;
  int node;
  std::string type;  // Python type name
  std::string meta;  // tensors: "f32[2, 3] cpu" (+ " grad"); else empty
};
struct GuardEvent {
  CompileId id;
  std::string kind, text;
  int step, line;
  std::string filename;  // the file `line` is in (the frame, possibly inlined, that added the guard)
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
  std::vector<std::string> user_stack;  // "file:line in fn", innermost last
};
struct GraphNodeInfo {
  std::string name, op, target, args, meta;
  int step = -1;
};
struct GraphEvent {
  CompileId id;
  std::string code;  // the FX GraphModule's Python code
  int ops;
  std::vector<GraphNodeInfo> nodes;  // in graph order, the output node last
};
struct CodeEvent {
  CompileId id;
  std::string name, listing;   // generated code object and its disassembly (may be empty)
  int code = -1;               // id of the generated code object (announced just before)
};
// EagerRun: a call of a frame the engine runs eagerly (a break that could not split it, the recompile
// limit), after the call that decided it; counted like hits (the recorder attributes it to the code's
// latest compile).
struct CacheEvent {
  enum Kind { Hit, Miss, Recompile, LimitHit, EagerRun } kind;
  std::string qualname, filename;
  int firstlineno;
  int entry;                          // Hit: index of the entry
  std::vector<std::string> failures;  // Recompile/LimitHit
  CompileId entry_id;                 // Hit: the entry's compile; Recompile/LimitHit: the entry whose guards failed
  std::vector<int> failed_guards;     // Recompile/LimitHit: index of each failing guard in that compile
  int code = -1;                      // code object id when known
};

class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  virtual void on_code_object(const CodeObjectEvent&) {}
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

// Forwards every event to each of its observers, in order (non-owning).
class FanOut final : public EngineObserver {
 public:
  std::vector<EngineObserver*> to;
  void on_code_object(const CodeObjectEvent& e) override { for (auto* o : to) o->on_code_object(e); }
  void on_compile_start(const CompileStartEvent& e) override { for (auto* o : to) o->on_compile_start(e); }
  void on_compile_end(const CompileEndEvent& e) override { for (auto* o : to) o->on_compile_end(e); }
  void on_step(const StepEvent& e) override { for (auto* o : to) o->on_step(e); }
  void on_value(const ValueEvent& e) override { for (auto* o : to) o->on_value(e); }
  void on_guard(const GuardEvent& e) override { for (auto* o : to) o->on_guard(e); }
  void on_graph_node(const GraphNodeEvent& e) override { for (auto* o : to) o->on_graph_node(e); }
  void on_break(const BreakEvent& e) override { for (auto* o : to) o->on_break(e); }
  void on_graph(const GraphEvent& e) override { for (auto* o : to) o->on_graph(e); }
  void on_code(const CodeEvent& e) override { for (auto* o : to) o->on_code(e); }
  void on_cache(const CacheEvent& e) override { for (auto* o : to) o->on_cache(e); }
};

}  // namespace dv
