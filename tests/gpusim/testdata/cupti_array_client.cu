// A CUPTI tool + workload with CUDA arrays and batch copies (texture code, CUDA 12.8's batched
// transfers), run against gpusim's libcupti.so.13 by cupti_sim_test. It subscribes to the
// runtime-API callbacks, enables MEMCPY and RUNTIME activity records, copies to, from and
// between arrays in every direction and with every entry point family, runs a batch of copies
// and a 3D batch, flushes, and prints:
//   CB <enter|exit> <cbid> <corr> <function> <ret|-1>
//   P <corr> <cbid> <field=value>...   (the params struct at enter, for the calls checked)
//   CALL <label> <corr>                (after each workload call: the call's correlation id)
//   MEMCPY <corr> <start> <end> <stream> <bytes> <copyKind> <srcKind> <dstKind> <copyCount>
//   RUNTIME <cbid> <corr>
//   RESULT <what> <code>
//   DATA <ok|WRONG>
#include <cuda_runtime.h>
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // cudaMemcpyToArray & co.

namespace {

cudaArray_t g_a = nullptr, g_b = nullptr, g_vol = nullptr;
uint32_t g_last_corr = 0;  // of the last runtime call that returned (on the main thread)

const char* Name(const void* array) {
  if (array == g_a) return "a";
  if (array == g_b) return "b";
  if (array == g_vol) return "vol";
  return "?";
}

void PrintParams(CUpti_CallbackId cbid, uint32_t corr, const void* p) {
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArray_v3020: {
      auto* a = static_cast<const cudaMemcpy2DToArray_v3020_params*>(p);
      printf("P %u %u dst=%s wOffset=%zu hOffset=%zu spitch=%zu width=%zu height=%zu kind=%d\n",
             corr, cbid, Name(a->dst), a->wOffset, a->hOffset, a->spitch, a->width, a->height,
             int(a->kind));
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DArrayToArray_v3020: {
      auto* a = static_cast<const cudaMemcpy2DArrayToArray_v3020_params*>(p);
      printf("P %u %u dst=%s src=%s width=%zu height=%zu kind=%d\n", corr, cbid, Name(a->dst),
             Name(a->src), a->width, a->height, int(a->kind));
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArrayAsync_v3020: {
      auto* a = static_cast<const cudaMemcpy2DFromArrayAsync_v3020_params*>(p);
      printf("P %u %u src=%s dpitch=%zu width=%zu height=%zu kind=%d\n", corr, cbid, Name(a->src),
             a->dpitch, a->width, a->height, int(a->kind));
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArray_v3020: {
      auto* a = static_cast<const cudaMemcpyToArray_v3020_params*>(p);
      printf("P %u %u dst=%s count=%zu kind=%d\n", corr, cbid, Name(a->dst), a->count,
             int(a->kind));
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_v3020: {
      auto* a = static_cast<const cudaMemcpy3D_v3020_params*>(p);
      printf("P %u %u dstArray=%s extent=%zux%zux%zu\n", corr, cbid, Name(a->p->dstArray),
             a->p->extent.width, a->p->extent.height, a->p->extent.depth);
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocArray_v3020: {
      auto* a = static_cast<const cudaMallocArray_v3020_params*>(p);
      printf("P %u %u bits=%d width=%zu height=%zu\n", corr, cbid,
             a->desc->x + a->desc->y + a->desc->z + a->desc->w, a->width, a->height);
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_v13000: {
      auto* a = static_cast<const cudaMemcpyBatchAsync_v13000_params*>(p);
      size_t total = 0;
      for (size_t i = 0; i < a->count; ++i) total += a->sizes[i];
      printf("P %u %u count=%zu bytes=%zu numAttrs=%zu\n", corr, cbid, a->count, total,
             a->numAttrs);
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_v13000: {
      auto* a = static_cast<const cudaMemcpy3DBatchAsync_v13000_params*>(p);
      printf("P %u %u numOps=%zu dst0=%s\n", corr, cbid, a->numOps,
             Name(a->opList[0].dst.op.array.array));
      break;
    }
    default:
      break;
  }
}

void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                         const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  const bool enter = cb->callbackSite == CUPTI_API_ENTER;
  int ret = -1;
  if (!enter && cb->functionReturnValue != nullptr) {
    ret = int(*static_cast<const cudaError_t*>(cb->functionReturnValue));
  }
  printf("CB %s %u %u %s %d\n", enter ? "enter" : "exit", cbid, cb->correlationId, cb->functionName,
         ret);
  if (enter) PrintParams(cbid, cb->correlationId, cb->functionParams);
  if (!enter) g_last_corr = cb->correlationId;
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 64 * 1024;
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(rec);
      printf("MEMCPY %u %llu %llu %u %llu %d %d %d %llu\n", m->correlationId,
             (unsigned long long)m->start, (unsigned long long)m->end, m->streamId,
             (unsigned long long)m->bytes, int(m->copyKind), int(m->srcKind), int(m->dstKind),
             (unsigned long long)m->copyCount);
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
      auto* a = reinterpret_cast<CUpti_ActivityAPI*>(rec);
      printf("RUNTIME %u %u\n", a->cbid, a->correlationId);
    }
  }
  free(buffer);
}

void Call(const char* label) { printf("CALL %s %u\n", label, g_last_corr); }

}  // namespace

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  CUpti_SubscriberHandle sub = nullptr;
  printf("RESULT subscribe %d\n",
         int(cuptiSubscribe(&sub, reinterpret_cast<CUpti_CallbackFunc>(&OnCallback), nullptr)));
  printf("RESULT enable_runtime %d\n", int(cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API)));
  printf("RESULT register %d\n",
         int(cuptiActivityRegisterCallbacks(&BufferRequested, &BufferCompleted)));
  printf("RESULT activity_memcpy %d\n", int(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY)));
  printf("RESULT activity_runtime %d\n", int(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME)));

  const size_t w = 64, h = 32, row = w * sizeof(float);
  std::vector<float> image(w * h), back(w * h, -1.f);
  for (size_t i = 0; i < image.size(); ++i) image[i] = float(i);
  bool ok = true;
  cudaChannelFormatDesc fdesc = cudaCreateChannelDesc<float>();
  cudaChannelFormatDesc u4 = cudaCreateChannelDesc<uchar4>();
  cudaMallocArray(&g_a, &fdesc, w, h);
  Call("malloc_array");
  cudaMallocArray(&g_b, &fdesc, w, h);
  cudaMalloc3DArray(&g_vol, &u4, make_cudaExtent(16, 8, 4));
  Call("malloc_3d_array");
  cudaStream_t s;
  cudaStreamCreate(&s);
  float* dev = nullptr;
  cudaMalloc(&dev, row * 4);

  // Every direction of the 2D functions.
  cudaMemcpy2DToArray(g_a, 0, 0, image.data(), row, row, h, cudaMemcpyHostToDevice);
  Call("2d_htoa");
  cudaMemcpy2DArrayToArray(g_b, 0, 0, g_a, 0, 0, row, h, cudaMemcpyDeviceToDevice);
  Call("2d_atoa");
  cudaMemcpy2DFromArrayAsync(back.data(), row, g_b, 0, 0, row, h, cudaMemcpyDeviceToHost, s);
  Call("2d_atoh");
  cudaStreamSynchronize(s);
  ok &= back == image;
  cudaMemcpy2DFromArray(dev, row, g_a, 0, 4, row, 4, cudaMemcpyDeviceToDevice);
  Call("2d_atod");
  cudaMemcpy2DToArrayAsync(g_b, 0, 0, dev, row, row, 4, cudaMemcpyDeviceToDevice, s);
  Call("2d_dtoa");
  cudaMemcpy2DFromArray(back.data(), row, g_b, 0, 0, row, 4, cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < 4 * w; ++i) ok &= back[i] == image[4 * w + i];  // rows 4..7 of a
  // The deprecated 1D functions.
  cudaMemcpyToArray(g_a, 0, 0, image.data(), row * h, cudaMemcpyHostToDevice);
  Call("1d_htoa");
  cudaMemcpyArrayToArray(g_b, 0, 0, g_a, 0, 0, row * h, cudaMemcpyDeviceToDevice);
  Call("1d_atoa");
  cudaMemcpyFromArrayAsync(back.data(), g_b, 0, 0, row * h, cudaMemcpyDeviceToHost, s);
  Call("1d_atoh");
  cudaStreamSynchronize(s);
  ok &= back == image;
  // 3D with the volume.
  std::vector<uchar4> vin(16 * 8 * 4), vout(16 * 8 * 4);
  for (size_t i = 0; i < vin.size(); ++i) vin[i] = make_uchar4(uint8_t(i), 2, 3, uint8_t(i >> 2));
  cudaMemcpy3DParms up = {};
  up.srcPtr = make_cudaPitchedPtr(vin.data(), 16 * sizeof(uchar4), 16, 8);
  up.dstArray = g_vol;
  up.extent = make_cudaExtent(16, 8, 4);
  up.kind = cudaMemcpyHostToDevice;
  cudaMemcpy3D(&up);
  Call("3d_htoa");
  cudaMemcpy3DParms down = {};
  down.srcArray = g_vol;
  down.dstPtr = make_cudaPitchedPtr(vout.data(), 16 * sizeof(uchar4), 16, 8);
  down.extent = make_cudaExtent(16, 8, 4);
  down.kind = cudaMemcpyDeviceToHost;
  cudaMemcpy3DAsync(&down, s);
  Call("3d_atoh");
  cudaStreamSynchronize(s);
  ok &= memcmp(vin.data(), vout.data(), vin.size() * sizeof(uchar4)) == 0;

  // A batch of three independent copies, and a 3D batch of two.
  char *d0 = nullptr, *d1 = nullptr, *d2 = nullptr, *pinned = nullptr;
  cudaMalloc(&d0, 4096);
  cudaMalloc(&d1, 4096);
  cudaMalloc(&d2, 4096);
  cudaMallocHost(&pinned, 4096);
  cudaMemset(d2, 0x5a, 4096);
  std::vector<char> src0(4096, 1), src1(2048, 2), check(4096);
  void* dsts[3] = {d0, d1, pinned};
  const void* srcs[3] = {src0.data(), src1.data(), d2};
  size_t sizes[3] = {4096, 2048, 4096};
  cudaMemcpyAttributes attr = {};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t attr_idx = 0;
  printf("RESULT batch %d\n",
         int(cudaMemcpyBatchAsync(dsts, srcs, sizes, 3, &attr, &attr_idx, 1, s)));
  Call("batch");
  cudaStreamSynchronize(s);
  for (int i = 0; i < 4096; ++i) ok &= pinned[i] == 0x5a;
  cudaMemcpy(check.data(), d1, 2048, cudaMemcpyDeviceToHost);
  for (int i = 0; i < 2048; ++i) ok &= check[i] == 2;
  cudaMemcpy3DBatchOp ops[2] = {};
  ops[0].src.type = cudaMemcpyOperandTypePointer;
  ops[0].src.op.ptr.ptr = vin.data();
  ops[0].dst.type = cudaMemcpyOperandTypeArray;
  ops[0].dst.op.array.array = g_vol;
  ops[0].extent = make_cudaExtent(16, 8, 4);
  ops[0].srcAccessOrder = cudaMemcpySrcAccessOrderDuringApiCall;
  ops[1].src.type = cudaMemcpyOperandTypeArray;
  ops[1].src.op.array.array = g_a;
  ops[1].src.op.array.offset = {0, 1, 0};
  ops[1].dst.type = cudaMemcpyOperandTypePointer;
  ops[1].dst.op.ptr.ptr = dev;
  ops[1].extent = make_cudaExtent(w, 2, 1);
  ops[1].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  printf("RESULT batch3d %d\n", int(cudaMemcpy3DBatchAsync(2, ops, 0, s)));
  Call("batch3d");
  cudaStreamSynchronize(s);
  cudaMemcpy(back.data(), dev, row * 2, cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < 2 * w; ++i) ok &= back[i] == image[w + i];

  cudaFreeArray(g_a);
  cudaFreeArray(g_b);
  cudaFreeArray(g_vol);
  Call("free_array");
  cudaFree(dev);
  cudaFree(d0);
  cudaFree(d1);
  cudaFree(d2);
  cudaFreeHost(pinned);
  cudaStreamDestroy(s);
  cudaDeviceSynchronize();
  printf("RESULT flush %d\n", int(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)));
  printf("DATA %s\n", ok ? "ok" : "WRONG");
  cuptiUnsubscribe(sub);
  return 0;
}
