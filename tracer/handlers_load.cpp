// Opcode handlers, load, store, cells and functions: LOAD_*/STORE_*/DELETE_FAST, closures, MAKE_FUNCTION.
// Each says its stack effect in a comment, checks before it mutates, and returns a Break for what
// it does not support. The dispatch table is in handlers.cpp.
#include "handlers_common.h"

namespace dv {

Status op_NOP(Translator&, Frame&, const Instr&) { return std::nullopt; }  // ( -- )

Status op_LOAD_FAST(Translator& t, Frame& f, const Instr& in) {  // ( -- value)
  const VPtr& v = f.locals[in.arg];
  if (!v) return t.brk(f, "DV0010", "UnboundLocalError: local variable '" + local_name(f, in.arg) + "' referenced before assignment");
  f.stack.push_back(v);
  return std::nullopt;
}
Status op_STORE_FAST(Translator& t, Frame& f, const Instr& in) {  // (value -- )
  NEED(1);
  f.locals[in.arg] = pop(f);
  return std::nullopt;
}
Status op_DELETE_FAST(Translator&, Frame& f, const Instr& in) {  // ( -- )
  f.locals[in.arg] = nullptr;
  return std::nullopt;
}
Status op_LOAD_CONST(Translator& t, Frame& f, const Instr& in) {  // ( -- value)
  PyObject* c = PyTuple_GET_ITEM(code_of(f)->co_consts, in.arg);
  if (PyCode_Check(c)) {
    VPtr v = t.make(VK::Object);
    v->obj = Ref::borrow(c);
    f.stack.push_back(v);
    return std::nullopt;
  }
  f.stack.push_back(t.constant(Ref::borrow(c)));
  return std::nullopt;
}
Status op_LOAD_GLOBAL(Translator& t, Frame& f, const Instr& in) {  // ( -- [NULL] value)
  std::string name = name_at(f, in.arg >> 1);
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
  if (in.arg & 1) f.stack.push_back(t.make(VK::Null));
  f.stack.push_back(val);
  return std::nullopt;
}
Status op_LOAD_ATTR(Translator& t, Frame& f, const Instr& in) {  // (owner -- value)
  NEED(1);
  VPtr out;
  if (Status s = t.getattr(f, top(f), name_at(f, in.arg), out)) return s;
  top(f) = out;
  return std::nullopt;
}
Status op_LOAD_METHOD(Translator& t, Frame& f, const Instr& in) {  // (owner -- NULL meth)
  NEED(1);
  VPtr out;
  if (Status s = t.getattr(f, top(f), name_at(f, in.arg), out)) return s;
  top(f) = t.make(VK::Null);
  f.stack.push_back(out);
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

Status op_MAKE_CELL(Translator& t, Frame& f, const Instr& in) {  // ( -- )
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
  if (c->items.empty()) c->items.push_back(pop(f));
  else c->items[0] = pop(f);
  return std::nullopt;
}
Status op_MAKE_FUNCTION(Translator& t, Frame& f, const Instr& in) {  // (defaults? kwdefaults? annotations? closure? code -- fn)
  NEED(1);
  VPtr code = pop(f);
  VPtr fn = t.make(VK::Function);
  fn->obj = code->obj;
  fn->globals = f.globals;
  if (in.arg & 8) {
    VPtr cl = pop(f);
    fn->cells = cl->items;
  }
  if (in.arg & 4) pop(f);  // annotations
  if (in.arg & 2) fn->kwdefaults = pop(f);
  if (in.arg & 1) fn->defaults = pop(f);
  f.stack.push_back(fn);
  return std::nullopt;
}

}  // namespace dv
