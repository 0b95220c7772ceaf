// Iterators (VK::Iter): items + pos; lazy ones (map, filter, zip, itertools, generators) make their
// items as they are taken (Translator::pull). `name` says which builtin made one (empty: iter()).
#include <algorithm>
#include <unordered_map>

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
  static PyObject* python_type(Translator& t, const VPtr& v) {
    // By what made it: a generator (clip_grad_norm_ asks isinstance(parameters, types.GeneratorType)
    // of module.parameters()), map, filter, zip, enumerate, itertools' own. iter() of something
    // (list_iterator, tuple_iterator ...): not known here.
    const std::string& n = v->name;
    if (n == "generator" || n == "module_members") {
      static PyObject* gen = [] {
        Ref types = Ref::steal(PyImport_ImportModule("types"));
        PyObject* g = types ? PyObject_GetAttrString(types.get(), "GeneratorType") : nullptr;  // kept
        PyErr_Clear();
        return g;
      }();
      return gen;
    }
    if (n == "user_iterator") return v->self ? ops(v->self->kind).python_type(t, v->self) : nullptr;
    if (n == "map") return reinterpret_cast<PyObject*>(&PyMap_Type);
    if (n == "filter") return reinterpret_cast<PyObject*>(&PyFilter_Type);
    if (n == "zip") return reinterpret_cast<PyObject*>(&PyZip_Type);
    if (n == "enumerate") return reinterpret_cast<PyObject*>(&PyEnum_Type);
    // iter(lst), reversed(lst), reversed(tup) (alive across a break they become tuple iterators, as
    // TorchDynamo's ListIteratorVariable does: a resume function takes those)
    if (n == "list_iterator") return reinterpret_cast<PyObject*>(&PyListIter_Type);
    if (n == "list_reverseiterator") return reinterpret_cast<PyObject*>(&PyListRevIter_Type);
    if (n == "reversed") return reinterpret_cast<PyObject*>(&PyReversed_Type);
    if (n.empty()) return nullptr;
    static std::unordered_map<std::string, PyObject*> itertools_types;  // kept for the process
    auto it = itertools_types.find(n);
    if (it != itertools_types.end()) return it->second;
    Ref mod = Ref::steal(PyImport_ImportModule("itertools"));
    PyObject* tp = mod ? PyObject_GetAttrString(mod.get(), n == "from_iterable" ? "chain" : n.c_str()) : nullptr;
    if (tp && !PyType_Check(tp)) Py_CLEAR(tp);
    PyErr_Clear();
    itertools_types.emplace(n, tp);
    return tp;
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
  static Status getattr(Translator& t, Frame& f, const VPtr& obj, const std::string& name, VPtr& out) {
    if (obj->frame && (name == "send" || name == "throw")) {  // a generator's: contextlib's managers call them
      out = t.bound_method(obj, Ref(), name);
      return std::nullopt;
    }
    return no_answer::getattr(t, f, obj, name, out);
  }
  static constexpr auto call = no_answer::call;
  static constexpr auto setattr = no_answer::setattr;
  static Status call_method(Translator& t, Frame& f, const VPtr& m, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
    const bool thrown = m->name == "throw";
    if (!m->self->frame || args.empty() || args.size() > (thrown ? 3u : 1u) || !kwargs.empty() || (m->name != "send" && !thrown))
      return no_answer::call_method(t, f, m, args, kwargs, out);
    // throw(exc), or 3.11 contextlib's throw(type, value, traceback): the value when there is one
    const bool with_value = thrown && args.size() >= 2 && !(args[1]->kind == VK::Const && args[1]->obj.get() == Py_None);
    return t.generator_send(f, m->self, thrown, with_value ? args[1] : args[0], out);
  }
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    // iter((the items not taken yet,)), as TorchDynamo's ListIteratorVariable: an iterator over a
    // list, tuple, dict or range of the trace that lives across a break. Lazy ones: see lazy_rebuild.
    if (v->name == "user_iterator")  // the iterator object itself, as the trace left it (its __next__ goes on)
      return v->items.size() <= v->pos && r.value(v->self) && r.remember(v);
    if (v->name == "list_iterator") return list_iterator_rebuild(r, v);
    if (v->flag || v->name == "map" || v->name == "filter" || v->name == "zip" || v->name == "count" || v->name == "repeat")
      return lazy_rebuild(r, v);  // a map that has ended is still a map (next() on it breaks, as in TorchDynamo)
    if (runs_as_generator(v->name)) return false;
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

  // iter(lst) alive across a break: iter((the items it has not given yet,)), taken from the list as
  // it is at the break (items pulled but not taken first)
  static bool list_iterator_rebuild(cg::Rebuilder& r, const VPtr& v) {
    static PyObject* iter_fn = PyDict_GetItemString(PyEval_GetBuiltins(), "iter");  // borrowed: builtins live on
    if (!iter_fn) return false;
    r.e.callable_const(iter_fn);
    size_t n = 0;
    for (size_t i = v->pos; i < v->items.size(); ++i, ++n)
      if (!r.value(v->items[i])) return false;
    if (v->flag)
      for (size_t i = v->items.size(); i < v->self->items.size(); ++i, ++n)
        if (!r.value(v->self->items[i])) return false;
    r.e.emit(N::BUILD_TUPLE, static_cast<int>(n));
    r.e.call(1);
    return r.remember(v);
  }

  // enumerate, itertools.chain/islice/... are generators in TorchDynamo 2.13 (its polyfills): one
  // alive across a break is run to its end there, and the list iterator it advances doing so is a
  // mutation it refuses (the frame runs eagerly). dynview runs such a frame eagerly as well. (A
  // generator of the trace that has ended is rebuilt from what is left, as TorchDynamo's; one still
  // running is lazy: lazy_rebuild.)
  static bool runs_as_generator(const std::string& name) {
    static const char* names[] = {"enumerate", "chain", "from_iterable", "islice", "pairwise", "zip_longest",
                                  "accumulate", "compress", "cycle", "dropwhile", "takewhile", "starmap",
                                  "filterfalse"};
    for (const char* n : names)
      if (name == n) return true;
    return false;
  }

  // A lazy iterator alive across a break, rebuilt the way TorchDynamo 2.13 does (MapVariable,
  // FilterVariable, ZipVariable, CountIteratorVariable, RepeatIteratorVariable): the same builtin
  // called on its rebuilt parts, so the resume function takes from a real map/filter/zip whose
  // function runs only when, and as often as, eager runs it. The others (generators, groupby,
  // repeat(x, n) ...) are not rebuilt: the frame runs eagerly, as TorchDynamo's does for them
  // (runs_as_generator) or where dynview cannot rebuild them.
  static bool lazy_rebuild(cg::Rebuilder& r, const VPtr& v) {
    if (v->items.size() > v->pos) return false;  // items made but not taken: not in a rebuilt map's state
    auto builtin = [](const char* name) { return PyDict_GetItemString(PyEval_GetBuiltins(), name); };  // borrowed
    PyObject* fn = nullptr;
    std::vector<VPtr> parts;
    if (v->name == "map" || v->name == "filter") {
      if (!v->self || v->cells.empty()) return false;
      fn = builtin(v->name.c_str());
      parts.push_back(v->self);
      parts.insert(parts.end(), v->cells.begin(), v->cells.end());
    } else if (v->name == "zip") {
      if (v->kwdefaults) return false;  // zip(strict=True): not rebuilt
      fn = builtin("zip");
      parts = v->cells;
    } else if (v->name == "count") {
      fn = itertools_attr("count");
      parts = {v->defaults, v->kwdefaults};
    } else if (v->name == "repeat" && !v->kwdefaults) {  // repeat(x, n) is a generator in TorchDynamo
      fn = itertools_attr("repeat");
      parts = {v->self};
    }
    if (!fn) return false;
    for (const VPtr& p : parts)
      if (!p) return false;
    r.e.callable_const(fn);
    for (const VPtr& p : parts)
      if (!r.value(p)) return false;
    r.e.call(static_cast<int>(parts.size()));
    return r.remember(v);
  }

  static PyObject* itertools_attr(const char* name) {  // borrowed from the module, which lives on
    static PyObject* mod = PyImport_ImportModule("itertools");  // never released (process lifetime)
    if (!mod) return PyErr_Clear(), nullptr;
    Ref o = Ref::steal(PyObject_GetAttrString(mod, name));
    if (!o) PyErr_Clear();
    return o.get();
  }
};
DV_KIND(Iter, "iterator")

}  // namespace dv
