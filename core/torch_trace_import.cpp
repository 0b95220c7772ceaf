// TORCH_TRACE import (see torch_trace_import.h; the record mapping is in core/TRACE.md).
// A log is glog-prefixed JSON envelopes, one per line ("V1123 15:10:05.782000 6857 file.py:12] {...}"),
// each optionally followed by its payload as tab-prefixed lines. Envelopes name a compile with
// frame_id / frame_compile_id / attempt; "str" records intern file names used by stacks.
#include "torch_trace_import.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <tuple>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "json_get.h"
#include "trace.h"

namespace dv::torch_trace {
using nlohmann::json;

// ---- md5 (RFC 1321), to check that the last payload of a log is whole ------------------------
std::string md5_hex(std::string_view data) {
  static const uint32_t K[64] = {
      0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501, 0x698098d8, 0x8b44f7af,
      0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821, 0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa,
      0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8, 0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8,
      0x676f02d9, 0x8d2a4c8a, 0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
      0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665, 0xf4292244, 0x432aff97,
      0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1, 0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1,
      0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391};
  static const int S[64] = {7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9,  14, 20, 5, 9,
                            14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                            4,  11, 16, 23, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};
  uint32_t h[4] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
  std::string msg(data);
  const uint64_t bits = static_cast<uint64_t>(data.size()) * 8;
  msg.push_back(static_cast<char>(0x80));
  while (msg.size() % 64 != 56) msg.push_back(0);
  for (int i = 0; i < 8; ++i) msg.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  for (size_t off = 0; off < msg.size(); off += 64) {
    uint32_t w[16];
    for (int i = 0; i < 16; ++i) {
      const auto* p = reinterpret_cast<const uint8_t*>(msg.data() + off + 4 * i);
      w[i] = p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
    for (int i = 0; i < 64; ++i) {
      uint32_t f;
      int g;
      if (i < 16) f = (b & c) | (~b & d), g = i;
      else if (i < 32) f = (d & b) | (~d & c), g = (5 * i + 1) % 16;
      else if (i < 48) f = b ^ c ^ d, g = (3 * i + 5) % 16;
      else f = c ^ (b | ~d), g = (7 * i) % 16;
      const uint32_t t = d;
      d = c;
      c = b;
      const uint32_t x = a + f + K[i] + w[g];
      b = b + ((x << S[i]) | (x >> (32 - S[i])));
      a = t;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d;
  }
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (uint32_t v : h)
    for (int i = 0; i < 4; ++i) {
      const uint8_t byte = (v >> (8 * i)) & 0xff;
      out.push_back(hex[byte >> 4]);
      out.push_back(hex[byte & 15]);
    }
  return out;
}

namespace {

// ---- what one log holds, by compile ----------------------------------------------------------

struct Guard {
  std::string kind, text;
  int line = -1;
};
struct Node {
  std::string name, op, target, args, meta;
};
struct Graph {
  std::string code;
  std::vector<Node> nodes;
  int ops = 0;
};
struct Break {
  std::string break_id, message, hint, filename;
  int line = -1;
  std::vector<std::string> stack;
};
struct Compile {
  int frame = -1, fcid = -1, attempts = 0;
  std::string qualname, filename;
  int firstlineno = 0;
  std::vector<std::string> user_stack;
  std::vector<std::string> recompile_failures;  // "2/0: tensor 'x' dtype mismatch ..."
  bool has_metrics = false;
  json metrics;  // compilation_metrics without its big config strings
  std::vector<Guard> guards;
  std::vector<Graph> graphs;
  std::vector<Break> breaks;
  std::vector<json> extra;  // symbol, shape_guard, bytecode, artifact, tt_record events (in log order)
};

struct Process {
  std::string log;
  int64_t pid = -1, rank = -1;
  std::vector<Compile> compiles;                 // in order of first appearance
  std::map<std::pair<int, int>, size_t> index;   // (frame, frame compile) -> compiles
  std::vector<json> global_extra;                // records outside any compile
  std::string torch_version;
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}
bool starts(std::string_view s, std::string_view p) { return s.size() >= p.size() && s.compare(0, p.size(), p) == 0; }

std::vector<std::string_view> lines_of(std::string_view s) {
  std::vector<std::string_view> out;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t nl = s.find('\n', at);
    if (nl == std::string_view::npos) {
      if (at < s.size()) out.push_back(s.substr(at));
      break;
    }
    out.push_back(s.substr(at, nl - at));
    at = nl + 1;
  }
  return out;
}

int parse_int(std::string_view s, int fallback) {
  if (s.empty()) return fallback;
  int v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return fallback;
    v = v * 10 + (ch - '0');
  }
  return v;
}

// dynamo_cpp_guards_str: the guard manager tree. Leaves are "+- KIND: text  # user code  # file:line in fn";
// "...GuardManager:" lines are the tree's accessors, not guards. Leaves at the top level after the
// root's subtree are the shape-env guards (symbolic sizes).
std::vector<Guard> parse_guards(std::string_view payload) {
  std::vector<Guard> out;
  for (std::string_view l : lines_of(payload)) {
    const size_t plus = l.find("+- ");
    if (plus == std::string_view::npos) continue;
    std::string_view body = l.substr(plus + 3);
    if (body.find("GuardManager") != std::string_view::npos && body.find("GuardManager") < body.find(':')) continue;
    Guard g;
    size_t k = 0;
    while (k < body.size() && (std::isupper(static_cast<unsigned char>(body[k])) || body[k] == '_' || std::isdigit(static_cast<unsigned char>(body[k])))) ++k;
    if (k == 0) continue;
    g.kind = std::string(body.substr(0, k));
    std::string_view rest = k < body.size() && body[k] == ':' ? body.substr(k + 1) : body.substr(k);
    const size_t hash = rest.find("  # ");
    std::string_view text = hash == std::string_view::npos ? rest : rest.substr(0, hash);
    g.text = std::string(trim(text));
    if (g.text.empty()) g.text = g.kind;
    if (hash != std::string_view::npos && rest.rfind("  # ") != hash) {
      // "  # user code  # file:line in fn": the user line (a lone "# file:line" is torch's own code)
      std::string_view where = rest.substr(rest.rfind("  # ") + 4);
      const size_t in = where.find(" in ");
      std::string_view fl = in == std::string_view::npos ? where : where.substr(0, in);
      const size_t colon = fl.rfind(':');
      if (colon != std::string_view::npos) g.line = parse_int(trim(fl.substr(colon + 1)), -1);
    }
    if (plus == 0 && g.kind == "LAMBDA_GUARD") g.kind = "SHAPE_ENV";  // top level: shape env guards
    out.push_back(std::move(g));
  }
  return out;
}

// The target of an FX expression as printed by GraphModule.print_readable.
void classify(std::string_view expr, Node& n) {
  static const std::pair<const char*, const char*> binops[] = {
      {" ** ", "operator.pow"}, {" // ", "operator.floordiv"}, {" >= ", "operator.ge"}, {" <= ", "operator.le"},
      {" == ", "operator.eq"},  {" != ", "operator.ne"},       {" + ", "operator.add"},  {" - ", "operator.sub"},
      {" * ", "operator.mul"},  {" / ", "operator.truediv"},   {" @ ", "operator.matmul"}, {" > ", "operator.gt"},
      {" < ", "operator.lt"},   {" % ", "operator.mod"},       {" & ", "operator.and_"},  {" | ", "operator.or_"}};
  n.args = std::string(expr);
  const size_t paren = expr.find('(');
  const size_t space = expr.find(' ');
  if (paren != std::string_view::npos && (space == std::string_view::npos || paren < space)) {
    std::string_view head = expr.substr(0, paren);
    if (starts(head, "torch.") || starts(head, "operator.") || head.find('.') == std::string_view::npos) {
      n.op = "call_function";
      n.target = std::string(head);
    } else if (starts(head, "self.")) {
      n.op = "call_module";
      n.target = std::string(head.substr(5));
    } else {
      n.op = "call_method";
      n.target = std::string(head.substr(head.rfind('.') + 1));
    }
    return;
  }
  for (const auto& [tok, name] : binops)
    if (expr.find(tok) != std::string_view::npos) {
      n.op = "call_function";
      n.target = name;
      return;
    }
  if (starts(expr, "-")) n.op = "call_function", n.target = "operator.neg";
  else if (expr.find('[') != std::string_view::npos) n.op = "call_function", n.target = "operator.getitem";
  else n.op = "get_attr", n.target = std::string(expr);
}

// dynamo_output_graph: the graph's readable code. Placeholders from forward's signature, one node
// per annotated assignment of the top-level forward, the output from its return.
Graph parse_graph(std::string_view payload) {
  Graph g;
  g.code = std::string(payload);
  bool in_forward = false;
  for (std::string_view l : lines_of(payload)) {
    if (starts(l, "    def forward(")) {
      in_forward = true;
      std::string_view sig = l.substr(16);
      size_t at = 0;
      while (at < sig.size()) {
        const size_t colon = sig.find(": \"", at), comma = sig.find(", ", at);
        if (colon == std::string_view::npos) break;
        const size_t close = sig.find('"', colon + 3);
        if (close == std::string_view::npos) break;
        std::string_view name = trim(sig.substr(at, colon - at));
        if (starts(name, "self, ")) name = name.substr(6);
        if (comma != std::string_view::npos && comma < colon) name = trim(sig.substr(comma + 2, colon - comma - 2));
        g.nodes.push_back(Node{std::string(name), "placeholder", std::string(name), "", std::string(sig.substr(colon + 3, close - colon - 3))});
        at = close + 1;
      }
      continue;
    }
    if (!in_forward) continue;
    if (starts(l, "    ") && !starts(l, "        ") && !trim(l).empty()) {
      in_forward = false;  // a nested class or method ends the top-level forward
      continue;
    }
    if (!starts(l, "        ") || starts(l, "         ")) continue;
    std::string_view s = l.substr(8);
    if (starts(s, "#")) continue;
    if (starts(s, "return ")) {
      g.nodes.push_back(Node{"output", "output", "output", std::string(s.substr(7)), ""});
      continue;
    }
    const size_t ann = s.find(": \"");
    const size_t eq = s.find(" = ");
    if (ann == std::string_view::npos || eq == std::string_view::npos || ann > eq) continue;
    const size_t close = s.find('"', ann + 3);
    if (close == std::string_view::npos) continue;
    Node n;
    n.name = std::string(s.substr(0, ann));
    n.meta = std::string(s.substr(ann + 3, close - ann - 3));
    const size_t expr_at = s.find(" = ", close);
    if (expr_at == std::string_view::npos) continue;
    std::string_view expr = s.substr(expr_at + 3);
    const size_t semi = expr.find(";  ");
    if (semi != std::string_view::npos) expr = expr.substr(0, semi);
    classify(trim(expr), n);
    if (n.op.rfind("call_", 0) == 0) ++g.ops;
    g.nodes.push_back(std::move(n));
  }
  return g;
}

// dynamo_graph_break_reason: "Graph break in user code at FILE:LINE", "Graph Break Reason: ...",
// the explanation and hints, the gbNNNN link, "User code traceback:" and the compiler's traceback.
Break parse_break(std::string_view payload) {
  Break b;
  auto ls = lines_of(payload);
  size_t i = 0;
  std::string reason;
  bool in_reason = false, in_user = false;
  for (; i < ls.size(); ++i) {
    std::string_view l = ls[i];
    if (starts(l, "Graph break in user code at ")) {
      std::string_view at = l.substr(28);
      const size_t colon = at.rfind(':');
      if (colon != std::string_view::npos) {
        b.filename = std::string(at.substr(0, colon));
        b.line = parse_int(trim(at.substr(colon + 1)), -1);
      }
      continue;
    }
    if (starts(l, "Graph Break Reason: ")) {
      in_reason = true;
      reason = std::string(l.substr(20));
      continue;
    }
    if (starts(l, "User code traceback:")) {
      in_reason = false, in_user = true;
      continue;
    }
    if (starts(l, "Traceback (most recent call last)")) break;
    if (in_user) {
      std::string_view t = trim(l);
      if (starts(t, "File \"")) {  // File "x.py", line 4, in f
        const size_t q = t.find('"', 6);
        const size_t ln = t.find(", line ");
        const size_t in = t.find(", in ");
        if (q != std::string_view::npos && ln != std::string_view::npos) {
          std::string line_no(t.substr(ln + 7, in == std::string_view::npos ? std::string_view::npos : in - ln - 7));
          b.stack.push_back(std::string(t.substr(6, q - 6)) + ":" + line_no +
                            (in == std::string_view::npos ? "" : " in " + std::string(t.substr(in + 5))));
        }
      }
      continue;
    }
    if (in_reason) {
      std::string_view t = trim(l);
      if (starts(t, "Hint: ")) b.hint += (b.hint.empty() ? "" : "\n") + std::string(t.substr(6));
      const size_t gb = t.find("/gb/gb");
      if (gb != std::string_view::npos) {
        std::string id = "GB";
        for (size_t k = gb + 6; k < t.size() && std::isdigit(static_cast<unsigned char>(t[k])); ++k) id.push_back(t[k]);
        if (id.size() > 2) b.break_id = id;
      }
      reason += "\n" + std::string(l);
    }
  }
  // "Encountered graph break when attempting to trace X:" then a blank line introduces the reason
  // torch.compile counts (counters["graph_break"], explain's break_reasons): keep that text.
  if (starts(reason, "Encountered graph break") && reason.find("\n\n") != std::string::npos) reason = reason.substr(reason.find("\n\n") + 2);
  b.message = std::string(trim(reason));
  // break_id stays empty when the reason has no gbNNNN link (older torch, or an unregistered break)
  return b;
}

json stack_json(const json& stack, const std::unordered_map<int64_t, std::string>& strs) {
  json out = json::array();
  if (!stack.is_array()) return out;
  for (const json& f : stack) {
    std::string file = "?";
    if (f.contains("filename") && f["filename"].is_number_integer()) {
      auto it = strs.find(f["filename"].get<int64_t>());
      if (it != strs.end()) file = it->second;
    } else if (f.contains("filename") && f["filename"].is_string()) {
      file = f["filename"].get<std::string>();
    }
    out.push_back(file + ":" + std::to_string(json_get<int64_t>(f, "line", 0)) + " in " + json_get<std::string>(f, "name", "?"));
  }
  return out;
}

// Kinds the importer reads, and those it keeps only as artifacts (name and size).
const std::array<const char*, 22> kArtifactKinds = {
    "aot_forward_graph",      "aot_backward_graph",        "aot_joint_graph",          "aot_inference_graph",
    "inductor_pre_grad_graph", "inductor_post_grad_graph", "inductor_output_code",     "optimize_ddp_split_graph",
    "optimize_ddp_split_child", "compiled_autograd_graph", "graph_dump",               "dynamo_guards",
    "exported_program",       "bwd_compilation_metrics",   "aot_autograd_backward_compilation_metrics", "link",
    "dump_file",              "inductor_provenance_tracking_node_mappings", "fx_graph_cache_hit", "fx_graph_cache_miss",
    "aotautograd_cache_hit",  "aotautograd_cache_miss"};
const std::array<const char*, 9> kSkippedKinds = {"chromium_event", "describe_storage", "describe_tensor", "describe_source",
                                                  "str", "expression_created", "propagate_real_tensors_provenance",
                                                  "missing_fake_kernel", "mismatched_fake_kernel"};

// One log -> a Process. Stops at the first malformed line (problem says where); what precedes it is kept.
void read_log(const std::string& path, const std::string& data, Process& p, ImportStats& st) {
  p.log = path;
  std::unordered_map<int64_t, std::string> strs;
  const size_t n = data.size();
  size_t at = 0;
  int64_t lineno = 0;
  struct Pending {
    json env;
    std::string kind, md5;  // md5: the payload's, when the record announces one
    bool skip = false;      // a kind that is only counted (not parsed)
    size_t payload_begin = 0, payload_end = 0;  // byte range of the payload lines (tabs included)
    size_t begin = 0;
    int64_t line = 0;
    bool has = false;
  } cur;
  auto problem = [&](int64_t line, size_t off, const std::string& what) {
    st.problems.push_back(path + ": line " + std::to_string(line) + " (byte " + std::to_string(off) + "): " + what);
  };
  auto compile_of = [&](const json& env) -> Compile* {
    if (!env.contains("frame_id") || !env["frame_id"].is_number_integer()) return nullptr;
    const int f = env["frame_id"].get<int>(), c = json_get<int>(env, "frame_compile_id", 0);
    auto it = p.index.find({f, c});
    if (it == p.index.end()) {
      it = p.index.emplace(std::make_pair(f, c), p.compiles.size()).first;
      Compile x;
      x.frame = f, x.fcid = c;
      p.compiles.push_back(std::move(x));
    }
    Compile& x = p.compiles[it->second];
    x.attempts = std::max(x.attempts, json_get<int>(env, "attempt", 0) + 1);
    return &x;
  };
  auto payload_text = [&](const Pending& r) {
    std::string s;
    s.reserve(r.payload_end - r.payload_begin);
    size_t k = r.payload_begin;
    bool first = true;
    while (k < r.payload_end) {
      size_t nl = data.find('\n', k);
      if (nl == std::string::npos || nl > r.payload_end) nl = r.payload_end;
      if (!first) s.push_back('\n');
      first = false;
      s.append(data, k + 1, nl - k - 1);  // without the leading tab
      k = nl + 1;
    }
    return s;
  };
  // Interprets a finished record (its payload complete).
  auto interpret = [&](Pending& r) {
    if (!r.has) return;
    r.has = false;
    ++st.records;
    ++st.kinds[r.kind];
    if (r.skip) return;
    const json& env = r.env;
    const json body = env[r.kind].is_object() || r.kind == "str" ? env[r.kind] : json::object();
    if (r.kind == "str") {
      if (body.is_array() && body.size() == 2 && body[0].is_string() && body[1].is_number_integer())
        strs[body[1].get<int64_t>()] = body[0].get<std::string>();
      return;
    }
    if (p.rank < 0 && env.contains("rank") && env["rank"].is_number_integer()) p.rank = env["rank"].get<int64_t>();
    for (const char* k : kSkippedKinds)
      if (r.kind == k) {
        compile_of(env);
        return;
      }
    Compile* c = compile_of(env);
    auto extra = [&](json ev) {
      if (c) c->extra.push_back(std::move(ev));
      else p.global_extra.push_back(std::move(ev));
    };
    const size_t psize = r.payload_end > r.payload_begin ? r.payload_end - r.payload_begin : 0;
    if (r.kind == "dynamo_start") {
      if (c && body.contains("stack")) {
        const json s = stack_json(body["stack"], strs);
        c->user_stack.clear();
        for (const json& x : s) c->user_stack.push_back(x.get<std::string>());
        if (!body["stack"].empty()) {
          const json& last = body["stack"].back();
          if (c->qualname.empty()) c->qualname = json_get<std::string>(last, "name", "");
          if (c->firstlineno == 0) c->firstlineno = json_get<int>(last, "line", 0);
          if (c->filename.empty() && !s.empty()) {
            const std::string f = s.back().get<std::string>();
            c->filename = f.substr(0, f.rfind(':', f.rfind(" in ")));
          }
        }
      }
    } else if (r.kind == "compilation_metrics") {
      if (c) {
        c->has_metrics = true;
        c->metrics = json::object();
        for (auto& [k, v] : body.items())
          if (k != "dynamo_config" && k != "inductor_config" && k != "stack_trace" && k != "exception_stack_trace") c->metrics[k] = v;
        if (auto q = json_get<std::string>(body, "co_name", ""); !q.empty()) c->qualname = q;
        if (auto f = json_get<std::string>(body, "co_filename", ""); !f.empty()) c->filename = f;
        if (int l = json_get<int>(body, "co_firstlineno", 0)) c->firstlineno = l;
      }
    } else if (r.kind == "dynamo_output_graph") {
      if (c) {
        Graph g = parse_graph(payload_text(r));
        c->graphs.push_back(std::move(g));
      }
    } else if (r.kind == "dynamo_cpp_guards_str") {
      if (c) c->guards = parse_guards(payload_text(r));
    } else if (r.kind == "create_symbol" || r.kind == "create_unbacked_symbol") {
      json ev{{"t", "symbol"}, {"symbol", json_get<std::string>(body, "symbol", "")}, {"val", body.value("val", json(nullptr))},
              {"range", json_get<std::string>(body, "vr", "")}, {"source", json_get<std::string>(body, "source", "")},
              {"unbacked", r.kind == "create_unbacked_symbol"}, {"user_stack", stack_json(body.value("user_stack", json::array()), strs)}};
      extra(std::move(ev));
    } else if (r.kind == "guard_added" || r.kind == "guard_added_fast" || r.kind == "symbolic_shape_specialization") {
      json ev{{"t", "shape_guard"}, {"kind", r.kind}, {"expr", body.value("expr", body.value("symbol", json(""))).dump()},
              {"user_stack", stack_json(body.value("user_stack", json::array()), strs)}};
      if (body.contains("expr") && body["expr"].is_string()) ev["expr"] = body["expr"];
      if (r.kind == "symbolic_shape_specialization") ev["value"] = body.value("value", json(nullptr)), ev["source"] = body.value("source", json(nullptr));
      extra(std::move(ev));
    } else if (r.kind == "artifact") {
      const std::string name = json_get<std::string>(body, "name", "");
      const std::string enc = json_get<std::string>(body, "encoding", "");
      if (name == "torch_version") {
        try {
          p.torch_version = json::parse(payload_text(r)).value("pytorch_version", "");
        } catch (const json::exception&) {
        }
      } else if (name == "recompile_reasons") {
        if (c) {
          const std::string text = payload_text(r);
          c->recompile_failures.clear();
          bool parsed = false;
          try {
            const json j = json::parse(text);
            if (j.is_array()) {
              for (const json& x : j) c->recompile_failures.push_back(x.is_string() ? x.get<std::string>() : x.dump());
              parsed = true;
            } else if (j.is_string()) {
              c->recompile_failures.push_back(j.get<std::string>());
              parsed = true;
            }
          } catch (const json::exception&) {
          }
          if (!parsed)  // one reason is written as plain text
            for (std::string_view l : lines_of(text))
              if (!trim(l).empty()) c->recompile_failures.push_back(std::string(trim(l)));
        }
      } else if (name == "dynamo_graph_break_reason") {
        if (c) {
          Break b = parse_break(payload_text(r));
          bool dup = false;
          for (const Break& o : c->breaks) dup |= o.filename == b.filename && o.line == b.line && o.message == b.message;
          if (!dup) c->breaks.push_back(std::move(b));
        }
      } else {
        const size_t ob = name.rfind("_ORIGINAL_BYTECODE"), mb = name.rfind("_MODIFIED_BYTECODE");
        if (ob != std::string::npos && ob + 18 == name.size()) {
          extra(json{{"t", "bytecode"}, {"which", "original"}, {"name", name.substr(0, ob)}, {"text", payload_text(r)}});
        } else if (mb != std::string::npos && mb + 18 == name.size()) {
          extra(json{{"t", "bytecode"}, {"which", "modified"}, {"name", name.substr(0, mb)}, {"text", payload_text(r)}});
        } else {
          extra(json{{"t", "artifact"}, {"name", name}, {"encoding", enc}, {"bytes", psize}});
        }
      }
    } else {
      bool artifact = false;
      for (const char* k : kArtifactKinds) artifact |= r.kind == k;
      if (artifact) {
        std::string name = r.kind;
        if (body.is_object() && body.contains("filename") && body["filename"].is_string()) name += " " + body["filename"].get<std::string>();
        extra(json{{"t", "artifact"}, {"name", name}, {"kind", r.kind}, {"bytes", psize}});
      } else {
        ++st.unknown[r.kind];
        json rec = env;
        if (rec.contains("has_payload")) rec.erase("has_payload");
        extra(json{{"t", "tt_record"}, {"kind", r.kind}, {"record", rec}, {"payload_bytes", psize}});
      }
    }
  };

  // A known record of an unexpected shape is skipped (and said), never fatal.
  auto finish = [&](Pending& r) {
    try {
      interpret(r);
    } catch (const json::exception& e) {
      st.warnings.push_back(path + ": line " + std::to_string(r.line) + ": record '" + r.kind + "' skipped: " + e.what());
    }
  };
  while (at < n) {
    size_t nl = data.find('\n', at);
    const bool last_line = nl == std::string::npos;
    if (last_line) nl = n;
    std::string_view l(data.data() + at, nl - at);
    ++lineno;
    if (!l.empty() && l[0] == '\t') {
      if (!cur.has) {
        problem(lineno, at, "payload line without a record before it");
        return;
      }
      if (cur.payload_begin == 0) cur.payload_begin = at;
      cur.payload_end = nl;
      at = nl + 1;
      continue;
    }
    if (!cur.has || cur.md5.empty() || cur.payload_begin) finish(cur);
    else if (cur.has) {  // a record that announced a payload has none: truncated between them
      problem(cur.line, cur.begin, "record '" + cur.kind + "' announces a payload that is missing");
      return;
    }
    if (l.empty() && last_line) break;
    if (l.empty()) {
      at = nl + 1;
      continue;
    }
    // glog prefix: level letter, "MMDD HH:MM:SS.micros pid file:line] "
    const size_t close = l.find("] {");
    const char lvl = l[0];
    if (close == std::string_view::npos || !(lvl == 'V' || lvl == 'I' || lvl == 'W' || lvl == 'E' || lvl == 'F') || close < 10) {
      problem(lineno, at, lineno == 1 ? "not a TORCH_TRACE log (expected a line like 'V1123 15:10:05.782000 6857 file.py:12] {...}')"
                                      : "not a TORCH_TRACE record");
      return;
    }
    if (last_line && data.back() != '\n') {
      problem(lineno, at, "truncated record (the log ends inside it)");
      return;
    }
    Pending r;
    std::string kind;
    // The kinds only counted (most of a log's bytes: chromium events, tensor descriptions) are
    // not parsed: their kind is the envelope's first key.
    const std::string_view js = trim(l.substr(close + 2));
    if (starts(js, "{\"") && js.back() == '}') {
      const std::string_view first = js.substr(2, js.find('"', 2) - 2);
      for (const char* k : kSkippedKinds) r.skip |= first == k && first != "str";
      if (r.skip) {
        kind = std::string(first);
        if (const size_t h = js.find("\"has_payload\": \""); h != std::string_view::npos) r.md5 = std::string(js.substr(h + 16, 32));
      }
    }
    if (!r.skip) {
      try {
        r.env = json::parse(js);
      } catch (const json::exception& e) {
        problem(lineno, at, std::string("malformed record: ") + e.what());
        return;
      }
      if (r.env.is_object() && r.env.contains("has_payload") && r.env["has_payload"].is_string()) r.md5 = r.env["has_payload"].get<std::string>();
    }
    if (!r.skip && r.env.is_object())
      for (auto& [k, v] : r.env.items())
        if (k != "frame_id" && k != "frame_compile_id" && k != "attempt" && k != "has_payload" && k != "rank" &&
            k != "compiled_autograd_id" && k != "stack" && k != "pid") {
          kind = k;
          break;
        }
    if (kind.empty()) {
      problem(lineno, at, "record without a kind");
      return;
    }
    if (p.pid < 0) {
      // the pid is the third field of the glog prefix
      std::istringstream ss{std::string(l.substr(0, close))};
      std::string a, b;
      int64_t pid = -1;
      if (ss >> a >> b >> pid) p.pid = pid;
    }
    r.kind = std::move(kind);
    r.has = true;
    r.begin = at;
    r.line = lineno;
    cur = std::move(r);
    at = nl + 1;
  }
  // The last record: its payload must be whole (md5 in has_payload).
  if (cur.has && !cur.md5.empty()) {
    if (!cur.payload_begin || md5_hex(payload_text(cur)) != cur.md5) {
      problem(cur.line, cur.begin, "the last record's payload is truncated (md5 does not match)");
      return;
    }
  }
  finish(cur);
}

// Matches a recompile failure ("tensor 'x' dtype mismatch ...", "L['n'] == 2") to the entry's guard.
int failing_guard(const std::string& failure, const std::vector<Guard>& guards) {
  const size_t t = failure.find("tensor '");
  if (t != std::string::npos) {
    const size_t e = failure.find('\'', t + 8);
    const std::string name = failure.substr(t + 8, e == std::string::npos ? std::string::npos : e - t - 8);
    for (size_t i = 0; i < guards.size(); ++i)
      if (guards[i].kind == "TENSOR_MATCH" &&
          (guards[i].text.find("(L['" + name + "'],") != std::string::npos || guards[i].text.find("(" + name + ",") != std::string::npos))
        return static_cast<int>(i);
  }
  std::string f = failure;
  if (const size_t colon = f.find(": "); colon != std::string::npos && colon < 12) f = f.substr(colon + 2);  // "2/0: "
  for (size_t i = 0; i < guards.size(); ++i)
    if (!guards[i].text.empty() && (f.find(guards[i].text) != std::string::npos || guards[i].text.find(f) != std::string::npos))
      return static_cast<int>(i);
  return -1;
}

}  // namespace

bool looks_like_torch_trace(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::string line;
  line.resize(4096);
  f.read(line.data(), static_cast<std::streamsize>(line.size()));
  line.resize(static_cast<size_t>(f.gcount()));
  const size_t nl = line.find('\n');
  if (nl != std::string::npos) line.resize(nl);
  return !line.empty() && std::strchr("VIWEF", line[0]) && line.find("] {") != std::string::npos;
}

Result<std::vector<std::string>> find_logs(const std::string& dir_or_log) {
  struct stat st {};
  if (::stat(dir_or_log.c_str(), &st) != 0) return make_error(dir_or_log, "no such file or directory");
  if (!S_ISDIR(st.st_mode)) return std::vector<std::string>{dir_or_log};
  std::vector<std::string> out;
  DIR* d = ::opendir(dir_or_log.c_str());
  if (!d) return make_error(dir_or_log, "cannot read directory");
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string full = dir_or_log + "/" + name;
    struct stat fs {};
    if (::stat(full.c_str(), &fs) == 0 && S_ISREG(fs.st_mode)) out.push_back(full);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  if (out.empty()) return make_error(dir_or_log, "no TORCH_TRACE logs in this directory");
  return out;
}

Result<ImportStats> import(const std::vector<std::string>& logs, const std::string& out) {
  ImportStats st;
  std::vector<Process> procs;
  for (const std::string& path : logs) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
      st.problems.push_back(path + ": cannot open");
      continue;
    }
    std::string data;
    f.seekg(0, std::ios::end);
    data.resize(static_cast<size_t>(std::max<std::streamoff>(0, f.tellg())));
    f.seekg(0);
    f.read(data.data(), static_cast<std::streamsize>(data.size()));
    if (data.empty()) {
      st.problems.push_back(path + ": line 1 (byte 0): empty log");
      continue;
    }
    Process p;
    read_log(path, data, p, st);
    st.logs.push_back(path);
    if (!p.compiles.empty() || !p.global_extra.empty()) procs.push_back(std::move(p));
  }
  if (procs.empty()) {
    if (!st.problems.empty()) return make_error(st.problems.front(), "nothing to import");
    return make_error(logs.empty() ? "import" : logs.front(), "no TORCH_TRACE records");
  }

  // Times: compile start (epoch seconds) relative to the earliest compile of all processes.
  double t0 = 0;
  for (const Process& p : procs)
    for (const Compile& c : p.compiles)
      if (double s = json_get<double>(c.metrics, "start_time", 0.0); s > 0 && (t0 == 0 || s < t0)) t0 = s;
  json procs_meta = json::array();
  std::string torch_version;
  for (const Process& p : procs) {
    procs_meta.push_back(json{{"log", p.log}, {"pid", p.pid}, {"rank", p.rank < 0 ? json(nullptr) : json(p.rank)}, {"compiles", p.compiles.size()}});
    if (torch_version.empty()) torch_version = p.torch_version;
  }
  json meta{{"source", "TORCH_TRACE"}, {"imported_from", logs}, {"torch", torch_version}, {"pid", procs.front().pid},
            {"processes", procs_meta}, {"argv", json::array()}, {"dynview", "import"}};
  auto w = trace::TraceWriter::create(out, meta);
  if (!w) return w.error();
  trace::TraceWriter& tw = **w;

  int cidx = 0, code_ids = 0;
  for (size_t pi = 0; pi < procs.size(); ++pi) {
    Process& p = procs[pi];
    ++st.processes;
    std::map<std::tuple<std::string, std::string, int>, int> codes;  // (file, name, line) -> code id
    std::map<std::pair<int, int>, int> cidx_of;                      // (frame, fcid) -> trace compile index
    // Compiles in (frame, compile) order of first appearance already; resume functions come after their parent.
    for (size_t k = 0; k < p.compiles.size(); ++k) {
      Compile& c = p.compiles[k];
      const auto key = std::make_tuple(c.filename, c.qualname, c.firstlineno);
      auto ci = codes.find(key);
      if (ci == codes.end()) ci = codes.emplace(key, ++code_ids).first;
      const int code = ci->second;
      const double start = json_get<double>(c.metrics, "start_time", 0.0);
      const int64_t us = start > 0 && t0 > 0 ? static_cast<int64_t>((start - t0) * 1e6) : static_cast<int64_t>(cidx);
      const double secs = json_get<double>(c.metrics, "entire_frame_compile_time_s", 0.0);
      const std::string id = std::to_string(c.frame) + "/" + std::to_string(c.fcid);
      std::string reason = "first call";
      if (c.fcid > 0) {
        reason.clear();
        for (const std::string& f : c.recompile_failures) reason += (reason.empty() ? "" : "; ") + f;
        if (reason.empty()) reason = "recompile (the log has no reason)";
        // the cache event the viewer and `recompiles` read: the failing entry and its guard
        std::string entry_id = std::to_string(c.frame) + "/" + std::to_string(c.fcid - 1);
        if (!c.recompile_failures.empty()) {
          const std::string& f0 = c.recompile_failures.front();
          const size_t colon = f0.find(": ");
          if (colon != std::string::npos && colon < 12 && f0.find('/') < colon) entry_id = f0.substr(0, colon);
        }
        const int fr = std::atoi(entry_id.c_str());
        const int fc = std::atoi(entry_id.c_str() + entry_id.find('/') + 1);
        auto e = cidx_of.find({fr, fc});
        json failures = json::array(), guards = json::array(), entries = json::array(), entry_cs = json::array(), any_guards = json::array();
        for (const std::string& f : c.recompile_failures) {
          std::string eid = entry_id;
          const size_t colon = f.find(": ");
          if (colon != std::string::npos && colon < 12 && f.find('/') < colon) eid = f.substr(0, colon);
          failures.push_back(f);
          entries.push_back(eid);
          int gi = -1;
          const int efr = std::atoi(eid.c_str()), efc = std::atoi(eid.c_str() + std::min(eid.size(), eid.find('/') + 1));
          auto pe = p.index.find({efr, efc});
          if (pe != p.index.end()) gi = failing_guard(f, p.compiles[pe->second].guards);
          auto ec = cidx_of.find({efr, efc});
          entry_cs.push_back(ec == cidx_of.end() ? -1 : ec->second);
          guards.push_back(eid == entry_id ? gi : -1);
          any_guards.push_back(gi);
        }
        ++st.recompiles;
        tw.event(json{{"t", "cache"}, {"kind", "recompile"}, {"code", code}, {"qualname", c.qualname}, {"filename", c.filename},
                      {"firstlineno", c.firstlineno}, {"us", us}, {"entry_id", entry_id},
                      {"entry_c", e == cidx_of.end() ? -1 : e->second}, {"failures", failures}, {"guards", guards},
                      {"caused_c", cidx}, {"failure_entries", entries}, {"failure_entry_c", entry_cs}, {"failure_guards", any_guards},
                      {"process", pi}});
      }
      cidx_of[{c.frame, c.fcid}] = cidx;
      json restarts = c.metrics.is_object() && c.metrics.contains("restart_reasons") ? c.metrics["restart_reasons"] : json::array();
      tw.event(json{{"t", "compile_start"}, {"c", cidx}, {"id", id}, {"frame", c.frame}, {"recompile", c.fcid}, {"code", code},
                    {"qualname", c.qualname}, {"filename", c.filename}, {"firstlineno", c.firstlineno}, {"reason", reason},
                    {"step", 0}, {"us", us}, {"attempts", c.attempts}, {"restarts", restarts}, {"user_stack", c.user_stack},
                    {"process", pi}, {"pid", p.pid}, {"rank", p.rank < 0 ? json(nullptr) : json(p.rank)}});
      for (json& ev : c.extra) {
        ev["c"] = cidx;
        tw.event(ev);
      }
      for (size_t gi = 0; gi < c.guards.size(); ++gi) {
        const Guard& g = c.guards[gi];
        tw.event(json{{"t", "guard"}, {"c", cidx}, {"i", gi}, {"kind", g.kind}, {"text", g.text}, {"step", -1}, {"line", g.line}});
      }
      st.guards += static_cast<int>(c.guards.size());
      for (const Graph& g : c.graphs) {
        json nodes = json::array();
        for (const Node& nd : g.nodes)
          nodes.push_back(json{{"name", nd.name}, {"op", nd.op}, {"target", nd.target}, {"args", nd.args}, {"meta", nd.meta}, {"step", -1}});
        const int ops = c.graphs.size() == 1 && c.metrics.contains("graph_op_count") && c.metrics["graph_op_count"].is_number_integer()
                            ? c.metrics["graph_op_count"].get<int>() : g.ops;
        tw.event(json{{"t", "graph"}, {"c", cidx}, {"code", g.code}, {"ops", ops}, {"nodes", nodes}});
        ++st.graphs;
      }
      for (const Break& b : c.breaks) {
        tw.event(json{{"t", "break"}, {"c", cidx}, {"break_id", b.break_id}, {"message", b.message}, {"hint", b.hint},
                      {"filename", b.filename}, {"line", b.line}, {"offset", -1}, {"step", -1}, {"stack", b.stack}});
        ++st.breaks;
      }
      const std::string fail = json_get<std::string>(c.metrics, "fail_type", "");
      std::string outcome = !fail.empty() ? "error" : !c.graphs.empty() ? "graph" : c.has_metrics ? "no graph" : "incomplete";
      json end{{"t", "compile_end"}, {"c", cidx}, {"id", id}, {"outcome", outcome}, {"graphs", c.graphs.size()},
               {"guards", c.guards.size()}, {"seconds", secs}, {"steps", 0}, {"us", us + static_cast<int64_t>(secs * 1e6)}};
      if (c.has_metrics) end["metrics"] = c.metrics;
      if (!fail.empty()) end["error"] = fail + ": " + json_get<std::string>(c.metrics, "fail_reason", "");
      if (outcome != "incomplete") tw.event(end);
      ++st.compiles;
      ++cidx;
    }
    for (json& ev : p.global_extra) {
      ev["process"] = pi;
      tw.event(ev);
    }
  }
  tw.event(json{{"t", "import"}, {"kinds", st.kinds}, {"unknown", st.unknown}, {"problems", st.problems}, {"logs", st.logs},
                {"records", st.records}});
  auto closed = tw.close();
  if (!closed) return closed.error();
  return st;
}

}  // namespace dv::torch_trace
