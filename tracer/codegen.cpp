// Transformed code generation (see codegen.h).
#include "codegen.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "core/assembler.h"
#include "core/opcodes.h"
#include "frame_shim.h"
#include "pycache.h"
#include "pycache.h"
#include "resume.h"
#include "rebuild.h"
#include "values/kind.h"

namespace dv {

std::vector<int> output_nodes(const VPtr& ret, const MadeModuleAttrs* made) {
  std::vector<int> out;
  std::unordered_set<const Value*> seen;  // mutable values can hold themselves (o.me = o)
  std::function<void(const VPtr&)> walk = [&](const VPtr& v) {
    if (!v || !seen.insert(v.get()).second) return;
    if (v->kind == VK::Tensor || v->kind == VK::Sym || v->kind == VK::NdArray) {
      if (std::find(out.begin(), out.end(), v->node) == out.end()) out.push_back(v->node);
      return;
    }
    if (v->kind == VK::Tuple || v->kind == VK::List || v->kind == VK::Dict || v->kind == VK::Set || v->kind == VK::StrFormat)
      for (const VPtr& x : v->items) walk(x);
    if (v->kind == VK::Instance) {
      walk(v->attrs);
      walk(v->contents);
    }
    if (v->kind == VK::DictView || v->kind == VK::NpScalar) walk(v->self);
    if (v->kind == VK::Iter && !v->flag)  // an iterator crossing a break: the items it has yet to give
      for (size_t i = v->pos; i < v->items.size(); ++i) walk(v->items[i]);
    if (v->kind == VK::Iter && v->flag && !v->frame) {  // a lazy one (map, zip, count ...): what it is rebuilt from
      walk(v->self);
      for (const VPtr& c : v->cells) walk(c);
      walk(v->defaults);
      walk(v->kwdefaults);
    }
    if (v->kind == VK::Method) walk(v->self);  // a tensor's method crossing a break: its tensor
    if (v->kind == VK::NNModule && v->flag && made && v->obj)
      if (auto it = made->find(v->obj.get()); it != made->end())
        for (const auto& entry : it->second) walk(entry.second);
    if (v->kind == VK::Cell) walk(v->items.empty() ? nullptr : v->items[0]);
    if (v->kind == VK::Function) {  // a closure made in the trace: its cells' contents and defaults
      for (const VPtr& c : v->cells) walk(c);
      walk(v->defaults);
      walk(v->kwdefaults);
    }
  };
  walk(ret);
  return out;
}

namespace cg {

// A helper of dynview._runtime the transformed code calls (borrowed, kept for the process; null: missing).
PyObject* runtime_attr(const char* name) {
  Ref mod = Ref::steal(PyImport_ImportModule("dynview._runtime"));
  PyObject* m = mod ? PyObject_GetAttrString(mod.get(), name) : nullptr;
  if (!m) PyErr_Clear();
  return m;
}

bool Rebuilder::value(const VPtr& v) {
  if (auto it = memo.find(v.get()); it != memo.end()) {
    e.emit(N::LOAD_FAST, it->second);
    return true;
  }
  return ops(v->kind).reconstruct(*this, v);
}

}  // namespace cg

namespace {

using cg::N;
using cg::Emitter;
using cg::Rebuilder;


// Loads many sources (a graph's inputs) with each shared base read once: the parameters of a
// module tree share `self._modules['encoder']._modules['layer']...`, kept in temporaries.
struct SharedSources {
  Emitter& e;
  std::unordered_map<std::string, int> uses, slot;  // by the access path (equal sources are one)

  static std::string key(const Source& s) {
    std::string k = std::to_string(static_cast<int>(s.kind)) + ":" + s.name + ":" + s.dict_name + ":" + std::to_string(s.index);
    if (s.kind == Source::Kind::Held) k += ":" + std::to_string(reinterpret_cast<uintptr_t>(s.key.get()));
    if (s.kind == Source::Kind::Item)
      k += ":" + std::string(Py_TYPE(s.key.get())->tp_name) + ":" +
           (s.name.empty() ? repr_of(s.key.get()) : std::to_string(reinterpret_cast<uintptr_t>(s.key.get()))) + (s.storage ? ":storage" : "");
    return s.base ? key(*s.base) + "/" + k : k;
  }
  SharedSources(Emitter& em, const std::vector<SourcePtr>& all) : e(em) {
    for (const SourcePtr& s : all)
      for (const Source* b = s->base.get(); b; b = b->base.get()) ++uses[key(*b)];
  }
  bool load(const Source& s) {
    const std::string k = key(s);
    if (auto it = slot.find(k); it != slot.end()) return e.emit(N::LOAD_FAST, it->second), true;
    if (!s.base) return e.source(s);
    if (s.kind == Source::Kind::AsTensor || s.kind == Source::Kind::TupleIterItem || s.kind == Source::Kind::DictValueAt ||
        s.kind == Source::Kind::WeakRefCall) {
      const bool one = s.kind == Source::Kind::AsTensor || s.kind == Source::Kind::WeakRefCall;
      e.callable_const(s.key.get());  // the callable goes first
      if (!load(*s.base)) return false;
      if (!one) e.load_int(s.index);
      e.call(one ? 1 : 2);
    } else if (!load(*s.base) || !e.step(s)) {
      return false;
    }
    if (auto u = uses.find(k); u != uses.end() && u->second > 1) {
      const int t = e.temp();
      e.emit(N::COPY, 1);
      e.emit(N::STORE_FAST, t);
      slot[k] = t;
    }
    return true;
  }
};


// The cells made in the trace that `roots` reach (through closures, containers, cell contents), in
// order; `outside`: a real cell of a function from outside the trace is reached too.
std::vector<VPtr> trace_cells(const std::vector<VPtr>& roots, bool& outside) {
  std::vector<VPtr> cells;
  std::unordered_set<const Value*> seen;
  std::function<void(const VPtr&)> walk = [&](const VPtr& v) {
    if (!v || !seen.insert(v.get()).second) return;
    if (v->kind == VK::Cell) {
      if (v->cell_of == -1) cells.push_back(v);
      if (v->cell_of == -2) outside = true;
      if (!v->items.empty()) walk(v->items[0]);
      return;
    }
    if (v->kind == VK::Tensor || v->kind == VK::Sym || v->kind == VK::Const) return;
    for (const VPtr& x : v->items) walk(x);
    for (const VPtr& x : v->cells) walk(x);
    for (const VPtr* x : {&v->self, &v->defaults, &v->kwdefaults, &v->attrs, &v->contents}) walk(*x);
  };
  for (const VPtr& v : roots) walk(v);
  return cells;
}


}  // namespace

namespace cg {
bool Rebuilder::make_cells(const std::vector<VPtr>& roots, const std::vector<VPtr>& extra, std::string& why) {
  bool outside = false;
  std::vector<VPtr> all = extra;
  all.insert(all.end(), roots.begin(), roots.end());
  std::vector<VPtr> cells;
  for (const VPtr& c : trace_cells(all, outside))
    if (!memo.count(c.get())) cells.push_back(c);
  if (outside) {
    why = "a closure over a cell of a function defined outside the frame lives across the break";
    return false;
  }
  if (cells.empty()) return true;
  static PyObject* cell_type = reinterpret_cast<PyObject*>(&PyCell_Type);
  for (const VPtr& c : cells) {
    e.callable_const(cell_type);
    e.call(0);
    const int slot = e.temp();
    e.emit(N::STORE_FAST, slot);
    memo[c.get()] = slot;
  }
  for (const VPtr& c : cells) {
    if (c->items.empty() || !c->items[0]) continue;
    if (!value(c->items[0])) {
      why = "cannot rebuild the contents of a cell (" + describe(*c->items[0]) + ")";
      return false;
    }
    e.emit(N::LOAD_FAST, memo.at(c.get()));
    e.emit(N::STORE_ATTR, e.name("cell_contents"));
  }
  return true;
}
}  // namespace cg

namespace {

// The values the side effects write (they cross into the code after the graph).
std::vector<VPtr> side_effect_values(const SideEffects& se) {
  std::vector<VPtr> out;
  for (const auto& w : se.attr_writes)
    if (w.value) out.push_back(w.value);
  for (const auto& w : se.global_writes) out.push_back(w.value);
  for (const VPtr& l : se.mutated_lists) out.push_back(l);
  for (const VPtr& d : se.mutated_dicts) out.push_back(d);
  for (const VPtr& c : se.written_cells)
    if (!c->items.empty()) out.push_back(c->items[0]);
  for (const auto& h : se.tensor_hooks) out.push_back(h.hook);
  return out;
}

// Common head of a transformed code object: free variables, RESUME, the graph call, the grad mode
// the rest must run in, and the replayed side effects.
// `roots`: the values rebuilt after the head (return value, or what crosses a split); real cells are
// made for the trace's cells they and the side effects reach.
// `load_roots` evaluates what the code after the head uses into temporaries (Rebuilder::stash): it
// runs before any side effect is written back, as TorchDynamo restores the stack before it updates
// what the trace mutated -- a value read from a container the trace then changed (`v = d.pop(k)`
// returned, or passed on across a break) is reloaded from the container as it was.
bool emit_head(Emitter& e, Rebuilder& rb, PyCodeObject* co, const CaptureResult& c, int grad_mode,
               const std::vector<VPtr>& roots, const std::function<bool()>& load_roots, std::string& why) {
  PyObject* compiled = c.compiled.get();
  const OutputGraph& og = c.out;
  if (co->co_nfreevars) e.emit(N::COPY_FREE_VARS, co->co_nfreevars);
  e.emit(N::RESUME, 0);
  for (const Ref& draw : og.random_draws) {  // fn(*args), kept in a temporary: (fn, args)
    PyObject* fn = PyTuple_GET_ITEM(draw.get(), 0);
    PyObject* args = PyTuple_GET_ITEM(draw.get(), 1);
    e.callable_const(fn);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); ++i) e.emit(N::LOAD_CONST, e.konst(PyTuple_GET_ITEM(args, i)));
    e.call(static_cast<int>(PyTuple_GET_SIZE(args)));
    e.draws.push_back(e.temp());
    e.emit(N::STORE_FAST, e.draws.back());
  }
  if (compiled) {
    e.callable_const(compiled);
    std::vector<SourcePtr> srcs;
    for (const auto& [src, node] : og.inputs) srcs.push_back(src);
    SharedSources shared(e, srcs);
    for (const SourcePtr& src : srcs) {
      if (!shared.load(*src)) {
        why = "cannot reload input " + src->text();
        return false;
      }
    }
    e.call(static_cast<int>(og.inputs.size()));
    e.emit(N::STORE_FAST, rb.outs_slot);
  }
  if (grad_mode >= 0) {  // torch._C._set_grad_enabled(mode)
    e.callable_const(py().set_grad_enabled_fn.get());
    e.emit(N::LOAD_CONST, e.konst(grad_mode ? Py_True : Py_False));
    e.call(1);
    e.emit(N::POP_TOP);
  }
  const SideEffects& se = og.side_effects;
  if (!rb.make_cells(roots, side_effect_values(se), why)) return false;
  if (!load_roots()) return false;
  // The new contents of every mutated list and dict are built first, before anything is written
  // back: an item may be reloaded from a source inside a container (the same one or another) that a
  // write-back changes.
  std::vector<int> list_tmp, dict_tmp;
  for (const VPtr& l : se.mutated_lists) {
    for (const VPtr& x : l->items)
      if (!rb.value(x)) {
        why = "cannot write back the mutated list " + l->source->text();
        return false;
      }
    e.emit(N::BUILD_LIST, static_cast<int>(l->items.size()));
    list_tmp.push_back(e.temp());
    e.emit(N::STORE_FAST, list_tmp.back());
  }
  for (const VPtr& d : se.mutated_dicts) {
    if (d->lazy) {  // written only (d[k] = v), never read whole: the written entries, set one by one below
      for (const Ref& k : d->written) {
        const long at = find_key(*d, k.get());
        if (at < 0 || !rb.key(k) || !rb.value(d->items[static_cast<size_t>(at)])) {
          PyErr_Clear();
          return why = "cannot write back the mutated dict " + d->source->text(), false;
        }
      }
      e.emit(N::BUILD_MAP, static_cast<int>(d->written.size()));
      dict_tmp.push_back(e.temp());
      e.emit(N::STORE_FAST, dict_tmp.back());
      continue;
    }
    for (size_t i = 0; i < d->items.size(); ++i) {
      if (!rb.key(d->keys[i]) || !rb.value(d->items[i])) {
        why = "cannot write back the mutated dict " + d->source->text();
        return false;
      }
    }
    e.emit(N::BUILD_MAP, static_cast<int>(d->items.size()));
    dict_tmp.push_back(e.temp());
    e.emit(N::STORE_FAST, dict_tmp.back());
  }
  static PyObject* setattr_name = PyUnicode_InternFromString("__setattr__");
  for (const auto& w : se.attr_writes) {  // attribute assignments, replayed in order: (value owner -- )
    if (!w.value) {  // del owner.name: (owner -- )
      if (!rb.value(w.owner)) {
        why = "cannot replay the deletion of attribute '" + w.name + "'";
        return false;
      }
      e.emit(N::DELETE_ATTR, e.name(w.name));
      continue;
    }
    const bool module = w.owner->kind == VK::NNModule;
    PyObject* ow = w.owner->kind == VK::Object || module ? w.owner->obj.get() : nullptr;
    PyObject* custom = ow && !PyType_Check(ow) ? _PyType_Lookup(Py_TYPE(ow), setattr_name) : nullptr;
    if (custom && PyFunction_Check(custom) && custom != py().module_setattr.get()) {
      // the class's Python __setattr__ ran in the trace: the assignment it made, by object.__setattr__
      // (nn.Module.__setattr__ for a module: it files a buffer under _buffers), not the class's again
      e.callable_const(module ? py().module_setattr.get() : py().object_setattr.get());
      if (!rb.value(w.owner)) {
        why = "cannot replay the assignment to attribute '" + w.name + "'";
        return false;
      }
      e.emit(N::LOAD_CONST, e.konst(Ref::steal(PyUnicode_FromString(w.name.c_str())).get()));
      if (!rb.value(w.value)) {
        why = "cannot replay the assignment to attribute '" + w.name + "'";
        return false;
      }
      e.call(3);
      e.emit(N::POP_TOP);
      continue;
    }
    if (!rb.value(w.value) || !rb.value(w.owner)) {
      why = "cannot replay the assignment to attribute '" + w.name + "'";
      return false;
    }
    e.emit(N::STORE_ATTR, e.name(w.name));
  }
  for (const VPtr& c : se.written_cells) {  // nonlocal writes to real cells: (value -- )
    if (c->items.empty() || !c->items[0] || !rb.value(c->items[0])) {
      why = "cannot replay the assignment to a free variable";
      return false;
    }
    if (c->cell_of >= 0) {  // the frame's own free variable
      e.emit_free(N::STORE_DEREF, c->cell_of);
    } else {  // a cell of a function from outside: cell.cell_contents = value
      e.emit(N::LOAD_CONST, e.konst(c->obj.get()));
      e.emit(N::STORE_ATTR, e.name("cell_contents"));
    }
  }
  for (const auto& h : se.tensor_hooks) {  // torch.Tensor.register_hook(tensor, hook), in order; the handle dropped
    static PyObject* register_hook = PyObject_GetAttrString(py().torch_Tensor.get(), "register_hook");  // kept
    if (!register_hook) return PyErr_Clear(), why = "torch.Tensor.register_hook is missing", false;
    e.callable_const(register_hook);
    if (!rb.value(h.tensor) || !rb.value(h.hook)) return why = "cannot register the hook on " + h.tensor->source->text(), false;
    e.call(2);
    e.emit(N::POP_TOP);
  }
  for (const auto& w : se.global_writes) {  // globals()[name] = value, in order: (value dict key -- )
    if (!rb.value(w.value)) {
      why = "cannot replay the assignment to global '" + w.name + "'";
      return false;
    }
    e.emit(N::LOAD_CONST, e.konst(w.globals.get()));
    e.emit(N::LOAD_CONST, e.konst(Ref::steal(PyUnicode_FromString(w.name.c_str())).get()));
    e.emit(N::STORE_SUBSCR);
  }
  for (size_t k = 0; k < se.mutated_lists.size(); ++k) {  // lst[:] = new contents: (value container key -- )
    const VPtr& l = se.mutated_lists[k];
    if (is_deque(l)) {  // a deque from the frame: deque.clear(d); deque.extend(d, new contents)
      for (const char* method : {"clear", "extend"}) {
        Ref fn = Ref::steal(PyObject_GetAttrString(deque_class(), method));
        if (!fn) return PyErr_Clear(), why = "cannot write back the deque " + l->source->text(), false;
        e.callable_const(fn.get());
        if (!e.source(*l->source)) return why = "cannot reload the mutated deque " + l->source->text(), false;
        const bool extend = method[0] == 'e';
        if (extend) e.emit(N::LOAD_FAST, list_tmp[k]);
        e.call(extend ? 2 : 1);
        e.emit(N::POP_TOP);
      }
      continue;
    }
    if (l->storage_base) {  // a list subclass's items: list.__setitem__(l, slice(None), new), past its overrides
      static PyObject* setitem = PyObject_GetAttrString(reinterpret_cast<PyObject*>(&PyList_Type), "__setitem__");
      if (!setitem) return PyErr_Clear(), why = "cannot write back the items of " + l->source->text(), false;
      e.callable_const(setitem);
      if (!e.source(*l->source)) return why = "cannot reload the mutated list " + l->source->text(), false;
      e.emit(N::LOAD_CONST, e.konst(Ref::steal(PySlice_New(nullptr, nullptr, nullptr)).get()));
      e.emit(N::LOAD_FAST, list_tmp[k]);
      e.call(3);
      e.emit(N::POP_TOP);
      continue;
    }
    e.emit(N::LOAD_FAST, list_tmp[k]);
    if (!e.source(*l->source)) {
      why = "cannot reload the mutated list " + l->source->text();
      return false;
    }
    e.emit(N::LOAD_CONST, e.konst(Ref::steal(PySlice_New(nullptr, nullptr, nullptr)).get()));
    e.emit(N::STORE_SUBSCR);
  }
  for (size_t k = 0; k < se.mutated_dicts.size(); ++k) {  // dict.clear(d); dict.update(d, new contents)
    const VPtr& d = se.mutated_dicts[k];
    if (d->storage_base && d->storage_base.get() != reinterpret_cast<PyObject*>(&PyDict_Type)) {
      // An OrderedDict subclass's items: its base's clear, then base.__setitem__(d, key, new[key])
      // per key in order (dict's methods would bypass the OrderedDict's links; its update calls
      // the class's own __setitem__).
      PyObject* base = d->storage_base.get();
      Ref clear = Ref::steal(PyObject_GetAttrString(base, "clear"));
      Ref setitem = Ref::steal(PyObject_GetAttrString(base, "__setitem__"));
      if (!clear || !setitem) {
        PyErr_Clear();
        why = "cannot write back the items of " + d->source->text();
        return false;
      }
      e.callable_const(clear.get());
      if (!e.source(*d->source)) return why = "cannot reload " + d->source->text(), false;
      e.call(1);
      e.emit(N::POP_TOP);
      for (const Ref& key : d->keys) {
        e.callable_const(setitem.get());
        if (!e.source(*d->source)) return why = "cannot reload " + d->source->text(), false;
        e.emit(N::LOAD_CONST, e.konst(key.get()));
        e.emit(N::LOAD_FAST, dict_tmp[k]);
        e.emit(N::LOAD_CONST, e.konst(key.get()));
        e.emit(N::BINARY_SUBSCR);
        e.call(3);
        e.emit(N::POP_TOP);
      }
      continue;
    }
    for (const char* method : {"clear", "update"}) {
      if (d->lazy && method[0] == 'c') continue;  // only written: dict.update(d, the entries written)
      Ref fn = Ref::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(&PyDict_Type), method));
      e.callable_const(fn.get());
      if (!e.source(*d->source)) {
        why = "cannot reload the mutated dict " + d->source->text();
        return false;
      }
      const bool update = method[0] == 'u';
      if (update) e.emit(N::LOAD_FAST, dict_tmp[k]);
      e.call(update ? 2 : 1);
      e.emit(N::POP_TOP);
    }
  }
  for (const SideEffects::OutsideSet& s : se.outside_sets) {  // set.clear(s); set.update(s, frozenset(new items))
    if (!se.set_changed(s)) continue;
    Ref items = Ref::steal(PyFrozenSet_New(s.value->obj.get()));
    if (!items) return PyErr_Clear(), why = "cannot write back the set " + s.value->source->text(), false;
    for (const char* method : {"clear", "update"}) {
      Ref fn = Ref::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(&PySet_Type), method));
      e.callable_const(fn.get());
      if (!e.source(*s.value->source)) return why = "cannot reload the mutated set " + s.value->source->text(), false;
      const bool update = method[0] == 'u';
      if (update) e.emit(N::LOAD_CONST, e.konst(items.get()));
      e.call(update ? 2 : 1);
      e.emit(N::POP_TOP);
    }
  }
  // The thread's torch function mode stack as the trace left it (after the writes above, which run
  // under the modes the call began with)
  if (c.fn_mode_pops || !c.fn_mode_pushes.empty()) {
    static PyObject* pop = kept_attr("torch._C", "_pop_torch_function_stack");
    static PyObject* push = kept_attr("torch._C", "_push_on_torch_function_stack");
    if (!pop || !push) return why = "torch._C's torch function mode stack functions are missing", false;
    for (int k = 0; k < c.fn_mode_pops; ++k) {
      e.callable_const(pop);
      e.call(0);
      e.emit(N::POP_TOP);
    }
    for (const VPtr& m : c.fn_mode_pushes) {
      if (m->source && m->source->kind == Source::Kind::FnMode)  // (its place on the stack is gone)
        return why = "a torch function mode taken off the stack is entered again", false;
      e.callable_const(push);
      if (!rb.value(m)) return why = "cannot rebuild the torch function mode " + describe(*m) + " to enter it", false;
      e.call(1);
      e.emit(N::POP_TOP);
    }
  }
  return true;
}

// The items the trace took from iterators of the frame, taken from the real ones: emitted once
// every value the rest needs is loaded (an item is reloaded by its place ahead of the iterator).
bool emit_advances(Emitter& e, const SideEffects& se, std::string& why) {
  for (const VPtr& it : se.advanced_iters) {  // dynview._runtime.advance_iterator(it, taken)
    if (it->pos == 0) continue;
    static PyObject* advance = cg::runtime_attr("advance_iterator");
    if (!advance) {
      why = "cannot advance the iterator " + it->source->text();
      return false;
    }
    e.callable_const(advance);
    if (!e.source(*it->source)) {
      why = "cannot reload the iterator " + it->source->text();
      return false;
    }
    e.load_int(static_cast<long>(std::min(it->pos, it->items.size())));
    e.call(2);
    e.emit(N::POP_TOP);
  }
  return true;
}

// Assembles the emitted instructions into a code object like `co` taking its arguments, and a
// function over `globals` (its closure is set per call by the frame hook).
std::optional<Transformed> finish(Emitter& e, PyCodeObject* co, PyObject* globals, PyObject* closure, std::string& why) {
  const int nargs = co->co_argcount + co->co_kwonlyargcount + ((co->co_flags & CO_VARARGS) ? 1 : 0) +
                    ((co->co_flags & CO_VARKEYWORDS) ? 1 : 0);
  const int nvarnames = e.nfixed + e.ntemps;
  for (size_t i : e.free_refs) e.ins[i].arg += nvarnames;
  Ref varnames = Ref::steal(PyTuple_New(nvarnames));
  for (int i = 0; i < nargs; ++i) PyTuple_SET_ITEM(varnames.get(), i, Ref::borrow(PyTuple_GET_ITEM(co->co_localsplusnames, i)).release());
  PyTuple_SET_ITEM(varnames.get(), nargs, PyUnicode_FromString("___dv_graph_out"));
  for (int i = 0; i < e.ntemps; ++i) PyTuple_SET_ITEM(varnames.get(), e.nfixed + i, PyUnicode_FromFormat("___dv_tmp%d", i));
  bc::AsmInput in;
  in.version = e.v;
  in.instrs = e.ins;
  in.ranges = e.ranges;
  in.firstlineno = co->co_firstlineno;
  auto out = bc::assemble(in);
  if (!out) {
    why = out.error().message();
    return std::nullopt;
  }
  Ref consts = Ref::steal(PyList_AsTuple(e.consts.get()));
  Ref names = Ref::steal(PyList_AsTuple(e.names.get()));
  Ref replace = Ref::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(co), "replace"));
  Ref kw = Ref::steal(PyDict_New());
  Ref empty = Ref::steal(PyTuple_New(0));
  auto set = [&](const char* k, PyObject* v) { PyDict_SetItemString(kw.get(), k, v); Py_DECREF(v); };
  set("co_code", PyBytes_FromStringAndSize(out->code.data(), static_cast<Py_ssize_t>(out->code.size())));
  set("co_linetable", PyBytes_FromStringAndSize(out->linetable.data(), static_cast<Py_ssize_t>(out->linetable.size())));
  set("co_exceptiontable", PyBytes_FromStringAndSize(out->exceptiontable.data(), static_cast<Py_ssize_t>(out->exceptiontable.size())));
  set("co_stacksize", PyLong_FromLong(out->stacksize));
  set("co_consts", consts.release());
  set("co_names", names.release());
  set("co_varnames", varnames.release());
  set("co_cellvars", Ref::borrow(empty.get()).release());
  set("co_nlocals", PyLong_FromLong(nvarnames));
  set("co_argcount", PyLong_FromLong(nargs));
  set("co_posonlyargcount", PyLong_FromLong(0));
  set("co_kwonlyargcount", PyLong_FromLong(0));
  set("co_flags", PyLong_FromLong(co->co_flags & ~(CO_VARARGS | CO_VARKEYWORDS | CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)));
  set("co_name", PyUnicode_FromFormat("__transformed_code_%U", co->co_name));
  set("co_qualname", PyUnicode_FromFormat("__transformed_code_%U", co->co_qualname));
  Ref code = Ref::steal(PyObject_Call(replace.get(), empty.get(), kw.get()));
  if (!code) {
    why = "code.replace failed";
    PyErr_Clear();
    return std::nullopt;
  }
  Ref fn = Ref::steal(PyFunction_New(code.get(), globals));
  if (!fn || (closure && PyFunction_SetClosure(fn.get(), closure) < 0)) {
    why = "cannot build the transformed function";
    PyErr_Clear();
    return std::nullopt;
  }
  return Transformed{code, fn, {}};
}

int count_args(PyCodeObject* co) {
  return co->co_argcount + co->co_kwonlyargcount + ((co->co_flags & CO_VARARGS) ? 1 : 0) +
         ((co->co_flags & CO_VARKEYWORDS) ? 1 : 0);
}

}  // namespace

std::optional<Transformed> generate(PyObject* orig_code, PyObject* globals, PyObject* closure, const CaptureResult& c,
                                    int grad_mode, std::string& why) {
  const VPtr& ret = c.ret;
  auto* co = reinterpret_cast<PyCodeObject*>(orig_code);
  Emitter e;
  e.nfixed = count_args(co) + 1;
  e.pos = bc::Position{co->co_firstlineno, co->co_firstlineno, bc::kNone, bc::kNone};
  Rebuilder rb{e, c.outputs, static_cast<bool>(c.compiled), e.nfixed - 1, {}, globals};
  rb.key_values = &c.out.key_values;
  rb.made_module_attrs = &c.out.made_module_attrs;
  rb.made_module_buffers = &c.out.made_module_buffers;
  auto load_ret = [&] {
    if (rb.stash(ret) >= 0) return true;
    why = std::string("cannot rebuild the return value (a ") + vk_name(ret->kind) + " or something inside it)";
    return false;
  };
  if (!emit_head(e, rb, co, c, grad_mode, {ret}, load_ret, why)) return std::nullopt;
  e.emit(N::LOAD_FAST, rb.memo.at(ret.get()));
  if (!emit_advances(e, c.out.side_effects, why)) return std::nullopt;
  e.emit(N::RETURN_VALUE);
  return finish(e, co, globals, closure, why);
}

std::optional<Transformed> generate_split(const CodeFacts& facts, PyObject* globals, PyObject* closure,
                                          const CaptureResult& stop, const SplitPlan& plan, int grad_mode,
                                          std::string& why) {
  auto* co = reinterpret_cast<PyCodeObject*>(facts.code.get());
  const auto& instrs = facts.decoded.instrs;
  const bc::Instr& brk_in = instrs[static_cast<size_t>(plan.index)];
  Emitter e;
  e.nfixed = count_args(co) + 1;
  e.pos = brk_in.pos.line != bc::kNone ? brk_in.pos : bc::Position{co->co_firstlineno, co->co_firstlineno, bc::kNone, bc::kNone};
  Rebuilder rb{e, stop.outputs, static_cast<bool>(stop.compiled), e.nfixed - 1, {}, globals};
  rb.key_values = &stop.out.key_values;
  rb.made_module_attrs = &stop.out.made_module_attrs;
  rb.made_module_buffers = &stop.out.made_module_buffers;
  const size_t S = stop.stack.size();
  if (static_cast<size_t>(plan.operands) > S) {
    why = "the stack is shallower than the breaking instruction's operands";
    return std::nullopt;
  }
  const size_t rest = S - static_cast<size_t>(plan.operands);
  // Every value that crosses the split is evaluated once into a temporary (aliasing is kept).
  const int nlocals = co->co_nlocals;
  std::map<int, std::vector<int>> live_memo;  // target -> live bound locals (one liveness pass each)
  auto live_at = [&](int target) -> const std::vector<int>& {
    if (auto it = live_memo.find(target); it != live_memo.end()) return it->second;
    std::vector<bool> live = live_locals(facts, target);
    // zero-argument super() reads self from the first local, a use liveness does not see: a method
    // with a __class__ cell passes its self on (first: resume_self_first)
    ResumeLayout probe;
    probe.locals = {0};
    if (!live.empty() && resume_self_first(facts.code.get(), probe)) live[0] = true;
    std::vector<int> out;
    for (int l = 0; l < nlocals && l < static_cast<int>(stop.locals.size()); ++l)
      if (live[static_cast<size_t>(l)] && stop.locals[static_cast<size_t>(l)] && stop.locals[static_cast<size_t>(l)]->kind != VK::Cell) out.push_back(l);
    return live_memo[target] = std::move(out);
  };
  auto stash_all = [&](const std::vector<VPtr>& vals) {
    for (const VPtr& v : vals)
      if (v && v->kind != VK::Null && rb.stash(v) < 0) {
        why = std::string("cannot rebuild a ") + vk_name(v->kind) + " that lives across the break (" + describe(*v) + ")";
        return false;
      }
    return true;
  };
  // Cell variables cross as their contents (the resume function makes new cells) while no closure
  // or cell made in the trace crosses. Otherwise they cross as cells (TorchDynamo's resume functions
  // take the frame's cells as free variables): the transformed code makes a real cell for each cell
  // of the trace (Rebuilder::make_cells), rebuilds the closures over them, and passes the frame's
  // cell variables into the resume function's closure, so both sides see one cell.
  std::vector<int> cells;
  std::vector<VPtr> local_vals, cell_vals;
  const size_t ncells_end = static_cast<size_t>(PyTuple_GET_SIZE(co->co_localsplusnames) - co->co_nfreevars);
  const auto* kinds = reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(co->co_localspluskinds));
  std::vector<int> cell_slots;  // the frame's cell variables (localsplus indexes)
  for (size_t i = 0; i < ncells_end; ++i)
    if (kinds[i] & 0x40) cell_slots.push_back(static_cast<int>(i));  // CO_FAST_CELL
  for (int i : cell_slots) {  // free variables stay in the closure
    const VPtr& v = i < static_cast<int>(stop.locals.size()) ? stop.locals[static_cast<size_t>(i)] : nullptr;
    if (v && v->kind == VK::Cell && !v->items.empty() && v->items[0]) {
      cells.push_back(i);
      cell_vals.push_back(v->items[0]);
    }
  }
  // The with-block handler an exception from the breaking instruction resumes at (Call, Jump).
  const int handler = plan.kind != SplitPlan::Generic ? plan.with_handler : -1;
  if (handler >= 0 && plan.with_depth > S - static_cast<size_t>(plan.operands)) {
    why = "the with block's handler keeps more of the stack than lies below the breaking instruction";
    return std::nullopt;
  }
  for (int target : {plan.next, plan.target, handler, plan.kind == SplitPlan::Comprehension ? plan.index : -1})
    if (target >= 0)
      for (int l : live_at(target)) local_vals.push_back(stop.locals[static_cast<size_t>(l)]);
  std::vector<VPtr> crossing = stop.stack;
  crossing.insert(crossing.end(), local_vals.begin(), local_vals.end());
  crossing.insert(crossing.end(), cell_vals.begin(), cell_vals.end());
  std::vector<int> shared;  // cell variables passed as cells
  std::vector<VPtr> reached = crossing;
  for (const VPtr& v : side_effect_values(stop.out.side_effects)) reached.push_back(v);
  bool outside = false;
  const bool share = !trace_cells(reached, outside).empty() || outside;
  std::vector<VPtr> roots = crossing;
  if (share) {
    for (int i : cell_slots) {
      const VPtr& v = i < static_cast<int>(stop.locals.size()) ? stop.locals[static_cast<size_t>(i)] : nullptr;
      if (!v || v->kind != VK::Cell || v->cell_of != -1) {
        why = "a cell variable of the frame is not a cell at the break";
        return std::nullopt;
      }
      shared.push_back(i);
      roots.push_back(v);
    }
    cells.clear();
  }
  auto load_crossing = [&] { return stash_all(stop.stack) && stash_all(local_vals) && (share || stash_all(cell_vals)); };
  if (!emit_head(e, rb, co, stop, grad_mode, roots, load_crossing, why)) return std::nullopt;
  if (!emit_advances(e, stop.out.side_effects, why)) return std::nullopt;

  // The call of the resume function at `target` with the stack `vals` (bottom first) and then the
  // temporaries `result_slots` (the breaking call's result; a handler's lasti and exception), then
  // return its result.
  std::vector<ResumeInfo> made;
  // `reenter`: whether the torch.inference_mode blocks among `vals` are entered again by the resume
  // function (after the breaking instruction ran) rather than passed (to the with-block's handler).
  // `return_at` >= 0: the function made runs the code from `target` up to that instruction only and
  // returns what is on top of the stack there; its call's result is left on the stack.
  auto resume = [&](int target, const std::vector<VPtr>& vals, const std::vector<int>& result_slots, bool reenter,
                    int return_at = -1) -> bool {
    ResumeLayout layout;
    for (const VPtr& v : vals) {
      layout.stack_null.push_back(!v || v->kind == VK::Null);
      const bool block = reenter && v && v->kind == VK::GradMode;
      const bool hooks_off = block && v->name == kSavedHooksExit, sdpa = block && v->name == kSdpaExit;
      layout.stack_reenter.push_back(block && v->name == kInferenceExit ? int(v->flag)
                                     : hooks_off                    ? kReenterSavedHooksOff
                                     : sdpa                         ? (v->flag ? kReenterSdpaKernelPriority : kReenterSdpaKernel)
                                                                    : -1);
      std::string text;
      if (hooks_off && v->self && v->self->obj) text = str_of(v->self->obj.get());
      if (sdpa && v->self && v->self->obj && PyList_Check(v->self->obj.get()))  // the block's backends, by name
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(v->self->obj.get()); ++k) {
          Ref name = Ref::steal(PyObject_GetAttrString(PyList_GET_ITEM(v->self->obj.get(), k), "name"));
          if (!name) PyErr_Clear();
          text += (k ? "," : "") + (name && PyUnicode_Check(name.get()) ? str_of(name.get()) : std::string("?"));
        }
      layout.reenter_text.push_back(text);
    }
    for (size_t i = 0; i < result_slots.size(); ++i) {
      layout.stack_null.push_back(false);
      layout.stack_reenter.push_back(-1);
      layout.reenter_text.emplace_back();
    }
    layout.locals = live_at(target);
    layout.cells = cells;
    layout.shared = shared;
    PyObject* code = resume_code(facts, target, layout, why, return_at);
    if (!code) return false;
    if (co->co_nfreevars || !shared.empty()) {  // closure: (shared cells..., the frame's free variables...)
      e.callable([&] {
        for (int c : shared) e.emit(N::LOAD_FAST, rb.memo.at(stop.locals[static_cast<size_t>(c)].get()));
        for (int k = 0; k < co->co_nfreevars; ++k) e.emit_free(N::LOAD_CLOSURE, k);
        e.emit(N::BUILD_TUPLE, co->co_nfreevars + static_cast<int>(shared.size()));
        e.emit(N::LOAD_CONST, e.konst(code));
        e.emit(N::MAKE_FUNCTION, 8);
      });
    } else {
      Ref fn = Ref::steal(PyFunction_New(code, globals));
      if (!fn) {
        PyErr_Clear();
        why = "cannot build the resume function";
        return false;
      }
      e.callable_const(fn.get());
    }
    int n = 0;
    const bool self_first = resume_self_first(facts.code.get(), layout);  // zero-argument super() after the resume point
    if (self_first) {
      e.emit(N::LOAD_FAST, rb.memo.at(stop.locals[0].get()));
      ++n;
    }
    for (size_t i = 0; i < vals.size(); ++i)
      if (!layout.stack_null[i] && layout.stack_reenter[i] < 0) {
        e.emit(N::LOAD_FAST, rb.memo.at(vals[i].get()));
        ++n;
      }
    for (int slot : result_slots) {
      e.emit(N::LOAD_FAST, slot);
      ++n;
    }
    for (int l : layout.locals) {
      if (self_first && l == 0) continue;
      e.emit(N::LOAD_FAST, rb.memo.at(stop.locals[static_cast<size_t>(l)].get()));
      ++n;
    }
    for (int c : layout.cells) {
      e.emit(N::LOAD_FAST, rb.memo.at(stop.locals[static_cast<size_t>(c)]->items[0].get()));
      ++n;
    }
    e.call(n);
    if (return_at < 0) e.emit(N::RETURN_VALUE);
    made.push_back(ResumeInfo{Ref::borrow(code), plan.kind == SplitPlan::Generic || return_at >= 0, target});
    return true;
  };
  const std::vector<VPtr> below(stop.stack.begin(), stop.stack.begin() + static_cast<long>(rest));
  // The breaking instruction runs inside the block (an inference_mode, disable_saved_tensors_hooks or
  // sdpa_kernel block the graph left is entered again: its __exit__ on the stack is rebuilt entered); past it, the transformed code
  // leaves the block before the resume function enters it again. An exception from it goes to the
  // handler (TorchDynamo wraps the instruction in the block's setup the same way).
  std::vector<size_t> protect;  // [start, end) instruction ranges of the breaking instruction(s)
  auto leave_reentered = [&]() {
    for (auto it = stop.stack.rbegin(); it != stop.stack.rend(); ++it)  // innermost first
      if (const VPtr& v = *it; v && v->kind == VK::GradMode && (v->name == kInferenceExit || v->name == kSavedHooksExit || v->name == kSdpaExit)) {
        e.callable([&] { e.emit(N::LOAD_FAST, rb.memo.at(v.get())); });
        for (int k = 0; k < 3; ++k) e.emit(N::LOAD_CONST, e.konst(Py_None));
        e.call(3);
        e.emit(N::POP_TOP);
      }
  };
  auto push_operands = [&]() {
    for (size_t i = rest; i < S; ++i) {
      const VPtr& v = stop.stack[i];
      if (!v || v->kind == VK::Null) e.emit(N::PUSH_NULL);
      else e.emit(N::LOAD_FAST, rb.memo.at(v.get()));
    }
  };
  switch (plan.kind) {
    case SplitPlan::Call: {
      push_operands();
      protect.push_back(e.ins.size());
      const uint8_t op = bc::op_info(brk_in.opcode, e.v).deopt;
      if (brk_in.name == N::CALL) {
        if (stop.kw_names) e.emit(N::KW_NAMES, e.konst(stop.kw_names.get()));
        e.call(brk_in.arg);
      } else if (brk_in.name == N::STORE_ATTR) {
        e.emit(N::STORE_ATTR, e.name(str_of(PyTuple_GET_ITEM(co->co_names, brk_in.arg))));
      } else {  // CALL_KW, CALL_FUNCTION_EX, BINARY_SUBSCR, COMPARE_OP, STORE_SUBSCR: operands on the stack
        e.emit_raw(op, brk_in.arg == bc::kNone ? 0 : brk_in.arg);
      }
      protect.push_back(e.ins.size());
      std::vector<int> result;
      if (plan.pushes) {
        result.push_back(e.temp());
        e.emit(N::STORE_FAST, result[0]);
      }
      leave_reentered();
      if (!resume(plan.next, below, result, true)) return std::nullopt;
      break;
    }
    case SplitPlan::Jump: {
      push_operands();
      protect.push_back(e.ins.size());
      if (e.v == bc::Version::py313) e.emit(N::TO_BOOL);  // 3.13's jumps take exact bools (TO_BOOL was traced as a no-op)
      const size_t jump_at = e.ins.size();
      e.emit_raw(bc::op_info(brk_in.opcode, e.v).deopt, 0);
      protect.push_back(e.ins.size());
      leave_reentered();
      if (!resume(plan.next, below, {}, true)) return std::nullopt;
      e.ins[jump_at].arg = static_cast<int32_t>(e.ins.size());
      leave_reentered();
      if (!resume(plan.target, below, {}, true)) return std::nullopt;
      break;
    }
    case SplitPlan::Comprehension: {
      // comprehension(stack..., live locals) runs it eagerly (never captured: the break is inside),
      // with the whole stack, so that its cleanup handler finds the depth it was compiled for
      if (!resume(plan.index, stop.stack, {}, false, plan.next)) return std::nullopt;
      std::vector<int> result{e.temp()};
      e.emit(N::STORE_FAST, result[0]);
      if (!resume(plan.next, below, result, true)) return std::nullopt;
      break;
    }
    case SplitPlan::Generic:
      leave_reentered();  // (the resume function enters the block again before the instruction)
      if (!resume(plan.next, stop.stack, {}, true)) return std::nullopt;
      break;
  }
  if (handler >= 0 && protect.size() == 2) {
    // The exception (alone on the stack) is passed, with what the handler keeps of the stack (and
    // its lasti, 0: the resume function's first instruction), to a resume function at the handler.
    const auto at = static_cast<int32_t>(e.ins.size());
    e.ranges.push_back(bc::AsmExcRange{static_cast<int32_t>(protect[0]), static_cast<int32_t>(protect[1]), at, 0, false});
    const int exc = e.temp();
    e.emit(N::STORE_FAST, exc);
    std::vector<int> tail;
    if (plan.with_lasti) {
      tail.push_back(e.temp());
      e.load_int(0);
      e.emit(N::STORE_FAST, tail.back());
    }
    tail.push_back(exc);
    const std::vector<VPtr> kept(below.begin(), below.begin() + static_cast<long>(plan.with_depth));
    if (!resume(handler, kept, tail, false)) return std::nullopt;
  }
  auto tf = finish(e, co, globals, closure, why);
  if (tf) tf->resumes = std::move(made);
  return tf;
}

}  // namespace dv

namespace dv {

namespace {
Ref& restore_grad_objects() {
  static Ref& objs = *new Ref();  // tuple (restore False, restore True); never destroyed
  if (!objs) {
    Ref mod = Ref::steal(PyImport_ImportModule("dynview._runtime"));
    if (mod) objs = Ref::steal(PyObject_GetAttrString(mod.get(), "RESTORE_GRAD"));
  }
  return objs;
}
}  // namespace

PyObject* grad_restore_object(bool mode) {
  Ref& objs = restore_grad_objects();
  return objs ? PyTuple_GET_ITEM(objs.get(), mode ? 1 : 0) : nullptr;
}

int grad_restore_mode(PyObject* o) {
  if (std::strcmp(Py_TYPE(o)->tp_name, "GradModeExit") != 0) return -1;
  Ref& objs = restore_grad_objects();
  if (!objs) {
    PyErr_Clear();
    return -1;
  }
  for (int m = 0; m < 2; ++m)
    if (PyTuple_GET_ITEM(objs.get(), m) == o) return m;
  return -1;
}

}  // namespace dv
