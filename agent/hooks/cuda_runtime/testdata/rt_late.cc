// Loads the CUDA runtime late: dlopen()s a plugin (and with it libcudart) after main started,
// then calls into it. Usage: rt_late <plugin.so> <launches>.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    printf("dlopen failed: %s\n", dlerror());
    return 3;
  }
  auto run = reinterpret_cast<int (*)(int)>(dlsym(h, "plugin_run"));
  if (!run) return 4;
  int r = run(atoi(argv[2]));
  printf("plugin_run=%d\n", r);
  return r == atoi(argv[2]) ? 0 : 1;
}
