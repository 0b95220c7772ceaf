// Python objects the tracer consults, looked up once (after torch is imported).
#pragma once
#include "pyref.h"

namespace dv {

struct Py {
  Ref torch, torch_Tensor, torch_Size, torch_dtype, torch_device, nn_Module, nn_Parameter;
  Ref operator_mod, builtins, functools_partial, functools_reduce;
  Ref torch_finfo, torch_iinfo;                 // dtype descriptions: pure to construct
  Ref module_setattr, object_setattr;           // nn.Module.__setattr__, object.__setattr__
  Ref no_grad, enable_grad, set_grad_enabled, set_grad_enabled_fn;
  Ref tensorbase;   // torch._C.TensorBase
  Ref meta_str;     // "meta"
  Ref getitem, setitem, getattr_fn;
  Ref sym_int, sym_bool, sym_float;  // torch.SymInt ...
  Ref enum_meta;    // enum.EnumMeta (EnumType): the metaclass of every Enum class
  Ref torch_layout, torch_memory_format;  // the classes of torch.strided, torch.channels_last: constants
};
const Py& py();  // aborts the process if torch cannot be imported (caller imported it first)
bool py_init();  // returns false with a Python error set if something is missing
bool is_sym(PyObject* o);
// what eager holds for a torch.SymInt / SymFloat / SymBool: int, float or bool (borrowed); nullptr for anything else
PyTypeObject* sym_python_type(PyObject* o);
// module.name as a new reference kept for the process (callers hold it in a static), or null (no
// error set) when the module or attribute is missing.
PyObject* kept_attr(const char* module, const char* name);
// type((1).__add__), "method-wrapper": not in 3.13's public headers (a static type)
PyTypeObject* method_wrapper_type();  // torch.SymInt / SymBool / SymFloat
// bool, int, float, complex where torch takes a dtype: torch.bool, int64, float64, complex128, as
// torch reads them (x.to(bool), zeros(n, dtype=float)); null for anything else
Ref dtype_of_python_type(PyObject* o);

}  // namespace dv
