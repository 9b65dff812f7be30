// End-to-end NVTX workload (no CUDA runtime): an unmodified program using the NVTX v3 API of the
// CUDA 13 headers. Run it with LD_PRELOAD=libprofagent.so; it prints one line per range with
// the CLOCK_MONOTONIC times it read around the calls, so a test can check the recorded times
// against the truth:
//   R <tid-tag> <before_start> <after_start> <before_end> <after_end> <message>
//   M <before> <after> <message>
// Ranges named here and their nesting are fixed (nvtx_e2e_test.cc knows them). With an argument,
// the program also dlopens that library (nvtx_plugin.cc, its own NVTX instance) and records the
// range it makes.
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

uint64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

void Busy(int us) {
  const uint64_t end = MonoNs() + uint64_t(us) * 1000;
  while (MonoNs() < end) {
  }
}

struct Open {
  std::string msg;
  uint64_t b0, a0;
};

std::vector<std::string> g_lines;  // printed at the end (main thread only)

Open Push(const std::string& msg) {
  Open o{msg, MonoNs(), 0};
  nvtxRangePushA(msg.c_str());
  o.a0 = MonoNs();
  return o;
}

void Pop(const Open& o) {
  const uint64_t b1 = MonoNs();
  nvtxRangePop();
  const uint64_t a1 = MonoNs();
  char buf[512];
  snprintf(buf, sizeof(buf), "R main %llu %llu %llu %llu %s", (unsigned long long)o.b0,
           (unsigned long long)o.a0, (unsigned long long)b1, (unsigned long long)a1,
           o.msg.c_str());
  g_lines.push_back(buf);
}

}  // namespace

int main(int argc, char** argv) {
  Open run = Push("run label=demo");
  {
    Open outer = Push("outer");
    Busy(300);
    Open inner = Push("inner");
    Busy(300);
    Pop(inner);
    Busy(100);
    Pop(outer);
  }
  for (int i = 0; i < 5; ++i) {
    Open step = Push("step phase=decode tokens=8 kv=100,300 bsz=2");
    Busy(200);
    Open sampler = Push("sampler");
    Busy(100);
    Pop(sampler);
    Pop(step);
  }
  // Start/end across threads.
  uint64_t sb0 = MonoNs();
  nvtxRangeId_t id = nvtxRangeStartA("cross-thread");
  uint64_t sa0 = MonoNs();
  uint64_t sb1 = 0, sa1 = 0;
  std::thread th([&] {
    // Named before its first event (Python engines name their threads this way: their
    // threading module sets no OS thread name).
    nvtxNameOsThreadA(uint32_t(syscall(SYS_gettid)), "nvtx-worker");
    Busy(300);
    sb1 = MonoNs();
    nvtxRangeEnd(id);
    sa1 = MonoNs();
  });
  th.join();
  char buf[512];
  snprintf(buf, sizeof(buf), "R other %llu %llu %llu %llu cross-thread", (unsigned long long)sb0,
           (unsigned long long)sa0, (unsigned long long)sb1, (unsigned long long)sa1);
  g_lines.push_back(buf);
  // Opened on a thread that records nothing else (a Python scheduler thread), ended here.
  uint64_t ob0 = 0, oa0 = 0;
  nvtxRangeId_t opened = 0;
  std::thread opener([&] {
    nvtxNameOsThreadA(uint32_t(syscall(SYS_gettid)), "nvtx-scheduler");
    ob0 = MonoNs();
    opened = nvtxRangeStartA("opened-elsewhere");
    oa0 = MonoNs();
  });
  opener.join();
  const uint64_t ob1 = MonoNs();
  nvtxRangeEnd(opened);
  const uint64_t oa1 = MonoNs();
  snprintf(buf, sizeof(buf), "R other %llu %llu %llu %llu opened-elsewhere",
           (unsigned long long)ob0, (unsigned long long)oa0, (unsigned long long)ob1,
           (unsigned long long)oa1);
  g_lines.push_back(buf);
  // A mark.
  uint64_t mb = MonoNs();
  nvtxMarkA("checkpoint");
  uint64_t ma = MonoNs();
  snprintf(buf, sizeof(buf), "M %llu %llu checkpoint", (unsigned long long)mb,
           (unsigned long long)ma);
  g_lines.push_back(buf);
  // A domain, a registered string, payload, color, category.
  nvtxDomainHandle_t dom = nvtxDomainCreateA("engine");
  nvtxStringHandle_t layer = nvtxDomainRegisterStringA(dom, "layer 3");
  nvtxEventAttributes_t a;
  memset(&a, 0, sizeof(a));
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.category = 7;
  a.colorType = NVTX_COLOR_ARGB;
  a.color = 0xFF336699u;
  a.payloadType = NVTX_PAYLOAD_TYPE_DOUBLE;
  a.payload.dValue = 1.5;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = layer;
  uint64_t db0 = MonoNs();
  nvtxDomainRangePushEx(dom, &a);
  uint64_t da0 = MonoNs();
  Busy(200);
  uint64_t db1 = MonoNs();
  nvtxDomainRangePop(dom);
  uint64_t da1 = MonoNs();
  snprintf(buf, sizeof(buf), "R main %llu %llu %llu %llu layer 3", (unsigned long long)db0,
           (unsigned long long)da0, (unsigned long long)db1, (unsigned long long)da1);
  g_lines.push_back(buf);
  // A wide string with an int payload.
  nvtxEventAttributes_t w = a;
  w.payloadType = NVTX_PAYLOAD_TYPE_INT64;
  w.payload.llValue = -42;
  w.messageType = NVTX_MESSAGE_TYPE_UNICODE;
  w.message.unicode = L"wide \u2713";
  uint64_t wb0 = MonoNs();
  nvtxRangePushEx(&w);
  uint64_t wa0 = MonoNs();
  Busy(100);
  uint64_t wb1 = MonoNs();
  nvtxRangePop();
  uint64_t wa1 = MonoNs();
  snprintf(buf, sizeof(buf), "R main %llu %llu %llu %llu wide \xe2\x9c\x93",
           (unsigned long long)wb0, (unsigned long long)wa0, (unsigned long long)wb1,
           (unsigned long long)wa1);
  g_lines.push_back(buf);
  if (argc > 1) {
    void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      fprintf(stderr, "nvtx_demo: %s\n", dlerror());
      return 1;
    }
    using PluginFn = void (*)(uint64_t*, uint64_t*, uint64_t*, uint64_t*);
    auto fn = reinterpret_cast<PluginFn>(dlsym(h, "PluginRange"));
    if (fn == nullptr) return 1;
    uint64_t pb0, pa0, pb1, pa1;
    fn(&pb0, &pa0, &pb1, &pa1);
    snprintf(buf, sizeof(buf), "R main %llu %llu %llu %llu plugin range",
             (unsigned long long)pb0, (unsigned long long)pa0, (unsigned long long)pb1,
             (unsigned long long)pa1);
    g_lines.push_back(buf);
  }
  Pop(run);
  // Named after its events were recorded (wide-character form).
  nvtxNameOsThreadW(uint32_t(syscall(SYS_gettid)), L"engine-main");
  // Left open at exit: the agent reports it as a push without end.
  nvtxRangePushA("left open");
  for (const auto& l : g_lines) printf("%s\n", l.c_str());
  return 0;
}
