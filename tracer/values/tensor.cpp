// Tensors (VK::Tensor): obj = the meta example, node = the graph node, device = the real device.
#include <functional>

#include "tracer/pycache.h"
#include "tracer/rebuild.h"
#include "tracer/tensor_match.h"
#include "tracer/values/kind.h"

namespace dv {

using cg::N;

namespace {
const char* const kDataDependent[] = {"item", "tolist", "__bool__", "numpy", "data_ptr", "__int__", "__float__",
                                "__index__", "nonzero_static", nullptr};
// Autograd's own calls: they run outside the graph, as torch.compile runs them (its trace_autograd_ops off).
const char* const kAutograd[] = {"backward", "register_hook", "retain_grad", nullptr};
const char* const kMetaMethods[] = {"size", "dim", "ndimension", "numel", "nelement", "stride", "is_contiguous",
                              "element_size", "is_floating_point", "is_complex", "__len__", "dim_order", nullptr};

// A data attribute of torch.Tensor (x.shape, x._version, x.grad_fn), not a method to bind.
bool data_descriptor(PyObject* attr) {
  return Py_IS_TYPE(attr, &PyGetSetDescr_Type) || Py_IS_TYPE(attr, &PyMemberDescr_Type) || PyObject_TypeCheck(attr, &PyProperty_Type);
}

bool in_list(const char* const* list, const std::string& s) {
  for (const char* const* n = list; *n; ++n)
    if (s == *n) return true;
  return false;
}

// The real object behind a graph input (null: the tensor is computed by the graph).
PyObject* input_object(Translator& t, const VPtr& v) {
  for (size_t i = 0; i < t.output.inputs.size(); ++i)
    if (t.output.inputs[i].second == v->node) return t.output.input_objects[i].get();
  return nullptr;
}

// Tensor.type(): the legacy name of the tensor's dtype on its device ("torch.FloatTensor",
// "torch.cuda.HalfTensor"), a constant of the guarded dtype and device, asked of an empty tensor
// of both (the example is on meta). Tensor.type(t), t a dtype, such a name or a legacy tensor class
// (torch.HalfTensor): Tensor.to the dtype and device it names, which is the tensor itself when they
// are its own, as Tensor.type gives.
// addcdiv_ / addcmul_ given a tensor `value`, add_ given a tensor `alpha` (torch.optim's
// non-capturable steps while compiling: param.addcdiv_(exp_avg, denom, value=-step_size), step_size a
// 0-d tensor): ATen reads the Scalar with .item(), which an example cannot give. Decomposed as
// TorchDynamo decomposes them (its enable_dynamo_decompositions): self.copy_(self + op(t1, t2) * value),
// so the step stays in the graph. `handled` false: not one of these.
Translator::Status tensor_scalar_operand(Translator& t, Frame& f, const VPtr& self, const std::string& name,
                                         std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out, bool& handled) {
  handled = false;
  const bool addc = name == "addcdiv_" || name == "addcmul_", add = name == "add_";  // (not sub_: as TorchDynamo)
  const char* kw = addc ? "value" : add ? "alpha" : nullptr;
  if (!kw || kwargs.size() != 1 || kwargs[0].first != kw || kwargs[0].second->kind != VK::Tensor ||
      args.size() != (addc ? 2u : 1u))
    return std::nullopt;
  handled = true;
  static PyObject* fns[3] = {PyObject_GetAttrString(py().torch.get(), "div"), PyObject_GetAttrString(py().torch.get(), "mul"),
                             PyObject_GetAttrString(py().torch.get(), "add")};
  for (PyObject* fn : fns)
    if (!fn) return PyErr_Clear(), t.brk(f, "DV0006", "Tensor." + name + " with a tensor " + kw + ": torch's arithmetic not found");
  const VPtr scale = kwargs[0].second;
  VPtr term = args[0], scaled, sum;
  if (addc)
    if (Status s = t.graph_call(f, Ref::borrow(fns[name == "addcdiv_" ? 0 : 1]), "", {args[0], args[1]}, {}, term)) return s;
  if (Status s = t.graph_call(f, Ref::borrow(fns[1]), "", {term, scale}, {}, scaled)) return s;
  if (Status s = t.graph_call(f, Ref::borrow(fns[2]), "", {self, scaled}, {}, sum)) return s;
  return t.graph_call(f, {}, "copy_", {self, sum}, {}, out);
}

Translator::Status tensor_type(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, VPtr& out) {
  Ref dtype = Ref::steal(PyObject_GetAttrString(self->obj.get(), "dtype"));
  Ref kw = Ref::steal(PyDict_New());
  if (!dtype || !kw || PyDict_SetItemString(kw.get(), "dtype", dtype.get()) < 0 ||
      (self->device && PyDict_SetItemString(kw.get(), "device", self->device.get()) < 0))
    return PyErr_Clear(), t.brk(f, "DV0006", "Tensor.type: no dtype or device of the example");
  Ref empty_fn = Ref::steal(PyObject_GetAttrString(py().torch.get(), "empty"));
  Ref zero = Ref::steal(Py_BuildValue("(i)", 0));
  Ref like = empty_fn ? Ref::steal(PyObject_Call(empty_fn.get(), zero.get(), kw.get())) : Ref();
  if (!like) return PyErr_Clear(), t.brk(f, "DV0006", "Tensor.type: no tensor of the example's dtype and device");
  if (args.empty()) {
    Ref name = Ref::steal(PyObject_CallMethod(like.get(), "type", nullptr));
    if (!name) return PyErr_Clear(), t.brk(f, "DV0006", "Tensor.type() failed");
    out = t.constant(name);
    return std::nullopt;
  }
  auto target = t.to_python(args[0], false);
  if (!target) return t.brk(f, "DV0013", "Tensor.type of a " + std::string(vk_name(args[0]->kind)));
  Ref conv = Ref::steal(PyObject_CallMethod(like.get(), "type", "O", target->get()));
  Ref new_dtype = conv ? Ref::steal(PyObject_GetAttrString(conv.get(), "dtype")) : Ref();
  Ref new_device = conv ? Ref::steal(PyObject_GetAttrString(conv.get(), "device")) : Ref();
  if (!new_dtype || !new_device) return t.raise_current(f, "Tensor.type");  // eager raises the same here
  std::vector<VPtr> a{self};
  KwArgs to_kw{{"dtype", t.constant(new_dtype)}};
  if (!self->device || PyObject_RichCompareBool(new_device.get(), self->device.get(), Py_EQ) != 1) {
    PyErr_Clear();
    to_kw.emplace_back("device", t.constant(new_device));
  }
  return t.graph_call(f, {}, "to", std::move(a), std::move(to_kw), out);
}

}  // namespace

// Tensor, Sym: the graph's output (symbolic ints come back as ints, symbolic floats as 0-d float64
// tensors read with item(): Graph::to_fx), or the input it is
bool graph_output_reconstruct(cg::Rebuilder& r, const VPtr& v) {
  auto it = std::find(r.outputs.begin(), r.outputs.end(), v->node);
  if (it == r.outputs.end() || !r.compiled) return v->source ? r.e.source(*v->source) : false;
  static PyObject* tensor_item = [] {  // torch.Tensor.item, kept for the process
    PyObject* cls = kept_attr("torch", "Tensor");
    PyObject* m = cls ? PyObject_GetAttrString(cls, "item") : nullptr;
    if (!m) PyErr_Clear();
    return m;
  }();
  const bool sym_float = v->kind == VK::Sym && v->obj && Py_TYPE(v->obj.get()) == reinterpret_cast<PyTypeObject*>(py().sym_float.get());
  if (sym_float && !tensor_item) return false;
  if (sym_float) r.e.callable_const(tensor_item);
  r.e.emit(N::LOAD_FAST, r.outs_slot);
  r.e.load_int(it - r.outputs.begin());
  r.e.emit(N::BINARY_SUBSCR);
  if (sym_float) r.e.call(1);
  return true;
}

long known_numel(const VPtr& v) {
  if ((v->kind != VK::Tensor && v->kind != VK::NdArray) || !v->obj) return -1;
  Ref n = Ref::steal(PyObject_CallMethod(v->obj.get(), "numel", nullptr));
  if (!n || !PyLong_CheckExact(n.get())) return PyErr_Clear(), -1;
  return PyLong_AsLong(n.get());
}

// bool() of a tensor whose number of elements is known and not 1: the RuntimeError eager raises,
// whatever its values (TorchDynamo raises it too, so that an except in the trace can catch it).
// Null where its truth depends on its value (or on a dynamic size).
Status ambiguous_truth(Translator& t, Frame& f, const VPtr& v) {
  if (v->kind != VK::Tensor) return std::nullopt;
  const long numel = known_numel(v);
  if (numel < 0 || numel == 1) return std::nullopt;
  return t.raise_new(f, PyExc_RuntimeError, numel == 0 ? "Boolean value of Tensor with no values is ambiguous"
                                                       : "Boolean value of Tensor with more than one value is ambiguous");
}

// `x.data = y` of a tensor from outside the compiled code (an EMA or weight-tying swap, PyTorch's
// issue 113030), as TorchDynamo records it: x.set_(y) under no_grad, then the version set_ counted
// given back (dynview._runtime.lower_version_count_by_1), so x keeps its identity and autograd
// metadata and now holds y's storage, shape and strides; later reads of x in the trace see them (the
// example was set_ too). A tensor made in the graph, or y of another dtype or device, breaks, as
// under torch.compile.
Translator::Status set_data(Translator& t, Frame& f, const VPtr& owner, const VPtr& value) {
  if (value->kind != VK::Tensor || !value->obj)
    return t.brk(f, "DV0008", "assignment to attribute 'data' of a tensor: the value is not a tensor", kSetattrHint);
  if (!owner->source)
    return t.brk(f, "DV0008", "assignment to attribute 'data' of a tensor made in the compiled code",
                 "torch.compile only supports `.data =` on a tensor from outside the compiled code too");
  auto attr_differs = [](PyObject* a, PyObject* b) {
    const int eq = a && b ? PyObject_RichCompareBool(a, b, Py_EQ) : -1;
    if (eq < 0) PyErr_Clear();
    return eq != 1;
  };
  Ref da = Ref::steal(PyObject_GetAttrString(owner->obj.get(), "dtype"));
  Ref db = Ref::steal(PyObject_GetAttrString(value->obj.get(), "dtype"));
  if (attr_differs(da.get(), db.get()))
    return t.brk(f, "DV0008", "assignment to attribute 'data' of a tensor: a tensor of another dtype",
                 "torch.compile only supports `.data =` of a tensor of the same dtype too");
  if (attr_differs(owner->device.get(), value->device.get()))
    return t.brk(f, "DV0008", "assignment to attribute 'data' of a tensor: a tensor on another device", kSetattrHint);
  // x.data = y, then y.data = z: after the graph, AOTAutograd sets each input's storage in input
  // order, x's new storage read from y, so where y is the earlier input x ends up with z's (a wrong
  // result torch.compile gives when y's placeholder comes first). The second assignment then breaks.
  for (const GraphNode& n : t.output.graph.nodes())
    if (n.op == GraphNode::Op::CallMethod && n.method == "set_" && n.args.size() == 2 &&
        n.args[1].kind == ArgTree::Kind::Node && n.args[1].node == owner->node && n.args[0].node >= owner->node)
      return t.brk(f, "DV0008", "assignment to attribute 'data' of a tensor whose storage an earlier `.data =` gave to another tensor",
                   "the backend's replay of the two assignments could give both tensors the later storage");
  const bool grad = grad_mode_enabled();
  if (grad)
    if (Translator::Status s = set_grad_mode(t, f, false)) return s;
  VPtr set;
  if (Translator::Status s = t.graph_call(f, {}, "set_", {owner, value}, {}, set)) return s;
  static PyObject* lower = cg::runtime_attr("lower_version_count_by_1");  // kept
  if (!lower) return PyErr_Clear(), t.brk(f, "DV0005", "dynview._runtime.lower_version_count_by_1 is missing");
  VPtr lowered;
  if (Translator::Status s = t.graph_call(f, Ref::borrow(lower), "", {set}, {}, lowered)) return s;
  if (grad)
    if (Translator::Status s = set_grad_mode(t, f, true)) return s;
  return std::nullopt;
}

template <>
struct Kind<VK::Tensor> {
  static void describe(const Value& v, std::string& out, int /*depth*/) {
    out += v.obj ? tensor_meta_text(v.obj.get(), v.device.get()) : "tensor"; return;
  }
  static PyObject* python_type(Translator& t, const VPtr& v) {
    PyObject* real = input_object(t, v);
    return real ? reinterpret_cast<PyObject*>(Py_TYPE(real)) : py().torch_Tensor.get();
  }
  static std::optional<Ref> as_python(Translator& /*t*/, const VPtr& v, bool meta) {
    return meta ? std::optional<Ref>(v->obj) : std::nullopt;
  }
  static bool graph_arg(Translator& /*t*/, const VPtr& v, ArgTree& out) {
    out.kind = ArgTree::Kind::Node; out.node = v->node; return true;
  }
  static Status truth(Translator& t, Frame& f, const VPtr& v, bool& /*out*/) {
    if (Status s = ambiguous_truth(t, f, v)) return s;
    return t.brk(f, "DV0002", "data-dependent control flow: branching on a tensor's value",
    "use torch.where, or torch.cond; torch.compile breaks the graph here too");
  }
  static Status iterate(Translator& t, Frame& f, const VPtr& v, VPtr& out, bool /*materialize*/) {
    Ref shape = Ref::steal(PyObject_GetAttrString(v->obj.get(), "shape"));
    if (!shape || PyTuple_GET_SIZE(shape.get()) == 0) return t.brk(f, "DV0016", "iterating over a 0-d tensor");
    return iterate_by_index(t, f, v, PyLong_AsSsize_t(PyTuple_GET_ITEM(shape.get(), 0)), out);
  }
  static Status getattr(Translator& t, Frame& f, const VPtr& obj, const std::string& name, VPtr& out) {
    PyObject* m = obj->obj.get();
    for (auto w = t.output.side_effects.attr_writes.rbegin(); w != t.output.side_effects.attr_writes.rend(); ++w)
      if (w->owner.get() == obj.get() && w->name == name) {  // set by the trace (setattr above): the latest
        out = w->value;
        return std::nullopt;
      }
    if (t.fn_mode_active()) {
      // under a torch function mode of the trace, a data attribute's read (x.shape, x.device) goes to
      // its handler as eager sends it: func = the descriptor's __get__, whose call reads it here again
      Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
      PyObject* attr = nm ? _PyType_Lookup(reinterpret_cast<PyTypeObject*>(py().torch_Tensor.get()), nm.get()) : nullptr;
      if (attr && data_descriptor(attr)) {
        Ref get = Ref::steal(PyObject_GetAttrString(attr, "__get__"));
        if (!get) return PyErr_Clear(), t.brk(f, "DV0005", "Tensor." + name + ": its descriptor has no __get__");
        return t.call_fn_mode(f, std::move(get), {obj}, {}, out);
      }
    }
    if (name == "device") { out = t.constant(obj->device); return std::nullopt; }
    if (name == "shape" || name == "dtype" || name == "ndim" || name == "requires_grad" || name == "is_leaf" ||
        name == "layout" || name == "is_cuda" || name == "is_sparse" || name == "is_quantized" || name == "is_meta" ||
        name == "is_cpu" || name == "is_mps" || name == "is_xpu" || name == "is_nested" || name == "is_mkldnn" ||
        name == "is_sparse_csr" || name == "itemsize") {
      if (name == "is_meta") { out = t.constant(Ref::borrow(Py_False)); return std::nullopt; }
      if (name == "is_cuda" || name == "is_cpu" || name == "is_mps" || name == "is_xpu") {  // the real device, not the example's
        Ref ty = Ref::steal(PyObject_GetAttrString(obj->device.get(), "type"));
        out = t.constant(Ref::borrow(str_of(ty.get()) == name.substr(3) ? Py_True : Py_False));
        return std::nullopt;
      }
      Ref r = Ref::steal(PyObject_GetAttrString(m, name.c_str()));
      if (!r) return t.brk(f, "DV0005", "Tensor." + name);
      if (name == "shape") return t.meta_result(f, obj, "size", {}, r, out);
      out = t.constant(r);
      return std::nullopt;
    }
    if (name == "__class__") {  // type(x): its class (a subclass's for a subclass input), as Tensor.python_type
      out = t.make(VK::Object);
      out->obj = Ref::borrow(python_type(t, obj));
      return std::nullopt;
    }
    if (name == "T" || name == "mT" || name == "H" || name == "mH" || name == "real" || name == "imag")
      return t.graph_call(f, py().getattr_fn, "", {obj, t.constant_steal(PyUnicode_FromString(name.c_str()))}, {}, out);
    if (PyObject* real = name == "grad" && obj->source ? input_object(t, obj) : nullptr) {
      // The .grad of a tensor from the frame (a parameter): read from the real one through its
      // source, and guarded as any value read from the frame (None, or a tensor input).
      Ref grad = Ref::steal(PyObject_GetAttrString(real, "grad"));
      if (!grad) return PyErr_Clear(), t.brk(f, "DV0005", "Tensor.grad could not be read");
      out = t.wrap(grad, Source::attr(obj->source, "grad"), f);
      return std::nullopt;
    }
    if (name == "data") {
      // x.data: a tensor sharing x's storage, outside autograd (p.data.mul_(d) of an EMA update,
      // p.data.clamp_(...)), as TorchDynamo records it: torch._C._autograd._get_data_attr(x)
      static PyObject* get_data = kept_attr("torch._C._autograd", "_get_data_attr");
      if (!get_data) return t.brk(f, "DV0005", "Tensor.data: torch._C._autograd._get_data_attr is missing");
      return t.graph_call(f, Ref::borrow(get_data), "", {obj}, {}, out);
    }
    if (name == "grad" && !obj->source) {
      // a tensor the graph computes (or a factory made): no gradient has been accumulated into it
      // (the trace breaks at backward() and at a .grad assignment), as TorchDynamo answers
      out = t.constant(Ref::borrow(Py_None));
      return std::nullopt;
    }
    if (name == "grad" || name == "_base")
      return t.brk(f, "DV0005", "Tensor." + name + " is not traced", "use the tensor itself, or .detach()");
    Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
    PyObject* attr = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(py().torch_Tensor.get()), nm.get());
    if (!attr) {
      // A Python attribute set on a tensor from outside (x.tag = ...): in its __dict__, read through
      // its source; absent, AttributeError as in eager. Either way guarded on its __dict__.
      if (PyObject* real = obj->source ? input_object(t, obj) : nullptr) {
        PyObject** dp = _PyObject_GetDictPtr(real);
        PyObject* v = dp && *dp ? PyDict_GetItemWithError(*dp, nm.get()) : nullptr;
        if (!v && PyErr_Occurred()) return PyErr_Clear(), t.brk(f, "DV0005", "Tensor." + name + ": its __dict__ could not be read");
        SourcePtr dict_src = Source::attr(obj->source, "__dict__");
        if (Guard* g = t.add_guard(GuardKind::DICT_CONTAINS, dict_src, Ref::borrow(nm.get()), f,
                                   repr_of(nm.get()) + (v ? " in " : " not in ") + dict_src->text()))
          g->length = v ? 1 : 0;
        if (v) {
          out = t.wrap(Ref::borrow(v), Source::attr(obj->source, name), f);
          return out ? std::nullopt : t.brk(f, "DV0013", "attribute " + name + " of a tensor cannot be traced");
        }
      }
      return t.brk(f, kNoAttributeId, "'Tensor' object has no attribute '" + name + "'");  // AttributeError in eager
    }
    // A data attribute not answered above (x._version, x.grad_fn, x.output_nr, x.nbytes): state of
    // the real tensor, which the example does not have; not a method to bind.
    if (data_descriptor(attr))
      return t.brk(f, "DV0005", "Tensor." + name + " is not traced", "read it outside the compiled function");
    out = t.bound_method(obj, Ref(), name);
    return std::nullopt;
  }
  static constexpr auto call = no_answer::call;
  static Status setattr(Translator& t, Frame& f, const VPtr& owner, const std::string& name, const VPtr& value) {
    // `p.data = p`: Module._apply's write-back of a conversion that changed nothing (`.to` of the dtype
    // and device the tensor has returns the tensor itself): no effect. Any other assignment breaks.
    if (name == "data" && value.get() == owner.get()) return std::nullopt;
    if (name == "data") return set_data(t, f, owner, value);
    // A Python attribute of the tensor's own (y.offloaded = True, a marker a hook reads later): kept
    // by the trace, read back by getattr, and set on the real tensor after the graph (which then
    // returns the tensor), as TorchDynamo replays it. What torch.Tensor defines (grad, data,
    // requires_grad ...) is not one of these.
    Ref nm = Ref::steal(PyUnicode_FromString(name.c_str()));
    const bool own = nm && !_PyType_Lookup(reinterpret_cast<PyTypeObject*>(py().torch_Tensor.get()), nm.get()) &&
                     !(name.size() > 4 && name.rfind("__", 0) == 0) && python_type(t, owner) == py().torch_Tensor.get();
    if (own && replayable_attr_value(value)) {
      t.output.side_effects.attr_writes.push_back(SideEffects::AttrWrite{owner, name, value});
      return std::nullopt;
    }
    return no_answer::setattr(t, f, owner, name, value);
  }
  static Status call_method(Translator& t, Frame& f, const VPtr& m, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
    const VPtr& self = m->self;
    const std::string& name = m->name;
    if (t.fn_mode_active()) {  // under a torch function mode of the trace: its handler, as eager dispatches
      std::vector<VPtr> a{self};
      a.insert(a.end(), args.begin(), args.end());
      bool handled = false;
      if (Status s = t.dispatch_fn_mode(f, nullptr, name, a, kwargs, out, handled); s || handled) return s;
    }
    if (name == "numpy") return t.tensor_numpy(f, self, args, kwargs, out);  // as TorchDynamo: an ndarray in the graph
    if (name == "__iter__" && args.empty() && kwargs.empty()) return t.iterate(f, self, out, false);  // x.__iter__() is iter(x)
    if (name == "register_hook") return t.register_tensor_hook(f, self, args, kwargs, out);
    if (in_list(kAutograd, name))
      return t.brk(f, "DV0004", "Tensor." + name + "() runs autograd, which is not traced",
                   "the graph ends before it and the call runs eagerly, as under torch.compile; the code after it is compiled again");
    if (in_list(kDataDependent, name))
      return t.brk(f, "DV0003", "data-dependent operator Tensor." + name + "()",
                 "the result depends on tensor values; dynview breaks the graph here like torch.compile");
    if (name == "type" && kwargs.empty() && args.size() <= 1) return tensor_type(t, f, self, args, out);
    if (name == "get_device" && args.empty() && kwargs.empty() && self->device) {
      // the real device's index (-1 on the CPU), guarded with the tensor's device; the meta example says -1
      Ref type = Ref::steal(PyObject_GetAttrString(self->device.get(), "type"));
      Ref index = Ref::steal(PyObject_GetAttrString(self->device.get(), "index"));
      if (!type || !index) return PyErr_Clear(), t.brk(f, "DV0006", "Tensor.get_device: no device");
      const bool cpu = PyUnicode_Check(type.get()) && PyUnicode_CompareWithASCIIString(type.get(), "cpu") == 0;
      out = t.constant_steal(PyLong_FromLong(cpu || index.get() == Py_None ? -1 : PyLong_AsLong(index.get())));
      return std::nullopt;
    }
    if (in_list(kMetaMethods, name)) {  // metadata: a constant computed from the example value
      // keywords: x.size(dim=1) is x.size(1); others (is_contiguous(memory_format=...)) are passed on
      std::vector<VPtr> pos = args;
      KwArgs rest;
      for (auto& kv : kwargs) {
        if (kv.first == "dim" && pos.empty() && (name == "size" || name == "stride"))
          pos.push_back(kv.second);
        else
          rest.push_back(kv);
      }
      auto pargs = Ref::steal(PyTuple_New(pos.size()));
      for (size_t i = 0; i < pos.size(); ++i) {
        auto x = t.to_python(pos[i], true);
        if (!x) return t.brk(f, "DV0013", "unsupported argument to Tensor." + name);
        PyTuple_SET_ITEM(pargs.get(), i, x->release());
      }
      Ref pkw = Ref::steal(PyDict_New());
      for (auto& [k, v] : rest) {
        auto x = t.to_python(v, true);
        if (!x || !pkw || PyDict_SetItemString(pkw.get(), k.c_str(), x->get()) < 0)
          return PyErr_Clear(), t.brk(f, "DV0013", "unsupported keyword argument '" + k + "' to Tensor." + name);
      }
      Ref m = Ref::steal(PyObject_GetAttrString(self->obj.get(), name.c_str()));
      Ref r = m ? Ref::steal(PyObject_Call(m.get(), pargs.get(), pkw.get())) : Ref();
      if (!r) return PyErr_Clear(), t.brk(f, "DV0006", "Tensor." + name + " failed on the example value");
      if (!rest.empty() && !is_exact_const(r.get()))  // (a symbolic answer would be a node without its keywords)
        return t.brk(f, "DV0021", "Tensor." + name + " with keyword arguments on a symbolic size");
      return t.meta_result(f, self, name, pos, r, out);
    }
    bool handled = false;
    if (Status s = tensor_scalar_operand(t, f, self, name, args, kwargs, out, handled); s || handled) return s;
    std::vector<VPtr> a{self};
    a.insert(a.end(), args.begin(), args.end());
    return t.graph_call(f, {}, name, std::move(a), std::move(kwargs), out);
  }
  static constexpr auto reconstruct = graph_output_reconstruct;
};
DV_KIND(Tensor, "tensor")

}  // namespace dv
