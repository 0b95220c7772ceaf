// Recorder: engine events -> .dyn trace (see recorder.h and core/TRACE.md for the records).
#include <cstddef>
#include "recorder.h"

#include <iconv.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/code_json.h"

namespace dv {

using nlohmann::json;

namespace {
// Queue records: a tag byte, then the fixed part, then variable data.
enum : uint8_t { kStep = 1, kValue = 2, kEvent = 3 };
struct StepRec {
  uint32_t compile;
  uint16_t depth;
  uint8_t frame_start, opcode;
  int32_t code;
  uint32_t offset;
  int32_t arg, line;
  uint32_t nstack, nlocals;
};
struct ValueRec {
  uint32_t compile;
  int32_t id, node;
  uint64_t step;
  uint32_t len[5];  // kind, repr, type, source, meta
};
// Copies n bytes, n a multiple of 4: stacks are a few entries, and two overlapping fixed-size
// moves beat a call to memcpy (which was a third of the step path).
[[gnu::always_inline]] inline void small_copy(char* d, const void* src, size_t n) {
  const char* s = static_cast<const char*>(src);
  auto two = [&](auto w) {  // n in [sizeof w, 2 * sizeof w]
    std::memcpy(&w, s, sizeof w);
    std::memcpy(d, &w, sizeof w);
    std::memcpy(&w, s + n - sizeof w, sizeof w);
    std::memcpy(d + n - sizeof w, &w, sizeof w);
  };
  struct W16 { uint64_t a, b; };
  if (n > 32) std::memcpy(d, s, n);
  else if (n >= 16) two(W16{});
  else if (n >= 8) two(uint64_t{});
  else if (n >= 4) two(uint32_t{});
}
// Records start at 4-byte boundaries (see Recorder::record_size).
inline const char* align4(const char* p) {
  return reinterpret_cast<const char*>((reinterpret_cast<uintptr_t>(p) + 3) & ~uintptr_t{3});
}
constexpr int kPrefaultBlocks = 4;  // stream blocks allocated and touched up front
constexpr size_t kFreeBlocks = 4;    // finished blocks kept for reuse
}  // namespace

RecordStream::RecordStream(int prefault_blocks) {
  for (int i = 0; i < std::max(1, prefault_blocks); ++i) {
    auto* b = new Block;
    b->cap = kBlockBytes;
    b->data.reset(new char[b->cap]);
    std::memset(b->data.get(), 0, b->cap);  // touched now, so that the hot path takes no page faults
    free_.push_back(b);
  }
  wblk_ = rblk_ = free_.back();
  free_.pop_back();
  head_.store(wblk_, std::memory_order_release);
}

RecordStream::~RecordStream() {
  for (Block* b = rblk_; b;) {
    Block* nx = b->next.load(std::memory_order_acquire);
    delete b;
    b = nx;
  }
  for (Block* b : free_) delete b;
}

void RecordStream::rotate(size_t n) {
  Block* nb = nullptr;
  {
    std::lock_guard<std::mutex> lock(free_mu_);
    for (size_t i = 0; i < free_.size(); ++i)
      if (free_[i]->cap >= n) {
        nb = free_[i];
        free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
  }
  if (!nb) {
    nb = new Block;
    nb->cap = std::max(kBlockBytes, n);
    nb->data.reset(new char[nb->cap]);
  }
  nb->committed.store(0, std::memory_order_relaxed);
  nb->next.store(nullptr, std::memory_order_relaxed);
  wblk_->next.store(nb, std::memory_order_release);  // seals wblk_ (its committed size is final)
  wblk_ = nb;
  wpos_ = 0;
  head_.store(nb, std::memory_order_release);
  sealed_ = true;
}

void RecordStream::recycle(Block* b) {
  std::lock_guard<std::mutex> lock(free_mu_);
  if (free_.size() < kFreeBlocks) free_.push_back(b);
  else delete b;
}

Result<std::unique_ptr<Recorder>> Recorder::create(const std::string& path, const json& meta, trace::WriterOptions opts,
                                                   int flush_ms) {
  auto w = trace::TraceWriter::create(path, meta, opts);
  if (!w) return w.error();
  std::unique_ptr<Recorder> r(new Recorder());
  r->w_ = std::move(*w);
  r->path_ = path;
  r->flush_ms_ = flush_ms;
  r->stream_ = std::make_unique<RecordStream>(kPrefaultBlocks);
  r->thread_ = std::thread([p = r.get()] { p->flusher(); });
  return r;
}

// Walks the records of one span of the stream: on_step(record, stack bytes, locals bytes),
// on_value(record, its five strings' bytes back to back), on_event(owned json*).
template <class OnStep, class OnValue, class OnEvent>
static void walk_records(const char* p, size_t n, OnStep&& on_step, OnValue&& on_value, OnEvent&& on_event) {
  for (const char* end = p + n; p < end; p = align4(p)) {
    const uint8_t tag = static_cast<uint8_t>(*p);
    p += 4;
    if (tag == kStep) {
      StepRec r;
      std::memcpy(&r, p, sizeof r);
      p += sizeof r;
      const char* stack = p;  // 4-byte fields, memcpy'd out
      p += r.nstack * sizeof(int32_t);
      const char* locals = p;
      p += r.nlocals * sizeof(std::pair<int32_t, int32_t>);
      on_step(r, stack, locals);
    } else if (tag == kValue) {
      ValueRec r;
      std::memcpy(&r, p, sizeof r);
      p += sizeof r;
      const char* strs = p;
      for (uint32_t len : r.len) p += len;
      on_value(r, strs);
    } else {
      json* ev;
      std::memcpy(&ev, p, sizeof ev);
      p += sizeof ev;
      on_event(ev);
    }
  }
}

Recorder::~Recorder() {
  close();
  // Events a racing producer queued after the final drain: free them.
  stream_->consume([](const char* p, size_t n) {
    walk_records(p, n, [](const StepRec&, const char*, const char*) {}, [](const ValueRec&, const char*) {}, [](json* ev) { delete ev; });
  });
}

// Background thread: drains the stream every few ms (or when woken), writes a chunk when one is
// full (inside the writer) or when data has been pending for flush_ms.
void Recorder::flusher() {
  std::unique_lock<std::mutex> lock(mu_);
  const auto period = std::chrono::milliseconds(std::max(1, std::min(10, flush_ms_ / 4)));
  while (!stop_) {
    cv_.wait_for(lock, period);
    if (stop_ || closed_) break;
    drain_locked();
    lock_h();
    const bool hits = !hits_.empty();
    unlock_h();
    const bool due = (w_->has_pending() && std::chrono::steady_clock::now() - w_->pending_since() >= std::chrono::milliseconds(flush_ms_));
    if (due || hits) flush_locked();
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

double Recorder::writer_ns_per_step() {
  std::lock_guard<std::mutex> lock(mu_);
  return encoded_steps_ ? encode_ns_ / static_cast<double>(encoded_steps_) : 0.0;
}

// The first write failure (disk full, RLIMIT_FSIZE, ...) stops the recording: it is said on stderr
// now, from whichever thread saw it, and the writer leaves the file without a footer, so that
// readers and `dynview check` see an incomplete trace. Holds mu_ (or runs in close()).
void Recorder::note(const Result<bool>& r) {
  if (r || !error_.empty()) return;
  error_ = r.error().message();
  std::fprintf(stderr, "dynview: warning: recording to %s stopped: %s; the trace is incomplete (what was written before stays readable)\n",
               path_.c_str(), error_.c_str());
  closed_ = true;
}

void Recorder::after_fork_child() {
  closed_ = true;
  stop_ = true;
  w_->abandon();
}

void Recorder::push_event(json ev) {
  if (hits_pending_) {  // hits before this event come first (unless the flusher already wrote them)
    hits_pending_ = false;
    Hits hits;
    lock_h();
    hits.swap(hits_);
    unlock_h();
    push_hits(hits);
  }
  json* e = new json(std::move(ev));
  std::memcpy(record(kEvent, sizeof e), &e, sizeof e);
  commit_record(sizeof e);
}

// One cache event per entry hit since the last one, with the count.
json Recorder::hit_event(const HitKey& k, const std::pair<int, std::string>& count_qualname) const {
  return json{{"t", "cache"}, {"kind", k.entry < 0 ? "eager" : "hit"}, {"code", k.code}, {"entry_id", k.id}, {"entry_c", k.compile}, {"entry", k.entry},
              {"count", count_qualname.first}, {"qualname", count_qualname.second}, {"us", w_->micros()}};
}

void Recorder::push_hits(Hits& hits) {
  for (const auto& [k, v] : hits) push_event(hit_event(k, v));
  hits.clear();
}

void Recorder::write_hits(Hits& hits) {
  for (const auto& [k, v] : hits) w_->event(hit_event(k, v));
  hits.clear();
}

// Replays the stream's records into the writer, in order, up to `limit` (default: all committed).
void Recorder::drain_locked(std::pair<RecordStream::Block*, size_t> limit) {
  if (closed_) return;
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t nsteps = 0;
  std::string_view str[5];
  stream_->consume(
      [&](const char* p, size_t n) {
        walk_records(
            p, n,
            [&](const StepRec& r, const char* stack, const char* locals) {
              thread_local std::vector<int32_t> st;
              thread_local std::vector<std::pair<int32_t, int32_t>> lo;
              st.resize(r.nstack);
              lo.resize(r.nlocals);
              if (r.nstack) std::memcpy(st.data(), stack, r.nstack * sizeof(int32_t));
              if (r.nlocals) std::memcpy(static_cast<void*>(lo.data()), locals, r.nlocals * sizeof(std::pair<int32_t, int32_t>));
              w_->step(trace::StepIn{r.compile, r.depth, r.frame_start != 0, r.code, r.offset, r.opcode, r.arg, r.line,
                                     st.data(), st.size(), lo.data(), lo.size()});
              ++nsteps;
            },
            [&](const ValueRec& r, const char* p) {
              for (int i = 0; i < 5; ++i) {
                str[i] = std::string_view(p, r.len[i]);
                p += r.len[i];
              }
              w_->value(trace::ValueIn{r.compile, r.id, r.step, str[0], str[1], str[2], str[3], str[4], r.node});
            },
            [&](json* ev) {
              std::unique_ptr<json> own(ev);
              w_->event(*own);
            });
      },
      limit);
  encode_ns_ += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  encoded_steps_ += nsteps;
}

// Drains the stream, writes pending cache hits as one event per entry (with a count) where they
// happened in it, and writes the chunk.
void Recorder::flush_locked() {
  if (closed_) return;
  lock_h();
  Hits hits;
  hits.swap(hits_);
  const auto at = stream_->head();  // every record the engine made before these hits
  unlock_h();
  drain_locked(at);
  write_hits(hits);
  drain_locked();
  note(w_->flush());
}

void Recorder::sync_flush() {
  std::lock_guard<std::mutex> lock(mu_);
  flush_locked();
}

int Recorder::cidx_slow(const CompileId& id) const {
  auto it = cidx_.find({id.frame, id.recompile});
  return it == cidx_.end() ? -1 : it->second;
}

static std::string id_text(const CompileId& id) { return std::to_string(id.frame) + "/" + std::to_string(id.recompile); }

// core's code JSON with its hex byte fields as CBOR byte strings (half the size; the reader
// turns them back into the JSON form).
static void hex_to_binary(json& co) {
  if (!co.is_object()) return;
  for (const char* key : {"code", "linetable", "exceptiontable"}) {
    auto it = co.find(key);
    if (it == co.end() || !it->is_string()) continue;
    const std::string& h = it->get_ref<const std::string&>();
    std::vector<uint8_t> b;
    b.reserve(h.size() / 2);
    auto v = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
    for (size_t i = 0; i + 1 < h.size(); i += 2) b.push_back(static_cast<uint8_t>(v(h[i]) * 16 + v(h[i + 1])));
    *it = json::binary(std::move(b));
  }
  auto n = co.find("nested");
  if (n != co.end() && n->is_array())
    for (json& c : *n) hex_to_binary(c);
}

// PEP 263: the encoding a `# -*- coding: NAME -*-` comment on line 1 or 2 declares ("" if none).
static std::string declared_encoding(const std::vector<std::string>& lines) {
  for (size_t i = 0; i < lines.size() && i < 2; ++i) {
    const std::string& l = lines[i];
    const size_t start = l.find_first_not_of(" \t\f");
    if (start == std::string::npos || l[start] != '#') {
      if (start == std::string::npos) continue;  // a blank first line: the second may declare it
      break;
    }
    const size_t at = l.find("coding", start);
    if (at == std::string::npos || at + 6 >= l.size() || (l[at + 6] != ':' && l[at + 6] != '=')) continue;
    size_t b = at + 7;
    while (b < l.size() && (l[b] == ' ' || l[b] == '\t')) ++b;
    size_t e = b;
    while (e < l.size() && (std::isalnum(static_cast<unsigned char>(l[e])) || l[e] == '-' || l[e] == '_' || l[e] == '.')) ++e;
    std::string name = l.substr(b, e - b);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return name;
  }
  return "";
}

// Invalid UTF-8 sequences -> U+FFFD, so that every string reaching the trace's JSON is valid.
static std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 && c >= 0xc2 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 && c <= 0xf4 ? 4 : 0;
    for (size_t k = 1; n && k < n; ++k)
      if (i + k >= s.size() || (static_cast<unsigned char>(s[i + k]) >> 6) != 2) n = 0;
    if (n == 0) {
      out += "\xef\xbf\xbd";
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

// Source lines as UTF-8: decoded from the file's declared encoding (Latin-1 directly, others
// through iconv), a UTF-8 BOM dropped, anything undecodable replaced by U+FFFD.
static void to_utf8(std::vector<std::string>& lines) {
  if (!lines.empty() && lines[0].rfind("\xef\xbb\xbf", 0) == 0) lines[0].erase(0, 3);
  const std::string enc = declared_encoding(lines);
  const bool latin1 = enc == "latin-1" || enc == "latin1" || enc == "iso-8859-1" || enc == "iso8859-1" || enc == "l1" ||
                      enc.rfind("latin-1-", 0) == 0 || enc.rfind("iso-8859-1-", 0) == 0;
  const bool utf8 = enc.empty() || enc == "utf-8" || enc == "utf8" || enc.rfind("utf-8-", 0) == 0;
  iconv_t cd = latin1 || utf8 ? reinterpret_cast<iconv_t>(-1) : iconv_open("UTF-8", enc.c_str());
  for (std::string& l : lines) {
    if (latin1) {
      std::string u;
      u.reserve(l.size() + l.size() / 4);
      for (const char ch : l) {
        const unsigned char c = static_cast<unsigned char>(ch);
        if (c < 0x80) u += ch;
        else u += static_cast<char>(0xc0 | (c >> 6)), u += static_cast<char>(0x80 | (c & 0x3f));
      }
      l = std::move(u);
      continue;
    }
    if (cd != reinterpret_cast<iconv_t>(-1)) {
      std::string u(l.size() * 4 + 4, '\0');
      char* in = l.data();
      char* out = u.data();
      size_t inleft = l.size(), outleft = u.size();
      iconv(cd, nullptr, nullptr, nullptr, nullptr);
      if (iconv(cd, &in, &inleft, &out, &outleft) != static_cast<size_t>(-1)) {
        u.resize(u.size() - outleft);
        l = std::move(u);
      }
    }
    l = valid_utf8(l);
  }
  if (cd != reinterpret_cast<iconv_t>(-1)) iconv_close(cd);
}

// The lines of the code object's function (first line to its last instruction's line), those not
// yet in the trace, as `source` records: the viewer shows the code that ran even when the file has
// changed or is not on the viewing machine. Files are read once; "<stdin>" and the like are skipped.
void Recorder::record_source(const bc::CodeInfo& co) {
  if (co.filename.empty() || co.filename[0] == '<') return;
  SourceFile& f = sources_[co.filename];
  if (!f.read) {
    f.read = true;
    std::ifstream in(co.filename, std::ios::binary);
    for (std::string l; in && std::getline(in, l) && f.lines.size() < 1000000;) {
      if (!l.empty() && l.back() == '\r') l.pop_back();
      f.lines.push_back(std::move(l));
    }
    to_utf8(f.lines);
    f.sent.assign(f.lines.size(), false);
  }
  if (f.lines.empty()) return;
  auto d = bc::decode(co);
  if (!d) return;
  int last = co.firstlineno;
  for (const bc::LineEntry& le : d->lines)
    for (const int32_t l : {le.pos.line, le.pos.end_line})
      if (l != bc::kNone) last = std::max(last, static_cast<int>(l));
  const int lo = std::max(1, co.firstlineno), hi = std::min<int>(last, static_cast<int>(f.lines.size()));
  for (int i = lo; i <= hi;) {  // each run of unsent lines is one record
    if (f.sent[i - 1]) { ++i; continue; }
    json lines = json::array();
    const int first = i;
    for (; i <= hi && !f.sent[i - 1]; ++i) {
      lines.push_back(f.lines[i - 1]);
      f.sent[i - 1] = true;
    }
    push_event(json{{"t", "source"}, {"filename", co.filename}, {"first", first}, {"lines", std::move(lines)}});
  }
}

void Recorder::on_code_object(const CodeObjectEvent& e) {
  if (closed_ || !e.info) return;
  const bool fresh = codes_.insert(e.code).second;
  if (!fresh) return;
  json co = json::parse(bc::code_to_json(*e.info), nullptr, false);
  hex_to_binary(co);
  json ev{{"t", "code"}, {"id", e.code}, {"qualname", e.info->qualname}, {"filename", e.info->filename},
          {"firstlineno", e.info->firstlineno}, {"co", std::move(co)}};
  push_event(std::move(ev));
  record_source(*e.info);
}

void Recorder::on_compile_start(const CompileStartEvent& e) {
  if (closed_) return;
  cur_ = e.id;
  cur_idx_ = next_idx_++;
  if (e.code >= 0) last_compile_[e.code] = e.id;
  cidx_[{e.id.frame, e.id.recompile}] = cur_idx_;
  base_ = enq_steps_;
  guards_in_compile_ = 0;
  push_event(json{{"t", "compile_start"}, {"c", cur_idx_}, {"id", id_text(e.id)}, {"frame", e.id.frame},
                  {"recompile", e.id.recompile}, {"code", e.code}, {"qualname", e.qualname}, {"filename", e.filename},
                  {"firstlineno", e.firstlineno}, {"reason", e.reason}, {"step", base_}, {"us", w_->micros()}});
}

void Recorder::on_compile_end(const CompileEndEvent& e) {
  if (closed_) return;
  push_event(json{{"t", "compile_end"}, {"c", cidx_of(e.id)}, {"id", id_text(e.id)}, {"outcome", e.outcome},
                  {"graphs", e.graphs}, {"guards", e.guards}, {"seconds", e.seconds}, {"steps", enq_steps_ - base_},
                  {"us", w_->micros()}});
  sync_flush();
}

void Recorder::on_step(const StepEvent& e) {
  if (closed_.load(std::memory_order_relaxed)) return;
  const int c = cidx_of(e.id);
  if (c < 0) return;
  if (base_ + static_cast<uint64_t>(e.step) != enq_steps_) ++step_gaps_;
  ++enq_steps_;
  const uint32_t ns = static_cast<uint32_t>(e.stack->size()), nl = e.locals ? static_cast<uint32_t>(e.locals->size()) : 0;
  static_assert(sizeof(int) == sizeof(int32_t) && sizeof(std::pair<int, int>) == sizeof(std::pair<int32_t, int32_t>));
  const size_t nstack = ns * sizeof(int32_t), nlocals = nl * sizeof(std::pair<int32_t, int32_t>);
  const size_t n = sizeof(StepRec) + nstack + nlocals;  // one record: fixed part, stack, locals
  char* q = record(kStep, n);
  // Fields stored straight into the stream (a StepRec built on the stack and copied whole made the
  // copy wait on store forwarding: a third of this function's time).
  auto field = [q](size_t off, auto v) { std::memcpy(q + off, &v, sizeof v); };
  field(offsetof(StepRec, compile), static_cast<uint32_t>(c));
  field(offsetof(StepRec, depth), static_cast<uint16_t>(e.depth));
  field(offsetof(StepRec, frame_start), static_cast<uint8_t>(e.frame_start));
  field(offsetof(StepRec, opcode), static_cast<uint8_t>(e.opcode));
  field(offsetof(StepRec, code), static_cast<int32_t>(e.code));
  field(offsetof(StepRec, offset), static_cast<uint32_t>(e.offset));
  field(offsetof(StepRec, arg), static_cast<int32_t>(e.arg));
  field(offsetof(StepRec, line), static_cast<int32_t>(e.line));
  field(offsetof(StepRec, nstack), ns);
  field(offsetof(StepRec, nlocals), nl);
  small_copy(q + sizeof(StepRec), e.stack->data(), nstack);
  if (nl) small_copy(q + sizeof(StepRec) + nstack, e.locals->data(), nlocals);
  commit_record(n);
  if (stream_->take_sealed()) [[unlikely]] cv_.notify_one();  // a block is full: wake the flusher
}

void Recorder::on_value(const ValueEvent& e) {
  if (closed_ || cur_idx_ < 0) return;
  const int64_t g = global_step(e.step);
  const std::string_view kind = e.kind ? e.kind : "";
  const std::string_view s[5] = {kind, e.repr, e.type, e.source, e.meta};
  ValueRec r{static_cast<uint32_t>(cur_idx_), e.id, e.node, static_cast<uint64_t>(g < 0 ? static_cast<int64_t>(base_) : g), {}};
  size_t n = sizeof r;
  for (int i = 0; i < 5; ++i) n += r.len[i] = static_cast<uint32_t>(s[i].size());
  char* p = record(kValue, n);
  std::memcpy(p, &r, sizeof r);
  p += sizeof r;
  for (const auto& x : s) {
    if (!x.empty()) std::memcpy(p, x.data(), x.size());
    p += x.size();
  }
  commit_record(n);
}

void Recorder::on_guard(const GuardEvent& e) {
  if (closed_) return;
  push_event(json{{"t", "guard"}, {"c", cidx_of(e.id)}, {"i", guards_in_compile_++}, {"kind", e.kind}, {"filename", e.filename},
                  {"text", e.text}, {"step", global_step(e.step)}, {"line", e.line}});
}

void Recorder::on_graph_node(const GraphNodeEvent& e) {
  if (closed_) return;
  push_event(json{{"t", "node"}, {"c", cidx_of(e.id)}, {"node", e.node}, {"step", global_step(e.step)}, {"op", e.op},
                  {"target", e.target}});
}

void Recorder::on_break(const BreakEvent& e) {
  if (closed_) return;
  push_event(json{{"t", "break"}, {"c", cidx_of(e.id)}, {"break_id", e.break_id}, {"message", e.message},
                  {"hint", e.hint}, {"filename", e.filename}, {"line", e.line}, {"offset", e.offset},
                  {"step", global_step(e.step)}, {"stack", e.user_stack}});
  sync_flush();
}

void Recorder::on_graph(const GraphEvent& e) {
  if (closed_) return;
  json nodes = json::array();
  for (const GraphNodeInfo& n : e.nodes)
    nodes.push_back(json{{"name", n.name}, {"op", n.op}, {"target", n.target}, {"args", n.args}, {"meta", n.meta},
                         {"step", global_step(n.step)}});
  push_event(json{{"t", "graph"}, {"c", cidx_of(e.id)}, {"code", e.code}, {"ops", e.ops}, {"nodes", std::move(nodes)}});
}

void Recorder::on_code(const CodeEvent& e) {
  if (closed_) return;
  push_event(json{{"t", "gen_code"}, {"c", cidx_of(e.id)}, {"name", e.name}, {"code", e.code}});
}

void Recorder::on_cache(const CacheEvent& e) {
  if (closed_) return;
  if (e.kind == CacheEvent::Hit || e.kind == CacheEvent::EagerRun) {
    // An eager run counts for the code's latest compile (the one that ended eager, or the last
    // before the recompile limit), as entry -1.
    const auto last = last_compile_.find(e.code);
    if (e.kind == CacheEvent::EagerRun && last == last_compile_.end()) return;
    const CompileId id = e.kind == CacheEvent::Hit ? e.entry_id : last->second;
    HitKey key{e.code, cidx_of(id), id_text(id), e.kind == CacheEvent::Hit ? e.entry : -1};
    lock_h();
    auto& h = hits_[std::move(key)];
    if (++h.first == 1) h.second = e.qualname;
    unlock_h();
    hits_pending_ = true;
    return;
  }
  static const char* kinds[] = {"hit", "miss", "recompile", "limit", "eager"};
  json ev{{"t", "cache"}, {"kind", kinds[e.kind]}, {"code", e.code}, {"qualname", e.qualname}, {"filename", e.filename},
          {"firstlineno", e.firstlineno}, {"us", w_->micros()}};
  if (e.kind != CacheEvent::Miss) {
    ev["entry_id"] = id_text(e.entry_id);
    ev["entry_c"] = cidx_of(e.entry_id);
    ev["failures"] = e.failures;
    ev["guards"] = e.failed_guards;
  }
  push_event(std::move(ev));  // pending hits first: the trace keeps the order in which the cache was used
}

}  // namespace dv
