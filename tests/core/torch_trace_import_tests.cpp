// TORCH_TRACE import: a small log written here in torch.compile's format (glog-prefixed JSON
// envelopes, tab-prefixed payloads, interned file names) imports into a .dyn whose compiles,
// breaks, guards, graphs and recompiles read back; the log cut at every byte imports a prefix of
// it or fails with a message, never crashes; md5 against RFC 1321's test vectors.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "core/json_get.h"
#include "core/reports.h"
#include "core/torch_trace_import.h"
#include "core/trace.h"

namespace fs = std::filesystem;
using namespace dv;

namespace {

std::string tmp(const std::string& name) { return (fs::temp_directory_path() / ("dv_tt_" + std::to_string(getpid()) + "_" + name)).string(); }
void spit(const std::string& p, const std::string& b) { std::ofstream(p, std::ios::binary) << b; }

std::string rec(const std::string& env, const std::string& payload = "") {
  std::string line = "V1123 15:10:05.782000 4242 torch/_dynamo/x.py:1] ";
  if (payload.empty()) return line + "{" + env + "}\n";
  std::string body = "\t";
  for (char c : payload) body += c == '\n' ? std::string("\n\t") : std::string(1, c);
  return line + "{" + env + ", \"has_payload\": \"" + torch_trace::md5_hex(payload) + "\"}\n" + body + "\n";
}

std::string sample_log() {
  const std::string ids00 = R"("frame_id": 0, "frame_compile_id": 0, "attempt": 0)";
  const std::string ids01 = R"("frame_id": 0, "frame_compile_id": 1, "attempt": 0)";
  std::string s;
  s += rec(R"("str": ["/src/model.py", 1])");
  s += rec(R"("dynamo_start": {"stack": [{"line": 3, "name": "f", "filename": 1}]}, )" + ids00);
  s += rec(R"("artifact": {"name": "dynamo_graph_break_reason", "encoding": "string"}, )" + ids00,
           "Graph break in user code at /src/model.py:5\nGraph Break Reason: Encountered graph break when attempting to trace CALL:\n\n"
           "Failed to trace builtin operator\n  Explanation: print\n  Hint: avoid print\n\n For more details, see https://x/gb/gb0059.html\n\n"
           "User code traceback:\n  File \"/src/model.py\", line 5, in f\n    print(x)\n");
  s += rec(R"("dynamo_output_graph": {"sizes": {}}, )" + ids00,
           "class GraphModule(torch.nn.Module):\n    def forward(self, L_x_: \"f32[3, 4][4, 1]cpu\"):\n        l_x_ = L_x_\n"
           "        sin: \"f32[3, 4][4, 1]cpu\" = l_x_.sin();  l_x_ = None\n        add: \"f32[3, 4][4, 1]cpu\" = sin + 1;  sin = None\n"
           "        return (add,)\n");
  s += rec(R"("dynamo_cpp_guards_str": {}, )" + ids00,
           "\nTREE_GUARD_MANAGER:\n+- RootGuardManager\n| +- DEFAULT_DEVICE: utils_device.CURRENT_DEVICE == None  # _dynamo/output_graph.py:1 in init\n"
           "| +- GuardManager: source=L['x'], accessed_by=FrameLocalsGuardAccessor(key='x')\n"
           "| | +- TENSOR_MATCH: check_tensor(L['x'], Tensor, torch.float32, size=[3, 4], stride=[4, 1])  # y = x.sin()  # c/model.py:4 in f\n"
           "+- LAMBDA_GUARD: 2 <= L['x'].size()[0]  # y = x.sin()  # c/model.py:4 in f\n\nGuard latency = 1.0 us\n");
  s += rec(R"("compilation_metrics": {"compile_id": "0/0", "co_name": "f", "co_filename": "/src/model.py", "co_firstlineno": 3, "start_time": 100.0, "entire_frame_compile_time_s": 0.5, "graph_op_count": 2, "fail_type": null}, )" + ids00);
  s += rec(R"("some_new_kind": {"x": 1}, )" + ids00);
  s += rec(R"("artifact": {"name": "recompile_reasons", "encoding": "json"}, )" + ids01, "[\n\"0/0: tensor 'x' dtype mismatch. expected Float, actual Double\"\n]");
  s += rec(R"("dynamo_start": {"stack": [{"line": 3, "name": "f", "filename": 1}]}, )" + ids01);
  s += rec(R"("compilation_metrics": {"compile_id": "0/1", "co_name": "f", "co_filename": "/src/model.py", "co_firstlineno": 3, "start_time": 101.0, "entire_frame_compile_time_s": 0.25, "fail_type": null}, )" + ids01);
  return s;
}

}  // namespace

TEST_CASE("md5 matches RFC 1321's test suite", "[torch_trace]") {
  CHECK(torch_trace::md5_hex("") == "d41d8cd98f00b204e9800998ecf8427e");
  CHECK(torch_trace::md5_hex("abc") == "900150983cd24fb0d6963f7d28e17f72");
  CHECK(torch_trace::md5_hex("message digest") == "f96b697d7cb7938d525a2f31aaf161d0");
  CHECK(torch_trace::md5_hex("12345678901234567890123456789012345678901234567890123456789012345678901234567890") ==
        "57edf4a22be3c955ac49da2e2107b67a");
}

TEST_CASE("a TORCH_TRACE log imports into compiles, breaks, guards, graphs and recompiles", "[torch_trace]") {
  const std::string log = tmp("sample.log"), out = tmp("sample.dyn");
  spit(log, sample_log());
  REQUIRE(torch_trace::looks_like_torch_trace(log));
  auto st = torch_trace::import({log}, out);
  REQUIRE(st);
  CHECK(st->problems.empty());
  CHECK(st->compiles == 2);
  CHECK(st->recompiles == 1);
  CHECK(st->unknown.at("some_new_kind") == 1);
  auto r = trace::TraceReader::open(out);
  REQUIRE(r);
  const auto e = reports::explain(**r);
  REQUIRE(e["compiles"].size() == 2);
  const auto& c0 = e["compiles"][0];
  CHECK(c0["compile_id"] == "[0/0]");
  CHECK(c0["qualname"] == "f");
  CHECK(c0["firstlineno"] == 3);
  CHECK(c0["seconds"] == 0.5);
  REQUIRE(c0["breaks"].size() == 1);
  CHECK(c0["breaks"][0]["break_id"] == "GB0059");
  CHECK(c0["breaks"][0]["line"] == 5);
  CHECK(json_get<std::string>(c0["breaks"][0], "reason", "").rfind("Failed to trace builtin operator\n  Explanation: print", 0) == 0);
  CHECK(c0["breaks"][0]["hint"] == "avoid print");
  CHECK(c0["breaks"][0]["user_stack"] == nlohmann::json::array({"/src/model.py:5 in f"}));
  REQUIRE(c0["graphs"].size() == 1);
  CHECK(c0["graphs"][0]["op_counts"] == nlohmann::json({{"sin", 1}, {"operator.add", 1}}));
  REQUIRE(c0["guards"].size() == 3);
  CHECK(c0["guards"][0]["kind"] == "DEFAULT_DEVICE");
  CHECK(c0["guards"][0]["line"] == -1);  // torch's own code, not a user line
  CHECK(c0["guards"][1]["kind"] == "TENSOR_MATCH");
  CHECK(c0["guards"][1]["line"] == 4);
  CHECK(c0["guards"][2]["kind"] == "SHAPE_ENV");
  const auto& c1 = e["compiles"][1];
  CHECK(c1["compile_id"] == "[0/1]");
  CHECK(c1["reason"] == "0/0: tensor 'x' dtype mismatch. expected Float, actual Double");
  const auto rc = reports::recompiles(**r);
  REQUIRE(rc["count"] == 1);
  CHECK(rc["recompiles"][0]["compile_id"] == "[0/1]");
  CHECK(rc["recompiles"][0]["failures"][0]["guard"]["kind"] == "TENSOR_MATCH");
  fs::remove(log);
  fs::remove(out);
}

TEST_CASE("a TORCH_TRACE log cut at every byte imports a prefix or says why, never crashes", "[torch_trace]") {
  const std::string full = sample_log(), log = tmp("cut.log"), out = tmp("cut.dyn");
  size_t last_compiles = 0;
  for (size_t cut = 0; cut <= full.size(); ++cut) {
    spit(log, full.substr(0, cut));
    auto st = torch_trace::import({log}, out);
    if (!st) {
      CHECK(!st.error().message().empty());
      continue;
    }
    const size_t n = static_cast<size_t>(st->compiles);
    CHECK(n >= last_compiles);  // more log, never fewer compiles
    last_compiles = n;
    // a cut inside a line is reported, unless it took nothing of the payload (the newline after a
    // payload line, or the tab-only last line of one): the md5 still matches
    const size_t bol = full.rfind('\n', cut - 1) + 1;  // the cut line's start (0 when none)
    const bool lossless = cut > 0 && full[bol] == '\t' && (full[cut] == '\n' || cut == bol + 1);
    INFO("cut at " << cut << ": ..." << full.substr(cut > 40 ? cut - 40 : 0, std::min<size_t>(cut, 40)));
    if (cut < full.size() && full[cut - 1] != '\n' && !lossless) CHECK(!st->problems.empty());
    auto r = trace::TraceReader::open(out);
    REQUIRE(r);
    CHECK(reports::explain(**r)["compiles"].size() == n);
  }
  CHECK(last_compiles == 2);
  fs::remove(log);
  fs::remove(out);
}

TEST_CASE("foreign and empty input is an error that says what it is", "[torch_trace]") {
  const std::string log = tmp("bad.log"), out = tmp("bad.dyn");
  spit(log, "");
  auto st = torch_trace::import({log}, out);
  REQUIRE(!st);
  CHECK(st.error().message().find("empty log") != std::string::npos);
  spit(log, "hello world\nthis is not a trace\n");
  CHECK(!torch_trace::looks_like_torch_trace(log));
  st = torch_trace::import({log}, out);
  REQUIRE(!st);
  CHECK(st.error().message().find("not a TORCH_TRACE log") != std::string::npos);
  fs::remove(log);
  fs::remove(out);
}
