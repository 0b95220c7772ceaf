// The NULL that PUSH_NULL and LOAD_GLOBAL/LOAD_ATTR push beside a callable (VK::Null): it answers nothing.
#include "tracer/pycache.h"
#include "tracer/rebuild.h"
#include "tracer/values/kind.h"

namespace dv {

template <>
struct Kind<VK::Null> {
  static void describe(const Value& /*v*/, std::string& out, int /*depth*/) {
    out += "NULL";
  }
  static PyObject* python_type(Translator& /*t*/, const VPtr& /*v*/) {
    return nullptr;
  }
  static constexpr auto as_python = no_answer::as_python;
  static constexpr auto graph_arg = no_answer::graph_arg;
  static constexpr auto truth = always_true;
  static constexpr auto iterate = no_answer::iterate;
  static constexpr auto getattr = no_answer::getattr;
  static constexpr auto call = no_answer::call;
  static constexpr auto setattr = no_answer::setattr;
  static constexpr auto call_method = no_answer::call_method;
  static constexpr auto reconstruct = no_answer::reconstruct;
};
DV_KIND(Null, "null")

}  // namespace dv
