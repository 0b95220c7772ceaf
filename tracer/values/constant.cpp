// Immutable Python constants (VK::Const): numbers, strings, None, dtypes, devices, torch.Size, tuples of
// constants, slices: evaluated now.
#include "tracer/pycache.h"
#include "tracer/rebuild.h"
#include "tracer/values/kind.h"

namespace dv {

using cg::N;

bool list_own(PyTypeObject* tp, const char* name) {
  Ref nm = Ref::steal(PyUnicode_InternFromString(name));
  return nm && _PyType_Lookup(tp, nm.get()) == _PyType_Lookup(&PyList_Type, nm.get());
}

// The items of a list subclass passed in (its own __iter__ and item access are list's), each wrapped
// from its source; its length guarded.
static Status list_subclass_items(Translator& t, Frame& f, const VPtr& v, VPtr& out) {
  PyObject* o = v->obj.get();
  const Py_ssize_t n = PyList_GET_SIZE(o);
  if (Guard* g = t.add_guard(GuardKind::LENGTH_CHECK, v->source, {}, f, "len(" + v->source->text() + ") == " + std::to_string(n)))
    g->length = n;
  VPtr it = t.make(VK::Iter);
  std::vector<Ref> items;  // (wrap may run Python code)
  for (Py_ssize_t i = 0; i < n; ++i) items.push_back(Ref::borrow(PyList_GET_ITEM(o, i)));
  for (Py_ssize_t i = 0; i < n; ++i) {
    VPtr iv = t.wrap(items[static_cast<size_t>(i)], Source::item(v->source, Ref::steal(PyLong_FromSsize_t(i))), f);
    if (!iv) return t.brk(f, "DV0013", std::string("an item of a ") + Py_TYPE(o)->tp_name + " cannot be traced");
    it->items.push_back(iv);
  }
  out = it;
  return std::nullopt;
}

// Const, Object
Status const_iterate(Translator& t, Frame& f, const VPtr& v, VPtr& out, bool materialize) {
  VPtr it = t.make(VK::Iter);
  if (outside_dict(v, "__iter__")) {  // a Counter reached from the frame: its keys, guarded
    std::vector<VPtr> none;
    std::vector<std::pair<std::string, VPtr>> no_kw;
    return t.outside_dict_read(f, v, "__iter__", none, no_kw, out);
  }
  // An object of a Python class whose __iter__ is Python code: inlined, as an instance's
  if (v->kind == VK::Object && user_iter(v)) return t.instance_iterate(f, v, out, materialize);
  // A list subclass passed in that iterates as a list (LogitsProcessorList, StoppingCriteriaList):
  // its items, each from its source, the length guarded
  PyObject* o = v->obj.get();
  if (v->kind == VK::Object && v->source && PyList_Check(o) && !PyList_CheckExact(o) && Py_TYPE(o)->tp_iter == PyList_Type.tp_iter &&
      list_own(Py_TYPE(o), "__getitem__"))
    return list_subclass_items(t, f, v, out);
  if (v->kind == VK::Object && !PyRange_Check(v->obj.get()) && !frozen_object(v->obj.get())) return t.brk(f, "DV0016", std::string("iterating over ") + Py_TYPE(v->obj.get())->tp_name);
  Ref iter = Ref::steal(PyObject_GetIter(v->obj.get()));
  if (!iter) return t.brk(f, "DV0016", "object is not iterable");
  while (Ref x = Ref::steal(PyIter_Next(iter.get()))) {
    it->items.push_back(t.constant(x));
    if (it->items.size() > 100000) return t.brk(f, "DV0014", "iterable too long to unroll");
  }
  if (PyErr_Occurred()) return t.brk(f, "DV0016", "iteration raised");
  out = it;
  return std::nullopt;
}

template <>
struct Kind<VK::Const> {
  static constexpr auto describe = repr_describe;
  static PyObject* python_type(Translator& /*t*/, const VPtr& v) {
    if (is_fake_id(v->obj.get())) return reinterpret_cast<PyObject*>(&PyLong_Type);
    return reinterpret_cast<PyObject*>(Py_TYPE(v->obj.get()));
  }
  static std::optional<Ref> as_python(Translator& /*t*/, const VPtr& v, bool /*meta*/) {
    return v->obj;
  }
  static bool graph_arg(Translator& /*t*/, const VPtr& v, ArgTree& out) {
    if (PySlice_Check(v->obj.get())) {
      auto* s = reinterpret_cast<PySliceObject*>(v->obj.get());
      out.kind = ArgTree::Kind::Slice;
      for (PyObject* part : {s->start, s->stop, s->step}) {
        ArgTree a;
        a.constant = Ref::borrow(part);
        out.items.push_back(std::move(a));
      }
      return true;
    }
    out.kind = ArgTree::Kind::Const;
    out.constant = v->obj;
    return numpy_graph_constant(out.constant);  // (np.False_ folded from a comparison of NumPy scalars)
  }
  static constexpr auto truth = python_truth;
  static Status iterate(Translator& t, Frame& f, const VPtr& v, VPtr& out, bool materialize) {
    return const_iterate(t, f, v, out, materialize);
  }
  static Status getattr(Translator& t, Frame& f, const VPtr& obj, const std::string& name, VPtr& out) {
    return object_getattr(t, f, obj, name, out);
  }
  static constexpr auto call = no_answer::call;
  static constexpr auto setattr = no_answer::setattr;
  static Status call_method(Translator& t, Frame& f, const VPtr& m, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
    const VPtr& self = m->self;
    if (!self->source && PySet_CheckExact(self->obj.get()) && !m->name.empty() && m->name[0] != '_') {
      // a set made in the trace given values that are not constants (seen.add(t), s.update(mods)):
      // from now on a Set holding them (values/set.cpp)
      bool values = false;
      for (const VPtr& a : args) values |= a->kind != VK::Const;
      if (values && m->name != "pop" && set_promote(t, self)) return ops(VK::Set).call_method(t, f, m, args, kwargs, out);
    }
    return object_method(t, f, m, args, kwargs, out);
  }
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    if (is_fake_id(v->obj.get())) return false;  // id() of a value made in the trace: no real id to give
    if (PySet_CheckExact(v->obj.get()) && v->source) return r.e.source(*v->source);  // a set from the frame: that set
    if (PySet_CheckExact(v->obj.get())) {  // a set made in the trace: a new set per call, set(frozenset)
      Ref frozen = Ref::steal(PyFrozenSet_New(v->obj.get()));
      if (!frozen) return PyErr_Clear(), false;
      r.e.callable_const(reinterpret_cast<PyObject*>(&PySet_Type));
      r.e.emit(N::LOAD_CONST, r.e.konst(frozen.get()));
      r.e.call(1);
      return true;
    }
    r.e.emit(N::LOAD_CONST, r.e.konst(v->obj.get()));
    return true;
  }
};
DV_KIND(Const, "constant")

}  // namespace dv
