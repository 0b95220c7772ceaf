// The viewer's window: GLFW + OpenGL 3 + Dear ImGui (Debian's 1.86 and its backends). Runs the
// interactive loop, or headless (a hidden window, e.g. under xvfb-run with Mesa's software GL):
// --screenshot, --script and --bench-scrub.
#include "window.h"

#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>
#include <png.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <future>
#include <random>

#include "app.h"

namespace dv::view {
namespace {

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

bool write_png(const std::string& path, int w, int h, const std::vector<unsigned char>& rgba, std::string& err) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return err = "cannot write " + path, false;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    std::fclose(f);
    return err = "libpng failed writing " + path, false;
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, w, h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  std::vector<unsigned char> row(static_cast<size_t>(w) * 3);
  for (int y = h - 1; y >= 0; --y) {  // GL rows are bottom-up
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) row[x * 3 + c] = rgba[(static_cast<size_t>(y) * w + x) * 4 + c];
    png_write_row(png, row.data());
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(f);
  return true;
}

struct Window {
  GLFWwindow* w = nullptr;
  bool imgui = false;
  ~Window() {
    if (!w) return;
    if (imgui) {
      ImGui_ImplOpenGL3_Shutdown();
      ImGui_ImplGlfw_Shutdown();
      ImGui::DestroyContext();
    }
    glfwDestroyWindow(w);
    glfwTerminate();
  }
};

}  // namespace

int run_viewer(const ViewerOptions& o) {
  const auto t_start = o.start;
  const bool timing = std::getenv("DYNVIEW_TIMING") != nullptr;
  nlohmann::json phases = nlohmann::json::object();  // ms since start at the end of each phase
  auto phase = [&](const char* what) {
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start).count();
    phases[what] = ms;
    if (timing) std::fprintf(stderr, "dynview: %-18s %8.1f ms\n", what, ms);
  };
  phase("start");
  const bool headless = !o.screenshot.empty() || !o.script.empty() || o.bench_frames > 0;
  // The trace opens and ImGui's font atlas is built on another thread while GLFW (which wants the
  // main thread) connects to the display and creates the GL context.
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  auto opening = std::async(std::launch::async, [&] {
    unsigned char* px;
    int w, h;
    ImGui::GetIO().Fonts->GetTexDataAsRGBA32(&px, &w, &h);
    return Model::open(o.path);
  });
  glfwSetErrorCallback([](int, const char* d) { std::fprintf(stderr, "dynview: glfw: %s\n", d); });
  if (!glfwInit()) {
    if (auto m = opening.get(); !m) {  // a bad trace is the first thing to say
      std::fprintf(stderr, "dynview: %s\n", m.error().message().c_str());
      return 2;
    }
    std::fprintf(stderr, "dynview: no display to open a window on (set DISPLAY, or run under xvfb-run for --screenshot/--script)\n");
    return 3;
  }
  phase("display");
  Window win;
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_VISIBLE, headless ? GLFW_FALSE : GLFW_TRUE);
  float scale = o.scale;
  if (scale <= 0) {
    float sx = 1, sy = 1;
    if (GLFWmonitor* mon = glfwGetPrimaryMonitor()) glfwGetMonitorContentScale(mon, &sx, &sy);
    scale = std::max(1.0f, sx);
  }
  win.w = glfwCreateWindow(o.width, o.height, ("dynview - " + o.path).c_str(), nullptr, nullptr);
  if (!win.w) {
    opening.wait();
    std::fprintf(stderr, "dynview: cannot create an OpenGL 3.3 window\n");
    glfwTerminate();
    return 3;
  }
  glfwMakeContextCurrent(win.w);
  phase("window");
  glfwSwapInterval(headless ? 0 : 1);
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;  // the layout is fixed; nothing to remember between runs
  ImGui::StyleColorsDark();
  ImGui::GetStyle().ScaleAllSizes(scale);
  io.FontGlobalScale = scale;
  ImGui_ImplGlfw_InitForOpenGL(win.w, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");
  win.imgui = true;
  phase("imgui init");
  // The trace opened on another thread meanwhile (GLFW wants the main thread).
  auto model = opening.get();
  phase("trace open");
  if (!model) {
    std::fprintf(stderr, "dynview: %s\n", model.error().message().c_str());
    return 2;
  }
  Model& m = **model;
  for (size_t i = 0; i < m.processes().size(); ++i)
    for (const auto& p : m.reader(i).problems())
      std::fprintf(stderr, "dynview: warning: %s: %s (at byte %llu); showing what precedes it\n", m.processes()[i].path.c_str(), p.what.c_str(),
                   static_cast<unsigned long long>(p.offset));
  App app(m);
  for (const std::string& sel : o.select) {
    const std::string err = app.command("click " + sel);
    if (!err.empty()) {
      std::fprintf(stderr, "dynview: --select %s: %s\n", sel.c_str(), err.c_str());
      return 64;
    }
  }
  if (o.step >= 0) m.go_to(o.step);  // after --select: an explicit step wins

  auto render = [&](bool wait) {
    if (wait) m.state(true);
    glfwPollEvents();
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    ImGui::NewFrame();
    app.frame();
    ImGui::Render();
    int fw, fh;
    glfwGetFramebufferSize(win.w, &fw, &fh);
    glViewport(0, 0, fw, fh);
    glClearColor(0.10f, 0.10f, 0.12f, 1);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  };
  auto shoot = [&](const std::string& path) -> bool {
    for (int i = 0; i < 3; ++i) {  // layout settles over a couple of frames
      render(true);
      if (i < 2) glfwSwapBuffers(win.w);
    }
    int fw, fh;
    glfwGetFramebufferSize(win.w, &fw, &fh);
    std::vector<unsigned char> px(static_cast<size_t>(fw) * fh * 4);
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glReadBuffer(GL_BACK);
    glReadPixels(0, 0, fw, fh, GL_RGBA, GL_UNSIGNED_BYTE, px.data());
    glfwSwapBuffers(win.w);
    std::string err;
    if (!write_png(path, fw, fh, px, err)) {
      std::fprintf(stderr, "dynview: %s\n", err.c_str());
      return false;
    }
    return true;
  };


  // First frame (timed for the benchmark).
  render(false);
  glfwSwapBuffers(win.w);
  const double first_frame_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start).count();
  phase("first frame");

  if (o.bench_frames > 0) {
    // Scrub: the cursor sweeps the whole run (like dragging the timeline), a frame per move.
    std::vector<double> cpu;
    std::mt19937_64 rng(7);
    const int64_t total = static_cast<int64_t>(m.total_steps());
    for (int i = 0; i < o.bench_frames; ++i) {
      const double c0 = thread_cpu_ms();
      const int64_t target = i % 4 == 3 ? static_cast<int64_t>(rng() % std::max<int64_t>(1, total))
                                        : total * i / std::max(1, o.bench_frames);
      m.go_to(target, false);
      render(false);
      glFinish();
      cpu.push_back(thread_cpu_ms() - c0);
      glfwSwapBuffers(win.w);
    }
    std::sort(cpu.begin(), cpu.end());
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    nlohmann::json j{{"first_frame_ms", first_frame_ms}, {"phases_ms", phases}, {"frames", cpu.size()},
                     {"frame_cpu_ms_p50", cpu[cpu.size() / 2]}, {"frame_cpu_ms_p95", cpu[cpu.size() * 95 / 100]},
                     {"frame_cpu_ms_max", cpu.back()}, {"peak_rss_mb", ru.ru_maxrss / 1024.0}, {"steps", m.total_steps()}};
    std::cout << j.dump() << std::endl;
    return 0;
  }
  if (!o.script.empty()) {
    std::ifstream in(o.script);
    if (!in) {
      std::fprintf(stderr, "dynview: cannot read script %s\n", o.script.c_str());
      return 64;
    }
    int bad = 0;
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      std::string err;
      if (line.rfind("screenshot ", 0) == 0) {
        if (!shoot(line.substr(11))) err = "screenshot failed";
      } else {
        err = app.command(line);
      }
      render(true);  // the panes run on the new state (twice: clicks settle in one frame)
      glfwSwapBuffers(win.w);
      render(true);
      glfwSwapBuffers(win.w);
      nlohmann::json out{{"command", line}, {"state", app.snapshot()}};
      if (!err.empty()) out["error"] = err, ++bad;
      std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    }
    if (!o.screenshot.empty() && !shoot(o.screenshot)) return 2;
    return bad ? 1 : 0;
  }
  if (!o.screenshot.empty()) return shoot(o.screenshot) ? 0 : 2;
  while (!glfwWindowShouldClose(win.w)) {
    if (!m.pending()) glfwWaitEventsTimeout(0.05);
    render(false);
    glfwSwapBuffers(win.w);
  }
  return 0;
}

}  // namespace dv::view
