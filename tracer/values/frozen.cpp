// Frozen objects: instances of library classes that are immutable values once made
// (inspect.Signature and inspect.Parameter, the mappingproxy of a signature's parameters and its keys,
// values and items views, range, re.Pattern and re.Match, datetime's and decimal's values), and
// Enum classes (their members are fixed when the class is made: iterating one, its length and `in`
// are constants of the class, which is guarded by identity). The
// trace reads their attributes, items, length and iteration directly, as constants; the functions
// that make them from constant arguments (inspect.signature of a function the trace knows) run
// once at trace time. TorchDynamo models these as InspectSignatureVariable and friends.
#include "tracer/pycache.h"
#include "tracer/translator.h"

namespace dv {

namespace {

Ref attr_of(const char* module, const char* name) {
  Ref mod = Ref::steal(PyImport_ImportModule(module));
  Ref r = mod ? Ref::steal(PyObject_GetAttrString(mod.get(), name)) : Ref();
  if (!r) PyErr_Clear();
  return r;
}

struct Frozen {
  Ref signature_fn, signature_type, parameter_type;
  // Immutable values of C classes of the stdlib: a compiled regular expression and its matches
  // (TorchDynamo's ConstantLikeVariable), and datetime's and decimal's values
  std::vector<Ref> value_types;
};

const Frozen& frozen() {
  static const Frozen* fz = [] {
    auto* z = new Frozen;  // kept for the process
    z->signature_fn = attr_of("inspect", "signature");
    z->signature_type = attr_of("inspect", "Signature");
    z->parameter_type = attr_of("inspect", "Parameter");
    for (auto [m, n] : {std::pair{"re", "Pattern"}, {"re", "Match"}, {"datetime", "timedelta"}, {"datetime", "date"},
                        {"datetime", "time"}, {"datetime", "datetime"}, {"datetime", "timezone"}, {"decimal", "Decimal"}})
      if (Ref ty = attr_of(m, n)) z->value_types.push_back(std::move(ty));
    return z;
  }();
  return *fz;
}

}  // namespace

bool stdlib_value(PyObject* o) {
  const Frozen& z = frozen();
  for (const Ref& ty : z.value_types)  // exactly these classes: a subclass may add state
    if (reinterpret_cast<PyObject*>(Py_TYPE(o)) == ty.get()) return true;
  return false;
}

bool frozen_object(PyObject* o) {
  if (!o) return false;
  PyTypeObject* tp = Py_TYPE(o);
  const Frozen& z = frozen();
  if (reinterpret_cast<PyObject*>(tp) == py().enum_meta.get()) return true;  // an Enum class of the stdlib's metaclass
  if (PyRange_Check(o)) return true;  // range(n) of constants (or of a specialised size)
  if (stdlib_value(o)) return true;
  if (tp == reinterpret_cast<PyTypeObject*>(z.signature_type.get()) || tp == reinterpret_cast<PyTypeObject*>(z.parameter_type.get()))
    return true;
  if (tp == &PyDictProxy_Type) {  // a signature's parameters: a proxy of a dict of Parameters
    Ref items = Ref::steal(PyObject_CallMethod(o, "items", nullptr));
    Ref list = items ? Ref::steal(PySequence_List(items.get())) : Ref();
    if (!list) return PyErr_Clear(), false;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list.get()); ++i) {
      PyObject* pair = PyList_GET_ITEM(list.get(), i);
      if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(pair, 0)) || !frozen_object(PyTuple_GET_ITEM(pair, 1))) return false;
    }
    return true;
  }
  if (PyDictKeys_Check(o) || PyDictValues_Check(o) || PyDictItems_Check(o)) {
    // keys()/values()/items() of a signature's parameters (set(sig.parameters.keys()) in
    // diffusers' Attention): frozen when the mapping they view is
    Ref mapping = Ref::steal(PyObject_GetAttrString(o, "mapping"));
    if (!mapping) return PyErr_Clear(), false;
    return Py_TYPE(mapping.get()) == &PyDictProxy_Type && frozen_object(mapping.get());
  }
  return false;
}

// inspect.signature(fn) of a function, method or module the trace holds as a real object.
Translator::Status Translator::call_frozen_maker(Frame& f, PyObject* fn, std::vector<VPtr>& args,
                                                 std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled) {
  handled = false;
  const Frozen& z = frozen();
  if (!z.signature_fn || fn != z.signature_fn.get() || args.size() != 1 || !kwargs.empty()) return std::nullopt;
  const VPtr& a = args[0];
  Ref target;
  if ((a->kind == VK::Function || a->kind == VK::Object || a->kind == VK::NNModule) && a->obj && !PyCode_Check(a->obj.get())) {
    target = a->obj;
  } else if (a->kind == VK::Method && a->obj && PyFunction_Check(a->obj.get()) && a->self && a->self->obj &&
             (a->self->kind == VK::NNModule || a->self->kind == VK::Object)) {
    target = Ref::steal(PyMethod_New(a->obj.get(), a->self->obj.get()));  // the same bound method eager makes
  } else {
    return std::nullopt;
  }
  handled = true;
  Ref r = target ? Ref::steal(PyObject_CallOneArg(fn, target.get())) : Ref();
  if (!r) return raise_current(f, "inspect.signature()");
  out = make(VK::Object);
  out->obj = r;
  return std::nullopt;
}

// A builtin method bound to a live mutable object (dq.popleft(), od.move_to_end(k)): called while
// tracing it would mutate the object once at trace time, and not at all on a cache hit; baked into
// the transformed code it would act on that one object on every call.
bool bound_to_mutable_object(PyObject* o) {
  PyObject* self = PyCFunction_GET_SELF(o);
  if (!self || PyModule_Check(self) || PyType_Check(self) || self == Py_None) return false;
  if (PyAnySet_CheckExact(self)) return false;  // sets of constants made in the trace (op_BUILD_SET): private to it
  return !(PyUnicode_Check(self) || PyBytes_Check(self) || PyLong_Check(self) || PyFloat_Check(self) || PyComplex_Check(self) ||
           PyTuple_Check(self) || PyFrozenSet_Check(self) || PyRange_Check(self) || frozen_object(self));
}

}  // namespace dv
