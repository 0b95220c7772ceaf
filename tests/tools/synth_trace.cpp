// Writes a synthetic .dyn trace of N steps (default 10M) shaped like real captures: compiles of
// ~100k steps, unrolled loops of ~24-instruction bodies, inlined calls 1-3 deep, a new value for
// about every other step, guards, graph nodes and a break now and then. Used by
// tests/benchmarks/trace_open.py and the viewer benchmarks.
//   dv_synth_trace OUT.dyn [--steps N] [--seed S]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/trace.h"

using dv::trace::StepIn;
using dv::trace::ValueIn;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: dv_synth_trace OUT.dyn [--steps N] [--seed S]\n");
    return 64;
  }
  uint64_t total = 10'000'000;
  unsigned seed = 1;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--steps")) total = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--seed")) seed = static_cast<unsigned>(std::strtoul(argv[i + 1], nullptr, 10));
  }
  auto w = dv::trace::TraceWriter::create(argv[1], nlohmann::json{{"format", "dynview trace"}, {"synthetic", true}, {"pid", 1}});
  if (!w) {
    std::fprintf(stderr, "dv_synth_trace: %s\n", w.error().message().c_str());
    return 2;
  }
  auto& tw = **w;
  std::mt19937 rng(seed);
  // A loop body: (opcode, stack effect) — LOAD_FAST, LOAD_CONST, BINARY_OP, STORE_FAST, LOAD_ATTR...
  const uint8_t body_ops[] = {124, 124, 122, 125, 124, 100, 122, 125, 116, 124, 166, 171, 125, 124, 106, 124, 122, 125, 124, 100, 107, 114, 124, 140};
  const int body_n = sizeof body_ops;
  static const char* metas[] = {"f32[8, 16] cpu", "f32[16, 16] cpu", "f32[8] cpu", "i64[8] cpu"};
  uint64_t step = 0;
  uint32_t compile = 0;
  while (step < total) {
    const uint64_t csteps = std::min<uint64_t>(total - step, 80'000 + rng() % 40'000);
    const int frame = static_cast<int>(compile);
    tw.event({{"t", "compile_start"}, {"c", compile}, {"id", std::to_string(frame) + "/0"}, {"frame", frame}, {"recompile", 0},
              {"code", 1}, {"qualname", "Model.forward"}, {"filename", "model.py"}, {"firstlineno", 10},
              {"reason", "first call"}, {"step", step}, {"us", tw.micros()}});
    int32_t next_id = 1;
    std::vector<std::vector<int32_t>> stacks(1);
    std::vector<int32_t> code_at(1, 1);
    uint32_t offset = 0;
    int line = 10;
    auto new_value = [&](uint64_t at) {
      const int32_t id = next_id++;
      tw.value(ValueIn{compile, id, at, "tensor", metas[id % 4], "Tensor", id < 4 ? "L['x']" : "", metas[id % 4], id});
      return id;
    };
    for (uint64_t i = 0; i < csteps; ++i, ++step) {
      const size_t depth = stacks.size() - 1;
      bool start = i == 0;
      // Calls and returns every few hundred steps, up to depth 3.
      if (!start && i % 97 == 0) {
        if (depth < 3 && rng() % 2) {
          stacks.emplace_back();
          code_at.push_back(2 + static_cast<int32_t>(depth));
          start = true;
        } else if (depth > 0) {
          stacks.pop_back();
          code_at.pop_back();
        }
      }
      const size_t d = stacks.size() - 1;
      auto& st = stacks[d];
      const uint8_t op = start ? 151 : body_ops[i % body_n];
      offset = start ? 0 : (offset + 2 * (1 + (op == 106 ? 4 : op == 122 ? 1 : 0))) % 400;
      if (i % body_n == 0) line = 10 + static_cast<int>((i / body_n) % 30);
      if (op == 124 || op == 100 || op == 116 || op == 106) {
        st.push_back(op == 124 && next_id > 4 ? 1 + static_cast<int32_t>(rng() % 4) : new_value(step));
      } else if (op == 122 || op == 107) {
        if (st.size() >= 2) st.pop_back(), st.back() = new_value(step);
      } else if (!st.empty()) {
        st.pop_back();
      }
      if (st.size() > 6) st.erase(st.begin());
      std::pair<int32_t, int32_t> local{static_cast<int32_t>(i % 5), st.empty() ? 0 : st.back()};
      const bool store = op == 125;
      tw.step(StepIn{compile, static_cast<uint16_t>(d), start, code_at[d], offset, op, static_cast<int32_t>(i % 7), line,
                     st.data(), st.size(), &local, store ? 1u : 0u});
      if (i % 5000 == 17)
        tw.event({{"t", "guard"}, {"c", compile}, {"i", i / 5000}, {"kind", "TENSOR_MATCH"}, {"text", "check_tensor(L['x'])"},
                  {"step", step}, {"line", line}});
      if (i % 1000 == 3)
        tw.event({{"t", "node"}, {"c", compile}, {"node", i / 1000}, {"step", step}, {"op", "call_function"}, {"target", "add"}});
    }
    if (compile % 7 == 3)
      tw.event({{"t", "break"}, {"c", compile}, {"break_id", "DV0002"}, {"message", "data-dependent branch"}, {"hint", ""},
                {"filename", "model.py"}, {"line", line}, {"offset", offset}, {"step", step - 1}, {"stack", nlohmann::json::array()}});
    tw.event({{"t", "compile_end"}, {"c", compile}, {"id", std::to_string(frame) + "/0"}, {"outcome", compile % 7 == 3 ? "break (eager)" : "graph"},
              {"graphs", compile % 7 == 3 ? 0 : 1}, {"guards", csteps / 5000}, {"seconds", 0.5}, {"steps", csteps}, {"us", tw.micros()}});
    ++compile;
  }
  auto c = tw.close();
  if (!c) {
    std::fprintf(stderr, "dv_synth_trace: %s\n", c.error().message().c_str());
    return 2;
  }
  std::printf("%llu steps, %u compiles, %u chunks, %llu bytes\n", static_cast<unsigned long long>(tw.steps()), compile,
              tw.chunks(), static_cast<unsigned long long>(tw.bytes()));
  return 0;
}
