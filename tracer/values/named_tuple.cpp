// Instances of tuple subclasses of Python code -- collections.namedtuple / typing.NamedTuple classes,
// and plain `class Shape(tuple)` ones -- made in the trace: Tuple values whose `obj` is the class,
// `keys` a namedtuple's field names and `self` the class as loaded (attributes are read through it,
// so they are guarded as the class's). The class's own __new__ (Python code: namedtuple generates
// one) is inlined; it ends in tuple.__new__(cls, iterable), which makes the value; a class without
// one is made by tuple.__new__ itself. Methods (_replace, _asdict, _make, the user's own) are the
// class's Python functions, inlined. Codegen rebuilds one that escapes as tuple.__new__(cls, (...)).
#include <cstring>
#include <string>

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

namespace {
// The special methods a tuple subclass may define in Python and still be held as a tuple: how it is
// made (__new__ inlined; an __init__ breaks where it is called), its binary operators and
// comparisons (inlined by Translator::user_operator, as an instance's), and what the trace does not
// call (pickling, class creation). Any other (__bool__, __contains__, __hash__, __getattr__, __repr__
// ...) would be answered as tuple's: such a class's objects are objects like any other.
bool allowed_tuple_dunder(const char* name, bool named) {
  static const char* fixed[] = {"__new__", "__init__", "__getnewargs__", "__reduce__", "__reduce_ex__", "__init_subclass__",
                                "__class_getitem__", "__replace__",  // (copy.replace's, which 3.13's namedtuple defines)
                                "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"};
  for (const char* n : fixed)
    if (std::strcmp(name, n) == 0) return true;
  if (named && std::strcmp(name, "__repr__") == 0) return true;  // the one namedtuple generates
  static const char* ops[] = {"add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift", "and", "or", "xor"};
  std::string n = name;
  if (n.size() < 5) return false;
  n = n.substr(2, n.size() - 4);
  if (n.size() > 1 && (n[0] == 'r' || n[0] == 'i')) {
    for (const char* op : ops)
      if (n.compare(1, std::string::npos, op) == 0) return true;
  }
  for (const char* op : ops)
    if (n == op) return true;
  return false;
}

// A function, or a staticmethod / classmethod / property: what a class statement defines in Python.
bool python_defined(PyObject* v) {
  return PyFunction_Check(v) || Py_IS_TYPE(v, &PyStaticMethod_Type) || Py_IS_TYPE(v, &PyClassMethod_Type) ||
         PyObject_TypeCheck(v, &PyProperty_Type);
}
}  // namespace

// A tuple subclass of Python code whose instances are tuples as the trace models them: its own
// classes are Python code (metaclass type's call, not abstract), item access, iteration, length and
// the other special methods the trace answers as tuple's are tuple's (allowed_tuple_dunder). (Its
// instances may hold a __dict__: the caller makes sure it is empty.)
bool tuple_class(PyObject* o) {
  if (!o || !PyType_Check(o)) return false;
  auto* tp = reinterpret_cast<PyTypeObject*>(o);
  if (!(tp->tp_flags & Py_TPFLAGS_HEAPTYPE) || tp == &PyTuple_Type || !PyType_IsSubtype(tp, &PyTuple_Type)) return false;
  if ((tp->tp_flags & Py_TPFLAGS_IS_ABSTRACT) || Py_TYPE(o)->tp_call != PyType_Type.tp_call) return false;
  PyObject* mro = tp->tp_mro;
  if (!mro || !PyTuple_Check(mro)) return false;
  const bool named = namedtuple_class(o);
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
    auto* b = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
    if (b == &PyTuple_Type || b == &PyBaseObject_Type) continue;
    if (!(b->tp_flags & Py_TPFLAGS_HEAPTYPE)) return false;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(b->tp_dict, &pos, &k, &v)) {
      if (!PyUnicode_Check(k) || !python_defined(v)) continue;
      const char* nm = PyUnicode_AsUTF8(k);
      const size_t len = nm ? std::strlen(nm) : 0;
      if (!nm) return PyErr_Clear(), false;
      if (len > 4 && std::strncmp(nm, "__", 2) == 0 && std::strcmp(nm + len - 2, "__") == 0 && !allowed_tuple_dunder(nm, named))
        return false;
    }
  }
  static PyObject* names[] = {PyUnicode_InternFromString("__getitem__"), PyUnicode_InternFromString("__iter__"),
                              PyUnicode_InternFromString("__len__")};
  for (PyObject* nm : names)
    if (_PyType_Lookup(tp, nm) != _PyType_Lookup(&PyTuple_Type, nm)) return false;
  return true;
}

PyObject* tuple_new_fn() {  // tuple.__new__, which namedtuple's generated __new__ calls
  static PyObject* fn = PyObject_GetAttrString(reinterpret_cast<PyObject*>(&PyTuple_Type), "__new__");  // kept for the process
  return fn;
}

// cls(...) of a tuple subclass of Python code: its __new__ inlined, or tuple.__new__(cls[, iterable]).
// `handled` false: not such a class.
Translator::Status Translator::construct_namedtuple(Frame& f, const VPtr& cls, std::vector<VPtr>& args,
                                                    std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled) {
  handled = false;
  PyObject* c = cls->obj.get();
  if (!tuple_class(c)) return std::nullopt;
  handled = true;
  static PyObject* new_name = PyUnicode_InternFromString("__new__");
  static PyObject* init_name = PyUnicode_InternFromString("__init__");
  PyObject* init = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(c), init_name);
  if (init != _PyType_Lookup(&PyBaseObject_Type, init_name))  // (it would set attributes the value does not hold)
    return brk(f, "DV0004", std::string("constructing ") + reinterpret_cast<PyTypeObject*>(c)->tp_name + ": a tuple subclass with its own __init__");
  PyObject* raw = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(c), new_name);
  if (raw == _PyType_Lookup(&PyTuple_Type, new_name)) {  // tuple's own: tuple.__new__(cls[, iterable])
    if (!kwargs.empty()) return raise_new(f, PyExc_TypeError, std::string(reinterpret_cast<PyTypeObject*>(c)->tp_name) + "() takes no keyword arguments");
    if (args.size() > 1)
      return raise_new(f, PyExc_TypeError, "tuple expected at most 1 argument, got " + std::to_string(args.size()));
    std::vector<VPtr> all{cls};
    all.push_back(args.empty() ? make(VK::Tuple) : args[0]);
    bool done = false;
    return namedtuple_new(f, all, out, done);
  }
  Ref fn = raw && Py_IS_TYPE(raw, &PyStaticMethod_Type) ? Ref::steal(PyObject_GetAttrString(raw, "__func__")) : Ref::borrow(raw);
  if (!fn || !PyFunction_Check(fn.get()))
    return PyErr_Clear(), brk(f, "DV0004", std::string("constructing ") + reinterpret_cast<PyTypeObject*>(c)->tp_name + ": its __new__ is not Python code");
  VPtr fv = make(VK::Function);
  fv->obj = fn;
  std::vector<VPtr> all{cls};
  all.insert(all.end(), args.begin(), args.end());
  return call(f, fv, std::move(all), std::move(kwargs), out);
}

// tuple.__new__(cls, iterable) for a tuple subclass of Python code: the value itself.
Translator::Status Translator::namedtuple_new(Frame& f, std::vector<VPtr>& args, VPtr& out, bool& handled) {
  handled = false;
  if (args.size() != 2 || (args[0]->kind != VK::Object) || !tuple_class(args[0]->obj.get())) return std::nullopt;
  handled = true;
  VPtr it;
  if (Status s = iterate(f, args[1], it)) return s;
  VPtr t = make(VK::Tuple);
  t->items.assign(it->items.begin() + static_cast<long>(it->pos), it->items.end());
  it->pos = it->items.size();
  t->obj = args[0]->obj;
  t->self = args[0];
  out = t;
  if (!namedtuple_class(t->obj.get())) return std::nullopt;
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
