// Lists (VK::List): items; from outside the frame (source set) they are written back when mutated. A
// deque made in the trace is a List with obj = deque (deque.cpp).
#include "tracer/pycache.h"
#include "tracer/values/kind.h"

namespace dv {

// List, Dict, Tuple
Status list_getattr(Translator& t, Frame& f, const VPtr& obj, const std::string& name, VPtr& out) {
  // methods of containers (append, items, get ...)
  if (obj->kind == VK::Dict && obj->defaults && name == "default_factory") {  // a defaultdict made in the trace
    out = obj->defaults;
    return std::nullopt;
  }
  if (is_deque(obj) && name == "maxlen") {
    out = obj->defaults;
    return std::nullopt;
  }
  if (obj->kind == VK::Tuple)  // a named result (torch.return_types, a namedtuple): its fields
    for (size_t i = 0; i < obj->keys.size() && i < obj->items.size(); ++i)
      if (str_of(obj->keys[i].get()) == name) {
        out = obj->items[i];
        return std::nullopt;
      }
  if (obj->kind == VK::Tuple && obj->self && namedtuple_class(obj->obj.get())) return t.namedtuple_getattr(f, obj, name, out);
  out = t.bound_method(obj, Ref(), name);
  return std::nullopt;
}

// List, Dict, Tuple: their methods, by name
Status container_method(Translator& t, Frame& f, const VPtr& m, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  const VPtr& self = m->self;
  const std::string& name = m->name;
  const bool dict_mutation = self->kind == VK::Dict && (name == "pop" || name == "popitem" || name == "setdefault" ||
                                                        name == "update" || name == "clear" || name == "__setitem__" ||
                                                        name == "__delitem__");
  const bool list_mutation = self->kind == VK::List && (name == "append" || name == "extend" || name == "pop" ||
                                                        name == "insert" || name == "remove" || name == "clear" ||
                                                        name == "reverse");
  if (self->source && (list_mutation || dict_mutation)) {
    // A list or dict that lives outside the frame (an argument, the frame's **kwargs, a
    // module's attribute): mutated here, and its new contents written back by the transformed
    // code (lst[:] = [...]; d.clear(); d.update({...})).
    t.output.side_effects.note_mutation(self);
  } else if (self->source && (name == "sort" || name == "__setitem__" || name == "__delitem__" || name == "__iadd__")) {
    return t.brk(f, "DV0008", "mutating an input " + std::string(vk_name(self->kind)) + " (" + name + ")",
               "dynview replays the list and dict methods it follows on inputs; this one is not followed yet");
  }
  if (name == "append" && args.size() == 1) { self->items.push_back(args[0]); out = t.constant(Ref::borrow(Py_None)); return std::nullopt; }
  if (name == "extend" && args.size() == 1) {  // item by item: a lazy map sees the list grow
    VPtr it;
    if (Status s = t.iterate(f, args[0], it, /*materialize=*/false)) return s;
    while (true) {  // (a list argument is iterated over a snapshot: lst.extend(lst) doubles it once)
      if (Status s = t.pull(f, it, it->pos + 1)) return s;
      if (it->pos >= it->items.size()) break;
      self->items.push_back(it->items[it->pos++]);
    }
    out = t.constant(Ref::borrow(Py_None));
    return std::nullopt;
  }
  if (name == "pop" && self->kind == VK::List && !self->items.empty() && args.empty()) { out = self->items.back(); self->items.pop_back(); return std::nullopt; }
  if (name == "insert" && self->kind == VK::List && args.size() == 2 && args[0]->kind == VK::Const) {
    long i = PyLong_AsLong(args[0]->obj.get());
    long n = static_cast<long>(self->items.size());
    if (i < 0) i = std::max(0L, i + n);
    self->items.insert(self->items.begin() + std::min(i, n), args[1]);
    out = t.constant(Ref::borrow(Py_None));
    return std::nullopt;
  }
  if (self->kind == VK::Dict && (name == "items" || name == "keys" || name == "values") && args.empty() && kwargs.empty()) {
    out = t.dict_view(self, name);  // live: sees later changes of the dict
    return std::nullopt;
  }
  if (self->kind == VK::Dict && self->obj.get() == ordered_dict_class() && self->obj) {
    bool handled = false;
    if (Status s = t.ordered_dict_method(f, self, name, args, kwargs, out, handled)) return s;
    if (handled) return std::nullopt;
  }
  if (self->kind == VK::Dict) {
    bool handled = false;
    if (Status s = t.dict_method(f, self, name, args, kwargs, out, handled)) return s;
    if (handled) return std::nullopt;
  }
  if (self->kind == VK::List && name == "remove" && args.size() == 1 && args[0]->kind == VK::Const) {
    for (size_t i = 0; i < self->items.size(); ++i) {
      const VPtr& x = self->items[i];
      if (x->kind != VK::Const) return t.brk(f, "DV0002", "list.remove compares a " + std::string(vk_name(x->kind)) + " by value");
      const int eq = PyObject_RichCompareBool(x->obj.get(), args[0]->obj.get(), Py_EQ);
      if (eq < 0) return PyErr_Clear(), t.brk(f, "DV0010", "list.remove raised comparing");
      if (eq == 1) {
        self->items.erase(self->items.begin() + static_cast<long>(i));
        out = t.constant(Ref::borrow(Py_None));
        return std::nullopt;
      }
    }
    return t.raise_new(f, PyExc_ValueError, "list.remove(x): x not in list");
  }
  if (self->kind == VK::List && (name == "clear" || name == "reverse" || name == "copy") && args.empty()) {
    if (name == "copy") {
      out = t.make(VK::List);
      out->items = self->items;
      return std::nullopt;
    }
    if (name == "clear") self->items.clear();
    else std::reverse(self->items.begin(), self->items.end());
    out = t.constant(Ref::borrow(Py_None));
    return std::nullopt;
  }
  if ((name == "index" || name == "count") && !args.empty() && args.size() <= (name == "index" ? 3u : 1u) &&
      args[0]->kind == VK::Const) {
    const long n = static_cast<long>(self->items.size());
    long lo = 0, hi = n, count = 0, first = -1;  // list.index(v, start, stop): the slice's bounds
    for (size_t a = 1; a < args.size(); ++a) {
      if (args[a]->kind != VK::Const || !PyLong_CheckExact(args[a]->obj.get())) return t.brk(f, "DV0004", "list.index with non-constant bounds");
      long b = PyLong_AsLong(args[a]->obj.get());
      b = b < 0 ? std::max(0L, b + n) : std::min(b, n);
      (a == 1 ? lo : hi) = b;
    }
    for (size_t i = static_cast<size_t>(lo); i < static_cast<size_t>(std::max(lo, hi)); ++i) {
      if (self->items[i]->kind == VK::Const && PyObject_RichCompareBool(self->items[i]->obj.get(), args[0]->obj.get(), Py_EQ) == 1) {
        if (first < 0) first = static_cast<long>(i);
        ++count;
      }
    }
    PyErr_Clear();
    if (name == "index" && first < 0) return t.raise_new(f, PyExc_ValueError, "value is not in list");
    out = t.constant_steal(PyLong_FromLong(name == "index" ? first : count));
    return std::nullopt;
  }
  return t.brk(f, "DV0004", std::string(vk_name(self->kind)) + "." + name + " is not supported");
}

template <>
struct Kind<VK::List> {
  static void describe(const Value& v, std::string& out, int depth) {
    const bool tuple = v.kind == VK::Tuple;
    out += tuple ? "(" : "[";
    for (size_t i = 0; i < v.items.size(); ++i) {
      if (i) out += ", ";
      if (depth > 2 || out.size() > 160) { out += "..."; break; }
      if (v.items[i]) describe_into(*v.items[i], out, depth + 1);
    }
    if (tuple && v.items.size() == 1) out += ",";
    out += tuple ? ")" : "]";
    return;
  }
  static PyObject* python_type(Translator& /*t*/, const VPtr& v) {
    return is_deque(v) ? v->obj.get() : reinterpret_cast<PyObject*>(&PyList_Type);
  }
  static std::optional<Ref> as_python(Translator& t, const VPtr& v, bool meta) {
    return tuple_as_python(t, v, meta);
  }
  static bool graph_arg(Translator& t, const VPtr& v, ArgTree& out) {
    out.kind = v->kind == VK::Tuple ? ArgTree::Kind::Tuple : ArgTree::Kind::List;
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
    it->items = v->items; out = it;
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
    if (is_deque(m->self)) return t.deque_method(f, m->self, m->name, args, kwargs, out);
    return container_method(t, f, m, args, kwargs, out);
  }
};
DV_KIND(List, "list")

}  // namespace dv
