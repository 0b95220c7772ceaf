// The viewer's model (see model.h).
#include "model.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "core/break_ids.h"
#include "core/code_json.h"
#include "core/json_get.h"
#include "core/opcodes.h"
#include "core/reports.h"

namespace dv::view {
using nlohmann::json;

namespace {
constexpr size_t kCacheChunks = 6;

bool contains_ci(const std::string& hay, const std::string& needle) {
  if (needle.empty()) return false;
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(),
                        [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b)); });
  return it != hay.end();
}
}  // namespace

Result<std::unique_ptr<Model>> Model::open(const std::string& path) {
  namespace fs = std::filesystem;
  std::unique_ptr<Model> m(new Model());
  m->path_ = path;
  std::vector<std::string> paths;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {  // DYNVIEW_TRACE=dir/: one trace per process
    m->directory_ = true;
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.path().extension() == ".dyn" && !fs::is_directory(e.path(), ec)) paths.push_back(e.path().string());
    std::sort(paths.begin(), paths.end());
    if (paths.empty()) return make_error(path, "a directory with no .dyn traces in it");
  } else {
    paths.push_back(path);
  }
  for (const std::string& p : paths) {
    auto r = trace::TraceReader::open(p);
    if (!r) return m->directory_ ? make_error(p, r.error().message()) : r.error();
    Part part;
    part.r = std::move(*r);
    part.step_base = m->total_;
    part.chunk_base = m->nchunks_;
    part.code_base = m->parts_.empty() ? 0 : m->parts_.back().code_base;
    if (!m->parts_.empty())  // after the previous process's largest code id
      for (const json& ev : m->parts_.back().r->events()) {
        const int64_t id = json_get<int64_t>(ev, json_get<std::string>(ev, "t", "") == "code" ? "id" : "code", -1);
        part.code_base = std::max<int64_t>(part.code_base, m->parts_.back().code_base + id + 1);
      }
    m->total_ += part.r->total_steps();
    m->nchunks_ += part.r->chunks().size();
    Process proc;
    proc.path = p;
    proc.pid = json_get<int64_t>(part.r->meta(), "pid", -1);
    proc.rank = json_get<int64_t>(part.r->meta(), "rank", -1);
    proc.first_step = part.step_base;
    proc.steps = part.r->total_steps();
    m->processes_.push_back(std::move(proc));
    m->parts_.push_back(std::move(part));
  }
  m->index_events();
  m->thread_ = std::thread([p = m.get()] { p->loader(); });
  m->verify_thread_ = std::thread([p = m.get()] { p->verifier(); });
  if (!m->compiles_.empty()) m->compile_ = 0;
  return m;
}

Model::~Model() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  {
    std::lock_guard<std::mutex> lock(vmu_);
    verify_now_ = true;
  }
  vcv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (verify_thread_.joinable()) verify_thread_.join();
}

// Decodes every chunk once (after a short delay, so that opening and the first frames come first),
// keeping what is wrong; stops early when the model closes.
void Model::verifier() {
  {
    std::unique_lock<std::mutex> lock(vmu_);
    vcv_.wait_for(lock, std::chrono::milliseconds(300), [&] { return verify_now_; });
  }
  std::vector<std::pair<int, std::string>> found;
  for (size_t p = 0; p < parts_.size(); ++p)
    for (size_t k = 0; k < parts_[p].r->chunks().size(); ++k) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return;
      }
      for (std::string& what : reports::chunk_problems(*parts_[p].r, k)) found.emplace_back(static_cast<int>(p), std::move(what));
    }
  std::lock_guard<std::mutex> lock(vmu_);
  verify_problems_ = std::move(found);
  verified_ = true;
  vcv_.notify_all();
}

std::vector<std::pair<int, std::string>> Model::verify_problems(bool wait) {
  std::unique_lock<std::mutex> lock(vmu_);
  if (wait && !verified_) {
    verify_now_ = true;
    vcv_.notify_all();
    vcv_.wait(lock, [&] { return verified_; });
  }
  return verified_ ? verify_problems_ : std::vector<std::pair<int, std::string>>{};
}

size_t Model::part_of_chunk(size_t k) const {
  size_t p = 0;
  while (p + 1 < parts_.size() && parts_[p + 1].chunk_base <= k) ++p;
  return p;
}

size_t Model::chunk_of(uint64_t step) const {
  if (step >= total_) return nchunks_;
  size_t p = 0;
  while (p + 1 < parts_.size() && parts_[p + 1].step_base <= step) ++p;
  const size_t k = parts_[p].r->chunk_of(step - parts_[p].step_base);
  return k < parts_[p].r->chunks().size() ? parts_[p].chunk_base + k : nchunks_;
}

const trace::ChunkInfo& Model::chunk_info(size_t k) const {
  const Part& p = parts_[part_of_chunk(k)];
  return p.r->chunks()[k - p.chunk_base];
}

// A chunk of one process's trace with its steps, compiles, code ids and values moved into the
// model's numbering (the first process's need no change).
Result<trace::Chunk> Model::load_chunk(size_t k) const {
  const Part& p = parts_[part_of_chunk(k)];
  auto c = p.r->chunk(k - p.chunk_base);
  if (!c || (p.step_base == 0 && p.compile_base == 0 && p.code_base == 0)) return c;
  trace::Chunk& x = *c;
  x.first_step += p.step_base;
  for (uint32_t& v : x.compile) v += p.compile_base;
  if (x.key_compile != UINT32_MAX) x.key_compile += p.compile_base;
  for (int32_t& v : x.code)
    if (v >= 0) v += p.code_base;
  for (trace::FrameView& f : x.key_frames)
    if (f.code >= 0) f.code += p.code_base;
  std::map<std::pair<uint32_t, int32_t>, trace::Value> values;
  for (auto& [key, v] : x.values) {
    v.compile += p.compile_base;
    v.step += p.step_base;
    values.emplace(std::make_pair(key.first + p.compile_base, key.second), std::move(v));
  }
  x.values = std::move(values);
  return c;
}

// Tables from the trace's events (read once at open).
void Model::index_events() {
  for (size_t pi = 0; pi < parts_.size(); ++pi) {
  Part& part = parts_[pi];
  part.compile_base = static_cast<uint32_t>(compiles_.size());
  // The process's compile indexes, steps and code ids in the model's numbering.
  const int64_t cb = part.compile_base, sb = static_cast<int64_t>(part.step_base), kb = part.code_base;
  auto at_c = [&](const json& ev, const char* key) -> int64_t {
    const int64_t v = json_get<int64_t>(ev, key, -1);
    return v >= 0 ? v + cb : v;
  };
  auto at_step = [&](const json& ev, const char* key) -> int64_t {
    const int64_t v = json_get<int64_t>(ev, key, -1);
    return v >= 0 ? v + sb : v;
  };
  auto at_code = [&](const json& ev, const char* key) -> int {
    const int v = json_get<int>(ev, key, -1);
    return v >= 0 ? v + static_cast<int>(kb) : v;
  };
  auto comp = [&](int64_t c) -> Compile* { return c >= cb && static_cast<size_t>(c) < compiles_.size() ? &compiles_[c] : nullptr; };
  std::vector<size_t> pending_recompiles;  // waiting for the compile they cause
  for (const json& ev : part.r->events()) {
    const std::string t = json_get<std::string>(ev, "t", "");
    const int64_t c = at_c(ev, "c");
    if (t == "compile_start") {
      Compile x;
      x.index = static_cast<int>(compiles_.size());
      x.process = static_cast<int>(pi);
      processes_[pi].compiles.push_back(x.index);
      x.id = json_get<std::string>(ev, "id", "?");
      x.qualname = json_get<std::string>(ev, "qualname", "");
      x.filename = json_get<std::string>(ev, "filename", "");
      x.reason = json_get<std::string>(ev, "reason", "");
      x.firstlineno = json_get<int>(ev, "firstlineno", 0);
      x.code = at_code(ev, "code");
      x.first_step = json_get<uint64_t>(ev, "step", 0) + part.step_base;
      compiles_.push_back(std::move(x));
      for (size_t i : pending_recompiles) {
        Recompile& rc = recompiles_[i];
        if (rc.entry_compile >= 0 && compiles_[rc.entry_compile].code == compiles_.back().code) rc.caused_compile = compiles_.back().index;
      }
      pending_recompiles.clear();
    } else if (t == "compile_end") {
      if (Compile* x = comp(c)) {
        x->outcome = json_get<std::string>(ev, "outcome", "");
        x->steps = json_get<uint64_t>(ev, "steps", 0);
        x->seconds = json_get<double>(ev, "seconds", 0.0);
      }
    } else if (t == "guard") {
      Guard g{static_cast<int>(c), json_get<int>(ev, "i", 0), json_get<int>(ev, "line", 0), json_get<std::string>(ev, "kind", ""),
              json_get<std::string>(ev, "text", ""), at_step(ev, "step"), json_get<std::string>(ev, "filename", "")};
      if (Compile* x = comp(c)) x->guards.push_back(static_cast<int>(guards_.size()));
      guards_.push_back(std::move(g));
    } else if (t == "break") {
      Break b;
      b.compile = static_cast<int>(c);
      b.line = json_get<int>(ev, "line", 0);
      b.offset = json_get<int>(ev, "offset", 0);
      b.break_id = json_get<std::string>(ev, "break_id", "");
      b.title = std::string(dv::breaks::title(b.break_id));
      b.message = json_get<std::string>(ev, "message", "");
      b.hint = json_get<std::string>(ev, "hint", "");
      b.filename = json_get<std::string>(ev, "filename", "");
      b.step = at_step(ev, "step");
      if (ev.contains("stack") && ev["stack"].is_array())
        for (const json& s : ev["stack"]) b.stack.push_back(s.is_string() ? s.get<std::string>() : s.dump());
      if (Compile* x = comp(c)) x->breaks.push_back(static_cast<int>(breaks_.size()));
      breaks_.push_back(std::move(b));
    } else if (t == "graph") {
      Graph g;
      g.compile = static_cast<int>(c);
      g.code = json_get<std::string>(ev, "code", "");
      const int gi = static_cast<int>(graphs_.size());
      if (ev.contains("nodes") && ev["nodes"].is_array())
        for (const json& n : ev["nodes"]) {
          Node x;
          x.compile = g.compile;
          x.graph = gi;
          x.name = json_get<std::string>(n, "name", "");
          x.op = json_get<std::string>(n, "op", "");
          x.target = json_get<std::string>(n, "target", "");
          x.args = json_get<std::string>(n, "args", "");
          x.meta = json_get<std::string>(n, "meta", "");
          x.step = at_step(n, "step");
          g.nodes.push_back(static_cast<int>(nodes_.size()));
          if (Compile* cc = comp(c)) cc->nodes.push_back(static_cast<int>(nodes_.size()));
          nodes_.push_back(std::move(x));
        }
      if (Compile* x = comp(c)) x->graphs.push_back(gi);
      graphs_.push_back(std::move(g));
    } else if (t == "source") {
      const std::string file = json_get<std::string>(ev, "filename", "");
      const int first = json_get<int>(ev, "first", 1);
      if (ev.contains("lines") && ev["lines"].is_array() && first >= 1) {
        auto& m = trace_sources_[file];
        int i = first;
        for (const json& l : ev["lines"]) m[i++] = l.is_string() ? l.get<std::string>() : "";
      }
    } else if (t == "bytecode") {  // imported from TORCH_TRACE: dis text, no code object
      if (Compile* x = comp(c)) x->bytecode.emplace_back(json_get<std::string>(ev, "which", ""), json_get<std::string>(ev, "text", ""));
    } else if (t == "gen_code") {
      if (Compile* x = comp(c)) x->gen_codes.emplace_back(json_get<std::string>(ev, "name", ""), at_code(ev, "code"));
    } else if (t == "cache") {
      const std::string kind = json_get<std::string>(ev, "kind", "");
      if (kind == "hit") {
        if (Compile* x = comp(at_c(ev, "entry_c"))) x->hits += json_get<int64_t>(ev, "count", 0);
      } else if (kind == "eager") {
        if (Compile* x = comp(at_c(ev, "entry_c"))) x->eager_runs += json_get<int64_t>(ev, "count", 0);
      } else if (kind == "recompile" || kind == "limit") {
        Recompile rc;
        rc.kind = kind;
        rc.qualname = json_get<std::string>(ev, "qualname", "");
        rc.entry_compile = static_cast<int>(at_c(ev, "entry_c"));
        if (ev.contains("failures") && ev["failures"].is_array())
          for (const json& f : ev["failures"]) rc.failures.push_back(f.is_string() ? f.get<std::string>() : f.dump());
        if (const Compile* x = comp(rc.entry_compile); x && ev.contains("guards") && ev["guards"].is_array())
          for (const json& gi : ev["guards"]) {
            const int i = gi.is_number_integer() ? gi.get<int>() : -1;
            if (i >= 0 && static_cast<size_t>(i) < x->guards.size()) rc.guards.push_back(x->guards[i]);
          }
        if (kind == "recompile") pending_recompiles.push_back(recompiles_.size());
        recompiles_.push_back(std::move(rc));
      }
    }
  }
  // Compiles without an end event (a crashed writer): their steps run to the next compile.
  const uint64_t part_end = part.step_base + part.r->total_steps();
  for (size_t i = cb; i < compiles_.size(); ++i)
    if (compiles_[i].steps == 0) {
      const uint64_t end = i + 1 < compiles_.size() ? compiles_[i + 1].first_step : part_end;
      compiles_[i].steps = end > compiles_[i].first_step ? end - compiles_[i].first_step : 0;
    }
  }
}

int Model::compile_of(int64_t step) const {
  auto it = std::upper_bound(compiles_.begin(), compiles_.end(), step,
                             [](int64_t s, const Compile& c) { return s < static_cast<int64_t>(c.first_step); });
  if (it == compiles_.begin()) return compiles_.empty() ? -1 : 0;
  return static_cast<int>(it - compiles_.begin()) - 1;
}

// ---- chunk cache ---------------------------------------------------------------------------------

void Model::loader() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait(lock, [&] { return stop_ || want_.has_value(); });
    if (stop_) break;
    const size_t k = *want_;
    want_.reset();
    bool have = false;
    for (auto& e : cache_) have |= e.first == k;
    if (have) continue;
    lock.unlock();
    auto c = load_chunk(k);
    std::shared_ptr<const trace::Chunk> p = c ? std::make_shared<trace::Chunk>(std::move(*c)) : std::make_shared<trace::Chunk>();
    lock.lock();
    cache_.emplace_front(k, std::move(p));
    if (cache_.size() > kCacheChunks) cache_.pop_back();
    done_cv_.notify_all();
  }
}

void Model::request(size_t k) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    want_ = k;  // the latest request wins: an older one not started yet is dropped
  }
  cv_.notify_one();
}

std::shared_ptr<const trace::Chunk> Model::chunk(size_t k, bool wait) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    for (auto it = cache_.begin(); it != cache_.end(); ++it)
      if (it->first == k) {
        cache_.splice(cache_.begin(), cache_, it);
        return cache_.front().second;
      }
    if (!wait) {
      lock.unlock();
      request(k);
      return nullptr;
    }
    want_ = k;
    cv_.notify_one();
    done_cv_.wait(lock);
  }
}

bool Model::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return want_.has_value();
}

// ---- cursor ----------------------------------------------------------------------------------------

void Model::go_to(int64_t step, bool remember) {
  if (total_ == 0) return;
  step = std::clamp<int64_t>(step, 0, static_cast<int64_t>(total_) - 1);
  cursor_ = step;
  compile_ = compile_of(step);
  if (remember && history_[hpos_] != step) {
    history_.resize(hpos_ + 1);
    history_.push_back(step);
    hpos_ = history_.size() - 1;
  }
}

void Model::step_by(int64_t delta) { go_to(cursor_ + delta, false); }

void Model::step_over(int dir) {
  const StepState& s = state(true);
  if (!s.valid) return step_by(dir);
  const int depth = s.depth;
  int64_t i = cursor_;
  for (int guard = 0; guard < 64; ++guard) {  // at most 64 chunks scanned
    i += dir;
    if (i < 0 || i >= static_cast<int64_t>(total_)) return;
    const size_t k = chunk_of(static_cast<uint64_t>(i));
    if (k >= nchunks_) return;
    auto c = chunk(k, true);
    if (!c || c->size() == 0) return;
    const int64_t first = static_cast<int64_t>(c->first_step), last = first + static_cast<int64_t>(c->size()) - 1;
    for (; i >= first && i <= last; i += dir) {
      const size_t j = static_cast<size_t>(i - first);
      if (c->depth[j] <= depth || c->compile[j] != s.compile) return go_to(i, false);
    }
    i -= dir;
  }
}

void Model::select_compile(int c) {
  if (c < 0 || static_cast<size_t>(c) >= compiles_.size()) return;
  go_to(static_cast<int64_t>(compiles_[c].first_step));
  compile_ = c;
}

bool Model::back() {
  if (hpos_ == 0) return false;
  go_to(history_[--hpos_], false);
  return true;
}

bool Model::forward() {
  if (hpos_ + 1 >= history_.size()) return false;
  go_to(history_[++hpos_], false);
  return true;
}

void Model::toggle_bookmark() {
  if (!bookmarks_.erase(cursor_)) bookmarks_.insert(cursor_);
}

bool Model::next_bookmark(int dir) {
  if (bookmarks_.empty()) return false;
  if (dir > 0) {
    auto it = bookmarks_.upper_bound(cursor_);
    go_to(it == bookmarks_.end() ? *bookmarks_.begin() : *it);
  } else {
    auto it = bookmarks_.lower_bound(cursor_);
    go_to(it == bookmarks_.begin() ? *bookmarks_.rbegin() : *std::prev(it));
  }
  return true;
}

// A row of a table (guards, nodes, breaks): select it, go to the step that made it.
template <class Row>
void Model::follow(const std::vector<Row>& table, int i, int& selected) {
  if (i < 0 || static_cast<size_t>(i) >= table.size()) return;
  selected = i;
  if (table[i].step >= 0) go_to(table[i].step);
  compile_ = table[i].compile;
}

void Model::follow_guard(int i) { follow(guards_, i, guard_); }
void Model::follow_node(int i) { follow(nodes_, i, node_); }
void Model::follow_break(int i) { follow(breaks_, i, break_); }

void Model::follow_value(int id) {
  const StepState& s = state(true);
  if (!s.valid) return;
  const trace::Value* v = value(s.compile, id);
  if (!v) return;
  value_ = id;
  go_to(static_cast<int64_t>(v->step));
  // The graph node it stands for, if any.
  for (int n : compiles_[s.compile].nodes)
    if (nodes_[n].node == v->node && v->node >= 0) node_ = n;
}

void Model::follow_recompile(int i) {
  if (i < 0 || static_cast<size_t>(i) >= recompiles_.size()) return;
  recompile_ = i;
  if (!recompiles_[i].guards.empty()) follow_guard(recompiles_[i].guards.front());
  else if (recompiles_[i].entry_compile >= 0) select_compile(recompiles_[i].entry_compile);
}

// ---- state at the cursor ---------------------------------------------------------------------------

const StepState& Model::state(bool wait) {
  if (state_step_ == cursor_ && state_.valid) return state_;
  if (cursor_ < 0 || static_cast<uint64_t>(cursor_) >= total_) {
    state_ = StepState{};
    return state_;
  }
  const size_t k = chunk_of(static_cast<uint64_t>(cursor_));
  if (k >= nchunks_) {
    state_ = StepState{};
    state_step_ = cursor_;
    return state_;
  }
  auto c = chunk(k, wait);
  if (!c) return state_;  // the previous state stays on screen until the chunk arrives
  StepState s;
  const size_t i = static_cast<size_t>(cursor_ - static_cast<int64_t>(c->first_step));
  if (i >= c->size()) {
    state_ = StepState{};
    state_step_ = cursor_;
    return state_;
  }
  s.valid = true;
  s.step = cursor_;
  s.compile = c->compile[i];
  s.depth = c->depth[i];
  s.code = c->code[i];
  s.line = c->line[i];
  s.offset = c->offset[i];
  s.opcode = c->opcode[i];
  s.arg = c->arg[i];
  s.frames = c->state_after(i);
  auto find = [&](int id) -> const trace::Value* {
    auto it = c->values.find({s.compile, id});
    return it == c->values.end() ? nullptr : &it->second;
  };
  if (!s.frames.empty()) {
    const trace::FrameView& f = s.frames.back();
    for (int id : f.stack) {
      const trace::Value* v = find(id);
      trace::Value x = v ? *v : trace::Value{};
      x.id = id;
      s.stack.push_back(std::move(x));
    }
    for (size_t slot = 0; slot < f.locals.size(); ++slot)
      if (f.locals[slot] > 0) {
        const trace::Value* v = find(f.locals[slot]);
        trace::Value x = v ? *v : trace::Value{};
        x.id = f.locals[slot];
        s.locals.push_back(std::move(x));
        s.local_slots.push_back(static_cast<int>(slot));
      }
  }
  state_ = std::move(s);
  state_step_ = cursor_;
  compile_ = static_cast<int>(state_.compile) < static_cast<int>(compiles_.size()) ? static_cast<int>(state_.compile) : compile_;
  return state_;
}

const trace::Value* Model::value(uint32_t compile, int id) {
  const size_t k = chunk_of(static_cast<uint64_t>(std::max<int64_t>(cursor_, 0)));
  if (k >= nchunks_) return nullptr;
  auto c = chunk(k, true);
  if (!c) return nullptr;
  auto it = c->values.find({compile, id});
  return it == c->values.end() ? nullptr : &it->second;
}

std::string_view Model::step_op_name(int code_id, uint8_t opcode) {
  auto cv = code_view(code_id);
  return bc::op_name(opcode, cv ? cv->info.version : bc::Version::py311);
}

std::shared_ptr<const CodeView> Model::code_view(int id) {
  auto it = codes_.find(id);
  if (it != codes_.end()) return it->second;
  auto v = std::make_shared<CodeView>();
  v->id = id;
  const json* ev = nullptr;
  for (size_t p = parts_.size(); p-- > 0;)  // the process whose code ids hold it
    if (id >= parts_[p].code_base) {
      ev = parts_[p].r->code(id - parts_[p].code_base);
      break;
    }
  if (!ev || !ev->contains("json") || !(*ev)["json"].is_string()) {
    v->error = "the trace holds no code object " + std::to_string(id);
  } else if (auto co = bc::code_from_json((*ev)["json"].get<std::string>()); !co) {
    v->error = co.error().message();
  } else if (auto d = bc::decode(*co); !d) {
    v->error = d.error().message();
  } else {
    v->info = std::move(*co);
    v->decoded = std::move(*d);
    const auto labels = bc::labels_313(v->decoded, false);  // 3.13's jumps say "to L<n>"
    for (const bc::Instr& ins : v->decoded.instrs) {
      // dis's columns, narrower: line (4), jump-target mark, offset (5), opname (padded to 20), arg (repr).
      std::string line = ins.starts_line != bc::kNone ? std::to_string(ins.starts_line) : "";
      line.resize(std::max<size_t>(line.size() + 1, 5), ' ');
      line += ins.is_jump_target ? ">>" : "  ";
      std::string off = std::to_string(ins.offset);
      line += std::string(off.size() < 5 ? 5 - off.size() : 0, ' ') + off + " ";
      line += bc::op_name(ins.opcode, v->info.version);
      if (ins.arg != bc::kNone) {
        line.resize(std::max<size_t>(line.size() + 1, 33), ' ');
        line += std::to_string(ins.arg);
        const std::string rep = bc::argrepr(v->info, ins, labels);
        if (!rep.empty()) line += " (" + rep + ")";
      }
      v->lines.push_back(std::move(line));
    }
  }
  codes_[id] = v;
  return v;
}

std::vector<int> Model::depth_samples(int64_t from, int64_t to, int n, bool wait) {
  std::vector<int> out(static_cast<size_t>(std::max(n, 0)), -1);
  if (n <= 0 || to <= from) return out;
  size_t last_k = SIZE_MAX;
  std::shared_ptr<const trace::Chunk> c;
  for (int i = 0; i < n; ++i) {
    const int64_t s = from + (to - from) * i / n;
    const size_t k = chunk_of(static_cast<uint64_t>(s));
    if (k >= nchunks_) continue;
    // Coarse (the chunk header's depth range) unless the chunk is decoded already.
    if (k != last_k) {
      last_k = k;
      c.reset();
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (auto& e : cache_)
          if (e.first == k) c = e.second;
      }
      if (!c && wait) c = chunk(k, true);
    }
    if (c && s - static_cast<int64_t>(c->first_step) < static_cast<int64_t>(c->size())) out[i] = c->depth[static_cast<size_t>(s - c->first_step)];
    else out[i] = chunk_info(k).h.max_depth;
  }
  return out;
}

const std::vector<std::string>& Model::source(const std::string& filename) {
  auto it = sources_.find(filename);
  if (it != sources_.end()) return it->second;
  std::vector<std::string> lines;
  std::ifstream f(filename, std::ios::binary);
  for (std::string l; f && std::getline(f, l);) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    lines.push_back(std::move(l));
  }
  std::string origin = lines.empty() ? "none" : "disk";
  if (auto t = trace_sources_.find(filename); t != trace_sources_.end() && !t->second.empty()) {
    bool same = !lines.empty();
    for (const auto& [n, text] : t->second) same = same && n <= static_cast<int>(lines.size()) && lines[n - 1] == text;
    if (same) {
      origin = "disk, matching the trace";
    } else {
      origin = lines.empty() ? "trace" : "trace; the file on disk has changed";
      lines.assign(static_cast<size_t>(t->second.rbegin()->first), std::string());
      for (const auto& [n, text] : t->second) lines[n - 1] = text;
    }
  }
  source_origins_[filename] = origin;
  return sources_[filename] = std::move(lines);
}

std::string Model::source_origin(const std::string& filename) {
  source(filename);
  return source_origins_[filename];
}

// ---- search ------------------------------------------------------------------------------------------

const std::vector<SearchHit>& Model::search(const std::string& q) {
  query_ = q;
  hits_.clear();
  if (q.empty()) return hits_;
  // Names: an instruction whose argument (as dis shows it: "fc1", "NULL + relu", "x") holds the
  // query as a whole identifier. Decided once per instruction of each code object.
  std::map<int, std::map<uint32_t, std::string>> names;  // code -> offset -> argrepr, matching ones only
  auto is_id = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string lq = q;
  std::transform(lq.begin(), lq.end(), lq.begin(), ::tolower);
  auto name_match = [&](int code, uint32_t offset) -> const std::string* {
    auto it = names.find(code);
    if (it == names.end()) {
      it = names.emplace(code, std::map<uint32_t, std::string>()).first;
      auto cv = code_view(code);
      const auto labels = cv->error.empty() ? bc::labels_313(cv->decoded, false) : std::vector<uint32_t>{};
      if (cv->error.empty())
        for (const bc::Instr& ins : cv->decoded.instrs) {
          if (ins.arg == bc::kNone) continue;
          std::string rep = bc::argrepr(cv->info, ins, labels), low = rep;
          std::transform(low.begin(), low.end(), low.begin(), ::tolower);
          for (size_t at = low.find(lq); at != std::string::npos; at = low.find(lq, at + 1))
            if ((at == 0 || !is_id(low[at - 1])) && (at + lq.size() == low.size() || !is_id(low[at + lq.size()]))) {
              it->second.emplace(ins.offset, rep);
              break;
            }
        }
    }
    auto m = it->second.find(offset);
    return m == it->second.end() ? nullptr : &m->second;
  };
  for (size_t i = 0; i < guards_.size(); ++i)
    if (contains_ci(guards_[i].text, q) || contains_ci(guards_[i].kind, q))
      hits_.push_back({guards_[i].step, "guard", guards_[i].text, static_cast<int>(i)});
  for (size_t i = 0; i < breaks_.size(); ++i)
    if (contains_ci(breaks_[i].break_id, q) || contains_ci(breaks_[i].title, q) || contains_ci(breaks_[i].message, q))
      hits_.push_back({breaks_[i].step, "break", breaks_[i].id_and_title() + " " + breaks_[i].message, static_cast<int>(i)});
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (contains_ci(nodes_[i].name, q) || contains_ci(nodes_[i].target, q))
      hits_.push_back({nodes_[i].step, "node", nodes_[i].name + " = " + nodes_[i].target, static_cast<int>(i)});
  // Opcodes (by name) in the selected compile, chunk by chunk (at most 64 chunks).
  if (compile_ >= 0) {
    const Compile& c = compiles_[compile_];
    int64_t s = static_cast<int64_t>(c.first_step);
    const int64_t end = s + static_cast<int64_t>(c.steps);
    for (int n = 0; s < end && n < 64; ++n) {
      const size_t k = chunk_of(static_cast<uint64_t>(s));
      if (k >= nchunks_) break;
      auto ch = chunk(k, true);
      if (!ch || ch->size() == 0) break;
      for (size_t j = static_cast<size_t>(s - static_cast<int64_t>(ch->first_step)); j < ch->size() && s < end; ++j, ++s) {
        const std::string_view name = step_op_name(ch->code[j], ch->opcode[j]);
        if (contains_ci(std::string(name), q)) {
          hits_.push_back({s, "opcode", std::string(name), -1});
        } else if (const std::string* rep = name_match(ch->code[j], ch->offset[j])) {
          hits_.push_back({s, "name", std::string(name) + " " + *rep, -1});
        }
      }
    }
  }
  std::stable_sort(hits_.begin(), hits_.end(), [](const SearchHit& a, const SearchHit& b) { return a.step < b.step; });
  return hits_;
}

bool Model::search_step(int dir) {
  if (hits_.empty()) return false;
  if (dir > 0) {
    for (const SearchHit& h : hits_)
      if (h.step > cursor_) return go_to(h.step), true;
    go_to(hits_.front().step);
  } else {
    for (auto it = hits_.rbegin(); it != hits_.rend(); ++it)
      if (it->step < cursor_) return go_to(it->step), true;
    go_to(hits_.back().step);
  }
  return true;
}

// ---- snapshot -------------------------------------------------------------------------------------

json Model::snapshot() {
  const StepState& s = state(true);
  if (counts_.is_null()) {  // the reports' counts, one definition; a directory's summed over its processes
    counts_ = json::object();
    for (const Part& p : parts_) {
      const json c = reports::counts(*p.r);
      for (auto& [k, v] : c.items())
        if (v.is_number_integer()) counts_[k] = json_get<int64_t>(counts_, k.c_str(), 0) + v.get<int64_t>();
    }
  }
  json j{{"cursor", cursor_}, {"total_steps", total_}, {"compile", compile_}, {"counts", counts_}, {"history", history_},
         {"history_pos", hpos_}, {"bookmarks", json(std::vector<int64_t>(bookmarks_.begin(), bookmarks_.end()))},
         {"selected_node", node_}, {"selected_guard", guard_}, {"selected_break", break_},
         {"selected_recompile", recompile_}, {"selected_value", value_}};
  if (compile_ >= 0) j["compile_id"] = compiles_[compile_].id;
  // The compiles tree: process -> compiles (the first 1000 compiles, with their runs).
  j["processes"] = json::array();
  for (const Process& p : processes_) {
    json ids = json::array();
    for (int c : p.compiles) ids.push_back(compiles_[c].id);
    j["processes"].push_back(json{{"path", p.path}, {"pid", p.pid}, {"rank", p.rank < 0 ? json(nullptr) : json(p.rank)},
                                  {"first_step", p.first_step}, {"steps", p.steps}, {"compiles", std::move(ids)}});
  }
  j["compiles"] = json::array();
  for (size_t i = 0; i < compiles_.size() && i < 1000; ++i) {
    const Compile& c = compiles_[i];
    j["compiles"].push_back(json{{"id", c.id}, {"qualname", c.qualname}, {"process", c.process}, {"outcome", c.outcome},
                                 {"first_step", c.first_step}, {"steps", c.steps}, {"hits", c.hits}, {"eager_runs", c.eager_runs}});
  }
  if (node_ >= 0) j["node_name"] = nodes_[node_].name;
  if (s.valid) {
    json st{{"depth", s.depth}, {"code", s.code}, {"offset", s.offset}, {"opname", std::string(step_op_name(s.code, s.opcode))},
            {"line", s.line}};
    if (s.arg != INT32_MIN) st["arg"] = s.arg;
    auto val = [](const trace::Value& v) {
      return json{{"id", v.id}, {"kind", v.kind}, {"repr", v.repr}, {"type", v.type}, {"source", v.source},
                  {"meta", v.meta}, {"step", v.step}, {"node", v.node}};
    };
    json stack = json::array(), locals = json::array();
    for (const auto& v : s.stack) stack.push_back(val(v));
    for (size_t i = 0; i < s.locals.size(); ++i) {
      json x = val(s.locals[i]);
      x["slot"] = s.local_slots[i];
      if (auto cv = code_view(s.code); cv->error.empty() && static_cast<size_t>(s.local_slots[i]) < cv->info.localsplusnames.size())
        x["name"] = cv->info.localsplusnames[s.local_slots[i]];
      locals.push_back(std::move(x));
    }
    st["stack"] = std::move(stack);
    st["locals"] = std::move(locals);
    st["frames"] = s.frames.size();
    // The highlighted instruction in the original bytecode pane.
    if (auto cv = code_view(s.code); cv->error.empty()) {
      for (size_t i = 0; i < cv->decoded.instrs.size(); ++i)
        if (cv->decoded.instrs[i].offset == s.offset) st["instruction"] = cv->lines[i], st["instruction_index"] = i;
      // The source pane: its file, where its text comes from, the highlighted line's text.
      const auto& src = source(cv->info.filename);
      st["source_file"] = cv->info.filename;
      st["source_origin"] = source_origin(cv->info.filename);
      if (s.line >= 1 && static_cast<size_t>(s.line) <= src.size()) st["source_line"] = src[s.line - 1];
    }
    j["step"] = std::move(st);
  }
  if (!query_.empty()) {
    j["search"] = query_;
    j["hits"] = hits_.size();
  }
  return j;
}

}  // namespace dv::view
