#include "analyzer/report/rules.h"

#include <sys/stat.h>

#include "agent/core/bounded_regex.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace profagent {
namespace analyzer {
namespace {

// The built-in rules, in the rules-file format (RULES.md). Order matters: first match wins.
constexpr char kDefaultRules[] = R"(
# --- collectives (NCCL ncclDevKernel_*/ncclKernel_*, vLLM/SGLang custom all-reduce, TRT-LLM) ---
model kernel comm.allreduce   allreduce|all_reduce|cross_device_reduce
model kernel comm.allgather   allgather|all_gather
model kernel comm.reducescatter reducescatter|reduce_scatter
model kernel comm.alltoall    alltoall|all_to_all
model kernel comm.broadcast   nccl.*(broadcast|bcast)
model kernel comm.reduce      nccl(dev)?kernel_reduce|^ncclreduce$
model kernel comm.sendrecv    nccl.*(sendrecv|send|recv)
model kernel comm.other       nccl
# --- attention: FlashAttention 2/3, FlashInfer, vLLM, SGLang (Triton), TensorRT-LLM, xFormers,
# llama.cpp (flash_attn_ext; soft_max_f32 is its attention softmax without flash attention) ---
model kernel attn.rope        rotary|(^|[^a-z])rope([^a-z]|$)|biasrope|applyrope|ropeupdate
model kernel attn.compute     flash_fwd|flash_bwd|flash::|flashattn|fmha|paged_attention|pagedattention|withpagedkvcache|withraggedkvcache|withkvcache|mergestates|mlapagedattention|xqa|masked_multihead_attention|mmha|decode_attention|_fwd_kernel|_fwd_grouped_kernel|attention|attn
model kernel attn.compute     reshape_and_cache|concat_and_cache|store_kvcache|set_kv_buffer|set_rows|(^|[^a-z])soft_max_f(32|16)
# --- MoE: Triton fused_moe, vLLM/SGLang routing, TensorRT-LLM MoE ---
model kernel moe.routing      topk_softmax|topkgating|moe_align|align_block_size|count_and_sort_expert|expert_tokens|moe_permute|moe_unpermute|expandinputrows|moe_sum
model kernel moe.experts      fused_moe|moefcgemm|grouped_gemm|moe
# --- norms, activations, embedding ---
model kernel norm             rms_?norm|layer_?norm|layernorm|rmsnorm|groupnorm
model kernel mlp.act          act_and_mul|silu|gelu|swiglu|geglu|doactivation|activation
model kernel embed            embedding|embed|indexselect|index_select|get_rows|tensorrt_llm::kernels::lookup_kernel
# --- sampling (FlashInfer sampling, PyTorch top-k/sort/softmax, argmax) ---
model kernel sampler          topk|top_k|topp|top_p|sampling|sample|argmax|multinomial|gumbel|softmax|gathertopk|applypenalt|apply_penalt
# a sort (CUB's radix sort under torch.sort) is the sampler's, unless an NVTX range says whose
# (MoE routing sorts expert ids) ---
model kernel sampler?         radixsort
# --- GEMMs: cuBLAS (sm90_xmma_gemm_*, ampere_*gemm*, nvjet_*, gemv*), cuBLASLt, CUTLASS, Marlin, Triton,
# llama.cpp (mul_mat_q, mul_mat_vec_q, mmq, mmvq, mmf) ---
model kernel gemm             gemm|gemv|xmma|nvjet|cutlass|s16816|s1688|h16816|h1688|wgmma|sm\d+_|ampere_|volta_|turing_|hopper_|matmul|mul_mat|\bmmv?[qf]\b|splitk|marlin|cublas|cijk_
# --- projections, decided by the innermost enclosing NVTX range ---
model nvtx attn.qkv_proj      qkv_proj|\bqkv\b|\bq_proj|\bk_proj|\bv_proj|query_key_value|c_attn
model nvtx attn.o_proj        \bo_proj|out_proj|attn_out
model nvtx mlp.gate_up_proj   gate_up_proj|\bup_proj|gate_proj|\bfc1\b|\bw13\b|\bw1\b|dense_h_to_4h
model nvtx mlp.down_proj      down_proj|\bfc2\b|\bw2\b|dense_4h_to_h
model nvtx lm_head            lm_head|logits
model nvtx embed              embed
model nvtx attn.rope          rotary|(^|[^a-z])rope([^a-z]|$)|biasrope|applyrope|ropeupdate
model nvtx norm               norm
model nvtx moe.experts        \bmoe\b|expert
model nvtx sampler            sampl
# --- engine phases (NVTX ranges; step and run ranges are never engine buckets) ---
engine nvtx schedule          schedul
engine nvtx prefill           prefill
engine nvtx decode            decode
engine nvtx sampler           sampl
engine nvtx postproc          postproc|post_proc|detoken|process_output|output_proc|process_batch_result
engine nvtx kv.swap           swap
engine nvtx kv.cache          kv_?cache|kvcache|cache_engine|block_manager
engine nvtx comm.collective   allreduce|all_reduce|allgather|all_gather|nccl|collective
engine api  comm.nccl         ^nccl
engine api  comm.mpi          ^MPI_
)";

const char* const kModelOrder[] = {"embed",        "attn.qkv_proj", "attn.rope",
                                   "attn.compute", "attn.o_proj",   "mlp.gate_up_proj",
                                   "mlp.act",      "mlp.down_proj", "norm",
                                   "lm_head",      "moe.*",         "sampler",
                                   "comm.*",       "memcpy.*"};
const char* const kEngineOrder[] = {"schedule", "prefill", "decode", "sampler",
                                    "postproc", "kv.*",    "comm.*"};

template <size_t N>
int RankIn(const char* const (&order)[N], const std::string& b) {
  for (size_t i = 0; i < N; ++i) {
    std::string o = order[i];
    if (o.size() > 2 && o.compare(o.size() - 2, 2, ".*") == 0) {
      std::string fam = o.substr(0, o.size() - 1);  // "moe."
      if (b.size() > fam.size() && b.compare(0, fam.size(), fam) == 0) return int(i);
    } else if (o == b) {
      return int(i);
    }
  }
  return -1;
}

}  // namespace

BucketRules BucketRules::Defaults() {
  BucketRules r;
  absl::Status s = r.LoadText(kDefaultRules, "<default rules>");
  (void)s;  // the built-in text is covered by rules_test
  return r;
}

absl::Status BucketRules::LoadFile(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not a rules file"));
  }
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open rules file"));
  // A rules file is a few lines: read at most 1 MiB (not /dev/zero until memory runs out).
  constexpr size_t kMaxBytes = size_t(1) << 20;
  std::string text(kMaxBytes + 1, '\0');
  in.read(&text[0], std::streamsize(text.size()));
  text.resize(size_t(in.gcount()));
  if (text.size() > kMaxBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": rules file larger than 1 MiB"));
  }
  return LoadText(text, path);
}

absl::Status BucketRules::LoadText(const std::string& text, const std::string& origin) {
  std::vector<BucketRule> added;
  bool clear_model = false, clear_engine = false;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    // A `#` after whitespace starts a trailing comment (a regex writes `[#]` for one there).
    for (size_t i = 1; i < line.size(); ++i) {
      if (line[i] == '#' && (line[i - 1] == ' ' || line[i - 1] == '\t')) {
        line = absl::StripTrailingAsciiWhitespace(line.substr(0, i));
        break;
      }
    }
    std::vector<std::string> w = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    auto err = [&](const std::string& what) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ":", line_no, ": ", what));
    };
    if (w[0] == "clear") {
      if (w.size() != 2 || (w[1] != "model" && w[1] != "engine")) {
        return err("expected `clear model` or `clear engine`");
      }
      (w[1] == "model" ? clear_model : clear_engine) = true;
      continue;
    }
    if (w.size() < 4) return err("expected `<model|engine> <kernel|nvtx|api> <bucket> <regex>`");
    BucketRule rule;
    if (w[0] == "model") {
      rule.scope = RuleScope::kModel;
    } else if (w[0] == "engine") {
      rule.scope = RuleScope::kEngine;
    } else {
      return err(absl::StrCat("unknown scope `", w[0], "` (model or engine)"));
    }
    if (w[1] == "kernel") {
      rule.target = RuleTarget::kKernel;
    } else if (w[1] == "nvtx") {
      rule.target = RuleTarget::kNvtx;
    } else if (w[1] == "api") {
      rule.target = RuleTarget::kApi;
    } else {
      return err(absl::StrCat("unknown target `", w[1], "` (kernel, nvtx or api)"));
    }
    rule.bucket = w[2];
    if (rule.bucket.size() > 1 && rule.bucket.back() == '?') {
      if (rule.scope != RuleScope::kModel || rule.target != RuleTarget::kKernel) {
        return err("`bucket?` (yield to an NVTX range) is for model kernel rules only");
      }
      rule.bucket.pop_back();
      rule.yields = true;
    }
    // The regex is the rest of the line after the bucket (it may contain spaces).
    size_t pos = line.find(w[2], line.find(w[1]) + w[1].size()) + w[2].size();
    rule.pattern = std::string(absl::StripAsciiWhitespace(line.substr(pos)));
    std::string why;
    if (!CompileBounded(rule.pattern,
                        std::regex::ECMAScript | std::regex::icase | std::regex::optimize,
                        &rule.re, &why)) {
      return err(absl::StrCat("bad regex `", rule.pattern.substr(0, 80), "`: ", why));
    }
    added.push_back(std::move(rule));
  }
  std::vector<BucketRule> kept;
  for (auto& r : rules_) {
    if ((r.scope == RuleScope::kModel && clear_model) ||
        (r.scope == RuleScope::kEngine && clear_engine)) {
      continue;
    }
    kept.push_back(std::move(r));
  }
  added.insert(added.end(), std::make_move_iterator(kept.begin()),
               std::make_move_iterator(kept.end()));
  rules_ = std::move(added);
  return absl::OkStatus();
}

std::string BucketRules::Match(RuleScope scope, RuleTarget target, const std::string& name,
                               bool* yields) const {
  for (const BucketRule& r : rules_) {
    if (r.scope != scope || r.target != target) continue;
    if (SearchPrefix(name, r.re)) {
      if (yields != nullptr) *yields = r.yields;
      return r.bucket;
    }
  }
  if (yields != nullptr) *yields = false;
  return "";
}

std::vector<std::string> BucketRules::AllBuckets() const {
  std::set<std::string> s = {kOthersBucket, "memcpy.h2d", "memcpy.d2h",   "memcpy.d2d",
                             "memcpy.h2h",  "memcpy.memset", "memcpy.other"};
  for (const auto& r : rules_) s.insert(r.bucket);
  return std::vector<std::string>(s.begin(), s.end());
}

bool IsCanonicalModelBucket(const std::string& b) { return RankIn(kModelOrder, b) >= 0; }
bool IsCanonicalEngineBucket(const std::string& b) { return RankIn(kEngineOrder, b) >= 0; }

int CanonicalRank(const std::string& b, bool engine) {
  int r = engine ? RankIn(kEngineOrder, b) : RankIn(kModelOrder, b);
  return r < 0 ? 1000 : r;
}

bool SearchPrefix(const std::string& text, const std::regex& re) {
  const size_t n = std::min(text.size(), kMaxMatchBytes);
  return std::regex_search(text.begin(), text.begin() + std::ptrdiff_t(n), re);
}

std::string MemcpyBucket(bool is_memset, uint32_t copy_kind) {
  if (is_memset) return "memcpy.memset";
  switch (copy_kind) {
    case 0: return "memcpy.h2h";
    case 1: return "memcpy.h2d";
    case 2: return "memcpy.d2h";
    case 3: return "memcpy.d2d";
    default: return "memcpy.other";
  }
}

}  // namespace analyzer
}  // namespace profagent
