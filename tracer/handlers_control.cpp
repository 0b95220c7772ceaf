// Opcode handlers, control flow: jumps, iteration, return, raise, imports, generators, with-blocks.
// Each says its stack effect in a comment, checks before it mutates, and returns a Break for what
// it does not support. The dispatch table is in handlers.cpp.
#include "handlers_common.h"
#include "tracer/tensor_match.h"

namespace dv {

Status op_JUMP(Translator&, Frame& f, const Instr& in) { jump_to(f, in); return std::nullopt; }
namespace {
// `assert cond` / `assert cond, "message"` at the jump `in` (the jump over the raise): the message
// (a constant string, or null without one) and the index of the instruction after the raise; -1
// when the code there is not an assert statement's.
int assert_statement(const Frame& f, const Instr& in, PyObject*& message) {
  const auto& ins = f.facts->decoded.instrs;
  size_t i = static_cast<size_t>(f.ip);
  message = nullptr;
  if (i >= ins.size() || ins[i].name != bc::Name::LOAD_ASSERTION_ERROR) return -1;
  ++i;
  if (i < ins.size() && ins[i].name == bc::Name::LOAD_CONST) {
    PyObject* c = PyTuple_GET_ITEM(code_of(f)->co_consts, ins[i].arg);
    if (!PyUnicode_Check(c)) return -1;
    message = c;
    ++i;
    if (i < ins.size() && ins[i].name == bc::Name::PRECALL) ++i;
    if (i >= ins.size() || ins[i].name != bc::Name::CALL || ins[i].arg != 0) return -1;
    ++i;
  }
  if (i >= ins.size() || ins[i].name != bc::Name::RAISE_VARARGS || ins[i].arg != 1) return -1;
  auto target = f.facts->index_of.find(static_cast<uint32_t>(in.jump_target));
  return target != f.facts->index_of.end() && target->second == static_cast<int>(i) + 1 ? target->second : -1;
}
}  // namespace

static Status pop_jump_if(Translator& t, Frame& f, const Instr& in, bool when) {  // (cond -- )
  NEED(1);
  if (when && top(f)->kind == VK::Tensor && top(f)->obj) {
    // `assert t.all(), "msg"` over a one-element tensor: torch._assert_async(cond, msg) in the
    // graph, which raises when it runs, as TorchDynamo rewrites the statement (a failing assertion
    // is then a RuntimeError, as under torch.compile)
    PyObject* message = nullptr;
    const int after = assert_statement(f, in, message);
    if (after >= 0 && known_numel(top(f)) == 1) {
      static PyObject* assert_async = kept_attr("torch", "_assert_async");
      ArgTree cond, msg;
      static PyObject* no_message = PyUnicode_InternFromString("assertion error");  // TorchDynamo's text
      VPtr text = t.constant(Ref::borrow(message ? message : no_message));
      if (assert_async && t.to_arg(top(f), cond) && t.to_arg(text, msg)) {
        t.add_graph_call_kw(assert_async, {std::move(cond), std::move(msg)}, {});
        f.stack.pop_back();
        f.ip = after;
        return std::nullopt;
      }
    }
  }
  bool b;
  if (Status s = t.truth(f, top(f), b)) return s;
  f.stack.pop_back();
  if (b == when) jump_to(f, in);
  return std::nullopt;
}
Status op_POP_JUMP_IF_TRUE(Translator& t, Frame& f, const Instr& in) { return pop_jump_if(t, f, in, true); }
Status op_POP_JUMP_IF_FALSE(Translator& t, Frame& f, const Instr& in) { return pop_jump_if(t, f, in, false); }
static Status pop_jump_if_none(Translator& t, Frame& f, const Instr& in, bool when_none) {  // (v -- )
  NEED(1);
  VPtr v = pop(f);
  const bool is_none = v->kind == VK::Const && v->obj.get() == Py_None;
  if (is_none == when_none) jump_to(f, in);
  return std::nullopt;
}
Status op_POP_JUMP_IF_NONE(Translator& t, Frame& f, const Instr& in) { return pop_jump_if_none(t, f, in, true); }
Status op_POP_JUMP_IF_NOT_NONE(Translator& t, Frame& f, const Instr& in) { return pop_jump_if_none(t, f, in, false); }
static Status jump_or_pop(Translator& t, Frame& f, const Instr& in, bool when) {  // (cond -- cond | )
  NEED(1);
  bool b;
  if (Status s = t.truth(f, top(f), b)) return s;
  if (b == when) jump_to(f, in);
  else f.stack.pop_back();
  return std::nullopt;
}
Status op_JUMP_IF_TRUE_OR_POP(Translator& t, Frame& f, const Instr& in) { return jump_or_pop(t, f, in, true); }
Status op_JUMP_IF_FALSE_OR_POP(Translator& t, Frame& f, const Instr& in) { return jump_or_pop(t, f, in, false); }
Status op_GET_ITER(Translator& t, Frame& f, const Instr&) {  // (iterable -- iter)
  NEED(1);
  VPtr it;
  // Lazy iterators (map, filter, generators, groupby, count ...) stay lazy: FOR_ITER takes their
  // items one at a time, as Python does (a map's function runs between the loop's bodies; a
  // groupby's earlier group is empty once the next one is taken).
  const VPtr& v = top(f);
  // A real iterator the trace cannot follow (a map or zip object a resume function was given):
  // iter(it) is it, as TorchDynamo's opaque iterators; FOR_ITER, inside the loop, breaks on it.
  if (v->kind == VK::Object && v->obj && Py_TYPE(v->obj.get())->tp_iter == PyObject_SelfIter && !frozen_object(v->obj.get()))
    return std::nullopt;
  const bool lazy_itertool = v->kind == VK::Iter && v->flag;
  // (an object of a Python class: its __iter__ inlined; an iterator object it gives is taken lazily)
  if (Status s = iterate_user_object(t, f, v, it)) return s;
  if (!it && v->kind == VK::List)  // taken an item at a time: the loop body may change the list
    if (Status s = list_iterator(t, f, v, it)) return s;
  if (!it)
    if (Status s = t.iterate(f, v, it, /*materialize=*/!lazy_itertool)) return s;
  if (it == top(f)) {  // iter(iterator) is itself
    return std::nullopt;
  }
  top(f) = it;
  return std::nullopt;
}
Status op_FOR_ITER(Translator& t, Frame& f, const Instr& in) {  // (iter -- iter next) | (iter -- ) and jump
  NEED(1);
  VPtr it = top(f);
  if (it->kind != VK::Iter) {
    const std::string what = it->kind == VK::Object && it->obj ? std::string(" (") + Py_TYPE(it->obj.get())->tp_name + ")" : "";
    return t.brk(f, "DV0016", "FOR_ITER over an iterator the trace cannot follow" + what);
  }
  if (Status s = t.pull(f, it, it->pos + 1)) return s;
  if (it->pos < it->items.size()) {
    f.stack.push_back(it->items[it->pos++]);
  } else {
    f.stack.pop_back();
    jump_to(f, in);
    // 3.12+: the jump lands on END_FOR, which the interpreter skips (3.13: and the POP_TOP after it).
    const auto& ins = f.facts->decoded.instrs;
    if (f.ip < static_cast<int>(ins.size()) && ins[f.ip].name == bc::Name::END_FOR) {
      ++f.ip;
      if (version_of(f) >= bc::Version::py313 && f.ip < static_cast<int>(ins.size()) && ins[f.ip].name == bc::Name::POP_TOP) ++f.ip;
    }
  }
  return std::nullopt;
}
Status op_END_FOR(Translator& t, Frame& f, const Instr&) {  // 3.12 (iter value -- ), 3.13 (value -- )
  const size_t n = version_of(f) >= bc::Version::py313 ? 1 : 2;
  NEED(n);
  f.stack.resize(f.stack.size() - n);
  return std::nullopt;
}
// `yield from it` in a generator made in the trace: SEND takes it's next item, or (at its end) what
// it returned (a generator's return value; None for other iterators). Only None is ever sent.
Status op_GET_YIELD_FROM_ITER(Translator& t, Frame& f, const Instr&) {  // (iterable -- iter)
  NEED(1);
  if (top(f)->kind == VK::Iter) return std::nullopt;
  VPtr it;
  if (Status s = t.iterate(f, top(f), it, /*materialize=*/false)) return s;
  top(f) = it;
  return std::nullopt;
}
Status op_SEND(Translator& t, Frame& f, const Instr& in) {  // (receiver v -- receiver next) | at its end, jump
  NEED(2);
  VPtr v = top(f), it = top(f, 2);
  if (v->kind != VK::Const || v->obj.get() != Py_None) return t.brk(f, "DV0004", "send() of a value into a generator");
  if (it->kind != VK::Iter) return t.brk(f, "DV0016", "yield from a non-iterator");
  if (Status s = t.pull(f, it, it->pos + 1)) return s;
  if (it->pos < it->items.size()) {
    top(f) = it->items[it->pos++];
    return std::nullopt;
  }
  VPtr ret = it->frame && it->frame->result ? it->frame->result : t.constant(Ref::borrow(Py_None));
  if (version_of(f) >= bc::Version::py312) {
    top(f) = ret;  // (receiver retval), then END_SEND
  } else {
    f.stack.pop_back();
    top(f) = ret;
  }
  jump_to(f, in);
  return std::nullopt;
}
Status op_END_SEND(Translator& t, Frame& f, const Instr&) {  // (receiver value -- value)
  NEED(2);
  f.stack.erase(f.stack.end() - 2);
  return std::nullopt;
}
Status op_RETURN_VALUE(Translator& t, Frame& f, const Instr&) {  // (v -- )
  NEED(1);
  f.result = pop(f);
  return std::nullopt;
}
Status op_RETURN_CONST(Translator& t, Frame& f, const Instr& in) {  // ( -- ): 3.12+
  f.result = t.constant(Ref::borrow(PyTuple_GET_ITEM(code_of(f)->co_consts, in.arg)));
  return std::nullopt;
}
// Exceptions: a raise in the trace is what eager raises there; a handler of a frame in the trace
// (try/except/finally, the exception table) catches it (Translator::catch_in), uncaught it is a break.
// Exception classes whose __new__ and __init__ are builtin are made here (no user code runs).
static bool builtin_init(PyObject* cls) {
  for (const char* n : {"__init__", "__new__"}) {
    Ref m = Ref::steal(PyObject_GetAttrString(cls, n));
    if (!m) return PyErr_Clear(), false;
    if (PyFunction_Check(m.get()) || PyMethod_Check(m.get())) return false;
  }
  return true;
}
bool simple_exception_class(PyObject* cls) { return PyExceptionClass_Check(cls) && builtin_init(cls); }
static Status exception_of(Translator& t, Frame& f, const VPtr& v, Ref& out) {
  PyObject* o = v->obj.get();
  if (o && (v->kind == VK::Object || v->kind == VK::Const) && PyExceptionInstance_Check(o)) {
    out = v->obj;
    return std::nullopt;
  }
  if (o && (v->kind == VK::Object || v->kind == VK::Const) && simple_exception_class(o)) {
    out = Ref::steal(PyObject_CallNoArgs(o));
    if (out) return std::nullopt;
    return t.raise_current(f, "raise");
  }
  return t.brk(f, "DV0010", std::string("raise of a ") + vk_name(v->kind) + (o ? std::string(" ") + Py_TYPE(o)->tp_name : ""),
               "the exception is raised by the eager frame");
}
Status op_RAISE_VARARGS(Translator& t, Frame& f, const Instr& in) {  // (args[oparg] -- )
  NEED(static_cast<size_t>(in.arg));
  if (in.arg == 0) {  // re-raise the exception being handled
    if (!t.exc_info || !t.exc_info->obj) return t.brk(f, "DV0010", "re-raise of an exception handled outside the traced code");
    return t.raise(f, t.exc_info->obj);
  }
  VPtr cause = in.arg == 2 ? pop(f) : nullptr;
  VPtr v = pop(f);
  Ref exc;
  if (Status s = exception_of(t, f, v, exc)) return s;
  if (cause) {
    Ref c;
    if (cause->kind == VK::Const && cause->obj.get() == Py_None) {
      c = Ref::borrow(Py_None);
    } else if (Status s = exception_of(t, f, cause, c)) {
      return s;
    }
    PyException_SetCause(exc.get(), c.get() == Py_None ? nullptr : Ref(c).release());
    PyException_SetContext(exc.get(), nullptr);
    reinterpret_cast<PyBaseExceptionObject*>(exc.get())->suppress_context = 1;
  } else if (t.exc_info && t.exc_info->obj && t.exc_info->obj.get() != exc.get()) {  // raised inside an except block
    // As CPython's _PyErr_SetObject: the handled exception becomes the context, and a link back to
    // the raised one along the handled one's context chain is cut, so that no cycle is made (a
    // cycle that was already there is walked once, Floyd's way, and left alone).
    PyObject* o = t.exc_info->obj.get();
    PyObject* slow = o;
    bool toggle = false;
    while (PyObject* context = PyException_GetContext(o)) {
      Py_DECREF(context);  // still held by o
      if (context == exc.get()) {
        PyException_SetContext(o, nullptr);
        break;
      }
      o = context;
      if (o == slow) break;
      if (toggle) {
        slow = PyException_GetContext(slow);
        Py_XDECREF(slow);
      }
      toggle = !toggle;
    }
    PyException_SetContext(exc.get(), Ref(t.exc_info->obj).release());
  }
  return t.raise(f, std::move(exc));
}
Status op_LOAD_ASSERTION_ERROR(Translator& t, Frame& f, const Instr&) {  // ( -- AssertionError)
  VPtr v = t.make(VK::Object);
  v->obj = Ref::borrow(PyExc_AssertionError);
  f.stack.push_back(v);
  return std::nullopt;
}
// builtins.__build_class__ (the call of it breaks: builtins.cpp).
Status op_LOAD_BUILD_CLASS(Translator& t, Frame& f, const Instr&) {  // ( -- __build_class__)
  PyObject* b = f.builtins && PyDict_Check(f.builtins.get()) ? PyDict_GetItemString(f.builtins.get(), "__build_class__") : nullptr;
  if (!b || !PyCFunction_Check(b))
    return t.brk(f, "DV0001", "class definition inside the compiled function (LOAD_BUILD_CLASS)",
                 "define the class outside the compiled function (torch.compile breaks at a class body too)");
  VPtr v = t.make(VK::Object);
  v->obj = Ref::borrow(b);
  f.stack.push_back(v);
  return std::nullopt;
}
Status op_PUSH_EXC_INFO(Translator& t, Frame& f, const Instr&) {  // (exc -- prev exc): entering a handler
  NEED(1);
  VPtr exc = pop(f);
  f.stack.push_back(t.exc_info ? t.exc_info : t.make(VK::Null));  // Null: what was handled outside the trace
  f.stack.push_back(exc);
  t.exc_info = exc;
  return std::nullopt;
}
Status op_POP_EXCEPT(Translator& t, Frame& f, const Instr&) {  // (prev -- ): leaving a handler
  NEED(1);
  VPtr prev = pop(f);
  t.exc_info = prev->kind == VK::Null ? nullptr : prev;
  return std::nullopt;
}
Status op_CHECK_EXC_MATCH(Translator& t, Frame& f, const Instr&) {  // (exc type -- exc bool)
  NEED(2);
  const VPtr& exc = top(f, 2);
  const VPtr& type = top(f);
  Ref types;
  if (type->kind == VK::Tuple) {
    types = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(type->items.size())));
    for (size_t i = 0; i < type->items.size(); ++i) {
      const VPtr& it = type->items[i];
      if (!it->obj || (it->kind != VK::Object && it->kind != VK::Const)) return t.brk(f, "DV0018", "except with a computed class");
      PyTuple_SET_ITEM(types.get(), i, Ref(it->obj).release());
    }
  } else if (type->obj && (type->kind == VK::Object || type->kind == VK::Const)) {
    types = type->obj;
  } else {
    return t.brk(f, "DV0018", std::string("except with a ") + vk_name(type->kind));
  }
  if (!exc->obj || !PyExceptionInstance_Check(exc->obj.get())) return t.brk(f, "DV0018", "except over a value that is not an exception");
  const int r = PyErr_GivenExceptionMatches(exc->obj.get(), types.get());
  f.stack.pop_back();
  f.stack.push_back(t.constant(Ref::borrow(r ? Py_True : Py_False)));
  return std::nullopt;
}
Status op_RERAISE(Translator& t, Frame& f, const Instr&) {  // (exc -- ): the handler did not handle it
  NEED(1);
  VPtr exc = pop(f);
  if (!exc->obj || !PyExceptionInstance_Check(exc->obj.get())) return t.brk(f, "DV0019", "RERAISE of a non-exception");
  return t.raise(f, exc->obj);
}
// An import inside a function of a module that is already imported (its submodules in the from-list
// too) has no effect besides the lookup: the module is a constant, read back as __import__(name).
// Importing a module for the first time runs its code, so that breaks the graph.
Status op_IMPORT_NAME(Translator& t, Frame& f, const Instr& in) {  // (level fromlist -- module)
  NEED(2);
  const std::string name = name_at(f, in.arg);
  const VPtr& level = top(f, 2);
  const VPtr& fromlist = top(f, 1);
  auto refuse = [&](const std::string& why) { return t.brk(f, "DV0011", "import of " + name + " inside traced code: " + why, "import at module level"); };
  if (level->kind != VK::Const || fromlist->kind != VK::Const) return refuse("computed import arguments");
  const long lvl = PyLong_AsLong(level->obj.get());
  if (lvl < 0) return PyErr_Clear(), refuse("bad level");
  std::string full = name;
  if (lvl > 0) {  // relative: resolved against the frame's package
    PyObject* pkg = PyDict_GetItemString(f.globals.get(), "__package__");
    if (!pkg || !PyUnicode_Check(pkg)) return refuse("relative import without __package__");
    std::string base = str_of(pkg);
    for (long k = 1; k < lvl; ++k) {
      const size_t dot = base.rfind('.');
      if (dot == std::string::npos) return refuse("relative import beyond the top-level package");
      base.resize(dot);
    }
    full = name.empty() ? base : base + "." + name;
  }
  PyObject* modules = PyImport_GetModuleDict();
  auto imported = [&](const std::string& n) { return PyDict_GetItemString(modules, n.c_str()) != nullptr; };
  if (!imported(full)) return refuse("the module is not imported yet (importing it runs its code)");
  PyObject* fl = fromlist->obj.get();
  if (PyTuple_Check(fl)) {
    PyObject* mod = PyDict_GetItemString(modules, full.c_str());
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fl); ++i) {
      const std::string item = str_of(PyTuple_GET_ITEM(fl, i));
      if (item == "*") return refuse("import *");
      if (!imported(full + "." + item) && !PyObject_HasAttrString(mod, item.c_str()))
        return refuse("'" + item + "' is a submodule not imported yet");
    }
  }
  Ref name_obj = Ref::steal(PyUnicode_FromString(name.c_str()));
  Ref mod = Ref::steal(PyImport_ImportModuleLevelObject(name_obj.get(), f.globals.get(), nullptr, fl, static_cast<int>(lvl)));
  if (!mod) {
    PyErr_Clear();
    return refuse("the import failed");
  }
  Ref mod_name = Ref::steal(PyObject_GetAttrString(mod.get(), "__name__"));
  if (!mod_name) PyErr_Clear();
  VPtr v = t.make(VK::Object);
  v->obj = mod;
  v->source = Source::held(mod, "__import__(" + repr_of(mod_name ? mod_name.get() : name_obj.get()) + ")");
  pop(f);
  top(f) = v;
  return std::nullopt;
}
Status op_IMPORT_FROM(Translator& t, Frame& f, const Instr& in) {  // (module -- module attr)
  NEED(1);
  VPtr out;
  if (Status s = t.getattr(f, top(f), name_at(f, in.arg), out)) return s;
  f.stack.push_back(out);
  return std::nullopt;
}

Status op_RETURN_GENERATOR(Translator& t, Frame& f, const Instr&) {  // ( -- None): the first resume
  if (!f.generator) return t.brk(f, "DV0019", "generator outside an inlined call");
  f.stack.push_back(t.constant(Ref::borrow(Py_None)));
  return std::nullopt;
}
Status op_YIELD_VALUE(Translator& t, Frame& f, const Instr&) {  // (v -- sent)
  NEED(1);
  if (!f.generator) return t.brk(f, "DV0019", "yield outside an inlined generator");
  f.yielded = pop(f);
  f.suspended = true;  // the sent value is pushed when it is resumed
  return std::nullopt;
}

Status op_BEFORE_WITH(Translator& t, Frame& f, const Instr&) {  // (mgr -- exit enter_result)
  NEED(1);
  VPtr mgr = top(f);
  // a context manager object from outside of a Python class (contextlib.nullcontext() passed in, a
  // user's section object held by a module), its class guarded: the same as one made in the trace
  PyTypeObject* outside_cm = nullptr;
  if (mgr->kind == VK::Object && mgr->obj && mgr->source && !PyType_Check(mgr->obj.get()) &&
      (Py_TYPE(mgr->obj.get())->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
    static PyObject* enter_name = PyUnicode_InternFromString("__enter__");
    static PyObject* exit_name = PyUnicode_InternFromString("__exit__");
    PyObject* enter = _PyType_Lookup(Py_TYPE(mgr->obj.get()), enter_name);
    PyObject* exit = _PyType_Lookup(Py_TYPE(mgr->obj.get()), exit_name);
    Ref mod = Ref::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(mgr->obj.get())), "__module__"));
    PyErr_Clear();
    const bool torch_class = mod && PyUnicode_Check(mod.get()) && str_of(mod.get()).rfind("torch", 0) == 0;
    if (enter && exit && PyFunction_Check(enter) && PyFunction_Check(exit) && !torch_class) {
      outside_cm = Py_TYPE(mgr->obj.get());
      t.add_guard(GuardKind::TYPE_MATCH, mgr->source, Ref::borrow(reinterpret_cast<PyObject*>(outside_cm)), f,
                  "___check_type_id(" + mgr->source->text() + ", " + outside_cm->tp_name + ")");
    }
  }
  if (mgr->kind == VK::Instance || outside_cm) {  // a context manager made in the trace: __enter__ now, __exit__ at the end
    auto* tp = outside_cm ? outside_cm : reinterpret_cast<PyTypeObject*>(mgr->obj.get());
    static PyObject* enter_name = PyUnicode_InternFromString("__enter__");
    static PyObject* exit_name = PyUnicode_InternFromString("__exit__");
    PyObject* enter = _PyType_Lookup(tp, enter_name);
    PyObject* exit = _PyType_Lookup(tp, exit_name);
    if (!enter || !exit || !PyFunction_Check(enter) || !PyFunction_Check(exit))
      return t.brk(f, "DV0009", std::string("context manager ") + tp->tp_name + " whose __enter__/__exit__ are not Python functions");
    VPtr r;
    if (Status s = t.call_python(f, Ref::borrow(enter), {mgr}, r)) return s;
    top(f) = t.bound_method(mgr, Ref::borrow(exit), "__exit__");
    f.stack.push_back(r);
    return std::nullopt;
  }
  if (mgr->kind == VK::Object && is_autocast(mgr->obj.get())) return t.enter_autocast(f, mgr);
  if (mgr->kind == VK::GradMode && mgr->name == kSdpaKernel) return t.enter_sdpa_kernel(f, mgr);
  if (mgr->kind == VK::GradMode && mgr->name == kSavedHooksOff) return t.enter_saved_hooks_off(f, mgr);
  if (mgr->kind == VK::Object && is_inference_mode(mgr->obj.get())) return t.enter_inference_mode(f, mgr);
  if (mgr->kind == VK::Object && mgr->obj &&
      (Py_TYPE(mgr->obj.get()) == reinterpret_cast<PyTypeObject*>(py().no_grad.get()) ||
       Py_TYPE(mgr->obj.get()) == reinterpret_cast<PyTypeObject*>(py().enable_grad.get()))) {
    // a torch.no_grad() / enable_grad() object from outside (made before a break, or a global):
    // it holds no state but its class, which its guard checks
    if (mgr->source)
      t.add_guard(GuardKind::TYPE_MATCH, mgr->source, Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(mgr->obj.get()))), f,
                  "___check_type_id(" + mgr->source->text() + ", " + Py_TYPE(mgr->obj.get())->tp_name + ")");
    VPtr g = t.make(VK::GradMode);
    g->flag = Py_TYPE(mgr->obj.get()) == reinterpret_cast<PyTypeObject*>(py().enable_grad.get());
    top(f) = mgr = g;
  }
  if (mgr->kind != VK::GradMode || mgr->name == kGradExit || mgr->name == kGradDecorated || mgr->name == kAutocastExit ||
      mgr->name == kInferenceExit || mgr->name == kSdpaExit || mgr->name == kSavedHooksExit)
    return t.brk(f, "DV0009", "unsupported context manager",
                 "torch.no_grad/enable_grad/set_grad_enabled and context managers made in the traced code (Python __enter__/__exit__) are traced");
  bool prev = grad_mode_enabled();
  if (mgr->name == kGradSetEnabled) {
    prev = mgr->obj.get() == Py_True;  // set_grad_enabled(b) set the mode when it was made; its exit restores the one before
  } else if (Status s = set_grad_mode(t, f, mgr->flag)) {
    return s;
  }
  VPtr exit = t.make(VK::GradMode);
  exit->name = kGradExit;
  exit->flag = prev;  // the mode to restore
  top(f) = exit;
  f.stack.push_back(t.constant(Ref::borrow(Py_None)));
  return std::nullopt;
}

// A with-block left by an exception: __exit__(type, value, traceback) decides whether it is
// suppressed (the traceback is None here).
Status op_WITH_EXCEPT_START(Translator& t, Frame& f, const Instr&) {  // (exit lasti prev val -- exit lasti prev val res)
  NEED(4);
  VPtr exit = top(f, 4), val = top(f);
  if (!val->obj || !PyExceptionInstance_Check(val->obj.get())) return t.brk(f, "DV0019", "WITH_EXCEPT_START without an exception");
  VPtr r;
  if (exit->kind == VK::GradMode && exit->name == kAutocastExit) {
    if (Status s = t.exit_autocast(f, exit, r)) return s;  // (does not suppress it)
  } else if (exit->kind == VK::GradMode && exit->name == kInferenceExit) {
    if (Status s = t.exit_inference_mode(f, exit, r)) return s;  // (does not suppress it)
  } else if (exit->kind == VK::GradMode && exit->name == kSdpaExit) {
    if (Status s = t.exit_sdpa_kernel(f, exit, r)) return s;  // (does not suppress it)
    r = t.constant(Ref::borrow(Py_False));
  } else if (exit->kind == VK::GradMode && exit->name == kSavedHooksExit) {
    if (Status s = t.exit_saved_hooks_off(f, exit, r)) return s;  // (does not suppress it)
    r = t.constant(Ref::borrow(Py_False));
  } else if (exit->kind == VK::GradMode) {
    if (Status s = call_grad_exit(t, f, exit, r)) return s;
    r = t.constant(Ref::borrow(Py_False));
  } else if (Status s = t.call(f, exit, {t.constant(Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(val->obj.get())))), val,
                                         t.constant(Ref::borrow(Py_None))}, {}, r)) {
    return s;
  }
  f.stack.push_back(r);
  return std::nullopt;
}

// The __exit__ call of a with-block arrives as CALL 2 on (exit, None, None, None) after PRECALL;
// a GradMode value as callee restores the recorded mode.
Translator::Status call_grad_exit(Translator& t, Frame& f, const VPtr& exit, VPtr& out) {
  if (Translator::Status s = set_grad_mode(t, f, exit->flag)) return s;
  out = t.constant(Ref::borrow(Py_None));
  return std::nullopt;
}


// torch._C._set_grad_enabled(mode): a graph node, and the mode while tracing (eval_frame.cpp puts
// back the mode the frame started in after each capture).
Translator::Status set_grad_mode(Translator& t, Frame& f, bool mode) {
  VPtr r;
  if (Translator::Status s = t.graph_call(f, py().set_grad_enabled_fn, "", {t.constant(Ref::borrow(mode ? Py_True : Py_False))}, {}, r)) return s;
  set_grad_mode_enabled(mode);
  return std::nullopt;
}

}  // namespace dv
