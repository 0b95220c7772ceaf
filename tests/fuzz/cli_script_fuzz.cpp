// libFuzzer target for the dynview executable's text inputs: the first line of the input is split
// into an argument vector for the trace subcommands' and the viewer's argument parsers
// (viewer/cli_args.cpp); every later line is a --script command run by the viewer's App::command
// on a small trace written at start-up (no window: commands act on the model only). Must never
// crash, hang or trip ASan/UBSan. Built with clang by CMake and run for a bounded time by ctest.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/trace.h"
#include "viewer/app.h"
#include "viewer/cli_args.h"

using namespace dv;

static std::unique_ptr<view::Model> g_model;
static std::unique_ptr<view::App> g_app;

// A trace with two compiles (code objects, guards, nodes, a break, values, steps in 4 chunks).
static std::string write_trace() {
  const std::string path = "/tmp/dv_cli_fuzz_" + std::to_string(getpid()) + ".dyn";
  trace::WriterOptions o;
  o.chunk_steps = 8;
  auto w = trace::TraceWriter::create(path, {{"pid", 1}}, o);
  if (!w) std::abort();
  std::vector<int32_t> stack;
  for (int i = 0; i < 32; ++i) {
    const uint32_t c = static_cast<uint32_t>(i / 16);
    if (i % 16 == 0) {
      (*w)->event({{"t", "compile_start"}, {"c", c}, {"id", std::to_string(c) + "/0"}, {"frame", c}, {"recompile", 0},
                   {"code", 1}, {"qualname", "f"}, {"filename", "f.py"}, {"firstlineno", 1}, {"reason", "first call"},
                   {"step", i}, {"us", i}});
      (*w)->event({{"t", "guard"}, {"c", c}, {"i", 0}, {"kind", "TENSOR_MATCH"}, {"text", "L['x']"}, {"step", i + 1}, {"line", 2}});
      (*w)->event({{"t", "node"}, {"c", c}, {"node", "relu"}, {"step", i + 2}, {"op", "call_function"}, {"target", "relu"}});
      (*w)->event({{"t", "graph"}, {"c", c}, {"code", "def forward(x): ..."}, {"ops", 1},
                   {"nodes", {{{"name", "relu"}, {"op", "call_function"}, {"target", "relu"}, {"args", "(x,)"}, {"meta", "f32[2]"}, {"step", i + 2}}}}});
      stack.clear();
    }
    if (i % 16 == 9) (*w)->event({{"t", "break"}, {"c", c}, {"break_id", "DV0001"}, {"message", "m"}, {"hint", "h"},
                                  {"filename", "f.py"}, {"line", 3}, {"offset", 4}, {"step", i}, {"stack", nlohmann::json::array()}});
    stack.push_back(i + 1);
    if (stack.size() > 3) stack.erase(stack.begin());
    (*w)->value({c, i + 1, static_cast<uint64_t>(i), "tensor", "f32[2]", "Tensor", "L['x']", "f32[2] cpu", -1});
    std::pair<int32_t, int32_t> loc{0, i + 1};
    (*w)->step({c, 0, i % 16 == 0, 1, static_cast<uint32_t>(2 * (i % 16)), 100, i, 1 + i % 5, stack.data(), stack.size(), &loc, 1});
    if (i % 16 == 15) (*w)->event({{"t", "compile_end"}, {"c", c}, {"id", std::to_string(c) + "/0"}, {"outcome", "graph"},
                                   {"graphs", 1}, {"guards", 1}, {"seconds", 0.001}, {"steps", 16}, {"us", i}});
  }
  if (!(*w)->close()) std::abort();
  return path;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string path = write_trace();
  auto m = view::Model::open(path);
  std::remove(path.c_str());  // the model keeps its descriptor
  if (!m) std::abort();
  g_model = std::move(*m);
  g_app = std::make_unique<view::App>(*g_model);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::string line;
  std::getline(in, line);
  // argv: whitespace-separated words of the first line
  std::vector<std::string> words;
  std::istringstream ws(line);
  for (std::string w; ws >> w && words.size() < 32;) words.push_back(w);
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const int argc = static_cast<int>(words.size());
  for (const char* cmd : {"explain", "recompiles", "check", "stats", "export"}) {
    cli::TraceArgs a;
    (void)cli::parse_trace_args(cmd, argc, argv.data(), a);
  }
  view::ViewerOptions o;
  (void)cli::parse_view_args(argc, argv.data(), o);
  // script commands
  for (int n = 0; std::getline(in, line) && n < 64; ++n) (void)g_app->command(line);
  return 0;
}
