// Bucket rules: how kernel names, NVTX ranges and host API names map to report buckets.
//
// The agent records raw names; buckets are applied here so old profiles can be re-bucketed.
// A rule is (scope, target, bucket, ECMAScript regex, searched case-insensitively anywhere in the
// name, or in its first kMaxMatchBytes when longer). Rules are tried in order and the first
// match wins; rules from a rules file come before the defaults, so a file can override any
// default (and `clear <scope>` drops the defaults of a scope). See RULES.md for the file format
// and the model-bucket precedence:
//   1. a DeviceOp that is a memcpy/memset -> memcpy.h2d|d2h|d2d|h2h|memset|other;
//   2. a model `kernel` rule with a concrete bucket -> that bucket;
//   3. otherwise (the kernel rule said `gemm`, the generic GEMM class, or a bucket written
//      `bucket?`, or nothing matched) the innermost enclosing NVTX range of the launch that
//      matches a model `nvtx` rule decides (`qkv_proj` -> attn.qkv_proj, ...);
//   4. otherwise the `bucket?` rule's bucket, else `others`.
// Engine buckets come from NVTX ranges (engine `nvtx` rules) by exclusive time: a mapped range
// nested in another mapped range takes its time away from the outer one.
//
// Thread safety: a BucketRules is immutable after Load*(); Match* may be called from any thread
// (std::regex matching is const). Matching is slow (regex), so callers cache per string id.
#ifndef PROFAGENT_ANALYZER_REPORT_RULES_H_
#define PROFAGENT_ANALYZER_REPORT_RULES_H_

#include <cstddef>
#include <regex>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace profagent {
namespace analyzer {

// The generic GEMM class of a kernel rule: the projection is decided by the NVTX range.
constexpr char kGemmBucket[] = "gemm";
constexpr char kOthersBucket[] = "others";

enum class RuleScope { kModel, kEngine };
enum class RuleTarget { kKernel, kNvtx, kApi };

struct BucketRule {
  RuleScope scope;
  RuleTarget target;
  std::string bucket;
  std::string pattern;
  std::regex re;
  // A model kernel rule written `bucket?`: its bucket unless an enclosing NVTX range matches a
  // model nvtx rule (a generic library kernel, e.g. a CUB radix sort: the sampler's, or the
  // MoE routing's inside an `expert` range).
  bool yields = false;
};

class BucketRules {
 public:
  // The built-in rules (cuBLAS/cuBLASLt/CUTLASS GEMMs, FlashAttention, FlashInfer, vLLM,
  // SGLang, TensorRT-LLM, NCCL, sampling kernels, common NVTX range names).
  static BucketRules Defaults();

  // Parses a rules file and puts its rules before the current ones. Errors name the file and
  // line.
  absl::Status LoadFile(const std::string& path);
  // Same, from text (`origin` names it in errors).
  absl::Status LoadText(const std::string& text, const std::string& origin);

  // First matching rule's bucket, or "" when none matches; `*yields` (when given) tells
  // whether that rule yields to an NVTX range (BucketRule::yields).
  std::string Match(RuleScope scope, RuleTarget target, const std::string& name,
                    bool* yields = nullptr) const;

  // Every bucket name a rule can produce (plus memcpy.* and others), for registries.
  std::vector<std::string> AllBuckets() const;

 private:
  std::vector<BucketRule> rules_;
};

// True when `bucket` belongs to the canonical model (resp. engine) set; names outside are
// folded into `others` in the bucket tables.
bool IsCanonicalModelBucket(const std::string& bucket);
bool IsCanonicalEngineBucket(const std::string& bucket);

// Sort key giving the canonical order of the bucket tables (see SUMMARY_FORMAT.md).
int CanonicalRank(const std::string& bucket, bool engine);

// Bucket of a device copy/set: copy_kind is cudaMemcpyKind (1 h2d, 2 d2h, 3 d2d, 0 h2h).
std::string MemcpyBucket(bool is_memset, uint32_t copy_kind);

// Regex searches on recorded text (rules, step/run patterns) see at most its first
// kMaxMatchBytes: libstdc++'s std::regex recurses once per character that a quantifier such as
// `.*` consumes (about 300 bytes of stack each), so a long name (a corrupt file, a huge template
// kernel name) overflowed the analysis thread's stack at about 27,000 characters. 4096 keep the
// recursion near 1.2 MB.
constexpr size_t kMaxMatchBytes = 4096;
bool SearchPrefix(const std::string& text, const std::regex& re);

}  // namespace analyzer
}  // namespace profagent

#endif  // PROFAGENT_ANALYZER_REPORT_RULES_H_
