// Compiled by CTest (break_id_unknown_does_not_compile): naming a graph-break id that is not in
// core/break_ids.inc must not compile. With -DDV_KNOWN_ID (the control) the same file compiles.
#include "core/break_ids.h"

#ifdef DV_KNOWN_ID
constexpr dv::breaks::BreakId kId = "DV0002";
#else
constexpr dv::breaks::BreakId kId = "DV9999";
#endif
int main() { return static_cast<int>(kId.id().size()); }
