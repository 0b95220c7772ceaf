// User functions (VK::Function): obj = the function, or the code object of one made by MAKE_FUNCTION
// (cells, defaults, kwdefaults, globals, qualname); calls are inlined.
#include "tracer/engine.h"
#include "tracer/pycache.h"
#include "tracer/rebuild.h"
#include "tracer/values/kind.h"

namespace dv {

template <>
struct Kind<VK::Function> {
  static void describe(const Value& v, std::string& out, int /*depth*/) {
    PyObject* qn = v.qualname ? v.qualname.get() : nullptr;
    if (!qn && v.obj && PyFunction_Check(v.obj.get())) qn = reinterpret_cast<PyFunctionObject*>(v.obj.get())->func_qualname;
    if (!qn && v.obj && PyCode_Check(v.obj.get())) qn = reinterpret_cast<PyCodeObject*>(v.obj.get())->co_qualname;
    out += "<function " + (qn ? str_of(qn) : std::string("?")) + ">";
  }
  static PyObject* python_type(Translator& /*t*/, const VPtr& /*v*/) {
    return reinterpret_cast<PyObject*>(&PyFunction_Type);
  }
  static std::optional<Ref> as_python(Translator& /*t*/, const VPtr& v, bool /*meta*/) {
    return v->obj && PyFunction_Check(v->obj.get()) ? std::optional<Ref>(v->obj) : std::nullopt;
  }
  static constexpr auto graph_arg = no_answer::graph_arg;
  static constexpr auto truth = always_true;
  static constexpr auto iterate = no_answer::iterate;
  static Status getattr(Translator& t, Frame& f, const VPtr& obj, const std::string& name, VPtr& out) {
    return object_getattr(t, f, obj, name, out);
  }
  static Status call(Translator& t, Frame& f, const VPtr& fn, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
    if (fn->obj && PyFunction_Check(fn->obj.get())) {
      // torch.compiler.disable / torch._dynamo.disable: not traced; the call runs eagerly (and
      // nothing it calls is captured: eval_frame.cpp marks the wrapper's code).
      if (disabled_function(fn->obj.get())) {
        if (torch_special(fn->obj.get()) == TorchSpecial::checkpoint) return t.checkpoint_call(f, std::move(args), std::move(kwargs), out);
        if (disable_wrapper(fn->obj.get())) mark_disabled(PyFunction_GET_CODE(fn->obj.get()));
        Ref orig = Ref::steal(PyObject_GetAttrString(fn->obj.get(), "_torchdynamo_orig_callable"));
        PyErr_Clear();
        if (!orig) orig = Ref::steal(PyObject_GetAttrString(fn->obj.get(), "__wrapped__"));  // torch._disable_dynamo's
        PyErr_Clear();
        return t.brk(f, "DV0025", "call to " + callable_name(orig ? orig.get() : fn->obj.get()) + ", marked torch.compiler.disable");
      }
      bool library = false;  // Python functions dynview runs natively (copy.deepcopy ...)
      if (Status s = t.call_library(f, fn, args, kwargs, out, library); s || library) return s;
      if (allowed_in_graph(fn->obj.get()))  // torch.compiler.allow_in_graph: one node of the graph
        return t.graph_call(f, fn->obj, "", std::move(args), std::move(kwargs), out);
      bool handled = false;
      if (Status s = t.call_frozen_maker(f, fn->obj.get(), args, kwargs, out, handled)) return s;
      if (handled) return std::nullopt;
    }
    return t.inline_call(f, fn, nullptr, std::move(args), std::move(kwargs), out);
  }
  static constexpr auto setattr = no_answer::setattr;
  static constexpr auto call_method = no_answer::call_method;
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    return object_reconstruct(r, v);
  }
};
DV_KIND(Function, "function")

}  // namespace dv
