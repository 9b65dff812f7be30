# A Python program interrupted (Ctrl-C) while it works the GPU: an allocation, 5 memsets and a
# synchronize through the CUDA runtime (ctypes), then a KeyboardInterrupt nobody catches.
# Python then ends the process as the signal would: SIGINT set back to its default
# disposition, then kill(getpid(), SIGINT) (exit status 130).
import ctypes

rt = ctypes.CDLL("libcudart.so.13")
buf = ctypes.c_void_p()
if rt.cudaMalloc(ctypes.byref(buf), ctypes.c_size_t(1 << 20)) != 0:
    raise SystemExit("cudaMalloc failed")
for _ in range(5):
    rt.cudaMemset(buf, 0, ctypes.c_size_t(1 << 20))
rt.cudaDeviceSynchronize()
print("interrupting", flush=True)
raise KeyboardInterrupt
