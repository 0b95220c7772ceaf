// Split points, liveness and resume code objects (see resume.h).
#include "resume.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "core/assembler.h"
#include "core/opcodes.h"
#include "pycache.h"

namespace dv {
namespace {

using bc::Instr;

const bc::ExcEntry* handler_of(const bc::Decoded& d, uint32_t offset) {
  for (const bc::ExcEntry& e : d.exceptions)
    if (offset >= e.start && offset < e.end) return &e;
  return nullptr;
}

int index_at(const CodeFacts& facts, uint32_t offset) {
  auto it = facts.index_of.find(offset);
  return it == facts.index_of.end() ? -1 : it->second;
}

using N = bc::Name;
constexpr uint8_t kFastCell = 0x40;  // CO_FAST_CELL (internal/pycore_code.h, the same in 3.11-3.13)

// A `with` block's handler: PUSH_EXC_INFO; WITH_EXCEPT_START (CPython 3.11's compiler).
bool is_with_handler(const CodeFacts& facts, uint32_t target) {
  const int i = index_at(facts, target);
  const auto& ins = facts.decoded.instrs;
  return i >= 0 && i + 1 < static_cast<int>(ins.size()) && ins[i].name == N::PUSH_EXC_INFO &&
         ins[i + 1].name == N::WITH_EXCEPT_START;
}

bool ends_block(const bc::Decoded& d, const Instr& in) { return bc::has_flag(in.opcode, bc::F_NOFALL, d.version); }
bool is_jump(const bc::Decoded& d, const Instr& in) { return bc::is_jump(in.opcode, d.version); }
bool is_return(const Instr& in) { return in.name == N::RETURN_VALUE || in.name == N::RETURN_CONST; }
bool is_bool_jump(N n) {
  return n == N::POP_JUMP_FORWARD_IF_TRUE || n == N::POP_JUMP_FORWARD_IF_FALSE || n == N::POP_JUMP_BACKWARD_IF_TRUE ||
         n == N::POP_JUMP_BACKWARD_IF_FALSE || n == N::POP_JUMP_IF_TRUE || n == N::POP_JUMP_IF_FALSE;
}

// The comprehensions 3.12+ inline into the frame (PEP 709), as the compiler lays them out:
// LOAD_FAST_AND_CLEAR (one per variable it binds); SWAP; BUILD_LIST/SET/MAP 0; SWAP 2; FOR_ITER ...
// END_FOR [3.13: POP_TOP], the build to the end protected by one handler (the cleanup that puts the
// variables back). `start`: the first LOAD_FAST_AND_CLEAR; `build`: the BUILD_*; `end`: the
// instruction after the protected range (its result on the stack, the saved variables under it).
struct Comprehension {
  int start = -1, build = -1, end = -1;
};
std::vector<Comprehension> inlined_comprehensions(const CodeFacts& facts) {
  std::vector<Comprehension> out;
  const auto& ins = facts.decoded.instrs;
  if (facts.decoded.version == bc::Version::py311) return out;
  for (int i = 2; i + 2 < static_cast<int>(ins.size()); ++i) {
    const N op = ins[i].name;
    if ((op != N::BUILD_LIST && op != N::BUILD_SET && op != N::BUILD_MAP) || ins[i].arg != 0) continue;
    if (ins[i - 1].name != N::SWAP || ins[i - 2].name != N::LOAD_FAST_AND_CLEAR) continue;
    if (ins[i + 1].name != N::SWAP || ins[i + 2].name != N::FOR_ITER) continue;
    const bc::ExcEntry* own = handler_of(facts.decoded, ins[i].offset);
    if (!own || own->start != ins[i].offset) continue;
    // its FOR_ITER leaves the loop at END_FOR (3.13: END_FOR; POP_TOP), the protected range's end
    const int end_for = ins[i + 2].jump_target >= 0 ? index_at(facts, static_cast<uint32_t>(ins[i + 2].jump_target)) : -1;
    if (end_for < 0 || ins[end_for].name != N::END_FOR || end_for + 2 >= static_cast<int>(ins.size())) continue;
    Comprehension c;
    c.build = i;
    c.start = i - 2;
    while (c.start > 0 && ins[c.start - 1].name == N::LOAD_FAST_AND_CLEAR) --c.start;
    c.end = end_for + (ins[end_for + 1].name == N::POP_TOP && facts.decoded.version == bc::Version::py313 ? 2 : 1);
    bool closes = false;
    for (const bc::ExcEntry& e : facts.decoded.exceptions) closes |= e.target == own->target && e.end == ins[c.end].offset;
    if (closes) out.push_back(c);
  }
  return out;
}

// Whether the inlined comprehension `c` can run in a function of its own: it writes no variable of
// the frame but its own (a walrus would have to be written back) and reaches no cell.
bool comprehension_self_contained(const CodeFacts& facts, const Comprehension& c, std::string& why) {
  const auto& ins = facts.decoded.instrs;
  std::vector<int> own;
  for (int i = c.start; i < c.end; ++i)
    if (ins[i].name == N::LOAD_FAST_AND_CLEAR) own.push_back(ins[i].index);
  for (int i = c.start; i < c.end; ++i) {
    const N op = ins[i].name;
    if (op == N::LOAD_DEREF || op == N::STORE_DEREF || op == N::DELETE_DEREF || op == N::LOAD_CLOSURE ||
        op == N::MAKE_CELL || op == N::LOAD_FROM_DICT_OR_DEREF || op == N::DELETE_FAST) {
      why = "graph break in a comprehension that reaches a cell or deletes a variable";
      return false;
    }
    auto foreign = [&](int slot) { return slot >= 0 && std::find(own.begin(), own.end(), slot) == own.end(); };
    if ((op == N::STORE_FAST && foreign(ins[i].index)) || (op == N::STORE_FAST_STORE_FAST && (foreign(ins[i].index) || foreign(ins[i].index2))) ||
        (op == N::STORE_FAST_LOAD_FAST && foreign(ins[i].index))) {
      why = "graph break in a comprehension that assigns a variable of the frame (:=)";
      return false;
    }
  }
  return true;
}

}  // namespace

bool plan_split(const CodeFacts& facts, int index, SplitPlan& plan, std::string& why) {
  const auto& ins = facts.decoded.instrs;
  if (index < 0 || index >= static_cast<int>(ins.size())) {
    why = "the break is not at an instruction of the frame";
    return false;
  }
  // A break inside an inlined comprehension (the outermost one around it): split at its build.
  for (const Comprehension& c : inlined_comprehensions(facts)) {
    if (index < c.build || index >= c.end) continue;
    if (!comprehension_self_contained(facts, c, why)) return false;
    if (handler_of(facts.decoded, ins[c.start].offset)) {
      why = "graph break in a comprehension inside a try or with block";
      return false;
    }
    index = c.build;
    plan = SplitPlan{};
    plan.kind = SplitPlan::Comprehension;
    plan.index = c.build;
    plan.operands = 1;
    plan.pushes = 1;
    plan.next = c.end;
    // A loop around the comprehension runs the whole frame eagerly, as for other breaks (TorchDynamo
    // splits there too, each iteration's resume function nesting in the last; dynview's would be a
    // new code object per iteration, compiled anew).
    for (size_t i = static_cast<size_t>(c.end); i < ins.size(); ++i) {
      if (is_return(ins[i])) break;
      if (is_jump(facts.decoded, ins[i]) && ins[i].jump_target >= 0 && static_cast<uint32_t>(ins[i].jump_target) < ins[c.start].offset) {
        why = "graph break in a loop";
        return false;
      }
    }
    return true;
  }
  const Instr& in = ins[index];
  const N op = in.name;
  plan = SplitPlan{};
  plan.index = index;
  if (op == N::CALL || op == N::CALL_KW) {
    plan.kind = SplitPlan::Call;
    plan.operands = in.arg + (op == N::CALL_KW ? 3 : 2);
    plan.next = index + 1;
  } else if (op == N::CALL_FUNCTION_EX) {
    plan.kind = SplitPlan::Call;
    plan.operands = 3 + (in.arg & 1);
    plan.next = index + 1;
  } else if (op == N::BINARY_SUBSCR || op == N::COMPARE_OP || op == N::STORE_SUBSCR || op == N::STORE_ATTR) {
    plan.kind = SplitPlan::Call;
    plan.operands = op == N::STORE_SUBSCR ? 3 : 2;
    plan.pushes = op == N::STORE_SUBSCR || op == N::STORE_ATTR ? 0 : 1;
    plan.next = index + 1;
  } else if (is_bool_jump(op)) {
    plan.kind = SplitPlan::Jump;
    plan.operands = 1;
    plan.next = index + 1;
    plan.target = index_at(facts, static_cast<uint32_t>(in.jump_target));
    if (plan.target < 0) {
      why = "jump target is not an instruction";
      return false;
    }
  } else {
    plan.kind = SplitPlan::Generic;
    plan.next = index;
    // 3.13: UNARY_NOT takes an exact bool; resume at the TO_BOOL before it (traced as a no-op).
    if (op == N::UNARY_NOT && index > 0 && ins[index - 1].name == N::TO_BOOL) plan.next = index - 1;
  }
  // A loop around the break (TorchDynamo's backedge heuristic: a jump back to before the break
  // before the next return) runs the whole frame eagerly.
  if (is_jump(facts.decoded, in) && in.jump_target >= 0 && static_cast<uint32_t>(in.jump_target) <= in.offset) {
    why = "graph break in a loop";
    return false;
  }
  // A break at FOR_ITER (over an iterator the trace cannot follow) is in its own loop: the loop's
  // jump back lands on it.
  const bool loop_head = op == N::FOR_ITER;
  for (size_t i = static_cast<size_t>(index) + 1; i < ins.size(); ++i) {
    if (is_return(ins[i])) break;
    if (is_jump(facts.decoded, ins[i]) && ins[i].jump_target >= 0 &&
        (static_cast<uint32_t>(ins[i].jump_target) < in.offset || (loop_head && static_cast<uint32_t>(ins[i].jump_target) == in.offset))) {
      why = "graph break in a loop";
      return false;
    }
  }
  // Blocks: a `with` block (grad mode) can be continued; a try block cannot.
  if (const bc::ExcEntry* e = handler_of(facts.decoded, in.offset)) {
    if (!is_with_handler(facts, e->target)) {
      why = "graph break in a try block";
      return false;
    }
    // Blocks around it must be `with` blocks too (TorchDynamo sets each up again in the resume
    // function): the handler's cleanup (COPY 3; POP_EXCEPT; RERAISE) is protected by the block
    // around it, if any.
    const int h = index_at(facts, e->target);
    for (int inner = h;;) {
      const bc::ExcEntry* cleanup = handler_of(facts.decoded, ins[static_cast<size_t>(inner) + 1].offset);
      if (!cleanup) {
        why = "graph break in a with block whose handler is not protected";
        return false;
      }
      const bc::ExcEntry* outer = handler_of(facts.decoded, cleanup->target);
      if (!outer) break;
      if (!is_with_handler(facts, outer->target)) {
        why = "graph break in a with block inside a try block";
        return false;
      }
      inner = index_at(facts, outer->target);
    }
    plan.with_handler = h;
    plan.with_depth = e->depth;
    plan.with_lasti = e->lasti;
  }
  return true;
}

std::vector<bool> live_locals(const CodeFacts& facts, int index) {
  const auto& ins = facts.decoded.instrs;
  const auto* co = reinterpret_cast<PyCodeObject*>(facts.code.get());
  const size_t n = ins.size();
  const size_t nloc = static_cast<size_t>(co->co_nlocals);
  std::vector<std::vector<bool>> in(n, std::vector<bool>(nloc, false));
  // Successors of each instruction: fall-through, jump target, exception handler.
  std::vector<std::vector<int>> succ(n);
  for (size_t i = 0; i < n; ++i) {
    if (!ends_block(facts.decoded, ins[i]) && i + 1 < n) succ[i].push_back(static_cast<int>(i) + 1);
    if (is_jump(facts.decoded, ins[i]) && ins[i].jump_target >= 0) {
      const int t = index_at(facts, static_cast<uint32_t>(ins[i].jump_target));
      if (t >= 0) succ[i].push_back(t);
    }
    if (const bc::ExcEntry* e = handler_of(facts.decoded, ins[i].offset)) {
      const int t = index_at(facts, e->target);
      if (t >= 0) succ[i].push_back(t);
    }
  }
  bool changed = true;
  while (changed) {
    changed = false;
    for (size_t k = n; k-- > 0;) {
      std::vector<bool> live(nloc, false);
      for (int s : succ[k])
        for (size_t j = 0; j < nloc; ++j)
          if (in[static_cast<size_t>(s)][j]) live[j] = true;
      const N op = ins[k].name;
      const size_t a = ins[k].index >= 0 ? static_cast<size_t>(ins[k].index) : nloc;
      const size_t b = ins[k].index2 >= 0 ? static_cast<size_t>(ins[k].index2) : nloc;
      auto kill = [&](size_t j) { if (j < nloc) live[j] = false; };
      auto use = [&](size_t j) { if (j < nloc) live[j] = true; };
      if (op == N::STORE_FAST) kill(a);
      // (`del x` reads the binding: it raises where x is unbound)
      if (op == N::LOAD_FAST || op == N::LOAD_FAST_CHECK || op == N::LOAD_FAST_AND_CLEAR || op == N::DELETE_FAST) use(a);
      if (op == N::STORE_FAST_STORE_FAST) kill(a), kill(b);
      if (op == N::LOAD_FAST_LOAD_FAST) use(a), use(b);
      if (op == N::STORE_FAST_LOAD_FAST) kill(a), use(b);
      if (live != in[k]) {
        in[k] = std::move(live);
        changed = true;
      }
    }
  }
  return index >= 0 && static_cast<size_t>(index) < n ? in[static_cast<size_t>(index)] : std::vector<bool>(nloc, false);
}

bool resume_self_first(PyObject* code, const ResumeLayout& layout) {
  auto* co = reinterpret_cast<PyCodeObject*>(code);
  if (co->co_argcount == 0 || co->co_nfreevars == 0 || layout.locals.empty() || layout.locals[0] != 0) return false;
  const auto* kinds = reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(co->co_localspluskinds));
  if (kinds[0] & kFastCell) return false;
  const int nplus = static_cast<int>(PyTuple_GET_SIZE(co->co_localsplusnames));
  for (int i = nplus - co->co_nfreevars; i < nplus; ++i)
    if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(co->co_localsplusnames, i), "__class__") == 0) return true;
  return false;
}

PyObject* resume_code(const CodeFacts& facts, int target, const ResumeLayout& layout, std::string& why, int return_at) {
  // Shared per (code, target, layout, return_at); never destroyed (holds code objects past Py_Finalize).
  using Key = std::tuple<PyObject*, int, std::vector<bool>, std::vector<int>, std::vector<int>, std::vector<int>, std::vector<int>,
                         std::vector<std::string>, int>;
  static auto& cache = *new std::map<Key, Ref>();
  static auto& counter = *new std::map<PyObject*, int>();
  Key key{facts.code.get(), target, layout.stack_null, layout.locals, layout.cells, layout.shared, layout.stack_reenter, layout.reenter_text, return_at};
  if (auto it = cache.find(key); it != cache.end()) return it->second.get();

  auto* co = reinterpret_cast<PyCodeObject*>(facts.code.get());
  const auto& ins = facts.decoded.instrs;
  auto orig = bc::to_asm_input(facts.decoded, co->co_firstlineno);
  if (!orig) {
    why = orig.error().message();
    return nullptr;
  }
  // Decoded index -> assembler index (EXTENDED_ARGs are folded away by to_asm_input).
  std::vector<int> asm_index(ins.size() + 1);
  int k = 0;
  for (size_t i = 0; i < ins.size(); ++i) {
    asm_index[i] = k;
    if (ins[i].name != N::EXTENDED_ARG) ++k;
  }
  asm_index[ins.size()] = k;
  // New layout. varnames: [stack args][live locals][passed cells][other varnames]; cellvars: [passed
  // cells][other cells] (code.replace puts the cells not among varnames after them, then freevars);
  // freevars: [shared cells][the code's free variables].
  const int nplus = static_cast<int>(PyTuple_GET_SIZE(co->co_localsplusnames));
  const int nfree = co->co_nfreevars;
  const auto* kinds = reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(co->co_localspluskinds));
  auto is_cell = [&](int i) { return (kinds[i] & kFastCell) != 0; };
  auto reentered = [&](size_t slot) { return slot < layout.stack_reenter.size() && layout.stack_reenter[slot] >= 0; };
  int nstack = 0;
  for (size_t i = 0; i < layout.stack_null.size(); ++i) nstack += layout.stack_null[i] || reentered(i) ? 0 : 1;
  std::vector<int> new_index(static_cast<size_t>(nplus), -1);
  Ref varnames = Ref::steal(PyList_New(0)), cellvars = Ref::steal(PyList_New(0)), pure_cells = Ref::steal(PyList_New(0));
  auto name_of = [&](int i) { return PyTuple_GET_ITEM(co->co_localsplusnames, i); };
  auto add_var = [&](int i) {
    new_index[static_cast<size_t>(i)] = static_cast<int>(PyList_GET_SIZE(varnames.get()));
    PyList_Append(varnames.get(), name_of(i));
  };
  // Stack arguments get names the code does not use (a resume function's own ___stackN may be live).
  std::string prefix = "___stack";
  auto taken = [&](const std::string& p) {
    for (int i = 0; i < nplus; ++i)
      if (str_of(name_of(i)).rfind(p, 0) == 0) return true;
    return false;
  };
  while (taken(prefix)) prefix += "_";
  const bool self_first = resume_self_first(facts.code.get(), layout);  // [self][stack args][other live locals]...
  if (self_first) add_var(0);
  for (int i = 0; i < nstack; ++i)
    PyList_Append(varnames.get(), Ref::steal(PyUnicode_FromFormat("%s%d", prefix.c_str(), i)).get());
  for (int l : layout.locals)
    if (!(self_first && l == 0)) add_var(l);
  for (int c : layout.cells) {
    add_var(c);
    PyList_Append(cellvars.get(), name_of(c));
  }
  std::vector<bool> is_shared(static_cast<size_t>(nplus), false);
  for (int c : layout.shared) is_shared[static_cast<size_t>(c)] = true;
  for (int i = 0; i < nplus - nfree; ++i)
    if (new_index[static_cast<size_t>(i)] < 0 && !is_cell(i)) add_var(i);
  // return_at: where the result and the items under it go (names the code does not use)
  const int result_slot = static_cast<int>(PyList_GET_SIZE(varnames.get()));
  if (return_at >= 0) {
    PyList_Append(varnames.get(), Ref::steal(PyUnicode_FromFormat("%s_result", prefix.c_str())).get());
    PyList_Append(varnames.get(), Ref::steal(PyUnicode_FromFormat("%s_drop", prefix.c_str())).get());
  }
  const int nvar = static_cast<int>(PyList_GET_SIZE(varnames.get()));
  for (int i = 0; i < nplus - nfree; ++i)
    if (new_index[static_cast<size_t>(i)] < 0 && is_cell(i) && !is_shared[static_cast<size_t>(i)]) {
      new_index[static_cast<size_t>(i)] = nvar + static_cast<int>(PyList_GET_SIZE(pure_cells.get()));
      PyList_Append(pure_cells.get(), name_of(i));
      PyList_Append(cellvars.get(), name_of(i));
    }
  const int npure = static_cast<int>(PyList_GET_SIZE(pure_cells.get()));
  Ref freevars = Ref::steal(PyList_New(0));
  for (int c : layout.shared) {
    new_index[static_cast<size_t>(c)] = nvar + npure + static_cast<int>(PyList_GET_SIZE(freevars.get()));
    PyList_Append(freevars.get(), name_of(c));
  }
  for (int i = nplus - nfree; i < nplus; ++i) PyList_Append(freevars.get(), name_of(i));
  const int nallfree = static_cast<int>(PyList_GET_SIZE(freevars.get()));
  const int nnew = nvar + npure + nallfree;
  auto remap = [&](int idx) { return idx < nplus - nfree ? new_index[static_cast<size_t>(idx)] : idx - (nplus - nfree) + (nnew - nfree); };

  const bc::Version v = facts.decoded.version;
  bc::AsmInput in;
  in.version = v;
  in.firstlineno = co->co_firstlineno;
  bc::Position pos{co->co_firstlineno, co->co_firstlineno, bc::kNone, bc::kNone};
  if (target < static_cast<int>(ins.size())) pos = ins[static_cast<size_t>(target)].pos;
  auto emit = [&](N op, int arg = 0) { in.instrs.push_back(bc::AsmInstr{*bc::opcode_of(op, v), arg, pos}); };
  for (int i = 0; i < nplus - nfree; ++i)
    if (is_cell(i) && !is_shared[static_cast<size_t>(i)]) emit(N::MAKE_CELL, new_index[static_cast<size_t>(i)]);
  if (nallfree) emit(N::COPY_FREE_VARS, nallfree);
  emit(N::RESUME, 0);
  // Constants the prologue adds after the code's own (the class of a block entered again, its mode).
  Ref consts = Ref::steal(PySequence_List(co->co_consts));
  if (!consts) {
    PyErr_Clear();
    why = "cannot copy the code's constants";
    return nullptr;
  }
  auto konst = [&](PyObject* o) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(consts.get()); ++i)
      if (PyList_GET_ITEM(consts.get(), i) == o) return static_cast<int>(i);
    PyList_Append(consts.get(), o);
    return static_cast<int>(PyList_GET_SIZE(consts.get()) - 1);
  };
  int passed = self_first ? 1 : 0;
  for (size_t i = 0; i < layout.stack_null.size(); ++i) {
    if (layout.stack_null[i]) {
      emit(N::PUSH_NULL);
    } else if (reentered(i)) {
      // torch.inference_mode(mode) or disable_saved_tensors_hooks(message), entered: BEFORE_WITH
      // leaves its __exit__
      const int kind = layout.stack_reenter[i];
      const bool hooks = kind == kReenterSavedHooksOff, sdpa = kind == kReenterSdpaKernel || kind == kReenterSdpaKernelPriority;
      static PyObject* hooks_off = kept_attr("torch.autograd.graph", "disable_saved_tensors_hooks");
      static PyObject* sdpa_kernel = kept_attr("torch.nn.attention", "sdpa_kernel");
      static PyObject* backend_type = kept_attr("torch.nn.attention", "SDPBackend");
      PyObject* cls = hooks ? hooks_off : sdpa ? sdpa_kernel : inference_mode_class();
      if (!cls || (sdpa && !backend_type)) {
        why = "the context manager of a with block to enter again is missing";
        return nullptr;
      }
      const std::string text = i < layout.reenter_text.size() ? layout.reenter_text[i] : std::string();
      std::vector<Ref> args;  // constants
      if (hooks) {
        args.push_back(Ref::steal(PyUnicode_FromString(text.c_str())));
      } else if (sdpa) {  // [SDPBackend[name], ...], set_priority
        Ref list = Ref::steal(PyList_New(0));
        for (size_t at = 0; list && at < text.size();) {
          const size_t end = std::min(text.find(',', at), text.size());
          Ref member = Ref::steal(PyObject_GetAttrString(backend_type, text.substr(at, end - at).c_str()));
          if (!member || PyList_Append(list.get(), member.get()) < 0) list = Ref();
          at = end + 1;
        }
        args.push_back(list);
        args.push_back(Ref::borrow(kind == kReenterSdpaKernelPriority ? Py_True : Py_False));
      } else {
        args.push_back(Ref::borrow(kind ? Py_True : Py_False));
      }
      for (const Ref& a : args)
        if (!a) return PyErr_Clear(), why = "cannot make the arguments of a with block to enter again", nullptr;
      const int nargs = static_cast<int>(args.size());
      if (v != bc::Version::py313) emit(N::PUSH_NULL);
      emit(N::LOAD_CONST, konst(cls));
      if (v == bc::Version::py313) emit(N::PUSH_NULL);
      for (const Ref& a : args) emit(N::LOAD_CONST, konst(a.get()));
      if (v == bc::Version::py311) emit(N::PRECALL, nargs);
      emit(N::CALL, nargs);
      emit(N::BEFORE_WITH);
      emit(N::POP_TOP);
    } else {
      emit(N::LOAD_FAST, passed++);
    }
  }
  // 3.13's two-local super-instructions hold two 4-bit indexes: where the new layout moves either
  // local past 15, the instruction is emitted as its two halves (one more instruction: jump targets
  // and exception ranges are mapped through `at`).
  auto is_pair = [](N op) { return op == N::LOAD_FAST_LOAD_FAST || op == N::STORE_FAST_STORE_FAST || op == N::STORE_FAST_LOAD_FAST; };
  const int shift = static_cast<int>(in.instrs.size()) + 1;  // prologue + its jump
  std::vector<int> at(orig->instrs.size() + 1);
  int grown = 0;
  // return_at: STORE_FAST result; STORE_FAST drop for each item under it (NULLs too); LOAD_FAST
  // result; RETURN_VALUE, before the instruction there (left unreachable)
  const int ret_asm = return_at >= 0 ? asm_index[static_cast<size_t>(return_at)] : -1;
  // (the comprehension's result has taken its iterator's place on the stack)
  const int ret_depth = return_at >= 0 ? static_cast<int>(layout.stack_null.size()) - 1 : 0;
  for (size_t i = 0; i < orig->instrs.size(); ++i) {
    at[i] = static_cast<int>(i) + grown + shift;
    if (static_cast<int>(i) == ret_asm) grown += 3 + ret_depth;
    const bc::AsmInstr& a = orig->instrs[i];
    if (is_pair(bc::base_name_of(a.opcode, v)) && (remap(a.arg >> 4) > 15 || remap(a.arg & 15) > 15)) ++grown;
  }
  at[orig->instrs.size()] = static_cast<int>(orig->instrs.size()) + grown + shift;
  emit(N::JUMP_FORWARD, at[static_cast<size_t>(asm_index[static_cast<size_t>(target)])]);
  int asm_i = -1;
  for (bc::AsmInstr a : orig->instrs) {
    const N op = bc::base_name_of(a.opcode, v);
    if (++asm_i == ret_asm) {
      in.instrs.push_back(bc::AsmInstr{*bc::opcode_of(N::STORE_FAST, v), result_slot, a.pos});
      for (int k = 0; k < ret_depth; ++k) in.instrs.push_back(bc::AsmInstr{*bc::opcode_of(N::STORE_FAST, v), result_slot + 1, a.pos});
      in.instrs.push_back(bc::AsmInstr{*bc::opcode_of(N::LOAD_FAST, v), result_slot, a.pos});
      in.instrs.push_back(bc::AsmInstr{*bc::opcode_of(N::RETURN_VALUE, v), 0, a.pos});
    }
    if (bc::is_jump(a.opcode, v)) {
      a.arg = at[static_cast<size_t>(a.arg)];
    } else if (op == N::LOAD_FAST || op == N::STORE_FAST || op == N::DELETE_FAST || op == N::LOAD_DEREF ||
               op == N::STORE_DEREF || op == N::DELETE_DEREF || op == N::LOAD_CLOSURE || op == N::LOAD_CLASSDEREF ||
               op == N::MAKE_CELL || op == N::LOAD_FAST_CHECK || op == N::LOAD_FAST_AND_CLEAR ||
               op == N::LOAD_FROM_DICT_OR_DEREF) {
      a.arg = remap(a.arg);
    } else if (is_pair(op)) {
      const int hi = remap(a.arg >> 4), lo = remap(a.arg & 15);
      if (hi > 15 || lo > 15) {
        // LOAD_FAST_LOAD_FAST pushes hi then lo; STORE_FAST_STORE_FAST stores the top into hi, the
        // next into lo; STORE_FAST_LOAD_FAST stores the top into hi and pushes lo.
        const N first = op == N::LOAD_FAST_LOAD_FAST ? N::LOAD_FAST : N::STORE_FAST;
        const N second = op == N::STORE_FAST_STORE_FAST ? N::STORE_FAST : N::LOAD_FAST;
        in.instrs.push_back(bc::AsmInstr{*bc::opcode_of(first, v), hi, a.pos});
        in.instrs.push_back(bc::AsmInstr{*bc::opcode_of(second, v), lo, a.pos});
        continue;
      }
      a.arg = hi << 4 | lo;
    }
    in.instrs.push_back(a);
  }
  for (bc::AsmExcRange r : orig->ranges) {
    r.start = at[static_cast<size_t>(r.start)];
    r.end = at[static_cast<size_t>(r.end)];
    r.handler = at[static_cast<size_t>(r.handler)];
    in.ranges.push_back(r);
  }
  auto out = bc::assemble(in);
  if (!out) {
    why = out.error().message();
    return nullptr;
  }
  const int n = ++counter[facts.code.get()];
  const uint32_t offset = target < static_cast<int>(ins.size()) ? ins[static_cast<size_t>(target)].offset : 0;
  Ref name = Ref::steal(PyUnicode_FromFormat(return_at >= 0 ? "__comprehension_at_%u_%d" : "__resume_at_%u_%d", offset, n));
  Ref replace = Ref::steal(PyObject_GetAttrString(facts.code.get(), "replace"));
  Ref kw = Ref::steal(PyDict_New());
  Ref empty = Ref::steal(PyTuple_New(0));
  auto set = [&](const char* key_name, PyObject* v) { PyDict_SetItemString(kw.get(), key_name, v); Py_XDECREF(v); };
  set("co_code", PyBytes_FromStringAndSize(out->code.data(), static_cast<Py_ssize_t>(out->code.size())));
  set("co_linetable", PyBytes_FromStringAndSize(out->linetable.data(), static_cast<Py_ssize_t>(out->linetable.size())));
  set("co_exceptiontable", PyBytes_FromStringAndSize(out->exceptiontable.data(), static_cast<Py_ssize_t>(out->exceptiontable.size())));
  set("co_stacksize", PyLong_FromLong(out->stacksize));
  set("co_consts", PyList_AsTuple(consts.get()));
  set("co_varnames", PyList_AsTuple(varnames.get()));
  set("co_cellvars", PyList_AsTuple(cellvars.get()));
  set("co_freevars", PyList_AsTuple(freevars.get()));
  set("co_nlocals", PyLong_FromLong(nvar));
  set("co_argcount", PyLong_FromLong(nstack + static_cast<long>(layout.locals.size() + layout.cells.size())));
  set("co_posonlyargcount", PyLong_FromLong(0));
  set("co_kwonlyargcount", PyLong_FromLong(0));
  set("co_flags", PyLong_FromLong(co->co_flags & ~(CO_VARARGS | CO_VARKEYWORDS)));
  set("co_name", Ref::borrow(name.get()).release());
  set("co_qualname", Ref::borrow(name.get()).release());
  Ref code = Ref::steal(PyObject_Call(replace.get(), empty.get(), kw.get()));
  if (!code) {
    Ref err = take_error();
    why = "code.replace failed: " + (err ? repr_of(err.get()) : std::string("?"));
    PyErr_Clear();
    return nullptr;
  }
  cache.emplace(std::move(key), code);
  return code.get();
}

}  // namespace dv
