// Lazy itertools made in the trace: count, repeat, accumulate, filterfalse, takewhile, dropwhile,
// groupby, starmap, and zip. Each is an Iter value with `flag` set (lazy, as map and
// filter are: Translator::pull makes its items one at a time, when they are taken) and `name` the
// itertools function; what each keeps between items:
//   count       defaults: the next number; kwdefaults: the step (endless)
//   repeat      self: the object; kwdefaults: how many are left (null: endless)
//   accumulate  cells[0]: the source; self: the function (null: +); defaults: the total so far;
//               kwdefaults: the initial value, still to be given
//   filterfalse, takewhile, dropwhile
//               cells[0]: the source; self: the predicate (None: truth); dropwhile: kwdefaults set
//               while still dropping
//   groupby     cells[0]: the source; self: the key function (None: the item); defaults/kwdefaults:
//               the item read ahead and its key; contents: the group handed out last (emptied when
//               the next group is taken, as Python's grouper stops)
//   starmap     cells[0]: the source; self: the function, called with each item's items
//   zip         cells: the sources (zip without strict=)
// The functions run as items are taken, in Python's order, so they see the state of that moment.
#include "tracer/pycache.h"
#include "tracer/translator.h"

namespace dv {

namespace {

PyObject* itertools_fn(const char* name) {
  static PyObject* mod = PyImport_ImportModule("itertools");  // never released (process lifetime)
  if (!mod) return PyErr_Clear(), nullptr;
  PyObject* o = PyObject_GetAttrString(mod, name);
  if (!o) PyErr_Clear();
  return o;  // kept for the process
}

bool is_none(const VPtr& v) { return !v || (v->kind == VK::Const && v->obj.get() == Py_None); }

}  // namespace

bool endless_iter(const Value& it) {
  if (it.kind != VK::Iter || !it.flag) return false;
  if (it.name == "count") return true;
  if (it.name == "repeat") return !it.kwdefaults;
  if (it.name == "zip" || it.name == "map") {  // endless when every source is
    if (it.cells.empty()) return false;
    for (const VPtr& c : it.cells)
      if (!endless_iter(*c)) return false;
    return true;
  }
  if (it.name == "accumulate" || it.name == "starmap" || it.name == "filter" || it.name == "filterfalse" || it.name == "dropwhile" ||
      it.name == "enumerate")
    return !it.cells.empty() && endless_iter(*it.cells[0]);
  if (it.name == "chain") {  // endless when one of the sources still to come is
    for (size_t k = it.defaults ? PyLong_AsSize_t(it.defaults->obj.get()) : 0; k < it.cells.size(); ++k)
      if (endless_iter(*it.cells[k])) return true;
  }
  return false;
}

// Makes count/repeat/accumulate/filterfalse/takewhile/dropwhile/groupby iterators; `handled` false
// for any other callable. Keyed by the itertools objects' identity.
Translator::Status Translator::make_lazy_itertool(Frame& f, PyObject* fn, std::vector<VPtr>& args,
                                                  std::vector<std::pair<std::string, VPtr>>& kwargs, VPtr& out, bool& handled) {
  static const char* names[] = {"count", "repeat", "accumulate", "filterfalse", "takewhile", "dropwhile", "groupby", "starmap"};
  static PyObject* fns[8] = {itertools_fn(names[0]), itertools_fn(names[1]), itertools_fn(names[2]), itertools_fn(names[3]),
                             itertools_fn(names[4]), itertools_fn(names[5]), itertools_fn(names[6]), itertools_fn(names[7])};
  handled = false;
  std::string name;
  for (int i = 0; i < 8; ++i)
    if (fns[i] && fns[i] == fn) name = names[i];
  if (name.empty()) return std::nullopt;
  handled = true;
  // Positional and keyword arguments by parameter name.
  static const std::vector<std::pair<std::string, std::vector<std::string>>> params = {
      {"count", {"start", "step"}},           {"repeat", {"object", "times"}},        {"accumulate", {"iterable", "func", "initial"}},
      {"filterfalse", {"function", "iterable"}}, {"takewhile", {"predicate", "iterable"}}, {"dropwhile", {"predicate", "iterable"}},
      {"groupby", {"iterable", "key"}},          {"starmap", {"function", "iterable"}}};
  std::vector<std::string> pnames;
  for (auto& [n, ps] : params)
    if (n == name) pnames = ps;
  std::vector<VPtr> a(pnames.size());
  if (args.size() > pnames.size()) return raise_new(f, PyExc_TypeError, name + " expected at most " + std::to_string(pnames.size()) + " arguments");
  for (size_t i = 0; i < args.size(); ++i) a[i] = args[i];
  for (auto& [k, v] : kwargs) {
    auto p = std::find(pnames.begin(), pnames.end(), k);
    if (p == pnames.end() || a[static_cast<size_t>(p - pnames.begin())])
      return brk(f, "DV0007", "itertools." + name + " with keyword " + k);
    a[static_cast<size_t>(p - pnames.begin())] = v;
  }
  VPtr r = make(VK::Iter);
  r->name = name;
  r->flag = true;
  auto source = [&](const VPtr& v) -> Status {
    if (!v) return raise_new(f, PyExc_TypeError, name + "() missing its iterable");
    VPtr it;
    if (Status s = iterate(f, v, it, /*materialize=*/false)) return s;
    r->cells.push_back(it);
    return std::nullopt;
  };
  auto number = [](const VPtr& v) { return v && v->kind == VK::Const && (PyLong_Check(v->obj.get()) || PyFloat_Check(v->obj.get())); };
  if (name == "count") {
    r->defaults = a[0] ? a[0] : constant_steal(PyLong_FromLong(0));
    r->kwdefaults = a[1] ? a[1] : constant_steal(PyLong_FromLong(1));
    if (!number(r->defaults) || !number(r->kwdefaults)) return brk(f, "DV0007", "itertools.count over non-constant numbers");
  } else if (name == "repeat") {
    if (!a[0]) return raise_new(f, PyExc_TypeError, "repeat() missing required argument 'object' (pos 1)");
    r->self = a[0];
    if (a[1]) {
      if (a[1]->kind != VK::Const || !PyLong_CheckExact(a[1]->obj.get())) return brk(f, "DV0007", "itertools.repeat a computed number of times");
      r->kwdefaults = a[1];
    }
  } else if (name == "accumulate") {
    if (Status s = source(a[0])) return s;
    if (!is_none(a[1])) r->self = a[1];
    if (a[2] && !is_none(a[2])) r->kwdefaults = a[2];
  } else if (name == "groupby") {
    if (Status s = source(a[0])) return s;
    r->self = a[1] ? a[1] : constant(Ref::borrow(Py_None));
  } else if (name == "starmap") {
    if (!a[0] || !a[1]) return raise_new(f, PyExc_TypeError, "starmap expected 2 arguments, got " + std::to_string(args.size()));
    if (Status s = source(a[1])) return s;
    r->self = a[0];
  } else {  // filterfalse, takewhile, dropwhile
    if (!a[0]) return raise_new(f, PyExc_TypeError, name + " expected 2 arguments, got " + std::to_string(args.size()));
    if (Status s = source(a[1])) return s;
    r->self = a[0];
    if (name == "dropwhile") r->kwdefaults = constant(Ref::borrow(Py_True));
  }
  out = r;
  return std::nullopt;
}

// One step of such an iterator: appends at most one item to it->items, or clears it->flag at its end.
Translator::Status Translator::pull_itertool(Frame& f, const VPtr& it) {
  auto next_of = [&](const VPtr& src, VPtr& x) -> Status {  // x null: the source ran out
    x = nullptr;
    if (Status s = pull(f, src, src->pos + 1)) return s;
    if (src->pos < src->items.size()) x = src->items[src->pos++];
    return std::nullopt;
  };
  auto test = [&](const VPtr& pred, const VPtr& x, bool& yes) -> Status {
    VPtr r = x;
    if (!is_none(pred))
      if (Status s = call(f, pred, {x}, {}, r)) return s;
    return truth(f, r, yes);
  };
  const std::string& name = it->name;
  if (name == "count") {
    it->items.push_back(it->defaults);
    Ref next = Ref::steal(PyNumber_Add(it->defaults->obj.get(), it->kwdefaults->obj.get()));
    if (!next) return raise_current(f, "itertools.count");
    it->defaults = constant(next);
    return std::nullopt;
  }
  if (name == "repeat") {
    if (it->kwdefaults) {
      const long left = PyLong_AsLong(it->kwdefaults->obj.get());
      if (left <= 0) {
        it->flag = false;
        return std::nullopt;
      }
      it->kwdefaults = constant_steal(PyLong_FromLong(left - 1));
    }
    it->items.push_back(it->self);
    return std::nullopt;
  }
  if (name == "enumerate") {  // (index, item); defaults: the next index
    VPtr x;
    if (Status s = next_of(it->cells[0], x)) return s;
    if (!x) {
      it->flag = false;
      return std::nullopt;
    }
    VPtr pair = make(VK::Tuple);
    pair->items = {it->defaults, x};
    it->items.push_back(pair);
    it->defaults = constant_steal(PyNumber_Add(it->defaults->obj.get(), Ref::steal(PyLong_FromLong(1)).get()));
    return std::nullopt;
  }
  if (name == "chain") {  // the sources one after another; defaults: the index of the current one
    size_t k = PyLong_AsSize_t(it->defaults->obj.get());
    for (; k < it->cells.size(); ++k) {
      VPtr x;
      if (Status s = next_of(it->cells[k], x)) return s;
      if (x) {
        it->items.push_back(x);
        break;
      }
    }
    if (k >= it->cells.size()) it->flag = false;
    it->defaults = constant_steal(PyLong_FromSize_t(k));
    return std::nullopt;
  }
  if (name == "zip") {
    if (it->cells.empty()) {  // zip() gives nothing
      it->flag = false;
      return std::nullopt;
    }
    VPtr tup = make(VK::Tuple);
    const bool strict = it->kwdefaults != nullptr;  // zip(..., strict=True): unequal lengths raise, as CPython's zip_next
    for (size_t i = 0; i < it->cells.size(); ++i) {
      VPtr x;
      if (Status s = next_of(it->cells[i], x)) return s;
      if (!x) {
        it->flag = false;
        if (!strict) return std::nullopt;
        auto plural = [](size_t k) { return std::string(k == 1 ? " " : "s 1-") + std::to_string(k); };
        if (i > 0)
          return raise_new(f, PyExc_ValueError, "zip() argument " + std::to_string(i + 1) + " is shorter than argument" + plural(i), "zip");
        for (size_t j = 1; j < it->cells.size(); ++j) {
          VPtr y;
          if (Status s = next_of(it->cells[j], y)) return s;
          if (y)
            return raise_new(f, PyExc_ValueError, "zip() argument " + std::to_string(j + 1) + " is longer than argument" + plural(j), "zip");
        }
        return std::nullopt;
      }
      tup->items.push_back(x);
    }
    it->items.push_back(tup);
    return std::nullopt;
  }
  if (name == "accumulate") {
    if (it->kwdefaults) {  // the initial value comes first
      it->defaults = it->kwdefaults;
      it->kwdefaults = nullptr;
      it->items.push_back(it->defaults);
      return std::nullopt;
    }
    VPtr x;
    if (Status s = next_of(it->cells[0], x)) return s;
    if (!x) {
      it->flag = false;
      return std::nullopt;
    }
    if (it->defaults) {
      VPtr total;
      if (it->self) {
        if (Status s = call(f, it->self, {it->defaults, x}, {}, total)) return s;
      } else if (Status s = binary(f, 0, it->defaults, x, total)) {  // operator.add
        return s;
      }
      x = total;
    }
    it->defaults = x;
    it->items.push_back(x);
    return std::nullopt;
  }
  if (name == "starmap") {  // function(*item)
    VPtr x;
    if (Status s = next_of(it->cells[0], x)) return s;
    if (!x) {
      it->flag = false;
      return std::nullopt;
    }
    VPtr xs;
    if (Status s = iterate(f, x, xs)) return s;
    std::vector<VPtr> call_args(xs->items.begin() + static_cast<long>(xs->pos), xs->items.end());
    xs->pos = xs->items.size();
    VPtr r;
    if (Status s = call(f, it->self, std::move(call_args), {}, r)) return s;
    it->items.push_back(r);
    return std::nullopt;
  }
  if (name == "filterfalse" || name == "takewhile" || name == "dropwhile") {
    VPtr x;
    if (Status s = next_of(it->cells[0], x)) return s;
    if (!x) {
      it->flag = false;
      return std::nullopt;
    }
    if (name == "dropwhile" && !it->kwdefaults) {  // done dropping: every item passes
      it->items.push_back(x);
      return std::nullopt;
    }
    bool yes = false;
    if (Status s = test(it->self, x, yes)) return s;
    if (name == "filterfalse" && !yes) it->items.push_back(x);
    if (name == "takewhile") {
      if (yes) it->items.push_back(x);
      else it->flag = false;
    }
    if (name == "dropwhile" && !yes) {
      it->kwdefaults = nullptr;
      it->items.push_back(x);
    }
    return std::nullopt;
  }
  if (name == "groupby") {
    if (it->contents) it->contents->pos = it->contents->items.size();  // the previous group is used up
    auto key_of = [&](const VPtr& x, VPtr& k) -> Status {
      k = x;
      if (!is_none(it->self))
        if (Status s = call(f, it->self, {x}, {}, k)) return s;
      return std::nullopt;
    };
    VPtr first = it->defaults, key = it->kwdefaults;
    if (!first) {
      if (Status s = next_of(it->cells[0], first)) return s;
      if (!first) {
        it->flag = false;
        return std::nullopt;
      }
      if (Status s = key_of(first, key)) return s;
    }
    VPtr group = make(VK::Iter);
    group->items.push_back(first);
    it->defaults = it->kwdefaults = nullptr;
    while (true) {
      VPtr x, k;
      if (Status s = next_of(it->cells[0], x)) return s;
      if (!x) break;
      if (Status s = key_of(x, k)) return s;
      VPtr same;
      if (Status s = compare(f, 2, k, key, same)) return s;  // ==
      bool eq = false;
      if (Status s = truth(f, same, eq)) return s;
      if (!eq) {
        it->defaults = x;
        it->kwdefaults = k;
        break;
      }
      group->items.push_back(x);
    }
    VPtr pair = make(VK::Tuple);
    pair->items = {key, group};
    it->contents = group;
    it->items.push_back(pair);
    return std::nullopt;
  }
  return brk(f, "DV0016", "iterator " + name + " is not followed");
}

}  // namespace dv
