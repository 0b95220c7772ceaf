// The viewer's model: everything the panes show and every action they (or a --script) take, over
// core's TraceReader. No GL, no ImGui: the panes in app.cpp draw from it, scripted tests drive it
// through the same actions. One cursor (a global step) that every pane follows; chunks are decoded
// on demand by a loader thread (the latest request wins) and a few are kept. A directory of
// per-process traces (DYNVIEW_TRACE=dir/) opens as one trace: the processes' steps, compiles and
// code objects follow one another in one numbering, and each compile names its process.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/bytecode.h"
#include "core/trace.h"

namespace dv::view {

struct Compile {
  int index = 0;
  int process = 0;  // index into Model::processes()
  std::string id, qualname, filename, reason, outcome = "incomplete";
  int firstlineno = 0, code = -1;
  uint64_t first_step = 0, steps = 0;
  double seconds = 0;
  int64_t hits = 0;        // cache hits of its entry
  int64_t eager_runs = 0;  // calls that ran eagerly after it (it broke without a split, or the recompile limit)
  std::vector<int> guards, breaks, nodes, graphs;  // indexes into the model's tables
  std::vector<std::pair<std::string, int>> gen_codes;  // (name, code id) of generated code
  std::vector<std::pair<std::string, std::string>> bytecode;  // imported traces: (original|modified, dis text)
};
struct Guard {
  int compile = 0, index = 0, line = 0;
  std::string kind, text;
  int64_t step = -1;
  std::string filename;  // the file `line` is in (older and imported traces: empty)
};
struct Break {
  int compile = 0, line = 0, offset = 0;
  std::string break_id, message, hint, filename;
  std::string title;  // the id's title from core/break_ids.inc ("" for an id it does not know)
  int64_t step = -1;
  std::vector<std::string> stack;
  // "DV0002 (data-dependent control flow)", or the id alone when the table does not know it.
  std::string id_and_title() const { return title.empty() ? break_id : break_id + " (" + title + ")"; }
};
struct Node {
  int compile = 0, graph = -1, node = -1;  // node: the engine's node id (values refer to it)
  std::string name, op, target, args, meta;
  int64_t step = -1;
};
struct Graph {
  int compile = 0;
  std::string code;
  std::vector<int> nodes;  // indexes into nodes()
};
struct Recompile {
  std::string kind, qualname;   // "recompile" | "limit"
  int entry_compile = -1;       // the compile whose guards failed
  int caused_compile = -1;      // the compile this recompile started (-1 for limit)
  std::vector<int> guards;      // indexes into guards() of the failing guards
  std::vector<std::string> failures;
};
struct SearchHit {
  int64_t step;
  std::string what;  // "guard", "break", "node", "opcode", "name"
  std::string label;
  int index = -1;    // into the table it came from
};
// A decoded code object with its instructions (for the bytecode panes).
struct CodeView {
  int id = -1;
  bc::CodeInfo info;
  bc::Decoded decoded;
  std::vector<std::string> lines;  // one per instruction: "  12 >>  LOAD_FAST  0 (x)"
  std::string error;
};
// One recorded process: a trace file (a directory holds one per process).
struct Process {
  std::string path;
  int64_t pid = -1, rank = -1;  // rank: -1 when the process had no RANK
  uint64_t first_step = 0, steps = 0;
  std::vector<int> compiles;    // indexes into compiles()
};
// What the cursor shows: the step and the frames after it.
struct StepState {
  bool valid = false;
  int64_t step = -1;
  uint32_t compile = 0;
  int depth = 0, code = -1, line = 0;
  uint32_t offset = 0;
  uint8_t opcode = 0;
  int32_t arg = INT32_MIN;
  std::vector<trace::FrameView> frames;
  std::vector<trace::Value> stack, locals;  // of the innermost frame (locals: set slots only)
  std::vector<int> local_slots;
};

class Model {
 public:
  // A trace file, or a directory of per-process traces (every *.dyn in it, sorted by name).
  static Result<std::unique_ptr<Model>> open(const std::string& path);
  ~Model();

  const trace::TraceReader& reader(size_t process = 0) const { return *parts_[process].r; }
  const std::vector<Process>& processes() const { return processes_; }
  bool is_directory() const { return directory_; }
  // What is wrong with the trace that opening it did not show: chunks whose stored header or step
  // data is corrupt ("chunk 1: step data is corrupt: ..."), as `dynview check` finds them. A thread
  // decodes every chunk once in the background; `wait` waits for it (scripts, tests).
  std::vector<std::pair<int, std::string>> verify_problems(bool wait);  // (process, what)
  const std::string& path() const { return path_; }
  uint64_t total_steps() const { return total_; }
  const std::vector<Compile>& compiles() const { return compiles_; }
  const std::vector<Guard>& guards() const { return guards_; }
  const std::vector<Break>& breaks() const { return breaks_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Graph>& graphs() const { return graphs_; }
  const std::vector<Recompile>& recompiles() const { return recompiles_; }

  // ---- cursor and selection -------------------------------------------------------------------
  int64_t cursor() const { return cursor_; }
  int selected_compile() const { return compile_; }
  int selected_node() const { return node_; }
  int selected_guard() const { return guard_; }
  int selected_break() const { return break_; }
  int selected_recompile() const { return recompile_; }
  int selected_value() const { return value_; }
  // Moves the cursor (clamped), selects the compile holding it; `remember` records the jump in
  // the back/forward history.
  void go_to(int64_t step, bool remember = true);
  void step_by(int64_t delta);          // ←/→ (no history entry)
  void step_over(int dir);              // shift+←/→: the next step at the same or a smaller depth
  void select_compile(int c);           // cursor to its first step
  bool back();
  bool forward();
  void toggle_bookmark();
  const std::set<int64_t>& bookmarks() const { return bookmarks_; }
  bool next_bookmark(int dir);
  // Links: each moves the cursor to where the thing was made and selects it.
  void follow_guard(int i);
  void follow_node(int i);
  void follow_break(int i);
  void follow_value(int id);            // a value of the current compile: its producing step
  void follow_recompile(int i);         // selects the failing guard, cursor where it was created

  // ---- what the cursor shows --------------------------------------------------------------------
  // Waits for the chunk holding the cursor when `wait`; else uses what is decoded (the loader
  // catches up; `pending()` says so).
  const StepState& state(bool wait = false);
  bool pending() const;
  const trace::Value* value(uint32_t compile, int id);
  std::shared_ptr<const CodeView> code_view(int code_id);
  // The opcode name of a step of code `code_id`, in that code's CPython version (3.11 if unknown).
  std::string_view step_op_name(int code_id, uint8_t opcode);
  // Depth of each step in [from, to) sampled at n points (-1: not decoded yet); for the timeline.
  std::vector<int> depth_samples(int64_t from, int64_t to, int n, bool wait = false);
  // Source lines of a file: from disk (the trace holds the path). Empty when unreadable.
  // The file's lines: the file on disk when it still holds the lines the trace recorded (or the trace
  // recorded none), else the trace's lines (unrecorded lines empty). source_origin says which.
  const std::vector<std::string>& source(const std::string& filename);
  std::string source_origin(const std::string& filename);

  // ---- search -----------------------------------------------------------------------------------
  // Guards (text/kind), breaks (id/message), graph nodes (name/target) anywhere, and in the
  // selected compile's steps opcode names and names in arguments (LOAD_ATTR fc1 for "fc1").
  const std::vector<SearchHit>& search(const std::string& query);
  const std::string& query() const { return query_; }
  const std::vector<SearchHit>& hits() const { return hits_; }
  bool search_step(int dir);  // to the next hit after (dir > 0) or before the cursor

  // The viewer state as JSON (for --script output and tests).
  nlohmann::json snapshot();

 private:
  Model() = default;
  void index_events();
  template <class Row>
  void follow(const std::vector<Row>& table, int i, int& selected);
  std::shared_ptr<const trace::Chunk> chunk(size_t k, bool wait);
  void loader();
  void request(size_t k);
  int compile_of(int64_t step) const;
  // Global chunk indexes and steps over the processes' traces.
  struct Part {
    std::unique_ptr<trace::TraceReader> r;
    uint64_t step_base = 0;
    uint32_t compile_base = 0;
    size_t chunk_base = 0;
    int code_base = 0;  // code ids of this process are code_base + the trace's id
  };
  size_t part_of_chunk(size_t k) const;
  size_t chunk_of(uint64_t step) const;  // nchunks_ when out of range
  const trace::ChunkInfo& chunk_info(size_t k) const;
  Result<trace::Chunk> load_chunk(size_t k) const;  // decoded, in the global numbering
  void verifier();

  std::string path_;
  bool directory_ = false;
  std::vector<Part> parts_;
  std::vector<Process> processes_;
  size_t nchunks_ = 0;
  nlohmann::json counts_;  // reports::counts, computed at the first snapshot
  uint64_t total_ = 0;
  std::vector<Compile> compiles_;
  std::vector<Guard> guards_;
  std::vector<Break> breaks_;
  std::vector<Node> nodes_;
  std::vector<Graph> graphs_;
  std::vector<Recompile> recompiles_;

  int64_t cursor_ = 0;
  int compile_ = -1, node_ = -1, guard_ = -1, break_ = -1, recompile_ = -1, value_ = -1;
  std::vector<int64_t> history_{0};
  size_t hpos_ = 0;
  std::set<int64_t> bookmarks_;
  std::string query_;
  std::vector<SearchHit> hits_;

  StepState state_;
  int64_t state_step_ = -2;
  std::map<int, std::shared_ptr<const CodeView>> codes_;
  std::map<std::string, std::vector<std::string>> sources_;
  std::map<std::string, std::string> source_origins_;
  std::map<std::string, std::map<int, std::string>> trace_sources_;  // `source` records: file -> line -> text

  // Chunk cache and loader thread.
  mutable std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::list<std::pair<size_t, std::shared_ptr<const trace::Chunk>>> cache_;  // most recent first
  std::optional<size_t> want_;
  bool stop_ = false;
  std::thread thread_;
  // Background verification of every chunk (verify_problems).
  std::mutex vmu_;
  std::condition_variable vcv_;
  bool verify_now_ = false, verified_ = false;
  std::vector<std::pair<int, std::string>> verify_problems_;
  std::thread verify_thread_;
};

}  // namespace dv::view
