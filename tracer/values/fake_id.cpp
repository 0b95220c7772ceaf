// id() in the trace. An object the frame reaches (a module, a class, a function, an object known by
// identity) has its real id, guarded by identity when it came from a source. A value made in the
// trace has no object yet, so its id is a fake: a unique token, equal only to itself, the same token
// each time id() of that value is taken. That is enough for what libraries do with ids (memo dicts
// keyed by id, as copy.deepcopy does; `id(a) == id(b)`), and nothing more: arithmetic, ordering or
// formatting of a fake id raises an internal error that the translator turns into a break, and a
// fake id cannot leave the trace (codegen refuses to rebuild it). TorchDynamo's FakeIdVariable.
// Also the tokens a dict made in the trace holds as keys for objects made in the trace (new_made_key).
#include "tracer/translator.h"

namespace dv {

namespace {

struct FakeIds {
  Ref type, error, made_key;
};

const FakeIds& fake_ids() {
  static const FakeIds* z = [] {
    auto* f = new FakeIds;  // kept for the process
    const char* src =
        "class FakeIdUsed(Exception):\n"
        "    pass\n"
        "class FakeId:\n"
        "    __slots__ = ()\n"
        "    def __repr__(self):\n"
        "        return '<id of a value made in the trace>'\n"
        "    def _used(self, *args):\n"
        "        raise FakeIdUsed('id() of a value made in the trace used as a number or text')\n"
        "    for _n in ('add radd sub rsub mul rmul truediv rtruediv floordiv rfloordiv mod rmod pow rpow '\n"
        "               'and rand or ror xor rxor lshift rlshift rshift rrshift neg pos abs invert '\n"
        "               'lt le gt ge index int float complex format str round trunc floor ceil').split():\n"
        "        locals()['__%s__' % _n] = _used\n"
        "    del _n\n"
        "class MadeKey:\n"
        "    __slots__ = ()\n"
        "    def __repr__(self):\n"
        "        return '<an object made in the trace>'\n";
    Ref globals = Ref::steal(PyDict_New());
    PyDict_SetItemString(globals.get(), "__builtins__", PyEval_GetBuiltins());
    PyDict_SetItemString(globals.get(), "__name__", Ref::steal(PyUnicode_FromString("dynview.fake_id")).get());
    Ref r = Ref::steal(PyRun_String(src, Py_file_input, globals.get(), globals.get()));
    if (!r) {
      PyErr_Clear();
      return f;
    }
    f->type = Ref::borrow(PyDict_GetItemString(globals.get(), "FakeId"));
    f->error = Ref::borrow(PyDict_GetItemString(globals.get(), "FakeIdUsed"));
    f->made_key = Ref::borrow(PyDict_GetItemString(globals.get(), "MadeKey"));
    return f;
  }();
  return *z;
}

// An object whose id is stable for what the compile assumes: a singleton, or an object the frame
// reaches by identity.
PyObject* real_object(const Value& v) {
  switch (v.kind) {
    case VK::Const: {
      PyObject* o = v.obj.get();
      return o == Py_None || o == Py_True || o == Py_False || o == Py_Ellipsis || o == Py_NotImplemented ? o : nullptr;
    }
    case VK::Object: case VK::NNModule: return v.obj.get();
    case VK::Function: return v.obj && PyFunction_Check(v.obj.get()) && v.source ? v.obj.get() : nullptr;
    default: return nullptr;
  }
}

}  // namespace

bool is_fake_id(PyObject* o) {
  const FakeIds& f = fake_ids();
  return f.type && reinterpret_cast<PyObject*>(Py_TYPE(o)) == f.type.get();
}

// The key a dict made in the trace holds for an object made in the trace whose class compares and
// hashes by identity (Translator::key_of): a token of its own, standing for that value
// (OutputGraph::key_values) until the transformed code rebuilds the dict with the object itself.
Ref new_made_key() {
  const FakeIds& f = fake_ids();
  Ref token = f.made_key ? Ref::steal(PyObject_CallNoArgs(f.made_key.get())) : Ref();
  if (!token) PyErr_Clear();
  return token;
}

bool is_made_key(PyObject* o) {
  const FakeIds& f = fake_ids();
  return f.made_key && reinterpret_cast<PyObject*>(Py_TYPE(o)) == f.made_key.get();
}

bool is_fake_id_error(PyObject* exc) {
  const FakeIds& f = fake_ids();
  return f.error && exc && PyObject_TypeCheck(exc, reinterpret_cast<PyTypeObject*>(f.error.get()));
}

Translator::Status Translator::call_id(Frame& f, const VPtr& v, VPtr& out) {
  if (PyObject* o = real_object(*v)) {
    if (v->source && (v->kind == VK::Object || v->kind == VK::NNModule))
      add_guard(GuardKind::ID_MATCH, v->source, v->obj, f, "___check_obj_id(" + v->source->text() + ", " + repr_of(o) + ")");
    out = constant_steal(PyLong_FromVoidPtr(o));
    return std::nullopt;
  }
  // A constant is its object (`q is p` compares the objects: frozenset.copy returns itself), so
  // constants holding one object share its fake id; any other value is one object of its own.
  const void* key = v->kind == VK::Const && v->obj ? static_cast<const void*>(v->obj.get()) : static_cast<const void*>(v.get());
  auto it = fake_ids_.find(key);
  if (it == fake_ids_.end()) {
    const FakeIds& ids = fake_ids();
    Ref token = ids.type ? Ref::steal(PyObject_CallNoArgs(ids.type.get())) : Ref();
    if (!token) {
      PyErr_Clear();
      return brk(f, "DV0004", "id() of a " + std::string(vk_name(v->kind)));
    }
    it = fake_ids_.emplace(key, std::make_pair(v, constant(std::move(token)))).first;
  }
  out = it->second.second;
  return std::nullopt;
}

}  // namespace dv
