// ElfFunctionAt names a frame from the module's symbol table: this test binary's own functions
// (not exported: dladdr alone gives no name for them, as for an application's).
#include "analyzer/report/elf_symbols.h"

#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <string>

namespace elf_test_ns {
__attribute__((noinline)) int LocalFunctionForFrames(int x) {
  asm volatile("" ::: "memory");
  return x * 3 + 1;
}
}  // namespace elf_test_ns

namespace profagent {
namespace analyzer {
namespace {

TEST_CASE("a frame inside a non-exported function gets its demangled name") {
  const void* fn = reinterpret_cast<const void*>(&elf_test_ns::LocalFunctionForFrames);
  Dl_info info{};
  REQUIRE(dladdr(fn, &info) != 0);
  REQUIRE(info.dli_fname != nullptr);
  // The agent's frame: the address (here a few bytes into the function) minus dli_fbase.
  const uint64_t offset =
      reinterpret_cast<uint64_t>(fn) + 2 - reinterpret_cast<uint64_t>(info.dli_fbase);
  INFO(info.dli_fname << " +0x" << std::hex << offset);
  CHECK(ElfFunctionAt(info.dli_fname, offset) == "elf_test_ns::LocalFunctionForFrames(int)");
  CHECK(elf_test_ns::LocalFunctionForFrames(2) == 7);
}

TEST_CASE("no name for a missing, non-ELF or unrelated place") {
  CHECK(ElfFunctionAt("/nonexistent/module.so", 0x1000).empty());
  const std::string text =
      std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/not_elf.txt";
  std::ofstream(text) << "not an ELF file, though long enough to hold an ELF header's bytes....";
  CHECK(ElfFunctionAt(text, 0x10).empty());
  Dl_info info{};
  REQUIRE(dladdr(reinterpret_cast<const void*>(&elf_test_ns::LocalFunctionForFrames), &info));
  CHECK(ElfFunctionAt(info.dli_fname, uint64_t(1) << 40).empty());  // past every function
}

}  // namespace
}  // namespace analyzer
}  // namespace profagent
