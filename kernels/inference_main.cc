// `inference`: the demo LLM serving workload (see kernels/README.md). Parses flags, sets up
// tensor parallelism when started by mpirun (MPI only then: a single process makes no MPI
// call), runs warmup and measured runs of kernels/engine.h and prints one line per run and a
// checksum of the generated tokens that every rank agrees on.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <CLI/CLI.hpp>
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include "kernels/check.h"
#include "kernels/engine.h"

namespace {

// World size from the launcher's environment (Open MPI, then PMI), 1 when not launched by MPI.
int WorldSizeFromEnv() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && *v != '\0') return std::atoi(v);
  }
  return 1;
}

// Node-local rank (one GPU per rank on a multi-GPU node), 0 when unknown.
int LocalRankFromEnv() {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "LOCAL_RANK"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && *v != '\0') return std::atoi(v);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  llm::EngineOptions opt;
  int runs = 3;
  int warmup_runs = 2;
  std::string label;
  CLI::App app{"Demo LLM serving workload: prefill + decode of a small transformer"};
  app.add_option("--batch", opt.batch, "sequences per batch")->capture_default_str();
  app.add_option("--prompt-len", opt.prompt_len, "prompt tokens per sequence (prefill)")
      ->capture_default_str();
  app.add_option("--steps", opt.steps, "decode steps per run")->capture_default_str();
  app.add_option("--runs", runs, "measured runs")->capture_default_str();
  app.add_option("--warmup-runs", warmup_runs, "warmup runs (NVTX warmup=1)")
      ->capture_default_str();
  app.add_option("--layers", opt.layers, "transformer layers")->capture_default_str();
  app.add_option("--hidden", opt.hidden, "hidden size (multiple of 64; heads = hidden/64)")
      ->capture_default_str();
  app.add_option("--ffn", opt.ffn, "MLP width (0: 11/4 hidden)")->capture_default_str();
  app.add_option("--vocab", opt.vocab, "vocabulary size")->capture_default_str();
  app.add_option("--spec", opt.spec, "speculative decoding: draft tokens verified per step")
      ->capture_default_str();
  app.add_option("--accept-rate", opt.accept_rate, "per-draft acceptance probability")
      ->capture_default_str();
  app.add_option("--top-k", opt.top_k, "sampling top-k (<= 64)")->capture_default_str();
  app.add_option("--top-p", opt.top_p, "sampling top-p")->capture_default_str();
  app.add_option("--temperature", opt.temperature, "sampling temperature")
      ->capture_default_str();
  app.add_option("--seed", opt.seed, "seed of prompts, drafts, acceptance and sampling")
      ->capture_default_str();
  app.add_flag("--streams", opt.sampling_stream, "sample on a second stream (events)");
  app.add_flag("--graph", opt.graph, "replay the decode forward from a CUDA graph");
  app.add_option("--label", label, "run label in the NVTX run range (default bs<batch>)");
  CLI11_PARSE(app, argc, argv);
  if (label.empty()) label = "bs" + std::to_string(opt.batch);
  LLM_CHECK(runs >= 0 && warmup_runs >= 0, "--runs and --warmup-runs must be >= 0");

  const int env_world = WorldSizeFromEnv();
  const bool use_mpi = env_world > 1;
  ncclComm_t comm = nullptr;
  int device = 0;
  if (use_mpi) {
    LLM_MPI_CHECK(MPI_Init(&argc, &argv));
    LLM_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &opt.rank));
    LLM_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &opt.world));
    int devices = 0;
    LLM_CUDA_CHECK(cudaGetDeviceCount(&devices));
    LLM_CHECK(devices > 0, "no CUDA device");
    device = LocalRankFromEnv() % devices;
    LLM_CUDA_CHECK(cudaSetDevice(device));
    ncclUniqueId id;
    std::memset(&id, 0, sizeof(id));
    if (opt.rank == 0) LLM_NCCL_CHECK(ncclGetUniqueId(&id));
    LLM_MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD));
    LLM_NCCL_CHECK(ncclCommInitRank(&comm, opt.world, id, opt.rank));
    opt.comm = comm;
  }
  const bool print = opt.rank == 0;

  cudaDeviceProp prop;
  LLM_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  int64_t total_tokens = 0;
  uint64_t checksum = 0;
  {
    llm::Engine engine(opt);
    if (print) {
      std::printf(
          "inference: device=\"%s\" sms=%d ranks=%d layers=%d hidden=%d heads/rank=%d ffn=%d "
          "vocab=%d batch=%d prompt=%d steps=%d spec=%d graph=%d streams=%d max_kv=%d\n",
          prop.name, prop.multiProcessorCount, opt.world, opt.layers, opt.hidden,
          engine.heads(), engine.ffn(), opt.vocab, opt.batch, opt.prompt_len, opt.steps,
          opt.spec, opt.graph ? 1 : 0, opt.sampling_stream ? 1 : 0, engine.max_kv());
      std::fflush(stdout);
    }
    const int total_runs = warmup_runs + runs;
    for (int r = 0; r < total_runs; ++r) {
      const bool warmup = r < warmup_runs;
      const llm::RunResult res = engine.Run(r, warmup, label);
      total_tokens += res.tokens;
      checksum = llm::FoldToken(checksum ^ res.checksum, r);
      if (print) {
        std::printf(
            "run %d/%d label=%s warmup=%d tokens=%lld steps=%d wall_ms=%.3f gpu_ms=%.3f "
            "tokens_per_s=%.1f\n",
            r + 1, total_runs, label.c_str(), warmup ? 1 : 0,
            static_cast<long long>(res.tokens), res.prefill_steps + res.decode_steps,
            res.wall_ms, res.gpu_ms,
            res.gpu_ms > 0.0f ? res.tokens / (res.gpu_ms / 1000.0) : 0.0);
        std::fflush(stdout);
      }
    }
  }

  int exit_code = 0;
  if (use_mpi) {
    // Every rank sampled the same tokens from replicated logits: max and min must agree.
    unsigned long long v[2] = {checksum, ~checksum};
    LLM_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_UNSIGNED_LONG_LONG, MPI_MAX,
                                MPI_COMM_WORLD));
    const unsigned long long lo = ~v[1];
    if (v[0] != lo) {
      std::fprintf(stderr, "inference: rank %d: checksums differ across ranks (%016llx..%016llx)\n",
                   opt.rank, lo, v[0]);
      exit_code = 1;
    }
    checksum = v[0];
  }
  std::printf("rank=%d tokens=%lld checksum=%016llx\n", opt.rank,
              static_cast<long long>(total_tokens), static_cast<unsigned long long>(checksum));
  std::fflush(stdout);
  if (use_mpi) {
    LLM_NCCL_CHECK(ncclCommDestroy(comm));
    LLM_MPI_CHECK(MPI_Finalize());
  }
  return exit_code;
}
