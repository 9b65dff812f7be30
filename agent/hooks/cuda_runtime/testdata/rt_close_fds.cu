// A program that closes every descriptor above stderr mid-run (as daemons and some launchers
// do), then writes a file of its own, which may get a number the profile had: 8 kernels before,
// 8 after. Prints "content ok 1" when its file holds exactly what it wrote; exit code 0 then.
#include <cuda_runtime.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

__global__ void fd_kernel(int* p) {}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  int* d = nullptr;
  if (cudaMalloc(&d, 64) != cudaSuccess) return 1;
  for (int i = 0; i < 8; ++i) fd_kernel<<<1, 32>>>(d);
  cudaDeviceSynchronize();
  usleep(100 * 1000);  // the agent's writer has opened and written its file
  for (int fd = 3; fd < 1024; ++fd) close(fd);
  const char kData[] = "application data\n";
  int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, kData, sizeof(kData) - 1) != ssize_t(sizeof(kData) - 1)) return 3;
  for (int i = 0; i < 8; ++i) fd_kernel<<<1, 32>>>(d);
  cudaDeviceSynchronize();
  usleep(100 * 1000);  // the writer flushes again while the application's file is open
  close(fd);
  char buf[256] = {};
  int in = open(argv[1], O_RDONLY);
  const ssize_t n = in >= 0 ? read(in, buf, sizeof(buf)) : -1;
  const bool ok = n == ssize_t(sizeof(kData) - 1) && memcmp(buf, kData, size_t(n)) == 0;
  printf("content ok %d\n", ok ? 1 : 0);
  return ok ? 0 : 1;
}
