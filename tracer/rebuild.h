// The transformed code's emitter and the rebuilding of values after the graph (codegen.cpp), shared
// with the value kinds, each of which says how a value of its kind is rebuilt (KindOps::reconstruct).
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "core/assembler.h"
#include "core/opcodes.h"
#include "tracer/frame_shim.h"
#include "tracer/source.h"
#include "tracer/values.h"

namespace dv {
namespace cg {

using N = bc::Name;

// Instructions are named version-neutrally and encoded for the running interpreter (kPyVersion):
// 3.12+ drop PRECALL and shift LOAD_ATTR's name index past its method bit; 3.13 has no
// LOAD_CLOSURE (a LOAD_FAST) and sets a function's closure with SET_FUNCTION_ATTRIBUTE.
struct Emitter {
  const bc::Version v = kPyVersion;
  std::vector<bc::AsmInstr> ins;
  Ref consts = Ref::steal(PyList_New(0));
  Ref names = Ref::steal(PyList_New(0));
  bc::Position pos;
  int nfixed = 0;                 // argument slots + ___dv_graph_out
  int ntemps = 0;                 // temporaries after them
  std::vector<size_t> free_refs;  // LOAD_DEREF/LOAD_CLOSURE of free variable k: arg fixed up at the end
  std::vector<int> draws;         // the temporary holding random draw k (Source::Kind::RandomDraw)
  std::vector<bc::AsmExcRange> ranges;  // the exception table (instruction indexes)

  void emit(N n, int32_t arg = 0) {
    if (n == N::PRECALL && v != bc::Version::py311) return;
    if (n == N::LOAD_ATTR && v != bc::Version::py311) arg <<= 1;
    if (n == N::LOAD_CLOSURE && v == bc::Version::py313) n = N::LOAD_FAST;
    if (n == N::MAKE_FUNCTION && v == bc::Version::py313 && arg) {
      emit_raw(*bc::opcode_of(N::MAKE_FUNCTION, v), 0);
      n = N::SET_FUNCTION_ATTRIBUTE;
    }
    emit_raw(*bc::opcode_of(n, v), arg);
  }
  void emit_raw(uint8_t op, int32_t arg) { ins.push_back(bc::AsmInstr{op, arg, pos}); }  // the running version's number
  // A callable loaded by `load` with the NULL a plain call puts beside it (3.13: after it).
  template <class F>
  void callable(F load) {
    if (v != bc::Version::py313) emit(N::PUSH_NULL);
    load();
    if (v == bc::Version::py313) emit(N::PUSH_NULL);
  }
  void callable_const(PyObject* o) { callable([&] { emit(N::LOAD_CONST, konst(o)); }); }
  void emit_free(N op, int k) {
    free_refs.push_back(ins.size());
    emit(op, k);
  }
  int temp() { return nfixed + ntemps++; }
  int konst(PyObject* o) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(consts.get()); ++i)
      if (PyList_GET_ITEM(consts.get(), i) == o) return static_cast<int>(i);
    PyList_Append(consts.get(), o);
    return static_cast<int>(PyList_GET_SIZE(consts.get()) - 1);
  }
  void load_int(long v) { emit(N::LOAD_CONST, konst(Ref::steal(PyLong_FromLong(v)).get())); }
  int name(const std::string& n) {
    Ref s = Ref::steal(PyUnicode_FromString(n.c_str()));
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(names.get()); ++i)
      if (PyUnicode_Compare(PyList_GET_ITEM(names.get(), i), s.get()) == 0) return static_cast<int>(i);
    PyList_Append(names.get(), s.get());
    return static_cast<int>(PyList_GET_SIZE(names.get()) - 1);
  }
  // f(args...) with `n` arguments already pushed after PUSH_NULL + callable. More than 255 arguments
  // go as one tuple (CALL_FUNCTION_EX), the shape CPython's compiler gives a long call: a PRECALL or
  // CALL behind an EXTENDED_ARG is one no compiler emits, and 3.11's specialized PRECALL skips a fixed
  // distance to the end of the CALL it assumes right after it (SKIP_CALL), which an EXTENDED_ARG
  // between them shifts onto a cache entry once the code is quickened.
  void call(int n) {
    if (n > 255) {
      emit(N::BUILD_TUPLE, n);
      emit(N::CALL_FUNCTION_EX, 0);
      return;
    }
    emit(N::PRECALL, n);
    emit(N::CALL, n);
  }
  bool source(const Source& s) {
    using K = Source::Kind;
    switch (s.kind) {
      case K::Local: emit(N::LOAD_FAST, s.index); return true;
      case K::Closure: emit_free(N::LOAD_DEREF, s.index); return true;
      case K::Global: emit(N::LOAD_GLOBAL, name(s.name) << 1); return true;
      case K::Held: emit(N::LOAD_CONST, konst(s.key.get())); return true;
      case K::FreeCell: emit_free(N::LOAD_CLOSURE, s.index); return true;
      case K::RandomDraw:
        if (s.index < 0 || static_cast<size_t>(s.index) >= draws.size()) return false;
        emit(N::LOAD_FAST, draws[static_cast<size_t>(s.index)]);
        return true;
      case K::AsTensor:     // torch.as_tensor(ndarray)
      case K::WeakRefCall:  // weakref.ref.__call__(w)
        callable_const(s.key.get());
        if (!source(*s.base)) return false;
        call(1);
        return true;
      case K::FnMode:  // torch._C._get_function_stack_at(i)
        callable_const(s.key.get());
        load_int(s.index);
        call(1);
        return true;
      case K::TupleIterItem:  // dynview._runtime.tuple_iterator_getitem(it, k)
      case K::DictValueAt:    // dynview._runtime.dict_value_at(d, i)
        callable_const(s.key.get());
        if (!source(*s.base)) return false;
        load_int(s.index);
        call(2);
        return true;
      default: return source(*s.base) && step(s);
    }
  }
  // The access of a source with a base, its base already pushed.
  bool step(const Source& s) {
    using K = Source::Kind;
    switch (s.kind) {
      case K::Attr: emit(N::LOAD_ATTR, name(s.name)); return true;
      case K::ModuleMember:  // base._modules['name'], as the guard reads it: no nn.Module.__getattr__
        emit(N::LOAD_ATTR, name(s.dict_name));
        emit(N::LOAD_CONST, konst(Ref::steal(PyUnicode_InternFromString(s.name.c_str())).get()));
        emit(N::BINARY_SUBSCR);
        return true;
      case K::Item:
        if (s.storage) {  // dict.__getitem__(base, key): [base] -> [f, base, key], called as a method
          static PyObject* dict_getitem = PyObject_GetAttrString(reinterpret_cast<PyObject*>(&PyDict_Type), "__getitem__");
          if (!dict_getitem) return PyErr_Clear(), false;
          emit(N::LOAD_CONST, konst(dict_getitem));
          emit(N::SWAP, 2);
          emit(N::LOAD_CONST, konst(s.key.get()));
          call(1);
          return true;
        }
        emit(N::LOAD_CONST, konst(s.key.get()));
        emit(N::BINARY_SUBSCR);
        return true;
      case K::FnClosure:
        emit(N::LOAD_ATTR, name("__closure__"));
        load_int(s.index);
        emit(N::BINARY_SUBSCR);
        emit(N::LOAD_ATTR, name("cell_contents"));
        return true;
      case K::Local: case K::Closure: case K::Global: case K::Held: case K::FreeCell: case K::AsTensor: case K::TupleIterItem: case K::FnMode:
      case K::DictValueAt: case K::WeakRefCall: case K::RandomDraw: return false;
    }
    return false;
  }
};

// A helper of dynview._runtime the transformed code calls (borrowed, kept for the process; null: missing).
PyObject* runtime_attr(const char* name);

// Rebuilds values after the graph ran: graph outputs from the output tuple, constants, containers
// built in the trace, objects reloaded from their sources. Values stored in a temporary (memo) are
// loaded from there, so a value reconstructed twice is still one object.
struct Rebuilder {
  Emitter& e;
  const std::vector<int>& outputs;
  bool compiled;
  int outs_slot;
  std::unordered_map<const Value*, int> memo;
  PyObject* globals = nullptr;  // the transformed code's globals (borrowed)
  // Dict keys that are values (OutputGraph::key_values): rebuilt as their values (borrowed)
  const std::unordered_map<PyObject*, VPtr>* key_values = nullptr;
  // Modules built in the trace: the attributes it set on each, and which are buffers (OutputGraph)
  const MadeModuleAttrs* made_module_attrs = nullptr;
  const std::unordered_map<PyObject*, std::vector<std::pair<size_t, int>>>* made_module_buffers = nullptr;

  // Pushes v (the kind's reconstruct; a value in the memo is loaded from its temporary); false:
  // it cannot be rebuilt.
  bool value(const VPtr& v);
  // Real cells for the cells made in the trace that `roots` reach (through closures, containers,
  // cell contents; `extra` too): each a new types.CellType() in a temporary, made empty first and
  // filled after (a closure may hold the cell it is stored in). False with `why` when a closure
  // over a real cell of a function from outside the trace would have to be rebuilt.
  bool make_cells(const std::vector<VPtr>& roots, const std::vector<VPtr>& extra, std::string& why);
  // A function's globals: the transformed code's own by globals() (a readable listing), others as
  // a constant.
  bool load_globals(PyObject* g) {
    static PyObject* globals_fn = [] {
      Ref mod = Ref::steal(PyImport_ImportModule("builtins"));
      PyObject* f = mod ? PyObject_GetAttrString(mod.get(), "globals") : nullptr;  // kept for the process
      if (!f) PyErr_Clear();
      return f;
    }();
    if (g == globals && globals_fn) {
      e.callable_const(globals_fn);
      e.call(0);
    } else {
      e.emit(N::LOAD_CONST, e.konst(g));
    }
    return true;
  }
  // Keeps a freshly built mutable container in a temporary, so later uses share it.
  bool remember(const VPtr& v) {
    if (v->kind == VK::Tuple) return true;
    const int slot = e.temp();
    e.emit(N::COPY, 1);
    e.emit(N::STORE_FAST, slot);
    memo[v.get()] = slot;
    return true;
  }
  // Pushes a dict key: a constant, or the value a tensor's or module's key stands for.
  bool key(const Ref& k) {
    if (key_values)
      if (auto it = key_values->find(k.get()); it != key_values->end()) return value(it->second);
    if (value_key(k.get())) return false;  // (a tensor's example: never a constant of the code)
    e.emit(N::LOAD_CONST, e.konst(k.get()));
    return true;
  }
  // Evaluates `v` once into a temporary; returns the slot or -1.
  int stash(const VPtr& v) {
    if (auto it = memo.find(v.get()); it != memo.end()) return it->second;
    if (!value(v)) return -1;
    const int slot = e.temp();
    e.emit(N::STORE_FAST, slot);
    memo[v.get()] = slot;
    return slot;
  }
};

}  // namespace cg
}  // namespace dv
