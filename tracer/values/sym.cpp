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
    const std::string name = v->obj ? Py_TYPE(v->obj.get())->tp_name : "";
    if (name == "SymBool") return reinterpret_cast<PyObject*>(&PyBool_Type);
    if (name == "SymFloat") return reinterpret_cast<PyObject*>(&PyFloat_Type);
    return name == "SymInt" ? reinterpret_cast<PyObject*>(&PyLong_Type) : nullptr;
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
    // graph r.outputs (symbolic ints come back as ints)
    auto it = std::find(r.outputs.begin(), r.outputs.end(), v->node);
    if (it == r.outputs.end() || !r.compiled) return v->source ? r.e.source(*v->source) : false;
    r.e.emit(N::LOAD_FAST, r.outs_slot);
    r.e.load_int(it - r.outputs.begin());
    r.e.emit(N::BINARY_SUBSCR);
    return true;
  }
};
DV_KIND(Sym, "symint")

}  // namespace dv
