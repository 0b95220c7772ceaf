// The value protocol (ARCHITECTURE "Values"): the questions every kind of value answers. A kind is
// `Kind<VK::X>`, specialised in its own file under tracer/values/ with every member of KindOps as a
// static function, and `DV_KIND(X)` after it makes it the kind's row of the table (kinds.cpp). A
// member missing is a compile error; a kind without a file is a link error. Where a kind has no
// answer its member says so explicitly (a break with a reason, false, null): there is no default.
// Adding a kind: one file, and its name in the VK enum (values.h).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tracer/graph.h"
#include "tracer/translator.h"

namespace dv {

using Status = Translator::Status;
using KwArgs = std::vector<std::pair<std::string, VPtr>>;

namespace cg {
struct Rebuilder;
}

struct KindOps {
  const char* name;  // in break messages: "a tensor", "a list"
  // Short text for events and the viewer: "f32[2, 3] cpu", "(1, 2)", "<function f>".
  void (*describe)(const Value& v, std::string& out, int depth);
  // type(v) as eager would see it (borrowed), or null where the trace cannot tell.
  PyObject* (*python_type)(Translator& t, const VPtr& v);
  // The Python object v stands for (meta: tensors as their meta examples), or none.
  std::optional<Ref> (*as_python)(Translator& t, const VPtr& v, bool meta);
  // v as an argument of a graph node; false: it cannot be one.
  bool (*graph_arg)(Translator& t, const VPtr& v, ArgTree& out);
  Status (*truth)(Translator& t, Frame& f, const VPtr& v, bool& out);  // bool(v)
  // An iterator over v (see Translator::iterate).
  Status (*iterate)(Translator& t, Frame& f, const VPtr& v, VPtr& out, bool materialize);
  Status (*getattr)(Translator& t, Frame& f, const VPtr& obj, const std::string& name, VPtr& out);
  Status (*setattr)(Translator& t, Frame& f, const VPtr& owner, const std::string& name, const VPtr& value);
  Status (*call)(Translator& t, Frame& f, const VPtr& fn, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out);  // fn(...)
  // m(...) where m is a Method value bound to a value of this kind with no Python function
  // (a builtin method named m->name, or m->obj a builtin descriptor).
  Status (*call_method)(Translator& t, Frame& f, const VPtr& m, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out);
  // Pushes v in the transformed code after the graph (tracer/rebuild.h); false: it cannot be rebuilt.
  bool (*reconstruct)(cg::Rebuilder& r, const VPtr& v);
};

template <class K>
constexpr KindOps kind_row(const char* name) {
  return {name, K::describe, K::python_type, K::as_python, K::graph_arg, K::truth, K::iterate,
          K::getattr, K::setattr, K::call, K::call_method, K::reconstruct};
}
template <VK K> const KindOps& kind_ops();  // one definition per kind, by DV_KIND in the kind's file
const KindOps& ops(VK k);                   // the table (kinds.cpp)

#define DV_KIND(X, NAME)                                         \
  template <>                                                    \
  const KindOps& kind_ops<VK::X>() {                             \
    static constexpr KindOps row = kind_row<Kind<VK::X>>(NAME);  \
    return row;                                                  \
  }

// bool(v) of a kind whose values are all true (no __bool__ or __len__: functions, cells, iterators ...).
inline Status always_true(Translator&, Frame&, const VPtr&, bool& out) {
  out = true;
  return std::nullopt;
}

// The explicit answers of a kind that has none to give (`static constexpr auto iterate =
// no_answer::iterate;`): a break with the reason, or no value.
namespace no_answer {
inline std::optional<Ref> as_python(Translator&, const VPtr&, bool) { return std::nullopt; }
inline bool graph_arg(Translator&, const VPtr&, ArgTree&) { return false; }
Status iterate(Translator& t, Frame& f, const VPtr& v, VPtr& out, bool materialize);
Status getattr(Translator& t, Frame& f, const VPtr& obj, const std::string& name, VPtr& out);
Status setattr(Translator& t, Frame& f, const VPtr& owner, const std::string& name, const VPtr& value);
Status call(Translator& t, Frame& f, const VPtr& fn, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out);
Status call_method(Translator& t, Frame& f, const VPtr& m, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out);
// Not rebuilt after the graph: a value living across a break that needs it keeps the frame eager.
inline bool reconstruct(cg::Rebuilder&, const VPtr&) { return false; }
}  // namespace no_answer

inline constexpr const char* kSetattrHint =
    "dynview replays assignments of tensors, numbers, strings and containers of them to attributes "
    "of modules and plain objects";

void describe_into(const Value& v, std::string& out, int depth);  // by the kind's describe

// Answers shared by several kinds (each defined in the first kind's file).
void sequence_describe(const Value& v, std::string& out, int depth);                  // Tuple, List (tuple.cpp)
bool sequence_graph_arg(Translator& t, const VPtr& v, ArgTree& out);                  // Tuple, List
Status sequence_iterate(Translator& t, Frame& f, const VPtr& v, VPtr& out, bool materialize);  // Tuple, List
Status items_truth(Translator& t, Frame& f, const VPtr& v, bool& out);                // Tuple, List, Dict
void repr_describe(const Value& v, std::string& out, int depth);                     // Const, Object (object.cpp)
Status python_truth(Translator& t, Frame& f, const VPtr& v, bool& out);               // Const, Object (object.cpp)
bool graph_output_reconstruct(cg::Rebuilder& r, const VPtr& v);                       // Tensor, Sym (tensor.cpp)
Status const_iterate(Translator& t, Frame& f, const VPtr& v, VPtr& out, bool materialize);  // Const, Object
std::optional<Ref> tuple_as_python(Translator& t, const VPtr& v, bool meta);               // Tuple, List
// obj.name of a builtin container: a method bound to it when its Python type has one, else the
// AttributeError eager raises (list.cpp).
Status builtin_method_attr(Translator& t, Frame& f, const VPtr& obj, PyTypeObject* type, const std::string& name, VPtr& out);
Status object_getattr(Translator& t, Frame& f, const VPtr& obj, const std::string& name, VPtr& out);  // Object, Const, Function
// A call of a function torch.compiler.disable marked (disabled_function): a break with its name
// (function.cpp); also a module whose forward is one (nn_module.cpp).
Status disabled_call(Translator& t, Frame& f, PyObject* fn);
// torch.compile / dynview.compile(fn, ...) called in the trace: fn itself (object_call.cpp)
Status compile_call(Translator& t, Frame& f, const std::vector<VPtr>& args, VPtr& out);
// Object, NNModule; module_own: nn.Module.__setattr__ itself was called (super().__setattr__ in a
// module class's own __setattr__), whatever the class defines
Status object_setattr(Translator& t, Frame& f, const VPtr& owner, const std::string& name, const VPtr& value, bool module_own = false);
// A value an attribute assignment can be replayed with after the graph: tensors, constants, objects
// and modules from outside or the trace's, and tuples, lists and dicts of them (object.cpp).
bool replayable_attr_value(const VPtr& v);
Status list_iterator(Translator& t, Frame& f, const VPtr& lst, VPtr& out);  // iter(lst), lazy (list.cpp)
Status ambiguous_truth(Translator& t, Frame& f, const VPtr& v);  // bool() of a tensor of n != 1 elements raises (tensor.cpp)
PyObject* module_getattr_fn();  // nn.Module.__getattr__ (borrowed, kept by the class)
Status module_getattr_call(Translator& t, Frame& f, const VPtr& module, const VPtr& name, VPtr& out);  // nn_module.cpp
// Which of torch.nn's containers' own `method` (__iter__, __getitem__, __contains__) the module's class
// has, not overridden: 0 ModuleList, 1 Sequential, 2 ModuleDict, 3 ParameterList, 4 ParameterDict;
// -1 for any other (a subclass's own, or none) (nn_module.cpp)
int module_container_method(PyObject* module, const char* method);
bool children_container(PyObject* module);
Status changed_child(Translator& t, Frame& f, const Value& changed, bool by_key, const VPtr& idx, VPtr& out);  // (nn_module.cpp)  // a ModuleList, Sequential or ModuleDict (torch's own __len__)
// A module's _parameters / _buffers / _modules dict value that the trace changed, or null (nn_module.cpp)
const Value* changed_member_dict(Translator& t, PyObject* members);
bool no_module_registration_hooks();  // torch's global module registration hooks are none (object.cpp)
// A container module's `_modules` dict value that the trace changed (appended, assigned, deleted
// children), or null: what iterating, indexing, len() and `in` of the module see (nn_module.cpp)
const Value* changed_children(Translator& t, PyObject* module);
// `a is b` of two values, guarded so (objects from the frame by identity or type): IS_OP's answer,
// for what compares by identity first (handlers_ops.cpp)
bool same_object(Translator& t, Frame& f, const VPtr& a, const VPtr& b);
// DICT_KEYS on module.<dict> (_modules, _parameters, _forward_hooks ...) read from `source`: what the
// trace read from it holds only while its entries and their order do (nn_module.cpp)
void guard_module_dict_keys(Translator& t, Frame& f, PyObject* module, const SourcePtr& source, const char* dict);
// Builtin methods of a kind, by name, in a table in the kind's file: fn(self, args...) and whether
// it changes self (a container from outside the frame is then written back after the graph).
using MethodFn = Status (*)(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out);
struct MethodRow {
  MethodFn fn;
  bool mutates;
};
using MethodTable = std::unordered_map<std::string_view, MethodRow>;
Status call_table_method(Translator& t, Frame& f, const MethodTable& table, const VPtr& m, std::vector<VPtr>& args, KwArgs& kwargs,
                         VPtr& out);  // list.cpp
Status sequence_index_or_count(Translator& t, Frame& f, const VPtr& self, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out,
                               bool index);  // list.index / count, tuple.index / count (list.cpp)
Status dict_call(Translator& t, Frame& f, const VPtr& self, const std::string& name, std::vector<VPtr>& args, KwArgs& kwargs,
                 VPtr& out);  // a dict method by name on a Dict value (dict.cpp)
Status object_method(Translator& t, Frame& f, const VPtr& m, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out);  // Const, Object
// fmt.format(*args, **kwargs) of a constant format string over values of the trace, made after the
// graph (a StrFormat); handled false where every argument is a constant (fold it as a pure call).
// Breaks where an argument may change before the graph ends (str_format.cpp).
Status str_format(Translator& t, Frame& f, PyObject* fmt, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out, bool& handled);
std::string callable_name(PyObject* fn);   // its __qualname__ (calls.cpp)
bool allowed_in_graph(PyObject* fn);       // torch.compiler.allow_in_graph (calls.cpp)
bool disallowed_in_graph(PyObject* fn);    // torch._dynamo.disallow_in_graph (calls.cpp)
bool is_len_builtin(PyObject* fn);         // builtins.len (builtins.cpp's table)
PyObject* autograd_apply_function();       // autograd_apply.cpp
bool is_autograd_function_class(PyObject* o);
Status call_grad_exit(Translator& t, Frame& f, const VPtr& exit, VPtr& out);  // a with-block's __exit__ (calls.cpp)
// Sets holding values of the trace (set.cpp): what a set may hold (a hashable constant, a tensor, an
// object compared by identity); {..}/set(xs) of any of them (a Const set when all are constants);
// s.add(x) (a set of constants made in the trace becomes a Set in place); `x in s`; s OP t for
// | & - ^ where one side is a Set (handled false otherwise).
bool set_member_ok(const VPtr& v);
Status make_set_value(Translator& t, Frame& f, const std::vector<VPtr>& items, VPtr& out);
Status set_add_value(Translator& t, Frame& f, const VPtr& s, const VPtr& x);
Status set_compare(Translator& t, Frame& f, int cmp, const VPtr& a, const VPtr& b, VPtr& out, bool& handled);
bool set_promote(Translator& t, const VPtr& s);  // a set of constants made in the trace (a Const) as a Set, in place
Status set_contains(Translator& t, Frame& f, const VPtr& s, const VPtr& x, bool& found);
Status set_operator(Translator& t, Frame& f, char op, bool inplace, const VPtr& a, const VPtr& b, VPtr& out, bool& handled);
bool tuple_reconstruct(cg::Rebuilder& r, const VPtr& v);   // Tuple, List
bool object_reconstruct(cg::Rebuilder& r, const VPtr& v);  // Object, NNModule, Function
// Tensor, NNModule (ParameterList): an iterator over v[0], ..., v[n - 1], each read as v[i] is.
Status iterate_by_index(Translator& t, Frame& f, const VPtr& v, Py_ssize_t n, VPtr& out);
PyObject* object_slot(const std::string& name);               // object.__setattr__ / __getattribute__ (ops.cpp)
PyObject* super_lookup(PyObject* sup, const std::string& name);  // what super() finds for name (borrowed) (ops.cpp)
PyObject* user_dunder_fn(const VPtr& v, const char* name);  // a Python class's dunder of an Instance or Object (borrowed), or null (instance.cpp)
PyObject* user_next(const VPtr& v);  // a Python class's __next__ of an Instance or Object (borrowed), or null (instance.cpp)
PyObject* user_iter(const VPtr& v);  // the same for __iter__ (instance.cpp)
// An object of a Python class whose __iter__ is Python code: its iterator as Python takes it (an
// iterator object it gives taken lazily, item by item); `it` null for any other value (instance.cpp)
Status iterate_user_object(Translator& t, Frame& f, const VPtr& obj, VPtr& it);
// The entries of a dict subclass's instance made in the trace (a ModelOutput), as CPython's dict_merge
// reads them for dict(x), {**x} and f(**x): the storage when the class keeps dict's __iter__, else
// x[key] for each key, a Python __getitem__ inlined (instance.cpp). `what` names the reader in a break.
Status dict_subclass_entries(Translator& t, Frame& f, const VPtr& x, std::vector<Ref>& keys, std::vector<VPtr>& items,
                             const std::string& what);
bool list_own(PyTypeObject* tp, const char* name);  // tp's `name` is list's own (constant.cpp)
bool numpy_info_class(PyObject* o);  // numpy.iinfo / numpy.finfo (object_call.cpp)
Status object_call(Translator& t, Frame& f, const VPtr& fn, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out);  // calls.cpp
// fn(*args, **kwargs) run now on the Python values of constant arguments (`name` in messages); a
// call that changed a list it was given breaks (it ran on a copy) (calls.cpp).
Status call_on_constants(Translator& t, Frame& f, PyObject* fn, const std::string& name, const std::vector<VPtr>& args,
                         const KwArgs& kwargs, Ref& result);
// numpy.float64 values whose value is symbolic (np_scalar.cpp): numpy.float64 (borrowed; null while
// NumPy is not imported); o is exactly one; a value of `type` standing for `sym`; v the constant it is
// when it is one (its value specialised and guarded), else v unchanged.
PyObject* numpy_float64_type();
PyObject* numpy_int64_type();  // numpy.int64 (borrowed; null while NumPy is not imported)
bool numpy_int64(PyObject* o);
// torch.tensor, as_tensor, asarray: their dtype of a NumPy scalar is NumPy's (float64), of a Python
// float the default (object_call.cpp)
bool numpy_dtype_factory(PyObject* fn);
bool numpy_float64(PyObject* o);
VPtr np_scalar_value(Translator& t, const VPtr& sym, PyObject* type);
// a symbolic np.float64 or np.int64 (not the np.bool_ a comparison of one gives, whose arithmetic,
// -b and int(b) are NumPy's own: those read its constant)
bool np_scalar_number(const VPtr& v);
// An np.int64 used as an index or a slice bound is the int it holds (its __index__): its SymInt,
// or the constant int; v unchanged otherwise. False: the conversion failed (error cleared).
bool np_int_as_index(Translator& t, VPtr& v);
// A NumPy scalar constant given to a graph becomes the Python number it holds (object.cpp); false:
// an array or a scalar holding none. Other constants are left as they are.
bool numpy_graph_constant(Ref& c);
Status np_scalar_constant(Translator& t, Frame& f, VPtr& v);

}  // namespace dv
