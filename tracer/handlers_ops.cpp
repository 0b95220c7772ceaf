// Opcode handlers, operators: BINARY_OP, COMPARE_OP, IS_OP, CONTAINS_OP, unary ops, subscripts, slices.
// Each says its stack effect in a comment, checks before it mutates, and returns a Break for what
// it does not support. The dispatch table is in handlers.cpp.
#include "handlers_common.h"
#include <cstring>

namespace dv {

// (lhs rhs -- res) through one Translator operation: the shape BINARY_OP, COMPARE_OP and
// BINARY_SUBSCR share.
template <class Op>
static Status replace_top2(Translator& t, Frame& f, Op op) {
  NEED(2);
  VPtr out;
  if (Status s = op(top(f, 2), top(f), out)) return s;
  f.stack.pop_back();
  top(f) = out;
  return std::nullopt;
}
Status op_BINARY_OP(Translator& t, Frame& f, const Instr& in) {  // (lhs rhs -- res)
  return replace_top2(t, f, [&](VPtr a, VPtr b, VPtr& out) { return t.binary(f, in.arg, a, b, out); });
}
// 3.13's bool-converting form (push_null) is followed by a conditional jump or UNARY_NOT, which
// take the truth of the result themselves (as TO_BOOL below).
Status op_COMPARE_OP(Translator& t, Frame& f, const Instr& in) {  // (lhs rhs -- res)
  return replace_top2(t, f, [&](VPtr a, VPtr b, VPtr& out) { return t.compare(f, in.index, a, b, out); });
}
// 3.13: TO_BOOL only precedes a conditional jump or UNARY_NOT, each of which takes the truth of
// its operand (breaking on a tensor): the value stays as it is, and a transformed code that runs
// such a jump itself converts first (codegen).
Status op_TO_BOOL(Translator& t, Frame& f, const Instr&) {  // (value -- value)
  NEED(1);
  return std::nullopt;
}
// `a is b`, for IS_OP and for what compares by identity first (list.remove, `m in module_list`).
bool same_object(Translator& t, Frame& f, const VPtr& a, const VPtr& b) {
  // Values that stand for one real object: constants, objects, modules, and functions that exist
  // outside the trace (a function made by MAKE_FUNCTION is its code until it escapes: two such
  // values are two functions). `type(self).forward is forward_with_checkpointing` (transformers'
  // GradientCheckpointingLayer) compares a class attribute with a closure's own cell.
  auto real = [](const VPtr& v) {
    return v->obj && (v->kind == VK::Const || v->kind == VK::Object || v->kind == VK::NNModule ||
                      (v->kind == VK::Function && PyFunction_Check(v->obj.get())));
  };
  if (a == b) return true;
  if (real(a) && real(b)) {
    // The answer holds for these very objects: objects reached from the frame are guarded by
    // identity (a sentinel `v is _MISSING`; their usual guard may be their type only). Objects of
    // different types are never the same, whatever the objects: `cache is None` for the cache a
    // decode step passes in is guarded by the cache's type, not its identity (which is new each
    // step), as TorchDynamo does.
    const bool types_differ = Py_TYPE(a->obj.get()) != Py_TYPE(b->obj.get());
    for (const VPtr* v : {&a, &b}) {
      if (!(*v)->source || ((*v)->kind != VK::Object && (*v)->kind != VK::NNModule && (*v)->kind != VK::Function)) continue;
      PyObject* o = (*v)->obj.get();
      if (types_differ)
        t.add_guard(GuardKind::TYPE_MATCH, (*v)->source, Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o))), f,
                    "___check_type_id(" + (*v)->source->text() + ", " + Py_TYPE(o)->tp_name + ")");
      else
        t.add_guard(GuardKind::ID_MATCH, (*v)->source, (*v)->obj, f, "___check_obj_id(" + (*v)->source->text() + ", " + repr_of(o) + ")");
    }
    return a->obj.get() == b->obj.get();
  }
  // One tensor: one node, or one example (an in-place method, contiguous() of a contiguous tensor,
  // to() of its own dtype give the tensor itself, and their meta or fake kernels its example).
  if (a->kind == VK::Tensor && b->kind == VK::Tensor) return a->node == b->node || (a->obj && a->obj.get() == b->obj.get());
  return false;  // different kinds (a tensor is not None, a list is not a module ...)
}

Status op_IS_OP(Translator& t, Frame& f, const Instr& in) {  // (lhs rhs -- bool)
  NEED(2);
  const bool same = same_object(t, f, top(f, 2), top(f));
  VPtr out = t.constant(Ref::borrow((same != (in.arg == 1)) ? Py_True : Py_False));
  f.stack.pop_back();
  top(f) = out;
  return std::nullopt;
}
// "head" in self.heads (a ModuleDict: its _modules; a ParameterDict: its _keys), guarded by that
// key's presence; layer in self.layers (a ModuleList or Sequential: no __contains__, so Python
// iterates, comparing modules by identity). `handled` false for other modules.
static Status module_container_contains(Translator& t, Frame& f, const VPtr& cont, const VPtr& item, bool& found, bool& handled) {
  PyObject* m = cont->obj.get();
  static PyObject* contains_name = PyUnicode_InternFromString("__contains__");
  const int contains = module_container_method(m, "__contains__");
  const int iter = module_container_method(m, "__iter__");
  if (contains == 2 || contains == 4) {  // ModuleDict, ParameterDict
    if (item->kind != VK::Const || !PyUnicode_Check(item->obj.get())) return t.brk(f, "DV0018", "'in' of a module container with a key that is no str");
    if (const Value* changed = contains == 2 ? changed_children(t, m) : nullptr) {  // keys the trace added or removed
      found = find_key(*changed, item->obj.get()) >= 0;
      handled = true;
      return std::nullopt;
    }
    const char* dict = contains == 2 ? "_modules" : "_keys";
    PyObject** dictptr = _PyObject_GetDictPtr(m);
    PyObject* d = dictptr && *dictptr ? PyDict_GetItemString(*dictptr, dict) : nullptr;
    if (!d || !PyDict_Check(d)) return std::nullopt;
    const int r = PyDict_Contains(d, item->obj.get());
    if (r < 0) return t.raise_current(f, "'in'");
    found = r == 1;
    SourcePtr src = Source::attr(cont->source, dict);
    if (Guard* g = t.add_guard(GuardKind::DICT_CONTAINS, src, item->obj, f, repr_of(item->obj.get()) + (found ? " in " : " not in ") + src->text()))
      g->length = found ? 1 : 0;
    handled = true;
    return std::nullopt;
  }
  if ((iter == 0 || iter == 1) && !_PyType_Lookup(Py_TYPE(m), contains_name)) {  // ModuleList, Sequential
    VPtr it;
    if (Status s = t.iterate(f, cont, it)) return s;
    for (size_t k = it->pos; k < it->items.size() && !found; ++k) {
      const VPtr& x = it->items[k];
      if (x->kind != VK::NNModule || (item->kind != VK::NNModule && item->kind != VK::Const))
        return t.brk(f, "DV0018", std::string("'in' of a ") + vk_name(item->kind) + " in a module list");
      found = item->kind == VK::NNModule && same_object(t, f, x, item);  // (a module equals only itself)
    }
    handled = true;
    return std::nullopt;
  }
  return std::nullopt;
}

// A set, frozenset, tuple or list of constants only (is_const_tree), empty ones included.
static bool constants_only(PyObject* c) {
  if (!PyAnySet_CheckExact(c) && !PyTuple_CheckExact(c) && !PyList_CheckExact(c)) return false;
  Ref it = Ref::steal(PyObject_GetIter(c));
  if (!it) return PyErr_Clear(), false;
  while (Ref x = Ref::steal(PyIter_Next(it.get())))
    if (!is_const_tree(x.get())) return false;
  return !PyErr_Occurred() || (PyErr_Clear(), false);
}

Status op_CONTAINS_OP(Translator& t, Frame& f, const Instr& in) {  // (item container -- bool)
  NEED(2);
  VPtr item = top(f, 2), cont = top(f);
  bool found = false;
  if (cont->kind == VK::DictView && cont->name == "items") {  // (k, v) in d.items(): d[k] compared with v
    if (Status s = t.view_items_contains(f, cont, item, found)) return s;
    VPtr out = t.constant(Ref::borrow((found != (in.arg == 1)) ? Py_True : Py_False));
    f.stack.pop_back();
    top(f) = out;
    return std::nullopt;
  }
  if (cont->kind == VK::DictView) {  // k in d.keys(): the dict's keys now; values: compared one by one
    if (cont->name == "keys") {
      cont = cont->self;
    } else {
      VPtr l = t.make(VK::List);
      l->items = t.view_items(*cont);
      cont = l;
    }
  }
  if (cont->kind == VK::NNModule && cont->source) {  // torch.nn's containers, by their own __contains__ / __iter__
    bool handled = false;
    if (Status s = module_container_contains(t, f, cont, item, found, handled)) return s;
    if (handled) {
      VPtr out = t.constant(Ref::borrow((found != (in.arg == 1)) ? Py_True : Py_False));
      f.stack.pop_back();
      top(f) = out;
      return std::nullopt;
    }
  }
  if (cont->kind == VK::Instance && cont->contents) {  // a dict subclass: its __contains__ (inlined), else its keys
    static PyObject* contains_name = PyUnicode_InternFromString("__contains__");
    PyObject* m = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(cont->obj.get()), contains_name);
    if (!m || !PyFunction_Check(m)) cont = cont->contents;
  }
  if (cont->kind == VK::Set) {  // constants by ==, the rest by identity (values/set.cpp)
    if (Status s = set_contains(t, f, cont, item, found)) return s;
  } else if (cont->kind == VK::Const && PyAnySet_Check(cont->obj.get()) && set_member_ok(item) &&
             (item->kind == VK::Tensor || item->kind == VK::Instance || (item->kind == VK::Function && (!item->obj || !PyFunction_Check(item->obj.get()))))) {
    found = false;  // a value made in the trace (hashed and compared by identity) is in no set of real objects
  } else if (cont->kind == VK::Dict && t.key_of(item)) {
    const long i = find_key(*cont, t.key_of(item));
    if (i == -2) return t.brk(f, "DV0010", "comparing dict keys raised");
    found = i >= 0;
  } else if ((cont->kind == VK::List || cont->kind == VK::Tuple) && item->kind == VK::Const) {
    for (auto& x : cont->items) {  // in order, as list.__contains__: the first equal item ends it
      if (x->kind == VK::Tensor) return t.brk(f, "DV0002", "'in' over tensors compares their values");
      found |= x->kind == VK::Const && PyObject_RichCompareBool(x->obj.get(), item->obj.get(), Py_EQ) == 1;
      if (found) break;
    }
  } else if ((cont->kind == VK::List || cont->kind == VK::Tuple) && item->kind == VK::Tensor) {
    // a tensor in a list: list.__contains__ tries identity first, then ==, whose truth reads values
    // (None compares unequal: Tensor.__eq__(None) is False)
    for (auto& x : cont->items) {
      if (x == item || (x->kind == VK::Tensor && (x->node == item->node || (x->obj && x->obj.get() == item->obj.get())))) {
        found = true;
        break;
      }
      if (x->kind == VK::Const && x->obj.get() == Py_None) continue;
      return t.brk(f, "DV0002", "'in' with a tensor compares it with the list's items by value");
    }
  } else if ((cont->kind == VK::List || cont->kind == VK::Tuple) && item->kind == VK::Object && item->obj &&
             PyType_Check(item->obj.get()) && Py_TYPE(item->obj.get())->tp_richcompare == PyType_Type.tp_richcompare) {
    // type(t) in [torch.Tensor] (torch.utils._foreach_utils): a class compares by identity
    for (auto& x : cont->items) {
      if (x->kind != VK::Const && x->kind != VK::Object)
        return t.brk(f, "DV0018", std::string("'in' with a class and a list holding a ") + vk_name(x->kind));
      found |= x->obj.get() == item->obj.get();
    }
  } else if ((cont->kind == VK::List || cont->kind == VK::Tuple) && (item->kind == VK::Object || item->kind == VK::Const) &&
             item->obj && (PyCFunction_Check(item->obj.get()) || Py_IS_TYPE(item->obj.get(), &PyMethodDescr_Type) ||
                           Py_IS_TYPE(item->obj.get(), &PyWrapperDescr_Type) || PyFunction_Check(item->obj.get()))) {
    // `func in (torch.add, torch.Tensor.add)` (a torch function mode's handler): functions compare
    // by what they are, with no side effect; the list's items are the values it holds
    for (auto& x : cont->items) {
      if (x->kind != VK::Const && x->kind != VK::Object && x->kind != VK::Function)
        return t.brk(f, "DV0018", std::string("'in' with a function and a list holding a ") + vk_name(x->kind));
      if (!x->obj) return t.brk(f, "DV0018", "'in' with a function and a list holding a value not known while tracing");
      const int eq = PyObject_RichCompareBool(x->obj.get(), item->obj.get(), Py_EQ);
      if (eq < 0) return t.raise_current(f, "'in'");
      if ((found = eq == 1)) break;
    }
  } else if (outside_dict(cont, "__contains__") && item->kind == VK::Const) {  // k in a Counter reached from the frame
    std::vector<VPtr> a{item};
    std::vector<std::pair<std::string, VPtr>> no_kw;
    VPtr r;
    if (Status s = t.outside_dict_read(f, cont, "__contains__", a, no_kw, r)) return s;
    found = r->obj.get() == Py_True;
  } else if ((cont->kind == VK::Const || cont->kind == VK::Object) && cont->obj && PyFrozenSet_Check(cont->obj.get()) &&
             (item->kind == VK::Object || item->kind == VK::Function) && item->obj &&
             (PyFunction_Check(item->obj.get()) || PyCFunction_Check(item->obj.get()) || PyType_Check(item->obj.get()))) {
    // `fn in frozenset([torch.add, torch.mul])`: functions and classes compare by identity, which
    // their values are known by; the frozenset cannot change, and from outside is guarded by identity
    if (cont->source)
      t.add_guard(GuardKind::ID_MATCH, cont->source, cont->obj, f,
                  "___check_obj_id(" + cont->source->text() + ", " + repr_of(cont->obj.get()) + ")");
    int r = PySequence_Contains(cont->obj.get(), item->obj.get());
    if (r < 0) return t.brk(f, "DV0010", "'in' raised");
    found = r == 1;
  } else if (cont->kind == VK::Object && cont->source && cont->obj && Py_IS_TYPE(cont->obj.get(), &PyDictProxy_Type) &&
             item->kind == VK::Const && PyUnicode_CheckExact(item->obj.get())) {
    // `"name" in Cls.__dict__`: the class's own namespace, guarded by the name's presence or absence
    int r = PySequence_Contains(cont->obj.get(), item->obj.get());
    if (r < 0) return t.brk(f, "DV0010", "'in' raised");
    found = r == 1;
    if (Guard* g = t.add_guard(GuardKind::DICT_CONTAINS, cont->source, item->obj, f,
                               repr_of(item->obj.get()) + (found ? " in " : " not in ") + cont->source->text()))
      g->length = found ? 1 : 0;
  } else if ((cont->kind == VK::Const || (cont->kind == VK::Object && frozen_object(cont->obj.get()))) &&
             (item->kind == VK::Const ||
              (cont->kind == VK::Const && item->kind == VK::Object && identity_compared(item->obj.get()) &&
               constants_only(cont->obj.get())))) {
    // (an object compared by identity in a container of constants only -- an empty set a walk will
    // fill, before its first add --: none of them is it, whichever object a later call gives)
    int r = PySequence_Contains(cont->obj.get(), item->obj.get());
    if (r < 0) return t.brk(f, "DV0010", "'in' raised");
    found = r == 1;
  } else {
    VPtr r;
    bool handled = false;
    if (Status s = t.call_dunder(f, cont, "__contains__", {item}, r, handled)) return s;
    if (!handled && item->kind == VK::Const && user_iter(cont)) {
      // no __contains__ but a Python __iter__: Python iterates, item by item; the first equal item
      // ends it (an iterator keeps the rest)
      VPtr it;
      if (Status s = iterate_user_object(t, f, cont, it)) return s;
      for (;;) {
        if (Status s = t.pull(f, it, it->pos + 1)) return s;
        if (it->pos >= it->items.size()) break;
        const VPtr& x = it->items[it->pos++];
        if (x->kind != VK::Const) return t.brk(f, "DV0018", std::string("'in' over an iterator that gives a ") + vk_name(x->kind));
        const int eq = PyObject_RichCompareBool(x->obj.get(), item->obj.get(), Py_EQ);
        if (eq < 0) return t.raise_current(f, "'in'");
        if (eq == 1) {
          found = true;
          break;
        }
      }
    } else {
      if (!handled) return t.brk(f, "DV0018", std::string("'in' with a ") + vk_name(item->kind) + " and a " + vk_name(cont->kind));
      if (Status s = t.truth(f, r, found)) return s;
    }
  }
  PyErr_Clear();
  VPtr out = t.constant(Ref::borrow((found != (in.arg == 1)) ? Py_True : Py_False));
  f.stack.pop_back();
  top(f) = out;
  return std::nullopt;
}
static Status unary(Translator& t, Frame& f, const char* op_name, int (*fold)(PyObject*, PyObject**)) {
  NEED(1);
  VPtr v = top(f);
  VPtr out;
  if (np_scalar_number(v) && std::strcmp(op_name, "invert") != 0) {  // -lam: an np.float64 too
    if (Status s = t.graph_call(f, Ref::steal(PyObject_GetAttrString(py().operator_mod.get(), op_name)), "", {v->self}, {}, out)) return s;
    top(f) = out->kind == VK::Sym ? np_scalar_value(t, out, v->obj.get()) : out;
    return std::nullopt;
  }
  if (Status s = np_scalar_constant(t, f, v)) return s;
  if (v->kind == VK::NdArray) {
    bool handled = false;
    if (Status s = t.ndarray_operator(f, op_name, {v}, out, handled)) return s;
  } else if (v->kind == VK::Tensor || v->kind == VK::Sym) {
    if (Status s = t.graph_call(f, Ref::steal(PyObject_GetAttrString(py().operator_mod.get(), op_name)), "", {v}, {}, out)) return s;
  } else if (v->kind == VK::Const) {
    PyObject* r = nullptr;
    if (fold(v->obj.get(), &r) < 0 || !r) return t.brk(f, "DV0010", std::string("operator.") + op_name + " raised");
    out = t.constant(Ref::steal(r));
  } else if (v->kind == VK::Object && numpy_scalar(v->obj.get())) {  // -np.float64(0.5): NumPy's, an immutable scalar too
    PyObject* r = nullptr;
    if (fold(v->obj.get(), &r) < 0 || !r) return t.raise_current(f, std::string("operator.") + op_name);
    out = t.wrap(Ref::steal(r), nullptr, f);
    if (!out) return t.brk(f, "DV0018", std::string("operator.") + op_name + " of a NumPy scalar");
  } else {
    bool handled = false;  // a Python class's own __neg__ / __pos__ / __invert__, inlined
    if (v->kind == VK::Instance || v->kind == VK::Object)
      if (Status s = t.call_dunder(f, v, (std::string("__") + op_name + "__").c_str(), {}, out, handled)) return s;
    if (!handled) return t.brk(f, "DV0018", std::string("operator.") + op_name + " of a " + vk_name(v->kind));
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
  return replace_top2(t, f, [&](VPtr a, VPtr b, VPtr& out) { return t.subscr(f, a, b, out); });
}
// d[key] = v on a dict realize_read left lazy: the key, once, among those written back one by one
static void note_lazy_write(Value& d, PyObject* key) {
  if (!d.lazy) return;
  for (const Ref& k : d.written) {
    const int eq = k.get() == key ? 1 : PyObject_RichCompareBool(k.get(), key, Py_EQ);
    if (eq < 0) PyErr_Clear();
    if (eq == 1) return;
  }
  d.written.push_back(Ref::borrow(key));
}
Status op_STORE_SUBSCR(Translator& t, Frame& f, const Instr&) {  // (v container sub -- )
  NEED(3);
  VPtr sub = top(f), cont = top(f, 2), v = top(f, 3);
  if (cont->kind == VK::Instance) {  // its __setitem__ (inlined), else a dict subclass's items
    VPtr r;
    bool handled = false;
    if (Status s = t.call_dunder(f, cont, "__setitem__", {sub, v}, r, handled)) return s;
    if (handled) {
      f.stack.resize(f.stack.size() - 3);
      return std::nullopt;
    }
    if (cont->contents) cont = cont->contents;
  }
  if (cont->kind == VK::NdArray || (cont->kind == VK::Tensor && v->kind == VK::NdArray)) {  // nd[i] = v: in place
    VPtr out;
    bool handled = false;
    if (Status s = t.ndarray_operator(f, "setitem", {cont, sub, v}, out, handled)) return s;
  } else if (cont->kind == VK::Tensor) {
    VPtr out;
    VPtr index;
    if (Status s = t.tensor_index(f, sub, index)) return s;
    if (Status s = t.graph_call(f, py().setitem, "", {cont, index, v}, {}, out)) return s;
  } else if (PyObject* key = cont->kind == VK::Dict && sub->kind != VK::Const ? t.key_of(sub) : nullptr) {
    // d[p] = v: a tensor, module or class key
    if (cont->source) t.output.side_effects.note_mutation(cont);
    if (!dict_set(*cont, Ref::borrow(key), v)) return t.brk(f, "DV0010", "comparing dict keys raised");
    note_lazy_write(*cont, key);
  } else if ((cont->kind == VK::List || cont->kind == VK::Dict) && sub->kind == VK::Const) {
    if (cont->source) t.output.side_effects.note_mutation(cont);  // written back after the graph
    if (is_deque(cont) && PySlice_Check(sub->obj.get())) return t.brk(f, "DV0024", "slice assignment on a collections.deque");
    if (cont->kind == VK::List && PySlice_Check(sub->obj.get())) {  // lst[a:b] = iterable
      Py_ssize_t start, stop, step, len, n = static_cast<Py_ssize_t>(cont->items.size());
      if (PySlice_GetIndicesEx(sub->obj.get(), n, &start, &stop, &step, &len) < 0)
        return PyErr_Clear(), t.brk(f, "DV0024", "list slice assignment with a bad slice");
      VPtr it;
      if (Status s = t.iterate(f, v, it)) return s;
      std::vector<VPtr> repl(it->items.begin() + static_cast<long>(it->pos), it->items.end());
      it->pos = it->items.size();
      if (step != 1) {  // lst[::2] = [a, b]: one item per position of the extended slice
        if (static_cast<Py_ssize_t>(repl.size()) != len)
          return t.raise_new(f, PyExc_ValueError, "attempt to assign sequence of size " + std::to_string(repl.size()) +
                                                      " to extended slice of size " + std::to_string(len));
        for (Py_ssize_t i = 0; i < len; ++i) cont->items[static_cast<size_t>(start + i * step)] = repl[static_cast<size_t>(i)];
        f.stack.resize(f.stack.size() - 3);
        return std::nullopt;
      }
      if (stop < start) stop = start;
      cont->items.erase(cont->items.begin() + start, cont->items.begin() + stop);
      cont->items.insert(cont->items.begin() + start, repl.begin(), repl.end());
    } else if (cont->kind == VK::List) {
      long i = PyLong_AsLong(sub->obj.get());
      long n = static_cast<long>(cont->items.size());
      if (i < 0) i += n;
      if (PyErr_Occurred() || i < 0 || i >= n) return t.brk(f, "DV0010", "list assignment index out of range");
      cont->items[i] = v;
    } else {
      if (PyObject_Hash(sub->obj.get()) == -1) return PyErr_Clear(), t.brk(f, "DV0024", "unhashable dict key");
      if (!dict_set(*cont, sub->obj, v)) return t.brk(f, "DV0010", "comparing dict keys raised");
      note_lazy_write(*cont, sub->obj.get());
    }
  } else {
    return t.brk(f, "DV0008", std::string("item assignment on a ") + (cont->source ? "input " : "") + vk_name(cont->kind));
  }
  f.stack.resize(f.stack.size() - 3);
  return std::nullopt;
}
// 3.12+: container[start:stop] and container[start:stop] = v, without a slice object on the stack.
static Instr two_args() {  // BUILD_SLICE 2, as these run it
  Instr in;
  in.arg = 2;
  return in;
}
Status op_BINARY_SLICE(Translator& t, Frame& f, const Instr&) {  // (container start stop -- res)
  NEED(3);
  const std::vector<VPtr> bounds(f.stack.end() - 2, f.stack.end());
  const Instr two = two_args();
  if (Status s = op_BUILD_SLICE(t, f, two)) return s;  // (container slice); unchanged on a break
  VPtr out;
  Status s = t.subscr(f, top(f, 2), top(f), out);
  f.stack.pop_back();
  if (s) {
    f.stack.insert(f.stack.end(), bounds.begin(), bounds.end());
    return s;
  }
  top(f) = out;
  return std::nullopt;
}
Status op_STORE_SLICE(Translator& t, Frame& f, const Instr&) {  // (v container start stop -- )
  NEED(4);
  const std::vector<VPtr> bounds(f.stack.end() - 2, f.stack.end());
  const Instr two = two_args();
  if (Status s = op_BUILD_SLICE(t, f, two)) return s;  // (v container slice)
  if (Status s = op_STORE_SUBSCR(t, f, two)) {         // unchanged on a break
    f.stack.pop_back();
    f.stack.insert(f.stack.end(), bounds.begin(), bounds.end());
    return s;
  }
  return std::nullopt;
}
Status op_DELETE_SUBSCR(Translator& t, Frame& f, const Instr&) {  // (container sub -- )
  NEED(2);
  VPtr sub = top(f), cont = top(f, 2);
  if (cont->kind == VK::Instance) {  // its __delitem__ (inlined), else a dict subclass's items
    VPtr r;
    bool handled = false;
    if (Status s = t.call_dunder(f, cont, "__delitem__", {sub}, r, handled)) return s;
    if (handled) {
      f.stack.resize(f.stack.size() - 2);
      return std::nullopt;
    }
    if (cont->contents) cont = cont->contents;
  }
  if (PyObject* key = cont->kind == VK::Dict && sub->kind != VK::Const ? t.key_of(sub) : nullptr) {  // del d[p]: a tensor, module or class key
    if (!dict_erase(*cont, key)) return t.brk(f, "DV0010", "KeyError in del of a dict item", "the eager frame raises it");
    if (cont->source) t.output.side_effects.note_mutation(cont);
    f.stack.resize(f.stack.size() - 2);
    return std::nullopt;
  }
  if (sub->kind != VK::Const || (cont->kind != VK::List && cont->kind != VK::Dict))
    return t.brk(f, "DV0008", std::string("del of an item of a ") + vk_name(cont->kind));
  if (cont->kind == VK::Dict) {
    if (PyObject_Hash(sub->obj.get()) == -1) return PyErr_Clear(), t.brk(f, "DV0024", "unhashable dict key");
    if (!dict_erase(*cont, sub->obj.get())) return t.raise_key_error(f, sub->obj.get(), "del");
  } else {
    if (is_deque(cont) && PySlice_Check(sub->obj.get())) return t.brk(f, "DV0024", "del of a slice of a collections.deque");
    if (PySlice_Check(sub->obj.get())) {  // del lst[a:b], del lst[::2]
      Py_ssize_t start, stop, step, len;
      if (PySlice_GetIndicesEx(sub->obj.get(), static_cast<Py_ssize_t>(cont->items.size()), &start, &stop, &step, &len) < 0)
        return PyErr_Clear(), t.brk(f, "DV0024", "del of a list slice with a bad slice");
      std::vector<Py_ssize_t> gone;
      for (Py_ssize_t i = 0; i < len; ++i) gone.push_back(start + i * step);
      std::sort(gone.rbegin(), gone.rend());  // from the back: earlier positions stay put
      for (Py_ssize_t i : gone) cont->items.erase(cont->items.begin() + i);
      if (cont->source) t.output.side_effects.note_mutation(cont);
      f.stack.resize(f.stack.size() - 2);
      return std::nullopt;
    }
    if (!PyLong_CheckExact(sub->obj.get())) return t.brk(f, "DV0024", "del of a list item by a " + std::string(Py_TYPE(sub->obj.get())->tp_name));
    long i = PyLong_AsLong(sub->obj.get());
    const long n = static_cast<long>(cont->items.size());
    if (i < 0) i += n;
    if (PyErr_Occurred() || i < 0 || i >= n) return PyErr_Clear(), t.brk(f, "DV0010", "list assignment index out of range");
    cont->items.erase(cont->items.begin() + i);
  }
  if (cont->source) t.output.side_effects.note_mutation(cont);
  f.stack.resize(f.stack.size() - 2);
  return std::nullopt;
}
Status op_BUILD_SLICE(Translator& t, Frame& f, const Instr& in) {  // (start stop [step] -- slice)
  NEED(static_cast<size_t>(in.arg));
  std::vector<VPtr> parts(f.stack.end() - in.arg, f.stack.end());
  bool symbolic = false;
  for (auto& p : parts) {
    // (x[:n] with n an np.int64 from an np.arange: the int it holds)
    if (!np_int_as_index(t, p)) return t.brk(f, "DV0017", "slice bounds must be constants");
    symbolic |= p->kind == VK::Sym;
    if (p->kind != VK::Const && p->kind != VK::Sym) return t.brk(f, "DV0017", "slice bounds must be constants");
  }
  if (symbolic) {  // x[:n] with a symbolic n: the slice stays symbolic (graph arguments)
    VPtr sl = t.make(VK::Slice);
    sl->items = parts;
    if (in.arg == 2) sl->items.push_back(t.constant(Ref::borrow(Py_None)));
    f.stack.resize(f.stack.size() - in.arg);
    f.stack.push_back(sl);
    return std::nullopt;
  }
  PyObject* s = PySlice_New(parts[0]->obj.get(), parts[1]->obj.get(), in.arg == 3 ? parts[2]->obj.get() : nullptr);
  f.stack.resize(f.stack.size() - in.arg);
  f.stack.push_back(t.constant_steal(s));
  return std::nullopt;
}

}  // namespace dv
