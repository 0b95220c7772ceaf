// The .dyn recorder: an EngineObserver that writes every event into a core/ TraceWriter. Chunks
// are flushed when full, at each graph break and compile end, and by a background thread when
// data has been pending for 100 ms. Never calls into Python.
//
// Hot path: an event is appended, as raw bytes, to a lock-free single-producer stream (steps: a
// fixed record plus the stack and the changed locals); the background thread drains the stream
// into the writer (column encoding, zstd, write()). A compile end or a graph break drains and
// flushes on the calling thread, so a chunk is on disk when the engine moves on. The on_* calls
// must be serialised (the engine makes them holding the GIL); stats/close may come from any thread.
#pragma once
#include <algorithm>
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
#include <vector>

#include "core/trace.h"
#include "core/observer.h"

namespace dv {

struct RecorderStats {
  uint64_t steps = 0, bytes = 0, chunks = 0, compiles = 0, step_gaps = 0;
  std::string error;  // first write error, if any
};

// The engine -> flusher queue: a single-producer single-consumer stream of byte records in a
// chain of blocks. The producer (the engine; its calls are serialised by the GIL and the compile
// lock) writes a record at its position and publishes it with one release store of the block's
// committed size: no lock, no atomic read-modify-write on the step path. A record never spans
// blocks; a full block is sealed by linking the next one. The consumer (whoever holds the
// recorder's mutex: the flusher thread, or an engine thread flushing at a compile end) reads each
// block up to its committed size and hands finished blocks back for reuse.
class RecordStream {
 public:
  static constexpr size_t kBlockBytes = 1 << 20;
  struct Block {
    std::atomic<size_t> committed{0};
    std::atomic<Block*> next{nullptr};
    size_t cap = 0;
    std::unique_ptr<char[]> data;
  };
  explicit RecordStream(int prefault_blocks);
  ~RecordStream();
  RecordStream(const RecordStream&) = delete;
  RecordStream& operator=(const RecordStream&) = delete;

  // Producer: room for n bytes at the write position, then commit(n) publishes them. True from
  // commit when a block was sealed since the last commit (the consumer may want waking).
  [[gnu::always_inline]] char* reserve(size_t n) {
    if (wpos_ + n > wblk_->cap) [[unlikely]] rotate(n);
    return wblk_->data.get() + wpos_;
  }
  void commit(size_t n) {
    wpos_ += n;
    wblk_->committed.store(wpos_, std::memory_order_release);
  }
  bool take_sealed() {
    const bool s = sealed_;
    sealed_ = false;
    return s;
  }
  // Producer's block and committed size, for a consumer snapshot taken under a lock that the
  // producer also takes (see Recorder's hits).
  std::pair<Block*, size_t> head() const {
    Block* b = head_.load(std::memory_order_acquire);
    return {b, b->committed.load(std::memory_order_acquire)};
  }
  // Consumer: calls fn(p, n) for each committed run of records (whole records), up to `limit`
  // ({nullptr, 0}: everything committed).
  template <class Fn>
  void consume(Fn&& fn, std::pair<Block*, size_t> limit = {nullptr, 0}) {
    for (;;) {
      Block* nx = rblk_->next.load(std::memory_order_acquire);
      const size_t end = rblk_ == limit.first ? limit.second : rblk_->committed.load(std::memory_order_acquire);
      if (end > rpos_) fn(rblk_->data.get() + rpos_, end - rpos_);
      rpos_ = std::max(rpos_, end);
      if (rblk_ == limit.first || !nx) return;
      recycle(rblk_);  // sealed (next was linked after its last commit) and fully read
      rblk_ = nx;
      rpos_ = 0;
    }
  }

 private:
  void rotate(size_t n);
  void recycle(Block* b);
  Block* wblk_;  // producer's block
  size_t wpos_ = 0;
  bool sealed_ = false;
  std::atomic<Block*> head_;
  Block* rblk_;  // consumer's block
  size_t rpos_ = 0;
  std::mutex free_mu_;  // blocks handed back by the consumer
  std::vector<Block*> free_;
};

class Recorder final : public EngineObserver {
 public:
  // Creates the trace file; `meta` describes the process (versions, command line, ...).
  static Result<std::unique_ptr<Recorder>> create(const std::string& path, const nlohmann::json& meta,
                                                  trace::WriterOptions opts = {}, int flush_ms = 100);
  ~Recorder() override;
  RecorderStats close();  // flushes, writes the footer; idempotent
  // fork(): prepare_fork() just before (waits for the flusher to finish what it is writing and
  // holds it off, so that no chunk is half-written in the copy), then after_fork_parent() in the
  // parent, or after_fork_child() in the child. The child's copy has no flusher thread: it closes
  // its copy of the file descriptor, writes nothing more, and must be leaked (never destroyed:
  // its std::thread and condition variable belong to the parent).
  void prepare_fork() { mu_.lock(); }
  void after_fork_parent() { mu_.unlock(); }
  void after_fork_child();
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
  int cidx_of(const CompileId& id) const {
    return id.frame == cur_.frame && id.recompile == cur_.recompile ? cur_idx_ : cidx_slow(id);
  }
  int cidx_slow(const CompileId& id) const;
  struct HitKey {
    int code, compile;  // code id, compile index of the entry
    std::string id;     // the entry's compile id "f/r"
    int entry;
    bool operator<(const HitKey& o) const { return std::tie(code, compile, entry, id) < std::tie(o.code, o.compile, o.entry, o.id); }
  };
  using Hits = std::map<HitKey, std::pair<int, std::string>>;  // -> (count, qualname)
  void lock_h() { while (hlock_.test_and_set(std::memory_order_acquire)) std::this_thread::yield(); }
  void unlock_h() { hlock_.clear(std::memory_order_release); }
  // Producer: room for a record of n bytes after its tag word; commit_record(n) publishes it.
  // Records are padded to 4 bytes so that their fields never straddle a cache line.
  static constexpr size_t record_size(size_t n) { return (4 + n + 3) & ~size_t{3}; }
  [[gnu::always_inline]] char* record(uint8_t tag, size_t n) {
    char* p = stream_->reserve(record_size(n));
    *p = static_cast<char>(tag);
    return p + 4;
  }
  void commit_record(size_t n) { stream_->commit(record_size(n)); }
  void push_event(nlohmann::json ev);       // producer: a JSON event (the stream carries its pointer)
  nlohmann::json hit_event(const HitKey& k, const std::pair<int, std::string>& count_qualname) const;
  void push_hits(Hits& hits);  // producer
  void write_hits(Hits& hits);  // consumer, holds mu_
  void drain_locked(std::pair<RecordStream::Block*, size_t> limit = {nullptr, 0});  // stream -> writer; holds mu_
  void flush_locked();                      // drain, pending hits, write the chunk; caller holds mu_
  void sync_flush();                        // flush_locked from an engine thread
  void note(const Result<bool>& r);
  void flusher();

  // Engine -> writer stream: raw step and value records, JSON events by pointer.
  std::unique_ptr<RecordStream> stream_;
  uint64_t enq_steps_ = 0;     // steps queued so far (the writer's count once drained)
  // Writer side, under mu_ (drained by the background thread, or by a compile end / break).
  std::mutex mu_;
  std::unique_ptr<trace::TraceWriter> w_;
  double encode_ns_ = 0;
  uint64_t encoded_steps_ = 0;
  // Engine-side state (producer only).
  std::unordered_set<int> codes_;                 // code ids already written
  // Source text: per file, its lines as read when its first code object was recorded, and which
  // of them a `source` record already carries.
  struct SourceFile { bool read = false; std::vector<std::string> lines; std::vector<bool> sent; };
  std::map<std::string, SourceFile> sources_;
  void record_source(const bc::CodeInfo& co);
  std::map<std::pair<int, int>, int> cidx_;       // (frame, recompile) -> compile index
  std::map<int, CompileId> last_compile_;          // code id -> its latest compile (eager runs count there)
  CompileId cur_{-1, -1};
  int cur_idx_ = -1, next_idx_ = 0, guards_in_compile_ = 0;
  uint64_t base_ = 0, step_gaps_ = 0;
  // Cache hits are counted per entry and written as one event per entry with a count: by the
  // producer before its next event, or by the flusher (hits are the only thing a program running
  // compiled code produces). Under hlock_; hits_pending_ is the producer's own note.
  bool hits_pending_ = false;
  std::atomic_flag hlock_ = ATOMIC_FLAG_INIT;
  Hits hits_;
  std::string error_;
  std::string path_;
  std::atomic<bool> closed_{false};
  int flush_ms_ = 100;
  std::thread thread_;
  std::condition_variable cv_;
  bool stop_ = false;
};

}  // namespace dv
