// functools.partial objects made in the trace over any values (VK::Partial): a tensor bound as a
// keyword (partial(F.dropout, p=rate, training=self.training)), a method, another partial. Calling one
// calls its function with its arguments first and its keywords overridden by the call's, as
// functools.partial does; .func, .args and .keywords read what it holds. One that escapes the trace
// is rebuilt by the transformed code (codegen.cpp: dynview._runtime.make_partial). A partial whose
// arguments are all constants stays a real functools.partial object (builtins.cpp).
#include "tracer/pycache.h"
#include "tracer/translator.h"
#include "tracer/rebuild.h"
#include "tracer/values/kind.h"

namespace dv {

using cg::N;

VPtr Translator::make_partial(VPtr fn, std::vector<VPtr> args, const std::vector<std::pair<std::string, VPtr>>& kwargs) {
  VPtr p = make(VK::Partial);
  if (fn->kind == VK::Partial) {  // partial(partial(f, a), b) is partial(f, a, b), keywords merged
    p->self = fn->self;
    p->items = fn->items;
    p->attrs = make(VK::Dict);
    p->attrs->keys = fn->attrs->keys;
    p->attrs->items = fn->attrs->items;
  } else {
    p->self = std::move(fn);
    p->attrs = make(VK::Dict);
  }
  p->items.insert(p->items.end(), args.begin(), args.end());
  for (const auto& [k, v] : kwargs) dict_set(*p->attrs, Ref::steal(PyUnicode_FromString(k.c_str())), v);
  return p;
}

Translator::Status Translator::call_partial_value(Frame& f, const VPtr& p, std::vector<VPtr> args,
                                                  std::vector<std::pair<std::string, VPtr>> kwargs, VPtr& out) {
  std::vector<VPtr> all = p->items;
  all.insert(all.end(), args.begin(), args.end());
  std::vector<std::pair<std::string, VPtr>> kw;
  for (size_t i = 0; i < p->attrs->keys.size(); ++i) kw.emplace_back(str_of(p->attrs->keys[i].get()), p->attrs->items[i]);
  for (auto& kv : kwargs) {
    auto same = std::find_if(kw.begin(), kw.end(), [&](const auto& e) { return e.first == kv.first; });
    if (same != kw.end()) same->second = kv.second;
    else kw.push_back(kv);
  }
  return call(f, p->self, std::move(all), std::move(kw), out);
}

Translator::Status Translator::partial_getattr(Frame& f, const VPtr& p, const std::string& name, VPtr& out) {
  if (name == "func") {
    out = p->self;
  } else if (name == "args") {
    out = make(VK::Tuple);
    out->items = p->items;
  } else if (name == "keywords") {
    out = p->attrs;  // the partial's own dict, as functools.partial gives
  } else {
    return brk(f, name.rfind("__", 0) == 0 ? "DV0005" : kNoAttributeId, "attribute " + name + " of a functools.partial");
  }
  return std::nullopt;
}

// ---- the protocol (kind.h) ----

template <>
struct Kind<VK::Partial> {
  static void describe(const Value& v, std::string& out, int depth) {
    out += "functools.partial(";
    if (v.self) describe_into(*v.self, out, depth + 1);
    for (const VPtr& a : v.items) {
      out += ", ";
      if (depth > 2 || out.size() > 160) { out += "..."; break; }
      describe_into(*a, out, depth + 1);
    }
    for (size_t i = 0; v.attrs && i < v.attrs->keys.size(); ++i) {
      out += ", " + str_of(v.attrs->keys[i].get()) + "=";
      if (depth > 2 || out.size() > 160) { out += "..."; break; }
      describe_into(*v.attrs->items[i], out, depth + 1);
    }
    out += ")";
  }
  static PyObject* python_type(Translator& /*t*/, const VPtr& /*v*/) {
    return py().functools_partial.get();
  }
  // functools.partial of the objects its function and arguments are, when each is one (a policy
  // partial(create_selective_checkpoint_contexts, policy_fn) given to torch.utils.checkpoint)
  static std::optional<Ref> as_python(Translator& t, const VPtr& v, bool meta) {
    if (!v->self) return std::nullopt;
    for (const VPtr& a : v->items)  // one holding tensors stays in the trace (their examples are no arguments)
      if (a->kind == VK::Tensor || a->kind == VK::NdArray || a->kind == VK::Sym) return std::nullopt;
    for (size_t i = 0; v->attrs && i < v->attrs->items.size(); ++i)
      if (v->attrs->items[i]->kind == VK::Tensor || v->attrs->items[i]->kind == VK::NdArray || v->attrs->items[i]->kind == VK::Sym) return std::nullopt;
    std::optional<Ref> fn = t.to_python(v->self, meta);
    if (!fn || !*fn) return std::nullopt;
    Ref args = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(v->items.size()) + 1));
    PyTuple_SET_ITEM(args.get(), 0, fn->release());
    for (size_t i = 0; i < v->items.size(); ++i) {
      std::optional<Ref> a = t.to_python(v->items[i], meta);
      if (!a || !*a) return std::nullopt;
      PyTuple_SET_ITEM(args.get(), static_cast<Py_ssize_t>(i) + 1, a->release());
    }
    Ref kwargs = Ref::steal(PyDict_New());
    for (size_t i = 0; v->attrs && i < v->attrs->keys.size(); ++i) {
      std::optional<Ref> a = t.to_python(v->attrs->items[i], meta);
      if (!a || !*a || PyDict_SetItem(kwargs.get(), v->attrs->keys[i].get(), a->get()) < 0) return PyErr_Clear(), std::nullopt;
    }
    Ref made = Ref::steal(PyObject_Call(py().functools_partial.get(), args.get(), kwargs.get()));
    if (!made) return PyErr_Clear(), std::nullopt;
    return made;
  }
  static constexpr auto graph_arg = no_answer::graph_arg;
  static constexpr auto truth = always_true;
  static constexpr auto iterate = no_answer::iterate;
  static Status getattr(Translator& t, Frame& f, const VPtr& obj, const std::string& name, VPtr& out) {
    return t.partial_getattr(f, obj, name, out);
  }
  static Status call(Translator& t, Frame& f, const VPtr& fn, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
    return t.call_partial_value(f, fn, std::move(args), std::move(kwargs), out);
  }
  static constexpr auto setattr = no_answer::setattr;
  static constexpr auto call_method = no_answer::call_method;
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    // dynview._runtime.make_partial(func, args, keywords)
    static PyObject* maker = cg::runtime_attr("make_partial");
    if (!maker) return false;
    r.e.callable_const(maker);
    if (!r.value(v->self)) return false;
    for (const VPtr& x : v->items)
      if (!r.value(x)) return false;
    r.e.emit(N::BUILD_TUPLE, static_cast<int>(v->items.size()));
    for (size_t i = 0; i < v->attrs->items.size(); ++i) {
      r.e.emit(N::LOAD_CONST, r.e.konst(v->attrs->keys[i].get()));
      if (!r.value(v->attrs->items[i])) return false;
    }
    r.e.emit(N::BUILD_MAP, static_cast<int>(v->attrs->items.size()));
    r.e.call(3);
    return r.remember(v);
  }
};
DV_KIND(Partial, "partial")

}  // namespace dv
