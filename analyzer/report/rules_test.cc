// The default bucket rules against real kernel/NVTX names, and rules-file overrides.
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "analyzer/report/rules.h"

namespace profagent {
namespace analyzer {
namespace {

std::string K(const BucketRules& r, const std::string& name) {
  return r.Match(RuleScope::kModel, RuleTarget::kKernel, name);
}

TEST_CASE("default kernel rules recognize the usual libraries") {
  BucketRules r = BucketRules::Defaults();
  // GEMMs: the projection is decided by NVTX, so the class is `gemm`.
  CHECK(K(r, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1") ==
        "gemm");
  CHECK(K(r, "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn") == "gemm");
  CHECK(K(r, "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_"
             "align8>(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8::"
             "Params)") == "gemm");
  CHECK(K(r, "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT") == "gemm");
  CHECK(K(r, "void gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, float, 128, 16, 4>"
             "(...)") == "gemm");
  // Attention.
  CHECK(K(r, "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4>>"
             "(Flash_fwd_params)") == "attn.compute");
  CHECK(K(r, "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<"
             "...>>>(...)") == "attn.compute");
  CHECK(K(r, "void flashinfer::BatchDecodeWithPagedKVCacheKernel<...>(...)") == "attn.compute");
  CHECK(K(r, "void vllm::paged_attention_v1_kernel<__nv_bfloat16, 128, 16>(...)") ==
        "attn.compute");
  CHECK(K(r, "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16>(...)") == "attn.compute");
  CHECK(K(r, "_fwd_grouped_kernel_stage1") == "attn.compute");  // SGLang Triton decode
  // Layers around attention.
  CHECK(K(r, "void vllm::rotary_embedding_kernel<c10::BFloat16, true>(...)") == "attn.rope");
  CHECK(K(r, "void vllm::rms_norm_kernel<c10::BFloat16>(...)") == "norm");
  CHECK(K(r, "void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(...)") == "norm");
  CHECK(K(r, "void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel>(...)") ==
        "mlp.act");
  CHECK(K(r, "void at::native::indexSelectLargeIndex<c10::BFloat16, long, unsigned int>(...)") ==
        "embed");
  // TensorRT-LLM's embedding lookup (qualified: a bare lookup_kernel is hash-map code) and
  // sampling penalties.
  CHECK(K(r, "void tensorrt_llm::kernels::lookup_kernel<__nv_bfloat16, int>(...)") == "embed");
  CHECK(K(r, "void cuckoo::lookup_kernel<int>(...)").empty());  // no rule: `others`
  CHECK(K(r, "void tensorrt_llm::kernels::batchApplyPenalty<float>(...)") == "sampler");
  // MoE and sampling.
  CHECK(K(r, "fused_moe_kernel") == "moe.experts");
  CHECK(K(r, "void vllm::moe::topkGatingSoftmax<8, 8>(...)") == "moe.routing");
  CHECK(K(r, "void flashinfer::sampling::TopKTopPSamplingFromProbKernel<...>(...)") == "sampler");
  CHECK(K(r, "void at::native::(anonymous namespace)::gatherTopK<float, unsigned int, 2>(...)") ==
        "sampler");
  // Collectives.
  CHECK(K(r, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)") ==
        "comm.allreduce");
  CHECK(K(r, "ncclKernel_AllGather_RING_LL_Sum_int8_t") == "comm.allgather");
  CHECK(K(r, "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)") == "comm.sendrecv");
  CHECK(K(r, "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 2>(...)") == "comm.allreduce");
  // Events-mode NCCL ops are named after the API.
  CHECK(K(r, "ncclReduce") == "comm.reduce");
  CHECK(K(r, "ncclBcast") == "comm.broadcast");
  CHECK(K(r, "ncclReduceScatter") == "comm.reducescatter");
  // llama.cpp's CUDA backend.
  CHECK(K(r, "void mul_mat_vec_q<(ggml_type)12, 1>(...)") == "gemm");
  CHECK(K(r, "void mul_mat_q<(ggml_type)8, 64, false>(...)") == "gemm");
  CHECK(K(r, "void k_get_rows_float<float, float>(...)") == "embed");
  CHECK(K(r, "void soft_max_f32<true, 0, 0>(...)") == "attn.compute");
  CHECK(K(r, "void flash_attn_ext_f16<128, 128, 8, 8, (ggml_type)1, false>(...)") ==
        "attn.compute");
  CHECK(K(r, "void rms_norm_f32<1024>(...)") == "norm");
  CHECK(K(r, "void rope_neox<true, float>(...)") == "attn.rope");
  // TensorRT-LLM's fused QKV bias + RoPE + KV-cache write.
  CHECK(K(r, "void tensorrt_llm::kernels::applyBiasRopeUpdateKVCacheV2<__nv_bfloat16>(...)") ==
        "attn.rope");
  CHECK(K(r, "void k_set_rows<float, __half>(...)") == "attn.compute");
  // PyTorch's softmax stays with sampling.
  CHECK(K(r, "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10>(...)") ==
        "sampler");
  // Unknown stays unmatched (the analyzer folds it into `others`); no false "rope" in property.
  CHECK(K(r, "elementwise_kernel_with_index_property") == "");
}

TEST_CASE("default NVTX rules: projections and engine phases") {
  BucketRules r = BucketRules::Defaults();
  auto M = [&](const std::string& n) { return r.Match(RuleScope::kModel, RuleTarget::kNvtx, n); };
  auto E = [&](const std::string& n) { return r.Match(RuleScope::kEngine, RuleTarget::kNvtx, n); };
  CHECK(M("qkv_proj") == "attn.qkv_proj");
  CHECK(M("self_attn.o_proj") == "attn.o_proj");
  CHECK(M("mlp.gate_up_proj") == "mlp.gate_up_proj");
  CHECK(M("mlp.down_proj") == "mlp.down_proj");
  CHECK(M("lm_head") == "lm_head");
  CHECK(M("layer 3") == "");
  CHECK(E("schedule") == "schedule");
  CHECK(E("prefill") == "prefill");
  CHECK(E("decode") == "decode");
  CHECK(E("detokenize") == "postproc");
  CHECK(E("process_batch_result") == "postproc");  // SGLang's scheduler
  CHECK(E("step kv=512 tokens=8") == "");
  CHECK(r.Match(RuleScope::kEngine, RuleTarget::kApi, "ncclAllReduce") == "comm.nccl");
}

TEST_CASE("a rules file overrides the defaults, `clear` drops them, errors name the line") {
  BucketRules r = BucketRules::Defaults();
  REQUIRE(r.LoadText("# my engine\nmodel kernel attn.compute my_attn_.*\n"
                     "model kernel norm   rms norm with spaces\n"
                     "model kernel others flash_fwd\n",
                     "rules.txt")
              .ok());
  CHECK(K(r, "my_attn_kernel") == "attn.compute");
  CHECK(K(r, "rms norm with spaces") == "norm");
  CHECK(K(r, "flash_fwd_kernel") == "others");            // override wins
  CHECK(K(r, "vllm::rms_norm_kernel<float>") == "norm");  // defaults still there
  REQUIRE(r.LoadText("clear model\nmodel kernel norm foo\n", "r2").ok());
  CHECK(K(r, "flash_fwd_kernel") == "");
  CHECK(K(r, "foo") == "norm");
  CHECK(r.Match(RuleScope::kEngine, RuleTarget::kNvtx, "decode") == "decode");

  absl::Status s = r.LoadText("model kernel\n", "bad.rules");
  CHECK(s.message() == "bad.rules:1: expected `<model|engine> <kernel|nvtx|api> <bucket> <regex>`");
  s = r.LoadText("\nmodel kernel norm (unclosed\n", "bad.rules");
  CHECK(std::string(s.message()).rfind("bad.rules:2: bad regex `(unclosed`", 0) == 0);
  s = r.LoadText("gpu kernel norm x\n", "bad.rules");
  CHECK(s.message() == "bad.rules:1: unknown scope `gpu` (model or engine)");
  CHECK(r.LoadFile("/nonexistent/rules").message() == "/nonexistent/rules: cannot open rules file");
}

// `bucket?`: the rule's bucket, yielding to an NVTX range (the analyzer decides with it).
TEST_CASE("a kernel rule written bucket? yields to NVTX ranges; only kernel rules may") {
  BucketRules r = BucketRules::Defaults();
  bool yields = false;
  CHECK(r.Match(RuleScope::kModel, RuleTarget::kKernel,
                "void cub::CUB_300001_SM_750::DeviceRadixSortOnesweepKernel<...>(...)",
                &yields) == "sampler");
  CHECK(yields);
  CHECK(r.Match(RuleScope::kModel, RuleTarget::kKernel, "topKPerRowDecode", &yields) == "sampler");
  CHECK(!yields);
  REQUIRE(r.LoadText("model kernel norm? my_norm\n", "y.rules").ok());
  CHECK(r.Match(RuleScope::kModel, RuleTarget::kKernel, "my_norm_kernel", &yields) == "norm");
  CHECK(yields);
  CHECK(r.LoadText("engine nvtx decode? dec\n", "y.rules").message() ==
        "y.rules:1: `bucket?` (yield to an NVTX range) is for model kernel rules only");
  for (const std::string& b : r.AllBuckets()) CHECK(b.back() != '?');
}

TEST_CASE("a trailing comment after whitespace is not part of the regex") {
  BucketRules r = BucketRules::Defaults();
  REQUIRE(r.LoadText("model kernel mlp.act rms_norm   # fused here\n"
                     "model kernel gemm ^my_gemm_\t# projection decided by NVTX\n"
                     "model kernel embed tok[#]emb\n",
                     "rules.txt")
              .ok());
  CHECK(K(r, "vllm::rms_norm_kernel<float>") == "mlp.act");
  CHECK(K(r, "my_gemm_bf16") == "gemm");
  CHECK(K(r, "tok#emb") == "embed");
}

TEST_CASE("canonical order and folding") {
  CHECK(CanonicalRank("embed", false) < CanonicalRank("attn.qkv_proj", false));
  CHECK(CanonicalRank("moe.experts", false) < CanonicalRank("sampler", false));
  CHECK(CanonicalRank("comm.allreduce", false) < CanonicalRank("memcpy.h2d", false));
  CHECK(IsCanonicalModelBucket("moe.routing"));
  CHECK(!IsCanonicalModelBucket("gemm"));
  CHECK(IsCanonicalEngineBucket("kv.swap"));
  CHECK(!IsCanonicalEngineBucket("norm"));
  CHECK(MemcpyBucket(false, 2) == "memcpy.d2h");
  CHECK(MemcpyBucket(true, 0) == "memcpy.memset");
}

TEST_CASE("a rules regex nested too deep or with back-references is an error, not a crash") {
  BucketRules r = BucketRules::Defaults();
  const std::string deep = std::string(30000, '(') + "x" + std::string(30000, ')');
  absl::Status s = r.LoadText("model kernel norm " + deep + "\n", "deep.rules");
  CHECK(std::string(s.message()).rfind("deep.rules:1: bad regex", 0) == 0);
  s = r.LoadText("model kernel norm (a)\\1\n", "backref.rules");
  CHECK(std::string(s.message()).rfind("backref.rules:1: bad regex", 0) == 0);
  // Exponential-backtracking shapes still match in bounded time.
  REQUIRE(r.LoadText("model kernel norm (x+x+)+y\n", "slow.rules").ok());
  CHECK(K(r, std::string(60, 'x')) != "norm");
}

}  // namespace
}  // namespace analyzer
}  // namespace profagent
