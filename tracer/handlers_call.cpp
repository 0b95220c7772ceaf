// Opcode handlers, stack manipulation and calls: POP_TOP, PUSH_NULL, COPY, SWAP, KW_NAMES, PRECALL, CALL, CALL_FUNCTION_EX.
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
Status op_CALL(Translator& t, Frame& f, const Instr& in) {  // (NULL|meth, callable|self, args[n] -- result)
  const size_t n = static_cast<size_t>(in.arg);
  NEED(n + 2);
  std::vector<VPtr> args(f.stack.end() - static_cast<long>(n), f.stack.end());
  VPtr fn = top(f, n + 1);
  VPtr below = top(f, n + 2);
  if (below->kind != VK::Null) {  // method call convention: [meth, self, args...]
    args.insert(args.begin(), fn);
    fn = below;
  }
  std::vector<std::pair<std::string, VPtr>> kwargs;
  if (f.kw_names) {
    const Py_ssize_t nk = PyTuple_GET_SIZE(f.kw_names.get());
    for (Py_ssize_t i = 0; i < nk; ++i)
      kwargs.emplace_back(str_of(PyTuple_GET_ITEM(f.kw_names.get(), i)), args[args.size() - nk + i]);
    args.resize(args.size() - nk);
    f.kw_names = Ref();
  }
  VPtr out;
  if (Status s = t.call(f, fn, std::move(args), std::move(kwargs), out)) return s;
  f.stack.resize(f.stack.size() - n - 2);
  f.stack.push_back(out);
  return std::nullopt;
}
Status op_CALL_FUNCTION_EX(Translator& t, Frame& f, const Instr& in) {  // (NULL fn args [kwargs] -- result)
  const bool has_kw = in.arg & 1;
  NEED(has_kw ? 4u : 3u);
  VPtr kw = has_kw ? pop(f) : nullptr;
  VPtr argv = pop(f);
  VPtr fn = pop(f);
  VPtr null = pop(f);
  VPtr it;
  if (Status s = t.iterate(f, argv, it)) return s;
  std::vector<std::pair<std::string, VPtr>> kwargs;
  if (kw) {
    if (kw->kind != VK::Dict) return t.brk(f, "DV0007", "**kwargs is not a dict");
    for (size_t i = 0; i < kw->keys.size(); ++i) kwargs.emplace_back(str_of(kw->keys[i].get()), kw->items[i]);
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
