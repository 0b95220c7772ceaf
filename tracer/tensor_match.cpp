// TENSOR_MATCH and GLOBAL_STATE through LibTorch (see tensor_match.h).
#include "tensor_match.h"

#include <torch/csrc/autograd/anomaly_mode.h>
#include <torch/csrc/profiler/orchestration/observer.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/SavedTensorHooks.h>
#include <ATen/autocast_mode.h>
#include <ATen/functorch/DynamicLayer.h>
#include <ATen/core/Tensor.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

// Python tensor objects: layout of torch/csrc/autograd/python_variable.h's THPVariable, mirrored
// here so this file needs neither pybind11 nor torch's Python headers. init_tensor_layout_check()
// (called once at import) verifies the mirror against a real tensor.
struct THPVariable {
  PyObject_HEAD
  at::Tensor cdata;
};
extern "C++" {
extern PyObject* THPVariableClass;  // from libtorch_python
}

namespace dv {
namespace {

bool dyn_bit(uint64_t mask, size_t i) { return i < 64 && (mask >> i & 1); }

const at::Tensor& unpack(PyObject* o) { return reinterpret_cast<THPVariable*>(o)->cdata; }

uint64_t keys_under(const at::Tensor& t, c10::DispatchKeySet included, c10::DispatchKeySet excluded) {
  return ((t.key_set() | included) - excluded).raw_repr();
}

uint64_t effective_keys(const at::Tensor& t) {
  auto tls = c10::impl::tls_local_dispatch_key_set();
  return keys_under(t, tls.included_, tls.excluded_);
}

// The state a GuardKeysAtEntry holds (included, excluded key sets), for tensor_spec.
thread_local bool t_entry_set = false;
thread_local uint64_t t_entry_included = 0, t_entry_excluded = 0;

uint64_t spec_keys(const at::Tensor& t) {
  if (!t_entry_set) return effective_keys(t);
  return keys_under(t, c10::DispatchKeySet(c10::DispatchKeySet::RAW, t_entry_included),
                    c10::DispatchKeySet(c10::DispatchKeySet::RAW, t_entry_excluded));
}

}  // namespace

GuardKeysAtEntry::GuardKeysAtEntry() : saved_included_(t_entry_included), saved_excluded_(t_entry_excluded), saved_set_(t_entry_set) {
  auto tls = c10::impl::tls_local_dispatch_key_set();
  t_entry_included = tls.included_.raw_repr();
  t_entry_excluded = tls.excluded_.raw_repr();
  t_entry_set = true;
}

GuardKeysAtEntry::~GuardKeysAtEntry() {
  t_entry_included = saved_included_;
  t_entry_excluded = saved_excluded_;
  t_entry_set = saved_set_;
}

bool is_tensor(PyObject* o) {
  return THPVariableClass && PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(THPVariableClass));
}

bool functorch_active() { return !at::functorch::getDynamicLayerStack().empty(); }
bool torch_function_mode_active() { return at::impl::PythonTorchFunctionTLS::stack_len() > 0; }

bool torch_function_mode_class(PyObject* o);  // fn_modes.cpp

namespace {
thread_local const std::vector<std::shared_ptr<void>>* t_held_modes = nullptr;
PyObject* mode_object(const std::shared_ptr<void>& m) {
  const auto* o = static_cast<const c10::SafePyObject*>(m.get());
  return o->ptr(&o->pyinterpreter());
}
}  // namespace

Py_ssize_t torch_function_mode_depth() {
  return t_held_modes ? static_cast<Py_ssize_t>(t_held_modes->size()) : static_cast<Py_ssize_t>(at::impl::PythonTorchFunctionTLS::stack_len());
}

PyObject* torch_function_mode_at(Py_ssize_t index) {
  if (index < 0 || index >= torch_function_mode_depth()) return nullptr;
  if (t_held_modes) return mode_object((*t_held_modes)[static_cast<size_t>(index)]);
  const auto& m = at::impl::PythonTorchFunctionTLS::get_stack_at(index);
  return m->ptr(&m->pyinterpreter());
}

ModesTakenOff::ModesTakenOff(bool held) : held_(held), previous_(t_held_modes) {
  while (at::impl::PythonTorchFunctionTLS::stack_len() > 0)
    modes_.insert(modes_.begin(), at::impl::PythonTorchFunctionTLS::pop_stack());
  if (held_) t_held_modes = &modes_;
}

ModesTakenOff::~ModesTakenOff() {
  for (auto& m : modes_) at::impl::PythonTorchFunctionTLS::push_onto_stack(std::static_pointer_cast<c10::SafePyObject>(m));
  if (held_) t_held_modes = previous_;
}

SavedHooksStateKept::SavedHooksStateKept() {
  const auto& m = at::SavedTensorDefaultHooks::get_disabled_error_message();
  disabled_ = m.has_value();
  if (disabled_) message_ = *m;
}

SavedHooksStateKept::~SavedHooksStateKept() {
  try {
    if (disabled_) at::SavedTensorDefaultHooks::disable(message_, /*fail_if_non_empty=*/false);
    else at::SavedTensorDefaultHooks::enable();
  } catch (...) {
  }
}

bool torch_function_modes_traceable() {
  const int64_t n = at::impl::PythonTorchFunctionTLS::stack_len();
  if (n == 0 || at::impl::PythonTorchFunctionTLS::get_disabled_state() != at::impl::TorchFunctionDisabledState::ENABLED) return false;
  for (int64_t i = 0; i < n; ++i)
    if (!torch_function_mode_class(reinterpret_cast<PyObject*>(Py_TYPE(torch_function_mode_at(i))))) return false;
  return true;
}

GraphRunState graph_run_state() {
  return GraphRunState{at::functorch::getDynamicLayerStack().size(), c10::GradMode::is_enabled(), autocast_state()};
}

bool grad_mode_enabled() { return c10::GradMode::is_enabled(); }
bool saved_tensor_hooks_tracing(bool on) { return at::SavedTensorDefaultHooks::set_tracing(on); }

std::shared_ptr<void> enter_inference_mode(bool mode) {
  return std::shared_ptr<void>(new c10::InferenceMode(mode), [](void* p) { delete static_cast<c10::InferenceMode*>(p); });
}

bool inference_mode_enabled() { return c10::InferenceMode::is_enabled(); }
void set_grad_mode_enabled(bool mode) { c10::GradMode::set_enabled(mode); }

void restore_graph_run_state(const GraphRunState& s) {
  try {
    while (at::functorch::getDynamicLayerStack().size() > s.functorch_depth) at::functorch::popDynamicLayerAndDeleteMetadata();
    c10::GradMode::set_enabled(s.grad_enabled);
  } catch (...) {  // the exception the graph raised is the one the caller sees
  }
  restore_autocast_state(s.autocast);
}

bool is_small_real_tensor(PyObject* o) {
  if (!is_tensor(o)) return false;
  const at::Tensor& t = unpack(o);
  return t.defined() && !t.is_meta() && t.numel() <= 1;
}

bool tensor_spec(PyObject* o, TensorSpec& s) {
  if (!is_tensor(o)) return false;
  const at::Tensor& t = unpack(o);
  if (!t.defined()) return false;
  s.type = Py_TYPE(o);
  s.dispatch_keys = spec_keys(t);
  s.dtype = static_cast<int8_t>(t.scalar_type());
  s.device_type = static_cast<int8_t>(t.device().type());
  s.device_index = t.device().index();
  s.requires_grad = t.requires_grad();
  s.sizes.assign(t.sizes().begin(), t.sizes().end());
  if (t.layout() == c10::kStrided) s.strides.assign(t.strides().begin(), t.strides().end());
  return true;
}

bool tensor_matches(const TensorSpec& s, PyObject* o) {
  if (Py_TYPE(o) != s.type) return false;
  const at::Tensor& t = unpack(o);
  if (!t.defined()) return false;
  if (static_cast<int8_t>(t.scalar_type()) != s.dtype) return false;
  const c10::Device d = t.device();
  if (static_cast<int8_t>(d.type()) != s.device_type || d.index() != s.device_index) return false;
  if (t.requires_grad() != s.requires_grad) return false;
  const auto sizes = t.sizes();
  if (sizes.size() != s.sizes.size()) return false;
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] != s.sizes[i] && !dyn_bit(s.dyn_sizes, i)) return false;
  if (!s.strides.empty()) {
    if (t.layout() != c10::kStrided) return false;
    const auto strides = t.strides();
    for (size_t i = 0; i < strides.size(); ++i)
      if (strides[i] != s.strides[i] && !dyn_bit(s.dyn_strides, i)) return false;
  }
  return effective_keys(t) == s.dispatch_keys;
}

bool tensor_dim_value(PyObject* o, bool stride, int dim, int64_t& out) {
  if (!is_tensor(o)) return false;
  const at::Tensor& t = unpack(o);
  if (!t.defined() || dim < 0 || dim >= t.dim()) return false;
  if (stride) {
    if (t.layout() != c10::kStrided) return false;
    out = t.strides()[dim];
  } else {
    out = t.sizes()[dim];
  }
  return true;
}

bool item_input_tensor(PyObject* o) {
  if (!o || !THPVariableClass || Py_TYPE(o) != reinterpret_cast<PyTypeObject*>(THPVariableClass)) return false;
  const at::Tensor& t = unpack(o);
  // (not a view: its fake would carry its base's sizes, symbols no guard could read)
  if (!t.defined() || t.dim() != 0 || !t.device().is_cpu() || t.layout() != c10::kStrided || t.is_view()) return false;
  const c10::ScalarType st = t.scalar_type();
  return st == c10::kChar || st == c10::kShort || st == c10::kInt || st == c10::kLong || st == c10::kDouble;
}

bool tensor_item_double(PyObject* o, double& out) {
  if (!item_input_tensor(o)) return false;
  const at::Tensor& t = unpack(o);
  if (t.scalar_type() != c10::kDouble) return false;
  out = *t.const_data_ptr<double>();
  return true;
}

bool tensor_item_value(PyObject* o, int64_t& out) {
  if (!item_input_tensor(o)) return false;
  const at::Tensor& t = unpack(o);
  switch (t.scalar_type()) {
    case c10::kChar: out = *t.const_data_ptr<int8_t>(); return true;
    case c10::kShort: out = *t.const_data_ptr<int16_t>(); return true;
    case c10::kInt: out = *t.const_data_ptr<int32_t>(); return true;
    case c10::kLong: out = *t.const_data_ptr<int64_t>(); return true;
    default: return false;
  }
}

std::string tensor_mismatch(const TensorSpec& s, PyObject* o) {
  if (Py_TYPE(o) != s.type)
    return std::string("type mismatch. expected ") + s.type->tp_name + ", actual " + Py_TYPE(o)->tp_name;
  const at::Tensor& t = unpack(o);
  if (static_cast<int8_t>(t.scalar_type()) != s.dtype)
    return std::string("dtype mismatch. expected ") + c10::toString(static_cast<c10::ScalarType>(s.dtype)) +
           ", actual " + c10::toString(t.scalar_type());
  if (static_cast<int8_t>(t.device().type()) != s.device_type || t.device().index() != s.device_index)
    return "device mismatch. expected " +
           c10::Device(static_cast<c10::DeviceType>(s.device_type), s.device_index).str() + ", actual " +
           t.device().str();
  if (t.requires_grad() != s.requires_grad)
    return std::string("requires_grad mismatch. expected requires_grad=") + (s.requires_grad ? "1" : "0");
  if (t.dim() != static_cast<int64_t>(s.sizes.size()))
    return "rank mismatch. expected " + std::to_string(s.sizes.size()) + ", actual " + std::to_string(t.dim());
  for (size_t i = 0; i < s.sizes.size(); ++i)
    if (t.sizes()[i] != s.sizes[i] && !dyn_bit(s.dyn_sizes, i))
      return "size mismatch at index " + std::to_string(i) + ". expected " + std::to_string(s.sizes[i]) +
             ", actual " + std::to_string(t.sizes()[i]);
  for (size_t i = 0; i < s.strides.size(); ++i)
    if (t.strides()[i] != s.strides[i] && !dyn_bit(s.dyn_strides, i))
      return "stride mismatch at index " + std::to_string(i) + ". expected " + std::to_string(s.strides[i]) +
             ", actual " + std::to_string(t.strides()[i]);
  if (effective_keys(t) != s.dispatch_keys) return "dispatch key set mismatch";
  return {};
}

std::string tensor_spec_text(const TensorSpec& s) {
  std::string r = std::string(c10::toString(static_cast<c10::ScalarType>(s.dtype))) + ", " +
                  c10::Device(static_cast<c10::DeviceType>(s.device_type), s.device_index).str() + ", size=[";
  for (size_t i = 0; i < s.sizes.size(); ++i) r += (i ? ", " : "") + (dyn_bit(s.dyn_sizes, i) ? "None" : std::to_string(s.sizes[i]));
  r += "], stride=[";
  for (size_t i = 0; i < s.strides.size(); ++i) r += (i ? ", " : "") + (dyn_bit(s.dyn_strides, i) ? "None" : std::to_string(s.strides[i]));
  r += "]";
  if (s.requires_grad) r += ", requires_grad=True";
  return r;
}

std::string tensor_meta_text(PyObject* o, PyObject* device) {
  if (!is_tensor(o)) return {};
  const at::Tensor& t = unpack(o);
  if (!t.defined()) return "undefined";
  std::string r;
  switch (t.scalar_type()) {  // TorchDynamo's short dtype names (f32[2, 3])
    case c10::ScalarType::Float: r = "f32"; break;
    case c10::ScalarType::Double: r = "f64"; break;
    case c10::ScalarType::Half: r = "f16"; break;
    case c10::ScalarType::BFloat16: r = "bf16"; break;
    case c10::ScalarType::Long: r = "i64"; break;
    case c10::ScalarType::Int: r = "i32"; break;
    case c10::ScalarType::Short: r = "i16"; break;
    case c10::ScalarType::Char: r = "i8"; break;
    case c10::ScalarType::Byte: r = "u8"; break;
    case c10::ScalarType::Bool: r = "b8"; break;
    case c10::ScalarType::ComplexFloat: r = "c64"; break;
    case c10::ScalarType::ComplexDouble: r = "c128"; break;
    default: r = c10::toString(t.scalar_type());
  }
  r += "[";
  const auto sizes = t.sym_sizes();
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) r += ", ";
    const auto& s = sizes[i];
    r += s.is_heap_allocated() ? std::string("s") : std::to_string(s.as_int_unchecked());
  }
  r += "] ";
  if (device) {
    PyObject* str = PyObject_Str(device);
    if (str) {
      const char* c = PyUnicode_AsUTF8(str);
      r += c ? c : "?";
      Py_DECREF(str);
    } else {
      PyErr_Clear();
      r += "?";
    }
  } else {
    r += t.device().str();
  }
  if (t.requires_grad()) r += " grad";
  return r;
}

AutocastState autocast_state() {
  AutocastState s;
  s.cpu = at::autocast::is_autocast_enabled(at::kCPU);
  s.cuda = at::autocast::is_autocast_enabled(at::kCUDA);
  s.cpu_dtype = static_cast<int8_t>(at::autocast::get_autocast_dtype(at::kCPU));
  s.cuda_dtype = static_cast<int8_t>(at::autocast::get_autocast_dtype(at::kCUDA));
  s.cache = at::autocast::is_autocast_cache_enabled();
  at::autocast::increment_nesting();
  s.nesting = at::autocast::decrement_nesting();
  return s;
}

void restore_autocast_state(const AutocastState& s) {
  try {
    at::autocast::set_autocast_enabled(at::kCPU, s.cpu);
    at::autocast::set_autocast_enabled(at::kCUDA, s.cuda);
    at::autocast::set_autocast_dtype(at::kCPU, static_cast<at::ScalarType>(s.cpu_dtype));
    at::autocast::set_autocast_dtype(at::kCUDA, static_cast<at::ScalarType>(s.cuda_dtype));
    at::autocast::set_autocast_cache_enabled(s.cache);
    int n = at::autocast::increment_nesting() - 1;
    at::autocast::decrement_nesting();
    bool left = false;
    while (n > s.nesting) n = at::autocast::decrement_nesting(), left = true;
    // a resume function's capture leaves a block the graph before the break entered: entered again
    while (n < s.nesting) n = at::autocast::increment_nesting();
    if (left && n == 0) at::autocast::clear_cache();  // as the outermost autocast's exit does
  } catch (...) {
  }
}

bool autocast_on() { return at::autocast::is_autocast_enabled(at::kCPU) || at::autocast::is_autocast_enabled(at::kCUDA); }

GlobalState global_state() {
  GlobalState g;
  g.grad_enabled = c10::GradMode::is_enabled();
  g.deterministic = at::globalContext().deterministicAlgorithms();
  g.autocast_cpu = at::autocast::is_autocast_enabled(at::kCPU);
  g.autocast_cuda = at::autocast::is_autocast_enabled(at::kCUDA);
  g.autocast_cpu_dtype = static_cast<int8_t>(at::autocast::get_autocast_dtype(at::kCPU));
  g.autocast_cuda_dtype = static_cast<int8_t>(at::autocast::get_autocast_dtype(at::kCUDA));
  g.default_dtype = static_cast<int8_t>(c10::typeMetaToScalarType(c10::get_default_dtype()));
  g.num_threads = at::get_num_threads();
  g.fn_modes = static_cast<int>(torch_function_mode_depth());
  return g;
}

bool profiler_enabled() { return torch::profiler::impl::profilerEnabled(); }
bool anomaly_enabled() { return torch::autograd::AnomalyMode::is_enabled(); }

bool backend_flag(int flag) {
  try {
    auto& c = at::globalContext();
    switch (flag) {
      case kCudnnEnabled: return c.userEnabledCuDNN();
      case kCudnnBenchmark: return c.benchmarkCuDNN();
      case kCudnnDeterministic: return c.deterministicCuDNN();
      case kCudnnAllowTf32: return c.allowTF32CuDNN();
      case kCublasAllowTf32: return c.allowTF32CuBLAS();
      default: return false;
    }
  } catch (...) {
    return false;
  }
}

int backend_flag_of(const std::string& module, const std::string& name) {
  if (module == "torch.backends.cudnn") {
    if (name == "enabled") return kCudnnEnabled;
    if (name == "benchmark") return kCudnnBenchmark;
    if (name == "deterministic") return kCudnnDeterministic;
    if (name == "allow_tf32") return kCudnnAllowTf32;
  }
  if (module == "cuBLASModule" && name == "allow_tf32") return kCublasAllowTf32;
  return -1;
}

namespace {
uint8_t backend_flags(uint8_t mask) {
  uint8_t v = 0;
  for (int i = 0; i < kBackendFlags; ++i)
    if ((mask >> i & 1) && backend_flag(i)) v |= static_cast<uint8_t>(1u << i);
  return v;
}
}  // namespace

bool global_state_matches(const GlobalState& want) {
  GlobalState have = global_state();
  if (want.profiler >= 0) have.profiler = profiler_enabled() ? 1 : 0;
  if (want.anomaly >= 0) have.anomaly = anomaly_enabled() ? 1 : 0;
  if (want.backends_read) {
    have.backends_read = want.backends_read;
    have.backends = backend_flags(want.backends_read);
  }
  return have == want;
}

std::string global_state_diff(const GlobalState& w, const GlobalState& h) {
  if (w.profiler >= 0 && w.profiler != static_cast<int8_t>(profiler_enabled()))
    return std::string("torch.autograd._profiler_enabled(): expected ") + (w.profiler ? "True" : "False");
  if (w.anomaly >= 0 && w.anomaly != static_cast<int8_t>(anomaly_enabled()))
    return std::string("torch.is_anomaly_enabled(): expected ") + (w.anomaly ? "True" : "False");
  if (w.backends_read && backend_flags(w.backends_read) != w.backends) {
    static const char* const names[] = {"torch.backends.cudnn.enabled", "torch.backends.cudnn.benchmark",
                                        "torch.backends.cudnn.deterministic", "torch.backends.cudnn.allow_tf32",
                                        "torch.backends.cuda.matmul.allow_tf32"};
    for (int i = 0; i < kBackendFlags; ++i)
      if ((w.backends_read >> i & 1) && backend_flag(i) != static_cast<bool>(w.backends >> i & 1))
        return std::string(names[i]) + ": expected " + ((w.backends >> i & 1) ? "True" : "False");
  }
  if (w.grad_enabled != h.grad_enabled) return std::string("grad_mode: expected ") + (w.grad_enabled ? "enabled" : "disabled");
  if (w.deterministic != h.deterministic) return "deterministic_algorithms changed";
  if (w.autocast_cpu != h.autocast_cpu) return "autocast (cpu) changed";
  if (w.autocast_cuda != h.autocast_cuda) return "autocast (cuda) changed";
  if (w.autocast_cpu_dtype != h.autocast_cpu_dtype || w.autocast_cuda_dtype != h.autocast_cuda_dtype)
    return "autocast dtype changed";
  if (w.default_dtype != h.default_dtype) return "default dtype changed";
  if (w.num_threads != h.num_threads) return "torch.get_num_threads() changed";
  if (w.fn_modes != h.fn_modes)
    return "torch function mode stack: expected " + std::to_string(w.fn_modes) + " mode(s), found " + std::to_string(h.fn_modes);
  return {};
}

}  // namespace dv
