// Agent and record-schema versions (the schema is proto/profagent.proto).
#ifndef PROFAGENT_AGENT_CORE_VERSION_H_
#define PROFAGENT_AGENT_CORE_VERSION_H_

#include <cstdint>

namespace profagent {

constexpr char kAgentVersion[] = "0.1.0";
constexpr uint16_t kSchemaMajor = 1;
constexpr uint16_t kSchemaMinor = 5;  // 1.1: Header.launch_api_sample; 1.2: Collective.wait_ns;
                                      // 1.3: EV_GRAPH_NODE, DeviceOp.graph_node;
                                      // 1.4: Event.start_thread;
                                      // 1.5: StreamInfo; Event.start_thread on flushed push ranges

}  // namespace profagent

#endif  // PROFAGENT_AGENT_CORE_VERSION_H_
