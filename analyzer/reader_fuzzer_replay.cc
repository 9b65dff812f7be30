// A main() for the reader fuzz target without libFuzzer: runs LLVMFuzzerTestOneInput
// (reader_fuzzer.cc) once on every file named on the command line, or on every file of every
// directory named (sorted by name). It is //analyzer:reader_fuzzer_corpus_test, which replays
// the seed corpus under the normal toolchain: an input that crashes, trips a check of the
// target or leaks a descriptor kills the process, which fails the test.
//
// The process runs under a 1 GiB address-space limit (libFuzzer stops at 2 GB of RSS), so an
// input that makes the analyzer allocate gigabytes fails here too instead of only slowing down.
//
// Also a reproducer with the gcc build: bazel-bin/analyzer/reader_fuzzer_corpus_test crash-FILE.
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

// ASan reserves terabytes of shadow address space: no limit under it.
#if defined(__SANITIZE_ADDRESS__)
#define PROFAGENT_REPLAY_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PROFAGENT_REPLAY_ASAN 1
#endif
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

// The regular files of `path` (itself when it is a file), sorted; false if it is neither.
bool ListInputs(const std::string& path, std::vector<std::string>* out) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return false;
  if (!S_ISDIR(st.st_mode)) {
    out->push_back(path);
    return true;
  }
  DIR* d = opendir(path.c_str());
  if (d == nullptr) return false;
  std::vector<std::string> files;
  while (dirent* e = readdir(d)) {
    const std::string f = path + "/" + e->d_name;
    if (e->d_name[0] != '.' && stat(f.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      files.push_back(f);
    }
  }
  closedir(d);
  std::sort(files.begin(), files.end());
  out->insert(out->end(), files.begin(), files.end());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
    return 2;
  }
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    if (!ListInputs(argv[i], &inputs)) {
      fprintf(stderr, "%s: cannot read %s\n", argv[0], argv[i]);
      return 2;
    }
  }
  if (inputs.empty()) {
    fprintf(stderr, "%s: no inputs\n", argv[0]);
    return 2;
  }
#ifndef PROFAGENT_REPLAY_ASAN
  const rlimit limit = {rlim_t{1} << 30, rlim_t{1} << 30};
  if (setrlimit(RLIMIT_AS, &limit) != 0) perror("setrlimit");
#endif
  size_t bytes = 0;
  for (const std::string& f : inputs) {
    std::ifstream in(f, std::ios::binary);
    const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    fprintf(stderr, "%s (%zu bytes)\n", f.c_str(), data.size());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(data.data()), data.size());
    bytes += data.size();
  }
  printf("replayed %zu inputs, %zu bytes: no crash\n", inputs.size(), bytes);
  return 0;
}
