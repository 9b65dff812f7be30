// A minimal protobuf wire-format encoder for the Perfetto exporter's hot path.
//
// Building each TracePacket through the generated classes would cost an allocation-heavy
// message per event; the exporter instead appends fields straight into one growing byte buffer
// (the way Perfetto's own protozero does). Nested messages reserve one length byte and are
// back-patched when closed; a body of 128 bytes or more is shifted right to make room for a
// longer varint, so the output is always canonical protobuf that any parser (protoc --decode,
// the generated classes) accepts.
//
// Contract: single-threaded; a ProtoEncoder owns its buffer; positions returned by
// BeginNested() stay valid until Clear(). Not for use inside an agent hook (it allocates).
#ifndef PROFAGENT_ANALYZER_PERFETTO_PROTO_ENCODER_H_
#define PROFAGENT_ANALYZER_PERFETTO_PROTO_ENCODER_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

namespace profagent {
namespace analyzer {
namespace perfetto_internal {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2 };

inline size_t VarintSize(uint64_t v) {
  // 1 + floor(significant bits - 1) / 7, without a loop: bits * 9 / 64 ~ bits / 7.
  const int bits = 64 - __builtin_clzll(v | 1);
  return static_cast<size_t>((bits * 9 + 64) / 64);
}

// Writes v as a varint at p; returns the end.
inline char* PutVarint(char* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

class ProtoEncoder {
 public:
  ProtoEncoder() { Grow(1 << 16); }

  const char* data() const { return buf_.get(); }
  char* data() { return buf_.get(); }
  size_t size() const { return pos_; }
  void Clear() { pos_ = 0; }

  void Varint(uint64_t v) {
    Ensure(10);
    pos_ = static_cast<size_t>(PutVarint(buf_.get() + pos_, v) - buf_.get());
  }
  void Tag(uint32_t field, WireType wt) { Varint((uint64_t{field} << 3) | wt); }
  void VarintField(uint32_t field, uint64_t v) {
    Tag(field, kVarint);
    Varint(v);
  }
  // int32/int64 fields: negative values take 10 bytes (two's complement), as protobuf does.
  void IntField(uint32_t field, int64_t v) { VarintField(field, static_cast<uint64_t>(v)); }
  void Fixed64Field(uint32_t field, uint64_t v) {
    Tag(field, kFixed64);
    Ensure(8);
    for (int i = 0; i < 8; ++i) buf_[pos_++] = static_cast<char>(v >> (8 * i));
  }
  void BytesField(uint32_t field, std::string_view s) {
    Tag(field, kLengthDelimited);
    Varint(s.size());
    Ensure(s.size());
    if (!s.empty()) memcpy(buf_.get() + pos_, s.data(), s.size());
    pos_ += s.size();
  }

  // Opens a length-delimited sub-message; returns the token EndNested() needs.
  size_t BeginNested(uint32_t field) {
    Tag(field, kLengthDelimited);
    Ensure(1);
    return pos_++;
  }
  void EndNested(size_t token) {
    const size_t len = pos_ - token - 1;
    if (len < 0x80) {
      buf_[token] = static_cast<char>(len);
      return;
    }
    const size_t n = VarintSize(len);
    Ensure(n - 1);
    char* base = buf_.get();
    memmove(base + token + n, base + token + 1, len);
    PutVarint(base + token, len);
    pos_ += n - 1;
  }

  // Raw bytes (already encoded).
  void Append(const char* p, size_t n) {
    Ensure(n);
    memcpy(buf_.get() + pos_, p, n);
    pos_ += n;
  }

  // Makes room for n more bytes.
  void Ensure(size_t n) {
    if (__builtin_expect(pos_ + n > cap_, 0)) Grow(pos_ + n);
  }
  char* cursor() { return buf_.get() + pos_; }
  void Advance(size_t n) { pos_ += n; }

 private:
  void Grow(size_t need) {
    size_t cap = cap_ == 0 ? 1 : cap_;
    while (cap < need) cap *= 2;
    std::unique_ptr<char[]> nb(new char[cap]);
    if (pos_ > 0) memcpy(nb.get(), buf_.get(), pos_);
    buf_ = std::move(nb);
    cap_ = cap;
  }

  std::unique_ptr<char[]> buf_;
  size_t pos_ = 0;
  size_t cap_ = 0;
};

}  // namespace perfetto_internal
}  // namespace analyzer
}  // namespace profagent

#endif  // PROFAGENT_ANALYZER_PERFETTO_PROTO_ENCODER_H_
