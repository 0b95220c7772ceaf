// An item of a list, tuple or dict from the frame not read yet (VK::Lazy; TorchDynamo's
// LazyVariableTracker over a leaf: a number, string or None). Made by ValueBuilder::sequence_item and
// the dict entry reads when the item only moves (unpacked into locals, passed to an inlined function,
// returned); the interpreter realizes it before any instruction or call that reads it
// (Translator::realize_read, realize_call), so its guards come from the step that reads it, and one
// never read adds none. Nothing else should meet one: every other answer is a break that says so.
#include "tracer/rebuild.h"
#include "tracer/translator.h"
#include "tracer/values/kind.h"

namespace dv {

namespace {
Status not_realized(Translator& t, Frame& f, const VPtr& v, const std::string& what) {
  return t.brk(f, "DV0005", what + " of " + (v->source ? v->source->text() : std::string("a value")) + " before it was read");
}
}  // namespace

template <>
struct Kind<VK::Lazy> {
  static void describe(const Value& v, std::string& out, int /*depth*/) {
    out += "<";
    out += v.lazy ? Py_TYPE(v.lazy.get())->tp_name : "value";
    out += ", not read yet>";
  }
  // Its type is not guarded until it is read: nothing may decide by it.
  static PyObject* python_type(Translator& /*t*/, const VPtr& /*v*/) { return nullptr; }
  static constexpr auto as_python = no_answer::as_python;
  static constexpr auto graph_arg = no_answer::graph_arg;
  static Status truth(Translator& t, Frame& f, const VPtr& v, bool& /*out*/) { return not_realized(t, f, v, "bool()"); }
  static Status iterate(Translator& t, Frame& f, const VPtr& v, VPtr& /*out*/, bool /*materialize*/) {
    return not_realized(t, f, v, "iterating");
  }
  static Status getattr(Translator& t, Frame& f, const VPtr& obj, const std::string& name, VPtr& /*out*/) {
    return not_realized(t, f, obj, "attribute " + name);
  }
  static Status setattr(Translator& t, Frame& f, const VPtr& owner, const std::string& name, const VPtr& /*value*/) {
    return not_realized(t, f, owner, "assignment to attribute " + name);
  }
  static Status call(Translator& t, Frame& f, const VPtr& fn, std::vector<VPtr>& /*args*/, KwArgs& /*kwargs*/, VPtr& /*out*/) {
    return not_realized(t, f, fn, "a call");
  }
  static Status call_method(Translator& t, Frame& f, const VPtr& m, std::vector<VPtr>& /*args*/, KwArgs& /*kwargs*/, VPtr& /*out*/) {
    return not_realized(t, f, m->self, "method " + m->name);
  }
  // Reloaded from where it was read (the transformed code starts at the frame's entry, where its
  // container still holds it).
  static bool reconstruct(cg::Rebuilder& r, const VPtr& v) { return v->source && r.e.source(*v->source); }
};
DV_KIND(Lazy, "value not read yet")

}  // namespace dv
