// The table of the value protocol (kind.h): one row per kind, built from each kind's file.
#include <array>
#include <utility>

#include "tracer/values/kind.h"

namespace dv {

namespace {
template <size_t... I>
std::array<const KindOps*, sizeof...(I)> make_table(std::index_sequence<I...>) {
  return {&kind_ops<static_cast<VK>(I)>()...};
}
}  // namespace

const KindOps& ops(VK k) {
  static const auto table = make_table(std::make_index_sequence<kKindCount>());
  return *table[static_cast<size_t>(k)];
}

const char* vk_name(VK k) { return ops(k).name; }

void describe_into(const Value& v, std::string& out, int depth) {
  if (out.size() > 160) return;
  ops(v.kind).describe(v, out, depth);
}

}  // namespace dv
