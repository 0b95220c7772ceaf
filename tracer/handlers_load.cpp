// Opcode handlers, load, store, cells and functions: LOAD_*/STORE_*/DELETE_FAST, closures, MAKE_FUNCTION.
// Each says its stack effect in a comment, checks before it mutates, and returns a Break for what
// it does not support. The dispatch table is in handlers.cpp.
#include "handlers_common.h"

namespace dv {

Status op_NOP(Translator&, Frame&, const Instr&) { return std::nullopt; }  // ( -- )

Status op_LOAD_FAST(Translator& t, Frame& f, const Instr& in) {  // ( -- value)
  if (Status s = t.read_local(f, in.arg)) return s;
  const VPtr& v = f.locals[in.arg];
  if (!v) return t.brk(f, "DV0010", "UnboundLocalError: local variable '" + local_name(f, in.arg) + "' referenced before assignment");
  f.stack.push_back(v);
  return std::nullopt;
}
Status op_STORE_FAST(Translator& t, Frame& f, const Instr& in) {  // (value -- )
  NEED(1);
  VPtr v = pop(f);
  if (v->kind == VK::Null) v = nullptr;  // 3.12 comprehensions restore an unbound local (LOAD_FAST_AND_CLEAR)
  t.forget_unread(f, in.arg);
  f.locals[in.arg] = std::move(v);
  return std::nullopt;
}
Status op_LOAD_FAST_AND_CLEAR(Translator& t, Frame& f, const Instr& in) {  // ( -- value|NULL)
  if (Status s = t.read_local(f, in.arg)) return s;
  f.stack.push_back(f.locals[in.arg] ? f.locals[in.arg] : t.make(VK::Null));
  f.locals[in.arg] = nullptr;
  return std::nullopt;
}
Status op_LOAD_FAST_LOAD_FAST(Translator& t, Frame& f, const Instr& in) {  // ( -- value1 value2)
  for (int slot : {in.index, in.index2})
    if (Status s = t.read_local(f, slot)) return s;
  for (int slot : {in.index, in.index2})
    if (!f.locals[slot]) return t.brk(f, "DV0010", "UnboundLocalError: local variable '" + local_name(f, slot) + "' referenced before assignment");
  f.stack.push_back(f.locals[in.index]);
  f.stack.push_back(f.locals[in.index2]);
  return std::nullopt;
}
Status op_STORE_FAST_STORE_FAST(Translator& t, Frame& f, const Instr& in) {  // (value2 value1 -- )
  NEED(2);
  t.forget_unread(f, in.index);
  t.forget_unread(f, in.index2);
  f.locals[in.index] = pop(f);
  f.locals[in.index2] = pop(f);
  return std::nullopt;
}
Status op_STORE_FAST_LOAD_FAST(Translator& t, Frame& f, const Instr& in) {  // (value1 -- value2)
  NEED(1);
  if (in.index2 != in.index)
    if (Status s = t.read_local(f, in.index2)) return s;
  t.forget_unread(f, in.index);
  if (!f.locals[in.index2] && in.index2 != in.index)
    return t.brk(f, "DV0010", "UnboundLocalError: local variable '" + local_name(f, in.index2) + "' referenced before assignment");
  f.locals[in.index] = pop(f);
  f.stack.push_back(f.locals[in.index2]);
  return std::nullopt;
}
Status op_DELETE_FAST(Translator& t, Frame& f, const Instr& in) {  // ( -- )
  if (t.is_unread(f, in.arg)) {  // an argument never read: no guard
    t.forget_unread(f, in.arg);
    return std::nullopt;
  }
  if (!f.locals[in.arg]) return t.brk(f, "DV0010", "UnboundLocalError: local variable '" + local_name(f, in.arg) + "' referenced before assignment");
  f.locals[in.arg] = nullptr;
  return std::nullopt;
}
Status op_LOAD_CONST(Translator& t, Frame& f, const Instr& in) {  // ( -- value)
  PyObject* c = PyTuple_GET_ITEM(code_of(f)->co_consts, in.arg);
  if (PyCode_Check(c) || PyType_Check(c)) {  // (a class: torch.inference_mode in a resume function's prologue)
    VPtr v = t.make(VK::Object);
    v->obj = Ref::borrow(c);
    f.stack.push_back(v);
    return std::nullopt;
  }
  if (PyFunction_Check(c)) {  // (disable_saved_tensors_hooks in a resume function's prologue): a function as loaded
    if (VPtr v = t.wrap(Ref::borrow(c), nullptr, f)) {
      f.stack.push_back(v);
      return std::nullopt;
    }
    PyErr_Clear();
  }
  f.stack.push_back(t.constant(Ref::borrow(c)));
  return std::nullopt;
}
Status op_LOAD_GLOBAL(Translator& t, Frame& f, const Instr& in) {  // ( -- [NULL] value)
  std::string name = name_at(f, in.index);
  if (VPtr written = t.output.side_effects.global_written(f.globals.get(), name)) {  // stored earlier in the trace
    if (in.push_null) push_with_null(t, f, written);
    else f.stack.push_back(written);
    return std::nullopt;
  }
  Ref key = Ref::steal(PyUnicode_FromString(name.c_str()));
  PyObject* v = PyDict_GetItemWithError(f.globals.get(), key.get());
  SourcePtr src;
  if (v) {
    src = f.globals_source ? Source::item(f.globals_source, key) : Source::global(name);
  } else {
    if (PyErr_Occurred()) return t.brk(f, "DV0010", "global lookup raised");
    PyObject* b = f.builtins.get();
    v = PyDict_Check(b) ? PyDict_GetItemWithError(b, key.get()) : nullptr;
    if (!v) return t.brk(f, "DV0010", "NameError: name '" + name + "' is not defined");
    src = nullptr;  // builtins are fixed for the process
  }
  VPtr val = t.wrap(Ref::borrow(v), src, f);
  if (!val) return t.brk(f, "DV0013", "global '" + name + "' of type " + Py_TYPE(v)->tp_name + " cannot be traced");
  if (in.push_null) push_with_null(t, f, val);
  else f.stack.push_back(val);
  return std::nullopt;
}
// `global g; g = v`: a write to the module's globals, replayed by the transformed code after the
// graph (as attribute writes are); later reads in the trace see it.
Status op_STORE_GLOBAL(Translator& t, Frame& f, const Instr& in) {  // (value -- )
  NEED(1);
  VPtr v = top(f);
  if (v->kind == VK::Null || v->kind == VK::Cell || v->kind == VK::Iter || v->kind == VK::Slice)
    return t.brk(f, "DV0008", "storing a " + std::string(vk_name(v->kind)) + " to global '" + name_at(f, in.index) + "'");
  t.output.side_effects.global_writes.push_back(SideEffects::GlobalWrite{f.globals, name_at(f, in.index), v});
  f.stack.pop_back();
  return std::nullopt;
}
Status op_LOAD_ATTR(Translator& t, Frame& f, const Instr& in) {  // (owner -- value) | 3.12+ method form (owner -- meth, self)
  if (in.push_null) return op_LOAD_METHOD(t, f, in);
  NEED(1);
  VPtr out;
  if (Status s = t.getattr(f, top(f), name_at(f, in.index), out)) return s;
  top(f) = out;
  return std::nullopt;
}
// The method is bound here: pushed as the callable with a NULL beside it (the CALL layout of the
// version: 3.11/3.12 NULL meth, 3.13 meth NULL).
Status op_LOAD_METHOD(Translator& t, Frame& f, const Instr& in) {  // (owner -- NULL meth)
  NEED(1);
  VPtr out;
  if (Status s = t.getattr(f, top(f), name_at(f, in.index), out)) return s;
  f.stack.pop_back();
  push_with_null(t, f, out);
  return std::nullopt;
}
Status op_LOAD_SUPER_ATTR(Translator& t, Frame& f, const Instr& in) {  // (global_super class self -- [NULL] attr)
  NEED(3);
  const VPtr& sup_fn = top(f, 3);
  if (!sup_fn->obj || sup_fn->obj.get() != reinterpret_cast<PyObject*>(&PySuper_Type))
    return t.brk(f, "DV0004", "super is not the builtin super");
  std::vector<VPtr> args{top(f, 2), top(f)};
  VPtr sup, out;
  if (Status s = t.call_super(f, args, sup)) return s;
  if (Status s = t.getattr(f, sup, name_at(f, in.index), out)) return s;
  f.stack.resize(f.stack.size() - 3);
  if (in.push_null) push_with_null(t, f, out);
  else f.stack.push_back(out);
  return std::nullopt;
}
Status op_STORE_ATTR(Translator& t, Frame& f, const Instr& in) {  // (value owner -- )
  NEED(2);
  VPtr owner = f.stack.back();
  VPtr value = f.stack[f.stack.size() - 2];
  if (Status s = t.store_attr(f, owner, name_at(f, in.arg), value)) return s;
  f.stack.resize(f.stack.size() - 2);
  return std::nullopt;
}

Status op_DELETE_ATTR(Translator& t, Frame& f, const Instr& in) {  // (owner -- )
  NEED(1);
  if (Status s = t.delete_attr(f, f.stack.back(), name_at(f, in.arg))) return s;
  f.stack.pop_back();
  return std::nullopt;
}

Status op_MAKE_CELL(Translator& t, Frame& f, const Instr& in) {  // ( -- )
  // An argument that is a cell (a closure reads it): its contents as read_local makes them, a
  // number, string or None not read yet until LOAD_DEREF's reader reads it.
  if (Status s = t.read_local(f, in.arg)) return s;
  VPtr c = t.make(VK::Cell);
  if (f.locals[in.arg]) c->items.push_back(f.locals[in.arg]);
  f.locals[in.arg] = c;
  return std::nullopt;
}
Status op_COPY_FREE_VARS(Translator&, Frame&, const Instr&) { return std::nullopt; }  // set up by the caller
Status op_LOAD_CLOSURE(Translator& t, Frame& f, const Instr& in) {  // ( -- cell)
  if (!f.locals[in.arg] || f.locals[in.arg]->kind != VK::Cell) return t.brk(f, "DV0019", "LOAD_CLOSURE of a non-cell");
  f.stack.push_back(f.locals[in.arg]);
  return std::nullopt;
}
Status op_LOAD_DEREF(Translator& t, Frame& f, const Instr& in) {  // ( -- value)
  const VPtr& c = f.locals[in.arg];
  if (!c || c->kind != VK::Cell || c->items.empty())
    return t.brk(f, "DV0010", "NameError: free variable '" + local_name(f, in.arg) + "' referenced before assignment");
  f.stack.push_back(c->items[0]);
  return std::nullopt;
}
Status op_STORE_DEREF(Translator& t, Frame& f, const Instr& in) {  // (value -- )
  NEED(1);
  VPtr& c = f.locals[in.arg];
  if (!c || c->kind != VK::Cell) return t.brk(f, "DV0019", "STORE_DEREF to a non-cell");
  // A real cell (the root frame's free variable, or a cell of a function from outside: a counter a
  // decorator or context manager keeps by nonlocal) is written back after the graph.
  if (c->cell_of != -1) {
    auto& w = t.output.side_effects.written_cells;
    if (std::find(w.begin(), w.end(), c) == w.end()) w.push_back(c);
  }
  if (c->items.empty()) c->items.push_back(pop(f));
  else c->items[0] = pop(f);
  return std::nullopt;
}
Status op_MAKE_FUNCTION(Translator& t, Frame& f, const Instr& in) {  // (defaults? kwdefaults? annotations? closure? code -- fn)
  NEED(1);
  const int flags = in.arg == bc::kNone ? 0 : in.arg;  // 3.13: none (SET_FUNCTION_ATTRIBUTE follows)
  VPtr code = pop(f);
  VPtr fn = t.make(VK::Function);
  fn->obj = code->obj;
  fn->globals = f.globals;
  if (flags & 8) {
    VPtr cl = pop(f);
    fn->cells = cl->items;
  }
  if (flags & 4) {  // annotations: not kept (such a function is not rebuilt by codegen)
    pop(f);
    fn->flag = true;
  }
  if (flags & 2) fn->kwdefaults = pop(f);
  if (flags & 1) fn->defaults = pop(f);
  f.stack.push_back(fn);
  return std::nullopt;
}
Status op_SET_FUNCTION_ATTRIBUTE(Translator& t, Frame& f, const Instr& in) {  // (attr fn -- fn)
  NEED(2);
  const VPtr& fn = top(f);
  if (fn->kind != VK::Function) return t.brk(f, "DV0019", "SET_FUNCTION_ATTRIBUTE on a non-function");
  VPtr attr = top(f, 2);
  if (in.arg == 8) fn->cells = attr->items;
  else if (in.arg == 2) fn->kwdefaults = attr;
  else if (in.arg == 1) fn->defaults = attr;
  else if (in.arg == 4) fn->flag = true;  // annotations (see MAKE_FUNCTION)
  else return t.brk(f, "DV0001", "unsupported function attribute " + std::to_string(in.arg));
  f.stack.erase(f.stack.end() - 2);
  return std::nullopt;
}

}  // namespace dv
