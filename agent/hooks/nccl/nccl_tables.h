// Static facts about NCCL's enums that the NCCL hooks need on the hot path: datatype sizes and
// the name tables registered once with RegisterCollTables (CollPayload.dtype / .redop index
// them). Values follow /usr/local/cuda/include/nccl.h (NCCL 2.28): ncclDataType_t 0..11,
// ncclRedOp_t 0..4 built in, >= ncclNumOps (5) user-created (ncclRedOpCreatePreMulSum).
//
// Everything here is constexpr or static data: safe anywhere, including inside hooks.
#ifndef PROFAGENT_AGENT_HOOKS_NCCL_NCCL_TABLES_H_
#define PROFAGENT_AGENT_HOOKS_NCCL_NCCL_TABLES_H_

#include <cstdint>

namespace profagent {
namespace nccl {

constexpr int kNumDtypes = 12;
// Names indexed by ncclDataType_t; the last entry ("unknown") is used for out-of-range values.
extern const char* const kDtypeNames[kNumDtypes + 1];
// Names indexed by ncclRedOp_t for the built-in ops; index 5 ("premulsum") stands for every
// user-created op.
constexpr int kNumRedops = 6;
extern const char* const kRedopNames[kNumRedops];
constexpr uint8_t kNoRedop = 0xff;

// Size in bytes of one element of `dtype` (0 when the value is not a known ncclDataType_t).
inline uint32_t DtypeSize(int dtype) {
  static constexpr uint8_t kSizes[kNumDtypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return (dtype >= 0 && dtype < kNumDtypes) ? kSizes[dtype] : 0;
}

inline uint8_t DtypeIndex(int dtype) {
  return (dtype >= 0 && dtype < kNumDtypes) ? static_cast<uint8_t>(dtype) : kNumDtypes;
}

inline uint8_t RedopIndex(int op) {
  if (op >= 0 && op < kNumRedops - 1) return static_cast<uint8_t>(op);
  return kNumRedops - 1;
}

}  // namespace nccl
}  // namespace profagent

#endif  // PROFAGENT_AGENT_HOOKS_NCCL_NCCL_TABLES_H_
