// Values on the symbolic stack (TorchDynamo's VariableTrackers). One tagged struct: the kind says
// which fields mean something. Containers created during tracing are mutable (lists, dicts,
// iterators, cells); everything else is treated as immutable.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "source.h"

namespace dv {

struct Value;
using VPtr = std::shared_ptr<Value>;
// Modules built in the trace -> the attributes it set on each, in order (OutputGraph::made_module_attrs)
using MadeModuleAttrs = std::unordered_map<PyObject*, std::vector<std::pair<std::string, VPtr>>>;
struct Frame;

enum class VK : uint8_t {
  Null,      // the NULL pushed by PUSH_NULL / LOAD_GLOBAL
  Tensor,    // obj: meta example; node: graph node; device: real device
  Const,     // obj: immutable Python constant (numbers, str, None, dtype, device, torch.Size, tuples of consts, slices)
  Tuple, List, Dict,  // items (Dict: keys + items)
  Iter,      // items snapshot + pos; lazy (flag): items made as they are taken (map, filter, itertools,
             // generators: name "generator", frame = its suspended frame)
  Object,    // obj: any Python object known by identity (modules, classes, builtins, torch functions)
  Function,  // user function: obj = function object or code (made by MAKE_FUNCTION), cells/defaults
  Method,    // self + name (tensor/list/dict/const methods), or self + function (bound user method)
  NNModule,  // obj: the nn.Module (a Sequential's slice made in the trace: items = its children, ops.cpp)
  Cell,      // items[0]: contents (or empty)
  GradMode,  // a torch.no_grad()/enable_grad()/set_grad_enabled(b) context: flag
  Sym,       // a symbolic int/bool/float of a dynamic-shape compile: obj = torch.SymInt..., node
  Slice,     // a slice with symbolic bounds: items = start, stop, step (constant slices are Const)
  Instance,  // an instance of a plain Python class made in the trace: obj = its class, self = the class
             // as loaded (its source guards class attributes), attrs = its __dict__, contents = its
             // items when the class is a dict or OrderedDict subclass (tracer/values/instance.cpp)
  DictView,  // d.keys()/values()/items(), live: self = the dict (a Dict value), name = which
             // (tracer/values/dict_view.cpp)
  Partial,   // functools.partial made in the trace: self = the function, items = its positional
             // arguments, attrs = its keyword arguments (a Dict) (tracer/values/partial.cpp)
  NdArray,   // a numpy.ndarray, backed by a tensor in the graph as TorchDynamo's NumpyNdarrayVariable:
             // obj = example tensor, node, device as a Tensor's; source = the ndarray argument it is
             // (tracer/values/ndarray.cpp)
  Vmapped,   // torch.vmap(fn, ...) made in the trace: self = fn, obj = (in_dims, out_dims, randomness)
             // (tracer/values/vmapped.cpp)
  FuncGrad,  // torch.func.grad / grad_and_value / jacrev / jacfwd(fn, ...) made in the trace, or vjp's vjp_fn
             // (items = outputs, primals): self = fn, obj = (argnums,
             // has_aux, with_value) (tracer/values/func_grad.cpp)
  Set,       // a set holding values of the trace (tensors, modules, objects compared by identity, constants):
             // items = its members in the order they were added; source: a set from the frame, read only
             // (tracer/values/set.cpp). A set of constants only is a Const (a real set).
  StrFormat, // a string formatted from traced values, made after the graph: obj = the format string,
             // items = its arguments (the last keys.size() by keyword); flag: one auto-numbered
             // field of an f-string, "{:spec}" (tracer/values/str_format.cpp)
  HookHandle,  // the handle Tensor.register_hook returned for a hook traced into the graph: answers
               // nothing (tracer/values/hook_handle.cpp)
  Lazy,      // an item of a list, tuple or dict from the frame that nothing has read yet (TorchDynamo's
             // LazyVariableTracker over a leaf): lazy = the object, source; unguarded until an
             // instruction reads it, then realized in place into what ValueBuilder::wrap makes of it
             // (tracer/values/lazy.cpp)
  WeakRef,   // weakref.ref(v) made in the trace: self = v (tracer/values/weakref.cpp)
  NpScalar,  // a numpy.float64 whose value is symbolic: self = its Sym (a SymFloat), obj = the NumPy
             // type eager holds (tracer/values/np_scalar.cpp)
};
inline constexpr size_t kKindCount = static_cast<size_t>(VK::NpScalar) + 1;  // NpScalar: the last kind
// The value protocol: what each kind answers, one specialisation per kind (tracer/values/kind.h).
template <VK K>
struct Kind;
const char* vk_name(VK k);
std::string describe(const Value& v);  // short text for events: "f32[2, 3] cpu", "(1, 2)", "<function f>"
// A dict key that stands for a value of the trace (a tensor's example, Translator::key_of): never
// a constant of the transformed code, nor compared with == (dicts.cpp).
bool value_key(PyObject* k);

struct Value {
  VK kind;
  int id = 0;             // unique per compile, for events and the viewer
  Ref obj;
  SourcePtr source;
  int node = -1;
  Ref device;
  std::vector<VPtr> items;
  std::vector<Ref> keys;
  VPtr self;
  std::string name;
  size_t pos = 0;
  // Function made by MAKE_FUNCTION (obj = code object): its pieces.
  VPtr defaults, kwdefaults;
  std::vector<VPtr> cells;
  Ref globals, qualname;
  VPtr attrs, contents;   // Instance: its __dict__ (a Dict) and its items (dict subclasses: a Dict; list subclasses: a List)
  bool flag = false;      // GradMode: enable? Function made by MAKE_FUNCTION: it has annotations;
                          // NNModule: made in the trace (made_module.cpp)
  bool mutated = false;   // a container from an input was mutated (side effect)
  // Dict or List holding the items of a dict or list subclass's instance from the frame
  // (Instance::contents): the builtin base (dict, OrderedDict or list) whose own methods write it
  // back, past the class's overrides.
  Ref storage_base;
  // Dict from the frame (TorchDynamo's lazy ConstDictVariable): the real dict while its entries are
  // wrapped only as they are read by key (keys/items hold those so far, DICT_CONTAINS guards the
  // keys probed); null once realized (all entries, DICT_KEYS). List or tuple from the frame: the real
  // one while nothing has read it (no items yet); null once realized (all items, LENGTH_CHECK).
  // Translator::realize_read / realize_call decide (tracer/values/lazy_dict.cpp).
  Ref lazy;
  // A lazy list or tuple read only by len() or at constant indices: one slot per item once its length
  // is guarded, the items wrapped so far (the rest null); realize keeps them. Read by nothing else.
  std::vector<VPtr> known;
  bool known_len = false;  // that length guarded
  // A lazy dict written (d[k] = v) before anything read it whole: the keys written, in order (their
  // values are among keys/items). Written back key by key; realize puts them among the real entries.
  std::vector<Ref> written;
  std::shared_ptr<Frame> frame;  // Iter of a generator made in the trace: its frame (result: what it returned)
  bool announced = false; // described to the observer
  int cell_of = -1;       // Cell: -1 made in the trace; k >= 0 the root frame's free variable k (a
                          // real cell the transformed code reaches by LOAD_CLOSURE); -2 a real cell
                          // of a function from outside the trace, held in obj (written back as
                          // cell.cell_contents; a closure over it cannot cross a break)
};

}  // namespace dv
