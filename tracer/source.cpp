// Source constructors and text forms (see source.h).
#include "source.h"

namespace dv {

std::string Source::text() const {
  switch (kind) {
    case Kind::Local:
    case Kind::Closure: return "L['" + name + "']";
    case Kind::Global: return "G['" + name + "']";
    case Kind::Attr: return base->text() + "." + name;
    case Kind::ModuleMember: return base->text() + "." + name;
    case Kind::Item: return base->text() + "[" + (name.empty() ? repr_of(key.get()) : name) + "]";
    case Kind::FnClosure: return base->text() + ".__closure__[" + std::to_string(index) + "].cell_contents";
    case Kind::Held: return name;
    case Kind::FreeCell: return "___closure_cell['" + name + "']";
    case Kind::AsTensor:  // (int(arg): a numpy.int64 given to the graph as the int it holds)
      return (key.get() == reinterpret_cast<PyObject*>(&PyLong_Type) ? "int(" : "___as_tensor(") + base->text() + ")";
    case Kind::TupleIterItem: return "___tuple_iterator_getitem(" + base->text() + ", " + std::to_string(index) + ")";
    case Kind::FnMode: return "___get_torch_function_mode_stack_at(" + std::to_string(index) + ")";
    case Kind::DictValueAt: return "list(" + base->text() + ".values())[" + std::to_string(index) + "]";
    case Kind::WeakRefCall: return base->text() + "()";
    case Kind::RandomDraw: return "___random_value_" + std::to_string(index);
  }
  return "?";
}

SourcePtr Source::local(int index, std::string name) {
  return std::make_shared<Source>(Source{Kind::Local, index, std::move(name), {}, {}, {}});
}
SourcePtr Source::closure(int index, std::string name) {
  return std::make_shared<Source>(Source{Kind::Closure, index, std::move(name), {}, {}, {}});
}
SourcePtr Source::global(std::string name) {
  return std::make_shared<Source>(Source{Kind::Global, -1, std::move(name), {}, {}, {}});
}
SourcePtr Source::attr(SourcePtr base, std::string name) {
  return std::make_shared<Source>(Source{Kind::Attr, -1, std::move(name), {}, {}, std::move(base)});
}
SourcePtr Source::module_member(SourcePtr base, std::string dict_name, std::string name) {
  return std::make_shared<Source>(
      Source{Kind::ModuleMember, -1, std::move(name), std::move(dict_name), {}, std::move(base)});
}
SourcePtr Source::item(SourcePtr base, Ref key) {
  return std::make_shared<Source>(Source{Kind::Item, -1, {}, {}, std::move(key), std::move(base)});
}

SourcePtr Source::item(SourcePtr base, Ref key, std::string key_text) {
  return std::make_shared<Source>(Source{Kind::Item, -1, std::move(key_text), {}, std::move(key), std::move(base)});
}

SourcePtr Source::storage_item(SourcePtr base, Ref key) {
  auto s = std::make_shared<Source>(Source{Kind::Item, -1, {}, {}, std::move(key), std::move(base)});
  s->storage = true;
  return s;
}

SourcePtr Source::fn_closure(SourcePtr base, int index, std::string name) {
  return std::make_shared<Source>(Source{Kind::FnClosure, index, std::move(name), {}, {}, std::move(base)});
}
SourcePtr Source::as_tensor(SourcePtr base, Ref as_tensor_fn) {
  return std::make_shared<Source>(Source{Kind::AsTensor, -1, {}, {}, std::move(as_tensor_fn), std::move(base)});
}
SourcePtr Source::tuple_iter_item(SourcePtr base, int index, Ref getitem_fn) {
  return std::make_shared<Source>(Source{Kind::TupleIterItem, index, {}, {}, std::move(getitem_fn), std::move(base)});
}
SourcePtr Source::fn_mode(int index, Ref stack_at_fn) {
  return std::make_shared<Source>(Source{Kind::FnMode, index, {}, {}, std::move(stack_at_fn), {}});
}
SourcePtr Source::dict_value_at(SourcePtr base, int index, Ref value_at_fn) {
  return std::make_shared<Source>(Source{Kind::DictValueAt, index, {}, {}, std::move(value_at_fn), std::move(base)});
}
SourcePtr Source::held(Ref obj, std::string name) {
  return std::make_shared<Source>(Source{Kind::Held, -1, std::move(name), {}, std::move(obj), {}});
}

SourcePtr Source::free_cell(int index, std::string name) {
  return std::make_shared<Source>(Source{Kind::FreeCell, index, std::move(name), {}, {}, {}});
}

SourcePtr Source::weakref_call(SourcePtr base, Ref call_fn) {
  return std::make_shared<Source>(Source{Kind::WeakRefCall, -1, {}, {}, std::move(call_fn), std::move(base)});
}

SourcePtr Source::random_draw(int index, Ref fn_and_args) {
  return std::make_shared<Source>(Source{Kind::RandomDraw, index, {}, {}, std::move(fn_and_args), {}});
}

}  // namespace dv
