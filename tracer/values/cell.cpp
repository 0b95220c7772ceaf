// Cells (VK::Cell): items[0] = the contents (or none); cell_of says which real cell it is, if any.
#include "tracer/pycache.h"
#include "tracer/rebuild.h"
#include "tracer/values/kind.h"

namespace dv {

using cg::N;

template <>
struct Kind<VK::Cell> {
  static void describe(const Value& /*v*/, std::string& out, int /*depth*/) {
    out += "<cell>"; return;
  }
  static PyObject* python_type(Translator& /*t*/, const VPtr& /*v*/) {
    return reinterpret_cast<PyObject*>(&PyCell_Type);
  }
  static constexpr auto as_python = no_answer::as_python;
  static constexpr auto graph_arg = no_answer::graph_arg;
  static constexpr auto truth = always_true;
  static constexpr auto iterate = no_answer::iterate;
  static constexpr auto getattr = no_answer::getattr;
  static constexpr auto call = no_answer::call;
  static constexpr auto setattr = no_answer::setattr;
  static constexpr auto call_method = no_answer::call_method;
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    // a cell made in the trace is in the memo (make_cells); the frame's own free variable
    if (v->cell_of < 0) return false;
    r.e.emit_free(N::LOAD_CLOSURE, v->cell_of);
    return true;
  }
};
DV_KIND(Cell, "cell")

}  // namespace dv
