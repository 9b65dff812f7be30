#include "agent/hooks/mpi/mpi_abi.h"

#include <dlfcn.h>

#include <string>

namespace profagent {

const char* const kMpiOpNames[MpiAbi::kNumOps + 1] = {
    "max", "min",  "sum",    "prod",   "land",    "band",  "lor",
    "bor", "lxor", "bxor",   "maxloc", "minloc",  "replace", "no_op", "user"};

namespace {

MpiHandle Sym(const char* name) { return dlsym(RTLD_DEFAULT, name); }

MpiAbi Detect() {
  MpiAbi a;
  void* world = Sym("ompi_mpi_comm_world");
  if (world != nullptr) {
    // Open MPI: MPI_COMM_WORLD == &ompi_mpi_comm_world, and so on (mpi.h OMPI_PREDEFINED_GLOBAL).
    a.open_mpi = true;
    a.mask = ~0ull;
    a.request_size = sizeof(void*);
    a.comm_world = world;
    a.comm_self = Sym("ompi_mpi_comm_self");
    a.comm_null = Sym("ompi_mpi_comm_null");
    a.dt_null = Sym("ompi_mpi_datatype_null");
    a.dt_byte = Sym("ompi_mpi_byte");
    a.dt_int = Sym("ompi_mpi_int");
    a.op_min = Sym("ompi_mpi_op_min");
    a.in_place = reinterpret_cast<MpiHandle>(1);
    a.info_null = Sym("ompi_mpi_info_null");
    a.comm_type_shared = 0;
    a.topo_cart = 1;
    a.topo_graph = 2;
    a.any_source = -1;
    a.root = -4;
    a.status_size = 24;  // MPI_SOURCE, MPI_TAG, MPI_ERROR, _cancelled, size_t _ucount
    a.status_source = 0;
    a.status_ignore = 0;
    a.request_null = reinterpret_cast<uint64_t>(Sym("ompi_request_null"));
    for (int i = 0; i < MpiAbi::kNumOps; ++i) {
      const std::string s = std::string("ompi_mpi_op_") + kMpiOpNames[i];
      a.ops[i] = reinterpret_cast<uint64_t>(Sym(s.c_str()));
    }
  } else {
    // MPICH ABI (mpi.h constants): integer handles.
    a.open_mpi = false;
    a.mask = 0xffffffffull;
    a.request_size = 4;
    a.comm_world = reinterpret_cast<MpiHandle>(uintptr_t{0x44000000});
    a.comm_self = reinterpret_cast<MpiHandle>(uintptr_t{0x44000001});
    a.comm_null = reinterpret_cast<MpiHandle>(uintptr_t{0x04000000});
    a.dt_null = reinterpret_cast<MpiHandle>(uintptr_t{0x0c000000});
    a.dt_byte = reinterpret_cast<MpiHandle>(uintptr_t{0x4c00010d});
    a.dt_int = reinterpret_cast<MpiHandle>(uintptr_t{0x4c000405});
    a.op_min = reinterpret_cast<MpiHandle>(uintptr_t{0x58000002});
    a.in_place = reinterpret_cast<MpiHandle>(intptr_t{-1});
    a.info_null = reinterpret_cast<MpiHandle>(uintptr_t{0x1c000000});
    a.comm_type_shared = 1;
    a.topo_cart = 2;
    a.topo_graph = 1;
    a.any_source = -2;
    a.root = -3;
    a.status_size = 20;  // count_lo, count_hi_and_cancelled, MPI_SOURCE, MPI_TAG, MPI_ERROR
    a.status_source = 8;
    a.status_ignore = 1;
    a.request_null = 0x2c000000;
    // MPI_MAX 0x58000001 ... MPI_NO_OP 0x5800000e, but MINLOC (0xb) precedes MAXLOC (0xc).
    static const uint32_t kOps[MpiAbi::kNumOps] = {
        0x58000001, 0x58000002, 0x58000003, 0x58000004, 0x58000005, 0x58000006, 0x58000007,
        0x58000008, 0x58000009, 0x5800000a, 0x5800000c, 0x5800000b, 0x5800000d, 0x5800000e};
    for (int i = 0; i < MpiAbi::kNumOps; ++i) a.ops[i] = kOps[i];
  }
  return a;
}

}  // namespace

namespace internal {
MpiAbi g_abi;
}  // namespace internal

const MpiAbi& InitAbi() {
  static const bool done = [] {
    internal::g_abi = Detect();
    return true;
  }();
  (void)done;
  return internal::g_abi;
}

uint8_t MpiOpIndex(const MpiAbi& abi, MpiHandle op) {
  const uint64_t k = abi.Key(op);
  for (int i = 0; i < MpiAbi::kNumOps; ++i)
    if (abi.ops[i] == k && k != 0) return static_cast<uint8_t>(i);
  return MpiAbi::kNumOps;
}

}  // namespace profagent
