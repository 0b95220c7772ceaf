// The symbolic interpreter's core: frames, wrapping Python objects into Values (with guards),
// calls (graph calls, inlining, builtins) and the graph-call example values. Opcode handlers live
// in handlers_*.cpp.
#include "translator.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "code_info.h"
#include "codegen.h"

#include <frameobject.h>

#include "core/opcodes.h"
#include "frame_shim.h"
#include "pycache.h"
#include "tensor_match.h"

namespace dv {

const char* const kStopId = "__stop";

const char* vk_name(VK k) {
  switch (k) {
    case VK::Null: return "null";
    case VK::Tensor: return "tensor";
    case VK::Const: return "constant";
    case VK::Tuple: return "tuple";
    case VK::List: return "list";
    case VK::Dict: return "dict";
    case VK::Iter: return "iterator";
    case VK::Object: return "object";
    case VK::Function: return "function";
    case VK::Method: return "method";
    case VK::NNModule: return "module";
    case VK::Cell: return "cell";
    case VK::GradMode: return "grad_mode";
    case VK::Sym: return "symint";
    case VK::Slice: return "slice";
  }
  return "?";
}

namespace {
void describe_into(const Value& v, std::string& out, int depth) {
  if (out.size() > 160) return;
  switch (v.kind) {
    case VK::Null: out += "NULL"; return;
    case VK::Tensor: out += v.obj ? tensor_meta_text(v.obj.get(), v.device.get()) : "tensor"; return;
    case VK::Tuple: case VK::List: {
      const bool tuple = v.kind == VK::Tuple;
      out += tuple ? "(" : "[";
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i) out += ", ";
        if (depth > 2 || out.size() > 160) { out += "..."; break; }
        if (v.items[i]) describe_into(*v.items[i], out, depth + 1);
      }
      if (tuple && v.items.size() == 1) out += ",";
      out += tuple ? ")" : "]";
      return;
    }
    case VK::Dict: {
      out += "{";
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i) out += ", ";
        if (depth > 2 || out.size() > 160) { out += "..."; break; }
        out += i < v.keys.size() ? repr_of(v.keys[i].get()) : "?";
        out += ": ";
        if (v.items[i]) describe_into(*v.items[i], out, depth + 1);
      }
      out += "}";
      return;
    }
    case VK::Iter: out += "<iterator of " + std::to_string(v.items.size()) + ">"; return;
    case VK::Cell: out += "<cell>"; return;
    case VK::GradMode: out += v.flag ? "<enable_grad>" : "<no_grad>"; return;
    case VK::Method: out += "<method " + v.name + ">"; return;
    case VK::NNModule: out += std::string("<") + (v.obj ? Py_TYPE(v.obj.get())->tp_name : "module") + ">"; return;
    case VK::Function: {
      PyObject* qn = v.qualname ? v.qualname.get() : nullptr;
      if (!qn && v.obj && PyFunction_Check(v.obj.get())) qn = reinterpret_cast<PyFunctionObject*>(v.obj.get())->func_qualname;
      if (!qn && v.obj && PyCode_Check(v.obj.get())) qn = reinterpret_cast<PyCodeObject*>(v.obj.get())->co_qualname;
      out += "<function " + (qn ? str_of(qn) : std::string("?")) + ">";
      return;
    }
    case VK::Sym: out += v.obj ? repr_of(v.obj.get()) : "sym"; return;
    case VK::Slice: {
      out += "slice(";
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i) out += ", ";
        if (v.items[i]) describe_into(*v.items[i], out, depth + 1);
      }
      out += ")";
      return;
    }
    case VK::Const: case VK::Object: {
      if (!v.obj) { out += "?"; return; }
      std::string r = repr_of(v.obj.get());
      if (r.size() > 120) r = r.substr(0, 117) + "...";
      out += r;
      return;
    }
  }
}
}  // namespace

std::string describe(const Value& v) {
  std::string out;
  describe_into(v, out, 0);
  return out;
}

// ---- code facts -------------------------------------------------------------------------------

const CodeFacts* code_facts(PyObject* code) {
  // Never destroyed: it holds code objects, and static destructors run after Py_Finalize.
  static auto& cache = *new std::unordered_map<PyObject*, std::unique_ptr<CodeFacts>>();
  auto it = cache.find(code);
  if (it != cache.end()) return it->second.get();
  auto* co = reinterpret_cast<PyCodeObject*>(code);
  Ref raw = Ref::steal(PyCode_GetCode(co));
  if (!raw) return nullptr;
  auto view = [](PyObject* b) { return std::string_view(PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b)); };
  auto d = bc::decode(view(raw.get()), view(co->co_linetable), view(co->co_exceptiontable), co->co_firstlineno, kPyVersion);
  if (!d) {
    PyErr_SetString(PyExc_ValueError, d.error().message().c_str());
    return nullptr;
  }
  auto f = std::make_unique<CodeFacts>();
  f->code = Ref::borrow(code);
  f->decoded = std::move(d).value();
  for (size_t i = 0; i < f->decoded.instrs.size(); ++i) f->index_of[f->decoded.instrs[i].offset] = static_cast<int>(i);
  f->filename = str_of(co->co_filename);
  f->qualname = str_of(co->co_qualname);
  static int next_id = 1;
  f->id = next_id++;
  const CodeFacts* out = f.get();
  cache.emplace(code, std::move(f));
  return out;
}

bool announce_code(EngineObserver* obs, const CodeFacts* facts) {
  if (!obs || !facts) return true;
  if (!facts->info) {
    auto info = std::make_unique<bc::CodeInfo>();
    if (!fill_code_info(facts->code.get(), *info, /*with_nested=*/true, /*with_reprs=*/true)) return false;
    facts->info = std::move(info);
  }
  obs->on_code_object(CodeObjectEvent{facts->id, facts->info.get()});
  return true;
}

// ---- basics -------------------------------------------------------------------------------------

Translator::Translator(CompileId id, EngineObserver* obs) : id_(id), obs_(obs) {}

int Translator::current_line(const Frame& f) const {
  int i = f.ip > 0 ? f.ip - 1 : 0;
  const auto& ins = f.facts->decoded.instrs;
  for (; i >= 0; --i)
    if (ins[i].pos.line != bc::kNone) return ins[i].pos.line;
  return -1;
}

Translator::Status Translator::brk(Frame& f, const char* id, std::string msg, std::string hint) {
  Break b;
  b.id = id;
  b.message = std::move(msg);
  b.hint = std::move(hint);
  // Reported at the innermost frame in the user's files (as torch.compile does); a break inside
  // torch's own code names the library location in the message.
  const Frame* at = &f;
  auto in_torch = [](const std::string& file) {
    return file.find("/site-packages/torch/") != std::string::npos || file.find("/dist-packages/torch/") != std::string::npos;
  };
  for (size_t k = frames_.size(); k-- > 0 && in_torch(at->facts->filename);)
    if (!in_torch(frames_[k]->facts->filename)) at = frames_[k];
  if (at != &f) b.message += " (in " + f.facts->filename + ":" + std::to_string(current_line(f)) + ")";
  b.filename = at->facts->filename;
  b.line = current_line(*at);
  b.offset = at->ip > 0 ? at->facts->decoded.instrs[at->ip - 1].offset : 0;
  b.step = cur_step_;
  for (Frame* fr : frames_) b.user_stack.push_back(fr->facts->filename + ":" + std::to_string(current_line(*fr)) + " in " + fr->facts->qualname);
  if (root_ && root_->executing) b.root_ip = root_->ip - 1;
  if (PyErr_Occurred()) PyErr_Clear();
  return b;
}

VPtr Translator::make(VK kind) {
  auto v = std::make_shared<Value>();
  v->kind = kind;
  v->id = next_value_++;
  return v;
}

VPtr Translator::constant(Ref obj) {
  VPtr v = make(VK::Const);
  v->obj = std::move(obj);
  if (obs_) announce(v);
  return v;
}

VPtr Translator::constant_steal(PyObject* obj) {
  if (!obj) return nullptr;
  return constant(Ref::steal(obj));
}

void Translator::add_guard(GuardKind kind, SourcePtr source, Ref value, Frame& f, std::string text) {
  std::string src = source ? source->text() : "";
  for (const Guard& g : guards)
    if (g.kind == kind && (g.source ? g.source->text() : "") == src) return;
  Guard g;
  g.kind = kind;
  g.source = source;
  g.value = std::move(value);
  g.step = cur_step_;
  g.line = root_ ? current_line(f) : -1;
  g.text = std::move(text);
  guards.push_back(std::move(g));
  if (obs_) obs_->on_guard(GuardEvent{id_, guard_kind_name(kind), guards.back().text, guards.back().step, guards.back().line});
}

bool function_is_torch(PyObject* fn) {
  PyObject* mod = PyFunction_GET_MODULE(fn);
  if (!mod || !PyUnicode_Check(mod)) return false;
  std::string m = str_of(mod);
  return (m == "torch" || m.rfind("torch.", 0) == 0) && m.rfind("torch.nn.modules", 0) != 0;
}

bool is_exact_const(PyObject* o) {
  return o == Py_None || o == Py_Ellipsis || PyBool_Check(o) || PyLong_CheckExact(o) || PyFloat_CheckExact(o) ||
         PyUnicode_CheckExact(o) || PyBytes_CheckExact(o) || PyComplex_CheckExact(o) ||
         Py_IS_TYPE(o, reinterpret_cast<PyTypeObject*>(py().torch_dtype.get())) ||
         Py_IS_TYPE(o, reinterpret_cast<PyTypeObject*>(py().torch_device.get())) ||
         Py_IS_TYPE(o, reinterpret_cast<PyTypeObject*>(py().torch_Size.get())) || PySlice_Check(o);
}

static bool is_const_tree(PyObject* o) {
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
  return Ref::steal(PyObject_Call(fn.get(), args.get(), kw.get()));
}

VPtr Translator::wrap(Ref obj, SourcePtr source, Frame& f) {
  std::string key = source ? source->text() : "";
  if (source) {
    auto it = by_source_.find(key);
    if (it != by_source_.end()) return it->second;
  }
  PyObject* o = obj.get();
  VPtr v;
  auto remember = [&](VPtr val) {
    val->source = source;
    if (source) by_source_[key] = val;
    if (obs_ && !val->announced) announce(val);
    return val;
  };
  if (is_tensor(o)) {
    auto alias = tensor_by_id_.find(o);
    if (alias != tensor_by_id_.end()) return remember(alias->second);
    if (!source) return nullptr;  // a tensor that cannot be reloaded: the caller breaks
    TensorSpec spec;
    tensor_spec(o, spec);
    Ref example;
    if (dyn_) {
      // A fake tensor of this compile's fake mode, symbolic in the planned dims (sizes 0 and 1 stay
      // static: TorchDynamo's 0/1 specialisation).
      Ref dims = Ref::steal(PySet_New(nullptr));
      auto plan = dyn_dims_.find(key);
      for (size_t d = 0; plan != dyn_dims_.end() && d < spec.sizes.size() && d < 64; ++d)
        if ((plan->second >> d & 1) && spec.sizes[d] >= 2) PySet_Add(dims.get(), Ref::steal(PyLong_FromSize_t(d)).get());
      const int slot = static_cast<int>(sym_sources_.size());
      if (PySet_GET_SIZE(dims.get()) > 0) sym_sources_.push_back(source);
      Ref r = Ref::steal(PyObject_CallMethod(dyn_.get(), "tensor", "OOsiii", o, dims.get(), key.c_str(), slot,
                                                 cur_step_, root_ ? current_line(f) : -1));
      if (!r || !PyTuple_Check(r.get()) || PyTuple_GET_SIZE(r.get()) != 3) return nullptr;
      example = Ref::borrow(PyTuple_GET_ITEM(r.get(), 0));
      spec.dyn_sizes = PyLong_AsUnsignedLongLongMask(PyTuple_GET_ITEM(r.get(), 1));
      spec.dyn_strides = PyLong_AsUnsignedLongLongMask(PyTuple_GET_ITEM(r.get(), 2));
    } else {
      example = meta_like(o);
    }
    if (!example) return nullptr;
    add_guard(GuardKind::TENSOR_MATCH, source, {}, f, "check_tensor(" + key + ", " + tensor_spec_text(spec) + ")");
    guards.back().tensor = spec;
    v = make(VK::Tensor);
    v->obj = example;
    v->device = Ref::steal(PyObject_GetAttrString(o, "device"));
    v->node = graph.add_placeholder(source, v->obj, cur_step_);
    inputs.emplace_back(source, v->node);
    input_objects.push_back(obj);
    if (obs_) obs_->on_graph_node(GraphNodeEvent{id_, v->node, cur_step_, "placeholder", placeholder_name(*source)});
    tensor_by_id_[o] = v;
    return remember(v);
  }
  if (o == Py_None) {
    if (source) add_guard(GuardKind::NONE_MATCH, source, {}, f, key + " is None");
    v = make(VK::Const);
    v->obj = obj;
    return remember(v);
  }
  if (PyBool_Check(o)) {
    if (source) add_guard(GuardKind::ID_MATCH, source, obj, f, key + " is " + repr_of(o));
    v = make(VK::Const);
    v->obj = obj;
    return remember(v);
  }
  if (dyn_ && source && PyLong_CheckExact(o) && dyn_ints_.count(key)) {
    // An int that changed between compiles: a graph input of type SymInt.
    const int slot = static_cast<int>(sym_sources_.size());
    sym_sources_.push_back(source);
    Ref s = Ref::steal(PyObject_CallMethod(dyn_.get(), "symint", "Osiii", o, key.c_str(), slot, cur_step_,
                                                root_ ? current_line(f) : -1));
    if (!s) return nullptr;
    add_guard(GuardKind::TYPE_MATCH, source, Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o))), f,
              "___check_type_id(" + key + ", int)");
    v = make(VK::Sym);
    v->obj = s;
    v->node = graph.add_placeholder(source, s, cur_step_);
    inputs.emplace_back(source, v->node);
    input_objects.push_back(obj);
    if (obs_) obs_->on_graph_node(GraphNodeEvent{id_, v->node, cur_step_, "placeholder", placeholder_name(*source)});
    return remember(v);
  }
  if (is_const_tree(o)) {
    if (source) {
      add_guard(GuardKind::EQUALS_MATCH, source, obj, f, key + " == " + repr_of(o));
    }
    v = make(VK::Const);
    v->obj = obj;
    return remember(v);
  }
  if (source && (PyList_CheckExact(o) || PyDict_CheckExact(o)) && !containers_seen_.insert(o).second)
    return nullptr;  // one mutable container under two sources: no alias guard yet, so not traced
  if (PyTuple_CheckExact(o) || PyList_CheckExact(o)) {
    const bool is_list = PyList_CheckExact(o);
    Py_ssize_t n = is_list ? PyList_GET_SIZE(o) : PyTuple_GET_SIZE(o);
    if (source) {
      add_guard(GuardKind::TYPE_MATCH, source, Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o))), f,
                "___check_type_id(" + key + ", " + Py_TYPE(o)->tp_name + ")");
      add_guard(GuardKind::LENGTH_CHECK, source, {}, f, "len(" + key + ") == " + std::to_string(n));
      guards.back().length = n;
    }
    v = make(is_list ? VK::List : VK::Tuple);
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* item = is_list ? PyList_GET_ITEM(o, i) : PyTuple_GET_ITEM(o, i);
      VPtr iv = wrap(Ref::borrow(item), source ? Source::item(source, Ref::steal(PyLong_FromSsize_t(i))) : nullptr, f);
      if (!iv) return nullptr;
      v->items.push_back(iv);
    }
    return remember(v);
  }
  if (PyDict_CheckExact(o)) {
    v = make(VK::Dict);
    Ref keys = Ref::steal(PyTuple_New(PyDict_GET_SIZE(o)));
    Py_ssize_t pos = 0, i = 0;
    PyObject *k, *val;
    while (PyDict_Next(o, &pos, &k, &val)) {
      if (!is_exact_const(k)) return nullptr;
      PyTuple_SET_ITEM(keys.get(), i++, Ref::borrow(k).release());
      v->keys.push_back(Ref::borrow(k));
      VPtr iv = wrap(Ref::borrow(val), source ? Source::item(source, Ref::borrow(k)) : nullptr, f);
      if (!iv) return nullptr;
      v->items.push_back(iv);
    }
    if (source) add_guard(GuardKind::DICT_KEYS, source, keys, f, "list(" + key + ".keys()) == " + repr_of(keys.get()));
    return remember(v);
  }
  if (PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(py().nn_Module.get()))) {
    if (source) {
      add_guard(GuardKind::TYPE_MATCH, source, Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o))), f,
                "___check_type_id(" + key + ", " + Py_TYPE(o)->tp_name + ")");
    }
    v = make(VK::NNModule);
    v->obj = obj;
    return remember(v);
  }
  if (PyFunction_Check(o) && !function_is_torch(o)) {  // torch.nn.functional.* are graph calls, not inlined
    if (source) add_guard(GuardKind::ID_MATCH, source, obj, f, "___check_obj_id(" + key + ", " + repr_of(o) + ")");
    v = make(VK::Function);
    v->obj = obj;
    return remember(v);
  }
  if (PyMethod_Check(o) && PyFunction_Check(PyMethod_GET_FUNCTION(o))) {
    v = make(VK::Method);
    // obj.method: its self is obj, already wrapped under the attribute's base source (the method is
    // made anew by each attribute read, so a guard through it could not read it back).
    if (source && source->kind == Source::Kind::Attr && source->base) {
      auto base = by_source_.find(source->base->text());
      if (base != by_source_.end() && base->second->obj.get() == PyMethod_GET_SELF(o)) v->self = base->second;
    }
    if (!v->self) v->self = wrap(Ref::borrow(PyMethod_GET_SELF(o)), source ? Source::attr(source, "__self__") : nullptr, f);
    if (!v->self) return nullptr;
    v->obj = Ref::borrow(PyMethod_GET_FUNCTION(o));
    return remember(v);
  }
  if (std::strcmp(Py_TYPE(o)->tp_name, "numpy.ndarray") == 0) return nullptr;  // NumPy is not traced: the caller breaks
  if (const int mode = grad_restore_mode(o); mode >= 0) {  // a split with-block's exit (codegen)
    if (source) add_guard(GuardKind::ID_MATCH, source, obj, f, "___check_obj_id(" + key + ", " + repr_of(o) + ")");
    v = make(VK::GradMode);
    v->flag = mode == 1;
    return remember(v);
  }
  // Modules, classes, builtins, torch functions and other objects known by identity.
  if (source) {
    if (PyModule_Check(o) || PyType_Check(o) || PyCFunction_Check(o) || PyCallable_Check(o))
      add_guard(GuardKind::ID_MATCH, source, obj, f, "___check_obj_id(" + key + ", " + repr_of(o) + ")");
    else
      add_guard(GuardKind::TYPE_MATCH, source, Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o))), f,
                "___check_type_id(" + key + ", " + Py_TYPE(o)->tp_name + ")");
  }
  v = make(VK::Object);
  v->obj = obj;
  return remember(v);
}

// ---- dynamic shapes -----------------------------------------------------------------------------

void Translator::plan_dynamic(PyObject* o, const std::string& text, int depth) {
  if (!frame_state || depth > 2) return;
  const bool force = dynamic_mode == DynamicMode::On;
  if (is_tensor(o)) {
    if (PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(py().nn_Parameter.get()))) return;  // parameters stay static
    TensorSpec spec;
    if (!tensor_spec(o, spec) || spec.sizes.size() > 64) return;
    auto [it, fresh] = frame_state->try_emplace(text);
    SeenInput& seen = it->second;
    if (fresh || seen.is_int) {
      seen = SeenInput{};
      seen.sizes = spec.sizes;
      if (force) seen.dynamic = spec.sizes.size() == 64 ? ~0ull : (1ull << spec.sizes.size()) - 1;
    } else if (seen.sizes.size() != spec.sizes.size()) {
      seen.sizes = spec.sizes;  // the rank changed: every size becomes symbolic (as TorchDynamo)
      seen.dynamic = spec.sizes.size() == 64 ? ~0ull : (1ull << spec.sizes.size()) - 1;
    } else {
      for (size_t d = 0; d < spec.sizes.size(); ++d)
        if (seen.sizes[d] != spec.sizes[d]) seen.dynamic |= 1ull << d;
    }
    if (seen.dynamic) dyn_dims_[text] = seen.dynamic;
    return;
  }
  if (PyLong_CheckExact(o)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow) return PyErr_Clear();
    auto [it, fresh] = frame_state->try_emplace(text);
    SeenInput& seen = it->second;
    if (fresh || !seen.is_int) {
      seen = SeenInput{};
      seen.is_int = true;
      seen.value = v;
      seen.int_dynamic = force;
    } else if (seen.value != v) {
      seen.int_dynamic = true;
    }
    if (seen.int_dynamic) dyn_ints_.insert(text);
    return;
  }
  if (PyTuple_CheckExact(o) || PyList_CheckExact(o)) {
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    for (Py_ssize_t i = 0; i < n && i < 64; ++i)
      plan_dynamic(PySequence_Fast_GET_ITEM(o, i), text + "[" + std::to_string(i) + "]", depth + 1);
    return;
  }
  if (PyDict_CheckExact(o)) {
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(o, &pos, &k, &v))
      if (is_exact_const(k)) plan_dynamic(v, text + "[" + repr_of(k) + "]", depth + 1);
  }
}

VPtr Translator::sym_value(Ref example, int node) {
  VPtr v = make(VK::Sym);
  v->obj = std::move(example);
  v->node = node;
  if (obs_) announce(v);
  return v;
}

Ref Translator::specialize(const VPtr& v) {
  PyObject* o = v->obj.get();
  if (Py_TYPE(o) == reinterpret_cast<PyTypeObject*>(py().sym_bool.get())) {
    const int b = PyObject_IsTrue(o);
    return b < 0 ? Ref() : Ref::borrow(b ? Py_True : Py_False);
  }
  if (Py_TYPE(o) == reinterpret_cast<PyTypeObject*>(py().sym_float.get())) return Ref::steal(PyNumber_Float(o));
  return Ref::steal(PyNumber_Index(o));
}

PyObject* Translator::compile_with_backend(PyObject* backend, PyObject* gm) {
  Ref examples = Ref::steal(PyList_New(0));
  if (!examples) return nullptr;
  for (size_t i = 0; i < input_objects.size(); ++i) {
    // Dynamic compiles hand the backend the fakes (with their symbolic sizes); static ones the real inputs.
    PyObject* ex = dyn_ ? graph.nodes()[static_cast<size_t>(inputs[i].second)].example.get() : input_objects[i].get();
    if (PyList_Append(examples.get(), ex ? ex : input_objects[i].get()) < 0) return nullptr;
  }
  if (dyn_) return PyObject_CallMethod(dyn_.get(), "compile", "OOO", backend, gm, examples.get());
  return PyObject_CallFunctionObjArgs(backend, gm, examples.get(), nullptr);
}

bool Translator::add_shape_guards(std::string& why) {
  if (!dyn_) return true;
  Ref list = Ref::steal(PyObject_CallMethod(dyn_.get(), "guards", nullptr));
  if (!list) {
    Ref err = take_error();
    why = err ? str_of(Ref::steal(PyObject_Str(err.get())).get()) : "unknown error";
    PyErr_Clear();
    return false;
  }
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list.get()); ++i) {
    PyObject* item = PyList_GET_ITEM(list.get(), i);  // (text, [(slot, kind, dim)], [(op, arg)], step, line)
    Guard g;
    g.kind = GuardKind::SHAPE_ENV;
    g.text = str_of(PyTuple_GET_ITEM(item, 0));
    PyObject* refs = PyTuple_GET_ITEM(item, 1);
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(refs); ++k) {
      PyObject* r = PyList_GET_ITEM(refs, k);
      const long slot = PyLong_AsLong(PyTuple_GET_ITEM(r, 0));
      if (slot < 0 || slot >= static_cast<long>(sym_sources_.size())) {
        why = "a shape guard reads an unknown input";
        return false;
      }
      g.refs.push_back(SymRef{sym_sources_[slot], static_cast<int8_t>(PyLong_AsLong(PyTuple_GET_ITEM(r, 1))),
                              static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(r, 2)))});
    }
    PyObject* prog = PyTuple_GET_ITEM(item, 2);
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(prog); ++k) {
      PyObject* in = PyList_GET_ITEM(prog, k);
      g.program.push_back(ShapeInstr{static_cast<ShapeOp>(PyLong_AsLong(PyTuple_GET_ITEM(in, 0))),
                                     PyLong_AsLongLong(PyTuple_GET_ITEM(in, 1))});
    }
    if (PyErr_Occurred()) {
      why = "malformed shape guard";
      PyErr_Clear();
      return false;
    }
    g.step = static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(item, 3)));
    g.line = static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(item, 4)));
    guards.push_back(std::move(g));
    if (obs_) obs_->on_guard(GuardEvent{id_, "SHAPE_ENV", guards.back().text, guards.back().step, guards.back().line});
  }
  return true;
}

// ---- root ---------------------------------------------------------------------------------------

TraceResult Translator::run_root(PyObject* code, PyObject* globals, PyObject* builtins, PyObject* const* args,
                                 PyObject* closure) {
  TraceResult r;
  const CodeFacts* facts = code_facts(code);
  Frame f;
  f.facts = facts;
  auto* co = reinterpret_cast<PyCodeObject*>(code);
  f.globals = Ref::borrow(globals);
  f.builtins = Ref::borrow(builtins);
  root_ = &f;
  frames_.push_back(&f);
  if (!facts) {
    r.brk = Break{"DV0019", "cannot decode code object", "", "", -1, 0, -1, {}};
    PyErr_Clear();
    return r;
  }
  const int nlocalsplus = static_cast<int>(PyTuple_GET_SIZE(co->co_localsplusnames));
  f.locals.resize(nlocalsplus);
  const int nargs = co->co_argcount + co->co_kwonlyargcount + ((co->co_flags & CO_VARARGS) ? 1 : 0) +
                    ((co->co_flags & CO_VARKEYWORDS) ? 1 : 0);
  // Global state first: it applies to everything the graph computes.
  add_guard(GuardKind::GLOBAL_STATE, nullptr, {}, f, "___check_global_state()");
  guards.back().state = global_state();
  // Dynamic shapes: compare the arguments with what earlier compiles saw; anything symbolic makes
  // this a fake-tensor compile.
  if (dynamic_mode != DynamicMode::Off) {
    for (int i = 0; i < nargs; ++i)
      if (args[i]) plan_dynamic(args[i], "L['" + str_of(PyTuple_GET_ITEM(co->co_localsplusnames, i)) + "']", 0);
    if (!dyn_dims_.empty() || !dyn_ints_.empty()) {
      Ref mod = Ref::steal(PyImport_ImportModule("dynview._shapes"));
      dyn_ = mod ? Ref::steal(PyObject_CallMethod(mod.get(), "DynamicShapes", nullptr)) : Ref();
      if (!dyn_) {
        Ref err = take_error();
        r.brk = brk(f, "DV0021", "cannot set up dynamic shapes: " + (err ? repr_of(err.get()) : std::string("unknown error")));
        return r;
      }
      Ref env = Ref::steal(PyObject_GetAttrString(dyn_.get(), "env"));
      dyn_guards_ = env ? Ref::steal(PyObject_GetAttrString(env.get(), "guards")) : Ref();
      if (!dyn_guards_ || !PyList_Check(dyn_guards_.get())) {
        PyErr_Clear();
        dyn_guards_ = {};
      }
    }
  }
  for (int i = 0; i < nargs; ++i) {
    std::string name = str_of(PyTuple_GET_ITEM(co->co_localsplusnames, i));
    if (!args[i]) continue;
    VPtr v = wrap(Ref::borrow(args[i]), Source::local(i, name), f);
    if (!v) {
      r.brk = brk(f, "DV0013", "argument '" + name + "' of type " + Py_TYPE(args[i])->tp_name + " is not supported");
      return r;
    }
    f.locals[i] = v;
  }
  // Free variables: the function's closure cells, reachable as L['name'].
  const int nfree = co->co_nfreevars;
  for (int k = 0; k < nfree && closure; ++k) {
    const int slot = nlocalsplus - nfree + k;
    std::string name = str_of(PyTuple_GET_ITEM(co->co_localsplusnames, slot));
    PyObject* contents = PyCell_GET(PyTuple_GET_ITEM(closure, k));
    VPtr cell = make(VK::Cell);
    if (contents) {
      VPtr v = wrap(Ref::borrow(contents), Source::closure(k, name), f);
      if (!v) {
        r.brk = brk(f, "DV0013", "closure variable '" + name + "' of type " + Py_TYPE(contents)->tp_name + " is not supported");
        return r;
      }
      cell->items.push_back(v);
    }
    f.locals[slot] = cell;
  }
  if (obs_ && !announce_code(obs_, facts)) PyErr_Clear();
  Status s = run_frame(f);
  if (s && s->id == kStopId) {
    r.stopped = true;
    r.stack = f.stack;
    r.locals = f.locals;
    r.kw_names = f.kw_names;
  } else if (s) {
    r.brk = std::move(s);
  } else {
    r.ret = f.result;
  }
  return r;
}

#ifdef DV_CHECK_STACK
// Checked builds (make sanitize): every step moves the stack by the opcode table's stack effect
// (PRECALL's share is taken by the CALL after it, whose handler does the call's work).
void Translator::check_stack_effect(Frame& f, const bc::Instr& in, size_t before, bool jumped) {
  if (f.result) return;  // RETURN_VALUE ended the frame
  const bc::Version v = f.facts->decoded.version;
  const uint8_t op = bc::op_info(in.opcode, v).deopt;
  auto want = bc::stack_effect(op, in.arg == bc::kNone ? 0 : in.arg, jumped, v);
  if (!want) return;
  if (in.name == bc::Name::RETURN_GENERATOR) *want += 1;  // the value a resumed generator receives (popped next)
  // 3.12+: an exhausted FOR_ITER also skips what the table counts after the jump (END_FOR, 3.13: + POP_TOP).
  if (in.name == bc::Name::FOR_ITER && jumped && v != bc::Version::py311) *want -= 2;
  f.stack_drift += static_cast<int>(f.stack.size()) - static_cast<int>(before) - *want;
  if (in.name == bc::Name::PRECALL || f.stack_drift == 0) return;
  std::fprintf(stderr, "dynview: stack effect of %s (arg %d) at offset %u of %s is off by %d\n",
               std::string(bc::op_name(op, v)).c_str(), in.arg, in.offset, f.facts->qualname.c_str(), f.stack_drift);
  std::abort();
}
#endif

// The fake mode made a size that depends on tensor values (boolean indexing, nonzero, unique): the
// graph would need unbacked symbols, which dynview does not bind.
bool Translator::has_unbacked_symbols() {
  Ref env = Ref::steal(PyObject_GetAttrString(dyn_.get(), "env"));
  Ref pending = env ? Ref::steal(PyObject_GetAttrString(env.get(), "pending_fresh_unbacked_symbols")) : Ref();
  if (!pending) {
    PyErr_Clear();
    return false;
  }
  const int n = PyObject_IsTrue(pending.get());
  if (n < 0) PyErr_Clear();
  return n == 1;
}

void Translator::note_shape_guards(Frame& f, int step) {
  dyn_guards_seen_ = PyList_GET_SIZE(dyn_guards_.get());
  Ref r = Ref::steal(PyObject_CallMethod(dyn_.get(), "note", "ii", step, current_line(f)));
  if (!r) PyErr_Clear();
}

Translator::Status Translator::run_frame(Frame& f) {
  const auto& ins = f.facts->decoded.instrs;
  while (!f.result) {
    if (stop_at >= 0 && &f == root_ && f.ip == stop_at) {
      Break b;
      b.id = kStopId;
      return b;
    }
    if (f.ip < 0 || f.ip >= static_cast<int>(ins.size())) return brk(f, "DV0019", "fell off the end of the code");
    const bc::Instr& in = ins[f.ip++];
    const int step_no = cur_step_ = steps++;
    f.step_no = step_no;
    f.executing = &in;
    f.reported = false;
    Handler h = handler_for(in.name);
#ifdef DV_CHECK_STACK
    const size_t depth_before = f.stack.size();
    const int next_ip = f.ip;
#endif
    Status s;
    if (steps > 500000) s = brk(f, "DV0014", "too many symbolic steps (500000)", "the loop is probably too long to unroll");
    else if (!h) s = brk(f, "DV0001", "unsupported opcode " + std::string(bc::op_name(in.opcode, f.facts->decoded.version)), "dynview does not yet trace this bytecode");
    else s = h(*this, f, in);
    if (dyn_guards_ && PyList_GET_SIZE(dyn_guards_.get()) != dyn_guards_seen_) note_shape_guards(f, step_no);
    if (!s && dyn_ && has_unbacked_symbols())
      s = brk(f, "DV0003", "data-dependent output size (" + std::string(bc::op_name(in.opcode, f.facts->decoded.version)) + ")",
              "the size depends on tensor values; dynview breaks the graph here like torch.compile");
    if (s) {
      if (obs_ && !f.reported) report_step(f);  // the breaking step, with the stack it saw
      return s;
    }
#ifdef DV_CHECK_STACK
    check_stack_effect(f, in, depth_before, f.ip != next_ip);
#endif
    cur_step_ = step_no;  // an inlined call ran steps of its own
    if (obs_ && !f.reported) report_step(f);
  }
  return std::nullopt;
}

}  // namespace dv

namespace dv {

void Translator::announce(const VPtr& v) {
  v->announced = true;
  std::string type, meta;
  if (v->obj) type = Py_TYPE(v->obj.get())->tp_name;
  if (v->kind == VK::Tensor && v->obj) {
    type = "Tensor";
    meta = tensor_meta_text(v->obj.get(), v->device.get());
  }
  obs_->on_value(ValueEvent{v->id, cur_step_, vk_name(v->kind), describe(*v), v->source ? v->source->text() : "", v->node, std::move(type), std::move(meta)});
}

void Translator::report_step(Frame& f) {
  f.reported = true;
  const bc::Instr& in = *f.executing;
  const int saved = cur_step_;
  cur_step_ = f.step_no;
  std::vector<int> ids;
  ids.reserve(f.stack.size());
  for (const VPtr& v : f.stack) {
    if (v && !v->announced) announce(v);
    ids.push_back(v ? v->id : 0);
  }
  std::vector<std::pair<int, int>> changed;
  if (f.reported_locals.size() != f.locals.size()) f.reported_locals.assign(f.locals.size(), 0);
  for (size_t i = 0; i < f.locals.size(); ++i) {
    const VPtr& v = f.locals[i];
    const int id = v ? v->id : 0;
    if (id == f.reported_locals[i]) continue;
    if (v && !v->announced) announce(v);
    f.reported_locals[i] = id;
    changed.emplace_back(static_cast<int>(i), id);
  }
  const bool first = !f.started;
  f.started = true;
  obs_->on_step(StepEvent{id_, f.step_no, f.depth, first, f.facts->id, in.offset, in.opcode, in.arg, in.pos.line, &ids, &changed});
  cur_step_ = saved;
}

}  // namespace dv
