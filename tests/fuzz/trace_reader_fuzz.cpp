// libFuzzer target for the .dyn reader: any bytes -> open, decode every chunk, rebuild the state at
// each chunk's last step. Must never crash, hang or trip ASan/UBSan. Built with clang by CMake and
// run for a bounded time by ctest (trace_reader_fuzz); seeded with a valid trace it writes itself.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/trace.h"

using namespace dv::trace;

static std::string g_path;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_path = "/tmp/dv_trace_fuzz_" + std::to_string(getpid()) + ".dyn";
  std::atexit([] { std::remove(g_path.c_str()); });  // libFuzzer ends with exit()
  if (const char* dir = std::getenv("DV_FUZZ_SEED_DIR")) {  // a valid seed trace with a few chunks
    WriterOptions o;
    o.chunk_steps = 8;
    auto w = TraceWriter::create(std::string(dir) + "/seed.dyn", {{"seed", true}}, o);
    if (w) {
      std::vector<int32_t> stack;
      for (int i = 0; i < 40; ++i) {
        if (i % 10 == 0) (*w)->event({{"t", "compile_start"}, {"c", i / 10}});
        stack.push_back(i + 1);
        if (stack.size() > 3) stack.erase(stack.begin());
        (*w)->value({static_cast<uint32_t>(i / 10), i + 1, static_cast<uint64_t>(i), "tensor", "f32[2]", "Tensor", "L['x']", "f32[2] cpu", i});
        std::pair<int32_t, int32_t> loc{0, i + 1};
        (*w)->step({static_cast<uint32_t>(i / 10), static_cast<uint16_t>(i % 10 < 5 ? 0 : 1), i % 10 == 0 || i % 10 == 5, 1,
                    static_cast<uint32_t>(2 * (i % 10)), 100, i, 1 + i, stack.data(), stack.size(), &loc, 1});
      }
      (*w)->close();
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    std::ofstream f(g_path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto r = TraceReader::open(g_path);
  if (!r) return 0;
  (*r)->total_steps();
  for (size_t k = 0; k < (*r)->chunks().size(); ++k) {
    auto c = (*r)->chunk(k);
    if (c && c->size()) c->state_after(c->size() - 1);
  }
  return 0;
}
