// The .dyn recorder: an EngineObserver that writes every event into a core/ TraceWriter. Chunks
// are flushed when full, at each graph break and compile end, and by a background thread when
// data has been pending for 100 ms. Never calls into Python.
//
// Hot path: an event is appended, as raw bytes, to a queue under a spinlock (steps: a fixed record
// plus the stack and the changed locals); the background thread drains the queue into the writer
// (column encoding, zstd, write()). A compile end or a graph break drains and flushes on the
// calling thread, so a chunk is on disk when the engine moves on. Thread-safe.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>

#include "core/trace.h"
#include "tracer/observer.h"

namespace dv {

struct RecorderStats {
  uint64_t steps = 0, bytes = 0, chunks = 0, compiles = 0, step_gaps = 0;
  std::string error;  // first write error, if any
};

// The engine -> flusher queue: raw bytes with one capacity check per record (std::string's
// push_back/append each check and keep a terminator; a step record was four of them).
class ByteQueue {
 public:
  char* grow(size_t n) {
    if (size_ + n > cap_) realloc_for(size_ + n);
    char* p = buf_.get() + size_;
    size_ += n;
    return p;
  }
  void push_back(char c) { *grow(1) = c; }
  void append(const char* p, size_t n) {
    if (n) std::memcpy(grow(n), p, n);
  }
  void append(std::string_view s) { append(s.data(), s.size()); }
  void prefault(size_t n) {  // allocate and touch n bytes so that the hot path takes no page faults
    realloc_for(n);
    std::memset(buf_.get(), 0, cap_);
  }
  const char* data() const { return buf_.get(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  void clear() { size_ = 0; }
  void swap(ByteQueue& o) noexcept {
    std::swap(buf_, o.buf_);
    std::swap(size_, o.size_);
    std::swap(cap_, o.cap_);
  }

 private:
  void realloc_for(size_t n) {
    size_t cap = cap_ ? cap_ : 4096;
    while (cap < n) cap *= 2;
    std::unique_ptr<char[]> b(new char[cap]);
    if (size_) std::memcpy(b.get(), buf_.get(), size_);
    buf_ = std::move(b);
    cap_ = cap;
  }
  std::unique_ptr<char[]> buf_;
  size_t size_ = 0, cap_ = 0;
};

class Recorder final : public EngineObserver {
 public:
  // Creates the trace file; `meta` describes the process (versions, command line, ...).
  static Result<std::unique_ptr<Recorder>> create(const std::string& path, const nlohmann::json& meta,
                                                  trace::WriterOptions opts = {}, int flush_ms = 100);
  ~Recorder() override;
  RecorderStats close();  // flushes, writes the footer; idempotent
  RecorderStats stats();
  double writer_ns_per_step();  // background encoding cost so far (ns per step, writer thread)

  void on_code_object(const CodeObjectEvent&) override;
  void on_compile_start(const CompileStartEvent&) override;
  void on_compile_end(const CompileEndEvent&) override;
  void on_step(const StepEvent&) override;
  void on_value(const ValueEvent&) override;
  void on_guard(const GuardEvent&) override;
  void on_graph_node(const GraphNodeEvent&) override;
  void on_break(const BreakEvent&) override;
  void on_graph(const GraphEvent&) override;
  void on_code(const CodeEvent&) override;
  void on_cache(const CacheEvent&) override;

 private:
  Recorder() = default;
  int64_t global_step(int step) const { return step < 0 ? -1 : static_cast<int64_t>(base_) + step; }
  int cidx_of(const CompileId& id) const;
  void lock_q() { while (qlock_.test_and_set(std::memory_order_acquire)) std::this_thread::yield(); }
  void unlock_q() { qlock_.clear(std::memory_order_release); }
  void push_event(nlohmann::json ev);       // caller holds the queue lock
  void push_hits();                         // pending hits -> one event per entry; caller holds the queue lock
  void drain_locked();                      // queue -> writer; caller holds mu_
  void flush_locked();                      // drain, pending hits, write the chunk; caller holds mu_
  void sync_flush();                        // flush_locked from an engine thread
  void note(const Result<bool>& r);
  void flusher();

  // Queue (engine threads -> writer), under qlock_: raw records and the events they refer to.
  std::atomic_flag qlock_ = ATOMIC_FLAG_INIT;
  ByteQueue queue_;
  std::vector<nlohmann::json> qevents_;
  uint64_t enq_steps_ = 0;     // steps queued so far (the writer's count once drained)
  // Writer side, under mu_ (drained by the background thread, or by a compile end / break).
  std::mutex mu_;
  std::unique_ptr<trace::TraceWriter> w_;
  ByteQueue work_;
  std::vector<nlohmann::json> wevents_;
  double encode_ns_ = 0;
  uint64_t encoded_steps_ = 0;
  // Engine-side state, under qlock_.
  std::unordered_set<int> codes_;                 // code ids already written
  std::map<std::pair<int, int>, int> cidx_;       // (frame, recompile) -> compile index
  CompileId cur_{-1, -1};
  int cur_idx_ = -1, next_idx_ = 0, guards_in_compile_ = 0;
  uint64_t base_ = 0, step_gaps_ = 0;
  struct HitKey {
    int code, compile;  // code id, compile index of the entry
    std::string id;     // the entry's compile id "f/r"
    int entry;
    bool operator<(const HitKey& o) const { return std::tie(code, compile, entry, id) < std::tie(o.code, o.compile, o.entry, o.id); }
  };
  std::map<HitKey, std::pair<int, std::string>> hits_;  // -> (count, qualname); under qlock_
  std::string error_;
  std::atomic<bool> closed_{false};
  int flush_ms_ = 100;
  std::thread thread_;
  std::condition_variable cv_;
  bool stop_ = false;
};

}  // namespace dv
