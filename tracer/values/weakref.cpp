// weakref.ref(v) made in the trace (VK::WeakRef, TorchDynamo's WeakRefVariable): self = the value it
// refers to, alive while the trace holds it; calling the reference gives that value. One that leaves
// the graph is rebuilt as weakref.ref(<the value>). A weakref from the frame is an object: calling it
// reads its referent through the source L['w']() (Source::weakref_call), guarded as any value, so a
// referent that died (None) or changed recompiles (object_call.cpp).
#include "tracer/rebuild.h"
#include "tracer/translator.h"
#include "tracer/values/kind.h"

namespace dv {

using cg::N;

template <>
struct Kind<VK::WeakRef> {
  static void describe(const Value& v, std::string& out, int depth) {
    out += "<weakref to ";
    if (v.self) describe_into(*v.self, out, depth + 1);
    out += ">";
  }
  static PyObject* python_type(Translator& /*t*/, const VPtr& /*v*/) { return reinterpret_cast<PyObject*>(&_PyWeakref_RefType); }
  static std::optional<Ref> as_python(Translator& t, const VPtr& v, bool meta) {
    auto target = t.to_python(v->self, meta);
    if (!target) return std::nullopt;
    Ref r = Ref::steal(PyWeakref_NewRef(target->get(), nullptr));
    if (!r) return PyErr_Clear(), std::nullopt;
    return r;
  }
  static constexpr auto graph_arg = no_answer::graph_arg;
  static constexpr auto truth = always_true;
  static constexpr auto iterate = no_answer::iterate;
  static constexpr auto getattr = no_answer::getattr;
  static Status call(Translator& t, Frame& f, const VPtr& fn, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
    if (!args.empty() || !kwargs.empty())
      return t.raise_new(f, PyExc_TypeError, "weakref() takes no arguments", "calling a weakref");
    out = fn->self;
    return std::nullopt;
  }
  static constexpr auto setattr = no_answer::setattr;
  static constexpr auto call_method = no_answer::call_method;
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    r.e.callable_const(reinterpret_cast<PyObject*>(&_PyWeakref_RefType));
    if (!r.value(v->self)) return false;
    r.e.call(1);
    return true;
  }
};
DV_KIND(WeakRef, "weakref")

}  // namespace dv
