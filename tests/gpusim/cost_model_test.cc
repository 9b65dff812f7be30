#include "tests/gpusim/cost_model.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

namespace gpusim {
namespace {

TEST_CASE("default kernel cost is 2 us plus 1 ns per 256 threads") {
  CostModel m;
  KernelCost c = m.ForKernel("anything(float*)");
  CHECK(c.DurationNs(0) == 2000);
  CHECK(c.DurationNs(256) == 2001);
  CHECK(c.DurationNs(1 << 20) == 2000 + 4096);
}

TEST_CASE("rules: first regex match wins, fixed and per-thread forms") {
  CostModel m;
  std::string error;
  REQUIRE(m.Parse("# comment\n"
                  "\n"
                  "^gemm<float> 120\n"
                  "gemm   10 + 0.001*threads\n"
                  "softmax\\(  3.5+2e-3*threads   \n",
                  &error));
  CHECK(m.rule_count() == 3);
  // Demangled names: regex_search, so the pattern may match anywhere.
  CHECK(m.ForKernel("gemm<float>(float const*, int)").DurationNs(1000000) == 120000);
  CHECK(m.ForKernel("void gemm<half>(half*)").DurationNs(1000) == 10000 + 1000);
  CHECK(m.ForKernel("softmax(float*, int)").DurationNs(500) == 3500 + 1000);
  CHECK(m.ForKernel("softmax_kernel(float*)").DurationNs(0) == 2000);  // default: no '(' match
}

TEST_CASE("a bad file is rejected whole, with the line number, and the model is unchanged") {
  CostModel m;
  std::string error;
  REQUIRE(m.Parse("^a 5\n", &error));
  CHECK_FALSE(m.Parse("^b 7\n^c seven\n", &error));
  CHECK(error.find("line 2") != std::string::npos);
  CHECK(m.rule_count() == 1);
  CHECK(m.ForKernel("a()").DurationNs(0) == 5000);

  CHECK_FALSE(m.Parse("(unclosed 5\n", &error));
  CHECK(error.find("bad regex") != std::string::npos);
  CHECK_FALSE(m.Parse("k 5 + 3*blocks\n", &error));
  CHECK_FALSE(m.Parse("k -1\n", &error));
  CHECK_FALSE(m.Parse("k\n", &error));
  CHECK(m.rule_count() == 1);
}

TEST_CASE("LoadFile reads a file and reports a missing one") {
  CostModel m;
  std::string error;
  CHECK_FALSE(m.LoadFile("/nonexistent/gpusim_costs", &error));
  CHECK(error.find("cannot open") != std::string::npos);
  std::string path = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") +
                     "/gpusim_costs_test.txt";
  FILE* f = fopen(path.c_str(), "w");
  REQUIRE(f != nullptr);
  fputs("^k 42\n", f);
  fclose(f);
  REQUIRE(m.LoadFile(path, &error));
  CHECK(m.ForKernel("k()").DurationNs(1 << 20) == 42000);
  remove(path.c_str());
}

TEST_CASE("copy and memset costs follow latency + bytes / bandwidth") {
  CostModel m;
  CHECK(m.CopyNs(CostModel::kHtoD, 25000000) == 2000 + 1000000);  // 25 MB at 25 GB/s = 1 ms
  CHECK(m.CopyNs(CostModel::kDtoH, 0) == 2000);
  CHECK(m.CopyNs(CostModel::kDtoD, 1500000000) == 1000 + 1000000);  // 1.5 GB at 1500 GB/s
  CHECK(m.CopyNs(CostModel::kHtoH, 10000) == 1000 + 1000);
  CHECK(m.MemsetNs(2000000) == 1000 + 1000);
}

}  // namespace
}  // namespace gpusim
