// The output graph: guards and inputs as the interpreter adds them, the backend call and the
// dynamic-shape state (see output_graph.h).
#include "output_graph.h"
#include "pycache.h"

namespace dv {

Guard* OutputGraph::add_guard(GuardKind kind, SourcePtr source, Ref value, int step, int line, std::string file,
                              std::string text) {
  const std::string src = source ? source->text() : "";
  for (const Guard& g : guards)
    if (g.kind == kind && (g.source ? g.source->text() : "") == src && (kind != GuardKind::DICT_CONTAINS || g.text == text))
      return nullptr;  // (one DICT_CONTAINS per key probed)
  Guard g;
  g.kind = kind;
  g.source = std::move(source);
  g.value = std::move(value);
  g.step = step;
  g.line = line;
  g.file = std::move(file);
  g.text = std::move(text);
  guards.push_back(std::move(g));
  return &guards.back();
}

int OutputGraph::add_input(SourcePtr source, Ref example, Ref real, int step) {
  const int node = graph.add_placeholder(source, std::move(example), step);
  inputs.emplace_back(std::move(source), node);
  input_objects.push_back(std::move(real));
  return node;
}

// ---- dynamic shapes -----------------------------------------------------------------------------

bool OutputGraph::start_dynamic(std::string& why) {
  Ref mod = Ref::steal(PyImport_ImportModule("dynview._shapes"));
  shapes_ = mod ? Ref::steal(PyObject_CallMethod(mod.get(), "DynamicShapes", nullptr)) : Ref();
  if (!shapes_) {
    Ref err = take_error();
    why = err ? repr_of(err.get()) : std::string("unknown error");
    return false;
  }
  Ref env = Ref::steal(PyObject_GetAttrString(shapes_.get(), "env"));
  shape_guard_list_ = env ? Ref::steal(PyObject_GetAttrString(env.get(), "guards")) : Ref();
  if (!shape_guard_list_ || !PyList_Check(shape_guard_list_.get())) {
    PyErr_Clear();
    shape_guard_list_ = {};
  }
  return true;
}

int OutputGraph::sym_slot(SourcePtr source) {
  sym_sources_.push_back(std::move(source));
  return static_cast<int>(sym_sources_.size()) - 1;
}

bool OutputGraph::watch_shape_guards(int step, int line, const std::string& file) {
  if (!shape_guard_list_ || PyList_GET_SIZE(shape_guard_list_.get()) == shape_guards_seen_) return false;
  shape_guards_seen_ = PyList_GET_SIZE(shape_guard_list_.get());
  shape_files_[step] = file;
  Ref r = Ref::steal(PyObject_CallMethod(shapes_.get(), "note", "ii", step, line));
  if (!r) return PyErr_Clear(), false;
  return r.get() == Py_True;
}

// The fake mode made a size that depends on tensor values (boolean indexing, nonzero, unique): the
// graph would need unbacked symbols, which dynview does not bind.
bool OutputGraph::has_unbacked_symbols() const {
  if (!shapes_) return false;
  Ref env = Ref::steal(PyObject_GetAttrString(shapes_.get(), "env"));
  Ref pending = env ? Ref::steal(PyObject_GetAttrString(env.get(), "pending_fresh_unbacked_symbols")) : Ref();
  if (!pending) {
    PyErr_Clear();
    return false;
  }
  const int n = PyObject_IsTrue(pending.get());
  if (n < 0) PyErr_Clear();
  return n == 1;
}

PyObject* OutputGraph::compile_with_backend(PyObject* backend, PyObject* gm, bool fullgraph) {
  Ref examples = Ref::steal(PyList_New(0));
  if (!examples) return nullptr;
  for (size_t i = 0; i < input_objects.size(); ++i) {
    // Dynamic compiles hand the backend the fakes (with their symbolic sizes); static ones the real inputs,
    // which compile_static copies to fakes.
    PyObject* ex = shapes_ ? graph.nodes()[static_cast<size_t>(inputs[i].second)].example.get() : input_objects[i].get();
    if (PyList_Append(examples.get(), ex ? ex : input_objects[i].get()) < 0) return nullptr;
  }
  if (shapes_) return PyObject_CallMethod(shapes_.get(), "compile", "OOO", backend, gm, examples.get());
  // A static compile: dynview._shapes.compile_static hands the backend fakes of the inputs.
  static PyObject* compile_static = kept_attr("dynview._shapes", "compile_static");
  if (!compile_static) {
    PyErr_SetString(PyExc_RuntimeError, "dynview._shapes.compile_static is missing");
    return nullptr;
  }
  return PyObject_CallFunction(compile_static, "OOOO", backend, gm, examples.get(), fullgraph ? Py_True : Py_False);
}

bool OutputGraph::add_shape_guards(std::string& why) {
  if (!shapes_) return true;
  Ref list = Ref::steal(PyObject_CallMethod(shapes_.get(), "guards", nullptr));
  if (!list) {
    Ref err = take_error();
    why = err ? str_of(Ref::steal(PyObject_Str(err.get())).get()) : "unknown error";
    PyErr_Clear();
    return false;
  }
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list.get()); ++i) {
    PyObject* item = PyList_GET_ITEM(list.get(), i);  // (text, [(slot, kind, dim)], [(op, arg)], step, line)
    Guard g;
    g.kind = GuardKind::SHAPE_ENV;
    g.text = str_of(PyTuple_GET_ITEM(item, 0));
    PyObject* refs = PyTuple_GET_ITEM(item, 1);
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(refs); ++k) {
      PyObject* r = PyList_GET_ITEM(refs, k);
      const long slot = PyLong_AsLong(PyTuple_GET_ITEM(r, 0));
      if (slot < 0 || slot >= static_cast<long>(sym_sources_.size())) {
        why = "a shape guard reads an unknown input";
        return false;
      }
      g.refs.push_back(SymRef{sym_sources_[slot], static_cast<int8_t>(PyLong_AsLong(PyTuple_GET_ITEM(r, 1))),
                              static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(r, 2)))});
    }
    PyObject* prog = PyTuple_GET_ITEM(item, 2);
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(prog); ++k) {
      PyObject* in = PyList_GET_ITEM(prog, k);
      g.program.push_back(ShapeInstr{static_cast<ShapeOp>(PyLong_AsLong(PyTuple_GET_ITEM(in, 0))),
                                     PyLong_AsLongLong(PyTuple_GET_ITEM(in, 1))});
    }
    if (PyErr_Occurred()) {
      why = "malformed shape guard";
      PyErr_Clear();
      return false;
    }
    g.step = static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(item, 3)));
    g.line = static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(item, 4)));
    auto file = shape_files_.find(g.step);
    g.file = file != shape_files_.end() ? file->second : root_file;
    guards.push_back(std::move(g));
  }
  return true;
}

}  // namespace dv
