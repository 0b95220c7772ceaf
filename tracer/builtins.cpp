// Python builtins over Values: len, isinstance, getattr, range, min/max, abs, tuple/list/dict,
// enumerate, zip, sum, sorted, reversed, int/float/bool/str, type, print (a break).
#include "pycache.h"
#include "tensor_match.h"
#include "translator.h"

namespace dv {

Translator::Status call_builtin(Translator& t, Frame& f, PyObject* fn, std::vector<VPtr>& args,
                                std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled) {
  if (!PyCFunction_Check(fn) && !PyType_Check(fn)) return std::nullopt;
  using Status = Translator::Status;
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
  PyObject* b = py().builtins.get();
  auto is = [&](const char* name) {
    PyObject* x = PyObject_GetAttrString(b, name);
    bool r = x == fn;
    Py_XDECREF(x);
    if (!x) PyErr_Clear();
    return r;
  };
  handled = true;
  const size_t n = args.size();
  auto python_type_of = [&](const VPtr& v) -> PyObject* {
    switch (v->kind) {
      case VK::Tensor: {
        for (size_t i = 0; i < t.output.inputs.size(); ++i)
          if (t.output.inputs[i].second == v->node) return reinterpret_cast<PyObject*>(Py_TYPE(t.output.input_objects[i].get()));
        return py().torch_Tensor.get();
      }
      case VK::Tuple: return reinterpret_cast<PyObject*>(&PyTuple_Type);
      case VK::List: return reinterpret_cast<PyObject*>(&PyList_Type);
      case VK::Dict: return reinterpret_cast<PyObject*>(&PyDict_Type);
      case VK::Const: case VK::Object: case VK::NNModule: return reinterpret_cast<PyObject*>(Py_TYPE(v->obj.get()));
      case VK::Function: return reinterpret_cast<PyObject*>(&PyFunction_Type);
      case VK::Instance: return v->obj.get();
      default: return nullptr;
    }
  };
  if (is("print")) return t.brk(f, "DV0015", "call to print()", "printing is a side effect outside the graph");
  if (is("len") && n == 1) {
    const VPtr& v = args[0];
    Py_ssize_t len = -1;
    if (v->kind == VK::Tuple || v->kind == VK::List || v->kind == VK::Dict) len = static_cast<Py_ssize_t>(v->items.size());
    else if (v->kind == VK::Tensor) {
      Ref shape = Ref::steal(PyObject_GetAttrString(v->obj.get(), "shape"));
      if (!shape || PyTuple_GET_SIZE(shape.get()) == 0) return t.brk(f, "DV0010", "len() of a 0-d tensor");
      if (is_sym(PyTuple_GET_ITEM(shape.get(), 0)))  // a symbolic size: len(x) is l_x_.size(0)
        return t.meta_result(f, v, "size", {t.constant_steal(PyLong_FromLong(0))}, Ref::borrow(PyTuple_GET_ITEM(shape.get(), 0)), out);
      len = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape.get(), 0));
    } else if (v->kind == VK::Const || v->kind == VK::NNModule) {
      len = PyObject_Length(v->obj.get());
      if (len < 0) return t.brk(f, "DV0010", "len() raised");
    } else return t.brk(f, "DV0007", std::string("len() of a ") + vk_name(v->kind));
    out = t.constant_steal(PyLong_FromSsize_t(len));
    return std::nullopt;
  }
  if (is("isinstance") && n == 2) {
    PyObject* tp = python_type_of(args[0]);
    Ref classes;
    if (args[1]->kind == VK::Tuple) {
      classes = Ref::steal(PyTuple_New(args[1]->items.size()));
      for (size_t i = 0; i < args[1]->items.size(); ++i) PyTuple_SET_ITEM(classes.get(), i, Ref::borrow(args[1]->items[i]->obj.get()).release());
    } else {
      classes = args[1]->obj;
    }
    if (!tp || !classes) return t.brk(f, "DV0007", "isinstance() of an unsupported value");
    int r = PyObject_IsSubclass(tp, classes.get());
    if (r < 0) return t.brk(f, "DV0010", "isinstance() raised");
    out = t.constant(Ref::borrow(r ? Py_True : Py_False));
    return std::nullopt;
  }
  if ((is("getattr") || is("hasattr")) && (n == 2 || n == 3) && args[1]->kind == VK::Const) {
    std::string name = str_of(args[1]->obj.get());
    if (is("hasattr") && args[0]->kind == VK::Tensor && PyUnicode_Check(args[1]->obj.get())) {  // what a plain tensor's type defines
      const bool has = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(py().torch_Tensor.get()), args[1]->obj.get()) != nullptr;
      out = t.constant(Ref::borrow(has ? Py_True : Py_False));
      return std::nullopt;
    }
    Status s = t.getattr(f, args[0], name, out);
    const bool missing = s && s->id == kNoAttributeId;
    if (s && !missing) return s;  // the attribute may exist but cannot be traced: not a False
    if (is("hasattr")) {
      out = t.constant(Ref::borrow(missing ? Py_False : Py_True));
      return std::nullopt;
    }
    if (missing && n == 3) {
      out = args[2];
      return std::nullopt;
    }
    return s;
  }
  if (is("next") && (n == 1 || n == 2) && args[0]->kind == VK::Iter) {
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
    return t.brk(f, "DV0010", "next() of an exhausted iterator raises StopIteration");
  }
  if ((is("map") || is("filter")) && n >= 2 && kwargs.empty()) {
    // Lazy, as Python's: the function runs as items are taken (Translator::pull), so it sees the
    // state of that moment (y.extend(map(f, xs)) where f reads y), and each item is made once.
    if (is("filter") && n != 2) return t.brk(f, "DV0007", "filter() takes two arguments");
    VPtr r = t.make(VK::Iter);
    r->name = is("map") ? "map" : "filter";
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
  if (is("type") && n == 1) {
    PyObject* tp = python_type_of(args[0]);
    if (!tp) return t.brk(f, "DV0007", "type() of an unsupported value");
    VPtr v = t.make(VK::Object);
    v->obj = Ref::borrow(tp);
    out = v;
    return std::nullopt;
  }
  if (is("callable") && n == 1) {
    bool c = args[0]->kind == VK::Function || args[0]->kind == VK::Method || args[0]->kind == VK::NNModule ||
             ((args[0]->kind == VK::Object || args[0]->kind == VK::Const) && PyCallable_Check(args[0]->obj.get()));
    out = t.constant(Ref::borrow(c ? Py_True : Py_False));
    return std::nullopt;
  }
  if (is("iter") && n == 1 && args[0]->kind == VK::Iter) {  // iter(it) is it
    out = args[0];
    return std::nullopt;
  }
  if (is("enumerate") || is("zip") || is("reversed") || is("sorted") || is("tuple") || is("list") || is("iter")) {
    std::vector<VPtr> seqs, iters;
    for (auto& a : args) {
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
    if (is("zip")) {
      size_t m = SIZE_MAX, first_short = iters.size();
      for (size_t i = 0; i < seqs.size(); ++i)
        if (seqs[i]->items.size() < m) m = seqs[i]->items.size(), first_short = i;
      for (size_t i = 0; i < iters.size(); ++i)
        iters[i]->pos = std::min(iters[i]->items.size(), iters[i]->pos + m + (i < first_short ? 1 : 0));
    } else if (!is("iter")) {
      for (auto& it : iters) it->pos = it->items.size();
    }
    VPtr r = t.make(is("list") ? VK::List : is("tuple") ? VK::Tuple : VK::Iter);
    if (is("enumerate")) {
      if (seqs.empty()) return t.brk(f, "DV0007", "enumerate() needs an argument");
      long start = 0;
      if (n == 2 && args[1]->kind == VK::Const) start = PyLong_AsLong(args[1]->obj.get());
      for (auto& [k, v] : kwargs) if (k == "start" && v->kind == VK::Const) start = PyLong_AsLong(v->obj.get());
      for (size_t i = 0; i < seqs[0]->items.size(); ++i) {
        VPtr pair = t.make(VK::Tuple);
        pair->items = {t.constant_steal(PyLong_FromLong(start + static_cast<long>(i))), seqs[0]->items[i]};
        r->items.push_back(pair);
      }
    } else if (is("zip")) {
      size_t m = seqs.empty() ? 0 : SIZE_MAX;
      for (auto& s : seqs) m = std::min(m, s->items.size());
      for (size_t i = 0; i < m; ++i) {
        VPtr tup = t.make(VK::Tuple);
        for (auto& s : seqs) tup->items.push_back(s->items[i]);
        r->items.push_back(tup);
      }
    } else if (is("reversed")) {
      if (seqs.size() != 1) return t.brk(f, "DV0007", "reversed() takes one argument");
      r->items.assign(seqs[0]->items.rbegin(), seqs[0]->items.rend());
    } else if (is("sorted")) {
      if (seqs.size() != 1 || !kwargs.empty()) return t.brk(f, "DV0007", "sorted() with a key is not supported");
      auto items = seqs[0]->items;
      for (auto& x : items) if (x->kind != VK::Const) return t.brk(f, "DV0007", "sorted() of non-constants");
      Ref lst = Ref::steal(PyList_New(0));
      for (auto& x : items) PyList_Append(lst.get(), x->obj.get());
      if (PyList_Sort(lst.get()) < 0) return t.brk(f, "DV0010", "sorted() raised");
      r = t.make(VK::List);
      for (Py_ssize_t i = 0; i < PyList_GET_SIZE(lst.get()); ++i) r->items.push_back(t.constant(Ref::borrow(PyList_GET_ITEM(lst.get(), i))));
    } else {
      if (seqs.size() > 1) return t.brk(f, "DV0007", "too many arguments");
      if (!seqs.empty()) r->items = seqs[0]->items;
    }
    out = r;
    return std::nullopt;
  }
  if (is("dict")) {
    VPtr d = t.make(VK::Dict);
    if (n == 1 && args[0]->kind == VK::Dict) {
      d->keys = args[0]->keys;
      d->items = args[0]->items;
    } else if (n == 1) {
      VPtr it;
      if (Status s = t.iterate(f, args[0], it)) return s;
      for (auto& pair : it->items) {
        if (pair->kind != VK::Tuple || pair->items.size() != 2 || pair->items[0]->kind != VK::Const)
          return t.brk(f, "DV0007", "dict() of non-pairs");
        d->keys.push_back(pair->items[0]->obj);
        d->items.push_back(pair->items[1]);
      }
    } else if (n > 1) return t.brk(f, "DV0007", "dict() with several arguments");
    for (auto& [k, v] : kwargs) {
      d->keys.push_back(Ref::steal(PyUnicode_FromString(k.c_str())));
      d->items.push_back(v);
    }
    out = d;
    return std::nullopt;
  }
  if (is("sum") && n >= 1 && n <= 2) {  // sum(iterable, start=0): start + each item, in order, as Python adds them
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
  if ((is("min") || is("max") || is("abs") || is("any") || is("all")) && n >= 1 && kwargs.empty()) {
    std::vector<VPtr> vals;
    if (n == 1 && !is("abs")) {
      VPtr it;
      if (Status s = t.iterate(f, args[0], it)) return s;
      vals = it->items;
    } else {
      vals = args;
    }
    bool all_const = true;
    for (auto& v : vals) all_const &= v->kind == VK::Const;
    if (is("abs") && args[0]->kind == VK::Tensor) return t.graph_call(f, Ref::borrow(fn), "", args, {}, out);
    if (!all_const) return t.brk(f, "DV0007", "min/max/any/all of tensors depend on their values", "use torch.minimum/torch.maximum");
    Ref tup = Ref::steal(PyTuple_New(vals.size()));
    for (size_t i = 0; i < vals.size(); ++i) PyTuple_SET_ITEM(tup.get(), i, Ref::borrow(vals[i]->obj.get()).release());
    Ref r = (n == 1 && !is("abs")) ? Ref::steal(PyObject_CallOneArg(fn, tup.get())) : Ref::steal(PyObject_Call(fn, tup.get(), nullptr));
    if (!r) return t.brk(f, "DV0010", "builtin raised on constants");
    out = t.constant(r);
    return std::nullopt;
  }
  if ((is("int") || is("float") || is("bool") || is("str") || is("range") || is("slice") || is("round") || is("repr") ||
       is("divmod") || is("pow") || is("hash") || is("ord") || is("chr") || is("frozenset") || is("set")) ) {
    for (auto& a : args)
      if (a->kind == VK::Tensor)
        return t.brk(f, "DV0003", "converting a tensor to a Python value depends on its data",
                     "keep the value as a tensor, or expect a graph break as with torch.compile");
    handled = false;  // constant folding happens in the generic pure-call path
    return std::nullopt;
  }
  handled = false;
  return std::nullopt;
}

}  // namespace dv
