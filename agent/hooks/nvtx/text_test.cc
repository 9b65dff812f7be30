// Unit tests of the bounded message copies.
#include "agent/hooks/nvtx/text.h"

#include <catch2/catch.hpp>
#include <string>

namespace profagent {
namespace nvtx {
namespace {

TEST_CASE("CopyUtf8 copies, cuts to cap - 1 and never splits a sequence") {
  char out[8];
  CHECK(CopyUtf8("abc", out, sizeof(out)) == 3);
  CHECK(std::string(out) == "abc");
  CHECK(CopyUtf8("abcdefghij", out, sizeof(out)) == 7);
  CHECK(std::string(out) == "abcdefg");
  // "abcde" + U+00E9 (2 bytes) + "x": 7 bytes fit exactly.
  CHECK(CopyUtf8("abcde\xc3\xa9x", out, sizeof(out)) == 7);
  // "abcdef" + U+00E9: the 2-byte sequence would straddle the cut: dropped.
  CHECK(CopyUtf8("abcdef\xc3\xa9", out, sizeof(out)) == 6);
  CHECK(std::string(out) == "abcdef");
  // A 4-byte sequence starting at byte 5 is dropped whole.
  CHECK(CopyUtf8("abcde\xf0\x9d\x84\x9e", out, sizeof(out)) == 5);
  CHECK(CopyUtf8(nullptr, out, sizeof(out)) == 0);
  CHECK(out[0] == '\0');
}

TEST_CASE("WideToUtf8 encodes 1- to 4-byte sequences and replaces invalid code points") {
  char out[64];
  CHECK(WideToUtf8(L"a\u00e9\u2713\U0001D11E", out, sizeof(out)) == 10);
  CHECK(std::string(out) == "a\xc3\xa9\xe2\x9c\x93\xf0\x9d\x84\x9e");
  const wchar_t bad[] = {wchar_t(0x110000), wchar_t(0xD800), 0};
  CHECK(std::string(out, WideToUtf8(bad, out, sizeof(out))) == "\xef\xbf\xbd\xef\xbf\xbd");
  char small[4];  // 3 bytes of room: U+2713 (3 bytes) fits, then nothing more
  CHECK(WideToUtf8(L"\u2713z", small, sizeof(small)) == 3);
  CHECK(WideToUtf8(L"a\u2713", small, sizeof(small)) == 1);  // U+2713 would not fit
  CHECK(WideToUtf8(nullptr, small, sizeof(small)) == 0);
}

}  // namespace
}  // namespace nvtx
}  // namespace profagent
