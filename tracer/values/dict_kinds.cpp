// collections.OrderedDict and collections.defaultdict made in the trace: Dict values whose `obj` is
// the class and, for a defaultdict, `defaults` its default_factory. They answer what a dict answers
// (dicts.cpp) plus their own: a defaultdict's missing key calls the factory and stores the result;
// an OrderedDict's move_to_end and popitem(last=). Codegen rebuilds one that escapes as its class.
#include "tracer/pycache.h"
#include "tracer/translator.h"

namespace dv {

namespace {

PyObject* collections_attr(const char* name) {
  Ref mod = Ref::steal(PyImport_ImportModule("collections"));
  PyObject* o = mod ? PyObject_GetAttrString(mod.get(), name) : nullptr;
  if (!o) PyErr_Clear();
  return o;  // kept for the process
}

}  // namespace

PyObject* ordered_dict_class() {
  static PyObject* c = collections_attr("OrderedDict");
  return c;
}
PyObject* defaultdict_class() {
  static PyObject* c = collections_attr("defaultdict");
  return c;
}

Translator::Status Translator::construct_dict_kind(Frame& f, PyObject* cls, std::vector<VPtr>& args,
                                                   std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled) {
  handled = false;
  const bool dd = cls == defaultdict_class();
  if (!cls || (cls != ordered_dict_class() && !dd)) return std::nullopt;
  handled = true;
  VPtr factory;
  std::vector<VPtr> rest = args;
  if (dd) {
    factory = rest.empty() ? constant(Ref::borrow(Py_None)) : rest.front();
    if (!rest.empty()) rest.erase(rest.begin());
    const bool none = factory->kind == VK::Const && factory->obj.get() == Py_None;
    if (!none && factory->kind != VK::Object && factory->kind != VK::Function && factory->kind != VK::Instance)
      return brk(f, "DV0004", std::string("collections.defaultdict with a ") + vk_name(factory->kind) + " default_factory");
    if (!none && factory->kind == VK::Object && !PyCallable_Check(factory->obj.get()))
      return raise_new(f, PyExc_TypeError, "first argument must be callable or None");
  }
  VPtr dict_fn = make(VK::Object);
  dict_fn->obj = Ref::borrow(reinterpret_cast<PyObject*>(&PyDict_Type));
  VPtr d;
  if (Status s = call(f, dict_fn, std::move(rest), std::move(kwargs), d)) return s;
  if (!d || d->kind != VK::Dict) return brk(f, "DV0004", "constructing " + std::string(reinterpret_cast<PyTypeObject*>(cls)->tp_name));
  d->obj = Ref::borrow(cls);
  d->defaults = factory;
  out = d;
  return std::nullopt;
}

// d[key] of a defaultdict whose key is missing: d[key] = default_factory() (KeyError with no factory).
Translator::Status Translator::dict_missing(Frame& f, const VPtr& d, const VPtr& key, VPtr& out) {
  const VPtr& factory = d->defaults;
  PyObject* k = key_of(key);
  if (!k) return brk(f, "DV0024", std::string("a defaultdict's missing key is a ") + vk_name(key->kind));
  if (!factory || (factory->kind == VK::Const && factory->obj.get() == Py_None))
    return key->kind == VK::Tensor ? brk(f, "DV0010", "KeyError: a tensor key not in the dict", "the eager frame raises it")
                                   : raise_key_error(f, key->obj.get());
  VPtr v;
  if (Status s = call(f, factory, {}, {}, v)) return s;
  dict_set(*d, Ref::borrow(k), v);
  if (d->source) output.side_effects.note_mutation(d);  // a defaultdict from the frame: written back
  out = v;
  return std::nullopt;
}

// OrderedDict's own methods: move_to_end(key, last=True), popitem(last=True). `handled` false: not one.
Translator::Status Translator::ordered_dict_method(Frame& f, const VPtr& self, const std::string& name, std::vector<VPtr>& args,
                                                   std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled) {
  handled = false;
  if (name != "move_to_end" && name != "popitem") return std::nullopt;
  handled = true;
  const size_t nkey = name == "move_to_end" ? 1 : 0;
  if (args.size() < nkey || args.size() > nkey + 1) return brk(f, "DV0004", "OrderedDict." + name + " with these arguments");
  VPtr last_v = args.size() > nkey ? args[nkey] : nullptr;
  for (auto& [k, v] : kwargs) {
    if (k != "last" || last_v) return brk(f, "DV0004", "OrderedDict." + name + " with keyword " + k);
    last_v = v;
  }
  bool last = true;
  if (last_v) {
    if (last_v->kind != VK::Const) return brk(f, "DV0004", "OrderedDict." + name + " with a computed last=");
    last = PyObject_IsTrue(last_v->obj.get()) == 1;
  }
  Value& d = *self;
  if (self->source) output.side_effects.note_mutation(self);  // an OrderedDict from the frame: written back
  if (name == "popitem") {
    if (d.keys.empty()) return raise_new(f, PyExc_KeyError, "dictionary is empty");
    const size_t i = last ? d.keys.size() - 1 : 0;
    VPtr pair = make(VK::Tuple);
    pair->items = {key_value(d.keys[i]), d.items[i]};
    d.keys.erase(d.keys.begin() + static_cast<long>(i));
    d.items.erase(d.items.begin() + static_cast<long>(i));
    out = pair;
    return std::nullopt;
  }
  PyObject* key = key_of(args[0]);
  if (!key) return brk(f, "DV0024", std::string("OrderedDict.move_to_end with a ") + vk_name(args[0]->kind) + " key");
  for (size_t i = 0; i < d.keys.size(); ++i) {
    const int eq = keys_equal(d.keys[i].get(), key);
    if (eq < 0) return raise_current(f, "OrderedDict.move_to_end");
    if (!eq) continue;
    Ref k = d.keys[i];
    VPtr v = d.items[i];
    d.keys.erase(d.keys.begin() + static_cast<long>(i));
    d.items.erase(d.items.begin() + static_cast<long>(i));
    d.keys.insert(last ? d.keys.end() : d.keys.begin(), k);
    d.items.insert(last ? d.items.end() : d.items.begin(), v);
    out = constant(Ref::borrow(Py_None));
    return std::nullopt;
  }
  if (args[0]->kind == VK::Tensor) return brk(f, "DV0010", "KeyError: a tensor key not in the dict", "the eager frame raises it");
  return raise_key_error(f, args[0]->obj.get(), "OrderedDict.move_to_end");
}

}  // namespace dv
