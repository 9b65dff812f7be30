#include "tests/integration/mpi_testutil.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "analyzer/reader.h"

namespace profagent {
namespace testing {
namespace {

class Loader : public analyzer::Visitor {
 public:
  explicit Loader(RankProfile* p) : p_(p) {}
  void OnHeader(const Header& h) override {
    p_->rank = h.rank();
    p_->local_rank = h.local_rank();
    p_->world_size = h.world_size();
  }
  void OnString(uint32_t id, const std::string& v) override { strings_[id] = v; }
  void OnHostEvent(const analyzer::HostEvent& e) override {
    const Event& ev = *e.ev;
    if (ev.kind() == EV_COLLECTIVE) {
      CollRecord c;
      const Collective& k = ev.coll();
      c.api = S(ev.api() != 0 ? ev.api() : ev.name());
      c.op = S(k.op());
      c.dtype = S(k.dtype());
      c.redop = S(k.redop());
      c.count = k.count();
      c.bytes = k.bytes();
      c.recv_bytes = k.recv_bytes();
      c.peer = k.peer();
      c.recv_peer = k.has_recv_peer() ? k.recv_peer() : -1;
      c.recv_seq = k.recv_seq();
      c.comm = k.comm();
      c.seq = k.seq();
      c.group = k.group();
      c.corr = k.corr();
      c.complete_ns = k.complete_ns();
      c.wait_ns = k.wait_ns();
      c.nonblocking = k.nonblocking();
      c.captured = ev.captured();
      c.start_ns = e.start_ns;
      c.end_ns = e.end_ns;
      c.stream = ev.stream();
      c.ret = ev.ret();
      c.lib = k.lib();
      p_->colls.push_back(c);
    } else {
      OtherEvent o;
      o.kind = ev.kind();
      o.name = S(ev.name());
      o.start_ns = e.start_ns;
      o.end_ns = e.end_ns;
      o.handle = ev.handle();
      o.graph = ev.graph();
      o.ret = ev.ret();
      p_->others.push_back(o);
    }
  }
  void OnDeviceOp(const analyzer::DeviceOpEvent& d) override {
    p_->device_ops.push_back({d.start_ns, d.end_ns, d.corr, S(d.op->name())});
  }
  void OnOther(const Record& r) override {
    if (r.has_process()) {
      p_->rank = r.process().rank();
      if (r.process().local_rank() >= 0) p_->local_rank = r.process().local_rank();
      p_->world_size = r.process().world_size();
      p_->rank_source = r.process().rank_source();
    } else if (r.has_clock_offset()) {
      p_->offsets.push_back(r.clock_offset());
    } else if (r.has_comm()) {
      p_->comms[r.comm().id()] = r.comm();
    } else if (r.has_footer()) {
      p_->dropped = r.footer().dropped();
      p_->footer_reason = r.footer().reason();
    }
  }

 private:
  std::string S(uint32_t id) const {
    auto it = strings_.find(id);
    return it == strings_.end() ? std::string() : it->second;
  }
  RankProfile* p_;
  std::map<uint32_t, std::string> strings_;
};

}  // namespace

RankProfile LoadProfile(const std::string& path) {
  RankProfile p;
  p.path = path;
  Loader l(&p);
  analyzer::FileSummary s;
  absl::Status st = analyzer::VisitFile(path, &l, &s);
  if (!st.ok()) p.error = st.ToString();
  p.has_footer = s.has_footer;
  return p;
}

std::vector<RankProfile> LoadProfileDir(const std::string& dir) {
  std::vector<RankProfile> out;
  auto files = analyzer::ListProfileFiles(dir);
  if (!files.ok()) return out;
  for (const auto& f : *files) out.push_back(LoadProfile(f));
  std::stable_sort(out.begin(), out.end(), [](const RankProfile& a, const RankProfile& b) {
    const int ra = a.rank < 0 ? INT_MAX : a.rank, rb = b.rank < 0 ? INT_MAX : b.rank;
    return ra < rb;
  });
  return out;
}

std::string Runfile(const std::string& rel) {
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* ws = getenv("TEST_WORKSPACE");
  std::string p = srcdir ? std::string(srcdir) + "/" + (ws ? ws : "profagent") + "/" + rel : rel;
  char buf[PATH_MAX];
  if (realpath(p.c_str(), buf) != nullptr) return buf;
  return p;
}

std::string FreshDir(const std::string& name) {
  const char* tmp = getenv("TEST_TMPDIR");
  std::string d = std::string(tmp ? tmp : "/tmp") + "/" + name;
  Run("rm -rf '" + d + "' && mkdir -p '" + d + "'", nullptr);
  return d;
}

int Run(const std::string& cmd, std::string* out) {
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (f == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
    if (out) out->append(buf, n);
  const int st = pclose(f);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

bool HaveMpirun() { return Run("command -v mpirun >/dev/null", nullptr) == 0; }

int RunMpiUnderAgent(int np, const std::string& program, const std::string& out, std::string* log,
                     const std::string& args) {
  return Run("mpirun --allow-run-as-root --oversubscribe -np " + std::to_string(np) +
                 " -x LD_PRELOAD=" + Runfile("agent/libprofagent.so") +
                 " -x PROFAGENT_OUTPUT=" + out + " " + Runfile("tests/integration/" + program) +
                 (args.empty() ? "" : " " + args),
             log);
}

std::map<uint64_t, std::vector<const CollRecord*>> CallsByComm(const RankProfile& p) {
  std::map<uint64_t, std::vector<const CollRecord*>> by_comm;
  for (const CollRecord& c : p.colls) by_comm[c.comm].push_back(&c);
  for (auto& kv : by_comm) {
    std::stable_sort(kv.second.begin(), kv.second.end(),
                     [](const CollRecord* a, const CollRecord* b) {
                       return a->start_ns < b->start_ns;
                     });
  }
  return by_comm;
}

uint64_t CommIdOf(const RankProfile& p, const std::string& uid) {
  for (const auto& kv : p.comms)
    if (kv.second.unique_id() == uid) return kv.first;
  return 0;
}

bool ReportSummary(const std::string& prof_dir, const std::string& rep_dir,
                   nlohmann::json* summary, std::string* log) {
  if (Run(Runfile("analyzer/profanalyze") + " report " + prof_dir + " -o " + rep_dir, log) != 0) {
    return false;
  }
  std::ifstream in(rep_dir + "/summary.json");
  *summary = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return !summary->is_discarded();
}

}  // namespace testing
}  // namespace profagent
