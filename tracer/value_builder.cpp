// The value builder (TorchDynamo's VariableBuilder): a Python object reached from a source (an
// argument, a global, an attribute of one) becomes a Value, with the guards that make reusing the
// capture sound; tensors become graph inputs. It also plans which inputs are symbolic (automatic
// dynamic shapes) from what earlier compiles of the code object saw.
#include "value_builder.h"

#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "codegen.h"
#include "frame_shim.h"
#include "rebuild.h"
#include "pycache.h"
#include "tensor_match.h"
#include "translator.h"
#include "values/kind.h"

namespace dv {

static bool function_is_torch(PyObject* fn) {
  PyObject* mod = PyFunction_GET_MODULE(fn);
  if (!mod || !PyUnicode_Check(mod)) return false;
  std::string m = str_of(mod);
  // torch.nn.modules and torch.distributions are Python over torch operators: inlined. So are the
  // type tests Module._apply makes of a converted parameter (isinstance, type, hasattr).
  if (m == "torch.utils._python_dispatch") {
    const std::string name = str_of(reinterpret_cast<PyFunctionObject*>(fn)->func_name);
    if (name == "is_traceable_wrapper_subclass" || name == "is_traceable_wrapper_subclass_type" ||
        name == "_has_traceable_wrapper_subclass_protocol")
      return false;
  }
  // Gradient clipping and its foreach helpers are Python over torch operators too (a training step).
  if (m == "torch.nn.utils.clip_grad" || m == "torch.utils._foreach_utils" || m.rfind("torch.optim.", 0) == 0) return false;
  // pytree's own code, and the flatten/unflatten functions torch.return_types registers with it
  if (m == "torch.utils._pytree" || m == "torch.return_types" || m == "torch._higher_order_ops.associative_scan") return false;
  return (m == "torch" || m.rfind("torch.", 0) == 0) && m.rfind("torch.nn.modules", 0) != 0 &&
         m.rfind("torch.distributions", 0) != 0;
}

// A key of a dict from the frame that is a value of the trace, known by identity: a tensor (hashed
// by id) or an nn.Module with object's hash and == (an optimizer's state keyed by parameters, a map
// from modules to names). Each is wrapped with a source of its own (keyed_entry).
static bool value_key_object(PyObject* k) {
  if (is_tensor(k)) return true;
  if (PyObject_TypeCheck(k, reinterpret_cast<PyTypeObject*>(py().nn_Module.get())) && hashed_by_identity(Py_TYPE(k))) return true;
  // any other object compared by identity (a user class's instance, an OpOverloadPacket) that is not
  // a key of its own already (a function, a constant)
  return identity_compared(k) && !identity_key(k) && !const_key(k);
}

// An object named by its type and address, for guard and source text (a tensor's or a module's repr
// would print its values or list its children).
static std::string type_and_address(PyObject* o) {
  char at[32];
  std::snprintf(at, sizeof at, "%p", static_cast<void*>(o));
  return std::string("<") + Py_TYPE(o)->tp_name + " at " + at + ">";
}

// A dict's keys in guard text: constants as repr() writes them, others by type and address (a
// tensor's repr would print its values).
static std::string keys_text(PyObject* keys) {
  std::string out = "(";
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(keys); ++i) {
    PyObject* k = PyTuple_GET_ITEM(keys, i);
    if (i) out += ", ";
    if (value_key_object(k)) {
      out += type_and_address(k);
    } else {
      out += repr_of(k);
    }
  }
  return out + (PyTuple_GET_SIZE(keys) == 1 ? ",)" : ")");
}

bool numpy_scalar(PyObject* o) {
  for (PyTypeObject* tp = Py_TYPE(o); tp; tp = tp->tp_base)
    if (std::strcmp(tp->tp_name, "numpy.generic") == 0) return true;
  return false;
}

bool is_const_tree(PyObject* o) {
  if (is_exact_const(o)) return true;
  if (PyTuple_CheckExact(o) || PyFrozenSet_CheckExact(o)) {
    Ref it = Ref::steal(PyObject_GetIter(o));
    if (!it) return PyErr_Clear(), false;
    while (Ref x = Ref::steal(PyIter_Next(it.get())))
      if (!is_const_tree(x.get())) return false;
    return !PyErr_Occurred();
  }
  return false;
}

static Ref meta_like(PyObject* t) {
  // torch.empty_strided(size, stride, dtype=, device='meta', requires_grad=)
  Ref size = Ref::steal(PyObject_CallMethod(t, "size", nullptr));
  Ref stride = Ref::steal(PyObject_CallMethod(t, "stride", nullptr));
  Ref dtype = Ref::steal(PyObject_GetAttrString(t, "dtype"));
  Ref rg = Ref::steal(PyObject_GetAttrString(t, "requires_grad"));
  if (!size || !stride || !dtype || !rg) return {};
  Ref fn = Ref::steal(PyObject_GetAttrString(py().torch.get(), "empty_strided"));
  Ref args = Ref::steal(PyTuple_Pack(2, size.get(), stride.get()));
  Ref kw = Ref::steal(Py_BuildValue("{s:O,s:O,s:O}", "dtype", dtype.get(), "device", py().meta_str.get(), "requires_grad", rg.get()));
  if (!fn || !args || !kw) return {};
  Ref leaf = Ref::steal(PyObject_Call(fn.get(), args.get(), kw.get()));
  if (!leaf || rg.get() != Py_True) return leaf;
  // A tensor autograd made (not a leaf: an optimizer's state after an update with a parameter) is
  // not a leaf in the graph either, so in-place methods on it trace as they run: its example is a
  // clone of the leaf, made with grad on, when that keeps the strides (a dense tensor).
  Ref is_leaf = Ref::steal(PyObject_GetAttrString(t, "is_leaf"));
  if (!is_leaf) return PyErr_Clear(), leaf;
  if (is_leaf.get() == Py_True) return leaf;
  const bool was = grad_mode_enabled();
  set_grad_mode_enabled(true);
  Ref made = Ref::steal(PyObject_CallMethod(leaf.get(), "clone", nullptr));
  set_grad_mode_enabled(was);
  Ref made_stride = made ? Ref::steal(PyObject_CallMethod(made.get(), "stride", nullptr)) : Ref();
  const int same = made_stride ? PyObject_RichCompareBool(made_stride.get(), stride.get(), Py_EQ) : -1;
  if (same != 1) return PyErr_Clear(), leaf;
  return made;
}

namespace {
// An instance of a tuple subclass of Python code (a namedtuple class, `class Shape(tuple)`) that is a
// tuple as the trace models one: no instance attributes (typing.NamedTuple and namedtuple() classes
// have __slots__ = (); a subclass without __slots__ has a __dict__, which must be empty: guarded so
// by the caller), and tuple's own item access, iteration and length (tuple_class: a subclass
// overriding them is an object like any other).
bool namedtuple_instance(PyObject* o) {
  PyTypeObject* tp = Py_TYPE(o);
  if (!PyTuple_Check(o) || !tuple_class(reinterpret_cast<PyObject*>(tp))) return false;
  if (tp->tp_dictoffset != 0) {
    PyObject** dict = _PyObject_GetDictPtr(o);
    if (!dict || (*dict && PyDict_GET_SIZE(*dict) != 0)) return false;
  }
  return true;
}
}  // namespace

VPtr ValueBuilder::wrap(Ref obj, SourcePtr source, Frame& f) {
  std::string key = source ? source->text() : "";
  if (source) {
    auto it = by_source_.find(key);
    if (it != by_source_.end()) return it->second;
  }
  PyObject* o = obj.get();
  // By exact type: the builtin types and torch's value types, one row each.
  using Wrap = VPtr (ValueBuilder::*)(const Ref&, const SourcePtr&, const std::string&, Frame&);
  static const std::unordered_map<PyTypeObject*, Wrap> by_type = [] {
    auto type = [](PyObject* t) { return reinterpret_cast<PyTypeObject*>(t); };
    return std::unordered_map<PyTypeObject*, Wrap>{
        {Py_TYPE(Py_None), &ValueBuilder::wrap_none},
        {&PyBool_Type, &ValueBuilder::wrap_bool},
        {&PyLong_Type, &ValueBuilder::wrap_int},
        {&PyFloat_Type, &ValueBuilder::wrap_float},
        {&PyUnicode_Type, &ValueBuilder::wrap_constant},
        {&PyBytes_Type, &ValueBuilder::wrap_constant},
        {&PyComplex_Type, &ValueBuilder::wrap_constant},
        {&PySlice_Type, &ValueBuilder::wrap_slice},
        {Py_TYPE(Py_Ellipsis), &ValueBuilder::wrap_constant},
        {type(py().torch_dtype.get()), &ValueBuilder::wrap_constant},
        {type(py().torch_device.get()), &ValueBuilder::wrap_constant},
        {type(py().torch_layout.get()), &ValueBuilder::wrap_constant},
        {type(py().torch_memory_format.get()), &ValueBuilder::wrap_constant},
        {type(py().torch_Size.get()), &ValueBuilder::wrap_constant},
        {&PyTuple_Type, &ValueBuilder::wrap_sequence},
        {&PyFrozenSet_Type, &ValueBuilder::wrap_sequence},
        {&PySet_Type, &ValueBuilder::wrap_set},
        {&PyList_Type, &ValueBuilder::wrap_sequence},
        {&PyDict_Type, &ValueBuilder::wrap_dict},
        {&PyFunction_Type, &ValueBuilder::wrap_function},
        {&PyMethod_Type, &ValueBuilder::wrap_method},
        {&PyCFunction_Type, &ValueBuilder::wrap_builtin},
        {&PyTupleIter_Type, &ValueBuilder::wrap_tuple_iterator},
        {&PyRangeIter_Type, &ValueBuilder::wrap_range_iterator},
        {type(ordered_dict_class()), &ValueBuilder::wrap_dict_kind},
        {type(defaultdict_class()), &ValueBuilder::wrap_dict_kind},
        {type(deque_class()), &ValueBuilder::wrap_deque},
    };
  }();
  if (auto row = by_type.find(Py_TYPE(o)); row != by_type.end()) return (this->*row->second)(obj, source, key, f);
  // The rest, by what the exact types cannot name, in this order:
  if (is_tensor(o)) return wrap_tensor(obj, source, key, f);  // torch.Tensor and its subclasses (Parameter ...)
  if (PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(py().nn_Module.get())))  // every nn.Module subclass
    return wrap_module(obj, source, key, f);
  if (std::strcmp(Py_TYPE(o)->tp_name, "numpy.ndarray") == 0)  // by name: NumPy need not be imported
    return wrap_ndarray(obj, source, key, f);
  if (source && numpy_float64(o)) return wrap_numpy_float64(obj, source, key, f);
  if (source && numpy_int64(o)) return wrap_numpy_int64(obj, source, key, f);
  if (source && numpy_scalar(o)) return numpy_constant(obj, source, key, f);
  if (grad_restore_mode(o) >= 0) return wrap_grad_restore(obj, source, key, f);  // a split with-block's exit
  if (autocast_exit_class() && Py_TYPE(o) == reinterpret_cast<PyTypeObject*>(autocast_exit_class()))
    return wrap_autocast_exit(obj, source, key, f);  // a split torch.autocast block's exit
  if (enum_member(o)) return wrap_enum_member(obj, source, key, f);  // Action.NOTIFY, a str Enum's member
  if (PyTuple_Check(o) && !(Py_TYPE(o)->tp_flags & Py_TPFLAGS_HEAPTYPE) &&
      std::strncmp(Py_TYPE(o)->tp_name, "torch.return_types.", 19) == 0)  // max(dim=)'s (values, indices) ...
    return wrap_sequence(obj, source, key, f);
  if (namedtuple_instance(o)) {  // a namedtuple, typing.NamedTuple or other tuple subclass: a tuple of its class
    if (Py_TYPE(o)->tp_dictoffset != 0) {
      if (!source) return wrap_object(obj, source, key, f);
      SourcePtr dict = Source::attr(source, "__dict__");
      if (Guard* g = t_.add_guard(GuardKind::LENGTH_CHECK, dict, {}, f, "len(" + dict->text() + ") == 0")) g->length = 0;
    }
    VPtr v = wrap_sequence(obj, source, key, f);
    if (v && v->kind == VK::Tuple && v->obj) {
      v->self = wrap(Ref::borrow(v->obj.get()), source ? Source::attr(source, "__class__") : nullptr, f);
      if (!v->self) return nullptr;
    }
    return v;
  }
  if (source && PyDict_Check(o) && plain_class(Py_TYPE(o)))  // a dict subclass of Python code: ModelOutput ...
    if (VPtr v = wrap_dict_instance(obj, source, key, f); v || !ok_) return v;
  if (source && PyList_Check(o) && plain_class(Py_TYPE(o)))  // a list subclass of Python code
    if (VPtr v = wrap_list_instance(obj, source, key, f); v || !ok_) return v;
  return wrap_object(obj, source, key, f);  // modules, classes, builtins, torch functions, other objects
}


// One mutable container reached under a second source (a list shared by two dicts): the same value,
// so that a change through one is seen through the other, while both stay one object. Null with ok_
// set: not seen before; null with ok_ cleared: it cannot be traced.
VPtr ValueBuilder::shared_container(PyObject* o, const SourcePtr& source, const std::string& key, Frame& f) {
  ok_ = true;
  if (!source) return nullptr;
  auto seen = containers_seen_.find(o);
  if (seen == containers_seen_.end()) return nullptr;
  const VPtr first = seen->second.second;
  if (!first || !first->source) return ok_ = false, nullptr;
  if (Guard* g = t_.add_guard(GuardKind::TENSOR_ALIASING, source, {}, f, key + " is " + first->source->text())) {
    g->length = 1;
    g->refs = {SymRef{first->source}, SymRef{source}};
  }
  by_source_[key] = first;
  return first;
}

VPtr ValueBuilder::remember(const SourcePtr& source, const std::string& key, VPtr val) {
  val->source = source;
  if (source) by_source_[key] = val;
  if (t_.obs_ && !val->announced) t_.announce(val);
  return val;
}

// A tensor (any torch.Tensor subclass): a graph input, guarded by TENSOR_MATCH; a second source of one
// tensor is an alias guard.
VPtr ValueBuilder::wrap_tensor(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  PyObject* o = obj.get();
  VPtr v;
  auto alias = tensor_by_id_.find(o);
  if (alias != tensor_by_id_.end()) {
    // One tensor under a second source: the capture holds only while both sources stay one object.
    const OutputGraph& og = t_.output;
    for (size_t i = 0; source && i < og.inputs.size(); ++i) {
      if (og.inputs[i].second != alias->second->node) continue;
      const SourcePtr& first = og.inputs[i].first;
      if (Guard* g = t_.add_guard(GuardKind::TENSOR_ALIASING, source, {}, f, key + " is " + first->text())) {
        g->length = 1;
        g->refs = {SymRef{first}, SymRef{source}};
      }
      break;
    }
    return remember(source, key, alias->second);
  }
  if (!source) return nullptr;  // a tensor that cannot be reloaded: the caller breaks
  plan_reached(o, key);
  TensorSpec spec;
  tensor_spec(o, spec);
  Ref example;
  if (t_.output.dynamic()) {
    // A fake tensor of this compile's fake mode, symbolic in the planned dims (sizes 0 and 1 stay
    // static: TorchDynamo's 0/1 specialisation).
    Ref dims = Ref::steal(PySet_New(nullptr));
    auto plan = dyn_dims_.find(key);
    for (size_t d = 0; plan != dyn_dims_.end() && d < spec.sizes.size() && d < 64; ++d)
      if ((plan->second >> d & 1) && spec.sizes[d] >= 2) PySet_Add(dims.get(), Ref::steal(PyLong_FromSize_t(d)).get());
    Ref stride_dims = Ref::steal(PySet_New(nullptr));
    auto strides = dyn_strides_.find(key);
    for (size_t d = 0; strides != dyn_strides_.end() && d < spec.strides.size() && d < 64; ++d)
      if (strides->second >> d & 1) PySet_Add(stride_dims.get(), Ref::steal(PyLong_FromSize_t(d)).get());
    // (a 0-d int tensor gets a slot too: the graph may read it as a number, a symbol guards read)
    const int slot = PySet_GET_SIZE(dims.get()) > 0 || PySet_GET_SIZE(stride_dims.get()) > 0 || item_input_tensor(o)
                         ? t_.output.sym_slot(source) : -1;
    Ref r = Ref::steal(PyObject_CallMethod(t_.output.shapes(), "tensor", "OOsiiiO", o, dims.get(), key.c_str(), slot,
                                               t_.cur_step_, t_.root_ ? t_.current_line(f) : -1, stride_dims.get()));
    if (!r || !PyTuple_Check(r.get()) || PyTuple_GET_SIZE(r.get()) != 3) return nullptr;
    example = Ref::borrow(PyTuple_GET_ITEM(r.get(), 0));
    spec.dyn_sizes = PyLong_AsUnsignedLongLongMask(PyTuple_GET_ITEM(r.get(), 1));
    spec.dyn_strides = PyLong_AsUnsignedLongLongMask(PyTuple_GET_ITEM(r.get(), 2));
  } else {
    example = meta_like(o);
  }
  if (!example) return nullptr;
  if (Guard* g = t_.add_guard(GuardKind::TENSOR_MATCH, source, {}, f, "check_tensor(" + key + ", " + tensor_spec_text(spec) + ")"))
    g->tensor = spec;
  v = t_.make(VK::Tensor);
  v->obj = example;
  v->device = Ref::steal(PyObject_GetAttrString(o, "device"));
  v->node = t_.output.add_input(source, v->obj, obj, t_.cur_step_);
  if (t_.obs_) t_.obs_->on_graph_node(GraphNodeEvent{t_.id_, v->node, t_.cur_step_, "placeholder", placeholder_name(*source)});
  tensor_by_id_[o] = v;
  return remember(source, key, v);
}

// None
VPtr ValueBuilder::wrap_none(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  if (source) t_.add_guard(GuardKind::NONE_MATCH, source, {}, f, key + " is None");
  VPtr v = t_.make(VK::Const);
  v->obj = obj;
  return remember(source, key, v);
}

// True / False
VPtr ValueBuilder::wrap_bool(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  PyObject* o = obj.get();
  VPtr v;
  if (source) t_.add_guard(GuardKind::ID_MATCH, source, obj, f, key + " is " + repr_of(o));
  v = t_.make(VK::Const);
  v->obj = obj;
  return remember(source, key, v);
}

// An int or float held by an object, container or closure from the frame: compared with earlier
// compiles as it is read (the frame's own arguments were, by plan_dynamic).
void ValueBuilder::plan_number(const Ref& obj, const SourcePtr& source, const std::string& key) {
  if (source && (PyFloat_CheckExact(obj.get()) || numpy_float64(obj.get()))) {
    // a float from any source -- a global, a module's attribute (a temperature set between calls),
    // a config's -- as TorchDynamo unspecializes every float it reads (ints of globals and modules
    // it keeps static)
    const Source* root = source.get();
    while (root->base) root = root->base.get();
    if (root->kind != Source::Kind::RandomDraw) plan_reached(obj.get(), key);
    return;
  }
  if (source && source->base && (source->kind == Source::Kind::Attr || source->kind == Source::Kind::Item)) {
    // an int held by an object or container from the frame (a sliding-window cache's
    // cumulative_length): compared with earlier compiles as it is read -- but a module's own ints
    // (its sizes and settings) stay constants, as TorchDynamo keeps nn.Module properties static
    auto parent = by_source_.find(source->base->text());
    // (a class attribute read through type(obj), L['obj'].__class__.count: as obj's own ints)
    // (an attribute of a dict or list subclass's object, read from its __dict__: L['obj'].__dict__['n'])
    if (parent == by_source_.end() && source->base->kind == Source::Kind::Attr &&
        (source->base->name == "__class__" || source->base->name == "__dict__") && source->base->base)
      parent = by_source_.find(source->base->base->text());
    if (parent != by_source_.end() && parent->second->kind != VK::NNModule) plan_reached(obj.get(), key);
  } else if (source && (source->kind == Source::Kind::Closure || source->kind == Source::Kind::FnClosure)) {
    // an int in a closure cell, the frame's own or a function's it was given (a lambda closing over
    // a step count): a local source, as TorchDynamo takes it, so compared with earlier compiles too --
    // but not one reached from a global (TorchDynamo specializes those)
    const Source* root = source.get();
    while (root->base) root = root->base.get();
    if (root->kind == Source::Kind::Local || root->kind == Source::Kind::Closure) plan_reached(obj.get(), key);
  }
}

// An int: symbolic when it changed between compiles, else a constant.
VPtr ValueBuilder::wrap_int(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  plan_number(obj, source, key);
  if (!t_.output.dynamic() || !source || !dyn_ints_.count(key)) return wrap_constant(obj, source, key, f);
  // An int that changed between compiles: a graph input of type SymInt.
  PyObject* o = obj.get();
  const int slot = t_.output.sym_slot(source);
  Ref s = Ref::steal(PyObject_CallMethod(t_.output.shapes(), "symint", "Osiii", o, key.c_str(), slot, t_.cur_step_,
                                              t_.root_ ? t_.current_line(f) : -1));
  if (!s) return nullptr;
  t_.add_guard(GuardKind::TYPE_MATCH, source, Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o))), f,
            "___check_type_id(" + key + ", int)");
  return int_input(obj, source, key, s);
}

// The int `obj` from `source` as the graph takes it: a placeholder whose example value is the SymInt
// `sym` DynamicShapes made for it.
VPtr ValueBuilder::int_input(const Ref& obj, const SourcePtr& source, const std::string& key, const Ref& sym) {
  VPtr v = t_.make(VK::Sym);
  v->obj = sym;
  v->node = t_.output.add_input(source, sym, obj, t_.cur_step_);
  if (t_.obs_) t_.obs_->on_graph_node(GraphNodeEvent{t_.id_, v->node, t_.cur_step_, "placeholder", placeholder_name(*source)});
  return remember(source, key, v);
}

// A float: symbolic when it changed between compiles (TorchDynamo's specialize_float=False), else a
// constant. The graph takes it as a 0-d float64 tensor, torch._as_tensor_fullprec(x), made by the
// transformed code, and reads it with item(): the value is a SymFloat. Guarded by type and not NaN
// (a NaN or an infinity stays a constant, as TorchDynamo specializes them; so does a zero: the
// ShapeEnv would specialize -0.0 as 0.0, and its guard s == 0.0 would take either zero).
VPtr ValueBuilder::wrap_float(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  plan_number(obj, source, key);
  PyObject* o = obj.get();
  const double value = PyFloat_AS_DOUBLE(o);
  if (!t_.output.dynamic() || !source || !dyn_ints_.count(key) || !std::isfinite(value) || value == 0.0 || static_floats)
    return wrap_constant(obj, source, key, f);
  static PyObject* fullprec = kept_attr("torch", "_as_tensor_fullprec");
  if (!fullprec) return PyErr_Clear(), wrap_constant(obj, source, key, f);
  const int slot = t_.output.sym_slot(source);
  Ref pair = Ref::steal(PyObject_CallMethod(t_.output.shapes(), "symfloat", "Osiii", o, key.c_str(), slot, t_.cur_step_,
                                                 t_.root_ ? t_.current_line(f) : -1));
  if (!pair || !PyTuple_Check(pair.get()) || PyTuple_GET_SIZE(pair.get()) != 2) return PyErr_Clear(), wrap_constant(obj, source, key, f);
  t_.add_guard(GuardKind::TYPE_MATCH, source, Ref::borrow(reinterpret_cast<PyObject*>(&PyFloat_Type)), f,
               "___check_type_id(" + key + ", float)");
  return float_input(obj, source, key, pair.get(), fullprec);
}

// The float `obj` from `source` as the graph takes it: a 0-d float64 tensor input, made by the
// transformed code with `fullprec` (torch._as_tensor_fullprec), read with item(). `made`: the
// (fake tensor, SymFloat) pair DynamicShapes made for it.
VPtr ValueBuilder::float_input(const Ref& obj, const SourcePtr& source, const std::string& key, PyObject* made, PyObject* fullprec) {
  SourcePtr as_tensor = Source::as_tensor(source, Ref::borrow(fullprec));
  const int input = t_.output.add_input(as_tensor, Ref::borrow(PyTuple_GET_ITEM(made, 0)), obj, t_.cur_step_);
  if (t_.obs_) t_.obs_->on_graph_node(GraphNodeEvent{t_.id_, input, t_.cur_step_, "placeholder", placeholder_name(*as_tensor)});
  VPtr v = t_.make(VK::Sym);
  v->obj = Ref::borrow(PyTuple_GET_ITEM(made, 1));
  ArgTree arg;
  arg.kind = ArgTree::Kind::Node;
  arg.node = input;
  v->node = t_.output.graph.add_call_method("item", {arg}, {}, v->obj, t_.cur_step_);
  if (t_.obs_) t_.obs_->on_graph_node(GraphNodeEvent{t_.id_, v->node, t_.cur_step_, "call_method", "item"});
  return remember(source, key, v);
}

// A NumPy scalar (np.float32(2.0)) taken as a constant: an immutable number the graph takes as one
// (Kind<VK::Object>::graph_arg), so guarded by its type and value, as a Python number is.
VPtr ValueBuilder::numpy_constant(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  t_.add_guard(GuardKind::EQUALS_MATCH, source, obj, f, key + " == " + repr_of(obj.get()));
  VPtr v = t_.make(VK::Object);
  v->obj = obj;
  return remember(source, key, v);
}

// A numpy.float64 (a mixup `lam` drawn with np.random.beta and passed each step): a float that
// changed between compiles is taken as a float is (wrap_float: a 0-d float64 tensor input read
// with item()), in a value that stays a NumPy scalar wherever eager can tell (values/np_scalar.cpp);
// else, or NaN, an infinity or a zero, a constant guarded by its value (Kind<VK::Object>::graph_arg
// passes it to an operator as the number), as any NumPy scalar.
VPtr ValueBuilder::wrap_numpy_float64(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  plan_number(obj, source, key);
  PyObject* o = obj.get();
  const double value = PyFloat_AS_DOUBLE(o);
  static PyObject* fullprec = kept_attr("torch", "_as_tensor_fullprec");
  Ref pair;
  if (t_.output.dynamic() && dyn_ints_.count(key) && std::isfinite(value) && value != 0.0 && !static_floats && fullprec) {
    const int slot = t_.output.sym_slot(source);
    pair = Ref::steal(PyObject_CallMethod(t_.output.shapes(), "symfloat", "Osiii", o, key.c_str(), slot, t_.cur_step_,
                                          t_.root_ ? t_.current_line(f) : -1));
    if (!pair || !PyTuple_Check(pair.get()) || PyTuple_GET_SIZE(pair.get()) != 2) pair = (PyErr_Clear(), Ref());
  }
  if (!pair) return numpy_constant(obj, source, key, f);
  PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(o));
  t_.add_guard(GuardKind::TYPE_MATCH, source, Ref::borrow(type), f, "___check_type_id(" + key + ", numpy.float64)");
  VPtr sym = float_input(obj, source, key, pair.get(), fullprec);
  return remember(source, key, np_scalar_value(t_, sym, type));
}

// A numpy.int64 (a step or an index taken from np.arange, np.random.randint): an int that changed
// between compiles is taken as an int is (a SymInt graph input, given int(arg) by the transformed
// code, its symbol read from the argument by the guards), in a value that stays a NumPy scalar
// wherever eager can tell (values/np_scalar.cpp); else a constant guarded by its value.
VPtr ValueBuilder::wrap_numpy_int64(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  plan_number(obj, source, key);
  PyObject* o = obj.get();
  Ref value = Ref::steal(PyNumber_Index(o));
  if (!value) return PyErr_Clear(), nullptr;
  Ref sym;
  if (t_.output.dynamic() && dyn_ints_.count(key)) {
    const int slot = t_.output.sym_slot(source);
    sym = Ref::steal(PyObject_CallMethod(t_.output.shapes(), "symint", "Osiii", value.get(), key.c_str(), slot, t_.cur_step_,
                                         t_.root_ ? t_.current_line(f) : -1));
    if (!sym) PyErr_Clear();
  }
  if (!sym) return numpy_constant(obj, source, key, f);
  PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(o));
  t_.add_guard(GuardKind::TYPE_MATCH, source, Ref::borrow(type), f, "___check_type_id(" + key + ", numpy.int64)");
  SourcePtr as_int = Source::as_tensor(source, Ref::borrow(reinterpret_cast<PyObject*>(&PyLong_Type)));  // int(arg)
  VPtr v = t_.make(VK::Sym);
  v->obj = sym;
  v->node = t_.output.add_input(as_int, sym, value, t_.cur_step_);
  if (t_.obs_) t_.obs_->on_graph_node(GraphNodeEvent{t_.id_, v->node, t_.cur_step_, "placeholder", placeholder_name(*as_int)});
  return remember(source, key, np_scalar_value(t_, v, type));
}

// A number drawn by Python's random module and read by the code (x * random.uniform(0.5, 1.5)): a
// graph input, drawn by the transformed code before its graph, as TorchDynamo passes its random
// values. Symbolic and unguarded -- its value is known only when the compiled code runs -- so a step
// that would guard it (a branch on it, a size made of it) breaks instead (Translator::run_frame). A
// float is given as a 0-d float64 tensor read with item(), as a float input; an int as a SymInt.
// Null (the caller breaks): another type, or no dynamic shapes (dynamic=False; in a static capture
// the frame is captured again with them, as for a tensor whose sizes changed).
VPtr ValueBuilder::wrap_draw(const Ref& obj, const SourcePtr& source, Frame& f) {
  PyObject* o = obj.get();
  const bool is_float = PyFloat_CheckExact(o);
  if (!source || !(is_float || PyLong_CheckExact(o)) || dynamic_mode == DynamicMode::Off || (is_float && static_floats)) return nullptr;
  if (!t_.output.dynamic()) return wants_dynamic_ = true, nullptr;  // (captured again with fake tensors)
  static PyObject* fullprec = kept_attr("torch", "_as_tensor_fullprec");
  if (is_float && !fullprec) return PyErr_Clear(), nullptr;
  const std::string key = source->text();
  const int slot = t_.output.sym_slot(source);
  Ref made = Ref::steal(PyObject_CallMethod(t_.output.shapes(), "drawn", "Osiii", o, key.c_str(), slot, t_.cur_step_,
                                            t_.root_ ? t_.current_line(f) : -1));
  if (!made || !PyTuple_Check(made.get()) || PyTuple_GET_SIZE(made.get()) != 2) return PyErr_Clear(), nullptr;
  if (is_float) return float_input(obj, source, key, made.get(), fullprec);
  return int_input(obj, source, key, Ref::borrow(PyTuple_GET_ITEM(made.get(), 1)));
}

// Immutable constants (numbers, strings, dtypes, devices, torch.Size, slices) and tuples/frozensets of
// them: a Const guarded by value.
VPtr ValueBuilder::wrap_constant(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  PyObject* o = obj.get();
  VPtr v;
  if (PyTuple_Check(o) && dynamic_items(o, source, key)) return wrap_sequence(obj, source, key, f);  // a torch.Size
  if (source) {
    t_.add_guard(GuardKind::EQUALS_MATCH, source, obj, f, key + " == " + repr_of(o));
  }
  v = t_.make(VK::Const);
  v->obj = obj;
  return remember(source, key, v);
}

// A slice: a constant, unless a bound is not (slice(i[0], None) made before a break, its start a
// tensor): then a Slice value of its bounds, each read from the slice, as one made in the trace.
VPtr ValueBuilder::wrap_slice(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  auto* sl = reinterpret_cast<PySliceObject*>(obj.get());
  PyObject* parts[] = {sl->start, sl->stop, sl->step};
  if (std::all_of(std::begin(parts), std::end(parts), [](PyObject* p) { return is_const_tree(p); }))
    return wrap_constant(obj, source, key, f);
  if (!source) return wrap_object(obj, source, key, f);
  t_.add_guard(GuardKind::TYPE_MATCH, source, Ref::borrow(reinterpret_cast<PyObject*>(&PySlice_Type)), f,
               "___check_type_id(" + key + ", slice)");
  VPtr v = t_.make(VK::Slice);
  const char* names[] = {"start", "stop", "step"};
  for (int i = 0; i < 3; ++i) {
    VPtr part = wrap(Ref::borrow(parts[i]), Source::attr(source, names[i]), f);
    if (!part) return nullptr;
    v->items.push_back(part);
  }
  return remember(source, key, v);
}

// A set from the frame (an argument, a config's attribute, a global) whose items are constants: the
// trace works on a private copy (a Const, as a set made in the trace is), guarded by value; its
// methods and operators run on the copy, and the transformed code writes the copy's final items
// back into the real set when the trace changed them (codegen.cpp), as TorchDynamo replays a
// SetVariable's mutations. It is rebuilt from its source, so it stays the caller's object. A set
// holding anything else is an object by identity whose methods break (object_getattr).
VPtr ValueBuilder::wrap_set(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  PyObject* o = obj.get();
  if (!source) return wrap_object(obj, source, key, f);
  Ref it = Ref::steal(PyObject_GetIter(o));
  bool constants = static_cast<bool>(it);
  while (Ref x = it && constants ? Ref::steal(PyIter_Next(it.get())) : Ref()) constants = is_const_tree(x.get());
  if (PyErr_Occurred()) return PyErr_Clear(), wrap_object(obj, source, key, f);
  if (!constants) return wrap_set_of_objects(obj, source, key, f);
  if (VPtr first = shared_container(o, source, key, f); first || !ok_) return first;
  Ref copy = Ref::steal(PySet_New(o));
  if (!copy) return PyErr_Clear(), wrap_object(obj, source, key, f);
  Ref expected = Ref::steal(PySet_New(o));  // what the guard compares with (the copy changes)
  if (!expected) return PyErr_Clear(), wrap_object(obj, source, key, f);
  t_.add_guard(GuardKind::EQUALS_MATCH, source, expected, f, key + " == " + repr_of(o));
  VPtr v = t_.make(VK::Const);
  v->obj = copy;
  containers_seen_[o] = {obj, v};
  t_.output.side_effects.outside_sets.push_back({v, expected});
  return remember(source, key, v);
}

// A set from the frame holding objects that hash and compare by identity (modules, functions, plain
// objects; constants among them): a Set (values/set.cpp) whose members are those objects, guarded
// equal to the set it was (by identity: no Python runs) and read only. Any other set stays an object.
VPtr ValueBuilder::wrap_set_of_objects(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  PyObject* o = obj.get();
  Ref it = Ref::steal(PyObject_GetIter(o));
  std::vector<Ref> members;
  while (Ref x = it ? Ref::steal(PyIter_Next(it.get())) : Ref()) {
    if (!(is_const_tree(x.get()) || (hashed_by_identity(Py_TYPE(x.get())) && !is_tensor(x.get())))) return wrap_object(obj, source, key, f);
    members.push_back(x);
  }
  if (!it || PyErr_Occurred()) return PyErr_Clear(), wrap_object(obj, source, key, f);
  if (VPtr first = shared_container(o, source, key, f); first || !ok_) return first;
  Ref expected = Ref::steal(PySet_New(o));
  if (!expected) return PyErr_Clear(), wrap_object(obj, source, key, f);
  t_.add_guard(GuardKind::EQUALS_MATCH, source, expected, f, key + " == {" + std::to_string(members.size()) + " members by identity}");
  VPtr v = t_.make(VK::Set);
  containers_seen_[o] = {obj, v};
  for (const Ref& x : members) {
    VPtr xv = is_const_tree(x.get()) ? t_.constant(x) : wrap(x, Source::held(x, type_and_address(x.get())), f);
    if (!xv) return nullptr;
    v->items.push_back(xv);
  }
  return remember(source, key, v);
}

// A collections.deque from the frame: a List of the deque class (deque.cpp), guarded by its maxlen,
// length and items as a list is; written back after the graph when the trace changed it. One made
// elsewhere (no source) stays an object.
VPtr ValueBuilder::wrap_deque(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  PyObject* o = obj.get();
  if (!source) return wrap_object(obj, source, key, f);
  if (VPtr first = shared_container(o, source, key, f); first || !ok_) return first;
  t_.add_guard(GuardKind::TYPE_MATCH, source, Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o))), f,
               "___check_type_id(" + key + ", collections.deque)");
  Ref maxlen = Ref::steal(PyObject_GetAttrString(o, "maxlen"));
  if (!maxlen) return PyErr_Clear(), wrap_object(obj, source, key, f);
  SourcePtr maxlen_src = Source::attr(source, "maxlen");
  if (maxlen.get() == Py_None) t_.add_guard(GuardKind::NONE_MATCH, maxlen_src, {}, f, maxlen_src->text() + " is None");
  else t_.add_guard(GuardKind::EQUALS_MATCH, maxlen_src, maxlen, f, maxlen_src->text() + " == " + repr_of(maxlen.get()));
  const Py_ssize_t n = PyObject_Length(o);
  if (Guard* g = t_.add_guard(GuardKind::LENGTH_CHECK, source, {}, f, "len(" + key + ") == " + std::to_string(n))) g->length = n;
  VPtr v = t_.make(VK::List);
  v->obj = Ref::borrow(deque_class());
  v->defaults = t_.constant(maxlen);
  containers_seen_[o] = {obj, v};
  for (Py_ssize_t i = 0; i < n; ++i) {
    Ref item = Ref::steal(PySequence_GetItem(o, i));
    VPtr iv = item ? wrap(item, Source::item(source, Ref::steal(PyLong_FromSsize_t(i))), f) : nullptr;
    if (!iv) return PyErr_Clear(), nullptr;
    v->items.push_back(iv);
  }
  return remember(source, key, v);
}

// An Enum's member (every instance of an Enum class is one, a singleton): a constant, as TorchDynamo's
// EnumVariable, guarded by identity. `==`, `in` and hashing are then Python's own: a str or int Enum
// compares equal to its value, a plain one only to itself.
VPtr ValueBuilder::wrap_enum_member(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  if (source) t_.add_guard(GuardKind::ID_MATCH, source, obj, f, "___check_obj_id(" + key + ", " + repr_of(obj.get()) + ")");
  VPtr v = t_.make(VK::Const);
  v->obj = obj;
  return remember(source, key, v);
}

// A tuple of constants (a torch.Size too) from the frame, an int item of which changed between
// compiles (a resume function's `input_shape` or `hidden_shape` at a new length): read item by item,
// as TorchDynamo's tuple items each with its automatic dynamic, rather than guarded whole.
bool ValueBuilder::dynamic_items(PyObject* o, const SourcePtr& source, const std::string& key) const {
  if (!source || !t_.output.dynamic() || !PyTuple_Check(o)) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o) && i < 64; ++i)
    if ((PyLong_CheckExact(PyTuple_GET_ITEM(o, i)) || PyFloat_CheckExact(PyTuple_GET_ITEM(o, i))) &&
        dyn_ints_.count(key + "[" + std::to_string(i) + "]"))
      return true;
  return false;
}

// A source that is the frame's argument or an item of one, at any depth (L['t'], L['t'][1]): no
// attribute on the way.
static bool argument_item(const SourcePtr& source) {
  const Source* s = source.get();
  while (s && s->kind == Source::Kind::Item && !s->storage) s = s->base.get();
  return s && s->kind == Source::Kind::Local;
}

// Tuples and lists, item by item (a list from the frame is written back when mutated). A tuple of
// constants is one constant (guarded whole by value), but for an argument's: lazy like any other,
// its items guarded as they are read, as TorchDynamo's tuple items.
VPtr ValueBuilder::wrap_sequence(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  PyObject* o = obj.get();
  VPtr v;
  if (source && PyTuple_CheckExact(o))  // the floats of a tuple from anywhere (an optimizer's betas, which
    // OneCycleLR changes every step): compared with earlier compiles item by item, as plan_number does
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o) && i < 64; ++i)
      if (PyFloat_CheckExact(PyTuple_GET_ITEM(o, i))) plan_number(Ref::borrow(PyTuple_GET_ITEM(o, i)), Source::item(source, Ref::steal(PyLong_FromSsize_t(i))), key + "[" + std::to_string(i) + "]");
  if (is_const_tree(o) && !dynamic_items(o, source, key) && !(PyTuple_CheckExact(o) && argument_item(source)))
    return wrap_constant(obj, source, key, f);
  if (PyFrozenSet_CheckExact(o)) return wrap_object(obj, source, key, f);  // of non-constants: by identity
  if (VPtr first = shared_container(o, source, key, f); first || !ok_) return first;
  const bool is_list = PyList_CheckExact(o);
  v = t_.make(is_list ? VK::List : VK::Tuple);
  if (!is_list && !PyTuple_CheckExact(o)) {  // a torch.return_types result: its class, and its fields' names
    v->obj = Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o)));
    Ref fields = Ref::steal(PyObject_GetAttrString(v->obj.get(), "__match_args__"));
    if (fields && PyTuple_Check(fields.get()))
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fields.get()); ++i) v->keys.push_back(Ref::borrow(PyTuple_GET_ITEM(fields.get(), i)));
    PyErr_Clear();
  }
  if (source) {
    t_.add_guard(GuardKind::TYPE_MATCH, source, Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o))), f,
              "___check_type_id(" + key + ", " + Py_TYPE(o)->tp_name + ")");
    // From the frame: lazy (TorchDynamo's LazyVariableTracker), its length and items wrapped and
    // guarded only once something reads it (realize); a list or tuple only passed along (returned,
    // stored in a local, handed to an inlined function that does not read it) is rebuilt from its
    // source and adds no guard on its items.
    v->lazy = obj;
    any_lazy_ = true;
    if (is_list) containers_seen_[o] = {obj, v};
    return remember(source, key, v);
  }
  const Py_ssize_t n = is_list ? PyList_GET_SIZE(o) : PyTuple_GET_SIZE(o);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = is_list ? PyList_GET_ITEM(o, i) : PyTuple_GET_ITEM(o, i);
    VPtr iv = wrap(Ref::borrow(item), nullptr, f);
    if (!iv) return nullptr;
    v->items.push_back(iv);
  }
  return remember(source, key, v);
}

Py_ssize_t ValueBuilder::sequence_length(const VPtr& v, Frame& f) {
  PyObject* o = v->lazy.get();
  const Py_ssize_t n = PyList_CheckExact(o) ? PyList_GET_SIZE(o) : PyTuple_GET_SIZE(o);
  if (v->known_len) return n;  // guarded already (the length cannot change while lazy)
  if (Guard* g = t_.add_guard(GuardKind::LENGTH_CHECK, v->source, {}, f, "len(" + v->source->text() + ") == " + std::to_string(n)))
    g->length = n;
  v->known.assign(static_cast<size_t>(n), nullptr);
  v->known_len = true;
  return n;
}

Py_ssize_t ValueBuilder::dict_length(const VPtr& d, Frame& f) {
  PyObject* o = d->lazy.get();
  if (!o || d->kind != VK::Dict || !d->written.empty() || !PyDict_Check(o)) return -1;
  const Py_ssize_t n = PyDict_GET_SIZE(o);
  if (d->known_len) return n;  // guarded already (the dict cannot change while lazy)
  std::vector<Ref> keys;
  Py_ssize_t pos = 0;
  PyObject *k, *val;
  while (PyDict_Next(o, &pos, &k, &val)) {
    if (!PyUnicode_CheckExact(k) && !PyLong_CheckExact(k)) return -1;
    keys.push_back(Ref::borrow(k));
  }
  const std::string text = d->source->text();
  if (Guard* g = t_.add_guard(GuardKind::LENGTH_CHECK, d->source, {}, f, "len(" + text + ") == " + std::to_string(n)))
    g->length = n;
  for (const Ref& key : keys)
    if (Guard* g = t_.add_guard(GuardKind::DICT_CONTAINS, d->source, key, f, repr_of(key.get()) + " in " + text))
      g->length = 1;
  d->known_len = true;
  return n;
}

VPtr ValueBuilder::sequence_item(const VPtr& v, Py_ssize_t i, Frame& f) {
  const Py_ssize_t n = sequence_length(v, f);
  if (i < 0 || i >= n) return nullptr;
  VPtr& slot = v->known[static_cast<size_t>(i)];
  if (slot) return slot;
  PyObject* o = v->lazy.get();
  const bool is_list = PyList_CheckExact(o);
  Ref item = Ref::borrow(is_list ? PyList_GET_ITEM(o, i) : PyTuple_GET_ITEM(o, i));
  auto seen = containers_seen_.find(o);
  if (seen != containers_seen_.end()) seen->second.second = nullptr;  // a list inside itself: not traced
  VPtr iv = leaf(item, Source::item(v->source, Ref::steal(PyLong_FromSsize_t(i))), f);
  if (seen != containers_seen_.end()) seen->second.second = v;
  if (iv) v->known[static_cast<size_t>(i)] = iv;  // (wrap may have realized v: then known is moot)
  return iv;
}

// A lazy list or tuple read: its length guarded and its items wrapped from their sources.
bool ValueBuilder::realize_sequence(const VPtr& v, Frame& f, bool read_items) {
  const Py_ssize_t n = sequence_length(v, f);
  std::vector<VPtr> items;
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!v->lazy) return true;  // an item's wrap realized it (an alias of it inside)
    VPtr iv = sequence_item(v, i, f);
    if (!iv) return false;
    items.push_back(iv);
  }
  if (!v->lazy) return true;
  v->items = std::move(items);
  v->known.clear();
  v->lazy = Ref();
  if (read_items) {
    if (!realize_items(v->items, f)) return false;
    settle(v);
  }
  return true;
}

// A tuple argument of constants read whole: a constant again, as wrap_constant makes one (its
// length's and items' guards hold it as a guard on the whole would), so that what takes constant
// tuples (dict views over them, sets, torch's size arguments) takes it as before.
void ValueBuilder::settle(const VPtr& v) {
  if (v->kind != VK::Tuple || v->lazy || v->obj || !v->source || !argument_item(v->source)) return;
  for (const VPtr& x : v->items)
    if (!x || x->kind != VK::Const || !x->obj) return;
  Ref t = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(v->items.size())));
  if (!t) return PyErr_Clear();
  for (size_t i = 0; i < v->items.size(); ++i) PyTuple_SET_ITEM(t.get(), static_cast<Py_ssize_t>(i), Py_NewRef(v->items[i]->obj.get()));
  v->kind = VK::Const;
  v->obj = std::move(t);
  v->items.clear();
  v->known.clear();
  v->known_len = false;
}

bool ValueBuilder::realize_items(const std::vector<VPtr>& items, Frame& f) {
  for (const VPtr& iv : items)
    if (iv->kind == VK::Lazy && !realize_leaf(iv, f)) return false;
  return true;
}

VPtr ValueBuilder::leaf(Ref obj, SourcePtr source, Frame& f) {
  PyTypeObject* tp = Py_TYPE(obj.get());
  const bool scalar = tp == &PyLong_Type || tp == &PyFloat_Type || tp == &PyBool_Type || tp == &PyUnicode_Type || obj.get() == Py_None;
  if (!scalar || !source || by_source_.count(source->text())) return wrap(std::move(obj), std::move(source), f);
  VPtr v = t_.make(VK::Lazy);
  v->lazy = std::move(obj);
  v->source = std::move(source);
  any_lazy_ = true;
  return v;
}

// A value not read yet, read: it becomes what wrap makes of its object (a constant or a symbolic
// number, immutable, so a copy of the value wrap keeps by source is the same value).
bool ValueBuilder::realize_leaf(const VPtr& v, Frame& f) {
  // (a draw of the random module, made by the compiled code -- Translator::random_draw: a graph
  // input, or null where it cannot be one, and the caller breaks)
  VPtr r = v->source && v->source->kind == Source::Kind::RandomDraw ? wrap_draw(v->lazy, v->source, f) : wrap(v->lazy, v->source, f);
  if (!r) return false;
  *v = *r;
  return true;
}

// Dicts with constant keys: lazy when read from the frame.
VPtr ValueBuilder::wrap_dict(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  PyObject* o = obj.get();
  VPtr v;
  if (VPtr first = shared_container(o, source, key, f); first || !ok_) return first;
  Py_ssize_t pos = 0;
  PyObject *k, *val;
  while (PyDict_Next(o, &pos, &k, &val))
    if (!const_key(k) && !identity_key(k) && !(source && value_key_object(k))) return nullptr;
  v = t_.make(VK::Dict);
  if (source) {
    // From the frame: lazy (TorchDynamo's LazyVariableTracker over a ConstDictVariable). Guarded
    // here only as a dict; its entries as they are read (realize_entry) or all at once (realize).
    t_.add_guard(GuardKind::TYPE_MATCH, source, Ref::borrow(reinterpret_cast<PyObject*>(&PyDict_Type)), f,
                 "___check_type_id(" + key + ", dict)");
    v->lazy = obj;
    any_lazy_ = true;
    containers_seen_[o] = {obj, v};
    remember(source, key, v);
    capturable_group(v);
    return v;
  }
  pos = 0;
  while (PyDict_Next(o, &pos, &k, &val)) {
    v->keys.push_back(Ref::borrow(k));
    VPtr iv = wrap(Ref::borrow(val), nullptr, f);
    if (!iv) return nullptr;
    v->items.push_back(iv);
  }
  return remember(source, key, v);
}

// torch.nn.RNN, GRU and LSTM (RNNBase): TorchDynamo refuses to wrap them (config.allow_rnn is False),
// so a frame that reads one runs eagerly, or breaks at the call of the function that reads it.
bool rnn_module(PyObject* o) {
  static PyObject* rnn_base = [] {
    Ref m = Ref::steal(PyImport_ImportModule("torch.nn.modules.rnn"));
    PyObject* c = m ? PyObject_GetAttrString(m.get(), "RNNBase") : nullptr;  // kept
    if (!c) PyErr_Clear();
    return c;
  }();
  return rnn_base && PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(rnn_base));
}

// nn.Modules (every subclass).
VPtr ValueBuilder::wrap_module(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  PyObject* o = obj.get();
  if (rnn_module(o)) return nullptr;
  VPtr v;
  if (source) {
    t_.add_guard(GuardKind::TYPE_MATCH, source, Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o))), f,
              "___check_type_id(" + key + ", " + Py_TYPE(o)->tp_name + ")");
  }
  v = t_.make(VK::NNModule);
  v->obj = obj;
  return remember(source, key, v);
}

// Python functions, inlined when called.
VPtr ValueBuilder::wrap_function(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  PyObject* o = obj.get();
  VPtr v;
  // torch.nn.functional.* are graph calls, not inlined -- but never a function marked
  // torch.compiler.disable (torch._dynamo's own wrapper is in a torch module): calling it breaks.
  if (function_is_torch(o) && !disabled_function(o)) return wrap_object(obj, source, key, f);
  const Source* root = source.get();
  while (root && root->base) root = root->base.get();
  const bool local = root && root->kind == Source::Kind::Local;
  if (source && (PyFunction_GET_CLOSURE(o) || local) && !PyFunction_GET_DEFAULTS(o) && !PyFunction_GET_KW_DEFAULTS(o)) {
    // A closure, or a function the frame was given (TorchDynamo's CLOSURE_MATCH): made anew by
    // every call of the code that makes it (a resume function's argument), so guarded by its
    // code; its cells' contents are guarded where a call reads them, their identity by the
    // guards of Translator::real_cell.
    PyObject* code = PyFunction_GET_CODE(o);
    t_.add_guard(GuardKind::TYPE_MATCH, source, Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o))), f,
                 "___check_type_id(" + key + ", function)");
    t_.add_guard(GuardKind::ID_MATCH, Source::attr(source, "__code__"), Ref::borrow(code), f,
                 "___check_obj_id(" + key + ".__code__, " + repr_of(code) + ")");
  } else if (source) {
    t_.add_guard(GuardKind::ID_MATCH, source, obj, f, "___check_obj_id(" + key + ", " + repr_of(o) + ")");
  }
  v = t_.make(VK::Function);
  v->obj = obj;
  return remember(source, key, v);
}

// Bound methods of Python functions.
VPtr ValueBuilder::wrap_method(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  PyObject* o = obj.get();
  VPtr v;
  if (!PyFunction_Check(PyMethod_GET_FUNCTION(o))) {
    if (!source) return wrap_object(obj, source, key, f);
    // A method whose function is not a Python function (logger.warning_once, an lru_cache wrapper
    // bound to the logger): made anew by each attribute read, so guarded by its function and its
    // self, never by its own identity (which would fail on every call).
    PyObject* fn = PyMethod_GET_FUNCTION(o);
    PyObject* self = PyMethod_GET_SELF(o);
    if (source->kind == Source::Kind::Attr &&
        _PyType_Lookup(Py_TYPE(self), Ref::steal(PyUnicode_FromString(source->name.c_str())).get()) == fn) {
      // self.name read from the class: the guard tree reads the class's raw attribute (the
      // function), and self is guarded through the base source.
      t_.add_guard(GuardKind::ID_MATCH, source, Ref::borrow(fn), f, "___check_obj_id(" + key + ", " + repr_of(fn) + ")");
    } else {
      t_.add_guard(GuardKind::ID_MATCH, Source::attr(source, "__func__"), Ref::borrow(fn), f,
                   "___check_obj_id(" + key + ".__func__, " + repr_of(fn) + ")");
      t_.add_guard(GuardKind::ID_MATCH, Source::attr(source, "__self__"), Ref::borrow(self), f,
                   "___check_obj_id(" + key + ".__self__, " + repr_of(self) + ")");
    }
    v = t_.make(VK::Object);
    v->obj = obj;
    return remember(source, key, v);
  }
  v = t_.make(VK::Method);
  // obj.method: its self is obj, already wrapped under the attribute's base source (the method is
  // made anew by each attribute read, so a guard through it could not read it back).
  if (source && source->kind == Source::Kind::Attr && source->base) {
    auto base = by_source_.find(source->base->text());
    if (base != by_source_.end() && base->second->obj.get() == PyMethod_GET_SELF(o)) v->self = base->second;
  }
  if (!v->self) v->self = wrap(Ref::borrow(PyMethod_GET_SELF(o)), source ? Source::attr(source, "__self__") : nullptr, f);
  if (!v->self) return nullptr;
  v->obj = Ref::borrow(PyMethod_GET_FUNCTION(o));
  return remember(source, key, v);
}

// A tuple iterator from the frame (a resume function's argument: an iterator over a list or tuple
// that lived across the break, TorchDynamo's TupleIteratorVariable): an iterator over its remaining
// items, each reloaded by ___tuple_iterator_getitem and guarded by how many remain. The items it
// gives in the trace are taken from the real iterator after the graph (SideEffects::advanced_iters).
VPtr ValueBuilder::wrap_tuple_iterator(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  if (!source) return wrap_object(obj, source, key, f);
  static PyObject* getitem = cg::runtime_attr("tuple_iterator_getitem");
  if (!getitem) return nullptr;
  PyObject* o = obj.get();
  Py_ssize_t index = 0;
  PyObject* seq = shim::tuple_iterator_state(o, index);
  const Py_ssize_t n = shim::tuple_iterator_remaining(o);
  t_.add_guard(GuardKind::TYPE_MATCH, source, Ref::borrow(reinterpret_cast<PyObject*>(&PyTupleIter_Type)), f,
               "___check_type_id(" + key + ", tuple_iterator)");
  if (Guard* g = t_.add_guard(GuardKind::LENGTH_CHECK, source, {}, f, "___tuple_iterator_len(" + key + ") == " + std::to_string(n)))
    g->length = n;
  VPtr v = t_.make(VK::Iter);
  for (Py_ssize_t i = 0; i < n; ++i) {
    VPtr iv = wrap(Ref::borrow(PyTuple_GET_ITEM(seq, index + i)), Source::tuple_iter_item(source, static_cast<int>(i), Ref::borrow(getitem)), f);
    if (!iv) return nullptr;
    v->items.push_back(iv);
  }
  t_.output.side_effects.advanced_iters.push_back(v);
  return remember(source, key, v);
}

// A range iterator from the frame (3.11's list comprehension over range(n) is a frame of its own
// given iter(range(n)) as `.0`; a resume function's loop over a range): an iterator over the ints
// it has yet to give, guarded by its next value, step and count (TorchDynamo's RangeIteratorVariable
// guards the range's start, stop and step). The values it gives in the trace are taken from the
// real iterator after the graph. One of more than 4096 values stays an object (a break at FOR_ITER).
VPtr ValueBuilder::wrap_range_iterator(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  long next = 0, step = 0, remaining = 0;
  shim::range_iterator_state(obj.get(), next, step, remaining);
  if (!source || remaining > 4096) return wrap_object(obj, source, key, f);
  Ref state = Ref::steal(Py_BuildValue("(lll)", next, step, remaining));
  if (!state) return PyErr_Clear(), nullptr;
  t_.add_guard(GuardKind::RANGE_ITERATOR_MATCH, source, state, f,
               "___range_iterator_match(" + key + ", next=" + std::to_string(next) + ", step=" + std::to_string(step) +
                   ", left=" + std::to_string(remaining) + ")");
  VPtr v = t_.make(VK::Iter);
  for (long i = 0; i < remaining; ++i) {
    Ref item = Ref::steal(PyLong_FromLong(next + i * step));
    if (!item) return PyErr_Clear(), nullptr;
    v->items.push_back(t_.constant(item));
  }
  t_.output.side_effects.advanced_iters.push_back(v);
  return remember(source, key, v);
}

// numpy.ndarray arguments.
VPtr ValueBuilder::wrap_ndarray(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  PyObject* o = obj.get();
  VPtr v;
  // An ndarray argument (TorchDynamo's wrap_numpy_ndarray): the graph's input is torch.as_tensor of
  // it, guarded as a tensor; the value is an ndarray over that input (tracer/values/ndarray.cpp).
  if (!source) return nullptr;
  Ref writeable = Ref::steal(PyObject_GetAttrString(o, "flags"));
  if (writeable) writeable = Ref::steal(PyObject_GetAttrString(writeable.get(), "writeable"));
  if (!writeable || writeable.get() != Py_True) return PyErr_Clear(), nullptr;  // read-only: torch warns on each call
  Ref as_tensor = Ref::steal(PyObject_GetAttrString(py().torch.get(), "as_tensor"));
  Ref t = as_tensor ? Ref::steal(PyObject_CallOneArg(as_tensor.get(), o)) : Ref();
  if (!t) return PyErr_Clear(), nullptr;  // a dtype torch has no tensor for (object, strings)
  t_.add_guard(GuardKind::TYPE_MATCH, source, Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o))), f,
               "___check_type_id(" + key + ", numpy.ndarray)");
  VPtr tv = wrap(t, Source::as_tensor(source, as_tensor), f);
  if (!tv || tv->kind != VK::Tensor) return nullptr;
  v = t_.make(VK::NdArray);
  v->obj = tv->obj;
  v->node = tv->node;
  v->device = tv->device;
  return remember(source, key, v);
}

// The grad-mode restorer a split with-block's exit leaves (codegen).
VPtr ValueBuilder::wrap_grad_restore(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  PyObject* o = obj.get();
  VPtr v;
  const int mode = grad_restore_mode(o);
  if (source) t_.add_guard(GuardKind::ID_MATCH, source, obj, f, "___check_obj_id(" + key + ", " + repr_of(o) + ")");
  v = t_.make(VK::GradMode);
  v->name = kGradExit;
  v->flag = mode == 1;
  return remember(source, key, v);
}

// The exit a split torch.autocast block leaves (autocast.cpp): one object per block, made by the trace
// and held by the transformed code.
VPtr ValueBuilder::wrap_autocast_exit(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  if (source) t_.add_guard(GuardKind::ID_MATCH, source, obj, f, "___check_obj_id(" + key + ", " + repr_of(obj.get()) + ")");
  VPtr v = t_.make(VK::GradMode);
  v->name = kAutocastExit;
  v->obj = obj;
  return remember(source, key, v);
}

// A builtin function; or a builtin method bound to a tensor from the frame (hidden.masked_scatter
// loaded before a break in its arguments, handed to the resume function on its stack), which each
// attribute read makes anew: guarded by its type, its name and its tensor's class, never by its own
// identity (which would fail on every call). Calling it breaks, as TorchDynamo's call of a builtin
// marked as skipped (object_call.cpp). Others: by identity (wrap_object).
VPtr ValueBuilder::wrap_builtin(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  PyObject* o = obj.get();
  PyObject* self = PyCFunction_GET_SELF(o);
  const char* name = reinterpret_cast<PyCFunctionObject*>(o)->m_ml->ml_name;
  if (!source || !self || !name || !is_tensor(self)) return wrap_object(obj, source, key, f);
  t_.add_guard(GuardKind::TYPE_MATCH, source, Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o))), f,
               "___check_type_id(" + key + ", " + Py_TYPE(o)->tp_name + ")");
  Ref nm = Ref::steal(PyUnicode_FromString(name));
  if (!nm) return PyErr_Clear(), nullptr;
  const SourcePtr name_src = Source::attr(source, "__name__");
  t_.add_guard(GuardKind::EQUALS_MATCH, name_src, nm, f, name_src->text() + " == " + repr_of(nm.get()));
  const SourcePtr self_src = Source::attr(source, "__self__");
  t_.add_guard(GuardKind::TYPE_MATCH, self_src, Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(self))), f,
               "___check_type_id(" + self_src->text() + ", " + Py_TYPE(self)->tp_name + ")");
  VPtr v = t_.make(VK::Object);
  v->obj = obj;
  return remember(source, key, v);
}

namespace {
// A method-wrapper (t.__get__, x.__add__) or a builtin method bound to an object other than a module or
// a class (lst.append): made anew at each attribute read.
bool bound_builtin(PyObject* o) {
  PyObject* self = nullptr;
  if (PyCFunction_Check(o)) self = PyCFunction_GET_SELF(o);
  else if (std::string(Py_TYPE(o)->tp_name) == "method-wrapper") return true;
  return self && !PyModule_Check(self) && !PyType_Check(self);
}
}  // namespace

// Modules, classes, builtins, torch functions and other objects known by identity.
VPtr ValueBuilder::wrap_object(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  PyObject* o = obj.get();
  VPtr v;
  // A functools.partial is guarded by its type: what a call reads of it (func, args, keywords) is read
  // through its source and guarded there (call_partial), as TorchDynamo guards a partial -- each
  // layer's own partial(gelu, approximate='tanh') is not a recompile. (`is` guards identity.)
  const bool partial = Py_IS_TYPE(o, reinterpret_cast<PyTypeObject*>(py().functools_partial.get()));
  // So is a torch.no_grad() / torch.enable_grad() object: eager makes one per call (an ExitStack that
  // crosses a break holds it), and what the trace reads of it (its `prev`) is read through its source.
  const bool grad_manager = Py_IS_TYPE(o, reinterpret_cast<PyTypeObject*>(py().no_grad.get())) ||
                            Py_IS_TYPE(o, reinterpret_cast<PyTypeObject*>(py().enable_grad.get()));
  if (source && PyRange_Check(o)) {  // (range cannot be subclassed)
    // a range passed in (or on the stack of a resume function, range(n) made before a break): the
    // trace iterates it, takes its length and tests `in` as constants, so it is guarded by its value
    // (range equality: the same items), as TorchDynamo guards its start, stop and step
    t_.add_guard(GuardKind::EQUALS_MATCH, source, obj, f, key + " == " + repr_of(o));
  } else if (source && bound_builtin(o)) {
    // A builtin method bound to an object (t.__get__ of a descriptor, a list's append passed in):
    // Python makes a new one at every attribute read, so its identity would fail on every call. It is
    // what it is bound to and its name: guarded by those, as TorchDynamo's does not recompile for it.
    // Read as an attribute of that object (base.name, where the guards see the class's raw
    // descriptor): the object's identity. Else (an argument): its type, its __self__ and __name__.
    Ref self = Ref::steal(PyObject_GetAttrString(o, "__self__"));
    Ref name = Ref::steal(PyObject_GetAttrString(o, "__name__"));
    if (!self || !name) return PyErr_Clear(), nullptr;
    auto base = source->kind == Source::Kind::Attr && source->base ? by_source_.find(source->base->text()) : by_source_.end();
    if (base != by_source_.end() && base->second->obj.get() == self.get() && source->name == str_of(name.get())) {
      t_.add_guard(GuardKind::ID_MATCH, source->base, self, f,
                   "___check_obj_id(" + source->base->text() + ", " + repr_of(self.get()) + ")");
    } else {
      t_.add_guard(GuardKind::TYPE_MATCH, source, Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o))), f,
                   "___check_type_id(" + key + ", " + Py_TYPE(o)->tp_name + ")");
      SourcePtr self_src = Source::attr(source, "__self__"), name_src = Source::attr(source, "__name__");
      t_.add_guard(GuardKind::ID_MATCH, self_src, self, f, "___check_obj_id(" + self_src->text() + ", " + repr_of(self.get()) + ")");
      t_.add_guard(GuardKind::EQUALS_MATCH, name_src, name, f, name_src->text() + " == " + repr_of(name.get()));
    }
  } else if (source) {
    // (another frozen object -- an inspect.Signature, a signature's parameters -- is read as a
    // constant too: guarded by identity, which holds its value as it cannot change)
    if (stdlib_value(o))  // a compiled pattern, a timedelta: by value (equal ones act alike; a Match by identity)
      t_.add_guard(GuardKind::EQUALS_MATCH, source, obj, f, key + " == " + repr_of(o));
    else if (!partial && !grad_manager && (PyModule_Check(o) || PyType_Check(o) || PyCFunction_Check(o) || PyCallable_Check(o) || frozen_object(o)))
      t_.add_guard(GuardKind::ID_MATCH, source, obj, f, "___check_obj_id(" + key + ", " + repr_of(o) + ")");
    else
      t_.add_guard(GuardKind::TYPE_MATCH, source, Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o))), f,
                "___check_type_id(" + key + ", " + Py_TYPE(o)->tp_name + ")");
  }
  v = t_.make(VK::Object);
  v->obj = obj;
  return remember(source, key, v);
}

// Whether an OrderedDict (or a subclass) iterates in its storage's order. The trace and the guards
// read the storage (PyDict_Next); its own order is not visible to them, and move_to_end makes the
// two differ: such an object is left to the object path.
bool ValueBuilder::storage_order(PyObject* od) {
  Ref order = Ref::steal(PySequence_List(od));
  if (!order) return PyErr_Clear(), false;
  Py_ssize_t pos = 0, i = 0;
  PyObject *k, *val;
  while (PyDict_Next(od, &pos, &k, &val))
    if (i >= PyList_GET_SIZE(order.get()) || PyList_GET_ITEM(order.get(), i++) != k) return false;
  return true;
}

// An instance of a plain Python class that subclasses dict or OrderedDict (transformers' ModelOutput,
// a user's dict subclass) from the frame: an Instance, as one made in the trace is, whose __dict__
// (attrs) and items (contents) are read whole, each guarded by DICT_KEYS, and written back after the
// graph when the trace changes them -- the items by the builtin base's own methods, past the class's
// overrides (codegen.cpp). Null with ok_ set: not such an object after all (the caller goes on).
VPtr ValueBuilder::wrap_dict_instance(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  PyObject* o = obj.get();
  auto* tp = Py_TYPE(o);
  PyTypeObject* base = builtin_base(tp);
  PyObject** dictptr = _PyObject_GetDictPtr(o);
  ok_ = true;
  if (!base || !dictptr) return nullptr;
  if (VPtr first = shared_container(o, source, key, f); first || !ok_) return first;
  Py_ssize_t pos = 0;
  PyObject *k, *val;
  while (PyDict_Next(o, &pos, &k, &val))
    if (!PyUnicode_CheckExact(k) && !PyLong_CheckExact(k)) return nullptr;
  if (base != &PyDict_Type && !storage_order(o)) return nullptr;
  VPtr v = subclass_instance(obj, source, key, f);
  if (!v) return nullptr;
  v->contents = t_.make(VK::Dict);
  v->contents->source = source;
  v->contents->storage_base = Ref::borrow(reinterpret_cast<PyObject*>(base));
  if (!wrap_entries(o, source, true, v->contents->keys, v->contents->items, f)) return ok_ = false, nullptr;
  return v;
}

// The Instance for an object of a dict or list subclass from the frame (wrap_dict_instance,
// wrap_list_instance; the caller reads its items): TYPE_MATCH on it, its class as loaded, its
// __dict__ read whole (attrs, DICT_KEYS). Null with ok_ set: an attribute name that is not a str
// (the object path takes it); with ok_ cleared: an attribute cannot be traced.
VPtr ValueBuilder::subclass_instance(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  PyObject* o = obj.get();
  auto* tp = Py_TYPE(o);
  PyObject** dictptr = _PyObject_GetDictPtr(o);
  Py_ssize_t pos = 0;
  PyObject *k, *val;
  if (*dictptr)
    while (PyDict_Next(*dictptr, &pos, &k, &val))
      if (!PyUnicode_CheckExact(k)) return nullptr;
  t_.add_guard(GuardKind::TYPE_MATCH, source, Ref::borrow(reinterpret_cast<PyObject*>(tp)), f,
               "___check_type_id(" + key + ", " + tp->tp_name + ")");
  VPtr cls = t_.make(VK::Object);  // the class as loaded: type(x), guarded by the TYPE_MATCH above
  cls->obj = Ref::borrow(reinterpret_cast<PyObject*>(tp));
  cls->source = Source::attr(source, "__class__");
  VPtr v = t_.make(VK::Instance);
  v->obj = cls->obj;
  v->self = cls;
  containers_seen_[o] = {obj, v};  // before the entries: one may hold the object itself
  remember(source, key, v);
  v->attrs = t_.make(VK::Dict);
  v->attrs->source = Source::attr(source, "__dict__");
  Ref empty;
  if (!*dictptr) empty = Ref::steal(PyDict_New());
  if (!wrap_entries(*dictptr ? *dictptr : empty.get(), v->attrs->source, false, v->attrs->keys, v->attrs->items, f, /*leaves=*/true))
    return ok_ = false, nullptr;
  return v;
}

// An instance of a plain Python class that subclasses list, from the frame: an Instance, as one made
// in the trace is, whose __dict__ (attrs) is read whole as a dict subclass's, and whose items
// (contents) are read as a list argument's: its length guarded, each item wrapped from its source
// (guarded as read). Changes are written back after the graph by list.__setitem__(obj, slice(None),
// new), past the class's overrides (codegen.cpp). The guards read its items through the class, so a
// class that overrides item access or iteration is left to the object path (null with ok_ set).
VPtr ValueBuilder::wrap_list_instance(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  PyObject* o = obj.get();
  auto* tp = Py_TYPE(o);
  PyObject** dictptr = _PyObject_GetDictPtr(o);
  ok_ = true;
  if (!dictptr || tp->tp_iter != PyList_Type.tp_iter || !list_own(tp, "__getitem__") || !list_own(tp, "__len__")) return nullptr;
  if (VPtr first = shared_container(o, source, key, f); first || !ok_) return first;
  VPtr v = subclass_instance(obj, source, key, f);
  if (!v) return nullptr;
  v->contents = t_.make(VK::List);
  v->contents->source = source;
  v->contents->storage_base = Ref::borrow(reinterpret_cast<PyObject*>(&PyList_Type));
  std::vector<Ref> items;  // wrap may run Python code: hold them first
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o); ++i) items.push_back(Ref::borrow(PyList_GET_ITEM(o, i)));
  if (Guard* g = t_.add_guard(GuardKind::LENGTH_CHECK, source, {}, f, "len(" + key + ") == " + std::to_string(items.size())))
    g->length = static_cast<Py_ssize_t>(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    VPtr iv = leaf(items[i], Source::item(source, Ref::steal(PyLong_FromSize_t(i))), f);
    if (!iv) return ok_ = false, nullptr;
    v->contents->items.push_back(iv);
  }
  return v;
}

// A collections.OrderedDict or defaultdict from the frame: a Dict of that class (as one made in the
// trace, dict_kinds.cpp) read whole, DICT_KEYS on its keys, a defaultdict's default_factory read
// through its source; changes are written back after the graph (an OrderedDict's by its own methods).
VPtr ValueBuilder::wrap_dict_kind(const Ref& obj, const SourcePtr& source, const std::string& key, Frame& f) {
  PyObject* o = obj.get();
  PyObject* cls = reinterpret_cast<PyObject*>(Py_TYPE(o));
  if (!source) return wrap_object(obj, source, key, f);
  if (VPtr first = shared_container(o, source, key, f); first || !ok_) return first;
  Py_ssize_t pos = 0;
  PyObject *k, *val;
  while (PyDict_Next(o, &pos, &k, &val))
    if (!const_key(k) && !value_key_object(k)) return wrap_object(obj, source, key, f);
  const bool ordered = cls == ordered_dict_class();
  if (ordered && !storage_order(o)) return wrap_object(obj, source, key, f);
  t_.add_guard(GuardKind::TYPE_MATCH, source, Ref::borrow(cls), f, "___check_type_id(" + key + ", " + Py_TYPE(o)->tp_name + ")");
  VPtr v = t_.make(VK::Dict);
  v->obj = Ref::borrow(cls);
  if (ordered) v->storage_base = Ref::borrow(cls);
  containers_seen_[o] = {obj, v};
  remember(source, key, v);
  if (ordered) {
    // An OrderedDict: lazy as a dict is (its entries guarded as they are read, its keys and their
    // order only once something reads more than one constant key: TorchDynamo's lazy
    // ConstDictVariable); realized whole by the same wrap_entries as below.
    v->lazy = obj;
    any_lazy_ = true;
    return v;
  }
  if (!ordered) {
    Ref factory = Ref::steal(PyObject_GetAttrString(o, "default_factory"));
    if (!factory) return PyErr_Clear(), ok_ = false, nullptr;
    if (!(v->defaults = wrap(factory, Source::attr(source, "default_factory"), f))) return ok_ = false, nullptr;
  }
  if (!wrap_entries(o, source, false, v->keys, v->items, f)) return ok_ = false, nullptr;
  return v;
}

bool ValueBuilder::wrap_entries(PyObject* d, const SourcePtr& dsource, bool storage, std::vector<Ref>& keys,
                                std::vector<VPtr>& items, Frame& f, bool leaves) {
  std::vector<std::pair<Ref, Ref>> entries;  // wrap may run Python code: hold them first
  Py_ssize_t pos = 0;
  PyObject *k, *val;
  while (PyDict_Next(d, &pos, &k, &val)) entries.emplace_back(Ref::borrow(k), Ref::borrow(val));
  Ref key_tuple = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(entries.size())));
  const std::string text = dsource->text();
  Py_ssize_t i = 0;
  for (auto& [key, value] : entries) {
    PyTuple_SET_ITEM(key_tuple.get(), i++, Ref(key).release());
    if (value_key_object(key.get())) {
      if (storage) return false;  // (a dict subclass keyed by tensors: not followed)
      // A tensor, module or other object compared by identity: its value, reloaded as the object this
      // key is (DICT_KEYS below holds each key to its identity, as TorchDynamo's ___key_to_id); the
      // dict holds that value's key.
      const std::string ktext = "___dict_keys_getitem(" + text + ", " + std::to_string(i - 1) + ")";
      VPtr kv = wrap(key, Source::held(key, ktext), f);
      PyObject* k = kv ? t_.key_of(kv) : nullptr;
      if (!k) return false;
      if (!is_tensor(k) && !PyObject_TypeCheck(k, reinterpret_cast<PyTypeObject*>(py().nn_Module.get())))
        t_.identity_keys_meet();  // (a lookup in it by another object from the frame relates the two)
      VPtr iv = wrap(value, storage ? Source::storage_item(dsource, key) : Source::item(dsource, key, ktext), f);
      if (!iv) return false;
      keys.push_back(Ref::borrow(k));
      items.push_back(iv);
      continue;
    }
    SourcePtr isource = storage ? Source::storage_item(dsource, key) : Source::item(dsource, key);
    VPtr iv = leaves ? leaf(value, isource, f) : wrap(value, isource, f);  // one read before: as read
    if (!iv) return false;
    keys.push_back(key);
    items.push_back(iv);
  }
  t_.add_guard(GuardKind::DICT_KEYS, dsource, key_tuple, f, "list(" + text + ".keys()) == " + keys_text(key_tuple.get()));
  return true;
}

// ---- lazy dicts -------------------------------------------------------------------------------

namespace {
// The same types all through (a tuple key's items too): 1 and 1.0 are equal keys of different types.
bool same_key_types(PyObject* a, PyObject* b) {
  if (Py_TYPE(a) != Py_TYPE(b)) return false;
  if (!PyTuple_Check(a) || PyTuple_GET_SIZE(a) != PyTuple_GET_SIZE(b)) return !PyTuple_Check(a);
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(a); ++i)
    if (!same_key_types(PyTuple_GET_ITEM(a, i), PyTuple_GET_ITEM(b, i))) return false;
  return true;
}
}  // namespace

bool ValueBuilder::realize_entry(const VPtr& d, PyObject* key, Frame& f) {
  PyObject* o = d->lazy.get();
  if (!o) return true;
  if (!d->written.empty()) {  // a key the trace wrote is the trace's
    const long at = find_key(*d, key);
    if (at == -2) return PyErr_Clear(), realize(d, f);
    if (at >= 0) return true;
  }
  PyObject* stored = nullptr;  // the dict's own key object equal to `key`
  PyObject* item = nullptr;
  Py_ssize_t pos = 0;
  PyObject *k, *val;
  while (PyDict_Next(o, &pos, &k, &val)) {
    const int eq = keys_equal(k, key);
    if (eq < 0) return PyErr_Clear(), realize(d, f);
    if (eq == 1) {
      stored = k;
      item = val;
      break;
    }
  }
  // (an object compared by identity found or not: the object asked for is guarded by identity --
  // the guards below hold the dict to the object this call gave)
  if (value_key_object(key) && !is_tensor(key)) t_.identity_keys_meet();
  const std::string text = d->source->text();
  if (!stored) {
    if (probed_absent_.insert(text + "|" + repr_of(key)).second) {
      if (Guard* g = t_.add_guard(GuardKind::DICT_CONTAINS, d->source, Ref::borrow(key), f, repr_of(key) + " not in " + text))
        g->length = 0;
    }
    return true;
  }
  if (!same_key_types(stored, key)) return realize(d, f);  // 1 read as 1.0 or True: all of it, as before
  for (const Ref& have : d->keys)
    if (have.get() == stored) return true;
  Ref held = Ref::borrow(stored), value = Ref::borrow(item);  // wrap may run Python code
  if (Guard* g = t_.add_guard(GuardKind::DICT_CONTAINS, d->source, held, f, repr_of(stored) + " in " + text))
    g->length = 1;
  VPtr iv = leaf(value, Source::item(d->source, held), f);
  if (!iv) return false;
  d->keys.push_back(held);
  d->items.push_back(iv);
  return true;
}

bool ValueBuilder::realize(const VPtr& d, Frame& f, bool read_items) {
  if (!d->lazy) return true;
  if (d->kind == VK::Lazy) return realize_leaf(d, f);
  if (d->kind == VK::List || d->kind == VK::Tuple) return realize_sequence(d, f, read_items);
  Ref o = d->lazy;
  std::vector<Ref> keys;
  std::vector<VPtr> items;
  if (!wrap_entries(o.get(), d->source, false, keys, items, f, /*leaves=*/true)) return false;
  if (read_items && !realize_items(items, f)) return false;
  // The keys the trace wrote while it was lazy: at their places among the real entries, new ones
  // after them in the order written (as the writes left the dict in eager)
  std::vector<std::pair<Ref, VPtr>> writes;
  for (const Ref& k : d->written) {
    const long at = find_key(*d, k.get());
    if (at < 0) return PyErr_Clear(), false;
    writes.emplace_back(k, d->items[static_cast<size_t>(at)]);
  }
  d->keys = std::move(keys);
  d->items = std::move(items);
  for (auto& [k, v] : writes)
    if (!dict_set(*d, k, v)) return PyErr_Clear(), false;
  d->written.clear();
  d->lazy = Ref();
  capturable_group(d);
  return true;
}

// TorchDynamo's OptimizerVariable._set_capturable: a torch.optim optimizer's param_groups read by the
// trace have 'capturable' True, so its step takes the tensor path (torch.where on the bias
// corrections, no Python branch on a step tensor) that a graph can hold. The trace's view only: the
// optimizer's own groups are unchanged (and its state made by _init_group as for a non-capturable
// step: the capturable path reads it the same way). Only where the group has the key.
void ValueBuilder::capturable_group(const VPtr& d) {
  const Source* s = d->source.get();
  if (!s || s->kind != Source::Kind::Item || !s->base || s->base->kind != Source::Kind::Attr ||
      s->base->name != "param_groups" || !s->base->base)
    return;
  auto opt = by_source_.find(s->base->base->text());
  if (opt == by_source_.end() || !opt->second->obj || !is_optimizer(opt->second->obj.get())) return;
  PyObject* real = d->lazy ? d->lazy.get() : real_container(d);
  if (!real || !PyDict_Check(real)) return;
  static PyObject* name = PyUnicode_InternFromString("capturable");
  PyObject* stored = nullptr;  // the group's own key object (realize_entry finds a key by identity)
  Py_ssize_t pos = 0;
  PyObject *k, *val;
  while (PyDict_Next(real, &pos, &k, &val))
    if (PyUnicode_CheckExact(k) && PyUnicode_Compare(k, name) == 0) stored = k;
  if (!stored) return;
  for (size_t i = 0; i < d->keys.size(); ++i)
    if (d->keys[i].get() == stored) return void(d->items[i] = t_.constant(Ref::borrow(Py_True)));
  d->keys.push_back(Ref::borrow(stored));
  d->items.push_back(t_.constant(Ref::borrow(Py_True)));
}

// ---- dynamic shapes -----------------------------------------------------------------------------

void ValueBuilder::plan_reached(PyObject* o, const std::string& text) {
  if (!frame_state || dynamic_mode == DynamicMode::Off || planned_.count(text)) return;
  plan_dynamic(o, text, 0);
  if (!t_.output.dynamic() && (dyn_dims_.count(text) || dyn_strides_.count(text) || dyn_ints_.count(text))) wants_dynamic_ = true;
}

void note_input(FrameState& fs, PyObject* o, const std::string& text, bool force, int depth, const DynamicPlan& plan) {
  if (depth > 2) return;
  if (is_tensor(o)) {
    if (PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(py().nn_Parameter.get()))) return;  // parameters stay static
    TensorSpec spec;
    if (!tensor_spec(o, spec) || spec.sizes.size() > 64) return;
    if (plan.planned) plan.planned->insert(text);
    auto [it, fresh] = fs.try_emplace(text);
    SeenInput& seen = it->second;
    if (fresh || seen.is_int || seen.is_float) {
      seen = SeenInput{};
      seen.sizes = spec.sizes;
      seen.strides = spec.strides;
      if (force) seen.dynamic = spec.sizes.size() == 64 ? ~0ull : (1ull << spec.sizes.size()) - 1;
    } else if (seen.sizes.size() != spec.sizes.size()) {
      seen.sizes = spec.sizes;  // the rank changed: every size becomes symbolic (as TorchDynamo)
      seen.strides = spec.strides;
      seen.dynamic = spec.sizes.size() == 64 ? ~0ull : (1ull << spec.sizes.size()) - 1;
    } else {
      for (size_t d = 0; d < spec.sizes.size(); ++d) {
        if (seen.sizes[d] != spec.sizes[d]) seen.dynamic |= 1ull << d;
        if (d < seen.strides.size() && d < spec.strides.size() && seen.strides[d] != spec.strides[d]) seen.dynamic_strides |= 1ull << d;
      }
    }
    if (seen.dynamic && plan.dims) (*plan.dims)[text] = seen.dynamic;
    else if (seen.dynamic_strides && !seen.dynamic && plan.strides) (*plan.strides)[text] = seen.dynamic_strides;  // (sizes all static)
    return;
  }
  if (std::strcmp(Py_TYPE(o)->tp_name, "numpy.ndarray") == 0) {  // planned as the tensor the graph takes (AsTensor)
    Ref as_tensor = Ref::steal(PyObject_GetAttrString(py().torch.get(), "as_tensor"));
    Ref t = as_tensor ? Ref::steal(PyObject_CallOneArg(as_tensor.get(), o)) : Ref();
    if (!t) return PyErr_Clear();
    note_input(fs, t.get(), "___as_tensor(" + text + ")", force, depth, plan);
    return;
  }
  if (PyLong_CheckExact(o) || numpy_int64(o)) {  // (a numpy.int64 by its value, as an int)
    int overflow = 0;
    Ref as_int = PyLong_CheckExact(o) ? Ref::borrow(o) : Ref::steal(PyNumber_Index(o));
    if (!as_int) return PyErr_Clear();
    const long long v = PyLong_AsLongLongAndOverflow(as_int.get(), &overflow);
    if (overflow) return PyErr_Clear();
    if (plan.planned) plan.planned->insert(text);
    auto [it, fresh] = fs.try_emplace(text);
    SeenInput& seen = it->second;
    if (fresh || !seen.is_int) {
      seen = SeenInput{};
      seen.is_int = true;
      seen.value = v;
      seen.int_dynamic = force;
    } else if (seen.value != v) {
      seen.int_dynamic = true;
    }
    if (seen.int_dynamic && plan.ints) plan.ints->insert(text);
    return;
  }
  if (PyFloat_CheckExact(o) || numpy_float64(o)) {  // as an int, compared with == (a NaN never matches: it stays a constant)
    const double v = PyFloat_AS_DOUBLE(o);
    if (plan.planned) plan.planned->insert(text);
    auto [it, fresh] = fs.try_emplace(text);
    SeenInput& seen = it->second;
    if (fresh || !seen.is_float) {
      seen = SeenInput{};
      seen.is_float = true;
      seen.fvalue = v;
      seen.int_dynamic = force;
    } else if (!(seen.fvalue == v && std::signbit(seen.fvalue) == std::signbit(v))) {  // (0.0, then -0.0: changed)
      seen.int_dynamic = true;
    }
    if (seen.int_dynamic && plan.ints) plan.ints->insert(text);
    return;
  }
  if (PyTuple_CheckExact(o) || PyList_CheckExact(o) || Py_TYPE(o) == reinterpret_cast<PyTypeObject*>(py().torch_Size.get())) {
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    for (Py_ssize_t i = 0; i < n && i < 64; ++i)
      note_input(fs, PySequence_Fast_GET_ITEM(o, i), text + "[" + std::to_string(i) + "]", force, depth + 1, plan);
    return;
  }
  if (PyDict_CheckExact(o)) {
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(o, &pos, &k, &v))
      if (is_exact_const(k)) note_input(fs, v, text + "[" + repr_of(k) + "]", force, depth + 1, plan);
  }
}

void ValueBuilder::plan_dynamic(PyObject* o, const std::string& text, int depth) {
  if (!frame_state) return;
  note_input(*frame_state, o, text, dynamic_mode == DynamicMode::On, depth, DynamicPlan{&planned_, &dyn_dims_, &dyn_strides_, &dyn_ints_});
}

void note_arguments(FrameState& fs, PyCodeObject* co, PyObject* const* locals) {
  const int nargs = co->co_argcount + co->co_kwonlyargcount + ((co->co_flags & CO_VARARGS) ? 1 : 0) +
                    ((co->co_flags & CO_VARKEYWORDS) ? 1 : 0);
  for (int i = 0; i < nargs; ++i)
    if (locals[i]) note_input(fs, locals[i], argument_text(co, i), false, 0, DynamicPlan{});
}

std::string argument_text(PyCodeObject* co, int i) {
  return "L['" + str_of(PyTuple_GET_ITEM(co->co_localsplusnames, i)) + "']";
}

}  // namespace dv
