// The per-version CPython shim (see frame_shim.h): the only tracer file that reads
// `_PyInterpreterFrame` (Include/internal/pycore_frame.h of 3.11, 3.12 and 3.13).
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>
#if PY_VERSION_HEX >= 0x030D0000
#include <internal/pycore_ceval.h>  // _PyEval_FrameClearAndPop
#endif
#undef Py_BUILD_CORE

#include "frame_shim.h"

namespace dv::shim {

PyCodeObject* frame_code(_PyInterpreterFrame* f) {
#if PY_VERSION_HEX >= 0x030D0000
  return reinterpret_cast<PyCodeObject*>(f->f_executable);
#else
  return f->f_code;
#endif
}

PyObject* frame_globals(_PyInterpreterFrame* f) { return f->f_globals; }
PyObject* frame_builtins(_PyInterpreterFrame* f) { return f->f_builtins; }
PyObject* const* frame_locals(_PyInterpreterFrame* f) { return f->localsplus; }

PyObject* frame_closure(_PyInterpreterFrame* f) {
#if PY_VERSION_HEX >= 0x030C0000
  PyObject* fn = f->f_funcobj;
  return fn && PyFunction_Check(fn) ? reinterpret_cast<PyFunctionObject*>(fn)->func_closure : nullptr;
#else
  return f->f_func ? f->f_func->func_closure : nullptr;
#endif
}

bool owned_by_thread(_PyInterpreterFrame* f) {
#if PY_VERSION_HEX >= 0x030D0000
  if (!f->f_executable || !PyCode_Check(f->f_executable)) return false;
#endif
  return f->owner == FRAME_OWNED_BY_THREAD;
}

bool is_fresh(_PyInterpreterFrame* f) {
#if PY_VERSION_HEX >= 0x030D0000
  return _PyInterpreterFrame_LASTI(f) == 0;  // 3.13 starts a frame at its first instruction
#else
  return _PyInterpreterFrame_LASTI(f) < 0;   // 3.11/3.12 start one before it
#endif
}

PyObject* finish_unevaluated(PyThreadState* ts, _PyInterpreterFrame* f, PyObject* result, EvalFrameFn previous) {
#if PY_VERSION_HEX >= 0x030D0000
  (void)previous;
  _PyEval_FrameClearAndPop(ts, f);  // exported by 3.13 for exactly this
  return result;
#elif PY_VERSION_HEX >= 0x030C0000
  // 3.12 exports nothing that pops a frame. A fresh frame (not started, so never linked into the
  // thread's frame chain nor seen by sys.monitoring) that has no frame object and is not the first
  // frame of its data-stack chunk is cleared and popped here as the evaluator would at its exit:
  // its references dropped (localsplus up to stacktop, f_locals, the function, the code), then the
  // data stack's top moved back to it. The error of a failed result is kept across the releases,
  // which may run finalizers.
  if (!f->frame_obj && reinterpret_cast<PyObject**>(f) != &ts->datastack_chunk->data[0] &&
      reinterpret_cast<PyObject**>(f->localsplus + f->stacktop) <= ts->datastack_top) {
    PyObject* pending = result ? nullptr : PyErr_GetRaisedException();
    for (int i = 0; i < f->stacktop; ++i) Py_CLEAR(f->localsplus[i]);
    Py_CLEAR(f->f_locals);
    Py_CLEAR(f->f_funcobj);
    PyCodeObject* code = f->f_code;
    ts->datastack_top = reinterpret_cast<PyObject**>(f);
    Py_DECREF(code);
    if (!result) PyErr_SetRaisedException(pending);
    return result;
  }
  // Otherwise let its evaluator do it, by throwing into the fresh
  // frame. The frame has not started (no traceback entry, no handler covers offset -1), so the
  // evaluator unwinds it at once, clears and pops it, and returns NULL with the error kept.
  // Throwing fires PY_THROW, RAISE and PY_UNWIND (sys.monitoring, and sys.settrace/setprofile
  // built on it) for a function that, to the program, never ran: the thread is marked as tracing
  // meanwhile, which silences them. The error thrown is one instance made once (nothing allocated
  // per hit; nothing records it: no traceback entry, no monitoring event).
  static PyObject* thrown = nullptr;  // one SystemError for the process, kept (never freed)
  PyObject* pending = PyErr_GetRaisedException();  // the caller's error when result is NULL
  if (!thrown) {
    thrown = PyObject_CallOneArg(PyExc_SystemError, Py_None);
    if (!thrown) PyErr_Clear();
  }
  if (thrown) {
    PyErr_SetRaisedException(Py_NewRef(thrown));
  } else {
    PyErr_SetNone(PyExc_MemoryError);  // the evaluator needs some error to unwind with
  }
  PyThreadState_EnterTracing(ts);
  PyObject* r = previous(ts, f, 1);
  PyThreadState_LeaveTracing(ts);
  Py_XDECREF(r);
  PyErr_Clear();
  PyErr_SetRaisedException(pending);
  return result;
#else
  (void)ts, (void)f, (void)previous;  // 3.11: the caller (_PyEval_Vector) clears and pops the frame
  return result;
#endif
}

EvalFrameFn get_eval_frame() {
  return reinterpret_cast<EvalFrameFn>(_PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get()));
}
void set_eval_frame(EvalFrameFn fn) {
  _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), reinterpret_cast<_PyFrameEvalFunction>(fn));
}

}  // namespace dv::shim
