// Recorder (engine events -> .dyn): the lock-free record stream between the engine thread and the
// flusher thread carries every step, value and event in order, across many stream blocks and
// with the flusher draining concurrently; a record larger than a block; cache hits written by the
// flusher while the engine is idle land between the compiles they happened between. Run under
// ASan/UBSan by `make sanitize`.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <thread>

#include "core/trace.h"
#include "recorder/recorder.h"

namespace fs = std::filesystem;
using namespace dv;
using nlohmann::json;

namespace {

std::string tmp(const std::string& name) { return (fs::temp_directory_path() / ("dv_rec_" + std::to_string(getpid()) + "_" + name)).string(); }

struct Expect {
  std::vector<std::vector<int32_t>> stacks;  // by global step
  std::vector<uint8_t> opcode;
  std::vector<int32_t> arg, line;
  size_t big_repr_id = 0, big_repr_size = 0;
};

// One compile of n steps: a stack that grows and shrinks (new values announced before the step
// that shows them), a local stored now and then, a guard every 100 steps.
void compile(Recorder& rec, int frame, int n, int& next_id, Expect& ex, bool big_value = false) {
  const CompileId id{frame, 0};
  rec.on_compile_start(CompileStartEvent{id, "f" + std::to_string(frame), "f.py", 1, "first call", frame + 1});
  std::vector<int> stack;
  std::vector<std::pair<int, int>> none, store(1);
  for (int i = 0; i < n; ++i) {
    if (i % 4 == 3 || stack.size() >= 12) {
      stack.pop_back();
    } else {
      const int v = next_id++;
      std::string repr = "v" + std::to_string(v);
      if (big_value && i == n / 2) {  // larger than a stream block
        repr.assign(RecordStream::kBlockBytes * 3, 'x');
        ex.big_repr_id = static_cast<size_t>(v);
        ex.big_repr_size = repr.size();
      }
      rec.on_value(ValueEvent{v, i, "tensor", repr, "L['x']", -1, "Tensor", "f32[2] cpu"});
      stack.push_back(v);
    }
    const bool st = i % 5 == 0 && !stack.empty();
    if (st) store[0] = {i % 3, stack.back()};
    const uint8_t op = i % 2 ? 124 : 100;
    rec.on_step(StepEvent{id, i, 0, i == 0, frame + 1, static_cast<uint32_t>(2 * (i % 50)), op, i % 9, 10 + i % 7, &stack,
                          st ? &store : &none});
    ex.stacks.emplace_back(stack.begin(), stack.end());
    ex.opcode.push_back(op);
    ex.arg.push_back(i % 9);
    ex.line.push_back(10 + i % 7);
    if (i % 100 == 0) rec.on_guard(GuardEvent{id, "TENSOR_MATCH", "guard " + std::to_string(i), i, 10, "f.py"});
  }
  rec.on_compile_end(CompileEndEvent{id, "graph", 1, n / 100, 0.0});
}

void hits(Recorder& rec, int frame, int count) {
  for (int i = 0; i < count; ++i)
    rec.on_cache(CacheEvent{CacheEvent::Hit, "f" + std::to_string(frame), "f.py", 1, 0, {}, CompileId{frame, 0}, {}, frame + 1});
}

}  // namespace

TEST_CASE("recorder stream: every step, value and event in order across blocks, flusher draining concurrently", "[recorder]") {
  const std::string p = tmp("stream.dyn");
  trace::WriterOptions o;
  o.chunk_steps = 4096;
  auto r = Recorder::create(p, json{{"test", true}}, o, /*flush_ms=*/1);  // the flusher drains every millisecond
  REQUIRE(r);
  Recorder& rec = **r;
  Expect ex;
  int next_id = 1;
  const int n = 70000;  // ~5 MB of stream records per compile: several blocks each
  compile(rec, 0, n, next_id, ex, /*big_value=*/true);
  hits(rec, 0, 1000);
  compile(rec, 1, n, next_id, ex);
  hits(rec, 1, 7);
  compile(rec, 2, n, next_id, ex);
  const RecorderStats st = rec.close();
  CHECK(st.error.empty());
  CHECK(st.steps == 3u * n);
  CHECK(st.step_gaps == 0);

  auto t = trace::TraceReader::open(p);
  REQUIRE(t);
  CHECK((*t)->problems().empty());
  REQUIRE((*t)->total_steps() == 3u * n);
  // Steps: every field, and the stack after every 97th step, as sent.
  uint64_t seen = 0;
  bool big_seen = false;
  for (size_t k = 0; k < (*t)->chunks().size(); ++k) {
    auto c = (*t)->chunk(k);
    REQUIRE(c);
    for (size_t i = 0; i < c->size(); ++i, ++seen) {
      const uint64_t g = c->first_step + i;
      REQUIRE(g == seen);
      CHECK(c->compile[i] == g / n);
      CHECK(c->opcode[i] == ex.opcode[g]);
      CHECK(c->arg[i] == ex.arg[g]);
      CHECK(c->line[i] == ex.line[g]);
      if (g % 97 == 0 || i + 1 == c->size()) {
        const auto frames = c->state_after(i);
        REQUIRE(frames.size() == 1);
        CHECK(frames[0].stack == ex.stacks[g]);
      }
    }
    for (const auto& [key, v] : c->values)
      if (static_cast<size_t>(key.second) == ex.big_repr_id) {
        big_seen = true;
        CHECK(v.repr.size() == ex.big_repr_size);
      }
  }
  CHECK(seen == 3u * n);
  CHECK(big_seen);
  // Events: three compiles in order, their guards, and the hits between the compiles they
  // happened between, counted (one event per entry and flush, with a count).
  std::vector<std::string> order;
  int guards = 0, hits0 = 0, hits1 = 0;
  for (const json& e : (*t)->events()) {
    const std::string ty = e.value("t", "");
    if (ty == "guard") ++guards;
    else if (ty == "compile_start" || ty == "compile_end") order.push_back(ty + e.value("id", ""));
    else if (ty == "cache" && e.value("kind", "") == "hit") {
      const std::string h = "hit" + e.value("entry_id", "");
      if (order.empty() || order.back() != h) order.push_back(h);  // the flusher may split a run of hits
      (e.value("entry_id", "") == "0/0" ? hits0 : hits1) += e.value("count", 0);
    }
  }
  CHECK(guards == 3 * (n / 100));
  CHECK(hits0 == 1000);
  CHECK(hits1 == 7);
  const std::vector<std::string> want{"compile_start0/0", "compile_end0/0", "hit0/0", "compile_start1/0", "compile_end1/0",
                                      "hit1/0", "compile_start2/0", "compile_end2/0"};
  CHECK(order == want);
  fs::remove(p);
}

TEST_CASE("recorder: cache hits of an idle engine are written by the flusher", "[recorder]") {
  const std::string p = tmp("idle.dyn");
  auto r = Recorder::create(p, json::object(), {}, /*flush_ms=*/5);
  REQUIRE(r);
  Recorder& rec = **r;
  Expect ex;
  int next_id = 1;
  compile(rec, 0, 200, next_id, ex);
  hits(rec, 0, 42);
  // The engine makes no further event: the flusher alone must put the hits on disk.
  int count = -1;
  for (int tries = 0; tries < 200 && count != 42; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    auto t = trace::TraceReader::open(p);  // the recorder is still open: no footer, chunks scanned
    REQUIRE(t);
    CHECK_FALSE((*t)->has_footer());
    count = 0;
    for (const json& e : (*t)->events())
      if (e.value("t", "") == "cache") count += e.value("count", 0);
  }
  CHECK(count == 42);
  CHECK(rec.close().error.empty());
  fs::remove(p);
}
