// copy.deepcopy and copy.copy over what the trace holds, run natively instead of inlining copy.py
// (reached through the library table, library_calls.cpp): lists, dicts, tuples, sets and constants;
// objects made in the trace (VK::Instance); plain Python objects from outside the frame, read through
// their __dict__ (each attribute guarded), which become objects made in the trace. Classes that
// customise copying (__deepcopy__, __copy__, __reduce_ex__, __reduce__, __getstate__, __setstate__,
// copyreg, slots) and tensors break, as TorchDynamo breaks on copy.deepcopy of a tensor; so does
// copy.copy of a list or dict, which TorchDynamo does not trace either.
#include <unordered_map>

#include "tracer/translator.h"

namespace dv {

namespace {

using Status = Translator::Status;
using Kwargs = std::vector<std::pair<std::string, VPtr>>;

Ref attr_of(const char* module, const char* name) {
  Ref mod = Ref::steal(PyImport_ImportModule(module));
  Ref r = mod ? Ref::steal(PyObject_GetAttrString(mod.get(), name)) : Ref();
  if (!r) PyErr_Clear();
  return r;
}

// A class whose instances copy by the default protocol: object.__reduce_ex__(4) gives
// (copyreg.__newobj__, (cls,), obj.__dict__), and the copy is cls.__new__(cls) with that __dict__.
bool default_copy_protocol(PyTypeObject* tp, bool deep) {
  static PyObject* object = reinterpret_cast<PyObject*>(&PyBaseObject_Type);
  static const char* const same[] = {"__reduce_ex__", "__reduce__", "__getstate__"};
  for (const char* n : same) {
    Ref name = Ref::steal(PyUnicode_FromString(n));
    PyObject* mine = _PyType_Lookup(tp, name.get());
    PyObject* base = _PyType_Lookup(&PyBaseObject_Type, name.get());
    if (mine != base) return false;
  }
  for (const char* n : {deep ? "__deepcopy__" : "__copy__", "__setstate__"})
    if (_PyType_Lookup(tp, Ref::steal(PyUnicode_FromString(n)).get())) return false;
  static PyObject* dispatch = [] {
    Ref t = attr_of("copyreg", "dispatch_table");
    return t ? t.release() : nullptr;  // kept for the process
  }();
  if (!dispatch || PyDict_GetItemWithError(dispatch, reinterpret_cast<PyObject*>(tp))) return PyErr_Clear(), false;
  PyObject* mro = tp->tp_mro;
  for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); ++i) {  // slots: state would be (dict, slots)
    PyObject* d = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i))->tp_dict;
    if (d && PyDict_GetItemString(d, "__slots__")) return false;
  }
  (void)object;
  return true;
}

struct Copier {
  Translator& t;
  Frame& f;
  bool deep;
  std::unordered_map<const Value*, VPtr> memo;
  std::unordered_map<PyObject*, VPtr> memo_obj;  // objects from outside, by identity
  int depth = 0;

  Status brk(const std::string& what) {
    return t.brk(f, "DV0004", std::string(deep ? "copy.deepcopy" : "copy.copy") + " of " + what,
                 "dynview copies lists, dicts, tuples, constants and plain Python objects; copy other values outside the compiled function");
  }
  Status item(const VPtr& v, VPtr& out) {  // what a shallow copy holds: the same value
    if (!deep) {
      out = v;
      return std::nullopt;
    }
    return copy(v, out);
  }
  Status instance(const VPtr& v, VPtr& out) {  // a new object of the same class with (copied) attributes
    auto* tp = reinterpret_cast<PyTypeObject*>(v->obj.get());
    if (!default_copy_protocol(tp, deep) || v->contents) return brk(std::string("a ") + tp->tp_name + " object");
    VPtr n = t.make(VK::Instance);
    n->obj = v->obj;
    n->self = v->self;
    memo[v.get()] = n;
    VPtr attrs;
    if (Status s = container(v->attrs, attrs)) return s;
    n->attrs = attrs;
    out = n;
    return std::nullopt;
  }
  // A new list or dict holding v's items, copied (deep) or the same (shallow); memoised first, so
  // that an item referring back to v finds the copy.
  Status container(const VPtr& v, VPtr& out) {
    VPtr n = t.make(v->kind);
    memo[v.get()] = n;
    if (v->kind == VK::Dict) n->keys = v->keys;  // dict keys are constants: atomic
    for (const VPtr& i : v->items) {
      VPtr c;
      if (Status s = item(i, c)) return s;
      n->items.push_back(c);
    }
    out = n;
    return std::nullopt;
  }
  Status copy(const VPtr& v, VPtr& out) {
    if (auto it = memo.find(v.get()); it != memo.end()) {
      out = it->second;
      return std::nullopt;
    }
    if (++depth > 64) return t.brk(f, "DV0012", "copy.deepcopy nested too deeply");
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth};
    if (v->lazy)  // a list, tuple or dict from the frame not read yet: all of it now
      if (Status s = t.realize_value(f, v)) return s;
    switch (v->kind) {
      case VK::Const:
        if (PySet_CheckExact(v->obj.get())) {  // a set of constants: a new set
          out = t.constant_steal(PySet_New(v->obj.get()));
          return out ? std::nullopt : brk("a set");
        }
        out = v;  // immutable
        return std::nullopt;
      case VK::Sym: out = v; return std::nullopt;
      case VK::Null: return brk("NULL");
      case VK::Tensor: return brk("a tensor");  // as TorchDynamo
      case VK::Tuple: {
        std::vector<VPtr> items;
        bool same = true;
        for (const VPtr& i : v->items) {
          VPtr c;
          if (Status s = item(i, c)) return s;
          same &= c == i;
          items.push_back(c);
        }
        if (same || !deep) {  // tuples are immutable: copy.copy gives the tuple itself, deepcopy too when nothing in it changed
          out = v;
          return std::nullopt;
        }
        if (v->obj) return brk("a " + std::string(reinterpret_cast<PyTypeObject*>(v->obj.get())->tp_name));
        out = t.make(VK::Tuple);
        out->items = std::move(items);
        return std::nullopt;
      }
      case VK::List: {
        // copy.copy of a list (or dict) runs list.copy through copy's dispatch table, which
        // TorchDynamo does not trace: break there as it does.
        if (!deep) return brk("a list (TorchDynamo does not trace list.copy through copy.copy either)");
        return container(v, out);
      }
      case VK::Dict:
        if (!deep) return brk("a dict (TorchDynamo does not trace dict.copy through copy.copy either)");
        return container(v, out);
      case VK::Instance: return instance(v, out);
      case VK::Function:  // functions are atomic
        out = v;
        return std::nullopt;
      case VK::Object: {
        PyObject* o = v->obj.get();
        if (PyType_Check(o) || PyFunction_Check(o) || PyCFunction_Check(o) || o == Py_Ellipsis || o == Py_NotImplemented ||
            Py_IS_TYPE(o, &PyProperty_Type) || PyCode_Check(o) || PyRange_Check(o)) {  // copy's atomic types
          out = v;
          return std::nullopt;
        }
        if (auto it = memo_obj.find(o); it != memo_obj.end()) {
          out = it->second;
          return std::nullopt;
        }
        PyTypeObject* tp = Py_TYPE(o);
        PyObject** dictptr = _PyObject_GetDictPtr(o);
        if (!v->source || PyModule_Check(o) || !(tp->tp_flags & Py_TPFLAGS_HEAPTYPE) || !plain_class(tp) ||
            builtin_base(tp) || !default_copy_protocol(tp, deep) || !dictptr || !*dictptr)
          return brk(std::string("a ") + tp->tp_name + " object");
        // Its __dict__: which attributes it has (guarded), each read as obj.name is read (so a later
        // read of one is the same value; a number, string or None not read yet, VK::Lazy, which a
        // deep copy reads).
        VPtr state = t.make(VK::Dict);
        Ref names = Ref::steal(PyDict_Keys(*dictptr));
        Ref key_tuple = names ? Ref::steal(PyList_AsTuple(names.get())) : Ref();
        if (!key_tuple) return PyErr_Clear(), brk(std::string("a ") + tp->tp_name + " object");
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(key_tuple.get()); ++i) {
          PyObject* k = PyTuple_GET_ITEM(key_tuple.get(), i);
          PyObject* val = PyUnicode_CheckExact(k) ? PyDict_GetItemWithError(*dictptr, k) : nullptr;
          VPtr iv = val ? t.builder.leaf(Ref::borrow(val), Source::attr(v->source, str_of(k)), f) : nullptr;
          if (!iv) return PyErr_Clear(), brk(std::string("a ") + tp->tp_name + " object (attribute " + repr_of(k) + " cannot be traced)");
          state->keys.push_back(Ref::borrow(k));
          state->items.push_back(iv);
        }
        // What the trace assigned to or deleted from it so far, in order (replayed on the object only
        // after the graph): the copy has those values, as eager's copy does.
        for (const auto& w : t.output.side_effects.attr_writes) {
          if (w.owner->obj.get() != o) continue;
          Ref nm = Ref::steal(PyUnicode_FromString(w.name.c_str()));
          const long at = find_key(*state, nm.get());  // (str keys: comparing cannot raise)
          if (at >= 0 && !w.value) {
            state->keys.erase(state->keys.begin() + at);
            state->items.erase(state->items.begin() + at);
          } else if (at >= 0) {
            state->items[static_cast<size_t>(at)] = w.value;
          } else if (w.value) {
            state->keys.push_back(nm);
            state->items.push_back(w.value);
          }
        }
        const std::string text = v->source->text() + ".__dict__";
        t.add_guard(GuardKind::DICT_KEYS, Source::attr(v->source, "__dict__"), key_tuple, f, "list(" + text + ".keys()) == " + repr_of(key_tuple.get()));
        VPtr cls = t.make(VK::Object);
        cls->obj = Ref::borrow(reinterpret_cast<PyObject*>(tp));
        cls->source = Source::attr(v->source, "__class__");
        VPtr n = t.make(VK::Instance);
        n->obj = cls->obj;
        n->self = cls;
        memo_obj[o] = n;
        memo[v.get()] = n;
        VPtr attrs;
        if (Status s = container(state, attrs)) return s;
        n->attrs = attrs;
        out = n;
        return std::nullopt;
      }
      default: return brk(std::string("a ") + vk_name(v->kind));
    }
  }
};

Status copy_any(Translator& t, Frame& f, std::vector<VPtr>& args, Kwargs& kwargs, VPtr& out, bool deep) {
  const bool memo_none = deep && args.size() == 2 && args[1]->kind == VK::Const && args[1]->obj.get() == Py_None;
  if (args.empty() || (args.size() > 1 && !memo_none) || !kwargs.empty())
    return t.brk(f, "DV0004", std::string(deep ? "copy.deepcopy" : "copy.copy") + " with a memo or keyword arguments");
  Copier c{t, f, deep};
  return c.copy(args[0], out);
}
}  // namespace

Translator::Status Translator::copy_value(Frame& f, std::vector<VPtr>& args, std::vector<std::pair<std::string, VPtr>>& kwargs,
                                          VPtr& out, bool deep) {
  return copy_any(*this, f, args, kwargs, out, deep);
}

}  // namespace dv
