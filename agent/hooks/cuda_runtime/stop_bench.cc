// Stop-latency benchmark (a benchmark, not a test): how long a serving process takes to end
// after a SIGTERM from outside, without the agent and under it in each timing mode. Under the
// agent that time is the file's finish (the last drain, the timing module's own flush, the
// footer); a supervisor's grace before SIGKILL bounds it (Open MPI's mpirun: about 5 ms).
//
// Each round starts rt_serve_stop `pause` on gpusim (an engine thread serving decode steps of
// three 200 us kernels), waits for its first line (10 steps served) and 50 ms more, sends
// SIGTERM and times it until waitpid returns. Modes alternate within each round.
//
// Usage: stop_bench RT_SERVE_STOP AGENT GPUSIM_DIR [rounds]
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace {

double NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

// One run: the stop latency in ms, or a negative value when the run went wrong.
double StopOnce(const std::string& program, const std::string& agent, const std::string& gpusim,
                const std::string& costs, const std::string& mode, const std::string& out) {
  int pipefd[2];
  if (pipe(pipefd) != 0) return -1;
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(pipefd[1], 1);
    close(pipefd[0]);
    close(pipefd[1]);
    const int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, 2);
    setenv("LD_LIBRARY_PATH", gpusim.c_str(), 1);
    setenv("GPUSIM_COSTS", costs.c_str(), 1);
    if (mode != "none") {
      setenv("LD_PRELOAD", agent.c_str(), 1);
      setenv("PROFAGENT_OUTPUT", out.c_str(), 1);
      setenv("PROFAGENT_GPU_TIMING", mode.c_str(), 1);
    }
    execl(program.c_str(), program.c_str(), "pause", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pipefd[1]);
  char c;
  bool line = false;
  while (read(pipefd[0], &c, 1) == 1) {
    if (c == '\n') {
      line = true;
      break;
    }
  }
  close(pipefd[0]);
  if (!line) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return -1;
  }
  usleep(50000);
  const double t0 = NowMs();
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  const double ms = NowMs() - t0;
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM ? ms : -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s RT_SERVE_STOP AGENT GPUSIM_DIR [rounds]\n", argv[0]);
    return 2;
  }
  const int rounds = argc > 4 ? atoi(argv[4]) : 20;
  char dir_template[] = "/tmp/stop_bench.XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) return 1;
  const std::string costs = std::string(dir) + "/costs.txt";
  if (FILE* f = fopen(costs.c_str(), "w")) {
    fputs("^serve_step_kernel 200\n", f);
    fclose(f);
  }
  const std::vector<std::string> modes = {"none", "host", "events", "cupti"};
  std::map<std::string, std::vector<double>> ms;
  int failed = 0;
  for (int r = 0; r < rounds; ++r) {
    for (const std::string& mode : modes) {
      const std::string out = std::string(dir) + "/prof_" + mode + "_" + std::to_string(r);
      const double t = StopOnce(argv[1], argv[2], argv[3], costs, mode, out);
      if (t < 0) {
        ++failed;
      } else {
        ms[mode].push_back(t);
      }
    }
  }
  printf("SIGTERM to process end, ms (%d rounds; failed runs: %d)\n", rounds, failed);
  for (const std::string& mode : modes) {
    std::vector<double>& v = ms[mode];
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    printf("%-7s min %.2f  p50 %.2f  p90 %.2f  max %.2f\n", mode.c_str(), v.front(),
           v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 9 / 10)], v.back());
  }
  std::string cleanup = std::string("rm -rf ") + dir;
  return system(cleanup.c_str()) == 0 && failed == 0 ? 0 : 1;
}
