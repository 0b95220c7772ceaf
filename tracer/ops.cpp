// Operators, attributes, subscripts, truth, iteration and builtins over Values.
#include <functional>
#include <cstring>

#include "core/opcodes.h"
#include "pycache.h"
#include "tensor_match.h"
#include "translator.h"

namespace dv {
namespace {

// BINARY_OP oparg -> operator module function name (opcode._nb_ops order).
const char* kBinOpNames[] = {"add", "and_", "floordiv", "lshift", "matmul", "mul", "mod", "or_", "pow", "rshift",
                             "sub", "truediv", "xor", "iadd", "iand", "ifloordiv", "ilshift", "imatmul", "imul",
                             "imod", "ior", "ipow", "irshift", "isub", "itruediv", "ixor"};
const char* kCmpNames[] = {"lt", "le", "eq", "ne", "gt", "ge"};

// An operand whose class may define an operator in Python (made in the trace, or an object of a
// Python class), and the other operand not a tensor: Python tries the tensor's operator first.
bool user_operand(const VPtr& v) { return v->kind == VK::Instance; }

Ref op_fn(const char* name) { return Ref::steal(PyObject_GetAttrString(py().operator_mod.get(), name)); }

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
  if (a->kind == VK::NdArray || b->kind == VK::NdArray) {  // torch._numpy's operators (values/ndarray.cpp)
    bool handled = false;
    return ndarray_operator(f, kBinOpNames[nb], {a, b}, out, handled);
  }
  // `s += x` where s is not a tensor (s = 0; s += t * 2) is s = s + x: numbers have no in-place
  // forms (and the FX code of operator.iadd on a literal would not even parse).
  const bool inplace = nb >= 13;
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
    }
    VPtr ignored;
    if (Status s = call(f, bound_method(target, Ref(), nb == 0 ? "extend" : "update"), {b}, {}, ignored)) return s;
    out = target;
    return std::nullopt;
  }
  if (a->kind == VK::DictView || b->kind == VK::DictView) return view_set_operator(f, nb, a, b, out);
  if (is_deque(a) || is_deque(b)) return brk(f, "DV0018", std::string("operator.") + kBinOpNames[nb] + " on a collections.deque");
  if (a->kind == VK::Tensor || b->kind == VK::Tensor) {
    // In-place forms on tensors keep their meaning (x += y mutates x); FX records operator.iadd.
    return graph_call(f, op_fn(name), "", {a, b}, {}, out);
  }
  auto number = [](const VPtr& v) {
    return v->kind == VK::Sym || (v->kind == VK::Const && (PyLong_Check(v->obj.get()) || PyFloat_Check(v->obj.get())));
  };
  if ((a->kind == VK::Sym || b->kind == VK::Sym) && number(a) && number(b))
    return graph_call(f, op_fn(name), "", {a, b}, {}, out);  // symbolic arithmetic: a graph node
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
  if ((nb == 5 || nb == 18) && seq_a && b->kind == VK::Const && PyLong_CheckExact(b->obj.get())) {
    VPtr r = make(a->kind);
    long n = PyLong_AsLong(b->obj.get());
    for (long i = 0; i < n; ++i) r->items.insert(r->items.end(), a->items.begin(), a->items.end());
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
  if (a->kind == VK::NdArray || b->kind == VK::NdArray) {  // element-wise, as NumPy's
    bool handled = false;
    return ndarray_operator(f, kCmpNames[cmp], {a, b}, out, handled);
  }
  if (a->kind == VK::Tensor || b->kind == VK::Tensor) return graph_call(f, op_fn(kCmpNames[cmp]), "", {a, b}, {}, out);
  if ((a->kind == VK::Sym && (b->kind == VK::Sym || b->kind == VK::Const)) || (b->kind == VK::Sym && a->kind == VK::Const))
    return graph_call(f, op_fn(kCmpNames[cmp]), "", {a, b}, {}, out);  // a SymBool; branching on it adds a guard
  if (a->kind == VK::DictView || b->kind == VK::DictView) return view_compare(f, cmp, a, b, out);
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

Translator::Status Translator::subscr(Frame& f, VPtr obj, VPtr idx, VPtr& out) {
  if (obj->kind == VK::Tensor) return graph_call(f, py().getitem, "", {obj, idx}, {}, out);
  if (obj->kind == VK::NdArray) {  // nd[i], nd[a:b, None], nd[mask]: torch._numpy's indexing
    bool handled = false;
    return ndarray_operator(f, "getitem", {obj, idx}, out, handled);
  }
  if ((idx->kind == VK::Sym || idx->kind == VK::Slice) && obj->kind != VK::Tensor) {  // a Python index: specialise it
    auto r = to_python(idx, false);
    if (!r) return brk(f, "DV0021", "cannot specialise a symbolic index");
    idx = constant(*r);
  }
  if (obj->kind == VK::List || obj->kind == VK::Tuple) {
    if (idx->kind != VK::Const) return brk(f, "DV0017", "indexing a sequence with a non-constant");
    PyObject* i = idx->obj.get();
    const Py_ssize_t n = static_cast<Py_ssize_t>(obj->items.size());
    if (PyLong_Check(i)) {
      Py_ssize_t k = PyLong_AsSsize_t(i);
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
      if (obj->kind == VK::Tuple && !namedtuple_class(obj->obj.get())) r->obj = obj->obj;  // x.shape[1:] is a torch.Size too
      for (Py_ssize_t k = 0, j = start; k < len; ++k, j += step) r->items.push_back(obj->items[j]);
      out = r;
      return std::nullopt;
    }
    return brk(f, "DV0017", "unsupported sequence index");
  }
  if (obj->kind == VK::Dict) {
    PyObject* key = dict_key(idx);
    if (!key) return brk(f, "DV0017", "dict key is not a constant");
    for (size_t k = 0; k < obj->keys.size(); ++k) {
      int eq = PyObject_RichCompareBool(obj->keys[k].get(), key, Py_EQ);
      if (eq == 1) {
        out = obj->items[k];
        return std::nullopt;
      }
      PyErr_Clear();
    }
    if (obj->obj.get() == defaultdict_class()) return dict_missing(f, obj, idx, out);
    return raise_key_error(f, idx->obj.get());
  }
  if (obj->kind == VK::NNModule && idx->kind == VK::Const && PySlice_Check(idx->obj.get()) && obj->source) {
    // ModuleList / Sequential slices (self.layers[:-1]): the children in the slice, each with its
    // source, as a list (iterate, index, len; calling a sliced Sequential is not supported).
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
    out = l;
    return std::nullopt;
  }
  if (obj->kind == VK::NNModule && idx->kind == VK::Const) {  // ModuleList / Sequential indexing
    Ref r = Ref::steal(PyObject_GetItem(obj->obj.get(), idx->obj.get()));
    if (!r) return brk(f, "DV0010", "module indexing raised");
    if (PyLong_Check(idx->obj.get()) && obj->source) {
      Ref keys = Ref::steal(PyObject_GetAttrString(obj->obj.get(), "_modules"));
      long i = PyLong_AsLong(idx->obj.get());
      long n = keys ? static_cast<long>(PyDict_Size(keys.get())) : 0;
      if (i < 0) i += n;
      Ref name = Ref::steal(PyUnicode_FromFormat("%ld", i));
      out = wrap(r, Source::module_member(obj->source, "_modules", str_of(name.get())), f);
    } else if (PyUnicode_Check(idx->obj.get()) && obj->source) {  // ModuleDict["name"]
      Ref keys = Ref::steal(PyObject_GetAttrString(obj->obj.get(), "_modules"));
      PyObject* same = keys && PyDict_Check(keys.get()) ? PyDict_GetItem(keys.get(), idx->obj.get()) : nullptr;
      PyErr_Clear();
      out = wrap(r, same == r.get() ? Source::module_member(obj->source, "_modules", str_of(idx->obj.get())) : nullptr, f);
    } else {
      out = wrap(r, nullptr, f);
    }
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
  auto po = to_python(obj, false), pi = to_python(idx, false);
  if (po && pi) {
    Ref r = Ref::steal(PyObject_GetItem(po->get(), pi->get()));
    if (!r) return raise_current(f, "subscript");
    out = wrap(r, nullptr, f);
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
  if (stdlib_class(tp) && tp != environ_type()) return std::nullopt;
  Ref nm = Ref::steal(PyUnicode_FromString(name));
  PyObject* fn = _PyType_Lookup(tp, nm.get());
  if (!fn || !PyFunction_Check(fn)) return std::nullopt;
  handled = true;
  VPtr mv = bound_method(obj, Ref::borrow(fn), name);
  return call(f, mv, std::move(args), {}, out);
}

Translator::Status Translator::truth(Frame& f, VPtr v, bool& out) {
  switch (v->kind) {
    case VK::NdArray:
      return brk(f, "DV0002", "data-dependent control flow: branching on an ndarray's value",
                 "use np.where; torch.compile breaks the graph here too");
    case VK::Tensor:
      return brk(f, "DV0002", "data-dependent control flow: branching on a tensor's value",
                 "use torch.where, or torch.cond; torch.compile breaks the graph here too");
    case VK::Const: case VK::Object: {
      int r = PyObject_IsTrue(v->obj.get());
      if (r < 0) return brk(f, "DV0010", "bool() raised");
      out = r == 1;
      return std::nullopt;
    }
    case VK::Tuple: case VK::List: case VK::Dict: out = !v->items.empty(); return std::nullopt;
    case VK::Sym: {  // the ShapeEnv records the assumption as a guard
      int r = PyObject_IsTrue(v->obj.get());
      if (r < 0) return brk(f, "DV0021", "cannot decide a symbolic condition");
      out = r == 1;
      return std::nullopt;
    }
    case VK::NNModule: {
      int r = PyObject_IsTrue(v->obj.get());  // Sequential/ModuleList define __len__
      if (r < 0) return brk(f, "DV0010", "bool() of module raised");
      out = r == 1;
      return std::nullopt;
    }
    case VK::Instance: return instance_truth(f, v, out);
    case VK::DictView: out = !v->self->items.empty(); return std::nullopt;
    default: out = true; return std::nullopt;
  }
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
Translator::Status Translator::resume_generator(Frame& f, const VPtr& it) {
  Frame& g = *it->frame;
  if (g.resumed) g.stack.push_back(constant(Ref::borrow(Py_None)));  // what next() sends
  g.depth = f.depth + 1;
  if (obs_) {
    if (!f.reported) report_step(f);  // the taking step, before the generator's steps
    if (!g.resumed && !announce_code(obs_, g.facts)) PyErr_Clear();
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

Translator::Status Translator::iterate(Frame& f, VPtr v, VPtr& out, bool materialize) {
  VPtr it = make(VK::Iter);
  switch (v->kind) {
    case VK::Iter:
      if (materialize)
        if (Status s = pull(f, v, SIZE_MAX)) return s;
      out = v;
      return std::nullopt;
    case VK::Tuple: case VK::List: it->items = v->items; break;
    case VK::Dict: for (auto& k : v->keys) it->items.push_back(key_value(k)); break;
    case VK::Const: case VK::Object: {
      if (outside_dict(v, "__iter__")) {  // a Counter reached from the frame: its keys, guarded
        std::vector<VPtr> none;
        std::vector<std::pair<std::string, VPtr>> no_kw;
        return outside_dict_read(f, v, "__iter__", none, no_kw, out);
      }
      if (v->kind == VK::Object && !PyRange_Check(v->obj.get()) && !frozen_object(v->obj.get())) return brk(f, "DV0016", std::string("iterating over ") + Py_TYPE(v->obj.get())->tp_name);
      Ref iter = Ref::steal(PyObject_GetIter(v->obj.get()));
      if (!iter) return brk(f, "DV0016", "object is not iterable");
      while (Ref x = Ref::steal(PyIter_Next(iter.get()))) {
        it->items.push_back(constant(x));
        if (it->items.size() > 100000) return brk(f, "DV0014", "iterable too long to unroll");
      }
      if (PyErr_Occurred()) return brk(f, "DV0016", "iteration raised");
      break;
    }
    case VK::Instance: return instance_iterate(f, v, out, materialize);
    case VK::DictView: it->items = view_items(*v); break;  // what the dict holds now
    case VK::Tensor: {
      Ref shape = Ref::steal(PyObject_GetAttrString(v->obj.get(), "shape"));
      if (!shape || PyTuple_GET_SIZE(shape.get()) == 0) return brk(f, "DV0016", "iterating over a 0-d tensor");
      long n = PyLong_AsLong(PyTuple_GET_ITEM(shape.get(), 0));
      for (long i = 0; i < n; ++i) {
        VPtr item;
        if (Status s = subscr(f, v, constant_steal(PyLong_FromLong(i)), item)) return s;
        it->items.push_back(item);
      }
      break;
    }
    case VK::NdArray: {  // its rows, nd[0], nd[1] ... (TorchDynamo unpacks it as a tensor: ndarray.__getitem__ nodes)
      Ref shape = Ref::steal(PyObject_GetAttrString(v->obj.get(), "shape"));
      if (!shape || PyTuple_GET_SIZE(shape.get()) == 0) return PyErr_Clear(), raise_new(f, PyExc_TypeError, "iteration over a 0-d array");
      if (is_sym(PyTuple_GET_ITEM(shape.get(), 0))) return brk(f, "DV0021", "iterating over an ndarray of a dynamic size");
      const long n = PyLong_AsLong(PyTuple_GET_ITEM(shape.get(), 0));
      for (long i = 0; i < n; ++i) {
        VPtr item;
        std::vector<VPtr> idx{constant_steal(PyLong_FromLong(i))};
        std::vector<std::pair<std::string, VPtr>> none;
        if (Status s = ndarray_method(f, v, "__getitem__", idx, none, item)) return s;
        it->items.push_back(item);
      }
      break;
    }
    case VK::NNModule: {  // ModuleList, Sequential, ModuleDict iterate their children
      Ref mods = Ref::steal(PyObject_GetAttrString(v->obj.get(), "_modules"));
      Ref cls_iter = Ref::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(v->obj.get())), "__iter__"));
      if (!mods || !cls_iter || !PyDict_Check(mods.get())) return brk(f, "DV0016", "module is not iterable");
      Ref tname = Ref::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(v->obj.get())), "__name__"));
      const bool is_dict = str_of(tname.get()) == "ModuleDict";
      Py_ssize_t pos = 0;
      PyObject *k, *m;
      while (PyDict_Next(mods.get(), &pos, &k, &m)) {
        if (is_dict) {
          it->items.push_back(constant(Ref::borrow(k)));
          continue;
        }
        VPtr mv = wrap(Ref::borrow(m), v->source ? Source::module_member(v->source, "_modules", str_of(k)) : nullptr, f);
        if (!mv) return brk(f, "DV0013", "unsupported submodule");
        it->items.push_back(mv);
      }
      break;
    }
    default: return brk(f, "DV0016", std::string("iterating over a ") + vk_name(v->kind));
  }
  out = it;
  return std::nullopt;
}

Translator::Status Translator::delete_attr(Frame& f, const VPtr& owner, const std::string& name) {
  if (owner->kind == VK::Instance) return instance_delattr(f, owner, name);  // made in the trace
  return brk(f, "DV0008", std::string("del of attribute '") + name + "' of a " +
                              (owner->obj && owner->kind != VK::Function ? Py_TYPE(owner->obj.get())->tp_name : vk_name(owner->kind)),
             "dynview follows del of attributes of objects made inside the compiled function");
}

Translator::Status Translator::store_attr(Frame& f, const VPtr& owner, const std::string& name, const VPtr& value) {
  if (owner->kind == VK::Instance) return instance_setattr(f, owner, name, value);  // made in the trace
  if (owner->kind == VK::Object && owner->obj && !PyType_Check(owner->obj.get()) &&
      (Py_TYPE(owner->obj.get())->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
    // A Python __setattr__ of an object from outside (a Hugging Face config's, which maps aliases
    // and then calls super().__setattr__): inlined, as TorchDynamo does; object.__setattr__ at its
    // end is the plain assignment below (object_store_attr).
    static PyObject* setattr_name = PyUnicode_InternFromString("__setattr__");
    PyObject* setattr_fn = _PyType_Lookup(Py_TYPE(owner->obj.get()), setattr_name);
    if (setattr_fn && PyFunction_Check(setattr_fn)) {
      VPtr ignored;
      return call_python(f, Ref::borrow(setattr_fn), {owner, constant_steal(PyUnicode_FromString(name.c_str())), value}, ignored);
    }
  }
  return object_store_attr(f, owner, name, value);
}

// object.__setattr__ (or nn.Module's) on an object from outside: recorded, replayed after the graph.
Translator::Status Translator::object_store_attr(Frame& f, const VPtr& owner, const std::string& name, const VPtr& value) {
  const char* hint = "dynview replays assignments of tensors, numbers, strings and containers of them to attributes "
                     "of modules and plain objects";
  if ((owner->kind != VK::NNModule && owner->kind != VK::Object) || !owner->obj)
    return brk(f, "DV0008", std::string("assignment to attribute '") + name + "' of a " + vk_name(owner->kind), hint);
  PyObject* o = owner->obj.get();
  PyTypeObject* tp = Py_TYPE(o);
  if (PyType_Check(o) || PyModule_Check(o) || !(tp->tp_flags & Py_TPFLAGS_HEAPTYPE))
    return brk(f, "DV0008", "assignment to attribute '" + name + "' of " + tp->tp_name, hint);
  // Only plain instance attributes: nn.Module's __setattr__ for names that are not parameters,
  // buffers or submodules, or object's; no properties or other data descriptors.
  Ref setattr_fn = Ref::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(tp), "__setattr__"));
  PyErr_Clear();
  const bool module = owner->kind == VK::NNModule;
  const bool python_setattr = !module && setattr_fn && PyFunction_Check(setattr_fn.get());  // its object.__setattr__ call
  if (!python_setattr && (!setattr_fn || setattr_fn.get() != (module ? py().module_setattr.get() : py().object_setattr.get())))
    return brk(f, "DV0008", std::string("assignment to attribute '") + name + "' of " + tp->tp_name + ", which defines __setattr__", hint);
  Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
  PyObject* descr = _PyType_Lookup(tp, nm.get());
  if (descr && Py_TYPE(descr)->tp_descr_set)
    return brk(f, "DV0008", "assignment to property or descriptor '" + name + "' of " + tp->tp_name, hint);
  if (module) {
    PyObject** dictptr = _PyObject_GetDictPtr(o);
    for (const char* member : {"_parameters", "_buffers", "_modules"}) {
      PyObject* d = dictptr && *dictptr ? PyDict_GetItemString(*dictptr, member) : nullptr;
      if (d && PyDict_Check(d) && PyDict_GetItemString(d, name.c_str()))
        return brk(f, "DV0008", "assignment to " + std::string(member + 1) + " entry '" + name + "' of a module", hint);
    }
  } else if (!_PyObject_GetDictPtr(o)) {
    return brk(f, "DV0008", "assignment to attribute '" + name + "' of " + tp->tp_name + " (no __dict__)", hint);
  }
  std::function<bool(const VPtr&)> replayable = [&](const VPtr& v) {
    switch (v->kind) {
      case VK::Tensor: case VK::Sym: case VK::Const: return true;
      case VK::Tuple: case VK::List: case VK::Dict:
        for (const VPtr& x : v->items)
          if (!replayable(x)) return false;
        return true;
      case VK::Object: case VK::NNModule: return v->source || v->obj;
      default: return false;
    }
  };
  if (!replayable(value))
    return brk(f, "DV0008", "assignment of a " + std::string(vk_name(value->kind)) + " to attribute '" + name + "'", hint);
  output.side_effects.attr_writes.push_back(SideEffects::AttrWrite{owner, name, value});
  return std::nullopt;
}

// object.__setattr__ / object.__getattribute__ (the slot wrappers), by name.
static PyObject* object_slot(const std::string& name) {
  static PyObject* getattribute = PyObject_GetAttrString(reinterpret_cast<PyObject*>(&PyBaseObject_Type), "__getattribute__");
  if (name == "__setattr__") return py().object_setattr.get();
  return name == "__getattribute__" ? getattribute : nullptr;
}

// What super() finds for `name`: the first class after __thisclass__ in the MRO of __self_class__
// that defines it (borrowed), or null.
static PyObject* super_lookup(PyObject* sup, const std::string& name) {
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
    PyObject* d = reinterpret_cast<PyTypeObject*>(cls)->tp_dict;
    if (PyObject* v = d ? PyDict_GetItemWithError(d, nm.get()) : nullptr) return v;
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

Translator::Status Translator::call_python(Frame& f, Ref fn, std::vector<VPtr> args, VPtr& out) {
  VPtr fv = make(VK::Function);
  fv->obj = std::move(fn);
  return call(f, fv, std::move(args), {}, out);
}

Translator::Status Translator::getattr(Frame& f, VPtr obj, const std::string& name, VPtr& out) {
  const bool generic = generic_getattr_;
  generic_getattr_ = false;
  if ((obj->kind == VK::NNModule || obj->kind == VK::Object) && obj->obj && !output.side_effects.attr_writes.empty()) {
    bool written = false;
    for (auto w = output.side_effects.attr_writes.rbegin(); w != output.side_effects.attr_writes.rend(); ++w) {  // the latest assignment wins
      if (w->owner->obj.get() != obj->obj.get()) continue;
      written = true;
      if (w->name == name) {
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
  switch (obj->kind) {
    case VK::Partial: return partial_getattr(f, obj, name, out);
    case VK::NdArray: return ndarray_getattr(f, obj, name, out);
    case VK::Tensor: {
      PyObject* m = obj->obj.get();
      if (name == "device") { out = constant(obj->device); return std::nullopt; }
      if (name == "shape" || name == "dtype" || name == "ndim" || name == "requires_grad" || name == "is_leaf" ||
          name == "layout" || name == "is_cuda" || name == "is_sparse" || name == "is_quantized" || name == "is_meta" ||
          name == "is_cpu" || name == "is_mps" || name == "is_xpu" || name == "is_nested" || name == "is_mkldnn" ||
          name == "is_sparse_csr" || name == "itemsize") {
        if (name == "is_meta") { out = constant(Ref::borrow(Py_False)); return std::nullopt; }
        if (name == "is_cuda" || name == "is_cpu" || name == "is_mps" || name == "is_xpu") {  // the real device, not the example's
          Ref t = Ref::steal(PyObject_GetAttrString(obj->device.get(), "type"));
          out = constant(Ref::borrow(str_of(t.get()) == name.substr(3) ? Py_True : Py_False));
          return std::nullopt;
        }
        Ref r = Ref::steal(PyObject_GetAttrString(m, name.c_str()));
        if (!r) return brk(f, "DV0005", "Tensor." + name);
        if (name == "shape") return meta_result(f, obj, "size", {}, r, out);
        out = constant(r);
        return std::nullopt;
      }
      if (name == "T" || name == "mT" || name == "H" || name == "mH" || name == "real" || name == "imag")
        return graph_call(f, py().getattr_fn, "", {obj, constant_steal(PyUnicode_FromString(name.c_str()))}, {}, out);
      if (name == "data" || name == "grad" || name == "_base")
        return brk(f, "DV0005", "Tensor." + name + " is not traced", "use the tensor itself, or .detach()");
      Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
      if (!_PyType_Lookup(reinterpret_cast<PyTypeObject*>(py().torch_Tensor.get()), nm.get()))
        return brk(f, kNoAttributeId, "'Tensor' object has no attribute '" + name + "'");  // AttributeError in eager
      out = bound_method(obj, Ref(), name);
      return std::nullopt;
    }
    case VK::NNModule: {
      PyObject* m = obj->obj.get();
      if (name == "__class__") {  // type(module), guarded as the module's class
        out = wrap(Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(m))), obj->source ? Source::attr(obj->source, "__class__") : nullptr, f);
        if (!out) return brk(f, "DV0005", "attribute __class__ of module " + std::string(Py_TYPE(m)->tp_name));
        return std::nullopt;
      }
      PyObject** dictptr = _PyObject_GetDictPtr(m);
      if (dictptr && *dictptr) {
        PyObject* d = *dictptr;
        for (const char* member : {"_parameters", "_buffers", "_modules"}) {
          PyObject* members = PyDict_GetItemString(d, member);
          if (!members || !PyDict_Check(members)) continue;
          PyObject* v = PyDict_GetItemString(members, name.c_str());
          if (!v) continue;
          out = wrap(Ref::borrow(v), obj->source ? Source::module_member(obj->source, member, name) : nullptr, f);
          if (!out) return brk(f, "DV0013", "module member " + name + " cannot be traced");
          return std::nullopt;
        }
        if (PyObject* v = PyDict_GetItemString(d, name.c_str())) {
          out = wrap(Ref::borrow(v), obj->source ? Source::attr(obj->source, name) : nullptr, f);
          if (!out) return brk(f, "DV0013", "module attribute " + name + " cannot be traced");
          return std::nullopt;
        }
      }
      Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
      PyObject* cls_attr = _PyType_Lookup(Py_TYPE(m), nm.get());
      if (cls_attr && PyFunction_Check(cls_attr)) {
        VPtr mv = bound_method(obj, Ref::borrow(cls_attr), name);
        out = mv;
        return std::nullopt;
      }
      if (Ref getter = python_getter(cls_attr)) return call_python(f, getter, {obj}, out);
      if (cls_attr && is_exact_const(cls_attr)) {
        out = constant(Ref::borrow(cls_attr));
        return std::nullopt;
      }
      if (cls_attr && (Py_IS_TYPE(cls_attr, &PyStaticMethod_Type) || Py_IS_TYPE(cls_attr, &PyClassMethod_Type))) {
        // self._relative_position_bucket(...): a staticmethod is its function; a classmethod is
        // bound to the module's class (both fixed by the class the module's guards pin).
        Ref fn = Ref::steal(PyObject_GetAttrString(cls_attr, "__func__"));
        if (fn && PyFunction_Check(fn.get())) {
          if (Py_IS_TYPE(cls_attr, &PyStaticMethod_Type)) {
            out = make(VK::Function);
            out->obj = fn;
            return std::nullopt;
          }
          VPtr cls = make(VK::Object);
          cls->obj = Ref::borrow(reinterpret_cast<PyObject*>(Py_TYPE(m)));
          cls->source = obj->source ? Source::attr(obj->source, "__class__") : nullptr;
          out = bound_method(cls, fn, name);
          return std::nullopt;
        }
        PyErr_Clear();
      }
      static PyObject* getattr_name = PyUnicode_InternFromString("__getattr__");
      const bool module_getattr = _PyType_Lookup(Py_TYPE(m), getattr_name) ==
                                  _PyType_Lookup(reinterpret_cast<PyTypeObject*>(py().nn_Module.get()), getattr_name);
      if (!cls_attr && module_getattr)  // not an instance attribute, member or class attribute: nn.Module.__getattr__ raises
        return brk(f, kNoAttributeId, "'" + std::string(Py_TYPE(m)->tp_name) + "' object has no attribute '" + name + "'");
      return brk(f, "DV0005", "attribute " + name + " of module " + Py_TYPE(m)->tp_name);
    }
    case VK::Object: case VK::Const: case VK::Function: {
      PyObject* o = obj->obj.get();
      if (!o) return brk(f, "DV0005", "attribute " + name + " of a local function");
      if (obj->kind == VK::Object && Py_IS_TYPE(o, &PySuper_Type) && obj->self) {  // super().method
        Ref r = Ref::steal(PyObject_GetAttrString(o, name.c_str()));
        if (!r) {
          const bool missing = PyErr_ExceptionMatches(PyExc_AttributeError);
          PyErr_Clear();
          return brk(f, missing ? kNoAttributeId : "DV0005", "super() has no attribute " + name);
        }
        if (obj->self->kind == VK::Instance) {  // super over an object made in the trace: unbound lookups
          if (PyFunction_Check(r.get())) {
            out = bound_method(obj->self, r, name);
            return std::nullopt;
          }
          if (PyMethod_Check(r.get()) && PyFunction_Check(PyMethod_GET_FUNCTION(r.get()))) {  // a classmethod
            out = bound_method(obj->self->self, Ref::borrow(PyMethod_GET_FUNCTION(r.get())), name);
            return std::nullopt;
          }
          if (Ref getter = python_getter(r.get())) return call_python(f, getter, {obj->self}, out);
          if (Py_IS_TYPE(r.get(), &PyWrapperDescr_Type) || Py_IS_TYPE(r.get(), &PyMethodDescr_Type)) {  // object.__init__, dict.get ...
            out = bound_method(obj->self, r, name);
            return std::nullopt;
          }
        }
        if (obj->self->kind == VK::Object && obj->self->source && PyDict_Check(obj->self->obj.get()) && PyCFunction_Check(r.get()) &&
            PyCFunction_GET_SELF(r.get()) == obj->self->obj.get()) {  // dict.get and friends of a dict subclass's object
          PyObject* descr = _PyType_Lookup(&PyDict_Type, Ref::steal(PyUnicode_FromString(name.c_str())).get());
          if (descr && Py_IS_TYPE(descr, &PyMethodDescr_Type) &&
              reinterpret_cast<PyMethodDescrObject*>(descr)->d_method == reinterpret_cast<PyCFunctionObject*>(r.get())->m_ml &&
              (name == "get" || name == "__getitem__" || name == "__contains__")) {
            out = bound_method(obj->self, Ref::borrow(descr), name);
            return std::nullopt;
          }
        }
        if (PyMethod_Check(r.get()) && PyFunction_Check(PyMethod_GET_FUNCTION(r.get()))) {
          VPtr mv = bound_method(obj->self, Ref::borrow(PyMethod_GET_FUNCTION(r.get())), name);
          out = mv;
          return std::nullopt;
        }
        if (is_exact_const(r.get())) {
          out = constant(r);
          return std::nullopt;
        }
        if (obj->self->kind == VK::Object && (name == "__setattr__" || name == "__getattribute__")) {
          // super().__setattr__(k, v) / super().__getattribute__(k) in the Python __setattr__ of an
          // object from outside, when they reach object's own: a bound object slot (outside_object_builtin)
          if (PyObject* descr = super_lookup(o, name); descr && descr == object_slot(name)) {
            out = bound_method(obj->self, Ref::borrow(descr), name);
            return std::nullopt;
          }
        }
        return brk(f, "DV0005", "super()." + name + " is not a Python method");
      }
      if (obj->kind == VK::Const && !PyModule_Check(o)) {
        Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
        PyObject* cls_attr = _PyType_Lookup(Py_TYPE(o), nm.get());
        if (cls_attr && (PyObject_TypeCheck(cls_attr, &PyMethodDescr_Type) || PyFunction_Check(cls_attr))) {
          out = bound_method(obj, Ref(), name);
          return std::nullopt;
        }
      }
      if (obj->kind == VK::Object && !obj->source && frozen_object(o)) {  // an immutable value: read now
        Ref r = Ref::steal(PyObject_GetAttrString(o, name.c_str()));
        if (!r) return raise_current(f, "attribute " + name);
        if (frozen_object(r.get())) {
          out = make(VK::Object);
          out->obj = r;
        } else {
          out = wrap(r, nullptr, f);
        }
        if (!out) return brk(f, "DV0005", "attribute " + name + " of " + Py_TYPE(o)->tp_name + " cannot be traced");
        return std::nullopt;
      }
      if (obj->kind == VK::Object && (Py_TYPE(o)->tp_flags & Py_TPFLAGS_HEAPTYPE) && !PyType_Check(o)) {
        // A property of a Python class: its getter is inlined (reading it here would run it
        // unguarded, and the guard could not read it back).
        Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
        PyObject* cls_attr = _PyType_Lookup(Py_TYPE(o), nm.get());
        if (Ref getter = python_getter(cls_attr)) return call_python(f, getter, {obj}, out);
      }
      Ref r = Ref::steal(PyObject_GetAttrString(o, name.c_str()));
      if (!r) {
        const bool missing = PyErr_ExceptionMatches(PyExc_AttributeError);
        PyErr_Clear();
        return brk(f, missing ? kNoAttributeId : "DV0005", "no attribute " + name + " on " + Py_TYPE(o)->tp_name);
      }
      if (PyCFunction_Check(r.get()) && PyCFunction_GET_SELF(r.get()) == o && obj->source && PyDict_Check(o) &&
          outside_dict_read_method(name)) {
        // counts.items() of a Counter (a dict subclass) reached from the frame: read from its
        // storage, guarded by its keys (outside_dict_read)
        Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
        PyObject* descr = _PyType_Lookup(&PyDict_Type, nm.get());
        if (descr && _PyType_Lookup(Py_TYPE(o), nm.get()) == descr) {
          out = bound_method(obj, Ref::borrow(descr), name);
          return std::nullopt;
        }
      }
      if (PyCFunction_Check(r.get()) && PyCFunction_GET_SELF(r.get()) == o && bound_to_mutable_object(r.get()))
        return brk(f, "DV0005", "method " + name + " of a live " + Py_TYPE(o)->tp_name + " object",
                   "its methods are not traced; a bound method kept in the code would act on this one object on every call");
      // Attributes of modules (torch.relu, math.pi), classes and instances of user classes (a config
      // object's cfg.d, o.scale) are reloaded from their owner, and so guarded: they may change
      // between calls. Immutable constants' attributes (dtype.is_floating_point) need no guard.
      const bool user_instance = obj->kind == VK::Object && (Py_TYPE(o)->tp_flags & Py_TPFLAGS_HEAPTYPE);
      SourcePtr src = (obj->source && (PyModule_Check(o) || PyType_Check(o) || user_instance)) ? Source::attr(obj->source, name) : nullptr;
      if (PyModule_Check(o) && module_is_torch_mod(o)) src = nullptr;  // torch.* is fixed: no guard needed
      if (PyType_Check(o)) {
        // A class attribute is guarded as the class (or a base) holds it: the raw object, which
        // differs from the value read for staticmethods and classmethods. The metaclass's own
        // attributes (__name__) belong to the class, which is guarded by identity.
        PyObject* raw = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(o), Ref::steal(PyUnicode_FromString(name.c_str())).get());
        if (!raw) {
          src = nullptr;
        } else if (raw != r.get()) {
          if (src) add_guard(GuardKind::ID_MATCH, src, Ref::borrow(raw), f, "___check_obj_id(" + src->text() + ", " + repr_of(raw) + ")");
          src = nullptr;
        }
      }
      out = wrap(r, src, f);
      if (!out) return brk(f, "DV0005", "attribute " + name + " cannot be traced");
      return std::nullopt;
    }
    case VK::Instance: return instance_getattr(f, obj, name, out);
    case VK::List: case VK::Dict: case VK::Tuple: {  // methods of containers (append, items, get ...)
      if (obj->kind == VK::Dict && obj->defaults && name == "default_factory") {  // a defaultdict made in the trace
        out = obj->defaults;
        return std::nullopt;
      }
      if (is_deque(obj) && name == "maxlen") {
        out = obj->defaults;
        return std::nullopt;
      }
      if (obj->kind == VK::Tuple)  // a named result (torch.return_types, a namedtuple): its fields
        for (size_t i = 0; i < obj->keys.size() && i < obj->items.size(); ++i)
          if (str_of(obj->keys[i].get()) == name) {
            out = obj->items[i];
            return std::nullopt;
          }
      if (obj->kind == VK::Tuple && obj->self && namedtuple_class(obj->obj.get())) return namedtuple_getattr(f, obj, name, out);
      out = bound_method(obj, Ref(), name);
      return std::nullopt;
    }
    default: return brk(f, "DV0005", "attribute " + name + " of a " + vk_name(obj->kind));
  }
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
