// Dicts (VK::Dict): keys + items; lazy while only read by constant keys (lazy_dict.cpp); an OrderedDict
// or defaultdict made in the trace has obj = its class (dict_kinds.cpp). Methods: dicts.cpp.
#include "tracer/pycache.h"
#include "tracer/values/kind.h"

namespace dv {

template <>
struct Kind<VK::Dict> {
  static void describe(const Value& v, std::string& out, int depth) {
    out += "{";
    for (size_t i = 0; i < v.items.size(); ++i) {
      if (i) out += ", ";
      if (depth > 2 || out.size() > 160) { out += "..."; break; }
      out += i < v.keys.size() ? repr_of(v.keys[i].get()) : "?";
      out += ": ";
      if (v.items[i]) describe_into(*v.items[i], out, depth + 1);
    }
    out += "}";
    return;
  }
  static PyObject* python_type(Translator& /*t*/, const VPtr& v) {
    return v->obj && PyType_Check(v->obj.get()) ? v->obj.get() : reinterpret_cast<PyObject*>(&PyDict_Type);
  }
  static std::optional<Ref> as_python(Translator& t, const VPtr& v, bool meta) {
    Ref out = Ref::steal(PyDict_New());
    for (size_t i = 0; i < v->items.size(); ++i) {
      auto x = t.to_python(v->items[i], meta);
      if (!x || PyDict_SetItem(out.get(), v->keys[i].get(), x->get()) < 0) return std::nullopt;
    }
    if (v->obj && PyType_Check(v->obj.get())) {  // an OrderedDict or defaultdict made in the trace
      std::optional<Ref> factory;
      if (v->defaults && !(factory = t.to_python(v->defaults, meta))) return std::nullopt;
      out = Ref::steal(factory ? PyObject_CallFunctionObjArgs(v->obj.get(), factory->get(), out.get(), nullptr)
                               : PyObject_CallOneArg(v->obj.get(), out.get()));
      if (!out) return PyErr_Clear(), std::nullopt;
    }
    return out;
  }
  static bool graph_arg(Translator& t, const VPtr& v, ArgTree& out) {
    out.kind = ArgTree::Kind::Dict;
    out.keys = v->keys;
    for (const VPtr& x : v->items) {
      ArgTree a;
      if (!t.to_arg(x, a)) return false;
      out.items.push_back(std::move(a));
    }
    return true;
  }
  static Status truth(Translator& /*t*/, Frame& /*f*/, const VPtr& v, bool& out) {
    out = !v->items.empty(); return std::nullopt;
  }
  static Status iterate(Translator& t, Frame& /*f*/, const VPtr& v, VPtr& out, bool /*materialize*/) {
    VPtr it = t.make(VK::Iter);
    for (auto& k : v->keys) it->items.push_back(t.key_value(k)); out = it;
    return std::nullopt;
  }
  static Status getattr(Translator& t, Frame& f, const VPtr& obj, const std::string& name, VPtr& out) {
    return list_getattr(t, f, obj, name, out);
  }
  static Status call(Translator& t, Frame& f, const VPtr& fn, std::vector<VPtr>& /*args*/, KwArgs& /*kwargs*/, VPtr& /*out*/) {
    return t.brk(f, "DV0004", std::string("calling a ") + vk_name(fn->kind));
  }
  static Status setattr(Translator& t, Frame& f, const VPtr& owner, const std::string& name, const VPtr& /*value*/) {
    return t.brk(f, "DV0008", "assignment to attribute '" + name + "' of a " + vk_name(owner->kind), kSetattrHint);
  }
  static Status call_method(Translator& t, Frame& f, const VPtr& m, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
    return container_method(t, f, m, args, kwargs, out);
  }
};
DV_KIND(Dict, "dict")

}  // namespace dv
