// Lists (VK::List): items; from outside the frame (source set) they are written back when mutated. A
// deque made in the trace is a List with obj = deque (deque.cpp).
#include <algorithm>

#include "tracer/pycache.h"
#include "tracer/rebuild.h"
#include "tracer/values/kind.h"

namespace dv {

// List, Dict, Tuple

namespace {

VPtr none(Translator& t) { return t.constant(Ref::borrow(Py_None)); }

Status append(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  if (args.size() != 1 || !kwargs.empty()) return t.brk(f, "DV0004", "list.append with these arguments");
  self->items.push_back(args[0]);
  out = none(t);
  return std::nullopt;
}

Status extend(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  if (args.size() != 1 || !kwargs.empty()) return t.brk(f, "DV0004", "list.extend with these arguments");
  VPtr it;  // item by item: a lazy map sees the list grow
  if (Status s = t.iterate(f, args[0], it, /*materialize=*/false)) return s;
  while (true) {  // (a list argument is iterated over a snapshot: lst.extend(lst) doubles it once)
    if (Status s = t.pull(f, it, it->pos + 1)) return s;
    if (it->pos >= it->items.size()) break;
    self->items.push_back(it->items[it->pos++]);
  }
  out = none(t);
  return std::nullopt;
}

}  // namespace

// iter(lst), and what a for loop over lst takes: a lazy iterator reading lst's items by index as it
// is pulled (Translator::pull), so that items the loop body appends are reached and removed ones
// skipped, as CPython's list iterator does. Alive across a break it is rebuilt as an iterator over
// the items left at that point (iterator.cpp).
Status list_iterator(Translator& t, Frame& f, const VPtr& lst, VPtr& out) {
  if (Status s = t.realize_lazy(f, lst)) return s;
  VPtr it = t.make(VK::Iter);
  it->name = "list_iterator";
  it->self = lst;
  it->flag = true;
  out = it;
  return std::nullopt;
}

namespace {

Status pop(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  if (!kwargs.empty() || args.size() > 1 || (args.size() == 1 && (args[0]->kind != VK::Const || !PyLong_CheckExact(args[0]->obj.get()))))
    return t.brk(f, "DV0004", "list.pop with these arguments");
  const long n = static_cast<long>(self->items.size());
  long i = args.empty() ? n - 1 : PyLong_AsLong(args[0]->obj.get());
  if (i < 0) i += n;
  if (n == 0 || i < 0 || i >= n)
    return t.raise_new(f, PyExc_IndexError, n == 0 ? "pop from empty list" : "pop index out of range");
  out = self->items[static_cast<size_t>(i)];
  self->items.erase(self->items.begin() + i);
  return std::nullopt;
}

Status insert(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  if (args.size() != 2 || !kwargs.empty() || args[0]->kind != VK::Const || !PyLong_CheckExact(args[0]->obj.get()))
    return t.brk(f, "DV0004", "list.insert with these arguments");
  long i = PyLong_AsLong(args[0]->obj.get());
  const long n = static_cast<long>(self->items.size());
  if (i < 0) i = std::max(0L, i + n);
  self->items.insert(self->items.begin() + std::min(i, n), args[1]);
  out = none(t);
  return std::nullopt;
}

Status remove(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  if (args.size() != 1 || !kwargs.empty()) return t.brk(f, "DV0004", "list.remove with these arguments");
  const VPtr& a = args[0];
  // list.remove compares by identity first (a tensor or module in the list is found as itself),
  // then by ==: of constants, folded; of tensors, a value comparison (a break); of modules and
  // objects without their own __eq__, identity again
  auto by_identity = [](const VPtr& v) {
    return (v->kind == VK::NNModule || v->kind == VK::Object) && v->obj && Py_TYPE(v->obj.get())->tp_richcompare == PyBaseObject_Type.tp_richcompare;
  };
  for (size_t i = 0; i < self->items.size(); ++i) {
    const VPtr& x = self->items[i];
    const bool consts = x->kind == VK::Const && a->kind == VK::Const;  // (compared by == below)
    if (!consts && same_object(t, f, x, a)) {
      self->items.erase(self->items.begin() + static_cast<long>(i));
      out = none(t);
      return std::nullopt;
    }
    if (x->kind == VK::Tensor || a->kind == VK::Tensor) return t.brk(f, "DV0002", "list.remove compares a tensor by value");
    if ((by_identity(x) || x->kind == VK::Const) && (by_identity(a) || a->kind == VK::Const) && !(x->kind == VK::Const && a->kind == VK::Const))
      continue;  // an object compares unequal to what it is not
    if (x->kind != VK::Const || a->kind != VK::Const) return t.brk(f, "DV0002", "list.remove compares a " + std::string(vk_name(x->kind)) + " by value");
    const int eq = PyObject_RichCompareBool(x->obj.get(), a->obj.get(), Py_EQ);
    if (eq < 0) return PyErr_Clear(), t.brk(f, "DV0010", "list.remove raised comparing");
    if (eq == 1) {
      self->items.erase(self->items.begin() + static_cast<long>(i));
      out = none(t);
      return std::nullopt;
    }
  }
  return t.raise_new(f, PyExc_ValueError, "list.remove(x): x not in list");
}

Status clear(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  if (!args.empty() || !kwargs.empty()) return t.brk(f, "DV0004", "list.clear with arguments");
  self->items.clear();
  out = none(t);
  return std::nullopt;
}

Status reverse(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  if (!args.empty() || !kwargs.empty()) return t.brk(f, "DV0004", "list.reverse with arguments");
  std::reverse(self->items.begin(), self->items.end());
  out = none(t);
  return std::nullopt;
}

// list.sort(key=..., reverse=...): what sorted() gives (by constant keys, stable), in place.
Status sort(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  if (!args.empty()) return t.raise_new(f, PyExc_TypeError, "sort() takes no positional arguments");
  static PyObject* sorted_fn = PyDict_GetItemString(PyEval_GetBuiltins(), "sorted");  // borrowed: builtins live on
  if (!sorted_fn) return t.brk(f, "DV0004", "list.sort: builtins.sorted is missing");
  VPtr fn = t.make(VK::Object);
  fn->obj = Ref::borrow(sorted_fn);
  VPtr r;
  if (Status s = t.call(f, fn, {self}, std::move(kwargs), r)) return s;
  if (r->kind != VK::List) return t.brk(f, "DV0004", "list.sort: sorted() gave a " + std::string(vk_name(r->kind)));
  self->items = r->items;
  out = none(t);
  return std::nullopt;
}

Status copy(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  if (!args.empty() || !kwargs.empty()) return t.brk(f, "DV0004", "list.copy with arguments");
  out = t.make(VK::List);
  out->items = self->items;
  return std::nullopt;
}

}  // namespace

namespace {

// A value whose == is identity (object's own __eq__): objects, modules, instances of plain classes
// made in the trace, Python functions.
bool compares_by_identity(const VPtr& v) {
  if (v->kind == VK::Function) return true;
  if (v->kind == VK::Instance)
    return v->obj && PyType_Check(v->obj.get()) &&
           reinterpret_cast<PyTypeObject*>(v->obj.get())->tp_richcompare == PyBaseObject_Type.tp_richcompare;
  return (v->kind == VK::Object || v->kind == VK::NNModule) && v->obj && !PyType_Check(v->obj.get()) &&
         Py_TYPE(v->obj.get())->tp_richcompare == PyBaseObject_Type.tp_richcompare;
}

// A constant of a builtin type whose == gives NotImplemented for an object it does not know.
bool builtin_constant(const VPtr& v) {
  return v->kind == VK::Const && !(Py_TYPE(v->obj.get())->tp_flags & Py_TPFLAGS_HEAPTYPE) && is_const_tree(v->obj.get());
}

}  // namespace

// `x == v` as list.index / count / tuple's ask it (PyObject_RichCompareBool: identity first): eq is
// 1 or 0; a comparison whose answer the trace cannot know (a tensor's values, a class's own __eq__)
// breaks, as does one that raised.
Status sequence_item_equal(Translator& t, Frame& f, const VPtr& x, const VPtr& v, const char* what, int& eq) {
  const bool consts = x->kind == VK::Const && v->kind == VK::Const;
  if (!consts && same_object(t, f, x, v)) return eq = 1, std::nullopt;
  if (consts) {
    eq = PyObject_RichCompareBool(x->obj.get(), v->obj.get(), Py_EQ);
    if (eq < 0) return PyErr_Clear(), t.brk(f, "DV0010", std::string(what) + " raised comparing its items");
    return std::nullopt;
  }
  if (x->kind == VK::Tensor || v->kind == VK::Tensor) {
    const VPtr& other = x->kind == VK::Tensor ? v : x;
    if (other->kind == VK::Const && other->obj.get() == Py_None) return eq = 0, std::nullopt;  // Tensor.__eq__(None) is False
    if (x->kind == VK::Tensor)  // v == t is a tensor: eager takes its truth (or raises)
      if (Status s = ambiguous_truth(t, f, x)) return s;
    return t.brk(f, "DV0002", std::string(what) + " over tensors compares their values");
  }
  if ((compares_by_identity(x) || builtin_constant(x)) && (compares_by_identity(v) || builtin_constant(v)))
    return eq = 0, std::nullopt;  // not the same object: unequal
  return t.brk(f, "DV0002", std::string(what) + " compares a " + vk_name(x->kind) + " with a " + vk_name(v->kind) + " by value");
}

// list.index(v[, start[, stop]]) and count(v), for lists and tuples.
Status sequence_index_or_count(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out,
                               bool index) {
  const char* what = self->kind == VK::Tuple ? (index ? "tuple.index" : "tuple.count") : (index ? "list.index" : "list.count");
  for (VPtr& a : args)  // an int that changed between calls (automatic dynamic): its value, guarded
    if (a->kind == VK::Sym && a->obj && sym_python_type(a->obj.get()) == &PyLong_Type)
      if (Ref v = t.specialize(a)) a = t.constant(v);
  if (args.empty() || args.size() > (index ? 3u : 1u) || !kwargs.empty())
    return t.brk(f, "DV0004", std::string(what) + " with these arguments");
  const long n = static_cast<long>(self->items.size());
  long lo = 0, hi = n, count = 0, first = -1;  // index(v, start, stop): the slice's bounds
  for (size_t a = 1; a < args.size(); ++a) {
    if (args[a]->kind != VK::Const || !PyLong_CheckExact(args[a]->obj.get()))
      return t.brk(f, "DV0004", std::string(what) + " with non-constant bounds");
    long b = PyLong_AsLong(args[a]->obj.get());
    b = b < 0 ? std::max(0L, b + n) : std::min(b, n);
    (a == 1 ? lo : hi) = b;
  }
  for (size_t i = static_cast<size_t>(lo); i < static_cast<size_t>(std::max(lo, hi)) && !(index && first >= 0); ++i) {
    int eq = 0;
    if (Status s = sequence_item_equal(t, f, self->items[i], args[0], what, eq)) return s;
    if (eq) {
      if (first < 0) first = static_cast<long>(i);
      ++count;
    }
  }
  if (index && first < 0) {
    if (self->kind == VK::Tuple) return t.raise_new(f, PyExc_ValueError, "tuple.index(x): x not in tuple");
    if (args[0]->kind != VK::Const)  // list's message holds the value's repr (an object's could run its own __repr__)
      return t.brk(f, "DV0010", "list.index of a " + std::string(vk_name(args[0]->kind)) + " not in the list raises ValueError");
    return t.raise_new(f, PyExc_ValueError, repr_of(args[0]->obj.get()) + " is not in list");
  }
  out = t.constant_steal(PyLong_FromLong(index ? first : count));
  return std::nullopt;
}

namespace {

Status index(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  return sequence_index_or_count(t, f, self, args, kwargs, out, true);
}
Status count(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  return sequence_index_or_count(t, f, self, args, kwargs, out, false);
}

// list's methods the trace follows; `mutates`: a list from outside the frame (an argument, a
// module's attribute) changed by one is written back by the transformed code (lst[:] = [...]).
const MethodTable kListMethods = {
    {"append", {append, true}}, {"extend", {extend, true}}, {"pop", {pop, true}},     {"insert", {insert, true}},
    {"remove", {remove, true}}, {"clear", {clear, true}},   {"reverse", {reverse, true}}, {"copy", {copy, false}},
    {"index", {index, false}},  {"count", {count, false}},   {"sort", {sort, true}},
};

}  // namespace

// Calls a container method found in `table` on self (a List, Dict or Tuple value); a container from
// outside the frame is noted as mutated by the methods that change it. Methods not in the table break:
// the in-place ones dynview does not replay on inputs (sort, item assignment) say so.
Status call_table_method(Translator& t, Frame& f, const MethodTable& table, const VPtr& m, std::vector<VPtr>& args, KwArgs& kwargs,
                         VPtr& out) {
  const VPtr& self = m->self;
  if (self->kind != VK::Dict)  // (a lazy dict's methods: realize_call decides what they read)
    if (Status s = t.realize_lazy(f, self)) return s;
  auto row = table.find(m->name);
  if (row == table.end()) {
    if (self->source && (m->name == "sort" || m->name == "__setitem__" || m->name == "__delitem__" || m->name == "__iadd__"))
      return t.brk(f, "DV0008", "mutating an input " + std::string(vk_name(self->kind)) + " (" + m->name + ")",
                   "dynview replays the list and dict methods it follows on inputs; this one is not followed yet");
    return t.brk(f, "DV0004", std::string(vk_name(self->kind)) + "." + m->name + " is not supported");
  }
  if (row->second.mutates && self->source) t.output.side_effects.note_mutation(self);
  return row->second.fn(t, f, self, args, kwargs, out);
}


Status builtin_method_attr(Translator& t, Frame& f, const VPtr& obj, PyTypeObject* type, const std::string& name, VPtr& out) {
  Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
  if (!nm || !_PyType_Lookup(type, nm.get()))
    return PyErr_Clear(), t.brk(f, kNoAttributeId, "'" + std::string(type->tp_name) + "' object has no attribute '" + name + "'");
  out = t.bound_method(obj, Ref(), name);
  return std::nullopt;
}

template <>
struct Kind<VK::List> {
  static constexpr auto describe = sequence_describe;
  static PyObject* python_type(Translator& /*t*/, const VPtr& v) {
    return is_deque(v) ? v->obj.get() : reinterpret_cast<PyObject*>(&PyList_Type);
  }
  static std::optional<Ref> as_python(Translator& t, const VPtr& v, bool meta) {
    return tuple_as_python(t, v, meta);
  }
  static constexpr auto graph_arg = sequence_graph_arg;
  static constexpr auto truth = items_truth;
  static constexpr auto iterate = sequence_iterate;
  static Status getattr(Translator& t, Frame& f, const VPtr& obj, const std::string& name, VPtr& out) {
    if (name == "__class__") {  // x.__class__(items): its class, as type(x)
      out = t.make(VK::Object);
      out->obj = Ref::borrow(is_deque(obj) ? deque_class() : reinterpret_cast<PyObject*>(&PyList_Type));
      return std::nullopt;
    }
    if (is_deque(obj)) {  // deque.cpp answers its methods
      if (name == "maxlen") {
        out = obj->defaults;
        return std::nullopt;
      }
      return builtin_method_attr(t, f, obj, reinterpret_cast<PyTypeObject*>(obj->obj.get()), name, out);
    }
    return builtin_method_attr(t, f, obj, &PyList_Type, name, out);
  }
  static constexpr auto call = no_answer::call;
  static constexpr auto setattr = no_answer::setattr;
  static Status call_method(Translator& t, Frame& f, const VPtr& m, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
    if (is_deque(m->self)) return t.deque_method(f, m->self, m->name, args, kwargs, out);
    return call_table_method(t, f, kListMethods, m, args, kwargs, out);
  }
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    return tuple_reconstruct(r, v);
  }
};
DV_KIND(List, "list")

}  // namespace dv
