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

// The table's entry for id, or null.
constexpr const BreakInfo* find(std::string_view id) {
  for (const BreakInfo& b : kTable)
    if (b.id == id) return &b;
  return nullptr;
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
  consteval BreakId(const char* id) : info_(find(id)) {
    if (!info_) throw "graph-break id not in core/break_ids.inc";  // (a compile error: not a constant expression)
  }
  constexpr std::string_view id() const { return info_->id; }
  constexpr std::string_view title() const { return info_->title; }
  constexpr std::string_view hint() const { return info_->hint; }
  constexpr bool operator==(const BreakId& o) const { return info_ == o.info_; }

 private:
  const BreakInfo* info_;
};
// A recorded id (a Break's or a trace's string) against a table id.
constexpr bool operator==(std::string_view recorded, const BreakId& id) { return recorded == id.id(); }

// The table as the Markdown table of docs/graph-breaks.md (`dynview break-ids --markdown`).
std::string markdown_table();

}  // namespace dv::breaks
