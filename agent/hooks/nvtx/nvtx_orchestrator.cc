// An orchestrator process whose only NVTX activity is a range around everything it does: it
// opens `run label=orchestrate`, prints "ready" and waits for a signal (a launcher stopped with
// SIGTERM or Ctrl-C while its workers run).
#include <nvtx3/nvToolsExt.h>
#include <unistd.h>

#include <cstdio>

int main() {
  nvtxRangePushA("run label=orchestrate");
  std::printf("ready\n");
  std::fflush(stdout);
  for (;;) pause();
}
