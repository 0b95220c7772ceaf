// Calling an nn.Module that has forward hooks, as nn.Module._call_impl does: the forward pre-hooks
// (which may replace the arguments), forward, then the forward hooks (which may replace the result),
// each inlined, in the order _call_impl runs them. The hooks are read when the call is traced: a
// module's own hooks from their places in its hook dicts, guarded by the dicts' lengths and as
// functions reached from the frame (a hook removed later, or another hook in its place, is seen; the
// same hook registered again is a hit). Modules without hooks are not guarded, as under torch.compile
// (torch._dynamo.config.skip_nnmodule_hook_guards): a hook added to one after the compile is not seen.
// Backward hooks break the graph.
#include "tracer/translator.h"
#include "tracer/rebuild.h"
#include "tracer/values/kind.h"

namespace dv {

namespace {

PyObject* module_globals() {  // torch.nn.modules.module (borrowed, kept for the process)
  static PyObject* mod = [] {
    PyObject* m = PyImport_ImportModule("torch.nn.modules.module");
    if (!m) PyErr_Clear();
    return m;
  }();
  return mod;
}

// d: a dict (or OrderedDict) of hook id -> hook; null or absent counts as empty.
Ref hook_dict(PyObject* owner, const char* name) {
  Ref d = Ref::steal(PyObject_GetAttrString(owner, name));
  if (!d || !PyDict_Check(d.get())) {
    PyErr_Clear();
    return {};
  }
  return d;
}

bool non_empty(const Ref& d) { return d && PyDict_GET_SIZE(d.get()) > 0; }

bool contains(const Ref& d, PyObject* key) {
  if (!d) return false;
  const int r = PyDict_Contains(d.get(), key);
  if (r < 0) PyErr_Clear();
  return r == 1;
}

bool is_none(const VPtr& v) { return v && v->kind == VK::Const && v->obj.get() == Py_None; }

}  // namespace

Translator::Status Translator::module_hooks(Frame& f, PyObject* m, const SourcePtr& msrc, ModuleHooks& out) {
  PyObject* g = module_globals();
  if (!g) return brk(f, "DV0004", "calling a module: torch.nn.modules.module cannot be read");
  for (const char* name : {"_backward_hooks", "_backward_pre_hooks"})
    if (non_empty(hook_dict(m, name)) || non_empty(hook_dict(g, (std::string("_global") + name).c_str())))
      return brk(f, "DV0004", "module " + std::string(Py_TYPE(m)->tp_name) + " with backward hooks",
                 "backward hooks are not traced; register them outside the compiled code's modules, or on tensors");
  Ref pre_kw = hook_dict(m, "_forward_pre_hooks_with_kwargs");
  Ref post_kw = hook_dict(m, "_forward_hooks_with_kwargs");
  Ref global_post_kw = hook_dict(g, "_global_forward_hooks_with_kwargs");
  static PyObject* value_at = cg::runtime_attr("dict_value_at");  // kept
  for (PyObject* owner : {g, m}) {
    const bool global = owner == g;
    for (bool pre : {true, false}) {
      const char* name = global ? (pre ? "_global_forward_pre_hooks" : "_global_forward_hooks")
                                : (pre ? "_forward_pre_hooks" : "_forward_hooks");
      Ref d = hook_dict(owner, name);
      if (!d) continue;
      // In the dict's own order: register_*_hook(prepend=True) moves a hook to the front of the
      // OrderedDict, not of its storage
      Ref ids = dict_keys_in_order(d.get());
      if (!ids) return raise_current(f, std::string(name) + ".keys()");
      for (Py_ssize_t i = 0; i < PyList_GET_SIZE(ids.get()); ++i) {
        PyObject* id = PyList_GET_ITEM(ids.get(), i);
        PyObject* fn = PyDict_GetItemWithError(d.get(), id);
        if (!fn) return PyErr_Occurred() ? raise_current(f, name) : brk(f, "DV0010", std::string("a hook vanished from ") + name);
        ModuleHooks::Hook h{Ref::borrow(fn), pre ? contains(pre_kw, id) : contains(post_kw, id) || contains(global_post_kw, id), {}};
        // A module's own hook is read from its place in the module's dict, and guarded as any
        // function reached from the frame: the same hook registered again (a new id) is a hit
        if (!global && msrc && value_at)
          h.source = Source::dict_value_at(Source::attr(msrc, name), static_cast<int>(i), Ref::borrow(value_at));
        (pre ? out.pre : out.post).push_back(std::move(h));
      }
    }
  }
  if ((out.pre.empty() && out.post.empty()) || !msrc) return std::nullopt;
  // The module's hooks stay as many, at their places (a hook removed or added later is seen; one
  // added to a module without hooks is not, as under torch.compile). A hook with keyword arguments
  // is known by its id: its dicts' keys are guarded
  for (const char* name : {"_forward_pre_hooks", "_forward_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs"}) {
    Ref d = hook_dict(m, name);
    if (!d) continue;
    SourcePtr src = Source::attr(msrc, name);
    if (Guard* gd = add_guard(GuardKind::LENGTH_CHECK, src, {}, f, "len(" + src->text() + ") == " + std::to_string(PyDict_GET_SIZE(d.get()))))
      gd->length = PyDict_GET_SIZE(d.get());
  }
  if (non_empty(pre_kw) || non_empty(post_kw))
    for (const char* name : {"_forward_pre_hooks", "_forward_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs"})
      guard_module_dict_keys(*this, f, m, msrc, name);
  return std::nullopt;
}

Translator::Status Translator::call_with_hooks(Frame& f, const VPtr& module, const VPtr& forward, const ModuleHooks& hooks,
                                               std::vector<VPtr> args, std::vector<std::pair<std::string, VPtr>> kwargs,
                                               VPtr& out) {
  const std::string mod_name = Py_TYPE(module->obj.get())->tp_name;
  VPtr argt = make(VK::Tuple);
  argt->items = std::move(args);
  VPtr kw = make(VK::Dict);
  for (auto& [k, v] : kwargs) {
    kw->keys.push_back(Ref::steal(PyUnicode_FromString(k.c_str())));
    kw->items.push_back(v);
  }
  auto hook_value = [&](const ModuleHooks::Hook& h, const char* what) {
    return wrap(h.fn, h.source ? h.source : Source::held(h.fn, std::string(what) + " " + repr_of(h.fn.get()) + " of " + mod_name), f);
  };
  for (const ModuleHooks::Hook& h : hooks.pre) {
    VPtr hv = hook_value(h, "forward pre-hook");
    if (!hv) return brk(f, "DV0004", "forward pre-hook of " + mod_name + " cannot be traced");
    VPtr r;
    if (Status s = call(f, hv, h.with_kwargs ? std::vector<VPtr>{module, argt, kw} : std::vector<VPtr>{module, argt}, {}, r)) return s;
    if (is_none(r)) continue;
    if (h.with_kwargs) {
      if (r->kind != VK::Tuple || r->items.size() != 2)
        return raise_new(f, PyExc_RuntimeError, "forward pre-hook must return None or a tuple of (new_args, new_kwargs), but got " + describe(*r) + ".");
      if (r->items[0]->kind != VK::Tuple || r->items[1]->kind != VK::Dict)
        return brk(f, "DV0004", "forward pre-hook of " + mod_name + " returned arguments that are not a tuple and a dict");
      argt = r->items[0];
      kw = r->items[1];
    } else if (r->kind == VK::Tuple) {
      argt = r;
    } else {
      argt = make(VK::Tuple);
      argt->items = {r};
    }
  }
  std::vector<std::pair<std::string, VPtr>> fkw;
  for (size_t i = 0; i < kw->keys.size(); ++i) {
    if (!PyUnicode_Check(kw->keys[i].get())) return brk(f, "DV0004", "keyword arguments of " + mod_name + " that are not strings");
    fkw.emplace_back(str_of(kw->keys[i].get()), kw->items[i]);
  }
  if (Status s = inline_call(f, forward, module, argt->items, std::move(fkw), out)) return s;
  for (const ModuleHooks::Hook& h : hooks.post) {
    VPtr hv = hook_value(h, "forward hook");
    if (!hv) return brk(f, "DV0004", "forward hook of " + mod_name + " cannot be traced");
    VPtr r;
    if (Status s = call(f, hv, h.with_kwargs ? std::vector<VPtr>{module, argt, kw, out} : std::vector<VPtr>{module, argt, out}, {}, r))
      return s;
    if (!is_none(r)) out = r;
  }
  return std::nullopt;
}

}  // namespace dv
