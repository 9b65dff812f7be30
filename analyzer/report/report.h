// `profanalyze report` and `profanalyze stats`: the command-line front of the analysis.
//
// report DIR [-o OUT]: reads every rank file of DIR (analysis.h), writes OUT/summary.json
// (SUMMARY_FORMAT.md), OUT/report.md and OUT/ops.csv, and prints a short summary.
// stats FILE|DIR: record counts by type, drops, time span and truncation, per file.
//
// Errors (bad input, unwritable output) print one line naming the file to stderr and set the
// exit code to 2. Nothing here aborts or throws past the caller.
//
// Thread safety: the Run* functions are reentrant; AddReportCommands must be called once per
// CLI::App, before parsing, and `exit_code` must outlive the parse.
#ifndef PROFAGENT_ANALYZER_REPORT_REPORT_H_
#define PROFAGENT_ANALYZER_REPORT_REPORT_H_

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "analyzer/report/analysis.h"

namespace profagent {
namespace analyzer {

// Registers the `report` and `stats` subcommands; their callbacks store 0 or 2 in *exit_code.
void AddReportCommands(CLI::App& app, int* exit_code);

// The whole `report` command: lists DIR's rank files, builds the summary and writes the three
// outputs into `out_dir` (created if missing). *printed receives the short summary.
absl::Status RunReport(const std::string& dir, const std::string& out_dir,
                       const ReportOptions& options, std::string* printed);

// report.md from a summary (pure function of the JSON).
std::string RenderMarkdown(const Json& summary);

// A kernel name as report.md's tables show it: unchanged up to `max_len` characters; longer
// (templated C++ kernels), without its return type and parameters, each qualified name with its
// last scope only, and template arguments nested inside template arguments elided ("…"); if
// that is still over `max_len` + 20%, all template arguments elided.
std::string ShortKernelName(const std::string& name, size_t max_len = 100);

// The few lines `report` prints.
std::string ShortSummary(const Json& summary);

// The `stats` text for a file or a directory of rank files.
absl::StatusOr<std::string> RunStats(const std::string& path);

}  // namespace analyzer
}  // namespace profagent

#endif  // PROFAGENT_ANALYZER_REPORT_REPORT_H_
