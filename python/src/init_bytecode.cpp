// dynview._C bytecode functions: disassemble, instructions, exception_table, reassemble,
// assemble, opcode facts. A thin layer over core/: conversions and error translation only.
#include <Python.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>

#include "code_info.h"
#include "core/assembler.h"
#include "core/code_json.h"
#include "core/opcodes.h"
#include "tracer/frame_shim.h"

namespace dv::py {
namespace pyb = pybind11;
using namespace pybind11::literals;

namespace {

pyb::object opt(int32_t v) { return v == bc::kNone ? pyb::none() : pyb::object(pyb::int_(v)); }

pyb::tuple positions(const bc::Position& p) {
  return pyb::make_tuple(opt(p.line), opt(p.end_line), opt(p.col), opt(p.end_col));
}

bc::Decoded decode_or_raise(const bc::CodeInfo& info) {
  auto d = bc::decode(info);
  if (!d) raise(d.error());
  auto ok = bc::check_operands(info, *d);
  if (!ok) raise(ok.error());
  return std::move(d).value();
}

pyb::object argval(pyb::handle code, const bc::Instr& ins, bc::Version v) {
  using namespace dv::bc;
  const uint8_t op = op_info(ins.opcode, v).deopt;
  if (ins.arg == kNone) return pyb::none();
  auto* co = reinterpret_cast<PyCodeObject*>(code.ptr());
  if (has_flag(op, F_CONST, v)) return pyb::reinterpret_borrow<pyb::object>(PyTuple_GET_ITEM(co->co_consts, ins.arg));
  if (has_flag(op, F_NAME, v)) return pyb::reinterpret_borrow<pyb::object>(PyTuple_GET_ITEM(co->co_names, ins.index));
  if (is_jump(op, v)) return pyb::int_(ins.jump_target);
  auto local = [&](int32_t i) { return pyb::reinterpret_borrow<pyb::object>(PyTuple_GET_ITEM(co->co_localsplusnames, i)); };
  if (ins.index2 != kNone) return pyb::make_tuple(local(ins.index), local(ins.index2));  // 3.13 LOAD_FAST_LOAD_FAST & co
  if (has_flag(op, F_LOCAL, v) || has_flag(op, F_FREE, v)) return local(ins.arg);
  if (ins.name == Name::CONVERT_VALUE && ins.arg >= 1 && ins.arg <= 3) {  // 3.13: the conversion function
    static const char* conv[] = {nullptr, "str", "repr", "ascii"};
    return pyb::module_::import("builtins").attr(conv[ins.arg]);
  }
  if (has_flag(op, F_COMPARE, v)) return pyb::str(std::string(*compare_op_symbol(ins.index, v)));
  if (ins.name == Name::FORMAT_VALUE) {
    static const char* conv[] = {nullptr, "str", "repr", "ascii"};
    pyb::object fn = pyb::none();
    if (conv[ins.arg & 3]) fn = pyb::module_::import("builtins").attr(conv[ins.arg & 3]);
    return pyb::make_tuple(fn, pyb::bool_((ins.arg & 4) != 0));
  }
  return pyb::int_(ins.arg);
}

pyb::list instructions(pyb::handle x) {
  pyb::object code = as_code(x);
  auto info = code_info(code, false);
  bc::Decoded d = decode_or_raise(*info);
  pyb::list out(d.instrs.size());
  // 3.13's dis: jumps say "to L<n>" and starts_line is a bool (the line is line_number).
  const bool v313 = d.version == bc::Version::py313;
  const std::vector<uint32_t> labels = v313 ? bc::labels_313(d, false) : std::vector<uint32_t>{};
  for (size_t i = 0; i < d.instrs.size(); ++i) {
    const bc::Instr& ins = d.instrs[i];
    pyb::object starts = v313 ? pyb::object(pyb::bool_(ins.line_start)) : opt(ins.starts_line);
    out[i] = pyb::make_tuple(std::string(bc::op_name(ins.opcode, d.version)), ins.opcode, opt(ins.arg),
                             argval(code, ins, d.version), v313 ? bc::argrepr(*info, ins, labels) : bc::argrepr(*info, ins),
                             ins.offset, starts, ins.is_jump_target, positions(ins.pos));
  }
  return out;
}

size_t decode_count(pyb::handle x) {
  pyb::object code = as_code(x);
  auto* co = reinterpret_cast<PyCodeObject*>(code.ptr());
  auto raw = pyb::reinterpret_steal<pyb::bytes>(PyCode_GetCode(co));
  if (!raw) throw pyb::error_already_set();
  auto view = [](PyObject* b) { return std::string_view(PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b)); };
  auto d = bc::decode(view(raw.ptr()), view(co->co_linetable), view(co->co_exceptiontable), co->co_firstlineno, kPyVersion);
  if (!d) raise(d.error());
  return d->instrs.size();
}

pyb::str disassemble(pyb::handle x, bool recursive, int lasti) {
  // Both reused per thread: refilling keeps their buffers, so a listing costs few allocations.
  thread_local bc::CodeInfo info;
  thread_local std::string buf;
  fill_code_info(as_code(x), info, recursive, true);
  buf.clear();
  auto r = bc::disassemble_into(info, bc::DisOptions{recursive, lasti}, buf);
  if (!r) raise(r.error());
  pyb::str out(buf.data(), buf.size());
  if (buf.capacity() > (size_t{64} << 20)) std::string().swap(buf);  // don't hold on to huge ones
  return out;
}

pyb::list exception_table(pyb::handle x) {
  auto info = code_info(as_code(x), false);
  auto e = bc::decode_exception_table(info->exceptiontable, info->code.size());
  if (!e) raise(e.error());
  pyb::list out;
  for (const bc::ExcEntry& x : *e) out.append(pyb::make_tuple(x.start, x.end, x.target, x.depth, x.lasti));
  return out;
}

pyb::dict to_dict(const bc::AsmOutput& o) {
  return pyb::dict("code"_a = pyb::bytes(o.code), "linetable"_a = pyb::bytes(o.linetable),
                   "exceptiontable"_a = pyb::bytes(o.exceptiontable), "stacksize"_a = o.stacksize,
                   "offsets"_a = o.offsets);
}

pyb::object reassemble(pyb::handle x) {
  pyb::object code = as_code(x);
  auto info = code_info(code, false);
  bc::Decoded d = decode_or_raise(*info);
  auto in = bc::to_asm_input(d, info->firstlineno);
  if (!in) raise(in.error());
  auto out = bc::assemble(*in);
  if (!out) raise(out.error());
  return code.attr("replace")("co_code"_a = pyb::bytes(out->code), "co_linetable"_a = pyb::bytes(out->linetable),
                              "co_exceptiontable"_a = pyb::bytes(out->exceptiontable),
                              "co_stacksize"_a = out->stacksize);
}

int32_t field(pyb::handle v) { return v.is_none() ? bc::kNone : v.cast<int32_t>(); }

pyb::dict assemble(pyb::list instrs, pyb::list ranges, int firstlineno) {
  bc::AsmInput in;
  in.version = kPyVersion;
  in.firstlineno = firstlineno;
  for (pyb::handle item : instrs) {
    auto t = item.cast<pyb::tuple>();
    if (t.size() < 1 || t.size() > 3) throw pyb::value_error("instruction must be (op, arg=0, positions=None)");
    bc::AsmInstr a;
    if (pyb::isinstance<pyb::str>(t[0])) {
      auto op = bc::op_by_name(t[0].cast<std::string>(), kPyVersion);
      if (!op) throw pyb::value_error("unknown opcode name " + t[0].cast<std::string>());
      a.opcode = *op;
    } else {
      a.opcode = t[0].cast<uint8_t>();
    }
    if (t.size() > 1) a.arg = t[1].cast<int32_t>();
    if (t.size() > 2 && !t[2].is_none()) {
      auto p = t[2].cast<pyb::tuple>();
      if (p.size() != 4) throw pyb::value_error("positions must be (line, end_line, col, end_col)");
      a.pos = bc::Position{field(p[0]), field(p[1]), field(p[2]), field(p[3])};
    }
    in.instrs.push_back(a);
  }
  for (pyb::handle item : ranges) {
    auto t = item.cast<pyb::tuple>();
    if (t.size() != 5) throw pyb::value_error("range must be (start, end, handler, depth, lasti)");
    in.ranges.push_back(bc::AsmExcRange{t[0].cast<int32_t>(), t[1].cast<int32_t>(), t[2].cast<int32_t>(),
                                        t[3].cast<int32_t>(), t[4].cast<bool>()});
  }
  auto out = bc::assemble(in);
  if (!out) raise(out.error());
  return to_dict(*out);
}

size_t decode_raw(pyb::bytes code, pyb::bytes linetable, pyb::bytes exceptiontable, int firstlineno) {
  auto d = bc::decode(std::string(code), std::string(linetable), std::string(exceptiontable), firstlineno, kPyVersion);
  if (!d) raise(d.error());
  return d->instrs.size();
}

std::string code_json(pyb::handle x, int indent) {
  pyb::object code = as_code(x);
  auto info = code_info(code, true);
  info->repr = pyb::repr(code).cast<std::string>();
  return bc::code_to_json(*info, indent);
}

bc::Version version_arg(const std::string& v) {
  auto r = bc::version_from_str(v);
  if (!r) throw pyb::value_error("unsupported CPython version '" + v + "' (3.11, 3.12, 3.13)");
  return *r;
}

pyb::list opcode_table(const std::string& version) {
  const bc::Version v = version_arg(version);
  pyb::list out;
  for (int op = 0; op < 256; ++op) {
    const bc::OpInfo& i = bc::op_info(static_cast<uint8_t>(op), v);
    if (!i.name) continue;
    using namespace dv::bc;
    const auto f = [&](OpFlag fl) { return has_flag(static_cast<uint8_t>(op), fl, v); };
    out.append(pyb::dict("name"_a = i.name, "opcode"_a = op, "caches"_a = i.caches, "specialized"_a = i.specialized,
                         "deopt"_a = i.deopt, "has_arg"_a = f(F_ARG), "const"_a = f(F_CONST),
                         "name_op"_a = f(F_NAME), "jrel"_a = f(F_JREL), "jabs"_a = f(F_JABS), "local"_a = f(F_LOCAL),
                         "free"_a = f(F_FREE), "compare"_a = f(F_COMPARE), "backward"_a = f(F_BACKWARD),
                         "no_fallthrough"_a = f(F_NOFALL), "neutral_name"_a = std::string(name_str(i.id))));
  }
  return out;
}

pyb::object py_stack_effect(int op, int arg, bool jump, const std::string& version) {
  if (op < 0 || op > 255) throw pyb::value_error("opcode out of range");
  auto e = bc::stack_effect(static_cast<uint8_t>(op), arg, jump, version_arg(version));
  return e ? pyb::object(pyb::int_(*e)) : pyb::none();
}

// Everything core/ says about a code object recorded as code JSON (any version): its
// instructions with dis.get_instructions' fields for that version, the dis.dis listing, the
// exception table and the re-assembled bytes. Lets the 3.11 test suite check 3.12/3.13 code.
pyb::dict from_json(const std::string& text, bool recursive, bool details) {
  auto co = bc::code_from_json(text);
  if (!co) raise(co.error());
  bc::Decoded d = decode_or_raise(*co);
  pyb::dict original("code"_a = pyb::bytes(co->code), "linetable"_a = pyb::bytes(co->linetable),
                     "exceptiontable"_a = pyb::bytes(co->exceptiontable), "stacksize"_a = co->stacksize);
  auto in = bc::to_asm_input(d, co->firstlineno);
  if (!in) raise(in.error());
  auto out = bc::assemble(*in);
  if (!out) raise(out.error());
  if (!details) return pyb::dict("original"_a = original, "reassembled"_a = to_dict(*out));
  const bool v313 = co->version == bc::Version::py313;
  const auto labels = v313 ? bc::labels_313(d, false) : std::vector<uint32_t>{};
  pyb::list instrs(d.instrs.size());
  for (size_t i = 0; i < d.instrs.size(); ++i) {
    const bc::Instr& ins = d.instrs[i];
    pyb::object starts = v313 ? pyb::object(pyb::bool_(ins.line_start)) : opt(ins.starts_line);
    instrs[i] = pyb::make_tuple(std::string(bc::op_name(ins.opcode, co->version)), ins.opcode, opt(ins.arg),
                                v313 ? bc::argrepr(*co, ins, labels) : bc::argrepr(*co, ins), ins.offset, starts,
                                opt(ins.line_number), ins.is_jump_target, positions(ins.pos),
                                ins.jump_target < 0 ? pyb::none() : pyb::object(pyb::int_(ins.jump_target)),
                                std::string(bc::name_str(ins.name)), opt(ins.index), opt(ins.index2), ins.push_null);
  }
  pyb::list exc;
  for (const bc::ExcEntry& x : d.exceptions) exc.append(pyb::make_tuple(x.start, x.end, x.target, x.depth, x.lasti));
  auto listing = bc::disassemble(*co, bc::DisOptions{recursive, -1});
  if (!listing) raise(listing.error());
  return pyb::dict("version"_a = std::string(bc::version_str(co->version)), "instructions"_a = instrs,
                   "exception_table"_a = exc, "listing"_a = *listing, "original"_a = original,
                   "reassembled"_a = to_dict(*out));
}

// Benchmark helper: parse code JSON texts once, then time `repeat` rounds of decode and of listing
// over all of them (best round of each). Returns (decode_s, listing_s, instructions).
pyb::tuple time_json_corpus(const std::vector<std::string>& texts, int repeat) {
  std::vector<bc::CodeInfo> codes;
  codes.reserve(texts.size());
  for (const auto& t : texts) {
    auto co = bc::code_from_json(t);
    if (!co) raise(co.error());
    codes.push_back(std::move(co).value());
  }
  using clock = std::chrono::steady_clock;
  double best_decode = 1e300, best_listing = 1e300;
  size_t n_ins = 0;
  std::string buf;
  for (int r = 0; r < repeat; ++r) {
    auto t0 = clock::now();
    size_t n = 0;
    for (const auto& co : codes) {
      auto d = bc::decode(co);
      if (!d) raise(d.error());
      n += d->instrs.size();
    }
    auto t1 = clock::now();
    for (const auto& co : codes) {
      buf.clear();
      auto ok = bc::disassemble_into(co, bc::DisOptions{false, -1}, buf);
      if (!ok) raise(ok.error());
    }
    auto t2 = clock::now();
    n_ins = n;
    best_decode = std::min(best_decode, std::chrono::duration<double>(t1 - t0).count());
    best_listing = std::min(best_listing, std::chrono::duration<double>(t2 - t1).count());
  }
  return pyb::make_tuple(best_decode, best_listing, n_ins);
}

// disassemble(x, recursive=True, lasti=-1) as a METH_FASTCALL function: the listing is called
// per code object in bulk (benchmarks, the corpus test), where pybind11's dispatch is measurable.
PyObject* disassemble_fast(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 1 || nargs > 3) {
    PyErr_SetString(PyExc_TypeError, "disassemble(x, recursive=True, lasti=-1)");
    return nullptr;
  }
  try {
    bool recursive = nargs < 2 || PyObject_IsTrue(args[1]) == 1;
    int lasti = nargs < 3 ? -1 : static_cast<int>(PyLong_AsLong(args[2]));
    if (PyErr_Occurred()) return nullptr;
    return disassemble(args[0], recursive, lasti).release().ptr();
  } catch (pyb::error_already_set& e) {
    e.restore();
  } catch (pyb::builtin_exception& e) {
    e.set_error();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

PyMethodDef kDisassembleDef = {"disassemble", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(disassemble_fast)),
                               METH_FASTCALL, "disassemble(x, recursive=True, lasti=-1): the dis.dis listing of x."};

}  // namespace

void init_bytecode(pyb::module_& m) {
  m.add_object("disassemble", pyb::reinterpret_steal<pyb::object>(PyCFunction_NewEx(&kDisassembleDef, nullptr, m.attr("__name__").ptr())));
  m.def("instructions", &instructions, "x"_a,
        "Decoded instructions as tuples with dis.Instruction's fields.");
  m.def("decode_count", &decode_count, "x"_a, "Decode only; return the number of instructions.");
  m.def("exception_table", &exception_table, "x"_a, "co_exceptiontable as (start, end, target, depth, lasti).");
  m.def("reassemble", &reassemble, "x"_a, "Decode and re-assemble a code object with core/'s assembler.");
  m.def("assemble", &assemble, "instrs"_a, "ranges"_a = pyb::list(), "firstlineno"_a = 1,
        "Assemble [(op, arg|target_index, positions)] with exception ranges.");
  m.def("decode_raw", &decode_raw, "code"_a, "linetable"_a = pyb::bytes(), "exceptiontable"_a = pyb::bytes(),
        "firstlineno"_a = 1, "Decode raw tables; ValueError says what and where if malformed.");
  m.def("code_json", &code_json, "x"_a, "indent"_a = -1,
        "The code object as recorded (JSON), readable by `dynview disasm` without Python.");
  m.def("opcode_table", &opcode_table, "version"_a = "3.11", "The generated opcode table of a CPython version.");
  m.def("stack_effect", &py_stack_effect, "op"_a, "arg"_a = 0, "jump"_a = false, "version"_a = "3.11");
  m.def("from_json", &from_json, "text"_a, "recursive"_a = false, "details"_a = true,
        "Decode, list and re-assemble a code object recorded as code JSON (any supported version);\n"
        "details=False: only the original and re-assembled tables.");
  m.def("time_json_corpus", &time_json_corpus, "texts"_a, "repeat"_a = 3,
        "Benchmark: best-of-repeat seconds to decode and to list code JSON texts, and the instruction count.");
  m.attr("VERSIONS") = pyb::make_tuple("3.11", "3.12", "3.13");
  m.attr("OPCODE_TABLE_ID") = bc::kOpcodeTableId;
  m.attr("PYTHON_VERSION_HEX") = bc::kPythonVersionHex;
}

}  // namespace dv::py
