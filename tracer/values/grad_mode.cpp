// torch.no_grad() / enable_grad() / set_grad_enabled(b) as context managers (VK::GradMode): flag = enable?
#include "tracer/codegen.h"
#include "tracer/pycache.h"
#include "tracer/rebuild.h"
#include "tracer/values/kind.h"

namespace dv {

using cg::N;

template <>
struct Kind<VK::GradMode> {
  static void describe(const Value& v, std::string& out, int /*depth*/) {
    out += v.flag ? "<enable_grad>" : "<no_grad>"; return;
  }
  static PyObject* python_type(Translator& /*t*/, const VPtr& /*v*/) {
    return nullptr;  // no_grad / enable_grad / set_grad_enabled, or a bound __exit__: not kept
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
  static Status call(Translator& t, Frame& f, const VPtr& fn, std::vector<VPtr>& /*args*/, KwArgs& /*kwargs*/, VPtr& out) {
    return call_grad_exit(t, f, fn, out);  // a with-block's __exit__
  }
  static Status setattr(Translator& t, Frame& f, const VPtr& owner, const std::string& name, const VPtr& /*value*/) {
    return t.brk(f, "DV0008", "assignment to attribute '" + name + "' of a " + vk_name(owner->kind), kSetattrHint);
  }
  static Status call_method(Translator& t, Frame& f, const VPtr& m, std::vector<VPtr>& /*args*/, KwArgs& /*kwargs*/, VPtr& /*out*/) {
    return t.brk(f, "DV0004", "method " + m->name + " of a " + vk_name(m->self->kind));
  }
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    // a with-block's __exit__: restores the grad mode it recorded
    PyObject* restore = grad_restore_object(v->flag);
    if (!restore) return false;
    r.e.emit(N::LOAD_CONST, r.e.konst(restore));
    return true;
  }
};
DV_KIND(GradMode, "grad_mode")

}  // namespace dv
