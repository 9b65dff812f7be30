// Sizes of CUDA memory objects as both recording paths (the runtime interposers and CUPTI's
// runtime callbacks) report them.
#ifndef PROFAGENT_AGENT_HOOKS_CUPTI_MEM_SIZES_H_
#define PROFAGENT_AGENT_HOOKS_CUPTI_MEM_SIZES_H_

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

namespace profagent {

// The bytes of one element of a channel format: (x + y + z + w bits) / 8; 0 for a null or
// special (negative) format.
inline uint32_t FormatBytes(const cudaChannelFormatDesc* desc) {
  if (desc == nullptr || desc->x < 0 || desc->y < 0 || desc->z < 0 || desc->w < 0) return 0;
  return uint32_t(desc->x + desc->y + desc->z + desc->w) / 8;
}

// A CUDA array's memory: width x height x depth elements (a 0 height or depth counts 1) of the
// channel format's size; a mipmapped array adds its `levels`, each half the one before in every
// dimension (at least 1) but the layers of a layered or cubemap array (`flags`), whose count
// stays. The runtime may round the real footprint up (alignment, tiling).
inline uint64_t ArrayBytes(const cudaChannelFormatDesc* desc, cudaExtent e, unsigned levels,
                           unsigned flags) {
  const bool layers = (flags & (cudaArrayLayered | cudaArrayCubemap)) != 0;
  const uint64_t element = FormatBytes(desc);
  uint64_t total = 0;
  uint64_t w = e.width, h = e.height, d = e.depth;
  for (unsigned l = 0; l < std::max(levels, 1u) && l < 64; ++l) {
    total +=
        element * std::max<uint64_t>(w, 1) * std::max<uint64_t>(h, 1) * std::max<uint64_t>(d, 1);
    if (w <= 1 && h <= 1 && (layers || d <= 1)) break;
    w = std::max<uint64_t>(w / 2, 1);
    h = h == 0 ? 0 : std::max<uint64_t>(h / 2, 1);
    if (!layers) d = d == 0 ? 0 : std::max<uint64_t>(d / 2, 1);
  }
  return total;
}

// A batch copy's bytes: the sum of its `count` sizes (at most 2^20 read: a corrupt count).
inline uint64_t BatchBytes(const size_t* sizes, size_t count) {
  uint64_t total = 0;
  for (size_t i = 0; sizes != nullptr && i < count && i < (1u << 20); ++i) total += sizes[i];
  return total;
}

// A 3D batch copy's bytes: each copy's extent, in bytes between pointers, in elements when an
// array takes part, then times `element_of(array)` (the array's element size; 0 when unknown,
// counted as 1).
template <typename ElementOf>
inline uint64_t Batch3DBytes(const cudaMemcpy3DBatchOp* ops, size_t count, ElementOf element_of) {
  uint64_t total = 0;
  for (size_t i = 0; ops != nullptr && i < count && i < (1u << 20); ++i) {
    const cudaMemcpy3DBatchOp& op = ops[i];
    cudaArray_const_t array = op.src.type == cudaMemcpyOperandTypeArray   ? op.src.op.array.array
                              : op.dst.type == cudaMemcpyOperandTypeArray ? op.dst.op.array.array
                                                                          : nullptr;
    const uint64_t element = array != nullptr ? element_of(array) : 1;
    total += uint64_t(op.extent.width) * op.extent.height * op.extent.depth *
             (element != 0 ? element : 1);
  }
  return total;
}

}  // namespace profagent

#endif  // PROFAGENT_AGENT_HOOKS_CUPTI_MEM_SIZES_H_
