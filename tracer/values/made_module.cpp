// nn modules constructed in the traced code (nn.Softmax(dim=-1)(h), nn.Identity()(h) inside a
// forward): torch.nn's own stateless modules, built now from constant arguments. One that holds no
// parameters, buffers, submodules or hooks is a function of its constant arguments, so the module
// built at trace time stands for the one each call builds; its forward is inlined like any module's.
// The value has no source (its attributes are constants of the trace) and is marked made in the
// trace: codegen refuses to hand it out of the graph (the caller would get one shared object).
#include "tracer/pycache.h"
#include "tracer/translator.h"

namespace dv {

namespace {

bool module_name_starts(PyObject* owner, const char* prefix) {
  Ref mod = Ref::steal(PyObject_GetAttrString(owner, "__module__"));
  if (!mod || !PyUnicode_Check(mod.get())) return PyErr_Clear(), false;
  return str_of(mod.get()).rfind(prefix, 0) == 0;
}

// torch.nn's own classes, and a library's or user's subclass that adds only methods (transformers'
// SiLUActivation, reached by ACT2FN["silu"]): its __init__ and __new__ are torch's (nn.Module's, or
// the wrapper TorchDynamo puts on it once it has run in the process), so building one runs no code
// of its author's.
bool torch_nn_class(PyObject* cls) {
  if (module_name_starts(cls, "torch.nn.modules.")) return true;
  auto* tp = reinterpret_cast<PyTypeObject*>(cls);
  static PyObject* init_name = PyUnicode_InternFromString("__init__");
  static PyObject* new_name = PyUnicode_InternFromString("__new__");
  PyObject* init = _PyType_Lookup(tp, init_name);
  PyObject* made = _PyType_Lookup(tp, new_name);
  return init && PyFunction_Check(init) && module_name_starts(init, "torch.") && made == _PyType_Lookup(&PyBaseObject_Type, new_name);
}

// A constant argument: a constant, or a tuple or list of them (nn.ConstantPad1d((left, right), 0)).
bool constant_tree(const VPtr& v) {
  if (v->kind == VK::Const) return true;
  if (v->kind != VK::Tuple && v->kind != VK::List) return false;
  if (v->obj) return false;  // a named tuple
  for (const VPtr& x : v->items)
    if (!constant_tree(x)) return false;
  return true;
}

// No entries, or only None ones: CrossEntropyLoss() registers its absent class weights as a buffer
// `weight` that is None, which holds no state.
bool empty_dict_attr(PyObject* m, const char* name) {
  Ref d = Ref::steal(PyObject_GetAttrString(m, name));
  if (!d) return PyErr_Clear(), false;
  if (!PyDict_Check(d.get())) return false;
  Py_ssize_t pos = 0;
  PyObject *k, *v;
  while (PyDict_Next(d.get(), &pos, &k, &v))
    if (v != Py_None) return false;
  return true;
}

}  // namespace

Translator::Status Translator::construct_module(Frame& f, PyObject* cls, std::vector<VPtr>& args,
                                                std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out) {
  const std::string what = "constructing module " + std::string(reinterpret_cast<PyTypeObject*>(cls)->tp_name) + " inside the traced code";
  if (!torch_nn_class(cls)) return brk(f, "DV0004", what, "build the module in __init__");
  Ref pargs = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
  for (size_t i = 0; i < args.size(); ++i) {
    auto a = constant_tree(args[i]) ? to_python(args[i], false) : std::nullopt;
    if (!a) return brk(f, "DV0004", what + " from a " + vk_name(args[i]->kind));
    PyTuple_SET_ITEM(pargs.get(), i, a->release());
  }
  Ref pkw = Ref::steal(PyDict_New());
  for (auto& [k, v] : kwargs) {
    auto a = constant_tree(v) ? to_python(v, false) : std::nullopt;
    if (!a) return brk(f, "DV0004", what + " from a " + vk_name(v->kind));
    PyDict_SetItemString(pkw.get(), k.c_str(), a->get());
  }
  Ref m = Ref::steal(PyObject_Call(cls, pargs.get(), pkw.get()));
  if (!m) return raise_current(f, what);
  for (const char* member : {"_parameters", "_buffers", "_modules", "_forward_hooks", "_forward_pre_hooks", "_backward_hooks"})
    if (!empty_dict_attr(m.get(), member))
      return brk(f, "DV0004", what + ": it holds " + member + " (made anew on every call)", "build the module in __init__");
  out = make(VK::NNModule);
  out->obj = m;
  out->flag = true;  // made in the trace
  return std::nullopt;
}

}  // namespace dv
