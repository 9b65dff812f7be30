#include "tests/gpusim/cupti_sim_testutil.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace gpusim_test {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

}  // namespace

std::string PackageDir() {
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return "tests/gpusim";
  // Bazel runs tests in the runfiles tree of the workspace.
  return std::string(cwd) + "/tests/gpusim";
}

std::string TempPath(const std::string& stem) {
  static std::atomic<int> n{0};
  const char* dir = getenv("TEST_TMPDIR");
  std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + stem + "." +
                     std::to_string(getpid()) + "." + std::to_string(n++);
  unlink(path.c_str());
  return path;
}

RunResult RunProgram(const std::string& program, const std::vector<std::string>& args,
                     const std::vector<std::string>& env) {
  RunResult result;
  std::string out_path = TempPath("stdout");
  std::string err_path = TempPath("stderr");
  std::string exe = PackageDir() + "/" + program;
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string s = *e;
    if (s.rfind("LD_LIBRARY_PATH=", 0) == 0 || s.rfind("GPUSIM_", 0) == 0) continue;
    envs.push_back(s);
  }
  envs.push_back("LD_LIBRARY_PATH=" + PackageDir());
  for (const auto& e : env) envs.push_back(e);
  std::vector<char*> argv, envp;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (auto& e : envs) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  double t0 = Now();
  pid_t pid = fork();
  if (pid == 0) {
    int o = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1);
    dup2(e, 2);
    execve(exe.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  result.seconds = Now() - t0;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = ReadFile(out_path);
  result.err = ReadFile(err_path);
  return result;
}

bool ParseJsonLine(const std::string& line, JsonLine* out) {
  out->clear();
  size_t i = 0;
  auto skip = [&] {
    while (i < line.size() && isspace(static_cast<unsigned char>(line[i]))) ++i;
  };
  auto string_at = [&](std::string* s) {
    if (i >= line.size() || line[i] != '"') return false;
    ++i;
    s->clear();
    while (i < line.size() && line[i] != '"') {
      if (line[i] == '\\' && i + 1 < line.size()) {
        ++i;
        if (line[i] == 'u' && i + 4 < line.size()) {
          s->push_back(static_cast<char>(strtol(line.substr(i + 1, 4).c_str(), nullptr, 16)));
          i += 5;
          continue;
        }
        char c = line[i];
        s->push_back(c == 'n' ? '\n' : c == 't' ? '\t' : c);
        ++i;
        continue;
      }
      s->push_back(line[i++]);
    }
    if (i >= line.size()) return false;
    ++i;
    return true;
  };
  skip();
  if (i >= line.size() || line[i++] != '{') return false;
  for (;;) {
    skip();
    if (i < line.size() && line[i] == '}') return true;
    std::string key, value;
    if (!string_at(&key)) return false;
    skip();
    if (i >= line.size() || line[i++] != ':') return false;
    skip();
    if (i < line.size() && line[i] == '"') {
      if (!string_at(&value)) return false;
    } else if (i < line.size() && line[i] == '[') {
      size_t end = line.find(']', i);
      if (end == std::string::npos) return false;
      value = line.substr(i, end + 1 - i);
      i = end + 1;
    } else {
      size_t start = i;
      while (i < line.size() && line[i] != ',' && line[i] != '}') ++i;
      value = line.substr(start, i - start);
      while (!value.empty() && isspace(static_cast<unsigned char>(value.back()))) value.pop_back();
      if (value.empty()) return false;
    }
    (*out)[key] = value;
    skip();
    if (i < line.size() && line[i] == ',') {
      ++i;
      continue;
    }
    if (i < line.size() && line[i] == '}') return true;
    return false;
  }
}

std::vector<JsonLine> ReadTruth(const std::string& path) {
  std::vector<JsonLine> lines;
  for (const std::string& l : Lines(ReadFile(path))) {
    JsonLine j;
    if (!ParseJsonLine(l, &j)) throw std::runtime_error("bad truth line: " + l);
    lines.push_back(j);
  }
  return lines;
}

uint64_t U64(const JsonLine& j, const std::string& key) {
  auto it = j.find(key);
  return it == j.end() ? 0 : strtoull(it->second.c_str(), nullptr, 10);
}

int64_t I64(const JsonLine& j, const std::string& key) {
  auto it = j.find(key);
  return it == j.end() ? 0 : strtoll(it->second.c_str(), nullptr, 10);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  std::string l;
  while (std::getline(ss, l)) {
    if (!l.empty()) lines.push_back(l);
  }
  return lines;
}

std::vector<std::string> Fields(const std::string& line) {
  std::vector<std::string> f;
  std::stringstream ss(line);
  std::string w;
  while (ss >> w) f.push_back(w);
  return f;
}

}  // namespace gpusim_test
