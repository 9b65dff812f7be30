// Another NVTX injection library loaded into the process before the agent (NVIDIA's libcupti is
// one, and a framework may load it globally): it exports InitializeInjectionNvtx2 too.
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(const void*) {
  return 0;
}
