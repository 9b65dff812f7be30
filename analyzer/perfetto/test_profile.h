// Test helper: writes profagent record files (proto/profagent.proto framing) from the generated
// protobuf classes, so analyzer tests and benchmarks can build inputs without the agent.
//
// Not thread-safe; one writer per file. The destructor closes the file.
#ifndef PROFAGENT_ANALYZER_PERFETTO_TEST_PROFILE_H_
#define PROFAGENT_ANALYZER_PERFETTO_TEST_PROFILE_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "proto/profagent.pb.h"

namespace profagent {
namespace analyzer {
namespace testing {

class ProfileWriter {
 public:
  // Creates `path` and writes the 12-byte preamble ("PROFAGNT", major 1, minor 0).
  explicit ProfileWriter(const std::string& path);
  ~ProfileWriter();
  bool ok() const { return f_ != nullptr; }

  void Write(const Record& r);  // one varint-framed record
  void Header(uint32_t pid, const std::string& host, int32_t rank, uint64_t realtime_ns,
              uint64_t monotonic_ns, uint64_t boot_id = 0);
  void String(uint32_t id, const std::string& value);
  void Thread(uint32_t thread, uint32_t tid, const std::string& name);
  void Offset(int64_t offset_ns, uint64_t error_ns);
  void Footer(const std::string& reason = "exit");
  void Raw(const void* data, size_t n);  // arbitrary bytes (corruption tests)
  void Close();

 private:
  FILE* f_;
  std::string buf_;
};

}  // namespace testing
}  // namespace analyzer
}  // namespace profagent

#endif  // PROFAGENT_ANALYZER_PERFETTO_TEST_PROFILE_H_
