// torch's functions that are not graph operators: answered while tracing (is_compiling, grad mode,
// jit.annotate ...), breaks (graph_break, seeds, save/load), found by object identity in one table
// built once from the modules that define them (aliases such as torch._dynamo.is_compiling are the
// same objects).
#include <unordered_map>

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
    {"torch", "is_tensor", TorchSpecial::is_tensor},
    {"torch.overrides", "is_tensor_like", TorchSpecial::is_tensor_like},
    {"torch", "get_default_dtype", TorchSpecial::get_default_dtype},
    {"torch.compiler", "is_compiling", TorchSpecial::is_compiling},
    {"torch.compiler", "is_dynamo_compiling", TorchSpecial::is_compiling},
    {"torch._dynamo.external_utils", "is_compiling", TorchSpecial::is_compiling},
    {"torch._utils", "is_compiling", TorchSpecial::is_compiling},
    {"torch.jit", "annotate", TorchSpecial::annotate},
    {"torch.jit", "is_scripting", TorchSpecial::not_scripting},
    {"torch.jit", "is_tracing", TorchSpecial::not_scripting},
    {"torch", "_has_compatible_shallow_copy_type", TorchSpecial::of_examples},
    {"torch._C", "_group_tensors_by_device_and_dtype", TorchSpecial::group_by_device_and_dtype},
    {"torch._C", "_has_torch_function", TorchSpecial::has_torch_function},
    {"torch._C", "_has_torch_function_unary", TorchSpecial::has_torch_function},
    {"torch._C", "_has_torch_function_variadic", TorchSpecial::has_torch_function},
    // state or effects outside the graph
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
    {"torch", "set_printoptions", TorchSpecial::effect},
    {"torch", "use_deterministic_algorithms", TorchSpecial::effect},
    {"torch", "set_num_threads", TorchSpecial::effect},
    {"torch", "compile", TorchSpecial::effect},
    {"torch.compiler", "compile", TorchSpecial::effect},
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

}  // namespace dv
