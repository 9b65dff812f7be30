# A Python program that reaches the CUDA runtime only through a ctypes handle of its own (loaded
# RTLD_LOCAL, as ctypes does), profiled with CUDA_INJECTION64_PATH alone: the driver (here the
# simulator) loads the agent privately when CUDA initializes. No interposer can see these calls;
# the agent must time with CUPTI whatever PROFAGENT_GPU_TIMING asks. An allocation, 4 memsets,
# a synchronize.
import ctypes

rt = ctypes.CDLL("libcudart.so.13")
buf = ctypes.c_void_p()
if rt.cudaMalloc(ctypes.byref(buf), ctypes.c_size_t(1 << 20)) != 0:
    raise SystemExit("cudaMalloc failed")
for _ in range(4):
    rt.cudaMemset(buf, 0, ctypes.c_size_t(1 << 20))
print("sync", rt.cudaDeviceSynchronize(), flush=True)
