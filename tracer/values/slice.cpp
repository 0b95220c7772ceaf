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
  static constexpr auto truth = always_true;
  static constexpr auto iterate = no_answer::iterate;
  static constexpr auto getattr = no_answer::getattr;
  static constexpr auto call = no_answer::call;
  static constexpr auto setattr = no_answer::setattr;
  static constexpr auto call_method = no_answer::call_method;
  static constexpr auto reconstruct = no_answer::reconstruct;
};
DV_KIND(Slice, "slice")

}  // namespace dv
