// The viewer's panes (see app.h). Layout: compiles and tables on the left, the timeline on top,
// source / original bytecode / rewritten bytecode in the middle, stack+locals and the FX graph on
// the right. Every pane reads the model's cursor; clicks call the model's actions.
#include "app.h"

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>
#include <imgui.h>

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <sstream>

#include "core/opcodes.h"

namespace dv::view {
using nlohmann::json;

namespace {
const ImU32 kAccent = IM_COL32(255, 196, 64, 255);
const ImU32 kGuardCol = IM_COL32(90, 170, 255, 255);
const ImU32 kNodeCol = IM_COL32(110, 220, 120, 255);
const ImU32 kBreakCol = IM_COL32(255, 80, 80, 255);

// "torch._C._nn.linear" -> "linear", "<built-in function add>" -> "add": the FX pane's node label.
std::string short_target(const std::string& t) {
  std::string s = t;
  if (s.size() > 2 && s.front() == '<' && s.back() == '>') {
    s = s.substr(1, s.size() - 2);
    if (const size_t sp = s.find_last_of(' '); sp != std::string::npos) s = s.substr(sp + 1);
  }
  if (const size_t dot = s.find_last_of('.'); dot != std::string::npos && dot + 1 < s.size()) s = s.substr(dot + 1);
  return s;
}

// What a node does, short: "linear", ".sum()", a module or attribute path, or its op.
std::string node_what(const Node& n) {
  if (n.op == "call_function") return short_target(n.target);
  if (n.op == "call_method") return "." + n.target + "()";
  if (n.op == "call_module" || n.op == "get_attr") return n.target;
  return n.op;
}

std::string node_label(const Node& n) {
  const std::string what = node_what(n);
  return what == n.name ? n.name : n.name + "\n" + what;
}

bool passes(const char* filter, const std::string& s) {
  if (!filter[0]) return true;
  std::string a = s, b = filter;
  std::transform(a.begin(), a.end(), a.begin(), ::tolower);
  std::transform(b.begin(), b.end(), b.begin(), ::tolower);
  return a.find(b) != std::string::npos;
}
}  // namespace

// ---- FX graph layout (Graphviz dot) ------------------------------------------------------------

GraphLayout layout_graph(const Model& m, int gi) {
  GraphLayout out;
  if (gi < 0 || static_cast<size_t>(gi) >= m.graphs().size()) return out;
  const Graph& g = m.graphs()[gi];
  GVC_t* gvc = gvContext();
  Agraph_t* G = agopen(const_cast<char*>("fx"), Agdirected, nullptr);
  agattr(G, AGRAPH, const_cast<char*>("rankdir"), const_cast<char*>("TB"));
  agattr(G, AGNODE, const_cast<char*>("shape"), const_cast<char*>("box"));
  agattr(G, AGNODE, const_cast<char*>("label"), const_cast<char*>(""));
  // Courier 12 pt is ~7.2 pt a character, close to the 7 px of ImGui's default 13 px font.
  agattr(G, AGNODE, const_cast<char*>("fontname"), const_cast<char*>("Courier"));
  agattr(G, AGNODE, const_cast<char*>("fontsize"), const_cast<char*>("12"));  // kLayoutFontPt
  agattr(G, AGNODE, const_cast<char*>("margin"), const_cast<char*>("0.08,0.04"));
  agattr(G, AGRAPH, const_cast<char*>("nodesep"), const_cast<char*>("0.2"));
  agattr(G, AGRAPH, const_cast<char*>("ranksep"), const_cast<char*>("0.3"));
  std::map<std::string, Agnode_t*> by_name;
  std::vector<Agnode_t*> gnodes;
  for (int ni : g.nodes) {
    const Node& n = m.nodes()[ni];
    Agnode_t* a = agnode(G, const_cast<char*>(n.name.c_str()), 1);
    const std::string label = node_label(n);
    agsafeset(a, const_cast<char*>("label"), const_cast<char*>(label.c_str()), const_cast<char*>(""));
    by_name[n.name] = a;
    gnodes.push_back(a);
  }
  // Edges: a node's args name the nodes it uses.
  for (int ni : g.nodes) {
    const Node& n = m.nodes()[ni];
    std::string tok;
    auto flush = [&] {
      auto it = by_name.find(tok);
      if (!tok.empty() && it != by_name.end() && tok != n.name) agedge(G, it->second, by_name[n.name], nullptr, 1);
      tok.clear();
    };
    for (char c : n.args) {
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') tok += c;
      else flush();
    }
    flush();
  }
  if (gvLayout(gvc, G, "dot") != 0) {
    out.error = "graphviz layout failed";
  } else {
    const boxf bb = GD_bb(G);
    out.width = static_cast<float>(bb.UR.x - bb.LL.x);
    out.height = static_cast<float>(bb.UR.y - bb.LL.y);
    auto fy = [&](double y) { return static_cast<float>(bb.UR.y - y); };
    for (size_t i = 0; i < gnodes.size(); ++i) {
      Agnode_t* a = gnodes[i];
      out.nodes.push_back({static_cast<float>(ND_coord(a).x - bb.LL.x), fy(ND_coord(a).y), static_cast<float>(ND_width(a) * 72),
                           static_cast<float>(ND_height(a) * 72), g.nodes[i]});
      for (Agedge_t* e = agfstout(G, a); e; e = agnxtout(G, e)) {
        GraphLayout::E edge;
        if (ED_spl(e) && ED_spl(e)->size > 0) {
          const bezier& bz = ED_spl(e)->list[0];
          for (int k = 0; k < bz.size; ++k) {
            edge.pts.push_back(static_cast<float>(bz.list[k].x - bb.LL.x));
            edge.pts.push_back(fy(bz.list[k].y));
          }
          if (bz.eflag) {
            edge.pts.push_back(static_cast<float>(bz.ep.x - bb.LL.x));
            edge.pts.push_back(fy(bz.ep.y));
          }
        }
        out.edges.push_back(std::move(edge));
      }
    }
    gvFreeLayout(gvc, G);
  }
  agclose(G);
  gvFreeContext(gvc);
  return out;
}

// ---- keys and script commands -----------------------------------------------------------------

void App::key(Key k) {
  switch (k) {
    case Left: m_.step_by(-1); break;
    case Right: m_.step_by(1); break;
    case ShiftLeft: m_.step_over(-1); break;
    case ShiftRight: m_.step_over(1); break;
    case AltLeft: m_.back(); break;
    case AltRight: m_.forward(); break;
    case CtrlG: goto_popup_ = true; break;
    case CtrlB: m_.toggle_bookmark(); break;
    case F3: m_.search_step(1); break;
    case ShiftF3: m_.search_step(-1); break;
    case Home: if (m_.selected_compile() >= 0) m_.select_compile(m_.selected_compile()); break;
    case End:
      if (m_.selected_compile() >= 0) {
        const Compile& c = m_.compiles()[m_.selected_compile()];
        m_.go_to(static_cast<int64_t>(c.first_step + std::max<uint64_t>(c.steps, 1) - 1));
      }
      break;
  }
  scroll_to_cursor_ = true;
}

void App::shortcuts() {
  ImGuiIO& io = ImGui::GetIO();
  if (io.WantTextInput) return;
  auto pressed = [](ImGuiKey k) { return ImGui::IsKeyPressed(ImGui::GetKeyIndex(k)); };
  if (pressed(ImGuiKey_LeftArrow)) key(io.KeyAlt ? AltLeft : io.KeyShift ? ShiftLeft : Left);
  if (pressed(ImGuiKey_RightArrow)) key(io.KeyAlt ? AltRight : io.KeyShift ? ShiftRight : Right);
  if (pressed(ImGuiKey_Home)) key(Home);
  if (pressed(ImGuiKey_End)) key(End);
  if (io.KeyCtrl && ImGui::IsKeyPressed('G' - 'A' + 65)) key(CtrlG);  // GLFW_KEY_G == 'G'
  if (io.KeyCtrl && ImGui::IsKeyPressed('B')) key(CtrlB);
  if (ImGui::IsKeyPressed(292 /* GLFW_KEY_F3 */)) key(io.KeyShift ? ShiftF3 : F3);
}

std::string App::command(const std::string& line) {
  std::istringstream in(line);
  std::string verb, what;
  in >> verb;
  auto num = [&](int64_t& v) { return static_cast<bool>(in >> v); };
  int64_t n = 0;
  if (verb == "goto" || verb == "step") {
    if (!num(n)) return "goto needs a step";
    m_.go_to(n);
  } else if (verb == "key") {
    in >> what;
    static const std::map<std::string, Key> keys{{"Left", Left}, {"Right", Right}, {"Shift+Left", ShiftLeft},
                                                 {"Shift+Right", ShiftRight}, {"Alt+Left", AltLeft}, {"Alt+Right", AltRight},
                                                 {"Ctrl+G", CtrlG}, {"Ctrl+B", CtrlB}, {"F3", F3}, {"Shift+F3", ShiftF3},
                                                 {"Home", Home}, {"End", End}};
    auto it = keys.find(what);
    if (it == keys.end()) return "unknown key '" + what + "'";
    if (it->second == CtrlG) {  // Ctrl+G N: the popup's input, then Enter
      if (!num(n)) return "Ctrl+G needs a step";
      m_.go_to(n);
    } else {
      int64_t times = 1;  // "key Right 3" (a count that does not parse, or overflows, is refused)
      constexpr int64_t kMaxTimes = 1'000'000;
      in >> std::ws;
      if (!in.eof() && (!num(times) || times < 1 || times > kMaxTimes))
        return "key " + what + ": TIMES must be 1 to " + std::to_string(kMaxTimes);
      for (int64_t i = 0; i < times; ++i) key(it->second);
    }
  } else if (verb == "click") {
    in >> what;
    // An index out of range is said (with how many there are), never clamped or ignored.
    auto index = [&](const char* kind, size_t count, int64_t& i) -> std::string {
      std::string tok;
      if (!(in >> tok)) return std::string("click ") + kind + " needs an index";
      char* end = nullptr;
      errno = 0;
      const long long v = std::strtoll(tok.c_str(), &end, 10);
      if (*end || errno == ERANGE || v < 0 || static_cast<unsigned long long>(v) >= count)
        return std::string("no ") + kind + " '" + tok + "' (the trace has " + std::to_string(count) + ", numbered from 0)";
      i = v;
      return "";
    };
    std::string bad;
    if (what == "compile") { if ((bad = index("compile", m_.compiles().size(), n)).empty()) m_.select_compile(static_cast<int>(n)); }
    else if (what == "guard") { if ((bad = index("guard", m_.guards().size(), n)).empty()) m_.follow_guard(static_cast<int>(n)); }
    else if (what == "break") { if ((bad = index("break", m_.breaks().size(), n)).empty()) m_.follow_break(static_cast<int>(n)); }
    else if (what == "recompile") { if ((bad = index("recompile", m_.recompiles().size(), n)).empty()) m_.follow_recompile(static_cast<int>(n)); }
    else if (what == "node") {  // by name (in the selected compile) or by index
      std::string name;
      in >> name;
      int found = -1;
      for (size_t i = 0; i < m_.nodes().size(); ++i)
        if (m_.nodes()[i].name == name && (found < 0 || m_.nodes()[i].compile == m_.selected_compile())) found = static_cast<int>(i);
      if (found < 0 && !name.empty() && std::all_of(name.begin(), name.end(), ::isdigit)) {
        errno = 0;
        const unsigned long long v = std::strtoull(name.c_str(), nullptr, 10);
        if (errno == ERANGE || v >= m_.nodes().size())
          return "no graph node '" + name + "' (the trace has " + std::to_string(m_.nodes().size()) + " nodes, numbered from 0)";
        found = static_cast<int>(v);
      }
      if (found < 0) return "no graph node '" + name + "'";
      m_.follow_node(found);
    } else if (what == "stack") {  // stack slot (0 = bottom) of the innermost frame
      if (!num(n)) return "click stack needs a slot";
      const StepState& s = m_.state(true);
      if (n < 0 || static_cast<size_t>(n) >= s.stack.size()) return "no stack slot " + std::to_string(n);
      m_.follow_value(s.stack[n].id);
    } else if (what == "local") {
      std::string name;
      in >> name;
      const StepState& s = m_.state(true);
      auto cv = m_.code_view(s.code);
      bool ok = false;
      for (size_t i = 0; i < s.locals.size() && !ok; ++i)
        if (cv->error.empty() && static_cast<size_t>(s.local_slots[i]) < cv->info.localsplusnames.size() &&
            cv->info.localsplusnames[s.local_slots[i]] == name)
          m_.follow_value(s.locals[i].id), ok = true;
      if (!ok) return "no local '" + name + "'";
    } else if (what == "timeline") {  // fraction of the selected compile
      double f;
      if (!(in >> f) || !std::isfinite(f) || f < 0 || f > 1) return "click timeline needs a fraction from 0 to 1";
      if (m_.selected_compile() < 0) return "no compile";
      const Compile& c = m_.compiles()[m_.selected_compile()];
      m_.go_to(static_cast<int64_t>(c.first_step + static_cast<uint64_t>(f * static_cast<double>(std::max<uint64_t>(c.steps, 1) - 1))));
    } else {
      return "unknown click target '" + what + "' (compile, guard, break, recompile, node, stack, local, timeline)";
    }
    if (!bad.empty()) return bad;
  } else if (verb == "back") {
    m_.back();
  } else if (verb == "forward") {
    m_.forward();
  } else if (verb == "bookmark") {
    m_.toggle_bookmark();
  } else if (verb == "next-bookmark" || verb == "prev-bookmark") {
    m_.next_bookmark(verb == "next-bookmark" ? 1 : -1);
  } else if (verb == "search") {
    std::string q;
    std::getline(in >> std::ws, q);
    std::snprintf(search_buf_, sizeof search_buf_, "%s", q.c_str());
    m_.search(q);
  } else if (verb == "search-next" || verb == "search-prev") {
    m_.search_step(verb == "search-next" ? 1 : -1);
  } else if (verb == "tab") {
    in >> tab_;
    force_tab_ = true;
  } else if (verb == "fxtab") {  // the FX pane's lower tab: nodes | code
    in >> fx_tab_;
    if (fx_tab_ != "nodes" && fx_tab_ != "code") return "fxtab is nodes or code";
    force_fx_tab_ = true;
  } else if (verb == "zoom") {
    double z;
    if (!(in >> z) || !std::isfinite(z) || z <= 0 || z > 64) return "zoom needs a factor above 0 and at most 64";
    zoom_ = static_cast<float>(z);
  } else if (verb != "print" && verb != "frame" && !verb.empty() && verb[0] != '#') {
    return "unknown command '" + verb + "'";
  }
  scroll_to_cursor_ = true;
  return "";
}

json App::snapshot() {
  json j = m_.snapshot();
  sync_graph();
  j["graph_shown"] = graph_;
  // The break site the original-bytecode pane marks (the compiled frame's instruction).
  if (const int ci = m_.selected_compile(); ci >= 0 && m_.compiles()[ci].code >= 0) {
    auto cv = m_.code_view(m_.compiles()[ci].code);
    if (const int b = break_site(*cv); b >= 0) j["break_instruction"] = cv->lines[b];
  }
  j["generated_code"] = json::array();  // the rewritten-bytecode pane's tabs: transformed code, resume functions
  if (const int ci = m_.selected_compile(); ci >= 0)
    for (const auto& gc : m_.compiles()[ci].gen_codes) j["generated_code"].push_back(gc.first);
  j["guards_shown"] = json::array();  // the guards pane's rows for the selected compile
  if (const int ci = m_.selected_compile(); ci >= 0)
    for (int gi : m_.compiles()[ci].guards) {
      const Guard& g = m_.guards()[gi];
      j["guards_shown"].push_back(json{{"kind", g.kind}, {"text", g.text}, {"where", guard_where(g)}, {"file", guard_file(g)}, {"line", g.line}});
    }
  j["tab"] = tab_;
  j["fx_tab"] = fx_tab_;
  j["trace_warnings"] = trace_warnings(true);
  if (graph_ >= 0 && fx_tab_ == "code") j["fx_code"] = m_.graphs()[graph_].code;
  j["why"] = json::array();
  for (const auto& w : why()) j["why"].push_back(w.second);
  if (const std::string note = no_steps_note(); !note.empty()) j["no_step_data"] = note;
  if (const std::string* bc = imported_bytecode("original")) j["imported_bytecode"] = *bc;
  if (graph_ >= 0) {
    const GraphLayout& l = layout(graph_);
    j["graph_layout_nodes"] = l.nodes.size();
    j["graph_layout_edges"] = l.edges.size();
    // As last drawn: the label pixel height against the UI font's, and whether the selected node
    // is inside the canvas.
    j["graph_view"] = json{{"zoom", zoom_}, {"label_px", view_label_px_}, {"font_px", ImGui::GetFontSize()},
                           {"selected_visible", view_selected_visible_}};
  }
  return j;
}

const GraphLayout& App::layout(int g) {
  auto it = layouts_.find(g);
  if (it == layouts_.end()) it = layouts_.emplace(g, layout_graph(m_, g)).first;
  return it->second;
}

// The file a guard's line is in: its own (the frame, possibly inlined, that added it), else (older or
// imported traces) its compile's. The pane shows the base name: "model.py:12"; "-" for set-up guards.
std::string App::guard_file(const Guard& g) const {
  if (!g.filename.empty()) return g.filename;
  return g.compile >= 0 && static_cast<size_t>(g.compile) < m_.compiles().size() ? m_.compiles()[g.compile].filename : "";
}
std::string App::guard_where(const Guard& g) const {
  if (g.line <= 0) return "-";
  const std::string f = guard_file(g);
  return f.substr(f.find_last_of('/') + 1) + ":" + std::to_string(g.line);
}

// Index of the instruction of `cv` where the selected compile broke, if `cv` is its frame's code.
int App::break_site(const CodeView& cv) const {
  const int ci = m_.selected_compile();
  if (ci < 0 || m_.compiles()[ci].breaks.empty() || m_.compiles()[ci].code != cv.id) return -1;
  const Break& b = m_.breaks()[m_.compiles()[ci].breaks.front()];
  for (size_t i = 0; i < cv.decoded.instrs.size(); ++i)
    if (static_cast<int>(cv.decoded.instrs[i].offset) == b.offset) return static_cast<int>(i);
  return -1;
}

// What the Source pane says above the code about the selected compile: its graph break (id, line,
// message, hint) and, for a recompile, the guard failure that caused it.
std::vector<std::pair<ImU32, std::string>> App::why() const {
  std::vector<std::pair<ImU32, std::string>> out;
  const int ci = m_.selected_compile();
  if (ci < 0) return out;
  const Compile& c = m_.compiles()[ci];
  for (int bi : c.breaks) {
    const Break& b = m_.breaks()[bi];
    out.push_back({IM_COL32(255, 115, 115, 255), "graph break " + b.id_and_title() + " at line " + std::to_string(b.line) + ": " + b.message});
    if (!b.hint.empty()) out.push_back({IM_COL32(217, 190, 140, 255), "hint: " + b.hint});
  }
  if (c.reason.rfind("resume function", 0) == 0) out.push_back({IM_COL32(140, 200, 255, 255), "[" + c.id + "] is a " + c.reason});
  else if (!c.reason.empty() && c.reason != "first call") out.push_back({IM_COL32(255, 196, 64, 255), "recompiled [" + c.id + "]: " + c.reason});
  return out;
}

std::string App::no_steps_note() const {
  if (m_.total_steps() > 0) return "";
  const auto& meta = m_.reader().meta();
  if (meta.is_object() && meta.value("source", "") == "TORCH_TRACE")
    return "no step data: this trace was imported from torch.compile's TORCH_TRACE log, which records compiles, guards, graphs and "
           "breaks but not the symbolic execution (no steps, stack or locals)";
  return "no step data: this trace holds no recorded steps";
}

const std::string* App::imported_bytecode(const char* which) const {
  const int ci = m_.selected_compile();
  if (ci < 0) return nullptr;
  for (const auto& [w, text] : m_.compiles()[ci].bytecode)
    if (w == which) return &text;
  return nullptr;
}

// The FX pane shows the graph of the selected node, else the selected compile's first graph.
void App::sync_graph() {
  int g = -1;
  if (m_.selected_node() >= 0 && m_.nodes()[m_.selected_node()].compile == m_.selected_compile()) g = m_.nodes()[m_.selected_node()].graph;
  else if (m_.selected_compile() >= 0 && !m_.compiles()[m_.selected_compile()].graphs.empty()) g = m_.compiles()[m_.selected_compile()].graphs.front();
  if (g != graph_) {
    graph_ = g;
    pan_x_ = pan_y_ = 0;
  }
}

// ---- frame --------------------------------------------------------------------------------------

void App::frame() {
  shortcuts();
  // A link followed from any pane shows its table: a guard (also a recompile's failing guard), a
  // break, a recompile.
  const int sel[3] = {m_.selected_guard(), m_.selected_break(), m_.selected_recompile()};
  static const char* const tabs[3] = {"guards", "breaks", "recompiles"};
  for (int i = 3; i-- > 0;)  // a recompile link also selects its failing guard: the guard's table wins
    if (sel[i] != last_sel_[i]) {
      if (sel[i] >= 0) tab_ = tabs[i], force_tab_ = true;
      last_sel_[i] = sel[i];
    }
  m_.state(false);  // asks the loader for the cursor's chunk early in the frame
  sync_graph();
  const ImVec2 size = ImGui::GetIO().DisplaySize;
  const float left = std::round(size.x * 0.22f), right = std::round(size.x * 0.27f), top = std::round(size.y * 0.15f);
  const float mid = size.x - left - right;
  auto place = [](float x, float y, float w, float h) {
    ImGui::SetNextWindowPos(ImVec2(x, y), ImGuiCond_Always);
    ImGui::SetNextWindowSize(ImVec2(w, h), ImGuiCond_Always);
  };
  const ImGuiWindowFlags fixed = ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse;
  place(0, 0, left, size.y * 0.45f);
  if (ImGui::Begin("Compiles", nullptr, fixed)) draw_compiles();
  ImGui::End();
  place(0, size.y * 0.45f, left, size.y * 0.55f);
  if (ImGui::Begin("Guards / breaks / recompiles / search", nullptr, fixed)) draw_tables();
  ImGui::End();
  place(left, 0, mid, top);
  if (ImGui::Begin("Timeline", nullptr, fixed)) draw_timeline();
  ImGui::End();
  place(left, top, mid, (size.y - top) * 0.45f);
  if (ImGui::Begin("Source", nullptr, fixed)) draw_source();
  ImGui::End();
  place(left, top + (size.y - top) * 0.45f, mid * 0.5f, (size.y - top) * 0.55f);
  if (ImGui::Begin("Original bytecode", nullptr, fixed)) draw_bytecode();
  ImGui::End();
  place(left + mid * 0.5f, top + (size.y - top) * 0.45f, mid * 0.5f, (size.y - top) * 0.55f);
  if (ImGui::Begin("Rewritten bytecode", nullptr, fixed)) draw_rewritten();
  ImGui::End();
  place(left + mid, 0, right, size.y * 0.40f);
  if (ImGui::Begin("Stack and locals", nullptr, fixed)) draw_stack();
  ImGui::End();
  place(left + mid, size.y * 0.40f, right, size.y * 0.60f);
  if (ImGui::Begin("FX graph", nullptr, fixed)) draw_graph();
  ImGui::End();
  if (goto_popup_) {
    ImGui::OpenPopup("Go to step");
    goto_popup_ = false;
  }
  if (ImGui::BeginPopupModal("Go to step", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
    ImGui::SetKeyboardFocusHere();
    if (ImGui::InputText("step", goto_buf_, sizeof goto_buf_, ImGuiInputTextFlags_EnterReturnsTrue | ImGuiInputTextFlags_CharsDecimal)) {
      m_.go_to(std::strtoll(goto_buf_, nullptr, 10));
      ImGui::CloseCurrentPopup();
    }
    if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape))) ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
  }
  if (m_.cursor() != last_cursor_) {
    last_cursor_ = m_.cursor();
    scroll_to_cursor_ = true;
  } else {
    scroll_to_cursor_ = false;
  }
}

// Process -> code object -> compile, as TorchDynamo's compile ids read: [frame/recompile]. The
// default font is monospaced, so a compile's row is one padded line.
// What is wrong with the trace as a whole (a damaged tail, no footer), for the banner above the
// compiles and the --script state: the same facts `dynview check` refuses a trace for.
// In a directory each line starts with the process's file name. Corrupt chunks are found by the
// model's background verification (`wait`: wait for it).
std::vector<std::string> App::trace_warnings(bool wait) const {
  std::vector<std::string> w;
  auto who = [&](size_t p) {
    const std::string& f = m_.processes()[p].path;
    return m_.is_directory() ? f.substr(f.find_last_of('/') + 1) + ": " : std::string();
  };
  for (size_t i = 0; i < m_.processes().size(); ++i) {
    for (const auto& p : m_.reader(i).problems())
      w.push_back(who(i) + p.what + " (at byte " + std::to_string(p.offset) + "); showing what precedes it");
    if (!m_.reader(i).has_footer())
      w.push_back(who(i) + "incomplete trace: no footer (the recording was killed, is still running, or a write failed)");
  }
  for (const auto& [p, what] : m_.verify_problems(wait)) w.push_back(who(static_cast<size_t>(p)) + what + "; its steps cannot be shown");
  return w;
}

void App::draw_compiles() {
  for (const std::string& w : trace_warnings(false)) ImGui::TextColored(ImVec4(1.0f, 0.45f, 0.35f, 1), "%s", w.c_str());
  // Per process, code objects in order of their first compile (grouped once: the compiles are read at open).
  auto& groups = code_groups_;
  if (grouped_ != m_.compiles().size()) {
    groups.assign(m_.processes().size(), {});
    std::vector<std::map<int, size_t>> at(m_.processes().size());
    for (const Compile& c : m_.compiles()) {
      auto& codes = groups[static_cast<size_t>(c.process)];
      auto [it, fresh] = at[static_cast<size_t>(c.process)].emplace(c.code, codes.size());
      if (fresh) codes.push_back({c.code, {}});
      codes[it->second].second.push_back(c.index);
    }
    grouped_ = m_.compiles().size();
  }
  ImGui::SetCursorPosX(ImGui::GetCursorPosX() + 2 * ImGui::GetStyle().IndentSpacing);
  ImGui::TextDisabled("%-6s%-9s%-7s%4s %4s", "id", "outcome", "g/b/gd", "ms", "hits");
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("compile id [frame/recompile], outcome, graphs/breaks/guards, compile time, runs (cache hits + eager runs)");
  ImGui::BeginChild("tree");
  for (size_t pi = 0; pi < m_.processes().size(); ++pi) {
  const Process& proc = m_.processes()[pi];
  const auto& meta = m_.reader(pi).meta();
  ImGui::SetNextItemOpen(true, ImGuiCond_Once);
  const std::string root = "process " + (proc.pid >= 0 ? std::to_string(proc.pid) : std::string("?")) +
                           (proc.rank >= 0 ? " rank " + std::to_string(proc.rank) : std::string()) + " (" +
                           std::to_string(proc.compiles.size()) + " compiles, " + std::to_string(proc.steps) + " steps)##root" +
                           std::to_string(pi);
  const bool open = ImGui::TreeNodeEx(root.c_str(), ImGuiTreeNodeFlags_SpanAvailWidth);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s\n%s", proc.path.c_str(), meta.dump(1).c_str());
  if (open) {
    for (const auto& [code, list] : groups[pi]) {
      const Compile& first = m_.compiles()[list.front()];
      ImGui::SetNextItemOpen(true, ImGuiCond_Once);
      const std::string file = first.filename.substr(first.filename.find_last_of('/') + 1);
      const std::string label = first.qualname + "  " + file + ":" + std::to_string(first.firstlineno) + "##code" + std::to_string(code);
      const bool copen = ImGui::TreeNodeEx(label.c_str(), ImGuiTreeNodeFlags_SpanAvailWidth);
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s\n%s:%d\n%zu compiles", first.qualname.c_str(), first.filename.c_str(), first.firstlineno, list.size());
      if (!copen) continue;
      for (int i : list) {
        const Compile& c = m_.compiles()[i];
        char row[160];
        std::snprintf(row, sizeof row, "[%s]", c.id.c_str());
        const std::string counts = std::to_string(c.graphs.size()) + "/" + std::to_string(c.breaks.size()) + "/" + std::to_string(c.guards.size());
        const bool broke = c.outcome.rfind("break", 0) == 0;  // "break (eager)"
        const std::string outcome = broke ? "break" : c.outcome;
        std::snprintf(row + std::strlen(row), sizeof row - std::strlen(row), "%*s%-8s %-6s %4.0f %4lld##c%d",
                      std::max(1, 6 - static_cast<int>(c.id.size() + 2)), "", outcome.c_str(), counts.c_str(), c.seconds * 1e3,
                      static_cast<long long>(c.hits + c.eager_runs), i);
        const bool red = broke || c.outcome == "error";
        if (red) ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1, .5f, .5f, 1));
        if (ImGui::Selectable(row, m_.selected_compile() == i)) m_.select_compile(i);
        if (red) ImGui::PopStyleColor();
        if (ImGui::IsItemHovered())
          ImGui::SetTooltip("[%s] %s\nwhy compiled: %s\n%s: %zu graphs, %zu breaks, %zu guards\n%llu steps, %.1f ms, %lld cache hits, %lld eager runs",
                            c.id.c_str(), c.qualname.c_str(), c.reason.c_str(), c.outcome.c_str(), c.graphs.size(), c.breaks.size(),
                            c.guards.size(), static_cast<unsigned long long>(c.steps), c.seconds * 1e3, static_cast<long long>(c.hits),
                            static_cast<long long>(c.eager_runs));
      }
      ImGui::TreePop();
    }
    ImGui::TreePop();
  }
  }
  ImGui::EndChild();
}

void App::draw_timeline() {
  const int ci = m_.selected_compile();
  ImGui::Text("step %lld / %llu", static_cast<long long>(m_.cursor()), static_cast<unsigned long long>(m_.total_steps()));
  ImGui::SameLine();
  if (ImGui::SmallButton("<")) m_.back();
  ImGui::SameLine();
  if (ImGui::SmallButton(">")) m_.forward();
  ImGui::SameLine();
  if (ImGui::SmallButton("bookmark")) m_.toggle_bookmark();
  ImGui::SameLine();
  ImGui::TextDisabled("  arrows step, shift steps over calls, alt back/forward, ctrl+G go to, ctrl+B bookmark, F3 next hit");
  if (const std::string note = no_steps_note(); !note.empty()) {
    ImGui::TextWrapped("%s", note.c_str());
    return;
  }
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float w = ImGui::GetContentRegionAvail().x;
  // Whole run: compiles as segments.
  ImVec2 p = ImGui::GetCursorScreenPos();
  const float h1 = 10;
  const double total = std::max<double>(1.0, static_cast<double>(m_.total_steps()));
  for (const Compile& c : m_.compiles()) {
    const float x0 = p.x + static_cast<float>(c.first_step / total) * w, x1 = p.x + static_cast<float>((c.first_step + c.steps) / total) * w;
    dl->AddRectFilled(ImVec2(x0, p.y), ImVec2(std::max(x0 + 1, x1 - 1), p.y + h1),
                      c.index == ci ? IM_COL32(120, 140, 200, 255) : IM_COL32(70, 80, 100, 255));
  }
  const float cx = p.x + static_cast<float>(m_.cursor() / total) * w;
  dl->AddLine(ImVec2(cx, p.y - 1), ImVec2(cx, p.y + h1 + 1), kAccent, 2);
  ImGui::InvisibleButton("run", ImVec2(w, h1));
  if (ImGui::IsItemActive())
    m_.go_to(static_cast<int64_t>(std::clamp((ImGui::GetIO().MousePos.x - p.x) / w, 0.0f, 1.0f) * total), ImGui::IsItemActivated());
  if (ci < 0) return;
  // Selected compile: depth band and markers.
  const Compile& c = m_.compiles()[ci];
  p = ImGui::GetCursorScreenPos();
  const float h2 = std::max(24.0f, ImGui::GetContentRegionAvail().y - 4);
  const int n = std::max(1, static_cast<int>(w / 2));
  const std::vector<int> depth = m_.depth_samples(static_cast<int64_t>(c.first_step), static_cast<int64_t>(c.first_step + c.steps), n);
  int maxd = 1;
  for (int d : depth) maxd = std::max(maxd, d + 1);
  for (int i = 0; i < n; ++i) {
    if (depth[i] < 0) continue;
    const float bh = (h2 * 0.5f) * static_cast<float>(depth[i] + 1) / static_cast<float>(maxd);
    dl->AddRectFilled(ImVec2(p.x + i * 2, p.y + h2 * 0.5f - bh), ImVec2(p.x + i * 2 + 2, p.y + h2 * 0.5f), IM_COL32(80, 110, 160, 255));
  }
  const double cs = std::max<double>(1.0, static_cast<double>(c.steps));
  auto mark = [&](int64_t step, ImU32 col, float y0, float y1) {
    if (step < static_cast<int64_t>(c.first_step)) return;
    const float x = p.x + static_cast<float>((step - c.first_step) / cs) * w;
    dl->AddLine(ImVec2(x, p.y + y0), ImVec2(x, p.y + y1), col, 1.5f);
  };
  for (int g : c.guards) mark(m_.guards()[g].step, kGuardCol, h2 * 0.55f, h2 * 0.70f);
  for (int nd : c.nodes) mark(m_.nodes()[nd].step, kNodeCol, h2 * 0.72f, h2 * 0.86f);
  for (int b : c.breaks) mark(m_.breaks()[b].step, kBreakCol, 0, h2);
  for (int64_t b : m_.bookmarks()) mark(b, IM_COL32(255, 255, 255, 200), h2 * 0.88f, h2);
  mark(m_.cursor(), kAccent, 0, h2);
  ImGui::InvisibleButton("compile", ImVec2(w, h2));
  if (ImGui::IsItemActive())
    m_.go_to(static_cast<int64_t>(c.first_step) + static_cast<int64_t>(std::clamp((ImGui::GetIO().MousePos.x - p.x) / w, 0.0f, 1.0f) * (cs - 1)),
             ImGui::IsItemActivated());
}

void App::draw_source() {
  const StepState& s = m_.state(false);
  const int ci = m_.selected_compile();
  std::string file;
  int line = 0;
  if (s.valid) {
    auto cv = m_.code_view(s.code);
    file = cv->error.empty() ? cv->info.filename : (ci >= 0 ? m_.compiles()[ci].filename : "");
    line = s.line;
  } else if (ci >= 0) {
    file = m_.compiles()[ci].filename;
    line = m_.compiles()[ci].firstlineno;
  }
  ImGui::TextDisabled("%s:%d   source: %s", file.c_str(), line, m_.source_origin(file).c_str());
  // Why this compile is what it is, in words, above the code: its break, or what made it recompile.
  const Break* brk = ci >= 0 && !m_.compiles()[ci].breaks.empty() ? &m_.breaks()[m_.compiles()[ci].breaks.front()] : nullptr;
  ImGui::PushTextWrapPos(0);
  for (const auto& [col, text] : why()) ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(col), "%s", text.c_str());
  ImGui::PopTextWrapPos();
  const auto& lines = m_.source(file);
  if (lines.empty()) {
    ImGui::TextDisabled("(source not readable from this machine)");
    return;
  }
  ImGui::BeginChild("src");
  ImGuiListClipper clip;
  clip.Begin(static_cast<int>(lines.size()));
  if (scroll_to_cursor_ && line > 0) clip.ForceDisplayRangeByIndices(line - 1, line);
  while (clip.Step())
    for (int i = clip.DisplayStart; i < clip.DisplayEnd; ++i) {
      const bool cur = i + 1 == line;
      const bool broke = brk && brk->line == i + 1 && brk->filename == file;
      if (cur || broke) ImGui::PushStyleColor(ImGuiCol_Text, ImGui::ColorConvertU32ToFloat4(cur ? kAccent : kBreakCol));
      ImGui::Text("%5d%s %s", i + 1, cur ? ">" : " ", lines[i].c_str());
      if (broke) {
        ImGui::SameLine();
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kBreakCol), "  <- graph break %s", brk->id_and_title().c_str());
      }
      if (cur || broke) ImGui::PopStyleColor();
      if (cur) {
        if (scroll_to_cursor_) ImGui::SetScrollHereY(0.4f);
      }
    }
  ImGui::EndChild();
}

void App::draw_bytecode() {
  const StepState& s = m_.state(false);
  if (!s.valid) {
    const std::string note = no_steps_note();
    if (note.empty()) return ImGui::TextDisabled("(no step)");
    // An imported trace: the log's dis text of the original bytecode, where it has one.
    const std::string* text = imported_bytecode("original");
    ImGui::PushTextWrapPos(0);
    ImGui::TextDisabled("%s", text ? "original bytecode as the TORCH_TRACE log printed it (no steps to follow)" : note.c_str());
    ImGui::PopTextWrapPos();
    if (!text) return;
    ImGui::BeginChild("bc", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar);
    ImGui::TextUnformatted(text->c_str());
    ImGui::EndChild();
    return;
  }
  auto cv = m_.code_view(s.code);
  ImGui::TextDisabled("%s  depth %d  %s", cv->error.empty() ? cv->info.qualname.c_str() : "?", s.depth,
                      std::string(bc::op_name(s.opcode, cv->info.version)).c_str());
  if (!cv->error.empty()) return ImGui::TextDisabled("%s", cv->error.c_str());
  ImGui::BeginChild("bc", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar);
  ImGuiListClipper clip;
  clip.Begin(static_cast<int>(cv->lines.size()));
  int cur = -1;
  for (size_t i = 0; i < cv->decoded.instrs.size(); ++i)
    if (cv->decoded.instrs[i].offset == s.offset) cur = static_cast<int>(i);
  if (scroll_to_cursor_ && cur >= 0) clip.ForceDisplayRangeByIndices(cur, cur + 1);
  const int brk = break_site(*cv);  // the compiled frame's break instruction, when this is its code
  while (clip.Step())
    for (int i = clip.DisplayStart; i < clip.DisplayEnd; ++i) {
      const bool here = i == cur;
      if (here) ImGui::PushStyleColor(ImGuiCol_Text, kAccent);
      else if (i == brk) ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1, .4f, .4f, 1));
      ImGui::TextUnformatted(((here ? "->" : i == brk ? "!!" : "  ") + cv->lines[i]).c_str());
      if (i == brk && ImGui::IsItemHovered()) ImGui::SetTooltip("the graph broke at this instruction");
      if (i == brk && !here) ImGui::PopStyleColor();
      if (here) {
        ImGui::PopStyleColor();
        if (scroll_to_cursor_) ImGui::SetScrollHereY(0.4f);
      }
    }
  ImGui::EndChild();
}

void App::draw_rewritten() {
  const int ci = m_.selected_compile();
  if (ci < 0) return;
  const Compile& c = m_.compiles()[ci];
  if (c.gen_codes.empty()) {
    if (const std::string* text = imported_bytecode("modified")) {  // imported: the log's dis text
      ImGui::TextDisabled("transformed bytecode as the TORCH_TRACE log printed it");
      ImGui::BeginChild("gc", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar);
      ImGui::TextUnformatted(text->c_str());
      ImGui::EndChild();
      return;
    }
    if (m_.total_steps() == 0 && m_.reader().meta().is_object() && m_.reader().meta().value("source", "") == "TORCH_TRACE")
      return ImGui::TextDisabled("(no generated code in the TORCH_TRACE log for this compile)");
    return ImGui::TextDisabled("(no generated code: %s)", c.outcome.c_str());
  }
  if (!c.breaks.empty()) {
    const Break& b = m_.breaks()[c.breaks.front()];
    ImGui::TextColored(ImVec4(1, .4f, .4f, 1), "break %s at offset %d: %s", b.id_and_title().c_str(), b.offset, b.message.c_str());
  }
  if (!ImGui::BeginTabBar("gen")) return;
  for (const auto& [name, code] : c.gen_codes) {
    if (!ImGui::BeginTabItem(name.c_str())) continue;
    auto cv = m_.code_view(code);
    ImGui::BeginChild("gc", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar);
    if (!cv->error.empty()) ImGui::TextDisabled("%s", cv->error.c_str());
    for (const std::string& l : cv->lines) ImGui::TextUnformatted(l.c_str());
    ImGui::EndChild();
    ImGui::EndTabItem();
  }
  ImGui::EndTabBar();
}

void App::draw_stack() {
  const StepState& s = m_.state(false);
  if (m_.pending()) ImGui::TextDisabled("(decoding...)");
  if (!s.valid) {
    if (const std::string note = no_steps_note(); !note.empty()) {
      ImGui::PushTextWrapPos(0);
      ImGui::TextDisabled("%s", note.c_str());
      ImGui::PopTextWrapPos();
    }
    return;
  }
  auto cv = m_.code_view(s.code);
  auto rows = [&](const char* id, const std::vector<trace::Value>& vals, bool locals) {
    if (!ImGui::BeginTable(id, 4, ImGuiTableFlags_RowBg | ImGuiTableFlags_Resizable | ImGuiTableFlags_BordersInnerV)) return;
    ImGui::TableSetupColumn(locals ? "local" : "slot", ImGuiTableColumnFlags_WidthFixed);
    ImGui::TableSetupColumn("value", ImGuiTableColumnFlags_WidthStretch, 3.0f);
    ImGui::TableSetupColumn("source", ImGuiTableColumnFlags_WidthStretch, 1.5f);
    ImGui::TableSetupColumn("made at", ImGuiTableColumnFlags_WidthFixed);
    ImGui::TableHeadersRow();
    for (size_t i = vals.size(); i-- > 0;) {  // stack: top first
      const size_t k = locals ? vals.size() - 1 - i : i;
      const trace::Value& v = vals[k];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      std::string name = std::to_string(k);
      if (locals && cv->error.empty() && static_cast<size_t>(s.local_slots[k]) < cv->info.localsplusnames.size())
        name = cv->info.localsplusnames[s.local_slots[k]];
      const std::string label = name + "##" + id + std::to_string(k);
      if (ImGui::Selectable(label.c_str(), m_.selected_value() == v.id, ImGuiSelectableFlags_SpanAllColumns)) m_.follow_value(v.id);
      ImGui::TableNextColumn();
      ImGui::Text("%s %s", v.kind.c_str(), v.repr.c_str());
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s %s\ntype %s\nsource %s\nmade at step %llu (click the row: go there)", v.kind.c_str(), v.repr.c_str(),
                                                    v.type.c_str(), v.source.empty() ? "-" : v.source.c_str(), static_cast<unsigned long long>(v.step));
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(v.source.c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%llu", static_cast<unsigned long long>(v.step));
    }
    ImGui::EndTable();
  };
  ImGui::Text("stack (top first), frame %d of %zu", s.depth, s.frames.size());
  rows("stack", s.stack, false);
  ImGui::Separator();
  ImGui::Text("locals");
  rows("locals", s.locals, true);
}

void App::draw_graph() {
  if (graph_ < 0) return ImGui::TextDisabled("(the selected compile made no graph)");
  const GraphLayout& l = layout(graph_);
  const Graph& g = m_.graphs()[graph_];
  ImGui::TextDisabled("graph %d: %zu nodes  (drag to pan, wheel to zoom)", graph_, g.nodes.size());
  if (!l.error.empty()) ImGui::TextDisabled("%s", l.error.c_str());
  const float avail = ImGui::GetContentRegionAvail().y;
  ImGui::BeginChild("canvas", ImVec2(0, avail * 0.62f), true, ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 o = ImGui::GetCursorScreenPos(), sz = ImGui::GetContentRegionAvail();
  ImGui::InvisibleButton("pan", sz);
  if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left)) {
    pan_x_ += ImGui::GetIO().MouseDelta.x;
    pan_y_ += ImGui::GetIO().MouseDelta.y;
  }
  if (ImGui::IsItemHovered() && ImGui::GetIO().MouseWheel != 0) zoom_ = std::clamp(zoom_ * (ImGui::GetIO().MouseWheel > 0 ? 1.1f : 0.9f), 0.1f, 4.0f);
  // Readable by default: at zoom 1 the layout's 12 pt labels are drawn at the UI font size (a big
  // graph does not shrink to fit; it opens centred on the selected node, or its top, and the view
  // follows the selection).
  const float font_px = ImGui::GetFontSize();
  const float z = font_px / kLayoutFontPt * zoom_;
  const int sel_node = m_.selected_node();
  if (graph_ != view_graph_ || sel_node != view_node_ || zoom_ != view_zoom_) {
    view_graph_ = graph_, view_node_ = sel_node, view_zoom_ = zoom_;
    const GraphLayout::N* at = nullptr;
    for (const auto& n : l.nodes)
      if (n.node == sel_node) at = &n;
    if (at) {  // the selected node in the middle
      pan_x_ = sz.x / 2 - at->x * z - 4;
      pan_y_ = sz.y / 2 - at->y * z - 4;
    } else {  // the graph's top, centred when it fits across
      pan_x_ = l.width * z < sz.x ? (sz.x - l.width * z) / 2 - 4 : 0;
      pan_y_ = 0;
    }
  }
  auto P = [&](float x, float y) { return ImVec2(o.x + pan_x_ + x * z + 4, o.y + pan_y_ + y * z + 4); };
  view_label_px_ = 0;
  view_selected_visible_ = false;
  dl->PushClipRect(o, ImVec2(o.x + sz.x, o.y + sz.y), true);
  for (const auto& e : l.edges)
    for (size_t k = 0; k + 7 < e.pts.size(); k += 6)
      dl->AddBezierCubic(P(e.pts[k], e.pts[k + 1]), P(e.pts[k + 2], e.pts[k + 3]), P(e.pts[k + 4], e.pts[k + 5]), P(e.pts[k + 6], e.pts[k + 7]),
                         IM_COL32(160, 160, 160, 255), 1.0f);
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  for (const auto& n : l.nodes) {
    const ImVec2 a = P(n.x - n.w / 2, n.y - n.h / 2), b = P(n.x + n.w / 2, n.y + n.h / 2);
    const Node& nd = m_.nodes()[n.node];
    const bool sel = m_.selected_node() == n.node;
    const bool made = nd.step >= 0 && nd.step <= m_.cursor() && nd.compile == m_.selected_compile();
    dl->AddRectFilled(a, b, sel ? IM_COL32(120, 90, 20, 255) : made ? IM_COL32(40, 70, 50, 255) : IM_COL32(45, 45, 55, 255), 3);
    dl->AddRect(a, b, sel ? kAccent : IM_COL32(150, 150, 170, 255), 3);
    // The label at the zoom's size, never below the UI font size (zoomed out, it is clipped to its
    // box rather than shrunk), centred.
    const float fs = std::max(font_px, kLayoutFontPt * z);
    view_label_px_ = fs;
    if (sel) view_selected_visible_ = a.x >= o.x && b.x <= o.x + sz.x && a.y >= o.y && b.y <= o.y + sz.y;
    {
      const std::string label = node_label(nd);
      ImFont* font = ImGui::GetFont();
      const ImVec2 ts = font->CalcTextSizeA(fs, FLT_MAX, 0, label.c_str());
      dl->PushClipRect(a, b, true);
      dl->AddText(font, fs, ImVec2(std::max(a.x + 2, (a.x + b.x - ts.x) / 2), (a.y + b.y - ts.y) / 2), IM_COL32(230, 230, 230, 255), label.c_str());
      dl->PopClipRect();
    }
    if (ImGui::IsMouseClicked(ImGuiMouseButton_Left) && mouse.x >= a.x && mouse.x <= b.x && mouse.y >= a.y && mouse.y <= b.y)
      m_.follow_node(n.node);
  }
  dl->PopClipRect();
  ImGui::EndChild();
  // Node table, or the graph's Python code (as FX prints it).
  if (!ImGui::BeginTabBar("fxtabs")) return;
  const bool force = force_fx_tab_;
  force_fx_tab_ = false;
  const bool nodes_open = ImGui::BeginTabItem("nodes", nullptr, force && fx_tab_ == "nodes" ? ImGuiTabItemFlags_SetSelected : 0);
  if (nodes_open && !force) fx_tab_ = "nodes";
  if (nodes_open && ImGui::BeginTable("nodes", 4, ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_Resizable)) {
    ImGui::TableSetupScrollFreeze(0, 1);
    for (const char* h : {"node", "op / target", "args", "meta"}) ImGui::TableSetupColumn(h, ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableHeadersRow();
    for (int ni : g.nodes) {
      const Node& nd = m_.nodes()[ni];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      if (ImGui::Selectable((nd.name + "##n").c_str(), m_.selected_node() == ni, ImGuiSelectableFlags_SpanAllColumns)) m_.follow_node(ni);
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(node_what(nd).c_str());
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s %s\nargs %s\nmeta %s\ncreated at step %lld (click the row: go there)", nd.op.c_str(), nd.target.c_str(),
                                                    nd.args.c_str(), nd.meta.c_str(), static_cast<long long>(nd.step));
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(nd.args.c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(nd.meta.c_str());
    }
    ImGui::EndTable();
  }
  if (nodes_open) ImGui::EndTabItem();
  if (ImGui::BeginTabItem("python code", nullptr, force && fx_tab_ == "code" ? ImGuiTabItemFlags_SetSelected : 0)) {
    if (!force) fx_tab_ = "code";
    ImGui::BeginChild("fxcode", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar);
    ImGui::TextUnformatted(g.code.c_str());
    ImGui::EndChild();
    ImGui::EndTabItem();
  }
  ImGui::EndTabBar();
}

void App::draw_tables() {
  ImGui::SetNextItemWidth(-1);
  ImGui::InputTextWithHint("##filter", "filter", filter_buf_, sizeof filter_buf_);
  if (!ImGui::BeginTabBar("tables")) return;
  auto tab = [&](const char* name) {
    const bool force = force_tab_ && tab_ == name;
    const bool open = ImGui::BeginTabItem(name, nullptr, force ? ImGuiTabItemFlags_SetSelected : 0);
    if (open && !force_tab_) tab_ = name;
    return open;
  };
  const int ci = m_.selected_compile();
  if (tab("guards")) {
    if (ImGui::BeginTable("g", 3, ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_Resizable)) {
      ImGui::TableSetupScrollFreeze(0, 1);
      ImGui::TableSetupColumn("kind", ImGuiTableColumnFlags_WidthFixed);
      ImGui::TableSetupColumn("guard", ImGuiTableColumnFlags_WidthStretch);
      ImGui::TableSetupColumn("where", ImGuiTableColumnFlags_WidthFixed);
      ImGui::TableHeadersRow();
      if (ci >= 0)
        for (int gi : m_.compiles()[ci].guards) {
          const Guard& g = m_.guards()[gi];
          if (!passes(filter_buf_, g.text + " " + g.kind)) continue;
          ImGui::TableNextRow();
          ImGui::TableNextColumn();
          if (ImGui::Selectable((g.kind + "##g" + std::to_string(gi)).c_str(), m_.selected_guard() == gi, ImGuiSelectableFlags_SpanAllColumns)) m_.follow_guard(gi);
          ImGui::TableNextColumn();
          ImGui::TextUnformatted(g.text.c_str());
          const std::string where = guard_where(g);
          if (ImGui::IsItemHovered())
            ImGui::SetTooltip("%s\nadded at step %lld, %s (click: go there)", g.text.c_str(), static_cast<long long>(g.step),
                              g.line > 0 ? (guard_file(g) + ":" + std::to_string(g.line)).c_str() : "set-up");
          ImGui::TableNextColumn();
          ImGui::TextUnformatted(where.c_str());
        }
      ImGui::EndTable();
    }
    ImGui::EndTabItem();
  }
  if (tab("breaks")) {
    for (size_t i = 0; i < m_.breaks().size(); ++i) {
      const Break& b = m_.breaks()[i];
      if (!passes(filter_buf_, b.break_id + " " + b.title + " " + b.message)) continue;
      const std::string label = "[" + m_.compiles()[b.compile].id + "] " + b.id_and_title() + " line " + std::to_string(b.line) + ": " + b.message + "##b" + std::to_string(i);
      if (ImGui::Selectable(label.c_str(), m_.selected_break() == static_cast<int>(i))) m_.follow_break(static_cast<int>(i));
      if ((!b.title.empty() || !b.hint.empty()) && ImGui::IsItemHovered())
        ImGui::SetTooltip("%s%s%s", b.title.c_str(), !b.title.empty() && !b.hint.empty() ? "\nhint: " : "", b.hint.c_str());
    }
    ImGui::EndTabItem();
  }
  if (tab("recompiles")) {
    for (size_t i = 0; i < m_.recompiles().size(); ++i) {
      const Recompile& r = m_.recompiles()[i];
      std::string label = r.kind + " " + r.qualname + ": " + (r.failures.empty() ? "" : r.failures.front());
      if (!passes(filter_buf_, label)) continue;
      label += "##r" + std::to_string(i);
      if (ImGui::Selectable(label.c_str(), m_.selected_recompile() == static_cast<int>(i))) m_.follow_recompile(static_cast<int>(i));
    }
    ImGui::EndTabItem();
  }
  if (tab("search")) {
    draw_search();
    ImGui::EndTabItem();
  }
  ImGui::EndTabBar();
  force_tab_ = false;
}

void App::draw_search() {
  ImGui::SetNextItemWidth(-1);
  if (ImGui::InputTextWithHint("##q", "opcode, name, guard text or break id", search_buf_, sizeof search_buf_, ImGuiInputTextFlags_EnterReturnsTrue))
    m_.search(search_buf_);
  size_t before = 0;
  for (const SearchHit& h : m_.hits()) before += h.step < m_.cursor();
  ImGui::Text("%zu hits: %zu before the cursor, %zu after", m_.hits().size(), before, m_.hits().size() - before);
  ImGui::SameLine();
  if (ImGui::SmallButton("prev")) m_.search_step(-1);
  ImGui::SameLine();
  if (ImGui::SmallButton("next")) m_.search_step(1);
  ImGui::BeginChild("hits");
  ImGuiListClipper clip;
  clip.Begin(static_cast<int>(m_.hits().size()));
  while (clip.Step())
    for (int i = clip.DisplayStart; i < clip.DisplayEnd; ++i) {
      const SearchHit& h = m_.hits()[i];
      const std::string label = std::to_string(h.step) + "  " + h.what + "  " + h.label + "##h" + std::to_string(i);
      if (ImGui::Selectable(label.c_str(), h.step == m_.cursor())) m_.go_to(h.step);
    }
  ImGui::EndChild();
}

}  // namespace dv::view
