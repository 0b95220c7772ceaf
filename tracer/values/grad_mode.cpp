// torch.no_grad() / enable_grad() / set_grad_enabled(b) as context managers (VK::GradMode): flag = enable?
#include "tracer/codegen.h"
#include "tracer/pycache.h"
#include "tracer/rebuild.h"
#include "tracer/tensor_match.h"
#include "tracer/values/kind.h"

namespace dv {

using cg::N;

namespace {
// A function decorated by a grad-mode manager (@torch.no_grad() on a function defined in the
// trace): called under the mode, which is put back after it returns or raises.
Translator::Status call_decorated(Translator& t, Frame& f, const VPtr& fn, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
  const bool prev = grad_mode_enabled();
  if (Translator::Status s = set_grad_mode(t, f, fn->flag)) return s;
  Translator::Status s = t.call(f, fn->self, std::move(args), std::move(kwargs), out);
  if (s && !s->exc) return s;  // a break: the trace is restarted to stop before this call
  if (Translator::Status r = set_grad_mode(t, f, prev)) return r;
  return s;
}

// dynview._runtime.grad_decorated(mode, fn)
PyObject* decorate_helper() {
  static PyObject* h = cg::runtime_attr("grad_decorated");
  return h;
}
}  // namespace

template <>
struct Kind<VK::GradMode> {
  static void describe(const Value& v, std::string& out, int depth) {
    if (v.name == kAutocastExit) {
      out += "<exit autocast>";
    } else if (v.name == kSdpaKernel || v.name == kSdpaExit) {
      out += v.name == kSdpaKernel ? "<sdpa_kernel " : "<exit sdpa_kernel: back to ";
      out += v.obj ? repr_of(v.obj.get()) : "?";
      out += ">";
    } else if (v.name == kSavedHooksOff || v.name == kSavedHooksExit) {
      out += v.name == kSavedHooksOff ? "<disable_saved_tensors_hooks " : "<exit disable_saved_tensors_hooks: back to ";
      out += v.obj ? repr_of(v.obj.get()) : "?";
      out += ">";
    } else if (v.name == kInferenceExit) {
      out += v.flag ? "<exit inference_mode>" : "<exit inference_mode(False)>";
    } else if (v.name == kGradExit) {
      out += v.flag ? "<restore enable_grad>" : "<restore no_grad>";
    } else if (v.name == kGradDecorated) {
      out += v.flag ? "<enable_grad: " : "<no_grad: ";
      if (v.self) describe_into(*v.self, out, depth + 1);
      out += ">";
    } else {
      out += v.flag ? "<enable_grad>" : "<no_grad>";
    }
  }
  static PyObject* python_type(Translator& /*t*/, const VPtr& /*v*/) {
    return nullptr;  // no_grad / enable_grad / set_grad_enabled, or a bound __exit__: not kept
  }
  static constexpr auto as_python = no_answer::as_python;
  static constexpr auto graph_arg = no_answer::graph_arg;
  static constexpr auto truth = always_true;
  static constexpr auto iterate = no_answer::iterate;
  static constexpr auto getattr = no_answer::getattr;
  static Status call(Translator& t, Frame& f, const VPtr& fn, std::vector<VPtr>& args, KwArgs& kwargs, VPtr& out) {
    if (fn->name == kAutocastExit) return t.exit_autocast(f, fn, out);  // a torch.autocast block's __exit__
    if (fn->name == kInferenceExit) return t.exit_inference_mode(f, fn, out);  // a torch.inference_mode block's
    if (fn->name == kSdpaExit) return t.exit_sdpa_kernel(f, fn, out);  // an sdpa_kernel block's
    if (fn->name == kSdpaKernel) return t.brk(f, "DV0009", "calling an sdpa_kernel context manager", "use it in a with-block");
    if (fn->name == kSavedHooksExit) return t.exit_saved_hooks_off(f, fn, out);  // a disable_saved_tensors_hooks block's
    if (fn->name == kSavedHooksOff) return t.brk(f, "DV0009", "calling a disable_saved_tensors_hooks context manager", "use it in a with-block");
    if (fn->name == kGradExit) return call_grad_exit(t, f, fn, out);  // a with-block's __exit__
    if (fn->name == kGradDecorated) return call_decorated(t, f, fn, args, kwargs, out);
    // torch.no_grad()(fn) / @torch.no_grad(): the decorated function. (set_grad_enabled(b)(fn)
    // also puts back the mode before it, which is not modelled: a break.)
    const bool decorates = args.size() == 1 && kwargs.empty() &&
                           (args[0]->kind == VK::Function || args[0]->kind == VK::Method || args[0]->kind == VK::Partial);
    if (fn->name == kGradSetEnabled && decorates) {
      // @torch.set_grad_enabled(b): made, it set the mode; called with the function, it puts back the
      // mode before it (set_grad_enabled.__call__) and gives the function, run under b
      if (Status s = set_grad_mode(t, f, fn->obj.get() == Py_True)) return s;
      out = t.make(VK::GradMode);
      out->name = kGradDecorated;
      out->flag = fn->flag;
      out->self = args[0];
      return std::nullopt;
    }
    if (fn->name.empty() && decorates) {
      out = t.make(VK::GradMode);
      out->name = kGradDecorated;
      out->flag = fn->flag;
      out->self = args[0];
      return std::nullopt;
    }
    return t.brk(f, "DV0009", "calling a grad-mode context manager with these arguments",
                 "use it in a with-block, or as a decorator of a function");
  }
  static constexpr auto setattr = no_answer::setattr;
  static constexpr auto call_method = no_answer::call_method;
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) {
    if (v->name == kAutocastExit) {  // a split torch.autocast block's exit: the AutocastExit it holds
      r.e.emit(N::LOAD_CONST, r.e.konst(v->obj.get()));
      return true;
    }
    if (v->name == kGradExit) {  // a with-block's __exit__: restores the grad mode it recorded
      PyObject* restore = grad_restore_object(v->flag);
      if (!restore) return false;
      r.e.emit(N::LOAD_CONST, r.e.konst(restore));
      return true;
    }
    if (v->name == kGradDecorated) {  // grad_decorated(mode, fn)
      if (!decorate_helper()) return false;
      r.e.callable_const(decorate_helper());
      r.e.emit(N::LOAD_CONST, r.e.konst(v->flag ? Py_True : Py_False));
      if (!r.value(v->self)) return false;
      r.e.call(2);
      return r.remember(v);
    }
    if (v->name.empty()) {  // torch.no_grad() / torch.enable_grad(), made anew (it holds no state)
      r.e.callable_const(v->flag ? py().enable_grad.get() : py().no_grad.get());
      r.e.call(0);
      return r.remember(v);
    }
    if (v->name == kInferenceExit) {
      // A split torch.inference_mode block (the graph before the break left it, generate_split):
      // dynview._runtime.InferenceModeExit(mode), made entered, for the breaking instruction
      static PyObject* cls = cg::runtime_attr("InferenceModeExit");  // kept
      if (!cls) return false;
      r.e.callable_const(cls);
      r.e.emit(N::LOAD_CONST, r.e.konst(v->flag ? Py_True : Py_False));
      r.e.call(1);
      return r.remember(v);
    }
    if (v->name == kSdpaExit) {
      // A split sdpa_kernel block: dynview._runtime.SdpaKernelExit(backends, set_priority, before),
      // made entered, for the breaking instruction
      static PyObject* cls = cg::runtime_attr("SdpaKernelExit");  // kept
      if (!cls || !v->self || !v->self->obj || !v->obj) return false;
      r.e.callable_const(cls);
      r.e.emit(N::LOAD_CONST, r.e.konst(v->self->obj.get()));
      r.e.emit(N::LOAD_CONST, r.e.konst(v->flag ? Py_True : Py_False));
      r.e.emit(N::LOAD_CONST, r.e.konst(v->obj.get()));
      r.e.call(3);
      return r.remember(v);
    }
    if (v->name == kSavedHooksExit) {
      // A split disable_saved_tensors_hooks block: dynview._runtime.SavedHooksExit(message, before),
      // made entered, for the breaking instruction
      static PyObject* cls = cg::runtime_attr("SavedHooksExit");  // kept
      if (!cls || !v->self || !v->self->obj) return false;
      r.e.callable_const(cls);
      r.e.emit(N::LOAD_CONST, r.e.konst(v->self->obj.get()));
      r.e.emit(N::LOAD_CONST, r.e.konst(v->obj.get()));
      r.e.call(2);
      return r.remember(v);
    }
    // set_grad_enabled(b) would set the mode again as it is rebuilt: a split there runs eagerly
    return false;
  }
};
DV_KIND(GradMode, "grad_mode")

}  // namespace dv
