// User functions (VK::Function): obj = the function, or the code object of one made by MAKE_FUNCTION
// (cells, defaults, kwdefaults, globals, qualname); calls are inlined.
#include "tracer/engine.h"
#include "tracer/pycache.h"
#include "tracer/rebuild.h"
#include "tracer/values/kind.h"

namespace dv {

namespace {

// Attributes of a function made in the trace (obj = its code object). Writes are the function's
// own (it is new on every call): attrs holds what goes to its __dict__ (__wrapped__, tags), contents
// what its descriptors hold (__name__, __qualname__, __doc__, __module__, __annotations__,
// __type_params__), as functools.update_wrapper writes them. Rebuilt with it (object_reconstruct).
bool descriptor_attr(const std::string& name) {
  return name == "__name__" || name == "__qualname__" || name == "__doc__" || name == "__module__" ||
         name == "__annotations__" || name == "__type_params__";
}

const VPtr* find_attr(const VPtr& d, const std::string& name) {
  if (!d) return nullptr;
  for (size_t i = 0; i < d->keys.size(); ++i)
    if (PyUnicode_Check(d->keys[i].get()) && str_of(d->keys[i].get()) == name) return &d->items[i];
  return nullptr;
}

Status made_function_getattr(Translator& t, Frame& f, const VPtr& fn, const std::string& name, VPtr& out) {
  auto* code = reinterpret_cast<PyCodeObject*>(fn->obj.get());
  if (const VPtr* v = find_attr(descriptor_attr(name) ? fn->contents : fn->attrs, name)) {
    out = *v;
    return std::nullopt;
  }
  if (name == "__dict__") {  // live: writes through it are the function's attributes
    if (!fn->attrs) fn->attrs = t.make(VK::Dict);
    out = fn->attrs;
    return std::nullopt;
  }
  if (name == "__name__") return out = t.constant(Ref::borrow(code->co_name)), std::nullopt;
  if (name == "__qualname__") return out = t.constant(Ref::borrow(fn->qualname ? fn->qualname.get() : code->co_qualname)), std::nullopt;
  if (name == "__doc__") {  // as PyFunction_New takes it: the first constant when it is a string
    PyObject* consts = code->co_consts;
    PyObject* doc = PyTuple_GET_SIZE(consts) >= 1 && PyUnicode_Check(PyTuple_GET_ITEM(consts, 0)) ? PyTuple_GET_ITEM(consts, 0) : Py_None;
    return out = t.constant(Ref::borrow(doc)), std::nullopt;
  }
  if (name == "__module__") {
    PyObject* mod = fn->globals && PyDict_Check(fn->globals.get()) ? PyDict_GetItemString(fn->globals.get(), "__name__") : nullptr;
    return out = t.constant(Ref::borrow(mod && PyUnicode_Check(mod) ? mod : Py_None)), std::nullopt;
  }
  if (name == "__defaults__" || name == "__kwdefaults__") {
    const VPtr& d = name == "__defaults__" ? fn->defaults : fn->kwdefaults;
    out = d ? d : t.constant(Ref::borrow(Py_None));
    return std::nullopt;
  }
  if (name == "__annotations__" && !fn->flag) {  // none: a new empty dict, the same one on each read
    if (!fn->contents) fn->contents = t.make(VK::Dict);
    out = t.make(VK::Dict);
    dict_set(*fn->contents, Ref::steal(PyUnicode_FromString("__annotations__")), out);
    return std::nullopt;
  }
  if (name == "__type_params__") return out = t.constant(Ref::steal(PyTuple_New(0))), std::nullopt;
  if (name == "__code__") {
    out = t.make(VK::Object);
    out->obj = fn->obj;
    return std::nullopt;
  }
  Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
  if (_PyType_Lookup(&PyFunction_Type, nm.get()))  // __closure__, __globals__, __annotations__ given ...
    return t.brk(f, "DV0005", "attribute " + name + " of a function made in the trace");
  return t.brk(f, kNoAttributeId, "'function' object has no attribute '" + name + "'");
}

Status made_function_setattr(Translator& t, Frame& f, const VPtr& fn, const std::string& name, const VPtr& value) {
  const bool descr = descriptor_attr(name);
  if (!descr) {
    Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
    if (_PyType_Lookup(&PyFunction_Type, nm.get()))  // __code__, __defaults__, __dict__ ...
      return t.brk(f, "DV0008", "assignment to attribute '" + name + "' of a function made in the trace", kSetattrHint);
  }
  if ((name == "__name__" || name == "__qualname__") && !(value->kind == VK::Const && PyUnicode_Check(value->obj.get())))
    return t.raise_new(f, PyExc_TypeError, name + " must be set to a string object");
  VPtr& d = descr ? fn->contents : fn->attrs;
  if (!d) d = t.make(VK::Dict);
  dict_set(*d, Ref::steal(PyUnicode_FromString(name.c_str())), value);
  return std::nullopt;
}

}  // namespace

// A call of a function torch.compiler.disable / torch._dynamo.disable marked: a break, the call
// run eagerly (nothing it calls is captured: eval_frame.cpp marks the wrapper's code; with
// recursive=False the frames it calls are).
Status disabled_call(Translator& t, Frame& f, PyObject* fn) {
  if (disable_wrapper(fn)) mark_disabled(PyFunction_GET_CODE(fn));
  Ref orig = Ref::steal(PyObject_GetAttrString(fn, "_torchdynamo_orig_callable"));
  PyErr_Clear();
  if (!orig) orig = Ref::steal(PyObject_GetAttrString(fn, "__wrapped__"));  // torch._disable_dynamo's
  PyErr_Clear();
  return t.brk(f, "DV0025", "call to " + callable_name(orig ? orig.get() : fn) + ", marked torch.compiler.disable");
}

template <>
struct Kind<VK::Function> {
  static void describe(const Value& v, std::string& out, int /*depth*/) {
    PyObject* qn = v.qualname ? v.qualname.get() : nullptr;
    if (!qn && v.obj && PyFunction_Check(v.obj.get())) qn = reinterpret_cast<PyFunctionObject*>(v.obj.get())->func_qualname;
    if (!qn && v.obj && PyCode_Check(v.obj.get())) qn = reinterpret_cast<PyCodeObject*>(v.obj.get())->co_qualname;
    out += "<function " + (qn ? str_of(qn) : std::string("?")) + ">";
  }
  static PyObject* python_type(Translator& /*t*/, const VPtr& /*v*/) {
    return reinterpret_cast<PyObject*>(&PyFunction_Type);
  }
  static std::optional<Ref> as_python(Translator& /*t*/, const VPtr& v, bool /*meta*/) {
    return v->obj && PyFunction_Check(v->obj.get()) ? std::optional<Ref>(v->obj) : std::nullopt;
  }
  static constexpr auto graph_arg = no_answer::graph_arg;
  static constexpr auto truth = always_true;
  static constexpr auto iterate = no_answer::iterate;
  static Status getattr(Translator& t, Frame& f, const VPtr& obj, const std::string& name, VPtr& out) {
    if (obj->obj && PyCode_Check(obj->obj.get())) return made_function_getattr(t, f, obj, name, out);
    return object_getattr(t, f, obj, name, out);
  }
  static Status call(Translator& t, Frame& f, const VPtr& fn, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
    if (fn->obj && PyFunction_Check(fn->obj.get())) {
      // torch.compiler.disable / torch._dynamo.disable: not traced; the call runs eagerly (and
      // nothing it calls is captured: eval_frame.cpp marks the wrapper's code).
      if (disabled_function(fn->obj.get())) {
        if (torch_special(fn->obj.get()) == TorchSpecial::checkpoint) return t.checkpoint_call(f, std::move(args), std::move(kwargs), out);
        return disabled_call(t, f, fn->obj.get());
      }
      if (torch_special(fn->obj.get()) == TorchSpecial::compile) return compile_call(t, f, args, out);  // dynview.compile(g)
      if (Ref orig = compiled_original(fn->obj.get())) {  // torch.compile(fn) made outside: fn, inlined
        VPtr inner = t.wrap(orig, fn->source ? Source::attr(fn->source, "_torchdynamo_orig_callable") : nullptr, f);
        if (!inner) return t.brk(f, "DV0004", "call to " + callable_name(orig.get()) + ", compiled by torch.compile");
        return t.call(f, inner, std::move(args), std::move(kwargs), out);
      }
      bool library = false;  // Python functions dynview runs natively (copy.deepcopy ...)
      if (Status s = t.call_library(f, fn, args, kwargs, out, library); s || library) return s;
      if (allowed_in_graph(fn->obj.get()))  // torch.compiler.allow_in_graph: one node of the graph
        return t.graph_call(f, fn->obj, "", std::move(args), std::move(kwargs), out);
      bool handled = false;
      if (Status s = t.call_frozen_maker(f, fn->obj.get(), args, kwargs, out, handled)) return s;
      if (handled) return std::nullopt;
      // np.ones, np.full, np.eye...: NumPy functions written in Python are torch._numpy's, as its C
      // ones are (TorchDynamo's NumpyVariable), not inlined into NumPy's own code
      if (Status s = t.call_numpy(f, fn->obj.get(), args, kwargs, out, handled); s || handled) return s;
    }
    return t.inline_call(f, fn, nullptr, std::move(args), std::move(kwargs), out);
  }
  static Status setattr(Translator& t, Frame& f, const VPtr& owner, const std::string& name, const VPtr& value) {
    if (owner->obj && PyCode_Check(owner->obj.get())) return made_function_setattr(t, f, owner, name, value);
    return no_answer::setattr(t, f, owner, name, value);  // a function from outside: a real object's state
  }
  static constexpr auto call_method = no_answer::call_method;
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    return object_reconstruct(r, v);
  }
};
DV_KIND(Function, "function")

}  // namespace dv
