// CompileBounded: an ECMAScript regex from a user (PROFAGENT_STEP_PATTERN, a rules file,
// --step-pattern) made safe to run on any text. libstdc++'s default executor recurses once per
// character matched (`^step.*$` on a 60 KB NVTX message overflows a thread's stack) and
// backtracks exponentially (`(x+x+)+y`); its polynomial executor (a Thompson NFA) does neither,
// at the price of back-references, which are refused. The compiler recurses once per nesting
// level, so patterns longer than kMaxPatternBytes or nested deeper than kMaxNesting are refused
// too. Header-only: used by the agent and by profanalyze.
#ifndef PROFAGENT_AGENT_CORE_BOUNDED_REGEX_H_
#define PROFAGENT_AGENT_CORE_BOUNDED_REGEX_H_

#include <regex>
#include <string>

namespace profagent {

constexpr size_t kMaxPatternBytes = 1024;
constexpr int kMaxNesting = 32;

// False with a reason in *error (no exception) when the pattern is refused or does not compile.
inline bool CompileBounded(const std::string& pattern, std::regex::flag_type flags,
                           std::regex* out, std::string* error) {
  if (pattern.size() > kMaxPatternBytes) {
    *error = "longer than " + std::to_string(kMaxPatternBytes) + " bytes";
    return false;
  }
  int depth = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\') {
      ++i;
    } else if (pattern[i] == '(' && ++depth > kMaxNesting) {
      *error = "groups nested deeper than " + std::to_string(kMaxNesting);
      return false;
    } else if (pattern[i] == ')' && depth > 0) {
      --depth;
    }
  }
  try {
    *out = std::regex(pattern, flags | std::regex_constants::__polynomial);
  } catch (const std::regex_error& e) {
    *error = e.what();
    return false;
  }
  return true;
}

}  // namespace profagent

#endif  // PROFAGENT_AGENT_CORE_BOUNDED_REGEX_H_
