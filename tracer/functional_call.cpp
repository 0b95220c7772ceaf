// torch.func.functional_call(module, parameter_and_buffer_dicts, args, kwargs, *, tie_weights,
// strict) and torch.nn.utils.stateless.functional_call, as TorchDynamo captures them: the module's
// call inlined with the tensors given read in place of its parameters and buffers, so the graph
// computes with them (the module's own tensors are not read, not inputs, not guarded: a module on
// the meta device, as torch.func's model-ensembling idiom makes, is called the same way).
//
// Eager swaps the tensors into the module's _parameters/_buffers for the call and back after it
// (torch.nn.utils._named_member_accessor). Here each (submodule, name) is a replacement that
// Translator::getattr answers while the call is traced; a module read another way (self._parameters,
// self.parameters(), state_dict ...) breaks, as does anything eager refuses (a key that is no
// parameter or buffer, a strict call with keys missing, tied weights given two tensors).
#include <algorithm>
#include <map>
#include <set>

#include "tracer/pycache.h"
#include "tracer/translator.h"
#include "tracer/values/kind.h"

namespace dv {

namespace {

// The module's parameters and buffers by name, tied ones included (named_parameters /
// named_buffers with remove_duplicate=False, as functorch's accessor lists them): name -> tensor.
bool named_tensors(PyObject* module, std::vector<std::pair<std::string, PyObject*>>& out, Ref& keep) {
  keep = Ref::steal(PyList_New(0));
  for (const char* which : {"named_parameters", "named_buffers"}) {
    Ref meth = Ref::steal(PyObject_GetAttrString(module, which));
    Ref kw = Ref::steal(Py_BuildValue("{s:O}", "remove_duplicate", Py_False));
    Ref empty = Ref::steal(PyTuple_New(0));
    Ref it = meth && kw && empty ? Ref::steal(PyObject_Call(meth.get(), empty.get(), kw.get())) : Ref();
    Ref items = it ? Ref::steal(PySequence_List(it.get())) : Ref();
    if (!items) return PyErr_Clear(), false;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items.get()); ++i) {
      PyObject* pair = PyList_GET_ITEM(items.get(), i);
      if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(pair, 0))) return false;
      out.emplace_back(str_of(PyTuple_GET_ITEM(pair, 0)), PyTuple_GET_ITEM(pair, 1));
    }
    PyList_Append(keep.get(), items.get());  // the tensors stay alive while `out` points at them
  }
  return true;
}

// The submodule that holds `name` ("encoder.layer.0.weight" -> encoder.layer[0], "weight") through
// the _modules dicts, and whether that attribute is one of its parameters or buffers.
PyObject* holder(PyObject* module, const std::string& name, std::string& attr) {
  size_t start = 0;
  PyObject* m = module;
  for (size_t dot; (dot = name.find('.', start)) != std::string::npos; start = dot + 1) {
    PyObject** dictptr = _PyObject_GetDictPtr(m);
    PyObject* mods = dictptr && *dictptr ? PyDict_GetItemString(*dictptr, "_modules") : nullptr;
    PyObject* sub = mods && PyDict_Check(mods) ? PyDict_GetItemString(mods, name.substr(start, dot - start).c_str()) : nullptr;
    if (!sub || PyObject_IsInstance(sub, py().nn_Module.get()) != 1) return PyErr_Clear(), nullptr;
    m = sub;
  }
  attr = name.substr(start);
  PyObject** dictptr = _PyObject_GetDictPtr(m);
  for (const char* member : {"_parameters", "_buffers"}) {
    PyObject* d = dictptr && *dictptr ? PyDict_GetItemString(*dictptr, member) : nullptr;
    if (d && PyDict_Check(d) && PyDict_GetItemString(d, attr.c_str())) return m;
  }
  return nullptr;
}

}  // namespace

bool Translator::functional_override(const VPtr& module, const std::string& name, VPtr& out) const {
  return functional_override(module->obj.get(), name, out);
}

bool Translator::functional_override(PyObject* module, const std::string& name, VPtr& out) const {
  for (auto o = functional_overrides_.rbegin(); o != functional_overrides_.rend(); ++o)
    if (o->module == module && o->name == name) {
      out = o->value;
      return true;
    }
  return false;
}

Translator::Status Translator::functional_member(Frame& f, const VPtr& module, const std::string& name, VPtr& out, bool& handled) {
  handled = false;
  const bool holds = std::any_of(functional_overrides_.begin(), functional_overrides_.end(),
                                 [&](const FunctionalOverride& o) { return o.module == module->obj.get(); });
  if (!holds) return std::nullopt;
  if (name == "__dict__")
    return brk(f, "DV0004", "functional_call: the module's __dict__ is read, whose tensors the trace cannot replace",
               "read parameters and buffers as attributes (self.weight) inside a functional_call");
  if (name != "_parameters" && name != "_buffers") return std::nullopt;
  // self._parameters / self._buffers (parameters(), named_buffers(), state_dict() read them): as in
  // eager, where the tensors are swapped into these dicts, a dict whose entries are the ones given.
  // A copy: written in the trace, it would not write the module's (a break would be right; no
  // module code writes them inside forward).
  VPtr real;
  if (Status s = ops(module->kind).getattr(*this, f, module, name, real)) return s;
  if (real->kind != VK::Dict || (real->lazy && !builder.realize(real, f)))
    return brk(f, "DV0004", "functional_call: the module's " + name + " cannot be traced");
  out = make(VK::Dict);
  out->keys = real->keys;
  out->items = real->items;
  for (size_t i = 0; i < out->keys.size(); ++i) {
    if (!PyUnicode_Check(out->keys[i].get())) continue;
    VPtr v;
    if (functional_override(module, str_of(out->keys[i].get()), v)) out->items[i] = v;
  }
  handled = true;
  return std::nullopt;
}

Translator::Status Translator::functional_call(Frame& f, std::vector<VPtr> args, KwArgs kwargs, VPtr& out) {
  // functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False)
  enum { kModule, kTensors, kArgs, kKwargs, kTie, kStrict, kCount };
  VPtr given[kCount];
  if (args.size() > 4) return brk(f, "DV0004", "functional_call with more than four positional arguments", "eager raises");
  for (size_t i = 0; i < args.size(); ++i) given[i] = args[i];
  for (auto& [k, v] : kwargs) {
    int i = k == "module" ? kModule : (k == "parameter_and_buffer_dicts" || k == "parameters_and_buffers") ? kTensors
          : k == "args" ? kArgs : k == "kwargs" ? kKwargs : k == "tie_weights" ? kTie : k == "strict" ? kStrict : -1;
    if (i < 0 || given[i]) return brk(f, "DV0004", "functional_call with keyword " + k, "eager raises");
    given[i] = v;
  }
  if (!given[kModule] || !given[kTensors]) return brk(f, "DV0004", "functional_call without a module or its tensors", "eager raises");
  const VPtr& module = given[kModule];
  if (module->kind != VK::NNModule || !module->obj)
    return brk(f, "DV0004", std::string("functional_call of a ") + vk_name(module->kind) + ", not a module from outside the compiled code");
  auto flag = [&](int i, bool dflt, bool& v) {
    if (!given[i]) return v = dflt, true;
    if (given[i]->kind != VK::Const || !PyBool_Check(given[i]->obj.get())) return false;
    v = given[i]->obj.get() == Py_True;
    return true;
  };
  bool tie = true, strict = false;
  if (!flag(kTie, true, tie) || !flag(kStrict, false, strict))
    return brk(f, "DV0004", "functional_call with tie_weights or strict that is not a constant bool");
  // the dicts of tensors: one, or a tuple/list of them (their keys distinct)
  std::vector<VPtr> dicts;
  VPtr tensors = given[kTensors];
  if (tensors->kind == VK::Tuple || tensors->kind == VK::List) {
    if (tensors->lazy && !builder.realize(tensors, f)) return brk(f, "DV0004", "functional_call: its dicts cannot be traced");
    dicts = tensors->items;
  } else {
    dicts.push_back(tensors);
  }
  std::map<std::string, VPtr> by_name;
  for (const VPtr& d : dicts) {
    if (d->kind != VK::Dict) return brk(f, "DV0004", std::string("functional_call with a ") + vk_name(d->kind) + " of tensors", "eager raises");
    if (d->lazy && !builder.realize(d, f)) return brk(f, "DV0004", "functional_call: a dict of tensors that cannot be traced");
    for (size_t i = 0; i < d->keys.size(); ++i) {
      if (!PyUnicode_Check(d->keys[i].get())) return brk(f, "DV0004", "functional_call with a key that is not a str", "eager raises");
      if (d->items[i]->kind != VK::Tensor)
        return brk(f, "DV0004", "functional_call with a " + std::string(vk_name(d->items[i]->kind)) + " for " + str_of(d->keys[i].get()),
                   "only tensors replace a module's parameters and buffers here");
      if (!by_name.emplace(str_of(d->keys[i].get()), d->items[i]).second)
        return brk(f, "DV0004", "functional_call with " + str_of(d->keys[i].get()) + " in two dicts", "eager raises");
    }
  }
  std::vector<std::pair<std::string, PyObject*>> all;
  Ref keep;
  if (!named_tensors(module->obj.get(), all, keep)) return brk(f, "DV0004", "functional_call: the module's parameters cannot be listed");
  if (tie) {  // a tensor tied under several names: one of them given stands for all (functorch's _untie_named_tensors_map)
    std::map<std::string, VPtr> untied = by_name;
    for (const auto& [name, value] : by_name) {
      auto me = std::find_if(all.begin(), all.end(), [&](const auto& p) { return p.first == name; });
      if (me == all.end()) continue;
      for (const auto& [other, tensor] : all) {
        if (tensor != me->second || other == name) continue;
        auto [it, fresh] = untied.emplace(other, value);
        if (!fresh && it->second != value)
          return brk(f, "DV0004", "functional_call with tied tensors " + name + " and " + other + " given different values", "eager raises");
      }
    }
    by_name = std::move(untied);
  }
  if (strict) {  // keys missing or unexpected: eager's RuntimeError, raised in the trace
    std::set<std::string> valid, missing, unexpected;
    for (const auto& p : all) valid.insert(p.first);
    for (const std::string& n : valid)
      if (!by_name.count(n)) missing.insert(n);
    for (const auto& p : by_name)
      if (!valid.count(p.first)) unexpected.insert(p.first);
    auto listed = [](const std::set<std::string>& names) {
      std::string s;
      for (const std::string& n : names) {
        Ref u = Ref::steal(PyUnicode_FromString(n.c_str()));
        s += (s.empty() ? "" : ", ") + repr_of(u.get());
      }
      return s;
    };
    std::string msgs;
    if (!unexpected.empty()) msgs += "Unexpected key(s): " + listed(unexpected) + ".";
    if (!missing.empty()) msgs += std::string(msgs.empty() ? "" : "\n\t") + "Missing key(s): " + listed(missing) + ".";
    if (!msgs.empty())
      return raise_new(f, PyExc_RuntimeError, "Error(s) in reparametrizing for " + std::string(Py_TYPE(module->obj.get())->tp_name) + ":\n\t" + msgs,
                       "functional_call(strict=True)");
  }
  std::vector<FunctionalOverride> mine;
  for (const auto& [name, value] : by_name) {
    std::string attr;
    PyObject* m = holder(module->obj.get(), name, attr);
    if (!m)
      return brk(f, "DV0004", "functional_call with " + name + ", which is no parameter or buffer of the module",
                 strict ? "eager raises" : "eager sets it as an attribute for the call; the trace replaces parameters and buffers only");
    mine.push_back(FunctionalOverride{m, attr, value});
  }
  // the call's arguments: a tuple is the positional arguments, anything else the only one
  std::vector<VPtr> cargs;
  if (given[kArgs] && !(given[kArgs]->kind == VK::Const && given[kArgs]->obj.get() == Py_None)) {
    const VPtr& a = given[kArgs];
    if (a->kind == VK::Tuple) {
      if (a->lazy && !builder.realize(a, f)) return brk(f, "DV0004", "functional_call: its arguments cannot be traced");
      cargs = a->items;
    } else if (a->kind == VK::Const && PyTuple_Check(a->obj.get())) {
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(a->obj.get()); ++i) cargs.push_back(constant(Ref::borrow(PyTuple_GET_ITEM(a->obj.get(), i))));
    } else {
      cargs.push_back(a);
    }
  }
  KwArgs ckw;
  if (given[kKwargs] && !(given[kKwargs]->kind == VK::Const && given[kKwargs]->obj.get() == Py_None)) {
    const VPtr& d = given[kKwargs];
    if (d->kind != VK::Dict || (d->lazy && !builder.realize(d, f))) return brk(f, "DV0004", "functional_call with kwargs that are not a dict");
    for (size_t i = 0; i < d->keys.size(); ++i) {
      if (!PyUnicode_Check(d->keys[i].get())) return brk(f, "DV0004", "functional_call with a keyword that is not a str", "eager raises");
      ckw.emplace_back(str_of(d->keys[i].get()), d->items[i]);
    }
  }
  const size_t depth = functional_overrides_.size();
  functional_overrides_.insert(functional_overrides_.end(), mine.begin(), mine.end());
  Status s = call(f, module, std::move(cargs), std::move(ckw), out);
  functional_overrides_.resize(depth);  // eager puts the module's own tensors back, returned or raised
  return s;
}

}  // namespace dv
