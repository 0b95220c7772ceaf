// Instances of collections.namedtuple / typing.NamedTuple classes made in the trace: Tuple values
// whose `obj` is the class, `keys` its field names and `self` the class as loaded (attributes are read
// through it, so they are guarded as the class's). The class's own __new__ (Python code that
// namedtuple generates) is inlined; it ends in tuple.__new__(cls, iterable), which makes the value.
// Methods (_replace, _asdict, _make, the user's own) are the class's Python functions, inlined.
// Codegen rebuilds one that escapes as tuple.__new__(cls, (...)).
#include "tracer/pycache.h"
#include "tracer/translator.h"

namespace dv {

bool namedtuple_class(PyObject* o) {
  if (!o || !PyType_Check(o) || !(reinterpret_cast<PyTypeObject*>(o)->tp_flags & Py_TPFLAGS_HEAPTYPE)) return false;
  if (!PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(o), &PyTuple_Type)) return false;
  static PyObject* fields_name = PyUnicode_InternFromString("_fields");
  static PyObject* make_name = PyUnicode_InternFromString("_make");
  PyObject* fields = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(o), fields_name);
  return fields && PyTuple_Check(fields) && _PyType_Lookup(reinterpret_cast<PyTypeObject*>(o), make_name);
}

PyObject* tuple_new_fn() {  // tuple.__new__, which namedtuple's generated __new__ calls
  static PyObject* fn = PyObject_GetAttrString(reinterpret_cast<PyObject*>(&PyTuple_Type), "__new__");  // kept for the process
  return fn;
}

// cls(...) of a namedtuple class: its __new__ inlined. `handled` false: not such a class.
Translator::Status Translator::construct_namedtuple(Frame& f, const VPtr& cls, std::vector<VPtr>& args,
                                                    std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled) {
  handled = false;
  PyObject* c = cls->obj.get();
  if (!namedtuple_class(c)) return std::nullopt;
  handled = true;
  static PyObject* new_name = PyUnicode_InternFromString("__new__");
  static PyObject* init_name = PyUnicode_InternFromString("__init__");
  PyObject* init = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(c), init_name);
  if (init != _PyType_Lookup(&PyBaseObject_Type, init_name))
    return brk(f, "DV0004", std::string("constructing ") + reinterpret_cast<PyTypeObject*>(c)->tp_name + ": a namedtuple with its own __init__");
  PyObject* raw = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(c), new_name);
  Ref fn = raw && Py_IS_TYPE(raw, &PyStaticMethod_Type) ? Ref::steal(PyObject_GetAttrString(raw, "__func__")) : Ref::borrow(raw);
  if (!fn || !PyFunction_Check(fn.get()))
    return PyErr_Clear(), brk(f, "DV0004", std::string("constructing ") + reinterpret_cast<PyTypeObject*>(c)->tp_name + ": its __new__ is not Python code");
  VPtr fv = make(VK::Function);
  fv->obj = fn;
  std::vector<VPtr> all{cls};
  all.insert(all.end(), args.begin(), args.end());
  return call(f, fv, std::move(all), std::move(kwargs), out);
}

// tuple.__new__(cls, iterable) for a namedtuple class: the value itself.
Translator::Status Translator::namedtuple_new(Frame& f, std::vector<VPtr>& args, VPtr& out, bool& handled) {
  handled = false;
  if (args.size() != 2 || (args[0]->kind != VK::Object) || !namedtuple_class(args[0]->obj.get())) return std::nullopt;
  handled = true;
  VPtr it;
  if (Status s = iterate(f, args[1], it)) return s;
  VPtr t = make(VK::Tuple);
  t->items.assign(it->items.begin() + static_cast<long>(it->pos), it->items.end());
  it->pos = it->items.size();
  t->obj = args[0]->obj;
  t->self = args[0];
  Ref fields = Ref::steal(PyObject_GetAttrString(args[0]->obj.get(), "_fields"));
  if (!fields || !PyTuple_Check(fields.get())) return PyErr_Clear(), brk(f, "DV0004", "a namedtuple class without _fields");
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fields.get()); ++i) t->keys.push_back(Ref::borrow(PyTuple_GET_ITEM(fields.get(), i)));
  out = t;
  return std::nullopt;
}

// An attribute of such a value other than a field: the class's methods bound to it (classmethods to
// the class), anything else read from the class as loaded.
Translator::Status Translator::namedtuple_getattr(Frame& f, const VPtr& obj, const std::string& name, VPtr& out) {
  auto* tp = reinterpret_cast<PyTypeObject*>(obj->obj.get());
  if (name == "__class__") {
    out = obj->self;
    return std::nullopt;
  }
  Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
  PyObject* attr = _PyType_Lookup(tp, nm.get());
  if (attr && PyFunction_Check(attr)) {
    out = bound_method(obj, Ref::borrow(attr), name);
    return std::nullopt;
  }
  if (attr && Py_IS_TYPE(attr, &PyClassMethod_Type)) {
    Ref fn = Ref::steal(PyObject_GetAttrString(attr, "__func__"));
    if (!fn || !PyFunction_Check(fn.get())) return PyErr_Clear(), brk(f, "DV0005", "classmethod " + name + " of " + tp->tp_name);
    out = bound_method(obj->self, fn, name);
    return std::nullopt;
  }
  if (Ref getter = attr ? python_getter(attr) : Ref()) return call_python(f, getter, {obj}, out);
  if (attr && (Py_IS_TYPE(attr, &PyMethodDescr_Type) || Py_IS_TYPE(attr, &PyWrapperDescr_Type))) {  // tuple's: count, index
    VPtr plain = make(VK::Tuple);
    plain->items = obj->items;
    out = bound_method(plain, Ref(), name);
    return std::nullopt;
  }
  return getattr(f, obj->self, name, out);  // _fields, _field_defaults, constants of the class
}

}  // namespace dv
