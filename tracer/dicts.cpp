// Dict values: the methods of dicts made in the trace and of dicts from outside the frame (whose
// changes the transformed code writes back: SideEffects::mutated_dicts). Keys are constants, objects
// known by identity, and values keyed by identity (tensors, nn.Modules, objects compared by identity,
// objects made in the trace: Translator::key_of).
#include "tensor_match.h"
#include "translator.h"

namespace dv {

int keys_equal(PyObject* a, PyObject* b) {
  if (a == b) return 1;
  // A tensor hashes by identity (Tensor.__hash__ is id()), so a dict never compares it with ==
  // (elementwise) to another key: two tensors are one key only when they are one object.
  if (is_tensor(a) || is_tensor(b)) return 0;
  return PyObject_RichCompareBool(a, b, Py_EQ);
}

// Index of `key` among d's keys; -1 when absent, -2 when comparing raised (error cleared).
long find_key(const Value& d, PyObject* key) {
  for (size_t i = 0; i < d.keys.size(); ++i) {
    const int r = keys_equal(d.keys[i].get(), key);
    if (r < 0) return PyErr_Clear(), -2;
    if (r == 1) return static_cast<long>(i);
  }
  return -1;
}

namespace {
bool hashable_const(const VPtr& v) { return dict_key(v) != nullptr; }
}  // namespace

bool value_key(PyObject* k) { return is_tensor(k) || is_made_key(k); }

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

// A tensor is a key by its identity: its example (an in-place method gives its own tensor back, and
// its example is that tensor's example too: x.add_(1) is x). An nn.Module (object's hash and ==) by
// itself. Each is recorded with its value, so that reading the key back (iteration, items(), the
// rebuilt dict) gives the value, with its source or graph node.
PyObject* Translator::key_of(const VPtr& v) {
  if (PyObject* k = dict_key(v)) return k;
  if (v && v->kind == VK::Tuple && !v->items.empty() && v->items.size() <= 8) {
    // A tuple of constant keys (torch.optim groups tensors by (p.device, p.dtype)): that tuple
    Ref t = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(v->items.size())));
    for (size_t i = 0; t && i < v->items.size(); ++i) {
      PyObject* k = v->items[i]->kind == VK::Const ? dict_key(v->items[i]) : nullptr;
      if (!k) return nullptr;
      PyTuple_SET_ITEM(t.get(), static_cast<Py_ssize_t>(i), Ref::borrow(k).release());
    }
    if (!t) return PyErr_Clear(), nullptr;
    made_keys_.push_back(t);
    return t.get();
  }
  if (!v || !v->obj) return nullptr;
  PyObject* o = v->obj.get();
  if (v->kind == VK::Instance && !v->source && hashed_by_identity(reinterpret_cast<PyTypeObject*>(o))) {
    // An object made in the trace, of a class without __eq__ or __hash__ of its own: it is equal to
    // itself only, and to no object from outside, so a token of its own stands for it (no guard:
    // nothing the next call gives can be it).
    auto it = instance_keys_.find(v.get());
    if (it == instance_keys_.end()) {
      Ref token = new_made_key();
      if (!token) return nullptr;
      it = instance_keys_.emplace(v.get(), token).first;
      output.key_values.try_emplace(token.get(), v);
    }
    return it->second.get();
  }
  if (v->kind == VK::Object && identity_compared(o) && !identity_key(o) && !const_key(o)) {
    // An object compared by identity (a user class's instance, an OpOverloadPacket, a
    // functools.partial): itself, as TorchDynamo keys it. One from the frame is guarded by identity
    // where that decides something (identity_key_used); one with no source is a constant of the
    // trace already (torch.ops.aten.add, read through torch.*, which is fixed) and of the code.
    if (!v->source) return o;
    identity_key_used(v);
    output.key_values.try_emplace(o, v);
    return o;
  }
  const bool by_identity = (v->kind == VK::Tensor && is_tensor(o)) ||
                           (v->kind == VK::NNModule && hashed_by_identity(Py_TYPE(o)));
  if (!by_identity) return nullptr;
  output.key_values.try_emplace(o, v);
  return o;
}

// Which objects compared by identity are keys decides what a lookup finds only relative to the other
// keys: a dict made in the trace keyed by the one object the frame was given finds it whatever object
// the next call gives (TorchDynamo guards none of them, and reuses its graph where two arguments it
// told apart are then one object, which eager's dict finds). Once two such objects are keys, or one
// meets a dict from the frame that holds such keys, each is guarded by identity (a key the dict's
// DICT_KEYS guard holds already is not).
void Translator::identity_key_used(const VPtr& v) {
  const bool known = std::any_of(identity_keys_.begin(), identity_keys_.end(), [&](const VPtr& w) { return w.get() == v.get(); });
  if (!known) identity_keys_.push_back(v);
  if (identity_keys_.size() > 1) identity_keys_met_ = true;
  if (!identity_keys_met_) return;
  for (const VPtr& w : identity_keys_)
    if (w->source->kind != Source::Kind::Held)
      output.add_guard(GuardKind::ID_MATCH, w->source, w->obj, cur_step_, -1, std::string(),
                       "___check_obj_id(" + w->source->text() + ", " + repr_of(w->obj.get()) + ")");
}

void Translator::identity_keys_meet() {
  if (identity_keys_met_) return;
  identity_keys_met_ = true;
  if (!identity_keys_.empty()) identity_key_used(identity_keys_.front());
}

// An object == compares by identity that can be hashed (by object's hash or its class's own: an
// OpOverloadPacket hashes its op).
bool identity_compared(PyObject* o) {
  PyTypeObject* tp = Py_TYPE(o);
  return tp->tp_richcompare == PyBaseObject_Type.tp_richcompare && tp->tp_hash != PyObject_HashNotImplemented &&
         !PyType_Check(o) && !is_tensor(o);
}

VPtr Translator::key_value(const Ref& k) {
  if (auto it = output.key_values.find(k.get()); it != output.key_values.end()) return it->second;
  if (is_exact_const(k.get()) || !identity_key(k.get())) return constant(k);
  VPtr v = make(PyFunction_Check(k.get()) ? VK::Function : VK::Object);
  v->obj = k;
  return v;
}

bool dict_set(Value& d, Ref key, VPtr value) {
  const long i = find_key(d, key.get());
  if (i == -2) return false;
  if (i >= 0) {
    d.items[static_cast<size_t>(i)] = std::move(value);
    return true;
  }
  d.keys.push_back(std::move(key));
  d.items.push_back(std::move(value));
  return true;
}

bool dict_erase(Value& d, PyObject* key) {
  const long i = find_key(d, key);
  if (i < 0) return false;
  d.keys.erase(d.keys.begin() + i);
  d.items.erase(d.items.begin() + i);
  return true;
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
    Ref keys = dict_keys_in_order(d);
    if (!keys) return raise_current(f, "dict.keys()");
    VPtr snap = make(VK::Dict);
    snap->source = self->source;  // a view handed out of the graph is the live object's view
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys.get()); ++i) {
      PyObject* k = PyList_GET_ITEM(keys.get(), i);
      if (!const_key(k))
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
  Ref keys = dict_keys_in_order(d);
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
