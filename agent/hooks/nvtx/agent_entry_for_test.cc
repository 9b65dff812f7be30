// Test-only entry point of libprofagent_nvtx_test.so (the agent with only its core, model and
// NVTX surface): the same constructor as //agent:agent_main.cc, which is not a library.
extern "C" int profagent_init();

namespace {
__attribute__((constructor)) void ProfagentNvtxTestConstructor() { profagent_init(); }
}  // namespace
