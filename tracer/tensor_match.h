// Tensor and global-state checks through LibTorch, for the hit path (no Python). The only file of
// tracer/ that includes LibTorch headers: everything else sees this plain interface.
#pragma once
#include <Python.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dv {

// What TENSOR_MATCH compares (TorchDynamo's TensorCheck): exact Python type, dispatch keys with
// the thread-local include/exclude sets applied, dtype, device, requires_grad, sizes, strides.
struct TensorSpec {
  PyTypeObject* type = nullptr;  // Borrowed: types of tensors live as long as torch
  uint64_t dispatch_keys = 0;
  int8_t dtype = 0;
  int8_t device_type = 0;
  int16_t device_index = -1;
  bool requires_grad = false;
  std::vector<int64_t> sizes, strides;
  uint64_t dyn_sizes = 0, dyn_strides = 0;  // dynamic dims: not compared (SHAPE_ENV guards cover them)
};

bool is_tensor(PyObject* o);  // instance of torch.Tensor (subclasses included)
// A tensor holding real values (not meta) of at most one element: a constant example (no Python).
bool is_small_real_tensor(PyObject* o);
// functorch is transforming the code running now (vmap, grad, jvp: its dynamic layer stack is not
// empty). A frame called there sees wrapped tensors: it runs eagerly, as it is neither captured nor
// looked up.
bool functorch_active();
// Torch function modes entered outside the compiled code (the thread's mode stack; `with
// torch.device(...)`, a user's logging mode): a compiled call is traced with them on the trace's
// mode stack, their handlers inlined (fn_modes.cpp), and its graph runs with the stack taken off (the
// graph holds what the handlers did). Where they cannot be traced -- a mode that is no
// TorchFunctionMode, torch function dispatch disabled -- the call runs as it is.
bool torch_function_mode_active();  // the thread's stack is not empty
// While a capture runs, the stack is taken off (the examples' operators, the backend's compile must
// not reach the handlers) and held: these read the held stack then, the thread's otherwise.
Py_ssize_t torch_function_mode_depth();
PyObject* torch_function_mode_at(Py_ssize_t index);  // bottom first; borrowed; null: past the top
// The thread's mode stack taken off until the result is released (held: the capture's, read by the two above)
class ModesTakenOff {
 public:
  explicit ModesTakenOff(bool held);
  ~ModesTakenOff();
  ModesTakenOff(const ModesTakenOff&) = delete;
  ModesTakenOff& operator=(const ModesTakenOff&) = delete;
 private:
  std::vector<std::shared_ptr<void>> modes_;  // c10::SafePyObject, bottom first
  bool held_;
  const std::vector<std::shared_ptr<void>>* previous_;
};
// The saved-tensor hooks' disabled state (torch.autograd.graph.disable_saved_tensors_hooks), put back
// when the result is released: a compile leaves it as it found it (a backend that runs a graph cut
// inside such a block runs its _saved_tensors_hooks_disable node for real).
class SavedHooksStateKept {
 public:
  SavedHooksStateKept();
  ~SavedHooksStateKept();
  SavedHooksStateKept(const SavedHooksStateKept&) = delete;
  SavedHooksStateKept& operator=(const SavedHooksStateKept&) = delete;
 private:
  bool disabled_;
  std::string message_;
};
// Each mode on the stack a TorchFunctionMode, and torch function dispatch enabled (false with none)
bool torch_function_modes_traceable();
// What a compiled graph's run may leave behind when an operator in it raises: the functorch levels
// its vmap nodes pushed (eager's `with` pops them) and the grad mode its set_grad_enabled nodes set.
// The thread's autocast state (per device: enabled and dtype; cache flag; nesting depth), to put back
// what a capture or a failed graph left entered.
struct AutocastState {
  bool cpu = false, cuda = false, cache = true;
  int8_t cpu_dtype = 0, cuda_dtype = 0;
  int nesting = 0;
};
AutocastState autocast_state();
void restore_autocast_state(const AutocastState& s);
struct GraphRunState {
  size_t functorch_depth;
  bool grad_enabled;
  AutocastState autocast;  // a graph's _enter_autocast nodes, left entered when an operator raised
};
GraphRunState graph_run_state();
void restore_graph_run_state(const GraphRunState& s);  // never throws
bool grad_mode_enabled();               // torch.is_grad_enabled(), asked of LibTorch
// The user's saved-tensor hooks (torch.autograd.graph.saved_tensors_hooks) left out while tracing,
// as TorchDynamo's _disable_saved_tensors_hooks_during_tracing does: the examples' autograd does
// not pack meta tensors through them. Returns the previous setting.
bool saved_tensor_hooks_tracing(bool on);
// c10::InferenceMode entered (mode true: inference mode; false: out of it) until the result is
// released, which puts back the autograd and dispatch state it found (RAII: release in reverse order).
std::shared_ptr<void> enter_inference_mode(bool mode);
bool inference_mode_enabled();
void set_grad_mode_enabled(bool mode);  // torch._C._set_grad_enabled(mode), in LibTorch
// Fills spec from a tensor; false (no Python error set) if o is not a tensor. Its dispatch keys are
// those the tensor has under the thread's dispatch key state, or under the state a GuardKeysAtEntry
// in scope holds.
bool tensor_spec(PyObject* o, TensorSpec& spec);
// While it lives, tensor_spec takes the thread's dispatch key state as it is now: a capture makes one
// at the frame's entry, where its guards are checked, so that a tensor the trace first reads inside a
// torch.inference_mode block it entered (for real, to make the examples) is guarded as the frame gets it.
class GuardKeysAtEntry {
 public:
  GuardKeysAtEntry();
  ~GuardKeysAtEntry();
  GuardKeysAtEntry(const GuardKeysAtEntry&) = delete;
  GuardKeysAtEntry& operator=(const GuardKeysAtEntry&) = delete;

 private:
  uint64_t saved_included_, saved_excluded_;
  bool saved_set_;
};
bool tensor_matches(const TensorSpec& spec, PyObject* o);  // hit path
// A size (or stride) of a tensor, for SHAPE_ENV guards; false if o is not a tensor or has no such dim.
bool tensor_dim_value(PyObject* o, bool stride, int dim, int64_t& out);
// A 0-d CPU tensor of an integer dtype (int8 to int64) or float64, exactly torch.Tensor, strided, not a
// view: a graph input the graph may read as a number (an operator given it as a size or a fill value),
// as TorchDynamo's fake tensor of one answers item() with a backed symbolic int or float
// (FakeTensorConverter's item_memo, made for int64 and float64).
bool item_input_tensor(PyObject* o);
// The value of such a tensor, for SHAPE_ENV guards over `t.item()`; false if o is not one (of an
// integer dtype / of float64).
bool tensor_item_value(PyObject* o, int64_t& out);
bool tensor_item_double(PyObject* o, double& out);
// Why o fails spec, in TorchDynamo's words ("size mismatch at index 0. expected 3, actual 4").
std::string tensor_mismatch(const TensorSpec& spec, PyObject* o);
std::string tensor_spec_text(const TensorSpec& spec);  // "Tensor(float32, cpu, [3, 4], ...)"
// Short meta text of a tensor for events and traces: "f32[2, 3] cpu" (+ " grad" when it requires
// grad). `device` (a torch.device, may be null) names the real device of a meta example value.
std::string tensor_meta_text(PyObject* t, PyObject* device);

// Global state that changes what a graph computes (GLOBAL_STATE guard).
struct GlobalState {
  bool grad_enabled = true;
  bool deterministic = false;
  bool autocast_cpu = false;
  bool autocast_cuda = false;
  int8_t autocast_cpu_dtype = 0;   // the dtype autocast casts to (torch.get_autocast_dtype)
  int8_t autocast_cuda_dtype = 0;
  int8_t default_dtype = 0;
  int num_threads = 0;
  int fn_modes = 0;  // torch function modes on the thread's stack (their types are TYPE_MATCH guards)
  // State a capture read as a constant (torch.autograd._profiler_enabled(), torch.is_anomaly_enabled()):
  // 0 or 1 when it did, so a later call under the other state compiles again; -1 (not read): any
  int8_t profiler = -1;
  int8_t anomaly = -1;
  // Backend flags a capture read as constants (torch.backends.cudnn.deterministic,
  // torch.backends.cuda.matmul.allow_tf32): bit i of backends_read is set when flag i (BackendFlag)
  // was read, bit i of backends holds its value then; a later call checks those only.
  uint8_t backends_read = 0;
  uint8_t backends = 0;
  bool operator==(const GlobalState&) const = default;
};
// The flags: cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32, cuBLAS allow_tf32.
enum BackendFlag : int { kCudnnEnabled, kCudnnBenchmark, kCudnnDeterministic, kCudnnAllowTf32, kCublasAllowTf32, kBackendFlags };
bool backend_flag(int flag);  // its value now
// The flag torch.backends' `module`.`name` reads (module: a module's name, or the type name of
// torch.backends.cuda.matmul's object), or -1.
int backend_flag_of(const std::string& module, const std::string& name);
GlobalState global_state();  // (profiler and anomaly left -1: read by the guard only where the capture did)
bool profiler_enabled();     // torch.autograd._profiler_enabled()
bool anomaly_enabled();      // torch.is_anomaly_enabled()
bool global_state_matches(const GlobalState& want);  // the GLOBAL_STATE guard
bool autocast_on();  // autocast enabled on the CPU or CUDA now (example values must see it)
std::string global_state_diff(const GlobalState& want, const GlobalState& have);

}  // namespace dv
