// Opcode handlers, containers and strings: BUILD_*, LIST_*, DICT_*, UNPACK_*, FORMAT_VALUE, BUILD_STRING.
// Each says its stack effect in a comment, checks before it mutates, and returns a Break for what
// it does not support. The dispatch table is in handlers.cpp.
#include "handlers_common.h"
#include "values/kind.h"

namespace dv {

static Status build_seq(Translator& t, Frame& f, int n, VK kind) {
  NEED(static_cast<size_t>(n));
  VPtr v = t.make(kind);
  v->items.assign(f.stack.end() - n, f.stack.end());
  f.stack.resize(f.stack.size() - n);
  f.stack.push_back(v);
  return std::nullopt;
}
Status op_BUILD_TUPLE(Translator& t, Frame& f, const Instr& in) { return build_seq(t, f, in.arg, VK::Tuple); }
Status op_BUILD_LIST(Translator& t, Frame& f, const Instr& in) { return build_seq(t, f, in.arg, VK::List); }
Status op_BUILD_MAP(Translator& t, Frame& f, const Instr& in) {  // (k1 v1 ... kn vn -- dict)
  NEED(2u * in.arg);
  VPtr d = t.make(VK::Dict);
  for (int i = 0; i < in.arg; ++i) {
    VPtr k = f.stack[f.stack.size() - 2 * in.arg + 2 * i];
    PyObject* key = t.key_of(k);
    if (!key) return t.brk(f, "DV0023", std::string("a dict key that is neither a constant nor an object compared by identity (a ") + vk_name(k->kind) + ")");
    if (!dict_set(*d, Ref::borrow(key), f.stack[f.stack.size() - 2 * in.arg + 2 * i + 1]))  // {k: 1, k: 2} has one key
      return t.brk(f, "DV0010", "comparing dict keys raised");
  }
  f.stack.resize(f.stack.size() - 2 * in.arg);
  f.stack.push_back(d);
  return std::nullopt;
}
Status op_BUILD_CONST_KEY_MAP(Translator& t, Frame& f, const Instr& in) {  // (v1..vn keys -- dict)
  NEED(in.arg + 1u);
  VPtr keys = pop(f);
  VPtr d = t.make(VK::Dict);
  for (int i = 0; i < in.arg; ++i) {
    PyObject* key = PyTuple_GET_ITEM(keys->obj.get(), i);
    if (!dict_set(*d, Ref::borrow(key), f.stack[f.stack.size() - in.arg + i]))  // {"a": 1, "a": 2} has one key
      return t.brk(f, "DV0010", "comparing dict keys raised");
  }
  f.stack.resize(f.stack.size() - in.arg);
  f.stack.push_back(d);
  return std::nullopt;
}
// Sets of constants ({a, b}, set comprehensions over constants): a real set object private to the
// trace, so its methods and operators run on it (it is rebuilt from a frozenset if it escapes).
// A set holding a tensor or another traced value breaks the graph.
static bool all_hashable_consts(const std::vector<VPtr>& items) {
  for (const VPtr& v : items) {
    if (!v || v->kind != VK::Const) return false;
    if (PyObject_Hash(v->obj.get()) == -1) return PyErr_Clear(), false;
  }
  return true;
}
static bool is_trace_set(const VPtr& v) { return v && v->kind == VK::Const && !v->source && PySet_CheckExact(v->obj.get()); }
Status op_BUILD_SET(Translator& t, Frame& f, const Instr& in) {  // (v1..vn -- set)
  NEED(static_cast<size_t>(in.arg));
  std::vector<VPtr> items(f.stack.end() - in.arg, f.stack.end());
  VPtr s;
  if (Status st = make_set_value(t, f, items, s)) return st;  // a Const set, or a Set holding values (values/set.cpp)
  f.stack.resize(f.stack.size() - in.arg);
  f.stack.push_back(s);
  return std::nullopt;
}
Status op_SET_ADD(Translator& t, Frame& f, const Instr& in) {  // (set .. v -- set ..): set comprehensions
  NEED(in.arg + 1u);
  const VPtr& v = top(f);  // (a tuple of constants is held as one constant: set_add_value)
  const VPtr& s = top(f, in.arg + 1);
  if (!is_trace_set(s) && s->kind != VK::Set) return t.brk(f, "DV0023", "a set of values that are not constants");
  if (Status st = set_add_value(t, f, s, v)) return st;
  f.stack.pop_back();
  return std::nullopt;
}
Status op_SET_UPDATE(Translator& t, Frame& f, const Instr& in) {  // (set .. iterable -- set ..)
  NEED(in.arg + 1u);
  const VPtr& it = top(f);
  const VPtr& s = top(f, in.arg + 1);
  if (s->kind == VK::Set || (is_trace_set(s) && !(it->kind == VK::Const || ((it->kind == VK::List || it->kind == VK::Tuple) && all_hashable_consts(it->items))))) {
    // {*xs, y} with values that are not constants: added one by one (values/set.cpp)
    VPtr items;
    if (Status st = t.iterate(f, it, items)) return st;
    if (Status st = t.pull(f, items, SIZE_MAX)) return st;
    for (size_t i = items->pos; i < items->items.size(); ++i)
      if (Status st = set_add_value(t, f, s, items->items[i])) return st;
    f.stack.pop_back();
    return std::nullopt;
  }
  if (!is_trace_set(s)) return t.brk(f, "DV0023", "a set of values that are not constants");
  if (it->kind == VK::Const) {
    Ref r = Ref::steal(PyObject_CallMethod(s->obj.get(), "update", "O", it->obj.get()));
    if (!r) return PyErr_Clear(), t.brk(f, "DV0010", "set.update raised");
  } else if ((it->kind == VK::List || it->kind == VK::Tuple) && all_hashable_consts(it->items)) {
    for (const VPtr& v : it->items)
      if (PySet_Add(s->obj.get(), v->obj.get()) < 0) return PyErr_Clear(), t.brk(f, "DV0010", "set.update raised");
  } else {
    return t.brk(f, "DV0023", "a set of values that are not constants");
  }
  f.stack.pop_back();
  return std::nullopt;
}
Status op_LIST_APPEND(Translator& t, Frame& f, const Instr& in) {  // (list .. v -- list ..)
  NEED(in.arg + 1u);
  VPtr v = pop(f);
  top(f, in.arg)->items.push_back(v);
  return std::nullopt;
}
Status op_MAP_ADD(Translator& t, Frame& f, const Instr& in) {  // (dict .. key value -- dict ..): dict comprehensions
  NEED(in.arg + 2u);
  VPtr v = pop(f);
  VPtr k = pop(f);
  VPtr d = top(f, in.arg);
  if (d->kind != VK::Dict) return t.brk(f, "DV0019", "MAP_ADD to a non-dict");
  PyObject* key = t.key_of(k);
  if (!key) return t.brk(f, "DV0023", std::string("a dict key that is neither a constant nor an object compared by identity (a ") + vk_name(k->kind) + ")");
  if (!dict_set(*d, Ref::borrow(key), v)) return t.brk(f, "DV0010", "comparing dict keys raised");
  return std::nullopt;
}
Status op_LIST_EXTEND(Translator& t, Frame& f, const Instr& in) {  // (list .. seq -- list ..)
  NEED(in.arg + 1u);
  VPtr seq = pop(f);
  VPtr it;
  if (Status s = t.iterate(f, seq, it)) return s;
  auto& items = top(f, in.arg)->items;
  items.insert(items.end(), it->items.begin(), it->items.end());
  return std::nullopt;
}
Status op_LIST_TO_TUPLE(Translator& t, Frame& f, const Instr&) {
  NEED(1);
  VPtr v = t.make(VK::Tuple);
  v->items = top(f)->items;
  top(f) = v;
  return std::nullopt;
}
// {**a, **b}: b's entries replace a's under the same key. DICT_MERGE (f(**a, **b)): a key given twice
// is eager's TypeError ("got multiple values for keyword argument"), which breaks here.
static Status dict_update(Translator& t, Frame& f, const Instr& in, bool merge) {  // (dict .. other -- dict ..)
  NEED(in.arg + 1u);
  VPtr other = top(f);
  if (other->kind == VK::Instance && other->contents && other->contents->kind == VK::Dict) {  // a dict subclass (**outputs of a ModelOutput)
    VPtr entries = t.make(VK::Dict);
    if (Status s = dict_subclass_entries(t, f, other, entries->keys, entries->items, merge ? "**" : "{**}")) return s;
    other = entries;
  }
  if (other->kind != VK::Dict) return t.brk(f, "DV0023", "dict update with a non-dict");
  const VPtr d = top(f, in.arg + 1);
  for (size_t i = 0; i < other->keys.size(); ++i) {
    const long at = find_key(*d, other->keys[i].get());
    if (at == -2) return t.brk(f, "DV0010", "comparing dict keys raised");
    if (merge && at >= 0) return t.brk(f, "DV0010", "a keyword argument given twice (**a, **b)", "the eager frame raises its TypeError");
  }
  pop(f);
  const std::vector<Ref> keys = other->keys;  // {**d, **d} reads a copy
  const std::vector<VPtr> items = other->items;
  for (size_t i = 0; i < keys.size(); ++i) dict_set(*d, keys[i], items[i]);
  return std::nullopt;
}
Status op_DICT_UPDATE(Translator& t, Frame& f, const Instr& in) { return dict_update(t, f, in, false); }
Status op_DICT_MERGE(Translator& t, Frame& f, const Instr& in) { return dict_update(t, f, in, true); }
Status op_UNPACK_SEQUENCE(Translator& t, Frame& f, const Instr& in) {  // (seq -- vn .. v1)
  NEED(1);
  VPtr seq = pop(f);
  if ((seq->kind == VK::List || seq->kind == VK::Tuple) && seq->lazy) {
    // From the frame, not read yet (realize_read kept it): its length guarded, and each item as
    // TorchDynamo's lazy items, a number unpacked into a local the code never reads adds no guard.
    const Py_ssize_t n = t.builder.sequence_length(seq, f);
    if (n == in.arg) {
      std::vector<VPtr> items;
      for (Py_ssize_t i = 0; i < n && seq->lazy; ++i) {
        VPtr iv = t.builder.sequence_item(seq, i, f);
        if (!iv) return t.brk(f, "DV0005", "an item of " + seq->source->text() + " cannot be traced");
        items.push_back(iv);
      }
      if (seq->lazy) {  // (an item's wrap may have realized it: an alias of it inside)
        for (auto r = items.rbegin(); r != items.rend(); ++r) f.stack.push_back(*r);
        return std::nullopt;
      }
    }
    if (Status s = t.realize_value(f, seq)) return s;
  }
  VPtr it;
  if (Status s = t.iterate(f, seq, it)) return s;
  if (static_cast<int>(it->items.size()) != in.arg)
    return t.raise_new(f, PyExc_ValueError, it->items.size() > static_cast<size_t>(in.arg)
        ? "too many values to unpack (expected " + std::to_string(in.arg) + ")"
        : "not enough values to unpack (expected " + std::to_string(in.arg) + ", got " + std::to_string(it->items.size()) + ")");
  for (auto r = it->items.rbegin(); r != it->items.rend(); ++r) f.stack.push_back(*r);
  return std::nullopt;
}
Status op_UNPACK_EX(Translator& t, Frame& f, const Instr& in) {  // (seq -- after.. list before..)
  NEED(1);
  const int before = in.arg & 0xFF, after = in.arg >> 8;
  VPtr seq = pop(f);
  VPtr it;
  if (Status s = t.iterate(f, seq, it)) return s;
  const int n = static_cast<int>(it->items.size());
  if (n < before + after) return t.brk(f, "DV0010", "ValueError: not enough values to unpack");
  for (int i = n - 1; i >= n - after; --i) f.stack.push_back(it->items[i]);
  VPtr mid = t.make(VK::List);
  mid->items.assign(it->items.begin() + before, it->items.begin() + (n - after));
  f.stack.push_back(mid);
  for (int i = before - 1; i >= 0; --i) f.stack.push_back(it->items[i]);
  return std::nullopt;
}
// f-strings. A constant is formatted now. A symbolic number is specialised first (TorchDynamo's
// LazySymNodeFormatString, realised). Another value (a tensor, a torch.Size with symbolic sizes) is
// formatted after the graph, as TorchDynamo's StringFormatVariable (str_format.cpp): FORMAT_VALUE
// makes a one-field StrFormat "{:spec}" and BUILD_STRING joins the parts into one.
// A symbolic int or bool in an f-string: its value, guarded. A symbolic float stays symbolic: it
// leaves the graph and is formatted after it, as a tensor is (its value is a graph input's that
// changes from call to call: guarding it would compile again for every value).
static Status specialise_for_text(Translator& t, Frame& f, VPtr& v) {
  if (v->kind != VK::Sym) return std::nullopt;
  if (ops(VK::Sym).python_type(t, v) == reinterpret_cast<PyObject*>(&PyFloat_Type)) return std::nullopt;
  Ref c = t.specialize(v);
  if (!c) {
    PyErr_Clear();
    return t.brk(f, "DV0021", "cannot specialise a symbolic number for an f-string");
  }
  v = t.constant(c);
  return std::nullopt;
}
static Status format_top(Translator& t, Frame& f, PyObject* spec, int conv) {  // (v -- str)
  VPtr& v = top(f);
  if (Status s = specialise_for_text(t, f, v)) return s;
  if (v->kind != VK::Const) {
    if (conv) return t.brk(f, "DV0023", std::string(conv == 2 ? "repr()" : conv == 1 ? "str()" : "ascii()") + " of a " + vk_name(v->kind) + " in an f-string");
    Ref pattern = Ref::steal(spec ? PyUnicode_FromFormat("{:%U}", spec) : PyUnicode_FromString("{}"));
    if (!pattern || (spec && (PyUnicode_FindChar(spec, '{', 0, PyUnicode_GET_LENGTH(spec), 1) >= 0 ||
                              PyUnicode_FindChar(spec, '}', 0, PyUnicode_GET_LENGTH(spec), 1) >= 0))) {
      PyErr_Clear();
      return t.brk(f, "DV0023", "f-string of a non-constant");
    }
    std::vector<VPtr> args{v};
    KwArgs kwargs;
    VPtr out;
    bool handled = false;
    if (Status s = str_format(t, f, pattern.get(), args, kwargs, out, handled)) return s;
    if (!handled) return t.brk(f, "DV0023", "f-string of a non-constant");
    out->flag = true;
    v = out;
    return std::nullopt;
  }
  Ref val = v->obj;
  if (conv == 1) val = Ref::steal(PyObject_Str(val.get()));
  if (conv == 2) val = Ref::steal(PyObject_Repr(val.get()));
  if (conv == 3) val = Ref::steal(PyObject_ASCII(val.get()));
  Ref s = val ? Ref::steal(PyObject_Format(val.get(), spec)) : Ref();
  if (!s) {
    PyErr_Clear();
    return t.brk(f, "DV0010", "format raised");
  }
  v = t.constant(s);
  return std::nullopt;
}
Status op_FORMAT_VALUE(Translator& t, Frame& f, const Instr& in) {  // (v [spec] -- str)
  const bool spec = in.arg & 4;
  NEED(spec ? 2u : 1u);
  VPtr fmt = spec ? top(f) : nullptr;
  if (fmt && fmt->kind != VK::Const) return t.brk(f, "DV0023", "f-string of a non-constant");
  if (spec) f.stack.pop_back();
  if (Status s = format_top(t, f, fmt ? fmt->obj.get() : nullptr, in.arg & 3)) {
    if (fmt) f.stack.push_back(fmt);
    return s;
  }
  return std::nullopt;
}
// 3.13 f-strings: CONVERT_VALUE (str/repr/ascii), then FORMAT_SIMPLE or FORMAT_WITH_SPEC.
Status op_CONVERT_VALUE(Translator& t, Frame& f, const Instr& in) {  // (v -- converted)
  NEED(1);
  VPtr& v = top(f);
  if (Status s = specialise_for_text(t, f, v)) return s;  // as by FORMAT_VALUE
  if (v->kind != VK::Const) return t.brk(f, "DV0023", "f-string of a non-constant");
  Ref r = Ref::steal(in.arg == 1 ? PyObject_Str(v->obj.get()) : in.arg == 2 ? PyObject_Repr(v->obj.get()) : PyObject_ASCII(v->obj.get()));
  if (!r) {
    PyErr_Clear();
    return t.brk(f, "DV0010", "format raised");
  }
  v = t.constant(r);
  return std::nullopt;
}
Status op_FORMAT_SIMPLE(Translator& t, Frame& f, const Instr&) {  // (v -- str)
  NEED(1);
  return format_top(t, f, nullptr, 0);
}
Status op_FORMAT_WITH_SPEC(Translator& t, Frame& f, const Instr&) {  // (v spec -- str)
  NEED(2);
  const VPtr spec = top(f);
  if (spec->kind != VK::Const) return t.brk(f, "DV0023", "f-string of a non-constant");
  f.stack.pop_back();
  if (Status s = format_top(t, f, spec->obj.get(), 0)) {
    f.stack.push_back(spec);
    return s;
  }
  return std::nullopt;
}
Status op_BUILD_STRING(Translator& t, Frame& f, const Instr& in) {  // (s1..sn -- str)
  NEED(static_cast<size_t>(in.arg));
  const auto first = f.stack.end() - in.arg;
  bool lazy = false;
  for (auto it = first; it != f.stack.end(); ++it) {
    if ((*it)->kind == VK::StrFormat) lazy = true;
    else if ((*it)->kind != VK::Const || !PyUnicode_Check((*it)->obj.get())) return t.brk(f, "DV0023", "string of a non-constant");
  }
  VPtr out;
  if (lazy) {  // one StrFormat: constant parts escaped, an f-string field's pattern inlined, others nested
    out = t.make(VK::StrFormat);
    static PyObject* open_ = PyUnicode_InternFromString("{");
    static PyObject* close_ = PyUnicode_InternFromString("}");
    static PyObject* open2 = PyUnicode_InternFromString("{{");
    static PyObject* close2 = PyUnicode_InternFromString("}}");
    static PyObject* field = PyUnicode_InternFromString("{}");
    Ref pattern = Ref::steal(PyUnicode_FromString(""));
    for (auto it = first; it != f.stack.end() && pattern; ++it) {
      const VPtr& p = *it;
      Ref part;
      if (p->kind == VK::Const) {
        Ref once = Ref::steal(PyUnicode_Replace(p->obj.get(), open_, open2, -1));
        part = once ? Ref::steal(PyUnicode_Replace(once.get(), close_, close2, -1)) : Ref();
      } else if (p->flag) {
        part = p->obj;
        out->items.push_back(p->items[0]);
      } else {
        part = Ref::borrow(field);
        out->items.push_back(p);
      }
      pattern = part ? Ref::steal(PyUnicode_Concat(pattern.get(), part.get())) : Ref();
    }
    out->obj = pattern;
  } else {
    Ref parts = Ref::steal(PyTuple_New(in.arg));
    for (int i = 0; i < in.arg; ++i) PyTuple_SET_ITEM(parts.get(), i, Ref::borrow(first[i]->obj.get()).release());
    Ref empty = Ref::steal(PyUnicode_FromString(""));
    out = t.constant_steal(PyUnicode_Join(empty.get(), parts.get()));
  }
  if (!out || !out->obj) {
    PyErr_Clear();
    return t.brk(f, "DV0023", "string of a non-constant");
  }
  f.stack.resize(f.stack.size() - in.arg);
  f.stack.push_back(out);
  return std::nullopt;
}

// match statements: MATCH_SEQUENCE / MATCH_MAPPING / GET_LEN / MATCH_KEYS / MATCH_CLASS on lists,
// tuples, dicts, constants and instances; anything else breaks (PEP 634 semantics, ceval.c's).
static int subject_flags(Translator& t, const VPtr& v, bool& known) {  // the Py_TPFLAGS_SEQUENCE/MAPPING of its type
  PyObject* tp = ops(v->kind).python_type(t, v);  // what type(subject) is in eager
  known = tp && PyType_Check(tp);
  return known ? static_cast<int>(reinterpret_cast<PyTypeObject*>(tp)->tp_flags) : 0;
}
static Status match_kind(Translator& t, Frame& f, unsigned long flag, const char* what) {  // (subject -- subject bool)
  NEED(1);
  bool known = false;
  const int flags = subject_flags(t, top(f), known);
  if (!known) return t.brk(f, "DV0001", std::string(what) + " on a " + vk_name(top(f)->kind));
  f.stack.push_back(t.constant(Ref::borrow((flags & flag) ? Py_True : Py_False)));
  return std::nullopt;
}
Status op_MATCH_SEQUENCE(Translator& t, Frame& f, const Instr&) { return match_kind(t, f, Py_TPFLAGS_SEQUENCE, "MATCH_SEQUENCE"); }
Status op_MATCH_MAPPING(Translator& t, Frame& f, const Instr&) { return match_kind(t, f, Py_TPFLAGS_MAPPING, "MATCH_MAPPING"); }
Status op_GET_LEN(Translator& t, Frame& f, const Instr&) {  // (subject -- subject len)
  NEED(1);
  const VPtr& v = top(f);
  Py_ssize_t n = -1;
  if (v->kind == VK::Tuple || v->kind == VK::List || v->kind == VK::Dict) n = static_cast<Py_ssize_t>(v->items.size());
  else if (v->kind == VK::Const && (n = PyObject_Length(v->obj.get())) < 0) PyErr_Clear();
  if (n < 0) return t.brk(f, "DV0001", std::string("GET_LEN of a ") + vk_name(v->kind));
  f.stack.push_back(t.constant_steal(PyLong_FromSsize_t(n)));
  return std::nullopt;
}
Status op_MATCH_KEYS(Translator& t, Frame& f, const Instr&) {  // (subject keys -- subject keys values_or_None)
  NEED(2);
  const VPtr& d = top(f, 2);
  const VPtr& keys = top(f);
  if (d->kind != VK::Dict || keys->kind != VK::Const || !PyTuple_Check(keys->obj.get()))
    return t.brk(f, "DV0001", std::string("MATCH_KEYS on a ") + vk_name(d->kind));
  VPtr values = t.make(VK::Tuple);
  for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(keys->obj.get()); ++j) {
    PyObject* key = PyTuple_GET_ITEM(keys->obj.get(), j);
    VPtr found;
    for (size_t i = 0; i < d->keys.size() && !found; ++i) {
      const int eq = keys_equal(d->keys[i].get(), key);
      if (eq < 0) return PyErr_Clear(), t.brk(f, "DV0010", "comparing dict keys raised");
      if (eq) found = d->items[i];
    }
    if (!found) {
      f.stack.push_back(t.constant(Ref::borrow(Py_None)));
      return std::nullopt;
    }
    values->items.push_back(found);
  }
  f.stack.push_back(values);
  return std::nullopt;
}
// (subject cls names -- attrs_or_None): isinstance, then __match_args__ (or the subject itself for
// the builtin types that match themselves) and the keyword attributes, read through getattr.
Status op_MATCH_CLASS(Translator& t, Frame& f, const Instr& in) {
  NEED(3);
  const VPtr subject = top(f, 3), cls = top(f, 2), names = top(f);
  if (names->kind != VK::Const || !PyTuple_Check(names->obj.get()) || !cls->obj || !PyType_Check(cls->obj.get()))
    return t.brk(f, "DV0001", "MATCH_CLASS on a non-constant class");
  VPtr isinst = t.make(VK::Object), hit;
  isinst->obj = Ref::borrow(PyDict_GetItemString(PyEval_GetBuiltins(), "isinstance"));
  if (Status s = t.call(f, isinst, {subject, cls}, {}, hit)) return s;
  if (!hit || hit->kind != VK::Const) return t.brk(f, "DV0001", "MATCH_CLASS: isinstance is not a constant");
  std::vector<VPtr> attrs;
  if (PyObject_IsTrue(hit->obj.get())) {
    PyTypeObject* tp = reinterpret_cast<PyTypeObject*>(cls->obj.get());
    Ref match_args = Ref::steal(PyObject_GetAttrString(cls->obj.get(), "__match_args__"));
    if (!match_args) PyErr_Clear();
    const bool self_match = !match_args && (tp->tp_flags & _Py_TPFLAGS_MATCH_SELF);
    if (in.arg > (self_match ? 1 : (match_args && PyTuple_Check(match_args.get()) ? PyTuple_GET_SIZE(match_args.get()) : 0)))
      return t.brk(f, "DV0001", "MATCH_CLASS: too many positional sub-patterns (TypeError in eager)");
    std::vector<std::string> wanted;
    for (int i = 0; i < in.arg && !self_match; ++i) wanted.push_back(str_of(PyTuple_GET_ITEM(match_args.get(), i)));
    if (self_match && in.arg == 1) attrs.push_back(subject);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names->obj.get()); ++i) wanted.push_back(str_of(PyTuple_GET_ITEM(names->obj.get(), i)));
    for (const std::string& name : wanted) {
      VPtr a;
      if (Status s = t.getattr(f, subject, name, a)) return s;
      attrs.push_back(a);
    }
  }
  f.stack.resize(f.stack.size() - 3);
  if (!PyObject_IsTrue(hit->obj.get())) {
    f.stack.push_back(t.constant(Ref::borrow(Py_None)));
    return std::nullopt;
  }
  VPtr tup = t.make(VK::Tuple);
  tup->items = std::move(attrs);
  f.stack.push_back(tup);
  return std::nullopt;
}

}  // namespace dv
