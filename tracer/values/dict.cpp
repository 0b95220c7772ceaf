// Dicts (VK::Dict): keys + items; lazy while only read by constant keys (lazy_dict.cpp); an OrderedDict
// or defaultdict made in the trace has obj = its class (dict_kinds.cpp). Methods: dicts.cpp.
#include "tracer/pycache.h"
#include "tracer/rebuild.h"
#include "tracer/values/kind.h"

namespace dv {

using cg::N;

namespace {

VPtr none(Translator& t) { return t.constant(Ref::borrow(Py_None)); }

Status key_error(Translator& t, Frame& f, const std::vector<VPtr>& args, const char* name) {
  // (a tensor's KeyError would name its example: eager raises it)
  return args.empty() || !args[0]->obj || args[0]->kind == VK::Tensor ? t.brk(f, "DV0010", std::string("KeyError in dict.") + name, "the eager frame raises it")
                                       : t.raise_key_error(f, args[0]->obj.get(), std::string("dict.") + name);
}

// get / pop / setdefault (key[, default])
Status lookup(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out, const char* name) {
  if (args.empty() || args.size() > 2 || !kwargs.empty()) return t.brk(f, "DV0004", std::string("dict.") + name + " with these arguments");
  PyObject* key = t.key_of(args[0]);
  if (!key) return t.brk(f, "DV0024", std::string("dict.") + name + " with a " + vk_name(args[0]->kind) + " key");
  Value& d = *self;
  const long i = find_key(d, key);
  if (i == -2) return t.brk(f, "DV0010", "comparing dict keys raised");
  const bool pop = name[0] == 'p';
  if (i >= 0) {
    out = d.items[static_cast<size_t>(i)];
    if (pop) {
      d.keys.erase(d.keys.begin() + i);
      d.items.erase(d.items.begin() + i);
    }
    return std::nullopt;
  }
  if (pop && args.size() == 1) return key_error(t, f, args, name);
  out = args.size() == 2 ? args[1] : none(t);
  if (name[0] == 's') dict_set(d, Ref::borrow(key), out);  // setdefault
  return std::nullopt;
}
Status get(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  return lookup(t, f, self, args, kwargs, out, "get");
}
Status pop(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  return lookup(t, f, self, args, kwargs, out, "pop");
}
Status setdefault(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  return lookup(t, f, self, args, kwargs, out, "setdefault");
}

Status popitem(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  if (!args.empty() || !kwargs.empty()) return t.brk(f, "DV0004", "dict.popitem with arguments");
  Value& d = *self;
  if (d.keys.empty()) return key_error(t, f, args, "popitem");
  VPtr pair = t.make(VK::Tuple);
  pair->items = {t.key_value(d.keys.back()), d.items.back()};
  d.keys.pop_back();
  d.items.pop_back();
  out = pair;
  return std::nullopt;
}

Status clear(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  if (!args.empty() || !kwargs.empty()) return t.brk(f, "DV0004", "dict.clear with arguments");
  self->keys.clear();
  self->items.clear();
  out = none(t);
  return std::nullopt;
}

Status copy(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  if (!args.empty() || !kwargs.empty()) return t.brk(f, "DV0004", "dict.copy with arguments");
  VPtr c = t.make(VK::Dict);
  c->keys = self->keys;
  c->items = self->items;
  c->obj = self->source ? Ref() : self->obj;  // an OrderedDict's or defaultdict's copy is one too
  c->defaults = self->source ? nullptr : self->defaults;
  out = c;
  return std::nullopt;
}

Status update(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  if (args.size() > 1) return t.brk(f, "DV0004", "dict.update with more than one positional argument");
  Value& d = *self;
  // one (key, value) pair: a tuple of a constant (hashable) key, or of a key the trace can hash
  auto pair_of = [&](const VPtr& p, Ref& k, VPtr& v) -> Status {
    if (p->kind == VK::Const && PyTuple_CheckExact(p->obj.get()) && PyTuple_GET_SIZE(p->obj.get()) == 2) {
      PyObject* key = PyTuple_GET_ITEM(p->obj.get(), 0);
      if (PyObject_Hash(key) == -1) return PyErr_Clear(), t.brk(f, "DV0024", "dict.update with an unhashable key");
      k = Ref::borrow(key);
      v = t.constant(Ref::borrow(PyTuple_GET_ITEM(p->obj.get(), 1)));
    } else if ((p->kind == VK::Tuple || p->kind == VK::List) && p->items.size() == 2 && t.key_of(p->items[0])) {
      k = Ref::borrow(t.key_of(p->items[0]));
      v = p->items[1];
    } else {
      return t.brk(f, "DV0024", "dict.update with items that are not (constant key, value) pairs");
    }
    return std::nullopt;
  };
  if (!args.empty()) {
    VPtr other = args[0];
    if (other->kind == VK::DictView) {  // d.update(e.items()): its pairs now
      VPtr l = t.make(VK::List);
      l->items = t.view_items(*other);
      other = l;
    }
    if (other->kind == VK::Dict) {
      const std::vector<Ref> keys = other->keys;  // d.update(d) reads a copy
      const std::vector<VPtr> items = other->items;
      for (size_t i = 0; i < keys.size(); ++i) dict_set(d, keys[i], items[i]);
    } else if (other->kind == VK::List || other->kind == VK::Tuple) {  // pairs, all checked before any is set
      std::vector<std::pair<Ref, VPtr>> pairs;
      for (const VPtr& p : other->items) {
        Ref k;
        VPtr v;
        if (Status s = pair_of(p, k, v)) return s;
        pairs.emplace_back(k, v);
      }
      for (auto& [k, v] : pairs) dict_set(d, k, v);
    } else {
      // any other iterable of pairs (a generator: module.named_parameters(), an iterator passed
      // in), taken a pair at a time, each set before the next is made (a generator reading d sees
      // it grow, as in eager); an iterator is used up
      VPtr it;
      if (Status s = t.iterate(f, other, it, /*materialize=*/false)) return s;
      for (;;) {
        if (Status s = t.pull(f, it, it->pos + 1)) return s;
        if (it->pos >= it->items.size()) break;
        Ref k;
        VPtr v;
        if (Status s = pair_of(it->items[it->pos++], k, v)) return s;
        dict_set(d, k, v);
      }
    }
  }
  for (auto& [k, v] : kwargs) dict_set(d, Ref::steal(PyUnicode_FromString(k.c_str())), v);
  out = none(t);
  return std::nullopt;
}

Status setitem(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  if (args.size() != 2 || !kwargs.empty()) return t.brk(f, "DV0004", "dict.__setitem__ with these arguments");
  PyObject* key = t.key_of(args[0]);
  if (!key) return t.brk(f, "DV0024", "dict.__setitem__ with a " + std::string(vk_name(args[0]->kind)) + " key");
  dict_set(*self, Ref::borrow(key), args[1]);
  out = none(t);
  return std::nullopt;
}

Status delitem(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  if (args.size() != 1 || !kwargs.empty()) return t.brk(f, "DV0004", "dict.__delitem__ with these arguments");
  PyObject* key = t.key_of(args[0]);
  if (!key) return t.brk(f, "DV0024", "dict.__delitem__ with a " + std::string(vk_name(args[0]->kind)) + " key");
  if (!dict_erase(*self, key)) return key_error(t, f, args, "__delitem__");
  out = none(t);
  return std::nullopt;
}

// d.keys() / values() / items(): live views, that see later changes of the dict
template <const char* Name>
Status view(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  if (!args.empty() || !kwargs.empty()) return t.brk(f, "DV0004", std::string("dict.") + Name + " with arguments");
  out = t.dict_view(self, Name);
  return std::nullopt;
}
constexpr char kKeys[] = "keys", kValues[] = "values", kItems[] = "items";

// dict's methods the trace follows; `mutates`: a dict from outside the frame (an argument, the
// frame's **kwargs) changed by one is written back by the transformed code (d.clear(); d.update(...)).
const MethodTable kDictMethods = {
    {"get", {get, false}},          {"pop", {pop, true}},          {"setdefault", {setdefault, true}}, {"popitem", {popitem, true}},
    {"clear", {clear, true}},       {"copy", {copy, false}},       {"update", {update, true}},         {"__setitem__", {setitem, true}},
    {"__delitem__", {delitem, true}}, {"keys", {view<kKeys>, false}}, {"values", {view<kValues>, false}}, {"items", {view<kItems>, false}},
};

}  // namespace

Status dict_call(Translator& t, Frame& f, const VPtr& self, const std::string& name, std::vector<VPtr>& args, KwArgs& kwargs,
                 VPtr& out) {
  VPtr m = t.bound_method(self, Ref(), name);
  return call_table_method(t, f, kDictMethods, m, args, kwargs, out);
}

template <>
struct Kind<VK::Dict> {
  static void describe(const Value& v, std::string& out, int depth) {
    out += "{";
    for (size_t i = 0; i < v.items.size(); ++i) {
      if (i) out += ", ";
      if (depth > 2 || out.size() > 160) { out += "..."; break; }
      out += i >= v.keys.size() ? "?" : is_tensor(v.keys[i].get()) ? "<tensor>" : repr_of(v.keys[i].get());
      out += ": ";
      if (v.items[i]) describe_into(*v.items[i], out, depth + 1);
    }
    out += "}";
  }
  static PyObject* python_type(Translator& /*t*/, const VPtr& v) {
    return v->obj && PyType_Check(v->obj.get()) ? v->obj.get() : reinterpret_cast<PyObject*>(&PyDict_Type);
  }
  static std::optional<Ref> as_python(Translator& t, const VPtr& v, bool meta) {
    std::optional<Ref> made = as_python_items(t, v, meta);
    if (!made || !v->attrs) return made;
    for (size_t i = 0; i < v->attrs->keys.size(); ++i) {  // an OrderedDict's attributes (setattr below)
      auto x = t.to_python(v->attrs->items[i], meta);
      if (!x || PyObject_SetAttr(made->get(), v->attrs->keys[i].get(), x->get()) < 0) return PyErr_Clear(), std::nullopt;
    }
    return made;
  }
  static std::optional<Ref> as_python_items(Translator& t, const VPtr& v, bool meta) {
    Ref out = Ref::steal(PyDict_New());
    for (size_t i = 0; i < v->items.size(); ++i) {
      if (!meta && value_key(v->keys[i].get())) return std::nullopt;  // a tensor key is its example
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
    for (const Ref& k : v->keys)
      if (value_key(k.get()) || identity_compared(k.get())) return false;  // (a graph argument's dict keys are constants)
    out.keys = v->keys;
    for (const VPtr& x : v->items) {
      ArgTree a;
      if (!t.to_arg(x, a)) return false;
      out.items.push_back(std::move(a));
    }
    return true;
  }
  static constexpr auto truth = items_truth;
  static Status iterate(Translator& t, Frame& /*f*/, const VPtr& v, VPtr& out, bool /*materialize*/) {
    VPtr it = t.make(VK::Iter);
    for (auto& k : v->keys) it->items.push_back(t.key_value(k));
    out = it;
    return std::nullopt;
  }
  static Status getattr(Translator& t, Frame& f, const VPtr& obj, const std::string& name, VPtr& out) {
    if (obj->defaults && name == "default_factory") {  // a defaultdict made in the trace
      out = obj->defaults;
      return std::nullopt;
    }
    if (obj->attrs) {  // its own attributes first (OrderedDict defines no data descriptors they would pass)
      Ref key = Ref::steal(PyUnicode_FromString(name.c_str()));
      if (const long i = find_key(*obj->attrs, key.get()); i >= 0) {
        out = obj->attrs->items[static_cast<size_t>(i)];
        return std::nullopt;
      }
    }
    PyObject* cls = obj->obj && PyType_Check(obj->obj.get()) ? obj->obj.get() : reinterpret_cast<PyObject*>(&PyDict_Type);
    return builtin_method_attr(t, f, obj, reinterpret_cast<PyTypeObject*>(cls), name, out);
  }
  static constexpr auto call = no_answer::call;
  // An attribute of an OrderedDict made in the trace (its instances have a __dict__: nn.Module.state_dict's
  // `destination._metadata = OrderedDict()`), kept in attrs and set again when it is rebuilt. Plain
  // dicts and defaultdicts have no __dict__ (eager raises AttributeError), and a dict from the frame
  // is a real object's state: both take the common answer.
  static Status setattr(Translator& t, Frame& f, const VPtr& owner, const std::string& name, const VPtr& value) {
    if (owner->source || owner->lazy) return no_answer::setattr(t, f, owner, name, value);
    PyObject* cls = owner->obj && PyType_Check(owner->obj.get()) ? owner->obj.get() : reinterpret_cast<PyObject*>(&PyDict_Type);
    if (reinterpret_cast<PyTypeObject*>(cls)->tp_dictoffset == 0) {
      // a dict or defaultdict made here has no __dict__: eager's AttributeError, raised in the trace
      // (taken from an empty one, so its text is this Python's)
      Ref empty = Ref::steal(PyObject_CallNoArgs(cls));
      if (empty && PyObject_SetAttrString(empty.get(), name.c_str(), Py_None) == 0) return no_answer::setattr(t, f, owner, name, value);
      return t.raise_current(f, "setting attribute '" + name + "' of a " + reinterpret_cast<PyTypeObject*>(cls)->tp_name);
    }
    if (name.rfind("__", 0) == 0) return no_answer::setattr(t, f, owner, name, value);
    if (!owner->attrs) owner->attrs = t.make(VK::Dict);
    if (!dict_set(*owner->attrs, Ref::steal(PyUnicode_FromString(name.c_str())), value))
      return t.brk(f, "DV0010", "comparing attribute names raised");
    return std::nullopt;
  }
  static Status call_method(Translator& t, Frame& f, const VPtr& m, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
    if (m->self->obj && m->self->obj.get() == ordered_dict_class()) {  // OrderedDict's own methods first (dict_kinds.cpp)
      bool handled = false;
      if (Status s = t.ordered_dict_method(f, m->self, m->name, args, kwargs, out, handled)) return s;
      if (handled) return std::nullopt;
    }
    return call_table_method(t, f, kDictMethods, m, args, kwargs, out);
  }
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    if (v->source) return r.e.source(*v->source);
    // An OrderedDict or defaultdict made in the trace: cls([factory,] {...}).
    const bool typed = v->obj && PyType_Check(v->obj.get());
    if (typed) r.e.callable_const(v->obj.get());
    if (typed && v->defaults && !r.value(v->defaults)) return false;
    for (size_t i = 0; i < v->items.size(); ++i) {
      if (!r.key(v->keys[i]) || !r.value(v->items[i])) return false;
    }
    r.e.emit(N::BUILD_MAP, static_cast<int>(v->items.size()));
    if (typed) r.e.call(v->defaults ? 2 : 1);
    if (!r.remember(v)) return false;
    if (v->attrs) {  // its attributes (after remember: one may be the dict itself)
      const int slot = r.memo[v.get()];
      for (size_t i = 0; i < v->attrs->keys.size(); ++i) {
        if (!r.value(v->attrs->items[i])) return false;
        r.e.emit(N::LOAD_FAST, slot);
        r.e.emit(N::STORE_ATTR, r.e.name(str_of(v->attrs->keys[i].get())));
      }
    }
    return true;
  }
};
DV_KIND(Dict, "dict")

}  // namespace dv
