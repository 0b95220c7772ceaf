// Instances of plain Python classes made in the trace (VK::Instance): which classes qualify, how one
// is constructed (__new__ and __init__), attribute reads and writes (properties, a custom
// __setattr__), truth, iteration, and the builtin methods the class inherits -- object's, and for
// dict and OrderedDict subclasses (transformers' ModelOutput) the dict's, for list subclasses the
// list's, over the instance's contents. The transformed code rebuilds an instance that escapes the
// trace (codegen.cpp).
#include <cstring>

#include "tracer/handlers_common.h"
#include "tracer/pycache.h"
#include "tracer/translator.h"
#include "tracer/rebuild.h"
#include "tracer/values/kind.h"

namespace dv {

using cg::N;

namespace {

PyObject* interned(const char* s) { return PyUnicode_InternFromString(s); }

PyTypeObject* ordered_dict_type() {
  static PyTypeObject* t = [] {
    Ref mod = Ref::steal(PyImport_ImportModule("collections"));
    Ref od = mod ? Ref::steal(PyObject_GetAttrString(mod.get(), "OrderedDict")) : Ref();
    if (!od || !PyType_Check(od.get())) return PyErr_Clear(), static_cast<PyTypeObject*>(nullptr);
    return reinterpret_cast<PyTypeObject*>(od.release());  // kept for the process
  }();
  return t;
}

// A metaclass that makes instances as `type` does (type, abc.ABCMeta: no __call__ of its own).
bool plain_metaclass(PyTypeObject* meta) {
  if (meta == &PyType_Type) return true;
  static PyObject* call_name = interned("__call__");
  return PyType_IsSubtype(meta, &PyType_Type) && _PyType_Lookup(meta, call_name) == _PyType_Lookup(&PyType_Type, call_name);
}

PyTypeObject* class_of(const VPtr& v) { return reinterpret_cast<PyTypeObject*>(v->obj.get()); }

// A builtin descriptor (slot wrapper or method) defined by `base` or one of its bases.
bool descriptor_of(PyObject* d, PyTypeObject* base) {
  if (!d || !base || !(Py_IS_TYPE(d, &PyWrapperDescr_Type) || Py_IS_TYPE(d, &PyMethodDescr_Type))) return false;
  return PyType_IsSubtype(base, PyDescr_TYPE(d));
}

// list's own methods on a list subclass's instance (super().append(x), list.__init__(self, items),
// super().__setitem__(i, v) in an override): over its contents, a List value, as on a list. The
// dunders that are operators run as their opcodes do on that list (`d[i] = v`, `x in d`).
Status list_builtin(Translator& t, Frame& f, const std::string& name, const VPtr& d, std::vector<VPtr>& args,
                    std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out) {
  if (Status s = t.realize_lazy(f, d)) return s;
  if (name == "__init__") {  // list.__init__(self[, iterable]): emptied, then extended
    if (!kwargs.empty()) return t.raise_new(f, PyExc_TypeError, "list() takes no keyword arguments");
    if (args.size() > 1) return t.raise_new(f, PyExc_TypeError, "list expected at most 1 argument, got " + std::to_string(args.size()));
    VPtr r;
    if (Status s = t.call(f, t.bound_method(d, Ref(), "clear"), {}, {}, r)) return s;
    if (!args.empty())
      if (Status s = t.call(f, t.bound_method(d, Ref(), "extend"), {args[0]}, {}, r)) return s;
    out = t.constant(Ref::borrow(Py_None));
    return std::nullopt;
  }
  if (!kwargs.empty() && name != "sort") return t.brk(f, "DV0004", "list." + name + " with keyword arguments");
  if (name == "__len__" && args.empty()) {
    out = t.constant_steal(PyLong_FromSize_t(d->items.size()));
    return std::nullopt;
  }
  if (name == "__getitem__" && args.size() == 1) return t.subscr(f, d, args[0], out);
  if (name == "__iter__" && args.empty()) return t.iterate(f, d, out, false);
  Status (*op)(Translator&, Frame&, const Instr&) = nullptr;
  std::vector<VPtr> stack;  // what the opcode finds on the stack
  if (name == "__setitem__" && args.size() == 2) op = op_STORE_SUBSCR, stack = {args[1], d, args[0]};
  else if (name == "__delitem__" && args.size() == 1) op = op_DELETE_SUBSCR, stack = {d, args[0]};
  else if (name == "__contains__" && args.size() == 1) op = op_CONTAINS_OP, stack = {args[0], d};
  if (op) {
    const size_t depth = f.stack.size();
    f.stack.insert(f.stack.end(), stack.begin(), stack.end());
    Instr in;
    in.arg = 0;  // CONTAINS_OP's `in`
    if (Status s = op(t, f, in)) {
      f.stack.resize(std::min(depth, f.stack.size()));
      return s;
    }
    out = f.stack.size() > depth ? f.stack.back() : t.constant(Ref::borrow(Py_None));
    f.stack.resize(depth);
    return std::nullopt;
  }
  if (name.size() > 4 && name.rfind("__", 0) == 0)  // __add__, __iadd__, __eq__ ...: not followed
    return t.brk(f, "DV0004", "list." + name + " on a list subclass's object");
  // append, extend, pop, insert, remove, clear, reverse, copy, index, count, sort (values/list.cpp)
  return t.call(f, t.bound_method(d, Ref(), name), std::move(args), std::move(kwargs), out);
}

}  // namespace

// A member descriptor a class's __slots__ made (on a Python class: C types' members are their own).
bool slot_member(PyObject* d) {
  return d && Py_IS_TYPE(d, &PyMemberDescr_Type) && (PyDescr_TYPE(d)->tp_flags & Py_TPFLAGS_HEAPTYPE);
}

PyTypeObject* builtin_base(PyTypeObject* tp) {
  PyObject* mro = tp->tp_mro;
  if (!mro || !PyTuple_Check(mro)) return nullptr;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
    auto* b = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
    if (b != &PyBaseObject_Type && !(b->tp_flags & Py_TPFLAGS_HEAPTYPE)) return b;
  }
  return nullptr;
}

bool plain_class(PyTypeObject* tp) {
  // (a class whose instances have no __dict__ is one whose classes all define __slots__: its
  // instances' attributes are its slots, kept as the attributes of others are)
  if (!plain_metaclass(Py_TYPE(tp)) || !(tp->tp_flags & Py_TPFLAGS_HEAPTYPE)) return false;
  if (tp->tp_flags & Py_TPFLAGS_IS_ABSTRACT) return false;  // eager raises TypeError: abstract methods
  PyObject* mro = tp->tp_mro;
  if (!mro || !PyTuple_Check(mro)) return false;
  PyTypeObject* base = nullptr;  // the one builtin base allowed: dict, OrderedDict or list
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
    auto* b = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
    if (b == &PyBaseObject_Type) continue;
    if (b->tp_flags & Py_TPFLAGS_HEAPTYPE) {
      if (!plain_metaclass(Py_TYPE(b))) return false;
      continue;
    }
    if (b == &PyDict_Type || b == ordered_dict_type()) {
      if (!base) base = b;
      continue;
    }
    if (b == &PyList_Type && !base) {
      base = b;
      continue;
    }
    return false;  // other builtin bases: exceptions, tensors, tuples, sets, ...
  }
  static PyObject* new_name = interned("__new__");
  static PyObject* getattribute_name = interned("__getattribute__");
  static PyObject* getattr_name = interned("__getattr__");
  static PyObject* setattr_name = interned("__setattr__");
  auto* root = base ? base : &PyBaseObject_Type;
  if (_PyType_Lookup(tp, new_name) != _PyType_Lookup(root, new_name)) return false;
  PyObject* getattribute = _PyType_Lookup(tp, getattribute_name);  // the generic lookup, or one in Python (inlined)
  if (getattribute != _PyType_Lookup(root, getattribute_name) && !(getattribute && PyFunction_Check(getattribute))) return false;
  PyObject* getattr = _PyType_Lookup(tp, getattr_name);  // a fallback for missing attributes, in Python (inlined)
  if (getattr && !PyFunction_Check(getattr)) return false;
  PyObject* setattr = _PyType_Lookup(tp, setattr_name);
  return setattr == _PyType_Lookup(&PyBaseObject_Type, setattr_name) || (setattr && PyFunction_Check(setattr));
}

Translator::Status Translator::construct(Frame& f, const VPtr& cls, std::vector<VPtr> args,
                                         std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out) {
  auto* tp = class_of(cls);
  VPtr inst = make(VK::Instance);
  inst->obj = cls->obj;
  inst->self = cls;
  inst->attrs = make(VK::Dict);
  PyTypeObject* base = builtin_base(tp);
  if (base) inst->contents = make(base == &PyList_Type ? VK::List : VK::Dict);
  static PyObject* init_name = interned("__init__");
  PyObject* init = _PyType_Lookup(tp, init_name);
  if (init && PyFunction_Check(init)) {
    VPtr r;
    if (Status s = call(f, bound_method(inst, Ref::borrow(init), "__init__"), std::move(args), std::move(kwargs), r)) return s;
  } else if (init == _PyType_Lookup(&PyBaseObject_Type, init_name)) {
    if (!args.empty() || !kwargs.empty()) return raise_new(f, PyExc_TypeError, std::string(tp->tp_name) + "() takes no arguments");
  } else if (base && descriptor_of(init, base)) {  // dict.__init__ or list.__init__: the items given
    VPtr r;
    bool handled = false;
    if (Status s = instance_builtin(f, init, inst, args, kwargs, r, handled)) return s;
    if (!handled) return brk(f, "DV0004", std::string("constructing ") + tp->tp_name + ": " + base->tp_name + ".__init__");
  } else {
    return brk(f, "DV0004", std::string("constructing ") + tp->tp_name + ": its __init__ is not a Python function");
  }
  out = inst;
  return std::nullopt;
}

// object's, dict's and list's methods on an instance made in the trace -- through super() or spelled
// out (object.__setattr__(self, k, v), dict.__setitem__(self, k, v), super().append(x)).
Translator::Status Translator::instance_builtin(Frame& f, PyObject* descr, const VPtr& self, std::vector<VPtr>& args,
                                                std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled) {
  handled = false;
  static PyObject* object_init = PyObject_GetAttrString(reinterpret_cast<PyObject*>(&PyBaseObject_Type), "__init__");
  auto* tp = class_of(self);
  auto none = [&] { return constant(Ref::borrow(Py_None)); };
  if (descr == object_init) {
    handled = true;
    if (!args.empty() || !kwargs.empty())
      return raise_new(f, PyExc_TypeError, "object.__init__() takes exactly one argument (the instance to initialize)");
    out = none();
    return std::nullopt;
  }
  static PyObject* object_getattribute = PyObject_GetAttrString(reinterpret_cast<PyObject*>(&PyBaseObject_Type), "__getattribute__");
  static PyObject* object_delattr = PyObject_GetAttrString(reinterpret_cast<PyObject*>(&PyBaseObject_Type), "__delattr__");
  if (descr == object_getattribute || descr == object_delattr) {  // super().__getattribute__(name) in a class's own
    handled = true;
    if (args.size() != 1 || !kwargs.empty() || args[0]->kind != VK::Const || !PyUnicode_Check(args[0]->obj.get()))
      return brk(f, "DV0005", std::string("object.") + (descr == object_delattr ? "__delattr__" : "__getattribute__") + " on a " +
                                  tp->tp_name + " with a computed name");
    if (descr == object_delattr) {
      out = none();
      return instance_generic_delattr(f, self, str_of(args[0]->obj.get()));
    }
    return instance_generic_getattr(f, self, str_of(args[0]->obj.get()), out);
  }
  if (descr == py().object_setattr.get()) {
    handled = true;
    if (args.size() != 2 || !kwargs.empty() || args[0]->kind != VK::Const || !PyUnicode_Check(args[0]->obj.get()))
      return brk(f, "DV0008", std::string("object.__setattr__ on a ") + tp->tp_name + " with a computed name");
    PyObject* d = _PyType_Lookup(tp, args[0]->obj.get());
    if (d && Py_TYPE(d)->tp_descr_set && !slot_member(d))
      return brk(f, "DV0008", "assignment to property or descriptor '" + str_of(args[0]->obj.get()) + "' of " + tp->tp_name);
    if (!d && tp->tp_dictoffset == 0)
      return raise_new(f, PyExc_AttributeError, "'" + std::string(tp->tp_name) + "' object has no attribute '" + str_of(args[0]->obj.get()) + "'");
    dict_set(*self->attrs, args[0]->obj, args[1]);
    attrs_changed(self);
    out = none();
    return std::nullopt;
  }
  PyTypeObject* base = self->contents ? builtin_base(tp) : nullptr;
  if (!descriptor_of(descr, base)) return std::nullopt;
  // dict's (or OrderedDict's) own methods: over the instance's contents, a Dict value.
  handled = true;
  const std::string name = str_of(PyDescr_NAME(descr));
  const VPtr& d = self->contents;
  if (d->kind == VK::List) return list_builtin(*this, f, name, d, args, kwargs, out);
  if (name == "__init__") {
    if (args.size() > 1) return raise_new(f, PyExc_TypeError, std::string("dict expected at most 1 argument, got ") + std::to_string(args.size()));
    if (Status s = dict_call(*this, f, d, "update", args, kwargs, out)) return s;
    out = none();
    return std::nullopt;
  }
  if (!kwargs.empty() && name != "update") return brk(f, "DV0004", std::string(base->tp_name) + "." + name + " with keyword arguments");
  if (name == "__getitem__" && args.size() == 1) return subscr(f, d, args[0], out);
  if (name == "__len__" && args.empty()) {
    out = constant_steal(PyLong_FromSize_t(d->items.size()));
    return std::nullopt;
  }
  if (name == "__iter__" && args.empty()) return iterate(f, d, out, false);
  if (name == "__contains__" && args.size() == 1) {
    if (args[0]->kind != VK::Const) return brk(f, "DV0024", "'in' a dict with a " + std::string(vk_name(args[0]->kind)) + " key");
    bool found = false;
    for (const Ref& k : d->keys) found |= PyObject_RichCompareBool(k.get(), args[0]->obj.get(), Py_EQ) == 1;
    PyErr_Clear();
    out = constant(Ref::borrow(found ? Py_True : Py_False));
    return std::nullopt;
  }
  // get, keys, items, values, pop, update, __setitem__, __delitem__, ...
  return call(f, bound_method(d, Ref(), name), std::move(args), std::move(kwargs), out);
}

// An instance from the frame (value_builder.cpp) whose attributes changed: written back after the graph.
void Translator::attrs_changed(const VPtr& obj) {
  if (obj->attrs && obj->attrs->source) output.side_effects.note_mutation(obj->attrs);
}

Translator::Status Translator::instance_getattr(Frame& f, const VPtr& obj, const std::string& name, VPtr& out) {
  static PyObject* getattribute_name = interned("__getattribute__");
  PyObject* getattribute = _PyType_Lookup(class_of(obj), getattribute_name);
  Status s = getattribute && PyFunction_Check(getattribute)  // the class's own __getattribute__, inlined
                 ? call_python(f, Ref::borrow(getattribute), {obj, constant_steal(PyUnicode_FromString(name.c_str()))}, out)
                 : instance_generic_getattr(f, obj, name, out);
  // An AttributeError (the attribute is missing, or raised by __getattribute__): the class's
  // __getattr__, inlined, as type's slot_tp_getattr_hook calls it
  static PyObject* getattr_name = interned("__getattr__");
  PyObject* getattr = s && s->exc && PyObject_IsInstance(s->exc.get(), PyExc_AttributeError) == 1
                          ? _PyType_Lookup(class_of(obj), getattr_name) : nullptr;
  PyErr_Clear();
  if (getattr && PyFunction_Check(getattr))
    return call_python(f, Ref::borrow(getattr), {obj, constant_steal(PyUnicode_FromString(name.c_str()))}, out);
  return s;
}

namespace {
SourcePtr class_source(const VPtr& obj) { return obj->self ? obj->self->source : nullptr; }
}  // namespace

// A descriptor found on the class of an instance (`cls`: where the class is read) whose own class defines `method`
// (__get__, __set__) as a Python function: that method inlined with the descriptor as self. The
// descriptor is read through the class as loaded, so it is guarded like any class attribute.
// No Status when that method is not a Python function.
std::optional<Translator::Status> Translator::call_descriptor(Frame& f, SourcePtr cls, const std::string& name, PyObject* descr_obj,
                                                              const char* method, std::vector<VPtr> rest, VPtr& out) {
  static PyObject* get_name = interned("__get__");
  static PyObject* set_name = interned("__set__");
  PyObject* fn = _PyType_Lookup(Py_TYPE(descr_obj), std::strcmp(method, "__set__") == 0 ? set_name : get_name);
  if (!fn || !PyFunction_Check(fn)) return std::nullopt;
  VPtr descr = wrap(Ref::borrow(descr_obj), cls ? Source::attr(cls, name) : nullptr, f);
  if (!descr) return brk(f, "DV0005", "descriptor " + name + " of a " + Py_TYPE(descr_obj)->tp_name + " cannot be traced");
  rest.insert(rest.begin(), descr);
  return call_python(f, Ref::borrow(fn), std::move(rest), out);
}

// object.__getattribute__: data descriptors, the instance's __dict__, then the class.
Translator::Status Translator::instance_generic_getattr(Frame& f, const VPtr& obj, const std::string& name, VPtr& out) {
  auto* tp = class_of(obj);
  if (name == "__class__") {
    out = obj->self;
    return std::nullopt;
  }
  if (name == "__dict__" && tp->tp_dictoffset != 0) {  // live: writes through it are the instance's attributes
    out = obj->attrs;
    return std::nullopt;
  }
  Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
  PyObject* cls_attr = _PyType_Lookup(tp, nm.get());
  if (slot_member(cls_attr)) {  // a slot: its value, or AttributeError while it is unset
    for (size_t i = 0; i < obj->attrs->keys.size(); ++i)
      if (str_of(obj->attrs->keys[i].get()) == name) {
        out = obj->attrs->items[i];
        return std::nullopt;
      }
    return raise_new(f, PyExc_AttributeError, "'" + std::string(tp->tp_name) + "' object has no attribute '" + name + "'");
  }
  if (!cls_attr && tp->tp_dictoffset == 0)  // (a slots class's instance: no __dict__ to look in)
    return raise_new(f, PyExc_AttributeError, "'" + std::string(tp->tp_name) + "' object has no attribute '" + name + "'");
  if (cls_attr && Py_TYPE(cls_attr)->tp_descr_set) {  // data descriptors first: properties
    if (Ref getter = python_getter(cls_attr)) return call_python(f, getter, {obj}, out, /*read=*/false);
    if (auto s = call_descriptor(f, class_source(obj), name, cls_attr, "__get__", {obj, obj->self}, out)) return *s;
    return brk(f, "DV0005", "descriptor " + name + " of " + tp->tp_name);
  }
  for (size_t i = 0; i < obj->attrs->keys.size(); ++i)  // the instance's own attributes
    if (str_of(obj->attrs->keys[i].get()) == name) {
      out = obj->attrs->items[i];
      return std::nullopt;
    }
  if (!cls_attr) return brk(f, kNoAttributeId, "'" + std::string(tp->tp_name) + "' object has no attribute '" + name + "'");
  if (PyFunction_Check(cls_attr)) {  // a method, bound to the instance
    out = bound_method(obj, Ref::borrow(cls_attr), name);
    return std::nullopt;
  }
  if (Py_IS_TYPE(cls_attr, &PyClassMethod_Type)) {  // bound to the class
    Ref fn = Ref::steal(PyObject_GetAttrString(cls_attr, "__func__"));
    if (!fn || !PyFunction_Check(fn.get())) return PyErr_Clear(), brk(f, "DV0005", "classmethod " + name + " of " + tp->tp_name);
    out = bound_method(obj->self, fn, name);
    return std::nullopt;
  }
  if (obj->contents && descriptor_of(cls_attr, builtin_base(tp))) {  // a method of the dict it is
    out = bound_method(obj, Ref::borrow(cls_attr), name);
    return std::nullopt;
  }
  if (Py_TYPE(cls_attr)->tp_descr_get && !Py_IS_TYPE(cls_attr, &PyStaticMethod_Type)) {
    // Another descriptor (functools.cached_property, torch.distributions' lazy_property): its
    // __get__(obj, cls) when that is Python, inlined; reading it through the class would give what
    // __get__(None, cls) gives instead.
    if (auto s = call_descriptor(f, class_source(obj), name, cls_attr, "__get__", {obj, obj->self}, out)) return *s;
    return brk(f, "DV0005", "descriptor " + name + " of " + tp->tp_name);
  }
  // Anything else the class holds (staticmethods, constants, registries): read through the class
  // as loaded, so it is guarded like any class attribute.
  return getattr(f, obj->self, name, out);
}

Translator::Status Translator::instance_setattr(Frame& f, const VPtr& obj, const std::string& name, const VPtr& value) {
  auto* tp = class_of(obj);
  Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
  static PyObject* setattr_name = interned("__setattr__");
  PyObject* setattr = _PyType_Lookup(tp, setattr_name);
  if (setattr && PyFunction_Check(setattr)) {  // the class's own __setattr__, inlined
    VPtr r;
    return call_python(f, Ref::borrow(setattr), {obj, constant(nm), value}, r);
  }
  PyObject* descr = _PyType_Lookup(tp, nm.get());
  if (!descr && tp->tp_dictoffset == 0)  // object(), or a slots class's instance and a name that is no slot
    return raise_new(f, PyExc_AttributeError, "'" + std::string(tp->tp_name) + "' object has no attribute '" + name + "'");
  if (descr && Py_TYPE(descr)->tp_descr_set && !slot_member(descr)) {
    if (PyObject_TypeCheck(descr, &PyProperty_Type)) {  // a property whose setter is Python: inlined
      Ref setter = Ref::steal(PyObject_GetAttrString(descr, "fset"));
      if (setter && PyFunction_Check(setter.get())) {
        VPtr r;
        return call_python(f, setter, {obj, value}, r);
      }
      PyErr_Clear();
    }
    VPtr r;  // a descriptor class's own Python __set__ (a typed field writing obj.__dict__), inlined
    if (auto s = call_descriptor(f, class_source(obj), name, descr, "__set__", {obj, value}, r)) return *s;
    return brk(f, "DV0008", "assignment to property or descriptor '" + name + "' of " + tp->tp_name);
  }
  dict_set(*obj->attrs, nm, value);
  attrs_changed(obj);
  return std::nullopt;
}

Translator::Status Translator::instance_delattr(Frame& f, const VPtr& obj, const std::string& name) {
  static PyObject* delattr_name = interned("__delattr__");
  PyObject* delattr = _PyType_Lookup(class_of(obj), delattr_name);
  if (delattr && PyFunction_Check(delattr)) {  // the class's own __delattr__, inlined
    VPtr r;
    return call_python(f, Ref::borrow(delattr), {obj, constant_steal(PyUnicode_FromString(name.c_str()))}, r);
  }
  if (delattr != _PyType_Lookup(&PyBaseObject_Type, delattr_name))
    return brk(f, "DV0008", std::string("del of attribute '") + name + "' of a " + class_of(obj)->tp_name + " (a builtin __delattr__)");
  return instance_generic_delattr(f, obj, name);
}

// object.__delattr__: a data descriptor's deleter (not followed), else the instance's __dict__ entry.
Translator::Status Translator::instance_generic_delattr(Frame& f, const VPtr& obj, const std::string& name) {
  auto* tp = class_of(obj);
  Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
  PyObject* descr = _PyType_Lookup(tp, nm.get());
  if (descr && Py_TYPE(descr)->tp_descr_set && !slot_member(descr))
    return brk(f, "DV0008", "del of property or descriptor '" + name + "' of " + tp->tp_name);
  if (!dict_erase(*obj->attrs, nm.get()))  // (an unset slot: AttributeError(name), as member_set says)
    return raise_new(f, PyExc_AttributeError, slot_member(descr) ? name : "'" + std::string(tp->tp_name) + "' object has no attribute '" + name + "'");
  attrs_changed(obj);
  return std::nullopt;
}

Translator::Status Translator::instance_truth(Frame& f, const VPtr& obj, bool& out) {
  // True unless its class says otherwise: __bool__, else __len__ (inlined; a dict's: its contents).
  static PyObject* bool_name = interned("__bool__");
  static PyObject* len_name = interned("__len__");
  auto* tp = class_of(obj);
  PyObject* b = _PyType_Lookup(tp, bool_name);
  PyObject* l = b ? nullptr : _PyType_Lookup(tp, len_name);
  if (!b && !l) {
    out = true;
    return std::nullopt;
  }
  if (l && obj->contents && descriptor_of(l, builtin_base(tp))) {
    out = !obj->contents->items.empty();
    return std::nullopt;
  }
  PyObject* m = b ? b : l;
  if (!PyFunction_Check(m)) return brk(f, "DV0007", std::string("bool() of a ") + tp->tp_name + " whose __bool__ or __len__ is not Python code");
  VPtr r;
  if (Status s = call_python(f, Ref::borrow(m), {obj}, r)) return s;
  if (r->kind != VK::Const || (b ? !PyBool_Check(r->obj.get()) : !PyLong_Check(r->obj.get())))
    return brk(f, "DV0007", std::string("bool() of a ") + tp->tp_name + ": " + (b ? "__bool__" : "__len__") + " gave a " + vk_name(r->kind));
  out = PyObject_IsTrue(r->obj.get()) == 1;
  return std::nullopt;
}

// The Python function `name` of the class of an object made in the trace, or of an object of a
// Python class reached from the frame (borrowed), or null: not defined there, or not Python code.
PyObject* user_dunder_fn(const VPtr& v, const char* name) {
  PyTypeObject* tp = nullptr;
  if (v->kind == VK::Instance) tp = class_of(v);
  else if (v->kind == VK::Tuple && v->obj && tuple_class(v->obj.get())) tp = reinterpret_cast<PyTypeObject*>(v->obj.get());
  else if (v->kind == VK::Object && v->obj && (Py_TYPE(v->obj.get())->tp_flags & Py_TPFLAGS_HEAPTYPE) && !PyType_Check(v->obj.get()))
    tp = Py_TYPE(v->obj.get());
  if (!tp) return nullptr;
  Ref nm = Ref::steal(PyUnicode_InternFromString(name));
  PyObject* fn = nm ? _PyType_Lookup(tp, nm.get()) : nullptr;
  return fn && PyFunction_Check(fn) ? fn : nullptr;
}
PyObject* user_next(const VPtr& v) { return user_dunder_fn(v, "__next__"); }
PyObject* user_iter(const VPtr& v) { return user_dunder_fn(v, "__iter__"); }

// An iterator object of a Python class (its __next__ Python code): an Iter that takes its items
// lazily (Translator::pull calls __next__, inlined, one item at a time; StopIteration ends it), as
// Python's FOR_ITER and next() do, so that __next__ sees the state the loop's body left.
VPtr Translator::user_iterator(const VPtr& obj) {
  VPtr it = make(VK::Iter);
  it->name = "user_iterator";
  it->self = obj;
  it->flag = true;
  return it;
}

Translator::Status iterate_user_object(Translator& t, Frame& f, const VPtr& obj, VPtr& it) {
  it = nullptr;
  if (!user_iter(obj)) return std::nullopt;
  return t.instance_iterate(f, obj, it, /*materialize=*/true, /*lazy_next=*/true);
}

Translator::Status Translator::instance_iterate(Frame& f, const VPtr& obj, VPtr& out, bool materialize, bool lazy_next) {
  // __iter__ inlined (a generator runs to its end); what it gives, if an iterator object of a Python
  // class (often obj itself): taken by its __next__ (lazily where lazy_next: FOR_ITER); a dict's:
  // its keys; else __getitem__ from 0 to IndexError. obj: made in the trace, or an object of a
  // Python class reached from the frame.
  static PyObject* iter_name = interned("__iter__");
  static PyObject* getitem_name = interned("__getitem__");
  auto* tp = obj->kind == VK::Instance ? class_of(obj) : Py_TYPE(obj->obj.get());
  PyObject* iter_fn = _PyType_Lookup(tp, iter_name);
  PyObject* getitem = _PyType_Lookup(tp, getitem_name);
  if (iter_fn && PyFunction_Check(iter_fn)) {
    VPtr r;
    if (Status s = call_python(f, Ref::borrow(iter_fn), {obj}, r)) return s;
    if (r->kind != VK::Iter && user_next(r)) {
      out = user_iterator(r);
      return materialize && !lazy_next ? pull(f, out, SIZE_MAX) : std::nullopt;
    }
    if (r->kind != VK::Iter) return brk(f, "DV0016", std::string(tp->tp_name) + ".__iter__ gave a " + vk_name(r->kind));
    return iterate(f, r, out, materialize);
  }
  if (obj->kind != VK::Instance) return brk(f, "DV0016", std::string("iterating over ") + tp->tp_name);
  if (iter_fn && obj->contents && descriptor_of(iter_fn, builtin_base(tp))) return iterate(f, obj->contents, out, materialize);
  if (iter_fn || !getitem || !PyFunction_Check(getitem)) return brk(f, "DV0016", std::string("iterating over a ") + tp->tp_name);
  VPtr it = make(VK::Iter);
  for (long i = 0;; ++i) {
    VPtr item;
    Status s = call_python(f, Ref::borrow(getitem), {obj, constant_steal(PyLong_FromLong(i))}, item);
    if (s && s->exc && (PyErr_GivenExceptionMatches(s->exc.get(), PyExc_IndexError) ||
                        PyErr_GivenExceptionMatches(s->exc.get(), PyExc_StopIteration)))
      break;
    if (s) return s;
    it->items.push_back(item);
    if (it->items.size() > 100000) return brk(f, "DV0014", "iterable too long to unroll");
  }
  out = it;
  return std::nullopt;
}

namespace {

PyTypeObject* type_of(const VPtr& v) {
  if (v->kind == VK::Instance) return class_of(v);
  if (v->kind == VK::Tuple && v->obj && tuple_class(v->obj.get())) return reinterpret_cast<PyTypeObject*>(v->obj.get());
  return v->obj ? Py_TYPE(v->obj.get()) : nullptr;
}

bool not_implemented(const VPtr& r) { return r && r->kind == VK::Const && r->obj.get() == Py_NotImplemented; }

}  // namespace

// a + b, a += b, a == b ... where an operand's class defines the operator in Python: its __add__ /
// __iadd__ / __radd__ inlined in the order Python tries them (the reflected one first when the right
// operand's class is a subclass of the left's that defines it), NotImplemented passing on to the
// next. `handled` false: neither operand defines it in Python (the caller goes on).
Translator::Status Translator::user_operator(Frame& f, const std::string& op, const std::string& reflected,
                                             const std::string& inplace, VPtr a, VPtr b, VPtr& out, bool& handled) {
  handled = false;
  if (a->kind == VK::Tensor || a->kind == VK::Sym) return std::nullopt;  // the tensor's operator comes first
  if (op == "__mod__" && a->kind == VK::Const && (PyUnicode_Check(a->obj.get()) || PyBytes_Check(a->obj.get())))
    return std::nullopt;  // "%s" % obj formats obj: str's operator comes first and does not give NotImplemented
  PyObject* iop = inplace.empty() ? nullptr : user_dunder_fn(a, inplace.c_str());
  PyObject* fwd = user_dunder_fn(a, op.c_str());
  PyObject* ref = user_dunder_fn(b, reflected.c_str());
  PyTypeObject *ta = type_of(a), *tb = type_of(b);
  if (ta && ta == tb && op != reflected) ref = nullptr;  // same class: the reflected form is not tried
  if (!iop && !fwd && !ref) return std::nullopt;
  handled = true;
  // An operand whose class defines the operator in something other than Python code (a builtin
  // base): dynview does not follow it.
  auto foreign = [&](const VPtr& v, const std::string& n) {
    if (v->kind != VK::Instance && v->kind != VK::Object) return false;
    PyTypeObject* tp = type_of(v);
    Ref nm = Ref::steal(PyUnicode_FromString(n.c_str()));
    PyObject* d = tp && nm ? _PyType_Lookup(tp, nm.get()) : nullptr;
    return d && !PyFunction_Check(d) && d != _PyType_Lookup(&PyBaseObject_Type, nm.get());
  };
  if ((!fwd && foreign(a, op)) || (!ref && tb != ta && foreign(b, reflected)))
    return brk(f, "DV0018", "operator " + op + " of a " + std::string(ta ? ta->tp_name : "?") + " and a " + (tb ? tb->tp_name : "?"));
  std::vector<std::pair<PyObject*, std::pair<VPtr, VPtr>>> order;
  if (iop) order.push_back({iop, {a, b}});
  const bool reflected_first = ref && ta && tb && ta != tb && PyType_IsSubtype(tb, ta);
  if (reflected_first) order.push_back({ref, {b, a}});
  if (fwd) order.push_back({fwd, {a, b}});
  if (ref && !reflected_first) order.push_back({ref, {b, a}});
  for (auto& [fn, operands] : order) {
    VPtr r;
    if (Status s = call_python(f, Ref::borrow(fn), {operands.first, operands.second}, r)) return s;
    if (!not_implemented(r)) {
      out = r;
      return std::nullopt;
    }
  }
  if (op == "__eq__" || op == "__ne__") {  // object's default: identity
    const bool same = a == b || (a->obj && a->kind != VK::Instance && a->obj.get() == b->obj.get());
    out = constant(Ref::borrow(same == (op == "__eq__") ? Py_True : Py_False));
    return std::nullopt;
  }
  return brk(f, "DV0018", "operator " + op + " returned NotImplemented for a " + (ta ? ta->tp_name : "?") + " and a " +
                              (tb ? tb->tp_name : "?"), "eager raises TypeError here");
}

// ---- the protocol (kind.h) ----

template <>
struct Kind<VK::Instance> {
  static void describe(const Value& v, std::string& out, int /*depth*/) {
    out += std::string("<") + (v.obj ? reinterpret_cast<PyTypeObject*>(v.obj.get())->tp_name : "?") + " object>";
  }
  static PyObject* python_type(Translator& /*t*/, const VPtr& v) {
    return v->obj.get();
  }
  static constexpr auto as_python = no_answer::as_python;
  static constexpr auto graph_arg = no_answer::graph_arg;
  static Status truth(Translator& t, Frame& f, const VPtr& v, bool& out) {
    return t.instance_truth(f, v, out);
  }
  static Status iterate(Translator& t, Frame& f, const VPtr& v, VPtr& out, bool materialize) {
    return t.instance_iterate(f, v, out, materialize);
  }
  static Status getattr(Translator& t, Frame& f, const VPtr& obj, const std::string& name, VPtr& out) {
    return t.instance_getattr(f, obj, name, out);
  }
  static Status call(Translator& t, Frame& f, const VPtr& fn, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
    // obj(x): its class's Python __call__, inlined
    PyObject* dunder = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(fn->obj.get()), Ref::steal(PyUnicode_FromString("__call__")).get());
    if (!dunder || !PyFunction_Check(dunder)) return t.brk(f, "DV0004", "calling an instance without a Python __call__");
    return t.call(f, t.bound_method(fn, Ref::borrow(dunder), "__call__"), std::move(args), std::move(kwargs), out);
  }
  static Status setattr(Translator& t, Frame& f, const VPtr& owner, const std::string& name, const VPtr& value) {
    return t.instance_setattr(f, owner, name, value);  // made in the trace
  }
  static Status call_method(Translator& t, Frame& f, const VPtr& m, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
    if (!m->obj) return t.brk(f, "DV0004", "method " + m->name + " of an instance made in the trace");
    bool handled = false;  // a builtin base's method (super().__setattr__ ...)
    if (Status s = t.instance_builtin(f, m->obj.get(), m->self, args, kwargs, out, handled)) return s;
    if (handled) return std::nullopt;
    return t.brk(f, "DV0004", "calling " + callable_name(m->obj.get()) + " on a " + reinterpret_cast<PyTypeObject*>(m->self->obj.get())->tp_name + " made in the trace");
  }
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    if (v->source) return r.e.source(*v->source);  // from the frame: the object itself (changes are written back)
    // obj = cls.__new__(cls) (object's, dict's or list's: plain classes have no other); a dict
    // subclass's items by its builtin base's __setitem__ (base.__setitem__(obj, k, v) ...), a list
    // subclass's by list.extend;
    // attributes by STORE_ATTR, or object.__setattr__(obj, name, v) past a custom __setattr__.
    auto* tp = reinterpret_cast<PyTypeObject*>(v->obj.get());
    Ref new_fn = Ref::steal(PyObject_GetAttrString(v->obj.get(), "__new__"));
    if (!new_fn) return PyErr_Clear(), false;
    r.e.callable_const(new_fn.get());
    r.e.emit(N::LOAD_CONST, r.e.konst(v->obj.get()));
    r.e.call(1);
    const int slot = r.e.temp();
    r.e.emit(N::STORE_FAST, slot);
    r.memo[v.get()] = slot;  // before its attributes: they may refer back to it
    if (v->contents && v->contents->kind == VK::List) {  // a list subclass's items: list.extend(obj, [...])
      static PyObject* extend = PyObject_GetAttrString(reinterpret_cast<PyObject*>(&PyList_Type), "extend");
      if (!extend) return PyErr_Clear(), false;
      r.e.callable_const(extend);
      r.e.emit(N::LOAD_FAST, slot);
      for (const VPtr& item : v->contents->items)
        if (!r.value(item)) return false;
      r.e.emit(N::BUILD_LIST, static_cast<int>(v->contents->items.size()));
      r.e.call(2);
      r.e.emit(N::POP_TOP);
    } else if (v->contents) {
      PyTypeObject* base = builtin_base(tp);
      PyObject* setitem = base ? _PyType_Lookup(base, Ref::steal(PyUnicode_FromString("__setitem__")).get()) : nullptr;
      if (!setitem) return false;
      for (size_t i = 0; i < v->contents->keys.size(); ++i) {
        r.e.callable_const(setitem);
        r.e.emit(N::LOAD_FAST, slot);
        if (!r.key(v->contents->keys[i]) || !r.value(v->contents->items[i])) return false;
        r.e.call(3);
        r.e.emit(N::POP_TOP);
      }
    }
    PyObject* setattr = _PyType_Lookup(tp, Ref::steal(PyUnicode_FromString("__setattr__")).get());
    const bool custom = setattr && PyFunction_Check(setattr);
    for (size_t i = 0; i < v->attrs->keys.size(); ++i) {
      if (custom) {
        r.e.callable_const(py().object_setattr.get());
        r.e.emit(N::LOAD_FAST, slot);
        r.e.emit(N::LOAD_CONST, r.e.konst(v->attrs->keys[i].get()));
        if (!r.value(v->attrs->items[i])) return false;
        r.e.call(3);
        r.e.emit(N::POP_TOP);
        continue;
      }
      if (!r.value(v->attrs->items[i])) return false;
      r.e.emit(N::LOAD_FAST, slot);
      r.e.emit(N::STORE_ATTR, r.e.name(str_of(v->attrs->keys[i].get())));
    }
    r.e.emit(N::LOAD_FAST, slot);
    return true;
  }
};
DV_KIND(Instance, "instance")

Status dict_subclass_entries(Translator& t, Frame& f, const VPtr& x, std::vector<Ref>& keys, std::vector<VPtr>& items,
                             const std::string& what) {
  auto* tp = reinterpret_cast<PyTypeObject*>(x->obj.get());
  static PyObject* keys_name = PyUnicode_InternFromString("keys");
  PyObject* keys_fn = _PyType_Lookup(tp, keys_name);
  const bool storage = tp->tp_iter == PyDict_Type.tp_iter;  // dict_merge's fast path: keys() is not asked
  if (!storage && keys_fn && PyFunction_Check(keys_fn))
    return t.brk(f, "DV0007", what + " of a " + tp->tp_name + " whose keys() is Python code");
  const std::vector<Ref> own = x->contents->keys;
  std::vector<VPtr> got;
  if (storage) {
    got = x->contents->items;
  } else {
    for (const Ref& k : own) {
      VPtr v;
      bool handled = false;
      if (Status s = t.call_dunder(f, x, "__getitem__", {t.constant(k)}, v, handled)) return s;
      if (!handled) {  // the builtin base's __getitem__: the storage
        for (size_t i = 0; i < x->contents->keys.size(); ++i)
          if (x->contents->keys[i].get() == k.get()) v = x->contents->items[i];
        if (!v) return t.brk(f, "DV0007", what + " of a " + tp->tp_name + " changed while read");
      }
      got.push_back(v);
    }
  }
  keys = own;
  items = std::move(got);
  return std::nullopt;
}

}  // namespace dv
