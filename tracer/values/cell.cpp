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
  static std::optional<Ref> as_python(Translator& /*t*/, const VPtr& /*v*/, bool /*meta*/) {
    return std::nullopt;
  }
  static bool graph_arg(Translator& /*t*/, const VPtr& /*v*/, ArgTree& /*out*/) {
    return false;
  }
  static Status truth(Translator& /*t*/, Frame& /*f*/, const VPtr& /*v*/, bool& out) {
    out = true;
    return std::nullopt;
  }
  static Status iterate(Translator& t, Frame& f, const VPtr& v, VPtr& /*out*/, bool /*materialize*/) {
    return t.brk(f, "DV0016", std::string("iterating over a ") + vk_name(v->kind));
  }
  static Status getattr(Translator& t, Frame& f, const VPtr& obj, const std::string& name, VPtr& /*out*/) {
    return t.brk(f, "DV0005", "attribute " + name + " of a " + vk_name(obj->kind));
  }
  static Status call(Translator& t, Frame& f, const VPtr& fn, std::vector<VPtr>& /*args*/, KwArgs& /*kwargs*/, VPtr& /*out*/) {
    return t.brk(f, "DV0004", std::string("calling a ") + vk_name(fn->kind));
  }
  static Status setattr(Translator& t, Frame& f, const VPtr& owner, const std::string& name, const VPtr& /*value*/) {
    return t.brk(f, "DV0008", "assignment to attribute '" + name + "' of a " + vk_name(owner->kind), kSetattrHint);
  }
  static Status call_method(Translator& t, Frame& f, const VPtr& m, std::vector<VPtr>& /*args*/, KwArgs& /*kwargs*/, VPtr& /*out*/) {
    return t.brk(f, "DV0004", "method " + m->name + " of a " + vk_name(m->self->kind));
  }
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    // a cell made in the trace is in the r.memo (make_cells); the frame's own free variable
    if (v->cell_of < 0) return false;
    r.e.emit_free(N::LOAD_CLOSURE, v->cell_of);
    return true;
  }
};
DV_KIND(Cell, "cell")

}  // namespace dv
