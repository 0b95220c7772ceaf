// Dict values: the methods of dicts made in the trace and of dicts from outside the frame (whose
// changes the transformed code writes back: SideEffects::mutated_dicts). Keys are constants.
#include "translator.h"

namespace dv {

namespace {
// Index of `key` among d's keys; -1 when absent, -2 when comparing raised (error cleared).
long find_key(const Value& d, PyObject* key) {
  for (size_t i = 0; i < d.keys.size(); ++i) {
    const int r = d.keys[i].get() == key ? 1 : PyObject_RichCompareBool(d.keys[i].get(), key, Py_EQ);
    if (r < 0) return PyErr_Clear(), -2;
    if (r == 1) return static_cast<long>(i);
  }
  return -1;
}

bool hashable_const(const VPtr& v) { return dict_key(v) != nullptr; }
}  // namespace

bool identity_key(PyObject* o) {
  PyTypeObject* tp = Py_TYPE(o);
  if (PyType_Check(o)) return tp->tp_hash == PyType_Type.tp_hash && tp->tp_richcompare == PyType_Type.tp_richcompare;
  if (PyFunction_Check(o) || PyCFunction_Check(o)) return true;
  if (tp->tp_hash != PyBaseObject_Type.tp_hash || tp->tp_richcompare != PyBaseObject_Type.tp_richcompare) return false;
  PyObject* mod = tp->tp_dict ? PyDict_GetItemString(tp->tp_dict, "__module__") : nullptr;
  return mod && PyUnicode_Check(mod) && PyUnicode_CompareWithASCIIString(mod, "typing") == 0;  // Union, Literal, ...
}

PyObject* dict_key(const VPtr& v) {
  if (!v || !v->obj) return nullptr;
  if (v->kind == VK::Const) {
    if (PyObject_Hash(v->obj.get()) == -1) return PyErr_Clear(), nullptr;
    return v->obj.get();
  }
  if ((v->kind == VK::Object || (v->kind == VK::Function && PyFunction_Check(v->obj.get()))) && identity_key(v->obj.get()))
    return v->obj.get();
  return nullptr;
}

VPtr Translator::key_value(const Ref& k) {
  if (is_exact_const(k.get()) || !identity_key(k.get())) return constant(k);
  VPtr v = make(PyFunction_Check(k.get()) ? VK::Function : VK::Object);
  v->obj = k;
  return v;
}

void dict_set(Value& d, Ref key, VPtr value) {
  const long i = find_key(d, key.get());
  if (i >= 0) {
    d.items[static_cast<size_t>(i)] = std::move(value);
    return;
  }
  d.keys.push_back(std::move(key));
  d.items.push_back(std::move(value));
}

bool dict_erase(Value& d, PyObject* key) {
  const long i = find_key(d, key);
  if (i < 0) return false;
  d.keys.erase(d.keys.begin() + i);
  d.items.erase(d.items.begin() + i);
  return true;
}

Translator::Status Translator::dict_method(Frame& f, const VPtr& self, const std::string& name, std::vector<VPtr>& args,
                                           std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled) {
  handled = true;
  Value& d = *self;
  auto none = [&]() { return constant(Ref::borrow(Py_None)); };
  auto key_error = [&]() {
    return args.empty() || !args[0]->obj ? brk(f, "DV0010", "KeyError in dict." + name, "the eager frame raises it")
                                         : raise_key_error(f, args[0]->obj.get(), "dict." + name);
  };
  if ((name == "get" || name == "pop" || name == "setdefault") && !args.empty() && kwargs.empty() && args.size() <= 2) {
    if (!hashable_const(args[0])) return brk(f, "DV0024", "dict." + name + " with a " + std::string(vk_name(args[0]->kind)) + " key");
    const long i = find_key(d, dict_key(args[0]));
    if (i == -2) return brk(f, "DV0010", "comparing dict keys raised");
    if (i >= 0) {
      out = d.items[static_cast<size_t>(i)];
      if (name == "pop") {
        d.keys.erase(d.keys.begin() + i);
        d.items.erase(d.items.begin() + i);
      }
      return std::nullopt;
    }
    if (name == "pop" && args.size() == 1) return key_error();
    out = args.size() == 2 ? args[1] : none();
    if (name == "setdefault") dict_set(d, args[0]->obj, out);
    return std::nullopt;
  }
  if (name == "popitem" && args.empty() && kwargs.empty()) {
    if (d.keys.empty()) return key_error();
    VPtr pair = make(VK::Tuple);
    pair->items = {key_value(d.keys.back()), d.items.back()};
    d.keys.pop_back();
    d.items.pop_back();
    out = pair;
    return std::nullopt;
  }
  if (name == "clear" && args.empty() && kwargs.empty()) {
    d.keys.clear();
    d.items.clear();
    out = none();
    return std::nullopt;
  }
  if (name == "copy" && args.empty() && kwargs.empty()) {
    VPtr c = make(VK::Dict);
    c->keys = d.keys;
    c->items = d.items;
    c->obj = d.source ? Ref() : d.obj;  // an OrderedDict's or defaultdict's copy is one too
    c->defaults = d.source ? nullptr : d.defaults;
    out = c;
    return std::nullopt;
  }
  if (name == "update" && args.size() <= 1) {
    if (!args.empty()) {
      VPtr other = args[0];
      if (other->kind == VK::DictView) {  // d.update(e.items()): its pairs now
        VPtr l = make(VK::List);
        l->items = view_items(*other);
        other = l;
      }
      if (other->kind == VK::Dict) {
        const std::vector<Ref> keys = other->keys;  // d.update(d) reads a copy
        const std::vector<VPtr> items = other->items;
        for (size_t i = 0; i < keys.size(); ++i) dict_set(d, keys[i], items[i]);
      } else if (other->kind == VK::List || other->kind == VK::Tuple) {  // pairs
        std::vector<std::pair<Ref, VPtr>> pairs;
        for (const VPtr& p : other->items) {
          if (p->kind == VK::Const && PyTuple_CheckExact(p->obj.get()) && PyTuple_GET_SIZE(p->obj.get()) == 2) {
            PyObject* k = PyTuple_GET_ITEM(p->obj.get(), 0);
            if (PyObject_Hash(k) == -1) return PyErr_Clear(), brk(f, "DV0024", "dict.update with an unhashable key");
            pairs.emplace_back(Ref::borrow(k), constant(Ref::borrow(PyTuple_GET_ITEM(p->obj.get(), 1))));
          } else if ((p->kind == VK::Tuple || p->kind == VK::List) && p->items.size() == 2 && hashable_const(p->items[0])) {
            pairs.emplace_back(p->items[0]->obj, p->items[1]);
          } else {
            return brk(f, "DV0024", "dict.update with items that are not (constant key, value) pairs");
          }
        }
        for (auto& [k, v] : pairs) dict_set(d, k, v);
      } else {
        return brk(f, "DV0024", "dict.update with a " + std::string(vk_name(other->kind)));
      }
    }
    for (auto& [k, v] : kwargs) dict_set(d, Ref::steal(PyUnicode_FromString(k.c_str())), v);
    out = none();
    return std::nullopt;
  }
  if ((name == "__setitem__" && args.size() == 2) || (name == "__delitem__" && args.size() == 1)) {
    if (!hashable_const(args[0])) return brk(f, "DV0024", "dict." + name + " with a " + std::string(vk_name(args[0]->kind)) + " key");
    if (name == "__setitem__") dict_set(d, args[0]->obj, args[1]);
    else if (!dict_erase(d, args[0]->obj.get())) return key_error();
    out = none();
    return std::nullopt;
  }
  handled = false;
  return std::nullopt;
}

bool outside_dict(const VPtr& v, const char* method) {
  if (v->kind != VK::Object || !v->source || !v->obj || !PyDict_Check(v->obj.get())) return false;
  Ref nm = Ref::steal(PyUnicode_FromString(method));
  PyObject* mine = nm ? _PyType_Lookup(Py_TYPE(v->obj.get()), nm.get()) : nullptr;
  return mine && mine == _PyType_Lookup(&PyDict_Type, nm.get());
}

bool outside_dict_read_method(const std::string& name) {
  static const char* names[] = {"get", "__getitem__", "__contains__", "items", "keys", "values", "__len__", "__iter__"};
  for (const char* n : names)
    if (name == n) return true;
  return false;
}

Translator::Status Translator::outside_dict_read(Frame& f, const VPtr& self, const std::string& name, std::vector<VPtr>& args,
                                                 std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out) {
  PyObject* d = self->obj.get();
  if ((is_view_name(name) || name == "__len__" || name == "__iter__") && args.empty() && kwargs.empty() && self->source) {
    // The whole storage, as a dict value of its items (each reloaded from its source), guarded by
    // its keys: views of it, its length, an iterator over its keys. Read-only: nothing writes to it.
    Ref keys = Ref::steal(PyDict_Keys(d));
    if (!keys) return raise_current(f, "dict.keys()");
    VPtr snap = make(VK::Dict);
    snap->source = self->source;  // a view handed out of the graph is the live object's view
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys.get()); ++i) {
      PyObject* k = PyList_GET_ITEM(keys.get(), i);
      if (!is_exact_const(k))
        return brk(f, "DV0024", "dict." + name + " of a " + std::string(Py_TYPE(d)->tp_name) + " whose keys are not constants");
      PyObject* v = PyDict_GetItemWithError(d, k);
      if (!v) return PyErr_Occurred() ? raise_current(f, "dict." + name) : brk(f, "DV0010", "a key vanished from a dict");
      VPtr iv = wrap(Ref::borrow(v), Source::item(self->source, Ref::borrow(k)), f);
      if (!iv) return brk(f, "DV0013", "an item of " + std::string(Py_TYPE(d)->tp_name) + " cannot be traced");
      snap->keys.push_back(Ref::borrow(k));
      snap->items.push_back(iv);
    }
    Ref key_tuple = Ref::steal(PyList_AsTuple(keys.get()));
    add_guard(GuardKind::DICT_KEYS, self->source, key_tuple, f, "list(" + self->source->text() + ".keys()) == " + repr_of(key_tuple.get()));
    if (name == "__len__") out = constant_steal(PyLong_FromSsize_t(static_cast<Py_ssize_t>(snap->keys.size())));
    else if (name == "__iter__") return iterate(f, snap, out, false);
    else out = dict_view(snap, name);
    return std::nullopt;
  }
  const size_t want = name == "get" ? 2 : 1;
  if (!kwargs.empty() || args.empty() || args.size() > want || !hashable_const(args[0]) || !self->source)
    return brk(f, "DV0024", "dict." + name + " of a " + std::string(Py_TYPE(d)->tp_name) + " with these arguments");
  Ref keys = Ref::steal(PyDict_Keys(d));
  if (!keys) return raise_current(f, "dict.keys()");
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys.get()); ++i)
    if (!is_exact_const(PyList_GET_ITEM(keys.get(), i)))
      return brk(f, "DV0024", "dict." + name + " of a " + std::string(Py_TYPE(d)->tp_name) + " whose keys are not constants");
  Ref key_tuple = Ref::steal(PyList_AsTuple(keys.get()));
  add_guard(GuardKind::DICT_KEYS, self->source, key_tuple, f, "list(" + self->source->text() + ".keys()) == " + repr_of(key_tuple.get()));
  PyObject* v = PyDict_GetItemWithError(d, args[0]->obj.get());  // borrowed
  if (!v && PyErr_Occurred()) return raise_current(f, "dict." + name);
  if (name == "__contains__") {
    out = constant(Ref::borrow(v ? Py_True : Py_False));
    return std::nullopt;
  }
  if (!v) {
    if (name == "get") {
      out = args.size() == 2 ? args[1] : constant(Ref::borrow(Py_None));
      return std::nullopt;
    }
    return raise_key_error(f, args[0]->obj.get(), "dict.__getitem__");
  }
  out = wrap(Ref::borrow(v), Source::item(self->source, args[0]->obj), f);
  if (!out) return brk(f, "DV0013", "an item of " + std::string(Py_TYPE(d)->tp_name) + " cannot be traced");
  return std::nullopt;
}

}  // namespace dv
