// nn.Modules (VK::NNModule): obj = the module; its parameters, buffers and submodules are read through
// _parameters/_buffers/_modules and guarded by source.
#include <algorithm>
#include <cstring>

#include "tracer/pycache.h"
#include "tracer/rebuild.h"
#include "tracer/values/kind.h"

namespace dv {

namespace {

Status missing_module_attr(Translator& t, Frame& f, PyObject* m, const std::string& name) {
  return t.brk(f, kNoAttributeId, "'" + std::string(Py_TYPE(m)->tp_name) + "' object has no attribute '" + name + "'");
}

}  // namespace

// A module's _parameters, _buffers or _modules dict that the trace changed (Module.register_buffer
// called from forward: `self._buffers[name] = tensor`, replayed after the graph): the module's
// attributes read after it are that dict's entries in the trace, as nn.Module.__getattr__ reads them.
const Value* changed_member_dict(Translator& t, PyObject* members) {
  const auto& changed = t.output.side_effects.mutated_dicts;
  if (changed.empty()) return nullptr;
  VPtr d = t.builder.container_value(members);
  return d && !d->lazy && std::find(changed.begin(), changed.end(), d) != changed.end() ? d.get() : nullptr;
}

// A container module's `_modules` as the trace holds it: the dict value the trace changed
// (ModuleList.append / insert / extend, a ModuleDict's new key, del of an entry in forward), or null
// when the real dict still holds.
const Value* changed_children(Translator& t, PyObject* m) {
  PyObject** dictptr = _PyObject_GetDictPtr(m);
  PyObject* mods = dictptr && *dictptr ? PyDict_GetItemString(*dictptr, "_modules") : nullptr;
  return mods && PyDict_Check(mods) ? changed_member_dict(t, mods) : nullptr;
}

// container[idx] of children the trace appended or assigned (self.layers.append(m) in forward): its
// own entries -- a ModuleList's or Sequential's by position (as their _get_abs_string_index), a
// ModuleDict's (by_key) by name
Status changed_child(Translator& t, Frame& f, const Value& changed, bool by_key, const VPtr& idx, VPtr& out) {
  if (idx->kind != VK::Const) return t.brk(f, "DV0017", "indexing a module container whose children the trace changed, by a value not known");
  PyObject* k = idx->obj.get();
  if (!by_key && PyLong_CheckExact(k)) {
    const Py_ssize_t n = static_cast<Py_ssize_t>(changed.items.size());
    Py_ssize_t i = PyLong_AsSsize_t(k);
    if (i < 0) i += n;
    if (PyErr_Occurred() || i < 0 || i >= n) return PyErr_Clear(), t.raise_new(f, PyExc_IndexError, "index " + repr_of(k) + " is out of range");
    out = changed.items[static_cast<size_t>(i)];
    return std::nullopt;
  }
  if (by_key && PyUnicode_Check(k)) {
    const long i = find_key(changed, k);
    if (i < 0) return t.raise_new(f, PyExc_KeyError, repr_of(k));
    out = changed.items[static_cast<size_t>(i)];
    return std::nullopt;
  }
  return t.brk(f, "DV0017", "slicing a module container whose children the trace changed");
}

namespace {

// A function defined in torch (fx.GraphModule's __call__): torch's classes keep to forward.
bool function_of_torch(PyObject* fn) {
  if (!fn || !PyFunction_Check(fn)) return false;
  PyObject* mod = reinterpret_cast<PyFunctionObject*>(fn)->func_module;
  if (!mod || !PyUnicode_Check(mod)) return false;
  const std::string m = str_of(mod);
  return m == "torch" || m.rfind("torch.", 0) == 0;
}

// A lazy module's state before its initialisation hook ran, put back when the hook could not be run
// on the arguments' examples (it raised, or made a parameter from their values: a meta tensor), so
// that the frame, run eagerly from a break, initialises the module itself as eager does: each module's
// class, __dict__ and the dicts in it (_parameters, _buffers, _modules, the hook dicts), and each
// parameter's and buffer's class and data (UninitializedParameter.materialize changes both in place),
// and the random generator's state.
class LazySnapshot {
 public:
  bool take(PyObject* root) {
    rng_ = Ref::steal(PyObject_CallMethod(py().torch.get(), "get_rng_state", nullptr));  // what it drew is drawn again
    if (!rng_) return false;
    Ref mods = Ref::steal(PyObject_CallMethod(root, "modules", nullptr));
    Ref it = mods ? Ref::steal(PyObject_GetIter(mods.get())) : Ref();
    if (!it) return false;
    while (Ref m = Ref::steal(PyIter_Next(it.get()))) {
      PyObject** dictptr = _PyObject_GetDictPtr(m.get());
      if (!dictptr || !*dictptr) return false;
      Ref dict_copy = Ref::steal(PyDict_Copy(*dictptr));
      if (!dict_copy) return false;
      objects_.push_back({m, Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(m.get()))), dict_copy, Ref::borrow(*dictptr)});
      Py_ssize_t pos = 0;
      PyObject *k, *v;
      while (PyDict_Next(*dictptr, &pos, &k, &v)) {
        if (!PyDict_Check(v)) continue;
        Ref c = PyDict_CheckExact(v) ? Ref::steal(PyDict_Copy(v)) : Ref::steal(PyObject_CallMethod(v, "copy", nullptr));
        if (!c) return false;
        dicts_.push_back({Ref::borrow(v), c});
        const bool tensors = PyUnicode_Check(k) && (str_of(k) == "_parameters" || str_of(k) == "_buffers");
        Py_ssize_t p2 = 0;
        PyObject *k2, *x;
        while (tensors && PyDict_Next(v, &p2, &k2, &x)) {
          if (x == Py_None) continue;
          Ref data = Ref::steal(PyObject_GetAttrString(x, "data"));
          if (!data) return false;
          tensors_.push_back({Ref::borrow(x), Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(x))), data});
        }
      }
    }
    return !PyErr_Occurred();
  }
  void restore() {
    Ref set = Ref::steal(PyObject_CallMethod(py().torch.get(), "set_rng_state", "O", rng_.get()));
    PyErr_Clear();
    for (auto& [x, cls, data] : tensors_) {
      if (reinterpret_cast<PyObject*>(Py_TYPE(x.get())) != cls.get()) PyObject_SetAttrString(x.get(), "__class__", cls.get());
      PyObject_SetAttrString(x.get(), "data", data.get());
      PyErr_Clear();
    }
    for (auto& [m, cls, dict_copy, dict] : objects_) {
      if (reinterpret_cast<PyObject*>(Py_TYPE(m.get())) != cls.get()) PyObject_SetAttrString(m.get(), "__class__", cls.get());
      PyDict_Clear(dict.get());
      PyDict_Update(dict.get(), dict_copy.get());
      PyErr_Clear();
    }
    for (auto& [d, copy] : dicts_) {  // (an OrderedDict's order is its own: through its methods)
      if (PyDict_CheckExact(d.get())) {
        PyDict_Clear(d.get());
        PyDict_Update(d.get(), copy.get());
      } else {
        Ref cleared = Ref::steal(PyObject_CallMethod(d.get(), "clear", nullptr));
        Ref updated = cleared ? Ref::steal(PyObject_CallMethod(d.get(), "update", "O", copy.get())) : Ref();
      }
      PyErr_Clear();
    }
  }

 private:
  struct Object { Ref obj, cls, dict_copy, dict; };
  struct Dict { Ref dict, copy; };
  struct Tensor { Ref obj, cls, data; };
  Ref rng_;  // the CPU generator's state (a CUDA generator's is not put back)
  std::vector<Object> objects_;
  std::vector<Dict> dicts_;
  std::vector<Tensor> tensors_;
};

// Whether a module's (or a submodule's) parameter or buffer is on the meta device.
bool has_meta_state(PyObject* m) {
  for (const char* walk : {"parameters", "buffers"}) {
    Ref it = Ref::steal(PyObject_CallMethod(m, walk, nullptr));
    Ref iter = it ? Ref::steal(PyObject_GetIter(it.get())) : Ref();
    if (!iter) return PyErr_Clear(), true;
    while (Ref x = Ref::steal(PyIter_Next(iter.get()))) {
      Ref is_meta = Ref::steal(PyObject_GetAttrString(x.get(), "is_meta"));
      if (!is_meta || is_meta.get() == Py_True) return PyErr_Clear(), true;
    }
    if (PyErr_Occurred()) return PyErr_Clear(), true;
  }
  return false;
}

// The first call of a lazy module (torch.nn.LazyLinear, a LazyModuleMixin of the user's) whose
// initialisation pre-hook (_infer_parameters) is still registered: the hook is run now, for real, on
// the arguments' examples, as TorchDynamo does (initialize_lazy_module): it sizes and initialises the
// parameters, removes itself and turns the module into its cls_to_become (LazyLinear -> Linear). The
// call is then traced as a call of the initialised module. Eager would have done the same at this
// call, and the frame runs eagerly after a break, so the module is initialised once either way.
Status initialize_lazy_module(Translator& t, Frame& f, const VPtr& module, const std::vector<VPtr>& args, const KwArgs& kwargs) {
  static PyObject* lazy_mixin = kept_attr("torch.nn.modules.lazy", "LazyModuleMixin");
  if (!lazy_mixin) return PyErr_Clear(), std::nullopt;
  PyObject* m = module->obj.get();
  const int lazy = PyObject_IsInstance(m, lazy_mixin);
  if (lazy != 1) return PyErr_Clear(), std::nullopt;
  // The compiled code is for an initialised module: another one, not yet initialised, passed later
  // (a new LazyLinear of the same class) fails this guard, and its first call is captured again.
  static PyObject* hook_name = PyUnicode_InternFromString("_initialize_hook");
  if (module->source) {
    SourcePtr dict_src = Source::attr(module->source, "__dict__");
    if (Guard* g = t.add_guard(GuardKind::DICT_CONTAINS, dict_src, Ref::borrow(hook_name), f, "'_initialize_hook' not in " + dict_src->text()))
      g->length = 0;
  }
  if (!PyObject_HasAttr(m, hook_name)) return std::nullopt;  // initialised already
  const std::string mod_name = Py_TYPE(m)->tp_name;
  // The arguments as the hook sees them, as TorchDynamo's convert_to_fake: tensors by their
  // examples, containers (named tuples too) item by item, constants as they are.
  auto refuse = [&](const std::string& what) {
    return t.brk(f, "DV0004", "first call of lazy module " + mod_name + " with " + what,
                 "call the module once before compiling, to initialise it eagerly");
  };
  if (t.output.dynamic()) return refuse("dynamic sizes");  // (the hook would size parameters by a symbol)
  auto example = [&](const VPtr& v, Ref& out) -> Status {
    if (Status s = t.realize_value(f, v)) return s;
    std::optional<Ref> py = t.to_python(v, true);
    if (!py) return refuse(std::string("a ") + vk_name(v->kind) + " argument");
    out = *py;
    return std::nullopt;
  };
  Ref argt = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
  Ref kw = Ref::steal(PyDict_New());
  if (!argt || !kw) return PyErr_Clear(), t.brk(f, "DV0019", "first call of lazy module " + mod_name + ": out of memory");
  for (size_t i = 0; i < args.size(); ++i) {
    Ref a;
    if (Status s = example(args[i], a)) return s;
    PyTuple_SET_ITEM(argt.get(), static_cast<Py_ssize_t>(i), a.release());
  }
  for (const auto& [k, v] : kwargs) {
    Ref a;
    if (Status s = example(v, a)) return s;
    if (PyDict_SetItemString(kw.get(), k.c_str(), a.get()) < 0) return PyErr_Clear(), t.brk(f, "DV0019", "first call of lazy module " + mod_name);
  }
  LazySnapshot before;
  if (!before.take(m))
    return PyErr_Clear(), t.brk(f, "DV0004", "first call of lazy module " + mod_name + ": its state cannot be read",
                                "call the module once before compiling, to initialise it eagerly");
  PyTypeObject* lazy_type = Py_TYPE(m);
  Ref r = Ref::steal(PyObject_CallMethod(m, "_infer_parameters", "OOO", m, argt.get(), kw.get()));
  if (!r || has_meta_state(m)) {
    // Not on the examples: the module is put back as it was, and the frame runs eagerly from a break
    // before the call (eager initialises it there, or raises what it raises)
    const std::string why = r ? "made a parameter or buffer from its arguments' values"
                              : "raised " + repr_of(take_error().get()) + " on its arguments' examples";
    before.restore();
    return t.brk(f, "DV0004", "initialising lazy module " + mod_name + " " + why,
                 "call the module once before compiling, to initialise it eagerly");
  }
  if (Py_TYPE(m) != lazy_type && module->source) {
    // LazyLinear -> Linear (cls_to_become): the module's type guard is the type it has now, as
    // TorchDynamo's (NNModuleVariable.module_type), so that the next call of the same module hits
    const std::string src = module->source->text();
    for (Guard& g : t.output.guards)
      if (g.kind == GuardKind::TYPE_MATCH && g.value.get() == reinterpret_cast<PyObject*>(lazy_type) && g.source &&
          g.source->text() == src) {
        g.value = Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(m)));
        g.text = "___check_type_id(" + src + ", " + Py_TYPE(m)->tp_name + ")";
      }
  }
  return std::nullopt;
}

}  // namespace

bool children_container(PyObject* module) {
  const int which = module_container_method(module, "__len__");
  return which >= 0 && which <= 2;
}

int module_container_method(PyObject* module, const char* method) {
  static PyObject* const* classes = [] {
    static PyObject* c[5] = {};
    const char* names[] = {"ModuleList", "Sequential", "ModuleDict", "ParameterList", "ParameterDict"};
    for (int i = 0; i < 5; ++i) c[i] = kept_attr("torch.nn", names[i]);  // kept
    PyErr_Clear();
    return c;
  }();
  Ref name = Ref::steal(PyUnicode_InternFromString(method));
  PyObject* own = name ? _PyType_Lookup(Py_TYPE(module), name.get()) : nullptr;
  for (int i = 0; own && i < 5; ++i)
    if (classes[i] && own == _PyType_Lookup(reinterpret_cast<PyTypeObject*>(classes[i]), name.get())) return i;
  return -1;
}

void guard_module_dict_keys(Translator& t, Frame& f, PyObject* module, const SourcePtr& source, const char* dict) {
  if (!source) return;
  PyObject** dictptr = _PyObject_GetDictPtr(module);
  PyObject* d = dictptr && *dictptr ? PyDict_GetItemString(*dictptr, dict) : nullptr;
  if (!d || !PyDict_Check(d)) return;
  Ref keys = dict_keys_in_order(d);
  Ref key_tuple = keys ? Ref::steal(PyList_AsTuple(keys.get())) : Ref();
  if (!key_tuple) return PyErr_Clear();
  SourcePtr src = Source::attr(source, dict);
  t.add_guard(GuardKind::DICT_KEYS, src, key_tuple, f, "list(" + src->text() + ".keys()) == " + repr_of(key_tuple.get()));
}

PyObject* module_getattr_fn() {
  static PyObject* fn = [] {
    PyObject* name = PyUnicode_InternFromString("__getattr__");
    return _PyType_Lookup(reinterpret_cast<PyTypeObject*>(py().nn_Module.get()), name);  // kept by the class
  }();
  return fn;
}

template <>
struct Kind<VK::NNModule> {
  static void describe(const Value& v, std::string& out, int /*depth*/) {
    out += std::string("<") + (v.obj ? Py_TYPE(v.obj.get())->tp_name : "module") + ">"; return;
  }
  static PyObject* python_type(Translator& /*t*/, const VPtr& v) {
    return reinterpret_cast<PyObject*>(Py_TYPE(v->obj.get()));
  }
  static std::optional<Ref> as_python(Translator& /*t*/, const VPtr& v, bool /*meta*/) {
    return v->obj;
  }
  static constexpr auto graph_arg = no_answer::graph_arg;
  static Status truth(Translator& t, Frame& f, const VPtr& v, bool& out) {
    if (const Value* changed = children_container(v->obj.get()) ? changed_children(t, v->obj.get()) : nullptr) {
      out = !changed->items.empty();
      return std::nullopt;
    }
    int r = PyObject_IsTrue(v->obj.get());  // Sequential/ModuleList define __len__
    if (r < 0) return t.brk(f, "DV0010", "bool() of module raised");
    out = r == 1;
    return std::nullopt;
  }
  static Status iterate(Translator& t, Frame& f, const VPtr& v, VPtr& out, bool /*materialize*/) {
    // The containers' own __iter__, by identity (a subclass that overrides it breaks): ModuleList and
    // Sequential give their children, ModuleDict and ParameterDict their keys, ParameterList its
    // items self["0"], self["1"], ... (parameters, or other objects it holds as attributes)
    PyObject* m = v->obj.get();
    const int which = module_container_method(m, "__iter__");
    if (which < 0) return t.brk(f, "DV0016", std::string("iterating a ") + Py_TYPE(m)->tp_name + " module");
    VPtr it = t.make(VK::Iter);
    if (which == 1 && v->flag && !v->items.empty()) {  // a Sequential's slice (ops.cpp): the parent's children
      it->items = v->items;
      out = it;
      return std::nullopt;
    }
    if (which == 4) {  // ParameterDict: its keys, in order
      Ref keys = Ref::steal(PyObject_GetAttrString(m, "_keys"));
      Ref list = keys ? Ref::steal(PySequence_List(keys.get())) : Ref();
      if (!list) return PyErr_Clear(), t.brk(f, "DV0016", "a ParameterDict without its keys");
      for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list.get()); ++i) it->items.push_back(t.constant(Ref::borrow(PyList_GET_ITEM(list.get(), i))));
      out = it;
      return std::nullopt;
    }
    if (which == 3) {  // ParameterList: self[0], self[1], ... as its __getitem__ reads them
      const Py_ssize_t n = PyObject_Length(m);
      if (n < 0) return PyErr_Clear(), t.brk(f, "DV0016", "len() of a ParameterList raised");
      return iterate_by_index(t, f, v, n, out);
    }
    if (const Value* changed = changed_children(t, m)) {  // children the trace added or removed: its own entries
      for (size_t i = 0; i < changed->keys.size() && i < changed->items.size(); ++i)
        it->items.push_back(which == 2 ? t.constant(changed->keys[i]) : changed->items[i]);
      out = it;
      return std::nullopt;
    }
    Ref mods = Ref::steal(PyObject_GetAttrString(m, "_modules"));
    if (!mods || !PyDict_Check(mods.get())) return PyErr_Clear(), t.brk(f, "DV0016", "module is not iterable");
    guard_module_dict_keys(t, f, m, v->source, "_modules");  // a child appended, removed or reordered later
    Py_ssize_t pos = 0;
    PyObject *k, *child;
    while (PyDict_Next(mods.get(), &pos, &k, &child)) {
      if (which == 2) {  // ModuleDict: its keys
        it->items.push_back(t.constant(Ref::borrow(k)));
        continue;
      }
      VPtr mv = t.wrap(Ref::borrow(child), v->source ? Source::module_member(v->source, "_modules", str_of(k)) : nullptr, f);
      if (!mv) return t.brk(f, "DV0013", "unsupported submodule");
      it->items.push_back(mv);
    }
    out = it;
    return std::nullopt;
  }
  static Status getattr(Translator& t, Frame& f, const VPtr& obj, const std::string& name, VPtr& out) {
    PyObject* m = obj->obj.get();
    if (name == "__class__") {  // type(module), guarded as the module's class
      out = t.wrap(Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(m))), obj->source ? Source::attr(obj->source, "__class__") : nullptr, f);
      if (!out) return t.brk(f, "DV0005", "attribute __class__ of module " + std::string(Py_TYPE(m)->tp_name));
      return std::nullopt;
    }
    // As Python looks it up: a data descriptor of the class (a property), the instance's own
    // attribute, another class attribute (a method that shares a submodule's name wins over it),
    // and only then nn.Module.__getattr__'s parameters, buffers and submodules.
    PyObject** dictptr = _PyObject_GetDictPtr(m);
    Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
    PyObject* cls_attr = _PyType_Lookup(Py_TYPE(m), nm.get());
    const bool data_descriptor = cls_attr && Py_TYPE(cls_attr)->tp_descr_set;
    if (dictptr && *dictptr && !data_descriptor) {
      if (PyObject* v = PyDict_GetItemString(*dictptr, name.c_str())) {
        out = t.wrap(Ref::borrow(v), obj->source ? Source::attr(obj->source, name) : nullptr, f);
        if (!out) return t.brk(f, "DV0013", "module attribute " + name + " cannot be traced");
        return std::nullopt;
      }
    }
    if (dictptr && *dictptr && !cls_attr) {
      PyObject* d = *dictptr;
      for (const char* member : {"_parameters", "_buffers", "_modules"}) {
        PyObject* members = PyDict_GetItemString(d, member);
        if (!members || !PyDict_Check(members)) continue;
        if (const Value* changed = changed_member_dict(t, members)) {  // the trace's entries, not the real dict's
          for (size_t i = 0; i < changed->keys.size() && i < changed->items.size(); ++i)
            if (PyUnicode_Check(changed->keys[i].get()) && str_of(changed->keys[i].get()) == name) {
              out = changed->items[i];
              return std::nullopt;
            }
          continue;
        }
        PyObject* v = PyDict_GetItemString(members, name.c_str());
        if (!v) continue;
        out = t.wrap(Ref::borrow(v), obj->source ? Source::module_member(obj->source, member, name) : nullptr, f);
        if (!out && rnn_module(v))
          return t.brk(f, "DV0004", "module " + name + " is a torch.nn." + Py_TYPE(v)->tp_name + ": RNN, GRU and LSTM modules are not traced",
                       "as under torch.compile (torch._dynamo.config.allow_rnn is False), the module runs eagerly");
        if (!out) return t.brk(f, "DV0013", "module member " + name + " cannot be traced");
        return std::nullopt;
      }
    }
    if (cls_attr && PyFunction_Check(cls_attr)) {
      VPtr mv = t.bound_method(obj, Ref::borrow(cls_attr), name);
      out = mv;
      return std::nullopt;
    }
    if (Ref getter = python_getter(cls_attr)) return t.call_python(f, getter, {obj}, out);
    if (cls_attr && is_exact_const(cls_attr)) {
      out = t.constant(Ref::borrow(cls_attr));
      return std::nullopt;
    }
    if (cls_attr && (Py_IS_TYPE(cls_attr, &PyStaticMethod_Type) || Py_IS_TYPE(cls_attr, &PyClassMethod_Type))) {
      // self._relative_position_bucket(...): a staticmethod is its function; a classmethod is
      // bound to the module's class (both fixed by the class the module's guards pin).
      Ref fn = Ref::steal(PyObject_GetAttrString(cls_attr, "__func__"));
      if (fn && PyFunction_Check(fn.get())) {
        if (Py_IS_TYPE(cls_attr, &PyStaticMethod_Type)) {
          out = t.make(VK::Function);
          out->obj = fn;
          return std::nullopt;
        }
        VPtr cls = t.make(VK::Object);
        cls->obj = Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(m)));
        cls->source = obj->source ? Source::attr(obj->source, "__class__") : nullptr;
        out = t.bound_method(cls, fn, name);
        return std::nullopt;
      }
      PyErr_Clear();
    }
    if (cls_attr && !Py_TYPE(cls_attr)->tp_descr_get && obj->source) {
      // Another class attribute that is no descriptor (a tensor, a list or dict of settings, a
      // class): read through the module, as Python does, and guarded so.
      out = t.wrap(Ref::borrow(cls_attr), Source::attr(obj->source, name), f);
      if (!out) return t.brk(f, "DV0013", "class attribute " + name + " of module " + Py_TYPE(m)->tp_name + " cannot be traced");
      return std::nullopt;
    }
    if (name == "__dict__" && dictptr && *dictptr) {
      // self.__dict__ (diffusers' ModelMixin.__getattr__ reads it): the instance dict, its entries
      // read and guarded one by one, as a dict passed in
      out = t.wrap(Ref::borrow(*dictptr), obj->source ? Source::attr(obj->source, "__dict__") : nullptr, f);
      if (!out) return t.brk(f, "DV0005", "attribute __dict__ of module " + std::string(Py_TYPE(m)->tp_name));
      return std::nullopt;
    }
    static PyObject* getattr_name = PyUnicode_InternFromString("__getattr__");
    PyObject* own_getattr = _PyType_Lookup(Py_TYPE(m), getattr_name);
    const bool module_getattr = own_getattr == module_getattr_fn();
    if (!cls_attr && module_getattr)  // not an instance attribute, member or class attribute: nn.Module.__getattr__ raises
      return missing_module_attr(t, f, m, name);
    if (!cls_attr && own_getattr && PyFunction_Check(own_getattr))
      // the class's own __getattr__ (a deprecation shim, a wrapper forwarding to a wrapped model),
      // inlined as Python calls it: when the usual lookup found nothing
      return t.call_python(f, Ref::borrow(own_getattr), {obj, t.constant_steal(PyUnicode_FromString(name.c_str()))}, out);
    return t.brk(f, "DV0005", "attribute " + name + " of module " + Py_TYPE(m)->tp_name);
  }
  static Status call(Translator& t, Frame& f, const VPtr& fn, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
    PyObject* m = fn->obj.get();
    if (std::strcmp(Py_TYPE(m)->tp_name, "OptimizedModule") == 0) {
      // torch.compile(module) made outside: the module it wraps (its _orig_mod), captured with the
      // rest, as TorchDynamo inlines a nested torch.compile
      PyObject** dictptr = _PyObject_GetDictPtr(m);
      // torch.compiler.disable(module) makes one too, whose context disables: a break, and the call
      // runs eagerly with nothing below it captured (its forward is TorchDynamo's disable wrapper)
      PyObject* ctx = dictptr && *dictptr ? PyDict_GetItemString(*dictptr, "dynamo_ctx") : nullptr;
      if (ctx && std::strcmp(Py_TYPE(ctx)->tp_name, "DisableContext") == 0) {
        PyObject* mods = PyDict_GetItemString(*dictptr, "_modules");
        PyObject* orig = mods && PyDict_Check(mods) ? PyDict_GetItemString(mods, "_orig_mod") : nullptr;
        return t.brk(f, "DV0025", std::string("call to module ") + (orig ? Py_TYPE(orig)->tp_name : "?") + ", marked torch.compiler.disable");
      }
      PyObject* mods = dictptr && *dictptr ? PyDict_GetItemString(*dictptr, "_modules") : nullptr;
      PyObject* orig = mods && PyDict_Check(mods) ? PyDict_GetItemString(mods, "_orig_mod") : nullptr;
      VPtr inner = orig ? t.wrap(Ref::borrow(orig), fn->source ? Source::module_member(fn->source, "_modules", "_orig_mod") : nullptr, f)
                        : nullptr;
      if (!inner) return t.brk(f, "DV0004", "call to a module compiled by torch.compile whose module cannot be traced");
      return t.call(f, inner, std::move(args), std::move(kwargs), out);
    }
    static PyObject* call_name = PyUnicode_InternFromString("__call__");
    static PyObject* module_call = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(py().nn_Module.get()), call_name);
    PyObject* own_call = _PyType_Lookup(Py_TYPE(m), call_name);
    if (own_call != module_call && !function_of_torch(own_call)) {  // a user class's own __call__ (which may call forward itself), inlined
      if (!own_call || !PyFunction_Check(own_call))
        return t.brk(f, "DV0004", "module " + std::string(Py_TYPE(m)->tp_name) + " whose __call__ is not Python code");
      VPtr cv = t.make(VK::Function);
      cv->obj = Ref::borrow(own_call);
      return t.inline_call(f, cv, fn, std::move(args), std::move(kwargs), out);
    }
    if (Status s = initialize_lazy_module(t, f, fn, args, kwargs)) return s;
    ModuleHooks hooks;
    if (Status s = t.module_hooks(f, m, fn->source, hooks)) return s;  // (guarded there)
    const bool hooked = !hooks.pre.empty() || !hooks.post.empty();
    // _call_impl calls self.forward: a forward set on the instance (module.forward = patched) is that
    PyObject** dictptr = _PyObject_GetDictPtr(m);
    static PyObject* forward_name = PyUnicode_InternFromString("forward");
    PyObject* own_forward = dictptr && *dictptr ? PyDict_GetItemWithError(*dictptr, forward_name) : nullptr;
    if (own_forward) {
      if (hooked) return t.brk(f, "DV0004", "module " + std::string(Py_TYPE(m)->tp_name) + " with hooks and a forward set on the instance");
      SourcePtr src = fn->source ? Source::attr(fn->source, "forward") : nullptr;
      if (fn->source) {  // guarded as there (a later call without it takes the class's forward)
        SourcePtr dict_src = Source::attr(fn->source, "__dict__");
        if (Guard* g = t.add_guard(GuardKind::DICT_CONTAINS, dict_src, Ref::borrow(forward_name), f, "'forward' in " + dict_src->text()))
          g->length = 1;
      }
      VPtr fwd;
      if (PyMethod_Check(own_forward) && PyMethod_GET_SELF(own_forward) == m && PyFunction_Check(PyMethod_GET_FUNCTION(own_forward))) {
        // types.MethodType(new_forward, module): its function, guarded by identity, bound to the module
        PyObject* func = PyMethod_GET_FUNCTION(own_forward);
        if (src) t.add_guard(GuardKind::ID_MATCH, Source::attr(src, "__func__"), Ref::borrow(func), f,
                             "___check_obj_id(" + src->text() + ".__func__, " + repr_of(func) + ")");
        fwd = t.bound_method(fn, Ref::borrow(func), "forward");
      } else {
        fwd = t.wrap(Ref::borrow(own_forward), src, f);
      }
      if (!fwd) return t.brk(f, "DV0004", "module " + std::string(Py_TYPE(m)->tp_name) + " whose forward set on the instance cannot be traced");
      return t.call(f, fwd, std::move(args), std::move(kwargs), out);
    }
    PyErr_Clear();
    if (fn->source && dictptr && *dictptr) {  // ... and one set after this compile must not be missed
      SourcePtr dict_src = Source::attr(fn->source, "__dict__");
      if (Guard* g = t.add_guard(GuardKind::DICT_CONTAINS, dict_src, Ref::borrow(forward_name), f, "'forward' not in " + dict_src->text()))
        g->length = 0;
    }
    Ref forward = Ref::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(m)), "forward"));
    if (!forward || !PyFunction_Check(forward.get()))
      return PyErr_Clear(), t.brk(f, "DV0004", "module " + std::string(Py_TYPE(m)->tp_name) + " has no Python forward");
    // a forward marked torch.compiler.disable (recursive or not): the module's call runs eagerly
    if (disabled_function(forward.get())) return disabled_call(t, f, forward.get());
    VPtr fv = t.make(VK::Function);
    fv->obj = forward;
    if (!hooked) return t.inline_call(f, fv, fn, std::move(args), std::move(kwargs), out);
    return t.call_with_hooks(f, fn, fv, hooks, std::move(args), std::move(kwargs), out);
  }
  static Status setattr(Translator& t, Frame& f, const VPtr& owner, const std::string& name, const VPtr& value) {
    // A module class's own Python __setattr__ (torch.nn.RNNBase's, one that mirrors a value): inlined,
    // as TorchDynamo does; its super().__setattr__ is nn.Module's own assignment (calls.cpp inline_call).
    static PyObject* setattr_name = PyUnicode_InternFromString("__setattr__");
    PyObject* setattr_fn = owner->obj ? _PyType_Lookup(Py_TYPE(owner->obj.get()), setattr_name) : nullptr;
    if (setattr_fn && PyFunction_Check(setattr_fn) && setattr_fn != py().module_setattr.get()) {
      VPtr ignored;
      return t.call_python(f, Ref::borrow(setattr_fn), {owner, t.constant_steal(PyUnicode_FromString(name.c_str())), value}, ignored);
    }
    return object_setattr(t, f, owner, name, value);
  }
  static constexpr auto call_method = no_answer::call_method;
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    return object_reconstruct(r, v);
  }
};
DV_KIND(NNModule, "module")

// nn.Module.__getattr__(module, name), called by a subclass's own __getattr__ (super().__getattr__(name)):
// the module's parameters, buffers and submodules, read as an attribute read does; else AttributeError
Status module_getattr_call(Translator& t, Frame& f, const VPtr& module, const VPtr& name, VPtr& out) {
  PyObject* m = module->obj.get();
  const std::string n = str_of(name->obj.get());
  PyObject** dictptr = _PyObject_GetDictPtr(m);
  if (dictptr && *dictptr)
    for (const char* member : {"_parameters", "_buffers", "_modules"}) {
      PyObject* members = PyDict_GetItemString(*dictptr, member);
      if (members && PyDict_Check(members) && PyDict_GetItemString(members, n.c_str())) return Kind<VK::NNModule>::getattr(t, f, module, n, out);
    }
  return missing_module_attr(t, f, m, n);
}

}  // namespace dv
