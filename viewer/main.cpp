// The `dynview` executable. For now: headless subcommands over core/ (no Python, no LibTorch).
//   dynview disasm CODE.json [--no-recursive]   print the dis.dis listing of a recorded code object
//   dynview opcodes                             print the opcode table
// Exit codes: 0 ok, 1 usage error, 2 unreadable or malformed input.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "core/bytecode.h"
#include "core/code_json.h"
#include "core/opcodes.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: dynview disasm CODE.json [--no-recursive]\n"
               "       dynview opcodes\n");
  return 1;
}

int cmd_disasm(int argc, char** argv) {
  const char* path = nullptr;
  bool recursive = true;
  for (int i = 0; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--no-recursive")) recursive = false;
    else if (!path) path = argv[i];
    else return usage();
  }
  if (!path) return usage();
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "dynview: cannot open %s\n", path);
    return 2;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  auto co = dv::bc::code_from_json(ss.str());
  if (!co) {
    std::fprintf(stderr, "dynview: %s: %s\n", path, co.error().message().c_str());
    return 2;
  }
  auto text = dv::bc::disassemble(*co, dv::bc::DisOptions{recursive, -1});
  if (!text) {
    std::fprintf(stderr, "dynview: %s: %s\n", path, text.error().message().c_str());
    return 2;
  }
  std::fwrite(text->data(), 1, text->size(), stdout);
  return 0;
}

int cmd_opcodes() {
  for (int op = 0; op < 256; ++op) {
    const auto& i = dv::bc::op_info(static_cast<uint8_t>(op));
    if (!i.name || i.specialized) continue;
    std::printf("%3d %-28s caches=%d\n", op, i.name, i.caches);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string cmd = argv[1];
  if (cmd == "disasm") return cmd_disasm(argc - 2, argv + 2);
  if (cmd == "opcodes") return cmd_opcodes();
  if (cmd == "--help" || cmd == "-h") {
    usage();
    return 0;
  }
  return usage();
}
