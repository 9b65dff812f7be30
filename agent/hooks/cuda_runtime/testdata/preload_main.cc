// Constructor of the test build of the agent (libprofagent_rt.so: core, model, CUPTI and CUDA
// runtime and NVTX surfaces), standing in for //agent:agent_main.cc so that these tests do not depend on
// which surfaces the product library links.
extern "C" int profagent_init();

namespace {
__attribute__((constructor)) void Init() { profagent_init(); }
}  // namespace
