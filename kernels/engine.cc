// The demo LLM serving engine; see engine.h.
#include "kernels/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include <nvtx3/nvToolsExt.h>

#include "kernels/check.h"
#include "kernels/llm_kernels.h"

namespace llm {
namespace {

constexpr float kNormEps = 1e-5f;
constexpr float kRopeTheta = 10000.0f;
constexpr int kMaxKvListed = 64;  // longer batches report the mean KV length

uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t Hash(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0, uint64_t e = 0) {
  return Mix(Mix(Mix(Mix(Mix(a) ^ b) ^ c) ^ d) ^ e);
}

double Uniform(uint64_t h) { return static_cast<double>(h >> 11) * (1.0 / 9007199254740992.0); }

int CeilDiv(int a, int b) { return (a + b - 1) / b; }

// An NVTX push/pop range for the enclosing scope (default domain, ASCII message).
class Range {
 public:
  explicit Range(const char* message) { nvtxRangePushA(message); }
  explicit Range(const std::string& message) { nvtxRangePushA(message.c_str()); }
  ~Range() { nvtxRangePop(); }
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;
};

std::string StepMessage(const char* phase, int64_t tokens, const std::vector<int>& kv,
                        int batch) {
  std::string m = "step phase=";
  m += phase;
  m += " tokens=" + std::to_string(tokens) + " kv=";
  if (static_cast<int>(kv.size()) <= kMaxKvListed) {
    for (size_t i = 0; i < kv.size(); ++i) {
      if (i) m += ",";
      m += std::to_string(kv[i]);
    }
  } else {
    int64_t sum = 0;
    for (int v : kv) sum += v;
    m += std::to_string(sum / static_cast<int64_t>(kv.size()));
  }
  m += " bsz=" + std::to_string(batch);
  return m;
}

}  // namespace

std::vector<int> PlanAcceptance(uint64_t seed, int run, int step, int batch, int spec,
                                double accept_rate) {
  std::vector<int> accepted(batch, 0);
  for (int b = 0; b < batch; ++b) {
    int a = 0;
    while (a < spec && Uniform(Hash(seed, 0xACCE, run, step, b * 64 + a)) < accept_rate) ++a;
    accepted[b] = a;
  }
  return accepted;
}

uint64_t FoldToken(uint64_t checksum, int token) {
  return Mix(checksum ^ (static_cast<uint64_t>(static_cast<uint32_t>(token)) + 1));
}

Engine::Engine(const EngineOptions& options) : o_(options) {
  LLM_CHECK(o_.layers >= 1, "--layers must be >= 1");
  LLM_CHECK(o_.hidden >= kHeadDim && o_.hidden % kHeadDim == 0,
            "--hidden must be a positive multiple of 64 (the head size)");
  const int total_heads = o_.hidden / kHeadDim;
  LLM_CHECK(total_heads % o_.world == 0, "the number of heads (hidden/64) must divide by ranks");
  heads_ = total_heads / o_.world;
  ffn_ = o_.ffn > 0 ? o_.ffn : CeilDiv(11 * o_.hidden / 4, 64 * o_.world) * 64 * o_.world;
  LLM_CHECK(ffn_ % o_.world == 0, "--ffn must divide by the number of ranks");
  ffn_local_ = ffn_ / o_.world;
  LLM_CHECK(o_.vocab >= o_.top_k && o_.vocab >= 2, "--vocab must be >= top-k");
  LLM_CHECK(o_.top_k >= 1 && o_.top_k <= kMaxTopK, "--top-k must be in [1, 64]");
  LLM_CHECK(o_.batch >= 1 && o_.prompt_len >= 1 && o_.steps >= 0 && o_.spec >= 0,
            "--batch and --prompt-len must be >= 1, --steps and --spec >= 0");
  LLM_CHECK(o_.world == 1 || o_.comm != nullptr, "tensor parallelism needs a communicator");
  const int q_decode = o_.spec + 1;
  max_kv_ = CeilDiv(o_.prompt_len + (o_.steps + 1) * q_decode, kKvChunk) * kKvChunk;
  max_chunks_ = max_kv_ / kKvChunk;
  max_tokens_ = o_.batch * std::max(o_.prompt_len, q_decode);
  max_rows_ = o_.batch * q_decode;

  LLM_CUDA_CHECK(cudaStreamCreate(&stream_));
  if (o_.sampling_stream) LLM_CUDA_CHECK(cudaStreamCreate(&sample_stream_));
  LLM_CUDA_CHECK(cudaEventCreate(&logits_ready_));
  LLM_CUDA_CHECK(cudaEventCreate(&sampled_ready_));
  LLM_CUDA_CHECK(cudaEventCreate(&run_start_));
  LLM_CUDA_CHECK(cudaEventCreate(&run_stop_));

  const size_t h = o_.hidden;
  const size_t hd_local = static_cast<size_t>(heads_) * kHeadDim;
  embed_ = Alloc(static_cast<size_t>(o_.vocab) * h);
  lm_head_ = Alloc(static_cast<size_t>(o_.vocab) * h);
  final_norm_ = Alloc(h);
  layers_.resize(o_.layers);
  const size_t cache = static_cast<size_t>(o_.batch) * max_kv_ * hd_local;
  for (Layer& l : layers_) {
    l.ln1 = Alloc(h);
    l.wqkv = Alloc(3 * hd_local * h);
    l.wo = Alloc(h * hd_local);
    l.ln2 = Alloc(h);
    l.wgu = Alloc(2 * static_cast<size_t>(ffn_local_) * h);
    l.wd = Alloc(h * ffn_local_);
    l.k_cache = Alloc(cache);
    l.v_cache = Alloc(cache);
  }
  const size_t t = max_tokens_;
  residual_ = Alloc(t * h);
  x_ = Alloc(t * h);
  qkv_ = Alloc(t * 3 * hd_local);
  attn_ = Alloc(t * hd_local);
  proj_ = Alloc(t * h);
  gate_up_ = Alloc(t * 2 * ffn_local_);
  act_ = Alloc(t * ffn_local_);
  logits_ = Alloc(static_cast<size_t>(max_rows_) * o_.vocab);
  const size_t partials = static_cast<size_t>(o_.batch) * heads_ * q_decode * max_chunks_;
  partial_acc_ = Alloc(partials * kHeadDim);
  partial_ml_ = Alloc(partials * 2);
  sampled_d_ = reinterpret_cast<int*>(Alloc(max_rows_));
  inputs_ints_ = 2 + static_cast<size_t>(o_.batch) + 3 * t;
  inputs_d_ = reinterpret_cast<int32_t*>(Alloc(inputs_ints_));
  void* pinned = nullptr;
  LLM_CUDA_CHECK(cudaMallocHost(&pinned, inputs_ints_ * sizeof(int32_t)));
  inputs_h_ = static_cast<int32_t*>(pinned);
  LLM_CUDA_CHECK(cudaMallocHost(&pinned, max_rows_ * sizeof(int)));
  sampled_h_ = static_cast<int*>(pinned);
  // Without a GPU the sampling kernel does not run; start from defined token ids.
  LLM_CUDA_CHECK(cudaMemset(sampled_d_, 0, max_rows_ * sizeof(int)));
  std::fill(inputs_h_, inputs_h_ + inputs_ints_, 0);
  std::fill(sampled_h_, sampled_h_ + max_rows_, 0);
  InitWeights();
  LLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

Engine::~Engine() {
  // Teardown errors are reported but do not change the exit status of a finished run.
  for (cudaGraphExec_t e : graph_execs_) cudaGraphExecDestroy(e);
  for (cudaGraph_t g : graphs_) cudaGraphDestroy(g);
  for (void* p : allocations_) cudaFree(p);
  cudaFreeHost(inputs_h_);
  cudaFreeHost(sampled_h_);
  cudaEventDestroy(logits_ready_);
  cudaEventDestroy(sampled_ready_);
  cudaEventDestroy(run_start_);
  cudaEventDestroy(run_stop_);
  if (sample_stream_) cudaStreamDestroy(sample_stream_);
  cudaStreamDestroy(stream_);
}

float* Engine::Alloc(size_t floats) {
  void* p = nullptr;
  LLM_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(floats, 1) * sizeof(float)));
  allocations_.push_back(p);
  return static_cast<float*>(p);
}

void Engine::InitWeights() {
  Range range("load_weights");
  const int64_t h = o_.hidden;
  const int64_t hd_all = static_cast<int64_t>(heads_) * o_.world * kHeadDim;
  const int64_t hd = static_cast<int64_t>(heads_) * kHeadDim;
  const int64_t r_heads = static_cast<int64_t>(o_.rank) * hd;
  const int64_t r_ffn = static_cast<int64_t>(o_.rank) * ffn_local_;
  const float s_h = std::sqrt(3.0f / h);
  const float s_attn = std::sqrt(3.0f / hd_all);
  const float s_ffn = std::sqrt(3.0f / ffn_);
  LLM_CUDA_CHECK(LaunchInitWeights(embed_, o_.vocab, h, 0, 0, h, 1, 1.0f, 0.0f, stream_));
  LLM_CUDA_CHECK(LaunchInitWeights(lm_head_, o_.vocab, h, 0, 0, h, 2, s_h, 0.0f, stream_));
  LLM_CUDA_CHECK(LaunchInitWeights(final_norm_, 1, h, 0, 0, h, 3, 0.05f, 1.0f, stream_));
  for (int i = 0; i < o_.layers; ++i) {
    const Layer& l = layers_[i];
    const uint32_t id = 100 + 16 * i;
    LLM_CUDA_CHECK(LaunchInitWeights(l.ln1, 1, h, 0, 0, h, id + 0, 0.05f, 1.0f, stream_));
    // Fused QKV shard: this rank's rows of Wq, Wk, Wv ([heads*64][hidden] each).
    for (int part = 0; part < 3; ++part) {
      LLM_CUDA_CHECK(LaunchInitWeights(l.wqkv + part * hd * h, hd, h, r_heads, 0, h,
                                       id + 1 + part, s_h, 0.0f, stream_));
    }
    // Wo [hidden][heads*64]: this rank's columns.
    LLM_CUDA_CHECK(
        LaunchInitWeights(l.wo, h, hd, 0, r_heads, hd_all, id + 4, s_attn, 0.0f, stream_));
    LLM_CUDA_CHECK(LaunchInitWeights(l.ln2, 1, h, 0, 0, h, id + 5, 0.05f, 1.0f, stream_));
    // Gate and up [ffn][hidden]: this rank's rows, stacked.
    for (int part = 0; part < 2; ++part) {
      LLM_CUDA_CHECK(LaunchInitWeights(l.wgu + part * ffn_local_ * h, ffn_local_, h, r_ffn, 0,
                                       h, id + 6 + part, s_h, 0.0f, stream_));
    }
    // Down [hidden][ffn]: this rank's columns.
    LLM_CUDA_CHECK(
        LaunchInitWeights(l.wd, h, ffn_local_, 0, r_ffn, ffn_, id + 8, s_ffn, 0.0f, stream_));
  }
}

void Engine::AllReduce(float* buf, size_t count) {
  if (o_.world == 1) return;
  if (capturing_) {  // segment boundary; ReplayDecodeGraphs runs the collective
    cudaGraph_t g = nullptr;
    LLM_CUDA_CHECK(cudaStreamEndCapture(stream_, &g));
    graphs_.push_back(g);
    LLM_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    allreduce_count_ = count;
    return;
  }
  Range range("all_reduce");
  LLM_NCCL_CHECK(ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, o_.comm, stream_));
}

void Engine::Forward(bool prefill, int q_len, int num_chunks) {
  const int n = o_.batch * q_len;
  const int h = o_.hidden;
  const int hd = heads_ * kHeadDim;
  const int32_t* seq_lens = inputs_d_ + 2;
  const int32_t* tokens = seq_lens + o_.batch;
  const int32_t* positions = tokens + max_tokens_;
  const int32_t* slots = positions + max_tokens_;
  const AttentionShape shape{o_.batch, q_len, heads_, max_kv_};

  LLM_CUDA_CHECK(LaunchEmbedding(tokens, embed_, residual_, n, h, o_.vocab, stream_));
  LLM_CUDA_CHECK(LaunchRmsNorm(residual_, layers_[0].ln1, x_, n, h, kNormEps, stream_));
  for (int i = 0; i < o_.layers; ++i) {
    const Layer& l = layers_[i];
    Range layer_range("layer " + std::to_string(i));
    {
      Range r("qkv_proj");
      LLM_CUDA_CHECK(LaunchGemm(x_, h, l.wqkv, qkv_, n, 3 * hd, h, stream_));
    }
    LLM_CUDA_CHECK(LaunchRotaryEmbedding(positions, qkv_, n, heads_, kRopeTheta, stream_));
    {
      Range r("kv.append");
      LLM_CUDA_CHECK(LaunchReshapeAndCache(qkv_, slots, l.k_cache, l.v_cache, n, heads_,
                                           stream_));
    }
    {
      Range r("attention");
      if (prefill) {
        LLM_CUDA_CHECK(
            LaunchFlashAttnPrefill(qkv_, l.k_cache, l.v_cache, seq_lens, attn_, shape, stream_));
      } else {
        LLM_CUDA_CHECK(LaunchFlashAttnDecode(qkv_, l.k_cache, l.v_cache, seq_lens,
                                             partial_acc_, partial_ml_, attn_, shape,
                                             num_chunks, stream_));
      }
    }
    {
      Range r("o_proj");
      LLM_CUDA_CHECK(LaunchGemm(attn_, hd, l.wo, proj_, n, h, hd, stream_));
    }
    AllReduce(proj_, static_cast<size_t>(n) * h);
    LLM_CUDA_CHECK(LaunchFusedAddRmsNorm(proj_, residual_, l.ln2, x_, n, h, kNormEps, stream_));
    {
      Range r("gate_up_proj");
      LLM_CUDA_CHECK(LaunchGemm(x_, h, l.wgu, gate_up_, n, 2 * ffn_local_, h, stream_));
    }
    LLM_CUDA_CHECK(LaunchSiluAndMul(gate_up_, act_, n, ffn_local_, stream_));
    {
      Range r("down_proj");
      LLM_CUDA_CHECK(LaunchGemm(act_, ffn_local_, l.wd, proj_, n, h, ffn_local_, stream_));
    }
    AllReduce(proj_, static_cast<size_t>(n) * h);
    const float* next_norm = i + 1 < o_.layers ? layers_[i + 1].ln1 : final_norm_;
    LLM_CUDA_CHECK(
        LaunchFusedAddRmsNorm(proj_, residual_, next_norm, x_, n, h, kNormEps, stream_));
  }
  Range r("lm_head");
  if (prefill) {  // last prompt token of each sequence: rows q_len - 1, stride q_len rows
    LLM_CUDA_CHECK(LaunchGemm(x_ + static_cast<size_t>(q_len - 1) * h, q_len * h, lm_head_,
                              logits_, o_.batch, o_.vocab, h, stream_));
  } else {
    LLM_CUDA_CHECK(LaunchGemm(x_, h, lm_head_, logits_, n, o_.vocab, h, stream_));
  }
}

void Engine::CaptureDecodeGraphs(int q_len) {
  Range range("graph.capture");
  capturing_ = true;
  LLM_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  Forward(/*prefill=*/false, q_len, max_chunks_);
  cudaGraph_t g = nullptr;
  LLM_CUDA_CHECK(cudaStreamEndCapture(stream_, &g));
  graphs_.push_back(g);
  capturing_ = false;
  for (cudaGraph_t graph : graphs_) {
    cudaGraphExec_t exec = nullptr;
    LLM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    graph_execs_.push_back(exec);
  }
}

void Engine::ReplayDecodeGraphs() {
  for (size_t i = 0; i < graph_execs_.size(); ++i) {
    if (i > 0) AllReduce(proj_, allreduce_count_);
    LLM_CUDA_CHECK(cudaGraphLaunch(graph_execs_[i], stream_));
  }
}

// The block is copied whole (a few KB): graph replays read fixed addresses.
void Engine::UploadInputs() {
  LLM_CUDA_CHECK(cudaMemcpyAsync(inputs_d_, inputs_h_, inputs_ints_ * sizeof(int32_t),
                                 cudaMemcpyHostToDevice, stream_));
}

void Engine::Sample(int rows) {
  Range range("sampler");
  const uint64_t* seed = reinterpret_cast<const uint64_t*>(inputs_d_);
  if (sample_stream_ == nullptr) {
    LLM_CUDA_CHECK(LaunchTopkToppSampling(logits_, rows, o_.vocab, o_.top_k, o_.top_p,
                                          o_.temperature, seed, sampled_d_, stream_));
    return;
  }
  LLM_CUDA_CHECK(cudaEventRecord(logits_ready_, stream_));
  LLM_CUDA_CHECK(cudaStreamWaitEvent(sample_stream_, logits_ready_, 0));
  LLM_CUDA_CHECK(LaunchTopkToppSampling(logits_, rows, o_.vocab, o_.top_k, o_.top_p,
                                        o_.temperature, seed, sampled_d_, sample_stream_));
}

void Engine::DownloadTokens(int rows) {
  cudaStream_t s = sample_stream_ ? sample_stream_ : stream_;
  LLM_CUDA_CHECK(
      cudaMemcpyAsync(sampled_h_, sampled_d_, rows * sizeof(int), cudaMemcpyDeviceToHost, s));
  if (sample_stream_) {
    // The next step's forward overwrites logits and inputs only after sampling finished.
    LLM_CUDA_CHECK(cudaEventRecord(sampled_ready_, sample_stream_));
    LLM_CUDA_CHECK(cudaStreamWaitEvent(stream_, sampled_ready_, 0));
  }
  LLM_CUDA_CHECK(cudaStreamSynchronize(s));
}

RunResult Engine::Run(int run_index, bool warmup, const std::string& label) {
  RunResult result;
  std::string run_msg = "run label=" + label + (warmup ? " warmup=1" : "");
  Range run_range(run_msg);
  const auto wall_start = std::chrono::steady_clock::now();
  LLM_CUDA_CHECK(cudaEventRecord(run_start_, stream_));
  const int b_n = o_.batch;
  const int p = o_.prompt_len;
  const int q = o_.spec + 1;
  uint64_t* seed_h = reinterpret_cast<uint64_t*>(inputs_h_);
  int32_t* seq_lens_h = inputs_h_ + 2;
  int32_t* tokens_h = seq_lens_h + b_n;
  int32_t* positions_h = tokens_h + max_tokens_;
  int32_t* slots_h = positions_h + max_tokens_;
  ctx_len_.assign(b_n, 0);
  last_token_.assign(b_n, 0);

  // ---- Prefill: the whole prompt of every sequence, one first token each.
  {
    std::vector<int> kv(b_n, p);
    Range step_range(StepMessage("prefill", b_n, kv, b_n));
    {
      Range r("schedule");
      *seed_h = Hash(o_.seed, 0x5EED, run_index, 0);
      for (int b = 0; b < b_n; ++b) {
        seq_lens_h[b] = p;
        for (int i = 0; i < p; ++i) {
          const int t = b * p + i;
          tokens_h[t] = static_cast<int32_t>(Hash(o_.seed, 0x9A0, run_index, b, i) % o_.vocab);
          positions_h[t] = i;
          slots_h[t] = b * max_kv_ + i;
        }
      }
      UploadInputs();
    }
    {
      Range r("prefill");
      Forward(/*prefill=*/true, p, 0);
    }
    Sample(b_n);
    {
      Range r("postproc");
      DownloadTokens(b_n);
      for (int b = 0; b < b_n; ++b) {
        const int tok = std::clamp(sampled_h_[b], 0, o_.vocab - 1);
        last_token_[b] = tok;
        ctx_len_[b] = p;
        result.checksum = FoldToken(result.checksum, tok);
      }
    }
    result.tokens += b_n;
    ++result.prefill_steps;
  }

  // ---- Decode: q = spec + 1 tokens per sequence (last token + drafts), accepted + 1 kept.
  for (int step = 0; step < o_.steps; ++step) {
    const std::vector<int> accepted =
        PlanAcceptance(o_.seed, run_index, step, b_n, o_.spec, o_.accept_rate);
    std::vector<int> kv(b_n);
    int64_t produced = 0;
    int longest = 0;
    for (int b = 0; b < b_n; ++b) {
      kv[b] = ctx_len_[b] + q;
      longest = std::max(longest, kv[b]);
      produced += accepted[b] + 1;
    }
    Range step_range(StepMessage("decode", produced, kv, b_n));
    {
      Range r("schedule");
      *seed_h = Hash(o_.seed, 0x5EED, run_index, step + 1);
      for (int b = 0; b < b_n; ++b) {
        seq_lens_h[b] = kv[b];
        for (int i = 0; i < q; ++i) {
          const int t = b * q + i;
          tokens_h[t] = i == 0 ? last_token_[b]
                               : static_cast<int32_t>(
                                     Hash(o_.seed, 0xD2AF7, run_index * 100000 + step, b, i) %
                                     o_.vocab);
          positions_h[t] = ctx_len_[b] + i;
          slots_h[t] = b * max_kv_ + ctx_len_[b] + i;
        }
      }
      UploadInputs();
    }
    {
      Range r("decode");
      if (o_.graph) {
        if (graph_execs_.empty()) CaptureDecodeGraphs(q);
        ReplayDecodeGraphs();
      } else {
        Forward(/*prefill=*/false, q, CeilDiv(longest, kKvChunk));
      }
    }
    Sample(b_n * q);
    {
      Range r("postproc");
      DownloadTokens(b_n * q);
      for (int b = 0; b < b_n; ++b) {
        for (int i = 0; i <= accepted[b]; ++i) {
          const int tok = std::clamp(sampled_h_[b * q + i], 0, o_.vocab - 1);
          result.checksum = FoldToken(result.checksum, tok);
          last_token_[b] = tok;
        }
        ctx_len_[b] += accepted[b] + 1;
      }
    }
    result.tokens += produced;
    ++result.decode_steps;
  }

  LLM_CUDA_CHECK(cudaEventRecord(run_stop_, stream_));
  LLM_CUDA_CHECK(cudaEventSynchronize(run_stop_));
  LLM_CUDA_CHECK(cudaEventElapsedTime(&result.gpu_ms, run_start_, run_stop_));
  result.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                             wall_start)
                       .count();
  return result;
}

}  // namespace llm
