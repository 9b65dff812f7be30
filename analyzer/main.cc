// profanalyze: the command line only. Each subcommand lives in a library that tests call directly.
#include <cstdio>

#include "CLI/CLI.hpp"
#include "analyzer/diff/diff.h"
#include "analyzer/perfetto/perfetto.h"
#include "analyzer/report/report.h"
#include "google/protobuf/stubs/logging.h"

int main(int argc, char** argv) {
  // Bad input is one line from the reader (file and offset); protobuf's own parse complaints
  // (invalid UTF-8 in a corrupt string field) would be a second.
  google::protobuf::SetLogHandler(nullptr);
  CLI::App app{"profanalyze: reports, traces and regression checks for profagent profiles"};
  app.require_subcommand(1);
  int exit_code = 0;
  profagent::analyzer::AddReportCommands(app, &exit_code);   // report, stats
  profagent::analyzer::AddPerfettoCommand(app, &exit_code);  // perfetto
  profagent::analyzer::AddDiffCommand(app, &exit_code);      // diff
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version print their text; a usage error is one line on stderr, exit 2.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "profanalyze: %s (see --help)\n", e.what());
    return 2;
  }
  return exit_code;
}
