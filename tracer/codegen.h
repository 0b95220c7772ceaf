// Codegen: the transformed code object that runs a capture -- load the graph inputs from their
// sources, call the compiled graph, rebuild the frame's return value -- assembled with core/.
#pragma once
#include <optional>
#include <string>

#include "translator.h"

namespace dv {

struct Transformed {
  Ref code;      // the code object (Strong)
  Ref function;  // function built from it with the frame's globals and closure (Strong)
};

// `compiled` may be null when the graph is empty. On failure returns nullopt and sets `why`.
std::optional<Transformed> generate(PyObject* orig_code, PyObject* globals, PyObject* closure, const Translator& t,
                                    PyObject* compiled, const VPtr& ret, const std::vector<int>& outputs,
                                    std::string& why);

// Graph outputs for a return value: the distinct tensor nodes in it, in order.
std::vector<int> output_nodes(const VPtr& ret);

}  // namespace dv
