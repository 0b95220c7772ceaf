// Sources: where a value came from, as an access path from the frame (L['x'], G['torch'],
// L['self'].linear.weight, L['xs'][0]). Guards are evaluated over them on the hit path
// (guards.cpp) and codegen reloads values from them (codegen.cpp).
#pragma once
#include <memory>
#include <string>

#include "pyref.h"

namespace dv {

struct Source;
using SourcePtr = std::shared_ptr<const Source>;

struct Source {
  enum class Kind : uint8_t {
    Local,     // frame fast local `index` (an argument slot), text L['name']
    Closure,   // func_closure[index] cell contents, text L['name']
    Global,    // f_globals[name] (falling back to builtins), text G['name']
    Attr,      // getattr(base, name) resolved through base.__dict__ (or type) at compile time
    ModuleMember,  // nn.Module: base.__dict__[dict_name][name] (_parameters/_buffers/_modules)
    Item,      // base[key] for a constant int/str key, list/tuple/dict bases
    FnClosure, // base.__closure__[index].cell_contents (base: a Python function)
    Held,      // an object held by the source itself (another module's globals dict)
    FreeCell,  // func_closure[index]: the frame's free variable cell itself (identity guards)
    AsTensor,  // torch.as_tensor(base) of a numpy.ndarray base: the tensor an ndarray argument is in the
               // graph (TorchDynamo's NumpyTensorSource); key: torch.as_tensor
    TupleIterItem,  // the item `index` places ahead of a tuple iterator base (TorchDynamo's
                    // ___tuple_iterator_getitem); key: dynview._runtime.tuple_iterator_getitem
    FnMode,    // the torch function mode at `index` of the thread's mode stack, bottom first (a mode
               // entered outside the compiled call: TorchDynamo's TorchFunctionModeStackSource); key:
               // torch._C._get_function_stack_at
    DictValueAt,  // the value at `index` of a dict base, in the dict's own order (an OrderedDict's
                  // linked order): a module's hook at its place; key: dynview._runtime.dict_value_at
    WeakRefCall,  // base(): the object a weakref.ref base refers to, None once it died (TorchDynamo's
                  // WeakRefCallSource); key: weakref.ref.__call__
    RandomDraw,   // draw `index` of Python's random module (random.uniform(0, 1)) the transformed code
                  // makes before its graph, kept in a temporary (TorchDynamo's RandomValueSource); key:
                  // (the bound method, its constant arguments). Never guarded: its value is not read.
  };
  Kind kind;
  int index = -1;        // Local/Closure
  std::string name;      // Local/Closure/Global/Attr/ModuleMember name; Item: the key's text when it is no constant
  std::string dict_name; // ModuleMember: "_parameters", "_buffers" or "_modules"
  Ref key;               // Item: the key; Held: the object
  SourcePtr base;
  bool storage = false;  // Item of a dict subclass: its own storage (dict.__getitem__), past a __getitem__ override

  std::string text() const;  // guard text form, as TorchDynamo prints it
  static SourcePtr local(int index, std::string name);
  static SourcePtr closure(int index, std::string name);
  static SourcePtr global(std::string name);
  static SourcePtr attr(SourcePtr base, std::string name);
  static SourcePtr module_member(SourcePtr base, std::string dict_name, std::string name);
  static SourcePtr item(SourcePtr base, Ref key);
  // base[key] for a key that is no constant (a tensor, a module), written `key_text` in guard text
  static SourcePtr item(SourcePtr base, Ref key, std::string key_text);
  static SourcePtr storage_item(SourcePtr base, Ref key);  // dict.__getitem__(base, key)
  static SourcePtr fn_closure(SourcePtr base, int index, std::string name);
  static SourcePtr held(Ref obj, std::string name);
  static SourcePtr free_cell(int index, std::string name);
  static SourcePtr as_tensor(SourcePtr base, Ref as_tensor_fn);
  static SourcePtr tuple_iter_item(SourcePtr base, int index, Ref getitem_fn);
  static SourcePtr fn_mode(int index, Ref stack_at_fn);
  static SourcePtr dict_value_at(SourcePtr base, int index, Ref value_at_fn);
  static SourcePtr weakref_call(SourcePtr base, Ref call_fn);
  static SourcePtr random_draw(int index, Ref fn_and_args);
};

}  // namespace dv
