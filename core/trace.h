// The .dyn trace: schema, writer and reader (format documented in core/TRACE.md, version below).
// Written by recorder/ (from the engine's events) and by tests' synthetic generator; read by the
// dynview executable (reports, viewer) and by python/ (dynview.load_trace). No Python, no LibTorch.
#pragma once
#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcodes.h"
#include "result.h"

namespace dv::trace {

constexpr uint16_t kMajor = 4;  // readers refuse a newer major version
constexpr uint16_t kMinor = 0;  // additions a reader of the same major may ignore
constexpr uint16_t kOldestMajor = 3;  // still read: 3.x predicts step offsets with 3.11's caches
constexpr char kMagic[8] = {'\x89', 'D', 'Y', 'N', 'V', '\r', '\n', '\x1a'};
// Frames are zstd skippable frames (magic 0x184D2A5?) so that `zstdcat run.dyn` decodes the data.
constexpr uint32_t kSkipHeader = 0x184D2A50, kSkipChunk = 0x184D2A51, kSkipFooter = 0x184D2A52;
constexpr uint32_t kChunkTag = 0x4B435644;   // "DVCK"
constexpr uint32_t kFooterTag = 0x58495644;  // "DVIX"
constexpr uint32_t kEndTag = 0x4E455644;     // "DVEN"

uint32_t crc32(const void* data, size_t n, uint32_t crc = 0);

// The CPython version whose inline-cache counts predict the steps' offsets (and whose numbers the
// steps' opcodes are): the header metadata's "opcode_table" ("cpython-3.12") from format 4.0 on,
// 3.11 when it is absent and in every 3.x trace (whatever interpreter recorded it). nullopt: a
// table this core does not know.
std::optional<bc::Version> steps_version(const nlohmann::json& meta, uint16_t major);

// The fixed part of every chunk, stored in a skippable frame before the chunk's two zstd frames
// (events, then steps). All integers little-endian.
struct ChunkHeader {
  uint32_t seq = 0;
  uint64_t first_step = 0;  // global index of the chunk's first step
  uint32_t nsteps = 0;
  uint32_t first_compile = 0, last_compile = 0;  // compile indexes the steps belong to
  uint32_t nvalues = 0, nevents = 0;
  uint32_t events_zsize = 0, events_rsize = 0, steps_zsize = 0, steps_rsize = 0;
  uint16_t min_depth = 0, max_depth = 0;
  uint32_t nguards = 0, nbreaks = 0, ngraphs = 0;
  uint64_t time_us = 0;  // microseconds since the trace started, when flushed
  uint32_t events_crc = 0;  // crc32 of the chunk's events segment (compressed bytes)
};
constexpr size_t kChunkHeaderBytes = 84;  // serialised, tag and crc included

// ---- writer ----------------------------------------------------------------------------------

struct StepIn {
  uint32_t compile;     // compile index in the trace (order of compile_start events)
  uint16_t depth;       // inline depth (0: the compiled frame)
  bool frame_start;     // first step of a frame (root or inlined callee)
  int32_t code;         // code object id (a "code" event describes it)
  uint32_t offset;      // instruction byte offset
  uint8_t opcode;
  int32_t arg;          // INT32_MIN: none
  int32_t line;
  const int32_t* stack; size_t nstack;                   // value ids after the step, bottom first
  const std::pair<int32_t, int32_t>* locals; size_t nlocals;  // (slot, value id or 0) changed
};
struct ValueIn {
  uint32_t compile;
  int32_t id;
  uint64_t step;  // global step that produced it
  std::string_view kind, repr, type, source, meta;
  int32_t node;   // graph node or -1
};

struct WriterOptions {
  uint32_t chunk_steps = 32768;          // a chunk is flushed when it holds this many steps
  size_t chunk_bytes = 512 * 1024;       // ... or this many raw bytes
  int level = 3;                         // zstd level
};

class TraceWriter {
 public:
  // The error's `what` when another process (or writer) holds the file: see create.
  static constexpr const char* kBusy = "is being written by another process";
  // Creates path, locks it (flock; a path another writer holds is refused with kBusy rather than
  // overwritten), truncates it and writes the file header with `meta` (process description).
  // After a failed write nothing more is written: the file keeps the chunks written before it,
  // without a footer, and flush/close return the first failure.
  static Result<std::unique_ptr<TraceWriter>> create(const std::string& path, const nlohmann::json& meta,
                                                     WriterOptions opts = {});
  ~TraceWriter();
  void step(const StepIn& s);
  void value(const ValueIn& v);
  void event(const nlohmann::json& ev);  // compile-level record; "t" names its type
  Result<bool> flush();                  // pending data -> one chunk (no-op when nothing pending)
  Result<bool> close();                  // flush, footer index, close the file
  void abandon();                        // closes the file as it is, writing nothing (a forked child's copy)
  bool has_pending() const { return pending_steps_ || pending_values_ || pending_events_; }
  std::chrono::steady_clock::time_point pending_since() const { return pending_since_; }
  uint64_t steps() const { return next_step_; }
  uint64_t bytes() const { return file_bytes_; }
  uint32_t chunks() const { return seq_; }
  uint64_t micros() const;  // since the trace started
  void count_marker(const std::string& type);  // chunk header counts (guards, breaks, graphs)

 private:
  TraceWriter() = default;
  struct FrameState {
    int32_t code = 0;
    std::vector<int32_t> stack, locals;
  };
  struct StoredValue {
    uint64_t step;
    std::string kind, repr, type, source, meta;
    int32_t node;
  };
  uint32_t intern(std::string_view s);
  void write_value_row(uint32_t compile, int32_t id, uint64_t step, const StoredValue& v);
  void begin_chunk();
  void switch_compile(uint32_t c);
  void reset_chunk();  // drops the pending chunk's data
  std::string failed_;  // the first write failure (nothing is written after it)

  int fd_ = -1;
  void* cctx_ = nullptr;  // ZSTD_CCtx (steps: one frame per chunk)
  void* ectx_ = nullptr;  // ZSTD_CCtx (events: one stream for the whole file, flushed per chunk)
  WriterOptions opts_;
  std::chrono::steady_clock::time_point start_, pending_since_;
  uint64_t file_bytes_ = 0, next_step_ = 0;
  uint32_t seq_ = 0;
  std::vector<std::pair<uint64_t, std::string>> index_;  // chunk offset, header bytes
  // replay state (for keyframes) of the current compile
  uint32_t compile_ = UINT32_MAX;
  std::vector<FrameState> frames_;
  int32_t max_id_ = 0;
  uint32_t prev_offset_ = 0, prev_size_ = 0;
  uint8_t prev_op_ = 0;
  std::array<uint8_t, 256> caches_{};  // inline caches per opcode, of steps_version(meta)
  std::array<int64_t, 3> row_prev_{};  // previous value row's compile, id, step (deltas)
  int32_t prev_line_ = 0;
  std::vector<StoredValue> values_;  // of the current compile, by id
  std::vector<bool> has_value_;
  std::vector<uint32_t> row_in_;     // by id: 1 + seq of the chunk holding its latest row
  // pending chunk
  bool chunk_open_ = false;
  uint32_t pending_steps_ = 0, pending_values_ = 0, pending_events_ = 0;
  uint32_t cmp_mark_ = 0;  // pending_steps_ at the chunk's last compile change
  ChunkHeader hdr_;
  std::string keyframe_, ops_, args_, offs_, lines_, flow_, codes_, cmps_, stack_, locals_, vals_, events_;
  std::unordered_map<std::string, uint32_t> strings_;  // interned for the whole trace
  std::string strtab_;                                  // strings first seen in the pending chunk
  uint32_t nstrings_ = 0, new_strings_ = 0;
};

// ---- reader ----------------------------------------------------------------------------------

struct ChunkInfo {
  uint64_t offset = 0;  // file offset of the chunk's skippable header frame
  ChunkHeader h;
};

struct Value {
  uint32_t compile = 0;
  int32_t id = 0;
  uint64_t step = 0;
  std::string kind, repr, type, source, meta;
  int32_t node = -1;
};

struct FrameView {
  int32_t code = 0;
  std::vector<int32_t> stack;   // value ids, bottom first
  std::vector<int32_t> locals;  // value id per slot (0: unset)
};

// A decoded chunk: per-step columns plus what is needed to rebuild the state at any of its steps.
struct Chunk {
  uint64_t first_step = 0;
  std::vector<uint32_t> compile;
  std::vector<uint16_t> depth;
  std::vector<uint8_t> frame_start, opcode;
  std::vector<int32_t> code, arg, line;
  std::vector<uint32_t> offset;
  // deltas, flattened: step i pops pops[i], pushes push_ids[push_at[i] .. push_at[i+1])
  std::vector<uint32_t> pops, push_at, local_at;
  std::vector<int32_t> push_ids;
  std::vector<std::pair<int32_t, int32_t>> local_changes;
  uint32_t key_compile = UINT32_MAX;
  std::vector<FrameView> key_frames;  // state before the first step
  std::map<std::pair<uint32_t, int32_t>, Value> values;  // (compile, id) -> value
  size_t size() const { return opcode.size(); }
  // Frames (depth 0..depth(i)) after step i: replays from the keyframe (at most size() steps).
  std::vector<FrameView> state_after(size_t i) const;
};

struct Problem {  // something wrong with the file; what precedes it is still readable
  std::string what;
  uint64_t offset;
};

class TraceReader {
 public:
  // Opens and indexes a trace: reads the header, the chunk index (the footer, or a scan of the
  // chunk headers when the footer is missing) and every chunk's events. A damaged tail is
  // reported in problems() and everything before it stays readable; an unreadable file (not a
  // trace, newer major version, empty, a directory) is an Error.
  static Result<std::unique_ptr<TraceReader>> open(const std::string& path);
  ~TraceReader();
  const nlohmann::json& meta() const { return meta_; }
  uint16_t major() const { return major_; }
  uint16_t minor() const { return minor_; }
  bc::Version steps_version() const { return steps_version_; }
  const std::vector<ChunkInfo>& chunks() const { return chunks_; }
  const std::vector<nlohmann::json>& events() const { return events_; }  // in order, "chunk" added
  const std::vector<Problem>& problems() const { return problems_; }
  uint64_t total_steps() const;
  uint64_t file_size() const { return size_; }
  bool has_footer() const { return footer_; }
  Result<Chunk> chunk(size_t k) const;
  size_t chunk_of(uint64_t step) const;  // chunks().size() if out of range
  // The chunk's header as stored before its data, against the index (the footer's copy is what
  // open() uses when the footer verifies): empty when they agree, else what is wrong.
  std::string check_chunk_header(size_t k) const;
  // The code object with this id, as core's CodeInfo JSON (from its "code" event), or null.
  const nlohmann::json* code(int32_t id) const;

 private:
  TraceReader() = default;
  Result<std::string> read_at(uint64_t off, size_t n, const char* what) const;
  bool read_chunk_header(uint64_t off, ChunkInfo& out, std::string& why) const;
  int fd_ = -1;
  uint64_t size_ = 0;
  uint16_t major_ = 0, minor_ = 0;
  bc::Version steps_version_ = bc::Version::py311;
  std::array<uint8_t, 256> caches_{};  // inline caches per opcode, of steps_version_
  bool footer_ = false;
  nlohmann::json meta_;
  std::vector<ChunkInfo> chunks_;
  std::vector<nlohmann::json> events_;
  std::unordered_map<int32_t, size_t> codes_;  // code id -> index into events_
  std::vector<std::string> strings_;           // value strings, interned across the trace
  std::vector<Problem> problems_;
};

}  // namespace dv::trace
