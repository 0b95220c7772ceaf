// torch.vmap(fn, in_dims, out_dims, randomness) made in the trace (VK::Vmapped), as TorchDynamo
// traces it: calling one records functorch's own steps into the graph around the inlined function --
// _vmap_increment_nesting(batch_size, randomness), _add_batch_dim(x, in_dim, level) of each batched
// input, the function's operators, _remove_batch_dim(y, level, batch_size, out_dim) of each output,
// _vmap_decrement_nesting() -- through torch._functorch.predispatch, the wrappers TorchDynamo's graphs
// call. Nothing of functorch runs while tracing: inside the function a batched input is a meta example
// of its logical shape (the batch dimension taken out), which is what every operator sees under vmap;
// the graph does the batching when it runs. self = the function; obj = (in_dims, out_dims,
// randomness), Python constants. in_dims is a pytree as functorch's: ints and None over tuples,
// lists and dicts of the arguments. What vmap refuses (no batched input, sizes that disagree, an
// output that is not a tensor, chunk_size) is a break: eager raises or runs it as it does.
#include <algorithm>
#include <functional>

#include "tracer/functorch.h"
#include "tracer/pycache.h"
#include "tracer/rebuild.h"
#include "tracer/translator.h"
#include "tracer/values/kind.h"

namespace dv {

using cg::N;

namespace {

bool is_dim_spec(PyObject* o) {  // an int, None, or a tuple/list/dict of them, nested
  if (o == Py_None || (PyLong_CheckExact(o))) return true;
  if (PyDict_Check(o)) {
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(o, &pos, &k, &v))
      if (!is_dim_spec(v)) return false;
    return true;
  }
  if (!PyTuple_Check(o) && !PyList_Check(o)) return false;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i)
    if (!is_dim_spec(PySequence_Fast_GET_ITEM(o, i))) return false;
  return true;
}

struct VmapCall {
  VmapCall(Translator& tr, Frame& fr, int lv) : t(tr), f(fr), level(lv) {}
  Translator& t;
  Frame& f;
  int level;
  Ref batch_size;     // an int, or a SymInt in a dynamic-shape compile
  VPtr batch_value;   // the same as a Value: a constant, or a Sym of the graph
  std::string why;  // set: the call breaks with this reason
  std::vector<std::pair<VPtr, long>> batched;  // input tensor value and its (normalized) in_dim
  std::vector<VPtr> inner;  // each batched input as the function sees it (_add_batch_dim's), as `batched`
  // For each leaf of the arguments in order: the index of its entry in `batched`, or -1 (passed as
  // it is). By position, not by value: one tensor may be passed twice, batched once.
  std::vector<int> leaves;

  long ndim(const VPtr& v) {
    Ref n = Ref::steal(PyObject_CallMethod(v->obj.get(), "dim", nullptr));
    long r = n ? PyLong_AsLong(n.get()) : -1;
    PyErr_Clear();
    return r;
  }
  // The arguments with their batched tensors noted (in_dims applied, as functorch's pytree of in_dims
  // against the arguments: an int or None applies to every leaf below it).
  bool scan_in(const VPtr& arg, PyObject* spec) {
    if (arg->kind == VK::Dict && arg->lazy && !t.builder.realize(arg, f))
      return why = "torch.vmap of a dict argument that cannot be traced", false;
    if (arg->kind == VK::Dict && arg->obj)  // an OrderedDict or defaultdict: its kind is not rebuilt
      return why = "torch.vmap of an OrderedDict or defaultdict argument", false;
    if (PyDict_Check(spec)) {  // {"a": 0, "b": None} against a dict argument, key by key
      if (arg->kind != VK::Dict || static_cast<size_t>(PyDict_GET_SIZE(spec)) != arg->keys.size())
        return why = "torch.vmap with in_dims that do not match the structure of its arguments", false;
      for (size_t i = 0; i < arg->keys.size(); ++i) {
        PyObject* sub = PyDict_GetItemWithError(spec, arg->keys[i].get());
        if (!sub) return PyErr_Clear(), why = "torch.vmap with in_dims that do not match the keys of a dict argument", false;
        if (!scan_in(arg->items[i], sub)) return false;
      }
      return true;
    }
    if (arg->kind == VK::Dict) {  // an int or None applies to every value (functorch's pytree)
      for (const VPtr& x : arg->items)
        if (!scan_in(x, spec)) return false;
      return true;
    }
    if (PyTuple_Check(spec) || PyList_Check(spec)) {
      if ((arg->kind != VK::Tuple && arg->kind != VK::List) || static_cast<size_t>(PySequence_Fast_GET_SIZE(spec)) != arg->items.size())
        return why = "torch.vmap with in_dims that do not match the structure of its arguments", false;
      for (size_t i = 0; i < arg->items.size(); ++i)
        if (!scan_in(arg->items[i], PySequence_Fast_GET_ITEM(spec, static_cast<Py_ssize_t>(i)))) return false;
      return true;
    }
    if (arg->kind == VK::Tuple || arg->kind == VK::List) {
      for (const VPtr& x : arg->items)
        if (!scan_in(x, spec)) return false;
      return true;
    }
    if (spec == Py_None) return leaves.push_back(-1), true;
    if (arg->kind != VK::Tensor) return why = std::string("torch.vmap of a ") + vk_name(arg->kind) + " argument with an in_dim", false;
    long d = PyLong_AsLong(spec);
    const long n = ndim(arg);
    if (d < 0) d += n;
    if (d < 0 || d >= n) return why = "torch.vmap with an in_dim out of range", false;
    Ref s = Ref::steal(PyObject_CallMethod(arg->obj.get(), "size", "l", d));
    if (!s) return PyErr_Clear(), why = "torch.vmap: no size of a batched input", false;
    if (batch_size) {
      const int same = PyObject_RichCompareBool(s.get(), batch_size.get(), Py_EQ);
      if (same != 1) return PyErr_Clear(), why = "torch.vmap over dimensions of different sizes", false;
    } else {
      Ref dim = Ref::steal(PyLong_FromLong(d));
      if (t.meta_result(f, arg, "size", {t.constant(dim)}, s, batch_value)) return why = "torch.vmap: no size of a batched input", false;
      batch_size = s;
    }
    leaves.push_back(static_cast<int>(batched.size()));
    batched.emplace_back(arg, d);
    return true;
  }

  // The argument as the function sees it: its batched tensors replaced by _add_batch_dim's.
  VPtr rebuilt_in(const VPtr& arg, const std::vector<VPtr>& given, size_t& k) {
    if (arg->kind == VK::Tuple || arg->kind == VK::List || arg->kind == VK::Dict) {
      VPtr c = t.make(arg->kind);
      if (arg->kind == VK::Dict) c->keys = arg->keys;  // a new dict of the same keys (vmap passes a copy)
      for (const VPtr& x : arg->items) c->items.push_back(rebuilt_in(x, given, k));
      return c;
    }
    const int which = k < leaves.size() ? leaves[k] : -1;
    ++k;
    return which >= 0 ? given[static_cast<size_t>(which)] : arg;
  }

  VPtr node_value(PyObject* target, std::vector<ArgTree> args, Ref example, const VPtr& like) {
    const int n = t.add_graph_call(target, std::move(args), example);
    return like ? t.from_example(f, std::move(example), n, like->device) : VPtr();
  }
  ArgTree arg(const VPtr& v) {  // a graph argument: a tensor's node, a constant (neither can fail)
    ArgTree a;
    t.to_arg(v, a);
    return a;
  }
  ArgTree arg(PyObject* constant) { return arg(t.constant(Ref::borrow(constant))); }

  // An output of the function: _remove_batch_dim of each tensor (out_dims applied as in_dims are).
  bool rebuilt_out(const VPtr& res, PyObject* spec, VPtr& out) {
    if (res->kind == VK::Tuple || res->kind == VK::List) {
      const bool per_item = PyTuple_Check(spec) || PyList_Check(spec);
      if (per_item && static_cast<size_t>(PySequence_Fast_GET_SIZE(spec)) != res->items.size())
        return why = "torch.vmap with out_dims that do not match the structure of its outputs", false;
      out = t.make(res->kind);
      for (size_t i = 0; i < res->items.size(); ++i) {
        VPtr o;
        if (!rebuilt_out(res->items[i], per_item ? PySequence_Fast_GET_ITEM(spec, static_cast<Py_ssize_t>(i)) : spec, o)) return false;
        out->items.push_back(o);
      }
      return true;
    }
    if (res->kind == VK::Dict && !res->obj && !res->lazy) {  // a plain dict made by the function (grad of a dict of parameters)
      const bool per_key = PyDict_Check(spec);
      out = t.make(VK::Dict);
      out->keys = res->keys;
      for (size_t i = 0; i < res->items.size(); ++i) {
        PyObject* sub = per_key ? PyDict_GetItemWithError(spec, res->keys[i].get()) : spec;
        if (!sub) return PyErr_Clear(), why = "torch.vmap with out_dims that do not match the keys of a dict output", false;
        VPtr o;
        if (!rebuilt_out(res->items[i], sub, o)) return false;
        out->items.push_back(o);
      }
      return true;
    }
    if (res->kind != VK::Tensor) return why = std::string("torch.vmap of a function returning a ") + vk_name(res->kind), false;
    if (!PyLong_CheckExact(spec)) return why = "torch.vmap with an out_dim that is not an int", false;
    long d = PyLong_AsLong(spec);
    const long n = ndim(res) + 1;
    if (d < 0) d += n;
    if (d < 0 || d >= n) return why = "torch.vmap with an out_dim out of range", false;
    // The function returned a batched input itself (`lambda a: a`, an in-place `a.mul_(2)`) and its
    // out_dim is its in_dim: _remove_batch_dim gives back the very tensor _add_batch_dim wrapped, so
    // eager's `vmap(f)(x) is x` holds.
    // (One tensor as IS_OP tells it: one node, or one example -- an in-place method's result.)
    for (size_t i = 0; i < inner.size(); ++i)
      if (batched[i].second == d && (inner[i]->node == res->node || inner[i]->obj.get() == res->obj.get()))
        return out = batched[i].first, true;
    // example: the logical example with the batch dimension put back at d
    Ref unsq = Ref::steal(PyObject_CallMethod(res->obj.get(), "unsqueeze", "l", d));
    Ref sizes = unsq ? Ref::steal(PySequence_List(Ref::steal(PyObject_CallMethod(unsq.get(), "size", nullptr)).get())) : Ref();
    if (sizes) PyList_SetItem(sizes.get(), d, Ref(batch_size).release());
    Ref expanded = sizes ? Ref::steal(PyObject_CallMethod(unsq.get(), "expand", "O", sizes.get())) : Ref();
    Ref example = expanded ? Ref::steal(PyObject_CallMethod(expanded.get(), "contiguous", nullptr)) : Ref();
    PyObject* rm = functorch::grad_steps().remove_batch;
    if (!example || !rm) return PyErr_Clear(), why = "torch.vmap: no example of an output", false;
    Ref lv = Ref::steal(PyLong_FromLong(level)), od = Ref::steal(PyLong_FromLong(d));
    ArgTree bs;
    if (!t.to_arg(batch_value, bs)) return why = "torch.vmap: the batch size cannot be passed to the graph", false;
    out = node_value(rm, {arg(res), arg(lv.get()), bs, arg(od.get())}, example, res);
    return true;
  }
};

// vmap(fn, chunk_size=n): as functorch's _chunked_vmap, the batched inputs are split along their
// in_dims into chunks of n (tensor_split), the function is vmapped over each chunk in turn (a vmap
// of its own: the same level, entered and left per chunk), and each output is the torch.cat of the
// chunks' along its out_dim. The batch size must be a known int (a symbolic one breaks).
Translator::Status vmapped_chunks(Translator& t, Frame& f, const VPtr& fn, VmapCall& c, const VPtr& argt, KwArgs kwargs,
                                  VPtr& out) {
  using Status = Translator::Status;
  const long chunk = PyLong_AsLong(PyTuple_GET_ITEM(fn->obj.get(), 3));
  if (!c.batch_size || !PyLong_CheckExact(c.batch_size.get()))
    return PyErr_Clear(), t.brk(f, "DV0004", "torch.vmap with a chunk_size over a symbolic batch size");
  const long batch = PyLong_AsLong(c.batch_size.get());
  VPtr one = t.make(VK::Vmapped);  // the same vmap without chunk_size
  one->self = fn->self;
  one->obj = Ref::steal(PyTuple_Pack(4, PyTuple_GET_ITEM(fn->obj.get(), 0), PyTuple_GET_ITEM(fn->obj.get(), 1),
                                     PyTuple_GET_ITEM(fn->obj.get(), 2), Py_None));
  Ref narrow = Ref::steal(PyObject_GetAttrString(py().torch.get(), "narrow"));
  Ref cat = Ref::steal(PyObject_GetAttrString(py().torch.get(), "cat"));
  if (!one->obj || !narrow || !cat) return PyErr_Clear(), t.brk(f, "DV0019", "torch.vmap: torch.narrow or torch.cat is missing");
  std::vector<VPtr> results;
  for (long start = 0; start < batch; start += chunk) {
    const long len = std::min(chunk, batch - start);
    std::vector<VPtr> parts;
    for (auto& [x, d] : c.batched) {
      VPtr part;
      if (Status s = t.graph_call(f, narrow, "", {x, t.constant_steal(PyLong_FromLong(d)), t.constant_steal(PyLong_FromLong(start)),
                                               t.constant_steal(PyLong_FromLong(len))}, {}, part))
        return s;
      parts.push_back(part);
    }
    size_t k = 0;
    VPtr chunk_args = c.rebuilt_in(argt, parts, k);
    KwArgs kw = kwargs;
    VPtr r;
    if (Status s = t.call_vmapped(f, one, chunk_args->items, std::move(kw), r)) return s;
    results.push_back(r);
  }
  // the chunks' outputs, concatenated leaf by leaf along each one's out_dim
  std::function<Status(const std::vector<VPtr>&, PyObject*, VPtr&)> join = [&](const std::vector<VPtr>& rs, PyObject* spec,
                                                                                VPtr& o) -> Status {
    const VPtr& first = rs.front();
    if (first->kind == VK::Tuple || first->kind == VK::List) {
      const bool per_item = PyTuple_Check(spec) || PyList_Check(spec);
      o = t.make(first->kind);
      for (size_t i = 0; i < first->items.size(); ++i) {
        std::vector<VPtr> column;
        for (const VPtr& r : rs) column.push_back(r->items[i]);
        VPtr joined;
        if (Status s = join(column, per_item ? PySequence_Fast_GET_ITEM(spec, static_cast<Py_ssize_t>(i)) : spec, joined)) return s;
        o->items.push_back(joined);
      }
      return std::nullopt;
    }
    if (first->kind == VK::Dict) {  // (rebuilt_out made each chunk's dict: the same keys)
      o = t.make(VK::Dict);
      o->keys = first->keys;
      for (size_t i = 0; i < first->items.size(); ++i) {
        std::vector<VPtr> column;
        for (const VPtr& r : rs) column.push_back(r->items[i]);
        PyObject* sub = PyDict_Check(spec) ? PyDict_GetItem(spec, first->keys[i].get()) : spec;
        VPtr joined;
        if (Status s = join(column, sub, joined)) return s;
        o->items.push_back(joined);
      }
      return std::nullopt;
    }
    if (rs.size() == 1) return o = first, std::nullopt;
    VPtr list = t.make(VK::List);
    list->items = rs;
    return t.graph_call(f, cat, "", {list}, {{"dim", t.constant_steal(PyLong_FromLong(PyLong_AsLong(spec)))}}, o);
  };
  return join(results, PyTuple_GET_ITEM(fn->obj.get(), 1), out);
}

}  // namespace

Translator::Status Translator::make_vmapped(Frame& f, std::vector<VPtr> args, KwArgs kwargs, VPtr& out) {
  // torch.vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None)
  static const char* const names[] = {"func", "in_dims", "out_dims", "randomness", "chunk_size"};
  VPtr given[5];
  for (size_t i = 0; i < args.size(); ++i) {
    if (i >= 4) return brk(f, "DV0004", "torch.vmap with these arguments");
    given[i] = args[i];
  }
  for (auto& [k, v] : kwargs) {
    auto it = std::find_if(std::begin(names), std::end(names), [&](const char* n) { return k == n; });
    if (it == std::end(names) || given[it - std::begin(names)]) return brk(f, "DV0004", "torch.vmap with keyword " + k);
    given[it - std::begin(names)] = v;
  }
  if (!given[0]) return brk(f, "DV0004", "torch.vmap without a function");
  Ref dims[3] = {Ref::steal(PyLong_FromLong(0)), Ref::steal(PyLong_FromLong(0)), Ref::steal(PyUnicode_FromString("error"))};
  for (int i = 1; i <= 3; ++i) {
    if (!given[i]) continue;
    auto c = to_python(given[i], false);
    if (!c || (i < 3 ? !is_dim_spec(c->get()) : !PyUnicode_Check(c->get())))
      return PyErr_Clear(), brk(f, "DV0004", std::string("torch.vmap with a ") + names[i] + " that is not a constant");
    dims[i - 1] = *c;
  }
  Ref chunk = Ref::borrow(Py_None);
  if (given[4]) {
    PyObject* c = given[4]->kind == VK::Const ? given[4]->obj.get() : nullptr;
    if (!c || (c != Py_None && (!PyLong_CheckExact(c) || PyLong_AsLong(c) <= 0)))
      return PyErr_Clear(), brk(f, "DV0004", "torch.vmap with a chunk_size that is not a positive int",
                                "eager raises for a chunk_size below 1; pass a constant");
    chunk = Ref::borrow(c);
  }
  VPtr v = make(VK::Vmapped);
  v->self = given[0];
  v->obj = Ref::steal(PyTuple_Pack(4, dims[0].get(), dims[1].get(), dims[2].get(), chunk.get()));
  if (!v->obj) return brk(f, "DV0004", "torch.vmap: " + repr_of(take_error().get()));
  out = v;
  return std::nullopt;
}

Translator::Status Translator::call_vmapped(Frame& f, const VPtr& fn, std::vector<VPtr> args, KwArgs kwargs, VPtr& out) {
  PyObject* in_dims = PyTuple_GET_ITEM(fn->obj.get(), 0);
  PyObject* out_dims = PyTuple_GET_ITEM(fn->obj.get(), 1);
  PyObject* randomness = PyTuple_GET_ITEM(fn->obj.get(), 2);
  // functorch's level of this vmap when the graph runs: one above those of the transforms (vmap,
  // grad) being traced around it. A frame compiled while functorch is already transforming it is
  // left to eager.
  if (functorch_level_busy()) return brk(f, "DV0004", "torch.vmap inside code functorch is transforming");
  VmapCall c(*this, f, functorch_depth_ + 1);
  VPtr argt = make(VK::Tuple);
  argt->items = args;
  if (PyLong_CheckExact(in_dims) || in_dims == Py_None) {
    for (const VPtr& a : args)
      if (!c.scan_in(a, in_dims)) return brk(f, "DV0004", c.why);
  } else if (!c.scan_in(argt, in_dims)) {
    return brk(f, "DV0004", c.why);
  }
  if (c.batched.empty()) return brk(f, "DV0004", "torch.vmap with no batched input", "vmap needs a tensor with an in_dim");
  if (PyTuple_GET_ITEM(fn->obj.get(), 3) != Py_None) return vmapped_chunks(*this, f, fn, c, argt, std::move(kwargs), out);
  const functorch::Steps& st = functorch::grad_steps();  // torch._functorch.predispatch's, looked up once
  PyObject *lazy = st.lazy, *inc = st.vmap_inc, *add = st.add_batch, *dec = st.vmap_dec;
  if (!lazy || !inc || !add || !dec) return brk(f, "DV0004", "torch.vmap: torch._functorch.predispatch is missing");
  Ref lv = Ref::steal(PyLong_FromLong(c.level));
  ArgTree bs;
  if (!to_arg(c.batch_value, bs)) return brk(f, "DV0004", "torch.vmap: the batch size cannot be passed to the graph");
  c.node_value(lazy, {}, Ref::borrow(Py_None), nullptr);
  c.node_value(inc, {bs, c.arg(randomness)}, Ref::borrow(lv.get()), nullptr);
  std::vector<VPtr>& inner = c.inner;
  for (auto& [x, d] : c.batched) {
    // the logical example: the input's sizes without the batch dimension (which may be empty)
    Ref sizes = Ref::steal(PySequence_List(Ref::steal(PyObject_CallMethod(x->obj.get(), "size", nullptr)).get()));
    if (sizes) PySequence_DelItem(sizes.get(), d);
    Ref example = sizes ? Ref::steal(PyObject_CallMethod(x->obj.get(), "new_empty", "O", sizes.get())) : Ref();
    Ref grad = example ? Ref::steal(PyObject_GetAttrString(x->obj.get(), "requires_grad")) : Ref();
    if (grad && grad.get() == Py_True) {  // no leaf (it is computed from the input): in-place ops on it are allowed, as in eager
      example = Ref::steal(PyObject_CallMethod(example.get(), "requires_grad_", nullptr));
      if (example) example = Ref::steal(PyObject_CallMethod(example.get(), "clone", nullptr));
    }
    if (!example || !grad) return PyErr_Clear(), brk(f, "DV0006", "torch.vmap: no example of a batched input");
    Ref dim = Ref::steal(PyLong_FromLong(d));
    inner.push_back(c.node_value(add, {c.arg(x), c.arg(dim.get()), c.arg(lv.get())}, example, x));
  }
  size_t k = 0;
  VPtr inner_args = c.rebuilt_in(argt, inner, k);
  ++functorch_depth_;
  VPtr res;
  Status s = call(f, fn->self, inner_args->items, std::move(kwargs), res);
  --functorch_depth_;
  if (s) {
    // An exception raised inside leaves through vmap's own `with` (vmap_increment_nesting): the
    // level is closed before it reaches a handler around the call, as in eager. (A break needs
    // nothing: the trace is restarted to stop before it.)
    if (s->exc) c.node_value(dec, {}, Ref::borrow(Py_None), nullptr);
    return s;
  }
  if (!c.rebuilt_out(res, out_dims, out)) return brk(f, "DV0004", c.why);
  c.node_value(dec, {}, Ref::borrow(Py_None), nullptr);
  return std::nullopt;
}

// ---- the protocol (kind.h) ----

template <>
struct Kind<VK::Vmapped> {
  static void describe(const Value& v, std::string& out, int depth) {
    out += "torch.vmap(";
    if (v.self) describe_into(*v.self, out, depth + 1);
    out += ", in_dims=" + repr_of(PyTuple_GET_ITEM(v.obj.get(), 0)) + ", out_dims=" + repr_of(PyTuple_GET_ITEM(v.obj.get(), 1)) + ")";
  }
  static PyObject* python_type(Translator& /*t*/, const VPtr& /*v*/) {
    return reinterpret_cast<PyObject*>(&PyFunction_Type);  // vmap returns a Python function (functools.wraps)
  }
  static constexpr auto as_python = no_answer::as_python;
  static constexpr auto graph_arg = no_answer::graph_arg;
  static constexpr auto truth = always_true;
  static constexpr auto iterate = no_answer::iterate;
  static constexpr auto getattr = no_answer::getattr;
  static Status call(Translator& t, Frame& f, const VPtr& fn, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
    return t.call_vmapped(f, fn, std::move(args), std::move(kwargs), out);
  }
  static constexpr auto setattr = no_answer::setattr;
  static constexpr auto call_method = no_answer::call_method;
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    // torch.vmap(func, in_dims, out_dims, randomness) (one with a chunk_size is not rebuilt: a break)
    if (PyTuple_GET_ITEM(v->obj.get(), 3) != Py_None) return false;
    static PyObject* vmap = [] {
      PyObject* m = PyImport_ImportModule("torch");
      PyObject* fn = m ? PyObject_GetAttrString(m, "vmap") : nullptr;  // kept
      Py_XDECREF(m);
      PyErr_Clear();
      return fn;
    }();
    if (!vmap) return false;
    r.e.callable_const(vmap);
    if (!r.value(v->self)) return false;
    for (int i = 0; i < 3; ++i) r.e.emit(N::LOAD_CONST, r.e.konst(PyTuple_GET_ITEM(v->obj.get(), i)));
    r.e.call(4);
    return r.remember(v);
  }
};
DV_KIND(Vmapped, "vmapped function")

}  // namespace dv
