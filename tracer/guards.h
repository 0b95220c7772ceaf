// Guards: the checks that decide whether a cache entry may run a frame. Built at compile time as
// a list of Guard (each with its source, text and the step/line that created it), then compiled
// into a GuardTree evaluated over the frame's fast locals with no Python code on the hit path.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "source.h"
#include "tensor_match.h"

namespace dv {

enum class GuardKind : uint8_t {
  TYPE_MATCH, ID_MATCH, EQUALS_MATCH, NONE_MATCH, LENGTH_CHECK, DICT_KEYS, TENSOR_MATCH, GLOBAL_STATE
};
const char* guard_kind_name(GuardKind k);

struct Guard {
  GuardKind kind;
  SourcePtr source;       // null for GLOBAL_STATE
  Ref value;              // ID_MATCH / EQUALS_MATCH: the object; TYPE_MATCH: the type; DICT_KEYS: key tuple
  Py_ssize_t length = 0;  // LENGTH_CHECK
  TensorSpec tensor;      // TENSOR_MATCH
  GlobalState state;      // GLOBAL_STATE
  std::string text;       // code-part text, e.g. "L['b'] == 'Hello'"
  int step = -1;          // symbolic step that created it (-1: set-up)
  int line = -1;          // user source line that created it
};

// What the accessors read: the frame being entered.
struct FrameView {
  PyObject* const* fastlocals;  // Borrowed: the frame's localsplus
  PyObject* globals;            // Borrowed
  PyObject* builtins;           // Borrowed
  PyObject* closure;            // Borrowed: func_closure tuple or null
};

class GuardTree {
 public:
  explicit GuardTree(std::vector<Guard> guards);
  ~GuardTree();
  GuardTree(const GuardTree&) = delete;
  GuardTree& operator=(const GuardTree&) = delete;

  bool check(const FrameView& f) const;                      // hit path
  // Verbose, off the hit path: why each failing guard fails; `which` gets each one's index in
  // guards() (-1 when the value a guard reads is missing).
  std::vector<std::string> failures(const FrameView& f, std::vector<int>* which = nullptr) const;
  const std::vector<Guard>& guards() const { return guards_; }

 private:
  struct Node;
  std::vector<Guard> guards_;
  std::unique_ptr<Node> root_;
};

}  // namespace dv
