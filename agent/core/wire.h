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
#include <cstdlib>
#include <cstring>
#include <new>
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

// A growable byte buffer with the wire-format writers. Storage is a plain malloc'd array: the
// writer encodes millions of small fields per second, and a field is written with one capacity
// check and direct stores (std::string::append per byte group cost twice as much).
class WireBuf {
 public:
  WireBuf() = default;
  ~WireBuf() { free(p_); }
  WireBuf(const WireBuf& o) { Raw(o.p_, o.n_); }
  WireBuf& operator=(const WireBuf& o) {
    if (this != &o) {
      n_ = 0;
      Raw(o.p_, o.n_);
    }
    return *this;
  }
  WireBuf(WireBuf&& o) noexcept : p_(o.p_), n_(o.n_), cap_(o.cap_) {
    o.p_ = nullptr;
    o.n_ = o.cap_ = 0;
  }
  WireBuf& operator=(WireBuf&& o) noexcept {
    if (this != &o) {
      free(p_);
      p_ = o.p_, n_ = o.n_, cap_ = o.cap_;
      o.p_ = nullptr;
      o.n_ = o.cap_ = 0;
    }
    return *this;
  }

  void Clear() { n_ = 0; }
  size_t size() const { return n_; }
  const char* data() const { return p_ != nullptr ? p_ : ""; }

  void Varint(uint64_t v) {
    Room(10);
    Put(v);
  }
  void Tag(uint32_t field, WireType t) { Varint((uint64_t(field) << 3) | t); }

  // Scalar fields; zero values are skipped (proto3 default) unless `always`.
  void U64(uint32_t field, uint64_t v) {
    if (v != 0) {
      Room(20);
      Put((uint64_t(field) << 3) | kVarint);
      Put(v);
    }
  }
  void I64(uint32_t field, int64_t v) {  // int32/int64 (two's complement, 10 bytes if negative)
    U64(field, uint64_t(v));
  }
  void S64(uint32_t field, int64_t v) {  // sint32/sint64
    U64(field, v != 0 ? ZigZag(v) : 0);
  }
  void Bool(uint32_t field, bool v) { U64(field, v ? 1 : 0); }
  void Double(uint32_t field, double v) {
    if (v != 0.0) {
      Room(18);
      Put((uint64_t(field) << 3) | kFixed64);
      memcpy(p_ + n_, &v, 8);
      n_ += 8;
    }
  }
  void Bytes(uint32_t field, const void* p, size_t n) {
    Room(20 + n);
    Put((uint64_t(field) << 3) | kLen);
    Put(n);
    if (n > 0) memcpy(p_ + n_, p, n);
    n_ += n;
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
    Room(11);
    Put((uint64_t(field) << 3) | kLen);
    p_[n_++] = '\0';
    return n_;
  }
  void EndMsg(size_t start) {
    size_t len = n_ - start;
    if (len < 0x80) {
      p_[start - 1] = char(len);
      return;
    }
    const size_t extra = VarintSize(len) - 1;
    Room(extra);
    memmove(p_ + start + extra, p_ + start, len);
    n_ += extra;
    char* p = p_ + start - 1;
    while (len >= 0x80) {
      *p++ = char(len | 0x80);
      len >>= 7;
    }
    *p = char(len);
  }
  // A nested message whose bytes are already encoded in `m`.
  void Msg(uint32_t field, const WireBuf& m) { Bytes(field, m.data(), m.size()); }
  void Append(const WireBuf& m) { Raw(m.data(), m.size()); }
  void Raw(const void* p, size_t n) {
    if (n == 0) return;
    Room(n);
    memcpy(p_ + n_, p, n);
    n_ += n;
  }

 private:
  void Room(size_t k) {
    if (__builtin_expect(cap_ - n_ < k, 0)) Grow(k);
  }
  void Grow(size_t k) {
    size_t cap = cap_ < 256 ? 256 : cap_ * 2;
    while (cap - n_ < k) cap *= 2;
    char* p = static_cast<char*>(realloc(p_, cap));
    if (p == nullptr) throw std::bad_alloc();
    p_ = p;
    cap_ = cap;
  }
  void Put(uint64_t v) {  // capacity checked by the caller
    while (v >= 0x80) {
      p_[n_++] = char(v | 0x80);
      v >>= 7;
    }
    p_[n_++] = char(v);
  }

  char* p_ = nullptr;
  size_t n_ = 0, cap_ = 0;
};

}  // namespace wire
}  // namespace profagent

#endif  // PROFAGENT_AGENT_CORE_WIRE_H_
