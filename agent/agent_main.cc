// Entry points of libprofagent.so: the LD_PRELOAD constructor. (CUDA_INJECTION64_PATH's
// InitializeInjection lives with the CUPTI hooks; both end in profagent_init(), which runs once.)
extern "C" int profagent_init();

namespace {
__attribute__((constructor)) void ProfagentConstructor() { profagent_init(); }
}  // namespace
