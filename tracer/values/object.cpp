// Python objects known by identity (VK::Object): modules, classes, builtins, torch functions, user objects
// reached from the frame. Calling one: object_call (calls.cpp).
#include <cstring>

#include "tracer/pycache.h"
#include "tracer/rebuild.h"
#include "tracer/values/kind.h"

namespace dv {

using cg::N;

// Object, Const, Function
namespace {
// A backend flag read (torch.backends.cudnn.deterministic, torch.backends.cuda.matmul.allow_tf32):
// `value`, a constant of this capture, which the GLOBAL_STATE guard checks from now on (TorchDynamo's
// global-state guard checks cuBLAS's allow_tf32 so; a call under the other setting compiles again).
Status read_backend_flag(Translator& t, int flag, const Ref& value, VPtr& out) {
  if (!value || !PyBool_Check(value.get())) return std::nullopt;
  for (Guard& g : t.output.guards)
    if (g.kind == GuardKind::GLOBAL_STATE) {
      g.state.backends_read |= static_cast<uint8_t>(1u << flag);
      if (value.get() == Py_True) g.state.backends |= static_cast<uint8_t>(1u << flag);
      else g.state.backends &= static_cast<uint8_t>(~(1u << flag));
    }
  out = t.constant(value);
  return std::nullopt;
}
}  // namespace

Status object_getattr(Translator& t, Frame& f, const VPtr& obj, const std::string& name, VPtr& out) {
  PyObject* o = obj->obj.get();
  if (!o) return t.brk(f, "DV0005", "attribute " + name + " of a local function");
  if (obj->kind == VK::Object && numpy_info_class(reinterpret_cast<PyObject*>(Py_TYPE(o)))) {
    // np.iinfo(...).max, np.finfo(...).eps: read now (properties in NumPy's Python code, over a
    // description that does not change); one passed in is guarded by the value read
    Ref r = Ref::steal(PyObject_GetAttrString(o, name.c_str()));
    if (!r) return t.raise_current(f, std::string(Py_TYPE(o)->tp_name) + "." + name);
    out = t.wrap(r, obj->source ? Source::attr(obj->source, name) : nullptr, f);
    if (!out) return t.brk(f, "DV0013", std::string("unsupported attribute ") + Py_TYPE(o)->tp_name + "." + name);
    return std::nullopt;
  }
  if (obj->kind == VK::Object && Py_IS_TYPE(o, &PySuper_Type) && obj->self) {  // super().method
    Ref r = Ref::steal(PyObject_GetAttrString(o, name.c_str()));
    if (!r) {
      const bool missing = PyErr_ExceptionMatches(PyExc_AttributeError);
      PyErr_Clear();
      return t.brk(f, missing ? kNoAttributeId : "DV0005", "super() has no attribute " + name);
    }
    if (obj->self->kind == VK::Instance) {  // super over an object made in the trace: unbound lookups
      if (PyFunction_Check(r.get())) {
        out = t.bound_method(obj->self, r, name);
        return std::nullopt;
      }
      if (PyMethod_Check(r.get()) && PyFunction_Check(PyMethod_GET_FUNCTION(r.get()))) {  // a classmethod
        out = t.bound_method(obj->self->self, Ref::borrow(PyMethod_GET_FUNCTION(r.get())), name);
        return std::nullopt;
      }
      if (Ref getter = python_getter(r.get())) return t.call_python(f, getter, {obj->self}, out);
      if (Py_IS_TYPE(r.get(), &PyWrapperDescr_Type) || Py_IS_TYPE(r.get(), &PyMethodDescr_Type)) {  // object.__init__, dict.get ...
        out = t.bound_method(obj->self, r, name);
        return std::nullopt;
      }
    }
    if (obj->self->kind == VK::Object && obj->self->source && PyDict_Check(obj->self->obj.get()) && PyCFunction_Check(r.get()) &&
        PyCFunction_GET_SELF(r.get()) == obj->self->obj.get()) {  // dict.get and friends of a dict subclass's object
      PyObject* descr = _PyType_Lookup(&PyDict_Type, Ref::steal(PyUnicode_FromString(name.c_str())).get());
      if (descr && Py_IS_TYPE(descr, &PyMethodDescr_Type) &&
          reinterpret_cast<PyMethodDescrObject*>(descr)->d_method == reinterpret_cast<PyCFunctionObject*>(r.get())->m_ml &&
          (name == "get" || name == "__getitem__" || name == "__contains__")) {
        out = t.bound_method(obj->self, Ref::borrow(descr), name);
        return std::nullopt;
      }
    }
    if (PyMethod_Check(r.get()) && PyFunction_Check(PyMethod_GET_FUNCTION(r.get()))) {
      VPtr mv = t.bound_method(obj->self, Ref::borrow(PyMethod_GET_FUNCTION(r.get())), name);
      out = mv;
      return std::nullopt;
    }
    if (is_exact_const(r.get())) {
      out = t.constant(r);
      return std::nullopt;
    }
    if (obj->self->kind == VK::Object && (name == "__setattr__" || name == "__getattribute__")) {
      // super().__setattr__(k, v) / super().__getattribute__(k) in the Python __setattr__ of an
      // object from outside, when they reach object's own: a bound object slot (outside_object_builtin)
      if (PyObject* descr = super_lookup(o, name); descr && descr == object_slot(name)) {
        out = t.bound_method(obj->self, Ref::borrow(descr), name);
        return std::nullopt;
      }
    }
    if (name == "__new__" && PyCFunction_Check(r.get()) && PyCFunction_GET_SELF(r.get()) &&
        PyType_Check(PyCFunction_GET_SELF(r.get()))) {
      // super().__new__(cls, ...) in a class's __new__ reaching a builtin's (tuple.__new__,
      // object.__new__): that function, called as spelled out (library_calls.cpp)
      out = t.wrap(r, nullptr, f);
      if (out) return std::nullopt;
    }
    if (PyFunction_Check(r.get())) {
      // a staticmethod reached through super() (super(C, C).make(v) in a staticmethod of C): the
      // plain function, called as is
      out = t.wrap(r, nullptr, f);
      if (out) return std::nullopt;
    }
    return t.brk(f, "DV0005", "super()." + name + " is not a Python method");
  }
  if (obj->kind == VK::Const && !PyModule_Check(o)) {
    Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
    PyObject* cls_attr = _PyType_Lookup(Py_TYPE(o), nm.get());
    if (cls_attr && (PyObject_TypeCheck(cls_attr, &PyMethodDescr_Type) || Py_IS_TYPE(cls_attr, &PyWrapperDescr_Type))) {
      out = t.bound_method(obj, Ref(), name);
      return std::nullopt;
    }
    // An Enum's own methods and @property: inlined, as an object's are (its author's code).
    if (cls_attr && PyFunction_Check(cls_attr)) {
      out = t.bound_method(obj, Ref::borrow(cls_attr), name);
      return std::nullopt;
    }
    if (enum_member(o))
      if (Ref getter = python_getter(cls_attr)) return t.call_python(f, getter, {obj}, out);
  }
  // An immutable value: read now (one from the frame is guarded by its value or identity already)
  if (obj->kind == VK::Object && (!obj->source || stdlib_value(o)) && frozen_object(o)) {
    Ref r = Ref::steal(PyObject_GetAttrString(o, name.c_str()));
    if (!r) return t.raise_current(f, "attribute " + name);
    if (frozen_object(r.get())) {
      out = t.make(VK::Object);
      out->obj = r;
    } else {
      out = t.wrap(r, nullptr, f);
    }
    if (!out) return t.brk(f, "DV0005", "attribute " + name + " of " + Py_TYPE(o)->tp_name + " cannot be traced");
    return std::nullopt;
  }
  if (obj->kind == VK::Object && (Py_TYPE(o)->tp_flags & Py_TPFLAGS_HEAPTYPE) && !PyType_Check(o)) {
    // A property of a Python class: its getter is inlined (reading it here would run it
    // unguarded, and the guard could not read it back).
    Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
    PyObject* cls_attr = _PyType_Lookup(Py_TYPE(o), nm.get());
    if (Ref getter = python_getter(cls_attr)) return t.call_python(f, getter, {obj}, out, /*read=*/false);
    // A data descriptor whose class is Python (a typed field): its __get__ inlined too, so that it
    // reads what the trace wrote through its __set__.
    if (cls_attr && Py_TYPE(cls_attr)->tp_descr_set && obj->source) {
      SourcePtr cls_source = Source::attr(obj->source, "__class__");
      VPtr cls = t.wrap(Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o))), cls_source, f);
      if (cls)
        if (auto s = t.call_descriptor(f, cls_source, name, cls_attr, "__get__", {obj, cls}, out)) return *s;
    }
  }
  if (PyModule_CheckExact(o))  // written earlier in the trace (object_setattr, or `global` in its functions)
    if (VPtr written = t.output.side_effects.global_written(PyModule_GetDict(o), name)) {
      out = written;
      return std::nullopt;
    }
  Ref r = Ref::steal(PyObject_GetAttrString(o, name.c_str()));
  if (!r) {
    const bool missing = PyErr_ExceptionMatches(PyExc_AttributeError);
    PyErr_Clear();
    // Absent from an object of a Python class, or a module, from outside (hasattr(obj, "dtype") is
    // False): guarded as absent from its __dict__, which a later call's object may have it in
    const bool guardable = missing && obj->kind == VK::Object && obj->source && !PyType_Check(o) &&
                           ((Py_TYPE(o)->tp_flags & Py_TPFLAGS_HEAPTYPE) || (PyModule_Check(o) && !module_is_torch_mod(o)));
    if (guardable) {
      PyObject** dp = _PyObject_GetDictPtr(o);
      if (!dp || !*dp)
        return t.brk(f, "DV0005", "no attribute " + name + " on a " + Py_TYPE(o)->tp_name + " object without a __dict__, which no guard can check");
      Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
      SourcePtr dict_src = Source::attr(obj->source, "__dict__");
      if (Guard* g = t.add_guard(GuardKind::DICT_CONTAINS, dict_src, nm, f, repr_of(nm.get()) + " not in " + dict_src->text()))
        g->length = 0;
    }
    return t.brk(f, missing ? kNoAttributeId : "DV0005", "no attribute " + name + " on " + Py_TYPE(o)->tp_name);
  }
  if (PyCFunction_Check(r.get()) && PyCFunction_GET_SELF(r.get()) == o && obj->source && PyDict_Check(o) &&
      outside_dict_read_method(name)) {
    // counts.items() of a Counter (a dict subclass) reached from the frame: read from its
    // storage, guarded by its keys (outside_dict_read)
    Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
    PyObject* descr = _PyType_Lookup(&PyDict_Type, nm.get());
    if (descr && _PyType_Lookup(Py_TYPE(o), nm.get()) == descr) {
      out = t.bound_method(obj, Ref::borrow(descr), name);
      return std::nullopt;
    }
  }
  // (A set from the frame whose items are constants is a Const copy, ValueBuilder::wrap_set; one that
  // holds other values is this object itself: its methods would act on the caller's set now.)
  if (PyCFunction_Check(r.get()) && PyCFunction_GET_SELF(r.get()) == o &&
      (bound_to_mutable_object(r.get()) || (obj->source && PySet_CheckExact(o))))
    return t.brk(f, "DV0005", "method " + name + " of a live " + Py_TYPE(o)->tp_name + " object",
               "its methods are not traced; a bound method kept in the code would act on this one object on every call");
  // Attributes of modules (torch.relu, math.pi), classes and instances of user classes (a config
  // object's cfg.d, o.scale) are reloaded from their owner, and so guarded: they may change
  // between calls. Immutable constants' attributes (dtype.is_floating_point) need no guard.
  // A functools.partial is guarded by its type (ValueBuilder::wrap_object): its func, args and
  // keywords are guarded as they are read.
  const bool user_instance = obj->kind == VK::Object && ((Py_TYPE(o)->tp_flags & Py_TPFLAGS_HEAPTYPE) ||
                                                         Py_IS_TYPE(o, reinterpret_cast<PyTypeObject*>(py().functools_partial.get())));
  // (A function's defaults too: a mutable one is the value its calls bind, calls.cpp inline_call.)
  const bool fn_defaults = PyFunction_Check(o) && (name == "__defaults__" || name == "__kwdefaults__");
  // An instance of a C class given to the frame (a datetime, a Decimal) is guarded by its type alone:
  // what is read of it (now.microsecond) is guarded as read, or a later call's object would get this
  // one's answer
  const bool c_instance = obj->kind == VK::Object && !(Py_TYPE(o)->tp_flags & Py_TPFLAGS_HEAPTYPE) && !PyModule_Check(o) &&
                          !PyType_Check(o) && !PyCallable_Check(o);
  SourcePtr src = (obj->source && (PyModule_Check(o) || PyType_Check(o) || user_instance || fn_defaults || c_instance))
                      ? Source::attr(obj->source, name)
                      : nullptr;
  if (!obj->source && !PyModule_Check(o) && !PyType_Check(o) && Py_TYPE(o)->tp_getattro != PyObject_GenericGetAttr) {
    // an object of torch.backends reached through torch.* (torch.backends.cuda.matmul, whose
    // __getattr__ reads cuBLAS flags): what it computes is a setting no guard checks
    Ref mod = Ref::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(o)), "__module__"));
    PyErr_Clear();
    if (mod && PyUnicode_Check(mod.get()) && str_of(mod.get()).rfind("torch.backends", 0) == 0) {
      if (const int flag = backend_flag_of(Py_TYPE(o)->tp_name, name); flag >= 0) return read_backend_flag(t, flag, r, out);
      return t.brk(f, "DV0004", std::string(Py_TYPE(o)->tp_name) + "." + name + " reads a torch setting the compiled code's guards do not check",
                   "read it outside the compiled function and pass the value in");
    }
  }
  if (PyModule_Check(o) && module_is_torch_mod(o)) {
    // torch.* is fixed: no guard needed -- but for the settings torch's module classes give as
    // properties (torch.backends.cudnn.enabled, torch.backends.cuda.matmul.allow_tf32,
    // torch.utils.deterministic.fill_uninitialized_memory): a read of one would be a constant no
    // guard checks
    Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
    PyObject* d = Py_TYPE(o) != &PyModule_Type ? _PyType_Lookup(Py_TYPE(o), nm.get()) : nullptr;
    if (d && Py_TYPE(d)->tp_descr_set) {
      if (const int flag = backend_flag_of(PyModule_GetName(o), name); flag >= 0) return read_backend_flag(t, flag, r, out);
      return t.brk(f, "DV0004", std::string(PyModule_GetName(o)) + "." + name + " reads a torch setting the compiled code's guards do not check",
                   "read it outside the compiled function and pass the value in");
    }
    src = nullptr;
  }
  if (PyType_Check(o) && name == "__dict__" && Py_IS_TYPE(r.get(), &PyDictProxy_Type) &&
      (reinterpret_cast<PyTypeObject*>(o)->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
    // Cls.__dict__: a new read-only view of the class's namespace on every read (never guarded by
    // identity); what is read of it (`"x" in Cls.__dict__`) is guarded on the namespace itself, of
    // the class as it was reached (type(obj) of an object made in the trace: that very class)
    out = t.make(VK::Object);
    out->obj = r;
    out->source = Source::attr(obj->source ? obj->source : Source::held(Ref::borrow(o), std::string(reinterpret_cast<PyTypeObject*>(o)->tp_name)),
                               "__dict__");
    return std::nullopt;
  }
  if (PyType_Check(o)) {
    // A class attribute is guarded as the class (or a base) holds it: the raw object, which
    // differs from the value read for staticmethods and classmethods. The metaclass's own
    // attributes (__name__) belong to the class, which is guarded by identity.
    PyObject* raw = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(o), Ref::steal(PyUnicode_FromString(name.c_str())).get());
    if (!raw) {
      src = nullptr;
    } else if (raw != r.get()) {
      if (src) t.add_guard(GuardKind::ID_MATCH, src, Ref::borrow(raw), f, "___check_obj_id(" + src->text() + ", " + repr_of(raw) + ")");
      src = nullptr;
    }
  }
  // A number, string or None on an object of a Python class from the frame is not read yet (VK::Lazy,
  // as TorchDynamo's VariableTracker.build makes a LazyVariableTracker of it): one that only moves
  // (returned, stored) adds no guard; one that is read is guarded as read.
  out = user_instance && src && PyType_HasFeature(Py_TYPE(o), Py_TPFLAGS_HEAPTYPE) ? t.builder.leaf(r, src, f) : t.wrap(r, src, f);
  if (!out) return t.brk(f, "DV0005", "attribute " + name + " cannot be traced");
  return std::nullopt;
}

// Object, NNModule: plain instance attributes of objects reached from the frame, replayed after the graph
// torch.nn.modules.module's global module registration hooks (none, almost always): each is called
// by nn.Module.__setattr__ of a submodule, and may replace it.
bool no_module_registration_hooks() {
  Ref mod = Ref::steal(PyImport_ImportModule("torch.nn.modules.module"));
  Ref hooks = mod ? Ref::steal(PyObject_GetAttrString(mod.get(), "_global_module_registration_hooks")) : Ref();
  if (!hooks) return PyErr_Clear(), false;
  return PyDict_Check(hooks.get()) && PyDict_GET_SIZE(hooks.get()) == 0;
}

// A module of the standard library or built into the interpreter (warnings, sys): its attributes are
// the interpreter's own state (warnings.filters, with C caches beside them), which stay a break.
static bool stdlib_module(PyObject* mod) {
  static const std::string stdlib = [] {
    Ref sc = Ref::steal(PyImport_ImportModule("sysconfig"));
    Ref paths = sc ? Ref::steal(PyObject_CallMethod(sc.get(), "get_paths", nullptr)) : Ref();
    PyObject* p = paths && PyDict_Check(paths.get()) ? PyDict_GetItemString(paths.get(), "stdlib") : nullptr;
    std::string out = p && PyUnicode_Check(p) ? str_of(p) : std::string();
    PyErr_Clear();
    return out;
  }();
  Ref file = Ref::steal(PyModule_GetFilenameObject(mod));
  if (!file) {  // built into the interpreter (sys, _warnings), or made at run time (types.ModuleType)
    PyErr_Clear();
    static PyObject* builtin_names = PySys_GetObject("builtin_module_names");  // (a tuple, kept by sys)
    Ref name = Ref::steal(PyModule_GetNameObject(mod));
    if (!name) return PyErr_Clear(), true;
    const int r = builtin_names ? PySequence_Contains(builtin_names, name.get()) : 1;
    if (r < 0) PyErr_Clear();
    return r != 0;
  }
  const std::string path = str_of(file.get());
  return !stdlib.empty() && path.rfind(stdlib + "/", 0) == 0 && path.find("/site-packages/") == std::string::npos &&
         path.find("/dist-packages/") == std::string::npos;
}

Status object_setattr(Translator& t, Frame& f, const VPtr& owner, const std::string& name, const VPtr& value, bool module_own) {
  const char* hint = kSetattrHint;
  if ((owner->kind != VK::NNModule && owner->kind != VK::Object) || !owner->obj)
    return t.brk(f, "DV0008", std::string("assignment to attribute '") + name + "' of a " + vk_name(owner->kind), hint);
  PyObject* o = owner->obj.get();
  PyTypeObject* tp = Py_TYPE(o);
  if (name == "__traceback__" && PyExceptionInstance_Check(o) && !owner->source && value->obj &&
      (value->obj.get() == Py_None || PyTraceBack_Check(value->obj.get()))) {
    // exc.__traceback__ = tb (contextlib's __exit__, re-raising) of an exception raised in the
    // trace: that exception object is the trace's own, set now
    if (PyObject_SetAttrString(o, "__traceback__", value->obj.get()) < 0) return t.raise_current(f, "setting __traceback__");
    return std::nullopt;
  }
  if (PyModule_Check(o) && owner->source && !module_is_torch_mod(o) && PyModule_CheckExact(o) && !stdlib_module(o) &&
      !(value->kind == VK::Null || value->kind == VK::Cell || value->kind == VK::Iter || value->kind == VK::Slice)) {
    // config_module.FLAG = v (a Python module's attribute): a write to its globals, as `global`
    // stores are (replayed after the graph; later reads in the trace, attribute or global, see it)
    PyObject* globals = PyModule_GetDict(o);
    t.output.side_effects.global_writes.push_back(SideEffects::GlobalWrite{Ref::borrow(globals), name, value});
    return std::nullopt;
  }
  if (PyType_Check(o) && (reinterpret_cast<PyTypeObject*>(o)->tp_flags & Py_TPFLAGS_HEAPTYPE) &&
      tp->tp_setattro == PyType_Type.tp_setattro && replayable_attr_value(value) && value->kind != VK::NNModule) {
    // Cls.count += 1, type(self).calls += 1: a class attribute of a Python class (its metaclass's
    // __setattr__ is type's), replayed after the graph by STORE_ATTR; later reads in the trace,
    // through the class, a subclass or an object of it, see it (Translator::getattr). The metaclass's
    // own data descriptors (__name__, __doc__, __bases__ ...) stay breaks.
    Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
    PyObject* meta_descr = _PyType_Lookup(tp, nm.get());
    if (!(meta_descr && Py_TYPE(meta_descr)->tp_descr_set)) {
      t.output.side_effects.attr_writes.push_back(SideEffects::AttrWrite{owner, name, value});
      return std::nullopt;
    }
  }
  if (PyType_Check(o) || PyModule_Check(o) || !(tp->tp_flags & Py_TPFLAGS_HEAPTYPE))
    return t.brk(f, "DV0008", "assignment to attribute '" + name + "' of " + tp->tp_name, hint);
  // Only plain instance attributes: nn.Module's __setattr__ for names that are not parameters,
  // buffers or submodules, or object's; no properties or other data descriptors.
  Ref setattr_fn = Ref::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(tp), "__setattr__"));
  PyErr_Clear();
  const bool module = owner->kind == VK::NNModule;
  const bool python_setattr = !module && setattr_fn && PyFunction_Check(setattr_fn.get());  // its object.__setattr__ call
  // A threading.local() (or a subclass's object): its __setattr__ writes the calling thread's own
  // __dict__ as object's writes the instance's. Replayed after the graph in the thread that calls
  // (the guards read that thread's attributes too); reads in the trace see the write, as for any
  // object from outside (Translator::getattr), as TorchDynamo captures them.
  static PyObject* const local_setattr = [] {
    PyObject* local = kept_attr("_thread", "_local");
    PyObject* sa = local ? PyObject_GetAttrString(local, "__setattr__") : nullptr;  // (kept)
    Py_XDECREF(local);
    if (!sa) PyErr_Clear();
    return sa;
  }();
  const bool thread_local_attr = !module && setattr_fn && local_setattr && setattr_fn.get() == local_setattr;
  if (!python_setattr && !(module && module_own) && !thread_local_attr &&
      (!setattr_fn || setattr_fn.get() != (module ? py().module_setattr.get() : py().object_setattr.get())))
    return t.brk(f, "DV0008", std::string("assignment to attribute '") + name + "' of " + tp->tp_name + ", which defines __setattr__", hint);
  Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
  PyObject* descr = _PyType_Lookup(tp, nm.get());
  if (descr && Py_TYPE(descr)->tp_descr_set) {
    VPtr r;  // a descriptor class's own Python __set__ (a typed field writing obj.__dict__), inlined
    if (!module && owner->source)
      if (auto s = t.call_descriptor(f, Source::attr(owner->source, "__class__"), name, descr, "__set__", {owner, value}, r)) return *s;
    return t.brk(f, "DV0008", "assignment to property or descriptor '" + name + "' of " + tp->tp_name, hint);
  }
  if (module) {
    if (auto made = t.made_module_attrs.find(o); made != t.made_module_attrs.end()) {
      // a module the trace built (its __init__ inlined): the attribute lives in the trace only
      made->second.emplace_back(name, value);
      return std::nullopt;
    }
    PyObject** dictptr = _PyObject_GetDictPtr(o);
    for (const char* member : {"_parameters", "_buffers", "_modules"}) {
      PyObject* d = dictptr && *dictptr ? PyDict_GetItemString(*dictptr, member) : nullptr;
      PyObject* held = d && PyDict_Check(d) ? PyDict_GetItemString(d, name.c_str()) : nullptr;
      if (held && std::strcmp(member, "_modules") == 0 && (value->kind == VK::NNModule || value->kind == VK::Object) &&
          value->obj.get() == held && no_module_registration_hooks()) {
        // `self.classifier = self.classifier.to(dtype)`: Module.to returns the module itself, and
        // nn.Module.__setattr__ of a submodule to its own entry changes nothing.
        return std::nullopt;
      }
      if (held) {
        // A buffer given a new tensor (wav2vec2-conformer's `self.pe = self.extend_pe(x, self.pe)`):
        // replayed by the module's own __setattr__, which keeps it a buffer; the trace reads the new
        // one after it (Translator::getattr). Parameters and submodules stay breaks.
        const bool buffer = std::strcmp(member, "_buffers") == 0 &&
                            (value->kind == VK::Tensor || (value->kind == VK::Const && value->obj.get() == Py_None));
        // A submodule replaced (`self.act = nn.Tanh()` in forward, a module from elsewhere, or None):
        // the same replay, the trace reading the new one after it.
        const bool submodule = std::strcmp(member, "_modules") == 0 && no_module_registration_hooks() &&
                               (value->kind == VK::NNModule || (value->kind == VK::Const && value->obj.get() == Py_None));
        if (!buffer && !submodule) return t.brk(f, "DV0008", "assignment to " + std::string(member + 1) + " entry '" + name + "' of a module", hint);
      }
    }
  } else if (!_PyObject_GetDictPtr(o) && !thread_local_attr) {
    return t.brk(f, "DV0008", "assignment to attribute '" + name + "' of " + tp->tp_name + " (no __dict__)", hint);
  }
  if (!replayable_attr_value(value))
    return t.brk(f, "DV0008", "assignment of a " + std::string(vk_name(value->kind)) + " to attribute '" + name + "'", hint);
  t.output.side_effects.attr_writes.push_back(SideEffects::AttrWrite{owner, name, value});
  if (!module) return t.write_through_dict(f, o, name, value);  // a __dict__ the trace read sees it (Translator::getattr)
  return std::nullopt;
}

bool replayable_attr_value(const VPtr& v) {
  switch (v->kind) {
    case VK::Tensor: case VK::Sym: case VK::Const: return true;
    case VK::Tuple: case VK::List: case VK::Dict:
      for (const VPtr& x : v->items)
        if (!replayable_attr_value(x)) return false;
      return true;
    case VK::Object: case VK::NNModule: return v->source || v->obj;
    default: return false;
  }
}

// Const, Object: methods of constants and modules are pure: evaluated now
Status object_method(Translator& t, Frame& f, const VPtr& m, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  const VPtr& self = m->self;
  const std::string& name = m->name;
  PyObject* so = self->obj.get();
  const bool pure = self->kind == VK::Const || PyModule_Check(so);
  if (!pure) return t.brk(f, "DV0004", "method " + name + " of " + Py_TYPE(so)->tp_name + " object");
  if (self->kind == VK::Const && name == "format" && PyUnicode_CheckExact(so)) {  // "{}".format(x.shape): after the graph
    bool handled = false;
    if (Status s = str_format(t, f, so, args, kwargs, out, handled)) return s;
    if (handled) return std::nullopt;
  }
  Ref bound = Ref::steal(PyObject_GetAttrString(so, name.c_str()));
  if (!bound) return t.brk(f, "DV0005", "no attribute " + name);
  PyTypeObject* const method_wrapper = method_wrapper_type();
  if (self->kind == VK::Const && method_wrapper && Py_IS_TYPE(bound.get(), method_wrapper)) {
    // A slot of a constant or of the trace's own set (p.__or__(q), set.__len__(s)): evaluated now
    // on constant arguments, as its named methods are (object_call)
    const std::string what = std::string(Py_TYPE(so)->tp_name) + "." + name;
    if (!kwargs.empty()) return t.brk(f, "DV0004", "method " + name + " with keyword arguments");
    for (const VPtr& a : args)
      if (a->kind != VK::Const) return t.brk(f, "DV0013", "unsupported argument to " + what);
    if (name == "__iter__" && args.empty()) return t.iterate(f, self, out, false);  // "ab".__iter__(): iter("ab"), one per call
    Ref r;
    if (Status s = call_on_constants(t, f, bound.get(), what, args, kwargs, r)) return s;
    if (PyIter_Check(r.get()))  // an iterator is state: made now, it would be one object for every call
      return t.brk(f, "DV0004", what + "() gives an iterator, which is not traced");
    out = r.get() == so ? self : set_of_constants(r.get()) ? t.constant(r) : t.wrap(r, nullptr, f);
    if (!out) return t.brk(f, "DV0013", "unsupported result of " + what);
    return std::nullopt;
  }
  VPtr mv = t.make(VK::Object);
  mv->obj = bound;
  return t.call(f, mv, std::move(args), std::move(kwargs), out);
}

// A NumPy scalar given to a graph: torch reads it as the Python number it holds, which the graph
// holds (its code could not spell np.False_: `np` is not a name there). False for an array (not a
// graph constant) or a scalar with no such number. Anything else stays as it is.
bool numpy_graph_constant(Ref& c) {
  if (std::strncmp(Py_TYPE(c.get())->tp_name, "numpy.", 6) != 0) return true;
  if (std::strcmp(Py_TYPE(c.get())->tp_name, "numpy.ndarray") == 0) return false;
  Ref shape = Ref::steal(PyObject_GetAttrString(c.get(), "shape"));
  if (!shape || !PyTuple_Check(shape.get()) || PyTuple_GET_SIZE(shape.get()) != 0) return PyErr_Clear(), false;
  c = Ref::steal(PyObject_CallMethod(c.get(), "item", nullptr));
  if (!c || !is_exact_const(c.get())) return PyErr_Clear(), false;
  return true;
}

// Object, NNModule, Function
bool object_reconstruct(cg::Rebuilder& r, const VPtr& v) {
  if (v->source) return r.e.source(*v->source);
  if (v->kind == VK::NNModule && v->flag) {  // a module made in the trace: one per call
    // Made again by dynview._runtime.rebuild_module: cls(*args, **kwargs) where it was built from
    // constants (keys), else object.__new__(cls) and nn.Module.__init__ (its own __init__ was
    // followed by the trace); then given the attributes the trace set on it, in order, through
    // nn.Module's own __setattr__ and register_buffer, as the trace followed them. Its __init__
    // runs there as eager runs it, not captured.
    static const MadeModuleAttrs::mapped_type none;
    const MadeModuleAttrs::mapped_type* set = &none;
    bool inlined = false;  // its __init__ followed by the trace: what it set is in made_module_attrs
    if (r.made_module_attrs && v->obj)
      if (auto it = r.made_module_attrs->find(v->obj.get()); it != r.made_module_attrs->end()) {
        set = &it->second;
        inlined = v->keys.size() != 3;
      }
    if (v->keys.size() != 3 && !inlined) return false;
    static PyObject* rebuild = cg::runtime_attr("rebuild_module");
    if (!rebuild) return false;
    Ref names = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(set->size())));
    Ref kinds = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(set->size())));
    if (!names || !kinds) return PyErr_Clear(), false;
    const std::vector<std::pair<size_t, int>>* buffers = nullptr;
    if (r.made_module_buffers)
      if (auto it = r.made_module_buffers->find(v->obj.get()); it != r.made_module_buffers->end()) buffers = &it->second;
    for (size_t i = 0; i < set->size(); ++i) {
      int kind = 0;
      for (size_t b = 0; buffers && b < buffers->size(); ++b)
        if ((*buffers)[b].first == i) kind = (*buffers)[b].second;
      PyTuple_SET_ITEM(names.get(), static_cast<Py_ssize_t>(i), PyUnicode_FromString((*set)[i].first.c_str()));
      PyTuple_SET_ITEM(kinds.get(), static_cast<Py_ssize_t>(i), PyLong_FromLong(kind));
    }
    r.e.callable_const(rebuild);
    r.e.emit(N::LOAD_CONST, r.e.konst(reinterpret_cast<PyObject*>(Py_TYPE(v->obj.get()))));
    r.e.emit(N::LOAD_CONST, r.e.konst(inlined ? Py_None : v->keys[1].get()));
    r.e.emit(N::LOAD_CONST, r.e.konst(inlined ? Py_None : v->keys[2].get()));
    r.e.emit(N::LOAD_CONST, r.e.konst(names.get()));
    r.e.emit(N::LOAD_CONST, r.e.konst(kinds.get()));
    for (const auto& entry : *set)
      if (!r.value(entry.second)) return false;
    r.e.call(static_cast<int>(5 + set->size()));
    return r.remember(v);
  }
  if (v->obj && (v->kind != VK::Function || PyFunction_Check(v->obj.get()))) {
    r.e.emit(N::LOAD_CONST, r.e.konst(v->obj.get()));
    return true;
  }
  if (v->kind == VK::Function && v->obj && PyCode_Check(v->obj.get()) && !v->flag && v->globals) {
    // A function made in the trace: dynview._runtime.make_function(code, globals, defaults,
    // kwdefaults[, closure]). Its closure holds the real cells: the frame's free variables
    // (LOAD_CLOSURE) and the cells made for the trace's cells by make_cells (in the r.memo).
    static PyObject* maker = cg::runtime_attr("make_function");
    if (!maker) return false;
    r.e.callable_const(maker);
    r.e.emit(N::LOAD_CONST, r.e.konst(v->obj.get()));
    if (!r.load_globals(v->globals.get())) return false;
    for (const VPtr* part : {&v->defaults, &v->kwdefaults}) {
      if (*part) {
        if (!r.value(*part)) return false;
      } else {
        r.e.emit(N::LOAD_CONST, r.e.konst(Py_None));
      }
    }
    const bool attrs = (v->attrs && !v->attrs->keys.empty()) || (v->contents && !v->contents->keys.empty());
    if (!v->cells.empty()) {
      for (const VPtr& c : v->cells)
        if (!c || c->kind != VK::Cell || !r.value(c)) return false;
      r.e.emit(N::BUILD_TUPLE, static_cast<int>(v->cells.size()));
    } else if (attrs) {
      r.e.emit(N::LOAD_CONST, r.e.konst(Py_None));
    }
    if (attrs) {  // the attributes written in the trace (functools.wraps): its __dict__, then its descriptors'
      for (const VPtr* part : {&v->attrs, &v->contents}) {
        if (*part && !(*part)->keys.empty()) {
          if (!r.value(*part)) return false;
        } else {
          r.e.emit(N::LOAD_CONST, r.e.konst(Py_None));
        }
      }
    }
    r.e.call(attrs ? 7 : v->cells.empty() ? 4 : 5);
    return r.remember(v);
  }
  return false;
}

// Const, Object: the object's own truth, evaluated now. An object whose class computes it (__bool__,
// else __len__) is asked through that method: Python code is inlined, so what it reads is guarded
// (`if obj:` on an object whose answer changes between calls); C code is not traced, so it breaks,
// but for NumPy's scalars (immutable, their value guarded).
Status python_truth(Translator& t, Frame& f, const VPtr& v, bool& out) {
  PyObject* o = v->obj.get();
  if (v->kind == VK::Object && !PyType_Check(o) && !PyModule_Check(o)) {
    PyTypeObject* tp = Py_TYPE(o);
    const bool has_bool = tp->tp_as_number && tp->tp_as_number->nb_bool;
    const bool has_len = (tp->tp_as_mapping && tp->tp_as_mapping->mp_length) || (tp->tp_as_sequence && tp->tp_as_sequence->sq_length);
    const bool numpy_scalar = std::strncmp(tp->tp_name, "numpy.", 6) == 0 && std::strcmp(tp->tp_name, "numpy.ndarray") != 0;
    if ((has_bool || has_len) && !numpy_scalar) {
      static PyObject* bool_name = PyUnicode_InternFromString("__bool__");
      static PyObject* len_name = PyUnicode_InternFromString("__len__");
      PyObject* m = _PyType_Lookup(tp, has_bool ? bool_name : len_name);
      if (!m || !PyFunction_Check(m))
        return t.brk(f, "DV0007", std::string("bool() of a ") + tp->tp_name + " object: its " + (has_bool ? "__bool__" : "__len__") + " is C code, which is not traced",
                     "test a value the code can see instead (len(x) > 0, x is not None)");
      VPtr r;
      if (Status s = t.call_python(f, Ref::borrow(m), {v}, r)) return s;
      if (r->kind != VK::Const || (has_bool ? !PyBool_Check(r->obj.get()) : !PyLong_Check(r->obj.get())))
        return t.brk(f, "DV0007", std::string("bool() of a ") + tp->tp_name + ": " + (has_bool ? "__bool__" : "__len__") + " gave a " + vk_name(r->kind));
      out = PyObject_IsTrue(r->obj.get()) == 1;
      return std::nullopt;
    }
  }
  int r = PyObject_IsTrue(o);
  if (r < 0) return t.brk(f, "DV0010", "bool() raised");
  out = r == 1;
  return std::nullopt;
}

// Const, Object: their repr, shortened
void repr_describe(const Value& v, std::string& out, int /*depth*/) {
  if (!v.obj) {
    out += "?";
    return;
  }
  std::string r = repr_of(v.obj.get());
  if (r.size() > 120) r = r.substr(0, 117) + "...";
  out += r;
}

template <>
struct Kind<VK::Object> {
  static constexpr auto describe = repr_describe;
  static PyObject* python_type(Translator& /*t*/, const VPtr& v) {
    return reinterpret_cast<PyObject*>(Py_TYPE(v->obj.get()));
  }
  static std::optional<Ref> as_python(Translator& /*t*/, const VPtr& v, bool /*meta*/) {
    return v->obj;
  }
  static bool graph_arg(Translator& /*t*/, const VPtr& v, ArgTree& out) {
    out.kind = ArgTree::Kind::Const;  // dtypes, layouts, memory formats, functions passed to ops
    out.constant = v->obj;
    return numpy_graph_constant(out.constant);
  }
  static constexpr auto truth = python_truth;
  static Status iterate(Translator& t, Frame& f, const VPtr& v, VPtr& out, bool materialize) {
    return const_iterate(t, f, v, out, materialize);
  }
  static Status getattr(Translator& t, Frame& f, const VPtr& obj, const std::string& name, VPtr& out) {
    return object_getattr(t, f, obj, name, out);
  }
  static Status call(Translator& t, Frame& f, const VPtr& fn, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
    return object_call(t, f, fn, args, kwargs, out);  // calls.cpp: builtins, torch functions, classes ...
  }
  static Status setattr(Translator& t, Frame& f, const VPtr& owner, const std::string& name, const VPtr& value) {
    if (owner->obj && !PyType_Check(owner->obj.get()) && (Py_TYPE(owner->obj.get())->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
      // A Python __setattr__ of an object from outside (a Hugging Face config's, which maps aliases
      // and then calls super().__setattr__): inlined, as TorchDynamo does; object.__setattr__ at its
      // end is the plain assignment (Translator::outside_object_builtin).
      static PyObject* setattr_name = PyUnicode_InternFromString("__setattr__");
      PyObject* setattr_fn = _PyType_Lookup(Py_TYPE(owner->obj.get()), setattr_name);
      if (setattr_fn && PyFunction_Check(setattr_fn)) {
        VPtr ignored;
        return t.call_python(f, Ref::borrow(setattr_fn), {owner, t.constant_steal(PyUnicode_FromString(name.c_str())), value}, ignored);
      }
    }
    return object_setattr(t, f, owner, name, value);
  }
  static Status call_method(Translator& t, Frame& f, const VPtr& m, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
    if (m->obj && Py_IS_TYPE(m->obj.get(), &PyMethodDescr_Type) && PyDict_Check(m->self->obj.get()))
      return t.outside_dict_read(f, m->self, m->name, args, kwargs, out);  // super().get(k) of a dict subclass living outside the trace
    if (m->obj && Py_IS_TYPE(m->obj.get(), &PyWrapperDescr_Type)) {
      bool handled = false;  // super().__setattr__ in the Python __setattr__ of an object from outside
      if (Status s = t.outside_object_builtin(f, m->obj.get(), m->self, args, kwargs, out, handled)) return s;
      if (handled) return std::nullopt;
    }
    return object_method(t, f, m, args, kwargs, out);
  }
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    return object_reconstruct(r, v);
  }
};
DV_KIND(Object, "object")

}  // namespace dv
