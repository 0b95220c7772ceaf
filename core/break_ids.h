// Graph-break ids (DV0001, ...) with their title and default hint, from core/break_ids.inc (the one
// table). The engine names a break with a BreakId, checked against the table when it compiles; the
// reports, the viewer and the Python package look titles up by id (an id not in the table, from an
// older trace or an imported TORCH_TRACE, has no title and is shown as itself).
#pragma once
#include <span>
#include <string>
#include <string_view>

namespace dv::breaks {

struct BreakInfo {
  std::string_view id, title, hint;
};

inline constexpr BreakInfo kTable[] = {
#define DV_BREAK(id, title, hint) {#id, title, hint},
#include "break_ids.inc"
#undef DV_BREAK
};

// The index of id's entry in the table, or -1.
constexpr int find_index(std::string_view id) {
  for (int i = 0; i < int(std::size(kTable)); ++i)
    if (kTable[i].id == id) return i;
  return -1;
}
// The table's entry for id, or null.
constexpr const BreakInfo* find(std::string_view id) {
  int i = find_index(id);
  return i < 0 ? nullptr : &kTable[i];
}
constexpr std::span<const BreakInfo> table() { return kTable; }
// The title of id, or "" when the table does not know it.
constexpr std::string_view title(std::string_view id) {
  const BreakInfo* b = find(id);
  return b ? b->title : std::string_view{};
}

// A break id the table knows. Built from a string literal at compile time (`brk(f, "DV0002", ...)`):
// a literal that is not in core/break_ids.inc does not compile.
class BreakId {
 public:
  // (Tested by index, not by comparing a pointer with null: GCC 12 cannot evaluate that comparison
  // in a constant expression under -fsanitize=null, so `make sanitize` would not compile.)
  consteval BreakId(const char* id) : info_(&kTable[checked(find_index(id))]) {}
  constexpr std::string_view id() const { return info_->id; }
  constexpr std::string_view title() const { return info_->title; }
  constexpr std::string_view hint() const { return info_->hint; }
  constexpr bool operator==(const BreakId& o) const { return info_ == o.info_; }

 private:
  static consteval int checked(int i) {
    if (i < 0) throw "graph-break id not in core/break_ids.inc";  // (a compile error: not a constant expression)
    return i;
  }
  const BreakInfo* info_;
};
// A recorded id (a Break's or a trace's string) against a table id.
constexpr bool operator==(std::string_view recorded, const BreakId& id) { return recorded == id.id(); }

// The table as the Markdown table of docs/graph-breaks.md (`dynview break-ids --markdown`).
std::string markdown_table();

}  // namespace dv::breaks
