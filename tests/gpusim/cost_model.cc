#include "tests/gpusim/cost_model.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace gpusim {
namespace {

// Parses a whole token as a non-negative finite double.
bool ParseNumber(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v) || v < 0) return false;
  *out = v;
  return true;
}

// Parses "<a>" or "<a>+<b>*threads" (spaces already removed).
bool ParseCost(const std::string& expr, KernelCost* cost) {
  size_t plus = expr.find('+');
  if (plus == std::string::npos) {
    cost->per_thread_us = 0;
    return ParseNumber(expr, &cost->fixed_us);
  }
  static const std::string kSuffix = "*threads";
  std::string rhs = expr.substr(plus + 1);
  if (rhs.size() <= kSuffix.size() ||
      rhs.compare(rhs.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
    return false;
  }
  return ParseNumber(expr.substr(0, plus), &cost->fixed_us) &&
         ParseNumber(rhs.substr(0, rhs.size() - kSuffix.size()), &cost->per_thread_us);
}

}  // namespace

uint64_t KernelCost::DurationNs(uint64_t threads) const {
  double ns = fixed_us * 1000.0 + per_thread_us * 1000.0 * static_cast<double>(threads);
  return ns <= 0 ? 0 : static_cast<uint64_t>(ns + 0.5);
}

bool CostModel::Parse(const std::string& text, std::string* error) {
  std::vector<Rule> rules;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    std::istringstream fields(line);
    std::string pattern;
    if (!(fields >> pattern) || pattern[0] == '#') continue;
    std::string expr, tok;
    while (fields >> tok) expr += tok;
    Rule rule;
    rule.pattern = pattern;
    if (expr.empty() || !ParseCost(expr, &rule.cost)) {
      *error = "line " + std::to_string(line_no) + ": expected '<regex> <us>' or " +
               "'<regex> <us> + <us>*threads', got '" + line + "'";
      return false;
    }
    try {
      rule.regex = std::regex(pattern, std::regex::ECMAScript | std::regex::optimize);
    } catch (const std::regex_error& e) {
      *error = "line " + std::to_string(line_no) + ": bad regex '" + pattern + "': " + e.what();
      return false;
    }
    rules.push_back(std::move(rule));
  }
  rules_ = std::move(rules);
  return true;
}

bool CostModel::LoadFile(const std::string& path, std::string* error) {
  std::ifstream f(path);
  if (!f) {
    *error = "cannot open " + path;
    return false;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  return Parse(ss.str(), error);
}

KernelCost CostModel::ForKernel(const std::string& demangled_name) const {
  for (const Rule& r : rules_) {
    if (std::regex_search(demangled_name, r.regex)) return r.cost;
  }
  return KernelCost();
}

uint64_t CostModel::CopyNs(int copy_kind, uint64_t bytes) const {
  double gbps, latency_ns;
  switch (copy_kind) {
    case kHtoD:
    case kDtoH: gbps = 25; latency_ns = 2000; break;
    case kDtoD: gbps = 1500; latency_ns = 1000; break;
    default: gbps = 10; latency_ns = 1000; break;
  }
  return static_cast<uint64_t>(latency_ns + static_cast<double>(bytes) / gbps);  // 1 GB/s = 1 B/ns
}

uint64_t CostModel::MemsetNs(uint64_t bytes) const {
  return static_cast<uint64_t>(1000 + static_cast<double>(bytes) / 2000);
}

}  // namespace gpusim
