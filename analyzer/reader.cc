#include "analyzer/reader.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <unordered_map>
#include <cstring>

#include "absl/strings/str_cat.h"

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
  buf_.resize(len);
  size_t got = len == 0 ? 0 : fread(&buf_[0], 1, len, f_);
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

bool KindHasCorr(EventKind k) {
  return k == EV_LAUNCH || k == EV_MEMCPY || k == EV_MEMSET || k == EV_GRAPH_LAUNCH;
}

absl::Status VisitFile(const std::string& path, Visitor* v, FileSummary* summary) {
  FileSummary local;
  FileSummary* s = summary != nullptr ? summary : &local;
  s->path = path;
  auto reader_or = RecordReader::Open(path);
  if (!reader_or.ok()) return reader_or.status();
  RecordReader& reader = **reader_or;
  s->major = reader.major();
  s->minor = reader.minor();
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
    // event in it; once the case is set, parse the payload into the kept sub-message instead.
    google::protobuf::MessageLite* in_place = nullptr;
    if (first == 0x1a && rec.kind_case() == Record::kBatch) in_place = rec.mutable_batch();
    if (first == 0x22 && rec.kind_case() == Record::kDevice) in_place = rec.mutable_device();
    size_t payload_at = 1;
    uint64_t payload_len = 0;
    for (int shift = 0; in_place != nullptr && payload_at < frame.size() && shift < 35;
         shift += 7) {
      const uint8_t c = static_cast<uint8_t>(frame[payload_at++]);
      payload_len |= uint64_t(c & 0x7f) << shift;
      if ((c & 0x80) == 0) break;
    }
    const bool whole = in_place != nullptr && payload_at + payload_len == frame.size();
    if (whole ? !in_place->ParseFromArray(frame.data() + payload_at, int(payload_len))
              : !rec.ParseFromArray(frame.data(), int(frame.size()))) {
      s->frames = reader.records() - 1;
      return absl::DataLossError(absl::StrCat(path, ": offset ", at, ": corrupt record (",
                                              frame.size(), " bytes)"));
    }
    switch (rec.kind_case()) {
      case Record::kHeader:
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
  s->frames = reader.records();
  s->truncated = reader.truncated();
  s->warning = reader.warning();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ListProfileFiles(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    return absl::NotFoundError(absl::StrCat(dir, ": cannot open directory: ", strerror(errno)));
  }
  std::vector<std::string> files;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() > 3 && name.compare(name.size() - 3, 3, ".pb") == 0) {
      files.push_back(dir + "/" + name);
    }
  }
  closedir(d);
  if (files.empty()) {
    return absl::NotFoundError(absl::StrCat(dir, ": no profile files (*.pb) in this directory"));
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace analyzer
}  // namespace profagent
