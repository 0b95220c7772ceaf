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
  static constexpr auto as_python = no_answer::as_python;
  static constexpr auto graph_arg = no_answer::graph_arg;
  static constexpr auto truth = always_true;
  static constexpr auto iterate = no_answer::iterate;
  static constexpr auto getattr = no_answer::getattr;
  static Status call(Translator& t, Frame& f, const VPtr& fn, std::vector<VPtr>& /*args*/, KwArgs& /*kwargs*/, VPtr& out) {
    return call_grad_exit(t, f, fn, out);  // a with-block's __exit__
  }
  static constexpr auto setattr = no_answer::setattr;
  static constexpr auto call_method = no_answer::call_method;
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
