// dynview._C trace functions: start/stop the .dyn recorder (recorder/) and read traces through
// core's TraceReader (TraceFile), for dynview.record / DYNVIEW_TRACE / dynview.load_trace.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <memory>

#include "core/break_ids.h"
#include "core/trace.h"
#include "recorder/recorder.h"

namespace dv::py {
namespace pyb = pybind11;
using namespace pybind11::literals;

void set_recorder_observer(EngineObserver* o);  // init_tracer.cpp

namespace {

std::unique_ptr<Recorder> g_recorder;
std::string g_path;
int g_flush_ms = 100;
uint32_t g_chunk_steps = 32768;

pyb::dict stats_dict(const RecorderStats& s, const std::string& path) {
  return pyb::dict("path"_a = path, "steps"_a = s.steps, "bytes"_a = s.bytes, "chunks"_a = s.chunks,
                   "compiles"_a = s.compiles, "step_gaps"_a = s.step_gaps, "error"_a = s.error);
}

pyb::tuple step_tuple(const trace::Chunk& c, size_t i, const std::vector<trace::FrameView>& frames) {
  const auto& f = frames.empty() ? trace::FrameView{} : frames.back();
  pyb::tuple locals(c.local_at[i + 1] - c.local_at[i]);
  for (uint32_t k = c.local_at[i]; k < c.local_at[i + 1]; ++k)
    locals[k - c.local_at[i]] = pyb::make_tuple(c.local_changes[k].first, c.local_changes[k].second);
  return pyb::make_tuple(c.first_step + i, c.compile[i], c.depth[i], static_cast<bool>(c.frame_start[i]), c.code[i],
                         c.offset[i], c.opcode[i], c.arg[i] == INT32_MIN ? pyb::object(pyb::none()) : pyb::object(pyb::int_(c.arg[i])),
                         c.line[i], pyb::tuple(pyb::cast(f.stack)), locals);
}

// A trace opened for reading (Python side: dynview.load_trace).
class TraceFile {
 public:
  explicit TraceFile(const std::string& path) {
    auto r = trace::TraceReader::open(path);
    if (!r) throw pyb::value_error(r.error().message());
    r_ = std::move(*r);
  }
  std::string meta() const { return r_->meta().dump(); }
  pyb::tuple version() const { return pyb::make_tuple(r_->major(), r_->minor()); }
  std::string events() const { return nlohmann::json(r_->events()).dump(); }
  pyb::list problems() const {
    pyb::list out;
    for (const auto& p : r_->problems()) out.append(pyb::make_tuple(p.what, p.offset));
    return out;
  }
  uint64_t num_steps() const { return r_->total_steps(); }
  bool has_footer() const { return r_->has_footer(); }
  pyb::list chunks() const {
    pyb::list out;
    for (const auto& c : r_->chunks())
      out.append(pyb::dict("offset"_a = c.offset, "first_step"_a = c.h.first_step, "steps"_a = c.h.nsteps,
                           "values"_a = c.h.nvalues, "events"_a = c.h.nevents, "bytes"_a = 8 + trace::kChunkHeaderBytes + c.h.events_zsize + c.h.steps_zsize,
                           "first_compile"_a = c.h.first_compile, "last_compile"_a = c.h.last_compile,
                           "min_depth"_a = c.h.min_depth, "max_depth"_a = c.h.max_depth, "time_us"_a = c.h.time_us,
                           "events_zsize"_a = c.h.events_zsize, "events_rsize"_a = c.h.events_rsize,
                           "steps_zsize"_a = c.h.steps_zsize, "steps_rsize"_a = c.h.steps_rsize));
    return out;
  }
  // Every step of chunk k as tuples (index, compile, depth, frame_start, code, offset, opcode, arg,
  // line, stack after (value ids), locals changed ((slot, id), ...)), and the chunk's values.
  pyb::tuple chunk(size_t k) const {
    auto c = r_->chunk(k);
    if (!c) throw pyb::value_error(c.error().message());
    pyb::list steps;
    std::vector<trace::FrameView> frames = c->key_frames;
    uint32_t cur = c->key_compile;
    for (size_t i = 0; i < c->size(); ++i) {
      // incremental replay (Chunk::state_after, one step at a time)
      if (c->compile[i] != cur) frames.clear(), cur = c->compile[i];
      const size_t d = c->depth[i];
      if (c->frame_start[i]) frames.resize(d), frames.push_back(trace::FrameView{c->code[i], {}, {}});
      else frames.resize(d + 1);
      auto& f = frames[d];
      f.stack.resize(f.stack.size() - std::min<size_t>(c->pops[i], f.stack.size()));
      f.stack.insert(f.stack.end(), c->push_ids.begin() + c->push_at[i], c->push_ids.begin() + c->push_at[i + 1]);
      for (uint32_t j = c->local_at[i]; j < c->local_at[i + 1]; ++j) {
        auto [slot, id] = c->local_changes[j];
        if (static_cast<size_t>(slot) >= f.locals.size()) f.locals.resize(slot + 1, 0);
        f.locals[slot] = id;
      }
      steps.append(step_tuple(*c, i, frames));
    }
    pyb::list values;
    for (const auto& [key, v] : c->values)
      values.append(pyb::dict("compile"_a = v.compile, "id"_a = v.id, "step"_a = v.step, "kind"_a = v.kind,
                              "repr"_a = v.repr, "type"_a = v.type, "source"_a = v.source, "meta"_a = v.meta, "node"_a = v.node));
    return pyb::make_tuple(steps, values);
  }
  // Frames after step i: [(code, stack ids, locals ids)], outermost first.
  pyb::list state(uint64_t i) const {
    const size_t k = r_->chunk_of(i);
    if (k >= r_->chunks().size()) throw pyb::index_error("no step " + std::to_string(i));
    auto c = r_->chunk(k);
    if (!c) throw pyb::value_error(c.error().message());
    pyb::list out;
    for (const auto& f : c->state_after(static_cast<size_t>(i - c->first_step))) out.append(pyb::make_tuple(f.code, f.stack, f.locals));
    return out;
  }

 private:
  std::unique_ptr<trace::TraceReader> r_;
};

}  // namespace

void init_trace(pyb::module_& m) {
  // The graph-break table (core/break_ids.inc): [{"id", "title", "hint"}, ...] in id order.
  m.def("break_ids", []() {
    pyb::list out;
    for (const breaks::BreakInfo& b : breaks::table())
      out.append(pyb::dict("id"_a = std::string(b.id), "title"_a = std::string(b.title), "hint"_a = std::string(b.hint)));
    return out;
  });
  // Raises BlockingIOError when another process holds `path` (the caller picks another name),
  // OSError for any other failure to create it.
  m.def("_record_start", [](const std::string& path, const std::string& meta, int flush_ms, uint32_t chunk_steps) {
    if (g_recorder) throw std::runtime_error("dynview is already recording to " + g_path);
    trace::WriterOptions opts;
    opts.chunk_steps = chunk_steps;
    auto r = Recorder::create(path, nlohmann::json::parse(meta), opts, flush_ms);
    if (!r) {
      if (r.error().what == trace::TraceWriter::kBusy) {
        PyErr_SetString(PyExc_BlockingIOError, r.error().message().c_str());
        throw pyb::error_already_set();
      }
      PyErr_SetString(PyExc_OSError, r.error().message().c_str());
      throw pyb::error_already_set();
    }
    g_recorder = std::move(*r);
    g_path = path;
    g_flush_ms = flush_ms;
    g_chunk_steps = chunk_steps;
    set_recorder_observer(g_recorder.get());
  }, "path"_a, "meta"_a, "flush_ms"_a = 100, "chunk_steps"_a = 32768);
  // os.register_at_fork hooks (dynview/_trace.py). The child gives up the parent's recorder
  // without touching its thread (there is none in the child) and returns the settings it had,
  // (path, flush_ms, chunk_steps), so that Python starts the child's own trace; None when idle.
  m.def("_record_fork_prepare", []() {
    if (g_recorder) g_recorder->prepare_fork();
  });
  m.def("_record_fork_parent", []() {
    if (g_recorder) g_recorder->after_fork_parent();
  });
  m.def("_record_fork_child", []() -> pyb::object {
    if (!g_recorder) return pyb::none();
    set_recorder_observer(nullptr);
    g_recorder->after_fork_child();
    (void)g_recorder.release();  // leaked on purpose: its thread and condition variable are the parent's
    return pyb::make_tuple(g_path, g_flush_ms, g_chunk_steps);
  });
  m.def("_record_stop", []() -> pyb::object {
    if (!g_recorder) return pyb::none();
    set_recorder_observer(nullptr);
    RecorderStats s;
    {
      pyb::gil_scoped_release nogil;
      s = g_recorder->close();
    }
    g_recorder.reset();
    return stats_dict(s, g_path);
  });
  m.def("_record_stats", []() -> pyb::object {
    if (!g_recorder) return pyb::none();
    return stats_dict(g_recorder->stats(), g_path);
  });
  // The recorder's hot path alone: ns per step event (median of batches) for the same loop of
  // step events sent to the recorder (writing `path`) and to a do-nothing observer; returns
  // (recorder loop, do-nothing loop, writer thread ns per step).
  m.def("_bench_record_step", [](const std::string& path, int batches, int per_batch) {
    auto r = Recorder::create(path, nlohmann::json::object());
    if (!r) throw std::runtime_error(r.error().message());
    struct Null final : EngineObserver {};
    Null null;
    Recorder& rec = **r;
    auto loop = [&](EngineObserver* o) {
      asm volatile("" : "+r"(o));  // both loops make the same virtual call (no devirtualisation)
      EngineObserver& obs = *o;
      obs.on_compile_start(CompileStartEvent{{0, 0}, "f", "f.py", 1, "first call", 1});
      std::vector<int> stack{1, 2, 3};
      std::vector<std::pair<int, int>> none, one{{2, 3}};
      std::vector<double> ns;
      int step = 0, next = 4;
      for (int b = 0; b < batches; ++b) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < per_batch; ++i, ++step) {
          if (i % 3 == 0) stack.back() = next++;  // a new value now and then, like BINARY_OP
          obs.on_step(StepEvent{{0, 0}, step, 0, step == 0, 1, static_cast<uint32_t>((step % 40) * 2), 124, step % 7, 3 + step % 10,
                                &stack, i % 5 == 0 ? &one : &none});
        }
        ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / per_batch);
        // The engine spends microseconds per step between events (~90 us in record_overhead's
        // captures); pause so that the flusher drains the batch as it would keep up there.
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      std::sort(ns.begin(), ns.end());
      return ns[ns.size() / 2];
    };
    double with_rec, with_null;
    {
      pyb::gil_scoped_release nogil;
      with_null = loop(&null);
      with_rec = loop(&rec);
    }
    rec.close();
    return pyb::make_tuple(with_rec, with_null, rec.writer_ns_per_step());
  });
  pyb::class_<TraceFile>(m, "TraceFile", "A .dyn trace opened for reading (see dynview.load_trace).")
      .def(pyb::init<const std::string&>())
      .def("meta", &TraceFile::meta)
      .def("version", &TraceFile::version)
      .def("events", &TraceFile::events)
      .def("problems", &TraceFile::problems)
      .def("num_steps", &TraceFile::num_steps)
      .def("has_footer", &TraceFile::has_footer)
      .def("chunks", &TraceFile::chunks)
      .def("chunk", &TraceFile::chunk)
      .def("state", &TraceFile::state);
}

}  // namespace dv::py
