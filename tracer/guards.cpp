// GuardTree: accessors (local by index, closure cell, global, attribute through the instance
// dict, nn.Module member dicts, constant item) with leaf checks; leaves run before children.
#include "guards.h"
#include "frame_shim.h"
#include "translator.h"
#include <structmember.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <type_traits>
#include <unordered_map>

namespace dv {

const char* guard_kind_name(GuardKind k) {
  switch (k) {
    case GuardKind::TYPE_MATCH: return "TYPE_MATCH";
    case GuardKind::ID_MATCH: return "ID_MATCH";
    case GuardKind::EQUALS_MATCH: return "EQUALS_MATCH";
    case GuardKind::NONE_MATCH: return "NONE_MATCH";
    case GuardKind::LENGTH_CHECK: return "LENGTH_CHECK";
    case GuardKind::DICT_KEYS: return "DICT_KEYS";
    case GuardKind::TENSOR_MATCH: return "TENSOR_MATCH";
    case GuardKind::GLOBAL_STATE: return "GLOBAL_STATE";
    case GuardKind::SHAPE_ENV: return "SHAPE_ENV";
    case GuardKind::TENSOR_ALIASING: return "TENSOR_ALIASING";
    case GuardKind::DICT_CONTAINS: return "DICT_CONTAINS";
    case GuardKind::RANGE_ITERATOR_MATCH: return "RANGE_ITERATOR_MATCH";
  }
  return "?";
}

namespace {
// A dict key compared by identity whose class hashes in Python (an OpOverloadPacket hashes its op):
// the guards find it among a dict's keys by identity, which is what the dict's == finds, so that no
// Python runs in them. (A stored key of a class whose own __eq__ calls it equal is not seen.)
bool python_hashed_identity_key(PyObject* k) {
  return Py_TYPE(k)->tp_hash != PyBaseObject_Type.tp_hash && identity_compared(k);
}

PyObject* identity_entry(PyObject* d, PyObject* key) {  // d[key] found by identity (borrowed), or null
  Py_ssize_t pos = 0;
  PyObject *k, *v;
  while (PyDict_Next(d, &pos, &k, &v))
    if (k == key) return v;
  return nullptr;
}

// types.MappingProxyType (a class's __dict__): the mapping it shows (CPython's mappingproxyobject
// holds it as its one field in 3.11-3.13).
PyObject* proxied_mapping(PyObject* proxy) {
  struct MappingProxy {
    PyObject_HEAD
    PyObject* mapping;
  };
  return reinterpret_cast<MappingProxy*>(proxy)->mapping;
}

// Attributes a class computes in Python (a __getattribute__ or __getattr__ of its own: transformers'
// configs map num_hidden_layers to n_layer) have no slot to read: the guard asks the object, and the
// new references live until the check that made them ends (nested checks, from Python the lookup
// runs, keep to their own part: stack discipline).
std::vector<PyObject*>& computed_attrs() {
  thread_local std::vector<PyObject*> held;
  return held;
}
struct ComputedScope {
  size_t mark = computed_attrs().size();
  ~ComputedScope() {
    auto& h = computed_attrs();
    while (h.size() > mark) {
      PyObject* o = h.back();
      h.pop_back();
      Py_DECREF(o);
    }
  }
};
PyObject* computed_attr(PyObject* parent, PyObject* name) {
  PyObject* v = PyObject_GetAttr(parent, name);
  if (!v) {
    PyErr_Clear();
    return nullptr;
  }
  computed_attrs().push_back(v);
  return v;
}
}  // namespace

// collections' _tuplegetter: the descriptor of a namedtuple's field (borrowed, kept).
static PyTypeObject* tuplegetter_type() {
  static PyTypeObject* tp = [] {
    Ref m = Ref::steal(PyImport_ImportModule("_collections"));
    PyObject* t = m ? PyObject_GetAttrString(m.get(), "_tuplegetter") : nullptr;  // kept
    PyErr_Clear();
    return t && PyType_Check(t) ? reinterpret_cast<PyTypeObject*>(t) : nullptr;
  }();
  return tp;
}

struct GuardTree::Node {
  const Source* source = nullptr;  // how to reach this node's object from its parent's
  Ref name;                        // interned attribute / global / member name
  Ref dict_name;                   // ModuleMember: "_parameters" etc.
  std::vector<const Guard*> leaves;
  std::vector<std::unique_ptr<Node>> children;
  int slot = -1;                   // SHAPE_ENV guards read this node's object

  // Borrowed reference to this node's object, or null (no error set) if it cannot be reached.
  PyObject* access(const FrameView& f, PyObject* parent) const {
    switch (source->kind) {
      case Source::Kind::Local: return f.fastlocals[source->index];
      case Source::Kind::Closure: {
        if (!f.closure || source->index >= PyTuple_GET_SIZE(f.closure)) return nullptr;
        return PyCell_GET(PyTuple_GET_ITEM(f.closure, source->index));
      }
      case Source::Kind::Global: {
        PyObject* v = PyDict_GetItemWithError(f.globals, name.get());
        if (!v && !PyErr_Occurred() && PyDict_Check(f.builtins)) v = PyDict_GetItemWithError(f.builtins, name.get());
        if (!v) PyErr_Clear();
        return v;
      }
      case Source::Kind::Attr: {
        if (!parent) return nullptr;
        // A class attribute: what the class and its bases hold (raw: a staticmethod is the
        // staticmethod object), as the trace guarded it.
        // A class's __dict__: its namespace itself (what the mappingproxy Cls.__dict__ shows).
        if (PyType_Check(parent) && source->name == "__dict__") return reinterpret_cast<PyTypeObject*>(parent)->tp_dict;
        if (PyType_Check(parent)) return _PyType_Lookup(reinterpret_cast<PyTypeObject*>(parent), name.get());
        // Descriptors whose value is owned by the parent, read without calling Python:
        // type(x) and a bound method's self / function (decorated functions' closures reach them).
        if (source->name == "__class__") return reinterpret_cast<PyObject*>(Py_TYPE(parent));
        if (source->name == "__dict__") {  // an object's own attributes (copy.deepcopy reads them)
          static PyObject* none_yet = PyDict_New();  // an object that has not made its __dict__: no attributes
          PyObject** dp = _PyObject_GetDictPtr(parent);
          return dp ? (*dp ? *dp : none_yet) : nullptr;
        }
        if (PyFunction_Check(parent) && source->name == "__code__") return PyFunction_GET_CODE(parent);
        if (PyMethod_Check(parent) && source->name == "__self__") return PyMethod_GET_SELF(parent);
        if (PyMethod_Check(parent) && source->name == "__func__") return PyMethod_GET_FUNCTION(parent);
        PyObject** dictptr = _PyObject_GetDictPtr(parent);
        if (dictptr && *dictptr) {
          PyObject* v = PyDict_GetItemWithError(*dictptr, name.get());
          if (v) return v;
          PyErr_Clear();
        }
        PyObject* d = _PyType_Lookup(Py_TYPE(parent), name.get());
        if (d && Py_IS_TYPE(d, &PyMemberDescr_Type)) {  // a __slots__ member: the value in its slot
          const PyMemberDef* m = reinterpret_cast<PyMemberDescrObject*>(d)->d_member;
          if (m->type == T_OBJECT_EX || m->type == T_OBJECT)
            return *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(parent) + m->offset);  // null: unset
          // a C member of another type (a compiled pattern's groups, a Py_ssize_t): the number it holds
          PyObject* v = PyMember_GetOne(reinterpret_cast<const char*>(parent), const_cast<PyMemberDef*>(m));
          if (!v) return PyErr_Clear(), nullptr;
          computed_attrs().push_back(v);
          return v;
        }
        if (d && Py_IS_TYPE(d, &PyGetSetDescr_Type)) {  // a C getter (a tensor's .grad): the value it gives
          const PyGetSetDef* gs = reinterpret_cast<PyGetSetDescrObject*>(d)->d_getset;
          PyObject* v = gs->get ? gs->get(parent, gs->closure) : nullptr;
          if (!v) return PyErr_Clear(), nullptr;
          computed_attrs().push_back(v);
          return v;
        }
        if (d && Py_TYPE(d) == tuplegetter_type() && PyTuple_Check(parent)) {  // a namedtuple's field: its item (C code)
          PyObject* v = Py_TYPE(d)->tp_descr_get(d, parent, reinterpret_cast<PyObject*>(Py_TYPE(parent)));
          if (!v) return PyErr_Clear(), nullptr;
          computed_attrs().push_back(v);
          return v;
        }
        if (!d && Py_TYPE(parent)->tp_getattro != PyObject_GenericGetAttr) return computed_attr(parent, name.get());
        return d;
      }
      case Source::Kind::ModuleMember: {
        if (!parent) return nullptr;
        PyObject** dictptr = _PyObject_GetDictPtr(parent);
        if (!dictptr || !*dictptr) return nullptr;
        PyObject* members = PyDict_GetItemWithError(*dictptr, dict_name.get());
        if (!members || !PyDict_Check(members)) {
          PyErr_Clear();
          return nullptr;
        }
        PyObject* v = PyDict_GetItemWithError(members, name.get());
        if (!v) PyErr_Clear();
        return v;
      }
      case Source::Kind::Held: return source->key.get();
      case Source::Kind::FnMode: return torch_function_mode_at(source->index);
      case Source::Kind::FreeCell:
        if (!f.closure || source->index >= PyTuple_GET_SIZE(f.closure)) return nullptr;
        return PyTuple_GET_ITEM(f.closure, source->index);
      case Source::Kind::TupleIterItem: {  // seq[index + k]: no Python runs
        if (!parent || !Py_IS_TYPE(parent, &PyTupleIter_Type)) return nullptr;
        Py_ssize_t at = 0;
        PyObject* seq = shim::tuple_iterator_state(parent, at);
        at += source->index;
        return seq && at < PyTuple_GET_SIZE(seq) ? PyTuple_GET_ITEM(seq, at) : nullptr;
      }
      case Source::Kind::DictValueAt: {  // in the dict's own order: an OrderedDict's linked order (C iterator)
        if (!parent || !PyDict_Check(parent) || source->index >= PyDict_GET_SIZE(parent)) return nullptr;
        if (PyODict_Check(parent)) {
          Ref it = Ref::steal(PyODict_Type.tp_iter(parent));
          Ref k;
          for (int i = 0; it && i <= source->index; ++i) k = Ref::steal(PyIter_Next(it.get()));
          PyObject* v = k ? PyDict_GetItemWithError(parent, k.get()) : nullptr;
          if (!v) PyErr_Clear();
          return v;
        }
        Py_ssize_t pos = 0;
        PyObject *k, *v = nullptr;
        for (int i = 0; i <= source->index; ++i)
          if (!PyDict_Next(parent, &pos, &k, &v)) return nullptr;
        return v;
      }
      case Source::Kind::RandomDraw:  // drawn by the transformed code: no guard reads one
        return nullptr;
      case Source::Kind::WeakRefCall:  // the referent (borrowed from the reference; None once it died)
        if (!parent || !PyWeakref_CheckRef(parent)) return nullptr;
        return PyWeakref_GET_OBJECT(parent);
      case Source::Kind::AsTensor: {  // a new tensor over the ndarray's memory, held until the check ends
        if (!parent || std::strcmp(Py_TYPE(parent)->tp_name, "numpy.ndarray") != 0) return nullptr;
        PyObject* t = PyObject_CallOneArg(source->key.get(), parent);
        if (!t) {
          PyErr_Clear();
          return nullptr;
        }
        computed_attrs().push_back(t);
        return t;
      }
      case Source::Kind::FnClosure: {
        if (!parent || !PyFunction_Check(parent)) return nullptr;
        PyObject* cl = PyFunction_GET_CLOSURE(parent);
        if (!cl || source->index >= PyTuple_GET_SIZE(cl)) return nullptr;
        return PyCell_GET(PyTuple_GET_ITEM(cl, source->index));
      }
      case Source::Kind::Item: {
        if (!parent) return nullptr;
        PyObject* key = source->key.get();
        // (a list subclass too -- the trace reads one by item only where its __getitem__ is list's --:
        // its storage; and torch.return_types, tuples of a builtin class, and namedtuples, whose
        // item access is tuple's)
        const bool builtin_tuple = PyTuple_Check(parent) && (!(Py_TYPE(parent)->tp_flags & Py_TPFLAGS_HEAPTYPE) ||
                                                             (Py_TYPE(parent)->tp_as_mapping &&
                                                              Py_TYPE(parent)->tp_as_mapping->mp_subscript == PyTuple_Type.tp_as_mapping->mp_subscript));
        if (PyLong_CheckExact(key) && (PyList_Check(parent) || builtin_tuple)) {
          Py_ssize_t i = PyLong_AsSsize_t(key);
          Py_ssize_t n = PyList_Check(parent) ? PyList_GET_SIZE(parent) : PyTuple_GET_SIZE(parent);
          if (i < 0) i += n;
          if (i < 0 || i >= n) return nullptr;
          return PyList_Check(parent) ? PyList_GET_ITEM(parent, i) : PyTuple_GET_ITEM(parent, i);
        }
        if (PyLong_CheckExact(key) && Py_TYPE(parent) == reinterpret_cast<PyTypeObject*>(deque_class())) {
          // a collections.deque's item (C: deque_item), kept with the other computed values
          const Py_ssize_t i = PyLong_AsSsize_t(key);
          if (i < 0 || i >= PyObject_Length(parent)) return PyErr_Clear(), nullptr;
          PyObject* v = PySequence_GetItem(parent, i);
          if (!v) return PyErr_Clear(), nullptr;
          computed_attrs().push_back(v);
          return v;
        }
        // types.MappingProxyType: the mapping it shows (CPython's mappingproxyobject holds it as
        // its one field in 3.11-3.13); a dict's storage is read below
        if (Py_IS_TYPE(parent, &PyDictProxy_Type)) parent = proxied_mapping(parent);
        if (PyDict_Check(parent)) {  // a dict subclass: its storage, as dict.get reads it
          if (python_hashed_identity_key(key)) return identity_entry(parent, key);
          PyObject* v = PyDict_GetItemWithError(parent, key);
          if (!v) PyErr_Clear();
          return v;
        }
        return nullptr;
      }
    }
    return nullptr;
  }
};

namespace {

bool leaf_ok(const Guard& g, PyObject* o) {
  switch (g.kind) {
    case GuardKind::TYPE_MATCH: return reinterpret_cast<PyObject*>(Py_TYPE(o)) == g.value.get();
    case GuardKind::ID_MATCH: return o == g.value.get();
    case GuardKind::NONE_MATCH: return o == Py_None;
    case GuardKind::EQUALS_MATCH: {
      if (o == g.value.get()) return true;
      if (Py_TYPE(o) != Py_TYPE(g.value.get())) return false;
      if (PyFloat_CheckExact(o) || std::strcmp(Py_TYPE(o)->tp_name, "numpy.float64") == 0) {
        // -0.0 == 0.0, but 1 / x, copysign and atan2 tell them apart. (A NaN matches a NaN of the
        // same sign: the capture took it as a constant, and NaN != NaN would send every call with
        // one to a new compile -- a NumPy float64 too, np.sqrt(-1.0)'s nan handed to a resume function.)
        const double a = PyFloat_AS_DOUBLE(o), b = PyFloat_AS_DOUBLE(g.value.get());
        return (a == b || (std::isnan(a) && std::isnan(b))) && std::signbit(a) == std::signbit(b);
      }
      int r = PyObject_RichCompareBool(o, g.value.get(), Py_EQ);
      if (r < 0) PyErr_Clear();
      return r == 1;
    }
    case GuardKind::LENGTH_CHECK: {
      Py_ssize_t n = PyList_Check(o) ? PyList_GET_SIZE(o) : PyTuple_Check(o) ? PyTuple_GET_SIZE(o)
                     : PyDict_Check(o) ? PyDict_GET_SIZE(o)
                     : Py_IS_TYPE(o, &PyTupleIter_Type) ? shim::tuple_iterator_remaining(o)  // the items it has yet to give
                     : Py_TYPE(o) == reinterpret_cast<PyTypeObject*>(deque_class()) ? PyObject_Length(o)  // (C: deque_len)
                                                         : -1;
      return n == g.length;
    }
    case GuardKind::DICT_KEYS: {
      if (!PyDict_Check(o)) return false;
      PyObject* keys = g.value.get();
      if (PyDict_GET_SIZE(o) != PyTuple_GET_SIZE(keys)) return false;
      auto same_key = [](PyObject* k, PyObject* want) {
        if (k == want) return true;
        if (is_tensor(want) || is_tensor(k)) return false;  // a tensor key is that tensor (hashed by identity)
        const int r = PyObject_RichCompareBool(k, want, Py_EQ);
        if (r < 0) PyErr_Clear();
        return r == 1;
      };
      if (PyODict_Check(o)) {
        // An OrderedDict's order is its own (move_to_end changes it, not the storage's): its
        // iterator's order, OrderedDict's own (a subclass's __iter__ is not asked: no Python runs)
        Ref it = Ref::steal(PyODict_Type.tp_iter(o));
        if (!it) return PyErr_Clear(), false;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(keys); ++j) {
          Ref k = Ref::steal(PyIter_Next(it.get()));
          if (!k) return PyErr_Clear(), false;
          if (!same_key(k.get(), PyTuple_GET_ITEM(keys, j))) return false;
        }
        return true;
      }
      Py_ssize_t pos = 0, i = 0;
      PyObject *k, *v;
      while (PyDict_Next(o, &pos, &k, &v))
        if (!same_key(k, PyTuple_GET_ITEM(keys, i++))) return false;
      return true;
    }
    case GuardKind::RANGE_ITERATOR_MATCH: {
      if (!Py_IS_TYPE(o, &PyRangeIter_Type)) return false;
      long next = 0, step = 0, remaining = 0;
      shim::range_iterator_state(o, next, step, remaining);
      PyObject* want = g.value.get();
      return PyLong_AsLong(PyTuple_GET_ITEM(want, 0)) == next && PyLong_AsLong(PyTuple_GET_ITEM(want, 1)) == step &&
             PyLong_AsLong(PyTuple_GET_ITEM(want, 2)) == remaining;
    }
    case GuardKind::DICT_CONTAINS: {
      if (Py_IS_TYPE(o, &PyDictProxy_Type)) o = proxied_mapping(o);  // `"x" in Cls.__dict__`
      if (!PyDict_Check(o)) return false;
      if (python_hashed_identity_key(g.value.get())) return (identity_entry(o, g.value.get()) != nullptr) == (g.length == 1);
      const int r = PyDict_Contains(o, g.value.get());
      if (r < 0) return PyErr_Clear(), false;
      return r == g.length;
    }
    case GuardKind::TENSOR_MATCH: return tensor_matches(g.tensor, o);
    case GuardKind::GLOBAL_STATE: return global_state_matches(g.state);
    case GuardKind::SHAPE_ENV: case GuardKind::TENSOR_ALIASING: return true;  // after the tree (relation_ok)
  }
  return false;
}

int64_t floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// A float-mode program (SO_FMODE first: a guard on a float input) over doubles, each operation as
// Python's float arithmetic does it. False when a value cannot be read or the program is malformed.
// (NaN compares false, so `a == a` is the not-NaN guard.)
// The values a SHAPE_ENV guard's refs read: sizes, strides and ints as int64 (a float's ref fails),
// or, for a float-mode program, every one as a double. False when one cannot be read.
template <typename T>
bool read_refs(const Guard& g, const std::vector<int>& slot_of, PyObject* const* slots, T* vals) {
  if (g.refs.size() > 16) return false;
  for (size_t i = 0; i < g.refs.size(); ++i) {
    PyObject* o = slots[slot_of[i]];
    if (!o) return false;
    const SymRef& r = g.refs[i];
    int64_t v = 0;
    if (r.kind == 5) {
      double d = 0;
      if (!std::is_same_v<T, double> || !tensor_item_double(o, d)) return false;
      vals[i] = static_cast<T>(d);
      continue;
    }
    if (r.kind == 3) {
      if (!std::is_same_v<T, double> || !PyFloat_Check(o)) return false;  // (a float, or a numpy.float64: TYPE_MATCH says which)
      vals[i] = static_cast<T>(PyFloat_AS_DOUBLE(o));
      continue;
    }
    if (r.kind == 2) {
      int overflow = 0;
      if (PyLong_CheckExact(o)) {
        v = PyLong_AsLongLongAndOverflow(o, &overflow);
      } else {
        // a numpy.int64 (TYPE_MATCH says so): its value through its nb_index, NumPy's C
        PyNumberMethods* nb = Py_TYPE(o)->tp_as_number;
        if (!nb || !nb->nb_index || std::strcmp(Py_TYPE(o)->tp_name, "numpy.int64") != 0) return false;
        Ref i = Ref::steal(nb->nb_index(o));
        if (!i || !PyLong_CheckExact(i.get())) return PyErr_Clear(), false;
        v = PyLong_AsLongLongAndOverflow(i.get(), &overflow);
      }
      if (overflow) return false;
    } else if (r.kind == 4) {
      if (!tensor_item_value(o, v)) return false;
    } else if (!tensor_dim_value(o, r.kind == 1, r.dim, v)) {
      return false;
    }
    vals[i] = static_cast<T>(v);
  }
  return true;
}

// The comparisons, and/or and min/max, shared by the int64 and double programs (min and max as
// Python's: the first argument unless the second is strictly smaller / larger). False: not one.
template <typename T>
bool compare_op(ShapeOp op, T a, T b, T& r) {
  switch (op) {
    case SO_EQ: r = a == b; return true;
    case SO_NE: r = a != b; return true;
    case SO_LT: r = a < b; return true;
    case SO_LE: r = a <= b; return true;
    case SO_GT: r = a > b; return true;
    case SO_GE: r = a >= b; return true;
    case SO_AND: r = (a != T(0)) && (b != T(0)); return true;
    case SO_OR: r = (a != T(0)) || (b != T(0)); return true;
    case SO_MIN: r = b < a ? b : a; return true;
    case SO_MAX: r = b > a ? b : a; return true;
    default: return false;
  }
}

bool float_shape_ok(const Guard& g, const std::vector<int>& slot_of, PyObject* const* slots) {
  double vals[16], stack[32];
  if (!read_refs(g, slot_of, slots, vals)) return false;
  int sp = 0;
  for (size_t k = 1; k < g.program.size(); ++k) {
    const ShapeInstr& in = g.program[k];
    if (in.op == SO_CONST || in.op == SO_REF || in.op == SO_FCONST) {
      if (sp >= 32) return false;
      if (in.op == SO_REF && (in.arg < 0 || in.arg >= static_cast<int64_t>(g.refs.size()))) return false;
      stack[sp++] = in.op == SO_CONST ? static_cast<double>(in.arg)
                    : in.op == SO_REF ? vals[in.arg]
                                      : std::bit_cast<double>(in.arg);
      continue;
    }
    if (in.op == SO_NOT || in.op == SO_FTRUNC || in.op == SO_FFLOOR || in.op == SO_FCEIL || in.op == SO_FROUND ||
        in.op == SO_FSQRT) {
      if (sp < 1) return false;
      double& x = stack[sp - 1];
      if (in.op != SO_NOT && !std::isfinite(x)) return false;  // (int() of an infinity raises)
      switch (in.op) {
        case SO_NOT: x = x == 0.0 ? 1.0 : 0.0; break;
        case SO_FTRUNC: x = std::trunc(x); break;
        case SO_FFLOOR: x = std::floor(x); break;
        case SO_FCEIL: x = std::ceil(x); break;
        case SO_FROUND: x = std::nearbyint(x); break;  // the default rounding mode: half to even, as round()
        default: if (x < 0) return false; x = std::sqrt(x); break;
      }
      continue;
    }
    if (sp < 2) return false;
    const double b = stack[--sp], a = stack[sp - 1];
    double r = 0;
    switch (in.op) {
      case SO_ADD: r = a + b; break;
      case SO_MUL: r = a * b; break;
      case SO_FDIV: if (b == 0.0) return false; r = a / b; break;
      default: if (!compare_op(in.op, a, b, r)) return false;
    }
    stack[sp - 1] = r;
  }
  return sp == 1 && stack[0] != 0.0;
}

// Runs a SHAPE_ENV guard's program over the values its refs read. False when a value cannot be
// read (not a tensor / not an int) or the arithmetic is undefined (division by zero, overflow).
bool shape_ok(const Guard& g, const std::vector<int>& slot_of, PyObject* const* slots) {
  if (!g.program.empty() && g.program[0].op == SO_FMODE) return float_shape_ok(g, slot_of, slots);
  int64_t vals[16], stack[32];
  if (!read_refs(g, slot_of, slots, vals)) return false;
  int sp = 0;
  for (const ShapeInstr& in : g.program) {
    if (in.op == SO_CONST || in.op == SO_REF) {
      if (sp >= 32) return false;
      if (in.op == SO_REF && (in.arg < 0 || in.arg >= static_cast<int64_t>(g.refs.size()))) return false;
      stack[sp++] = in.op == SO_CONST ? in.arg : vals[in.arg];
      continue;
    }
    if (in.op == SO_NOT) {
      if (sp < 1) return false;
      stack[sp - 1] = !stack[sp - 1];
      continue;
    }
    if (in.op == SO_SQRT_TRUNC) {  // the libm pow CPython's float ** calls: the same value as the user code's
      if (sp < 1 || stack[sp - 1] < 0) return false;
      const double root = std::pow(static_cast<double>(stack[sp - 1]), 0.5);
      if (!(root < 9.2e18)) return false;
      stack[sp - 1] = static_cast<int64_t>(root);
      continue;
    }
    if (sp < 2) return false;
    const int64_t b = stack[--sp], a = stack[sp - 1];
    int64_t r = 0;
    switch (in.op) {
      case SO_ADD: if (__builtin_add_overflow(a, b, &r)) return false; break;
      case SO_MUL: if (__builtin_mul_overflow(a, b, &r)) return false; break;
      case SO_FLOORDIV: if (b == 0) return false; r = floordiv(a, b); break;
      case SO_MOD: if (b == 0) return false; r = a - floordiv(a, b) * b; break;
      case SO_TRUNCDIV: if (b == 0 || (a == INT64_MIN && b == -1)) return false; r = a / b; break;
      case SO_ROUNDDIV: {  // floor(a / b) and the remainder, rounded up past a half, to the even at a half
        if (b == 0 || (a == INT64_MIN && b == -1)) return false;
        const int64_t q = floordiv(a, b), rem = a - q * b;  // 0 <= rem / b < 1
        const __int128 twice = static_cast<__int128>(rem) * 2, bb = b;
        const bool above = b > 0 ? twice > bb : twice < bb, half = twice == bb;
        r = q + ((above || (half && (q & 1))) ? 1 : 0);
        break;
      }
      case SO_POW: {
        r = 1;
        for (int64_t k = 0; k < b; ++k)
          if (__builtin_mul_overflow(r, a, &r)) return false;
        break;
      }
      default: if (!compare_op(in.op, a, b, r)) return false;
    }
    stack[sp - 1] = r;
  }
  return sp == 1 && stack[0] != 0;
}

// TENSOR_ALIASING: the objects are one object, or pairwise distinct.
bool aliasing_ok(const Guard& g, const std::vector<int>& slot_of, PyObject* const* slots) {
  PyObject* small[16];
  std::vector<PyObject*> big;
  PyObject** objs = small;
  const size_t n = slot_of.size();
  if (n > 16) {
    big.resize(n);
    objs = big.data();
  }
  for (size_t i = 0; i < n; ++i) {
    objs[i] = slots[slot_of[i]];
    if (!objs[i]) return false;
  }
  if (g.length == 1) return std::all_of(objs, objs + n, [&](PyObject* o) { return o == objs[0]; });
  std::sort(objs, objs + n);
  return std::adjacent_find(objs, objs + n) == objs + n;
}

// The guards evaluated after the tree, over the objects it reached.
bool relation_ok(const Guard& g, const std::vector<int>& slot_of, PyObject* const* slots) {
  return g.kind == GuardKind::TENSOR_ALIASING ? aliasing_ok(g, slot_of, slots) : shape_ok(g, slot_of, slots);
}

std::string leaf_failure(const Guard& g, PyObject* o) {
  if (g.kind == GuardKind::TENSOR_MATCH) {
    std::string why = tensor_mismatch(g.tensor, o);
    return "tensor '" + g.source->text() + "' " + why;
  }
  if (g.kind == GuardKind::GLOBAL_STATE) return "GLOBAL_STATE: " + global_state_diff(g.state, global_state());
  return g.text;
}

}  // namespace

GuardTree::GuardTree(std::vector<Guard> guards) : guards_(std::move(guards)), root_(std::make_unique<Node>()) {
  // One node per distinct source text, created parent first.
  std::unordered_map<std::string, Node*> nodes;
  std::function<Node*(const SourcePtr&)> node_for = [&](const SourcePtr& s) -> Node* {
    std::string key = s->text() + "#" + s->dict_name + "#" + std::to_string(static_cast<int>(s->kind));
    auto it = nodes.find(key);
    if (it != nodes.end()) return it->second;
    Node* parent = s->base ? node_for(s->base) : root_.get();
    auto n = std::make_unique<Node>();
    n->source = s.get();
    if (!s->name.empty()) n->name = Ref::steal(PyUnicode_InternFromString(s->name.c_str()));
    if (!s->dict_name.empty()) n->dict_name = Ref::steal(PyUnicode_InternFromString(s->dict_name.c_str()));
    Node* raw = n.get();
    parent->children.push_back(std::move(n));
    nodes.emplace(key, raw);
    return raw;
  };
  for (const Guard& g : guards_) {
    if (g.kind == GuardKind::SHAPE_ENV || g.kind == GuardKind::TENSOR_ALIASING) {
      std::vector<int> slots;
      for (const SymRef& r : g.refs) {
        Node* n = node_for(r.source);
        if (n->slot < 0) n->slot = nslots_++;
        slots.push_back(n->slot);
      }
      shape_guards_.push_back(&g);
      shape_slots_.push_back(std::move(slots));
    } else if (!g.source) {
      root_->leaves.push_back(&g);
    } else {
      node_for(g.source)->leaves.push_back(&g);
    }
  }
}

GuardTree::~GuardTree() = default;

namespace {
template <class Node, class FrameView>
bool check_node(const Node& n, const FrameView& f, PyObject* obj, PyObject** slots) {
  if (n.slot >= 0) slots[n.slot] = obj;
  for (const Guard* g : n.leaves)
    if (!leaf_ok(*g, obj)) return false;
  for (const auto& c : n.children) {
    PyObject* child = c->access(f, obj);
    if (!child) return false;
    if (!check_node(*c, f, child, slots)) return false;
  }
  return true;
}

template <class Node, class FrameView>
void failures_node(const Node& n, const FrameView& f, PyObject* obj, std::vector<std::string>& out,
                   std::vector<const Guard*>& which, PyObject** slots) {
  if (n.slot >= 0) slots[n.slot] = obj;
  for (const Guard* g : n.leaves)
    if (!leaf_ok(*g, obj)) {
      out.push_back(leaf_failure(*g, obj));
      which.push_back(g);
    }
  for (const auto& c : n.children) {
    PyObject* child = c->access(f, obj);
    if (!child) {
      out.push_back(c->source->text() + " is missing");
      which.push_back(nullptr);
      continue;
    }
    failures_node(*c, f, child, out, which, slots);
  }
}
}  // namespace

bool GuardTree::check(const FrameView& f) const {
  ComputedScope scope;
  for (const Guard* g : root_->leaves)
    if (!leaf_ok(*g, nullptr)) return false;
  PyObject* small[16];
  std::vector<PyObject*> big;
  PyObject** slots = small;
  if (nslots_ > 16) {
    big.assign(static_cast<size_t>(nslots_), nullptr);
    slots = big.data();
  }
  for (int i = 0; i < nslots_ && i < 16; ++i) small[i] = nullptr;
  for (const auto& c : root_->children) {
    PyObject* child = c->access(f, nullptr);
    if (!child || !check_node(*c, f, child, slots)) return false;
  }
  for (size_t i = 0; i < shape_guards_.size(); ++i)
    if (!relation_ok(*shape_guards_[i], shape_slots_[i], slots)) return false;
  return true;
}

std::vector<std::string> GuardTree::failures(const FrameView& f, std::vector<int>* which) const {
  ComputedScope scope;
  std::vector<std::string> out;
  std::vector<const Guard*> failed;
  std::vector<PyObject*> slots(static_cast<size_t>(nslots_) + 1, nullptr);
  failures_node(*root_, f, nullptr, out, failed, slots.data());
  if (out.empty()) {  // the tree passed: the shape relations decide
    for (size_t i = 0; i < shape_guards_.size(); ++i)
      if (!relation_ok(*shape_guards_[i], shape_slots_[i], slots.data())) {
        out.push_back(shape_guards_[i]->text);
        failed.push_back(shape_guards_[i]);
      }
  }
  if (which)
    for (const Guard* g : failed) which->push_back(g ? static_cast<int>(g - guards_.data()) : -1);
  return out;
}

}  // namespace dv
