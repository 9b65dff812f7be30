// The simulated device's cost model: how long a kernel, a copy or a memset occupies its stream.
//
// Kernels: the first rule whose ECMAScript regex matches (std::regex_search, so a substring
// match) the demangled kernel name gives `fixed_us + per_thread_us * threads`, where threads
// is the total number of launched threads (grid.x*grid.y*grid.z * block.x*block.y*block.z).
// Without a matching rule the default applies: 2 us + 1 ns per 256 threads (a 1 M-thread
// launch lasts 6.1 us).
//
// Rules come from the file named by GPUSIM_COSTS. Grammar, one rule per line:
//     <regex> <fixed_us>
//     <regex> <fixed_us> + <per_thread_us>*threads
// `#` starts a comment line, blank lines are skipped, the regex is the first whitespace-free
// token (write \s for a space), numbers are decimal (1.5, 0.001, 2e-3). Example:
//     ^gemm_kernel 120
//     softmax      3 + 0.0005*threads
// A bad file is rejected as a whole (Parse returns false with one line of explanation).
//
// Copies: latency + bytes / bandwidth, with 25 GB/s for HtoD and DtoH, 1500 GB/s for DtoD,
// 10 GB/s for HtoH (2 us latency across PCIe, 1 us otherwise). Memset: 1 us + bytes / 2000 GB/s.
//
// Thread safety: Parse must finish before concurrent use; the const methods are thread-safe.
// ForKernel runs a regex search per rule: callers cache its result per kernel.
#ifndef PROFAGENT_TESTS_GPUSIM_COST_MODEL_H_
#define PROFAGENT_TESTS_GPUSIM_COST_MODEL_H_

#include <cstdint>
#include <regex>
#include <string>
#include <vector>

namespace gpusim {

struct KernelCost {
  double fixed_us = 2.0;
  double per_thread_us = 1.0 / 256.0 / 1000.0;
  // Duration in ns for a launch of `threads` threads.
  uint64_t DurationNs(uint64_t threads) const;
};

class CostModel {
 public:
  // Copy kinds, numbered like cudaMemcpyKind.
  enum CopyKind { kHtoH = 0, kHtoD = 1, kDtoH = 2, kDtoD = 3 };

  // Replaces the rules with those in `text`. On error leaves the model unchanged, returns false
  // and sets *error to a one-line message naming the line.
  bool Parse(const std::string& text, std::string* error);
  // Reads and parses `path`; same contract as Parse (a missing file is an error).
  bool LoadFile(const std::string& path, std::string* error);

  // The cost of a kernel with this demangled name (first matching rule, else the default).
  KernelCost ForKernel(const std::string& demangled_name) const;
  uint64_t CopyNs(int copy_kind, uint64_t bytes) const;
  uint64_t MemsetNs(uint64_t bytes) const;
  size_t rule_count() const { return rules_.size(); }

 private:
  struct Rule {
    std::string pattern;
    std::regex regex;
    KernelCost cost;
  };
  std::vector<Rule> rules_;
};

}  // namespace gpusim

#endif  // PROFAGENT_TESTS_GPUSIM_COST_MODEL_H_
