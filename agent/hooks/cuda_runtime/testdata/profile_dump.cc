// Debug helper for these tests: prints every host event and device op of a record file, one
// per line (absolute ns, correlation id, kind, name). Usage: profile_dump <file.pb>.
#include <cstdio>
#include <map>
#include <string>

#include "analyzer/reader.h"

namespace {
struct Dump : profagent::analyzer::Visitor {
  std::map<uint32_t, std::string> s;
  void OnHeader(const profagent::Header& h) override {
    printf("header pid=%u timing=%d reason=%s\n", h.pid(), int(h.gpu_timing()),
           h.gpu_timing_reason().c_str());
  }
  void OnString(uint32_t id, const std::string& v) override { s[id] = v; }
  void OnHostEvent(const profagent::analyzer::HostEvent& e) override {
    printf("host t%u %llu +%llu corr=%llu kind=%d name=%s bytes=%llu ptr=%llx ck=%u stack=%u\n",
           e.thread, (unsigned long long)e.start_ns, (unsigned long long)(e.end_ns - e.start_ns),
           (unsigned long long)e.corr, int(e.ev->kind()), s[e.ev->name()].c_str(),
           (unsigned long long)e.ev->bytes(), (unsigned long long)e.ev->ptr(), e.ev->copy_kind(),
           e.ev->stack());
  }
  void OnDeviceOp(const profagent::analyzer::DeviceOpEvent& d) override {
    printf("dev %llu +%llu corr=%llu kind=%d name=%s bytes=%llu graph=%llu stream=%u\n",
           (unsigned long long)d.start_ns, (unsigned long long)(d.end_ns - d.start_ns),
           (unsigned long long)d.corr, int(d.op->kind()), s[d.op->name()].c_str(),
           (unsigned long long)d.op->bytes(), (unsigned long long)d.op->graph(), d.op->stream());
  }
};
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  Dump d;
  profagent::analyzer::FileSummary sum;
  auto st = profagent::analyzer::VisitFile(argv[1], &d, &sum);
  if (!st.ok()) {
    fprintf(stderr, "%s\n", std::string(st.message()).c_str());
    return 1;
  }
  return 0;
}
