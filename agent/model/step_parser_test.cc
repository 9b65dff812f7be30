// Unit tests of the step/run message parser and the message patterns.
#include "agent/model/step_parser.h"

#include <catch2/catch.hpp>
#include <pthread.h>
#include <cstring>
#include <random>
#include <regex>
#include <string>
#include <vector>

namespace profagent {
namespace model {
namespace {

ParsedStep Parse(const std::string& s, KvReduce r = KvReduce::kMean) {
  return ParseStepMessage(s.data(), s.size(), r);
}

TEST_CASE("all keys of the convention are parsed") {
  const std::string m = "step phase=decode tokens=8 kv=517 bsz=8 label=bs8 warmup=1";
  ParsedStep p = Parse(m);  // phase and label are views into m
  CHECK(p.tokens == 8);
  CHECK(p.kv == 517);
  CHECK(p.kv_count == 1);
  CHECK(p.bsz == 8);
  CHECK(p.phase == "decode");
  CHECK(p.label == "bs8");
  CHECK(p.warmup);
  CHECK(p.bad_values == 0);
}

TEST_CASE("missing keys stay unset and words without '=' or unknown keys are skipped") {
  const std::string m = "step   foo   other=3\tlabel=x";
  ParsedStep p = Parse(m);
  CHECK(p.tokens == -1);
  CHECK(p.kv == -1);
  CHECK(p.kv_count == 0);
  CHECK(p.bsz == -1);
  CHECK(p.phase.empty());
  CHECK(p.label == "x");
  CHECK_FALSE(p.warmup);
  CHECK(p.bad_values == 0);
  CHECK(Parse("").tokens == -1);
  CHECK(Parse("warmup=0").warmup == false);
}

TEST_CASE("the parser reads exactly n bytes, not up to a NUL") {
  const char msg[] = "step tokens=12345";
  // Cut after "tokens=12": the rest of the buffer must not be read.
  ParsedStep p = ParseStepMessage(msg, std::strlen("step tokens=12"), KvReduce::kMean);
  CHECK(p.tokens == 12);
}

TEST_CASE("kv lists are reduced per PROFAGENT_KV_REDUCE") {
  // Values 100, 7, 30, 1, 50, 9, 10, 3, 2, 60 (n = 10): sum 272, mean 27.2, max 100.
  // Sorted: 1 2 3 7 9 10 30 50 60 100; p50 = rank ceil(5.0) = 5 -> 9; p90 = rank 9 -> 60.
  const std::string m = "step kv=100,7,30,1,50,9,10,3,2,60";
  CHECK(Parse(m, KvReduce::kMean).kv == 27);
  CHECK(Parse(m, KvReduce::kMax).kv == 100);
  CHECK(Parse(m, KvReduce::kSum).kv == 272);
  CHECK(Parse(m, KvReduce::kP50).kv == 9);
  CHECK(Parse(m, KvReduce::kP90).kv == 60);
  CHECK(Parse(m).kv_count == 10);
  // Mean rounds half up: (1 + 2) / 2 = 1.5 -> 2; (1 + 2 + 2) / 3 = 1.67 -> 2; (1 + 1 + 2) / 3 -> 1.
  CHECK(Parse("kv=1,2").kv == 2);
  CHECK(Parse("kv=1,2,2").kv == 2);
  CHECK(Parse("kv=1,1,2").kv == 1);
  // Nearest rank with few values: p90 of 3 values is the max, p50 of 2 values the lower one.
  CHECK(Parse("kv=5,1,3", KvReduce::kP90).kv == 5);
  CHECK(Parse("kv=8,4", KvReduce::kP50).kv == 4);
  // One value: every reduction gives it back.
  for (KvReduce r : {KvReduce::kMean, KvReduce::kMax, KvReduce::kP50, KvReduce::kP90,
                     KvReduce::kSum}) {
    CHECK(Parse("step kv=517", r).kv == 517);
  }
}

// A batch of 2000 sequences: every value counts (before, those past the 1024th were ignored:
// the mean of 1..2000 read 513, not 1001).
TEST_CASE("a kv list longer than 1024 values is reduced whole") {
  std::string m = "step tokens=7 kv=";
  for (int i = 1; i <= 2000; ++i) m += (i > 1 ? "," : "") + std::to_string(i);
  m += " bsz=2000";
  const ParsedStep p = Parse(m);
  CHECK(p.kv == 1001);  // (1 + 2000) / 2 = 1000.5, rounded half up
  CHECK(p.kv_count == 2000);
  CHECK(p.tokens == 7);
  CHECK(p.bsz == 2000);
  CHECK(Parse(m, KvReduce::kMax).kv == 2000);
  CHECK(Parse(m, KvReduce::kP90).kv == 1800);
  CHECK(Parse(m, KvReduce::kSum).kv == 2001000);
}

TEST_CASE("ReduceKv on a long list does not overflow the mean") {
  std::vector<int64_t> v(1000, INT64_MAX / 2);
  CHECK(ReduceKv(v.data(), v.size(), KvReduce::kMean) == INT64_MAX / 2);
  CHECK(ReduceKv(v.data(), 0, KvReduce::kMax) == -1);
}

TEST_CASE("bad values are ignored and counted") {
  ParsedStep p = Parse("step tokens=abc kv=1,x,3 bsz=-4 phase= label= warmup=yes tokens=");
  CHECK(p.tokens == -1);
  CHECK(p.kv == -1);
  CHECK(p.bsz == -1);
  CHECK(p.phase.empty());
  CHECK(p.label.empty());
  CHECK_FALSE(p.warmup);
  CHECK(p.bad_values == 7);
  // A bad value does not erase an earlier good one, and a later good one still counts.
  ParsedStep q = Parse("step tokens=5 tokens=5x kv=,1 kv=1,,2 kv=4,6 bsz=99999999999999999999");
  CHECK(q.tokens == 5);
  CHECK(q.kv == 5);
  CHECK(q.bsz == -1);
  CHECK(q.bad_values == 4);
}

TEST_CASE("ParseNonNegative accepts exactly the non-negative int64 decimals") {
  int64_t v = 0;
  CHECK(ParseNonNegative("0", 1, &v));
  CHECK(v == 0);
  CHECK(ParseNonNegative("9223372036854775807", 19, &v));
  CHECK(v == INT64_MAX);
  CHECK_FALSE(ParseNonNegative("9223372036854775808", 19, &v));
  CHECK_FALSE(ParseNonNegative("+1", 2, &v));
  CHECK_FALSE(ParseNonNegative("1e3", 3, &v));
  CHECK_FALSE(ParseNonNegative("", 0, &v));
}

TEST_CASE("default patterns match the convention") {
  MessagePattern step, run;
  std::string err;
  REQUIRE(step.Compile("^step\\b", &err));
  REQUIRE(run.Compile("^run\\b", &err));
  CHECK(step.literal_prefix() == "step");
  auto m = [](const MessagePattern& p, const std::string& s) { return p.Matches(s.data(), s.size()); };
  CHECK(m(step, "step"));
  CHECK(m(step, "step phase=decode tokens=8"));
  CHECK_FALSE(m(step, "steps"));       // \b: "steps" is another word
  CHECK_FALSE(m(step, "stepper 3"));
  CHECK_FALSE(m(step, " step"));       // anchored
  CHECK_FALSE(m(step, "prefill"));
  CHECK_FALSE(m(step, "ste"));
  CHECK(m(run, "run label=bs8 warmup=1"));
  CHECK_FALSE(m(run, "running"));
  CHECK_FALSE(m(run, "step"));
}

TEST_CASE("patterns are configurable") {
  MessagePattern p;
  std::string err;
  REQUIRE(p.Compile("^(decode|prefill)_iter\\b", &err));
  CHECK(p.literal_prefix().empty());  // alternation: no pre-check
  CHECK(p.Matches("decode_iter 3", 13));
  CHECK(p.Matches("prefill_iter", 12));
  CHECK_FALSE(p.Matches("sampler", 7));

  MessagePattern q;
  REQUIRE(q.Compile("iteration [0-9]+", &err));  // unanchored: matches anywhere
  CHECK(q.literal_prefix().empty());
  CHECK(q.Matches("engine iteration 42 tokens=3", 28));
  CHECK_FALSE(q.Matches("iteration x", 11));

  MessagePattern bad;
  CHECK_FALSE(bad.Compile("^step(", &err));
  CHECK_FALSE(err.empty());
  CHECK_FALSE(bad.Matches("step(", 5));

  MessagePattern off;
  REQUIRE(off.Compile("", &err));  // empty pattern: nothing is a step
  CHECK_FALSE(off.Matches("step", 4));
}

TEST_CASE("LiteralPrefix keeps only characters every match must start with") {
  CHECK(LiteralPrefix("^step\\b") == "step");
  CHECK(LiteralPrefix("^steps?\\b") == "step");
  CHECK(LiteralPrefix("^ab*c") == "a");
  CHECK(LiteralPrefix("^ab+c") == "ab");
  CHECK(LiteralPrefix("^a{2}") == "");
  CHECK(LiteralPrefix("^Step.*") == "Step");
  CHECK(LiteralPrefix("step") == "");
  CHECK(LiteralPrefix("^run|^step") == "");
}

TEST_CASE("random messages: no crash, no read past n, results within the convention") {
  // Pieces of the grammar glued at random, including truncations and junk bytes.
  const char* pieces[] = {"step", " ", "\t", "tokens=", "kv=", "bsz=", "phase=", "label=",
                          "warmup=", "=", ",", "1", "0", "99999999999999999999", "-", "x",
                          "decode", "\xff", "kv=1,2,3", "tokens=8"};
  std::mt19937 rng(12345);
  for (int iter = 0; iter < 20000; ++iter) {
    std::string m;
    const int n = int(rng() % 12);
    for (int i = 0; i < n; ++i) m += pieces[rng() % (sizeof(pieces) / sizeof(pieces[0]))];
    // Copy into an exact-size heap buffer so that a read past the end is caught by sanitizers.
    std::vector<char> buf(m.begin(), m.end());
    const KvReduce r = KvReduce(rng() % 5);
    ParsedStep p = ParseStepMessage(buf.data(), buf.size(), r);
    CHECK(p.tokens >= -1);
    CHECK(p.kv >= -1);
    CHECK(p.bsz >= -1);
    CHECK((p.kv == -1) == (p.kv_count == 0));
    if (!p.phase.empty()) {
      CHECK(p.phase.data() >= buf.data());
      CHECK(p.phase.data() + p.phase.size() <= buf.data() + buf.size());
    }
  }
}

// User patterns run on the application's threads, whatever their stack and their messages: a
// pattern is matched without recursion per character or exponential backtracking (before,
// `^step.*$` on a 1500-byte message overflowed a 64 KiB thread stack, and `(x+x+)+y` hung), and
// a pattern nested too deep (the compiler recurses per level) or using back-references is
// refused with a reason.
void* MatchOnSmallStack(void* arg) {
  auto* result = static_cast<int*>(arg);
  MessagePattern p;
  std::string error;
  if (!p.Compile("^step.*$", &error)) return nullptr;
  const std::string msg = "step " + std::string(1500, 'x');
  result[0] = p.Matches(msg.data(), msg.size());
  MessagePattern slow;
  if (!slow.Compile("(x+x+)+y", &error)) return nullptr;
  const std::string xs(64, 'x');
  result[1] = slow.Matches(xs.data(), xs.size());
  return nullptr;
}

TEST_CASE("patterns: bounded recursion and time on any message, refused when too complex") {
  int result[2] = {-1, -1};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  pthread_t t;
  REQUIRE(pthread_create(&t, &attr, MatchOnSmallStack, result) == 0);
  pthread_join(t, nullptr);
  pthread_attr_destroy(&attr);
  CHECK(result[0] == 1);
  CHECK(result[1] == 0);
  MessagePattern p;
  std::string error;
  CHECK_FALSE(p.Compile(std::string(20000, '(') + std::string(20000, ')'), &error));
  CHECK(error.find("longer than 1024 bytes") != std::string::npos);
  CHECK_FALSE(p.Compile(std::string(40, '(') + std::string(40, ')'), &error));
  CHECK(error.find("nested deeper than 32") != std::string::npos);
  CHECK_FALSE(p.Compile("(a)\\1", &error));
  CHECK(p.Compile("^(step|iter)\\b", &error));
}

// `^step\b` (the default) is matched by comparing bytes: the same answers as the regex.
TEST_CASE("the default patterns match like their regex without running it") {
  MessagePattern p;
  std::string error;
  REQUIRE(p.Compile("^step\\b", &error));
  const std::regex re("^step\\b", std::regex::ECMAScript);
  for (const char* m : {"step", "step tokens=1", "step\tx", "step.x", "steps", "stepX", "step_1",
                        "step9", "Step", "ste", "", " step", "step-2"}) {
    INFO(m);
    CHECK(p.Matches(m, std::strlen(m)) == std::regex_search(m, re));
  }
}

}  // namespace
}  // namespace model
}  // namespace profagent
