#include "analyzer/reader.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace profagent {
namespace analyzer {

absl::StatusOr<std::unique_ptr<RecordReader>> RecordReader::Open(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", strerror(errno)));
  }
  if (S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not a record file"));
  }
  FILE* f = fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", strerror(errno)));
  }
  setvbuf(f, nullptr, _IOFBF, 1 << 20);
  std::unique_ptr<RecordReader> r(new RecordReader(path, f));
  unsigned char pre[kFilePreambleBytes];
  size_t n = fread(pre, 1, sizeof(pre), f);
  if (n == 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": empty file (no profagent header)"));
  }
  if (n < sizeof(kMagic) || memcmp(pre, kMagic, sizeof(kMagic)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": offset 0: not a profagent record file (bad magic)"));
  }
  if (n < sizeof(pre)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": offset ", n, ": file ends inside the version preamble"));
  }
  r->major_ = uint16_t(pre[8] | (pre[9] << 8));
  r->minor_ = uint16_t(pre[10] | (pre[11] << 8));
  if (r->major_ != kSchemaMajor) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": offset 8: schema major version ", r->major_, " is not supported (this reader: ",
        kSchemaMajor, ".", kSchemaMinor, ")"));
  }
  r->offset_ = sizeof(pre);
  return r;
}

RecordReader::~RecordReader() {
  if (f_ != nullptr) fclose(f_);
}

int RecordReader::ReadByte() { return getc_unlocked(f_); }

absl::StatusOr<bool> RecordReader::Next(Record* rec) {
  absl::string_view frame;
  auto more = NextFrame(&frame);
  if (!more.ok() || !*more) return more;
  if (!rec->ParseFromArray(frame.data(), int(frame.size()))) {
    --records_;
    offset_ = last_frame_start_;
    return absl::DataLossError(absl::StrCat(path_, ": offset ", last_frame_start_,
                                            ": corrupt record (", frame.size(), " bytes)"));
  }
  return true;
}

absl::StatusOr<bool> RecordReader::NextFrame(absl::string_view* frame) {
  if (truncated_) return false;
  const uint64_t frame_start = offset_;
  uint64_t len = 0;
  int shift = 0;
  size_t nbytes = 0;
  for (;;) {
    int c = ReadByte();
    if (c == EOF) {
      if (nbytes == 0) return false;  // clean end
      truncated_ = true;
      warning_ = absl::StrCat(path_, ": offset ", frame_start,
                              ": file ends inside a frame length (truncated; kept ", records_,
                              " records before it)");
      return false;
    }
    ++nbytes;
    if (shift >= 63) {
      return absl::DataLossError(
          absl::StrCat(path_, ": offset ", frame_start, ": corrupt frame length (varint too long)"));
    }
    len |= uint64_t(c & 0x7f) << shift;
    shift += 7;
    if ((c & 0x80) == 0) break;
  }
  if (len > kMaxFrameBytes) {
    return absl::DataLossError(absl::StrCat(path_, ": offset ", frame_start,
                                            ": corrupt frame length ", len, " (limit ",
                                            kMaxFrameBytes, ")"));
  }
  // The buffer grows with the bytes that actually arrive (doubling past 1 MiB), not to the
  // declared length at once: a corrupt or cut length costs what the file holds, not 64 MiB.
  size_t got = 0;
  while (got < len) {
    const size_t want = size_t(std::min<uint64_t>(len - got, std::max<size_t>(got, 1 << 20)));
    if (buf_.size() < got + want) buf_.resize(got + want);
    const size_t n = fread(&buf_[got], 1, want, f_);
    got += n;
    if (n < want) break;
  }
  if (got < len) {
    truncated_ = true;
    warning_ = absl::StrCat(path_, ": offset ", frame_start, ": last frame is truncated (",
                            got, " of ", len, " bytes; kept ", records_,
                            " records before it)");
    return false;
  }
  *frame = absl::string_view(buf_.data(), len);
  last_frame_start_ = frame_start;
  offset_ = frame_start + nbytes + len;
  ++records_;
  return true;
}

namespace {

// The file opened for a read that fills `s` (path, format version).
absl::StatusOr<std::unique_ptr<RecordReader>> OpenForSummary(const std::string& path,
                                                             FileSummary* s) {
  s->path = path;
  auto reader_or = RecordReader::Open(path);
  if (reader_or.ok()) {
    s->major = (*reader_or)->major();
    s->minor = (*reader_or)->minor();
  }
  return reader_or;
}

// `s` completed at the end of a read; an error when the file had no header.
absl::Status FinishSummary(const RecordReader& reader, FileSummary* s) {
  s->frames = reader.records();
  s->truncated = reader.truncated();
  s->warning = reader.warning();
  // The agent writes its header first: a file without one holds nothing attributable (cut
  // right after the magic, or not an agent profile).
  if (!s->has_header) {
    return absl::DataLossError(
        absl::StrCat(s->path, ": no header record (the file ends before its first record)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status VisitFile(const std::string& path, Visitor* v, FileSummary* summary) {
  FileSummary local;
  FileSummary* s = summary != nullptr ? summary : &local;
  auto reader_or = OpenForSummary(path, s);
  if (!reader_or.ok()) return reader_or.status();
  RecordReader& reader = **reader_or;
  // One Record per frame kind: a reused message keeps its allocated events only while its oneof
  // case stays the same (alternating batch/device frames would otherwise free and reallocate
  // every event of every batch).
  Record batch_rec, device_rec, other_rec;
  absl::string_view frame;
  std::unordered_map<uint32_t, std::array<uint32_t, 7>> shapes;  // launch shape per kernel name
  for (;;) {
    const uint64_t at = reader.offset();
    auto more = reader.NextFrame(&frame);
    if (!more.ok()) {
      s->frames = reader.records();
      return more.status();
    }
    if (!*more) break;
    const char first = frame.empty() ? 0 : frame[0];  // the tag of Record's oneof field
    Record& rec = first == 0x1a ? batch_rec : first == 0x22 ? device_rec : other_rec;
    // Record::ParseFromArray clears the oneof first, which deletes the previous batch and every
    // event in it. Once the case is set, the kept batch is emptied instead (its events stay
    // allocated for reuse) and the frame is merged into the Record: the same parse, with
    // protobuf's own checks and nesting limits, as for any other frame.
    google::protobuf::Message* kept = nullptr;
    if (first == 0x1a && rec.kind_case() == Record::kBatch) kept = rec.mutable_batch();
    if (first == 0x22 && rec.kind_case() == Record::kDevice) kept = rec.mutable_device();
    bool parsed;
    if (kept != nullptr) {
      kept->Clear();
      if (!rec.GetReflection()->GetUnknownFields(rec).empty()) {
        rec.GetReflection()->MutableUnknownFields(&rec)->Clear();
      }
      google::protobuf::io::ArrayInputStream in(frame.data(), int(frame.size()));
      parsed = rec.MergeFromBoundedZeroCopyStream(&in, int(frame.size()));
    } else {
      parsed = rec.ParseFromArray(frame.data(), int(frame.size()));
    }
    if (!parsed) {
      s->frames = reader.records() - 1;
      return absl::DataLossError(absl::StrCat(path, ": offset ", at, ": corrupt record (",
                                              frame.size(), " bytes)"));
    }
    switch (rec.kind_case()) {
      case Record::kHeader:
        s->has_header = true;
        v->OnHeader(rec.header());
        break;
      case Record::kString:
        v->OnString(rec.string().id(), rec.string().value());
        break;
      case Record::kBatch: {
        EventBatch* b = rec.mutable_batch();
        uint64_t t = b->base_ns();
        uint64_t corr = b->corr_base();
        uint32_t launch_stream = 0, launch_api = 0;
        shapes.clear();
        HostEvent he;
        he.thread = b->thread();
        for (Event& e : *b->mutable_events()) {
          t += e.dt();
          he.start_ns = t;
          he.end_ns = t + e.dur();
          if (KindHasCorr(e.kind())) {
            corr = corr + 1 + e.dcorr();
            he.corr = corr;
          } else {
            he.corr = 0;
          }
          if (e.kind() == EV_LAUNCH) {
            // Undo the launch encodings (sticky stream/api, value-1 dimensions).
            if (e.stream() != 0) launch_stream = e.stream(); else e.set_stream(launch_stream);
            if (e.api() != 0) launch_api = e.api(); else e.set_api(launch_api);
            if (e.has_grid_x()) {
              e.set_grid_y(e.grid_y() + 1);
              e.set_grid_z(e.grid_z() + 1);
              e.set_block_y(e.block_y() + 1);
              e.set_block_z(e.block_z() + 1);
              shapes[e.name()] = {e.grid_x(), e.grid_y(), e.grid_z(), e.block_x(),
                                  e.block_y(), e.block_z(), e.shmem()};
            } else {
              auto it = shapes.find(e.name());
              if (it != shapes.end()) {
                const auto& sh = it->second;
                e.set_grid_x(sh[0]);
                e.set_grid_y(sh[1]);
                e.set_grid_z(sh[2]);
                e.set_block_x(sh[3]);
                e.set_block_y(sh[4]);
                e.set_block_z(sh[5]);
                e.set_shmem(sh[6]);
              }
            }
          }
          he.ev = &e;
          v->OnHostEvent(he);
          ++s->host_events;
        }
        break;
      }
      case Record::kDevice: {
        const DeviceBatch& b = rec.device();
        uint64_t t = b.base_ns();
        uint64_t corr = b.corr_base();
        DeviceOpEvent de;
        de.device = b.device();
        for (const DeviceOp& op : b.ops()) {
          t += op.dt();
          corr = corr + 1 + op.dcorr();
          de.start_ns = t;
          de.end_ns = t + op.dur();
          de.corr = corr;
          de.op = &op;
          v->OnDeviceOp(de);
          ++s->device_ops;
        }
        break;
      }
      default:
        if (rec.kind_case() == Record::kFooter) s->has_footer = true;
        v->OnOther(rec);
        break;
    }
  }
  return FinishSummary(reader, s);
}

namespace {

// ----- ScanFile: hand decoding of the protobuf wire format for event and device batches -----

class WireReader {
 public:
  explicit WireReader(absl::string_view s)
      : p_(reinterpret_cast<const uint8_t*>(s.data())), end_(p_ + s.size()) {}
  bool AtEnd() const { return p_ >= end_; }
  // Consumes the next byte when it is `tag` (a one-byte field tag).
  bool Take(uint8_t tag) {
    if (p_ < end_ && *p_ == tag) {
      ++p_;
      return true;
    }
    return false;
  }
  bool Varint(uint64_t* v) {
    // Most values (tags, ids, small deltas) take one byte, most others two (times in ns).
    if (p_ < end_ && p_[0] < 0x80) {
      *v = *p_++;
      return true;
    }
    if (end_ - p_ >= 2 && p_[1] < 0x80) {
      *v = uint64_t(p_[0] & 0x7f) | uint64_t(p_[1]) << 7;
      p_ += 2;
      return true;
    }
    uint64_t r = 0;
    for (int shift = 0; shift <= 63 && p_ < end_; shift += 7) {
      const uint8_t b = *p_++;
      r |= uint64_t(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        *v = r;
        return true;
      }
    }
    return false;
  }
  // A field tag as protobuf's parser reads it (and VisitFile must agree): at most 5 bytes,
  // the value kept modulo 2^32. A longer tag is corrupt.
  bool Tag(uint64_t* tag) {
    if (p_ < end_ && p_[0] < 0x80) {  // field numbers below 16: one byte
      *tag = *p_++;
      return true;
    }
    uint32_t r = 0;
    for (int i = 0; i < 5 && p_ < end_; ++i) {
      const uint8_t b = *p_++;
      r |= uint32_t(b & 0x7f) << (7 * i);
      if ((b & 0x80) == 0) {
        *tag = r;
        return true;
      }
    }
    return false;
  }
  bool Bytes(absl::string_view* out) {
    uint64_t n;
    if (!Varint(&n) || n > uint64_t(end_ - p_)) return false;
    *out = absl::string_view(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return true;
  }
  bool Fixed64(uint64_t* v) {
    if (end_ - p_ < 8) return false;
    memcpy(v, p_, 8);  // little endian, as the wire format
    p_ += 8;
    return true;
  }
  // True when the rest parses as a message of scalar and bytes fields (what protobuf's parser
  // checks for Collective and StepInfo, which have no nested messages); `depth` as in Skip.
  bool WellFormed(int depth) {
    while (!AtEnd()) {
      uint64_t tag;
      if (!Tag(&tag) || (tag >> 3) == 0 || !Skip(tag, depth)) return false;
    }
    return true;
  }
  // Skips the value of a field of an unknown number whose tag was just read, as protobuf's
  // parser does. `depth` is the nesting budget the parser has left at this level (kBatchDepth,
  // ...). A group (proto3 never writes one, but the parser accepts it as an unknown field)
  // runs to its matching end tag.
  bool Skip(uint64_t tag, int depth) {
    uint64_t v;
    absl::string_view b;
    switch (tag & 7) {
      case 0: return Varint(&v);
      case 1: return Fixed64(&v);
      case 2: return Bytes(&b);
      case 3: return SkipGroup(uint32_t(tag >> 3), depth - 1);
      case 5:
        if (end_ - p_ < 4) return false;
        p_ += 4;
        return true;
      default: return false;  // an end tag without its start; wire types 6 and 7
    }
  }

 private:
  bool SkipGroup(uint32_t field, int depth) {
    if (depth < 0) return false;
    for (;;) {
      uint64_t tag;
      if (!Tag(&tag)) return false;  // also at the end: the group is not closed
      if ((tag & 7) == 4) return (tag >> 3) == field;
      if ((tag >> 3) == 0 || !Skip(tag, depth)) return false;
    }
  }

  const uint8_t* p_;
  const uint8_t* end_;
};

// The nesting budget protobuf's parser has left inside an EventBatch or DeviceBatch of a Record,
// inside one of their events or ops, and inside an event's Collective or StepInfo (it starts at
// 100 and spends one per message or group entered): a group nested deeper is corrupt for it.
constexpr int kBatchDepth = 99, kItemDepth = 98, kSubDepth = 97;

int64_t ZigZag64(uint64_t v) { return int64_t(v >> 1) ^ -int64_t(v & 1); }
int32_t ZigZag32(uint64_t v) { return ZigZag64(uint32_t(v)); }

// Launch shapes (grid, block, shmem) of the current batch by kernel name: a launch that writes
// none repeats the previous one of its name in the batch. Direct-indexed for the small dense
// string ids of real files, stamped with the batch number so that a new batch costs nothing.
class ShapeTable {
 public:
  using Shape = std::array<uint32_t, 7>;
  void NextBatch() {
    ++batch_;
    if (!far_.empty()) far_.clear();
  }
  void Put(uint32_t name, const Shape& shape) {
    if (name >= kDirect) {
      far_[name] = shape;
      return;
    }
    if (name >= direct_.size()) direct_.resize(std::max<size_t>(name + 1, 2 * direct_.size()));
    direct_[name].batch = batch_;
    direct_[name].shape = shape;
  }
  const Shape* Get(uint32_t name) const {
    if (name >= kDirect) {
      auto it = far_.find(name);
      return it == far_.end() ? nullptr : &it->second;
    }
    return name < direct_.size() && direct_[name].batch == batch_ ? &direct_[name].shape
                                                                   : nullptr;
  }

 private:
  static constexpr uint32_t kDirect = 1u << 16;
  struct Slot {
    uint64_t batch = 0;
    Shape shape;
  };
  std::vector<Slot> direct_;
  std::unordered_map<uint32_t, Shape> far_;
  uint64_t batch_ = 0;
};

// The header fields (1, 2, 3) of an EventBatch / DeviceBatch, read before its items (field 4):
// protobuf writes them first, but any order is valid. Also checks the batch's framing.
bool BatchHeader(absl::string_view batch, uint64_t h[3]) {
  WireReader w(batch);
  h[0] = h[1] = h[2] = 0;
  while (!w.AtEnd()) {
    uint64_t tag;
    if (!w.Tag(&tag)) return false;
    const uint32_t field = uint32_t(tag >> 3), wt = uint32_t(tag & 7);
    const bool ok =
        field >= 1 && field <= 3 && wt == 0 ? w.Varint(&h[field - 1]) : w.Skip(tag, kBatchDepth);
    if (!ok || field == 0) return false;
  }
  return true;
}

class BatchDecoder {
 public:
  BatchDecoder(ViewVisitor* v, FileSummary* s) : v_(v), s_(s) {}
  bool Events(absl::string_view batch);
  bool Ops(absl::string_view batch);

 private:
  bool DecodeEvent(absl::string_view bytes, int64_t* dt, int64_t* dcorr, uint64_t* dur);
  bool DecodeOp(absl::string_view bytes, int64_t* dt, int64_t* dcorr, uint64_t* dur);
  void ResetEvent();
  ViewVisitor* v_;
  FileSummary* s_;
  // Reused for every event / op: resetting a whole view per record (a 170-byte memset and
  // copy) cost more than decoding it.
  EventView e_;
  OpView op_;
  bool e_rare_ = false;  // e_ holds a field that few events set (see ResetEvent)
  ShapeTable shapes_;
};

void BatchDecoder::ResetEvent() {
  e_.corr = 0;
  e_.kind = EV_LAUNCH;
  e_.name = e_.stream = e_.api = e_.device = e_.stack = e_.copy_kind = 0;
  e_.has_shape = false;
  e_.grid[0] = e_.grid[1] = e_.grid[2] = 0;
  e_.block[0] = e_.block[1] = e_.block[2] = 0;
  e_.shmem = 0;
  e_.bytes = 0;
  e_.depth = 0;
  if (!e_rare_) return;
  e_.ret = 0;
  e_.ptr = 0;
  e_.graph = 0;
  e_.handle = 0;
  e_.domain = 0;
  e_.category = 0;
  e_.color = 0;
  e_.payload_i = 0;
  e_.payload_f = 0;
  e_.has_payload = false;
  e_.payload_double = false;
  e_.captured = false;
  e_.calls = 1;
  e_.busy_ns = 0;
  e_.source_graph = 0;
  e_.start_end = false;
  e_.start_thread = 0;
  e_.graph_node = e_.source_graph_node = 0;
  e_.coll = absl::string_view();
  e_.step = absl::string_view();
  e_rare_ = false;
}

bool BatchDecoder::Events(absl::string_view batch) {
  uint64_t h[3];
  if (!BatchHeader(batch, h)) return false;
  shapes_.NextBatch();
  uint64_t t = h[1], corr = h[2];
  uint32_t launch_stream = 0, launch_api = 0;
  e_.thread = uint32_t(h[0]);
  uint64_t events = 0;  // counted in the summary once the whole batch decoded, as VisitFile
  WireReader w(batch);
  while (!w.AtEnd()) {
    uint64_t tag;
    absl::string_view item;
    w.Tag(&tag);  // BatchHeader checked the framing
    if (tag != ((4 << 3) | 2)) {
      w.Skip(tag, kBatchDepth);
      continue;
    }
    w.Bytes(&item);
    ResetEvent();
    int64_t dt = 0, dcorr = 0;
    uint64_t dur = 0;
    if (!DecodeEvent(item, &dt, &dcorr, &dur)) return false;
    t += uint64_t(dt);
    e_.start_ns = t;
    e_.end_ns = t + dur;
    if (KindHasCorr(e_.kind)) {
      corr = corr + 1 + uint64_t(dcorr);
      e_.corr = corr;
    }
    if (e_.kind == EV_LAUNCH) {
      // Undo the launch encodings (sticky stream/api, value-1 dimensions, repeated shapes).
      if (e_.stream != 0) launch_stream = e_.stream; else e_.stream = launch_stream;
      if (e_.api != 0) launch_api = e_.api; else e_.api = launch_api;
      if (e_.has_shape) {
        for (int i = 1; i < 3; ++i) {
          ++e_.grid[i];
          ++e_.block[i];
        }
        shapes_.Put(e_.name, {e_.grid[0], e_.grid[1], e_.grid[2], e_.block[0], e_.block[1],
                              e_.block[2], e_.shmem});
      } else if (const ShapeTable::Shape* sh = shapes_.Get(e_.name)) {
        std::copy(sh->begin(), sh->begin() + 3, e_.grid);
        std::copy(sh->begin() + 3, sh->begin() + 6, e_.block);
        e_.shmem = (*sh)[6];
        e_.has_shape = true;
      }
    }
    v_->OnEvent(e_);
    ++events;
  }
  s_->host_events += events;
  return true;
}

// Decodes one Event into e_, except the delta-coded fields, which go to *dt, *dcorr and *dur.
bool BatchDecoder::DecodeEvent(absl::string_view bytes, int64_t* dt, int64_t* dcorr,
                               uint64_t* dur) {
  WireReader f(bytes);
  uint64_t x = 0;
  // Protobuf writes fields in number order: the usual leading ones are matched in sequence,
  // cheaper than the switch below (a mispredicted indirect jump), which takes the rest in any
  // order (a repeated field still overrides, as protobuf's last-one-wins).
  if (f.Take(1 << 3)) {
    if (!f.Varint(&x)) return false;
    *dt = ZigZag64(x);
  }
  if (f.Take(2 << 3) && !f.Varint(dur)) return false;
  if (f.Take(3 << 3)) {
    if (!f.Varint(&x)) return false;
    e_.kind = EventKind(int32_t(x));
  }
  if (f.Take(4 << 3)) {
    if (!f.Varint(&x)) return false;
    e_.name = uint32_t(x);
  }
  if (f.Take(5 << 3)) {
    if (!f.Varint(&x)) return false;
    *dcorr = ZigZag64(x);
  }
  while (!f.AtEnd()) {
    uint64_t tag;
    if (!f.Tag(&tag)) return false;
    const uint32_t field = uint32_t(tag >> 3), wt = uint32_t(tag & 7);
    if (wt == 2 && (field == 28 || field == 29)) {
      absl::string_view& sub = field == 28 ? e_.coll : e_.step;
      e_rare_ = true;
      if (!f.Bytes(&sub) || !WireReader(sub).WellFormed(kSubDepth)) return false;
      continue;
    }
    if (wt == 1 && field == 25) {
      if (!f.Fixed64(&x)) return false;
      memcpy(&e_.payload_f, &x, sizeof(double));
      e_.payload_double = true;
      e_rare_ = true;
      continue;
    }
    // Every other known field is a varint; a known field with another wire type is skipped as
    // unknown, as the protobuf parser does.
    if (wt != 0 || field == 0 || field > 40) {
      if (field == 0 || !f.Skip(tag, kItemDepth)) return false;
      continue;
    }
    if (!f.Varint(&x)) return false;
    switch (field) {
      case 1: *dt = ZigZag64(x); break;
      case 2: *dur = x; break;
      case 3: e_.kind = EventKind(int32_t(x)); break;
      case 4: e_.name = uint32_t(x); break;
      case 5: *dcorr = ZigZag64(x); break;
      case 7: e_.stream = uint32_t(x); break;
      case 9: e_.api = uint32_t(x); break;
      case 10: e_.device = uint32_t(x); break;
      case 11: e_.grid[0] = uint32_t(x); e_.has_shape = true; break;
      case 12: e_.grid[1] = uint32_t(x); break;
      case 13: e_.grid[2] = uint32_t(x); break;
      case 14: e_.block[0] = uint32_t(x); break;
      case 15: e_.block[1] = uint32_t(x); break;
      case 16: e_.block[2] = uint32_t(x); break;
      case 17: e_.shmem = uint32_t(x); break;
      case 18: e_.bytes = x; break;
      case 19: e_.copy_kind = uint32_t(x); break;
      case 27: e_.depth = uint32_t(x); break;
      case 30: e_.stack = uint32_t(x); break;
      case 6: break;  // thread_hint (reserved)
      default:
        e_rare_ = true;
        switch (field) {
          case 8: e_.ret = ZigZag32(x); break;
          case 20: e_.ptr = x; break;
          case 21: e_.domain = uint32_t(x); break;
          case 22: e_.category = uint32_t(x); break;
          case 23: e_.color = uint32_t(x); break;
          case 24: e_.payload_i = ZigZag64(x); break;
          case 26: e_.has_payload = x != 0; break;
          case 31: e_.graph = x; break;
          case 32: e_.handle = x; break;
          case 33: e_.captured = x != 0; break;
          case 34: e_.calls = x > 1 ? x : 1; break;
          case 35: e_.busy_ns = x; break;
          case 36: e_.source_graph = x; break;
          case 37: e_.start_end = x != 0; break;
          case 38: e_.graph_node = x; break;
          case 39: e_.source_graph_node = x; break;
          case 40: e_.start_thread = uint32_t(x); break;
          default: break;  // 25, 28, 29 with a varint wire type: unknown
        }
        break;
    }
  }
  return true;
}

bool BatchDecoder::Ops(absl::string_view batch) {
  uint64_t h[3];
  if (!BatchHeader(batch, h)) return false;
  uint64_t t = h[1], corr = h[2];
  op_.device = uint32_t(h[0]);
  uint64_t ops = 0;  // as in Events
  WireReader w(batch);
  while (!w.AtEnd()) {
    uint64_t tag;
    absl::string_view item;
    w.Tag(&tag);  // BatchHeader checked the framing
    if (tag != ((4 << 3) | 2)) {
      w.Skip(tag, kBatchDepth);
      continue;
    }
    w.Bytes(&item);
    int64_t dt = 0, dcorr = 0;
    uint64_t dur = 0;
    if (!DecodeOp(item, &dt, &dcorr, &dur)) return false;
    t += uint64_t(dt);
    corr = corr + 1 + uint64_t(dcorr);
    op_.start_ns = t;
    op_.end_ns = t + dur;
    op_.corr = corr;
    v_->OnOp(op_);
    ++ops;
  }
  s_->device_ops += ops;
  return true;
}

// Decodes one DeviceOp into op_, except the delta-coded fields (as DecodeEvent).
bool BatchDecoder::DecodeOp(absl::string_view bytes, int64_t* dt, int64_t* dcorr,
                            uint64_t* dur) {
  op_.kind = DOP_KERNEL;
  op_.name = op_.stream = op_.copy_kind = op_.context = 0;
  op_.bytes = op_.graph = op_.raw_start = op_.graph_node = 0;
  op_.grid[0] = op_.grid[1] = op_.grid[2] = 0;
  op_.block[0] = op_.block[1] = op_.block[2] = 0;
  WireReader f(bytes);
  uint64_t x;
  // The usual leading fields in sequence, as in DecodeEvent.
  if (f.Take(1 << 3)) {
    if (!f.Varint(&x)) return false;
    *dt = ZigZag64(x);
  }
  if (f.Take(2 << 3) && !f.Varint(dur)) return false;
  if (f.Take(3 << 3)) {
    if (!f.Varint(&x)) return false;
    op_.kind = DeviceOpKind(int32_t(x));
  }
  if (f.Take(4 << 3)) {
    if (!f.Varint(&x)) return false;
    op_.name = uint32_t(x);
  }
  if (f.Take(5 << 3)) {
    if (!f.Varint(&x)) return false;
    *dcorr = ZigZag64(x);
  }
  if (f.Take(6 << 3)) {
    if (!f.Varint(&x)) return false;
    op_.stream = uint32_t(x);
  }
  while (!f.AtEnd()) {
    uint64_t tag;
    if (!f.Tag(&tag)) return false;
    const uint32_t field = uint32_t(tag >> 3), wt = uint32_t(tag & 7);
    if (wt != 0 || field == 0 || field > 18) {
      if (field == 0 || !f.Skip(tag, kItemDepth)) return false;
      continue;
    }
    if (!f.Varint(&x)) return false;
    switch (field) {
      case 1: *dt = ZigZag64(x); break;
      case 2: *dur = x; break;
      case 3: op_.kind = DeviceOpKind(int32_t(x)); break;
      case 4: op_.name = uint32_t(x); break;
      case 5: *dcorr = ZigZag64(x); break;
      case 6: op_.stream = uint32_t(x); break;
      case 7: op_.bytes = x; break;
      case 8: op_.copy_kind = uint32_t(x); break;
      case 9: op_.graph = x; break;
      case 10: op_.grid[0] = uint32_t(x); break;
      case 11: op_.grid[1] = uint32_t(x); break;
      case 12: op_.grid[2] = uint32_t(x); break;
      case 13: op_.block[0] = uint32_t(x); break;
      case 14: op_.block[1] = uint32_t(x); break;
      case 15: op_.block[2] = uint32_t(x); break;
      case 16: op_.context = uint32_t(x); break;
      case 17: op_.raw_start = x; break;
      case 18: op_.graph_node = x; break;
    }
  }
  return true;
}

}  // namespace

absl::Status ScanFile(const std::string& path, ViewVisitor* v, FileSummary* summary) {
  FileSummary local;
  FileSummary* s = summary != nullptr ? summary : &local;
  auto reader_or = OpenForSummary(path, s);
  if (!reader_or.ok()) return reader_or.status();
  RecordReader& reader = **reader_or;
  BatchDecoder decoder(v, s);
  Record rec;
  std::string sub;  // a batch re-serialized from an unusually framed Record
  absl::string_view frame;
  for (;;) {
    const uint64_t at = reader.offset();
    auto more = reader.NextFrame(&frame);
    if (!more.ok()) {
      s->frames = reader.records();
      return more.status();
    }
    if (!*more) break;
    auto corrupt = [&]() {
      s->frames = reader.records() - 1;
      return absl::DataLossError(absl::StrCat(path, ": offset ", at, ": corrupt record (",
                                              frame.size(), " bytes)"));
    };
    // Nearly every frame is one event or device batch: decoded by hand. Anything else (and a
    // batch framed unusually, e.g. split in two fields that protobuf merges) goes through
    // protobuf.
    WireReader w(frame);
    uint64_t tag = 0;
    absl::string_view body;
    if (w.Tag(&tag) && (tag == ((3 << 3) | 2) || tag == ((4 << 3) | 2)) && w.Bytes(&body) &&
        w.AtEnd()) {
      if (!(tag >> 3 == 3 ? decoder.Events(body) : decoder.Ops(body))) return corrupt();
      continue;
    }
    if (!rec.ParseFromArray(frame.data(), int(frame.size()))) return corrupt();
    switch (rec.kind_case()) {
      case Record::kBatch:
        rec.batch().SerializeToString(&sub);
        if (!decoder.Events(sub)) return corrupt();
        break;
      case Record::kDevice:
        rec.device().SerializeToString(&sub);
        if (!decoder.Ops(sub)) return corrupt();
        break;
      default:
        if (rec.kind_case() == Record::kFooter) s->has_footer = true;
        if (rec.kind_case() == Record::kHeader) s->has_header = true;
        v->OnRecord(rec);
        break;
    }
  }
  return FinishSummary(reader, s);
}

namespace {
// A profile file that does not yet hold its whole header record (see ListProfileFiles). A file
// that is not a profile at all (bad magic) is not one: reading it gives its own error.
bool HeaderIncomplete(const std::string& path) {
  FILE* f = fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  unsigned char buf[kFilePreambleBytes + 10];
  const size_t n = fread(buf, 1, sizeof(buf), f);
  struct stat st;
  const bool have_size = fstat(fileno(f), &st) == 0;
  fclose(f);
  if (!have_size) return false;
  const size_t magic = std::min(n, sizeof(kMagic));
  if (memcmp(buf, kMagic, magic) != 0) return false;  // not ours
  if (n < kFilePreambleBytes) return true;            // empty, or cut in the preamble
  uint64_t len = 0;
  size_t i = kFilePreambleBytes;
  for (int shift = 0; i < n && shift < 64; shift += 7) {
    const unsigned char b = buf[i++];
    len |= uint64_t(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return uint64_t(st.st_size) < i + len;  // the frame is cut
  }
  return i >= n && n < sizeof(buf);  // cut inside the first frame's length
}
}  // namespace

absl::StatusOr<std::vector<std::string>> ListProfileFiles(const std::string& dir) {
  std::vector<std::string> skipped;
  auto files = ListProfileFiles(dir, &skipped);
  for (const std::string& s : skipped) fprintf(stderr, "profanalyze: %s\n", s.c_str());
  return files;
}

absl::StatusOr<std::vector<std::string>> ListProfileFiles(const std::string& dir,
                                                          std::vector<std::string>* skipped) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    return absl::NotFoundError(absl::StrCat(dir, ": cannot open directory: ", strerror(errno)));
  }
  std::vector<std::string> files;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() > 3 && name.compare(name.size() - 3, 3, ".pb") == 0) {
      const std::string path = dir + "/" + name;
      // Only regular files (through symlinks): a FIFO would block the read, a directory or a
      // dangling link is no profile.
      struct stat st;
      if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
        skipped->push_back(absl::StrCat(path, ": not a regular file; skipped"));
        continue;
      }
      if (HeaderIncomplete(path)) {
        skipped->push_back(absl::StrCat(path,
                                        ": no complete header (its process ended before "
                                        "its first flush); skipped"));
      } else {
        files.push_back(path);
      }
    }
  }
  closedir(d);
  std::sort(skipped->begin(), skipped->end());
  if (files.empty()) {
    return absl::NotFoundError(absl::StrCat(
        dir, skipped->empty() ? ": no profile files (*.pb) in this directory"
                              : ": no profile file with a complete header in this directory"));
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace analyzer
}  // namespace profagent
