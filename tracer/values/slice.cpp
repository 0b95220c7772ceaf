// Slices with symbolic bounds (VK::Slice): items = start, stop, step (constant slices are Consts).
#include "tracer/pycache.h"
#include "tracer/rebuild.h"
#include "tracer/values/kind.h"

namespace dv {

template <>
struct Kind<VK::Slice> {
  static void describe(const Value& v, std::string& out, int depth) {
    out += "slice(";
    for (size_t i = 0; i < v.items.size(); ++i) {
      if (i) out += ", ";
      if (v.items[i]) describe_into(*v.items[i], out, depth + 1);
    }
    out += ")";
  }
  static PyObject* python_type(Translator& /*t*/, const VPtr& /*v*/) {
    return reinterpret_cast<PyObject*>(&PySlice_Type);
  }
  static std::optional<Ref> as_python(Translator& t, const VPtr& v, bool meta) {
    Ref parts[3];
    for (size_t i = 0; i < 3 && i < v->items.size(); ++i) {
      auto x = t.to_python(v->items[i], meta);
      if (!x) return std::nullopt;
      parts[i] = *x;
    }
    return Ref::steal(PySlice_New(parts[0].get(), parts[1].get(), parts[2].get()));
  }
  static bool graph_arg(Translator& t, const VPtr& v, ArgTree& out) {
    out.kind = ArgTree::Kind::Slice;
    for (const VPtr& x : v->items) {
      ArgTree a;
      if (!t.to_arg(x, a)) return false;
      out.items.push_back(std::move(a));
    }
    return true;
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
  static bool reconstruct(cg::Rebuilder& /*r*/, const VPtr& /*v*/) {
    return false;  // not rebuilt after the graph: a value living across a break that needs it keeps the frame eager
  }
};
DV_KIND(Slice, "slice")

}  // namespace dv
