// CUDA runtime entry points of gpusim's libcudart.so.13 for memory: allocations (device
// memory is host memory, tracked so that cudaFree of an unknown pointer fails and
// cudaMemcpyDefault resolves), copies and sets (1D, 2D, and 3D between pitched pointers; to,
// from and between CUDA arrays; batches). Asynchronous ones move their bytes when the stream
// reaches them; synchronous copies wait for completion, except device to device ones (an array
// is device memory; cudaMemset too, like CUDA's, is asynchronous to the host for device memory).
// The stream-ordered allocator (cudaMallocAsync, pools) is in cudart_pools.cc, the allocation
// of CUDA arrays in cudart_arrays.cc.
#include <cuda_runtime_api.h>
#include <generated_cuda_runtime_api_meta.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "tests/gpusim/sim_device.h"
#include "tests/gpusim/sim_pool.h"

using gpusim::ApiCall;
using gpusim::ApiInfo;
using gpusim::Op;
using gpusim::Stream;

namespace {

constexpr size_t kAllocAlignment = 256;

void* AlignedAlloc(size_t size) {
  size_t rounded = (size + kAllocAlignment - 1) / kAllocAlignment * kAllocAlignment;
  void* p = aligned_alloc(kAllocAlignment, rounded == 0 ? kAllocAlignment : rounded);
  if (p != nullptr) memset(p, 0, rounded == 0 ? kAllocAlignment : rounded);
  return p;
}

// Page-locked or managed host memory, which the device accesses directly.
bool IsPinned(const void* p) {
  gpusim::Allocation a;
  return gpusim::FindAllocation(p, nullptr, &a) && a.kind != gpusim::MemKind::kDevice &&
         a.kind != gpusim::MemKind::kMapped;
}

// The bytes from the first to the last one a copy or set touches on one side.
size_t Span(const Op& op, size_t pitch, size_t ysize) {
  return ((op.depth - 1) * ysize + (op.height - 1)) * pitch + op.width;
}

// Memory reserved with the driver's cuMemAddressReserve is usable where it is mapped and
// accessible (cuMemSetAccess); a copy or set touching the rest fails with
// cudaErrorInvalidValue (the device would fault; here the host would).
cudaError_t CheckMapped(const Op& op) {
  if (!gpusim::VmmAccessible(op.dst, Span(op, op.dpitch, op.dysize), /*write=*/true)) {
    return cudaErrorInvalidValue;
  }
  if (op.action == Op::kCopy &&
      !gpusim::VmmAccessible(op.src, Span(op, op.spitch, op.sysize), /*write=*/false)) {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

bool ValidKind(int kind) { return kind >= cudaMemcpyHostToHost && kind <= cudaMemcpyDefault; }

Op* NewCopyOp(uint32_t corr, void* dst, size_t dpitch, const void* src, size_t spitch,
              size_t width, size_t height, int kind) {
  Op* op = new Op();
  gpusim::InitCopyOp(op, dst, dpitch, src, spitch, width, height, kind);
  op->rec.correlation_id = corr;
  return op;
}

// Takes the source bytes of the copy `op` now (packed into op->staging): the worker copies
// them from there.
void StageSource(Op* op) {
  size_t width = op->width;
  op->staging.resize(width * op->height * op->depth);
  char* out = op->staging.data();
  for (size_t z = 0; z < op->depth; ++z) {
    const char* slice = static_cast<const char*>(op->src) + z * op->spitch * op->sysize;
    for (size_t row = 0; row < op->height; ++row, out += width) {
      memcpy(out, slice + row * op->spitch, width);
    }
  }
}

// Enqueues the copy `op` (owned) on stream `s`; `sync` waits for it (cudaMemcpy semantics).
void EnqueueCopy(Op* op, Stream* s, bool sync) {
  // CUDA's documented behaviour with pageable host memory: an async HtoD copy has taken its
  // source bytes (staged) when the call returns; an async DtoH copy returns once complete.
  if (!sync && op->rec.copy_kind == cudaMemcpyHostToDevice && !IsPinned(op->src)) {
    StageSource(op);
  }
  if (op->rec.copy_kind == cudaMemcpyDeviceToHost && !IsPinned(op->dst)) sync = true;
  // "For transfers from device memory to device memory, no host-side synchronization is
  // performed" (CUDA's API synchronization behavior): cudaMemcpy(DtoD) and the peer copies
  // return once the copy is enqueued.
  if (op->rec.copy_kind == cudaMemcpyDeviceToDevice) sync = false;
  uint64_t seq = gpusim::Enqueue(s, op);
  if (sync && seq != 0) gpusim::WaitForSeq(s, seq);
}

// Enqueues a 1D or 2D copy on the resolved stream; `sync` waits for it.
// The copy of a call with correlation id `corr` (a runtime call's, or a driver call's:
// gpusim::DriverCopy).
cudaError_t CopyOn(uint32_t corr, void* dst, size_t dpitch, const void* src, size_t spitch,
                   size_t width, size_t height, int kind, cudaStream_t stream, bool per_thread,
                   bool sync) {
  if (!ValidKind(kind)) return cudaErrorInvalidMemcpyDirection;
  if (width == 0 || height == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr || dpitch < width || spitch < width) {
    return cudaErrorInvalidValue;
  }
  Stream* s = gpusim::ResolveStream(stream, per_thread);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  Op* op = NewCopyOp(corr, dst, dpitch, src, spitch, width, height, kind);
  cudaError_t err = CheckMapped(*op);
  if (err != cudaSuccess) {
    delete op;
    return err;
  }
  EnqueueCopy(op, s, sync);
  return cudaSuccess;
}

cudaError_t Copy(ApiCall& api, void* dst, size_t dpitch, const void* src, size_t spitch,
                 size_t width, size_t height, int kind, cudaStream_t stream, bool per_thread,
                 bool sync) {
  return CopyOn(api.corr(), dst, dpitch, src, spitch, width, height, kind, stream, per_thread,
                sync);
}

// cudaMemcpy3D(Async), the copies to, from and between CUDA arrays, and, with the devices
// checked by the caller, cudaMemcpy3DPeer(Async).
cudaError_t Copy3D(ApiCall& api, const cudaMemcpy3DParms* p, cudaStream_t stream, bool per_thread,
                   bool sync) {
  if (p == nullptr) return cudaErrorInvalidValue;
  Op* op = new Op();
  cudaError_t err = gpusim::InitCopyOpFromParms(op, *p);
  Stream* s = err == cudaSuccess ? gpusim::ResolveStream(stream, per_thread) : nullptr;
  if (err == cudaSuccess && s == nullptr) err = cudaErrorInvalidResourceHandle;
  if (err == cudaSuccess && op->rec.bytes != 0) err = CheckMapped(*op);
  if (err != cudaSuccess || op->rec.bytes == 0) {
    delete op;
    return err;
  }
  op->rec.correlation_id = api.corr();
  EnqueueCopy(op, s, sync);
  return cudaSuccess;
}

// ---- Copies with CUDA arrays ----------------------------------------------------------------

// The element size of a live array; 0 for anything else.
size_t ElementOf(const void* array) {
  gpusim::CudaArray a;
  return gpusim::FindArray(array, &a) ? a.element_size : 0;
}

// One side of a 1D or 2D array copy: an array with offsets (x in bytes, y in rows), or a
// pointer with its pitch.
struct Side2D {
  cudaArray_const_t array = nullptr;
  size_t x = 0, y = 0;
  void* ptr = nullptr;
  size_t pitch = 0;
};
// An array at offset (x bytes, y rows); linear memory with its pitch (1D copies: none).
Side2D ArraySide(cudaArray_const_t array, size_t x, size_t y) { return Side2D{array, x, y}; }
Side2D PtrSide(const void* ptr, size_t pitch = 0) {
  return Side2D{nullptr, 0, 0, const_cast<void*>(ptr), pitch};
}

// cudaMemcpy2DToArray(Async), cudaMemcpy2DFromArray(Async), cudaMemcpy2DArrayToArray: `height`
// rows of `width` bytes. As the runtime does, the copy becomes a cudaMemcpy3DParms in the
// array's elements (offsets and width must be whole elements); a pitch below the width is
// cudaErrorInvalidPitchValue.
cudaError_t Copy2DArray(ApiCall& api, const Side2D& dst, const Side2D& src, size_t width,
                        size_t height, int kind, cudaStream_t stream, bool pt, bool sync) {
  if (!ValidKind(kind)) return cudaErrorInvalidMemcpyDirection;
  if (width == 0 || height == 0) return cudaSuccess;
  size_t element = 0;
  for (const Side2D* side : {&dst, &src}) {
    if (side->array == nullptr) {
      if (side->ptr == nullptr) return cudaErrorInvalidValue;
      if (side->pitch < width) return cudaErrorInvalidPitchValue;
      continue;
    }
    size_t e = ElementOf(side->array);
    if (e == 0 || (element != 0 && e != element) || side->x % e != 0) {
      return cudaErrorInvalidValue;
    }
    element = e;
  }
  if (width % element != 0) return cudaErrorInvalidValue;
  cudaMemcpy3DParms p = {};
  auto fill = [&](const Side2D& side, cudaArray_t* array, cudaPos* pos, cudaPitchedPtr* ptr) {
    if (side.array != nullptr) {
      *array = const_cast<cudaArray_t>(side.array);
      *pos = cudaPos{side.x / element, side.y, 0};
    } else {
      *ptr = cudaPitchedPtr{side.ptr, side.pitch, width, height};
    }
  };
  fill(dst, &p.dstArray, &p.dstPos, &p.dstPtr);
  fill(src, &p.srcArray, &p.srcPos, &p.srcPtr);
  p.extent = cudaExtent{width / element, height, 1};
  p.kind = static_cast<cudaMemcpyKind>(kind);
  return Copy3D(api, &p, stream, pt, sync);
}

// Whether a pointer side of an array copy is device memory: where `kind` puts it, or for
// cudaMemcpyDefault, where the pointer is.
bool PointerOnDevice(const void* p, int kind, bool is_src) {
  if (kind == cudaMemcpyDefault) {
    gpusim::Allocation a;
    return gpusim::FindAllocation(p, nullptr, &a) && gpusim::OnDevice(a.kind);
  }
  return is_src ? kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice
                : kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
}

// The box (position and extent in elements) that `count` bytes from byte (x, y) of array `a`
// cover: part of one row, whole rows of one slice, or whole slices. False when the span starts
// inside a row and runs past its end.
bool SpanBox(const gpusim::CudaArray& a, size_t x, size_t y, size_t count, cudaPos* pos,
             cudaExtent* e) {
  const size_t row = a.row_bytes(), e_size = a.element_size;
  *pos = cudaPos{x / e_size, y % a.height, y / a.height};
  if (x + count <= row) {
    *e = cudaExtent{count / e_size, 1, 1};
  } else if (x == 0 && count % row == 0 && pos->y + count / row <= a.height) {
    *e = cudaExtent{a.width, count / row, 1};
  } else if (x == 0 && pos->y == 0 && count % (row * a.height) == 0) {
    *e = cudaExtent{a.width, a.height, count / (row * a.height)};
  } else {
    return false;
  }
  return true;
}

// cudaMemcpyToArray(Async), cudaMemcpyFromArray(Async), cudaMemcpyArrayToArray (deprecated):
// `count` bytes from byte x (a whole element) of row y of the array on, running on through the
// following rows of the packed array, as one copy. A captured one reads back as the box it
// covers when it covers one (SpanBox).
cudaError_t Copy1DArray(ApiCall& api, const Side2D& dst, const Side2D& src, size_t count, int kind,
                        cudaStream_t stream, bool pt, bool sync) {
  if (!ValidKind(kind)) return cudaErrorInvalidMemcpyDirection;
  if (count == 0) return cudaSuccess;
  char* addr[2] = {nullptr, nullptr};  // dst, src
  bool device[2] = {true, true};
  gpusim::CudaArray arrays[2] = {};
  size_t element = 0;
  const Side2D* sides[2] = {&dst, &src};
  for (int i = 0; i < 2; ++i) {
    const Side2D& side = *sides[i];
    if (side.array == nullptr) {
      if (side.ptr == nullptr) return cudaErrorInvalidValue;
      addr[i] = static_cast<char*>(side.ptr);
      device[i] = PointerOnDevice(side.ptr, kind, i == 1);
      continue;
    }
    gpusim::CudaArray& a = arrays[i];
    if (!gpusim::FindArray(side.array, &a) || (element != 0 && a.element_size != element)) {
      return cudaErrorInvalidValue;
    }
    element = a.element_size;
    const size_t offset = side.y * a.row_bytes() + side.x;
    if (side.x % element != 0 || side.x >= a.row_bytes() || side.y >= a.height * a.depth ||
        count > a.bytes() - offset) {
      return cudaErrorInvalidValue;
    }
    addr[i] = a.data + offset;
  }
  if (count % element != 0) return cudaErrorInvalidValue;
  const int copy_kind = device[1] ? (device[0] ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                                  : cudaMemcpyHostToDevice;
  Stream* s = gpusim::ResolveStream(stream, pt);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  Op* op = NewCopyOp(api.corr(), addr[0], count, addr[1], count, count, 1, copy_kind);
  op->rec.copy_arrays = (src.array != nullptr ? uint32_t{GPUSIM_COPY_SRC_ARRAY} : 0u) |
                        (dst.array != nullptr ? uint32_t{GPUSIM_COPY_DST_ARRAY} : 0u);
  // The box form for a captured copy's node, when both array sides cover the same box.
  cudaMemcpy3DParms p = {};
  bool box = true;
  bool have_extent = false;
  for (int i = 0; i < 2 && box; ++i) {
    if (sides[i]->array == nullptr) continue;
    cudaPos pos;
    cudaExtent e;
    box = SpanBox(arrays[i], sides[i]->x, sides[i]->y, count, &pos, &e);
    if (box && have_extent &&
        (e.width != p.extent.width || e.height != p.extent.height || e.depth != p.extent.depth)) {
      box = false;
    }
    p.extent = e;
    have_extent = true;
    (i == 0 ? p.dstArray : p.srcArray) = const_cast<cudaArray_t>(sides[i]->array);
    (i == 0 ? p.dstPos : p.srcPos) = pos;
  }
  if (box) {
    const size_t row = p.extent.width * element;
    for (int i = 0; i < 2; ++i) {
      if (sides[i]->array != nullptr) continue;
      (i == 0 ? p.dstPtr : p.srcPtr) = cudaPitchedPtr{sides[i]->ptr, row, row, p.extent.height};
    }
    p.kind = static_cast<cudaMemcpyKind>(kind);
    op->array_copy = p;
  }
  EnqueueCopy(op, s, sync);
  return cudaSuccess;
}

// ---- Batch copies (CUDA 12.8) -----------------------------------------------------------------

bool ValidAccessOrder(cudaMemcpySrcAccessOrder o) {
  return o == cudaMemcpySrcAccessOrderStream || o == cudaMemcpySrcAccessOrderDuringApiCall ||
         o == cudaMemcpySrcAccessOrderAny;
}
constexpr unsigned kBatchCopyFlags = cudaMemcpyFlagPreferOverlapWithCompute;

// The stream of a batch: a live stream other than the legacy default stream ("must not be
// legacy NULL stream").
cudaError_t BatchStream(cudaStream_t stream, bool pt, Stream** out) {
  Stream* s = gpusim::ResolveStream(stream, pt);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  if (s->legacy) return cudaErrorInvalidValue;
  *out = s;
  return cudaSuccess;
}

// Enqueues the copies of a validated batch in order, without waiting (a batch is asynchronous);
// frees them all instead when `err` is set. Each copy is an op of its own: one ground-truth
// line and one CUPTI memcpy record each, all with the batch call's correlation id.
cudaError_t FinishBatch(std::vector<Op*>* ops, Stream* s, cudaError_t err) {
  for (Op* op : *ops) {
    if (err != cudaSuccess) {
      delete op;
    } else {
      gpusim::Enqueue(s, op);
    }
  }
  return err;
}

// cudaMemcpyBatchAsync: count copies between pointers (the direction from where they are), with
// attrs[k] applying to copies attrsIdxs[k] .. attrsIdxs[k + 1] - 1. A source accessed
// "during the API call" is taken when the call returns; the others are read in stream order.
cudaError_t MemcpyBatch(ApiCall& api, void* const* dsts, const void* const* srcs,
                        const size_t* sizes, size_t count, const cudaMemcpyAttributes* attrs,
                        const size_t* idxs, size_t num_attrs, cudaStream_t stream, bool pt) {
  if (count == 0 || dsts == nullptr || srcs == nullptr || sizes == nullptr || attrs == nullptr ||
      idxs == nullptr || num_attrs == 0 || num_attrs > count) {
    return cudaErrorInvalidValue;
  }
  for (size_t k = 0; k < num_attrs; ++k) {
    if ((k == 0 ? idxs[0] != 0 : idxs[k] <= idxs[k - 1]) || idxs[k] >= count ||
        !ValidAccessOrder(attrs[k].srcAccessOrder) || (attrs[k].flags & ~kBatchCopyFlags) != 0) {
      return cudaErrorInvalidValue;
    }
  }
  Stream* s = nullptr;
  cudaError_t err = BatchStream(stream, pt, &s);
  if (err != cudaSuccess) return err;
  std::vector<Op*> ops;
  size_t k = 0;
  for (size_t i = 0; i < count && err == cudaSuccess; ++i) {
    while (k + 1 < num_attrs && idxs[k + 1] <= i) ++k;
    if (sizes[i] == 0) continue;  // nothing to move
    if (dsts[i] == nullptr || srcs[i] == nullptr) {
      err = cudaErrorInvalidValue;
      break;
    }
    Op* op =
        NewCopyOp(api.corr(), dsts[i], sizes[i], srcs[i], sizes[i], sizes[i], 1, cudaMemcpyDefault);
    ops.push_back(op);
    err = CheckMapped(*op);
    if (err == cudaSuccess && attrs[k].srcAccessOrder == cudaMemcpySrcAccessOrderDuringApiCall) {
      StageSource(op);
    }
  }
  return FinishBatch(&ops, s, err);
}

// One operand of a cudaMemcpy3DBatchOp as cudaMemcpy3DParms fields: a pointer (rows of
// rowLength elements, layers of layerHeight rows; 0 = packed to the extent) or an array with
// an offset in elements.
cudaError_t BatchOperand(const cudaMemcpy3DOperand& o, size_t element, const cudaExtent& e,
                         cudaArray_t* array, cudaPos* pos, cudaPitchedPtr* ptr) {
  if (o.type == cudaMemcpyOperandTypePointer) {
    const auto& p = o.op.ptr;
    if (p.ptr == nullptr || (p.rowLength != 0 && p.rowLength < e.width) ||
        (p.layerHeight != 0 && p.layerHeight < e.height)) {
      return cudaErrorInvalidValue;
    }
    const size_t row = p.rowLength != 0 ? p.rowLength : e.width;
    *ptr = cudaPitchedPtr{p.ptr, row * element, e.width * element,
                          p.layerHeight != 0 ? p.layerHeight : e.height};
    return cudaSuccess;
  }
  if (o.type == cudaMemcpyOperandTypeArray) {
    if (o.op.array.array == nullptr) return cudaErrorInvalidValue;
    *array = o.op.array.array;
    *pos = cudaPos{o.op.array.offset.x, o.op.array.offset.y, o.op.array.offset.z};
    return cudaSuccess;
  }
  return cudaErrorInvalidValue;
}

// cudaMemcpy3DBatchAsync: numOps 3D copies between pointers and arrays (extents in elements: the
// array's, or bytes between pointers), the direction from where the operands are.
cudaError_t Memcpy3DBatch(ApiCall& api, size_t num_ops, const cudaMemcpy3DBatchOp* list,
                          unsigned long long flags, cudaStream_t stream, bool pt) {
  if (num_ops == 0 || list == nullptr || flags != 0) return cudaErrorInvalidValue;
  Stream* s = nullptr;
  cudaError_t err = BatchStream(stream, pt, &s);
  if (err != cudaSuccess) return err;
  std::vector<Op*> ops;
  for (size_t i = 0; i < num_ops && err == cudaSuccess; ++i) {
    const cudaMemcpy3DBatchOp& b = list[i];
    if (b.extent.width == 0 || b.extent.height == 0 || b.extent.depth == 0 ||
        !ValidAccessOrder(b.srcAccessOrder) || (b.flags & ~kBatchCopyFlags) != 0) {
      err = cudaErrorInvalidValue;
      break;
    }
    size_t element = 1;  // a byte between pointers; else the array's element
    for (const cudaMemcpy3DOperand* o : {&b.src, &b.dst}) {
      if (o->type == cudaMemcpyOperandTypeArray && o->op.array.array != nullptr) {
        element = ElementOf(o->op.array.array);
      }
    }
    if (element == 0) {
      err = cudaErrorInvalidValue;
      break;
    }
    cudaMemcpy3DParms p = {};
    p.extent = b.extent;
    p.kind = cudaMemcpyDefault;
    err = BatchOperand(b.src, element, b.extent, &p.srcArray, &p.srcPos, &p.srcPtr);
    if (err == cudaSuccess) {
      err = BatchOperand(b.dst, element, b.extent, &p.dstArray, &p.dstPos, &p.dstPtr);
    }
    if (err != cudaSuccess) break;
    Op* op = new Op();
    ops.push_back(op);
    err = gpusim::InitCopyOpFromParms(op, p);
    if (err == cudaSuccess) err = CheckMapped(*op);
    op->rec.correlation_id = api.corr();
    if (err == cudaSuccess && b.srcAccessOrder == cudaMemcpySrcAccessOrderDuringApiCall) {
      StageSource(op);
    }
  }
  return FinishBatch(&ops, s, err);
}

// A synchronous set (cudaMemset, not ...Async) returns before the device is done unless it
// writes pinned host memory (CUDA's API synchronization behavior).
void EnqueueSet(Op* op, Stream* s, const void* dst, bool sync) {
  gpusim::Allocation a;
  const bool host = gpusim::FindAllocation(dst, nullptr, &a) &&
                    (a.kind == gpusim::MemKind::kHost || a.kind == gpusim::MemKind::kRegistered);
  const uint64_t seq = gpusim::Enqueue(s, op);
  if (sync && host && seq != 0) gpusim::WaitForSeq(s, seq);
}

// The set of a call with correlation id `corr`: `width` bytes per row of elements of
// `element_size` bytes (cudaMemset: 1; the driver's cuMemsetD32: 4) of `value`.
cudaError_t SetOn(uint32_t corr, void* dst, size_t pitch, int value, unsigned element_size,
                  size_t width, size_t height, cudaStream_t stream, bool per_thread, bool sync) {
  if (width == 0 || height == 0) return cudaSuccess;
  if (dst == nullptr || pitch < width) return cudaErrorInvalidValue;
  Stream* s = gpusim::ResolveStream(stream, per_thread);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  Op* op = new Op();
  gpusim::InitSetOp(op, dst, pitch, value, element_size, width, height);
  op->rec.correlation_id = corr;
  cudaError_t err = CheckMapped(*op);
  if (err != cudaSuccess) {
    delete op;
    return err;
  }
  EnqueueSet(op, s, dst, sync);
  return cudaSuccess;
}

cudaError_t Set(ApiCall& api, void* dst, size_t pitch, int value, size_t width, size_t height,
                cudaStream_t stream, bool per_thread, bool sync) {
  return SetOn(api.corr(), dst, pitch, value, 1, width, height, stream, per_thread, sync);
}

// cudaMemset3D(Async): extent.depth slices of extent.height rows of extent.width bytes, rows
// `pitch` bytes and slices `ysize` rows apart.
cudaError_t Set3D(ApiCall& api, const cudaPitchedPtr& p, int value, const cudaExtent& e,
                  cudaStream_t stream, bool per_thread, bool sync) {
  if (e.width == 0 || e.height == 0 || e.depth == 0) return cudaSuccess;
  if (p.ptr == nullptr || (e.height * e.depth > 1 && p.pitch < e.width) ||
      (e.depth > 1 && p.ysize < e.height)) {
    return cudaErrorInvalidValue;
  }
  Stream* s = gpusim::ResolveStream(stream, per_thread);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  Op* op = new Op();
  gpusim::InitSetOp3D(op, p.ptr, e.height * e.depth > 1 ? p.pitch : e.width,
                      e.depth > 1 ? p.ysize : e.height, value, e.width, e.height, e.depth);
  op->rec.correlation_id = api.corr();
  cudaError_t err = CheckMapped(*op);
  if (err != cudaSuccess) {
    delete op;
    return err;
  }
  EnqueueSet(op, s, p.ptr, sync);
  return cudaSuccess;
}

// Rows of cudaMallocPitch / cudaMalloc3D are 512-byte aligned (texturePitchAlignment is 32;
// the runtime pads further).
constexpr size_t kPitchAlignment = 512;

cudaError_t AllocPitched(size_t width, size_t rows, void** ptr, size_t* pitch) {
  size_t p = (width + kPitchAlignment - 1) / kPitchAlignment * kPitchAlignment;
  void* mem = AlignedAlloc(p * rows);
  if (mem == nullptr) return cudaErrorMemoryAllocation;
  gpusim::TrackAllocation(mem, p * rows, gpusim::MemKind::kDevice, gpusim::CurrentDevice());
  *ptr = mem;
  *pitch = p;
  return cudaSuccess;
}


// ---- Implementations shared by the plain and _ptsz / _ptds entry points ---------------------

cudaError_t MemcpyImpl(const ApiInfo& info, void* dst, const void* src, size_t count,
                       cudaMemcpyKind kind, bool pt) {
  cudaMemcpy_v3020_params params{dst, src, count, kind};
  ApiCall api(info, &params);
  return api.Return(Copy(api, dst, count, src, count, count, 1, kind, nullptr, pt, true));
}

cudaError_t MemcpyAsyncImpl(const ApiInfo& info, void* dst, const void* src, size_t count,
                            cudaMemcpyKind kind, cudaStream_t stream, bool pt) {
  cudaMemcpyAsync_v3020_params params{dst, src, count, kind, stream};
  ApiCall api(info, &params);
  return api.Return(Copy(api, dst, count, src, count, count, 1, kind, stream, pt, false));
}

cudaError_t Memcpy2DImpl(const ApiInfo& info, void* dst, size_t dpitch, const void* src,
                         size_t spitch, size_t width, size_t height, cudaMemcpyKind kind,
                         cudaStream_t stream, bool pt, bool sync) {
  // cudaMemcpy2D's params are a prefix of cudaMemcpy2DAsync's.
  cudaMemcpy2DAsync_v3020_params params{dst, dpitch, src, spitch, width, height, kind, stream};
  ApiCall api(info, &params);
  return api.Return(Copy(api, dst, dpitch, src, spitch, width, height, kind, stream, pt, sync));
}

// The device copy of a __device__ variable is its host shadow (device memory is host memory).
// The synchronous calls' params are a prefix of the asynchronous ones'.
cudaError_t ToSymbolImpl(const ApiInfo& info, const void* symbol, const void* src, size_t count,
                         size_t offset, cudaMemcpyKind kind, cudaStream_t stream, bool pt,
                         bool sync) {
  cudaMemcpyToSymbolAsync_v3020_params params{symbol, src, count, offset, kind, stream};
  ApiCall api(info, &params);
  if (kind == cudaMemcpyDefault) kind = cudaMemcpyHostToDevice;
  void* dst = static_cast<char*>(const_cast<void*>(symbol)) + offset;
  return api.Return(Copy(api, dst, count, src, count, count, 1, kind, stream, pt, sync));
}
cudaError_t FromSymbolImpl(const ApiInfo& info, void* dst, const void* symbol, size_t count,
                           size_t offset, cudaMemcpyKind kind, cudaStream_t stream, bool pt,
                           bool sync) {
  cudaMemcpyFromSymbolAsync_v3020_params params{dst, symbol, count, offset, kind, stream};
  ApiCall api(info, &params);
  if (kind == cudaMemcpyDefault) kind = cudaMemcpyDeviceToHost;
  const void* src = static_cast<const char*>(symbol) + offset;
  return api.Return(Copy(api, dst, count, src, count, count, 1, kind, stream, pt, sync));
}

cudaError_t Memcpy3DImpl(const ApiInfo& info, const cudaMemcpy3DParms* p, cudaStream_t stream,
                         bool pt, bool sync) {
  cudaMemcpy3DAsync_v3020_params params{p, stream};  // cudaMemcpy3D's is a prefix
  ApiCall api(info, &params);
  return api.Return(Copy3D(api, p, stream, pt, sync));
}

// A peer copy is a device-to-device copy between pitched pointers (or arrays) of two devices.
cudaError_t Memcpy3DPeerImpl(const ApiInfo& info, const cudaMemcpy3DPeerParms* p,
                             cudaStream_t stream, bool pt, bool sync) {
  cudaMemcpy3DPeerAsync_v4000_params params{p, stream};
  ApiCall api(info, &params);
  if (p == nullptr) return api.Return(cudaErrorInvalidValue);
  int n = gpusim::DeviceCount();
  if (p->srcDevice < 0 || p->srcDevice >= n || p->dstDevice < 0 || p->dstDevice >= n) {
    return api.Return(cudaErrorInvalidDevice);
  }
  cudaMemcpy3DParms q = {};
  q.srcArray = p->srcArray;
  q.srcPos = p->srcPos;
  q.srcPtr = p->srcPtr;
  q.dstArray = p->dstArray;
  q.dstPos = p->dstPos;
  q.dstPtr = p->dstPtr;
  q.extent = p->extent;
  q.kind = cudaMemcpyDeviceToDevice;
  return api.Return(Copy3D(api, &q, stream, pt, sync));
}

// The copies with CUDA arrays. The synchronous calls' params are a prefix of the asynchronous
// ones'.
cudaError_t ToArrayImpl(const ApiInfo& info, cudaArray_t dst, size_t w, size_t h, const void* src,
                        size_t spitch, size_t width, size_t height, cudaMemcpyKind kind,
                        cudaStream_t stream, bool pt, bool sync) {
  cudaMemcpy2DToArrayAsync_v3020_params params{dst, w, h, src, spitch, width, height, kind, stream};
  ApiCall api(info, &params);
  return api.Return(Copy2DArray(api, ArraySide(dst, w, h), PtrSide(src, spitch), width, height, kind, stream, pt, sync));
}

cudaError_t FromArrayImpl(const ApiInfo& info, void* dst, size_t dpitch, cudaArray_const_t src,
                          size_t w, size_t h, size_t width, size_t height, cudaMemcpyKind kind,
                          cudaStream_t stream, bool pt, bool sync) {
  cudaMemcpy2DFromArrayAsync_v3020_params params{dst,   dpitch, src,  w,     h,
                                                 width, height, kind, stream};
  ApiCall api(info, &params);
  return api.Return(Copy2DArray(api, PtrSide(dst, dpitch), ArraySide(src, w, h), width, height, kind, stream, pt, sync));
}

cudaError_t ArrayToArrayImpl(const ApiInfo& info, cudaArray_t dst, size_t w_dst, size_t h_dst,
                             cudaArray_const_t src, size_t w_src, size_t h_src, size_t width,
                             size_t height, cudaMemcpyKind kind, bool pt) {
  cudaMemcpy2DArrayToArray_v3020_params params{dst,   w_dst, h_dst,  src, w_src,
                                               h_src, width, height, kind};
  ApiCall api(info, &params);
  return api.Return(Copy2DArray(api, ArraySide(dst, w_dst, h_dst), ArraySide(src, w_src, h_src), width, height, kind, nullptr, pt, true));
}

cudaError_t ToArray1DImpl(const ApiInfo& info, cudaArray_t dst, size_t w, size_t h, const void* src,
                          size_t count, cudaMemcpyKind kind, cudaStream_t stream, bool pt,
                          bool sync) {
  cudaMemcpyToArrayAsync_v3020_params params{dst, w, h, src, count, kind, stream};
  ApiCall api(info, &params);
  return api.Return(Copy1DArray(api, ArraySide(dst, w, h), PtrSide(src), count, kind, stream, pt, sync));
}

cudaError_t FromArray1DImpl(const ApiInfo& info, void* dst, cudaArray_const_t src, size_t w,
                            size_t h, size_t count, cudaMemcpyKind kind, cudaStream_t stream,
                            bool pt, bool sync) {
  cudaMemcpyFromArrayAsync_v3020_params params{dst, src, w, h, count, kind, stream};
  ApiCall api(info, &params);
  return api.Return(Copy1DArray(api, PtrSide(dst), ArraySide(src, w, h), count, kind, stream, pt, sync));
}

cudaError_t ArrayToArray1DImpl(const ApiInfo& info, cudaArray_t dst, size_t w_dst, size_t h_dst,
                               cudaArray_const_t src, size_t w_src, size_t h_src, size_t count,
                               cudaMemcpyKind kind, bool pt) {
  cudaMemcpyArrayToArray_v3020_params params{dst, w_dst, h_dst, src, w_src, h_src, count, kind};
  ApiCall api(info, &params);
  return api.Return(Copy1DArray(api, ArraySide(dst, w_dst, h_dst), ArraySide(src, w_src, h_src), count, kind, nullptr, pt, true));
}

cudaError_t BatchImpl(const ApiInfo& info, void* const* dsts, const void* const* srcs,
                      const size_t* sizes, size_t count, cudaMemcpyAttributes* attrs, size_t* idxs,
                      size_t num_attrs, cudaStream_t stream, bool pt) {
  cudaMemcpyBatchAsync_v13000_params params{dsts,  srcs, sizes,     count,
                                            attrs, idxs, num_attrs, stream};
  ApiCall api(info, &params);
  return api.Return(MemcpyBatch(api, dsts, srcs, sizes, count, attrs, idxs, num_attrs, stream, pt));
}

cudaError_t Batch3DImpl(const ApiInfo& info, size_t num_ops, cudaMemcpy3DBatchOp* list,
                        unsigned long long flags, cudaStream_t stream, bool pt) {
  cudaMemcpy3DBatchAsync_v13000_params params{num_ops, list, flags, stream};
  ApiCall api(info, &params);
  return api.Return(Memcpy3DBatch(api, num_ops, list, flags, stream, pt));
}

cudaError_t Memset3DImpl(const ApiInfo& info, cudaPitchedPtr p, int value, cudaExtent extent,
                         cudaStream_t stream, bool pt, bool sync) {
  cudaMemset3DAsync_v3020_params params{p, value, extent, stream};
  ApiCall api(info, &params);
  return api.Return(Set3D(api, p, value, extent, stream, pt, sync));
}

cudaError_t MemsetImpl(const ApiInfo& info, void* dst, size_t pitch, int value, size_t width,
                       size_t height, cudaStream_t stream, bool pt, bool two_d, bool sync) {
  // The synchronous calls' params are a prefix of the asynchronous ones'.
  cudaMemsetAsync_v3020_params params{dst, value, width, stream};
  cudaMemset2DAsync_v3020_params params2d{dst, pitch, value, width, height, stream};
  ApiCall api(info, two_d ? static_cast<const void*>(&params2d) : &params);
  return api.Return(Set(api, dst, pitch, value, width, height, stream, pt, sync));
}

}  // namespace

namespace gpusim {

cudaError_t DriverCopy(uint32_t corr, void* dst, const void* src, size_t count, int kind,
                       cudaStream_t stream, bool per_thread, bool sync) {
  cudaError_t err = CopyOn(corr, dst, count, src, count, count, 1, kind, stream, per_thread, sync);
  // The driver's synchronous copies return when done.
  if (err == cudaSuccess && sync && count != 0) {
    SynchronizeStream(ResolveStream(stream, per_thread));
  }
  return err;
}

cudaError_t DriverSet(uint32_t corr, void* dst, unsigned value, unsigned element_size, size_t count,
                      cudaStream_t stream, bool per_thread, bool sync) {
  const size_t bytes = count * element_size;
  return SetOn(corr, dst, bytes, int(value), element_size, bytes, 1, stream, per_thread, sync);
}

cudaError_t DeviceMalloc(size_t size, void** out) {
  int device = CurrentDevice();
  if (size > kDeviceMemoryBytes - DeviceBytesInUse(device)) {
    *out = nullptr;
    return cudaErrorMemoryAllocation;
  }
  void* p = AlignedAlloc(size);
  if (p == nullptr) return cudaErrorMemoryAllocation;
  TrackAllocation(p, size, MemKind::kDevice, device);
  *out = p;
  return cudaSuccess;
}

cudaError_t DeviceFree(void* p) {
  if (p == nullptr) return cudaSuccess;
  // cudaFree synchronizes the device before releasing memory, as on hardware. An allocation
  // from a pool goes back to it.
  SynchronizeDevice(CurrentDevice());
  if (PoolFreeNow(p)) {
    ReleaseAfterSynchronize();
    return cudaSuccess;
  }
  if (!UntrackAllocation(p, /*device_kinds=*/true)) return cudaErrorInvalidValue;
  free(p);
  return cudaSuccess;
}

}  // namespace gpusim

extern "C" {

// ---- Memory ---------------------------------------------------------------------------------

cudaError_t cudaMalloc(void** dev_ptr, size_t size) {
  static const ApiInfo kInfo("cudaMalloc");
  cudaMalloc_v3020_params params{dev_ptr, size};
  ApiCall api(kInfo, &params);
  if (dev_ptr == nullptr) return api.Return(cudaErrorInvalidValue);
  return api.Return(gpusim::DeviceMalloc(size, dev_ptr));
}

cudaError_t cudaMallocManaged(void** dev_ptr, size_t size, unsigned int flags) {
  static const ApiInfo kInfo("cudaMallocManaged");
  cudaMallocManaged_v6000_params params{dev_ptr, size, flags};
  ApiCall api(kInfo, &params);
  if (dev_ptr == nullptr || size == 0) return api.Return(cudaErrorInvalidValue);
  void* p = AlignedAlloc(size);
  if (p == nullptr) return api.Return(cudaErrorMemoryAllocation);
  gpusim::TrackAllocation(p, size, gpusim::MemKind::kManaged, gpusim::CurrentDevice());
  *dev_ptr = p;
  return api.Return(cudaSuccess);
}

cudaError_t cudaMallocPitch(void** dev_ptr, size_t* pitch, size_t width, size_t height) {
  static const ApiInfo kInfo("cudaMallocPitch");
  ApiCall api(kInfo);
  if (dev_ptr == nullptr || pitch == nullptr) return api.Return(cudaErrorInvalidValue);
  return api.Return(AllocPitched(width, height, dev_ptr, pitch));
}

cudaError_t cudaMalloc3D(struct cudaPitchedPtr* pitched, struct cudaExtent extent) {
  static const ApiInfo kInfo("cudaMalloc3D");
  cudaMalloc3D_v3020_params params{pitched, extent};
  ApiCall api(kInfo, &params);
  if (pitched == nullptr) return api.Return(cudaErrorInvalidValue);
  void* mem = nullptr;
  size_t pitch = 0;
  cudaError_t err = AllocPitched(extent.width, extent.height * extent.depth, &mem, &pitch);
  if (err == cudaSuccess) *pitched = cudaPitchedPtr{mem, pitch, extent.width, extent.height};
  return api.Return(err);
}

cudaError_t cudaFree(void* dev_ptr) {
  static const ApiInfo kInfo("cudaFree");
  cudaFree_v3020_params params{dev_ptr};
  ApiCall api(kInfo, &params);
  return api.Return(gpusim::DeviceFree(dev_ptr));
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
  static const ApiInfo kInfo("cudaMallocHost");
  cudaMallocHost_v3020_params params{ptr, size};
  ApiCall api(kInfo, &params);
  if (ptr == nullptr) return api.Return(cudaErrorInvalidValue);
  void* p = AlignedAlloc(size);
  if (p == nullptr) return api.Return(cudaErrorMemoryAllocation);
  gpusim::TrackAllocation(p, size, gpusim::MemKind::kHost, gpusim::CurrentDevice());
  *ptr = p;
  return api.Return(cudaSuccess);
}

cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int flags) {
  static const ApiInfo kInfo("cudaHostAlloc");
  cudaHostAlloc_v3020_params params{ptr, size, flags};
  ApiCall api(kInfo, &params);
  if (ptr == nullptr) return api.Return(cudaErrorInvalidValue);
  void* p = AlignedAlloc(size);
  if (p == nullptr) return api.Return(cudaErrorMemoryAllocation);
  gpusim::TrackAllocation(p, size, gpusim::MemKind::kHost, gpusim::CurrentDevice(), false,
                          flags);
  *ptr = p;
  return api.Return(cudaSuccess);
}

cudaError_t cudaFreeHost(void* ptr) {
  static const ApiInfo kInfo("cudaFreeHost");
  cudaFreeHost_v3020_params params{ptr};
  ApiCall api(kInfo, &params);
  if (ptr == nullptr) return api.Return(cudaSuccess);
  gpusim::SynchronizeDevice(gpusim::CurrentDevice());
  if (gpusim::IsPoolAllocation(ptr) || !gpusim::UntrackAllocation(ptr, /*device_kinds=*/false)) {
    return api.Return(cudaErrorInvalidValue);
  }
  free(ptr);
  return api.Return(cudaSuccess);
}

cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  static const ApiInfo kInfo("cudaHostRegister");
  ApiCall api(kInfo);
  if (ptr == nullptr || size == 0) return api.Return(cudaErrorInvalidValue);
  if (gpusim::FindAllocation(ptr, nullptr, nullptr)) {
    return api.Return(cudaErrorHostMemoryAlreadyRegistered);
  }
  gpusim::TrackAllocation(ptr, size, gpusim::MemKind::kRegistered, gpusim::CurrentDevice(), false,
                          flags);
  return api.Return(cudaSuccess);
}

cudaError_t cudaHostUnregister(void* ptr) {
  static const ApiInfo kInfo("cudaHostUnregister");
  ApiCall api(kInfo);
  gpusim::Allocation a;
  void* base = nullptr;
  if (!gpusim::FindAllocation(ptr, &base, &a) || base != ptr ||
      a.kind != gpusim::MemKind::kRegistered) {
    return api.Return(cudaErrorHostMemoryNotRegistered);
  }
  gpusim::UntrackAllocation(ptr, false);
  return api.Return(cudaSuccess);
}

// The flags the pinned allocation containing `host_ptr` was made or registered with.
cudaError_t cudaHostGetFlags(unsigned int* flags, void* host_ptr) {
  static const ApiInfo kInfo("cudaHostGetFlags");
  ApiCall api(kInfo);
  gpusim::Allocation a;
  if (flags == nullptr || !gpusim::FindAllocation(host_ptr, nullptr, &a) ||
      (a.kind != gpusim::MemKind::kHost && a.kind != gpusim::MemKind::kRegistered)) {
    return api.Return(cudaErrorInvalidValue);
  }
  *flags = a.host_flags;
  return api.Return(cudaSuccess);
}

cudaError_t cudaHostGetDevicePointer(void** dev_ptr, void* host_ptr, unsigned int) {
  static const ApiInfo kInfo("cudaHostGetDevicePointer");
  ApiCall api(kInfo);
  if (dev_ptr == nullptr || host_ptr == nullptr) return api.Return(cudaErrorInvalidValue);
  *dev_ptr = host_ptr;
  return api.Return(cudaSuccess);
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes* attr, const void* ptr) {
  static const ApiInfo kInfo("cudaPointerGetAttributes");
  ApiCall api(kInfo);
  if (attr == nullptr) return api.Return(cudaErrorInvalidValue);
  memset(attr, 0, sizeof(*attr));
  gpusim::Allocation a;
  if (!gpusim::FindAllocation(ptr, nullptr, &a)) {
    attr->type = cudaMemoryTypeUnregistered;
    attr->device = -2;
    attr->hostPointer = const_cast<void*>(ptr);
    return api.Return(cudaSuccess);
  }
  switch (a.kind) {
    case gpusim::MemKind::kDevice:
    case gpusim::MemKind::kMapped:
      attr->type = cudaMemoryTypeDevice;
      break;
    case gpusim::MemKind::kManaged: attr->type = cudaMemoryTypeManaged; break;
    default: attr->type = cudaMemoryTypeHost; break;
  }
  attr->device = a.device;
  attr->devicePointer = const_cast<void*>(ptr);
  if (attr->type != cudaMemoryTypeDevice) attr->hostPointer = const_cast<void*>(ptr);
  return api.Return(cudaSuccess);
}

// ---- Copies and sets ------------------------------------------------------------------------

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpy");
  return MemcpyImpl(kInfo, dst, src, count, kind, false);
}
cudaError_t cudaMemcpy_ptds(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpy_ptds");
  return MemcpyImpl(kInfo, dst, src, count, kind, true);
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpyAsync");
  return MemcpyAsyncImpl(kInfo, dst, src, count, kind, stream, false);
}
cudaError_t cudaMemcpyAsync_ptsz(void* dst, const void* src, size_t count,
                                 enum cudaMemcpyKind kind, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpyAsync_ptsz");
  return MemcpyAsyncImpl(kInfo, dst, src, count, kind, stream, true);
}
cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                         size_t height, enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpy2D");
  return Memcpy2DImpl(kInfo, dst, dpitch, src, spitch, width, height, kind, nullptr, false,
                      true);
}
cudaError_t cudaMemcpy2D_ptds(void* dst, size_t dpitch, const void* src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpy2D_ptds");
  return Memcpy2DImpl(kInfo, dst, dpitch, src, spitch, width, height, kind, nullptr, true,
                      true);
}
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind,
                              cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpy2DAsync");
  return Memcpy2DImpl(kInfo, dst, dpitch, src, spitch, width, height, kind, stream, false,
                      false);
}
cudaError_t cudaMemcpy2DAsync_ptsz(void* dst, size_t dpitch, const void* src, size_t spitch,
                                   size_t width, size_t height, enum cudaMemcpyKind kind,
                                   cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpy2DAsync_ptsz");
  return Memcpy2DImpl(kInfo, dst, dpitch, src, spitch, width, height, kind, stream, true,
                      false);
}
cudaError_t cudaMemcpyPeer(void* dst, int dst_device, const void* src, int src_device,
                           size_t count) {
  static const ApiInfo kInfo("cudaMemcpyPeer");
  cudaMemcpyPeer_v4000_params params{dst, dst_device, src, src_device, count};
  ApiCall api(kInfo, &params);
  return api.Return(Copy(api, dst, count, src, count, count, 1, cudaMemcpyDeviceToDevice,
                         nullptr, false, true));
}
cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device,
                                size_t count, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpyPeerAsync");
  cudaMemcpyPeerAsync_v4000_params params{dst, dst_device, src, src_device, count, stream};
  ApiCall api(kInfo, &params);
  return api.Return(Copy(api, dst, count, src, count, count, 1, cudaMemcpyDeviceToDevice,
                         stream, false, false));
}

cudaError_t cudaMemcpy3D(const struct cudaMemcpy3DParms* p) {
  static const ApiInfo kInfo("cudaMemcpy3D");
  return Memcpy3DImpl(kInfo, p, nullptr, false, true);
}
cudaError_t cudaMemcpy3D_ptds(const struct cudaMemcpy3DParms* p) {
  static const ApiInfo kInfo("cudaMemcpy3D_ptds");
  return Memcpy3DImpl(kInfo, p, nullptr, true, true);
}
cudaError_t cudaMemcpy3DAsync(const struct cudaMemcpy3DParms* p, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpy3DAsync");
  return Memcpy3DImpl(kInfo, p, stream, false, false);
}
cudaError_t cudaMemcpy3DAsync_ptsz(const struct cudaMemcpy3DParms* p, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpy3DAsync_ptsz");
  return Memcpy3DImpl(kInfo, p, stream, true, false);
}
cudaError_t cudaMemcpy3DPeer(const struct cudaMemcpy3DPeerParms* p) {
  static const ApiInfo kInfo("cudaMemcpy3DPeer");
  return Memcpy3DPeerImpl(kInfo, p, nullptr, false, true);
}
cudaError_t cudaMemcpy3DPeer_ptds(const struct cudaMemcpy3DPeerParms* p) {
  static const ApiInfo kInfo("cudaMemcpy3DPeer_ptds");
  return Memcpy3DPeerImpl(kInfo, p, nullptr, true, true);
}
cudaError_t cudaMemcpy3DPeerAsync(const struct cudaMemcpy3DPeerParms* p, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpy3DPeerAsync");
  return Memcpy3DPeerImpl(kInfo, p, stream, false, false);
}
cudaError_t cudaMemcpy3DPeerAsync_ptsz(const struct cudaMemcpy3DPeerParms* p,
                                       cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpy3DPeerAsync_ptsz");
  return Memcpy3DPeerImpl(kInfo, p, stream, true, false);
}

// ---- Copies with CUDA arrays (the arrays themselves: cudart_arrays.cc) -----------------------

cudaError_t cudaMemcpy2DToArray(cudaArray_t dst, size_t w_offset, size_t h_offset, const void* src,
                                size_t spitch, size_t width, size_t height,
                                enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpy2DToArray");
  return ToArrayImpl(kInfo, dst, w_offset, h_offset, src, spitch, width, height, kind, nullptr,
                     false, true);
}
cudaError_t cudaMemcpy2DToArray_ptds(cudaArray_t dst, size_t w_offset, size_t h_offset,
                                     const void* src, size_t spitch, size_t width, size_t height,
                                     enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpy2DToArray_ptds");
  return ToArrayImpl(kInfo, dst, w_offset, h_offset, src, spitch, width, height, kind, nullptr,
                     true, true);
}
cudaError_t cudaMemcpy2DToArrayAsync(cudaArray_t dst, size_t w_offset, size_t h_offset,
                                     const void* src, size_t spitch, size_t width, size_t height,
                                     enum cudaMemcpyKind kind, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpy2DToArrayAsync");
  return ToArrayImpl(kInfo, dst, w_offset, h_offset, src, spitch, width, height, kind, stream,
                     false, false);
}
cudaError_t cudaMemcpy2DToArrayAsync_ptsz(cudaArray_t dst, size_t w_offset, size_t h_offset,
                                          const void* src, size_t spitch, size_t width,
                                          size_t height, enum cudaMemcpyKind kind,
                                          cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpy2DToArrayAsync_ptsz");
  return ToArrayImpl(kInfo, dst, w_offset, h_offset, src, spitch, width, height, kind, stream, true,
                     false);
}
cudaError_t cudaMemcpy2DFromArray(void* dst, size_t dpitch, cudaArray_const_t src, size_t w_offset,
                                  size_t h_offset, size_t width, size_t height,
                                  enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpy2DFromArray");
  return FromArrayImpl(kInfo, dst, dpitch, src, w_offset, h_offset, width, height, kind, nullptr,
                       false, true);
}
cudaError_t cudaMemcpy2DFromArray_ptds(void* dst, size_t dpitch, cudaArray_const_t src,
                                       size_t w_offset, size_t h_offset, size_t width,
                                       size_t height, enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpy2DFromArray_ptds");
  return FromArrayImpl(kInfo, dst, dpitch, src, w_offset, h_offset, width, height, kind, nullptr,
                       true, true);
}
cudaError_t cudaMemcpy2DFromArrayAsync(void* dst, size_t dpitch, cudaArray_const_t src,
                                       size_t w_offset, size_t h_offset, size_t width,
                                       size_t height, enum cudaMemcpyKind kind,
                                       cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpy2DFromArrayAsync");
  return FromArrayImpl(kInfo, dst, dpitch, src, w_offset, h_offset, width, height, kind, stream,
                       false, false);
}
cudaError_t cudaMemcpy2DFromArrayAsync_ptsz(void* dst, size_t dpitch, cudaArray_const_t src,
                                            size_t w_offset, size_t h_offset, size_t width,
                                            size_t height, enum cudaMemcpyKind kind,
                                            cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpy2DFromArrayAsync_ptsz");
  return FromArrayImpl(kInfo, dst, dpitch, src, w_offset, h_offset, width, height, kind, stream,
                       true, false);
}
cudaError_t cudaMemcpy2DArrayToArray(cudaArray_t dst, size_t w_offset_dst, size_t h_offset_dst,
                                     cudaArray_const_t src, size_t w_offset_src,
                                     size_t h_offset_src, size_t width, size_t height,
                                     enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpy2DArrayToArray");
  return ArrayToArrayImpl(kInfo, dst, w_offset_dst, h_offset_dst, src, w_offset_src, h_offset_src,
                          width, height, kind, false);
}
cudaError_t cudaMemcpy2DArrayToArray_ptds(cudaArray_t dst, size_t w_offset_dst, size_t h_offset_dst,
                                          cudaArray_const_t src, size_t w_offset_src,
                                          size_t h_offset_src, size_t width, size_t height,
                                          enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpy2DArrayToArray_ptds");
  return ArrayToArrayImpl(kInfo, dst, w_offset_dst, h_offset_dst, src, w_offset_src, h_offset_src,
                          width, height, kind, true);
}

// The deprecated 1D forms (still exported by CUDA 13).
cudaError_t cudaMemcpyToArray(cudaArray_t dst, size_t w_offset, size_t h_offset, const void* src,
                              size_t count, enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpyToArray");
  return ToArray1DImpl(kInfo, dst, w_offset, h_offset, src, count, kind, nullptr, false, true);
}
cudaError_t cudaMemcpyToArray_ptds(cudaArray_t dst, size_t w_offset, size_t h_offset,
                                   const void* src, size_t count, enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpyToArray_ptds");
  return ToArray1DImpl(kInfo, dst, w_offset, h_offset, src, count, kind, nullptr, true, true);
}
cudaError_t cudaMemcpyToArrayAsync(cudaArray_t dst, size_t w_offset, size_t h_offset,
                                   const void* src, size_t count, enum cudaMemcpyKind kind,
                                   cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpyToArrayAsync");
  return ToArray1DImpl(kInfo, dst, w_offset, h_offset, src, count, kind, stream, false, false);
}
cudaError_t cudaMemcpyToArrayAsync_ptsz(cudaArray_t dst, size_t w_offset, size_t h_offset,
                                        const void* src, size_t count, enum cudaMemcpyKind kind,
                                        cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpyToArrayAsync_ptsz");
  return ToArray1DImpl(kInfo, dst, w_offset, h_offset, src, count, kind, stream, true, false);
}
cudaError_t cudaMemcpyFromArray(void* dst, cudaArray_const_t src, size_t w_offset, size_t h_offset,
                                size_t count, enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpyFromArray");
  return FromArray1DImpl(kInfo, dst, src, w_offset, h_offset, count, kind, nullptr, false, true);
}
cudaError_t cudaMemcpyFromArray_ptds(void* dst, cudaArray_const_t src, size_t w_offset,
                                     size_t h_offset, size_t count, enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpyFromArray_ptds");
  return FromArray1DImpl(kInfo, dst, src, w_offset, h_offset, count, kind, nullptr, true, true);
}
cudaError_t cudaMemcpyFromArrayAsync(void* dst, cudaArray_const_t src, size_t w_offset,
                                     size_t h_offset, size_t count, enum cudaMemcpyKind kind,
                                     cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpyFromArrayAsync");
  return FromArray1DImpl(kInfo, dst, src, w_offset, h_offset, count, kind, stream, false, false);
}
cudaError_t cudaMemcpyFromArrayAsync_ptsz(void* dst, cudaArray_const_t src, size_t w_offset,
                                          size_t h_offset, size_t count, enum cudaMemcpyKind kind,
                                          cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpyFromArrayAsync_ptsz");
  return FromArray1DImpl(kInfo, dst, src, w_offset, h_offset, count, kind, stream, true, false);
}
cudaError_t cudaMemcpyArrayToArray(cudaArray_t dst, size_t w_offset_dst, size_t h_offset_dst,
                                   cudaArray_const_t src, size_t w_offset_src, size_t h_offset_src,
                                   size_t count, enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpyArrayToArray");
  return ArrayToArray1DImpl(kInfo, dst, w_offset_dst, h_offset_dst, src, w_offset_src, h_offset_src,
                            count, kind, false);
}
cudaError_t cudaMemcpyArrayToArray_ptds(cudaArray_t dst, size_t w_offset_dst, size_t h_offset_dst,
                                        cudaArray_const_t src, size_t w_offset_src,
                                        size_t h_offset_src, size_t count,
                                        enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpyArrayToArray_ptds");
  return ArrayToArray1DImpl(kInfo, dst, w_offset_dst, h_offset_dst, src, w_offset_src, h_offset_src,
                            count, kind, true);
}

// ---- Batch copies ---------------------------------------------------------------------------

cudaError_t cudaMemcpyBatchAsync(void* const* dsts, const void* const* srcs, const size_t* sizes,
                                 size_t count, struct cudaMemcpyAttributes* attrs,
                                 size_t* attrs_idxs, size_t num_attrs, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpyBatchAsync");  // the CUDA 13 cbid (v13000)
  return BatchImpl(kInfo, dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, stream, false);
}
cudaError_t cudaMemcpyBatchAsync_ptsz(void* const* dsts, const void* const* srcs,
                                      const size_t* sizes, size_t count,
                                      struct cudaMemcpyAttributes* attrs, size_t* attrs_idxs,
                                      size_t num_attrs, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpyBatchAsync_ptsz");
  return BatchImpl(kInfo, dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, stream, true);
}
cudaError_t cudaMemcpy3DBatchAsync(size_t num_ops, struct cudaMemcpy3DBatchOp* op_list,
                                   unsigned long long flags, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpy3DBatchAsync");
  return Batch3DImpl(kInfo, num_ops, op_list, flags, stream, false);
}
cudaError_t cudaMemcpy3DBatchAsync_ptsz(size_t num_ops, struct cudaMemcpy3DBatchOp* op_list,
                                        unsigned long long flags, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpy3DBatchAsync_ptsz");
  return Batch3DImpl(kInfo, num_ops, op_list, flags, stream, true);
}

cudaError_t cudaMemcpyToSymbol(const void* symbol, const void* src, size_t count, size_t offset,
                               enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpyToSymbol");
  return ToSymbolImpl(kInfo, symbol, src, count, offset, kind, nullptr, false, true);
}
cudaError_t cudaMemcpyToSymbol_ptds(const void* symbol, const void* src, size_t count,
                                    size_t offset, enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpyToSymbol_ptds");
  return ToSymbolImpl(kInfo, symbol, src, count, offset, kind, nullptr, true, true);
}
cudaError_t cudaMemcpyFromSymbol(void* dst, const void* symbol, size_t count, size_t offset,
                                 enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpyFromSymbol");
  return FromSymbolImpl(kInfo, dst, symbol, count, offset, kind, nullptr, false, true);
}
cudaError_t cudaMemcpyFromSymbol_ptds(void* dst, const void* symbol, size_t count,
                                      size_t offset, enum cudaMemcpyKind kind) {
  static const ApiInfo kInfo("cudaMemcpyFromSymbol_ptds");
  return FromSymbolImpl(kInfo, dst, symbol, count, offset, kind, nullptr, true, true);
}
cudaError_t cudaMemcpyToSymbolAsync(const void* symbol, const void* src, size_t count,
                                    size_t offset, enum cudaMemcpyKind kind,
                                    cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpyToSymbolAsync");
  return ToSymbolImpl(kInfo, symbol, src, count, offset, kind, stream, false, false);
}
cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void* symbol, const void* src, size_t count,
                                         size_t offset, enum cudaMemcpyKind kind,
                                         cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpyToSymbolAsync_ptsz");
  return ToSymbolImpl(kInfo, symbol, src, count, offset, kind, stream, true, false);
}
cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const void* symbol, size_t count, size_t offset,
                                      enum cudaMemcpyKind kind, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpyFromSymbolAsync");
  return FromSymbolImpl(kInfo, dst, symbol, count, offset, kind, stream, false, false);
}
cudaError_t cudaMemcpyFromSymbolAsync_ptsz(void* dst, const void* symbol, size_t count,
                                           size_t offset, enum cudaMemcpyKind kind,
                                           cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemcpyFromSymbolAsync_ptsz");
  return FromSymbolImpl(kInfo, dst, symbol, count, offset, kind, stream, true, false);
}

cudaError_t cudaGetSymbolAddress(void** dev_ptr, const void* symbol) {
  static const ApiInfo kInfo("cudaGetSymbolAddress");
  ApiCall api(kInfo);
  if (dev_ptr == nullptr || symbol == nullptr) return api.Return(cudaErrorInvalidSymbol);
  *dev_ptr = const_cast<void*>(symbol);
  return api.Return(cudaSuccess);
}

cudaError_t cudaGetSymbolSize(size_t* size, const void* symbol) {
  static const ApiInfo kInfo("cudaGetSymbolSize");
  ApiCall api(kInfo);
  if (size == nullptr || !gpusim::SymbolSize(symbol, size)) {
    return api.Return(cudaErrorInvalidSymbol);
  }
  return api.Return(cudaSuccess);
}

cudaError_t cudaMemset(void* dev_ptr, int value, size_t count) {
  static const ApiInfo kInfo("cudaMemset");
  return MemsetImpl(kInfo, dev_ptr, count, value, count, 1, nullptr, false, false, true);
}
cudaError_t cudaMemset_ptds(void* dev_ptr, int value, size_t count) {
  static const ApiInfo kInfo("cudaMemset_ptds");
  return MemsetImpl(kInfo, dev_ptr, count, value, count, 1, nullptr, true, false, true);
}
cudaError_t cudaMemsetAsync(void* dev_ptr, int value, size_t count, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemsetAsync");
  return MemsetImpl(kInfo, dev_ptr, count, value, count, 1, stream, false, false, false);
}
cudaError_t cudaMemsetAsync_ptsz(void* dev_ptr, int value, size_t count, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemsetAsync_ptsz");
  return MemsetImpl(kInfo, dev_ptr, count, value, count, 1, stream, true, false, false);
}
cudaError_t cudaMemset2D(void* dev_ptr, size_t pitch, int value, size_t width, size_t height) {
  static const ApiInfo kInfo("cudaMemset2D");
  return MemsetImpl(kInfo, dev_ptr, pitch, value, width, height, nullptr, false, true, true);
}
cudaError_t cudaMemset2D_ptds(void* dev_ptr, size_t pitch, int value, size_t width,
                              size_t height) {
  static const ApiInfo kInfo("cudaMemset2D_ptds");
  return MemsetImpl(kInfo, dev_ptr, pitch, value, width, height, nullptr, true, true, true);
}
cudaError_t cudaMemset2DAsync(void* dev_ptr, size_t pitch, int value, size_t width,
                              size_t height, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemset2DAsync");
  return MemsetImpl(kInfo, dev_ptr, pitch, value, width, height, stream, false, true, false);
}
cudaError_t cudaMemset2DAsync_ptsz(void* dev_ptr, size_t pitch, int value, size_t width,
                                   size_t height, cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemset2DAsync_ptsz");
  return MemsetImpl(kInfo, dev_ptr, pitch, value, width, height, stream, true, true, false);
}
cudaError_t cudaMemset3D(struct cudaPitchedPtr p, int value, struct cudaExtent extent) {
  static const ApiInfo kInfo("cudaMemset3D");
  return Memset3DImpl(kInfo, p, value, extent, nullptr, false, true);
}
cudaError_t cudaMemset3D_ptds(struct cudaPitchedPtr p, int value, struct cudaExtent extent) {
  static const ApiInfo kInfo("cudaMemset3D_ptds");
  return Memset3DImpl(kInfo, p, value, extent, nullptr, true, true);
}
cudaError_t cudaMemset3DAsync(struct cudaPitchedPtr p, int value, struct cudaExtent extent,
                              cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemset3DAsync");
  return Memset3DImpl(kInfo, p, value, extent, stream, false, false);
}
cudaError_t cudaMemset3DAsync_ptsz(struct cudaPitchedPtr p, int value, struct cudaExtent extent,
                                   cudaStream_t stream) {
  static const ApiInfo kInfo("cudaMemset3DAsync_ptsz");
  return Memset3DImpl(kInfo, p, value, extent, stream, true, false);
}

}  // extern "C"
