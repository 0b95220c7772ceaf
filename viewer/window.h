// `dynview RUN.dyn [...]`: the viewer window (window.cpp), interactive or headless.
#pragma once
#include <chrono>
#include <string>
#include <vector>

namespace dv::view {

struct ViewerOptions {
  std::string path;
  std::string screenshot;           // --screenshot OUT.png: render offscreen, write, exit
  std::string script;               // --script FILE: run commands, print the state after each (JSON lines)
  std::vector<std::string> select;  // --select compile:K | guard:I | node:NAME | break:I | recompile:I
  int64_t step = -1;                // --step N
  float scale = 0;                  // --scale S (0: the monitor's content scale)
  int width = 1600, height = 1000;  // --size WxH
  int bench_frames = 0;             // --bench-scrub N: scrub the timeline N frames, print timings
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

// Exit codes: 0 ok; 1 a script command failed; 2 unreadable trace or failed screenshot; 3 no
// display / no OpenGL 3.3; 64 usage.
int run_viewer(const ViewerOptions& o);

}  // namespace dv::view
