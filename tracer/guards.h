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
  TYPE_MATCH, ID_MATCH, EQUALS_MATCH, NONE_MATCH, LENGTH_CHECK, DICT_KEYS, TENSOR_MATCH, GLOBAL_STATE,
  SHAPE_ENV,  // a relation between sizes, strides and ints of dynamic inputs ("2 <= L['x'].size()[0]")
  // Identity between tensor inputs: the objects its refs read are one object (one tensor reached
  // from two sources, TorchDynamo's DUPLICATE_INPUT: `length` 1) or all distinct (the graph's
  // inputs, NO_TENSOR_ALIASING: `length` 0).
  TENSOR_ALIASING,
  // `value` in the dict (`length` 1) or not (0): a key read (d[k], d.get(k), k in d) of a dict from
  // the frame whose other entries the capture does not depend on (value_builder.cpp, lazy dicts).
  DICT_CONTAINS,
  // A range iterator (range_iterator, exactly) whose next value, step and count of values left are
  // `value`'s (a tuple of three ints): a list comprehension's `.0` over range(n) on 3.11.
  RANGE_ITERATOR_MATCH,
};

// SHAPE_ENV: what a guard program reads, and the program (postfix over int64; python/dynview/_shapes.py
// writes it, codes below).
struct SymRef {
  SourcePtr source;
  int8_t kind = 0;  // 0 size, 1 stride, 2 int, 3 float, 4 the item() of a 0-d int tensor (item_input_tensor),
                    // 5 the item() of a 0-d float64 tensor (a float: float-mode programs only)
  int dim = -1;
};
enum ShapeOp : int8_t { SO_CONST, SO_REF, SO_ADD, SO_MUL, SO_FLOORDIV, SO_MOD, SO_POW, SO_EQ, SO_NE, SO_LT, SO_LE,
                        SO_GT, SO_GE, SO_AND, SO_OR, SO_NOT, SO_MIN, SO_MAX,
                        SO_SQRT_TRUNC,    // int(float(a) ** 0.5), as Python computes it (DiT's int(n ** 0.5))
                        SO_TRUNCDIV,      // a / b rounded toward zero, exactly (math.trunc of a division)
                        SO_ROUNDDIV,      // a / b rounded half to even, exactly (round() of a division)
                        // A program whose first instruction is SO_FMODE runs over doubles (a guard on a
                        // float input): SO_FCONST's argument holds a double's bits, SO_FDIV is true division.
                        // Unary, in float mode: math.trunc, floor, ceil, round() (half to even), sqrt.
                        SO_FMODE, SO_FCONST, SO_FDIV, SO_FTRUNC, SO_FFLOOR, SO_FCEIL, SO_FROUND, SO_FSQRT };
struct ShapeInstr {
  ShapeOp op;
  int64_t arg;
};
const char* guard_kind_name(GuardKind k);

struct Guard {
  GuardKind kind;
  SourcePtr source;       // null for GLOBAL_STATE
  Ref value;              // ID_MATCH / EQUALS_MATCH: the object; TYPE_MATCH: the type; DICT_KEYS: key tuple; DICT_CONTAINS: the key
  Py_ssize_t length = 0;  // LENGTH_CHECK; TENSOR_ALIASING: 1 same object, 0 distinct objects
  TensorSpec tensor;      // TENSOR_MATCH
  GlobalState state;      // GLOBAL_STATE
  std::vector<SymRef> refs;        // SHAPE_ENV, TENSOR_ALIASING
  std::vector<ShapeInstr> program; // SHAPE_ENV
  std::string text;       // code-part text, e.g. "L['b'] == 'Hello'"
  int step = -1;          // symbolic step that created it (-1: set-up)
  int line = -1;          // user source line that created it
  std::string file;       // the file of that line (an inlined function's may be another file)
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
  // SHAPE_ENV and TENSOR_ALIASING guards run after the tree, over the objects their sources
  // reached (slots).
  std::vector<const Guard*> shape_guards_;
  std::vector<std::vector<int>> shape_slots_;  // per shape guard: the slot of each ref
  int nslots_ = 0;
};

}  // namespace dv
