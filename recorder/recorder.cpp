// Recorder: engine events -> .dyn trace (see recorder.h and core/TRACE.md for the records).
#include "recorder.h"

#include "core/code_json.h"

namespace dv {

using nlohmann::json;

Result<std::unique_ptr<Recorder>> Recorder::create(const std::string& path, const json& meta, trace::WriterOptions opts,
                                                   int flush_ms) {
  auto w = trace::TraceWriter::create(path, meta, opts);
  if (!w) return w.error();
  std::unique_ptr<Recorder> r(new Recorder());
  r->w_ = std::move(*w);
  r->flush_ms_ = flush_ms;
  r->thread_ = std::thread([p = r.get()] { p->flusher(); });
  return r;
}

Recorder::~Recorder() { close(); }

void Recorder::flusher() {
  std::unique_lock<std::mutex> lock(mu_);
  const auto period = std::chrono::milliseconds(std::max(1, flush_ms_ / 4));
  while (!stop_) {
    cv_.wait_for(lock, period);
    if (stop_ || closed_) break;
    const bool due = (w_->has_pending() && std::chrono::steady_clock::now() - w_->pending_since() >= std::chrono::milliseconds(flush_ms_));
    if (due || !hits_.empty()) flush_locked();
  }
}

RecorderStats Recorder::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  if (!closed_) {
    flush_locked();
    note(w_->close());
    closed_ = true;
  }
  return RecorderStats{w_->steps(), w_->bytes(), w_->chunks(), static_cast<uint64_t>(next_idx_), step_gaps_, error_};
}

RecorderStats Recorder::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  return RecorderStats{w_->steps(), w_->bytes(), w_->chunks(), static_cast<uint64_t>(next_idx_), step_gaps_, error_};
}

void Recorder::note(const Result<bool>& r) {
  if (!r && error_.empty()) error_ = r.error().message();
}

// Pending cache hits become one event per entry (with a count), then the chunk is written.
void Recorder::flush_locked() {
  if (closed_) return;
  for (const auto& [key, v] : hits_)
    w_->event(json{{"t", "cache"}, {"kind", "hit"}, {"code", key.code}, {"entry_id", key.id}, {"entry_c", key.compile},
                   {"entry", key.entry}, {"count", v.first}, {"qualname", v.second}, {"us", w_->micros()}});
  hits_.clear();
  note(w_->flush());
}

int Recorder::cidx_of(const CompileId& id) const {
  if (id.frame == cur_.frame && id.recompile == cur_.recompile) return cur_idx_;
  auto it = cidx_.find({id.frame, id.recompile});
  return it == cidx_.end() ? -1 : it->second;
}

static std::string id_text(const CompileId& id) { return std::to_string(id.frame) + "/" + std::to_string(id.recompile); }

void Recorder::on_code_object(const CodeObjectEvent& e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || !e.info || !codes_.insert(e.code).second) return;
  w_->event(json{{"t", "code"}, {"id", e.code}, {"qualname", e.info->qualname}, {"filename", e.info->filename},
                 {"firstlineno", e.info->firstlineno}, {"json", bc::code_to_json(*e.info)}});
}

void Recorder::on_compile_start(const CompileStartEvent& e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  cur_ = e.id;
  cur_idx_ = next_idx_++;
  cidx_[{e.id.frame, e.id.recompile}] = cur_idx_;
  base_ = w_->steps();
  guards_in_compile_ = 0;
  w_->event(json{{"t", "compile_start"}, {"c", cur_idx_}, {"id", id_text(e.id)}, {"frame", e.id.frame},
                 {"recompile", e.id.recompile}, {"code", e.code}, {"qualname", e.qualname}, {"filename", e.filename},
                 {"firstlineno", e.firstlineno}, {"reason", e.reason}, {"step", base_}, {"us", w_->micros()}});
}

void Recorder::on_compile_end(const CompileEndEvent& e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  w_->event(json{{"t", "compile_end"}, {"c", cidx_of(e.id)}, {"id", id_text(e.id)}, {"outcome", e.outcome},
                 {"graphs", e.graphs}, {"guards", e.guards}, {"seconds", e.seconds}, {"steps", w_->steps() - base_},
                 {"us", w_->micros()}});
  flush_locked();
}

void Recorder::on_step(const StepEvent& e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  const int c = cidx_of(e.id);
  if (c < 0) return;
  if (base_ + static_cast<uint64_t>(e.step) != w_->steps()) ++step_gaps_;
  thread_local std::vector<int32_t> stack;
  thread_local std::vector<std::pair<int32_t, int32_t>> locals;
  stack.assign(e.stack->begin(), e.stack->end());
  locals.assign(e.locals ? e.locals->begin() : locals.end(), e.locals ? e.locals->end() : locals.end());
  w_->step(trace::StepIn{static_cast<uint32_t>(c), static_cast<uint16_t>(e.depth), e.frame_start, e.code, e.offset,
                         e.opcode, e.arg, e.line, stack.data(), stack.size(), locals.data(), locals.size()});
}

void Recorder::on_value(const ValueEvent& e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || cur_idx_ < 0) return;
  const int64_t g = global_step(e.step);
  w_->value(trace::ValueIn{static_cast<uint32_t>(cur_idx_), e.id, static_cast<uint64_t>(g < 0 ? static_cast<int64_t>(base_) : g),
                           e.kind ? e.kind : "", e.repr, e.type, e.source, e.meta, e.node});
}

void Recorder::on_guard(const GuardEvent& e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  w_->event(json{{"t", "guard"}, {"c", cidx_of(e.id)}, {"i", guards_in_compile_++}, {"kind", e.kind},
                 {"text", e.text}, {"step", global_step(e.step)}, {"line", e.line}});
}

void Recorder::on_graph_node(const GraphNodeEvent& e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  w_->event(json{{"t", "node"}, {"c", cidx_of(e.id)}, {"node", e.node}, {"step", global_step(e.step)}, {"op", e.op},
                 {"target", e.target}});
}

void Recorder::on_break(const BreakEvent& e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  w_->event(json{{"t", "break"}, {"c", cidx_of(e.id)}, {"break_id", e.break_id}, {"message", e.message},
                 {"hint", e.hint}, {"filename", e.filename}, {"line", e.line}, {"offset", e.offset},
                 {"step", global_step(e.step)}, {"stack", e.user_stack}});
  flush_locked();
}

void Recorder::on_graph(const GraphEvent& e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  json nodes = json::array();
  for (const GraphNodeInfo& n : e.nodes)
    nodes.push_back(json{{"name", n.name}, {"op", n.op}, {"target", n.target}, {"args", n.args}, {"meta", n.meta},
                         {"step", global_step(n.step)}});
  w_->event(json{{"t", "graph"}, {"c", cidx_of(e.id)}, {"code", e.code}, {"ops", e.ops}, {"nodes", std::move(nodes)}});
}

void Recorder::on_code(const CodeEvent& e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  w_->event(json{{"t", "gen_code"}, {"c", cidx_of(e.id)}, {"name", e.name}, {"code", e.code}});
}

void Recorder::on_cache(const CacheEvent& e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  if (e.kind == CacheEvent::Hit) {
    auto& h = hits_[HitKey{e.code, cidx_of(e.entry_id), id_text(e.entry_id), e.entry}];
    if (++h.first == 1) h.second = e.qualname;
    return;
  }
  static const char* kinds[] = {"hit", "miss", "recompile", "limit"};
  json ev{{"t", "cache"}, {"kind", kinds[e.kind]}, {"code", e.code}, {"qualname", e.qualname}, {"filename", e.filename},
          {"firstlineno", e.firstlineno}, {"us", w_->micros()}};
  if (e.kind != CacheEvent::Miss) {
    ev["entry_id"] = id_text(e.entry_id);
    ev["entry_c"] = cidx_of(e.entry_id);
    ev["failures"] = e.failures;
    ev["guards"] = e.failed_guards;
  }
  // Pending hits first: the trace keeps the order in which the cache was used.
  if (!hits_.empty()) flush_locked();
  w_->event(ev);
}

}  // namespace dv
