// Renderings of the graph-break table (core/break_ids.inc) for `dynview break-ids` and the docs.
#include "break_ids.h"

namespace dv::breaks {

std::string markdown_table() {
  std::string s = "| id | title | what to do (default hint) |\n|---|---|---|\n";
  for (const BreakInfo& b : kTable) s += "| `" + std::string(b.id) + "` | " + std::string(b.title) + " | " + std::string(b.hint) + " |\n";
  return s;
}

}  // namespace dv::breaks
