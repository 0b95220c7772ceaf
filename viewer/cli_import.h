// TORCH_TRACE import and trace diff subcommands of the dynview executable (cli_import.cpp).
#pragma once
#include <string>

namespace dv::cli {

int cmd_import(int argc, char** argv);  // dynview import DIR_OR_LOG -o RUN.dyn [--json]
int cmd_diff(int argc, char** argv);    // dynview diff BEFORE.dyn AFTER.dyn [--json] [--fail-on ...]
// A directory, or a file that starts like a TORCH_TRACE log (not a .dyn).
bool is_torch_trace_input(const std::string& path);
// Imports src into a temporary .dyn for the viewer; 0 when something was imported (dyn_out set).
int import_for_viewer(const std::string& src, std::string& dyn_out);

}  // namespace dv::cli
