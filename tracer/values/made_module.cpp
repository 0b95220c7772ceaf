// nn modules constructed in the traced code (nn.Softmax(dim=-1)(h), nn.Identity()(h) inside a
// forward): torch.nn's own stateless modules, and library ones whose Python __init__ only sets
// constants and functions (transformers' activations), built now from constant arguments. One that holds no
// parameters, buffers, submodules or hooks is a function of its constant arguments, so the module
// built at trace time stands for the one each call builds; its forward is inlined like any module's.
// The value has no source (its attributes are constants of the trace) and is marked made in the
// trace: where it leaves the graph, codegen builds a new one from the class and the constant
// arguments it was made with (torch.nn's own classes), or refuses (the caller would get one shared
// object).
// torch.nn's containers (Sequential, ModuleList, ModuleDict) of such modules are built of them.
#include <algorithm>
#include <cstring>
#include <functional>

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

// An __init__ that only sets attributes of the module (self.x = ...) and calls super().__init__()
// with no arguments: building the module now has no effect that each call would repeat (no other
// call, no write to a global, a closure, an item or another object's attribute).
bool init_only_sets_attributes(PyObject* init) {
  const CodeFacts* facts = code_facts(PyFunction_GET_CODE(init));
  if (!facts) return PyErr_Clear(), false;
  auto* co = reinterpret_cast<PyCodeObject*>(facts->code.get());
  const auto& ins = facts->decoded.instrs;
  using bc::Name;
  auto named = [&](const bc::Instr& in, const char* n) {
    return in.index >= 0 && in.index < PyTuple_GET_SIZE(co->co_names) && str_of(PyTuple_GET_ITEM(co->co_names, in.index)) == n;
  };
  auto before = [&](size_t i) -> const bc::Instr* {  // the instruction before i, past PRECALL and EXTENDED_ARG
    while (i > 0) {
      const bc::Instr& p = ins[--i];
      if (p.name != Name::PRECALL && p.name != Name::EXTENDED_ARG && p.name != Name::CACHE) return &p;
    }
    return nullptr;
  };
  for (size_t i = 0; i < ins.size(); ++i) {
    const bc::Instr& in = ins[i];
    switch (in.name) {
      case Name::STORE_GLOBAL: case Name::DELETE_GLOBAL: case Name::STORE_DEREF: case Name::DELETE_DEREF: case Name::STORE_SUBSCR:
      case Name::DELETE_SUBSCR: case Name::STORE_SLICE: case Name::DELETE_ATTR: case Name::IMPORT_NAME: case Name::CALL_FUNCTION_EX:
      case Name::CALL_KW: case Name::YIELD_VALUE: case Name::RAISE_VARARGS: case Name::RERAISE:
        return false;
      case Name::STORE_ATTR: {  // onto self (local 0) only
        const bc::Instr* p = before(i);
        if (!p || !((p->name == Name::LOAD_FAST && p->index == 0) || (p->name == Name::LOAD_FAST_LOAD_FAST && p->index2 == 0))) return false;
        break;
      }
      case Name::CALL: {  // super() and super().__init__(), nothing else
        const bc::Instr* p = before(i);
        if (!p || in.arg != 0) return false;
        const bool super_call = p->name == Name::LOAD_GLOBAL && named(*p, "super");
        const bool super_init = (p->name == Name::LOAD_SUPER_ATTR && named(*p, "__init__")) ||
                                ((p->name == Name::LOAD_METHOD || p->name == Name::LOAD_ATTR) && named(*p, "__init__") && before(static_cast<size_t>(p - ins.data())) &&
                                 before(static_cast<size_t>(p - ins.data()))->name == Name::CALL);
        if (!super_call && !super_init) return false;
        break;
      }
      default:
        break;
    }
  }
  return true;
}

// A library's or user's module class whose own __init__ is Python (transformers' GELUActivation,
// which ACT2FN["gelu"] builds on every lookup): built now as well when each such __init__ only sets
// the module's attributes (init_only_sets_attributes); what it leaves is checked after (plain_module_state).
bool python_init_class(PyObject* cls) {
  auto* tp = reinterpret_cast<PyTypeObject*>(cls);
  static PyObject* new_name = PyUnicode_InternFromString("__new__");
  if (_PyType_Lookup(tp, new_name) != _PyType_Lookup(&PyBaseObject_Type, new_name)) return false;
  PyObject* mro = tp->tp_mro;
  for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); ++i) {
    PyObject* base = PyTuple_GET_ITEM(mro, i);
    if (module_name_starts(base, "torch.")) break;  // nn.Module's own __init__ and up
    PyObject* d = reinterpret_cast<PyTypeObject*>(base)->tp_dict;
    PyObject* init = d ? PyDict_GetItemString(d, "__init__") : nullptr;
    if (!init) continue;
    if (!PyFunction_Check(init) || !init_only_sets_attributes(init)) return false;
  }
  return true;
}

// What a Python __init__ left on a module built now: only what a bare nn.Module has, plus constants,
// functions and methods (self.act = nn.functional.gelu, self.act = self._gelu_python). A tensor or
// other object it made would be made anew, and different, on every call.
bool plain_module_state(PyObject* m) {
  PyObject** dictptr = _PyObject_GetDictPtr(m);
  if (!dictptr || !*dictptr) return false;
  static PyObject* bare = [] {
    Ref mod = Ref::steal(PyObject_CallNoArgs(py().nn_Module.get()));
    PyObject* d = mod ? PyObject_GetAttrString(mod.get(), "__dict__") : nullptr;  // kept for the process
    if (!d) PyErr_Clear();
    return d;
  }();
  if (!bare) return false;
  Py_ssize_t pos = 0;
  PyObject *k, *v;
  while (PyDict_Next(*dictptr, &pos, &k, &v)) {
    if (PyDict_Contains(bare, k) == 1) continue;
    const bool plain = is_const_tree(v) || PyFunction_Check(v) || PyCFunction_Check(v) ||
                       (PyMethod_Check(v) && PyMethod_GET_SELF(v) == m && PyFunction_Check(PyMethod_GET_FUNCTION(v)));
    if (!plain) return false;
  }
  return true;
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

// A module class whose construction the trace can follow by inlining its __init__: a plain class
// (metaclass type, object's __new__) whose first torch class in the MRO is nn.Module itself, each
// class before it with a Python __init__ or none. (A subclass of a torch layer -- nn.Linear --
// would make parameters in torch's own __init__.)
bool inlinable_module_class(PyObject* cls) {
  auto* tp = reinterpret_cast<PyTypeObject*>(cls);
  if (Py_TYPE(cls) != &PyType_Type) return false;
  static PyObject* new_name = PyUnicode_InternFromString("__new__");
  if (_PyType_Lookup(tp, new_name) != _PyType_Lookup(&PyBaseObject_Type, new_name)) return false;
  PyObject* mro = tp->tp_mro;
  for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); ++i) {
    PyObject* base = PyTuple_GET_ITEM(mro, i);
    if (module_name_starts(base, "torch.")) return base == py().nn_Module.get();
    PyObject* d = reinterpret_cast<PyTypeObject*>(base)->tp_dict;
    PyObject* init = d ? PyDict_GetItemString(d, "__init__") : nullptr;
    if (init && !PyFunction_Check(init)) return false;
  }
  return false;
}


}  // namespace

Translator::Status Translator::made_module_method(Frame& f, PyObject* func, const VPtr& module, const std::vector<VPtr>& args,
                                                  const std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled) {
  PyObject* mod = PyFunction_GET_MODULE(func);
  const std::string module_name = mod && PyUnicode_Check(mod) ? str_of(mod) : std::string();
  const std::string name = str_of(reinterpret_cast<PyFunctionObject*>(func)->func_qualname);
  // (once TorchDynamo has run in the process, nn.Module.__init__ is its mutation_guard.patched_init)
  const bool init = (module_name == "torch.nn.modules.module" && name == "Module.__init__") ||
                    (module_name == "torch._dynamo.mutation_guard" && name.find("patched_init") != std::string::npos);
  if (!init && module_name != "torch.nn.modules.module") return std::nullopt;
  handled = true;
  if (init) {  // super().__init__(): run on the object when it was made
    if (!args.empty() || !kwargs.empty()) return brk(f, "DV0004", "nn.Module.__init__ given arguments in a module built in the trace");
    out = constant(Ref::borrow(Py_None));
    return std::nullopt;
  }
  if (name == "Module.register_buffer") {  // self.register_buffer(name, tensor[, persistent]): an attribute of the trace
    const VPtr* value = args.size() >= 2 ? &args[1] : nullptr;
    for (const auto& [k, v] : kwargs)
      if (k == "tensor") value = &v;
    if (args.empty() || args[0]->kind != VK::Const || !PyUnicode_Check(args[0]->obj.get()) || !value ||
        !((*value)->kind == VK::Tensor || ((*value)->kind == VK::Const && (*value)->obj.get() == Py_None)))
      return brk(f, "DV0004", "register_buffer with arguments dynview does not follow, in a module built in the trace");
    int persistent = 1;
    const VPtr* flag = args.size() >= 3 ? &args[2] : nullptr;
    for (const auto& [k, v] : kwargs)
      if (k == "persistent") flag = &v;
    if (flag) {
      if ((*flag)->kind != VK::Const || !PyBool_Check((*flag)->obj.get()))
        return brk(f, "DV0004", "register_buffer with arguments dynview does not follow, in a module built in the trace");
      persistent = (*flag)->obj.get() == Py_True ? 1 : 2;
    }
    auto& entries = made_module_attrs[module->obj.get()];
    output.made_module_buffers[module->obj.get()].emplace_back(entries.size(), persistent);
    entries.emplace_back(str_of(args[0]->obj.get()), *value);
    out = constant(Ref::borrow(Py_None));
    return std::nullopt;
  }
  // parameters(), buffers(), children(), to(), apply(), state_dict(): they would read the object,
  // which holds none of what the trace set on it (while the trace set nothing, the object is all)
  if (made_module_attrs[module->obj.get()].empty()) {
    handled = false;
    return std::nullopt;
  }
  return brk(f, "DV0004", name + "() of a module built in the traced code (its __init__ inlined)",
             "build the module in __init__");
}

Translator::Status Translator::construct_module(Frame& f, PyObject* cls, std::vector<VPtr>& args,
                                                std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out) {
  const std::string what = "constructing module " + std::string(reinterpret_cast<PyTypeObject*>(cls)->tp_name) + " inside the traced code";
  const bool python_init = !torch_nn_class(cls);
  // A Python __init__ the trace can inline (TorchDynamo inlines it): the object is made and
  // nn.Module.__init__ run on it now; what __init__ sets is kept by the trace (made_module_attrs).
  auto inline_init = [&]() -> Status {
    static PyObject* init_name = PyUnicode_InternFromString("__init__");
    PyObject* module_init = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(py().nn_Module.get()), init_name);
    Ref m = Ref::steal(PyObject_CallMethod(reinterpret_cast<PyObject*>(&PyBaseObject_Type), "__new__", "O", cls));
    Ref none = m && module_init ? Ref::steal(PyObject_CallOneArg(module_init, m.get())) : Ref();
    if (!none) return raise_current(f, what);
    VPtr mv = make(VK::NNModule);
    mv->obj = m;
    mv->flag = true;  // made in the trace
    add_made_module(m);
    PyObject* init = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(cls), init_name);
    if (init && init != module_init) {
      VPtr fv = make(VK::Function);
      fv->obj = Ref::borrow(init);
      std::vector<VPtr> a{mv};
      a.insert(a.end(), args.begin(), args.end());
      VPtr r;
      if (Status s = call(f, fv, std::move(a), kwargs, r)) return s;
      if (!r || r->kind != VK::Const || r->obj.get() != Py_None)
        return raise_new(f, PyExc_TypeError, "__init__() should return None");
    } else if (!args.empty() || !kwargs.empty()) {
      return brk(f, "DV0004", what + ": arguments given to nn.Module.__init__");
    }
    out = mv;
    return std::nullopt;
  };
  const bool inlinable = python_init && inlinable_module_class(cls);
  if (python_init && !python_init_class(cls)) {
    if (inlinable) return inline_init();
    return brk(f, "DV0004", what, "build the module in __init__");
  }
  // A torch.nn container (Sequential, ModuleList, ModuleDict) of modules built in this trace that hold
  // no state (nn.Sequential(nn.ReLU(), nn.Softmax(-1))): built now of those very objects, as they
  // were; with the constants beside them. `passed`: those modules, the only entries its _modules may have.
  std::vector<PyObject*> passed;
  std::function<std::optional<Ref>(const VPtr&)> argument = [&](const VPtr& v) -> std::optional<Ref> {
    if (constant_tree(v)) return to_python(v, false);
    if (!module_name_starts(cls, "torch.nn.modules.container")) return std::nullopt;
    if (v->kind == VK::NNModule && v->flag && v->obj && torch_nn_class(reinterpret_cast<PyObject*>(Py_TYPE(v->obj.get())))) {
      auto made = made_module_attrs.find(v->obj.get());
      if (made != made_module_attrs.end() && !made->second.empty()) return std::nullopt;  // state of the trace's only
      for (const char* member : {"_parameters", "_buffers"})
        if (!empty_dict_attr(v->obj.get(), member)) return std::nullopt;
      passed.push_back(v->obj.get());
      return v->obj;
    }
    if ((v->kind == VK::List || v->kind == VK::Tuple) && !v->obj && !v->lazy) {
      Ref items = Ref::steal(PyList_New(0));
      for (const VPtr& x : v->items) {
        std::optional<Ref> a = argument(x);
        if (!a || !items || PyList_Append(items.get(), a->get()) < 0) return PyErr_Clear(), std::nullopt;
      }
      if (v->kind == VK::List) return items;
      Ref t = Ref::steal(PyList_AsTuple(items.get()));
      return t ? std::optional<Ref>(t) : (PyErr_Clear(), std::nullopt);
    }
    if (v->kind == VK::Dict && !v->obj && !v->lazy) {
      Ref d = Ref::steal(PyDict_New());
      for (size_t i = 0; d && i < v->keys.size(); ++i) {
        std::optional<Ref> a = argument(v->items[i]);
        if (!a || PyDict_SetItem(d.get(), v->keys[i].get(), a->get()) < 0) return PyErr_Clear(), std::nullopt;
      }
      return d ? std::optional<Ref>(d) : (PyErr_Clear(), std::nullopt);
    }
    return std::nullopt;
  };
  Ref pargs = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
  for (size_t i = 0; i < args.size(); ++i) {
    auto a = argument(args[i]);
    if (!a && inlinable) return inline_init();
    if (!a) return brk(f, "DV0004", what + " from a " + vk_name(args[i]->kind));
    PyTuple_SET_ITEM(pargs.get(), i, a->release());
  }
  Ref pkw = Ref::steal(PyDict_New());
  for (auto& [k, v] : kwargs) {
    auto a = argument(v);
    if (!a && inlinable) return inline_init();
    if (!a) return brk(f, "DV0004", what + " from a " + vk_name(v->kind));
    PyDict_SetItemString(pkw.get(), k.c_str(), a->get());
  }
  Ref m = Ref::steal(PyObject_Call(cls, pargs.get(), pkw.get()));
  if (!m) return raise_current(f, what);
  auto only_passed = [&](const char* member) {  // its submodules are the ones it was given (or none)
    if (std::strcmp(member, "_modules") != 0 || passed.empty()) return false;
    Ref d = Ref::steal(PyObject_GetAttrString(m.get(), member));
    if (!d || !PyDict_Check(d.get())) return PyErr_Clear(), false;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(d.get(), &pos, &k, &v))
      if (std::find(passed.begin(), passed.end(), v) == passed.end()) return false;
    return true;
  };
  for (const char* member : {"_parameters", "_buffers", "_modules", "_forward_hooks", "_forward_pre_hooks", "_backward_hooks"})
    if (!empty_dict_attr(m.get(), member) && !only_passed(member)) {
      if (inlinable) return inline_init();
      return brk(f, "DV0004", what + ": it holds " + member + " (made anew on every call)", "build the module in __init__");
    }
  if (python_init && !plain_module_state(m.get())) {
    if (inlinable) return inline_init();
    return brk(f, "DV0004", what + ": its __init__ leaves objects on it that each call would make anew", "build the module in __init__");
  }
  out = make(VK::NNModule);
  out->obj = m;
  out->flag = true;  // made in the trace
  // what its forward (or the code) sets on it lives in the trace only, as for one whose __init__ was inlined
  if (python_init) add_made_module(m);
  // A module of constant arguments (torch.nn's own, or a library's whose __init__ only sets
  // attributes): rebuilt by calling its class with them again where it leaves the graph (appended to
  // a ModuleList, set on a module, returned) -- one per call, its __init__ run as eager runs it
  if (passed.empty()) out->keys = {Ref::borrow(cls), pargs, pkw};
  return std::nullopt;
}

}  // namespace dv
