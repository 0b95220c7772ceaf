// torch's functions that are not graph operators: answered while tracing (is_compiling, grad mode,
// jit.annotate ...), breaks (graph_break, seeds, save/load), found by object identity in one table
// built once from the modules that define them (aliases such as torch._dynamo.is_compiling are the
// same objects).
#include <unordered_map>

#include "tracer/pycache.h"
#include "tracer/values/kind.h"
#include "translator.h"

namespace dv {

namespace {

struct Row {
  const char* module;
  const char* attr;
  TorchSpecial kind;
};

const Row kRows[] = {
    {"torch._dynamo.decorators", "graph_break", TorchSpecial::graph_break},
    {"torch", "is_grad_enabled", TorchSpecial::is_grad_enabled},
    {"torch", "_check", TorchSpecial::check},
    {"torch", "_check_index", TorchSpecial::check},
    {"torch", "_check_value", TorchSpecial::check},
    {"torch", "_check_type", TorchSpecial::check},
    {"torch", "_check_not_implemented", TorchSpecial::check},
    {"torch", "_check_with", TorchSpecial::check},
    {"torch", "is_tensor", TorchSpecial::is_tensor},
    {"torch.overrides", "is_tensor_like", TorchSpecial::is_tensor_like},
    {"torch", "get_default_dtype", TorchSpecial::get_default_dtype},
    {"torch.compiler", "is_compiling", TorchSpecial::is_compiling},
    {"torch.compiler", "is_dynamo_compiling", TorchSpecial::is_compiling},
    {"torch._dynamo.external_utils", "is_compiling", TorchSpecial::is_compiling},
    {"torch._utils", "is_compiling", TorchSpecial::is_compiling},
    {"torch.jit", "annotate", TorchSpecial::annotate},
    {"torch", "as_tensor", TorchSpecial::as_tensor},
    {"torch.jit", "is_scripting", TorchSpecial::not_scripting},
    {"torch.jit", "is_tracing", TorchSpecial::not_scripting},
    {"torch", "_has_compatible_shallow_copy_type", TorchSpecial::of_examples},
    {"torch", "is_complex", TorchSpecial::of_examples},         // of the guarded dtype
    {"torch", "is_floating_point", TorchSpecial::of_examples},
    {"torch", "numel", TorchSpecial::tensor_method},
    {"torch._C", "_group_tensors_by_device_and_dtype", TorchSpecial::group_by_device_and_dtype},
    {"torch._C", "_has_torch_function", TorchSpecial::has_torch_function},
    {"torch._C", "_has_torch_function_unary", TorchSpecial::has_torch_function},
    {"torch._C", "_has_torch_function_variadic", TorchSpecial::has_torch_function},
    {"torch._functorch.apis", "vmap", TorchSpecial::vmap},
    {"torch._functorch.vmap", "vmap_impl", TorchSpecial::vmap_impl},  // what vmap(f) made outside calls
    {"torch._functorch.apis", "grad", TorchSpecial::func_grad},
    {"torch._functorch.apis", "grad_and_value", TorchSpecial::func_grad_and_value},
    {"torch._functorch.eager_transforms", "jacrev", TorchSpecial::func_jacrev},
    // the rest of torch.func: not traced yet (a break; they run eagerly)
    {"torch._functorch.eager_transforms", "jacfwd", TorchSpecial::func_jacfwd},
    {"torch._functorch.eager_transforms", "hessian", TorchSpecial::func_hessian},
    {"torch._functorch.eager_transforms", "jvp", TorchSpecial::func_jvp},
    {"torch._functorch.eager_transforms", "vjp", TorchSpecial::func_vjp},
    {"torch._functorch.eager_transforms", "linearize", TorchSpecial::func_eager},
    {"torch._functorch.functional_call", "functional_call", TorchSpecial::functional_call},
    {"torch.utils.checkpoint", "checkpoint", TorchSpecial::checkpoint},  // its torch._disable_dynamo wrapper
    // what grad(f) made outside the compiled code calls (its wrapper's body): grad_impl(func, argnums, has_aux, args, kwargs)
    {"torch._functorch.eager_transforms", "grad_impl", TorchSpecial::grad_impl},
    {"torch._functorch.eager_transforms", "grad_and_value_impl", TorchSpecial::grad_and_value_impl},
    // state or effects outside the graph
    {"torch.nn.attention", "sdpa_kernel", TorchSpecial::sdpa_kernel},
    {"torch.autograd.graph", "disable_saved_tensors_hooks", TorchSpecial::saved_hooks_off},
    {"torch._C", "_push_on_torch_function_stack", TorchSpecial::push_fn_mode},
    {"torch._C", "_pop_torch_function_stack", TorchSpecial::pop_fn_mode},
    {"torch.overrides", "handle_torch_function", TorchSpecial::handle_torch_function},
    {"torch.overrides", "_push_mode", TorchSpecial::push_fn_mode},
    {"torch._C", "_len_torch_function_stack", TorchSpecial::fn_mode_state},
    {"torch._C", "_is_torch_function_mode_enabled", TorchSpecial::fn_mode_state},
    {"torch._C", "_get_function_stack_at", TorchSpecial::unguarded_state},
    {"torch.overrides", "_pop_mode", TorchSpecial::pop_fn_mode},
    {"torch", "manual_seed", TorchSpecial::effect},
    {"torch.random", "manual_seed", TorchSpecial::effect},
    {"torch", "seed", TorchSpecial::effect},
    {"torch", "initial_seed", TorchSpecial::effect},
    {"torch.cuda", "manual_seed", TorchSpecial::effect},
    {"torch.cuda", "manual_seed_all", TorchSpecial::effect},
    {"torch.cuda", "seed", TorchSpecial::effect},
    {"torch", "save", TorchSpecial::effect},
    {"torch", "load", TorchSpecial::effect},
    {"torch.jit", "save", TorchSpecial::effect},
    {"torch.jit", "load", TorchSpecial::effect},
    {"torch", "set_default_dtype", TorchSpecial::effect},
    {"torch._C._autograd", "_profiler_enabled", TorchSpecial::profiler_state},  // (torch.autograd._profiler_enabled)
    {"torch", "is_anomaly_enabled", TorchSpecial::anomaly_state},
    {"torch", "is_inference_mode_enabled", TorchSpecial::unguarded_state},  // as TorchDynamo, which breaks there
    {"torch", "set_printoptions", TorchSpecial::effect},
    {"torch", "use_deterministic_algorithms", TorchSpecial::effect},
    {"torch", "set_num_threads", TorchSpecial::effect},
    {"torch", "compile", TorchSpecial::compile},
    {"torch.compiler", "compile", TorchSpecial::compile},
    {"dynview._engine", "compile", TorchSpecial::compile},  // dynview.compile(g) called in the trace: g, as torch.compile's
};

}  // namespace

TorchSpecial torch_special(PyObject* fn) {
  // Rows whose module is not imported yet (torch._dynamo is imported lazily) are resolved on a later
  // lookup: looking one up never imports anything. Kept for the process, as torch is.
  static auto* table = new std::unordered_map<PyObject*, TorchSpecial>();
  static size_t pending = [] { return sizeof(kRows) / sizeof(kRows[0]); }();
  static bool* done = new bool[sizeof(kRows) / sizeof(kRows[0])]();
  if (pending) {
    for (size_t i = 0; i < sizeof(kRows) / sizeof(kRows[0]); ++i) {
      if (done[i]) continue;
      Ref name = Ref::steal(PyUnicode_FromString(kRows[i].module));
      Ref mod = name ? Ref::steal(PyImport_GetModule(name.get())) : Ref();
      if (!mod) {
        PyErr_Clear();
        continue;
      }
      done[i] = true;
      --pending;
      Ref obj = Ref::steal(PyObject_GetAttrString(mod.get(), kRows[i].attr));
      if (!obj) {  // not in this torch build: nothing to match
        PyErr_Clear();
        continue;
      }
      table->emplace(obj.release(), kRows[i].kind);  // a reference kept, so the key stays this object
    }
  }
  auto it = table->find(fn);
  return it == table->end() ? TorchSpecial::none : it->second;
}

// torch._C._group_tensors_by_device_and_dtype(tensorlistlist, with_indices) (the foreach paths of
// clip_grad_norm_ and the optimizers): {(device, dtype): ([[tensors of list j]...], indices)}. Asked
// of the real function over stand-ins (an empty tensor of each tensor's real device and dtype) so
// that its groups come in the order eager's do (an unordered map underneath), then mapped back.
Status group_by_device_and_dtype(Translator& t, Frame& f, PyObject* fn, const std::vector<VPtr>& args,
                                 const KwArgs& kwargs, VPtr& out) {
  const std::string what = callable_name(fn);
  if (args.empty() || args.size() > 2 || !kwargs.empty() || (args[0]->kind != VK::List && args[0]->kind != VK::Tuple) ||
      (args.size() == 2 && args[1]->kind != VK::Const))
    return t.brk(f, "DV0004", what + " with these arguments");
  static PyObject* empty = PyObject_GetAttrString(py().torch.get(), "empty");  // kept
  Ref no_size = Ref::steal(Py_BuildValue("(())"));
  Ref lists = Ref::steal(PyList_New(0));
  std::unordered_map<PyObject*, VPtr> back;  // stand-in -> the tensor it stands for
  for (const VPtr& l : args[0]->items) {
    if (l->kind != VK::List && l->kind != VK::Tuple) return t.brk(f, "DV0004", what + " of a " + vk_name(l->kind));
    Ref inner = Ref::steal(PyList_New(0));
    for (const VPtr& v : l->items) {
      Ref stand_in = Ref::borrow(Py_None);
      if (v->kind == VK::Tensor) {
        Ref dtype = Ref::steal(PyObject_GetAttrString(v->obj.get(), "dtype"));
        Ref kw = dtype ? Ref::steal(Py_BuildValue("{s:O,s:O}", "dtype", dtype.get(), "device", v->device.get())) : Ref();
        stand_in = empty && kw ? Ref::steal(PyObject_Call(empty, no_size.get(), kw.get())) : Ref();
        if (!stand_in) return PyErr_Clear(), t.brk(f, "DV0006", what + ": no stand-in for a tensor");
        back.emplace(stand_in.get(), v);
      } else if (v->kind != VK::Const || v->obj.get() != Py_None) {
        return t.brk(f, "DV0004", what + " of a list holding a " + vk_name(v->kind));
      }
      PyList_Append(inner.get(), stand_in.get());
    }
    PyList_Append(lists.get(), inner.get());
  }
  Ref call_args = Ref::steal(PyTuple_Pack(2, lists.get(), args.size() == 2 ? args[1]->obj.get() : Py_False));
  Ref groups = Ref::steal(PyObject_Call(fn, call_args.get(), nullptr));
  if (!groups || !PyDict_Check(groups.get())) return t.brk(f, "DV0006", what + " failed: " + repr_of(take_error().get()));
  VPtr d = t.make(VK::Dict);
  PyObject *key, *entry;
  Py_ssize_t pos = 0;
  while (PyDict_Next(groups.get(), &pos, &key, &entry)) {  // entry: ([[tensor or None]...], [index...])
    VPtr tensors = t.make(VK::List);
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(PyTuple_GET_ITEM(entry, 0)); ++j) {
      PyObject* row = PyList_GET_ITEM(PyTuple_GET_ITEM(entry, 0), j);
      VPtr lv = t.make(VK::List);
      for (Py_ssize_t k = 0; k < PyList_GET_SIZE(row); ++k) {
        auto it = back.find(PyList_GET_ITEM(row, k));
        lv->items.push_back(it != back.end() ? it->second : t.constant(Ref::borrow(Py_None)));
      }
      tensors->items.push_back(lv);
    }
    VPtr indices = t.make(VK::List);
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(PyTuple_GET_ITEM(entry, 1)); ++k)
      indices->items.push_back(t.constant(Ref::borrow(PyList_GET_ITEM(PyTuple_GET_ITEM(entry, 1), k))));
    VPtr pair = t.make(VK::Tuple);
    pair->items = {tensors, indices};
    dict_set(*d, Ref::borrow(key), pair);
  }
  out = d;
  return std::nullopt;
}

// fn(tensors...) whose Python answer depends only on the guarded type, dtype, device and layout of
// the tensors (torch._has_compatible_shallow_copy_type): computed on their examples, a constant.
Status answer_of_examples(Translator& t, Frame& f, PyObject* fn, const std::vector<VPtr>& args, VPtr& out) {
  Ref pargs = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i]->kind != VK::Tensor) return t.brk(f, "DV0004", callable_name(fn) + " of a " + vk_name(args[i]->kind));
    PyTuple_SET_ITEM(pargs.get(), static_cast<Py_ssize_t>(i), Ref(args[i]->obj).release());
  }
  Ref r = Ref::steal(PyObject_Call(fn, pargs.get(), nullptr));
  if (!r) return t.brk(f, "DV0006", callable_name(fn) + " failed on the example values: " + repr_of(take_error().get()));
  out = t.constant(r);
  return std::nullopt;
}

}  // namespace dv
