// Test helpers for code linked with //agent/core (not part of the agent).
#ifndef PROFAGENT_AGENT_CORE_TESTING_H_
#define PROFAGENT_AGENT_CORE_TESTING_H_

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <vector>

extern "C" int profagent_init();
extern "C" void profagent_shutdown(const char* reason);

namespace profagent {
namespace testing {

// A fresh empty directory under $TEST_TMPDIR (or /tmp).
inline std::string MakeTempDir(const char* tag) {
  const char* base = getenv("TEST_TMPDIR");
  std::string t = std::string(base ? base : "/tmp") + "/" + tag + ".XXXXXX";
  std::vector<char> buf(t.begin(), t.end());
  buf.push_back('\0');
  char* d = mkdtemp(buf.data());
  return d ? std::string(d) : std::string();
}

inline std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") out.push_back(n);
    }
    closedir(d);
  }
  return out;
}

}  // namespace testing
}  // namespace profagent

#endif  // PROFAGENT_AGENT_CORE_TESTING_H_
