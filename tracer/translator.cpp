// The symbolic interpreter's core: frames, wrapping Python objects into Values (with guards),
// calls (graph calls, inlining, builtins) and the graph-call example values. Opcode handlers live
// in handlers_*.cpp.
#include "translator.h"
#include "handlers_common.h"
#include "values/kind.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "code_info.h"
#include "codegen.h"
#include "resume.h"

#include <frameobject.h>

#include "core/opcodes.h"
#include "frame_shim.h"
#include "pycache.h"
#include "tensor_match.h"

namespace dv {

const char* const kStopId = "__stop";

namespace {
// Why an opcode without a handler breaks the graph, where there is more to say than its name:
// (message, hint). TorchDynamo breaks at type parameters with a bound or constraints (def f[T: int]).
std::pair<std::string, std::string> no_handler_reason(const bc::Instr& in, bc::Version v) {
  if (in.name == bc::Name::CALL_INTRINSIC_2) {
    const auto n = bc::intrinsic_name(2, in.arg, v);
    return {"unsupported intrinsic " + std::string(n ? *n : "?") + " (CALL_INTRINSIC_2: except*, or type parameters of a generic function or class)",
            "move the generic definition or the except* block outside the compiled function"};
  }
  return {"unsupported opcode " + std::string(bc::op_name(in.opcode, v)), "dynview does not yet trace this bytecode"};
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

Translator::Translator(CompileId id, EngineObserver* obs, OutputGraph& output) : output(output), id_(id), obs_(obs) {}

int Translator::current_line(const Frame& f) const {
  int i = f.ip > 0 ? f.ip - 1 : 0;
  const auto& ins = f.facts->decoded.instrs;
  for (; i >= 0; --i)
    if (ins[i].pos.line != bc::kNone) return ins[i].pos.line;
  return -1;
}

Break Break::of(BreakId id, std::string message, std::string hint) {
  Break b;
  b.id = id.id();
  b.message = std::move(message);
  b.hint = hint.empty() ? std::string(id.hint()) : std::move(hint);
  return b;
}

Translator::Status Translator::brk(Frame& f, BreakId id, std::string msg, std::string hint) {
  Break b = Break::of(id, std::move(msg), std::move(hint));
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
  if (b.id == kNoAttributeId)  // AttributeError in eager: an except in the trace may catch it
    b.exc = Ref::steal(PyObject_CallOneArg(PyExc_AttributeError, Ref::steal(PyUnicode_FromString(b.message.c_str())).get()));
  if (PyErr_Occurred()) PyErr_Clear();
  return b;
}

Translator::Status Translator::raise(Frame& f, Ref exc, const std::string& what) {
  if (!exc || !PyExceptionInstance_Check(exc.get())) return brk(f, "DV0010", what.empty() ? "raise of a non-exception" : what);
  if (is_fake_id_error(exc.get()))  // eager computes with the real id: dynview has none
    return brk(f, "DV0018", (what.empty() ? std::string() : what + ": ") + "id() of a value made in the trace used as a number or text");
  Ref text = Ref::steal(PyObject_Str(exc.get()));
  std::string msg = std::string(Py_TYPE(exc.get())->tp_name) + (text && PyUnicode_GET_LENGTH(text.get()) ? ": " + str_of(text.get()) : "");
  if (!text) PyErr_Clear();
  Status s = brk(f, "DV0010", what.empty() ? msg : what + ": " + msg, "the exception is raised by the eager frame");
  s->exc = std::move(exc);
  return s;
}

Translator::Status Translator::raise_new(Frame& f, PyObject* type, const std::string& msg, const std::string& what) {
  Ref m = Ref::steal(PyUnicode_FromString(msg.c_str()));
  Ref exc = m ? Ref::steal(PyObject_CallOneArg(type, m.get())) : Ref();
  if (!exc) return brk(f, "DV0010", what.empty() ? msg : what + ": " + msg);
  return raise(f, std::move(exc), what);
}

Translator::Status Translator::raise_key_error(Frame& f, PyObject* key, const std::string& what) {
  return raise(f, Ref::steal(PyObject_CallOneArg(PyExc_KeyError, key)), what);
}

Translator::Status Translator::raise_current(Frame& f, const std::string& what) {
  if (!PyErr_Occurred()) return brk(f, "DV0010", what);
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  Ref t = Ref::steal(type), v = Ref::steal(value), b = Ref::steal(tb);
  if (v && PyExceptionInstance_Check(v.get())) PyException_SetTraceback(v.get(), Py_None);  // no frames of the trace kept alive
  PyErr_Clear();
  return raise(f, std::move(v), what);
}

bool Translator::catch_in(Frame& f, const bc::Instr& in, const Ref& exc) {
  for (const bc::ExcEntry& e : f.facts->decoded.exceptions) {
    if (in.offset < e.start || in.offset >= e.end) continue;
    auto it = f.facts->index_of.find(e.target);
    if (it == f.facts->index_of.end() || e.depth > f.stack.size()) return false;
    f.stack.resize(e.depth);
    f.stack_drift = 0;  // checked builds: the exception table sets the depth (a PRECALL's share is gone)
    f.kw_names = Ref();  // the raising CALL's KW_NAMES (3.11, 3.12) is not the handler's next call's
    if (e.lasti) f.stack.push_back(constant_steal(PyLong_FromLong(static_cast<long>(in.offset / 2))));
    VPtr v = make(VK::Object);
    v->obj = exc;
    f.stack.push_back(v);
    f.ip = it->second;
    return true;
  }
  return false;
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

Guard* Translator::add_guard(GuardKind kind, SourcePtr source, Ref value, Frame& f, std::string text) {
  // Guard events are reported once the compile knows which guards its cache entry keeps.
  return output.add_guard(kind, std::move(source), std::move(value), cur_step_, root_ ? current_line(f) : -1,
                          f.facts ? f.facts->filename : std::string(), std::move(text));
}

bool is_exact_const(PyObject* o) {
  return o == Py_None || o == Py_Ellipsis || PyBool_Check(o) || PyLong_CheckExact(o) || PyFloat_CheckExact(o) ||
         PyUnicode_CheckExact(o) || PyBytes_CheckExact(o) || PyComplex_CheckExact(o) ||
         Py_IS_TYPE(o, reinterpret_cast<PyTypeObject*>(py().torch_dtype.get())) ||
         Py_IS_TYPE(o, reinterpret_cast<PyTypeObject*>(py().torch_device.get())) ||
         Py_IS_TYPE(o, reinterpret_cast<PyTypeObject*>(py().torch_layout.get())) ||
         Py_IS_TYPE(o, reinterpret_cast<PyTypeObject*>(py().torch_memory_format.get())) ||
         Py_IS_TYPE(o, reinterpret_cast<PyTypeObject*>(py().torch_Size.get())) || PySlice_Check(o);
}

// An Enum's member whose class compares and hashes as the standard library's Enum does: its __eq__,
// __ne__ and __hash__ are C slots (a str or int mix-in's) or the enum module's. Folding a comparison
// of it now is then what running it later gives; a class with its own stays an object.
bool enum_member(PyObject* o) {
  PyTypeObject* tp = Py_TYPE(o);
  if (!PyObject_TypeCheck(reinterpret_cast<PyObject*>(tp), reinterpret_cast<PyTypeObject*>(py().enum_meta.get()))) return false;
  static PyObject* names[] = {PyUnicode_InternFromString("__eq__"), PyUnicode_InternFromString("__ne__"),
                              PyUnicode_InternFromString("__hash__")};
  for (PyObject* name : names) {
    PyObject* m = _PyType_Lookup(tp, name);
    if (!m || !PyFunction_Check(m)) continue;
    PyObject* mod = PyFunction_GET_MODULE(m);
    if (!mod || !PyUnicode_Check(mod) || PyUnicode_CompareWithASCIIString(mod, "enum") != 0) return false;
  }
  return true;
}

// A function torch.compiler.disable / torch._dynamo.disable made (its wrapper carries the mark), or
// one torch._disable_dynamo wrapped inside torch (Optimizer.zero_grad): its `inner`, which makes the
// disabled function on its first call.
namespace {
PyObject* disable_dynamo_inner_code() {
  static PyObject* code = [] {
    Ref mod = Ref::steal(PyImport_ImportModule("torch._compile"));
    Ref deco = mod ? Ref::steal(PyObject_GetAttrString(mod.get(), "_disable_dynamo")) : Ref();
    Ref made = deco ? Ref::steal(PyObject_CallOneArg(deco.get(), deco.get())) : Ref();  // _disable_dynamo(f) is inner
    PyObject* code = made && PyFunction_Check(made.get()) ? PyFunction_GET_CODE(made.get()) : nullptr;
    if (!code) PyErr_Clear();
    return Py_XNewRef(code);  // kept for the process
  }();
  return code;
}
}  // namespace

bool disable_wrapper(PyObject* fn) {
  return PyFunction_Check(fn) && PyFunction_GET_CODE(fn) == disable_dynamo_inner_code();
}

bool disabled_function(PyObject* fn) {
  if (!PyFunction_Check(fn)) return false;
  if (disable_wrapper(fn)) return true;
  Ref off = Ref::steal(PyObject_GetAttrString(fn, "_torchdynamo_disable"));
  if (!off) return PyErr_Clear(), false;
  const int on = PyObject_IsTrue(off.get());
  if (on < 0) PyErr_Clear();
  return on == 1;
}

Ref compiled_original(PyObject* fn) {
  if (!PyFunction_Check(fn) || disabled_function(fn)) return {};
  PyObject* mod = PyDict_GetItemString(PyFunction_GET_GLOBALS(fn), "__name__");  // (functools.wraps copies __module__)
  if (!mod || !PyUnicode_Check(mod) || str_of(mod) != "torch._dynamo.eval_frame") return {};
  Ref orig = Ref::steal(PyObject_GetAttrString(fn, "_torchdynamo_orig_callable"));
  if (!orig) PyErr_Clear();
  return orig;
}

bool const_key(PyObject* k) {
  // (a tuple of such keys too: a cache keyed by (seq_len, device, dtype) -- compared by value; and a
  // frozenset of them: a table keyed by a set of flags)
  if (PyTuple_CheckExact(k)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(k); ++i)
      if (!const_key(PyTuple_GET_ITEM(k, i))) return false;
    return true;
  }
  if (PyFrozenSet_CheckExact(k)) {
    Ref it = Ref::steal(PyObject_GetIter(k));
    if (!it) return PyErr_Clear(), false;
    while (Ref x = Ref::steal(PyIter_Next(it.get())))
      if (!const_key(x.get())) return false;
    return !PyErr_Occurred() || (PyErr_Clear(), false);
  }
  return is_exact_const(k) || enum_member(k);
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

// ---- root ---------------------------------------------------------------------------------------

CaptureResult capture(const CaptureRequest& req) {
  CaptureResult r;
  Translator t(req.id, req.obs, r.out);
  t.builder.frame_state = req.frame_state;
  t.builder.dynamic_mode = req.dynamic_mode;
  t.stop_at = req.stop_at;
  t.requires_grad_breaks = req.requires_grad_breaks;
  t.start_dynamic = req.dynamic;
  t.builder.static_floats = req.static_floats;
  {
    struct HooksLeftOut {  // the user's saved-tensor hooks never see the examples (tensor_match.h)
      bool prior = saved_tensor_hooks_tracing(true);
      ~HooksLeftOut() { saved_tensor_hooks_tracing(prior); }
    } hooks_left_out;
    t.run_root(req.code, req.globals, req.builtins, req.args, req.closure, r);
  }
  r.steps = t.steps;
  r.retry_dynamic = t.builder.wants_dynamic();
  r.grad_leaves = t.grad_leaf_nodes;
  // Distinct tensor inputs must stay distinct objects (TorchDynamo's NO_TENSOR_ALIASING): the graph
  // treats them as separate values, which an in-place op on one of them would contradict. A set-up
  // guard, like the global state's: shown at the first step.
  std::vector<SymRef> tensors;
  std::string text;
  for (size_t i = 0; i < r.out.inputs.size(); ++i) {
    if (!is_tensor(r.out.input_objects[i].get())) continue;
    tensors.push_back(SymRef{r.out.inputs[i].first});
    text += (text.empty() ? "" : ", ") + r.out.inputs[i].first->text();
  }
  if (tensors.size() >= 2) {
    if (Guard* g = r.out.add_guard(GuardKind::TENSOR_ALIASING, nullptr, {}, 0, -1, r.out.root_file,
                                   "___check_no_aliasing(" + text + ")")) {
      g->length = 0;
      g->refs = std::move(tensors);
    }
  }
  return r;
}

Translator::Status Translator::read_local(Frame& f, int slot) {
  if (!is_unread(f, slot)) return std::nullopt;
  Ref obj = std::move(f.unread[static_cast<size_t>(slot)]);
  const std::string name = local_name(f, slot);
  // A number, string or None stays a value not read yet while it only moves (passed on to an
  // inlined function that may not use it), as TorchDynamo's lazy locals: guarded where it is read.
  VPtr v = builder.leaf(obj, Source::local(slot, name), f);
  if (!v) return brk(f, "DV0013", "argument '" + name + "' of type " + Py_TYPE(obj.get())->tp_name + " is not supported");
  f.locals[static_cast<size_t>(slot)] = std::move(v);
  return std::nullopt;
}

void Translator::unread_as_sources(Frame& f) {
  for (size_t i = 0; i < f.unread.size(); ++i) {
    if (!f.unread[i]) continue;
    VPtr v = make(VK::Object);
    v->obj = std::move(f.unread[i]);
    v->source = Source::local(static_cast<int>(i), local_name(f, static_cast<int>(i)));
    f.locals[i] = std::move(v);
  }
}

// Values not read yet that cross a split into the resume function, read as TorchDynamo reads them
// there (OutputGraph.compile_subgraph): every one on the stack (realize_all), and a number or None in
// a live local (the isinstance checks of its fast path realize a lazy int, float or None, and guard
// a bool's or str's type only, which dynview does not), but for the frame's own unchanged argument.
// Cells keep theirs (passed as cells).
Translator::Status Translator::realize_crossing(Frame& f) {
  if (!builder.any_lazy()) return std::nullopt;
  for (const VPtr& v : f.stack)
    if (v && v->kind == VK::Lazy)
      if (Status s = realize_value(f, v)) return s;
  const std::vector<bool> live = live_locals(*f.facts, f.ip);
  for (size_t i = 0; i < f.locals.size() && i < live.size(); ++i) {
    const VPtr& v = f.locals[i];
    if (!live[i] || !v || v->kind != VK::Lazy) continue;
    // the frame's own argument, unchanged: passed as it came (TorchDynamo does not reconstruct it)
    if (v->source && v->source->kind == Source::Kind::Local && v->source->index == static_cast<int>(i)) continue;
    PyTypeObject* tp = Py_TYPE(v->lazy.get());
    if (tp == &PyLong_Type || tp == &PyFloat_Type || v->lazy.get() == Py_None)
      if (Status s = realize_value(f, v)) return s;
  }
  return std::nullopt;
}

void Translator::run_root(PyObject* code, PyObject* globals, PyObject* builtins, PyObject* const* args,
                          PyObject* closure, CaptureResult& r) {
  const CodeFacts* facts = code_facts(code);
  GuardKeysAtEntry entry_keys;  // tensors read later, inside inference_mode blocks, are guarded as the frame gets them
  Frame f;
  f.facts = facts;
  auto* co = reinterpret_cast<PyCodeObject*>(code);
  f.globals = Ref::borrow(globals);
  f.builtins = Ref::borrow(builtins);
  root_ = &f;
  if (facts) output.root_file = facts->filename;
  frames_.push_back(&f);
  if (!facts) {
    r.brk = Break::of("DV0019", "cannot decode code object");
    PyErr_Clear();
    return;
  }
  const int nlocalsplus = static_cast<int>(PyTuple_GET_SIZE(co->co_localsplusnames));
  f.locals.resize(nlocalsplus);
  const int nargs = co->co_argcount + co->co_kwonlyargcount + ((co->co_flags & CO_VARARGS) ? 1 : 0) +
                    ((co->co_flags & CO_VARKEYWORDS) ? 1 : 0);
  // Global state first: it applies to everything the graph computes.
  if (Guard* g = add_guard(GuardKind::GLOBAL_STATE, nullptr, {}, f, "___check_global_state()")) g->state = global_state();
  if (Status s = enter_outer_modes(f)) {
    r.brk = std::move(s);
    return;
  }
  // Dynamic shapes: compare the arguments with what earlier compiles saw; anything symbolic makes
  // this a fake-tensor compile.
  if (builder.dynamic_mode != DynamicMode::Off) {
    for (int i = 0; i < nargs; ++i)
      if (args[i]) builder.plan_dynamic(args[i], argument_text(co, i), 0);
    std::string why;
    if ((builder.has_dynamic_plan() || builder.history_dynamic() || start_dynamic) && !output.start_dynamic(why)) {
      r.brk = brk(f, "DV0021", "cannot set up dynamic shapes: " + why);
      return;
    }
  } else if (start_dynamic) {
    // dynamic=False, captured again for a 0-d int tensor an operator reads as a number
    // (ValueBuilder::ask_dynamic): fake tensors, with nothing planned symbolic but its item()
    std::string why;
    if (!output.start_dynamic(why)) {
      r.brk = brk(f, "DV0021", "cannot set up dynamic shapes: " + why);
      return;
    }
  }
  // The arguments are wrapped as the code reads them (read_local).
  f.unread.resize(nargs);
  for (int i = 0; i < nargs; ++i)
    if (args[i]) f.unread[i] = Ref::borrow(args[i]);
  // Free variables: the function's closure cells, reachable as L['name'].
  const int nfree = co->co_nfreevars;
  for (int k = 0; k < nfree && closure; ++k) {
    const int slot = nlocalsplus - nfree + k;
    std::string name = str_of(PyTuple_GET_ITEM(co->co_localsplusnames, slot));
    PyObject* contents = PyCell_GET(PyTuple_GET_ITEM(closure, k));
    VPtr cell = make(VK::Cell);
    cell->cell_of = k;
    real_cells_.push_back(RealCell{Ref::borrow(PyTuple_GET_ITEM(closure, k)), cell, Source::free_cell(k, name)});
    if (contents) {
      VPtr v = wrap(Ref::borrow(contents), Source::closure(k, name), f);
      if (!v) {
        r.brk = brk(f, "DV0013", "closure variable '" + name + "' of type " + Py_TYPE(contents)->tp_name + " is not supported");
        return;
      }
      cell->items.push_back(v);
    }
    f.locals[slot] = cell;
  }
  if (obs_ && !announce_code(obs_, facts)) PyErr_Clear();
  Status s = run_frame(f);
  if (s && s->id == kStopId) {
    if (Status crossing = realize_crossing(f)) {
      r.brk = std::move(crossing);
      mode_stack_change(r);
      return;
    }
    leave_inference_blocks(f);
    unread_as_sources(f);
    r.stopped = true;
    r.stack = f.stack;
    r.locals = f.locals;
    r.kw_names = f.kw_names;
  } else if (s) {
    r.brk = std::move(s);
  } else {
    r.ret = f.result;
  }
  mode_stack_change(r);
  return;
}

// How the thread's torch function mode stack must change after the graph for the frame to go on
// (or return) as the trace did: the modes the trace popped from those it began with (a resume
// function leaving a mode's block), then the ones it pushed (a break inside a mode's block: the
// breaking instruction and the resume function run under it, as in eager).
void Translator::mode_stack_change(CaptureResult& r) const {
  size_t common = 0;
  while (common < outer_modes_.size() && common < fn_modes_.size() && outer_modes_[common] == fn_modes_[common]) ++common;
  r.fn_mode_pops = static_cast<int>(outer_modes_.size() - common);
  r.fn_mode_pushes.assign(fn_modes_.begin() + static_cast<long>(common), fn_modes_.end());
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
  // The value a resumed generator receives (popped next): 3.13's table counts it, 3.11's and 3.12's do not.
  if (in.name == bc::Name::RETURN_GENERATOR && v != bc::Version::py313) *want += 1;
  if (in.name == bc::Name::YIELD_VALUE && f.suspended) *want -= 1;  // the value sent is pushed on resume, outside a step
  // 3.12+: an exhausted FOR_ITER also skips what the table counts after the jump (END_FOR, 3.13: + POP_TOP).
  if (in.name == bc::Name::FOR_ITER && jumped && v != bc::Version::py311) *want -= 2;
  f.stack_drift += static_cast<int>(f.stack.size()) - static_cast<int>(before) - *want;
  if (in.name == bc::Name::PRECALL || f.stack_drift == 0) return;
  std::fprintf(stderr, "dynview: stack effect of %s (arg %d) at offset %u of %s is off by %d\n",
               std::string(bc::op_name(op, v)).c_str(), in.arg, in.offset, f.facts->qualname.c_str(), f.stack_drift);
  std::abort();
}
#endif

Translator::Status Translator::run_frame(Frame& f) {
  const auto& ins = f.facts->decoded.instrs;
  while (!f.result && !f.suspended) {
    if (stop_at >= 0 && &f == root_ && f.ip == stop_at) {
      Break b;
      b.id = kStopId;
      return b;
    }
    if (f.ip < 0 || f.ip >= static_cast<int>(ins.size())) return brk(f, "DV0019", "fell off the end of the code");
    const bc::Instr& in = ins[f.ip++];
    const int fetched = f.ip;
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
    else if (!h) {
      auto [message, hint] = no_handler_reason(in, f.facts->decoded.version);
      s = brk(f, "DV0001", message, hint);
    }
    else if (pure_body_ > 0 && pure_body_changes(f, in, s)) {}  // s: the break
    else if (Status r = builder.any_lazy() ? realize_read(f, in) : std::nullopt) s = r;
    else s = h(*this, f, in);
    if (output.shape_guards_pending() && output.watch_shape_guards(step_no, current_line(f), f.facts->filename) && !s)
      s = (f.ip = fetched, brk(f, "DV0004", "a guard on a number drawn by Python's random module: the compiled code draws it when it runs, no guard can read it",
              "draw it with torch (torch.rand) to keep it in the graph, or outside the compiled function"));  // (at the step, if it jumped)
    if (!s && output.has_unbacked_symbols())
      s = brk(f, "DV0003", "data-dependent output size (" + std::string(bc::op_name(in.opcode, f.facts->decoded.version)) + ")",
              "the size depends on tensor values; dynview breaks the graph here like torch.compile");
    if (s && s->exc && catch_in(f, in, s->exc)) {  // raised and caught in the trace: on at the handler
      if (obs_ && !f.reported) report_step(f);
      cur_step_ = step_no;
      continue;
    }
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
  if (v->kind == VK::Lazy && v->lazy) type = Py_TYPE(v->lazy.get())->tp_name;
  else if (v->obj) type = ((v->kind == VK::Tuple || v->kind == VK::NpScalar) && PyType_Check(v->obj.get()))  // (its class)
                              ? reinterpret_cast<PyTypeObject*>(v->obj.get())->tp_name : Py_TYPE(v->obj.get())->tp_name;
  if (v->kind == VK::Tensor && v->obj) {
    type = "Tensor";
    meta = tensor_meta_text(v->obj.get(), v->device.get());
  }
  obs_->on_value(ValueEvent{v->id, cur_step_, vk_name(v->kind), describe(*v), v->source ? v->source->text() : "", v->node, std::move(type), std::move(meta)});
}

// An argument not read yet (Frame::unread), for the locals pane: a value of kind "argument" with its
// source, type and tensor meta, unwrapped and unguarded; reading it replaces it with the value it wraps to.
int Translator::announce_unread(Frame& f, size_t i) {
  if (f.unread_ids.size() != f.unread.size()) f.unread_ids.assign(f.unread.size(), 0);
  int& id = f.unread_ids[i];
  if (id) return id;
  id = next_value_++;
  PyObject* o = f.unread[i].get();
  std::string meta = is_tensor(o) ? tensor_meta_text(o, nullptr) : std::string();
  obs_->on_value(ValueEvent{id, cur_step_, "argument", "not read yet", Source::local(static_cast<int>(i), local_name(f, static_cast<int>(i)))->text(), -1,
                            is_tensor(o) ? "Tensor" : Py_TYPE(o)->tp_name, std::move(meta)});
  return id;
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
    int id = v ? v->id : 0;
    if (!v && is_unread(f, static_cast<int>(i))) id = announce_unread(f, i);
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
