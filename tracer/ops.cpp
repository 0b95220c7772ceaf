// Operators, attributes, subscripts, truth, iteration and builtins over Values.
#include <algorithm>
#include <functional>
#include <cmath>
#include <cstring>

#include "core/opcodes.h"
#include "pycache.h"
#include "tensor_match.h"
#include "translator.h"
#include "values/kind.h"

namespace dv {
namespace {

// BINARY_OP oparg -> operator module function name (opcode._nb_ops order).
const char* kBinOpNames[] = {"add", "and_", "floordiv", "lshift", "matmul", "mul", "mod", "or_", "pow", "rshift",
                             "sub", "truediv", "xor", "iadd", "iand", "ifloordiv", "ilshift", "imatmul", "imul",
                             "imod", "ior", "ipow", "irshift", "isub", "itruediv", "ixor"};
const char* kCmpNames[] = {"lt", "le", "eq", "ne", "gt", "ge"};

// An operand whose class may define an operator in Python (made in the trace, or an object of a
// Python class), and the other operand not a tensor: Python tries the tensor's operator first.
// An operand whose class may define the operator in Python (Translator::user_operator inlines it):
// an instance made in the trace or read as one, a tuple of a tuple subclass of Python code, or an
// object from outside of a Python class (one with __slots__): its operator then reads the trace's
// state, not the real object's as it was.
bool user_operand(const VPtr& v) {
  return v->kind == VK::Instance || (v->kind == VK::Tuple && v->obj && tuple_class(v->obj.get())) ||
         (v->kind == VK::Object && v->obj && !PyType_Check(v->obj.get()) && (Py_TYPE(v->obj.get())->tp_flags & Py_TPFLAGS_HEAPTYPE));
}

Ref op_fn(const char* name) { return Ref::steal(PyObject_GetAttrString(py().operator_mod.get(), name)); }

}  // namespace

// An operator with a numpy.float64 or int64 whose value is symbolic (values/np_scalar.cpp), `op` a
// BINARY_OP oparg (not in place: a number's are not) or -1 - a COMPARE_OP's. With a tensor it is the
// number it stands for (a torch operator reads it so: same dtypes); +, -, * with an int, a float or
// another such scalar (and / by a constant, and // and % of ints by a constant int), a graph node
// whose result eager holds as an np.float64 (a float among them, or /) or an np.int64, computed as
// NumPy computes it (IEEE doubles, as Python's floats; int64 -- NumPy wraps past 2**63, which a
// symbolic int does not model); a comparison with one, a symbolic np.bool_ (its truth, where read, a
// guard on the symbolic condition). Anything else -- other operators, where NumPy and
// Python differ (1 / 0.0 is inf with a warning, not ZeroDivisionError), other operands -- has the
// scalar's constant, its value guarded: handled stays false and the operator goes on with it.
Translator::Status Translator::np_scalar_binary(Frame& f, int op, VPtr& a, VPtr& b, VPtr& out, bool& handled) {
  auto python_number = [](const VPtr& v) {
    if (v->kind == VK::NpScalar) return np_scalar_number(v);
    if (v->kind == VK::Sym) {
      PyTypeObject* tp = sym_python_type(v->obj.get());
      return tp == &PyLong_Type || tp == &PyFloat_Type;
    }
    return v->kind == VK::Const && (PyLong_CheckExact(v->obj.get()) || PyFloat_CheckExact(v->obj.get()) || PyBool_Check(v->obj.get()));
  };
  auto unwrapped = [](const VPtr& v) { return v->kind == VK::NpScalar ? v->self : v; };
  auto number_of = [&](const VPtr& v) {  // np.float64(1.0) - lam, np.int64(3) - k: the constant's number (here only)
    if (v->kind == VK::Object && numpy_float64(v->obj.get())) return constant_steal(PyFloat_FromDouble(PyFloat_AS_DOUBLE(v->obj.get())));
    if (v->kind == VK::Object && numpy_int64(v->obj.get())) return constant_steal(PyNumber_Index(v->obj.get()));
    return v;
  };
  if (a->kind == VK::Tensor || b->kind == VK::Tensor) {
    a = unwrapped(a);
    b = unwrapped(b);
    return std::nullopt;  // the tensor's operator, below
  }
  // NumPy's result type: float64 where either is a float (np.int64 * 0.5) or for /, else int64
  auto is_float = [](const VPtr& v) {
    if (v->kind == VK::NpScalar) return v->obj.get() == numpy_float64_type();
    if (v->kind == VK::Sym) return sym_python_type(v->obj.get()) == &PyFloat_Type;
    return v->kind == VK::Const && PyFloat_CheckExact(v->obj.get());
  };
  const bool nonzero_const = b->kind == VK::Const && (PyFloat_Check(b->obj.get()) || PyLong_CheckExact(b->obj.get())) &&
                             PyObject_IsTrue(b->obj.get()) == 1;
  const bool divides = op == 11 && nonzero_const;  // by a nonzero constant
  // (// and % of ints by a nonzero constant int: NumPy's floor and sign are Python's)
  const bool int_divides = (op == 2 || op == 6) && nonzero_const && PyLong_CheckExact(b->obj.get()) && !is_float(number_of(a));
  if ((op == 0 || op == 5 || op == 10 || divides || int_divides || op < 0) && python_number(number_of(a)) &&
      python_number(number_of(b))) {
    a = number_of(a);
    b = number_of(b);
    PyObject* type = is_float(a) || is_float(b) || op == 11 ? numpy_float64_type() : numpy_int64_type();
    if (!type) return brk(f, "DV0018", "a NumPy scalar's operator: no NumPy type");
    VPtr r;
    if (op >= 0) {
      if (Status s = graph_call(f, op_fn(kBinOpNames[op]), "", {unwrapped(a), unwrapped(b)}, {}, r)) return s;
      if (r->kind != VK::Sym) return brk(f, "DV0018", std::string("operator.") + kBinOpNames[op] + " of a NumPy scalar gave a " + vk_name(r->kind));
      out = np_scalar_value(*this, r, type);
    } else {
      if (Status s = graph_call(f, op_fn(kCmpNames[-1 - op]), "", {unwrapped(a), unwrapped(b)}, {}, r)) return s;
      static PyObject* np_bool = kept_attr("numpy", "bool_");  // (NumPy is imported: it made the scalar)
      if (!np_bool) return PyErr_Clear(), brk(f, "DV0018", "a comparison of a NumPy scalar: no numpy.bool_");
      if (r->kind == VK::Sym) {
        out = np_scalar_value(*this, r, np_bool);  // symbolic, an np.bool_ (a branch on it guards it)
      } else {
        bool holds = false;
        if (Status s = truth(f, r, holds)) return s;
        out = make(VK::Object);
        out->obj = Ref::steal(PyObject_CallOneArg(np_bool, holds ? Py_True : Py_False));
        if (!out->obj) return PyErr_Clear(), brk(f, "DV0018", "a comparison of a NumPy scalar: no numpy.bool_");
      }
    }
    handled = true;
    return std::nullopt;
  }
  if (Status s = np_scalar_constant(*this, f, a)) return s;
  return np_scalar_constant(*this, f, b);
}

namespace {
// The items (a List) of an object of a list subclass (made in the trace or from the frame), else null.
VPtr list_items_of(const VPtr& v) {
  return v->kind == VK::Instance && v->contents && v->contents->kind == VK::List ? v->contents : nullptr;
}
}  // namespace

Translator::Status Translator::binary(Frame& f, int nb, VPtr a, VPtr b, VPtr& out) {
  if (nb < 0 || nb >= 26) return brk(f, "DV0018", "unknown binary operator");
  if (user_operand(a) || user_operand(b)) {  // a Python class's __add__ / __radd__ / __iadd__
    std::string base = kBinOpNames[nb >= 13 ? nb - 13 : nb];
    if (base.back() == '_') base.pop_back();  // and_, or_
    bool handled = false;
    if (Status s = user_operator(f, "__" + base + "__", "__r" + base + "__", nb >= 13 ? "__i" + base + "__" : "", a, b, out, handled))
      return s;
    if (handled) return std::nullopt;
  }
  if (VPtr la = list_items_of(a); la || list_items_of(b)) {
    // A list subclass's object whose class has no operator of its own: list's. l + xs and l * n are
    // new lists of its items; l += xs extends the object itself, which is the result.
    if (nb == 18 && la && b->kind == VK::Sym && b->obj && sym_python_type(b->obj.get()) == &PyLong_Type)
      if (Ref n = specialize(b)) b = constant(n);  // a count that changed between calls: its value, guarded
    if (nb == 18 && la && b->kind == VK::Const && PyLong_CheckExact(b->obj.get())) {
      // l *= n: the object itself holds its items n times (the same objects), as list.__imul__:
      // emptied for n <= 0, else extended by its items n - 1 times
      const long n = PyLong_AsLong(b->obj.get());
      if (n == -1 && PyErr_Occurred()) return raise_current(f, "operator.imul");
      VPtr ignored;
      if (n <= 0) {
        if (Status s = call(f, bound_method(la, Ref(), "clear"), {}, {}, ignored)) return s;
      } else if (n > 1) {
        VPtr more;
        if (Status s = binary(f, 5, la, constant_steal(PyLong_FromLong(n - 1)), more)) return s;
        if (Status s = call(f, bound_method(la, Ref(), "extend"), {more}, {}, ignored)) return s;
      }
      out = a;
      return std::nullopt;
    }
    if (nb >= 13 && la) {
      if (nb != 13) return brk(f, "DV0018", std::string("operator.") + kBinOpNames[nb] + " on a list subclass's object");
      VPtr ignored;
      if (Status s = call(f, bound_method(la, Ref(), "extend"), {b}, {}, ignored)) return s;
      out = a;
      return std::nullopt;
    }
    if (la) a = la;
    if (VPtr lb = list_items_of(b)) b = lb;
  }
  if (a->kind == VK::NpScalar || b->kind == VK::NpScalar) {
    bool handled = false;
    if (Status s = np_scalar_binary(f, nb >= 13 ? nb - 13 : nb, a, b, out, handled); s || handled) return s;
  }
  if (a->kind == VK::NdArray || b->kind == VK::NdArray) {  // torch._numpy's operators (values/ndarray.cpp)
    bool handled = false;
    return ndarray_operator(f, kBinOpNames[nb], {a, b}, out, handled);
  }
  // `s += x` where s is not a tensor (s = 0; s += t * 2) is s = s + x: numbers have no in-place
  // forms (and the FX code of operator.iadd on a literal would not even parse).
  const bool inplace = nb >= 13;
  if (inplace && a->kind == VK::Const && PySet_CheckExact(a->obj.get()) && b->kind == VK::Const) {
    // s |= t, s -= t ... change the set itself (its aliases and, for a set from the frame, the caller
    // see it: ValueBuilder::wrap_set writes it back)
    Ref r = Ref::steal(PyObject_CallFunctionObjArgs(op_fn(kBinOpNames[nb]).get(), a->obj.get(), b->obj.get(), nullptr));
    if (!r) return raise_current(f, std::string("operator.") + kBinOpNames[nb]);
    out = r.get() == a->obj.get() ? a : constant(r);
    return std::nullopt;
  }
  if (a->kind == VK::Set || b->kind == VK::Set) {  // | & - ^ of sets holding values (values/set.cpp)
    const int base = nb >= 13 ? nb - 13 : nb;
    const char op = base == 7 ? '|' : base == 1 ? '&' : base == 10 ? '-' : base == 12 ? '^' : 0;
    bool handled = false;
    if (op)
      if (Status s = set_operator(*this, f, op, inplace, a, b, out, handled)) return s;
    if (handled) return std::nullopt;
    return brk(f, "DV0018", std::string("operator.") + kBinOpNames[nb] + " on a set holding values");
  }
  if (nb >= 13 && a->kind != VK::Tensor) nb -= 13;
  const char* name = kBinOpNames[nb];
  // xs += ys and d |= e mutate the left operand (an alias or the caller sees it): list.extend and
  // dict.update, which also note an input's mutation; d | e is a new dict updated the same way.
  const bool dict_or = nb == 7 && a->kind == VK::Dict && b->kind == VK::Dict;
  if ((inplace && nb == 0 && a->kind == VK::List) || dict_or) {
    VPtr target = a;
    if (dict_or && !inplace) {
      target = make(VK::Dict);
      target->keys = a->keys;
      target->items = a->items;
      target->obj = a->source ? Ref() : a->obj;  // an OrderedDict's or defaultdict's | is one too
      target->defaults = a->source ? nullptr : a->defaults;
      // dict | OrderedDict(...): the right operand's class is a subclass with its own __ror__, which
      // Python asks first: its class's (a defaultdict's with its default_factory), same items
      auto cls = [](const VPtr& v) {
        return v->obj && PyType_Check(v->obj.get()) ? v->obj.get() : reinterpret_cast<PyObject*>(&PyDict_Type);
      };
      PyObject* cb = cls(b);
      if (!b->source && cb != cls(a) && (cb == ordered_dict_class() || cb == defaultdict_class()) &&
          PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cb), reinterpret_cast<PyTypeObject*>(cls(a)))) {
        target->obj = b->obj;
        target->defaults = b->defaults;
      }
    }
    VPtr ignored;
    if (Status s = call(f, bound_method(target, Ref(), nb == 0 ? "extend" : "update"), {b}, {}, ignored)) return s;
    out = target;
    return std::nullopt;
  }
  if (a->kind == VK::DictView || b->kind == VK::DictView) return view_set_operator(f, nb, a, b, out);
  if (is_deque(a) || is_deque(b)) return brk(f, "DV0018", std::string("operator.") + kBinOpNames[nb] + " on a collections.deque");
  // (-1) ** t: FX writes operator.pow of a negative number as `-1 ** t`, which Python reads as
  // -(1 ** t) (a wrong result under torch.compile too); torch.pow(-1, t) is the same call, as
  // Tensor.__rpow__ makes it
  const bool negative_base = std::strcmp(name, "pow") == 0 && a->kind == VK::Const &&
                             ((PyLong_CheckExact(a->obj.get()) && _PyLong_Sign(a->obj.get()) < 0) ||
                              (PyFloat_CheckExact(a->obj.get()) && std::signbit(PyFloat_AS_DOUBLE(a->obj.get()))));
  if (a->kind == VK::Tensor || b->kind == VK::Tensor) {
    if (negative_base && b->kind == VK::Tensor) {
      static PyObject* torch_pow = kept_attr("torch", "pow");
      if (torch_pow) return graph_call(f, Ref::borrow(torch_pow), "", {a, b}, {}, out);
    }
    // In-place forms on tensors keep their meaning (x += y mutates x); FX records operator.iadd.
    return graph_call(f, op_fn(name), "", {a, b}, {}, out);
  }
  auto number = [](const VPtr& v) {
    return v->kind == VK::Sym || (v->kind == VK::Const && (PyLong_Check(v->obj.get()) || PyFloat_Check(v->obj.get())));
  };
  if ((a->kind == VK::Sym || b->kind == VK::Sym) && number(a) && number(b)) {
    if (negative_base)
      return brk(f, "DV0018", "a negative number to the power of a symbolic int",
                 "FX would write it as -(c ** n); write (-1) ** n as 1 - 2 * (n % 2)");
    return graph_call(f, op_fn(name), "", {a, b}, {}, out);  // symbolic arithmetic: a graph node
  }
  if (a->kind == VK::Const && b->kind == VK::Const) {
    Ref r = Ref::steal(PyObject_CallFunctionObjArgs(op_fn(name).get(), a->obj.get(), b->obj.get(), nullptr));
    if (!r) return raise_current(f, std::string("operator.") + name);
    out = constant(r);
    return std::nullopt;
  }
  if ((nb == 0 || nb == 13) && b->kind == VK::Tuple && a->kind == VK::Const && PyTuple_CheckExact(a->obj.get())) {
    // () + (h,): the constant tuple taken as a tuple of constants, joined below
    VPtr it;
    if (Status s = iterate(f, a, it)) return s;
    a = make(VK::Tuple);
    a->items.assign(it->items.begin() + static_cast<long>(it->pos), it->items.end());
  }
  const bool seq_a = a->kind == VK::List || a->kind == VK::Tuple, seq_b = b->kind == VK::List || b->kind == VK::Tuple;
  if ((nb == 0 || nb == 13) && seq_a && (seq_b || (b->kind == VK::Const && PyTuple_Check(b->obj.get())))) {
    VPtr r = (nb == 13 && a->kind == VK::List) ? a : make(a->kind);
    if (r != a) r->items = a->items;
    if (nb == 13 && a->kind == VK::List && a->source) return brk(f, "DV0008", "mutating an input list (+=)");
    VPtr bi;
    if (Status s = iterate(f, b, bi)) return s;
    r->items.insert(r->items.end(), bi->items.begin(), bi->items.end());
    out = r;
    return std::nullopt;
  }
  const bool times_seq = nb == 5 && seq_b && !seq_a && a->kind == VK::Const && PyLong_CheckExact(a->obj.get());
  if (times_seq) std::swap(a, b);  // 4 * [x]
  if (nb == 5 && (seq_a || times_seq) && b->kind == VK::Const && PyLong_CheckExact(b->obj.get())) {
    // list *= n repeats the list in place (its aliases see it); a * n makes a new one
    const bool in_place = inplace && !times_seq && a->kind == VK::List;
    if (in_place && a->source) return brk(f, "DV0008", "mutating an input list (*=)");
    VPtr r = in_place ? a : make(a->kind);
    const std::vector<VPtr> once = a->items;
    r->items.clear();
    long n = PyLong_AsLong(b->obj.get());
    for (long i = 0; i < n; ++i) r->items.insert(r->items.end(), once.begin(), once.end());
    out = r;
    return std::nullopt;
  }
  // Constant containers (torch.Size + tuple, ...): fold through Python objects.
  auto pa = to_python(a, false), pb = to_python(b, false);
  if (pa && pb) {
    Ref r = Ref::steal(PyObject_CallFunctionObjArgs(op_fn(name).get(), pa->get(), pb->get(), nullptr));
    if (r) {
      out = wrap(r, nullptr, f);
      if (out) return std::nullopt;
    }
  }
  return brk(f, "DV0018", std::string("operator.") + name + " on " + vk_name(a->kind) + " and " + vk_name(b->kind));
}

namespace {
// 1 a tuple that compares as tuple does (tuple, torch.Size, a namedtuple without its own __eq__),
// 2 a list, 0 anything else: a value with items or a constant.
int seq_compare_kind(const VPtr& v) {
  auto tuple_like = [](PyTypeObject* tp) {
    return tp == &PyTuple_Type || (PyType_IsSubtype(tp, &PyTuple_Type) && tp->tp_richcompare == PyTuple_Type.tp_richcompare);
  };
  if (v->lazy) return 0;
  if (v->kind == VK::Tuple) return !v->obj || (PyType_Check(v->obj.get()) && tuple_like(reinterpret_cast<PyTypeObject*>(v->obj.get()))) ? 1 : 0;
  if (v->kind == VK::List) return v->obj ? 0 : 2;
  if (v->kind == VK::Const && v->obj) {
    if (PyTuple_Check(v->obj.get())) return tuple_like(Py_TYPE(v->obj.get())) ? 1 : 0;
    if (PyList_CheckExact(v->obj.get())) return 2;
  }
  return 0;
}

bool constant_items(const VPtr& v) {  // a tuple or list of constants (nested): compared by Python itself
  for (const VPtr& x : v->items)
    if (!(x->kind == VK::Const || ((x->kind == VK::Tuple || x->kind == VK::List) && !x->obj && !x->lazy && constant_items(x)))) return false;
  return true;
}
}  // namespace

Translator::Status Translator::compare(Frame& f, int cmp, VPtr a, VPtr b, VPtr& out) {
  if (cmp < 0 || cmp >= 6) return brk(f, "DV0018", "unknown comparison");
  if (user_operand(a) || user_operand(b)) {  // a Python class's __eq__ / __lt__ ..., then the reflected one
    static const char* reflected[] = {"gt", "ge", "eq", "ne", "lt", "le"};
    bool handled = false;
    const std::string op = std::string("__") + kCmpNames[cmp] + "__";
    if (Status s = user_operator(f, op, std::string("__") + reflected[cmp] + "__", "", a, b, out, handled)) return s;
    if (handled) return std::nullopt;
    if (cmp == 3) {  // object.__ne__: the inverse of a Python __eq__
      if (Status s = user_operator(f, "__eq__", "__eq__", "", a, b, out, handled)) return s;
      if (handled) {
        if (out->kind != VK::Const || !PyBool_Check(out->obj.get()))
          return brk(f, "DV0018", std::string("!= over an __eq__ that gave a ") + vk_name(out->kind));
        out = constant(Ref::borrow(out->obj.get() == Py_True ? Py_False : Py_True));
        return std::nullopt;
      }
    }
  }
  if (VPtr la = list_items_of(a)) a = la;  // a list subclass's object without its own: list's, on its items
  if (VPtr lb = list_items_of(b)) b = lb;
  if (a->kind == VK::NpScalar || b->kind == VK::NpScalar) {
    bool handled = false;
    if (Status s = np_scalar_binary(f, -1 - cmp, a, b, out, handled); s || handled) return s;
  }
  if (a->kind == VK::NdArray || b->kind == VK::NdArray) {  // element-wise, as NumPy's
    bool handled = false;
    return ndarray_operator(f, kCmpNames[cmp], {a, b}, out, handled);
  }
  if (a->kind == VK::Tensor || b->kind == VK::Tensor) return graph_call(f, op_fn(kCmpNames[cmp]), "", {a, b}, {}, out);
  if ((a->kind == VK::Sym && (b->kind == VK::Sym || b->kind == VK::Const)) || (b->kind == VK::Sym && a->kind == VK::Const))
    return graph_call(f, op_fn(kCmpNames[cmp]), "", {a, b}, {}, out);  // a SymBool; branching on it adds a guard
  if (a->kind == VK::DictView || b->kind == VK::DictView) return view_compare(f, cmp, a, b, out);
  if (a->kind == VK::Set || b->kind == VK::Set) {  // values/set.cpp
    bool handled = false;
    if (Status s = set_compare(*this, f, cmp, a, b, out, handled)) return s;
    if (handled) return std::nullopt;
  }
  const int seq = cmp == 2 || cmp == 3 ? seq_compare_kind(a) : 0, seq_b = seq ? seq_compare_kind(b) : 0;
  if (seq && seq_b && seq != seq_b) {  // a tuple and a list are never equal
    out = constant(Ref::borrow(cmp == 3 ? Py_True : Py_False));
    return std::nullopt;
  }
  auto constants_only = [](const VPtr& v) { return v->kind == VK::Const || constant_items(v); };
  if (seq && seq == seq_b && !(constants_only(a) && constants_only(b))) {  // (constants only: Python compares them, below)
    // (y, 3) == (y, 3) over traced items, as tuple and list compare: lengths, then item by item,
    // each first by identity (PyObject_RichCompareBool), up to the first pair that is not equal. A
    // pair compared by value that is not a constant's (a tensor's __eq__) breaks, below. One side
    // may be a constant tuple or list (`x.shape == (4, 4)` over symbolic sizes: guards on them).
    auto items_of = [this](const VPtr& v) {
      if (v->kind != VK::Const) return v->items;
      std::vector<VPtr> out;
      Ref fast = Ref::steal(PySequence_Fast(v->obj.get(), ""));
      for (Py_ssize_t i = 0; fast && i < PySequence_Fast_GET_SIZE(fast.get()); ++i)
        out.push_back(constant(Ref::borrow(PySequence_Fast_GET_ITEM(fast.get(), i))));
      return out;
    };
    const std::vector<VPtr> ia = items_of(a), ib = items_of(b);
    bool equal = ia.size() == ib.size();
    // Sizes and numbers only (comparisons without side effects): a pair of constants that differ
    // decides it with no guard on the sizes before it (`x.shape == (4, 4)` where x.shape[1] is 6),
    // as TorchDynamo's conjunction of the items' comparisons simplifies.
    auto number = [](const VPtr& v) { return v->kind == VK::Sym || v->kind == VK::Const; };
    bool numbers = equal;
    for (size_t i = 0; numbers && i < ia.size(); ++i) numbers = number(ia[i]) && number(ib[i]);
    for (size_t i = 0; numbers && equal && i < ia.size(); ++i)
      if (ia[i]->kind == VK::Const && ib[i]->kind == VK::Const) {
        const int eq = PyObject_RichCompareBool(ia[i]->obj.get(), ib[i]->obj.get(), Py_EQ);
        if (eq < 0) return raise_current(f, "comparison");
        equal = eq == 1;
      }
    for (size_t i = 0; equal && i < ia.size(); ++i) {
      const VPtr &x = ia[i], &y = ib[i];
      if (same_object(*this, f, x, y)) continue;
      VPtr r;
      if (x->kind == VK::Tensor || y->kind == VK::Tensor || x->kind == VK::NdArray || y->kind == VK::NdArray)
        return brk(f, "DV0018", std::string("comparison of ") + vk_name(a->kind) + "s whose items are different tensors");
      if (Status s = compare(f, 2, x, y, r)) return s;
      if (r->kind == VK::Sym) {  // sizes (fsmt's `list(x.shape) == [bsz, tgt_len]`): its truth, a guard, as bool() takes it
        if (Status s = truth(f, r, equal)) return s;
        continue;
      }
      if (r->kind != VK::Const || !PyBool_Check(r->obj.get()))
        return brk(f, "DV0018", std::string("comparison of ") + vk_name(a->kind) + "s whose items compare as a " + vk_name(r->kind));
      equal = r->obj.get() == Py_True;
    }
    out = constant(Ref::borrow(equal == (cmp == 2) ? Py_True : Py_False));
    return std::nullopt;
  }
  auto pa = to_python(a, false), pb = to_python(b, false);
  if (!pa || !pb) {
    // Equality by identity: objects known by identity (obj is the object), and instances made in
    // the trace without a Python __eq__ (one value is one object). Containers compare their items
    // (a container of tensors: a break), though one is equal to itself.
    auto by_identity = [](const VPtr& v) {
      return v->kind == VK::Object || v->kind == VK::NNModule || v->kind == VK::Function || v->kind == VK::Const ||
             (v->kind == VK::Instance && !v->contents);  // a dict subclass compares its items
    };
    const bool container = a->kind == VK::Tuple || a->kind == VK::List || a->kind == VK::Dict || b->kind == VK::Tuple ||
                           b->kind == VK::List || b->kind == VK::Dict;
    if ((cmp == 2 || cmp == 3) && (a == b || (by_identity(a) && by_identity(b) && !container))) {
      const bool same = a == b || (a->kind != VK::Instance && b->kind != VK::Instance && a->obj && a->obj.get() == b->obj.get());
      out = constant(Ref::borrow((same == (cmp == 2)) ? Py_True : Py_False));
      return std::nullopt;
    }
    return brk(f, "DV0018", std::string("comparison of ") + vk_name(a->kind) + " and " + vk_name(b->kind));
  }
  Ref r = Ref::steal(PyObject_RichCompare(pa->get(), pb->get(), cmp));
  if (!r) return raise_current(f, "comparison");
  out = constant(r);
  return std::nullopt;
}

// A tensor's index as the graph takes it: an array in it (alone or in a tuple: x[self.keep_np],
// x[:, order]) is the tensor behind it, as eager converts an ndarray index (advanced indexing, a
// copy). A 0-d one stands for a NumPy scalar (prk_timesteps[k]), which eager takes by its
// __index__ (a view): the graph cannot, its value is data -- a break, as under torch.compile
// (which reads it with item()).
Translator::Status Translator::tensor_index(Frame& f, const VPtr& idx, VPtr& out) {
  auto dims = [](const VPtr& v) {  // (of the tensor behind it: v->obj)
    Ref d = v->obj ? Ref::steal(PyObject_CallMethod(v->obj.get(), "dim", nullptr)) : Ref();
    const long n = d ? PyLong_AsLong(d.get()) : -1;
    if (n < 0) PyErr_Clear();
    return n;
  };
  auto scalar = [&](const VPtr& v) { return v->kind == VK::NdArray && dims(v) <= 0; };
  const bool tuple = idx->kind == VK::Tuple && !idx->obj;
  if (scalar(idx) || (tuple && std::any_of(idx->items.begin(), idx->items.end(), scalar)))
    return brk(f, "DV0003", "a tensor indexed by a NumPy integer computed in the trace (its value is data)",
               "index with a tensor, or compute the index outside the compiled function");
  auto as_tensor = [&](const VPtr& v) { return v->kind == VK::NdArray ? tensor_of_ndarray(v) : v; };
  if (!tuple) return out = as_tensor(idx), std::nullopt;
  out = make(VK::Tuple);
  for (const VPtr& x : idx->items) out->items.push_back(as_tensor(x));
  return std::nullopt;
}

Translator::Status Translator::subscr(Frame& f, VPtr obj, VPtr idx, VPtr& out) {
  if (obj->lazy && obj->kind != VK::Dict) {  // (a lazy dict is read at one key: lazy_dict.cpp)
    // l[k], k a constant int within it: that item alone, as TorchDynamo's lazy items; else all of it
    if (idx->kind == VK::Const && PyLong_CheckExact(idx->obj.get())) {
      const Py_ssize_t n = builder.sequence_length(obj, f);
      Py_ssize_t i = PyLong_AsSsize_t(idx->obj.get());
      if (i == -1 && PyErr_Occurred()) PyErr_Clear();
      else if (i < 0) i += n;
      if (obj->lazy && i >= 0 && i < n) {
        out = builder.sequence_item(obj, i, f);
        return out ? std::nullopt : brk(f, "DV0005", "an item of " + obj->source->text() + " cannot be traced");
      }
    }
    if (Status s = realize_lazy(f, obj)) return s;
  }
  if (obj->kind == VK::Tensor) {
    if (idx->kind == VK::Sym && idx->obj && sym_python_type(idx->obj.get()) == &PyLong_Type) {
      // x[i], i a SymInt: Tensor.__getitem__ takes its __index__, which specialises it (a compile
      // per value of a timestep, alphas[t]); torch.select(x, 0, i) traces it, guarded by its range,
      // as TorchDynamo rewrites it
      static PyObject* select = kept_attr("torch", "select");
      if (select) return graph_call(f, Ref::borrow(select), "", {obj, constant_steal(PyLong_FromLong(0)), idx}, {}, out);
    }
    VPtr index;
    if (Status s = tensor_index(f, idx, index)) return s;
    return graph_call(f, py().getitem, "", {obj, index}, {}, out);
  }
  if (obj->kind == VK::NdArray) {  // nd[i], nd[a:b, None], nd[mask]: torch._numpy's indexing
    bool handled = false;
    return ndarray_operator(f, "getitem", {obj, idx}, out, handled);
  }
  if ((obj->kind == VK::List || obj->kind == VK::Tuple) && !np_int_as_index(*this, idx))  // l[np.int64(i)]
    return brk(f, "DV0017", "indexing a sequence with a NumPy int");
  if ((idx->kind == VK::Sym || idx->kind == VK::Slice) && obj->kind != VK::Tensor) {  // a Python index: specialise it
    auto r = to_python(idx, false);
    if (!r) return brk(f, "DV0021", "cannot specialise a symbolic index");
    idx = constant(*r);
  }
  if (obj->kind == VK::List || obj->kind == VK::Tuple) {
    if (idx->kind != VK::Const) return brk(f, "DV0017", "indexing a sequence with a non-constant");
    PyObject* i = idx->obj.get();
    const Py_ssize_t n = static_cast<Py_ssize_t>(obj->items.size());
    if (PyLong_Check(i) || (PyIndex_Check(i) && !PySlice_Check(i))) {  // (an index: a NumPy integer, an IntEnum)
      Py_ssize_t k = PyNumber_AsSsize_t(i, PyExc_IndexError);
      if (k == -1 && PyErr_Occurred()) return raise_current(f, "sequence index");
      if (k < 0) k += n;
      if (k < 0 || k >= n) return raise_new(f, PyExc_IndexError, obj->kind == VK::List ? "list index out of range" : "tuple index out of range");
      out = obj->items[k];
      return std::nullopt;
    }
    if (PySlice_Check(i)) {
      if (is_deque(obj)) return raise_new(f, PyExc_TypeError, "sequence index must be integer, not 'slice'");
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(i, &start, &stop, &step) < 0) return brk(f, "DV0010", "bad slice");
      Py_ssize_t len = PySlice_AdjustIndices(n, &start, &stop, step);
      VPtr r = make(obj->kind);
      if (obj->kind == VK::Tuple && !tuple_class(obj->obj.get())) r->obj = obj->obj;  // x.shape[1:] is a torch.Size too
      for (Py_ssize_t k = 0, j = start; k < len; ++k, j += step) r->items.push_back(obj->items[j]);
      out = r;
      return std::nullopt;
    }
    // Any other constant: eager's TypeError, raised in the trace (a model reading a tuple output by
    // key, out["hidden"], once its config switched to tuples): a handler of the trace may catch it
    const char* tname = Py_TYPE(i)->tp_name;
    if (is_deque(obj)) return raise_new(f, PyExc_TypeError, std::string("sequence index must be integer, not '") + tname + "'");
    if (obj->kind == VK::List && !obj->obj) return raise_new(f, PyExc_TypeError, std::string("list indices must be integers or slices, not ") + tname);
    if (obj->kind == VK::Tuple && (!obj->obj || obj->obj.get() == py().torch_Size.get() || tuple_class(obj->obj.get())))
      return raise_new(f, PyExc_TypeError, std::string("tuple indices must be integers or slices, not ") + tname);
    return brk(f, "DV0017", "unsupported sequence index");
  }
  if (obj->kind == VK::Dict) {
    PyObject* key = key_of(idx);
    if (!key) return brk(f, "DV0017", std::string("a dict key that is neither a constant nor an object compared by identity (a ") + vk_name(idx->kind) + ")");
    for (size_t k = 0; k < obj->keys.size(); ++k) {
      int eq = keys_equal(obj->keys[k].get(), key);
      if (eq == 1) {
        out = obj->items[k];
        return std::nullopt;
      }
      PyErr_Clear();
    }
    if (obj->obj.get() == defaultdict_class()) return dict_missing(f, obj, idx, out);
    if (idx->kind == VK::Tensor) return brk(f, "DV0010", "KeyError: a tensor key not in the dict", "the eager frame raises it");
    return raise_key_error(f, idx->obj.get());
  }
  // The class's own __getitem__ decides what module[i] is: torch.nn's containers are read below; a
  // Python __getitem__ of another class (a model that indexes its layers, self[0]) is inlined.
  enum { kModuleList, kSequential, kModuleDict, kParameterList, kParameterDict, kOwn, kNone } getitem_of = kNone;
  PyObject* own_getitem = nullptr;
  if (obj->kind == VK::NNModule) {
    static PyObject* getitem_name = PyUnicode_InternFromString("__getitem__");
    const int which = module_container_method(obj->obj.get(), "__getitem__");
    if (which >= 0) getitem_of = static_cast<decltype(getitem_of)>(which);
    own_getitem = _PyType_Lookup(Py_TYPE(obj->obj.get()), getitem_name);
    if (getitem_of == kNone && own_getitem && PyFunction_Check(own_getitem)) getitem_of = kOwn;
  }
  if (getitem_of == kOwn) return call_python(f, Ref::borrow(own_getitem), {obj, idx}, out);
  if (getitem_of <= kModuleDict && obj->kind == VK::NNModule)
    if (const Value* changed = changed_children(*this, obj->obj.get())) return changed_child(*this, f, *changed, getitem_of == kModuleDict, idx, out);
  if (getitem_of == kSequential && obj->flag && idx->kind == VK::Const && (PyLong_CheckExact(idx->obj.get()) || PySlice_Check(idx->obj.get()))) {
    // a Sequential's slice made in the trace (below), sliced or indexed again: its children
    const Py_ssize_t n = static_cast<Py_ssize_t>(obj->items.size());
    if (PyLong_CheckExact(idx->obj.get())) {
      Py_ssize_t i = PyLong_AsSsize_t(idx->obj.get());
      if (i < 0) i += n;
      if (PyErr_Occurred() || i < 0 || i >= n) return PyErr_Clear(), raise_new(f, PyExc_IndexError, "index " + repr_of(idx->obj.get()) + " is out of range");
      out = obj->items[static_cast<size_t>(i)];
      return std::nullopt;
    }
    Py_ssize_t start, stop, step, len;
    if (PySlice_GetIndicesEx(idx->obj.get(), n, &start, &stop, &step, &len) < 0) return PyErr_Clear(), brk(f, "DV0010", "slicing a Sequential raised");
    Ref sliced = Ref::steal(PyObject_GetItem(obj->obj.get(), idx->obj.get()));
    if (!sliced) return raise_current(f, "slicing a Sequential");
    out = make(VK::NNModule);
    out->obj = sliced;
    out->flag = true;
    for (Py_ssize_t i = 0; i < len; ++i) out->items.push_back(obj->items[static_cast<size_t>(start + i * step)]);
    return std::nullopt;
  }
  if (getitem_of == kParameterList && idx->kind == VK::Const && PySlice_Check(idx->obj.get())) {
    // plist[1:]: the items in the slice, each read as plist[i] is (below), as a list
    const Py_ssize_t n = PyObject_Length(obj->obj.get());
    Py_ssize_t start, stop, step, len;
    if (n < 0 || PySlice_GetIndicesEx(idx->obj.get(), n, &start, &stop, &step, &len) < 0) return PyErr_Clear(), brk(f, "DV0010", "slicing a ParameterList raised");
    VPtr l = make(VK::List);
    for (Py_ssize_t i = 0; i < len; ++i) {
      VPtr item;
      if (Status s = subscr(f, obj, constant_steal(PyLong_FromSsize_t(start + i * step)), item)) return s;
      l->items.push_back(item);
    }
    out = l;
    return std::nullopt;
  }
  if (obj->kind == VK::NNModule && idx->kind == VK::Const && PySlice_Check(idx->obj.get()) && obj->source &&
      (getitem_of == kModuleList || getitem_of == kSequential)) {
    // ModuleList / Sequential slices (self.layers[:-1]): the children in the slice, each with its
    // source, as a list (iterate, index, len), or for a Sequential a Sequential of them.
    Ref mods = Ref::steal(PyObject_GetAttrString(obj->obj.get(), "_modules"));
    if (!mods || !PyDict_Check(mods.get())) {
      PyErr_Clear();
      return brk(f, "DV0017", "slicing a module without children");
    }
    Ref keys = Ref::steal(PyDict_Keys(mods.get()));
    Ref picked = keys ? Ref::steal(PyObject_GetItem(keys.get(), idx->obj.get())) : Ref();
    if (!picked) {
      PyErr_Clear();
      return brk(f, "DV0010", "module slicing raised");
    }
    VPtr l = make(VK::List);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(picked.get()); ++i) {
      PyObject* k = PyList_GET_ITEM(picked.get(), i);
      VPtr m = wrap(Ref::borrow(PyDict_GetItem(mods.get(), k)), Source::module_member(obj->source, "_modules", str_of(k)), f);
      if (!m) return brk(f, "DV0013", "unsupported submodule");
      l->items.push_back(m);
    }
    // A Sequential's slice is a Sequential (eager's __getitem__ makes one of the same children): the
    // real one, made now, as a module made in the trace whose children are these values (its
    // iteration gives them, sources and all), so that calling it runs them in turn
    static PyObject* sequential = kept_attr("torch.nn", "Sequential");
    if (sequential && reinterpret_cast<PyObject*>(Py_TYPE(obj->obj.get())) == sequential) {
      Ref sliced = Ref::steal(PyObject_GetItem(obj->obj.get(), idx->obj.get()));
      if (!sliced) return raise_current(f, "slicing a Sequential");
      out = make(VK::NNModule);
      out->obj = sliced;
      out->flag = true;  // made in the trace
      out->items = l->items;
      return std::nullopt;
    }
    out = l;
    return std::nullopt;
  }
  if (obj->kind == VK::NNModule && idx->kind == VK::Const && getitem_of != kNone && !PySlice_Check(idx->obj.get())) {
    // ModuleList / Sequential / ModuleDict / ParameterList / ParameterDict indexing: the item, reloaded
    // from the member dict that holds it -- found by identity, so a Sequential of named children
    // (Sequential(OrderedDict(conv=...))[0] is _modules['conv']) and a ParameterList (its items are
    // _parameters['0'], ...) are reached where they are
    Ref r = Ref::steal(PyObject_GetItem(obj->obj.get(), idx->obj.get()));
    if (!r) return brk(f, "DV0010", "module indexing raised");
    SourcePtr src;
    for (const char* dict : {"_modules", "_parameters", "_buffers"}) {
      if (src || !obj->source) break;
      Ref members = Ref::steal(PyObject_GetAttrString(obj->obj.get(), dict));
      if (!members || !PyDict_Check(members.get())) {
        PyErr_Clear();
        continue;
      }
      PyObject* named = PyUnicode_Check(idx->obj.get()) ? PyDict_GetItem(members.get(), idx->obj.get()) : nullptr;
      if (named == r.get()) {  // ModuleDict["name"], ParameterDict["name"]
        src = Source::module_member(obj->source, dict, str_of(idx->obj.get()));
        break;
      }
      Py_ssize_t pos = 0;
      PyObject *k, *v;
      while (PyDict_Next(members.get(), &pos, &k, &v))
        if (v == r.get() && PyUnicode_Check(k)) {
          src = Source::module_member(obj->source, dict, str_of(k));
          break;
        }
    }
    out = wrap(r, src, f);
    if (!out) return brk(f, "DV0013", "unsupported module item");
    return std::nullopt;
  }
  bool handled = false;
  if (Status s = call_dunder(f, obj, "__getitem__", {idx}, out, handled)) return s;
  if (handled) return std::nullopt;
  if (obj->kind == VK::Instance && obj->contents) {  // a dict subclass's items; a missing key goes to __missing__
    static PyObject* missing_name = PyUnicode_InternFromString("__missing__");
    PyObject* missing = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(obj->obj.get()), missing_name);
    Status s = subscr(f, obj->contents, idx, out);
    if (s && s->exc && missing && PyErr_GivenExceptionMatches(s->exc.get(), PyExc_KeyError)) {
      if (!PyFunction_Check(missing)) return brk(f, "DV0017", "__missing__ of a " + std::string(reinterpret_cast<PyTypeObject*>(obj->obj.get())->tp_name) + " is not Python code");
      return call_python(f, Ref::borrow(missing), {obj, idx}, out);
    }
    return s;
  }
  if (obj->kind == VK::Object && obj->source && PyDict_Check(obj->obj.get()) && !PyDict_CheckExact(obj->obj.get()) &&
      _PyType_Lookup(Py_TYPE(obj->obj.get()), Ref::steal(PyUnicode_FromString("__getitem__")).get()) ==
          _PyType_Lookup(&PyDict_Type, Ref::steal(PyUnicode_FromString("__getitem__")).get())) {
    // counts["k"] of a dict subclass reached from the frame (a Counter): read from its storage,
    // guarded; a missing key goes to its Python __missing__
    std::vector<VPtr> a{idx};
    std::vector<std::pair<std::string, VPtr>> kw;
    Status s = outside_dict_read(f, obj, "__getitem__", a, kw, out);
    static PyObject* missing_name = PyUnicode_InternFromString("__missing__");
    PyObject* missing = _PyType_Lookup(Py_TYPE(obj->obj.get()), missing_name);
    if (s && s->exc && missing && PyErr_GivenExceptionMatches(s->exc.get(), PyExc_KeyError)) {
      if (!PyFunction_Check(missing)) return brk(f, "DV0017", "__missing__ of a " + std::string(Py_TYPE(obj->obj.get())->tp_name) + " is not Python code");
      return call_python(f, Ref::borrow(missing), {obj, idx}, out);
    }
    return s;
  }
  auto list_getitem_of = [](PyObject* x) {
    static PyObject* name = PyUnicode_InternFromString("__getitem__");
    return _PyType_Lookup(Py_TYPE(x), name) == _PyType_Lookup(&PyList_Type, name);
  };
  auto po = to_python(obj, false), pi = to_python(idx, false);
  if (po && pi) {
    Ref r = Ref::steal(PyObject_GetItem(po->get(), pi->get()));
    if (!r) return raise_current(f, "subscript");
    // An item of an object from outside (a mappingproxy, a container written in C) is read through
    // its source, so guarded: it may change between calls.
    PyObject* o = po->get();
    const bool outside = obj->kind == VK::Object && obj->source && idx->kind == VK::Const &&
                         (Py_IS_TYPE(o, &PyDictProxy_Type) || PyDict_Check(o) || PyList_CheckExact(o) || PyTuple_CheckExact(o) ||
                          (PyList_Check(o) && list_getitem_of(o)));  // (a list subclass indexed as a list) the guard reads these
    // Another container from outside (a collections.deque, an array.array): its items may change
    // between calls and no guard reads them, so the item is not a constant of the graph
    auto typing_object = [](PyObject* x) {  // typing.List, Optional[int], list[int]: fixed once made
      if (Py_IS_TYPE(x, &Py_GenericAliasType)) return true;
      Ref mod = Ref::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(x)), "__module__"));
      if (!mod) PyErr_Clear();
      return mod && PyUnicode_Check(mod.get()) && PyUnicode_CompareWithASCIIString(mod.get(), "typing") == 0;
    };
    const bool immutable = PyTuple_Check(o) || PyUnicode_Check(o) || PyBytes_Check(o) || PyRange_Check(o) ||
                           PyFrozenSet_Check(o) || PyType_Check(o) || typing_object(o);
    if (obj->kind == VK::Object && obj->source && !outside && !immutable)
      return brk(f, "DV0017", std::string("subscript of a ") + Py_TYPE(o)->tp_name + " object from outside: its items may change between calls",
                 "pass the item, or a list, to the compiled function");
    out = wrap(r, outside ? Source::item(obj->source, idx->obj) : nullptr, f);
    if (out) return std::nullopt;
  }
  return brk(f, "DV0017", std::string("subscript of a ") + vk_name(obj->kind));
}

// os._Environ, the class of os.environ.
static PyTypeObject* environ_type() {
  static PyTypeObject* tp = [] {
    Ref os = Ref::steal(PyImport_ImportModule("os"));
    Ref env = os ? Ref::steal(PyObject_GetAttrString(os.get(), "environ")) : Ref();
    if (!env) return PyErr_Clear(), static_cast<PyTypeObject*>(nullptr);
    Py_INCREF(Py_TYPE(env.get()));  // kept for the process
    return Py_TYPE(env.get());
  }();
  return tp;
}

// collections.ChainMap or a subclass of it.
static bool chain_map_class(PyTypeObject* tp) {
  static PyObject* cls = kept_attr("collections", "ChainMap");
  return cls && PyType_IsSubtype(tp, reinterpret_cast<PyTypeObject*>(cls));
}

// A class defined by a module of the standard library (sys.stdlib_module_names).
static bool stdlib_class(PyTypeObject* tp) {
  static PyObject* names = [] {
    PyObject* n = PySys_GetObject("stdlib_module_names");  // borrowed
    Py_XINCREF(n);
    return n;
  }();
  Ref mod = Ref::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(tp), "__module__"));
  if (!mod || !PyUnicode_Check(mod.get()) || !names) return PyErr_Clear(), false;
  std::string m = str_of(mod.get());
  Ref top = Ref::steal(PyUnicode_FromString(m.substr(0, m.find('.')).c_str()));
  const int r = top ? PySet_Contains(names, top.get()) : -1;
  if (r < 0) PyErr_Clear();
  return r == 1;
}

Translator::Status Translator::call_dunder(Frame& f, const VPtr& obj, const char* name, std::vector<VPtr> args, VPtr& out,
                                           bool& handled) {
  handled = false;
  if ((obj->kind != VK::Object && obj->kind != VK::Instance) || !obj->obj) return std::nullopt;
  PyTypeObject* tp = obj->kind == VK::Instance ? reinterpret_cast<PyTypeObject*>(obj->obj.get()) : Py_TYPE(obj->obj.get());
  if (!(tp->tp_flags & Py_TPFLAGS_HEAPTYPE)) return std::nullopt;  // builtin types: not Python code
  // typing.List[int] and the like: pure, evaluated as they are; os.environ's Python methods
  // (Mapping.__contains__ ...) are followed, guarded through what they read.
  // (collections.ChainMap too: its Python methods read its maps in order, as for a user's mapping)
  if (stdlib_class(tp) && tp != environ_type() && !chain_map_class(tp)) return std::nullopt;
  Ref nm = Ref::steal(PyUnicode_FromString(name));
  PyObject* fn = _PyType_Lookup(tp, nm.get());
  if (!fn || !PyFunction_Check(fn)) return std::nullopt;
  handled = true;
  VPtr mv = bound_method(obj, Ref::borrow(fn), name);
  if (Status s = call(f, mv, std::move(args), {}, out)) return s;
  return read_result(f, out);
}

// What an inlined function returned, for C++ to read (len() of __len__'s answer, a sort key): a value
// not read yet (an attribute of an object from the frame it returned, VK::Lazy) is read now.
Translator::Status Translator::read_result(Frame& f, const VPtr& out) {
  if (out && out->kind == VK::Lazy) return realize_value(f, out);
  return std::nullopt;
}

Translator::Status Translator::truth(Frame& f, VPtr v, bool& out) {
  return ops(v->kind).truth(*this, f, v, out);
}

Translator::Status Translator::pull(Frame& f, const VPtr& it, size_t want) {
  if (it->kind != VK::Iter || !it->flag) return std::nullopt;  // not lazy: every item is there
  if (want == SIZE_MAX && endless_iter(*it))
    return brk(f, "DV0014", "an endless iterator (itertools." + it->name + ") taken to its end");
  while (it->flag && it->items.size() < want) {
    if (it->items.size() > 100000) return brk(f, "DV0014", "iterable too long to unroll");
    if (it->frame) {
      if (Status s = resume_generator(f, it)) return s;
      continue;
    }
    if (it->name == "list_iterator") {  // iter(lst): lst[i] for the next i, of the list as it is now (as CPython's)
      const VPtr& lst = it->self;
      if (it->items.size() < lst->items.size()) it->items.push_back(lst->items[it->items.size()]);
      else it->flag = false;  // ended: it stays ended though the list grows later
      continue;
    }
    if (it->name == "user_iterator") {  // an iterator object of a Python class: its __next__, inlined
      PyObject* next_fn = user_next(it->self);
      if (!next_fn) return brk(f, "DV0016", "an iterator whose __next__ is not Python code");
      VPtr item;
      Status s = call_python(f, Ref::borrow(next_fn), {it->self}, item);
      if (s && s->exc && PyErr_GivenExceptionMatches(s->exc.get(), PyExc_StopIteration)) {
        it->flag = false;  // its end (the StopIteration is Python's signal, not an error)
        return std::nullopt;
      }
      if (s) return s;
      it->items.push_back(item);
      continue;
    }
    if (it->name != "map" && it->name != "filter") {  // the lazy itertools
      if (Status s = pull_itertool(f, it)) return s;
      continue;
    }
    std::vector<VPtr> call_args;
    for (const VPtr& src : it->cells) {
      if (Status s = pull(f, src, src->pos + 1)) return s;
      if (src->pos >= src->items.size()) {  // a source ran out: so did this iterator
        it->flag = false;
        return std::nullopt;
      }
      call_args.push_back(src->items[src->pos++]);
    }
    if (it->name == "filter") {
      VPtr keep = call_args[0], res = keep;
      const bool none = it->self->kind == VK::Const && it->self->obj.get() == Py_None;
      if (!none)
        if (Status s = call(f, it->self, call_args, {}, res)) return s;
      bool yes = false;
      if (Status s = truth(f, res, yes)) return s;
      if (yes) it->items.push_back(keep);
      continue;
    }
    VPtr res;
    if (Status s = call(f, it->self, std::move(call_args), {}, res)) return s;
    it->items.push_back(res);
  }
  return std::nullopt;
}

// Runs a generator made in the trace up to its next yield (an item appended) or its end (flag
// cleared; its frame's result is what it returned). The step that takes the item is reported first.
Translator::Status Translator::resume_generator(Frame& f, const VPtr& it, VPtr sent, bool raises) {
  Frame& g = *it->frame;
  if (g.resumed && !(sent && sent->kind == VK::Null)) g.stack.push_back(sent ? sent : constant(Ref::borrow(Py_None)));  // what next() sends
  g.depth = f.depth + 1;
  if (obs_) {
    if (!f.reported) report_step(f);  // the taking step, before the generator's steps
    if (!g.resumed && !announce_code(obs_, g.facts)) PyErr_Clear();
    // Each resume enters its frame again (its caller's steps came between, maybe at another depth):
    // the next step is a frame start, with all its locals.
    g.started = false;
    g.reported_locals.clear();
  }
  g.resumed = true;
  frames_.push_back(&g);
  const int caller_step = cur_step_;
  Status s = run_frame(g);
  cur_step_ = caller_step;
  frames_.pop_back();
  if (s) {
    // An exception of the generator's body is raised where it is iterated: not caught in the trace
    // (a raise inside a generator ends it, and a StopIteration becomes a RuntimeError): a break.
    // Out of gen.throw() (a with-block's exception re-raised by a @contextmanager's finally), it
    // goes on, and the generator is done.
    if (raises && s->exc && !PyErr_GivenExceptionMatches(s->exc.get(), PyExc_StopIteration)) {
      it->flag = false;
      return s;
    }
    s->exc = Ref();
    return s;
  }
  if (g.suspended) {
    g.suspended = false;
    it->items.push_back(std::move(g.yielded));
    g.yielded = nullptr;
  } else {
    it->flag = false;  // returned: g.result is its value (what `yield from` gives)
  }
  return std::nullopt;
}

// gen.send(value) and gen.throw(exc) (contextlib's @contextmanager __exit__ throws the with-block's
// exception into the generator): the generator runs on from its yield with the value sent, or with
// the exception raised there (caught by its own handlers, or raised out of the call, ending it);
// the value it yields next is the result, and StopIteration when it returns.
Translator::Status Translator::generator_send(Frame& f, const VPtr& it, bool thrown, const VPtr& value, VPtr& out) {
  Frame& g = *it->frame;
  const std::string what = thrown ? "generator.throw" : "generator.send";
  if (it->pos < it->items.size()) return brk(f, "DV0016", what + " of a generator with items taken ahead");
  Ref exc;
  if (thrown) {
    if (value->kind != VK::Object || !value->obj) return brk(f, "DV0018", what + " of a " + vk_name(value->kind));
    exc = value->obj;
    if (PyExceptionClass_Check(exc.get())) exc = Ref::steal(PyObject_CallNoArgs(exc.get()));
    if (!exc || !PyExceptionInstance_Check(exc.get())) return PyErr_Clear(), brk(f, "DV0018", what + " of a value that is not an exception");
  }
  auto stop = [&] { return raise(f, Ref::steal(PyObject_CallNoArgs(PyExc_StopIteration))); };
  if (!it->flag) return thrown ? raise(f, exc) : stop();  // ended
  if (!g.resumed) {
    if (thrown) {  // not started: the exception is raised at once, and the generator is done
      it->flag = false;
      return raise(f, exc);
    }
    if (!(value->kind == VK::Const && value->obj.get() == Py_None))
      return raise_new(f, PyExc_TypeError, "can't send non-None value to a just-started generator");
  }
  VPtr sent = value;
  if (thrown) {
    const bc::Instr& at = g.facts->decoded.instrs[static_cast<size_t>(g.ip - 1)];  // its YIELD_VALUE
    if (!catch_in(g, at, exc)) {
      it->flag = false;
      return raise(f, exc);
    }
    sent = make(VK::Null);  // on at the handler: nothing is sent
  }
  const size_t before = it->items.size();
  Status s = resume_generator(f, it, sent, thrown);
  if (s) return s;
  if (it->items.size() > before) {
    out = it->items[before];
    it->pos = it->items.size();
    return std::nullopt;
  }
  it->pos = it->items.size();
  return stop();  // returned (its value is not kept: contextlib does not read it)
}

Translator::Status Translator::iterate(Frame& f, VPtr v, VPtr& out, bool materialize) {
  return ops(v->kind).iterate(*this, f, v, out, materialize);
}

Translator::Status Translator::delete_attr(Frame& f, const VPtr& owner, const std::string& name) {
  if (owner->kind == VK::Instance) return instance_delattr(f, owner, name);  // made in the trace
  PyObject* o = owner->obj.get();
  if ((owner->kind == VK::Object || owner->kind == VK::NNModule) && o && owner->source && !PyType_Check(o) && !PyModule_Check(o) &&
      (Py_TYPE(o)->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
    // del obj.name of an object from outside: an entry of its __dict__, deleted after the graph
    // (replayed as the assignments are, in order), as object.__delattr__ and nn.Module's do it
    PyTypeObject* tp = Py_TYPE(o);
    const bool module = owner->kind == VK::NNModule;
    static PyObject* delattr_name = PyUnicode_InternFromString("__delattr__");
    static PyObject* module_delattr = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(py().nn_Module.get()), delattr_name);
    const std::string what = "del of attribute '" + name + "' of a " + tp->tp_name;
    if (_PyType_Lookup(tp, delattr_name) != (module ? module_delattr : _PyType_Lookup(&PyBaseObject_Type, delattr_name)))
      return brk(f, "DV0008", what + ", which defines __delattr__");
    Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
    PyObject* descr = _PyType_Lookup(tp, nm.get());
    if (descr && Py_TYPE(descr)->tp_descr_set) return brk(f, "DV0008", what + ": a property or descriptor");
    PyObject** dictptr = _PyObject_GetDictPtr(o);
    if (!dictptr || !*dictptr || dict_read_objects.count(o)) return brk(f, "DV0008", what + " whose __dict__ the trace reads");
    if (module)
      for (const char* member : {"_parameters", "_buffers", "_modules"}) {
        PyObject* d = PyDict_GetItemString(*dictptr, member);
        if (!d || !PyDict_Check(d)) continue;
        // (the trace's own entries where it changed that dict: a buffer it registered, a child it appended)
        const Value* changed = changed_member_dict(*this, d);
        const bool held = changed ? find_key(*changed, nm.get()) >= 0 : PyDict_GetItemWithError(d, nm.get()) != nullptr;
        PyErr_Clear();
        if (!held) continue;
        // nn.Module.__delattr__: del self._parameters[name] (or _buffers, _modules), done on the
        // trace's view of that dict, written back after the graph; reads after it miss the name
        PyObject* non_persistent = PyDict_GetItemString(*dictptr, "_non_persistent_buffers_set");
        const bool marked = std::strcmp(member, "_buffers") == 0 && non_persistent && PySet_Check(non_persistent) &&
                            PySet_Contains(non_persistent, nm.get()) == 1;
        if (marked || !no_module_registration_hooks() || !owner->source)
          return brk(f, "DV0008", what + ": a " + (marked ? "non-persistent buffer" : "parameter, buffer or submodule"),
                     "dynview deletes parameters and persistent buffers of modules from the frame");
        VPtr members, popped;
        if (Status s = getattr(f, owner, member, members)) return s;
        if (members->kind != VK::Dict) return brk(f, "DV0008", what + ": its " + member + " is not read as a dict");
        if (Status s = realize_lazy(f, members)) return s;
        std::vector<VPtr> key{constant(nm)};
        KwArgs no_kw;
        if (Status s = dict_call(*this, f, members, "pop", key, no_kw, popped)) return s;
        return std::nullopt;
      }
    auto& writes = output.side_effects.attr_writes;
    bool exists = false, known = false;
    for (auto w = writes.rbegin(); w != writes.rend() && !known; ++w)
      if (w->owner->obj.get() == o && w->name == name) known = true, exists = w->value != nullptr;
    if (!known) {  // as it is in the object's __dict__: guarded so
      exists = PyDict_GetItemWithError(*dictptr, nm.get()) != nullptr;
      PyErr_Clear();
      SourcePtr dict_src = Source::attr(owner->source, "__dict__");
      if (Guard* g = add_guard(GuardKind::DICT_CONTAINS, dict_src, nm, f,
                               "'" + name + "' " + (exists ? "in " : "not in ") + dict_src->text()))
        g->length = exists ? 1 : 0;
    }
    if (!exists) return raise_new(f, PyExc_AttributeError, "'" + std::string(tp->tp_name) + "' object has no attribute '" + name + "'");
    writes.push_back(SideEffects::AttrWrite{owner, name, nullptr});
    return std::nullopt;
  }
  return brk(f, "DV0008", std::string("del of attribute '") + name + "' of a " +
                              (owner->obj && owner->kind != VK::Function ? Py_TYPE(owner->obj.get())->tp_name : vk_name(owner->kind)),
             "dynview follows del of attributes of objects made inside the compiled function");
}

Translator::Status Translator::store_attr(Frame& f, const VPtr& owner, const std::string& name, const VPtr& value) {
  return ops(owner->kind).setattr(*this, f, owner, name, value);
}

// object.__setattr__ (or nn.Module's) on an object from outside: recorded, replayed after the graph.
Translator::Status Translator::object_store_attr(Frame& f, const VPtr& owner, const std::string& name, const VPtr& value) {
  return object_setattr(*this, f, owner, name, value);
}

// object.__setattr__ / object.__getattribute__ (the slot wrappers), by name.
PyObject* object_slot(const std::string& name) {
  static PyObject* getattribute = PyObject_GetAttrString(reinterpret_cast<PyObject*>(&PyBaseObject_Type), "__getattribute__");
  if (name == "__setattr__") return py().object_setattr.get();
  return name == "__getattribute__" ? getattribute : nullptr;
}

// What super() finds for `name`: the first class after __thisclass__ in the MRO of __self_class__
// that defines it (borrowed), or null.
PyObject* super_lookup(PyObject* sup, const std::string& name) {
  Ref this_class = Ref::steal(PyObject_GetAttrString(sup, "__thisclass__"));
  Ref self_class = Ref::steal(PyObject_GetAttrString(sup, "__self_class__"));
  if (!this_class || !self_class || !PyType_Check(self_class.get())) return PyErr_Clear(), nullptr;
  PyObject* mro = reinterpret_cast<PyTypeObject*>(self_class.get())->tp_mro;
  if (!mro || !PyTuple_Check(mro)) return nullptr;
  Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
  bool after = false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
    PyObject* cls = PyTuple_GET_ITEM(mro, i);
    if (!after) {
      after = cls == this_class.get();
      continue;
    }
#if PY_VERSION_HEX >= 0x030C0000
    // 3.12+: a static builtin type's (object's) dict lives in the interpreter, not in tp_dict
    Ref d = Ref::steal(PyType_GetDict(reinterpret_cast<PyTypeObject*>(cls)));
    if (PyObject* v = d ? PyDict_GetItemWithError(d.get(), nm.get()) : nullptr) return v;  // borrowed: the class keeps it
#else
    PyObject* d = reinterpret_cast<PyTypeObject*>(cls)->tp_dict;
    if (PyObject* v = d ? PyDict_GetItemWithError(d, nm.get()) : nullptr) return v;
#endif
  }
  PyErr_Clear();
  return nullptr;
}

// object.__setattr__(self, k, v) and object.__getattribute__(self, k) on an object from outside
// (reached through super() in its class's Python __setattr__): the plain assignment and read.
Translator::Status Translator::outside_object_builtin(Frame& f, PyObject* descr, const VPtr& self, std::vector<VPtr>& args,
                                                      std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled) {
  handled = descr == object_slot("__setattr__") || descr == object_slot("__getattribute__");
  if (!handled) return std::nullopt;
  const bool set = descr == object_slot("__setattr__");
  if (args.size() != (set ? 2u : 1u) || !kwargs.empty() || args[0]->kind != VK::Const || !PyUnicode_Check(args[0]->obj.get()))
    return brk(f, "DV0008", std::string("object.") + (set ? "__setattr__" : "__getattribute__") + " on a " +
                                Py_TYPE(self->obj.get())->tp_name + " with a computed name");
  const std::string name = str_of(args[0]->obj.get());
  if (!set) {
    generic_getattr_ = true;  // object's own lookup: not the class's __getattribute__ again
    return getattr(f, self, name, out);
  }
  out = constant(Ref::borrow(Py_None));
  return object_store_attr(f, self, name, args[1]);
}

VPtr Translator::bound_method(VPtr self, Ref fn, std::string name) {
  VPtr mv = make(VK::Method);
  mv->self = std::move(self);
  mv->obj = std::move(fn);
  mv->name = std::move(name);
  return mv;
}

// The getter of a property whose fget is a Python function (inlined by the trace), or null.
Ref python_getter(PyObject* descr) {
  if (!descr || !PyObject_TypeCheck(descr, &PyProperty_Type)) return {};
  Ref getter = Ref::steal(PyObject_GetAttrString(descr, "fget"));
  if (!getter) PyErr_Clear();
  return getter && PyFunction_Check(getter.get()) ? getter : Ref();
}

Translator::Status Translator::call_python(Frame& f, Ref fn, std::vector<VPtr> args, VPtr& out, bool read) {
  VPtr fv = make(VK::Function);
  fv->obj = std::move(fn);
  if (Status s = call(f, fv, std::move(args), {}, out)) return s;
  return read ? read_result(f, out) : std::nullopt;
}

Translator::Status Translator::getattr(Frame& f, VPtr obj, const std::string& name, VPtr& out) {
  // (a value not read yet, reached by C++ rather than by LOAD_ATTR, which reads it first: an
  // attrgetter's dotted path through an attribute that is a string)
  if (obj->kind == VK::Lazy)
    if (Status s = realize_value(f, obj)) return s;
  const bool generic = generic_getattr_;
  generic_getattr_ = false;
  const bool outside_instance = (obj->kind == VK::NNModule || obj->kind == VK::Object) && obj->obj &&
                                !PyType_Check(obj->obj.get()) && !PyModule_Check(obj->obj.get());
  if (obj->kind == VK::NNModule && !functional_overrides_.empty()) {  // inside functional_call (functional_call.cpp)
    if (functional_override(obj, name, out)) return std::nullopt;
    bool handled = false;
    if (Status s = functional_member(f, obj, name, out, handled)) return s;
    if (handled) return std::nullopt;
  }
  if (obj->kind == VK::NNModule && obj->obj && !made_module_attrs.empty()) {  // set by the trace on a module it built
    auto it = made_module_attrs.find(obj->obj.get());
    if (it != made_module_attrs.end())
      for (auto w = it->second.rbegin(); w != it->second.rend(); ++w)
        if (w->first == name) {
          out = w->second;
          return std::nullopt;
        }
  }
  if (outside_instance && !output.side_effects.attr_writes.empty()) {
    bool written = false;
    for (auto w = output.side_effects.attr_writes.rbegin(); w != output.side_effects.attr_writes.rend(); ++w) {  // the latest assignment wins
      if (w->owner->obj.get() != obj->obj.get()) continue;
      written = true;
      if (w->name == name) {
        if (!w->value) {  // deleted by the trace: what the class has, or AttributeError
          Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
          if (_PyType_Lookup(Py_TYPE(obj->obj.get()), nm.get()))
            return brk(f, "DV0005", "attribute " + name + " of a " + Py_TYPE(obj->obj.get())->tp_name + " object after the trace deleted it");
          return raise_new(f, PyExc_AttributeError, "'" + std::string(Py_TYPE(obj->obj.get())->tp_name) + "' object has no attribute '" + name + "'");
        }
        out = w->value;
        return std::nullopt;
      }
    }
    // An object written in the trace whose class has a Python __getattribute__ (a config's, which
    // maps aliases): inlined, so that an alias reads what was written under its real name.
    static PyObject* getattribute_name = PyUnicode_InternFromString("__getattribute__");
    PyObject* ga = written && obj->kind == VK::Object && !generic && !PyType_Check(obj->obj.get())
                       ? _PyType_Lookup(Py_TYPE(obj->obj.get()), getattribute_name) : nullptr;
    if (ga && PyFunction_Check(ga)) return call_python(f, Ref::borrow(ga), {obj, constant_steal(PyUnicode_FromString(name.c_str()))}, out);
  }
  if (!output.side_effects.attr_writes.empty() && obj->obj && name != "__dict__") {
    // A class attribute the trace wrote (type(self).calls += 1): what it wrote, read through the
    // class, a subclass, or an object of it that has no such attribute of its own
    PyObject* o = obj->obj.get();
    PyTypeObject* tp = nullptr;
    if ((obj->kind == VK::Object || obj->kind == VK::NNModule) && PyType_Check(o)) tp = reinterpret_cast<PyTypeObject*>(o);
    else if (outside_instance) tp = Py_TYPE(o);
    else if (obj->kind == VK::Instance) tp = reinterpret_cast<PyTypeObject*>(o);  // (an Instance holds its class)
    Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
    PyObject** own = outside_instance ? _PyObject_GetDictPtr(o) : nullptr;
    bool own_attr = own && *own && PyDict_GetItemWithError(*own, nm.get());
    if (obj->kind == VK::Instance && obj->attrs) own_attr = find_key(*obj->attrs, nm.get()) >= 0;
    PyErr_Clear();
    PyObject* mro = tp && !own_attr ? tp->tp_mro : nullptr;
    for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); ++i) {
      PyObject* c = PyTuple_GET_ITEM(mro, i);
      const SideEffects::AttrWrite* hit = nullptr;
      for (auto w = output.side_effects.attr_writes.rbegin(); w != output.side_effects.attr_writes.rend() && !hit; ++w)
        if (w->owner->obj.get() == c && w->name == name) hit = &*w;
      if (hit) {
        out = hit->value;
        return std::nullopt;
      }
      PyObject* d = reinterpret_cast<PyTypeObject*>(c)->tp_dict;
      if (d && PyDict_GetItemWithError(d, nm.get())) break;  // the class that holds it was not written
      PyErr_Clear();
    }
  }
  if (outside_instance && name != "__dict__") {
    // An object whose __dict__ the trace read and changed: its instance attributes are that dict's
    // entries (a data descriptor of its class comes first; a key the trace did not see breaks).
    auto it = dict_read_objects.find(obj->obj.get());
    const auto& changed = output.side_effects.mutated_dicts;
    if (it != dict_read_objects.end() && std::find(changed.begin(), changed.end(), it->second) != changed.end()) {
      const Value& d = *it->second;
      Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
      PyObject* descr = _PyType_Lookup(Py_TYPE(obj->obj.get()), nm.get());
      static PyObject* get_name = PyUnicode_InternFromString("__get__");
      PyObject* get = descr && Py_TYPE(descr)->tp_descr_set ? _PyType_Lookup(Py_TYPE(descr), get_name) : nullptr;
      const bool python_descriptor =  // inlined by object_getattr, reading what the trace wrote
          obj->kind == VK::Object && get && (PyFunction_Check(get) || python_getter(descr));
      if (!(descr && Py_TYPE(descr)->tp_descr_set))
        for (size_t i = 0; i < d.keys.size(); ++i)
          if (PyUnicode_Check(d.keys[i].get()) && str_of(d.keys[i].get()) == name) {
            out = d.items[i];
            return std::nullopt;
          }
      if (!python_descriptor)
        return brk(f, "DV0005", "attribute " + name + " of a " + Py_TYPE(obj->obj.get())->tp_name + " object whose __dict__ the trace changed",
                   "assign the attribute itself (setattr) instead of writing its __dict__");
    }
  }
  if (name == "__class__" && (obj->kind == VK::Method || obj->kind == VK::Function || obj->kind == VK::Iter ||
                              obj->kind == VK::DictView || obj->kind == VK::Dict || obj->kind == VK::Partial)) {
    // x.__class__ of a value whose class cannot say otherwise (no Python class of the program's):
    // type(x), where the value's kind knows it (a builtin method's type varies: not known)
    if (PyObject* tp = ops(obj->kind).python_type(*this, obj)) {
      out = make(VK::Object);
      out->obj = Ref::borrow(tp);
      return std::nullopt;
    }
  }
  if (Status s = ops(obj->kind).getattr(*this, f, obj, name, out)) return s;
  if (outside_instance && obj->kind == VK::Object && name == "__dict__" && out && out->kind == VK::Dict &&
      !dict_read_objects.count(obj->obj.get())) {
    // The real __dict__ of a plain object: the trace's assignments to it so far are its entries
    // too, and later ones are written through (object_setattr), so that `"c" in o.__dict__` after
    // `o.c = 7` and a dict taken before `o.c = 7` both see it, as in eager.
    dict_read_objects.emplace(obj->obj.get(), out);
    for (const auto& w : output.side_effects.attr_writes)
      if (w.owner->obj.get() == obj->obj.get())
        if (Status s = write_through_dict(f, obj->obj.get(), w.name, w.value)) return s;
  }
  return std::nullopt;
}

Translator::Status Translator::write_through_dict(Frame& f, PyObject* o, const std::string& name, const VPtr& value) {
  auto it = dict_read_objects.find(o);
  if (it == dict_read_objects.end()) return std::nullopt;
  const VPtr& d = it->second;
  if (d->lazy && !builder.realize(d, f))  // written: all of it, as a dict written by the code is
    return brk(f, "DV0005", "the __dict__ of a " + std::string(Py_TYPE(o)->tp_name) + " object cannot be traced");
  if (d->source) output.side_effects.note_mutation(d);
  Ref key = Ref::steal(PyUnicode_FromString(name.c_str()));
  if (!value) dict_erase(*d, key.get());  // deleted (DELETE_ATTR)
  else dict_set(*d, key, value);
  return std::nullopt;
}

bool module_is_torch_mod(PyObject* mod) {
  const char* n = PyModule_GetName(mod);
  if (!n) {
    PyErr_Clear();
    return false;
  }
  return std::strncmp(n, "torch", 5) == 0 && (n[5] == 0 || n[5] == '.');
}

}  // namespace dv
