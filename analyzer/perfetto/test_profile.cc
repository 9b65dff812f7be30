#include "analyzer/perfetto/test_profile.h"

namespace profagent {
namespace analyzer {
namespace testing {

ProfileWriter::ProfileWriter(const std::string& path) : f_(fopen(path.c_str(), "wb")) {
  if (f_ == nullptr) return;
  const unsigned char pre[12] = {'P', 'R', 'O', 'F', 'A', 'G', 'N', 'T', 1, 0, 0, 0};
  fwrite(pre, 1, sizeof(pre), f_);
}

ProfileWriter::~ProfileWriter() { Close(); }

void ProfileWriter::Close() {
  if (f_ != nullptr) fclose(f_);
  f_ = nullptr;
}

void ProfileWriter::Write(const Record& r) {
  r.SerializeToString(&buf_);
  uint64_t n = buf_.size();
  unsigned char len[10];
  int k = 0;
  while (n >= 0x80) {
    len[k++] = static_cast<unsigned char>(n | 0x80);
    n >>= 7;
  }
  len[k++] = static_cast<unsigned char>(n);
  fwrite(len, 1, k, f_);
  fwrite(buf_.data(), 1, buf_.size(), f_);
}

void ProfileWriter::Header(uint32_t pid, const std::string& host, int32_t rank,
                           uint64_t realtime_ns, uint64_t monotonic_ns, uint64_t boot_id) {
  Record r;
  profagent::Header* h = r.mutable_header();
  h->set_pid(pid);
  h->set_hostname(host);
  h->set_rank(rank);
  h->set_start_realtime_ns(realtime_ns);
  h->set_start_monotonic_ns(monotonic_ns);
  h->set_boot_id_hash(boot_id);
  h->set_agent_version("test");
  Write(r);
}

void ProfileWriter::String(uint32_t id, const std::string& value) {
  Record r;
  r.mutable_string()->set_id(id);
  r.mutable_string()->set_value(value);
  Write(r);
}

void ProfileWriter::Thread(uint32_t thread, uint32_t tid, const std::string& name) {
  Record r;
  r.mutable_thread()->set_thread(thread);
  r.mutable_thread()->set_tid(tid);
  r.mutable_thread()->set_name(name);
  Write(r);
}

void ProfileWriter::Footer(const std::string& reason) {
  Record r;
  r.mutable_footer()->set_reason(reason);
  Write(r);
}

void ProfileWriter::Offset(int64_t offset_ns, uint64_t error_ns) {
  Record r;
  r.mutable_clock_offset()->set_offset_ns(offset_ns);
  r.mutable_clock_offset()->set_error_ns(error_ns);
  r.mutable_clock_offset()->set_method("mpi-pingpong");
  r.mutable_clock_offset()->set_rounds(10);
  Write(r);
}

void ProfileWriter::Raw(const void* data, size_t n) { fwrite(data, 1, n, f_); }

}  // namespace testing
}  // namespace analyzer
}  // namespace profagent
