#include "analyzer/report/profile_builder.h"

#include <cstdlib>

#include "analyzer/reader.h"

namespace profagent {
namespace analyzer {

ProfileBuilder::ProfileBuilder(const std::string& path, uint16_t major, uint16_t minor,
                               size_t batch)
    : batch_(batch) {
  f_ = fopen(path.c_str(), "wb");
  if (f_ == nullptr) {
    fprintf(stderr, "ProfileBuilder: cannot write %s\n", path.c_str());
    abort();
  }
  unsigned char pre[kFilePreambleBytes];
  memcpy(pre, kMagic, sizeof(kMagic));
  pre[8] = major & 0xff;
  pre[9] = major >> 8;
  pre[10] = minor & 0xff;
  pre[11] = minor >> 8;
  fwrite(pre, 1, sizeof(pre), f_);
}

ProfileBuilder::~ProfileBuilder() {
  if (f_ != nullptr) Close(false);
}

void ProfileBuilder::WriteFrame(const Record& r) {
  r.SerializeToString(&buf_);
  uint64_t n = buf_.size();
  unsigned char v[10];
  int k = 0;
  do {
    v[k] = n & 0x7f;
    n >>= 7;
    if (n != 0) v[k] |= 0x80;
    ++k;
  } while (n != 0);
  fwrite(v, 1, k, f_);
  fwrite(buf_.data(), 1, buf_.size(), f_);
}

uint32_t ProfileBuilder::Str(const std::string& s) {
  if (s.empty()) return 0;
  auto it = strings_.find(s);
  if (it != strings_.end()) return it->second;
  uint32_t id = uint32_t(strings_.size()) + 1;
  strings_[s] = id;
  Record r;
  r.mutable_string()->set_id(id);
  r.mutable_string()->set_value(s);
  WriteFrame(r);  // strings may precede pending batches: they only need to precede their use
  return id;
}

void ProfileBuilder::Write(const Record& r) {
  Flush();
  WriteFrame(r);
}

void ProfileBuilder::WriteHeader(int rank, int world, const std::string& host,
                                 GpuTimingMode timing) {
  Record r;
  Header* h = r.mutable_header();
  h->set_pid(1000 + uint32_t(rank));
  h->set_hostname(host);
  h->set_rank(rank);
  h->set_world_size(world);
  h->set_agent_version("test-1.0");
  h->set_gpu_timing(timing);
  (*h->mutable_config())["PROFAGENT_OUTPUT"] = "prof";
  Write(r);
}

Event ProfileBuilder::Launch(uint32_t name, uint64_t dur) {
  Event e;
  e.set_kind(EV_LAUNCH);
  e.set_name(name);
  e.set_dur(dur);
  e.set_grid_x(128);
  e.set_block_x(256);
  return e;
}

Event ProfileBuilder::StartEndRange(uint32_t name, uint64_t dur) {
  Event e = Nvtx(name, dur, 0);
  e.clear_depth();
  e.set_start_end(true);
  return e;
}

Event ProfileBuilder::GraphLaunch(uint32_t name, uint64_t dur, uint64_t graph) {
  Event e;
  e.set_kind(EV_GRAPH_LAUNCH);
  e.set_name(name);
  e.set_dur(dur);
  e.set_graph(graph);
  return e;
}

Event ProfileBuilder::Nvtx(uint32_t name, uint64_t dur, uint32_t depth) {
  Event e;
  e.set_kind(EV_NVTX_RANGE);
  e.set_name(name);
  e.set_dur(dur);
  e.set_depth(depth);
  return e;
}

Event ProfileBuilder::Step(uint64_t dur, int64_t tokens, int64_t kv, uint32_t phase,
                           bool warmup) {
  Event e;
  e.set_kind(EV_STEP);
  e.set_dur(dur);
  StepInfo* s = e.mutable_step();
  s->set_tokens(tokens);
  s->set_kv(kv);
  s->set_bsz(-1);
  s->set_phase(phase);
  s->set_warmup(warmup);
  return e;
}

void ProfileBuilder::Host(uint32_t thread, uint64_t start_ns, uint64_t corr, Event e) {
  HostBatch& hb = host_[thread];
  if (!hb.started) {
    hb.b.set_thread(thread);
    hb.b.set_base_ns(start_ns);
    hb.b.set_corr_base(KindHasCorr(e.kind()) ? corr - 1 : 0);
    hb.last_t = start_ns;
    hb.last_corr = hb.b.corr_base();
    hb.started = true;
  }
  e.set_dt(int64_t(start_ns) - int64_t(hb.last_t));
  hb.last_t = start_ns;
  if (KindHasCorr(e.kind())) {
    e.set_dcorr(int64_t(corr) - int64_t(hb.last_corr) - 1);
    hb.last_corr = corr;
  }
  *hb.b.add_events() = std::move(e);
  ++events_;
  if (size_t(hb.b.events_size()) >= batch_) FlushHost(thread);
}

void ProfileBuilder::Device(uint32_t device, uint64_t start_ns, uint64_t corr, DeviceOp op) {
  DevBatch& db = dev_[device];
  if (!db.started) {
    db.b.set_device(device);
    db.b.set_base_ns(start_ns);
    db.b.set_corr_base(corr - 1);
    db.last_t = start_ns;
    db.last_corr = corr - 1;
    db.started = true;
  }
  op.set_dt(int64_t(start_ns) - int64_t(db.last_t));
  db.last_t = start_ns;
  op.set_dcorr(int64_t(corr) - int64_t(db.last_corr) - 1);
  db.last_corr = corr;
  *db.b.add_ops() = std::move(op);
  ++events_;
  if (size_t(db.b.ops_size()) >= batch_) FlushDevice(device);
}

void ProfileBuilder::FlushHost(uint32_t thread) {
  HostBatch& hb = host_[thread];
  if (!hb.started) return;
  Record r;
  *r.mutable_batch() = std::move(hb.b);
  WriteFrame(r);
  hb = HostBatch();
}

void ProfileBuilder::FlushDevice(uint32_t device) {
  DevBatch& db = dev_[device];
  if (!db.started) return;
  Record r;
  *r.mutable_device() = std::move(db.b);
  WriteFrame(r);
  db = DevBatch();
}

void ProfileBuilder::Flush() {
  for (auto& h : host_) FlushHost(h.first);
  for (auto& d : dev_) FlushDevice(d.first);
}

void ProfileBuilder::Close(bool footer, const std::string& reason, uint64_t dropped) {
  if (f_ == nullptr) return;
  Flush();
  if (footer) {
    Record r;
    r.mutable_footer()->set_records(events_);
    r.mutable_footer()->set_reason(reason);
    r.mutable_footer()->set_dropped(dropped);
    WriteFrame(r);
  }
  fclose(f_);
  f_ = nullptr;
}

}  // namespace analyzer
}  // namespace profagent
