// Transformed code generation (see codegen.h).
#include "codegen.h"

#include <algorithm>
#include <functional>

#include "core/assembler.h"
#include "core/opcodes.h"

namespace dv {

std::vector<int> output_nodes(const VPtr& ret) {
  std::vector<int> out;
  std::function<void(const VPtr&)> walk = [&](const VPtr& v) {
    if (!v) return;
    if (v->kind == VK::Tensor || v->kind == VK::Sym) {
      if (std::find(out.begin(), out.end(), v->node) == out.end()) out.push_back(v->node);
      return;
    }
    if (v->kind == VK::Tuple || v->kind == VK::List || v->kind == VK::Dict)
      for (const VPtr& x : v->items) walk(x);
  };
  walk(ret);
  return out;
}

namespace {

struct Emitter {
  std::vector<bc::AsmInstr> ins;
  Ref consts = Ref::steal(PyList_New(0));
  Ref names = Ref::steal(PyList_New(0));
  bc::Position pos;
  int nvarnames = 0;

  void emit(uint8_t op, int32_t arg = 0) { ins.push_back(bc::AsmInstr{op, arg, pos}); }
  int konst(PyObject* o) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(consts.get()); ++i)
      if (PyList_GET_ITEM(consts.get(), i) == o) return static_cast<int>(i);
    PyList_Append(consts.get(), o);
    return static_cast<int>(PyList_GET_SIZE(consts.get()) - 1);
  }
  int name(const std::string& n) {
    Ref s = Ref::steal(PyUnicode_FromString(n.c_str()));
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(names.get()); ++i)
      if (PyUnicode_Compare(PyList_GET_ITEM(names.get(), i), s.get()) == 0) return static_cast<int>(i);
    PyList_Append(names.get(), s.get());
    return static_cast<int>(PyList_GET_SIZE(names.get()) - 1);
  }
  bool source(const Source& s) {
    using K = Source::Kind;
    switch (s.kind) {
      case K::Local: emit(bc::LOAD_FAST, s.index); return true;
      case K::Closure: emit(bc::LOAD_DEREF, nvarnames + s.index); return true;
      case K::Global: emit(bc::LOAD_GLOBAL, name(s.name) << 1); return true;
      case K::Attr: case K::ModuleMember:
        if (!source(*s.base)) return false;
        emit(bc::LOAD_ATTR, name(s.name));
        return true;
      case K::Item:
        if (!source(*s.base)) return false;
        emit(bc::LOAD_CONST, konst(s.key.get()));
        emit(bc::BINARY_SUBSCR);
        return true;
      case K::FnClosure:
        if (!source(*s.base)) return false;
        emit(bc::LOAD_ATTR, name("__closure__"));
        emit(bc::LOAD_CONST, konst(Ref::steal(PyLong_FromLong(s.index)).get()));
        emit(bc::BINARY_SUBSCR);
        emit(bc::LOAD_ATTR, name("cell_contents"));
        return true;
      case K::Held: emit(bc::LOAD_CONST, konst(s.key.get())); return true;
    }
    return false;
  }
};

}  // namespace

std::optional<Transformed> generate(PyObject* orig_code, PyObject* globals, PyObject* closure, const Translator& t,
                                    PyObject* compiled, const VPtr& ret, const std::vector<int>& outputs,
                                    std::string& why) {
  auto* co = reinterpret_cast<PyCodeObject*>(orig_code);
  const int nargs = co->co_argcount + co->co_kwonlyargcount + ((co->co_flags & CO_VARARGS) ? 1 : 0) +
                    ((co->co_flags & CO_VARKEYWORDS) ? 1 : 0);
  const int nfree = co->co_nfreevars;
  Ref varnames = Ref::steal(PyTuple_New(nargs + 1));
  for (int i = 0; i < nargs; ++i) PyTuple_SET_ITEM(varnames.get(), i, Ref::borrow(PyTuple_GET_ITEM(co->co_localsplusnames, i)).release());
  PyTuple_SET_ITEM(varnames.get(), nargs, PyUnicode_FromString("___dv_graph_out"));
  const int outs_slot = nargs;
  Emitter e;
  e.nvarnames = nargs + 1;
  e.pos = bc::Position{co->co_firstlineno, co->co_firstlineno, bc::kNone, bc::kNone};
  if (nfree) e.emit(bc::COPY_FREE_VARS, nfree);
  e.emit(bc::RESUME, 0);
  if (compiled) {
    e.emit(bc::PUSH_NULL);
    e.emit(bc::LOAD_CONST, e.konst(compiled));
    for (const auto& [src, node] : t.inputs) {
      if (!e.source(*src)) {
        why = "cannot reload input " + src->text();
        return std::nullopt;
      }
    }
    const int n = static_cast<int>(t.inputs.size());
    e.emit(bc::PRECALL, n);
    e.emit(bc::CALL, n);
    e.emit(bc::STORE_FAST, outs_slot);
  }
  std::function<bool(const VPtr&)> value = [&](const VPtr& v) -> bool {
    switch (v->kind) {
      case VK::Tensor: case VK::Sym: {  // graph outputs (symbolic ints come back as ints)
        auto it = std::find(outputs.begin(), outputs.end(), v->node);
        if (it == outputs.end() || !compiled) return v->source ? e.source(*v->source) : false;
        e.emit(bc::LOAD_FAST, outs_slot);
        e.emit(bc::LOAD_CONST, e.konst(Ref::steal(PyLong_FromLong(it - outputs.begin())).get()));
        e.emit(bc::BINARY_SUBSCR);
        return true;
      }
      case VK::Const: e.emit(bc::LOAD_CONST, e.konst(v->obj.get())); return true;
      case VK::Tuple: case VK::List:
        // A container from outside the frame is that object (written back first if it was mutated).
        if (v->source) return e.source(*v->source);
        for (const VPtr& x : v->items)
          if (!value(x)) return false;
        e.emit(v->kind == VK::Tuple ? bc::BUILD_TUPLE : bc::BUILD_LIST, static_cast<int>(v->items.size()));
        return true;
      case VK::Dict:
        if (v->source) return e.source(*v->source);
        for (size_t i = 0; i < v->items.size(); ++i) {
          e.emit(bc::LOAD_CONST, e.konst(v->keys[i].get()));
          if (!value(v->items[i])) return false;
        }
        e.emit(bc::BUILD_MAP, static_cast<int>(v->items.size()));
        return true;
      case VK::Object: case VK::NNModule: case VK::Function:
        if (v->source) return e.source(*v->source);
        if (v->obj && (v->kind != VK::Function || PyFunction_Check(v->obj.get()))) {
          e.emit(bc::LOAD_CONST, e.konst(v->obj.get()));
          return true;
        }
        return false;
      default: return false;
    }
  };
  for (const auto& w : t.attr_writes) {  // attribute assignments, replayed in order: (value owner -- )
    if (!value(w.value) || !value(w.owner)) {
      why = "cannot replay the assignment to attribute '" + w.name + "'";
      return std::nullopt;
    }
    e.emit(bc::STORE_ATTR, e.name(w.name));
  }
  for (const VPtr& l : t.mutated_lists) {  // lst[:] = [new contents]: (value container key -- )
    for (const VPtr& x : l->items)
      if (!value(x)) {
        why = "cannot write back the mutated list " + l->source->text();
        return std::nullopt;
      }
    e.emit(bc::BUILD_LIST, static_cast<int>(l->items.size()));
    if (!e.source(*l->source)) {
      why = "cannot reload the mutated list " + l->source->text();
      return std::nullopt;
    }
    e.emit(bc::LOAD_CONST, e.konst(Ref::steal(PySlice_New(nullptr, nullptr, nullptr)).get()));
    e.emit(bc::STORE_SUBSCR);
  }
  if (!value(ret)) {
    why = std::string("cannot rebuild the return value (a ") + vk_name(ret->kind) + " or something inside it)";
    return std::nullopt;
  }
  e.emit(bc::RETURN_VALUE);
  bc::AsmInput in;
  in.instrs = e.ins;
  in.firstlineno = co->co_firstlineno;
  auto out = bc::assemble(in);
  if (!out) {
    why = out.error().message();
    return std::nullopt;
  }
  Ref consts = Ref::steal(PyList_AsTuple(e.consts.get()));
  Ref names = Ref::steal(PyList_AsTuple(e.names.get()));
  Ref replace = Ref::steal(PyObject_GetAttrString(orig_code, "replace"));
  Ref kw = Ref::steal(PyDict_New());
  Ref empty = Ref::steal(PyTuple_New(0));
  auto set = [&](const char* k, PyObject* v) { PyDict_SetItemString(kw.get(), k, v); Py_DECREF(v); };
  set("co_code", PyBytes_FromStringAndSize(out->code.data(), static_cast<Py_ssize_t>(out->code.size())));
  set("co_linetable", PyBytes_FromStringAndSize(out->linetable.data(), static_cast<Py_ssize_t>(out->linetable.size())));
  set("co_exceptiontable", PyBytes_FromStringAndSize("", 0));
  set("co_stacksize", PyLong_FromLong(out->stacksize));
  set("co_consts", consts.release());
  set("co_names", names.release());
  set("co_varnames", varnames.release());
  set("co_cellvars", Ref::borrow(empty.get()).release());
  set("co_nlocals", PyLong_FromLong(nargs + 1));
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
  return Transformed{code, fn};
}

}  // namespace dv
