// The handle Tensor.register_hook returns for a hook traced into the graph (VK::HookHandle,
// tensor_hooks.cpp): the hook is registered when the graph runs, so there is no handle to give:
// using it (handle.remove()) breaks, and so does a frame that keeps it past the graph.
#include "tracer/pycache.h"
#include "tracer/rebuild.h"
#include "tracer/translator.h"
#include "tracer/values/kind.h"

namespace dv {

template <>
struct Kind<VK::HookHandle> {
  static void describe(const Value& /*v*/, std::string& out, int /*depth*/) { out += "<hook handle>"; }
  static PyObject* python_type(Translator& /*t*/, const VPtr& /*v*/) {
    static PyObject* cls = kept_attr("torch.utils.hooks", "RemovableHandle");
    return cls;
  }
  static constexpr auto as_python = no_answer::as_python;
  static constexpr auto graph_arg = no_answer::graph_arg;
  static constexpr auto truth = always_true;
  static constexpr auto iterate = no_answer::iterate;
  static Status getattr(Translator& t, Frame& f, const VPtr& /*obj*/, const std::string& name, VPtr& /*out*/) {
    return t.brk(f, "DV0004", "the handle of a tensor hook registered in the graph: ." + name + " is not traced",
                 "keep the handle outside the compiled function, or register the hook there");
  }
  static constexpr auto call = no_answer::call;
  static constexpr auto setattr = no_answer::setattr;
  static constexpr auto call_method = no_answer::call_method;
  static constexpr auto reconstruct = no_answer::reconstruct;
};
DV_KIND(HookHandle, "hook handle")

}  // namespace dv
