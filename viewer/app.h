// The viewer window: Dear ImGui panes over a view::Model (one small Draw function per pane, all
// following the model's cursor), the keyboard map, the FX graph laid out by Graphviz, and the
// --script commands (which call the same actions a click or a key does).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model.h"

namespace dv::view {

struct GraphLayout {  // Graphviz "dot" positions, in points, y down
  struct N { float x, y, w, h; int node; };
  struct E { std::vector<float> pts; };  // bezier control points x0,y0,x1,y1,...
  std::vector<N> nodes;
  std::vector<E> edges;
  float width = 0, height = 0;
  std::string error;
};
GraphLayout layout_graph(const Model& m, int graph);

class App {
 public:
  explicit App(Model& m) : m_(m) {}
  void frame();  // builds one ImGui frame (between NewFrame and Render)
  // A --script command ("key Right", "click guard 0", "goto 40", ...): "" when done, else why not.
  std::string command(const std::string& line);
  nlohmann::json snapshot();  // the model's snapshot plus what the panes show
  enum Key { Left, Right, ShiftLeft, ShiftRight, AltLeft, AltRight, CtrlG, CtrlB, F3, ShiftF3, Home, End };
  void key(Key k);
  std::vector<std::string> trace_warnings(bool wait) const;  // damaged tail, no footer, corrupt chunks: shown as a banner

 private:
  void shortcuts();
  void draw_compiles();
  void draw_timeline();
  void draw_source();
  void draw_bytecode();
  void draw_rewritten();
  void draw_stack();
  void draw_graph();
  void draw_tables();
  void draw_search();
  void sync_graph();
  const GraphLayout& layout(int g);         // cached Graphviz layout of graph g
  int break_site(const CodeView& cv) const;
  std::string guard_file(const Guard& g) const;   // the file of a guard's line
  std::string guard_where(const Guard& g) const;  // "model.py:12" as the guards pane shows it
  // Why the step panes are empty, in words, for a trace without steps (imported from TORCH_TRACE); "" otherwise.
  std::string no_steps_note() const;
  // The selected compile's bytecode as dis text from an imported log ("original"|"modified"), or null.
  const std::string* imported_bytecode(const char* which) const;
  std::vector<std::pair<unsigned, std::string>> why() const;  // (colour, line) shown above the source  // instruction index of the selected compile's break, or -1

  Model& m_;
  int graph_ = -1;  // graph shown in the FX pane
  std::map<int, GraphLayout> layouts_;
  float zoom_ = 1.0f;
  static constexpr float kLayoutFontPt = 12;  // the labels' font size in the Graphviz layout
  // The FX view: re-centred when the graph, the selected node or the zoom changes; what it drew.
  int view_graph_ = -2, view_node_ = -2;
  float view_zoom_ = 0, view_label_px_ = 0;
  bool view_selected_visible_ = false;
  float pan_x_ = 0, pan_y_ = 0;
  int64_t last_cursor_ = -1;
  bool scroll_to_cursor_ = true;
  bool goto_popup_ = false;
  char goto_buf_[32] = "";
  char search_buf_[128] = "";
  char filter_buf_[128] = "";
  std::vector<std::vector<std::pair<int, std::vector<int>>>> code_groups_;  // per process: (code id, its compiles) for the tree
  size_t grouped_ = SIZE_MAX;                                   // compiles grouped so far
  std::string fx_tab_ = "nodes";  // the FX pane's lower tab: nodes | code
  bool force_fx_tab_ = true;
  std::string tab_ = "guards";  // the tables pane's tab
  bool force_tab_ = true;        // select tab_ in the next frame (a followed link, the "tab" command)
  int last_sel_[3] = {-1, -1, -1};  // selected guard, break, recompile as of the last frame
};

}  // namespace dv::view
