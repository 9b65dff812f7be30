// CUDA arrays and batch copies, as texture code (cuda-samples' simpleTexture, simpleTexture3D)
// and CUDA 12.8's batched transfers use them. Two 64 x 32 float arrays and a 16 x 8 x 4 uchar4
// array; an image copied in (cudaMemcpy2DToArray), from array to array
// (cudaMemcpy2DArrayToArray) and out (cudaMemcpy2DFromArrayAsync); a volume copied in and out
// with cudaMemcpy3D; a batch of three independent copies (cudaMemcpyBatchAsync: 4096 + 2048
// bytes host to device, 4096 device to host); two sets on the legacy default stream, as 0 and as
// cudaStreamLegacy. Checks the data that came back; prints
// "data ok" and errors=N (exit 1 when a call failed or the data is wrong).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "agent/hooks/cuda_runtime/testdata/check.h"

int main() {
  const size_t w = 64, h = 32;
  std::vector<float> image(w * h), back(w * h, -1.f);
  for (size_t i = 0; i < image.size(); ++i) image[i] = float(i);
  cudaChannelFormatDesc fdesc = cudaCreateChannelDesc<float>();
  cudaArray_t a = nullptr, b = nullptr, vol = nullptr;
  CHECK(cudaMallocArray(&a, &fdesc, w, h));
  CHECK(cudaMallocArray(&b, &fdesc, w, h));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaMemcpy2DToArray(a, 0, 0, image.data(), w * sizeof(float), w * sizeof(float), h,
                            cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy2DArrayToArray(b, 0, 0, a, 0, 0, w * sizeof(float), h, cudaMemcpyDeviceToDevice));
  CHECK(cudaMemcpy2DFromArrayAsync(back.data(), w * sizeof(float), b, 0, 0, w * sizeof(float), h,
                                   cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamSynchronize(s));
  bool ok = back == image;

  // A volume: the extent counts uchar4 elements when an array takes part.
  cudaChannelFormatDesc u4 = cudaCreateChannelDesc<uchar4>();
  const cudaExtent extent = make_cudaExtent(16, 8, 4);
  CHECK(cudaMalloc3DArray(&vol, &u4, extent));
  std::vector<uchar4> in(16 * 8 * 4), out(16 * 8 * 4);
  for (size_t i = 0; i < in.size(); ++i) {
    in[i] = make_uchar4(uint8_t(i), uint8_t(i >> 8), uint8_t(i * 3), 7);
  }
  cudaMemcpy3DParms up = {};
  up.srcPtr = make_cudaPitchedPtr(in.data(), 16 * sizeof(uchar4), 16, 8);
  up.dstArray = vol;
  up.extent = extent;
  up.kind = cudaMemcpyHostToDevice;
  CHECK(cudaMemcpy3D(&up));
  cudaMemcpy3DParms down = {};
  down.srcArray = vol;
  down.dstPtr = make_cudaPitchedPtr(out.data(), 16 * sizeof(uchar4), 16, 8);
  down.extent = extent;
  down.kind = cudaMemcpyDeviceToHost;
  CHECK(cudaMemcpy3D(&down));
  ok = ok && memcmp(in.data(), out.data(), in.size() * sizeof(uchar4)) == 0;

  // A batch of independent copies (their order within the batch is unspecified).
  char *d0 = nullptr, *d1 = nullptr, *d2 = nullptr, *pinned = nullptr;
  CHECK(cudaMalloc(&d0, 4096));
  CHECK(cudaMalloc(&d1, 4096));
  CHECK(cudaMalloc(&d2, 4096));
  CHECK(cudaMallocHost(&pinned, 4096));
  CHECK(cudaMemsetAsync(d2, 0x5a, 4096, s));
  std::vector<char> src0(4096, 1), src1(2048, 2), check(4096);
  void* dsts[3] = {d0, d1, pinned};
  const void* srcs[3] = {src0.data(), src1.data(), d2};
  size_t sizes[3] = {4096, 2048, 4096};
  cudaMemcpyAttributes attr = {};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t attr_idx = 0;
  CHECK(cudaMemcpyBatchAsync(dsts, srcs, sizes, 3, &attr, &attr_idx, 1, s));
  CHECK(cudaStreamSynchronize(s));
  for (int i = 0; i < 4096; ++i) ok = ok && pinned[i] == 0x5a;
  CHECK(cudaMemcpy(check.data(), d0, 4096, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 4096; ++i) ok = ok && check[i] == 1;
  CHECK(cudaMemcpy(check.data(), d1, 2048, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 2048; ++i) ok = ok && check[i] == 2;

  // The legacy default stream, by both of its names.
  CHECK(cudaMemsetAsync(d0, 0, 256, 0));
  CHECK(cudaMemsetAsync(d1, 0, 256, cudaStreamLegacy));
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaFreeArray(a));
  CHECK(cudaFreeArray(b));
  CHECK(cudaFreeArray(vol));
  CHECK(cudaFree(d0));
  CHECK(cudaFree(d1));
  CHECK(cudaFree(d2));
  CHECK(cudaFreeHost(pinned));
  CHECK(cudaStreamDestroy(s));
  printf("%s\nerrors=%d\n", ok ? "data ok" : "data WRONG", errors);
  return errors == 0 && ok ? 0 : 1;
}
