// Dicts, lists and tuples from the frame read lazily (TorchDynamo's LazyVariableTracker): the
// interpreter realizes a lazy value (Value::lazy, made by ValueBuilder::wrap) before any instruction
// or call that could read more of it than one constant key of a dict, one constant index of a list
// or tuple (Translator::subscr) or its length (len). Read by run_frame and Translator::call.
#include "../handlers_common.h"
#include "../translator.h"

#include <functional>
#include <unordered_set>

namespace dv {

namespace {

// The dict a value reads through: a lazy dict, or a method bound to one (d.get).
VPtr lazy_of(const VPtr& v) {
  if (!v) return nullptr;
  if (v->kind == VK::Dict && v->lazy) return v;
  if (v->kind == VK::Method && v->self && v->self->kind == VK::Dict && v->self->lazy) return v->self;
  return nullptr;
}

// A key read precisely: an exact str or int constant (a float or bool key realizes the dict), or a
// class compared by identity (pytree's SUPPORTED_NODES[type(x)]: type's own == and hash).
// A tuple of constants (a cache's (seq_len, device, dtype) key) too, as the tuple it is.
Ref simple_key(const VPtr& v) {
  if (v && v->kind == VK::Tuple && !v->lazy) {
    Ref t = Ref::steal(PyTuple_New(static_cast<Py_ssize_t>(v->items.size())));
    if (!t) return PyErr_Clear(), Ref();
    for (size_t i = 0; i < v->items.size(); ++i) {
      const VPtr& x = v->items[i];
      if (x->kind != VK::Const || !x->obj || !const_key(x->obj.get()) || PyFloat_Check(x->obj.get()) || PyBool_Check(x->obj.get()))
        return Ref();
      PyTuple_SET_ITEM(t.get(), static_cast<Py_ssize_t>(i), Py_NewRef(x->obj.get()));
    }
    return t;
  }
  if (!v || (v->kind != VK::Const && v->kind != VK::Object) || !v->obj) return Ref();
  PyObject* o = v->obj.get();
  if (PyType_Check(o))
    return Py_TYPE(o)->tp_richcompare == PyType_Type.tp_richcompare && Py_TYPE(o)->tp_hash == PyType_Type.tp_hash ? Ref::borrow(o) : Ref();
  return v->kind == VK::Const && (PyUnicode_CheckExact(o) || PyLong_CheckExact(o)) ? Ref::borrow(o) : Ref();
}

// A lazy dict that `d[k] = v` may leave lazy: written back key by key. Not an OrderedDict, nor a module's or object's own
// dicts (_buffers, _modules, __dict__ ...), which other code reads whole once the trace changed them
// (changed_member_dict, register_buffer): an attribute whose name starts with '_' is read whole.
bool writes_stay_lazy(const Value& d) {
  if (d.storage_base) return false;  // an OrderedDict: written back whole, in its order (its own methods)
  const Source* s = d.source.get();
  if (!s || s->kind == Source::Kind::ModuleMember) return false;
  if (s->kind == Source::Kind::Attr) return !s->name.empty() && s->name[0] != '_';
  if (s->kind == Source::Kind::Item && s->base && s->base->kind == Source::Kind::Attr && s->base->name == "__dict__") {
    const std::string name = str_of(s->key.get());  // obj.__dict__['name']: an attribute
    return !name.empty() && name[0] != '_';
  }
  return true;
}

// Instructions that move values without reading into them: a lazy dict may pass through.
bool moves_only(bc::Name n) {
  using N = bc::Name;
  switch (n) {
    case N::NOP: case N::RESUME: case N::CACHE: case N::EXTENDED_ARG: case N::LOAD_FAST: case N::LOAD_FAST_CHECK:
    case N::LOAD_FAST_AND_CLEAR: case N::LOAD_FAST_LOAD_FAST: case N::LOAD_CONST: case N::LOAD_GLOBAL: case N::LOAD_DEREF:
    case N::LOAD_CLOSURE: case N::STORE_FAST: case N::STORE_FAST_LOAD_FAST: case N::STORE_FAST_STORE_FAST: case N::STORE_DEREF:
    case N::PUSH_NULL: case N::POP_TOP: case N::COPY: case N::SWAP: case N::KW_NAMES: case N::MAKE_CELL:
    case N::COPY_FREE_VARS: case N::JUMP_FORWARD: case N::JUMP_BACKWARD: case N::JUMP_BACKWARD_NO_INTERRUPT:
    case N::PRECALL: case N::CALL: case N::CALL_KW:  // the call decides (Translator::call)
    // Kept whole, not read: a tuple or list made here holds the dict (whoever reads into the
    // container realizes what it reaches, realize_value); a returned dict is rebuilt from its source.
    case N::BUILD_TUPLE: case N::BUILD_LIST: case N::RETURN_VALUE: case N::RETURN_CONST: case N::LIST_TO_TUPLE:
    case N::LIST_APPEND:  // (a list made here: f(x, *args) builds one, a comprehension appends)
      return true;
    default: return false;
  }
}

// Dict methods that compare keys (constants) and move values on without reading them.
bool moves_entries(const std::string& m) {
  return m == "get" || m == "__getitem__" || m == "__contains__" || m == "keys" || m == "values" || m == "items" ||
         m == "copy" || m == "pop" || m == "setdefault" || m == "__len__" || m == "__iter__";
}

}  // namespace

// Realizes every lazy dict `v` reaches (a lazy dict can sit in an input list's items, in a dict's
// entries, in a **kwargs dict an inlined call made, in a bound method), so that nothing reads a
// partial dict as if it were whole.
Translator::Status Translator::realize_value(Frame& f, const VPtr& v) {
  if (!v || v->kind == VK::Tensor || v->kind == VK::Const || v->kind == VK::Null || v->kind == VK::Object ||
      v->kind == VK::NNModule || v->kind == VK::Sym || v->kind == VK::NdArray)
    return std::nullopt;  // (the common case, without a walk)
  std::unordered_set<const Value*> seen;
  std::function<Status(const VPtr&)> walk = [&](const VPtr& x) -> Status {
    if (!x || !seen.insert(x.get()).second) return std::nullopt;
    if (x->lazy && x->kind == VK::Lazy && x->source && x->source->kind == Source::Kind::RandomDraw && !builder.realize(x, f))
      return brk(f, "DV0004", "reading a number drawn by Python's random module: the compiled code draws it when it runs, the trace cannot know it",
                 "draw it with torch (torch.rand) to keep it in the graph, or outside the compiled function");
    if (x->lazy && !builder.realize(x, f))
      return brk(f, "DV0005", std::string(x->kind == VK::Dict ? "an entry" : "an item") + " of " + x->source->text() + " cannot be traced");
    for (size_t i = 0; i < x->items.size(); ++i) {  // (items may grow while realizing)
      // A cell's contents are read by LOAD_DEREF, which moves them: a value not read yet stays so.
      if (x->kind == VK::Cell && x->items[i] && x->items[i]->kind == VK::Lazy) continue;
      if (Status s = walk(x->items[i])) return s;
    }
    builder.settle(x);
    for (const VPtr* p : {&x->self, &x->attrs, &x->contents, &x->defaults, &x->kwdefaults}) {
      if (p == &x->attrs && x->kind == VK::Instance && *p && (*p)->kind == VK::Dict && !(*p)->lazy && seen.insert(p->get()).second) {
        // An object's attributes are read one at a time, by name (getattr): a number, string or None
        // on one from the frame stays not read (VK::Lazy) until something reads it, as TorchDynamo's
        // attributes of a user object are, and one never read adds no guard.
        for (const VPtr& a : (*p)->items)
          if (a && a->kind != VK::Lazy)
            if (Status s = walk(a)) return s;
        continue;
      }
      if (Status s = walk(*p)) return s;
    }
    for (size_t i = 0; i < x->cells.size(); ++i)
      if (Status s = walk(x->cells[i])) return s;
    return std::nullopt;
  };
  return walk(v);
}

Translator::Status Translator::realize_shallow(Frame& f, const VPtr& v) {
  if (!v || !v->lazy || v->kind == VK::Lazy) return std::nullopt;
  if (!builder.realize(v, f, /*items=*/false))
    return brk(f, "DV0005", std::string(v->kind == VK::Dict ? "an entry" : "an item") + " of " + v->source->text() + " cannot be traced");
  return std::nullopt;
}

Translator::Status Translator::realize_key(Frame& f, const VPtr& d, PyObject* key) {
  if (!builder.realize_entry(d, key, f)) return brk(f, "DV0005", "an entry of " + d->source->text() + " cannot be traced");
  return std::nullopt;
}

namespace {
// The code of a Python function value (one made in the trace or from outside, or a bound user
// method), else null.
PyCodeObject* python_code_of(const VPtr& fn) {
  PyObject* o = fn->obj.get();
  if (!o || (fn->kind != VK::Function && fn->kind != VK::Method && fn->kind != VK::Object)) return nullptr;
  if (PyMethod_Check(o)) o = PyMethod_GET_FUNCTION(o);
  if (PyFunction_Check(o)) return reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(o));
  if (fn->kind == VK::Function && PyCode_Check(o)) return reinterpret_cast<PyCodeObject*>(o);
  return nullptr;
}
}  // namespace

// DICT_MERGE of a dict from the frame, not read yet, into the empty dict of a call's **: the call
// comes next (CALL_FUNCTION_EX), and its callee is a Python function without **kwargs, which binds
// the entries by name and so never sees their order.
bool Translator::keyword_order_unread(Frame& f, const bc::Instr& in) {
  using N = bc::Name;
  const size_t n = f.stack.size();
  const auto& ins = f.facts->decoded.instrs;
  if (in.arg != 1 || n < 4 || f.ip < 0 || f.ip >= static_cast<int>(ins.size()) || ins[f.ip].name != N::CALL_FUNCTION_EX) return false;
  const VPtr& d = f.stack[n - 1];
  const VPtr& into = f.stack[n - 2];
  if (d->kind != VK::Dict || !d->lazy || !d->source || !d->written.empty() || !PyDict_CheckExact(d->lazy.get())) return false;
  if (into->kind != VK::Dict || into->lazy || into->obj || !into->keys.empty() || f.stack[n - 3]->kind != VK::Tuple) return false;
  // the callee: (NULL fn args kwargs) up to 3.12, (fn NULL args kwargs) on 3.13
  const VPtr& below = f.stack[n - 4];
  const VPtr& fn = below->kind == VK::Null && n >= 5 ? f.stack[n - 5] : below;
  PyCodeObject* co = python_code_of(fn);
  return co && !(co->co_flags & CO_VARKEYWORDS);
}

Translator::Status Translator::realize_read(Frame& f, const bc::Instr& in) {
  using N = bc::Name;
  if (moves_only(in.name)) return std::nullopt;
  if (in.name == N::CALL_INTRINSIC_1) {  // 3.12+: f(x, *args)'s list made a tuple, moved as LIST_TO_TUPLE
    const auto name = bc::intrinsic_name(1, in.arg, f.facts->decoded.version);
    if (name && *name == "INTRINSIC_LIST_TO_TUPLE") return std::nullopt;
  }
  const size_t n = f.stack.size();
  size_t from = 0;       // stack slots the instruction may read into
  long keep = -1;        // one slot read at one key only
  if ((in.name == N::LOAD_ATTR || in.name == N::LOAD_METHOD) && n >= 1 && lazy_of(f.stack[n - 1]) == f.stack[n - 1]) {
    return std::nullopt;  // d.get: a method bound to the dict; the call decides
  } else if ((in.name == N::LOAD_ATTR || in.name == N::LOAD_METHOD || in.name == N::TO_BOOL ||
              in.name == N::UNARY_NOT || in.name == N::UNARY_NEGATIVE || in.name == N::POP_JUMP_IF_TRUE ||
              in.name == N::POP_JUMP_IF_FALSE || in.name == N::POP_JUMP_IF_NONE || in.name == N::POP_JUMP_IF_NOT_NONE ||
              in.name == N::POP_JUMP_FORWARD_IF_TRUE || in.name == N::POP_JUMP_FORWARD_IF_FALSE ||
              in.name == N::POP_JUMP_BACKWARD_IF_TRUE || in.name == N::POP_JUMP_BACKWARD_IF_FALSE ||
              in.name == N::POP_JUMP_FORWARD_IF_NONE || in.name == N::POP_JUMP_FORWARD_IF_NOT_NONE ||
              in.name == N::POP_JUMP_BACKWARD_IF_NONE || in.name == N::POP_JUMP_BACKWARD_IF_NOT_NONE) && n >= 1) {
    from = n - 1;  // (x -- ...): reads its top only
  } else if ((in.name == N::BINARY_OP || in.name == N::COMPARE_OP || in.name == N::IS_OP) && n >= 2) {
    from = n - 2;
  } else if (in.name == N::BINARY_SUBSCR && n >= 2) {  // (d key -- d[key])
    from = n - 2;
    const VPtr& d = f.stack[n - 2];
    if (Ref key = d->kind == VK::Dict && d->lazy ? simple_key(f.stack[n - 1]) : Ref()) {
      if (Status s = realize_key(f, d, key.get())) return s;
      keep = static_cast<long>(n - 2);
    } else if ((d->kind == VK::List || d->kind == VK::Tuple) && d->lazy && f.stack[n - 1]->kind == VK::Const &&
               PyLong_CheckExact(f.stack[n - 1]->obj.get())) {
      keep = static_cast<long>(n - 2);  // l[0]: that item alone (Translator::subscr)
    } else if ((d->kind == VK::List || d->kind == VK::Tuple || d->kind == VK::Dict) && !d->lazy) {
      keep = static_cast<long>(n - 2);  // read already: the item taken moves on as it is
    }
  } else if (in.name == N::STORE_SUBSCR && n >= 3) {  // (v d key -- ): d[key] = v, the old entry not read
    from = n - 3;
    const VPtr& d = f.stack[n - 2];
    if (d->kind == VK::Dict && d->lazy && writes_stay_lazy(*d) && simple_key(f.stack[n - 1])) keep = static_cast<long>(n - 2);
    else if ((d->kind == VK::Dict || d->kind == VK::List) && !d->lazy && !d->obj && simple_key(f.stack[n - 1])) keep = static_cast<long>(n - 2);
  } else if (in.name == N::DICT_MERGE && n >= 4 && keyword_order_unread(f, in)) {
    // g(x, **d) of a dict from the frame into a Python function without **kwargs: binding by name
    // reads its key set, not its order (TorchDynamo guards no order either), so a dict with the same
    // keys in another order reuses the code. Its length and each key guarded, each entry as read by key.
    const VPtr& d = f.stack[n - 1];
    if (builder.dict_length(d, f) >= 0) {
      std::vector<Ref> keys;
      Py_ssize_t pos = 0;
      PyObject *k, *v;
      while (PyDict_Next(d->lazy.get(), &pos, &k, &v)) keys.push_back(Ref::borrow(k));
      for (const Ref& key : keys)
        if (Status s = realize_key(f, d, key.get())) return s;
      if (d->lazy && d->keys.size() == keys.size()) return std::nullopt;
    }
    return realize_shallow(f, d);
  } else if (in.name == N::UNPACK_SEQUENCE && n >= 1 && (f.stack[n - 1]->kind == VK::List || f.stack[n - 1]->kind == VK::Tuple) &&
             f.stack[n - 1]->lazy) {
    return std::nullopt;  // a list or tuple from the frame: its length guarded, its items taken one by one (op_UNPACK_SEQUENCE)
  } else if ((in.name == N::UNPACK_SEQUENCE || in.name == N::UNPACK_EX || in.name == N::GET_ITER || in.name == N::FOR_ITER ||
              in.name == N::LIST_EXTEND || in.name == N::DICT_MERGE || in.name == N::DICT_UPDATE) && n >= 1) {
    // (container -- its items ...): items move on (onto the stack, into a list or dict made here),
    // not read: a dict's keys and a sequence's length are, each item only where something reads it
    return realize_shallow(f, f.stack[n - 1]);
  } else if (in.name == N::CALL_FUNCTION_EX && n >= 3) {  // (NULL fn args [kwargs] -- result): the call decides (realize_call)
    const size_t k = (in.arg & 1) ? 2 : 1;
    for (size_t i = n - k; i < n; ++i)
      if (Status s = realize_shallow(f, f.stack[i])) return s;
    return std::nullopt;
  } else if (in.name == N::CONTAINS_OP && n >= 2) {  // (key d -- bool)
    from = n - 2;
    const VPtr& d = f.stack[n - 1];
    if (Ref key = d->kind == VK::Dict && d->lazy ? simple_key(f.stack[n - 2]) : Ref()) {
      if (Status s = realize_key(f, d, key.get())) return s;
      keep = static_cast<long>(n - 1);
    }
  }
  // Anything else (iteration, len, **d, ==, BUILD_*, STORE_*, RETURN_VALUE ...): every lazy dict the
  // stack holds is realized, the eager behaviour.
  for (size_t i = from; i < n; ++i)
    if (static_cast<long>(i) != keep)
      if (Status s = realize_value(f, f.stack[i])) return s;
  return std::nullopt;
}

Translator::Status Translator::realize_call(Frame& f, const VPtr& fn, const std::vector<VPtr>& args,
                                            const std::vector<std::pair<std::string, VPtr>>& kwargs, bool inlined) {
  if (fn->kind == VK::Object && is_len_builtin(fn->obj.get()) && args.size() == 1 && kwargs.empty()) {
    if (args[0]->kind == VK::List || args[0]->kind == VK::Tuple) return std::nullopt;  // len(l): its length alone (builtins.cpp)
    if (args[0]->kind == VK::Dict) {  // len(d): its key set (builtins.cpp), or all its keys
      const VPtr& d = args[0];
      if (d->lazy && d->written.empty() && d->source && builder.dict_length(d, f) >= 0) return std::nullopt;
      return realize_shallow(f, d);
    }
  }
  if (VPtr d = lazy_of(fn); d && fn->kind == VK::Method) {
    // d.get(k[, default]), d[k] and k in d spelled as calls: one entry; its views and copy: its keys,
    // the values moving on as they are; any other method: all of it.
    const std::string& m = fn->name;
    if (args.empty() && kwargs.empty() && moves_entries(m)) return realize_shallow(f, d);
    Ref key = kwargs.empty() && !args.empty() ? simple_key(args[0]) : Ref();
    const bool one = key && ((m == "get" && args.size() <= 2) || ((m == "__getitem__" || m == "__contains__") && args.size() == 1));
    if (Status s = one ? realize_key(f, d, key.get()) : realize_value(f, fn)) return s;
  } else if (fn->kind == VK::Method && fn->self && fn->self->kind == VK::Dict && !fn->self->lazy && !fn->obj &&
             moves_entries(fn->name)) {
    // a method of a dict read already that compares its keys only and moves its values on
  } else if (Status s = realize_value(f, fn)) {
    return s;
  }
  if (inlined) return std::nullopt;  // a user function or module: its own instructions read what they read
  for (const VPtr& a : args)
    if (Status s = realize_value(f, a)) return s;
  for (const auto& kv : kwargs)
    if (Status s = realize_value(f, kv.second)) return s;
  return std::nullopt;
}

}  // namespace dv
