// Splitting a frame at a graph break (TorchDynamo's partial graphs and resume functions): where a
// root frame may be split, which locals are live after the split point, and the resume code objects
// (a copy of the original code with a prologue that rebuilds the stack and jumps to the split point).
// Read by the compile driver (eval_frame.cpp) and codegen (codegen.cpp).
#pragma once
#include <string>
#include <vector>

#include "translator.h"

namespace dv {

// How the root frame continues after a break at root instruction `index`.
struct SplitPlan {
  enum Kind {
    Call,     // CALL, CALL_FUNCTION_EX, BINARY_SUBSCR, COMPARE_OP, STORE_SUBSCR, STORE_ATTR (as TorchDynamo's
              // break_graph_if_unsupported): the transformed code runs it, then resumes after it
    Jump,     // a conditional jump on a tensor: one resume function per branch
    Generic,  // any other instruction: resume *at* it, and run the rest of the frame eagerly
    // A break inside a comprehension that 3.12+ inlines into the frame (PEP 709), as TorchDynamo's
    // comprehension_graph_break: the split is at the comprehension's BUILD_LIST/SET/MAP (its
    // iterator on the stack); the transformed code runs the comprehension eagerly in a function
    // of its own (resume_code with return_at), then resumes after it with its result.
    Comprehension,
  } kind = Generic;
  int index = -1;      // the breaking root instruction (decoded index)
  int operands = 0;    // stack items the breaking instruction consumes (Call, Jump)
  int pushes = 1;      // Call: items it leaves (0 or 1)
  int next = -1;       // resume target(s): Call/Generic: next (Generic: == index); Jump: fallthrough
  int target = -1;     // Jump: the jump target
  // The `with` block the break is in (plan_split allows one, not nested): its handler's index (-1:
  // none) and its exception-table entry. An exception from the breaking instruction, run by the
  // transformed code, resumes at that handler, which calls the block's __exit__ as eager does.
  int with_handler = -1;
  uint32_t with_depth = 0;  // stack items the handler keeps (the block's __exit__ is the last)
  bool with_lasti = false;  // the handler takes the raising instruction's offset below the exception
};

// Whether the root frame can be split at instruction `index`, and how; on false `why` says why
// not (as TorchDynamo: a break inside a loop or a try block runs the whole frame eagerly).
bool plan_split(const CodeFacts& facts, int index, SplitPlan& plan, std::string& why);

inline constexpr int kReenterSavedHooksOff = 2;
inline constexpr int kReenterSdpaKernel = 3;          // sdpa_kernel(backends, set_priority=False)
inline constexpr int kReenterSdpaKernelPriority = 4;  // sdpa_kernel(backends, set_priority=True)

// Locals (varnames slots, by localsplus index) read before written on some path from `index`.
std::vector<bool> live_locals(const CodeFacts& facts, int index);

// Stack items the resume function takes: position in the stack and whether it is NULL (re-pushed
// by the prologue, not passed).
struct ResumeLayout {
  std::vector<bool> stack_null;  // one per stack slot at the resume point, bottom first
  // One per stack slot (or empty): a slot holding a `with` block's __exit__ that the prologue enters
  // again rather than takes, as TorchDynamo's resume functions set their blocks up again:
  // `torch.inference_mode(mode)`'s BEFORE_WITH (-1: taken as an argument; 0, 1: the mode), or
  // kReenterSavedHooksOff: `torch.autograd.graph.disable_saved_tensors_hooks(message)`'s, the message
  // in reenter_text; kReenterSdpaKernel(Priority): `sdpa_kernel(backends[, set_priority])`'s, the
  // backends' names in reenter_text (comma-separated).
  std::vector<int> stack_reenter;
  std::vector<std::string> reenter_text;  // one per stack slot (or empty)
  std::vector<int> locals;       // localsplus indexes of the live locals passed, in order
  std::vector<int> cells;        // localsplus indexes of the cell variables whose contents are passed
  std::vector<int> shared;       // localsplus indexes of the cell variables passed as cells: the resume
                                 // function's first free variables (its closure), before the frame's own
};

// A resume code object `__resume_at_<offset>_<n>` for instruction `target` of `facts`' code,
// shared by every split that resumes there with the same layout. nullptr with `why` on failure.
// `return_at` >= 0: the code returns at that instruction instead of running it, with the top of the
// stack (the items under it dropped): an inlined comprehension run on its own (SplitPlan::Comprehension).
PyObject* resume_code(const CodeFacts& facts, int target, const ResumeLayout& layout, std::string& why, int return_at = -1);

// Whether a resume function of `code` takes the frame's first argument (self) as its own first
// argument, before the stack's: its code calls zero-argument super(), which reads the first local
// (and the __class__ cell) -- the method's self is live at the resume point and not a cell.
bool resume_self_first(PyObject* code, const ResumeLayout& layout);

}  // namespace dv
