// Parsing of step/run NVTX messages: the pattern test and the `key=value` words.
//
// The NVTX convention (shared by the demo, the agent and the analyzer): a range whose message
// matches the step pattern (default `^step\b`) is a step, one matching the run pattern (default
// `^run\b`) is a run; whitespace-separated `key=value` words carry data:
//   tokens=<int>          tokens produced by the step (all sequences)
//   kv=<int>[,<int>...]   KV length(s) of the batch, several values reduced per KvReduce
//   bsz=<int>             batch size
//   phase=<word>          "prefill", "decode", ...
//   label=<word>          free text (one word)
//   warmup=<0|1>          warm-up step/run
// Integers are non-negative decimals without sign or suffix. A known key with a bad value is
// ignored and counted in ParsedStep::bad_values; unknown keys and words without '=' are skipped.
//
// Everything here is pure and thread-compatible: a MessagePattern is immutable after Compile()
// and may be used from any thread. ParseStepMessage does not allocate (phase/label are views
// into the message); Matches() may allocate inside std::regex, so it runs only after the cheap
// literal pre-check passed (the step path, not every NVTX call).
#ifndef PROFAGENT_AGENT_MODEL_STEP_PARSER_H_
#define PROFAGENT_AGENT_MODEL_STEP_PARSER_H_

#include <cstddef>
#include <cstdint>
#include <regex>
#include <string>
#include <string_view>

#include "agent/core/config.h"

namespace profagent {
namespace model {

// A compiled message pattern (ECMAScript regex) plus the literal prefix every match must start
// with, derived from the pattern when it is anchored (`^step\b` -> "step"), so that most
// messages are rejected by one short memcmp.
class MessagePattern {
 public:
  MessagePattern() = default;

  // Compiles `pattern`. Returns false (and sets *error) when it is not a valid regex; the
  // pattern then matches nothing. An empty pattern matches nothing.
  bool Compile(const std::string& pattern, std::string* error);

  // True when the message (UTF-8, `n` bytes, not NUL-terminated) matches.
  bool Matches(const char* msg, size_t n) const;

  // The literal prefix used by the pre-check ("" when none could be derived).
  const std::string& literal_prefix() const { return prefix_; }

 private:
  bool valid_ = false;
  bool anchored_ = false;
  // `^word\b` (the defaults `^step\b`, `^run\b`): matched by comparing bytes, no regex.
  bool word_only_ = false;
  std::string prefix_;
  std::regex re_;
};

// Derives the literal prefix of an anchored ECMAScript pattern: the plain characters after a
// leading '^' up to the first metacharacter (a character followed by a quantifier is excluded).
// Returns "" for unanchored patterns or alternations at top level. Exposed for tests.
std::string LiteralPrefix(const std::string& pattern);

// Fields of a step/run message. -1 (or empty) when not given.
struct ParsedStep {
  int64_t tokens = -1;
  int64_t kv = -1;            // reduced over the listed values
  int64_t bsz = -1;
  std::string_view phase;     // view into the parsed message
  std::string_view label;     // view into the parsed message
  bool warmup = false;
  uint32_t kv_count = 0;      // how many kv values were listed (0 when none)
  uint32_t bad_values = 0;    // known keys with a value that did not parse (ignored)
};

// KV values a message's list holds without allocating (a longer list takes a heap buffer).
constexpr size_t kMaxKvValues = 1024;

// Parses the key=value words of `msg` (n bytes). Allocates only for a `kv=` list of more than
// kMaxKvValues values.
ParsedStep ParseStepMessage(const char* msg, size_t n, KvReduce reduce);

// Reduces `n` (> 0) values: mean (rounded half up), max, p50/p90 (nearest rank: the value at
// rank ceil(p * n / 100) of the sorted values), sum. Sorts `values` in place for percentiles.
int64_t ReduceKv(int64_t* values, size_t n, KvReduce reduce);

// Parses a non-negative decimal integer that must fill [s, s + n). Returns false on anything
// else (empty, sign, junk, overflow of int64).
bool ParseNonNegative(const char* s, size_t n, int64_t* out);

}  // namespace model
}  // namespace profagent

#endif  // PROFAGENT_AGENT_MODEL_STEP_PARSER_H_
