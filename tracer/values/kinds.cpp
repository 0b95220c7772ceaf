// The table of the value protocol (kind.h): one row per kind, built from each kind's file.
#include <array>
#include <utility>

#include "tracer/values/kind.h"

namespace dv {

namespace {
template <size_t... I>
std::array<const KindOps*, sizeof...(I)> make_table(std::index_sequence<I...>) {
  return {&kind_ops<static_cast<VK>(I)>()...};
}
}  // namespace

const KindOps& ops(VK k) {
  static const auto table = make_table(std::make_index_sequence<kKindCount>());
  return *table[static_cast<size_t>(k)];
}

const char* vk_name(VK k) { return ops(k).name; }

namespace no_answer {
Status iterate(Translator& t, Frame& f, const VPtr& v, VPtr&, bool) {
  return t.brk(f, "DV0016", std::string("iterating over a ") + vk_name(v->kind));
}
Status getattr(Translator& t, Frame& f, const VPtr& obj, const std::string& name, VPtr&) {
  return t.brk(f, "DV0005", "attribute " + name + " of a " + vk_name(obj->kind));
}
Status setattr(Translator& t, Frame& f, const VPtr& owner, const std::string& name, const VPtr&) {
  return t.brk(f, "DV0008", "assignment to attribute '" + name + "' of a " + vk_name(owner->kind), kSetattrHint);
}
Status call(Translator& t, Frame& f, const VPtr& fn, std::vector<VPtr>&, KwArgs&, VPtr&) {
  return t.brk(f, "DV0004", std::string("calling a ") + vk_name(fn->kind));
}
Status call_method(Translator& t, Frame& f, const VPtr& m, std::vector<VPtr>&, KwArgs&, VPtr&) {
  return t.brk(f, "DV0004", "method " + m->name + " of a " + vk_name(m->self->kind));
}
}  // namespace no_answer

Status iterate_by_index(Translator& t, Frame& f, const VPtr& v, Py_ssize_t n, VPtr& out) {
  VPtr it = t.make(VK::Iter);
  for (Py_ssize_t i = 0; i < n; ++i) {
    VPtr item;
    if (Status s = t.subscr(f, v, t.constant_steal(PyLong_FromSsize_t(i)), item)) return s;
    it->items.push_back(item);
  }
  out = it;
  return std::nullopt;
}

void describe_into(const Value& v, std::string& out, int depth) {
  if (out.size() > 160) return;
  ops(v.kind).describe(v, out, depth);
}

}  // namespace dv
