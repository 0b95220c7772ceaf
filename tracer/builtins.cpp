// Python builtins over Values: len, isinstance, getattr, range, min/max, abs, tuple/list/dict,
// enumerate, zip, sum, sorted, reversed, int/float/bool/str, type, print (a break).
#include <algorithm>
#include <cstring>
#include <functional>
#include <unordered_map>

#include "pycache.h"
#include "tensor_match.h"
#include "translator.h"
#include "values/kind.h"

namespace dv {

namespace {

constexpr const char* kSymTextHint =
    "as with torch.compile, the text of a dynamic size is made eagerly; format it with an f-string or str.format, or mark the dimension static";

// A symbolic number, or a tuple or list holding one (a torch.Size with a dynamic dimension).
bool holds_sym(const VPtr& v) {
  if (v->kind == VK::Sym) return true;
  if (v->kind != VK::Tuple && v->kind != VK::List) return false;
  for (const VPtr& x : v->items)
    if (holds_sym(x)) return true;
  return false;
}

// A lazy iterator `name` over the iterators of `args` (its items made as they are taken: pull_itertool).
Translator::Status lazy_over(Translator& t, Frame& f, const char* name, const std::vector<VPtr>& args, VPtr& out) {
  VPtr r = t.make(VK::Iter);
  r->name = name;
  r->flag = true;
  for (const VPtr& a : args) {
    VPtr it;
    if (Translator::Status s = t.iterate(f, a, it, /*materialize=*/false)) return s;
    r->cells.push_back(it);
  }
  out = r;
  return std::nullopt;
}

// itertools over traced values, by their structure: the same itertools function runs on tokens that
// stand for the items ((argument, index) tuples), and its output is mapped back to the values, so
// product/permutations/chain/... of tensors give exactly what they give eagerly, in the same order.
// Iterators passed in are consumed; other arguments (r, start, stop, fillvalue) must be constants.
// (combinations_with_replacement is left out: TorchDynamo 2.13 breaks the graph on it.)
Translator::Status call_itertools(Translator& t, Frame& f, PyObject* fn, std::vector<VPtr>& args,
                                  std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled) {
  using Status = Translator::Status;
  static PyObject* itertools = PyImport_ImportModule("itertools");  // never released (process lifetime)
  if (!itertools) return PyErr_Clear(), std::nullopt;
  struct Spec { const char* name; int iterables; PyObject* fn; };  // iterables -1: every positional argument
  static std::vector<Spec>& specs = *[&] {  // resolved once; the objects live as long as the process
    auto* v = new std::vector<Spec>{{"product", -1, nullptr}, {"permutations", 1, nullptr}, {"combinations", 1, nullptr},
                                    {"pairwise", 1, nullptr},
                                    {"zip_longest", -1, nullptr}, {"chain", -1, nullptr}, {"islice", 1, nullptr},
                                    {"from_iterable", 1, nullptr}};
    for (Spec& sp : *v) {
      PyObject* owner = std::string(sp.name) == "from_iterable" ? PyObject_GetAttrString(itertools, "chain") : nullptr;
      sp.fn = PyObject_GetAttrString(owner ? owner : itertools, sp.name);
      Py_XDECREF(owner);
      PyErr_Clear();
    }
    return v;
  }();
  const Spec* spec = nullptr;
  for (const Spec& sp : specs) {
    if (!sp.fn) continue;
    if (sp.fn == fn) spec = &sp;
    else if (PyCFunction_Check(fn) && PyCFunction_Check(sp.fn) && PyCFunction_GET_SELF(fn) == PyCFunction_GET_SELF(sp.fn) &&
             PyCFunction_GET_FUNCTION(fn) == PyCFunction_GET_FUNCTION(sp.fn))
      spec = &sp;  // a bound builtin method made anew by each attribute read (chain.from_iterable)
    if (spec) break;
  }
  if (!spec) return std::nullopt;
  handled = true;
  const std::string name = spec->name;
  if (name == "chain" || name == "islice") {
    // an object of a Python class among the sources: its iterator, taken lazily (chain and islice
    // take only the items they give, as in eager)
    for (size_t a = 0; a < args.size() && (name == "chain" || a == 0); ++a) {
      VPtr it;
      if (Status s = iterate_user_object(t, f, args[a], it)) return s;
      if (it) args[a] = it;
    }
  }
  if (name == "chain" && kwargs.empty()) {
    bool lazy = false;  // a generator or map among the sources: taken one item at a time, as in eager
    for (const VPtr& a : args) lazy |= a->kind == VK::Iter && a->flag;
    if (lazy) {
      if (Status s = lazy_over(t, f, "chain", args, out)) return s;
      out->defaults = t.constant_steal(PyLong_FromLong(0));  // the source being taken
      return std::nullopt;
    }
  }
  const bool stop_none = name == "islice" && (args.size() == 2 || args.size() == 3) && args.back()->kind == VK::Const &&
                         args[args.size() == 2 ? 1 : 2]->obj.get() == Py_None;  // islice(it, None): all of it
  if (name == "islice" && !args.empty() && (endless_iter(*args[0]) || (args[0]->kind == VK::Iter && !stop_none))) {
    // islice(it, [start,] stop[, step]) of an iterator (count(), a generator, iter(lst) ...): the
    // items up to stop taken from it first (stop must be a constant), the rest left to whoever
    // takes from it next, then sliced as below.
    const VPtr& stop = args.size() == 2 ? args[1] : args.size() >= 3 ? args[2] : nullptr;
    if (!stop || stop->kind != VK::Const || !PyLong_CheckExact(stop->obj.get()) || !kwargs.empty())
      return t.brk(f, "DV0014", "itertools.islice of an endless iterator without a constant stop");
    const long n = PyLong_AsLong(stop->obj.get());
    if (n < 0) return t.raise_new(f, PyExc_ValueError, "Stop argument for islice() must be None or an integer: 0 <= x <= sys.maxsize.");
    VPtr src = args[0];
    if (Status s = t.pull(f, src, src->pos + static_cast<size_t>(n))) return s;
    VPtr taken = t.make(VK::Tuple);
    const size_t end = std::min(src->items.size(), src->pos + static_cast<size_t>(n));
    taken->items.assign(src->items.begin() + static_cast<long>(src->pos), src->items.begin() + static_cast<long>(end));
    src->pos = end;
    args[0] = taken;
  }
  std::vector<std::vector<VPtr>> seqs;
  Ref pargs = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
  for (size_t a = 0; a < args.size(); ++a) {
    const bool iterable = spec->iterables < 0 || static_cast<int>(a) < spec->iterables;
    if (!iterable) {
      if (args[a]->kind != VK::Const) return t.brk(f, "DV0007", "itertools." + name + " with a non-constant argument");
      PyTuple_SET_ITEM(pargs.get(), a, Ref::borrow(args[a]->obj.get()).release());
      continue;
    }
    VPtr it;
    if (Status s = t.iterate(f, args[a], it)) return s;
    std::vector<VPtr> items(it->items.begin() + static_cast<long>(it->pos), it->items.end());
    it->pos = it->items.size();
    if (name == "from_iterable") {  // chain.from_iterable(xs): every x of xs is an iterable too
      std::vector<VPtr> flat;
      for (const VPtr& x : items) {
        VPtr xi;
        if (Status s = t.iterate(f, x, xi)) return s;
        flat.insert(flat.end(), xi->items.begin() + static_cast<long>(xi->pos), xi->items.end());
        xi->pos = xi->items.size();
      }
      VPtr r = t.make(VK::Iter);
      r->items = std::move(flat);
      r->name = name;  // a generator in TorchDynamo: not rebuilt across a break (iterator.cpp)
      out = r;
      return std::nullopt;
    }
    Ref tokens = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(items.size())));
    for (size_t k = 0; k < items.size(); ++k)
      PyTuple_SET_ITEM(tokens.get(), k, Py_BuildValue("(nn)", static_cast<Py_ssize_t>(seqs.size()), static_cast<Py_ssize_t>(k)));
    PyTuple_SET_ITEM(pargs.get(), a, tokens.release());
    seqs.push_back(std::move(items));
  }
  Ref fill_token = Ref::steal(PyTuple_Pack(0));  // zip_longest's fillvalue, mapped back below
  Ref pkw = Ref::steal(PyDict_New());
  VPtr fill;
  for (auto& [k, v] : kwargs) {
    if (name == "zip_longest" && k == "fillvalue") {
      fill = v;
      PyDict_SetItemString(pkw.get(), k.c_str(), fill_token.get());
    } else if (v->kind == VK::Const) {
      PyDict_SetItemString(pkw.get(), k.c_str(), v->obj.get());
    } else {
      return t.brk(f, "DV0007", "itertools." + name + " with a non-constant keyword argument");
    }
  }
  if (name == "zip_longest" && !fill) {
    PyDict_SetItemString(pkw.get(), "fillvalue", fill_token.get());
    fill = t.constant(Ref::borrow(Py_None));
  }
  Ref res = Ref::steal(PyObject_Call(fn, pargs.get(), pkw.get()));
  Ref lst = res ? Ref::steal(PySequence_List(res.get())) : Ref();
  if (!lst) return PyErr_Clear(), t.brk(f, "DV0010", "itertools." + name + " raised");
  std::function<VPtr(PyObject*)> back = [&](PyObject* tok) -> VPtr {
    if (tok == fill_token.get()) return fill;
    if (PyTuple_Check(tok) && PyTuple_GET_SIZE(tok) == 2 && PyLong_Check(PyTuple_GET_ITEM(tok, 0))) {
      const Py_ssize_t a = PyLong_AsSsize_t(PyTuple_GET_ITEM(tok, 0)), k = PyLong_AsSsize_t(PyTuple_GET_ITEM(tok, 1));
      return seqs[static_cast<size_t>(a)][static_cast<size_t>(k)];
    }
    VPtr tup = t.make(VK::Tuple);  // a combination: a tuple of tokens
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(tok); ++j) tup->items.push_back(back(PyTuple_GET_ITEM(tok, j)));
    return tup;
  };
  VPtr r = t.make(VK::Iter);
  r->name = name;  // chain, islice, pairwise, zip_longest are generators in TorchDynamo (iterator.cpp)
  const bool flat = name == "chain" || name == "islice";
  for (Py_ssize_t j = 0; j < PyList_GET_SIZE(lst.get()); ++j) {
    PyObject* tok = PyList_GET_ITEM(lst.get(), j);
    if (flat) r->items.push_back(back(tok));
    else {  // tuples of items
      VPtr tup = t.make(VK::Tuple);
      for (Py_ssize_t q = 0; q < PyTuple_GET_SIZE(tok); ++q) tup->items.push_back(back(PyTuple_GET_ITEM(tok, q)));
      r->items.push_back(tup);
    }
  }
  out = r;
  return std::nullopt;
}

}  // namespace

// The builtins call_builtin follows, by identity: one table built once (a lookup per call instead of
// a getattr on the builtins module per comparison).
enum class Builtin : uint8_t {
  none,
  abs_,
  all_,
  any_,
  bool_,
  callable_,
  chr_,
  delattr_,
  dict_,
  divmod_,
  enumerate_,
  filter_,
  float_,
  frozenset_,
  getattr_,
  hasattr_,
  hash_,
  id_,
  int_,
  isinstance_,
  issubclass_,
  iter_,
  len_,
  list_,
  map_,
  max_,
  min_,
  next_,
  ord_,
  pow_,
  print_,
  eval_,
  exec_,
  locals_,
  globals_,
  dir_,
  range_,
  repr_,
  reversed_,
  round_,
  set_,
  setattr_,
  slice_,
  sorted_,
  str_,
  sum_,
  tuple_,
  type_,
  vars_,
  zip_,
};

Builtin builtin_kind(PyObject* fn) {
  static const auto* table = [] {
    auto* m = new std::unordered_map<PyObject*, Builtin>();  // lives as long as the process (builtins do too)
    static const struct {
      const char* name;
      Builtin kind;
    } rows[] = {
      {"abs", Builtin::abs_},
      {"all", Builtin::all_},
      {"any", Builtin::any_},
      {"bool", Builtin::bool_},
      {"callable", Builtin::callable_},
      {"chr", Builtin::chr_},
      {"delattr", Builtin::delattr_},
      {"dict", Builtin::dict_},
      {"divmod", Builtin::divmod_},
      {"enumerate", Builtin::enumerate_},
      {"filter", Builtin::filter_},
      {"float", Builtin::float_},
      {"frozenset", Builtin::frozenset_},
      {"getattr", Builtin::getattr_},
      {"hasattr", Builtin::hasattr_},
      {"hash", Builtin::hash_},
      {"id", Builtin::id_},
      {"int", Builtin::int_},
      {"isinstance", Builtin::isinstance_},
      {"issubclass", Builtin::issubclass_},
      {"iter", Builtin::iter_},
      {"len", Builtin::len_},
      {"list", Builtin::list_},
      {"map", Builtin::map_},
      {"max", Builtin::max_},
      {"min", Builtin::min_},
      {"next", Builtin::next_},
      {"ord", Builtin::ord_},
      {"pow", Builtin::pow_},
      {"print", Builtin::print_},
      {"range", Builtin::range_},
      {"repr", Builtin::repr_},
      {"reversed", Builtin::reversed_},
      {"round", Builtin::round_},
      {"set", Builtin::set_},
      {"setattr", Builtin::setattr_},
      {"slice", Builtin::slice_},
      {"sorted", Builtin::sorted_},
      {"str", Builtin::str_},
      {"sum", Builtin::sum_},
      {"tuple", Builtin::tuple_},
      {"type", Builtin::type_},
      {"vars", Builtin::vars_},
      {"locals", Builtin::locals_},
      {"eval", Builtin::eval_},
      {"exec", Builtin::exec_},
      {"globals", Builtin::globals_},
      {"dir", Builtin::dir_},
      {"zip", Builtin::zip_}};
    for (const auto& r : rows) {
      if (PyObject* o = PyObject_GetAttrString(py().builtins.get(), r.name)) {
        (*m)[o] = r.kind;
        Py_DECREF(o);
      } else {
        PyErr_Clear();
      }
    }
    return m;
  }();
  auto it = table->find(fn);
  return it == table->end() ? Builtin::none : it->second;
}

bool is_len_builtin(PyObject* fn) { return builtin_kind(fn) == Builtin::len_; }

namespace {
// The truth of one item of any()/all(): a constant's, or any other value's as `if` takes it (a symbolic
// size's comparison, `x.shape[d] == 0`, guarded). A tensor's depends on its values: TorchDynamo breaks
// there too.
Translator::Status any_all_item_truth(Translator& t, Frame& f, const VPtr& v, bool& out) {
  if (v->kind == VK::Tensor)
    return t.brk(f, "DV0007", "min/max/any/all of tensors depend on their values", "use torch.minimum/torch.maximum");
  if (v->kind != VK::Const) return t.truth(f, v, out);
  const int b = PyObject_IsTrue(v->obj.get());
  if (b < 0) return t.raise_current(f, "truth of an item");
  out = b == 1;
  return std::nullopt;
}

// any() (want true) or all() (want false): the items' truth one by one, stopping at the first that
// decides, as eager takes them. next(v, more) gives the next item, `more` false at the end.
template <class Next>
Translator::Status any_all(Translator& t, Frame& f, bool want, Next next, VPtr& out) {
  bool result = !want;
  for (;;) {
    VPtr v;
    bool more = false;
    if (Translator::Status s = next(v, more)) return s;
    if (!more) break;
    bool b = false;
    if (Translator::Status s = any_all_item_truth(t, f, v, b)) return s;
    if (b == want) {
      result = want;
      break;
    }
  }
  out = t.constant(Ref::borrow(result ? Py_True : Py_False));
  return std::nullopt;
}
}  // namespace

Translator::Status call_builtin(Translator& t, Frame& f, PyObject* fn, std::vector<VPtr>& args,
                                std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled);

// Builtins over the symbolic ints and floats of a dynamic-shape compile that keep them symbolic, as
// TorchDynamo's SymNodeVariable does: isinstance / type / callable read only the type (int, float);
// int(), float(), abs(), max() and min() of numbers are graph nodes (torch.sym_int, torch.sym_float,
// abs, torch.sym_max, torch.sym_min). `handled` false: the caller specialises the arguments.
Translator::Status sym_builtin(Translator& t, Frame& f, PyObject* fn, std::vector<VPtr>& args,
                               std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled) {
  handled = false;
  const Builtin kind = builtin_kind(fn);
  if (kind == Builtin::isinstance_ || kind == Builtin::type_ || kind == Builtin::callable_) {
    if (kind == Builtin::type_ && args.size() != 1) return std::nullopt;
    handled = true;  // answered from the value's type (call_builtin), the value left symbolic
    return call_builtin(t, f, fn, args, kwargs, out, handled);
  }
  if (!kwargs.empty()) return std::nullopt;
  if ((kind == Builtin::str_ || kind == Builtin::repr_) && args.size() == 1 && args[0]->kind == VK::Sym)
    return handled = true, t.brk(f, "DV0007", std::string(kind == Builtin::str_ ? "str()" : "repr()") + " of a symbolic size",
                                 kSymTextHint);
  if (kind == Builtin::bool_ && args.size() == 1 && args[0]->kind == VK::Sym) {  // != 0, decided by the ShapeEnv
    bool b = false;
    if (Translator::Status s = t.truth(f, args[0], b)) return handled = true, s;
    handled = true;
    out = t.constant(Ref::borrow(b ? Py_True : Py_False));
    return std::nullopt;
  }
  auto number = [](const VPtr& v) {
    return v->kind == VK::Sym || (v->kind == VK::Const && (PyLong_CheckExact(v->obj.get()) || PyFloat_CheckExact(v->obj.get())));
  };
  if ((kind == Builtin::max_ || kind == Builtin::min_) && args.size() == 1 &&
      (args[0]->kind == VK::Tuple || args[0]->kind == VK::List) && !args[0]->items.empty()) {
    // of one tuple or list of numbers (swin's min(input_resolution)): as of its items
    std::vector<VPtr> items = args[0]->items;
    for (const VPtr& x : items)
      if (!number(x)) return std::nullopt;
    if (items.size() == 1) return handled = true, out = items[0], std::nullopt;
    return sym_builtin(t, f, fn, items, kwargs, out, handled);
  }
  for (const VPtr& a : args)
    if (!number(a)) return std::nullopt;
  static PyObject* torch_mod = py().torch.get();
  auto torch_fn = [&](const char* name) { return Ref::steal(PyObject_GetAttrString(torch_mod, name)); };
  auto is_float = [](const VPtr& v) {
    return v->obj && (PyFloat_Check(v->obj.get()) || Py_TYPE(v->obj.get()) == reinterpret_cast<PyTypeObject*>(py().sym_float.get()));
  };
  // math.ceil / floor / trunc and round() of a symbolic float (mobilevit's math.ceil(height / patch) *
  // patch): a graph node, a symbolic int (CeilToInt, FloorToInt, TruncToInt, RoundToInt), as TorchDynamo
  // keeps it; of an int, the int itself
  static PyObject* math_ceil = kept_attr("math", "ceil");
  static PyObject* math_floor = kept_attr("math", "floor");
  static PyObject* math_trunc = kept_attr("math", "trunc");
  if ((fn == math_ceil || fn == math_floor || fn == math_trunc || kind == Builtin::round_) && fn && args.size() == 1 &&
      args[0]->kind == VK::Sym) {
    handled = true;
    if (!is_float(args[0])) return out = args[0], std::nullopt;
    return t.graph_call(f, Ref::borrow(fn), "", {args[0]}, {}, out);
  }
  // round(a, 2) of a symbolic float: a graph node too (a SymFloat, RoundDecimal), as TorchDynamo keeps
  // it; round(n, ndigits) of a symbolic int is left to specialize (Python's rounding of ints to tens)
  if (kind == Builtin::round_ && args.size() == 2 && args[0]->kind == VK::Sym && is_float(args[0]) &&
      args[1]->kind == VK::Const && PyLong_CheckExact(args[1]->obj.get())) {
    handled = true;
    return t.graph_call(f, Ref::borrow(fn), "", {args[0], args[1]}, {}, out);
  }
  if ((kind == Builtin::int_ || kind == Builtin::float_) && args.size() == 1 && args[0]->kind == VK::Sym) {
    handled = true;
    if (kind == Builtin::int_ && !is_float(args[0])) return out = args[0], std::nullopt;  // an int already
    if (kind == Builtin::float_ && is_float(args[0])) return out = args[0], std::nullopt;
    Ref target = torch_fn(kind == Builtin::int_ ? "sym_int" : "sym_float");
    if (!target) return PyErr_Clear(), t.brk(f, "DV0021", "torch.sym_int / sym_float are missing");
    return t.graph_call(f, target, "", {args[0]}, {}, out);
  }
  if (kind == Builtin::abs_ && args.size() == 1 && args[0]->kind == VK::Sym) {
    handled = true;
    return t.graph_call(f, Ref::borrow(fn), "", {args[0]}, {}, out);
  }
  // math.sqrt, cos, tanh ... of a symbolic number: torch._sym_sqrt ... in the graph (a SymFloat), as
  // TorchDynamo keeps them. (Never destroyed: its references outlive the interpreter, whose
  // finalization a C++ static's destructor would follow.)
  static const auto& sym_math = *[] {
    auto* m = new std::unordered_map<PyObject*, Ref>();
    for (const char* name : {"sqrt", "cos", "cosh", "sin", "sinh", "tan", "tanh", "asin", "acos", "atan", "log2"}) {
      PyObject* mf = kept_attr("math", name);
      Ref tf = Ref::steal(PyObject_GetAttrString(py().torch.get(), ("_sym_" + std::string(name)).c_str()));
      if (mf && tf) m->emplace(mf, tf);
      PyErr_Clear();
    }
    return m;
  }();
  if (auto it = sym_math.find(fn); it != sym_math.end() && args.size() == 1 && args[0]->kind == VK::Sym) {
    handled = true;
    return t.graph_call(f, it->second, "", {args[0]}, {}, out);
  }
  if ((kind == Builtin::max_ || kind == Builtin::min_) && args.size() >= 2) {
    handled = true;  // folded pairwise, left to right, as max(a, b, c) compares
    Ref target = torch_fn(kind == Builtin::max_ ? "sym_max" : "sym_min");
    if (!target) return PyErr_Clear(), t.brk(f, "DV0021", "torch.sym_max / sym_min are missing");
    VPtr acc = args[0];
    for (size_t i = 1; i < args.size(); ++i) {
      VPtr r;
      if (Translator::Status s = t.graph_call(f, target, "", {acc, args[i]}, {}, r)) return s;
      acc = r;
    }
    out = acc;
    return std::nullopt;
  }
  return std::nullopt;
}

Translator::Status call_builtin(Translator& t, Frame& f, PyObject* fn, std::vector<VPtr>& args,
                                std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled) {
  if (!PyCFunction_Check(fn) && !PyType_Check(fn)) return std::nullopt;
  using Status = Translator::Status;
  // A class body (LOAD_BUILD_CLASS; MAKE_FUNCTION; CALL): TorchDynamo breaks at the call, so the
  // frame splits there and the transformed code builds the class (its body function rebuilt with
  // the frame's cells).
  if (f.builtins && PyDict_Check(f.builtins.get()) && fn == PyDict_GetItemString(f.builtins.get(), "__build_class__"))
    return t.brk(f, "DV0007", "class definition inside the compiled function (__build_class__)",
                 "define the class outside the compiled function (torch.compile breaks at a class body too)");
  static PyObject* getframe = kept_attr("sys", "_getframe");
  if (fn == getframe && getframe) {  // the frame object, as eager sees it, exists only when the frame runs as it is
    Status s = t.brk(f, "DV0004", "call to sys._getframe()", "read the frame outside the compiled function");
    if (s) s->whole_frame = true;
    return s;
  }
  if (Status s = t.make_lazy_itertool(f, fn, args, kwargs, out, handled); s || handled) return s;
  if (Status s = call_itertools(t, f, fn, args, kwargs, out, handled); s || handled) return s;
  const size_t nargs = args.size();
  if (fn == py().functools_reduce.get() && (nargs == 2 || nargs == 3) && kwargs.empty()) {
    handled = true;
    VPtr it;
    if (Status s = t.iterate(f, args[1], it)) return s;
    size_t i = it->pos;
    VPtr acc = nargs == 3 ? args[2] : nullptr;
    if (!acc) {
      if (i >= it->items.size()) return t.brk(f, "DV0010", "reduce() of an empty sequence with no initial value");
      acc = it->items[i++];
    }
    for (; i < it->items.size(); ++i) {
      VPtr r;
      if (Status s = t.call(f, args[0], {acc, it->items[i]}, {}, r)) return s;
      acc = r;
    }
    it->pos = it->items.size();  // an iterator passed in is used up
    out = acc;
    return std::nullopt;
  }
  if (fn == py().functools_partial.get() && nargs >= 1 && args[0]->obj && PyCallable_Check(args[0]->obj.get()) &&
      (args[0]->kind == VK::Object || args[0]->kind == VK::Const ||
       (args[0]->kind == VK::Function && PyFunction_Check(args[0]->obj.get()) && !args[0]->source))) {
    // partial(F.leaky_relu, negative_slope=0.2): made now when its arguments are constants; calls
    // unwrap it (translator's call).
    bool consts = true;
    for (size_t i = 1; i < nargs; ++i) consts &= args[i]->kind == VK::Const;
    for (auto& kv : kwargs) consts &= kv.second->kind == VK::Const;
    if (consts) {
      handled = true;
      Ref pargs = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(nargs)));
      for (size_t i = 0; i < nargs; ++i) PyTuple_SET_ITEM(pargs.get(), i, Ref::borrow(args[i]->obj.get()).release());
      Ref pkw = Ref::steal(PyDict_New());
      for (auto& [k, v] : kwargs) PyDict_SetItemString(pkw.get(), k.c_str(), v->obj.get());
      Ref p = Ref::steal(PyObject_Call(fn, pargs.get(), pkw.get()));
      if (!p) {
        PyErr_Clear();
        return t.brk(f, "DV0010", "functools.partial() raised");
      }
      out = t.make(VK::Object);
      out->obj = p;
      return std::nullopt;
    }
  }
  if (fn == py().functools_partial.get() && nargs >= 1 &&
      (args[0]->kind == VK::Function || args[0]->kind == VK::Method || args[0]->kind == VK::NNModule ||
       args[0]->kind == VK::Partial || args[0]->kind == VK::Instance ||
       (args[0]->kind == VK::Object && args[0]->obj && PyCallable_Check(args[0]->obj.get())))) {
    // partial over values of the trace (a tensor, a method, a function made here): a Partial value
    handled = true;
    out = t.make_partial(args[0], std::vector<VPtr>(args.begin() + 1, args.end()), kwargs);
    return std::nullopt;
  }
  const Builtin kind = builtin_kind(fn);
  auto is = [&](Builtin k) { return kind == k; };
  handled = true;
  const size_t n = args.size();
  auto python_type_of = [&](const VPtr& v) -> PyObject* {
    return ops(v->kind).python_type(t, v);
  };
  if (is(Builtin::print_)) return t.brk(f, "DV0015", "call to print()", "printing is a side effect outside the graph");
  if (is(Builtin::eval_) || is(Builtin::exec_)) {
    // never run while tracing (its code would run once, in another frame); without namespaces of
    // its own it reads the calling frame's, which only the frame itself has
    Status s = t.brk(f, "DV0004", std::string("call to ") + (is(Builtin::eval_) ? "eval()" : "exec()"),
                     "evaluate the code outside the compiled function (TorchDynamo does not trace it either)");
    if (s && n < 2 && f.depth == 0) s->whole_frame = true;
    return s;
  }
  if ((is(Builtin::locals_) || is(Builtin::vars_) || is(Builtin::dir_)) && n == 0 && kwargs.empty()) {
    // locals() / vars(): a new dict of the frame's bound variables (free variables too), in the
    // code's order, as CPython's snapshot of a function's locals; dir(): their sorted names.
    // (Never run where the trace is: that frame is not this one.)
    PyObject* names = reinterpret_cast<PyCodeObject*>(f.facts->code.get())->co_localsplusnames;
    VPtr d = t.make(VK::Dict);
    Ref bound = Ref::steal(PyList_New(0));
    for (size_t i = 0; i < f.locals.size() && static_cast<Py_ssize_t>(i) < PyTuple_GET_SIZE(names); ++i) {
      if (Status s = t.read_local(f, static_cast<int>(i))) return s;
      VPtr v = f.locals[i];
      if (v && v->kind == VK::Cell) v = v->items.empty() ? nullptr : v->items[0];
      if (!v || v->kind == VK::Null) continue;
      dict_set(*d, Ref::borrow(PyTuple_GET_ITEM(names, static_cast<Py_ssize_t>(i))), v);
      PyList_Append(bound.get(), PyTuple_GET_ITEM(names, static_cast<Py_ssize_t>(i)));
    }
    if (!is(Builtin::dir_)) {
      out = d;
      return std::nullopt;
    }
    if (PyList_Sort(bound.get()) < 0) return PyErr_Clear(), t.brk(f, "DV0010", "dir() could not sort the names");
    out = t.wrap(bound, nullptr, f);
    return out ? std::nullopt : t.brk(f, "DV0013", "dir() of the frame's names");
  }
  if (is(Builtin::globals_) && n == 0 && kwargs.empty()) {  // the frame's globals dict itself, read and written as a dict from outside
    out = t.wrap(f.globals, f.globals_source ? f.globals_source : Source::held(f.globals, globals_text(f.globals.get())), f);
    return out ? std::nullopt : t.brk(f, "DV0005", "globals() cannot be traced");
  }
  if (is(Builtin::id_) && n == 1 && kwargs.empty()) return t.call_id(f, args[0], out);
  if (is(Builtin::vars_) && n == 1 && kwargs.empty() && args[0]->kind == VK::Instance) {  // its __dict__, live
    out = args[0]->attrs;
    return std::nullopt;
  }
  if (is(Builtin::vars_) && n == 1 && kwargs.empty() && (args[0]->kind == VK::Object || args[0]->kind == VK::NNModule) &&
      args[0]->obj && !PyType_Check(args[0]->obj.get()) && !PyModule_Check(args[0]->obj.get()))
    return t.getattr(f, args[0], "__dict__", out);  // an object's from outside, as its __dict__ (Translator::getattr)
  if (((is(Builtin::setattr_) && n == 3) || (is(Builtin::delattr_) && n == 2)) && kwargs.empty()) {  // as obj.name = v / del obj.name
    if (args[1]->kind != VK::Const || !PyUnicode_Check(args[1]->obj.get()))
      return t.brk(f, "DV0008", std::string(n == 3 ? "setattr" : "delattr") + "() with a computed name");
    const std::string name = str_of(args[1]->obj.get());
    if (Status s = n == 3 ? t.store_attr(f, args[0], name, args[2]) : t.delete_attr(f, args[0], name)) return s;
    out = t.constant(Ref::borrow(Py_None));
    return std::nullopt;
  }
  if (is(Builtin::len_) && n == 1) {
    const VPtr& v = args[0];
    Py_ssize_t len = -1;
    if (v->lazy && (v->kind == VK::Tuple || v->kind == VK::List)) {  // its length alone (realize_call left it lazy)
      len = t.builder.sequence_length(v, f);
      out = t.constant_steal(PyLong_FromSsize_t(len));
      return std::nullopt;
    }
    if (v->lazy && v->kind == VK::Dict && (len = t.builder.dict_length(v, f)) >= 0) {  // its key set (realize_call left it lazy)
      out = t.constant_steal(PyLong_FromSsize_t(len));
      return std::nullopt;
    }
    if (v->kind == VK::Tuple || v->kind == VK::List || v->kind == VK::Dict || v->kind == VK::Set) len = static_cast<Py_ssize_t>(v->items.size());
    else if (v->kind == VK::DictView) len = static_cast<Py_ssize_t>(v->self->items.size());
    else if (v->kind == VK::NdArray) {
      std::vector<VPtr> none;
      return t.ndarray_method(f, v, "__len__", none, kwargs, out);
    }
    else if (v->kind == VK::Tensor) {
      Ref shape = Ref::steal(PyObject_GetAttrString(v->obj.get(), "shape"));
      if (!shape || PyTuple_GET_SIZE(shape.get()) == 0) return t.brk(f, "DV0010", "len() of a 0-d tensor");
      if (is_sym(PyTuple_GET_ITEM(shape.get(), 0)))  // a symbolic size: len(x) is l_x_.size(0)
        return t.meta_result(f, v, "size", {t.constant_steal(PyLong_FromLong(0))}, Ref::borrow(PyTuple_GET_ITEM(shape.get(), 0)), out);
      len = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape.get(), 0));
    } else if (v->kind == VK::Const || v->kind == VK::NNModule || (v->kind == VK::Object && frozen_object(v->obj.get()))) {
      // ModuleList, Sequential, ModuleDict: as many as its children -- the trace's, where it changed them
      const bool children = v->kind == VK::NNModule && children_container(v->obj.get());
      if (const Value* changed = children ? changed_children(t, v->obj.get()) : nullptr) {
        len = static_cast<Py_ssize_t>(changed->items.size());
      } else {
        if (children && v->source) guard_module_dict_keys(t, f, v->obj.get(), v->source, "_modules");
        len = PyObject_Length(v->obj.get());
        if (len < 0) return t.raise_current(f, "len()");
      }
    } else if (v->kind == VK::Instance || (v->kind == VK::Object && user_dunder_fn(v, "__len__"))) {
      // its __len__, inlined (an instance's, or an object's of a Python class reached from the frame):
      // an int, or a dynamic size (len(boxes) is boxes.tensor.shape[0])
      bool called = false;
      if (v->kind == VK::Object) {
        if (Status s = t.call_python(f, Ref::borrow(user_dunder_fn(v, "__len__")), {v}, out)) return s;
        called = true;
      } else if (Status s = t.call_dunder(f, v, "__len__", {}, out, called)) {
        return s;
      }
      if (called && out->kind == VK::Const && PyLong_Check(out->obj.get()) && !PyBool_Check(out->obj.get())) {
        if (PyLong_AsLong(out->obj.get()) < 0) return t.raise_new(f, PyExc_ValueError, "__len__() should return >= 0");
        return std::nullopt;
      }
      if (called && out->kind == VK::Sym && python_type_of(out) == reinterpret_cast<PyObject*>(&PyLong_Type)) return std::nullopt;
      if (!called && v->contents) {  // a dict subclass: its items
        out = t.constant_steal(PyLong_FromSize_t(v->contents->items.size()));
        return std::nullopt;
      }
      return t.brk(f, "DV0007", std::string("len() of a ") + reinterpret_cast<PyTypeObject*>(v->obj.get())->tp_name);
    } else if (v->kind == VK::Object && v->source && PyList_Check(v->obj.get()) && list_own(Py_TYPE(v->obj.get()), "__len__")) {
      // a list subclass passed in (list's own __len__): its length, guarded
      len = PyList_GET_SIZE(v->obj.get());
      if (Guard* g = t.add_guard(GuardKind::LENGTH_CHECK, v->source, {}, f, "len(" + v->source->text() + ") == " + std::to_string(len)))
        g->length = len;
    } else if (outside_dict(v, "__len__")) {  // a Counter reached from the frame: guarded by its keys
      std::vector<VPtr> none;
      return t.outside_dict_read(f, v, "__len__", none, kwargs, out);
    } else return t.brk(f, "DV0007", std::string("len() of a ") + vk_name(v->kind));
    out = t.constant_steal(PyLong_FromSsize_t(len));
    return std::nullopt;
  }
  if (is(Builtin::isinstance_) && !kwargs.empty()) return t.raise_new(f, PyExc_TypeError, "isinstance() takes no keyword arguments");
  if (is(Builtin::isinstance_) && n == 2 && args[0]->kind == VK::Tensor) {
    // torch.FloatTensor, torch.cuda.LongTensor ...: legacy tensor types, whose isinstance asks the
    // tensor's dtype and device (their metaclass's __instancecheck__), both guarded with the tensor
    std::vector<PyObject*> classes;
    if (args[1]->kind == VK::Tuple)
      for (const VPtr& c : args[1]->items) classes.push_back(c->obj.get());
    else
      classes.push_back(args[1]->obj.get());
    bool legacy = false;
    for (PyObject* c : classes) legacy |= c && std::strcmp(Py_TYPE(c)->tp_name, "torch.tensortype") == 0;
    if (legacy) {
      PyObject* tp = python_type_of(args[0]);
      Ref dtype = Ref::steal(PyObject_GetAttrString(args[0]->obj.get(), "dtype"));
      Ref device = args[0]->device ? args[0]->device : Ref::steal(PyObject_GetAttrString(args[0]->obj.get(), "device"));
      Ref device_type = device ? Ref::steal(PyObject_GetAttrString(device.get(), "type")) : Ref();
      if (!tp || !dtype || !device_type) return PyErr_Clear(), t.brk(f, "DV0007", "isinstance() of a tensor against a legacy tensor type");
      bool r = false;
      for (PyObject* c : classes) {
        if (!c) return t.brk(f, "DV0007", "isinstance() of an unsupported value");
        if (std::strcmp(Py_TYPE(c)->tp_name, "torch.tensortype") != 0) {
          const int sub = PyObject_IsSubclass(tp, c);
          if (sub < 0) return t.brk(f, "DV0010", "isinstance() raised");
          r |= sub == 1;
          continue;
        }
        Ref c_dtype = Ref::steal(PyObject_GetAttrString(c, "dtype"));
        Ref c_cuda = Ref::steal(PyObject_GetAttrString(c, "is_cuda"));
        Ref c_sparse = Ref::steal(PyObject_GetAttrString(c, "is_sparse"));
        if (!c_dtype || !c_cuda || !c_sparse) return PyErr_Clear(), t.brk(f, "DV0007", "isinstance() against a legacy tensor type");
        if (c_sparse.get() == Py_True) return t.brk(f, "DV0007", "isinstance() against a sparse legacy tensor type");
        r |= c_dtype.get() == dtype.get() && str_of(device_type.get()) == (c_cuda.get() == Py_True ? "cuda" : "cpu");
      }
      out = t.constant(Ref::borrow(r ? Py_True : Py_False));
      return std::nullopt;
    }
  }
  if (is(Builtin::isinstance_) && n == 2) {
    PyObject* tp = python_type_of(args[0]);
    Ref classes;
    if (args[1]->kind == VK::Tuple) {
      classes = Ref::steal(PyTuple_New(args[1]->items.size()));
      for (size_t i = 0; i < args[1]->items.size(); ++i) PyTuple_SET_ITEM(classes.get(), i, Ref::borrow(args[1]->items[i]->obj.get()).release());
    } else {
      classes = args[1]->obj;
    }
    if (!tp || !classes) return t.brk(f, "DV0007", "isinstance() of an unsupported value");
    // A class whose metaclass answers isinstance in Python code of its own (not type's, not abc's or
    // torch's, which go by the type): that __instancecheck__, inlined
    auto own_check = [](PyObject* c) -> PyObject* {
      if (!PyType_Check(c) || Py_IS_TYPE(c, &PyType_Type)) return nullptr;
      static PyObject* name = PyUnicode_InternFromString("__instancecheck__");
      PyObject* m = _PyType_Lookup(Py_TYPE(c), name);
      if (!m || !PyFunction_Check(m)) return nullptr;
      PyObject* mod = PyFunction_GET_MODULE(m);
      const char* utf8 = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : nullptr;
      if (!utf8) PyErr_Clear();
      if (utf8) {
        const std::string mn = utf8;
        if (mn == "abc" || mn == "_py_abc" || mn.rfind("torch", 0) == 0) return nullptr;
      }
      return m;
    };
    if (PyTuple_Check(classes.get())) {
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(classes.get()); ++i)
        if (own_check(PyTuple_GET_ITEM(classes.get(), i)))
          return t.brk(f, "DV0007", "isinstance() against a tuple holding a class whose metaclass defines __instancecheck__");
    } else if (PyObject* check = own_check(classes.get())) {
      VPtr r;
      if (Status s = t.call_python(f, Ref::borrow(check), {args[1], args[0]}, r)) return s;
      if (r->kind != VK::Const) return t.brk(f, "DV0007", "isinstance(): the metaclass's __instancecheck__ gave a " + std::string(vk_name(r->kind)));
      const int b = PyObject_IsTrue(r->obj.get());
      if (b < 0) return PyErr_Clear(), t.brk(f, "DV0010", "isinstance(): bool() of __instancecheck__'s answer raised");
      out = t.constant(Ref::borrow(b ? Py_True : Py_False));
      return std::nullopt;
    }
    int r = PyObject_IsSubclass(tp, classes.get());
    if (r < 0) return t.brk(f, "DV0010", "isinstance() raised");
    out = t.constant(Ref::borrow(r ? Py_True : Py_False));
    return std::nullopt;
  }
  if (is(Builtin::issubclass_) && n == 2 && kwargs.empty()) {
    // issubclass(cls, classes) of classes known by identity (pytree's namedtuple test): asked of Python
    auto known_class = [](const VPtr& v) { return (v->kind == VK::Object || v->kind == VK::Const) && v->obj && PyType_Check(v->obj.get()); };
    Ref classes;
    if (args[1]->kind == VK::Tuple) {
      classes = Ref::steal(PyTuple_New(args[1]->items.size()));
      for (size_t i = 0; i < args[1]->items.size(); ++i) {
        if (!known_class(args[1]->items[i])) return t.brk(f, "DV0007", "issubclass() of an unsupported value");
        PyTuple_SET_ITEM(classes.get(), i, Ref::borrow(args[1]->items[i]->obj.get()).release());
      }
    } else if (known_class(args[1])) {
      classes = args[1]->obj;
    }
    if (!known_class(args[0]) || !classes) return t.brk(f, "DV0007", "issubclass() of an unsupported value");
    int r = PyObject_IsSubclass(args[0]->obj.get(), classes.get());
    if (r < 0) return t.brk(f, "DV0010", "issubclass() raised: " + repr_of(take_error().get()));
    out = t.constant(Ref::borrow(r ? Py_True : Py_False));
    return std::nullopt;
  }
  if ((is(Builtin::getattr_) || is(Builtin::hasattr_)) && (n == 2 || n == 3) && args[1]->kind == VK::Const) {
    std::string name = str_of(args[1]->obj.get());
    if (is(Builtin::hasattr_) && args[0]->kind == VK::Tensor && PyUnicode_Check(args[1]->obj.get()) &&
        _PyType_Lookup(reinterpret_cast<PyTypeObject*>(py().torch_Tensor.get()), args[1]->obj.get())) {  // what a plain tensor's type defines
      out = t.constant(Ref::borrow(Py_True));
      return std::nullopt;
    }  // (else its own __dict__, guarded: the tensor's getattr)
    Status s = t.getattr(f, args[0], name, out);
    // (an AttributeError raised in the trace too: a Python __getattr__'s, as hasattr() sees it)
    const bool missing = s && (s->id == kNoAttributeId || (s->exc && PyObject_IsInstance(s->exc.get(), PyExc_AttributeError) == 1));
    PyErr_Clear();
    if (s && !missing) return s;  // the attribute may exist but cannot be traced: not a False
    if (is(Builtin::hasattr_)) {
      out = t.constant(Ref::borrow(missing ? Py_False : Py_True));
      return std::nullopt;
    }
    if (missing && n == 3) {
      out = args[2];
      return std::nullopt;
    }
    return s;
  }
  if (is(Builtin::next_) && (n == 1 || n == 2) && kwargs.empty() && args[0]->kind != VK::Iter && user_next(args[0])) {
    // next(obj) of an iterator object of a Python class: its __next__ inlined; with a default,
    // the StopIteration it raises gives the default
    VPtr r;
    Status s = t.call_python(f, Ref::borrow(user_next(args[0])), {args[0]}, r);
    if (s && n == 2 && s->exc && PyErr_GivenExceptionMatches(s->exc.get(), PyExc_StopIteration)) {
      out = args[1];
      return std::nullopt;
    }
    if (s) return s;
    out = r;
    return std::nullopt;
  }
  if (is(Builtin::next_) && (n == 1 || n == 2) && args[0]->kind == VK::Iter) {
    VPtr it = args[0];
    if (Status s = t.pull(f, it, it->pos + 1)) return s;
    if (it->pos < it->items.size()) {
      out = it->items[it->pos++];
      return std::nullopt;
    }
    if (n == 2) {
      out = args[1];
      return std::nullopt;
    }
    return t.raise(f, Ref::steal(PyObject_CallNoArgs(PyExc_StopIteration)), "next()");
  }
  if ((is(Builtin::map_) || is(Builtin::filter_)) && n >= 2 && kwargs.empty()) {
    // Lazy, as Python's: the function runs as items are taken (Translator::pull), so it sees the
    // state of that moment (y.extend(map(f, xs)) where f reads y), and each item is made once.
    if (is(Builtin::filter_) && n != 2) return t.brk(f, "DV0007", "filter() takes two arguments");
    VPtr r = t.make(VK::Iter);
    r->name = is(Builtin::map_) ? "map" : "filter";
    r->self = args[0];
    r->flag = true;  // lazy: items made so far; `cells` the source iterators
    for (size_t i = 1; i < n; ++i) {
      VPtr it;
      if (Status s = t.iterate(f, args[i], it, /*materialize=*/false)) return s;
      r->cells.push_back(it);
    }
    out = r;
    return std::nullopt;
  }
  if (is(Builtin::type_) && n == 1) {
    PyObject* tp = python_type_of(args[0]);
    if (!tp) return t.brk(f, "DV0007", "type() of an unsupported value");
    VPtr v = t.make(VK::Object);
    v->obj = Ref::borrow(tp);
    // type(self) of an object from the frame: its class as reached from it, so that what is read of
    // the class (type(self).calls, a class-level setting) is guarded as a class attribute
    if (args[0]->source && (args[0]->kind == VK::Object || args[0]->kind == VK::NNModule))
      v->source = Source::attr(args[0]->source, "__class__");
    out = v;
    return std::nullopt;
  }
  if (is(Builtin::callable_) && n == 1) {
    bool c = args[0]->kind == VK::Function || args[0]->kind == VK::Method || args[0]->kind == VK::NNModule ||
             ((args[0]->kind == VK::Object || args[0]->kind == VK::Const) && PyCallable_Check(args[0]->obj.get()));
    out = t.constant(Ref::borrow(c ? Py_True : Py_False));
    return std::nullopt;
  }
  if (is(Builtin::iter_) && n == 1 && kwargs.empty() && args[0]->kind != VK::Iter && user_iter(args[0])) {
    // iter(obj) of an object of a Python class: its __iter__ inlined. An iterator object it gives is
    // that object (iter(it) is it where __iter__ returns self), taken by its __next__ when looped
    // over or given to next()
    VPtr r;
    if (Status s = t.call_python(f, Ref::borrow(user_iter(args[0])), {args[0]}, r)) return s;
    if (r->kind != VK::Iter && user_next(r)) {
      out = r;
      return std::nullopt;
    }
    if (r->kind != VK::Iter) return t.brk(f, "DV0016", "__iter__ gave a " + std::string(vk_name(r->kind)));
    return t.iterate(f, r, out, /*materialize=*/true);
  }
  if (is(Builtin::iter_) && n == 1 && kwargs.empty() && args[0]->kind == VK::List) return list_iterator(t, f, args[0], out);
  if (is(Builtin::iter_) && n == 1 && args[0]->kind == VK::Iter) {  // iter(it) is it
    out = args[0];
    return std::nullopt;
  }
  // zip/enumerate over an endless iterator (itertools.count()) or a lazy one (a generator, map: its
  // items are made as the zip is taken, interleaved as in eager): lazy, item by item.
  auto lazy_arg = [&](const VPtr& a) { return a->kind == VK::Iter && a->flag; };
  if ((is(Builtin::enumerate_) || is(Builtin::any_) || is(Builtin::all_)) && n >= 1) {
    // enumerate(obj), any(obj), all(obj) of an object of a Python class: over its iterator, taken
    // lazily (its __next__ runs between the loop's bodies; any/all stop at the first item that
    // decides, leaving the rest untaken), as in eager
    VPtr it;
    if (Status s = iterate_user_object(t, f, args[0], it)) return s;
    if (it) args[0] = it;
  }
  if (is(Builtin::enumerate_) && n >= 1 && n <= 2 && args[0]->kind == VK::List) {
    // enumerate(lst): over the list's live iterator, so that items the loop appends are reached
    VPtr it;
    if (Status s = list_iterator(t, f, args[0], it)) return s;
    args[0] = it;
  }
  if (is(Builtin::enumerate_) && n >= 1 && n <= 2 && lazy_arg(args[0])) {
    VPtr start = n == 2 ? args[1] : nullptr;
    for (auto& [k, v] : kwargs) {
      if (k != "start" || start) return t.brk(f, "DV0007", "enumerate() with keyword " + k);
      start = v;
    }
    if (start && (start->kind != VK::Const || !PyLong_Check(start->obj.get()))) return t.brk(f, "DV0007", "enumerate() with a non-constant start");
    VPtr r = t.make(VK::Iter);
    r->name = "enumerate";
    r->flag = true;
    r->cells.push_back(args[0]);
    r->defaults = start ? start : t.constant_steal(PyLong_FromLong(0));
    out = r;
    return std::nullopt;
  }
  // zip: lazy over any iterables, as Python's (an iterator passed in is advanced only
  // as the zip is taken); one alive across a break is rebuilt as zip(...) of its sources.
  if (is(Builtin::zip_) && kwargs.empty()) return lazy_over(t, f, "zip", args, out);
  if (is(Builtin::zip_) && kwargs.size() == 1 && kwargs[0].first == "strict" && kwargs[0].second->kind == VK::Const) {
    // zip(..., strict=b): the same, raising ValueError where the lengths turn out unequal (kwdefaults: strict)
    if (Status s = lazy_over(t, f, "zip", args, out)) return s;
    if (PyObject_IsTrue(kwargs[0].second->obj.get()) == 1) out->kwdefaults = kwargs[0].second;
    return std::nullopt;
  }
  if (is(Builtin::enumerate_)) {  // enumerate(xs[, start]) / enumerate(xs, start=k): a constant int start
    const VPtr* start = n == 2 ? &args[1] : nullptr;
    for (auto& [k, v] : kwargs) start = k == "start" ? &v : start;
    if (n < 1 || n > 2 || (start && ((*start)->kind != VK::Const || !PyLong_Check((*start)->obj.get()))))
      return t.brk(f, "DV0007", "enumerate() with a start that is not a constant int");
  }
  if (is(Builtin::enumerate_) || is(Builtin::zip_) || is(Builtin::reversed_) || is(Builtin::sorted_) || is(Builtin::tuple_) || is(Builtin::list_) || is(Builtin::iter_)) {
    std::vector<VPtr> seqs, iters;
    for (auto& a : args) {
      if (is(Builtin::enumerate_) && &a != &args[0]) continue;  // its start, not an iterable
      VPtr it;
      if (Status s = t.iterate(f, a, it)) return s;
      std::vector<VPtr> rest(it->items.begin() + static_cast<long>(it->pos), it->items.end());
      VPtr tmp = t.make(VK::Tuple);
      tmp->items = std::move(rest);
      seqs.push_back(tmp);
      iters.push_back(it);
    }
    // What the call consumes of iterators passed to it (a map or generator taken twice is empty the
    // second time): zip stops at the shortest, having taken one more item from those before it.
    if (is(Builtin::zip_)) {
      size_t m = SIZE_MAX, first_short = iters.size();
      for (size_t i = 0; i < seqs.size(); ++i)
        if (seqs[i]->items.size() < m) m = seqs[i]->items.size(), first_short = i;
      for (size_t i = 0; i < iters.size(); ++i)
        iters[i]->pos = std::min(iters[i]->items.size(), iters[i]->pos + m + (i < first_short ? 1 : 0));
    } else if (!is(Builtin::iter_)) {
      for (auto& it : iters) it->pos = it->items.size();
    }
    VPtr r = t.make(is(Builtin::list_) ? VK::List : is(Builtin::tuple_) ? VK::Tuple : VK::Iter);
    if (is(Builtin::enumerate_)) {
      r->name = "enumerate";  // a generator in TorchDynamo: not rebuilt across a break (iterator.cpp)
      if (seqs.empty()) return t.brk(f, "DV0007", "enumerate() needs an argument");
      long start = 0;
      if (n == 2 && args[1]->kind == VK::Const) start = PyLong_AsLong(args[1]->obj.get());
      for (auto& [k, v] : kwargs) if (k == "start" && v->kind == VK::Const) start = PyLong_AsLong(v->obj.get());
      for (size_t i = 0; i < seqs[0]->items.size(); ++i) {
        VPtr pair = t.make(VK::Tuple);
        pair->items = {t.constant_steal(PyLong_FromLong(start + static_cast<long>(i))), seqs[0]->items[i]};
        r->items.push_back(pair);
      }
    } else if (is(Builtin::zip_)) {
      size_t m = seqs.empty() ? 0 : SIZE_MAX;
      for (auto& s : seqs) m = std::min(m, s->items.size());
      for (auto& kv : kwargs)  // (strict= of a constant is lazy_over's, above)
        return t.brk(f, "DV0007", "zip() with keyword " + kv.first);
      for (size_t i = 0; i < m; ++i) {
        VPtr tup = t.make(VK::Tuple);
        for (auto& s : seqs) tup->items.push_back(s->items[i]);
        r->items.push_back(tup);
      }
    } else if (is(Builtin::reversed_)) {
      if (seqs.size() != 1) return t.brk(f, "DV0007", "reversed() takes one argument");
      r->items.assign(seqs[0]->items.rbegin(), seqs[0]->items.rend());
      // (its type: reversed(list) is a list_reverseiterator, reversed(tuple) a reversed object; of
      // anything else, not known)
      if (args[0]->kind == VK::List && !args[0]->obj) r->name = "list_reverseiterator";
      else if ((args[0]->kind == VK::Tuple && !args[0]->obj) || (args[0]->kind == VK::Const && PyTuple_CheckExact(args[0]->obj.get())))
        r->name = "reversed";
    } else if (is(Builtin::sorted_)) {
      // sorted(xs, key=k, reverse=b): by constant keys (the items themselves, or what k gives for
      // each, a tensor included), stable as Python's sort.
      if (seqs.size() != 1) return t.brk(f, "DV0007", "sorted() takes one iterable");
      VPtr key_fn;
      bool reverse = false;
      for (auto& [k, v] : kwargs) {
        if (k == "key" && !(v->kind == VK::Const && v->obj.get() == Py_None)) key_fn = v;
        else if (k == "reverse" && v->kind == VK::Const) reverse = PyObject_IsTrue(v->obj.get()) == 1;
        else if (k != "key") return t.brk(f, "DV0007", "sorted() with keyword " + k);
      }
      const auto& items = seqs[0]->items;
      std::vector<VPtr> keys;
      for (const VPtr& x : items) {
        VPtr kv = x;
        if (key_fn) {
          if (Status s = t.call(f, key_fn, {x}, {}, kv)) return s;
          if (Status s = t.read_result(f, kv)) return s;
        }
        bool const_tuple = kv->kind == VK::Tuple;  // key=lambda n: (len(n), n): a tuple of constants
        for (const VPtr& e : kv->items) const_tuple = const_tuple && e->kind == VK::Const;
        if (const_tuple && kv->obj && tuple_class(kv->obj.get())) {
          // a tuple subclass's object ordered by its own __lt__ (Python code): where that order is
          // partial, the result is what CPython's sort algorithm makes of it, which differs by version
          static PyObject* lt_name = PyUnicode_InternFromString("__lt__");
          PyObject* lt = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(kv->obj.get()), lt_name);
          if (lt && PyFunction_Check(lt))
            return t.brk(f, "DV0007", std::string("sorted() by ") + reinterpret_cast<PyTypeObject*>(kv->obj.get())->tp_name +
                                          " objects, ordered by their own __lt__");
        }
        if (const_tuple) {
          Ref tup = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(kv->items.size())));
          for (size_t i = 0; tup && i < kv->items.size(); ++i) PyTuple_SET_ITEM(tup.get(), i, Ref::borrow(kv->items[i]->obj.get()).release());
          if (tup) kv = t.constant(tup);
        }
        if (kv->kind != VK::Const) return t.brk(f, "DV0007", "sorted() by values that are not constants (tensor values?)");
        keys.push_back(kv);
      }
      std::vector<size_t> order(items.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      bool raised = false;
      auto less = [&](size_t a, size_t b) {
        const int lt = PyObject_RichCompareBool(keys[reverse ? b : a]->obj.get(), keys[reverse ? a : b]->obj.get(), Py_LT);
        if (lt < 0) raised = true, PyErr_Clear();
        return lt == 1;
      };
      std::stable_sort(order.begin(), order.end(), less);
      if (raised) return t.brk(f, "DV0010", "sorted() raised comparing keys");
      r = t.make(VK::List);
      for (size_t i : order) r->items.push_back(items[i]);
    } else {
      if (seqs.size() > 1) return t.brk(f, "DV0007", "too many arguments");
      if (!seqs.empty()) r->items = seqs[0]->items;
    }
    out = r;
    return std::nullopt;
  }
  if (is(Builtin::dict_)) {
    VPtr d = t.make(VK::Dict);
    if (n == 1 && args[0]->kind == VK::Dict) {
      d->keys = args[0]->keys;
      d->items = args[0]->items;
    } else if (n == 1 && args[0]->kind == VK::Instance && args[0]->contents && args[0]->contents->kind == VK::Dict) {
      if (Status s = dict_subclass_entries(t, f, args[0], d->keys, d->items, "dict()")) return s;
    } else if (n == 1 && args[0]->kind == VK::Instance && args[0]->obj && PyType_Check(args[0]->obj.get()) &&
               [&] {
                 static PyObject* keys_name = PyUnicode_InternFromString("keys");
                 PyObject* k = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(args[0]->obj.get()), keys_name);
                 return k && PyFunction_Check(k);
               }()) {
      // a mapping of a Python class (a ChainMap, a user's Mapping): dict() reads its keys(), then
      // each m[key], as CPython's dict_merge does for an object with a keys method
      VPtr keys_fn, keys, it;
      if (Status s = t.getattr(f, args[0], "keys", keys_fn)) return s;
      if (Status s = t.call(f, keys_fn, {}, {}, keys)) return s;
      if (Status s = t.iterate(f, keys, it)) return s;
      if (Status s = t.pull(f, it, SIZE_MAX)) return s;
      for (; it->pos < it->items.size(); ++it->pos) {
        const VPtr k = it->items[it->pos];
        PyObject* key = t.key_of(k);
        if (!key) return t.brk(f, "DV0007", "dict() of a mapping whose keys are not constants, tensors or modules");
        VPtr v;
        if (Status s = t.subscr(f, args[0], k, v)) return s;
        if (!dict_set(*d, Ref::borrow(key), v)) return t.brk(f, "DV0010", "comparing dict keys raised");
      }
    } else if (n == 1) {
      VPtr it;
      if (Status s = t.iterate(f, args[0], it)) return s;
      for (; it->pos < it->items.size(); ++it->pos) {  // the items not taken yet; an iterator is used up
        const VPtr& pair = it->items[it->pos];
        PyObject* p = pair->kind == VK::Const ? pair->obj.get() : nullptr;
        if (p && PyTuple_CheckExact(p) && PyTuple_GET_SIZE(p) == 2 && const_key(PyTuple_GET_ITEM(p, 0))) {
          // a constant pair (a set of a dict view's items, a tuple of pairs)
          if (!dict_set(*d, Ref::borrow(PyTuple_GET_ITEM(p, 0)), t.constant(Ref::borrow(PyTuple_GET_ITEM(p, 1)))))
            return t.brk(f, "DV0010", "comparing dict keys raised");
          continue;
        }
        PyObject* key = pair->kind == VK::Tuple && pair->items.size() == 2 ? t.key_of(pair->items[0]) : nullptr;
        if (!key) return t.brk(f, "DV0007", "dict() of items that are not (key, value) pairs of a constant, tensor or module key");
        if (!dict_set(*d, Ref::borrow(key), pair->items[1])) return t.brk(f, "DV0010", "comparing dict keys raised");
      }
    } else if (n > 1) return t.brk(f, "DV0007", "dict() with several arguments");
    for (auto& [k, v] : kwargs) dict_set(*d, Ref::steal(PyUnicode_FromString(k.c_str())), v);
    out = d;
    return std::nullopt;
  }
  if (is(Builtin::sum_) && n >= 1 && n <= 2) {  // sum(iterable, start=0): start + each item, in order, as Python adds them
    VPtr acc = n == 2 ? args[1] : t.constant_steal(PyLong_FromLong(0));
    for (auto& [k, v] : kwargs) {
      if (k != "start" || n == 2) return t.brk(f, "DV0007", "sum() with keyword " + k);
      acc = v;
    }
    VPtr it;
    if (Status s = t.iterate(f, args[0], it)) return s;
    std::vector<VPtr> vals(it->items.begin() + static_cast<long>(it->pos), it->items.end());
    it->pos = it->items.size();  // an iterator is consumed
    for (auto& v : vals) {
      VPtr r;
      if (Status s = t.binary(f, 0, acc, v, r)) return s;
      acc = r;
    }
    out = acc;
    return std::nullopt;
  }
  auto key_or_default = [&] {
    for (auto& [k, v] : kwargs)
      if (k != "key" && k != "default") return false;
    return !kwargs.empty();
  };
  if ((is(Builtin::min_) || is(Builtin::max_)) && n >= 1 && key_or_default()) {
    // max(xs, key=k, default=d) / min(a, b, key=k): by the constant keys k gives (the items may be
    // tensors; without k, the items), the first extreme wins, as in Python
    VPtr key, dflt;
    for (auto& [k, v] : kwargs) (k == "key" ? key : dflt) = v;
    const char* fname = is(Builtin::max_) ? "max" : "min";
    if (dflt && n != 1)
      return t.raise_new(f, PyExc_TypeError, std::string("Cannot specify a default for ") + fname + "() with multiple positional arguments");
    if (key && key->kind == VK::Const && key->obj.get() == Py_None) key = nullptr;
    std::vector<VPtr> vals = args;
    if (n == 1) {
      VPtr it;
      if (Status s = t.iterate(f, args[0], it)) return s;
      vals.assign(it->items.begin() + static_cast<long>(it->pos), it->items.end());
      it->pos = it->items.size();
    }
    if (vals.empty()) {
      if (dflt) {
        out = dflt;
        return std::nullopt;
      }
      return t.raise_new(f, PyExc_ValueError, std::string(fname) + "() iterable argument is empty");
    }
    size_t best = 0;
    Ref best_key;
    for (size_t i = 0; i < vals.size(); ++i) {
      VPtr kv = vals[i];
      if (key) {
        if (Status s = t.call(f, key, {vals[i]}, {}, kv)) return s;
        if (Status s = t.read_result(f, kv)) return s;
      }
      if (kv->kind != VK::Const) return t.brk(f, "DV0007", "min/max by keys that are not constants");
      const int better = best_key ? PyObject_RichCompareBool(kv->obj.get(), best_key.get(), is(Builtin::max_) ? Py_GT : Py_LT) : 1;
      if (better < 0) return t.raise_current(f, "comparing min/max keys");
      if (better) best = i, best_key = kv->obj;
    }
    out = vals[best];
    return std::nullopt;
  }
  if ((is(Builtin::any_) || is(Builtin::all_)) && n == 1 && kwargs.empty() && lazy_arg(args[0])) {
    // any/all stop at the first item that decides, taking no more of a lazy iterator (a generator's
    // body past that point does not run), as in eager.
    const VPtr& it = args[0];
    return any_all(t, f, is(Builtin::any_), [&](VPtr& v, bool& more) -> Status {
      if (Status s = t.pull(f, it, it->pos + 1)) return s;
      more = it->pos < it->items.size();
      if (more) v = it->items[it->pos++];
      return std::nullopt;
    }, out);
  }
  if ((is(Builtin::min_) || is(Builtin::max_) || is(Builtin::abs_) || is(Builtin::any_) || is(Builtin::all_)) && n >= 1 && kwargs.empty()) {
    std::vector<VPtr> vals;
    if (n == 1 && !is(Builtin::abs_)) {
      VPtr it;
      if (Status s = t.iterate(f, args[0], it)) return s;
      vals.assign(it->items.begin() + static_cast<long>(it->pos), it->items.end());  // what is left of an iterator, used up
      it->pos = it->items.size();
    } else {
      vals = args;
    }
    bool all_const = true;
    for (auto& v : vals) all_const &= v->kind == VK::Const;
    if ((is(Builtin::any_) || is(Builtin::all_)) && n == 1) {
      size_t i = 0;
      return any_all(t, f, is(Builtin::any_), [&](VPtr& v, bool& more) -> Status {
        more = i < vals.size();
        if (more) v = vals[i++];
        return std::nullopt;
      }, out);
    }
    if (is(Builtin::abs_) && args[0]->kind == VK::Tensor) return t.graph_call(f, Ref::borrow(fn), "", args, {}, out);
    if (is(Builtin::abs_) && n == 1 && args[0]->kind == VK::NdArray) {  // ndarray.__abs__: torch._numpy's
      bool nd = false;
      return t.ndarray_operator(f, "abs", args, out, nd);
    }
    if (is(Builtin::abs_) && n == 1 && np_scalar_number(args[0])) {  // abs(k): NumPy's type again
      VPtr r;
      if (Status s = t.graph_call(f, Ref::borrow(fn), "", {args[0]->self}, {}, r)) return s;
      out = r->kind == VK::Sym ? np_scalar_value(t, r, args[0]->obj.get()) : r;
      return std::nullopt;
    }
    if (is(Builtin::abs_) && n == 1 && (args[0]->kind == VK::Instance || args[0]->kind == VK::Object)) {
      bool handled = false;  // a Python class's own __abs__, inlined
      if (Status s = t.call_dunder(f, args[0], "__abs__", {}, out, handled); s || handled) return s;
    }
    if (!all_const && (is(Builtin::min_) || is(Builtin::max_)) && !vals.empty()) {
      // min/max of symbolic sizes and ints (min(x.shape[0], 8), max(lengths) of sizes): torch.sym_min /
      // sym_max in the graph, pairwise, as TorchDynamo lowers them -- no guard on which one wins. All
      // ints or all floats (over a mix, eager returns the winner with its own type).
      auto number_kind = [](const VPtr& v) {  // 1 an int, 2 a float, 0 anything else
        PyObject* o = v->obj.get();
        if (!o) return 0;
        if (v->kind == VK::Const) return PyLong_CheckExact(o) ? 1 : PyFloat_CheckExact(o) ? 2 : 0;
        if (v->kind != VK::Sym) return 0;
        PyTypeObject* type = sym_python_type(o);
        return type == &PyLong_Type ? 1 : type == &PyFloat_Type ? 2 : 0;
      };
      const int kind = number_kind(vals[0]);
      bool symbolic = kind != 0;
      for (const VPtr& v : vals) symbolic &= number_kind(v) == kind;
      if (symbolic) {
        static PyObject* sym_max = PyObject_GetAttrString(py().torch.get(), "sym_max");  // kept
        static PyObject* sym_min = PyObject_GetAttrString(py().torch.get(), "sym_min");
        if (!sym_max || !sym_min) return PyErr_Clear(), t.brk(f, "DV0007", "min/max of symbolic numbers: no torch.sym_max");
        VPtr acc = vals[0];
        for (size_t i = 1; i < vals.size(); ++i)
          if (Status s = t.graph_call(f, Ref::borrow(is(Builtin::max_) ? sym_max : sym_min), "", {acc, vals[i]}, {}, acc)) return s;
        out = acc;
        return std::nullopt;
      }
    }
    if (!all_const && (is(Builtin::min_) || is(Builtin::max_)) && n >= 2) {
      // max(a, b) of 0-d tensors of one dtype (a padding computed from buffers): torch.maximum, as
      // TorchDynamo lowers it; with Python numbers among them (max(scale, 1e-5), min(n, 0)) the
      // numbers' own max or min, then torch.clamp(min=) or (max=) as TorchDynamo's. The same value,
      // where eager returns one of the operands (over more elements eager raises, over mixed dtypes
      // and a float bound on an integer tensor eager keeps the winner's dtype: those break).
      bool scalars = true;
      Ref dtype;
      std::vector<VPtr> tensors, numbers;
      bool float_number = false;
      for (const VPtr& v : vals) {
        if (v->kind == VK::Const && (PyLong_CheckExact(v->obj.get()) || PyFloat_CheckExact(v->obj.get()))) {
          float_number |= PyFloat_CheckExact(v->obj.get());
          numbers.push_back(v);
          continue;
        }
        if (v->kind != VK::Tensor || !v->obj) { scalars = false; break; }
        Ref dim = Ref::steal(PyObject_CallMethod(v->obj.get(), "dim", nullptr));
        Ref dt = Ref::steal(PyObject_GetAttrString(v->obj.get(), "dtype"));
        if (!dim || !dt || PyLong_AsLong(dim.get()) != 0 || (dtype && dt.get() != dtype.get())) { PyErr_Clear(); scalars = false; break; }
        dtype = dt;
        tensors.push_back(v);
      }
      if (scalars && !numbers.empty() && float_number) {
        Ref fp = Ref::steal(PyObject_GetAttrString(dtype.get(), "is_floating_point"));
        scalars = fp && PyObject_IsTrue(fp.get()) == 1;
        PyErr_Clear();
      }
      if (scalars && !tensors.empty()) {
        static PyObject* maximum = PyObject_GetAttrString(py().torch.get(), "maximum");
        static PyObject* minimum = PyObject_GetAttrString(py().torch.get(), "minimum");
        static PyObject* clamp = PyObject_GetAttrString(py().torch.get(), "clamp");
        VPtr acc = tensors[0];
        for (size_t i = 1; i < tensors.size(); ++i)
          if (Status s = t.graph_call(f, Ref::borrow(is(Builtin::max_) ? maximum : minimum), "", {acc, tensors[i]}, {}, acc)) return s;
        if (!numbers.empty()) {
          Ref tup = Ref::steal(PyTuple_New(numbers.size()));
          for (size_t i = 0; i < numbers.size(); ++i) PyTuple_SET_ITEM(tup.get(), i, Ref::borrow(numbers[i]->obj.get()).release());
          Ref bound = numbers.size() == 1 ? Ref::borrow(numbers[0]->obj.get()) : Ref::steal(PyObject_Call(fn, tup.get(), nullptr));
          if (!bound) return t.raise_current(f, "min/max of numbers");
          KwArgs kw;
          kw.emplace_back(is(Builtin::max_) ? "min" : "max", t.constant(bound));
          if (Status s = t.graph_call(f, Ref::borrow(clamp), "", {acc}, kw, acc)) return s;
        }
        out = acc;
        return std::nullopt;
      }
    }
    if (!all_const && (is(Builtin::min_) || is(Builtin::max_)) && !vals.empty() && kwargs.empty() &&
        std::all_of(vals.begin(), vals.end(), [](const VPtr& v) {
          return v->kind == VK::Const || v->kind == VK::Tuple || v->kind == VK::Instance || v->kind == VK::List;
        })) {
      // min/max of tuples, lists and objects whose class orders them in Python (a tuple subclass's
      // __lt__): as CPython's min_max, each item against the best so far (max: item > best, min:
      // item < best; ties keep the first), the comparisons traced -- each must be a known truth.
      VPtr best = vals[0];
      for (size_t i = 1; i < vals.size(); ++i) {
        VPtr c;
        if (Status s = t.compare(f, is(Builtin::max_) ? 4 : 0, vals[i], best, c)) return s;
        bool better = false;
        if (Status s = t.truth(f, c, better)) return s;
        if (better) best = vals[i];
      }
      out = best;
      return std::nullopt;
    }
    // (NumPy scalars are immutable numbers too: max(lam, 0.5) folds, to whichever it is)
    bool numpy_scalars = false;
    for (auto& v : vals) numpy_scalars |= v->kind == VK::Object && numpy_scalar(v->obj.get());
    all_const = true;
    for (auto& v : vals) all_const &= v->kind == VK::Const || (v->kind == VK::Object && numpy_scalar(v->obj.get()));
    if (!all_const) return t.brk(f, "DV0007", "min/max/any/all of tensors depend on their values", "use torch.minimum/torch.maximum");
    Ref tup = Ref::steal(PyTuple_New(vals.size()));
    for (size_t i = 0; i < vals.size(); ++i) PyTuple_SET_ITEM(tup.get(), i, Ref::borrow(vals[i]->obj.get()).release());
    Ref r = (n == 1 && !is(Builtin::abs_)) ? Ref::steal(PyObject_CallOneArg(fn, tup.get())) : Ref::steal(PyObject_Call(fn, tup.get(), nullptr));
    if (!r) return t.raise_current(f, "builtin on constants");
    out = numpy_scalars ? t.wrap(r, nullptr, f) : t.constant(r);
    if (!out) return t.brk(f, "DV0007", "min/max/abs of NumPy scalars");
    return std::nullopt;
  }
  if ((is(Builtin::str_) || is(Builtin::repr_)) && n == 1 && kwargs.empty() && holds_sym(args[0]))
    return t.brk(f, "DV0007", std::string(is(Builtin::str_) ? "str()" : "repr()") + " of a symbolic size",
                 kSymTextHint);
  if (is(Builtin::bool_) && n == 1 && kwargs.empty() && (args[0]->kind == VK::Instance || args[0]->kind == VK::List || args[0]->kind == VK::Set ||
                                                  args[0]->kind == VK::Tuple || args[0]->kind == VK::Dict)) {
    bool b = false;  // its truth: __bool__/__len__ of an object (inlined), emptiness of a container
    if (Status s = t.truth(f, args[0], b)) return s;
    out = t.constant(Ref::borrow(b ? Py_True : Py_False));
    return std::nullopt;
  }
  if ((is(Builtin::str_) || is(Builtin::repr_) || is(Builtin::hash_)) && n == 1 && kwargs.empty() &&
      (args[0]->kind == VK::Instance ||
       (args[0]->kind == VK::Object && args[0]->obj && !PyType_Check(args[0]->obj.get()) && (Py_TYPE(args[0]->obj.get())->tp_flags & Py_TPFLAGS_HEAPTYPE)))) {
    // str(obj), repr(obj), hash(obj) of an object of a Python class whose class defines them in Python
    // (a frozen dataclass's __hash__, a config's __str__): inlined; str falls back to a Python __repr__
    PyTypeObject* tp = args[0]->kind == VK::Instance ? reinterpret_cast<PyTypeObject*>(args[0]->obj.get()) : Py_TYPE(args[0]->obj.get());
    static PyObject* names[] = {PyUnicode_InternFromString("__str__"), PyUnicode_InternFromString("__repr__"), PyUnicode_InternFromString("__hash__")};
    PyObject* name = names[is(Builtin::str_) ? 0 : is(Builtin::repr_) ? 1 : 2];
    PyObject* m = _PyType_Lookup(tp, name);
    if (is(Builtin::str_) && m == _PyType_Lookup(&PyBaseObject_Type, name)) m = _PyType_Lookup(tp, names[1]);
    if (m && PyFunction_Check(m)) {
      VPtr r;
      if (Status s = t.call_python(f, Ref::borrow(m), {args[0]}, r)) return s;
      const bool ok = r->kind == VK::Const && (is(Builtin::hash_) ? PyLong_Check(r->obj.get()) : PyUnicode_Check(r->obj.get()));
      if (!ok) return t.brk(f, "DV0007", std::string(PyUnicode_AsUTF8(name)) + " of " + tp->tp_name + " gave a " + vk_name(r->kind));
      out = r;
      if (is(Builtin::hash_)) {  // as slot_tp_hash takes __hash__'s int: as is, else its own hash; never -1
        Py_ssize_t h = PyLong_AsSsize_t(r->obj.get());
        if (h == -1 && PyErr_Occurred()) {
          PyErr_Clear();
          h = PyObject_Hash(r->obj.get());
        }
        out = t.constant_steal(PyLong_FromSsize_t(h == -1 ? -2 : h));
      }
      return std::nullopt;
    }
  }
  if ((is(Builtin::int_) || is(Builtin::float_) || is(Builtin::bool_) || is(Builtin::str_) || is(Builtin::range_) || is(Builtin::slice_) || is(Builtin::round_) || is(Builtin::repr_) ||
       is(Builtin::divmod_) || is(Builtin::pow_) || is(Builtin::hash_) || is(Builtin::ord_) || is(Builtin::chr_) || is(Builtin::frozenset_) || is(Builtin::set_)) ) {
    for (auto& a : args)
      if (a->kind == VK::Tensor || a->kind == VK::NdArray)
        return t.brk(f, "DV0003", std::string("converting a ") + vk_name(a->kind) + " to a Python value depends on its data",
                     "keep the value as a tensor, or expect a graph break as with torch.compile");
    if ((is(Builtin::str_) || is(Builtin::repr_)) && n == 1 && kwargs.empty() && args[0]->kind == VK::Object && args[0]->obj &&
        PyType_Check(args[0]->obj.get()) && Py_TYPE(args[0]->obj.get())->tp_repr == PyType_Type.tp_repr) {
      out = t.constant_steal(PyObject_Repr(args[0]->obj.get()));  // a class: "<class 'torch.Tensor'>"
      if (!out) return t.raise_current(f, "repr()");
      return std::nullopt;
    }
    if ((is(Builtin::str_) || is(Builtin::repr_)) && n == 1 && kwargs.empty() && (args[0]->kind == VK::Object || args[0]->kind == VK::Function) &&
        args[0]->obj) {
      // a function or builtin (what a torch function mode's handler is given, printed or used as a
      // key): its text, fixed for the object as TorchDynamo folds it ("<built-in method add ...>")
      PyObject* o = args[0]->obj.get();
      if (PyFunction_Check(o) || PyCFunction_Check(o) || Py_IS_TYPE(o, &PyMethodDescr_Type) || Py_IS_TYPE(o, &PyWrapperDescr_Type) ||
          Py_TYPE(o) == method_wrapper_type()) {
        out = t.constant_steal(PyObject_Repr(o));
        if (!out) return t.raise_current(f, "repr()");
        return std::nullopt;
      }
    }
    if ((is(Builtin::str_) || is(Builtin::repr_)) && n == 1 && kwargs.empty() && args[0]->kind == VK::Object && args[0]->obj &&
        PyExceptionInstance_Check(args[0]->obj.get()) && simple_exception_class(reinterpret_cast<PyObject*>(Py_TYPE(args[0]->obj.get())))) {
      // An exception raised in the trace (except ... as e): its text, as eager prints it.
      static PyObject* str_name = PyUnicode_InternFromString("__str__");
      static PyObject* repr_name = PyUnicode_InternFromString("__repr__");
      PyObject* m = _PyType_Lookup(Py_TYPE(args[0]->obj.get()), is(Builtin::str_) ? str_name : repr_name);
      if (m && !PyFunction_Check(m)) {
        Ref r = Ref::steal(is(Builtin::str_) ? PyObject_Str(args[0]->obj.get()) : PyObject_Repr(args[0]->obj.get()));
        if (!r) return t.raise_current(f, is(Builtin::str_) ? "str()" : "repr()");
        out = t.constant(r);
        return std::nullopt;
      }
    }
    handled = false;  // constant folding happens in the generic pure-call path
    return std::nullopt;
  }
  handled = false;
  return std::nullopt;
}

}  // namespace dv
