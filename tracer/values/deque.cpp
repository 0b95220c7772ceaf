// collections.deque made in the trace: a List value whose `obj` is the deque class and `defaults`
// its maxlen (a constant: None or an int). What a list answers that a deque answers too (len,
// iteration, truth, d[i], `in`) is the list's; its own methods are here, and everything else a list
// has (slices, sort, +) breaks. Codegen rebuilds one that escapes as deque([...], maxlen).
#include "tracer/pycache.h"
#include "tracer/translator.h"

#include <set>

namespace dv {

PyObject* deque_class() {
  static PyObject* c = [] {
    Ref mod = Ref::steal(PyImport_ImportModule("collections"));
    PyObject* o = mod ? PyObject_GetAttrString(mod.get(), "deque") : nullptr;
    if (!o) PyErr_Clear();
    return o;  // kept for the process
  }();
  return c;
}

bool is_deque(const VPtr& v) { return v && v->kind == VK::List && v->obj && v->obj.get() == deque_class(); }

namespace {

long maxlen_of(const Value& d) {  // -1: unbounded
  if (!d.defaults || d.defaults->kind != VK::Const || !PyLong_Check(d.defaults->obj.get())) return -1;
  return PyLong_AsLong(d.defaults->obj.get());
}

void trim(Value& d, bool from_left) {  // a bounded deque drops from the other end
  const long m = maxlen_of(d);
  while (m >= 0 && static_cast<long>(d.items.size()) > m) {
    if (from_left) d.items.erase(d.items.begin());
    else d.items.pop_back();
  }
}

}  // namespace

Translator::Status Translator::construct_deque(Frame& f, std::vector<VPtr>& args, std::vector<std::pair<std::string, VPtr>>& kwargs,
                                               VPtr& out) {
  VPtr iterable, maxlen;
  if (args.size() > 2) return raise_new(f, PyExc_TypeError, "deque() takes at most 2 arguments (" + std::to_string(args.size()) + " given)");
  if (!args.empty()) iterable = args[0];
  if (args.size() == 2) maxlen = args[1];
  for (auto& [k, v] : kwargs) {
    if (k == "iterable" && !iterable) iterable = v;
    else if (k == "maxlen" && !maxlen) maxlen = v;
    else return brk(f, "DV0004", "collections.deque with keyword " + k);
  }
  if (!maxlen) maxlen = constant(Ref::borrow(Py_None));
  if (maxlen->kind != VK::Const || !(maxlen->obj.get() == Py_None || PyLong_CheckExact(maxlen->obj.get())))
    return brk(f, "DV0004", std::string("collections.deque with a ") + vk_name(maxlen->kind) + " maxlen");
  if (PyLong_CheckExact(maxlen->obj.get()) && PyLong_AsLong(maxlen->obj.get()) < 0)
    return raise_new(f, PyExc_ValueError, "maxlen must be non-negative");
  VPtr d = make(VK::List);
  d->obj = Ref::borrow(deque_class());
  d->defaults = maxlen;
  if (iterable) {
    VPtr it;
    if (Status s = iterate(f, iterable, it)) return s;
    d->items.assign(it->items.begin() + static_cast<long>(it->pos), it->items.end());
    it->pos = it->items.size();
    trim(*d, true);
  }
  out = d;
  return std::nullopt;
}

Translator::Status Translator::deque_method(Frame& f, const VPtr& self, const std::string& name, std::vector<VPtr>& args,
                                            std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out) {
  Value& d = *self;
  auto none = [&] {
    out = constant(Ref::borrow(Py_None));
    return std::nullopt;
  };
  if (!kwargs.empty()) return brk(f, "DV0004", "deque." + name + " with keyword arguments");
  const size_t n = args.size();
  static const std::set<std::string> mutators = {"append", "appendleft", "pop", "popleft", "extend", "extendleft",
                                                 "rotate", "clear", "reverse", "remove", "insert"};
  if (self->source && mutators.count(name)) output.side_effects.note_mutation(self);  // a deque from the frame: written back
  if ((name == "append" || name == "appendleft") && n == 1) {
    if (name == "append") d.items.push_back(args[0]);
    else d.items.insert(d.items.begin(), args[0]);
    trim(d, name == "append");
    return none();
  }
  if ((name == "pop" || name == "popleft") && n == 0) {
    if (d.items.empty()) return raise_new(f, PyExc_IndexError, "pop from an empty deque");
    if (name == "pop") {
      out = d.items.back();
      d.items.pop_back();
    } else {
      out = d.items.front();
      d.items.erase(d.items.begin());
    }
    return std::nullopt;
  }
  if ((name == "extend" || name == "extendleft") && n == 1) {  // one item at a time, as append does
    // (a generator reading the deque sees each item added before it makes the next, as in eager)
    VPtr it;
    if (Status s = iterate(f, args[0], it, /*materialize=*/false)) return s;
    for (;;) {
      if (Status s = pull(f, it, it->pos + 1)) return s;
      if (it->pos >= it->items.size()) break;
      const VPtr x = it->items[it->pos++];
      if (name == "extend") d.items.push_back(x);
      else d.items.insert(d.items.begin(), x);
      trim(d, name == "extend");
    }
    return none();
  }
  if (name == "rotate" && n <= 1) {
    long k = 1;
    if (n == 1) {
      if (args[0]->kind != VK::Const || !PyLong_CheckExact(args[0]->obj.get())) return brk(f, "DV0004", "deque.rotate by a computed count");
      k = PyLong_AsLong(args[0]->obj.get());
    }
    const long len = static_cast<long>(d.items.size());
    if (len > 1) {
      k = ((k % len) + len) % len;  // right by k
      std::rotate(d.items.begin(), d.items.end() - k, d.items.end());
    }
    return none();
  }
  if (name == "clear" && n == 0) {
    d.items.clear();
    return none();
  }
  if (name == "reverse" && n == 0) {
    std::reverse(d.items.begin(), d.items.end());
    return none();
  }
  if (name == "copy" && n == 0) {
    VPtr c = make(VK::List);
    c->obj = d.obj;
    c->defaults = d.defaults;
    c->items = d.items;
    out = c;
    return std::nullopt;
  }
  if (name == "index" || name == "count" || name == "remove" || name == "insert") {  // as a list's, bounded
    if (name == "insert" && maxlen_of(d) >= 0 && static_cast<long>(d.items.size()) >= maxlen_of(d))
      return raise_new(f, PyExc_IndexError, "deque already at its maximum size");
    VPtr plain = make(VK::List);
    plain->items = d.items;
    if (Status s = call(f, bound_method(plain, Ref(), name), std::move(args), {}, out)) {  // the list's ValueError says "list": eager's says "deque"
      if (s->exc) return brk(f, "DV0010", "deque." + name + " raised", "the eager frame raises it");
      return s;
    }
    d.items = plain->items;
    return std::nullopt;
  }
  return brk(f, "DV0004", "deque." + name + " is not supported");
}

}  // namespace dv
