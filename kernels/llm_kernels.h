// Device kernels of the demo LLM workload (`//kernels:inference`) and their host launchers.
//
// Every kernel is a plain CUDA kernel of our own, fp32, written for clarity rather than peak
// speed, and named like its counterpart in real serving engines (vLLM, FlashAttention, ...) so
// that the profiler's name-based bucket rules can be exercised: `embedding_kernel`,
// `rms_norm_kernel`, `fused_add_rms_norm_kernel`, `gemm_kernel` (all projections; the caller
// wraps each call in an NVTX range naming the projection), `rotary_embedding_kernel`,
// `reshape_and_cache_kernel`, `flash_attn_prefill_kernel`, `flash_attn_decode_kernel` +
// `flash_attn_combine_kernel` (split-KV: one block per (64-token KV chunk, head, sequence), so
// the grid grows with the KV length), `silu_and_mul_kernel`, `topk_topp_sampling_kernel`,
// `init_weights_kernel`.
//
// Contracts (all launchers):
// - Asynchronous: each enqueues exactly one kernel on `stream` and returns the launch status
//   (cudaGetLastError()); nothing is synchronized, so launchers may be called during stream
//   capture. All pointers are device pointers owned by the caller and must stay valid until the
//   kernel completed.
// - Data that changes from step to step (token ids, positions, cache slots, sequence lengths,
//   the sampling seed) is read from device memory, never passed by value, so one captured CUDA
//   graph can be replayed for every decode step. Only the attention grid depends on a host value
//   (`num_chunks`), which a graph capture sizes for the longest KV length.
// - Thread safety: launchers keep no state; concurrent calls on different streams are fine.
//
// Layouts: activations are row-major [tokens][features]. Linear weights are [out][in] (PyTorch
// nn.Linear), so gemm computes C = A * W^T. The KV cache of one layer is
// [batch][max_kv][heads][kHeadDim] for K and the same for V; `slot` = b * max_kv + position.
// The fused QKV activation row is [q heads | k heads | v heads], each head kHeadDim wide.
#ifndef PROFAGENT_KERNELS_LLM_KERNELS_H_
#define PROFAGENT_KERNELS_LLM_KERNELS_H_

#include <cstdint>

#include <cuda_runtime_api.h>

namespace llm {

inline constexpr int kHeadDim = 64;   // per-head width; also the attention block size
inline constexpr int kKvChunk = 64;   // KV tokens per flash_attn_decode_kernel block
inline constexpr int kMaxTopK = 64;   // upper bound of the sampling top-k

// w[r][c] = bias + scale * u, u uniform in [-1, 1), a hash of (tensor_id, global element index)
// where the element sits at (r + row_off, c + col_off) of a [.][global_cols] tensor. Tensor-
// parallel shards of one logical weight therefore hold exactly the slices of the full tensor.
cudaError_t LaunchInitWeights(float* w, int64_t rows, int64_t cols, int64_t row_off,
                              int64_t col_off, int64_t global_cols, uint32_t tensor_id,
                              float scale, float bias, cudaStream_t stream);

// out[t][:] = table[tokens[t]][:] (token ids clamped to [0, vocab)).
cudaError_t LaunchEmbedding(const int* tokens, const float* table, float* out, int n_tokens,
                            int hidden, int vocab, cudaStream_t stream);

// out[t] = in[t] / rms(in[t]) * weight.
cudaError_t LaunchRmsNorm(const float* in, const float* weight, float* out, int n_tokens,
                          int hidden, float eps, cudaStream_t stream);

// residual[t] += x[t]; out[t] = residual[t] / rms(residual[t]) * weight.
cudaError_t LaunchFusedAddRmsNorm(const float* x, float* residual, const float* weight,
                                  float* out, int n_tokens, int hidden, float eps,
                                  cudaStream_t stream);

// C[m][n] = sum_k A[m * lda + k] * W[n * k_dim + k] for m < M, n < N (C row stride N).
// A row stride `lda` lets the LM head read only the last token of each prefill sequence.
cudaError_t LaunchGemm(const float* a, int lda, const float* w, float* c, int m, int n,
                       int k_dim, cudaStream_t stream);

// Rotates the q and k heads of qkv[t] (row stride 3 * heads * kHeadDim) by positions[t]
// (NeoX-style halves).
cudaError_t LaunchRotaryEmbedding(const int* positions, float* qkv, int n_tokens, int heads,
                                  float theta, cudaStream_t stream);

// Appends the k and v heads of qkv[t] to the cache row slots[t].
cudaError_t LaunchReshapeAndCache(const float* qkv, const int* slots, float* k_cache,
                                  float* v_cache, int n_tokens, int heads, cudaStream_t stream);

// Attention shapes shared by prefill and decode: `batch` sequences of `q_len` new tokens each
// (token t = b * q_len + i), whose keys/values are already in the cache; seq_lens[b] counts
// the cached tokens of b including the new ones, so query i sits at position
// seq_lens[b] - q_len + i and attends causally to positions [0, that].
struct AttentionShape {
  int batch;
  int q_len;
  int heads;   // heads on this rank
  int max_kv;  // cache capacity per sequence
};

// Prefill attention, one block per (64-query tile, head, sequence), online softmax over KV tiles.
// out row stride heads * kHeadDim.
cudaError_t LaunchFlashAttnPrefill(const float* qkv, const float* k_cache, const float* v_cache,
                                   const int* seq_lens, float* out, AttentionShape shape,
                                   cudaStream_t stream);

// Split-KV decode attention: flash_attn_decode_kernel, grid (num_chunks, heads, batch), writes
// per-chunk partial results into `partial_acc` ([batch][heads][q_len][num_chunks][kHeadDim])
// and `partial_ml` ([...][num_chunks][2]: running max, sum of exponentials), then
// flash_attn_combine_kernel, grid (heads, batch), merges them into `out`. Chunks past
// seq_lens[b] exit early, so num_chunks may exceed what the sequence needs (CUDA graphs).
// That is two launches; the return is the first failure.
cudaError_t LaunchFlashAttnDecode(const float* qkv, const float* k_cache, const float* v_cache,
                                  const int* seq_lens, float* partial_acc, float* partial_ml,
                                  float* out, AttentionShape shape, int num_chunks,
                                  cudaStream_t stream);

// out[t][j] = silu(gate_up[t][j]) * gate_up[t][ffn + j] for j < ffn.
cudaError_t LaunchSiluAndMul(const float* gate_up, float* out, int n_tokens, int ffn,
                             cudaStream_t stream);

// For each of `rows` logits rows: keeps the top_k (<= kMaxTopK) logits, softmax at
// `temperature`, keeps the smallest prefix whose probability reaches top_p, draws one token with
// a counter-based random number from (*seed, row). Writes out_tokens[row].
cudaError_t LaunchTopkToppSampling(const float* logits, int rows, int vocab, int top_k,
                                   float top_p, float temperature, const uint64_t* seed,
                                   int* out_tokens, cudaStream_t stream);

}  // namespace llm

#endif  // PROFAGENT_KERNELS_LLM_KERNELS_H_
