// Cheap example values for pointwise operators (ARCHITECTURE.md decision 4): shape by
// broadcasting, dtype by torch's type promotion, requires_grad by autograd's rule -- instead of
// running the operator's meta kernel, many of which are written in Python. Used by graph_call for
// contiguous dense inputs; anything else runs the meta kernel.
#include <unordered_map>

#include "pycache.h"
#include "tensor_match.h"
#include "translator.h"

namespace dv {
namespace {

enum class PW { None, Same, Float, Promote, TrueDiv, Compare, Where };

struct Tables {
  std::unordered_map<PyObject*, PW> functions;  // Borrowed keys: module-level functions live forever
  std::unordered_map<std::string, PW> methods;
  Ref result_type, empty, get_default_dtype, bool_dtype;
};

Tables* tables() {
  static Tables* t = [] {
    auto* t = new Tables();  // never destroyed (holds Python references past finalization)
    const char* same[] = {"relu", "neg", "abs", "sign", "floor", "ceil", "round", "trunc", "square", "clone", "positive", nullptr};
    const char* flt[] = {"sin", "cos", "tan", "tanh", "sigmoid", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "erf",
                         "asin", "acos", "atan", "sinh", "cosh", "reciprocal", "exp2", "log2", "log10", nullptr};
    const char* prom[] = {"add", "sub", "mul", "maximum", "minimum", "remainder", "fmod", "pow", nullptr};
    const char* cmp[] = {"lt", "le", "gt", "ge", "eq", "ne", nullptr};
    auto add_torch = [&](const char** names, PW kind) {
      for (const char** n = names; *n; ++n) {
        t->methods[*n] = kind;
        if (PyObject* f = PyObject_GetAttrString(py().torch.get(), *n)) {
          t->functions[f] = kind;
          Py_DECREF(f);  // torch keeps it alive
        } else {
          PyErr_Clear();
        }
      }
    };
    add_torch(same, PW::Same);
    add_torch(flt, PW::Float);
    add_torch(prom, PW::Promote);
    add_torch(cmp, PW::Compare);
    t->methods["div"] = PW::TrueDiv;
    t->methods["where"] = PW::Where;
    if (PyObject* f = PyObject_GetAttrString(py().torch.get(), "where")) { t->functions[f] = PW::Where; Py_DECREF(f); }
    Ref nnf = Ref::steal(PyImport_ImportModule("torch.nn.functional"));
    for (const char* n : {"relu", "gelu", "silu", "sigmoid", "tanh"}) {
      if (PyObject* f = nnf ? PyObject_GetAttrString(nnf.get(), n) : nullptr) {
        t->functions[f] = (std::string(n) == "relu") ? PW::Same : PW::Float;
        Py_DECREF(f);
      }
      PyErr_Clear();
    }
    struct { const char* name; PW kind; } ops[] = {
        {"add", PW::Promote}, {"sub", PW::Promote}, {"mul", PW::Promote}, {"iadd", PW::Promote},
        {"isub", PW::Promote}, {"imul", PW::Promote}, {"truediv", PW::TrueDiv}, {"itruediv", PW::TrueDiv},
        {"neg", PW::Same}, {"pos", PW::Same}, {"lt", PW::Compare}, {"le", PW::Compare}, {"gt", PW::Compare},
        {"ge", PW::Compare}, {"eq", PW::Compare}, {"ne", PW::Compare}};
    for (auto& o : ops) {
      if (PyObject* f = PyObject_GetAttrString(py().operator_mod.get(), o.name)) {
        t->functions[f] = o.kind;
        Py_DECREF(f);
      }
    }
    t->result_type = Ref::steal(PyObject_GetAttrString(py().torch.get(), "result_type"));
    t->empty = Ref::steal(PyObject_GetAttrString(py().torch.get(), "empty"));
    t->get_default_dtype = Ref::steal(PyObject_GetAttrString(py().torch.get(), "get_default_dtype"));
    t->bool_dtype = Ref::steal(PyObject_GetAttrString(py().torch.get(), "bool"));
    PyErr_Clear();
    return t;
  }();
  return t;
}

bool contiguous(PyObject* t) {
  Ref r = Ref::steal(PyObject_CallMethod(t, "is_contiguous", nullptr));
  return r && r.get() == Py_True;
}

}  // namespace

// Returns a meta tensor for the op, or an empty Ref when the fast path does not apply.
Ref pointwise_example(PyObject* target, const std::string& method, const std::vector<Ref>& args, bool has_kwargs) {
  Tables* t = tables();
  PW kind = PW::None;
  if (!method.empty()) {
    auto it = t->methods.find(method);
    if (it != t->methods.end()) kind = it->second;
  } else {
    auto it = t->functions.find(target);
    if (it != t->functions.end()) kind = it->second;
  }
  if (kind == PW::None || has_kwargs || args.empty()) return {};
  const size_t arity = kind == PW::Where ? 3 : (kind == PW::Same || kind == PW::Float) ? 1 : 2;
  if (args.size() != arity) return {};
  std::vector<int64_t> shape;
  bool any_tensor = false, requires_grad = false;
  for (const Ref& a : args) {
    PyObject* o = a.get();
    if (is_tensor(o)) {
      if (!contiguous(o)) return {};
      TensorSpec s;
      if (!tensor_spec(o, s)) return {};
      any_tensor = true;
      requires_grad |= s.requires_grad;
      // Broadcast (right-aligned).
      std::vector<int64_t> out(std::max(shape.size(), s.sizes.size()), 1);
      for (size_t i = 0; i < out.size(); ++i) {
        int64_t x = i < shape.size() ? shape[shape.size() - 1 - i] : 1;
        int64_t y = i < s.sizes.size() ? s.sizes[s.sizes.size() - 1 - i] : 1;
        if (x != y && x != 1 && y != 1) return {};  // the real kernel will report the error
        out[out.size() - 1 - i] = x == 1 ? y : x;
      }
      shape = std::move(out);
    } else if (!(PyFloat_Check(o) || PyLong_Check(o) || PyBool_Check(o))) {
      return {};
    }
  }
  if (!any_tensor) return {};
  // dtype
  Ref dtype;
  if (kind == PW::Compare) {
    dtype = t->bool_dtype;
  } else {
    const size_t first = kind == PW::Where ? 1 : 0;
    Ref a0 = args[first];
    dtype = Ref::steal(arity - first == 1 ? PyObject_GetAttrString(a0.get(), "dtype")
                                          : PyObject_CallFunctionObjArgs(t->result_type.get(), args[first].get(), args[first + 1].get(), nullptr));
    if (!dtype) return PyErr_Clear(), Ref();
    if (kind == PW::Float || kind == PW::TrueDiv) {
      Ref fp = Ref::steal(PyObject_GetAttrString(dtype.get(), "is_floating_point"));
      Ref cx = Ref::steal(PyObject_GetAttrString(dtype.get(), "is_complex"));
      if (!fp || !cx) return PyErr_Clear(), Ref();
      if (fp.get() != Py_True && cx.get() != Py_True) dtype = Ref::steal(PyObject_CallNoArgs(t->get_default_dtype.get()));
    }
  }
  Ref fp = Ref::steal(PyObject_GetAttrString(dtype.get(), "is_floating_point"));
  const bool differentiable = fp && fp.get() == Py_True;
  const bool grad = requires_grad && differentiable && global_state().grad_enabled;
  Ref size = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(shape.size())));
  for (size_t i = 0; i < shape.size(); ++i) PyTuple_SET_ITEM(size.get(), i, PyLong_FromLongLong(shape[i]));
  Ref kw = Ref::steal(Py_BuildValue("{s:O,s:O,s:O}", "dtype", dtype.get(), "device", py().meta_str.get(), "requires_grad",
                                    grad ? Py_True : Py_False));
  Ref a = Ref::steal(PyTuple_Pack(1, size.get()));
  Ref r = Ref::steal(PyObject_Call(t->empty.get(), a.get(), kw.get()));
  // A result that requires grad is no leaf (it has a grad_fn, as the op's own result has): an
  // in-place op on it (`z = w * 2; z.add_(1)` of a parameter in training) is allowed, as in eager.
  if (r && grad) r = Ref::steal(PyObject_CallMethod(r.get(), "clone", nullptr));
  if (!r) PyErr_Clear();
  return r;
}

}  // namespace dv
