// What the MPI hooks need to know about the MPI library in the process, without including any
// implementation's mpi.h.
//
// Handles are treated as opaque machine words (`MpiHandle` = void*). Open MPI's handles are
// pointers to predefined/allocated objects, so void* is exactly its ABI. MPICH's are 32-bit ints:
// on x86-64 System V an int argument travels in the low half of a 64-bit register (or an 8-byte
// stack slot) and the upper half is unspecified; a wrapper declared with void* receives the same
// register and passes it unchanged to PMPI_*, which reads only the low half, so forwarding is
// exact. Only when the hooks *use* a handle value (as a table key, or to compare it with a
// constant) must the upper half be discarded: Key() masks to 32 bits under MPICH. Arrays of
// handles (MPI_Request[]) have 4-byte elements under MPICH: RequestAt() uses request_size.
// MPICH support follows from its published constants and is not exercised on these machines;
// Open MPI (Debian's 4.1) is.
//
// InitAbi() detects the library once (dlsym of Open MPI's predefined objects); call it only after
// libmpi is loaded (from an MPI hook's first-call resolution). Abi() is then a plain read of the
// detected values (hot path): valid in any code that runs after InitAbi() returned on this
// thread or was ordered after it (e.g. behind the function-local static that called it).
#ifndef PROFAGENT_AGENT_HOOKS_MPI_MPI_ABI_H_
#define PROFAGENT_AGENT_HOOKS_MPI_MPI_ABI_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace profagent {

using MpiHandle = void*;

struct MpiAbi {
  static constexpr int kNumOps = 14;  // predefined reductions, in kOpNames order

  bool open_mpi = false;
  uint64_t mask = ~0ull;      // applied to handle values used as keys
  size_t request_size = 8;    // sizeof(MPI_Request)
  MpiHandle comm_world = nullptr;
  MpiHandle comm_self = nullptr;
  MpiHandle comm_null = nullptr;
  MpiHandle dt_null = nullptr;   // MPI_DATATYPE_NULL: never passed to PMPI_Type_* by the hooks
  MpiHandle dt_byte = nullptr;
  MpiHandle dt_int = nullptr;
  MpiHandle op_min = nullptr;
  MpiHandle in_place = nullptr;  // MPI_IN_PLACE
  MpiHandle info_null = nullptr; // MPI_INFO_NULL
  int comm_type_shared = 0;      // MPI_COMM_TYPE_SHARED
  int topo_cart = 1;             // MPI_Topo_test's MPI_CART and MPI_GRAPH (MPI_DIST_GRAPH: 3)
  int topo_graph = 2;
  uint64_t request_null = 0;     // masked
  int undefined = -32766;        // MPI_UNDEFINED (same value in both)
  int any_source = -1;           // MPI_ANY_SOURCE
  int root = -4;                 // MPI_ROOT (an intercommunicator collective's root side)
  // MPI_Status: its size, where its MPI_SOURCE field is, and MPI_STATUS(ES)_IGNORE's value.
  size_t status_size = 24;
  size_t status_source = 0;
  uintptr_t status_ignore = 0;
  uint64_t ops[kNumOps] = {};    // masked handles of the predefined reductions (0 = absent)

  uint64_t Key(const void* h) const { return reinterpret_cast<uint64_t>(h) & mask; }

  // MPI_SOURCE of the i-th element of an MPI_Status array.
  int StatusSource(const void* statuses, size_t i) const {
    int v;
    std::memcpy(&v, static_cast<const char*>(statuses) + i * status_size + status_source, 4);
    return v;
  }
  bool StatusIgnored(const void* status) const {
    return reinterpret_cast<uintptr_t>(status) == status_ignore;
  }

  // Value of the i-th element of an MPI_Request array (masked).
  uint64_t RequestAt(const void* array, size_t i) const {
    const char* p = static_cast<const char*>(array) + i * request_size;
    if (request_size == 4) {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v & mask;
  }
};

// Reduction names in MpiAbi::ops order; index kNumOps is "user" (any other MPI_Op).
extern const char* const kMpiOpNames[MpiAbi::kNumOps + 1];

const MpiAbi& InitAbi();

namespace internal {
extern MpiAbi g_abi;  // written once by InitAbi()
}  // namespace internal

inline const MpiAbi& Abi() { return internal::g_abi; }

// Index of `op` in kMpiOpNames (kNumOps for user-defined ops). Hot-path safe.
uint8_t MpiOpIndex(const MpiAbi& abi, MpiHandle op);

}  // namespace profagent

#endif  // PROFAGENT_AGENT_HOOKS_MPI_MPI_ABI_H_
