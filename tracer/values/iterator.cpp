// Iterators (VK::Iter): items + pos; lazy ones (map, filter, itertools, generators) make their items as
// they are taken (Translator::pull).
#include <algorithm>

#include "tracer/pycache.h"
#include "tracer/rebuild.h"
#include "tracer/values/kind.h"

namespace dv {

using cg::N;

template <>
struct Kind<VK::Iter> {
  static void describe(const Value& v, std::string& out, int /*depth*/) {
    out += "<iterator of " + std::to_string(v.items.size()) + ">"; return;
  }
  static PyObject* python_type(Translator& /*t*/, const VPtr& /*v*/) {
    return nullptr;  // list_iterator, map, a generator ...: not known here
  }
  static constexpr auto as_python = no_answer::as_python;
  static constexpr auto graph_arg = no_answer::graph_arg;
  static constexpr auto truth = always_true;
  static Status iterate(Translator& t, Frame& f, const VPtr& v, VPtr& out, bool materialize) {
    if (materialize)
      if (Status s = t.pull(f, v, SIZE_MAX)) return s;
    out = v;
    return std::nullopt;
  }
  static constexpr auto getattr = no_answer::getattr;
  static constexpr auto call = no_answer::call;
  static constexpr auto setattr = no_answer::setattr;
  static constexpr auto call_method = no_answer::call_method;
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    // iter((the items not taken yet,)), as TorchDynamo's ListIteratorVariable: an iterator over a
    // list, tuple, dict, range or string of the trace that lives across a break. A lazy one (map,
    // filter, itertools, a generator) is not rebuilt: its functions would run here, not when taken.
    if (v->flag) return false;
    if (v->source) return r.e.source(*v->source);  // an iterator from the frame: itself, advanced after the graph
    static PyObject* iter_fn = PyDict_GetItemString(PyEval_GetBuiltins(), "iter");  // borrowed: builtins live on
    if (!iter_fn) return false;
    r.e.callable_const(iter_fn);
    for (size_t i = v->pos; i < v->items.size(); ++i)
      if (!r.value(v->items[i])) return false;
    r.e.emit(N::BUILD_TUPLE, static_cast<int>(v->items.size() - std::min(v->pos, v->items.size())));
    r.e.call(1);
    return r.remember(v);
  }

};
DV_KIND(Iter, "iterator")

}  // namespace dv
