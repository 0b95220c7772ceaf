// The per-version CPython shim: everything the frame hook reads from an `_PyInterpreterFrame`
// (3.11, 3.12 and 3.13 lay it out differently) and how a frame the hook does not evaluate is
// finished. The rest of the engine sees only these functions; no other tracer file includes
// CPython's internal headers for frames. Implemented in frame_shim.cpp.
#pragma once
#include <algorithm>
#include <Python.h>

#include "core/opcodes.h"

struct _PyInterpreterFrame;

namespace dv {

// The bytecode version of the interpreter dynview was built for (code objects it traces).
#if PY_VERSION_HEX >= 0x030D0000
constexpr bc::Version kPyVersion = bc::Version::py313;
#elif PY_VERSION_HEX >= 0x030C0000
constexpr bc::Version kPyVersion = bc::Version::py312;
#else
constexpr bc::Version kPyVersion = bc::Version::py311;
#endif

using EvalFrameFn = PyObject* (*)(PyThreadState*, _PyInterpreterFrame*, int);

namespace shim {

PyCodeObject* frame_code(_PyInterpreterFrame* f);  // Borrowed
PyObject* frame_globals(_PyInterpreterFrame* f);   // Borrowed
PyObject* frame_builtins(_PyInterpreterFrame* f);  // Borrowed
PyObject* frame_closure(_PyInterpreterFrame* f);   // Borrowed: the function's closure tuple, or null
PyObject* const* frame_locals(_PyInterpreterFrame* f);  // localsplus (Borrowed slots)
bool owned_by_thread(_PyInterpreterFrame* f);      // a plain call (not a generator, not C-stack)
bool is_fresh(_PyInterpreterFrame* f);             // no instruction has run yet (not a resumed frame)

// The frame's result is `result` (new reference or null with an error set) and the frame itself
// is not evaluated: finishes it the way CPython's evaluator would (3.12 and 3.13 evaluators pop
// the frame they evaluate; on 3.11 the caller does).
PyObject* finish_unevaluated(PyThreadState* ts, _PyInterpreterFrame* f, PyObject* result, EvalFrameFn previous);

EvalFrameFn get_eval_frame();
// A tuple iterator's tuple (borrowed; null once exhausted) and the index of its next item: CPython's
// tupleiterobject, laid out alike on 3.11, 3.12 and 3.13.
inline PyObject* tuple_iterator_state(PyObject* it, Py_ssize_t& index) {
  struct TupleIter {
    PyObject_HEAD
    Py_ssize_t it_index;
    PyObject* it_seq;
  };
  const auto* ti = reinterpret_cast<const TupleIter*>(it);
  index = ti->it_index;
  return ti->it_seq;
}
inline Py_ssize_t tuple_iterator_remaining(PyObject* it) {
  Py_ssize_t index = 0;
  PyObject* seq = tuple_iterator_state(it, index);
  return seq ? std::max<Py_ssize_t>(0, PyTuple_GET_SIZE(seq) - index) : 0;
}
// A range iterator's next value, step and how many values it has yet to give: CPython's
// rangeiterobject, with an index on 3.11 ({index, start, step, len}), its start advanced on 3.12 and
// 3.13 ({start, step, len}).
inline void range_iterator_state(PyObject* it, long& next, long& step, long& remaining) {
#if PY_VERSION_HEX < 0x030C0000
  struct RangeIter {
    PyObject_HEAD
    long index, start, step, len;
  };
  const auto* ri = reinterpret_cast<const RangeIter*>(it);
  next = ri->start + ri->index * ri->step;
  step = ri->step;
  remaining = ri->len - ri->index;
#else
  struct RangeIter {
    PyObject_HEAD
    long start, step, len;
  };
  const auto* ri = reinterpret_cast<const RangeIter*>(it);
  next = ri->start;
  step = ri->step;
  remaining = ri->len;
#endif
}
void set_eval_frame(EvalFrameFn fn);

}  // namespace shim
}  // namespace dv
