#include "agent/hooks/nccl/nccl_tables.h"

namespace profagent {
namespace nccl {

const char* const kDtypeNames[kNumDtypes + 1] = {
    "int8",    "uint8",    "int32",    "uint32",     "int64",      "uint64", "float16",
    "float32", "float64",  "bfloat16", "float8e4m3", "float8e5m2", "unknown"};

const char* const kRedopNames[kNumRedops] = {"sum", "prod", "max", "min", "avg", "premulsum"};

}  // namespace nccl
}  // namespace profagent
