// The demo LLM serving engine behind `//kernels:inference`: a small Llama-style transformer
// (embedding, RMSNorm, fused QKV, RoPE, split-KV attention over a KV cache, output projection,
// SwiGLU MLP, LM head, top-k/top-p sampling), run like a serving engine: each run prefills a
// fresh batch of prompts, then decodes `steps` steps, optionally with speculative decoding
// (each decode step verifies `spec` draft tokens per sequence and accepts a deterministic
// pseudo-random number of them), optionally replaying the decode forward from a CUDA graph and
// sampling on a second stream. With tensor parallelism each rank holds 1/world of the heads and
// MLP columns and sums partial outputs with ncclAllReduce after the attention output projection
// and after the MLP down projection.
//
// Annotation contract (what the profiler keys on; see kernels/README.md): per run one NVTX
// range `run label=<label>[ warmup=1]`; per prefill or decode step one range
// `step phase=<prefill|decode> tokens=<produced> kv=<kv lengths> bsz=<batch>` containing
// `schedule`, `prefill`|`decode` (with `layer <i>` and the projection ranges `qkv_proj`,
// `o_proj`, `gate_up_proj`, `down_proj`, `lm_head`, plus `attention`, `kv.append`,
// `all_reduce`), `sampler` and `postproc`.
//
// Thread safety: an Engine is used by one thread. Ownership: it owns every device and pinned
// buffer, stream, event and graph it creates; the NCCL communicator is borrowed.
#ifndef PROFAGENT_KERNELS_ENGINE_H_
#define PROFAGENT_KERNELS_ENGINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

namespace llm {

struct EngineOptions {
  // Model.
  int layers = 4;
  int hidden = 512;  // multiple of kHeadDim; heads = hidden / kHeadDim
  int ffn = 0;       // 0: 11 * hidden / 4 rounded up to a multiple of 64 * world
  int vocab = 8192;
  // Serving.
  int batch = 8;
  int prompt_len = 112;  // with 32 steps the KV crosses a 64-token chunk boundary
  int steps = 32;  // decode steps per run
  int spec = 0;    // draft tokens verified per decode step and sequence
  double accept_rate = 0.7;  // per-draft acceptance probability (spec > 0)
  int top_k = 20;
  float top_p = 0.9f;
  float temperature = 0.8f;
  uint64_t seed = 1234;
  bool graph = false;            // decode forward from a CUDA graph
  bool sampling_stream = false;  // sampling on a second stream, ordered with events
  // Parallelism.
  int rank = 0;
  int world = 1;
  ncclComm_t comm = nullptr;  // required when world > 1
};

struct RunResult {
  int64_t tokens = 0;     // tokens produced (prefill first tokens + accepted decode tokens)
  double wall_ms = 0.0;   // host steady clock, whole run
  float gpu_ms = 0.0f;    // cudaEvent elapsed time on the compute stream, whole run
  uint64_t checksum = 0;  // fold of this run's produced tokens
  int prefill_steps = 0;
  int decode_steps = 0;
};

// Per-sequence acceptance of one speculative decode step: accepted[b] in [0, spec]; the step
// produces accepted[b] + 1 tokens for sequence b. Deterministic in (seed, run, step, b).
std::vector<int> PlanAcceptance(uint64_t seed, int run, int step, int batch, int spec,
                                double accept_rate);

// Folds one produced token into a running checksum (order-sensitive).
uint64_t FoldToken(uint64_t checksum, int token);

class Engine {
 public:
  // Validates options (exits with a message when invalid), allocates and initializes weights,
  // KV cache and buffers.
  explicit Engine(const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // One run: prefill of `batch` fresh prompts, then `steps` decode steps. Blocking.
  RunResult Run(int run_index, bool warmup, const std::string& label);

  int heads() const { return heads_; }
  int ffn() const { return ffn_; }
  int max_kv() const { return max_kv_; }

 private:
  struct Layer {
    float* ln1 = nullptr;
    float* wqkv = nullptr;
    float* wo = nullptr;
    float* ln2 = nullptr;
    float* wgu = nullptr;
    float* wd = nullptr;
    float* k_cache = nullptr;
    float* v_cache = nullptr;
  };

  float* Alloc(size_t floats);
  void InitWeights();
  // Enqueues embedding .. LM head for `q_len` tokens per sequence on stream_. LM head rows:
  // the last token of each sequence (prefill) or every token (decode).
  void Forward(bool prefill, int q_len, int num_chunks);
  // Sums `buf` over the ranks (in place, on stream_). While capturing, ends the current graph
  // segment and starts the next one instead.
  void AllReduce(float* buf, size_t count);
  void CaptureDecodeGraphs(int q_len);
  void ReplayDecodeGraphs();
  // Copies the staged inputs (seed, seq_lens, tokens, positions, slots) to the device.
  void UploadInputs();
  void Sample(int rows);
  void DownloadTokens(int rows);

  EngineOptions o_;
  int heads_ = 0;        // on this rank
  int ffn_ = 0;          // global
  int ffn_local_ = 0;
  int max_kv_ = 0;
  int max_chunks_ = 0;
  int max_tokens_ = 0;   // batch * max(prompt_len, spec + 1)
  int max_rows_ = 0;     // batch * (spec + 1)

  std::vector<void*> allocations_;
  float* embed_ = nullptr;
  float* final_norm_ = nullptr;
  float* lm_head_ = nullptr;
  std::vector<Layer> layers_;
  // Activations.
  float* residual_ = nullptr;
  float* x_ = nullptr;
  float* qkv_ = nullptr;
  float* attn_ = nullptr;
  float* proj_ = nullptr;
  float* gate_up_ = nullptr;
  float* act_ = nullptr;
  float* logits_ = nullptr;
  float* partial_acc_ = nullptr;
  float* partial_ml_ = nullptr;
  int* sampled_d_ = nullptr;
  // Step inputs: one device block and its pinned staging copy, laid out as
  // [seed (8 bytes)][seq_lens: batch][tokens: max_tokens][positions: max_tokens][slots: ...].
  int32_t* inputs_d_ = nullptr;
  int32_t* inputs_h_ = nullptr;
  int* sampled_h_ = nullptr;
  size_t inputs_ints_ = 0;

  cudaStream_t stream_ = nullptr;
  cudaStream_t sample_stream_ = nullptr;
  cudaEvent_t logits_ready_ = nullptr;
  cudaEvent_t sampled_ready_ = nullptr;
  cudaEvent_t run_start_ = nullptr;
  cudaEvent_t run_stop_ = nullptr;
  // Graph mode: the decode forward as segments split at the AllReduces (piecewise graphs: the
  // collectives run eagerly between segment replays), one segment when world == 1.
  bool capturing_ = false;
  std::vector<cudaGraph_t> graphs_;
  std::vector<cudaGraphExec_t> graph_execs_;
  size_t allreduce_count_ = 0;  // elements per decode-step AllReduce

  // Sequences of the current run.
  std::vector<int> ctx_len_;     // committed KV length
  std::vector<int> last_token_;
};

}  // namespace llm

#endif  // PROFAGENT_KERNELS_ENGINE_H_
