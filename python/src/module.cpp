// dynview._C: the pybind11 module. One init_<area>() per area, each in its own file.
#include <pybind11/pybind11.h>

namespace dv::py {
void init_bytecode(pybind11::module_& m);
void init_tracer(pybind11::module_& m);
void init_trace(pybind11::module_& m);
}

PYBIND11_MODULE(_C, m) {
  m.doc() = "dynview native core";
  dv::py::init_bytecode(m);
  dv::py::init_tracer(m);
  dv::py::init_trace(m);
}
