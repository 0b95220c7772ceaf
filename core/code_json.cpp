// CodeInfo <-> JSON (see code_json.h).
#include "code_json.h"

#include <nlohmann/json.hpp>

namespace dv::bc {
namespace {
using nlohmann::json;

std::string to_hex(std::string_view b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  s.reserve(b.size() * 2);
  for (unsigned char c : b) {
    s.push_back(d[c >> 4]);
    s.push_back(d[c & 15]);
  }
  return s;
}

bool from_hex(std::string_view h, std::string& out) {
  if (h.size() % 2) return false;
  auto v = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
  out.clear();
  for (size_t i = 0; i < h.size(); i += 2) {
    int a = v(h[i]), b = v(h[i + 1]);
    if (a < 0 || b < 0) return false;
    out.push_back(static_cast<char>(a * 16 + b));
  }
  return true;
}

json to_j(const CodeInfo& c) {
  json j = {{"version", std::string(version_str(c.version))}, {"name", c.name}, {"qualname", c.qualname}, {"filename", c.filename},
            {"firstlineno", c.firstlineno}, {"argcount", c.argcount}, {"posonlyargcount", c.posonlyargcount},
            {"kwonlyargcount", c.kwonlyargcount}, {"flags", c.flags}, {"stacksize", c.stacksize},
            {"code", to_hex(c.code)}, {"linetable", to_hex(c.linetable)},
            {"exceptiontable", to_hex(c.exceptiontable)}, {"names", c.names},
            {"localsplusnames", c.localsplusnames}, {"localspluskinds", c.localspluskinds},
            {"const_reprs", c.const_reprs}, {"const_code", c.const_code}, {"repr", c.repr}};
  json nested = json::array();
  for (const auto& n : c.nested) nested.push_back(n ? to_j(*n) : json());
  j["nested"] = std::move(nested);
  return j;
}

Result<CodeInfo> from_j(const json& j, const std::string& path) {
  auto err = [&](const std::string& what) { return make_error("code json " + path, what); };
  if (!j.is_object()) return err("expected an object");
  CodeInfo c;
  try {
    if (j.contains("version")) {  // absent: recorded before versions existed, 3.11
      auto v = version_from_str(j.at("version").get<std::string>());
      if (!v) return err("field 'version' is not a supported CPython version (3.11, 3.12, 3.13)");
      c.version = *v;
    }
    c.name = j.at("name").get<std::string>();
    c.qualname = j.value("qualname", c.name);
    c.filename = j.value("filename", std::string());
    c.firstlineno = j.value("firstlineno", 1);
    c.argcount = j.value("argcount", 0);
    c.posonlyargcount = j.value("posonlyargcount", 0);
    c.kwonlyargcount = j.value("kwonlyargcount", 0);
    c.flags = j.value("flags", 0);
    c.stacksize = j.value("stacksize", 0);
    for (auto [key, dst] : {std::pair{"code", &c.code}, {"linetable", &c.linetable},
                            {"exceptiontable", &c.exceptiontable}}) {
      if (!from_hex(j.value(key, std::string()), *dst)) return err(std::string("field '") + key + "' is not hex");
    }
    c.names = j.value("names", std::vector<std::string>{});
    c.localsplusnames = j.value("localsplusnames", std::vector<std::string>{});
    c.localspluskinds = j.value("localspluskinds", std::vector<uint8_t>{});
    c.const_reprs = j.value("const_reprs", std::vector<std::string>{});
    c.const_code = j.value("const_code", std::vector<int32_t>(c.const_reprs.size(), -1));
    c.repr = j.value("repr", std::string());
    if (j.contains("nested")) {
      const json& nested = j.at("nested");
      if (!nested.is_array()) return err("field 'nested' is not an array");
      for (size_t i = 0; i < nested.size(); ++i) {
        auto n = from_j(nested[i], path + ".nested[" + std::to_string(i) + "]");
        if (!n) return n.error();
        if (n->version != c.version) return err("nested code object of another version");
        c.nested.push_back(std::make_shared<CodeInfo>(std::move(n).value()));
      }
    }
  } catch (const json::exception& e) {
    return err(e.what());
  }
  if (c.const_code.size() != c.const_reprs.size()) return err("const_code and const_reprs differ in length");
  for (int32_t k : c.const_code)
    if (k >= static_cast<int32_t>(c.nested.size())) return err("const_code points past 'nested'");
  return c;
}

}  // namespace

std::string code_to_json(const CodeInfo& co, int indent) { return to_j(co).dump(indent); }

Result<CodeInfo> code_from_json(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return make_error("code json", "not valid JSON");
  return from_j(j, "$");
}

}  // namespace dv::bc
