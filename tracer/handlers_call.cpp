// Opcode handlers, stack manipulation and calls: POP_TOP, PUSH_NULL, COPY, SWAP, KW_NAMES, PRECALL, CALL,
// CALL_KW, CALL_FUNCTION_EX, CALL_INTRINSIC_1.
// Each says its stack effect in a comment, checks before it mutates, and returns a Break for what
// it does not support. The dispatch table is in handlers.cpp.
#include "handlers_common.h"

namespace dv {

Status op_POP_TOP(Translator& t, Frame& f, const Instr&) { NEED(1); f.stack.pop_back(); return std::nullopt; }  // (v -- )
Status op_PUSH_NULL(Translator& t, Frame& f, const Instr&) { f.stack.push_back(t.make(VK::Null)); return std::nullopt; }
Status op_COPY(Translator& t, Frame& f, const Instr& in) {  // (.. v -- .. v v)
  NEED(static_cast<size_t>(in.arg));
  f.stack.push_back(top(f, in.arg));
  return std::nullopt;
}
Status op_SWAP(Translator& t, Frame& f, const Instr& in) {  // swap top and the n-th
  NEED(static_cast<size_t>(in.arg));
  std::swap(top(f), top(f, in.arg));
  return std::nullopt;
}

Status op_KW_NAMES(Translator&, Frame& f, const Instr& in) {  // ( -- )
  f.kw_names = Ref::borrow(PyTuple_GET_ITEM(code_of(f)->co_consts, in.arg));
  return std::nullopt;
}
Status op_PRECALL(Translator&, Frame&, const Instr&) { return std::nullopt; }
// CALL's operands below the arguments: 3.11/3.12 (NULL|meth, callable|self), 3.13 (callable,
// NULL|self). Either way a callable and, for a method call, the self argument it binds.
static void callee_of(const Frame& f, size_t below_args, VPtr& fn, VPtr& self) {
  const VPtr& a = top(const_cast<Frame&>(f), below_args + 2);
  const VPtr& b = top(const_cast<Frame&>(f), below_args + 1);
  if (null_after_callable(f)) {
    fn = a;
    self = b->kind == VK::Null ? nullptr : b;
  } else if (a->kind != VK::Null) {  // method call convention: [meth, self, args...]
    fn = a;
    self = b;
  } else {
    fn = b;
    self = nullptr;
  }
}
// The call of CALL / CALL_KW: `n` arguments (keywords named by `kw_names` last among them) above
// the callable pair, `extra` more items (CALL_KW's names tuple) above them.
static Status do_call(Translator& t, Frame& f, size_t n, PyObject* kw_names, size_t extra) {
  NEED(n + 2 + extra);
  std::vector<VPtr> args(f.stack.end() - static_cast<long>(n + extra), f.stack.end() - static_cast<long>(extra));
  VPtr fn, self;
  callee_of(f, n + extra, fn, self);
  if (self) args.insert(args.begin(), self);
  std::vector<std::pair<std::string, VPtr>> kwargs;
  if (kw_names) {
    const Py_ssize_t nk = PyTuple_GET_SIZE(kw_names);
    for (Py_ssize_t i = 0; i < nk; ++i)
      kwargs.emplace_back(str_of(PyTuple_GET_ITEM(kw_names, i)), args[args.size() - nk + i]);
    args.resize(args.size() - nk);
  }
  VPtr out;
  if (Status s = t.call(f, fn, std::move(args), std::move(kwargs), out)) return s;
  f.stack.resize(f.stack.size() - n - 2 - extra);
  f.stack.push_back(out);
  return std::nullopt;
}
Status op_CALL(Translator& t, Frame& f, const Instr& in) {  // (NULL|meth, callable|self, args[n] -- result)
  Ref kw = f.kw_names;  // KW_NAMES before it (3.11, 3.12)
  if (Status s = do_call(t, f, static_cast<size_t>(in.arg), kw.get(), 0)) return s;
  f.kw_names = Ref();
  return std::nullopt;
}
Status op_CALL_KW(Translator& t, Frame& f, const Instr& in) {  // 3.13 (callable, NULL|self, args[n], kwnames -- result)
  NEED(1);
  const VPtr& names = top(f);
  if (names->kind != VK::Const || !PyTuple_Check(names->obj.get())) return t.brk(f, "DV0019", "CALL_KW without a names tuple");
  Ref kw = names->obj;
  return do_call(t, f, static_cast<size_t>(in.arg), kw.get(), 1);
}
// 3.12+: list -> tuple (f(*args)) and unary +; the other intrinsics (import *, exceptions,
// generics) break the graph.
Status op_CALL_INTRINSIC_1(Translator& t, Frame& f, const Instr& in) {  // (value -- result)
  const auto name = bc::intrinsic_name(1, in.arg, version_of(f));
  if (name && *name == "INTRINSIC_LIST_TO_TUPLE") return op_LIST_TO_TUPLE(t, f, in);
  if (name && *name == "INTRINSIC_UNARY_POSITIVE") return op_UNARY_POSITIVE(t, f, in);
  if (name && *name == "INTRINSIC_STOPITERATION_ERROR") {  // a generator's own handler, on the way out: an
    NEED(1);                                               // exception other than StopIteration stays as it is
    const VPtr& v = top(f);
    if (v->kind == VK::Object && v->obj && PyExceptionInstance_Check(v->obj.get()) &&
        !PyErr_GivenExceptionMatches(v->obj.get(), PyExc_StopIteration) && !PyErr_GivenExceptionMatches(v->obj.get(), PyExc_StopAsyncIteration))
      return std::nullopt;
  }
  return t.brk(f, "DV0001", "unsupported intrinsic " + std::string(name ? *name : "?"), "dynview does not yet trace this bytecode");
}
Status op_CALL_FUNCTION_EX(Translator& t, Frame& f, const Instr& in) {  // (NULL fn args [kwargs] -- result)
  const bool has_kw = in.arg & 1;
  NEED(has_kw ? 4u : 3u);
  VPtr kw = has_kw ? pop(f) : nullptr;
  VPtr argv = pop(f);
  VPtr fn = pop(f);
  VPtr null = pop(f);
  if (null_after_callable(f)) {  // 3.13: (func, NULL, args [kwargs])
    std::swap(fn, null);
    null = t.make(VK::Null);
  }
  VPtr it;
  if (Status s = t.iterate(f, argv, it)) return s;
  std::vector<std::pair<std::string, VPtr>> kwargs;
  if (kw) {
    if (kw->kind != VK::Dict) return t.brk(f, "DV0007", "**kwargs is not a dict");
    for (size_t i = 0; i < kw->keys.size(); ++i) {
      if (!PyUnicode_Check(kw->keys[i].get())) return t.brk(f, "DV0007", "**kwargs with a key that is not a string", "the eager frame raises its TypeError");
      kwargs.emplace_back(str_of(kw->keys[i].get()), kw->items[i]);
    }
  }
  std::vector<VPtr> args = it->items;
  if (null->kind != VK::Null) {
    args.insert(args.begin(), fn);
    fn = null;
  }
  VPtr out;
  if (Status s = t.call(f, fn, std::move(args), std::move(kwargs), out)) return s;
  f.stack.push_back(out);
  return std::nullopt;
}

}  // namespace dv
