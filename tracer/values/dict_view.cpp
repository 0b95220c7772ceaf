// Dict views (VK::DictView): d.keys(), d.values(), d.items() of a dict the trace holds. A view is
// live, as Python's: it reads its dict's contents when it is iterated, measured or searched, so a
// view taken before the dict changed sees the change. self = the dict (a Dict value: one made in the
// trace, one from outside, or a dict subclass's contents); name = "keys", "values" or "items".
#include "tracer/pycache.h"
#include "tracer/translator.h"

namespace dv {

bool is_view_name(const std::string& name) { return name == "keys" || name == "values" || name == "items"; }

VPtr Translator::dict_view(const VPtr& dict, const std::string& name) {
  VPtr v = make(VK::DictView);
  v->self = dict;
  v->name = name;
  return v;
}

std::vector<VPtr> Translator::view_items(const Value& view) {
  const Value& d = *view.self;
  std::vector<VPtr> out;
  out.reserve(d.items.size());
  for (size_t i = 0; i < d.items.size(); ++i) {
    if (view.name == "values") {
      out.push_back(d.items[i]);
    } else if (view.name == "keys") {
      out.push_back(key_value(d.keys[i]));
    } else {
      VPtr pair = make(VK::Tuple);
      pair->items = {key_value(d.keys[i]), d.items[i]};
      out.push_back(pair);
    }
  }
  return out;
}

PyObject* dict_view_type(const std::string& name) {
  static PyObject* types[3] = {nullptr, nullptr, nullptr};
  const int i = name == "keys" ? 0 : name == "values" ? 1 : 2;
  if (!types[i]) {
    Ref d = Ref::steal(PyDict_New());
    Ref v = d ? Ref::steal(PyObject_CallMethod(d.get(), name.c_str(), nullptr)) : Ref();
    if (!v) return PyErr_Clear(), nullptr;
    types[i] = reinterpret_cast<PyObject*>(Py_TYPE(v.get()));
    Py_INCREF(types[i]);  // kept for the process
  }
  return types[i];
}

}  // namespace dv
