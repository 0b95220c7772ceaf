// Symbolic ints, bools and floats of a dynamic-shape compile (VK::Sym): obj = the SymInt, node = its graph node.
#include "tracer/pycache.h"
#include "tracer/rebuild.h"
#include "tracer/values/kind.h"

namespace dv {

using cg::N;

template <>
struct Kind<VK::Sym> {
  static void describe(const Value& v, std::string& out, int /*depth*/) {
    out += v.obj ? repr_of(v.obj.get()) : "sym"; return;
  }
  static PyObject* python_type(Translator& /*t*/, const VPtr& v) {  // what eager holds: an int, a bool or a float
    return v->obj ? reinterpret_cast<PyObject*>(sym_python_type(v->obj.get())) : nullptr;
  }
  static std::optional<Ref> as_python(Translator& t, const VPtr& v, bool meta) {
    if (meta) return v->obj;
    Ref r = t.specialize(v);  // a Python value is needed: the ShapeEnv guards this one
    if (!r) return std::nullopt;
    return r;
  }
  static bool graph_arg(Translator& /*t*/, const VPtr& v, ArgTree& out) {
    out.kind = ArgTree::Kind::Node; out.node = v->node; return true;
  }
  static Status truth(Translator& t, Frame& f, const VPtr& v, bool& out) {
    // the ShapeEnv records the assumption as a guard
    int r = PyObject_IsTrue(v->obj.get());
    if (r < 0) return t.brk(f, "DV0021", "cannot decide a symbolic condition");
    out = r == 1;
    return std::nullopt;
  }
  static constexpr auto iterate = no_answer::iterate;
  // an attribute of a symbolic number (x.is_integer(), n.bit_length()): of its value, specialised
  // (and guarded), as a Python value is needed
  static Status getattr(Translator& t, Frame& f, const VPtr& v, const std::string& name, VPtr& out) {
    Ref r = t.specialize(v);
    if (!r) return PyErr_Clear(), t.brk(f, "DV0021", "cannot specialise a symbolic number for its attribute " + name);
    return ops(VK::Const).getattr(t, f, t.constant(r), name, out);
  }
  static constexpr auto call = no_answer::call;
  static constexpr auto setattr = no_answer::setattr;
  static constexpr auto call_method = no_answer::call_method;
  static constexpr auto reconstruct = graph_output_reconstruct;
};
DV_KIND(Sym, "symint")

}  // namespace dv
