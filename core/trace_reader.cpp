// TraceReader: opens a .dyn trace through its index (footer, or a scan of chunk headers), keeps
// every chunk's events and decodes steps chunk by chunk on demand. Every read is bounds-checked;
// a damaged part is reported with its offset and what precedes it stays readable.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "opcodes.h"
#include "trace.h"
#include "trace_bytes.h"

namespace dv::trace {
namespace {

std::string hex_prefix(std::string_view b) {
  static const char* d = "0123456789abcdef";
  std::string r;
  for (size_t i = 0; i < b.size() && i < 8; ++i) {
    if (i) r += ' ';
    r += d[static_cast<uint8_t>(b[i]) >> 4];
    r += d[static_cast<uint8_t>(b[i]) & 15];
  }
  return r;
}

// What a file that is not a trace looks like, for the error message.
std::string sniff(std::string_view b) {
  if (b.size() >= 4 && std::memcmp(b.data(), "\x28\xb5\x2f\xfd", 4) == 0) return "a zstd stream, not a dynview trace";
  if (!b.empty() && (b[0] == '{' || b[0] == '[')) return "JSON text, not a dynview trace";
  if (b.size() >= 4 && std::memcmp(b.data(), "\x7f" "ELF", 4) == 0) return "an ELF binary, not a dynview trace";
  if (b.size() >= 2 && b[0] == '\x1f' && b[1] == '\x8b') return "a gzip file, not a dynview trace";
  bool text = true;
  for (char c : b.substr(0, 64)) text &= (c == '\n' || c == '\r' || c == '\t' || (c >= 32 && c < 127));
  if (text) return "a text file, not a dynview trace";
  return "not a dynview trace (starts with " + hex_prefix(b) + ")";
}

Result<std::string> decompress(std::string_view z, size_t raw_size, const std::string& where, long at) {
  const unsigned long long declared = ZSTD_getFrameContentSize(z.data(), z.size());
  if (declared == ZSTD_CONTENTSIZE_ERROR) return make_error(where, "not a zstd frame", at);
  if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != raw_size)
    return make_error(where, "frame size " + std::to_string(declared) + " differs from the chunk header's " + std::to_string(raw_size), at);
  std::string out(raw_size, '\0');
  ZSTD_DCtx* d = ZSTD_createDCtx();
  const size_t n = ZSTD_decompressDCtx(d, out.data(), out.size(), z.data(), z.size());
  ZSTD_freeDCtx(d);
  if (ZSTD_isError(n)) return make_error(where, std::string("corrupt compressed data: ") + ZSTD_getErrorName(n), at);
  if (n != raw_size) return make_error(where, "decompressed size differs from the chunk header", at);
  return out;
}

// A recorded code object's byte strings back to core's JSON form (lower-case hex).
void binary_to_hex(nlohmann::json& co) {
  if (!co.is_object()) return;
  static const char* d = "0123456789abcdef";
  for (auto it = co.begin(); it != co.end(); ++it) {
    if (it->is_binary()) {
      std::string s;
      for (uint8_t c : it->get_binary()) s += d[c >> 4], s += d[c & 15];
      *it = std::move(s);
    } else if (it.key() == "nested" && it->is_array()) {
      for (auto& c : *it) binary_to_hex(c);
    }
  }
}

// The next segment of the events stream (one zstd stream across all chunks, flushed per chunk).
Result<std::string> continue_stream(ZSTD_DCtx* d, std::string_view z, size_t raw_size, uint32_t crc) {
  if (crc32(z.data(), z.size()) != crc) return make_error("events", "checksum mismatch");
  std::string out(raw_size, '\0');
  ZSTD_inBuffer in{z.data(), z.size(), 0};
  ZSTD_outBuffer o{out.data(), out.size(), 0};
  while (in.pos < in.size) {
    const size_t pos = o.pos, ipos = in.pos;
    const size_t n = ZSTD_decompressStream(d, &o, &in);
    if (ZSTD_isError(n)) return make_error("events", std::string("corrupt compressed data: ") + ZSTD_getErrorName(n));
    if (o.pos == pos && in.pos == ipos) break;  // output full with input left
  }
  if (in.pos != in.size || o.pos != raw_size)
    return make_error("events", "decompressed size differs from the chunk header");
  return out;
}

}  // namespace

TraceReader::~TraceReader() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::string> TraceReader::read_at(uint64_t off, size_t n, const char* what) const {
  if (off > size_ || n > size_ - off)
    return make_error(what, "needs " + std::to_string(n) + " bytes but the file ends " + std::to_string(size_ - std::min(off, size_)) + " bytes later", static_cast<long>(off));
  std::string b(n, '\0');
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd_, b.data() + done, n - done, static_cast<off_t>(off + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return make_error(what, std::string("read failed: ") + (r < 0 ? std::strerror(errno) : "end of file"), static_cast<long>(off + done));
    done += static_cast<size_t>(r);
  }
  return b;
}

bool TraceReader::read_chunk_header(uint64_t off, ChunkInfo& out, std::string& why) const {
  auto b = read_at(off, 8 + kChunkHeaderBytes, "chunk header");
  if (!b) return why = "truncated chunk header", false;
  Cursor c{*b};
  const uint32_t magic = c.u32(), size = c.u32();
  if (magic != kSkipChunk) return why = "no chunk starts here (found " + hex_prefix(std::string_view(*b).substr(0, 4)) + ")", false;
  if (!decode_header(std::string_view(*b).substr(8), out.h, why)) return false;
  if (size != kChunkHeaderBytes + uint64_t{out.h.events_zsize})
    return why = "chunk frame size " + std::to_string(size) + " disagrees with its header", false;
  out.offset = off;
  const uint64_t end = off + 8 + kChunkHeaderBytes + uint64_t{out.h.events_zsize} + out.h.steps_zsize;
  if (end > size_) {
    why = "chunk " + std::to_string(out.h.seq) + " is truncated (needs " + std::to_string(end - off) + " bytes, the file has " + std::to_string(size_ - off) + ")";
    return false;
  }
  return true;
}

Result<std::unique_ptr<TraceReader>> TraceReader::open(const std::string& path) {
  std::unique_ptr<TraceReader> r(new TraceReader());
  r->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (r->fd_ < 0) return make_error(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (fstat(r->fd_, &st) < 0) return make_error(path, std::string("cannot stat: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return make_error(path, "is a directory, not a trace file");
  r->size_ = static_cast<uint64_t>(st.st_size);
  if (r->size_ == 0) return make_error(path, "empty file (no trace header)", 0);
  auto first = r->read_at(0, std::min<uint64_t>(r->size_, 24), "header");
  if (!first) return first.error();
  Cursor c{*first};
  if (first->size() < 24 || c.u32() != kSkipHeader) return make_error(path, sniff(*first), 0);
  const uint32_t hsize = c.u32();
  if (std::string_view(*first).substr(8, 8) != std::string_view(kMagic, 8)) return make_error(path, sniff(first->substr(8)), 8);
  c.pos = 16;
  r->major_ = c.u16();
  r->minor_ = c.u16();
  if (r->major_ > kMajor)
    return make_error(path, "trace format version " + std::to_string(r->major_) + "." + std::to_string(r->minor_) +
                                " is newer than this reader's " + std::to_string(kMajor) + "." + std::to_string(kMinor) +
                                "; use a newer dynview", 16);
  if (r->major_ < kOldestMajor)
    return make_error(path, "trace format version " + std::to_string(r->major_) + "." + std::to_string(r->minor_) +
                                " is older than this reader's " + std::to_string(kMajor) + "." + std::to_string(kMinor) +
                                " and no longer read; record it again", 16);
  const uint32_t meta_len = c.u32();
  if (hsize != 8 + 4 + 4 + meta_len + 4) return make_error(path, "inconsistent header size", 4);
  auto head = r->read_at(8, hsize, "header");
  if (!head) return make_error(path, "truncated header (" + head.error().what + ")", 8);
  Cursor hc{*head};
  hc.pos = hsize - 4;
  if (hc.u32() != crc32(head->data(), hsize - 4)) return make_error(path, "header checksum mismatch", 8);
  r->meta_ = nlohmann::json::parse(head->substr(16, meta_len), nullptr, /*allow_exceptions=*/false);
  if (r->meta_.is_discarded()) return make_error(path, "header metadata is not valid JSON", 24);
  const auto sv = ::dv::trace::steps_version(r->meta_, r->major_);
  if (!sv)
    return make_error(path, "header metadata names opcode table " + r->meta_.at("opcode_table").dump() +
                                ", which this reader does not know (cpython-3.11, cpython-3.12, cpython-3.13)", 24);
  r->steps_version_ = *sv;
  for (int op = 0; op < 256; ++op) r->caches_[op] = bc::op_info(static_cast<uint8_t>(op), *sv).caches;
  const uint64_t data_start = 8 + uint64_t{hsize};

  // The index: the footer when intact, else a scan of chunk headers up to the first bad one.
  bool indexed = false;
  if (r->size_ >= data_start + 8 + 24) {
    auto tail = r->read_at(r->size_ - 16, 16, "footer");
    Cursor t{tail ? std::string_view(*tail) : std::string_view()};
    const uint64_t foff = t.u64();
    t.u32();
    if (tail && t.u32() == kEndTag && foff >= data_start && foff < r->size_ - 16) {
      auto foot = r->read_at(foff, r->size_ - foff, "footer");
      if (foot) {
        Cursor f{*foot};
        const uint32_t magic = f.u32(), size = f.u32();
        const std::string_view body = std::string_view(*foot).substr(8);
        if (magic == kSkipFooter && size == body.size() && body.size() >= 24) {
          Cursor b{body};
          const uint32_t crc_at = static_cast<uint32_t>(body.size() - 8);
          Cursor cc{body.substr(crc_at, 4)};
          if (b.u32() == kFooterTag && cc.u32() == crc32(body.data(), crc_at)) {
            const uint32_t n = b.u32();
            std::vector<ChunkInfo> chunks;
            bool good = uint64_t{n} * (8 + kChunkHeaderBytes) + 24 == body.size();
            uint64_t expect = data_start;
            for (uint32_t i = 0; good && i < n; ++i) {
              ChunkInfo ci;
              ci.offset = b.u64();
              std::string why;
              good = ci.offset == expect && decode_header(b.bytes(kChunkHeaderBytes), ci.h, why);
              expect = ci.offset + 8 + kChunkHeaderBytes + uint64_t{ci.h.events_zsize} + ci.h.steps_zsize;
              chunks.push_back(ci);
            }
            if (good && expect == foff) {
              r->chunks_ = std::move(chunks);
              indexed = r->footer_ = true;
            }
          }
        }
      }
      if (!indexed) r->problems_.push_back({"footer index is damaged; chunks were found by scanning", foff});
    }
  }
  if (!indexed) {
    uint64_t off = data_start;
    while (off < r->size_) {
      if (r->size_ - off >= 8) {
        auto m = r->read_at(off, 4, "chunk");
        if (m && Cursor{*m}.u32() == kSkipFooter) {  // a footer that did not verify (torn)
          r->problems_.push_back({"footer is incomplete; chunks were found by scanning", off});
          break;
        }
      }
      ChunkInfo ci;
      std::string why;
      if (!r->read_chunk_header(off, ci, why)) {
        r->problems_.push_back({why + "; the trace is read up to here", off});
        break;
      }
      r->chunks_.push_back(ci);
      off += 8 + kChunkHeaderBytes + uint64_t{ci.h.events_zsize} + ci.h.steps_zsize;
    }
  }
  // Chunk order and events. A chunk whose events do not decode ends the readable prefix.
  uint64_t next_step = 0;
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  for (size_t k = 0; k < r->chunks_.size(); ++k) {
    const ChunkInfo& ci = r->chunks_[k];
    const uint64_t at = ci.offset + 8 + kChunkHeaderBytes;
    auto bad = [&](const std::string& why, uint64_t where) {
      r->problems_.push_back({"chunk " + std::to_string(k) + ": " + why + "; the trace is read up to here", where});
      r->chunks_.resize(k);
    };
    if (ci.h.first_step != next_step) {
      bad("starts at step " + std::to_string(ci.h.first_step) + ", expected " + std::to_string(next_step), ci.offset);
      break;
    }
    auto z = r->read_at(at, ci.h.events_zsize, "events");
    auto raw = z ? continue_stream(dctx.get(), *z, ci.h.events_rsize, ci.h.events_crc) : Result<std::string>(z.error());
    if (!raw) {
      bad(raw.error().what, at);
      break;
    }
    Cursor ec{*raw};
    std::vector<nlohmann::json> evs;
    const uint64_t nnew = ec.var();
    bool ok = ec.ok && nnew <= raw->size();
    std::vector<std::string> strs;
    for (uint64_t i = 0; i < nnew && ok; ++i) {
      std::string_view s = ec.bytes(ec.var());
      ok = ec.ok;
      strs.emplace_back(s);
    }
    for (uint32_t i = 0; i < ci.h.nevents && ok; ++i) {
      const uint64_t n = ec.var();
      std::string_view b = ec.bytes(n);
      if (!ec.ok) { ok = false; break; }
      nlohmann::json j = nlohmann::json::from_cbor(b.begin(), b.end(), true, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object()) ok = false;
      else evs.push_back(std::move(j));
    }
    if (!ok || !ec.done()) {
      bad("events do not decode", at);
      break;
    }
    for (auto& s : strs) r->strings_.push_back(std::move(s));
    for (auto& j : evs) {
      j["chunk"] = k;
      auto t = j.find("t");
      if (t != j.end() && *t == "code" && j.contains("id") && j["id"].is_number_integer()) {
        r->codes_[j["id"].get<int32_t>()] = r->events_.size();
        auto co = j.find("co");
        if (co != j.end()) {  // the JSON form readers use ("json": core's code JSON text)
          binary_to_hex(*co);
          j["json"] = co->dump();
          j.erase(co);
        }
      }
      r->events_.push_back(std::move(j));
    }
    next_step += ci.h.nsteps;
  }
  return r;
}

uint64_t TraceReader::total_steps() const {
  return chunks_.empty() ? 0 : chunks_.back().h.first_step + chunks_.back().h.nsteps;
}

size_t TraceReader::chunk_of(uint64_t step) const {
  auto it = std::upper_bound(chunks_.begin(), chunks_.end(), step,
                             [](uint64_t s, const ChunkInfo& c) { return s < c.h.first_step; });
  if (it == chunks_.begin()) return chunks_.size();
  const size_t k = static_cast<size_t>(it - chunks_.begin()) - 1;
  return step < chunks_[k].h.first_step + chunks_[k].h.nsteps ? k : chunks_.size();
}

std::string TraceReader::check_chunk_header(size_t k) const {
  if (k >= chunks_.size()) return "no chunk " + std::to_string(k);
  ChunkInfo stored;
  std::string why;
  if (!read_chunk_header(chunks_[k].offset, stored, why)) return why;
  if (encode_header(stored.h) != encode_header(chunks_[k].h)) return "header differs from the footer index's copy";
  return "";
}

const nlohmann::json* TraceReader::code(int32_t id) const {
  auto it = codes_.find(id);
  return it == codes_.end() ? nullptr : &events_[it->second];
}

Result<Chunk> TraceReader::chunk(size_t k) const {
  if (k >= chunks_.size()) return make_error("trace", "no chunk " + std::to_string(k));
  const ChunkHeader& h = chunks_[k].h;
  const uint64_t at = chunks_[k].offset + 8 + kChunkHeaderBytes + h.events_zsize;
  const std::string where = "chunk " + std::to_string(k) + " steps";
  auto z = read_at(at, h.steps_zsize, "steps");
  if (!z) return z.error();
  auto raw = decompress(*z, h.steps_rsize, where, static_cast<long>(at));
  if (!raw) return raw.error();
  auto fail = [&](const std::string& why) { return make_error(where, why, static_cast<long>(at)); };
  Cursor c{*raw};
  const uint64_t nsteps = c.var(), nvalues = c.var();
  if (!c.ok || nsteps != h.nsteps || nvalues != h.nvalues) return fail("bad counts");
  const std::vector<std::string>& strings = strings_;
  auto section = [&]() -> Cursor { return Cursor{c.bytes(c.var())}; };
  Cursor key = section();
  Cursor ops = section(), args = section(), offs = section(), lines = section(), flow = section(), codes = section(),
         cmps = section(), stack = section(), locs = section(), vals = section();
  if (!c.ok || !c.done()) return fail("sections do not add up");
  Chunk out;
  out.first_step = h.first_step;
  // Keyframe.
  const uint64_t kc = key.var();
  out.key_compile = kc == 0 ? UINT32_MAX : static_cast<uint32_t>(kc - 1);
  int64_t max_id = static_cast<int64_t>(key.var());
  int64_t prev_offset = static_cast<int64_t>(key.var());
  uint8_t prev_op = key.u8();
  int64_t prev_line = key.svar();
  const uint64_t nframes = key.var();
  if (!key.ok || nframes > 4096) return fail("bad keyframe");
  for (uint64_t i = 0; i < nframes && key.ok; ++i) {
    FrameView f;
    f.code = static_cast<int32_t>(key.var());
    const uint64_t ns = key.var();
    for (uint64_t j = 0; j < ns && key.ok; ++j) f.stack.push_back(static_cast<int32_t>(key.var()));
    const uint64_t nl = key.var();
    for (uint64_t j = 0; j < nl && key.ok; ++j) f.locals.push_back(static_cast<int32_t>(key.var()));
    out.key_frames.push_back(std::move(f));
  }
  if (!key.ok || !key.done()) return fail("bad keyframe");
  // Steps.
  const size_t n = static_cast<size_t>(nsteps);
  if (ops.s.size() != n) return fail("opcode column has " + std::to_string(ops.s.size()) + " entries for " + std::to_string(n) + " steps");
  out.compile.resize(n); out.depth.resize(n); out.frame_start.resize(n); out.opcode.resize(n);
  out.code.resize(n); out.arg.resize(n); out.line.resize(n); out.offset.resize(n);
  out.pops.resize(n); out.push_at.resize(n + 1); out.local_at.resize(n + 1);
  std::vector<int32_t> frame_codes;
  std::vector<size_t> frame_stack;  // stack depth per frame, to check pops
  for (const FrameView& f : out.key_frames) {
    frame_codes.push_back(f.code);
    frame_stack.push_back(f.stack.size());
  }
  uint32_t compile = out.key_compile == UINT32_MAX ? 0 : out.key_compile;
  uint64_t next_change = cmps.done() ? UINT64_MAX : cmps.var();  // step index of the next compile change
  for (size_t i = 0; i < n; ++i) {
    if (i == next_change) {
      const uint64_t dc = cmps.var();
      if (dc == 0 || dc > UINT32_MAX) return fail("bad compile change at step " + std::to_string(h.first_step + i));
      compile += static_cast<uint32_t>(dc);
      frame_codes.clear();
      frame_stack.clear();
      max_id = 0;
      next_change = cmps.done() ? UINT64_MAX : next_change + cmps.var();
    }
    const uint64_t fl = flow.var();
    const size_t depth = static_cast<size_t>(fl >> 2);
    const bool start = fl & 2, has_locals = fl & 1;
    if (start) {
      if (depth > frame_codes.size()) return fail("step " + std::to_string(h.first_step + i) + " enters depth " + std::to_string(depth) + " from depth " + std::to_string(frame_codes.size()));
      frame_codes.resize(depth);
      frame_stack.resize(depth);
      frame_codes.push_back(static_cast<int32_t>(codes.var()));
      frame_stack.push_back(0);
    } else {
      if (depth + 1 > frame_codes.size()) return fail("step " + std::to_string(h.first_step + i) + " at depth " + std::to_string(depth) + " without a frame");
      frame_codes.resize(depth + 1);
      frame_stack.resize(depth + 1);
    }
    out.compile[i] = compile;
    out.depth[i] = static_cast<uint16_t>(depth);
    out.frame_start[i] = start;
    out.code[i] = frame_codes[depth];
    out.opcode[i] = ops.u8();
    const uint64_t a = args.var();
    out.arg[i] = a == 0 ? INT32_MIN : static_cast<int32_t>(a - 1);
    prev_offset += 2 + 2 * caches_[prev_op] + offs.svar();
    prev_op = out.opcode[i];
    prev_line += lines.svar();
    out.offset[i] = static_cast<uint32_t>(prev_offset);
    out.line[i] = static_cast<int32_t>(prev_line);
    const uint64_t sd = stack.var(), pops = sd >> 3, pushes = (sd & 7) == 7 ? stack.var() : sd & 7;
    if (pops > frame_stack[depth] || pushes > 1'000'000) return fail("step " + std::to_string(h.first_step + i) + ": stack delta out of range");
    out.pops[i] = static_cast<uint32_t>(pops);
    out.push_at[i] = static_cast<uint32_t>(out.push_ids.size());
    for (uint64_t j = 0; j < pushes && stack.ok; ++j) {
      const int64_t id = stack.svar() + max_id + 1;
      out.push_ids.push_back(static_cast<int32_t>(id));
      max_id = std::max(max_id, id);
    }
    frame_stack[depth] = frame_stack[depth] - pops + pushes;
    out.local_at[i] = static_cast<uint32_t>(out.local_changes.size());
    const uint64_t nl = has_locals ? locs.var() : 0;
    if (nl > 1'000'000 || (has_locals && nl == 0)) return fail("bad locals delta");
    for (uint64_t j = 0; j < nl && locs.ok; ++j) {
      const uint64_t slot = locs.var(), id = locs.var();
      if (slot > 100000) return fail("local slot out of range");
      out.local_changes.emplace_back(static_cast<int32_t>(slot), static_cast<int32_t>(id));
    }
    if (!cmps.ok || !flow.ok || !codes.ok || !ops.ok || !args.ok || !offs.ok || !lines.ok || !stack.ok || !locs.ok)
      return fail("step columns truncated at step " + std::to_string(h.first_step + i));
  }
  out.push_at[n] = static_cast<uint32_t>(out.push_ids.size());
  out.local_at[n] = static_cast<uint32_t>(out.local_changes.size());
  if (!cmps.done() || !flow.done() || !codes.done() || !args.done() || !offs.done() || !lines.done() || !stack.done() || !locs.done())
    return fail("step columns have trailing bytes");
  // Values.
  int64_t prev[3] = {0, 0, static_cast<int64_t>(h.first_step)};
  for (uint64_t i = 0; i < nvalues; ++i) {
    Value v;
    for (int64_t& p : prev) p += vals.svar();
    v.compile = static_cast<uint32_t>(prev[0]);
    v.id = static_cast<int32_t>(prev[1]);
    v.step = static_cast<uint64_t>(prev[2]);
    std::string* fields[] = {&v.kind, &v.repr, &v.type, &v.source, &v.meta};
    for (std::string* f : fields) {
      const uint64_t s = vals.var();
      if (s >= strings.size()) return fail("value string id out of range");
      *f = std::string(strings[s]);
    }
    v.node = static_cast<int32_t>(vals.var()) - 1;
    if (!vals.ok) return fail("values truncated");
    out.values[{v.compile, v.id}] = std::move(v);
  }
  if (!vals.done()) return fail("values have trailing bytes");
  return out;
}

std::vector<FrameView> Chunk::state_after(size_t i) const {
  std::vector<FrameView> frames = key_frames;
  uint32_t cur = key_compile;
  for (size_t j = 0; j <= i && j < size(); ++j) {
    if (compile[j] != cur) {
      frames.clear();
      cur = compile[j];
    }
    const size_t d = depth[j];
    if (frame_start[j]) {
      frames.resize(d);
      frames.push_back(FrameView{code[j], {}, {}});
    } else {
      frames.resize(d + 1);
    }
    FrameView& f = frames[d];
    f.stack.resize(f.stack.size() - std::min<size_t>(pops[j], f.stack.size()));
    f.stack.insert(f.stack.end(), push_ids.begin() + push_at[j], push_ids.begin() + push_at[j + 1]);
    for (uint32_t k = local_at[j]; k < local_at[j + 1]; ++k) {
      const auto [slot, id] = local_changes[k];
      if (static_cast<size_t>(slot) >= f.locals.size()) f.locals.resize(static_cast<size_t>(slot) + 1, 0);
      f.locals[slot] = id;
    }
  }
  return frames;
}

}  // namespace dv::trace
