// Bound methods (VK::Method): self + a Python function (inlined with self), or self + a name / builtin
// descriptor (answered by self's kind: call_method).
#include "tracer/engine.h"
#include "tracer/pycache.h"
#include "tracer/rebuild.h"
#include "tracer/values/kind.h"

namespace dv {

using cg::N;

template <>
struct Kind<VK::Method> {
  static void describe(const Value& v, std::string& out, int /*depth*/) {
    out += "<method " + v.name + ">"; return;
  }
  static PyObject* python_type(Translator& /*t*/, const VPtr& v) {  // a bound Python function; builtin ones vary (null)
    return v->obj && PyFunction_Check(v->obj.get()) ? reinterpret_cast<PyObject*>(&PyMethod_Type) : nullptr;
  }
  static constexpr auto as_python = no_answer::as_python;
  static constexpr auto graph_arg = no_answer::graph_arg;
  static constexpr auto truth = always_true;
  static constexpr auto iterate = no_answer::iterate;
  static Status getattr(Translator& t, Frame& f, const VPtr& obj, const std::string& name, VPtr& out) {
    // A bound Python function: __self__ and __func__ (what types.MethodType holds), the rest read off
    // the function as a method object forwards them
    if (!obj->obj || !PyFunction_Check(obj->obj.get()) || !obj->self) return no_answer::getattr(t, f, obj, name, out);
    if (name == "__self__") return out = obj->self, std::nullopt;
    VPtr fn = t.make(VK::Object);
    fn->obj = obj->obj;
    if (name == "__func__") return out = fn, std::nullopt;
    if (name == "__name__" || name == "__qualname__" || name == "__doc__" || name == "__module__")
      return t.getattr(f, fn, name, out);
    return no_answer::getattr(t, f, obj, name, out);
  }
  static Status call(Translator& t, Frame& f, const VPtr& fn, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
    if (fn->obj && fn->obj.get() == autograd_apply_function() && fn->self && is_autograd_function_class(fn->self->obj.get()))
      return t.autograd_function_apply(f, fn->self, std::move(args), std::move(kwargs), out);  // Fn.apply(...)
    if (fn->self && fn->self->kind == VK::NNModule && fn->obj && PyFunction_Check(fn->obj.get())) {
      bool handled = false;
      if (Status s = t.module_members(f, fn, args, kwargs, out, handled)) return s;
      if (handled) return std::nullopt;
    }
    if (fn->obj && disabled_function(fn->obj.get())) {  // a method marked disable (Optimizer.zero_grad): runs eagerly
      if (disable_wrapper(fn->obj.get())) mark_disabled(PyFunction_GET_CODE(fn->obj.get()));
      Ref orig = Ref::steal(PyObject_GetAttrString(fn->obj.get(), "__wrapped__"));
      PyErr_Clear();
      return t.brk(f, "DV0025", "call to " + callable_name(orig ? orig.get() : fn->obj.get()) + ", marked torch.compiler.disable");
    }
    if (fn->obj && PyFunction_Check(fn->obj.get())) {  // bound user method
      VPtr fv = t.make(VK::Function);
      fv->obj = fn->obj;
      return t.inline_call(f, fv, fn->self, std::move(args), std::move(kwargs), out);
    }
    return ops(fn->self->kind).call_method(t, f, fn, args, kwargs, out);  // a builtin method: self's kind answers
  }
  static constexpr auto setattr = no_answer::setattr;
  static constexpr auto call_method = no_answer::call_method;
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    // A bound user method: types.MethodType(function, self); a method of a value: getattr.
    if (v->source) return r.e.source(*v->source);
    if (!v->obj && !v->name.empty() && v->self) {
      if (!r.value(v->self)) return false;
      r.e.emit(N::LOAD_ATTR, r.e.name(v->name));
      return true;
    }
    if (!v->obj || !PyFunction_Check(v->obj.get()) || !v->self) return false;
    r.e.callable_const(reinterpret_cast<PyObject*>(&PyMethod_Type));
    r.e.emit(N::LOAD_CONST, r.e.konst(v->obj.get()));
    if (!r.value(v->self)) return false;
    r.e.call(2);
    return true;
  }
};
DV_KIND(Method, "method")

}  // namespace dv
