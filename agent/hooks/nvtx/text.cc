#include "agent/hooks/nvtx/text.h"

#include <cstdint>
#include <cstring>

namespace profagent {
namespace nvtx {

size_t CopyUtf8(const char* s, char* out, size_t cap) {
  if (cap == 0) return 0;
  if (s == nullptr) {
    out[0] = '\0';
    return 0;
  }
  size_t n = strnlen(s, cap);
  if (n >= cap) {  // cut: back off to the start of a UTF-8 sequence
    n = cap - 1;
    size_t k = n;
    while (k > 0 && (uint8_t(s[k]) & 0xC0) == 0x80) --k;  // s[n] is a continuation byte
    if (k < n) n = k;  // s[k] starts the sequence that s[n] belongs to: drop it entirely
  }
  std::memcpy(out, s, n);
  out[n] = '\0';
  return n;
}

size_t WideToUtf8(const wchar_t* w, char* out, size_t cap) {
  if (cap == 0) return 0;
  size_t n = 0;
  if (w != nullptr) {
    for (size_t i = 0; w[i] != 0; ++i) {
      uint32_t c = uint32_t(w[i]);
      if (sizeof(wchar_t) == 2 && c >= 0xD800 && c <= 0xDBFF && w[i + 1] >= 0xDC00 &&
          uint32_t(w[i + 1]) <= 0xDFFF) {
        c = 0x10000 + ((c - 0xD800) << 10) + (uint32_t(w[i + 1]) - 0xDC00);
        ++i;
      }
      if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) c = 0xFFFD;
      char buf[4];
      size_t len;
      if (c < 0x80) {
        buf[0] = char(c);
        len = 1;
      } else if (c < 0x800) {
        buf[0] = char(0xC0 | (c >> 6));
        buf[1] = char(0x80 | (c & 0x3F));
        len = 2;
      } else if (c < 0x10000) {
        buf[0] = char(0xE0 | (c >> 12));
        buf[1] = char(0x80 | ((c >> 6) & 0x3F));
        buf[2] = char(0x80 | (c & 0x3F));
        len = 3;
      } else {
        buf[0] = char(0xF0 | (c >> 18));
        buf[1] = char(0x80 | ((c >> 12) & 0x3F));
        buf[2] = char(0x80 | ((c >> 6) & 0x3F));
        buf[3] = char(0x80 | (c & 0x3F));
        len = 4;
      }
      if (n + len > cap - 1) break;
      std::memcpy(out + n, buf, len);
      n += len;
    }
  }
  out[n] = '\0';
  return n;
}

}  // namespace nvtx
}  // namespace profagent
