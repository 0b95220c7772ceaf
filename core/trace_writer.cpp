// TraceWriter: builds chunks in columns, compresses each part as an independent zstd frame and
// appends the chunk with one write() (see core/TRACE.md). Not thread-safe: the recorder locks.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>

#include "opcodes.h"
#include "trace.h"
#include "trace_bytes.h"

namespace dv::trace {

std::optional<bc::Version> steps_version(const nlohmann::json& meta, uint16_t major) {
  if (major < 4 || !meta.is_object()) return bc::Version::py311;
  const auto t = meta.find("opcode_table");
  if (t == meta.end()) return bc::Version::py311;
  if (!t->is_string()) return std::nullopt;
  const std::string s = t->get<std::string>();
  if (s.rfind("cpython-", 0) != 0) return std::nullopt;
  return bc::version_from_str(std::string_view(s).substr(8));
}

uint32_t crc32(const void* data, size_t n, uint32_t crc) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

namespace {
bool write_all(int fd, const std::string& buf) {
  size_t done = 0;
  while (done < buf.size()) {
    ssize_t w = ::write(fd, buf.data() + done, buf.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(w);
  }
  return true;
}
void put_section(std::string& o, const std::string& s) {
  put_var(o, s.size());
  o += s;
}
}  // namespace

Result<std::unique_ptr<TraceWriter>> TraceWriter::create(const std::string& path, const nlohmann::json& meta,
                                                         WriterOptions opts) {
  std::unique_ptr<TraceWriter> w(new TraceWriter());
  w->opts_ = opts;
  const auto v = steps_version(meta, kMajor);
  if (!v) return make_error(path, "cannot create trace: metadata names opcode table " + meta.at("opcode_table").dump() +
                                      ", which is not cpython-3.11, cpython-3.12 or cpython-3.13");
  for (int op = 0; op < 256; ++op) w->caches_[op] = bc::op_info(static_cast<uint8_t>(op), *v).caches;
  // Opened without O_TRUNC and locked before truncating: a second process recording to the same
  // path is refused (kBusy) instead of overwriting the first one's trace.
  w->fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (w->fd_ < 0) return make_error(path, std::string("cannot create trace: ") + std::strerror(errno));
  if (::flock(w->fd_, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    ::close(w->fd_);
    w->fd_ = -1;
    return make_error(path, e == EWOULDBLOCK ? kBusy : std::string("cannot lock trace: ") + std::strerror(e));
  }
  if (::ftruncate(w->fd_, 0) != 0) return make_error(path, std::string("cannot truncate trace: ") + std::strerror(errno));
  w->cctx_ = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(static_cast<ZSTD_CCtx*>(w->cctx_), ZSTD_c_compressionLevel, opts.level);
  ZSTD_CCtx_setParameter(static_cast<ZSTD_CCtx*>(w->cctx_), ZSTD_c_checksumFlag, 1);
  w->ectx_ = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(static_cast<ZSTD_CCtx*>(w->ectx_), ZSTD_c_compressionLevel, opts.level);
  w->start_ = std::chrono::steady_clock::now();
  const std::string m = meta.dump();
  std::string body(kMagic, sizeof kMagic);
  put_u16(body, kMajor);
  put_u16(body, kMinor);
  put_u32(body, static_cast<uint32_t>(m.size()));
  body += m;
  put_u32(body, crc32(body.data(), body.size()));
  std::string frame;
  put_u32(frame, kSkipHeader);
  put_u32(frame, static_cast<uint32_t>(body.size()));
  frame += body;
  if (!write_all(w->fd_, frame)) return make_error(path, std::string("cannot write trace header: ") + std::strerror(errno));
  w->file_bytes_ = frame.size();
  return w;
}

TraceWriter::~TraceWriter() {
  if (fd_ >= 0) close();
  if (cctx_) ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(cctx_));
  if (ectx_) ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(ectx_));
}

uint64_t TraceWriter::micros() const {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start_).count());
}

uint32_t TraceWriter::intern(std::string_view s) {
  auto it = strings_.find(std::string(s));
  if (it != strings_.end()) return it->second;
  const uint32_t id = nstrings_++;
  ++new_strings_;
  strings_.emplace(std::string(s), id);
  put_var(strtab_, s.size());
  strtab_.append(s);
  return id;
}

void TraceWriter::write_value_row(uint32_t compile, int32_t id, uint64_t step, const StoredValue& v) {
  if (id > 0 && static_cast<size_t>(id) < row_in_.size()) row_in_[id] = seq_ + 1;
  // compile, id and step as deltas from the chunk's previous row (rows mostly follow each other)
  put_svar(vals_, static_cast<int64_t>(compile) - row_prev_[0]);
  put_svar(vals_, static_cast<int64_t>(id) - row_prev_[1]);
  put_svar(vals_, static_cast<int64_t>(step) - row_prev_[2]);
  row_prev_ = {static_cast<int64_t>(compile), static_cast<int64_t>(id), static_cast<int64_t>(step)};
  put_var(vals_, intern(v.kind));
  put_var(vals_, intern(v.repr));
  put_var(vals_, intern(v.type));
  put_var(vals_, intern(v.source));
  put_var(vals_, intern(v.meta));
  put_var(vals_, static_cast<uint64_t>(v.node + 1));
  ++pending_values_;
}

void TraceWriter::switch_compile(uint32_t c) {
  if (c == compile_) return;
  compile_ = c;
  frames_.clear();
  values_.clear();
  has_value_.clear();
  row_in_.clear();
  max_id_ = 0;
}

// Opens a chunk: the keyframe is the replay state now, with the values it refers to.
void TraceWriter::begin_chunk() {
  if (chunk_open_) return;
  chunk_open_ = true;
  pending_since_ = std::chrono::steady_clock::now();
  hdr_ = ChunkHeader{};
  hdr_.seq = seq_;
  hdr_.first_step = next_step_;
  cmp_mark_ = 0;
  hdr_.first_compile = hdr_.last_compile = compile_ == UINT32_MAX ? 0 : compile_;
  hdr_.min_depth = UINT16_MAX;
  row_prev_ = {0, 0, static_cast<int64_t>(next_step_)};
  keyframe_.clear();
  put_var(keyframe_, compile_ == UINT32_MAX ? 0 : static_cast<uint64_t>(compile_) + 1);
  put_var(keyframe_, static_cast<uint32_t>(max_id_));
  put_var(keyframe_, prev_offset_);
  keyframe_.push_back(static_cast<char>(prev_op_));
  put_svar(keyframe_, prev_line_);
  put_var(keyframe_, frames_.size());
  std::vector<int32_t> referenced;
  for (const FrameState& f : frames_) {
    put_var(keyframe_, static_cast<uint32_t>(f.code));
    put_var(keyframe_, f.stack.size());
    for (int32_t id : f.stack) put_var(keyframe_, static_cast<uint32_t>(id)), referenced.push_back(id);
    put_var(keyframe_, f.locals.size());
    for (int32_t id : f.locals) put_var(keyframe_, static_cast<uint32_t>(id)), referenced.push_back(id);
  }
  std::sort(referenced.begin(), referenced.end());
  referenced.erase(std::unique(referenced.begin(), referenced.end()), referenced.end());
  for (int32_t id : referenced)
    if (id > 0 && static_cast<size_t>(id) < has_value_.size() && has_value_[id]) write_value_row(compile_, id, values_[id].step, values_[id]);
}

void TraceWriter::step(const StepIn& s) {
  switch_compile(s.compile);
  begin_chunk();
  const uint32_t prev_compile = pending_steps_ ? hdr_.last_compile : hdr_.first_compile;
  if (pending_steps_ == 0) hdr_.first_compile = s.compile;
  // Compile changes as (steps since the previous change or the chunk start, delta) pairs.
  if (const uint32_t dc = s.compile - std::min(prev_compile, s.compile)) {
    put_var(cmps_, pending_steps_ - cmp_mark_);
    put_var(cmps_, dc);
    cmp_mark_ = pending_steps_;
  }
  hdr_.last_compile = s.compile;
  // A step at a depth with no frame yet is the start of one (a producer that did not say so): every
  // step's frame is known, so each chunk decodes on its own.
  const bool start = s.frame_start || frames_.size() <= static_cast<size_t>(s.depth);
  put_var(flow_, (static_cast<uint64_t>(s.depth) * 2 + (start ? 1 : 0)) * 2 + (s.nlocals ? 1 : 0));
  // Frames: a frame start pushes a new frame at `depth`; otherwise deeper frames have returned.
  if (start) {
    frames_.resize(s.depth);
    frames_.push_back(FrameState{s.code, {}, {}});
    put_var(codes_, static_cast<uint32_t>(s.code));
  } else if (frames_.size() != static_cast<size_t>(s.depth) + 1) {
    frames_.resize(static_cast<size_t>(s.depth) + 1);
  }
  ops_.push_back(static_cast<char>(s.opcode));
  put_var(args_, s.arg == INT32_MIN ? 0 : static_cast<uint64_t>(static_cast<uint32_t>(s.arg)) + 1);
  // offset: predicted as the instruction after the previous one (its inline caches skipped)
  put_svar(offs_, static_cast<int64_t>(s.offset) - (static_cast<int64_t>(prev_offset_) + 2 + 2 * caches_[prev_op_]));
  put_svar(lines_, static_cast<int64_t>(s.line) - prev_line_);
  prev_offset_ = s.offset;
  prev_op_ = s.opcode;
  prev_line_ = s.line;
  FrameState& f = frames_[s.depth];
  size_t k = 0;
  while (k < f.stack.size() && k < s.nstack && f.stack[k] == s.stack[k]) ++k;
  const size_t pops = f.stack.size() - k, pushes = s.nstack - k;
  put_var(stack_, pops * 8 + std::min<size_t>(pushes, 7));  // one byte for most steps
  if (pushes >= 7) put_var(stack_, pushes);
  for (size_t i = k; i < s.nstack; ++i) {
    const int32_t id = s.stack[i];
    put_svar(stack_, static_cast<int64_t>(id) - (static_cast<int64_t>(max_id_) + 1));
    max_id_ = std::max(max_id_, id);
    // An older value pushed again (a global or attribute loaded twice): describe it in this
    // chunk too, so that every chunk decodes on its own.
    if (id > 0 && static_cast<size_t>(id) < row_in_.size() && row_in_[id] != seq_ + 1 && has_value_[id])
      write_value_row(s.compile, id, values_[id].step, values_[id]);
  }
  f.stack.assign(s.stack, s.stack + s.nstack);
  if (s.nlocals) put_var(locals_, s.nlocals);
  for (size_t i = 0; i < s.nlocals; ++i) {
    const auto [slot, id] = s.locals[i];
    put_var(locals_, static_cast<uint32_t>(slot));
    put_var(locals_, static_cast<uint32_t>(id));
    if (id > 0 && static_cast<size_t>(id) < row_in_.size() && row_in_[id] != seq_ + 1 && has_value_[id])
      write_value_row(s.compile, id, values_[id].step, values_[id]);
    if (static_cast<size_t>(slot) >= f.locals.size()) f.locals.resize(static_cast<size_t>(slot) + 1, 0);
    f.locals[slot] = id;
  }
  hdr_.min_depth = std::min<uint16_t>(hdr_.min_depth, s.depth);
  hdr_.max_depth = std::max<uint16_t>(hdr_.max_depth, s.depth);
  ++pending_steps_;
  ++next_step_;
  if (pending_steps_ >= opts_.chunk_steps ||
      ops_.size() + stack_.size() + locals_.size() + vals_.size() + strtab_.size() > opts_.chunk_bytes)
    flush();
}

void TraceWriter::value(const ValueIn& v) {
  switch_compile(v.compile);
  begin_chunk();
  if (v.id <= 0) return;
  if (static_cast<size_t>(v.id) >= values_.size()) {
    values_.resize(static_cast<size_t>(v.id) + 1);
    has_value_.resize(static_cast<size_t>(v.id) + 1, false);
    row_in_.resize(static_cast<size_t>(v.id) + 1, 0);
  }
  StoredValue& s = values_[v.id];
  s = StoredValue{v.step, std::string(v.kind), std::string(v.repr), std::string(v.type), std::string(v.source),
                  std::string(v.meta), v.node};
  has_value_[v.id] = true;
  write_value_row(v.compile, v.id, v.step, s);
}

void TraceWriter::count_marker(const std::string& type) {
  if (type == "guard") ++hdr_.nguards;
  else if (type == "break") ++hdr_.nbreaks;
  else if (type == "graph") ++hdr_.ngraphs;
}

void TraceWriter::event(const nlohmann::json& ev) {
  begin_chunk();
  const std::vector<uint8_t> bytes = nlohmann::json::to_cbor(ev);
  put_var(events_, bytes.size());
  events_.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  ++pending_events_;
  auto t = ev.find("t");
  if (t != ev.end() && t->is_string()) count_marker(t->get<std::string>());
}

Result<bool> TraceWriter::flush() {
  if (fd_ < 0) return make_error("trace", "flush after close");
  if (!chunk_open_) return true;
  if (!failed_.empty()) {  // a write failed: nothing more is written (the file stays a clean prefix)
    reset_chunk();
    return make_error("trace", failed_);
  }
  std::string steps;
  put_var(steps, pending_steps_);
  put_var(steps, pending_values_);
  put_section(steps, keyframe_);
  for (const std::string* col : {&ops_, &args_, &offs_, &lines_, &flow_, &codes_, &cmps_, &stack_, &locals_, &vals_})
    put_section(steps, *col);
  auto compress = [&](const std::string& raw, std::string& out) -> bool {
    out.resize(ZSTD_compressBound(raw.size()));
    size_t n = ZSTD_compress2(static_cast<ZSTD_CCtx*>(cctx_), out.data(), out.size(), raw.data(), raw.size());
    if (ZSTD_isError(n)) return false;
    out.resize(n);
    return true;
  };
  // Events continue one zstd stream across chunks (compile records repeat names, guard texts and
  // code from earlier compiles): each chunk holds the stream flushed up to its last event.
  auto stream = [&](const std::string& raw, std::string& out) -> bool {
    ZSTD_inBuffer in{raw.data(), raw.size(), 0};
    std::string buf(ZSTD_CStreamOutSize(), '\0');
    for (;;) {
      ZSTD_outBuffer o{buf.data(), buf.size(), 0};
      const size_t left = ZSTD_compressStream2(static_cast<ZSTD_CCtx*>(ectx_), &o, &in, ZSTD_e_flush);
      if (ZSTD_isError(left)) return false;
      out.append(buf.data(), o.pos);
      if (left == 0 && in.pos == in.size) return true;
    }
  };
  // Strings first seen in this chunk lead its events (ids are global: a string is written once).
  std::string ev;
  put_var(ev, new_strings_);
  ev += strtab_;
  ev += events_;
  std::string ez, sz;
  if (!stream(ev, ez) || !compress(steps, sz)) return make_error("trace", "zstd compression failed");
  hdr_.events_crc = crc32(ez.data(), ez.size());
  hdr_.nsteps = pending_steps_;
  hdr_.nvalues = pending_values_;
  hdr_.nevents = pending_events_;
  hdr_.events_zsize = static_cast<uint32_t>(ez.size());
  hdr_.events_rsize = static_cast<uint32_t>(ev.size());
  hdr_.steps_zsize = static_cast<uint32_t>(sz.size());
  hdr_.steps_rsize = static_cast<uint32_t>(steps.size());
  if (hdr_.min_depth == UINT16_MAX) hdr_.min_depth = 0;
  hdr_.time_us = micros();
  const std::string head = encode_header(hdr_);
  std::string buf;
  buf.reserve(8 + head.size() + ez.size() + sz.size());
  put_u32(buf, kSkipChunk);  // the header and the events segment (not a zstd frame on its own)
  put_u32(buf, static_cast<uint32_t>(head.size() + ez.size()));
  buf += head;
  buf += ez;
  buf += sz;
  const uint64_t at = file_bytes_;
  if (!write_all(fd_, buf)) {
    failed_ = std::string("write failed at byte ") + std::to_string(file_bytes_) + ": " + std::strerror(errno);
    // Cut a torn chunk off: what stays is every chunk written before, without a footer.
    if (::ftruncate(fd_, static_cast<off_t>(file_bytes_)) != 0) failed_ += " (and the torn chunk could not be cut off)";
    reset_chunk();
    return make_error("trace", failed_);
  }
  file_bytes_ += buf.size();
  index_.emplace_back(at, head);
  ++seq_;
  reset_chunk();
  return true;
}

void TraceWriter::reset_chunk() {
  chunk_open_ = false;
  pending_steps_ = pending_values_ = pending_events_ = 0;
  for (std::string* col : {&keyframe_, &ops_, &args_, &offs_, &lines_, &flow_, &codes_, &cmps_, &stack_, &locals_, &vals_, &events_})
    col->clear();
  strtab_.clear();
  new_strings_ = 0;
}

void TraceWriter::abandon() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  reset_chunk();
}

Result<bool> TraceWriter::close() {
  if (fd_ < 0) return true;
  Result<bool> f = flush();
  if (!failed_.empty()) {  // no footer: readers see a trace that did not finish
    ::close(fd_);
    fd_ = -1;
    return make_error("trace", failed_);
  }
  // Footer: the chunk index, so that a reader need not scan (a crashed writer leaves none).
  std::string body;
  put_u32(body, kFooterTag);
  put_u32(body, static_cast<uint32_t>(index_.size()));
  for (const auto& [off, head] : index_) {
    put_u64(body, off);
    body += head;
  }
  put_u64(body, file_bytes_);
  put_u32(body, crc32(body.data(), body.size()));
  put_u32(body, kEndTag);
  std::string frame;
  put_u32(frame, kSkipFooter);
  put_u32(frame, static_cast<uint32_t>(body.size()));
  frame += body;
  const bool ok = f && write_all(fd_, frame);
  if (ok) file_bytes_ += frame.size();
  ::close(fd_);
  fd_ = -1;
  if (!f) return f;
  if (!ok) return make_error("trace", std::string("cannot write footer: ") + std::strerror(errno));
  return true;
}

}  // namespace dv::trace
