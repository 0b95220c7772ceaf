// Dict views (VK::DictView): d.keys(), d.values(), d.items() of a dict the trace holds. A view is
// live, as Python's: it reads its dict's contents when it is iterated, measured or searched, so a
// view taken before the dict changed sees the change. self = the dict (a Dict value: one made in the
// trace, one from outside, or a dict subclass's contents); name = "keys", "values" or "items".
#include "tracer/pycache.h"
#include "tracer/translator.h"
#include "tracer/rebuild.h"
#include "tracer/values/kind.h"

namespace dv {

bool is_view_name(const std::string& name) { return name == "keys" || name == "values" || name == "items"; }

VPtr Translator::dict_view(const VPtr& dict, const std::string& name) {
  VPtr v = make(VK::DictView);
  v->self = dict;
  v->name = name;
  return v;
}

std::vector<VPtr> Translator::view_items(const Value& view) {
  const Value& d = *view.self;
  std::vector<VPtr> out;
  out.reserve(d.items.size());
  for (size_t i = 0; i < d.items.size(); ++i) {
    if (view.name == "values") {
      out.push_back(d.items[i]);
    } else if (view.name == "keys") {
      out.push_back(key_value(d.keys[i]));
    } else {
      VPtr pair = make(VK::Tuple);
      pair->items = {key_value(d.keys[i]), d.items[i]};
      out.push_back(pair);
    }
  }
  return out;
}

PyObject* dict_view_type(const std::string& name) {
  static PyObject* types[3] = {nullptr, nullptr, nullptr};
  const int i = name == "keys" ? 0 : name == "values" ? 1 : 2;
  if (!types[i]) {
    Ref d = Ref::steal(PyDict_New());
    Ref v = d ? Ref::steal(PyObject_CallMethod(d.get(), name.c_str(), nullptr)) : Ref();
    if (!v) return PyErr_Clear(), nullptr;
    types[i] = reinterpret_cast<PyObject*>(Py_TYPE(v.get()));
    Py_INCREF(types[i]);  // kept for the process
  }
  return types[i];
}

// keys <op> other and other <op> keys for the set operators (-, &, |, ^), and the same of an items
// view whose values are constants: the operator runs now on a real view over a dict with the same
// entries -- the result is exactly eager's (a new set of constants, whichever side the view is on).
namespace {
const char* const kViewOps[] = {"and_", "or_", "sub", "xor"};  // BINARY_OP 1, 7, 10, 12
}  // namespace

// The real objects an operator over a view works on: the view as the same view of a dict with
// the same (constant) keys -- and values, for an items or values view -- the other operand as it
// is. Null when one cannot be made (a view whose values are traced values).
static Ref view_operand(const VPtr& v, std::optional<Ref> as_python) {
  if (v->kind != VK::DictView) return as_python ? *as_python : Ref();
  // keys: over the same keys; items and values: over the same entries, while they are constants
  const bool keys = v->name == "keys";
  if (!keys)
    for (const VPtr& x : v->self->items)
      if (x->kind != VK::Const) return Ref();
  Ref d = Ref::steal(PyDict_New());
  for (size_t i = 0; i < v->self->keys.size(); ++i)
    if (!d || PyDict_SetItem(d.get(), v->self->keys[i].get(), keys ? Py_None : v->self->items[i]->obj.get()) < 0)
      return PyErr_Clear(), Ref();
  return Ref::steal(PyObject_CallMethod(d.get(), v->name.c_str(), nullptr));
}

static bool constant_item(PyObject* x) {  // what a set of the trace may hold: constants, tuples of them
  if (is_exact_const(x)) return true;
  if (!PyTuple_CheckExact(x)) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(x); ++i)
    if (!constant_item(PyTuple_GET_ITEM(x, i))) return false;
  return true;
}

// keys <op> other and other <op> keys for the set operators (-, &, |, ^), and the same of an items
// view whose values are constants: the operator runs now on a real view over a dict with the same
// entries -- the result is exactly eager's (a new set of constants, whichever side the view is on).
Translator::Status Translator::view_set_operator(Frame& f, int nb, const VPtr& a, const VPtr& b, VPtr& out) {
  const char* op = nb == 1 ? kViewOps[0] : nb == 7 ? kViewOps[1] : nb == 10 ? kViewOps[2] : nb == 12 ? kViewOps[3] : nullptr;
  Ref pa = op ? view_operand(a, a->kind == VK::DictView ? std::nullopt : to_python(a, false)) : Ref();
  Ref pb = op ? view_operand(b, b->kind == VK::DictView ? std::nullopt : to_python(b, false)) : Ref();
  if (!pa || !pb)
    return brk(f, "DV0018", std::string("operator ") + (op ? op : "?") + " on " + vk_name(a->kind) + " and " + vk_name(b->kind));
  Ref fn = Ref::steal(PyObject_GetAttrString(py().operator_mod.get(), op));
  Ref r = fn ? Ref::steal(PyObject_CallFunctionObjArgs(fn.get(), pa.get(), pb.get(), nullptr)) : Ref();
  if (!r) return raise_current(f, std::string("operator.") + op);
  // A new set of the keys (constants, as op_BUILD_SET makes); the other operand's items too.
  Ref it = Ref::steal(PySet_CheckExact(r.get()) ? PyObject_GetIter(r.get()) : nullptr);
  if (!it) return PyErr_Clear(), brk(f, "DV0013", std::string("the result of operator.") + op + " on a dict view");
  while (Ref x = Ref::steal(PyIter_Next(it.get())))
    if (!constant_item(x.get())) return brk(f, "DV0013", std::string("operator.") + op + " on a dict view gave a set holding a " + Py_TYPE(x.get())->tp_name);
  if (PyErr_Occurred()) return raise_current(f, std::string("operator.") + op);
  out = constant(r);
  return std::nullopt;
}

// keys == {...}, keys <= s ...: on a real keys view, as above; other views break (their items are
// traced values).
Translator::Status Translator::view_compare(Frame& f, int cmp, const VPtr& a, const VPtr& b, VPtr& out) {
  Ref pa = view_operand(a, a->kind == VK::DictView ? std::nullopt : to_python(a, false));
  Ref pb = view_operand(b, b->kind == VK::DictView ? std::nullopt : to_python(b, false));
  if (!pa || !pb) return brk(f, "DV0018", std::string("comparison of ") + vk_name(a->kind) + " and " + vk_name(b->kind));
  Ref r = Ref::steal(PyObject_RichCompare(pa.get(), pb.get(), cmp));
  if (!r) return raise_current(f, "comparison");
  out = constant(r);
  return std::nullopt;
}

// item in d.items(): the pair's key looked up, then its value compared as Python does (identity
// first, then ==); false for anything that is not a pair.
Translator::Status Translator::view_items_contains(Frame& f, const VPtr& view, const VPtr& item, bool& found) {
  found = false;
  std::vector<VPtr> pair;
  if (item->kind == VK::Tuple) pair = item->items;
  else if (item->kind == VK::Const && PyTuple_CheckExact(item->obj.get()))
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(item->obj.get()); ++i) pair.push_back(constant(Ref::borrow(PyTuple_GET_ITEM(item->obj.get(), i))));
  else if (item->kind == VK::Const) return std::nullopt;
  else return brk(f, "DV0018", std::string("'in' d.items() with a ") + vk_name(item->kind));
  if (pair.size() != 2) return std::nullopt;
  if (pair[0]->kind != VK::Const) return brk(f, "DV0024", std::string("'in' d.items() with a ") + vk_name(pair[0]->kind) + " key");
  const Value& d = *view->self;
  for (size_t i = 0; i < d.keys.size(); ++i) {
    const int eq = keys_equal(d.keys[i].get(), pair[0]->obj.get());
    if (eq < 0) return raise_current(f, "'in' d.items()");
    if (!eq) continue;
    const VPtr& v = d.items[i];
    if (v == pair[1] || (v->kind == VK::Tensor && pair[1]->kind == VK::Tensor && v->node == pair[1]->node)) {
      found = true;
      return std::nullopt;
    }
    if (v->kind != VK::Const || pair[1]->kind != VK::Const)
      return brk(f, "DV0002", std::string("'in' d.items() compares a ") + vk_name(v->kind) + " and a " + vk_name(pair[1]->kind) + " by value");
    const int same = PyObject_RichCompareBool(v->obj.get(), pair[1]->obj.get(), Py_EQ);
    if (same < 0) return raise_current(f, "'in' d.items()");
    found = same == 1;
    return std::nullopt;
  }
  return std::nullopt;
}

// ---- the protocol (kind.h) ----

template <>
struct Kind<VK::DictView> {
  static void describe(const Value& v, std::string& out, int depth) {
    out += "dict_" + v.name + "(";
    if (v.self) describe_into(*v.self, out, depth + 1);
    out += ")";
  }
  static PyObject* python_type(Translator& /*t*/, const VPtr& v) {
    return dict_view_type(v->name);
  }
  static constexpr auto as_python = no_answer::as_python;
  static constexpr auto graph_arg = no_answer::graph_arg;
  static Status truth(Translator& /*t*/, Frame& /*f*/, const VPtr& v, bool& out) {
    out = !v->self->items.empty();
    return std::nullopt;
  }
  static Status iterate(Translator& t, Frame& /*f*/, const VPtr& v, VPtr& out, bool /*materialize*/) {
    out = t.make(VK::Iter);
    out->items = t.view_items(*v);  // what the dict holds now
    return std::nullopt;
  }
  static constexpr auto getattr = no_answer::getattr;
  static constexpr auto call = no_answer::call;
  static constexpr auto setattr = no_answer::setattr;
  static constexpr auto call_method = no_answer::call_method;
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    // dict.keys(d) ...: a view of the rebuilt (or the frame's own) dict
    Ref m = Ref::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(&PyDict_Type), v->name.c_str()));
    if (!m) return PyErr_Clear(), false;
    r.e.callable_const(m.get());
    if (!r.value(v->self)) return false;
    r.e.call(1);
    return true;
  }
};
DV_KIND(DictView, "dict_view")

}  // namespace dv
