// Tuples made or unpacked in the trace (VK::Tuple): items; obj = a tuple subclass (torch.Size, one of
// Python code: a namedtuple, keys = its fields).
#include "tracer/pycache.h"
#include "tracer/rebuild.h"
#include "tracer/values/kind.h"

namespace dv {

using cg::N;

// Tuple, List
std::optional<Ref> tuple_as_python(Translator& t, const VPtr& v, bool meta) {
  if (v->lazy) return std::nullopt;  // not read yet: its items are not guarded (realize_value first)
  Ref out = Ref::steal(v->kind == VK::Tuple ? PyTuple_New(v->items.size()) : PyList_New(v->items.size()));
  for (size_t i = 0; i < v->items.size(); ++i) {
    auto x = t.to_python(v->items[i], meta);
    if (!x) return std::nullopt;
    if (v->kind == VK::Tuple) PyTuple_SET_ITEM(out.get(), i, x->release());
    else PyList_SET_ITEM(out.get(), i, x->release());
  }
  if (is_deque(v)) {
    auto maxlen = t.to_python(v->defaults, meta);
    if (!maxlen) return std::nullopt;
    out = Ref::steal(PyObject_CallFunctionObjArgs(v->obj.get(), out.get(), maxlen->get(), nullptr));
    if (!out) return PyErr_Clear(), std::nullopt;
  }
  if (v->kind == VK::Tuple && v->obj) {  // a tuple subclass (torch.Size; of Python code: tuple.__new__(cls, t))
    out = Ref::steal(tuple_class(v->obj.get()) ? PyObject_CallFunctionObjArgs(tuple_new_fn(), v->obj.get(), out.get(), nullptr)
                                                     : PyObject_CallOneArg(v->obj.get(), out.get()));
    if (!out) return PyErr_Clear(), std::nullopt;
  }
  return out;
}

namespace {
Status index(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  return sequence_index_or_count(t, f, self, args, kwargs, out, true);
}
Status count(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  return sequence_index_or_count(t, f, self, args, kwargs, out, false);
}
// torch.Size.numel(): the product of the sizes (of symbolic ones, a symbolic int), as on a static shape
Status numel(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  if (self->obj.get() != py().torch_Size.get() || !args.empty() || !kwargs.empty())
    return t.brk(f, "DV0004", "tuple.numel is not supported");
  VPtr acc = t.constant_steal(PyLong_FromLong(1));
  for (const VPtr& x : self->items)
    if (Status s = t.binary(f, 5, acc, x, acc)) return s;  // (NB_MULTIPLY)
  out = acc;
  return std::nullopt;
}
const MethodTable kTupleMethods = {{"index", {index, false}}, {"count", {count, false}}, {"numel", {numel, false}}};
}  // namespace

// Tuple, List
bool tuple_reconstruct(cg::Rebuilder& r, const VPtr& v) {
  // A container from outside the frame is that object (written back first if it was mutated).
  if (v->source) return r.e.source(*v->source);
  // torch.Size((...)); deque([...], maxlen) made in the trace; tuple.__new__(cls, (...)) of a tuple
  // subclass of Python code (a namedtuple ...)
  const bool named = v->kind == VK::Tuple && tuple_class(v->obj.get());
  if (named) {
    r.e.callable_const(tuple_new_fn());
    r.e.emit(N::LOAD_CONST, r.e.konst(v->obj.get()));
    for (const VPtr& x : v->items)
      if (!r.value(x)) return false;
    r.e.emit(N::BUILD_TUPLE, static_cast<int>(v->items.size()));
    r.e.call(2);
    return true;
  }
  const bool typed = v->obj && PyType_Check(v->obj.get());
  if (typed) r.e.callable_const(v->obj.get());
  for (const VPtr& x : v->items)
    if (!r.value(x)) return false;
  r.e.emit(v->kind == VK::Tuple ? N::BUILD_TUPLE : N::BUILD_LIST, static_cast<int>(v->items.size()));
  if (typed && v->kind == VK::List && (!v->defaults || !r.value(v->defaults))) return false;
  if (typed) r.e.call(v->kind == VK::List ? 2 : 1);
  return r.remember(v);
}

// Tuple, List
void sequence_describe(const Value& v, std::string& out, int depth) {
  const bool tuple = v.kind == VK::Tuple;
  if (v.lazy) {  // from the frame, not read yet
    const Py_ssize_t n = PyObject_Length(v.lazy.get());
    if (n < 0) PyErr_Clear();
    out += (tuple ? "(" : "[") + std::to_string(n) + " items, unread" + (tuple ? ")" : "]");
    return;
  }
  out += tuple ? "(" : "[";
  for (size_t i = 0; i < v.items.size(); ++i) {
    if (i) out += ", ";
    if (depth > 2 || out.size() > 160) { out += "..."; break; }
    if (v.items[i]) describe_into(*v.items[i], out, depth + 1);
  }
  if (tuple && v.items.size() == 1) out += ",";
  out += tuple ? ")" : "]";
}

// Tuple, List
bool sequence_graph_arg(Translator& t, const VPtr& v, ArgTree& out) {
  if (v->lazy) return false;  // (realized before a call reads it: realize_call)
  out.kind = v->kind == VK::Tuple ? ArgTree::Kind::Tuple : ArgTree::Kind::List;
  for (const VPtr& x : v->items) {
    ArgTree a;
    if (!t.to_arg(x, a)) return false;
    out.items.push_back(std::move(a));
  }
  return true;
}

// Tuple, List
Status sequence_iterate(Translator& t, Frame& f, const VPtr& v, VPtr& out, bool /*materialize*/) {
  if (Status s = t.realize_lazy(f, v)) return s;
  VPtr it = t.make(VK::Iter);
  it->items = v->items;
  out = it;
  return std::nullopt;
}

// Tuple, List, Dict, DictView's dict: empty or not
Status items_truth(Translator& t, Frame& f, const VPtr& v, bool& out) {
  if (Status s = t.realize_lazy(f, v)) return s;
  out = !v->items.empty();
  return std::nullopt;
}

template <>
struct Kind<VK::Tuple> {
  static constexpr auto describe = sequence_describe;
  static PyObject* python_type(Translator& /*t*/, const VPtr& v) {
    return v->obj ? v->obj.get() : reinterpret_cast<PyObject*>(&PyTuple_Type);
  }
  static std::optional<Ref> as_python(Translator& t, const VPtr& v, bool meta) {
    return tuple_as_python(t, v, meta);
  }
  static constexpr auto graph_arg = sequence_graph_arg;
  static constexpr auto truth = items_truth;
  static constexpr auto iterate = sequence_iterate;
  static Status getattr(Translator& t, Frame& f, const VPtr& obj, const std::string& name, VPtr& out) {
    if (Status s = t.realize_lazy(f, obj)) return s;
    for (size_t i = 0; i < obj->keys.size() && i < obj->items.size(); ++i)  // a named result (torch.return_types, a namedtuple): its fields
      if (str_of(obj->keys[i].get()) == name) {
        out = obj->items[i];
        return std::nullopt;
      }
    if (obj->self && tuple_class(obj->obj.get())) return t.namedtuple_getattr(f, obj, name, out);
    PyTypeObject* tp = obj->obj && PyType_Check(obj->obj.get()) ? reinterpret_cast<PyTypeObject*>(obj->obj.get()) : &PyTuple_Type;
    if (name == "__class__") {  // x.__class__(items): its class, as type(x)
      out = t.make(VK::Object);
      out->obj = Ref::borrow(reinterpret_cast<PyObject*>(tp));
      return std::nullopt;
    }
    if (!(tp->tp_flags & Py_TPFLAGS_HEAPTYPE)) {  // tuple, torch.Size, torch.return_types: no instance attributes
      Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
      if (!_PyType_Lookup(tp, nm.get()))
        return t.brk(f, kNoAttributeId, "'" + std::string(tp->tp_name) + "' object has no attribute '" + name + "'");
    }
    out = t.bound_method(obj, Ref(), name);  // a tuple subclass (torch.Size ...): its class answers when called
    return std::nullopt;
  }
  static constexpr auto call = no_answer::call;
  static constexpr auto setattr = no_answer::setattr;
  static Status call_method(Translator& t, Frame& f, const VPtr& m, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
    return call_table_method(t, f, kTupleMethods, m, args, kwargs, out);
  }
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    return tuple_reconstruct(r, v);
  }
};
DV_KIND(Tuple, "tuple")

}  // namespace dv
