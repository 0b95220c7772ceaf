// Library callables dynview follows, found by the callable's identity (or, for objects such as
// functools.lru_cache wrappers, its exact type): one table built once, one small function each.
// The kinds they make live in their own files (deque.cpp, dict_kinds.cpp, named_tuple.cpp, ...).
#include <algorithm>
#include <unordered_map>

#include "tracer/pycache.h"
#include "tracer/translator.h"

namespace dv {

namespace {

using Status = Translator::Status;
using Args = std::vector<VPtr>;
using Kwargs = std::vector<std::pair<std::string, VPtr>>;
// `handled` false: the call is not one this entry follows after all (the caller goes on).
using LibraryCall = Status (*)(Translator& t, Frame& f, const VPtr& fn, Args& args, Kwargs& kwargs, VPtr& out, bool& handled);

Status deque_new(Translator& t, Frame& f, const VPtr&, Args& args, Kwargs& kwargs, VPtr& out, bool&) {
  return t.construct_deque(f, args, kwargs, out);
}

Status dict_kind_new(Translator& t, Frame& f, const VPtr& fn, Args& args, Kwargs& kwargs, VPtr& out, bool& handled) {
  return t.construct_dict_kind(f, fn->obj.get(), args, kwargs, out, handled);
}

// object(): a fresh sentinel (heapq.nlargest's), an instance made in the trace with no attributes
// (it cannot take any).
Status object_new(Translator& t, Frame&, const VPtr& fn, Args& args, Kwargs& kwargs, VPtr& out, bool& handled) {
  if (!args.empty() || !kwargs.empty()) {
    handled = false;
    return std::nullopt;
  }
  VPtr inst = t.make(VK::Instance);
  inst->obj = fn->obj;
  inst->self = fn;
  inst->attrs = t.make(VK::Dict);
  out = inst;
  return std::nullopt;
}

Status tuple_new(Translator& t, Frame& f, const VPtr&, Args& args, Kwargs& kwargs, VPtr& out, bool& handled) {
  if (!kwargs.empty()) {
    handled = false;
    return std::nullopt;
  }
  return t.namedtuple_new(f, args, out, handled);
}

// functools.lru_cache / functools.cache wrappers: the wrapped function is traced (as TorchDynamo
// does); the cache would only return what it computes. A body with effects outside it (appending to
// a global list, counting its calls) breaks instead: eager runs it on a cache miss only, the
// compiled code would replay its effects on every call (TorchDynamo replays them, and warns).
Status lru_cache_call(Translator& t, Frame& f, const VPtr& fn, Args& args, Kwargs& kwargs, VPtr& out, bool&) {
  Ref wrapped = Ref::steal(PyObject_GetAttrString(fn->obj.get(), "__wrapped__"));
  if (!wrapped || !PyFunction_Check(wrapped.get()))
    return PyErr_Clear(), t.brk(f, "DV0004", "calling a functools.lru_cache wrapper of a " + std::string(wrapped ? Py_TYPE(wrapped.get())->tp_name : "?"));
  VPtr fv = t.make(VK::Function);
  fv->obj = wrapped;
  const EffectCount before(t.output.side_effects);
  const size_t writes = t.output.side_effects.attr_writes.size();
  if (Status s = t.call(f, fv, std::move(args), std::move(kwargs), out)) return s;
  const char* what = EffectCount(t.output.side_effects).changed(before);
  if (!what && t.output.side_effects.attr_writes.size() != writes) what = "sets an attribute of a module";
  if (what)
    return t.brk(f, "DV0008", "call to " + callable_name(wrapped.get()) + ", a functools.lru_cache function that " + what +
                                  ": eager runs its body on a cache miss only",
                 "keep cached functions free of effects outside them");
  return std::nullopt;
}

// types.MethodType(function, obj): the bound method a class attribute lookup makes (contextlib's
// ExitStack binds each context manager's __exit__ so). A function made in the trace is not bound.
Status method_new(Translator& t, Frame& f, const VPtr&, Args& args, Kwargs& kwargs, VPtr& out, bool& handled) {
  if (args.size() != 2 || !kwargs.empty() || !args[0]->obj || !PyFunction_Check(args[0]->obj.get()) ||
      (args[0]->kind != VK::Function && args[0]->kind != VK::Object)) {
    if (args.size() == 2 && kwargs.empty() && args[0]->kind == VK::Function)
      return t.brk(f, "DV0004", "types.MethodType of a function made in the trace");
    handled = false;
    return std::nullopt;
  }
  PyObject* fn = args[0]->obj.get();
  out = t.bound_method(args[1], args[0]->obj, str_of(reinterpret_cast<PyFunctionObject*>(fn)->func_name));
  return std::nullopt;
}

// collections.namedtuple("Point", ["x", "y"], defaults=...) of constants: the class is made now, once,
// and the compiled code holds it (TorchDynamo makes it while tracing too). Eager makes a new class on
// each call; the compiled code gives every call's tuples the one class. Its __module__ is the calling
// frame's, as eager's (namedtuple reads it from its caller, which here would not be that frame).
// Another argument (a tensor) breaks, as in TorchDynamo.
Status namedtuple_make(Translator& t, Frame& f, const VPtr& fn, Args& args, Kwargs& kwargs, VPtr& out, bool&) {
  Kwargs kw = kwargs;
  const bool has_module = std::any_of(kw.begin(), kw.end(), [](const auto& p) { return p.first == "module"; });
  PyObject* name = f.globals && PyDict_Check(f.globals.get()) ? PyDict_GetItemString(f.globals.get(), "__name__") : nullptr;
  if (!has_module && name && PyUnicode_Check(name)) kw.emplace_back("module", t.constant(Ref::borrow(name)));
  for (auto& [k, v] : kw)
    if (v->kind != VK::Const) return t.brk(f, "DV0013", "collections.namedtuple with a " + k + "= that is not a constant");
  Ref cls;
  if (Status s = call_on_constants(t, f, fn->obj.get(), "collections.namedtuple", args, kw, cls)) return s;
  out = t.make(VK::Object);
  out->obj = cls;
  return std::nullopt;
}

Status deep_copy(Translator& t, Frame& f, const VPtr&, Args& args, Kwargs& kwargs, VPtr& out, bool&) {
  return t.copy_value(f, args, kwargs, out, true);
}

Status shallow_copy(Translator& t, Frame& f, const VPtr&, Args& args, Kwargs& kwargs, VPtr& out, bool&) {
  return t.copy_value(f, args, kwargs, out, false);
}

PyObject* attr_of(const char* module, const char* name) { return kept_attr(module, name); }

const std::unordered_map<PyObject*, LibraryCall>& by_identity() {
  static const auto* table = [] {
    auto* m = new std::unordered_map<PyObject*, LibraryCall>;  // lives as long as the process
    auto add = [&](PyObject* o, LibraryCall c) {
      if (o) (*m)[o] = c;
    };
    add(deque_class(), deque_new);
    add(ordered_dict_class(), dict_kind_new);
    add(defaultdict_class(), dict_kind_new);
    add(reinterpret_cast<PyObject*>(&PyBaseObject_Type), object_new);
    add(tuple_new_fn(), tuple_new);
    add(reinterpret_cast<PyObject*>(&PyMethod_Type), method_new);
    add(attr_of("collections", "namedtuple"), namedtuple_make);
    add(attr_of("copy", "deepcopy"), deep_copy);  // copying.cpp
    add(attr_of("copy", "copy"), shallow_copy);
    return m;
  }();
  return *table;
}

const std::unordered_map<PyTypeObject*, LibraryCall>& by_type() {
  static const auto* table = [] {
    auto* m = new std::unordered_map<PyTypeObject*, LibraryCall>;  // lives as long as the process
    if (PyObject* lru = attr_of("functools", "_lru_cache_wrapper"); lru && PyType_Check(lru))
      (*m)[reinterpret_cast<PyTypeObject*>(lru)] = lru_cache_call;
    return m;
  }();
  return *table;
}

}  // namespace

// A function call_library runs natively (it may read its arguments whole).
bool library_callable(PyObject* o) {
  return o && (by_identity().count(o) || by_type().count(Py_TYPE(o)) || tuple_class(o));
}

Translator::Status Translator::call_library(Frame& f, const VPtr& fn, std::vector<VPtr>& args,
                                            std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled) {
  handled = false;
  PyObject* o = fn->obj.get();
  if (!o) return std::nullopt;
  LibraryCall c = nullptr;
  if (auto it = by_identity().find(o); it != by_identity().end()) c = it->second;
  else if (auto jt = by_type().find(Py_TYPE(o)); jt != by_type().end()) c = jt->second;
  else if (tuple_class(o)) return construct_namedtuple(f, fn, args, kwargs, out, handled);  // per class
  if (!c) return std::nullopt;
  handled = true;
  return c(*this, f, fn, args, kwargs, out, handled);
}

}  // namespace dv
