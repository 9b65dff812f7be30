// Kernels of the demo LLM workload; see llm_kernels.h for contracts and layouts.
#include "kernels/llm_kernels.h"

#include <cfloat>
#include <cmath>
#include <cstdint>

namespace llm {
namespace {

constexpr int kGemmTile = 16;
constexpr int kNormThreads = 256;
constexpr int kSampleThreads = 256;

__host__ __device__ inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) from the top 24 bits.
__device__ inline float Uniform01(uint64_t h) {
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

__device__ inline float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ inline float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide sum for blockDim.x a multiple of 32 (<= 1024). `scratch` holds 32 floats.
__device__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  v = WarpSum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  v = lane < warps ? scratch[lane] : 0.0f;
  return WarpSum(v);
}

__device__ float BlockMax(float v, float* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  v = WarpMax(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  v = lane < warps ? scratch[lane] : -FLT_MAX;
  return WarpMax(v);
}

}  // namespace

__global__ void init_weights_kernel(float* w, int64_t rows, int64_t cols, int64_t row_off,
                                    int64_t col_off, int64_t global_cols, uint32_t tensor_id,
                                    float scale, float bias) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols;
    const int64_t c = i % cols;
    const uint64_t global = static_cast<uint64_t>((r + row_off) * global_cols + c + col_off);
    const uint64_t h = SplitMix64(SplitMix64(tensor_id) ^ global);
    w[i] = bias + scale * (2.0f * Uniform01(h) - 1.0f);
  }
}

__global__ void embedding_kernel(const int* tokens, const float* table, float* out, int hidden,
                                 int vocab) {
  int tok = tokens[blockIdx.x];
  tok = tok < 0 ? 0 : (tok >= vocab ? vocab - 1 : tok);
  const float* row = table + static_cast<int64_t>(tok) * hidden;
  float* dst = out + static_cast<int64_t>(blockIdx.x) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = row[i];
}

__global__ void rms_norm_kernel(const float* in, const float* weight, float* out, int hidden,
                                float eps) {
  __shared__ float scratch[32];
  const float* x = in + static_cast<int64_t>(blockIdx.x) * hidden;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) ss += x[i] * x[i];
  const float inv = rsqrtf(BlockSum(ss, scratch) / hidden + eps);
  float* y = out + static_cast<int64_t>(blockIdx.x) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) y[i] = x[i] * inv * weight[i];
}

__global__ void fused_add_rms_norm_kernel(const float* x, float* residual, const float* weight,
                                          float* out, int hidden, float eps) {
  __shared__ float scratch[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * hidden;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = residual[base + i] + x[base + i];
    residual[base + i] = v;
    ss += v * v;
  }
  const float inv = rsqrtf(BlockSum(ss, scratch) / hidden + eps);
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    out[base + i] = residual[base + i] * inv * weight[i];
  }
}

// Classic shared-memory tiled GEMM, C = A * W^T, one 16x16 output tile per block.
__global__ void gemm_kernel(const float* a, int lda, const float* w, float* c, int m, int n,
                            int k_dim) {
  __shared__ float as[kGemmTile][kGemmTile + 1];
  __shared__ float ws[kGemmTile][kGemmTile + 1];
  const int row = blockIdx.y * kGemmTile + threadIdx.y;  // m
  const int col = blockIdx.x * kGemmTile + threadIdx.x;  // n
  const int w_row = blockIdx.x * kGemmTile + threadIdx.y;
  float acc = 0.0f;
  for (int k0 = 0; k0 < k_dim; k0 += kGemmTile) {
    const int k = k0 + threadIdx.x;
    as[threadIdx.y][threadIdx.x] =
        (row < m && k < k_dim) ? a[static_cast<int64_t>(row) * lda + k] : 0.0f;
    ws[threadIdx.y][threadIdx.x] =
        (w_row < n && k < k_dim) ? w[static_cast<int64_t>(w_row) * k_dim + k] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kGemmTile; ++kk) acc += as[threadIdx.y][kk] * ws[threadIdx.x][kk];
    __syncthreads();
  }
  if (row < m && col < n) c[static_cast<int64_t>(row) * n + col] = acc;
}

__global__ void rotary_embedding_kernel(const int* positions, float* qkv, int heads,
                                        float theta) {
  const int t = blockIdx.x;
  const float pos = static_cast<float>(positions[t]);
  constexpr int kHalf = kHeadDim / 2;
  float* row = qkv + static_cast<int64_t>(t) * 3 * heads * kHeadDim;
  // q heads and k heads are the first 2 * heads heads of the row.
  for (int i = threadIdx.x; i < 2 * heads * kHalf; i += blockDim.x) {
    const int head = i / kHalf;
    const int j = i % kHalf;
    const float freq = powf(theta, -2.0f * j / kHeadDim);
    float s, c;
    sincosf(pos * freq, &s, &c);
    float* h = row + head * kHeadDim;
    const float x0 = h[j];
    const float x1 = h[j + kHalf];
    h[j] = x0 * c - x1 * s;
    h[j + kHalf] = x1 * c + x0 * s;
  }
}

__global__ void reshape_and_cache_kernel(const float* qkv, const int* slots, float* k_cache,
                                         float* v_cache, int heads) {
  const int t = blockIdx.x;
  const int width = heads * kHeadDim;
  const float* k = qkv + static_cast<int64_t>(t) * 3 * width + width;
  const float* v = k + width;
  const int64_t dst = static_cast<int64_t>(slots[t]) * width;
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    k_cache[dst + i] = k[i];
    v_cache[dst + i] = v[i];
  }
}

// blockDim.x == kHeadDim; each thread owns one query of the 64-query tile.
__global__ void flash_attn_prefill_kernel(const float* qkv, const float* k_cache,
                                          const float* v_cache, const int* seq_lens, float* out,
                                          AttentionShape shape) {
  __shared__ float ks[kHeadDim][kHeadDim + 1];
  __shared__ float vs[kHeadDim][kHeadDim + 1];
  const int b = blockIdx.z;
  const int h = blockIdx.y;
  const int qi = blockIdx.x * kHeadDim + threadIdx.x;
  const int width = shape.heads * kHeadDim;
  const int seq_len = seq_lens[b];
  const int ctx = seq_len - shape.q_len;
  const bool active = qi < shape.q_len;
  const int q_pos = ctx + qi;
  const int64_t t = static_cast<int64_t>(b) * shape.q_len + qi;
  float q[kHeadDim];
  float acc[kHeadDim];
  const float scale = rsqrtf(static_cast<float>(kHeadDim));
#pragma unroll
  for (int d = 0; d < kHeadDim; ++d) {
    q[d] = active ? qkv[t * 3 * width + h * kHeadDim + d] * scale : 0.0f;
    acc[d] = 0.0f;
  }
  float m = -FLT_MAX;
  float l = 0.0f;
  // Keys up to the last query of this tile.
  const int last_q = min(shape.q_len - 1, static_cast<int>(blockIdx.x * kHeadDim + kHeadDim - 1));
  const int kv_end = ctx + last_q + 1;
  const int64_t cache_base = static_cast<int64_t>(b) * shape.max_kv;
  for (int k0 = 0; k0 < kv_end; k0 += kHeadDim) {
    __syncthreads();
    for (int j = 0; j < kHeadDim; ++j) {
      const int pos = k0 + j;
      const bool ok = pos < kv_end;
      const int64_t off = (cache_base + pos) * width + h * kHeadDim + threadIdx.x;
      ks[j][threadIdx.x] = ok ? k_cache[off] : 0.0f;
      vs[j][threadIdx.x] = ok ? v_cache[off] : 0.0f;
    }
    __syncthreads();
    if (!active) continue;
    for (int j = 0; j < kHeadDim && k0 + j <= q_pos; ++j) {
      float s = 0.0f;
#pragma unroll
      for (int d = 0; d < kHeadDim; ++d) s += q[d] * ks[j][d];
      const float m_new = fmaxf(m, s);
      const float corr = __expf(m - m_new);
      const float p = __expf(s - m_new);
      l = l * corr + p;
#pragma unroll
      for (int d = 0; d < kHeadDim; ++d) acc[d] = acc[d] * corr + p * vs[j][d];
      m = m_new;
    }
  }
  if (!active) return;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
  for (int d = 0; d < kHeadDim; ++d) out[t * width + h * kHeadDim + d] = acc[d] * inv;
}

// blockDim.x == kKvChunk == kHeadDim; thread j scores key j of the chunk, then owns dim j.
__global__ void flash_attn_decode_kernel(const float* qkv, const float* k_cache,
                                         const float* v_cache, const int* seq_lens,
                                         float* partial_acc, float* partial_ml,
                                         AttentionShape shape) {
  __shared__ float ks[kKvChunk][kHeadDim + 1];
  __shared__ float vs[kKvChunk][kHeadDim + 1];
  __shared__ float qs[kHeadDim];
  __shared__ float ps[kKvChunk];
  __shared__ float scratch[32];
  const int chunk = blockIdx.x;
  const int num_chunks = gridDim.x;
  const int h = blockIdx.y;
  const int b = blockIdx.z;
  const int width = shape.heads * kHeadDim;
  const int seq_len = seq_lens[b];
  const int ctx = seq_len - shape.q_len;
  const int k0 = chunk * kKvChunk;
  const int64_t part_base =
      ((static_cast<int64_t>(b) * shape.heads + h) * shape.q_len) * num_chunks;
  if (k0 >= seq_len) {  // beyond this sequence (graph replays use the longest grid)
    for (int qi = 0; qi < shape.q_len; ++qi) {
      const int64_t p = part_base + static_cast<int64_t>(qi) * num_chunks + chunk;
      partial_acc[p * kHeadDim + threadIdx.x] = 0.0f;
      if (threadIdx.x == 0) {
        partial_ml[2 * p] = -FLT_MAX;
        partial_ml[2 * p + 1] = 0.0f;
      }
    }
    return;
  }
  const int64_t cache_base = static_cast<int64_t>(b) * shape.max_kv;
  for (int j = 0; j < kKvChunk; ++j) {
    const int pos = k0 + j;
    const bool ok = pos < seq_len;
    const int64_t off = (cache_base + pos) * width + h * kHeadDim + threadIdx.x;
    ks[j][threadIdx.x] = ok ? k_cache[off] : 0.0f;
    vs[j][threadIdx.x] = ok ? v_cache[off] : 0.0f;
  }
  const float scale = rsqrtf(static_cast<float>(kHeadDim));
  for (int qi = 0; qi < shape.q_len; ++qi) {
    const int64_t t = static_cast<int64_t>(b) * shape.q_len + qi;
    const int q_pos = ctx + qi;
    __syncthreads();
    qs[threadIdx.x] = qkv[t * 3 * width + h * kHeadDim + threadIdx.x] * scale;
    __syncthreads();
    const int pos = k0 + threadIdx.x;
    float s = -FLT_MAX;
    if (pos <= q_pos) {
      s = 0.0f;
#pragma unroll
      for (int d = 0; d < kHeadDim; ++d) s += qs[d] * ks[threadIdx.x][d];
    }
    const float m = BlockMax(s, scratch);
    const float p = pos <= q_pos ? __expf(s - m) : 0.0f;
    ps[threadIdx.x] = p;
    const float l = BlockSum(p, scratch);
    __syncthreads();
    float acc = 0.0f;
    for (int j = 0; j < kKvChunk; ++j) acc += ps[j] * vs[j][threadIdx.x];
    const int64_t pi = part_base + static_cast<int64_t>(qi) * num_chunks + chunk;
    partial_acc[pi * kHeadDim + threadIdx.x] = acc;
    if (threadIdx.x == 0) {
      partial_ml[2 * pi] = l > 0.0f ? m : -FLT_MAX;
      partial_ml[2 * pi + 1] = l;
    }
  }
}

// blockDim.x == kHeadDim; merges the per-chunk partials of every query of (head, sequence).
__global__ void flash_attn_combine_kernel(const float* partial_acc, const float* partial_ml,
                                          float* out, AttentionShape shape, int num_chunks) {
  const int h = blockIdx.x;
  const int b = blockIdx.y;
  const int width = shape.heads * kHeadDim;
  for (int qi = 0; qi < shape.q_len; ++qi) {
    const int64_t base =
        ((static_cast<int64_t>(b) * shape.heads + h) * shape.q_len + qi) * num_chunks;
    float m = -FLT_MAX;
    for (int c = 0; c < num_chunks; ++c) m = fmaxf(m, partial_ml[2 * (base + c)]);
    float l = 0.0f;
    float acc = 0.0f;
    for (int c = 0; c < num_chunks; ++c) {
      const float lc = partial_ml[2 * (base + c) + 1];
      if (lc <= 0.0f) continue;
      const float f = __expf(partial_ml[2 * (base + c)] - m);
      l += lc * f;
      acc += partial_acc[(base + c) * kHeadDim + threadIdx.x] * f;
    }
    const int64_t t = static_cast<int64_t>(b) * shape.q_len + qi;
    out[t * width + h * kHeadDim + threadIdx.x] = l > 0.0f ? acc / l : 0.0f;
  }
}

__global__ void silu_and_mul_kernel(const float* gate_up, float* out, int ffn) {
  const int64_t t = blockIdx.x;
  const float* g = gate_up + t * 2 * ffn;
  for (int j = threadIdx.x; j < ffn; j += blockDim.x) {
    const float x = g[j];
    out[t * ffn + j] = x / (1.0f + __expf(-x)) * g[ffn + j];
  }
}

// One block per row. Top-k by k rounds of block-wide argmax (ties to the lower index).
__global__ void topk_topp_sampling_kernel(const float* logits, int vocab, int top_k,
                                          float top_p, float temperature, const uint64_t* seed,
                                          int* out_tokens) {
  __shared__ int chosen[kMaxTopK];
  __shared__ float chosen_val[kMaxTopK];
  __shared__ float best_val[kSampleThreads];
  __shared__ int best_idx[kSampleThreads];
  const int row = blockIdx.x;
  const float* x = logits + static_cast<int64_t>(row) * vocab;
  for (int r = 0; r < top_k; ++r) {
    float bv = -FLT_MAX;
    int bi = vocab;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
      bool taken = false;
      for (int c = 0; c < r; ++c) taken |= (chosen[c] == i);
      const float v = x[i];
      if (!taken && (v > bv || (v == bv && i < bi))) {
        bv = v;
        bi = i;
      }
    }
    best_val[threadIdx.x] = bv;
    best_idx[threadIdx.x] = bi;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) {
        const float ov = best_val[threadIdx.x + s];
        const int oi = best_idx[threadIdx.x + s];
        if (ov > best_val[threadIdx.x] ||
            (ov == best_val[threadIdx.x] && oi < best_idx[threadIdx.x])) {
          best_val[threadIdx.x] = ov;
          best_idx[threadIdx.x] = oi;
        }
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      chosen[r] = best_idx[0] < vocab ? best_idx[0] : 0;
      chosen_val[r] = best_val[0];
    }
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  // Candidates are sorted by logit; softmax, top-p prefix, inverse-CDF draw.
  float probs[kMaxTopK];
  float total = 0.0f;
  for (int r = 0; r < top_k; ++r) {
    probs[r] = __expf((chosen_val[r] - chosen_val[0]) / temperature);
    total += probs[r];
  }
  int keep = top_k;
  float cum = 0.0f;
  for (int r = 0; r < top_k; ++r) {
    cum += probs[r] / total;
    if (cum >= top_p) {
      keep = r + 1;
      break;
    }
  }
  float kept = 0.0f;
  for (int r = 0; r < keep; ++r) kept += probs[r];
  const float u = Uniform01(SplitMix64(*seed ^ SplitMix64(row))) * kept;
  int pick = keep - 1;
  float acc = 0.0f;
  for (int r = 0; r < keep; ++r) {
    acc += probs[r];
    if (u < acc) {
      pick = r;
      break;
    }
  }
  out_tokens[row] = chosen[pick];
}

// ---------------------------------------------------------------------------------------------
// Host launchers.

namespace {
int CeilDiv(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }
}  // namespace

cudaError_t LaunchInitWeights(float* w, int64_t rows, int64_t cols, int64_t row_off,
                              int64_t col_off, int64_t global_cols, uint32_t tensor_id,
                              float scale, float bias, cudaStream_t stream) {
  const int64_t n = rows * cols;
  const int blocks = static_cast<int>(n / 256 + 1 < 1024 ? n / 256 + 1 : 1024);
  init_weights_kernel<<<blocks, 256, 0, stream>>>(w, rows, cols, row_off, col_off, global_cols,
                                                  tensor_id, scale, bias);
  return cudaGetLastError();
}

cudaError_t LaunchEmbedding(const int* tokens, const float* table, float* out, int n_tokens,
                            int hidden, int vocab, cudaStream_t stream) {
  embedding_kernel<<<n_tokens, 128, 0, stream>>>(tokens, table, out, hidden, vocab);
  return cudaGetLastError();
}

cudaError_t LaunchRmsNorm(const float* in, const float* weight, float* out, int n_tokens,
                          int hidden, float eps, cudaStream_t stream) {
  rms_norm_kernel<<<n_tokens, kNormThreads, 0, stream>>>(in, weight, out, hidden, eps);
  return cudaGetLastError();
}

cudaError_t LaunchFusedAddRmsNorm(const float* x, float* residual, const float* weight,
                                  float* out, int n_tokens, int hidden, float eps,
                                  cudaStream_t stream) {
  fused_add_rms_norm_kernel<<<n_tokens, kNormThreads, 0, stream>>>(x, residual, weight, out,
                                                                   hidden, eps);
  return cudaGetLastError();
}

cudaError_t LaunchGemm(const float* a, int lda, const float* w, float* c, int m, int n,
                       int k_dim, cudaStream_t stream) {
  const dim3 grid(CeilDiv(n, kGemmTile), CeilDiv(m, kGemmTile));
  const dim3 block(kGemmTile, kGemmTile);
  gemm_kernel<<<grid, block, 0, stream>>>(a, lda, w, c, m, n, k_dim);
  return cudaGetLastError();
}

cudaError_t LaunchRotaryEmbedding(const int* positions, float* qkv, int n_tokens, int heads,
                                  float theta, cudaStream_t stream) {
  rotary_embedding_kernel<<<n_tokens, 128, 0, stream>>>(positions, qkv, heads, theta);
  return cudaGetLastError();
}

cudaError_t LaunchReshapeAndCache(const float* qkv, const int* slots, float* k_cache,
                                  float* v_cache, int n_tokens, int heads, cudaStream_t stream) {
  reshape_and_cache_kernel<<<n_tokens, 128, 0, stream>>>(qkv, slots, k_cache, v_cache, heads);
  return cudaGetLastError();
}

cudaError_t LaunchFlashAttnPrefill(const float* qkv, const float* k_cache, const float* v_cache,
                                   const int* seq_lens, float* out, AttentionShape shape,
                                   cudaStream_t stream) {
  const dim3 grid(CeilDiv(shape.q_len, kHeadDim), shape.heads, shape.batch);
  flash_attn_prefill_kernel<<<grid, kHeadDim, 0, stream>>>(qkv, k_cache, v_cache, seq_lens, out,
                                                           shape);
  return cudaGetLastError();
}

cudaError_t LaunchFlashAttnDecode(const float* qkv, const float* k_cache, const float* v_cache,
                                  const int* seq_lens, float* partial_acc, float* partial_ml,
                                  float* out, AttentionShape shape, int num_chunks,
                                  cudaStream_t stream) {
  const dim3 grid(num_chunks, shape.heads, shape.batch);
  flash_attn_decode_kernel<<<grid, kKvChunk, 0, stream>>>(qkv, k_cache, v_cache, seq_lens,
                                                          partial_acc, partial_ml, shape);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  const dim3 grid2(shape.heads, shape.batch);
  flash_attn_combine_kernel<<<grid2, kHeadDim, 0, stream>>>(partial_acc, partial_ml, out, shape,
                                                            num_chunks);
  return cudaGetLastError();
}

cudaError_t LaunchSiluAndMul(const float* gate_up, float* out, int n_tokens, int ffn,
                             cudaStream_t stream) {
  silu_and_mul_kernel<<<n_tokens, 256, 0, stream>>>(gate_up, out, ffn);
  return cudaGetLastError();
}

cudaError_t LaunchTopkToppSampling(const float* logits, int rows, int vocab, int top_k,
                                   float top_p, float temperature, const uint64_t* seed,
                                   int* out_tokens, cudaStream_t stream) {
  if (top_k < 1 || top_k > kMaxTopK) return cudaErrorInvalidValue;
  topk_topp_sampling_kernel<<<rows, kSampleThreads, 0, stream>>>(logits, vocab, top_k, top_p,
                                                                 temperature, seed, out_tokens);
  return cudaGetLastError();
}

}  // namespace llm
