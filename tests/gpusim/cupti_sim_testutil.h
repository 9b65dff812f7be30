// Helpers shared by cupti_sim_test and nccl_sim_test: run a test program of this package as a
// child process against gpusim's libraries, and read the simulator's ground-truth log.
//
// Not thread safe (tests are single-threaded); everything returns values, nothing is cached.
#ifndef PROFAGENT_TESTS_GPUSIM_CUPTI_SIM_TESTUTIL_H_
#define PROFAGENT_TESTS_GPUSIM_CUPTI_SIM_TESTUTIL_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gpusim_test {

struct RunResult {
  int exit_code = -1;  // -1 if the child did not exit normally
  std::string out;     // stdout
  std::string err;     // stderr
  double seconds = 0;  // wall time
};

// Absolute path of this package's directory in the test's runfiles (where libcudart.so.13,
// libcupti.so.13, libnccl.so.2 and the test programs are).
std::string PackageDir();

// A fresh empty file path under TEST_TMPDIR (or /tmp).
std::string TempPath(const std::string& stem);

// Runs PackageDir()/program with `args`, LD_LIBRARY_PATH=PackageDir() and the extra
// environment `env` ("NAME=value"), capturing its output.
RunResult RunProgram(const std::string& program, const std::vector<std::string>& args,
                     const std::vector<std::string>& env);

// One flat JSON object: values as their text (strings unquoted, arrays/numbers verbatim).
using JsonLine = std::map<std::string, std::string>;

// Parses a flat JSON object line (the ground-truth format). Returns false on malformed input.
bool ParseJsonLine(const std::string& line, JsonLine* out);

// All lines of a ground-truth log (empty if the file does not exist).
std::vector<JsonLine> ReadTruth(const std::string& path);  // throws on a malformed line

uint64_t U64(const JsonLine& j, const std::string& key);   // 0 if missing
int64_t I64(const JsonLine& j, const std::string& key);    // 0 if missing

// Splits `text` into lines, and a line into whitespace-separated fields.
std::vector<std::string> Lines(const std::string& text);
std::vector<std::string> Fields(const std::string& line);

}  // namespace gpusim_test

#endif  // PROFAGENT_TESTS_GPUSIM_CUPTI_SIM_TESTUTIL_H_
