#include "agent/hooks/cupti/activity.h"

#include <cstring>

namespace profagent {
namespace cupti {

void ClockMap::AddSample(uint64_t device_ns, uint64_t mono_ns) {
  if (samples_ == 0) {
    dev0_ = device_ns;
    mono0_ = mono_ns;
  } else if (device_ns > dev0_ + 1000000) {  // refine only over >= 1 ms of span
    slope_ = double(int64_t(mono_ns - mono0_)) / double(device_ns - dev0_);
  }
  ++samples_;
}

uint64_t ClockMap::ToMono(uint64_t device_ns) const {
  if (identity_ || samples_ == 0) return device_ns;
  double d = double(int64_t(device_ns - dev0_)) * slope_;
  return uint64_t(int64_t(mono0_) + int64_t(d));
}

namespace {
enum : uint8_t { kDopKernel = 0, kDopMemcpy = 1, kDopMemset = 2 };

void Common(uint64_t start, uint64_t end, const ClockMap& clock, RawEvent* out) {
  std::memset(out, 0, sizeof(*out));
  out->type = EvType::kDeviceOp;
  out->flags = kFlagTimeNs;
  out->t0 = clock.ToMono(start);
  out->t1 = end >= start ? out->t0 + (end - start) : out->t0;
  if (!clock.identity()) out->t1 = clock.ToMono(end) > out->t0 ? clock.ToMono(end) : out->t0;
}
}  // namespace

// A CUPTI copy kind as the cudaMemcpyKind the record file keeps (what the interposed calls and
// CUDA-event timing record): arrays count as device memory, peer copies as device to device.
static uint32_t CopyKindOf(uint32_t cupti_kind) {
  switch (cupti_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return cudaMemcpyHostToDevice;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return cudaMemcpyDeviceToHost;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return cudaMemcpyHostToHost;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return cudaMemcpyDeviceToDevice;
    default: return cudaMemcpyDefault;  // unknown
  }
}

namespace {
// A copy or set record (CUPTI's memcpy, peer-to-peer memcpy and memset structs share these
// field names) as a device op of `kind`; `copy_kind` is the copy's (0 for a set).
template <typename Rec>
void FillCopyOrSet(const Rec* m, uint8_t kind, uint8_t copy_kind, const ClockMap& clock,
                   RawEvent* out) {
  Common(m->start, m->end, clock, out);
  DevicePayload& d = out->dev;
  d.kind = kind;
  d.corr = m->correlationId;
  d.bytes = m->bytes;
  d.copy_kind = copy_kind;
  d.graph = m->graphId;
  d.stream = m->streamId;
  d.device = uint8_t(m->deviceId);
}

bool Convert(const CUpti_Activity* rec, const ClockMap& clock, InternFn intern, RawEvent* out) {
  switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      Common(k->start, k->end, clock, out);
      DevicePayload& d = out->dev;
      d.kind = kDopKernel;
      d.name = (k->name && intern) ? intern(k->name) : 0;
      d.corr = k->correlationId;
      d.graph = k->graphId;
      d.stream = k->streamId;
      d.device = uint8_t(k->deviceId);
      d.grid_x = uint32_t(k->gridX);
      d.grid_y = uint16_t(k->gridY);
      d.grid_z = uint16_t(k->gridZ);
      d.block = PackBlock(uint32_t(k->blockX), uint32_t(k->blockY), uint32_t(k->blockZ));
      d.shmem = uint32_t(k->staticSharedMemory) + uint32_t(k->dynamicSharedMemory);
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
      FillCopyOrSet(m, kDopMemcpy, CopyKindOf(m->copyKind), clock, out);
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {  // peer to peer
      auto* m = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(rec);
      FillCopyOrSet(m, kDopMemcpy, CopyKindOf(m->copyKind), clock, out);
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET:
      FillCopyOrSet(reinterpret_cast<const CUpti_ActivityMemset4*>(rec), kDopMemset, 0, clock, out);
      return true;
    default:
      return false;
  }
}
}  // namespace

uint64_t GraphNodeOf(const CUpti_Activity* rec) {
  switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return reinterpret_cast<const CUpti_ActivityKernel10*>(rec)->graphNodeId;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec)->graphNodeId;
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
      return reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(rec)->graphNodeId;
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return reinterpret_cast<const CUpti_ActivityMemset4*>(rec)->graphNodeId;
    default:
      return 0;
  }
}

bool ActivityToEvent(const CUpti_Activity* rec, const ClockMap& clock, InternFn intern,
                     RawEvent* out, bool* untimed) {
  if (untimed != nullptr) *untimed = false;
  if (!Convert(rec, clock, intern, out)) return false;
  // CUPTI_TIMESTAMP_UNKNOWN (0): no timing (a forced flush while it ran, or no device memory
  // to time it). Mapped, it would land decades before the profile.
  uint64_t start = 0, end = 0;
  switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      start = k->start, end = k->end;
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
      start = m->start, end = m->end;
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
      auto* m = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(rec);
      start = m->start, end = m->end;
      break;
    }
    default: {  // MEMSET: Convert knows no other kind
      auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
      start = m->start, end = m->end;
      break;
    }
  }
  if (start == 0 || end == 0) {
    if (untimed != nullptr) *untimed = true;
    return false;
  }
  return true;
}

}  // namespace cupti
}  // namespace profagent
