// Minimal protobuf wire-format encoder used by the writer thread.
//
// The agent does not link libprotobuf (the profiled process may carry its own, of another
// version); it writes the messages of proto/profagent.proto by hand with these helpers. Field
// numbers live next to the code that writes them (writer.cc); tests/core wire round-trip tests
// parse the bytes with the generated classes to keep the two in step.
//
// Not thread-safe; a WireBuf belongs to one thread. Not for the hot path (it may allocate).
#ifndef PROFAGENT_AGENT_CORE_WIRE_H_
#define PROFAGENT_AGENT_CORE_WIRE_H_

#include <cstdint>
#include <cstring>
#include <string>

namespace profagent {
namespace wire {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5 };

inline size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

inline uint64_t ZigZag(int64_t v) { return (uint64_t(v) << 1) ^ uint64_t(v >> 63); }

// proto3 `string` fields must hold valid UTF-8 (parsers reject the whole record otherwise).
// Returns `s` with every byte that is not part of a valid UTF-8 sequence replaced by '?'.
inline std::string ValidUtf8(const std::string& s) {
  std::string out;
  const unsigned char* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  bool clean = true;
  while (i < n) {
    unsigned char c = p[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool ok = len != 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) ok = (p[i + k] & 0xc0) == 0x80;
    if (ok && len == 2) ok = c >= 0xc2;                                        // overlong
    if (ok && len == 3) {
      unsigned cp = ((c & 0x0fu) << 12) | ((p[i + 1] & 0x3fu) << 6) | (p[i + 2] & 0x3fu);
      ok = cp >= 0x800 && (cp < 0xd800 || cp > 0xdfff);                       // overlong, surrogate
    }
    if (ok && len == 4) {
      unsigned cp = ((c & 0x07u) << 18) | ((p[i + 1] & 0x3fu) << 12) | ((p[i + 2] & 0x3fu) << 6) |
                    (p[i + 3] & 0x3fu);
      ok = cp >= 0x10000 && cp <= 0x10ffff;
    }
    if (!ok) {
      if (clean) {
        out.assign(s, 0, i);
        clean = false;
      }
      out.push_back('?');
      ++i;
      continue;
    }
    if (!clean) out.append(s, i, len);
    i += len;
  }
  return clean ? s : out;
}

class WireBuf {
 public:
  void Clear() { s_.clear(); }
  size_t size() const { return s_.size(); }
  const char* data() const { return s_.data(); }
  std::string& str() { return s_; }

  void Varint(uint64_t v) {
    char tmp[10];
    size_t n = 0;
    while (v >= 0x80) {
      tmp[n++] = char(v | 0x80);
      v >>= 7;
    }
    tmp[n++] = char(v);
    s_.append(tmp, n);
  }
  void Tag(uint32_t field, WireType t) { Varint((uint64_t(field) << 3) | t); }

  // Scalar fields; zero values are skipped (proto3 default) unless `always`.
  void U64(uint32_t field, uint64_t v) {
    if (v != 0) {
      Tag(field, kVarint);
      Varint(v);
    }
  }
  void I64(uint32_t field, int64_t v) {  // int32/int64 (two's complement, 10 bytes if negative)
    if (v != 0) {
      Tag(field, kVarint);
      Varint(uint64_t(v));
    }
  }
  void S64(uint32_t field, int64_t v) {  // sint32/sint64
    if (v != 0) {
      Tag(field, kVarint);
      Varint(ZigZag(v));
    }
  }
  void Bool(uint32_t field, bool v) {
    if (v) {
      Tag(field, kVarint);
      Varint(1);
    }
  }
  void Double(uint32_t field, double v) {
    if (v != 0.0) {
      Tag(field, kFixed64);
      char b[8];
      memcpy(b, &v, 8);
      s_.append(b, 8);
    }
  }
  void Bytes(uint32_t field, const void* p, size_t n) {
    Tag(field, kLen);
    Varint(n);
    s_.append(static_cast<const char*>(p), n);
  }
  // String fields: made valid UTF-8 (see ValidUtf8).
  void Str(uint32_t field, const std::string& v) {
    if (!v.empty()) StrAlways(field, v);
  }
  void StrAlways(uint32_t field, const std::string& v) {
    const std::string clean = ValidUtf8(v);
    Bytes(field, clean.data(), clean.size());
  }
  // Nested message written in place: BeginMsg reserves one length byte, EndMsg fills it in (and
  // moves the body when the length needs more bytes). Avoids a copy per event.
  size_t BeginMsg(uint32_t field) {
    Tag(field, kLen);
    s_.push_back('\0');
    return s_.size();
  }
  void EndMsg(size_t start) {
    size_t len = s_.size() - start;
    if (len < 0x80) {
      s_[start - 1] = char(len);
      return;
    }
    size_t n = VarintSize(len);
    s_.insert(start, n - 1, '\0');
    char* p = &s_[start - 1];
    while (len >= 0x80) {
      *p++ = char(len | 0x80);
      len >>= 7;
    }
    *p = char(len);
  }
  // A nested message whose bytes are already encoded in `m`.
  void Msg(uint32_t field, const WireBuf& m) { Bytes(field, m.data(), m.size()); }
  void Append(const WireBuf& m) { s_.append(m.data(), m.size()); }
  void Raw(const void* p, size_t n) { s_.append(static_cast<const char*>(p), n); }

 private:
  std::string s_;
};

}  // namespace wire
}  // namespace profagent

#endif  // PROFAGENT_AGENT_CORE_WIRE_H_
