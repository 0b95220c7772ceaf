// Sets that hold values of the trace (VK::Set): tensors, modules, functions and objects compared by
// identity, with constants among them ({x, x + 1}, set(params), {relu, tanh}, a set of the modules a
// walk has seen). A set of constants only stays a real Python set (a Const, handlers_build.cpp); one
// becomes a Set when a value that is not a constant is added to it.
//
// items: the members in the order they were added. Membership is Python's: constants by hash and
// ==, everything else by identity (same_object, guarded as `is` is); a class that defines its own
// __eq__ or __hash__ is not held (DV0023). Iteration follows Python's order where the members are
// real objects (constants, modules, functions from outside: a real set of them is asked); a set
// holding tensors made in the trace iterates in the order they were added, as TorchDynamo's
// SetVariable does (eager's order follows the tensors' addresses, which no trace can know).
// A set from the frame holding objects (a global set of modules to skip) is guarded equal to the set
// it was (its members compare by identity, so the guard runs no Python) and read only: changing it
// breaks. One made in the trace that escapes is rebuilt with BUILD_SET.
#include "tracer/pycache.h"
#include "tracer/rebuild.h"
#include "tracer/translator.h"
#include "tracer/values/kind.h"

namespace dv {

using cg::N;

namespace {

// A value with one real object behind it, the same one on every call once guarded (same_object):
// constants, and objects, modules and functions from outside the trace.
bool real_member(const VPtr& v) {
  return v->obj && (v->kind == VK::Const || v->kind == VK::Object || v->kind == VK::NNModule ||
                    (v->kind == VK::Function && PyFunction_Check(v->obj.get())));
}

// The index of x among s's members, -1 when absent, -2 when comparing constants raised.
long find_member(Translator& t, Frame& f, const Value& s, const VPtr& x) {
  for (size_t i = 0; i < s.items.size(); ++i) {
    const VPtr& y = s.items[i];
    if (x->kind == VK::Const && y->kind == VK::Const) {
      if (x->obj.get() == y->obj.get()) return static_cast<long>(i);
      const Py_hash_t hx = PyObject_Hash(x->obj.get()), hy = PyObject_Hash(y->obj.get());
      if (hx == -1 || hy == -1) return PyErr_Clear(), -2;
      if (hx != hy) continue;
      const int eq = PyObject_RichCompareBool(x->obj.get(), y->obj.get(), Py_EQ);
      if (eq < 0) return PyErr_Clear(), -2;
      if (eq) return static_cast<long>(i);
      continue;
    }
    if (x->kind == VK::Const || y->kind == VK::Const) continue;  // an object compared by identity is no constant
    if (same_object(t, f, x, y)) return static_cast<long>(i);
  }
  return -1;
}

// A tuple of constants ((i, j) built in the trace) as one constant tuple, as a set holds it.
VPtr as_member(Translator& t, const VPtr& v) {
  if (v->kind != VK::Tuple || v->obj || v->lazy) return v;
  Ref tup = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(v->items.size())));
  for (size_t i = 0; tup && i < v->items.size(); ++i) {
    VPtr x = as_member(t, v->items[i]);
    if (x->kind != VK::Const) return v;
    PyTuple_SET_ITEM(tup.get(), static_cast<Py_ssize_t>(i), Ref::borrow(x->obj.get()).release());
  }
  return tup ? t.constant(tup) : v;
}

Status add_member(Translator& t, Frame& f, Value& s, const VPtr& given) {
  const VPtr x = as_member(t, given);
  if (!set_member_ok(x))
    return t.brk(f, "DV0023", std::string("a set holding a ") + vk_name(x->kind) + " (not a constant, tensor or object compared by identity)");
  const long i = find_member(t, f, s, x);
  if (i == -2) return t.brk(f, "DV0010", "comparing set members raised");
  if (i == -1) s.items.push_back(x);
  return std::nullopt;
}

// The members of an operand of a set operator or method: a Set's, a set or frozenset of constants'
// (as constants), or any iterable's items (`s.update(xs)`, `s.union(d)`).
Status members_of(Translator& t, Frame& f, const VPtr& v, std::vector<VPtr>& out) {
  VPtr it;
  if (Status s = t.iterate(f, v, it)) return s;
  if (Status s = t.pull(f, it, SIZE_MAX)) return s;
  out.clear();
  for (size_t i = it->pos; i < it->items.size(); ++i) out.push_back(as_member(t, it->items[i]));
  it->pos = it->items.size();
  return std::nullopt;
}

bool set_like(const VPtr& v) {
  return v->kind == VK::Set || (v->kind == VK::Const && v->obj && PyAnySet_Check(v->obj.get()));
}

VPtr new_set(Translator& t, std::vector<VPtr> items) {
  VPtr s = t.make(VK::Set);
  s->items = std::move(items);
  return s;
}

// A set from the frame is read only: its changes would have to be written back to it.
Status check_mutable(Translator& t, Frame& f, const VPtr& s, const std::string& what) {
  if (s->source)
    return t.brk(f, "DV0023", "set." + what + " of a set from outside holding objects",
                 "dynview changes sets of constants passed in, and sets made in the compiled function");
  return std::nullopt;
}

// a OP b for | & - ^ on member lists (Python's: the left operand's members first, in its order).
Status combine(Translator& t, Frame& f, char op, const std::vector<VPtr>& a, const std::vector<VPtr>& b, std::vector<VPtr>& out) {
  Value bs;
  bs.kind = VK::Set;
  bs.items = b;
  Value as;
  as.kind = VK::Set;
  as.items = a;
  out.clear();
  for (const VPtr& x : a) {
    const long in_b = find_member(t, f, bs, x);
    if (in_b == -2) return t.brk(f, "DV0010", "comparing set members raised");
    const bool keep = op == '|' || (op == '&' && in_b >= 0) || ((op == '-' || op == '^') && in_b < 0);
    if (keep) out.push_back(x);
  }
  if (op == '|' || op == '^') {
    Value acc;
    acc.kind = VK::Set;
    acc.items = out;
    for (const VPtr& x : b) {
      const long in_a = find_member(t, f, as, x);
      if (in_a == -2) return t.brk(f, "DV0010", "comparing set members raised");
      if (in_a >= 0) continue;
      if (find_member(t, f, acc, x) == -1) {
        acc.items.push_back(x);
        out.push_back(x);
      }
    }
  }
  return std::nullopt;
}

Status none(Translator& t, VPtr& out) {
  out = t.constant(Ref::borrow(Py_None));
  return std::nullopt;
}

}  // namespace

bool hashed_by_identity(PyTypeObject* tp) {
  return tp->tp_hash == PyBaseObject_Type.tp_hash && tp->tp_richcompare == PyBaseObject_Type.tp_richcompare;
}

// A module's builtin function (torch.zeros): its == and hash are its module's and C function's, and
// the module holds the one object of it, so it compares as by identity (torch.utils._device's set of
// factory functions, a dispatch table of torch functions)
bool module_builtin(PyObject* o) {
  if (!PyCFunction_Check(o)) return false;
  PyObject* self = PyCFunction_GET_SELF(o);
  return !self || PyModule_Check(self);
}

// An object whose == is True only for another of its own type (builtin functions and methods,
// method-wrappers: their comparisons give NotImplemented for anything else)
bool equal_only_to_own_type(PyObject* o) {
  return PyCFunction_Check(o) || Py_TYPE(o) == method_wrapper_type();
}

bool set_member_ok(const VPtr& v) {
  if (!v) return false;
  switch (v->kind) {
    case VK::Const: {
      if (PyObject_Hash(v->obj.get()) == -1) return PyErr_Clear(), false;
      return true;
    }
    case VK::Tensor: return true;  // torch.Tensor.__hash__ is id(self), its == is not asked for (a set compares by hash, then identity)
    case VK::NNModule: case VK::Object: return v->obj && (hashed_by_identity(Py_TYPE(v->obj.get())) || module_builtin(v->obj.get()));
    case VK::Function: return true;  // functions hash and compare by identity
    case VK::Instance: return v->obj && PyType_Check(v->obj.get()) && hashed_by_identity(reinterpret_cast<PyTypeObject*>(v->obj.get()));
    default: return false;
  }
}

// {a, b}, set(xs), a set comprehension: a set of constants is a real set (a Const), anything else a Set.
Status make_set_value(Translator& t, Frame& f, const std::vector<VPtr>& given, VPtr& out) {
  std::vector<VPtr> items;
  for (const VPtr& v : given) items.push_back(as_member(t, v));
  bool consts = true;
  for (const VPtr& v : items) consts &= v && v->kind == VK::Const && PyObject_Hash(v->obj.get()) != -1;
  PyErr_Clear();
  if (consts) {
    Ref s = Ref::steal(PySet_New(nullptr));
    for (const VPtr& v : items)
      if (!s || PySet_Add(s.get(), v->obj.get()) < 0) return PyErr_Clear(), t.brk(f, "DV0010", "building a set raised");
    out = t.constant(s);
    return std::nullopt;
  }
  VPtr s = new_set(t, {});
  for (const VPtr& v : items)
    if (Status st = add_member(t, f, *s, v)) return st;
  out = s;
  return std::nullopt;
}

bool set_promote(Translator& t, const VPtr& s) {
  std::vector<VPtr> members;
  Ref it = Ref::steal(PyObject_GetIter(s->obj.get()));
  while (Ref m = it ? Ref::steal(PyIter_Next(it.get())) : Ref()) members.push_back(t.constant(m));
  if (PyErr_Occurred() || !it) return PyErr_Clear(), false;
  s->kind = VK::Set;
  s->obj = Ref();
  s->items = std::move(members);
  return true;
}

// s.add(x) for a set made in the trace: a set of constants given a value that is not one becomes a
// Set in place (its aliases see the change), its members the constants it held.
Status set_add_value(Translator& t, Frame& f, const VPtr& s, const VPtr& given) {
  const VPtr x = as_member(t, given);
  if (s->kind == VK::Const) {
    if (s->source || !PySet_CheckExact(s->obj.get())) return t.brk(f, "DV0023", "a set from outside given a value that is not a constant");
    if (x->kind == VK::Const) {
      if (PySet_Add(s->obj.get(), x->obj.get()) < 0) return PyErr_Clear(), t.brk(f, "DV0010", "set.add raised");
      return std::nullopt;
    }
    if (!set_member_ok(x)) return add_member(t, f, *s, x);  // (its break)
    if (!set_promote(t, s)) return t.brk(f, "DV0010", "iterating a set raised");
  }
  if (Status st = check_mutable(t, f, s, "add")) return st;
  return add_member(t, f, *s, x);
}

Status set_contains(Translator& t, Frame& f, const VPtr& s, const VPtr& given, bool& found) {
  const VPtr x = as_member(t, given);
  if (x->kind == VK::Object && x->obj && equal_only_to_own_type(x->obj.get())) {
    // (a bound builtin method or method-wrapper -- the __get__ of an attribute a torch function mode's
    // handler is given --, in a set holding nothing of its type: not in it, as == says)
    PyTypeObject* tp = Py_TYPE(x->obj.get());
    bool same_type = false;
    for (const VPtr& y : s->items) same_type |= !y->obj || Py_TYPE(y->obj.get()) == tp;
    if (!same_type) return found = false, std::nullopt;
  }
  if (!set_member_ok(x)) {
    if (x->kind == VK::List || x->kind == VK::Dict) return t.raise_new(f, PyExc_TypeError, std::string("unhashable type: '") + (x->kind == VK::List ? "list" : "dict") + "'");
    return t.brk(f, "DV0023", std::string("'in' with a ") + vk_name(x->kind) + " and a set");
  }
  const long i = find_member(t, f, *s, x);
  if (i == -2) return t.brk(f, "DV0010", "comparing set members raised");
  found = i >= 0;
  return std::nullopt;
}

// a | b, a & b, a - b, a ^ b (and their in-place forms) where one operand is a Set and the other a
// set of either kind. `op`: the operator's character; in place: a changes.
Status set_operator(Translator& t, Frame& f, char op, bool inplace, const VPtr& a, const VPtr& b, VPtr& out, bool& handled) {
  handled = false;
  if (!(a->kind == VK::Set || b->kind == VK::Set) || !set_like(a) || !set_like(b)) return std::nullopt;
  handled = true;
  std::vector<VPtr> am, bm, r;
  if (Status s = members_of(t, f, a, am)) return s;
  if (Status s = members_of(t, f, b, bm)) return s;
  if (Status s = combine(t, f, op, am, bm, r)) return s;
  if (inplace && a->kind == VK::Const) {  // s |= {x}: the set itself changes (its aliases see it)
    if (a->source || !PySet_CheckExact(a->obj.get()) || !set_promote(t, a))
      return t.brk(f, "DV0023", std::string("set.__i") + op + "__ of a set from outside given values that are not constants");
  }
  if (inplace && a->kind == VK::Set) {
    if (Status s = check_mutable(t, f, a, std::string("__i") + op + "__")) return s;
    a->items = std::move(r);
    out = a;
    return std::nullopt;
  }
  out = new_set(t, std::move(r));
  return std::nullopt;
}

// a == b, a != b, a <= b, a < b, a >= b, a > b where one is a Set and the other a set of either kind
// (`cmp`: COMPARE_OP's index, lt le eq ne gt ge): by membership, as Python's set comparisons.
Status set_compare(Translator& t, Frame& f, int cmp, const VPtr& a, const VPtr& b, VPtr& out, bool& handled) {
  handled = false;
  if (!(a->kind == VK::Set || b->kind == VK::Set) || !set_like(a) || !set_like(b)) return std::nullopt;
  handled = true;
  Value as, bs;
  as.kind = bs.kind = VK::Set;
  if (Status s = members_of(t, f, a, as.items)) return s;
  if (Status s = members_of(t, f, b, bs.items)) return s;
  auto within = [&](const Value& x, const Value& y, bool& r) -> bool {  // every member of x is in y
    r = true;
    for (const VPtr& m : x.items) {
      const long i = find_member(t, f, y, m);
      if (i == -2) return false;
      if (i == -1) r = false;
    }
    return true;
  };
  bool a_in_b = false, b_in_a = false;
  if (!within(as, bs, a_in_b) || !within(bs, as, b_in_a)) return t.brk(f, "DV0010", "comparing set members raised");
  const bool eq = a_in_b && b_in_a;
  const bool r = cmp == 0 ? a_in_b && !eq : cmp == 1 ? a_in_b : cmp == 2 ? eq : cmp == 3 ? !eq : cmp == 4 ? b_in_a && !eq : b_in_a;
  out = t.constant(Ref::borrow(r ? Py_True : Py_False));
  return std::nullopt;
}

namespace {

Status m_add(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs&, VPtr& out) {
  if (args.size() != 1) return t.raise_new(f, PyExc_TypeError, "set.add() takes exactly one argument");
  if (Status s = set_add_value(t, f, self, args[0])) return s;
  return none(t, out);
}

Status m_discard_or_remove(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, bool remove, VPtr& out) {
  if (args.size() != 1) return t.raise_new(f, PyExc_TypeError, std::string("set.") + (remove ? "remove" : "discard") + "() takes exactly one argument");
  if (Status s = check_mutable(t, f, self, remove ? "remove" : "discard")) return s;
  bool found = false;
  if (Status s = set_contains(t, f, self, args[0], found)) return s;
  if (!found && remove) {
    if (args[0]->kind == VK::Const) return t.raise_key_error(f, args[0]->obj.get(), "set.remove");
    return t.brk(f, "DV0010", "set.remove of a member it does not hold raises KeyError", "the eager frame raises it");
  }
  if (found) self->items.erase(self->items.begin() + find_member(t, f, *self, args[0]));
  return none(t, out);
}
Status m_discard(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs&, VPtr& out) {
  return m_discard_or_remove(t, f, self, args, false, out);
}
Status m_remove(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs&, VPtr& out) {
  return m_discard_or_remove(t, f, self, args, true, out);
}

Status m_clear(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs&, VPtr& out) {
  if (!args.empty()) return t.raise_new(f, PyExc_TypeError, "set.clear() takes no arguments");
  if (Status s = check_mutable(t, f, self, "clear")) return s;
  self->items.clear();
  return none(t, out);
}

Status m_copy(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs&, VPtr& out) {
  if (!args.empty()) return t.raise_new(f, PyExc_TypeError, "set.copy() takes no arguments");
  out = new_set(t, self->items);
  return std::nullopt;
}

// union / intersection / difference (any number of iterables), symmetric_difference (one)
Status fold(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, char op, VPtr& out, bool update) {
  if (update)
    if (Status s = check_mutable(t, f, self, "update")) return s;
  std::vector<VPtr> acc = self->items;
  for (const VPtr& a : args) {
    std::vector<VPtr> m, r;
    if (Status s = members_of(t, f, a, m)) return s;
    for (const VPtr& x : m)
      if (!set_member_ok(x)) return t.brk(f, "DV0023", std::string("a set holding a ") + vk_name(x->kind));
    if (Status s = combine(t, f, op, acc, m, r)) return s;
    acc = std::move(r);
  }
  if (update) {
    self->items = std::move(acc);
    return none(t, out);
  }
  out = new_set(t, std::move(acc));
  return std::nullopt;
}
Status m_union(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs&, VPtr& out) { return fold(t, f, self, args, '|', out, false); }
Status m_update(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs&, VPtr& out) { return fold(t, f, self, args, '|', out, true); }
Status m_intersection(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs&, VPtr& out) { return fold(t, f, self, args, '&', out, false); }
Status m_intersection_update(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs&, VPtr& out) { return fold(t, f, self, args, '&', out, true); }
Status m_difference(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs&, VPtr& out) { return fold(t, f, self, args, '-', out, false); }
Status m_difference_update(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs&, VPtr& out) { return fold(t, f, self, args, '-', out, true); }
Status m_symmetric_difference(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs&, VPtr& out) {
  if (args.size() != 1) return t.raise_new(f, PyExc_TypeError, "set.symmetric_difference() takes exactly one argument");
  return fold(t, f, self, args, '^', out, false);
}

// issubset / issuperset / isdisjoint against any iterable
Status relation(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, int which, VPtr& out) {
  if (args.size() != 1) return t.raise_new(f, PyExc_TypeError, "set relation takes exactly one argument");
  std::vector<VPtr> m;
  if (Status s = members_of(t, f, args[0], m)) return s;
  Value other;
  other.kind = VK::Set;
  for (const VPtr& x : m) {
    if (!set_member_ok(x)) return t.brk(f, "DV0023", std::string("a set holding a ") + vk_name(x->kind));
    if (find_member(t, f, other, x) == -1) other.items.push_back(x);
  }
  auto all_in = [&](const Value& from, const Value& in, bool want) {
    for (const VPtr& x : from.items)
      if ((find_member(t, f, in, x) >= 0) != want) return false;
    return true;
  };
  bool r = which == 0 ? all_in(*self, other, true) : which == 1 ? all_in(other, *self, true) : all_in(*self, other, false);
  out = t.constant(Ref::borrow(r ? Py_True : Py_False));
  return std::nullopt;
}
Status m_issubset(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs&, VPtr& out) { return relation(t, f, self, args, 0, out); }
Status m_issuperset(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs&, VPtr& out) { return relation(t, f, self, args, 1, out); }
Status m_isdisjoint(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs&, VPtr& out) { return relation(t, f, self, args, 2, out); }

Status m_contains(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs&, VPtr& out) {
  if (args.size() != 1) return t.raise_new(f, PyExc_TypeError, "set.__contains__() takes exactly one argument");
  bool found = false;
  if (Status s = set_contains(t, f, self, args[0], found)) return s;
  out = t.constant(Ref::borrow(found ? Py_True : Py_False));
  return std::nullopt;
}

Status m_len(Translator& t, Frame&, const VPtr& self, std::vector<VPtr>&, KwArgs&, VPtr& out) {
  out = t.constant_steal(PyLong_FromSize_t(self->items.size()));
  return std::nullopt;
}

// (none is marked as changing self for write-back: a set from the frame holding objects is read only)
const MethodTable kSetMethods = {
    {"add", {m_add, false}},
    {"discard", {m_discard, false}},
    {"remove", {m_remove, false}},
    {"clear", {m_clear, false}},
    {"update", {m_update, false}},
    {"intersection_update", {m_intersection_update, false}},
    {"difference_update", {m_difference_update, false}},
    {"copy", {m_copy, false}},
    {"union", {m_union, false}},
    {"intersection", {m_intersection, false}},
    {"difference", {m_difference, false}},
    {"symmetric_difference", {m_symmetric_difference, false}},
    {"issubset", {m_issubset, false}},
    {"issuperset", {m_issuperset, false}},
    {"isdisjoint", {m_isdisjoint, false}},
    {"__contains__", {m_contains, false}},
    {"__len__", {m_len, false}},
};

}  // namespace

template <>
struct Kind<VK::Set> {
  static void describe(const Value& v, std::string& out, int depth) {
    if (v.items.empty()) {
      out += "set()";
      return;
    }
    out += "{";
    for (size_t i = 0; i < v.items.size(); ++i) {
      if (i) out += ", ";
      if (depth > 2 || out.size() > 160) {
        out += "...";
        break;
      }
      if (v.items[i]) describe_into(*v.items[i], out, depth + 1);
    }
    out += "}";
  }
  static PyObject* python_type(Translator&, const VPtr&) { return reinterpret_cast<PyObject*>(&PySet_Type); }
  static std::optional<Ref> as_python(Translator& t, const VPtr& v, bool meta) {
    Ref s = Ref::steal(PySet_New(nullptr));
    for (const VPtr& x : v->items) {
      auto o = t.to_python(x, meta);
      if (!o || !s || PySet_Add(s.get(), o->get()) < 0) return PyErr_Clear(), std::nullopt;
    }
    return s;
  }
  static constexpr auto graph_arg = no_answer::graph_arg;
  static Status truth(Translator&, Frame&, const VPtr& v, bool& out) {
    out = !v->items.empty();
    return std::nullopt;
  }
  static Status iterate(Translator& t, Frame& f, const VPtr& v, VPtr& out, bool /*materialize*/) {
    VPtr it = t.make(VK::Iter);
    bool real = true;
    for (const VPtr& x : v->items) real &= real_member(x);
    if (!real) {  // tensors or objects made in the trace: in the order they were added (see the top)
      it->items = v->items;
      out = it;
      return std::nullopt;
    }
    // Python's order: a real set of the real objects, added in the same order. The order follows
    // their hashes (of objects: their addresses), so an object from the frame is guarded by identity.
    Ref s = Ref::steal(PySet_New(nullptr));
    for (const VPtr& x : v->items) {
      if (x->source && x->kind != VK::Const)
        t.add_guard(GuardKind::ID_MATCH, x->source, x->obj, f, "___check_obj_id(" + x->source->text() + ", " + repr_of(x->obj.get()) + ")");
      if (!s || PySet_Add(s.get(), x->obj.get()) < 0) return PyErr_Clear(), t.brk(f, "DV0010", "building a set raised");
    }
    Ref pyit = Ref::steal(PyObject_GetIter(s.get()));
    while (Ref m = pyit ? Ref::steal(PyIter_Next(pyit.get())) : Ref()) {
      for (const VPtr& x : v->items)
        if (x->obj.get() == m.get()) {
          it->items.push_back(x);
          break;
        }
    }
    if (PyErr_Occurred() || it->items.size() != v->items.size()) return PyErr_Clear(), t.brk(f, "DV0010", "iterating a set raised");
    out = it;
    return std::nullopt;
  }
  static Status getattr(Translator& t, Frame& f, const VPtr& obj, const std::string& name, VPtr& out) {
    if (name == "__class__") {
      out = t.make(VK::Object);
      out->obj = Ref::borrow(reinterpret_cast<PyObject*>(&PySet_Type));
      return std::nullopt;
    }
    return builtin_method_attr(t, f, obj, &PySet_Type, name, out);
  }
  static constexpr auto setattr = no_answer::setattr;
  static constexpr auto call = no_answer::call;
  static Status call_method(Translator& t, Frame& f, const VPtr& m, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
    if (!kwargs.empty()) return t.raise_new(f, PyExc_TypeError, "set." + m->name + "() takes no keyword arguments");
    if (m->name == "pop")
      return t.brk(f, "DV0023", "set.pop() of a set holding objects: which member it takes follows their addresses");
    return call_table_method(t, f, kSetMethods, m, args, kwargs, out);
  }
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    if (v->source) return r.e.source(*v->source);  // the set from the frame (read only)
    for (const VPtr& x : v->items)
      if (!r.value(x)) return false;
    r.e.emit(N::BUILD_SET, static_cast<int>(v->items.size()));
    return r.remember(v);
  }
};

DV_KIND(Set, "a set")

}  // namespace dv
