// Codegen: the transformed code object that runs a capture -- load the graph inputs from their
// sources, call the compiled graph, rebuild the frame's return value -- assembled with core/.
#pragma once
#include <optional>
#include <string>

#include "translator.h"

namespace dv {

struct ResumeInfo {
  Ref code;        // a resume code object (Strong)
  bool eager = false;  // resumes *at* the breaking instruction: runs eagerly, never captured
  int target = -1;     // instruction index of the original code it continues at
};

struct Transformed {
  Ref code;      // the code object (Strong)
  Ref function;  // function built from it with the frame's globals and closure (Strong)
  std::vector<ResumeInfo> resumes;  // resume functions it calls (split frames)
};

// The transformed code of a capture that ran to its return: call the graph (`c.compiled`, null when
// nothing was recorded) on the inputs reloaded from their sources, replay the side effects, rebuild
// the return value from the graph outputs. `grad_mode` >= 0: the grad mode the frame ends in (a
// resume function leaving a with-block entered before the split). On failure returns nullopt and
// sets `why`.
std::optional<Transformed> generate(PyObject* orig_code, PyObject* globals, PyObject* closure, const CaptureResult& c,
                                    int grad_mode, std::string& why);

struct SplitPlan;
// The transformed code of a frame split at a break: call the graph, replay side effects, rebuild
// what crosses the break, run the breaking instruction (a call or a conditional jump) and return
// the result of the resume function(s). `grad_mode` >= 0: set it after the graph call.
std::optional<Transformed> generate_split(const CodeFacts& facts, PyObject* globals, PyObject* closure,
                                          const CaptureResult& stop, const SplitPlan& plan, int grad_mode,
                                          std::string& why);

// The object standing for a with-block's grad-mode __exit__ across a split (restores `mode` when
// called); and back: the mode such an object restores, or -1 for any other object.
PyObject* grad_restore_object(bool mode);  // borrowed; null with a Python error on failure
int grad_restore_mode(PyObject* o);

// Graph outputs for a return value: the distinct tensor nodes in it, in order.
// `made`: the attributes the trace set on modules it built (OutputGraph::made_module_attrs), walked
// for such a module the value reaches (they are set on the module made again for the caller)
std::vector<int> output_nodes(const VPtr& ret, const MadeModuleAttrs* made = nullptr);

}  // namespace dv
