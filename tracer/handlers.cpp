// Opcode handlers (CPython 3.11). Each says its stack effect, checks before it mutates, and
// returns a Break for what it does not support. Families: load/store, stack, calls, operators,
// containers, control flow, functions and cells, context managers.
#include <array>

#include "core/opcodes.h"
#include "pycache.h"
#include "translator.h"

namespace dv {
namespace {

using Status = Translator::Status;
using bc::Instr;

VPtr pop(Frame& f) {
  VPtr v = std::move(f.stack.back());
  f.stack.pop_back();
  return v;
}
VPtr& top(Frame& f, size_t k = 1) { return f.stack[f.stack.size() - k]; }
PyCodeObject* code_of(const Frame& f) { return reinterpret_cast<PyCodeObject*>(f.facts->code.get()); }
std::string name_at(const Frame& f, int i) { return str_of(PyTuple_GET_ITEM(code_of(f)->co_names, i)); }
std::string local_name(const Frame& f, int i) { return str_of(PyTuple_GET_ITEM(code_of(f)->co_localsplusnames, i)); }
void jump_to(Frame& f, const Instr& in) { f.ip = f.facts->index_of.at(static_cast<uint32_t>(in.jump_target)); }

#define NEED(n) \
  if (f.stack.size() < (n)) return t.brk(f, "DV0019", "stack underflow (dynview bug)");

// ---- no-ops -------------------------------------------------------------------------------------
Status op_NOP(Translator&, Frame&, const Instr&) { return std::nullopt; }  // ( -- )

// ---- load / store -------------------------------------------------------------------------------
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
  return t.brk(f, "DV0008", "assignment to attribute '" + name_at(f, in.arg) + "'", "attribute mutation is not replayed yet");
}

// ---- stack --------------------------------------------------------------------------------------
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

// ---- calls --------------------------------------------------------------------------------------
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

// ---- operators ----------------------------------------------------------------------------------
Status op_BINARY_OP(Translator& t, Frame& f, const Instr& in) {  // (lhs rhs -- res)
  NEED(2);
  VPtr out;
  if (Status s = t.binary(f, in.arg, top(f, 2), top(f), out)) return s;
  f.stack.pop_back();
  top(f) = out;
  return std::nullopt;
}
Status op_COMPARE_OP(Translator& t, Frame& f, const Instr& in) {  // (lhs rhs -- res)
  NEED(2);
  VPtr out;
  if (Status s = t.compare(f, in.arg, top(f, 2), top(f), out)) return s;
  f.stack.pop_back();
  top(f) = out;
  return std::nullopt;
}
Status op_IS_OP(Translator& t, Frame& f, const Instr& in) {  // (lhs rhs -- bool)
  NEED(2);
  const VPtr &a = top(f, 2), &b = top(f);
  bool same;
  if (a == b) same = true;
  else if (a->obj && b->obj && (a->kind == VK::Const || a->kind == VK::Object || a->kind == VK::NNModule) &&
           (b->kind == VK::Const || b->kind == VK::Object || b->kind == VK::NNModule))
    same = a->obj.get() == b->obj.get();
  else if (a->kind == VK::Tensor && b->kind == VK::Tensor) same = a->node == b->node;
  else same = false;  // different kinds (a tensor is not None, a list is not a module ...)
  VPtr out = t.constant(Ref::borrow((same != (in.arg == 1)) ? Py_True : Py_False));
  f.stack.pop_back();
  top(f) = out;
  return std::nullopt;
}
Status op_CONTAINS_OP(Translator& t, Frame& f, const Instr& in) {  // (item container -- bool)
  NEED(2);
  VPtr item = top(f, 2), cont = top(f);
  bool found = false;
  if (cont->kind == VK::Dict && item->kind == VK::Const) {
    for (auto& k : cont->keys) found |= PyObject_RichCompareBool(k.get(), item->obj.get(), Py_EQ) == 1;
  } else if ((cont->kind == VK::List || cont->kind == VK::Tuple) && item->kind == VK::Const) {
    for (auto& x : cont->items) {
      if (x->kind == VK::Tensor) return t.brk(f, "DV0002", "'in' over tensors compares their values");
      found |= x->kind == VK::Const && PyObject_RichCompareBool(x->obj.get(), item->obj.get(), Py_EQ) == 1;
    }
  } else if (cont->kind == VK::Const && item->kind == VK::Const) {
    int r = PySequence_Contains(cont->obj.get(), item->obj.get());
    if (r < 0) return t.brk(f, "DV0010", "'in' raised");
    found = r == 1;
  } else {
    return t.brk(f, "DV0018", std::string("'in' with a ") + vk_name(item->kind) + " and a " + vk_name(cont->kind));
  }
  PyErr_Clear();
  VPtr out = t.constant(Ref::borrow((found != (in.arg == 1)) ? Py_True : Py_False));
  f.stack.pop_back();
  top(f) = out;
  return std::nullopt;
}
Status unary(Translator& t, Frame& f, const char* op_name, int (*fold)(PyObject*, PyObject**)) {
  NEED(1);
  VPtr v = top(f);
  VPtr out;
  if (v->kind == VK::Tensor) {
    if (Status s = t.graph_call(f, Ref::steal(PyObject_GetAttrString(py().operator_mod.get(), op_name)), "", {v}, {}, out)) return s;
  } else if (v->kind == VK::Const) {
    PyObject* r = nullptr;
    if (fold(v->obj.get(), &r) < 0 || !r) return t.brk(f, "DV0010", std::string("operator.") + op_name + " raised");
    out = t.constant(Ref::steal(r));
  } else {
    return t.brk(f, "DV0018", std::string("operator.") + op_name + " of a " + vk_name(v->kind));
  }
  top(f) = out;
  return std::nullopt;
}
Status op_UNARY_NEGATIVE(Translator& t, Frame& f, const Instr&) {
  return unary(t, f, "neg", [](PyObject* o, PyObject** r) { *r = PyNumber_Negative(o); return *r ? 0 : -1; });
}
Status op_UNARY_POSITIVE(Translator& t, Frame& f, const Instr&) {
  return unary(t, f, "pos", [](PyObject* o, PyObject** r) { *r = PyNumber_Positive(o); return *r ? 0 : -1; });
}
Status op_UNARY_INVERT(Translator& t, Frame& f, const Instr&) {
  return unary(t, f, "invert", [](PyObject* o, PyObject** r) { *r = PyNumber_Invert(o); return *r ? 0 : -1; });
}
Status op_UNARY_NOT(Translator& t, Frame& f, const Instr&) {  // (v -- not v)
  NEED(1);
  bool b;
  if (Status s = t.truth(f, top(f), b)) return s;
  top(f) = t.constant(Ref::borrow(b ? Py_False : Py_True));
  return std::nullopt;
}
Status op_BINARY_SUBSCR(Translator& t, Frame& f, const Instr&) {  // (container sub -- res)
  NEED(2);
  VPtr out;
  if (Status s = t.subscr(f, top(f, 2), top(f), out)) return s;
  f.stack.pop_back();
  top(f) = out;
  return std::nullopt;
}
Status op_STORE_SUBSCR(Translator& t, Frame& f, const Instr&) {  // (v container sub -- )
  NEED(3);
  VPtr sub = top(f), cont = top(f, 2), v = top(f, 3);
  if (cont->kind == VK::Tensor) {
    VPtr out;
    if (Status s = t.graph_call(f, py().setitem, "", {cont, sub, v}, {}, out)) return s;
  } else if ((cont->kind == VK::List || cont->kind == VK::Dict) && !cont->source && sub->kind == VK::Const) {
    if (cont->kind == VK::List) {
      long i = PyLong_AsLong(sub->obj.get());
      long n = static_cast<long>(cont->items.size());
      if (i < 0) i += n;
      if (PyErr_Occurred() || i < 0 || i >= n) return t.brk(f, "DV0010", "list assignment index out of range");
      cont->items[i] = v;
    } else {
      bool found = false;
      for (size_t k = 0; k < cont->keys.size() && !found; ++k)
        if (PyObject_RichCompareBool(cont->keys[k].get(), sub->obj.get(), Py_EQ) == 1) {
          cont->items[k] = v;
          found = true;
        }
      PyErr_Clear();
      if (!found) {
        cont->keys.push_back(sub->obj);
        cont->items.push_back(v);
      }
    }
  } else {
    return t.brk(f, "DV0008", std::string("item assignment on a ") + (cont->source ? "input " : "") + vk_name(cont->kind));
  }
  f.stack.resize(f.stack.size() - 3);
  return std::nullopt;
}
Status op_BUILD_SLICE(Translator& t, Frame& f, const Instr& in) {  // (start stop [step] -- slice)
  NEED(static_cast<size_t>(in.arg));
  std::vector<VPtr> parts(f.stack.end() - in.arg, f.stack.end());
  for (auto& p : parts)
    if (p->kind != VK::Const) return t.brk(f, "DV0017", "slice bounds must be constants");
  PyObject* s = PySlice_New(parts[0]->obj.get(), parts[1]->obj.get(), in.arg == 3 ? parts[2]->obj.get() : nullptr);
  f.stack.resize(f.stack.size() - in.arg);
  f.stack.push_back(t.constant_steal(s));
  return std::nullopt;
}

// ---- containers ---------------------------------------------------------------------------------
Status build_seq(Translator& t, Frame& f, int n, VK kind) {
  NEED(static_cast<size_t>(n));
  VPtr v = t.make(kind);
  v->items.assign(f.stack.end() - n, f.stack.end());
  f.stack.resize(f.stack.size() - n);
  f.stack.push_back(v);
  return std::nullopt;
}
Status op_BUILD_TUPLE(Translator& t, Frame& f, const Instr& in) { return build_seq(t, f, in.arg, VK::Tuple); }
Status op_BUILD_LIST(Translator& t, Frame& f, const Instr& in) { return build_seq(t, f, in.arg, VK::List); }
Status op_BUILD_MAP(Translator& t, Frame& f, const Instr& in) {  // (k1 v1 ... kn vn -- dict)
  NEED(2u * in.arg);
  VPtr d = t.make(VK::Dict);
  for (int i = 0; i < in.arg; ++i) {
    VPtr k = f.stack[f.stack.size() - 2 * in.arg + 2 * i];
    if (k->kind != VK::Const) return t.brk(f, "DV0007", "dict keys must be constants");
    d->keys.push_back(k->obj);
    d->items.push_back(f.stack[f.stack.size() - 2 * in.arg + 2 * i + 1]);
  }
  f.stack.resize(f.stack.size() - 2 * in.arg);
  f.stack.push_back(d);
  return std::nullopt;
}
Status op_BUILD_CONST_KEY_MAP(Translator& t, Frame& f, const Instr& in) {  // (v1..vn keys -- dict)
  NEED(in.arg + 1u);
  VPtr keys = pop(f);
  VPtr d = t.make(VK::Dict);
  for (int i = 0; i < in.arg; ++i) {
    d->keys.push_back(Ref::borrow(PyTuple_GET_ITEM(keys->obj.get(), i)));
    d->items.push_back(f.stack[f.stack.size() - in.arg + i]);
  }
  f.stack.resize(f.stack.size() - in.arg);
  f.stack.push_back(d);
  return std::nullopt;
}
Status op_LIST_APPEND(Translator& t, Frame& f, const Instr& in) {  // (list .. v -- list ..)
  NEED(in.arg + 1u);
  VPtr v = pop(f);
  top(f, in.arg)->items.push_back(v);
  return std::nullopt;
}
Status op_LIST_EXTEND(Translator& t, Frame& f, const Instr& in) {  // (list .. seq -- list ..)
  NEED(in.arg + 1u);
  VPtr seq = pop(f);
  VPtr it;
  if (Status s = t.iterate(f, seq, it)) return s;
  auto& items = top(f, in.arg)->items;
  items.insert(items.end(), it->items.begin(), it->items.end());
  return std::nullopt;
}
Status op_LIST_TO_TUPLE(Translator& t, Frame& f, const Instr&) {
  NEED(1);
  VPtr v = t.make(VK::Tuple);
  v->items = top(f)->items;
  top(f) = v;
  return std::nullopt;
}
Status op_DICT_UPDATE(Translator& t, Frame& f, const Instr& in) {  // (dict .. other -- dict ..)
  NEED(in.arg + 1u);
  VPtr other = pop(f);
  if (other->kind != VK::Dict) return t.brk(f, "DV0007", "dict update with a non-dict");
  VPtr d = top(f, in.arg);
  for (size_t i = 0; i < other->keys.size(); ++i) {
    d->keys.push_back(other->keys[i]);
    d->items.push_back(other->items[i]);
  }
  return std::nullopt;
}
Status op_UNPACK_SEQUENCE(Translator& t, Frame& f, const Instr& in) {  // (seq -- vn .. v1)
  NEED(1);
  VPtr seq = pop(f);
  VPtr it;
  if (Status s = t.iterate(f, seq, it)) return s;
  if (static_cast<int>(it->items.size()) != in.arg)
    return t.brk(f, "DV0010", "ValueError: expected " + std::to_string(in.arg) + " values to unpack, got " + std::to_string(it->items.size()));
  for (auto r = it->items.rbegin(); r != it->items.rend(); ++r) f.stack.push_back(*r);
  return std::nullopt;
}
Status op_UNPACK_EX(Translator& t, Frame& f, const Instr& in) {  // (seq -- after.. list before..)
  NEED(1);
  const int before = in.arg & 0xFF, after = in.arg >> 8;
  VPtr seq = pop(f);
  VPtr it;
  if (Status s = t.iterate(f, seq, it)) return s;
  const int n = static_cast<int>(it->items.size());
  if (n < before + after) return t.brk(f, "DV0010", "ValueError: not enough values to unpack");
  for (int i = n - 1; i >= n - after; --i) f.stack.push_back(it->items[i]);
  VPtr mid = t.make(VK::List);
  mid->items.assign(it->items.begin() + before, it->items.begin() + (n - after));
  f.stack.push_back(mid);
  for (int i = before - 1; i >= 0; --i) f.stack.push_back(it->items[i]);
  return std::nullopt;
}
Status op_FORMAT_VALUE(Translator& t, Frame& f, const Instr& in) {  // (v [spec] -- str)
  const bool spec = in.arg & 4;
  NEED(spec ? 2u : 1u);
  VPtr fmt = spec ? pop(f) : nullptr;
  VPtr v = top(f);
  if (v->kind != VK::Const || (fmt && fmt->kind != VK::Const)) return t.brk(f, "DV0007", "f-string of a non-constant");
  Ref val = v->obj;
  const int conv = in.arg & 3;
  if (conv == 1) val = Ref::steal(PyObject_Str(val.get()));
  if (conv == 2) val = Ref::steal(PyObject_Repr(val.get()));
  if (conv == 3) val = Ref::steal(PyObject_ASCII(val.get()));
  Ref s = val ? Ref::steal(PyObject_Format(val.get(), fmt ? fmt->obj.get() : nullptr)) : Ref();
  if (!s) return t.brk(f, "DV0010", "format raised");
  top(f) = t.constant(s);
  return std::nullopt;
}
Status op_BUILD_STRING(Translator& t, Frame& f, const Instr& in) {  // (s1..sn -- str)
  NEED(static_cast<size_t>(in.arg));
  Ref parts = Ref::steal(PyTuple_New(in.arg));
  for (int i = 0; i < in.arg; ++i) {
    VPtr p = f.stack[f.stack.size() - in.arg + i];
    if (p->kind != VK::Const) return t.brk(f, "DV0007", "string of a non-constant");
    PyTuple_SET_ITEM(parts.get(), i, Ref::borrow(p->obj.get()).release());
  }
  Ref empty = Ref::steal(PyUnicode_FromString(""));
  Ref s = Ref::steal(PyUnicode_Join(empty.get(), parts.get()));
  f.stack.resize(f.stack.size() - in.arg);
  f.stack.push_back(t.constant(s));
  return std::nullopt;
}

// ---- control flow -------------------------------------------------------------------------------
Status op_JUMP(Translator&, Frame& f, const Instr& in) { jump_to(f, in); return std::nullopt; }
Status pop_jump_if(Translator& t, Frame& f, const Instr& in, bool when) {  // (cond -- )
  NEED(1);
  bool b;
  if (Status s = t.truth(f, top(f), b)) return s;
  f.stack.pop_back();
  if (b == when) jump_to(f, in);
  return std::nullopt;
}
Status op_POP_JUMP_IF_TRUE(Translator& t, Frame& f, const Instr& in) { return pop_jump_if(t, f, in, true); }
Status op_POP_JUMP_IF_FALSE(Translator& t, Frame& f, const Instr& in) { return pop_jump_if(t, f, in, false); }
Status pop_jump_if_none(Translator& t, Frame& f, const Instr& in, bool when_none) {  // (v -- )
  NEED(1);
  VPtr v = pop(f);
  const bool is_none = v->kind == VK::Const && v->obj.get() == Py_None;
  if (is_none == when_none) jump_to(f, in);
  return std::nullopt;
}
Status op_POP_JUMP_IF_NONE(Translator& t, Frame& f, const Instr& in) { return pop_jump_if_none(t, f, in, true); }
Status op_POP_JUMP_IF_NOT_NONE(Translator& t, Frame& f, const Instr& in) { return pop_jump_if_none(t, f, in, false); }
Status jump_or_pop(Translator& t, Frame& f, const Instr& in, bool when) {  // (cond -- cond | )
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
  if (Status s = t.iterate(f, top(f), it)) return s;
  if (it == top(f)) {  // iter(iterator) is itself
    return std::nullopt;
  }
  top(f) = it;
  return std::nullopt;
}
Status op_FOR_ITER(Translator& t, Frame& f, const Instr& in) {  // (iter -- iter next) | (iter -- ) and jump
  NEED(1);
  VPtr it = top(f);
  if (it->kind != VK::Iter) return t.brk(f, "DV0016", "FOR_ITER over a non-iterator");
  if (it->pos < it->items.size()) {
    f.stack.push_back(it->items[it->pos++]);
  } else {
    f.stack.pop_back();
    jump_to(f, in);
  }
  return std::nullopt;
}
Status op_RETURN_VALUE(Translator& t, Frame& f, const Instr&) {  // (v -- )
  NEED(1);
  f.result = pop(f);
  return std::nullopt;
}
Status op_RAISE_VARARGS(Translator& t, Frame& f, const Instr&) {
  return t.brk(f, "DV0010", "raise statement in traced code", "the exception is raised by the eager frame");
}
Status op_LOAD_ASSERTION_ERROR(Translator& t, Frame& f, const Instr&) {
  return t.brk(f, "DV0010", "assertion failed in traced code");
}
Status op_IMPORT_NAME(Translator& t, Frame& f, const Instr& in) {
  return t.brk(f, "DV0011", "import of " + name_at(f, in.arg) + " inside traced code", "import at module level");
}

// ---- functions, cells ---------------------------------------------------------------------------
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

// ---- generators (run to completion by inline_call) ----
Status op_RETURN_GENERATOR(Translator& t, Frame& f, const Instr&) {  // ( -- None): the first resume
  if (!f.yields) return t.brk(f, "DV0004", "generator outside an inlined call");
  f.stack.push_back(t.constant(Ref::borrow(Py_None)));
  return std::nullopt;
}
Status op_YIELD_VALUE(Translator& t, Frame& f, const Instr&) {  // (v -- sent)
  NEED(1);
  if (!f.yields) return t.brk(f, "DV0004", "yield outside an inlined generator");
  f.yields->push_back(pop(f));
  f.stack.push_back(t.constant(Ref::borrow(Py_None)));
  return std::nullopt;
}

// ---- context managers ---------------------------------------------------------------------------
Status op_BEFORE_WITH(Translator& t, Frame& f, const Instr&) {  // (mgr -- exit enter_result)
  NEED(1);
  VPtr mgr = top(f);
  if (mgr->kind != VK::GradMode)
    return t.brk(f, "DV0009", "unsupported context manager", "only torch.no_grad/enable_grad/set_grad_enabled are traced");
  const bool prev = PyObject_IsTrue(Ref::steal(PyObject_CallMethod(py().torch.get(), "is_grad_enabled", nullptr)).get()) == 1;
  VPtr out;
  if (Status s = t.graph_call(f, py().set_grad_enabled_fn, "", {t.constant(Ref::borrow(mgr->flag ? Py_True : Py_False))}, {}, out)) return s;
  Ref r = Ref::steal(PyObject_CallFunctionObjArgs(py().set_grad_enabled_fn.get(), mgr->flag ? Py_True : Py_False, nullptr));
  VPtr exit = t.make(VK::GradMode);
  exit->flag = prev;  // the mode to restore
  top(f) = exit;
  f.stack.push_back(t.constant(Ref::borrow(Py_None)));
  return std::nullopt;
}

}  // namespace

// The __exit__ call of a with-block arrives as CALL 2 on (exit, None, None, None) after PRECALL;
// a GradMode value as callee restores the recorded mode.
Translator::Status call_grad_exit(Translator& t, Frame& f, const VPtr& exit, VPtr& out) {
  VPtr r;
  if (Translator::Status s = t.graph_call(f, py().set_grad_enabled_fn, "", {t.constant(Ref::borrow(exit->flag ? Py_True : Py_False))}, {}, r)) return s;
  Ref x = Ref::steal(PyObject_CallFunctionObjArgs(py().set_grad_enabled_fn.get(), exit->flag ? Py_True : Py_False, nullptr));
  out = t.constant(Ref::borrow(Py_None));
  return std::nullopt;
}

Handler handler_for(uint8_t op) {
  static const std::array<Handler, 256> table = [] {
    std::array<Handler, 256> h{};
    using namespace bc;
    h[NOP] = op_NOP; h[RESUME] = op_NOP; h[PRECALL] = op_PRECALL; h[CACHE] = op_NOP; h[EXTENDED_ARG] = op_NOP;
    h[LOAD_FAST] = op_LOAD_FAST; h[STORE_FAST] = op_STORE_FAST; h[DELETE_FAST] = op_DELETE_FAST;
    h[LOAD_CONST] = op_LOAD_CONST; h[LOAD_GLOBAL] = op_LOAD_GLOBAL; h[LOAD_ATTR] = op_LOAD_ATTR;
    h[LOAD_METHOD] = op_LOAD_METHOD; h[STORE_ATTR] = op_STORE_ATTR;
    h[POP_TOP] = op_POP_TOP; h[PUSH_NULL] = op_PUSH_NULL; h[COPY] = op_COPY; h[SWAP] = op_SWAP;
    h[KW_NAMES] = op_KW_NAMES; h[CALL] = op_CALL; h[CALL_FUNCTION_EX] = op_CALL_FUNCTION_EX;
    h[BINARY_OP] = op_BINARY_OP; h[COMPARE_OP] = op_COMPARE_OP; h[IS_OP] = op_IS_OP; h[CONTAINS_OP] = op_CONTAINS_OP;
    h[UNARY_NEGATIVE] = op_UNARY_NEGATIVE; h[UNARY_POSITIVE] = op_UNARY_POSITIVE; h[UNARY_INVERT] = op_UNARY_INVERT;
    h[UNARY_NOT] = op_UNARY_NOT; h[BINARY_SUBSCR] = op_BINARY_SUBSCR; h[STORE_SUBSCR] = op_STORE_SUBSCR;
    h[BUILD_SLICE] = op_BUILD_SLICE; h[BUILD_TUPLE] = op_BUILD_TUPLE; h[BUILD_LIST] = op_BUILD_LIST;
    h[BUILD_MAP] = op_BUILD_MAP; h[BUILD_CONST_KEY_MAP] = op_BUILD_CONST_KEY_MAP; h[LIST_APPEND] = op_LIST_APPEND;
    h[LIST_EXTEND] = op_LIST_EXTEND; h[LIST_TO_TUPLE] = op_LIST_TO_TUPLE; h[DICT_UPDATE] = op_DICT_UPDATE;
    h[DICT_MERGE] = op_DICT_UPDATE; h[UNPACK_SEQUENCE] = op_UNPACK_SEQUENCE; h[UNPACK_EX] = op_UNPACK_EX;
    h[FORMAT_VALUE] = op_FORMAT_VALUE; h[BUILD_STRING] = op_BUILD_STRING;
    h[JUMP_FORWARD] = op_JUMP; h[JUMP_BACKWARD] = op_JUMP; h[JUMP_BACKWARD_NO_INTERRUPT] = op_JUMP;
    h[POP_JUMP_FORWARD_IF_TRUE] = op_POP_JUMP_IF_TRUE; h[POP_JUMP_BACKWARD_IF_TRUE] = op_POP_JUMP_IF_TRUE;
    h[POP_JUMP_FORWARD_IF_FALSE] = op_POP_JUMP_IF_FALSE; h[POP_JUMP_BACKWARD_IF_FALSE] = op_POP_JUMP_IF_FALSE;
    h[POP_JUMP_FORWARD_IF_NONE] = op_POP_JUMP_IF_NONE; h[POP_JUMP_BACKWARD_IF_NONE] = op_POP_JUMP_IF_NONE;
    h[POP_JUMP_FORWARD_IF_NOT_NONE] = op_POP_JUMP_IF_NOT_NONE; h[POP_JUMP_BACKWARD_IF_NOT_NONE] = op_POP_JUMP_IF_NOT_NONE;
    h[JUMP_IF_TRUE_OR_POP] = op_JUMP_IF_TRUE_OR_POP; h[JUMP_IF_FALSE_OR_POP] = op_JUMP_IF_FALSE_OR_POP;
    h[GET_ITER] = op_GET_ITER; h[FOR_ITER] = op_FOR_ITER; h[RETURN_VALUE] = op_RETURN_VALUE;
    h[RAISE_VARARGS] = op_RAISE_VARARGS; h[LOAD_ASSERTION_ERROR] = op_LOAD_ASSERTION_ERROR; h[IMPORT_NAME] = op_IMPORT_NAME;
    h[MAKE_CELL] = op_MAKE_CELL; h[COPY_FREE_VARS] = op_COPY_FREE_VARS; h[LOAD_CLOSURE] = op_LOAD_CLOSURE;
    h[LOAD_DEREF] = op_LOAD_DEREF; h[STORE_DEREF] = op_STORE_DEREF; h[MAKE_FUNCTION] = op_MAKE_FUNCTION;
    h[BEFORE_WITH] = op_BEFORE_WITH;
    h[RETURN_GENERATOR] = op_RETURN_GENERATOR; h[YIELD_VALUE] = op_YIELD_VALUE;
    return h;
  }();
  return table[op];
}

}  // namespace dv
