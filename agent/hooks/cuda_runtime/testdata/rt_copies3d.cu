// 3D copies and sets on pitched memory, as volume and image codes make them: cudaMemcpy3D,
// cudaMemset3D, their Async forms on a stream, and a cudaMemcpy3DPeerAsync on one device.
// Extent 1 KiB x 64 x 16 = 1 MiB. Exit code 0 when every call succeeded.
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "agent/hooks/cuda_runtime/testdata/check.h"

int main() {
  const cudaExtent ext = make_cudaExtent(256 * sizeof(float), 64, 16);
  cudaPitchedPtr vol, vol2;
  CHECK(cudaMalloc3D(&vol, ext));
  CHECK(cudaMalloc3D(&vol2, ext));
  std::vector<float> host(256 * 64 * 16, 1.f);
  cudaMemcpy3DParms p = {};
  p.srcPtr = make_cudaPitchedPtr(host.data(), 256 * sizeof(float), 256, 64);
  p.dstPtr = vol;
  p.extent = ext;
  p.kind = cudaMemcpyHostToDevice;
  CHECK(cudaMemcpy3D(&p));
  CHECK(cudaMemset3D(vol, 0, ext));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaMemcpy3DAsync(&p, s));
  CHECK(cudaMemset3DAsync(vol, 0, ext, s));
  cudaMemcpy3DPeerParms peer = {};
  peer.srcPtr = vol;
  peer.srcDevice = 0;
  peer.dstPtr = vol2;
  peer.dstDevice = 0;
  peer.extent = ext;
  CHECK(cudaMemcpy3DPeerAsync(&peer, s));
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaFree(vol.ptr));
  CHECK(cudaFree(vol2.ptr));
  printf("errors=%d\n", errors);
  return errors == 0 ? 0 : 1;
}
