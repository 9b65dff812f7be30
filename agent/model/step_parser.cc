#include "agent/model/step_parser.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <vector>

#include "agent/core/bounded_regex.h"

namespace profagent {
namespace model {

namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

bool IsRegexMeta(char c) { return std::strchr("\\^$.|?*+()[]{}", c) != nullptr; }

bool KeyIs(const char* k, size_t kn, const char* want) {
  size_t wn = std::strlen(want);
  return kn == wn && std::memcmp(k, want, kn) == 0;
}

// Parses "a,b,c" into values (room for `cap`, the list's comma count + 1). Returns false when
// any listed value is bad.
bool ParseKvList(const char* s, size_t n, int64_t* values, size_t cap, size_t* count) {
  *count = 0;
  if (n == 0) return false;
  size_t start = 0;
  for (size_t i = 0; i <= n; ++i) {
    if (i == n || s[i] == ',') {
      int64_t v;
      if (!ParseNonNegative(s + start, i - start, &v)) return false;
      if (*count < cap) values[(*count)++] = v;
      start = i + 1;
    }
  }
  return true;
}

}  // namespace

std::string LiteralPrefix(const std::string& pattern) {
  if (pattern.empty() || pattern[0] != '^') return "";
  if (pattern.find('|') != std::string::npos) return "";  // alternation: no common prefix
  std::string prefix;
  for (size_t i = 1; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (IsRegexMeta(c)) {
      // A quantifier that allows zero repetitions makes the previous literal optional.
      if ((c == '?' || c == '*' || c == '{') && !prefix.empty()) prefix.pop_back();
      break;
    }
    prefix.push_back(c);
  }
  return prefix;
}

bool MessagePattern::Compile(const std::string& pattern, std::string* error) {
  valid_ = false;
  prefix_.clear();
  if (pattern.empty()) return true;
  std::string why;
  if (!CompileBounded(pattern, std::regex::ECMAScript | std::regex::optimize, &re_, &why)) {
    if (error) *error = "bad regex '" + pattern.substr(0, 80) + "': " + why;
    return false;
  }
  prefix_ = LiteralPrefix(pattern);
  // ^ then word characters then \b, nothing else: the message starts with that word.
  word_only_ = pattern.size() > 3 && pattern[0] == '^' &&
               pattern.compare(pattern.size() - 2, 2, "\\b") == 0 &&
               prefix_.size() == pattern.size() - 3 && !prefix_.empty();
  for (char c : prefix_) {
    word_only_ = word_only_ && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  }
  valid_ = true;
  return true;
}

bool MessagePattern::Matches(const char* msg, size_t n) const {
  if (!valid_) return false;
  if (!prefix_.empty() &&
      (n < prefix_.size() || msg[0] != prefix_[0] ||  // most messages fail on the first byte
       std::memcmp(msg, prefix_.data(), prefix_.size()) != 0)) {
    return false;
  }
  if (word_only_) {  // the prefix matched: a word boundary follows it
    const size_t k = prefix_.size();
    return n == k || !(std::isalnum(static_cast<unsigned char>(msg[k])) || msg[k] == '_');
  }
  try {
    return std::regex_search(msg, msg + n, re_);
  } catch (...) {  // e.g. regex_error(error_complexity): never let it reach the application
    return false;
  }
}

bool ParseNonNegative(const char* s, size_t n, int64_t* out) {
  // 19 digits cannot overflow uint64; INT64_MAX has 19 digits, so longer input is rejected.
  if (n == 0 || n > 19) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + uint64_t(s[i] - '0');
  }
  if (v > uint64_t(INT64_MAX)) return false;
  *out = int64_t(v);
  return true;
}

int64_t ReduceKv(int64_t* values, size_t n, KvReduce reduce) {
  if (n == 0) return -1;
  switch (reduce) {
    case KvReduce::kMax:
      return *std::max_element(values, values + n);
    case KvReduce::kSum: {
      int64_t s = 0;
      for (size_t i = 0; i < n; ++i) s += values[i];
      return s;
    }
    case KvReduce::kP50:
    case KvReduce::kP90: {
      const size_t p = reduce == KvReduce::kP50 ? 50 : 90;
      size_t rank = (p * n + 99) / 100;  // ceil(p * n / 100), >= 1 since n >= 1
      std::nth_element(values, values + (rank - 1), values + n);
      return values[rank - 1];
    }
    case KvReduce::kMean:
    default: {
      // Sum in 128 bits so large lists cannot overflow; mean rounded half up.
      __int128 s = 0;
      for (size_t i = 0; i < n; ++i) s += values[i];
      return int64_t((s + __int128(n / 2)) / __int128(n));
    }
  }
}

ParsedStep ParseStepMessage(const char* msg, size_t n, KvReduce reduce) {
  ParsedStep out;
  int64_t kv_values[kMaxKvValues];
  size_t i = 0;
  while (i < n) {
    while (i < n && IsSpace(msg[i])) ++i;
    size_t w = i;
    while (i < n && !IsSpace(msg[i])) ++i;
    if (w == i) break;
    const char* word = msg + w;
    size_t wn = i - w;
    const char* eq = static_cast<const char*>(std::memchr(word, '=', wn));
    if (eq == nullptr) continue;
    const char* key = word;
    size_t kn = size_t(eq - word);
    const char* val = eq + 1;
    size_t vn = wn - kn - 1;
    int64_t v;
    if (KeyIs(key, kn, "tokens")) {
      if (ParseNonNegative(val, vn, &v)) out.tokens = v; else ++out.bad_values;
    } else if (KeyIs(key, kn, "bsz")) {
      if (ParseNonNegative(val, vn, &v)) out.bsz = v; else ++out.bad_values;
    } else if (KeyIs(key, kn, "kv")) {
      // Every listed value counts: a list longer than the stack's room (a batch of thousands
      // of sequences) gets a heap buffer (before, values past the 1024th were ignored).
      const size_t listed = size_t(std::count(val, val + vn, ',')) + 1;
      std::vector<int64_t> heap;
      int64_t* values = kv_values;
      if (listed > kMaxKvValues) {
        heap.resize(listed);
        values = heap.data();
      }
      size_t count = 0;
      if (ParseKvList(val, vn, values, std::max(listed, kMaxKvValues), &count)) {
        out.kv = ReduceKv(values, count, reduce);
        out.kv_count = uint32_t(count);
      } else {
        ++out.bad_values;
      }
    } else if (KeyIs(key, kn, "phase")) {
      if (vn > 0) out.phase = std::string_view(val, vn); else ++out.bad_values;
    } else if (KeyIs(key, kn, "label")) {
      if (vn > 0) out.label = std::string_view(val, vn); else ++out.bad_values;
    } else if (KeyIs(key, kn, "warmup")) {
      if (vn == 1 && (val[0] == '0' || val[0] == '1')) out.warmup = val[0] == '1';
      else ++out.bad_values;
    }
  }
  return out;
}

}  // namespace model
}  // namespace profagent
