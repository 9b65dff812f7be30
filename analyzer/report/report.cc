#include "analyzer/report/report.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "analyzer/reader.h"

namespace profagent {
namespace analyzer {
namespace {

std::string F(const Json& v, int prec = 3) {
  if (v.is_null()) return "-";
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  return absl::StrFormat("%.*f", prec, v.get<double>());
}

std::string Pct(const Json& v) {
  if (v.is_null()) return "-";
  return absl::StrFormat("%.1f%%", v.get<double>() * 100.0);
}

std::string Cell(const std::string& s) {
  return absl::StrReplaceAll(s, {{"|", "\\|"}, {"\n", " "}});
}

bool IdentChar(char c) { return absl::ascii_isalnum(c) || c == '_'; }

// A library's versioned (ABI) namespace: "__4", or a name with a run of 5 digits or more
// ("CUB_300001_SM_750", "THRUST_300001_SM_750_NS").
bool Versioned(absl::string_view seg) {
  if (seg.size() > 2 && seg[0] == '_' && seg[1] == '_' &&
      std::all_of(seg.begin() + 2, seg.end(), absl::ascii_isdigit)) {
    return true;
  }
  int run = 0;
  for (char c : seg) {
    run = absl::ascii_isdigit(c) ? run + 1 : 0;
    if (run >= 5) return true;
  }
  return false;
}

// ShortKernelName's pass: template arguments at depth >= `keep_depth` + 1 become "…", a
// qualified name keeps its last scope only ("a::b::c" is "b::c"), "(anonymous namespace)::"
// goes.
std::string ElideName(absl::string_view s, int keep_depth) {
  std::string out;
  int depth = 0;
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (c == '<') {
      ++depth;
      if (depth <= keep_depth) out += '<';
      if (depth == keep_depth + 1) out += "<…";
      ++i;
      continue;
    }
    if (c == '>' && depth > 0) {
      if (depth <= keep_depth + 1) out += '>';
      --depth;
      ++i;
      continue;
    }
    if (depth > keep_depth) {
      ++i;
      continue;
    }
    constexpr absl::string_view kAnon = "(anonymous namespace)::";
    if (c == '(' && absl::StartsWith(s.substr(i), kAnon)) {
      i += kAnon.size();
      continue;
    }
    if (IdentChar(c)) {
      // A qualified name "a::b::c": its segments, the last one the name.
      std::vector<absl::string_view> chain;
      size_t j = i;
      for (;;) {
        size_t k = j;
        while (k < s.size() && IdentChar(s[k])) ++k;
        chain.push_back(s.substr(j, k - j));
        j = k;
        if (chain.back() == "operator" || s.substr(k, 2) != "::" || k + 2 >= s.size() ||
            !IdentChar(s[k + 2])) {
          break;
        }
        j = k + 2;
      }
      // Its scope: the nearest segment before it that is no library's versioned namespace
      // (CCCL's CUB_300001_SM_750, libcu++'s __4).
      for (size_t q = chain.size() - 1; q-- > 0;) {
        if (!Versioned(chain[q])) {
          absl::StrAppend(&out, chain[q], "::");
          break;
        }
      }
      if (chain.back() == "operator") {  // operator<, operator(): copied as they are, up to '('
        const size_t from = j - chain.back().size();
        const size_t paren = s.find('(', j + 1);
        const size_t stop = paren == absl::string_view::npos ? s.size() : paren;
        absl::StrAppend(&out, s.substr(from, stop - from));
        i = stop;
        continue;
      }
      absl::StrAppend(&out, chain.back());
      i = j;
      continue;
    }
    out += c;
    ++i;
  }
  return out;
}

// A bandwidth in GB/s: 3 decimals, or 3 significant digits below 0.001 (not "0.000").
std::string Bw(const Json& v) {
  if (v.is_number() && v.get<double>() != 0 && std::fabs(v.get<double>()) < 0.001) {
    return absl::StrFormat("%.3g", v.get<double>());
  }
  return F(v);
}

std::string PlusMinus(const Json& ms) {
  if (ms["mean"].is_null()) return "-";
  return absl::StrCat(F(ms["mean"]), " ± ", F(ms["std"]));
}

void BucketTable(std::string* md, const Json& t) {
  if (t.empty()) {
    md->append("(no data)\n\n");
    return;
  }
  md->append("| bucket | ms/step | share |\n|---|---:|---:|\n");
  for (auto it = t.begin(); it != t.end(); ++it) {
    absl::StrAppend(md, "| ", Cell(it.key()), " | ", F(it.value()["ms"]), " | ",
                    Pct(it.value()["share"]), " |\n");
  }
  md->append("\n");
}

void KvTable(std::string* md, const Json& bins) {
  md->append("| KV length | steps | tokens | mean ms | p50 ms | p99 ms | tokens/s |\n"
             "|---|---:|---:|---:|---:|---:|---:|\n");
  for (const Json& b : bins) {
    std::string range = b["hi"].is_null() ? absl::StrCat(b["lo"].dump(), "+")
                                          : absl::StrCat(b["lo"].dump(), "-", b["hi"].dump());
    const Json& l = b["latency_ms"];
    absl::StrAppend(md, "| ", range, " | ", F(b["steps"]), " | ", F(b["tokens"]), " | ",
                    F(l["mean"]), " | ", F(l["p50"]), " | ", F(l["p99"]), " | ",
                    F(b["tokens_per_s"], 1), " |\n");
  }
  md->append("\n");
}

std::string StatsLine(const Json& st) {
  const Json& l = st["step_latency_ms"];
  return absl::StrCat(st["steps"].dump(), " steps, ", st["tokens"].dump(),
                      " tokens, step latency mean ", F(l["mean"]), " ms (p50 ", F(l["p50"]),
                      ", p90 ", F(l["p90"]), ", p99 ", F(l["p99"]), "), ",
                      F(st["tokens_per_s"], 1), " tokens/s over ", F(st["total_time_ms"]),
                      " ms");
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  FILE* f = fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return absl::InternalError(absl::StrCat(path, ": cannot write: ", strerror(errno)));
  }
  bool ok = fwrite(text.data(), 1, text.size(), f) == text.size();
  ok &= fclose(f) == 0;
  if (!ok) return absl::InternalError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

// Counts for `stats`.
class StatsVisitor : public Visitor {
 public:
  void OnHeader(const Header& h) override { header = h; }
  void OnString(uint32_t, const std::string&) override { ++strings; }
  void OnHostEvent(const HostEvent& e) override {
    ++host_kinds[EventKind_Name(e.ev->kind())];
    if (e.ev->kind() != EV_GRAPH_NODE) Span(e.start_ns, e.end_ns);  // bookkeeping, any time
  }
  void OnDeviceOp(const DeviceOpEvent& d) override {
    ++dev_kinds[DeviceOpKind_Name(d.op->kind())];
    Span(d.start_ns, d.end_ns);
  }
  void OnOther(const Record& r) override {
    switch (r.kind_case()) {
      case Record::kDrops: {
        uint64_t& d = drops[r.drops().thread()];
        d = std::max<uint64_t>(d, r.drops().count());
        break;
      }
      case Record::kFooter:
        footer = r.footer();
        break;
      case Record::kProcess:
        if (r.process().rank() >= 0) rank = r.process().rank();
        break;
      default:
        break;
    }
    const auto* field = Record::descriptor()->FindFieldByNumber(int(r.kind_case()));
    ++other[field != nullptr ? field->name() : std::string("unknown")];
  }
  void Span(uint64_t a, uint64_t b) {
    t0 = std::min(t0, a);
    t1 = std::max(t1, b);
  }

  Header header;
  int rank = -1;
  uint64_t strings = 0;
  std::map<std::string, uint64_t> host_kinds, dev_kinds, other;
  std::map<uint32_t, uint64_t> drops;
  Footer footer;
  uint64_t t0 = UINT64_MAX, t1 = 0;
};

std::string Counts(const std::map<std::string, uint64_t>& m) {
  std::vector<std::string> parts;
  for (const auto& kv : m) parts.push_back(absl::StrCat(kv.first, " ", kv.second));
  return absl::StrJoin(parts, ", ");
}

}  // namespace

// The straggler view's calls outside the measured steps (stragglers.outside_steps), if any.
std::string OutsideSteps(const Json& sg) {
  if (!sg.contains("outside_steps") || sg["outside_steps"].value("calls", uint64_t{0}) == 0) {
    return "";
  }
  const Json& out = sg["outside_steps"];
  std::string waits;
  for (auto it = out["wait_ms_by_rank"].begin(); it != out["wait_ms_by_rank"].end(); ++it) {
    absl::StrAppend(&waits, waits.empty() ? "" : ", ", "rank ", it.key(), " ", F(it.value()));
  }
  return absl::StrCat(
      "; ", out["calls"].dump(),
      " calls outside the measured steps (start-up, warm-up) left out (their waits, "
      "ms: ",
      waits.empty() ? "-" : waits, ")");
}

// The NCCL calls captured into CUDA graphs (collectives.captured_calls), when there are any.
void CapturedNote(const Json& c, std::string* md) {
  if (!c.contains("captured_calls") || c["captured_calls"].empty()) return;
  std::string list;
  for (auto it = c["captured_calls"].begin(); it != c["captured_calls"].end(); ++it) {
    absl::StrAppend(&list, list.empty() ? "" : ", ", it.key(), " ", it.value().dump());
  }
  const Json& ig = c.contains("in_graph") ? c["in_graph"] : Json::object();
  const uint64_t matched = ig.value("kernels_matched", uint64_t{0});
  const uint64_t unmatched = ig.value("kernels_unmatched", uint64_t{0});
  absl::StrAppend(md, "NCCL calls captured into CUDA graphs: ", list,
                  ". They ran at the graph launches");
  if (matched == 0 && unmatched == 0) {
    md->append(
        ", whose executions were not seen one by one (a graph launch is timed whole without "
        "CUPTI): they are not in the collectives table, nor in the waits and stragglers.\n\n");
  } else {
    md->append(
        ", counted from their kernels (device time): in their calls' rows, with their sizes, "
        "when a kernel is tied to its captured call, else in rows of size \"in graph\" (size "
        "unknown). ");
    absl::StrAppend(md, matched,
                    " of their kernels were tied to their captured call (by capture order and "
                    "launch count, per rank) and are in the waits and stragglers below",
                    unmatched > 0 ? absl::StrCat("; ", unmatched,
                                                 " could not be (a graph's NCCL kernels that do "
                                                 "not pair with its captured calls) and are not")
                                  : std::string(),
                    ".\n\n");
  }
}

std::string RenderMarkdown(const Json& s) {
  std::string md;
  const Json& meta = s["meta"];
  const Json& st = s["stats"];
  md += "# profagent report\n\n## Summary\n\n";
  std::vector<std::string> ranks;
  for (const Json& r : meta["ranks"]) ranks.push_back(r.dump());
  std::vector<std::string> hosts;
  for (const Json& h : meta["hosts"]) hosts.push_back(h.get<std::string>());
  // world_size 0: no rank source (a single process without MPI/NCCL/launcher rank).
  const std::string world = meta["world_size"] == 0
                                ? std::string("world size not recorded")
                                : absl::StrCat("world size ", meta["world_size"].dump());
  absl::StrAppend(&md, "- ranks: ", absl::StrJoin(ranks, ", "), " (", world, "), hosts: ",
                  absl::StrJoin(hosts, ", "), "\n");
  absl::StrAppend(&md, "- GPU timing: ", meta["gpu_timing"].get<std::string>(),
                  meta["gpu_timing_reason"].get<std::string>().empty()
                      ? std::string()
                      : absl::StrCat(" (", meta["gpu_timing_reason"].get<std::string>(), ")"),
                  "\n");
  absl::StrAppend(&md, "- steps from: ", meta["options"]["step_source"].get<std::string>(),
                  " (reference rank ", meta["options"]["reference_rank"].dump(),
                  "); warm-up runs and steps excluded\n");
  // What the agent was told to sample: the figures cover those steps only.
  const Json& cfg = meta["config"];
  if (cfg.contains("PROFAGENT_SCHEDULE") && cfg["PROFAGENT_SCHEDULE"].is_string() &&
      !cfg["PROFAGENT_SCHEDULE"].get<std::string>().empty()) {
    absl::StrAppend(&md, "- recorded under PROFAGENT_SCHEDULE ",
                    cfg["PROFAGENT_SCHEDULE"].get<std::string>(),
                    ": only the steps of its active phases (the agent records nothing during "
                    "wait and warm-up steps)\n");
  }
  if (cfg.contains("PROFAGENT_CAPTURE") && cfg["PROFAGENT_CAPTURE"].is_string() &&
      cfg["PROFAGENT_CAPTURE"] != "all" && !cfg["PROFAGENT_CAPTURE"].get<std::string>().empty()) {
    absl::StrAppend(
        &md, "- recorded under PROFAGENT_CAPTURE=", cfg["PROFAGENT_CAPTURE"].get<std::string>(),
        ": only between cudaProfilerStart and cudaProfilerStop\n");
  }
  absl::StrAppend(&md, "- ", StatsLine(st), "\n");
  absl::StrAppend(&md, "- GPU busy per step: ", F(st["gpu_busy_ms_per_step"]), " ms\n");
  absl::StrAppend(&md, "- records dropped by the agent: ", meta["drops"].dump(), "\n\n");

  md += "## Model buckets (average per step)\n\n";
  BucketTable(&md, s["buckets_model_avg_ms"]);
  md += "## Engine buckets (average per step)\n\n";
  BucketTable(&md, s["buckets_engine_avg_ms"]);

  md += "## Runs\n\n";
  if (s["runs"].empty()) {
    md += "(no runs)\n\n";
  } else {
    md += "| # | label | warm-up | steps | tokens | mean ms | p50 ms | p99 ms | tokens/s |\n"
          "|---:|---|---|---:|---:|---:|---:|---:|---:|\n";
    for (const Json& r : s["runs"]) {
      const Json& rs = r["stats"];
      const Json& l = rs["step_latency_ms"];
      const bool open = r.contains("open") && r["open"].get<bool>();
      absl::StrAppend(&md, "| ", r["index"].dump(), " | ", Cell(r["label"].get<std::string>()),
                      open ? " (open at the end)" : "", " | ", r["warmup"].get<bool>() ? "yes" : "no", " | ", F(rs["steps"]),
                      " | ", F(rs["tokens"]), " | ", F(l["mean"]), " | ", F(l["p50"]), " | ",
                      F(l["p99"]), " | ", F(rs["tokens_per_s"], 1), " |\n");
    }
    md += "\n";
    const Json& ra = s["runs_aggregate"];
    absl::StrAppend(&md, "### Across runs (mean ± std over ", ra["runs"].dump(),
                    " non-warm-up runs)\n\n| metric | mean ± std |\n|---|---:|\n");
    for (auto it = ra["metrics"].begin(); it != ra["metrics"].end(); ++it) {
      absl::StrAppend(&md, "| ", it.key(), " | ", PlusMinus(it.value()), " |\n");
    }
    for (const char* key : {"buckets_model_avg_ms", "buckets_engine_avg_ms"}) {
      for (auto it = ra[key].begin(); it != ra[key].end(); ++it) {
        absl::StrAppend(&md, "| ", key[8] == 'm' ? "model " : "engine ", Cell(it.key()), " ms | ",
                        PlusMinus(it.value()), " |\n");
      }
    }
    md += "\n";
  }

  md += "## Decode length bins\n\n";
  KvTable(&md, s["decode_length_buckets"]);

  md += "## Top kernels\n\n";
  if (!s["kernels"].empty() || s["kernels_scope"]["outside_ops"].get<uint64_t>() > 0) {
    const Json& ks = s["kernels_scope"];
    if (ks["scope"] == "measured steps") {
      std::vector<std::string> whole;
      if (ks.contains("ranks_whole")) {
        for (const Json& r : ks["ranks_whole"]) whole.push_back(r.dump());
      }
      absl::StrAppend(
          &md,
          "Every rank, over its measured steps (first start to last end): what the GPUs ran. "
          "Left out: ",
          ks["outside_ops"].dump(), ks["outside_ops"].get<uint64_t>() == 1 ? " op, " : " ops, ",
          F(ks["outside_ms"]), " ms of device time outside them (start-up, warm-up).",
          whole.empty()
              ? std::string()
              : absl::StrCat(" Rank", whole.size() > 1 ? "s " : " ", absl::StrJoin(whole, ", "),
                             " marked no measured step: counted whole, start-up and "
                             "warm-up included."),
          "\n\n");
    } else {
      md += "Every rank, the whole profile (no measured steps): what the GPUs ran.\n\n";
    }
  }
  if (s["kernels"].empty()) {
    md += s["kernels_scope"]["outside_ops"].get<uint64_t>() > 0
              ? "(no device ops in the measured steps)\n\n"
              : "(no device ops)\n\n";
  } else {
    md += "| kernel | bucket | count | total ms | mean us | p50 us | p99 us | share |\n"
          "|---|---|---:|---:|---:|---:|---:|---:|\n";
    constexpr size_t kKernelRows = 25;
    // Long names shortened; rows that would read the same numbered in table order.
    // (The same kernel in two buckets keeps one number.)
    std::vector<std::string> shown, full_names;
    std::map<std::string, std::vector<std::string>> fulls;  // shortened -> its full names
    bool shortened = false;
    for (const Json& k : s["kernels"]) {
      if (shown.size() == kKernelRows) break;
      const std::string& full = k["name"].get_ref<const std::string&>();
      shown.push_back(ShortKernelName(full));
      full_names.push_back(full);
      shortened |= shown.back() != full;
      auto& v = fulls[shown.back()];
      if (shown.back() != full && std::find(v.begin(), v.end(), full) == v.end()) {
        v.push_back(full);
      }
    }
    for (size_t i = 0; i < shown.size(); ++i) {
      const auto& v = fulls[shown[i]];
      if (v.size() < 2) continue;
      const size_t n = size_t(std::find(v.begin(), v.end(), full_names[i]) - v.begin()) + 1;
      absl::StrAppend(&shown[i], " [", n, "]");
    }
    size_t n = 0;
    for (const Json& k : s["kernels"]) {
      if (++n > kKernelRows) break;
      absl::StrAppend(&md, "| ", Cell(shown[n - 1]), " | ", Cell(k["bucket"].get<std::string>()),
                      " | ", F(k["count"]), " | ", F(k["total_ms"]), " | ", F(k["mean_us"]), " | ",
                      F(k["p50_us"]), " | ", F(k["p99_us"]), " | ", Pct(k["share"]), " |\n");
    }
    if (s["kernels"].size() > kKernelRows) {
      absl::StrAppend(&md, "| (", s["kernels"].size() - kKernelRows,
                      " more kernels: summary.json `kernels`) | | | | | | | |\n");
    }
    md += "\n";
    if (shortened) {
      md +=
          "Names over 100 characters are shortened (namespaces, parameters and nested template "
          "arguments left out); summary.json and ops.csv have them in full.\n\n";
    }
    // Under CUDA-event or host timing a graph launch is one op: its kernels are not broken down.
    const std::string timing = s["meta"]["gpu_timing"].get<std::string>();
    const bool whole = timing == "events" || timing == "host" || timing == "mixed";
    for (const Json& k : s["kernels"]) {
      if (whole && absl::StartsWith(k["name"].get<std::string>(), "cudaGraphLaunch")) {
        md +=
            "`cudaGraphLaunch` rows are whole graph launches (CUDA-event timing times a graph "
            "as one op, host timing by its launch call); CUPTI timing reports each kernel a "
            "graph runs.\n\n";
        break;
      }
    }
  }

  md += "## Collectives\n\n";
  const Json& c = s["collectives"];
  if (c["ops"].empty()) {
    md += "(no collectives)\n\n";
    CapturedNote(c, &md);
  } else {
    md += "| lib | op | size | ranks | calls | bytes | mean us | timed on | algbw GB/s | "
          "busbw GB/s |\n"
          "|---|---|---|---:|---:|---:|---:|---|---:|---:|\n";
    for (const Json& o : c["ops"]) {
      absl::StrAppend(&md, "| ", o["lib"].get<std::string>(), " | ",
                      Cell(o["op"].get<std::string>()), " | ", o["size_class"].get<std::string>(),
                      " | ", F(o["ranks"]), " | ", F(o["count"]), " | ", F(o["bytes"]), " | ",
                      F(o["mean_us"]), " | ", o["time_source"].get<std::string>(), " | ",
                      Bw(o["algbw_gbps"]), " | ", Bw(o["busbw_gbps"]), " |\n");
    }
    md +=
        "\nEvery rank, every call. Time of a call: its kernel's device time when the kernel is "
        "known (NCCL), else the host call (MPI; an NCCL call only enqueues: an NCCL row's mean "
        "and bandwidths are its kernel-timed calls', none without). An NCCL kernel "
        "starts when its rank arrives and ends after the last one did: its time, and the "
        "bandwidths, include the wait for late ranks (the waits below).\n\n";
    CapturedNote(c, &md);
    const Json& sg = c["stragglers"];
    absl::StrAppend(
        &md, "Stragglers: ", sg["calls_matched"].dump(),
        " calls matched across ranks; arrival skew mean ", F(sg["skew_us"]["mean"]), " us, p99 ",
        F(sg["skew_us"]["p99"]), " us; straggler (the others waited for it longest): rank ",
        sg["straggler"].is_null() ? std::string("-") : sg["straggler"].dump(),
        "; most frequent last arriver: rank ",
        sg["most_frequent_last_arriver"].is_null() ? std::string("-")
                                                   : sg["most_frequent_last_arriver"].dump(),
        sg.value("calls_incomplete", uint64_t{0}) > 0
            ? absl::StrCat("; ", sg["calls_incomplete"].dump(),
                           " calls seen on only some of their communicator's ranks "
                           "left out")
            : std::string(),
        OutsideSteps(sg), "\n\n");
    if (!sg["wait_ms_by_rank"].empty()) {
      md += "| rank | wait ms | others' wait for it ms | last arrivals |\n|---:|---:|---:|---:|\n";
      for (auto it = sg["wait_ms_by_rank"].begin(); it != sg["wait_ms_by_rank"].end(); ++it) {
        absl::StrAppend(&md, "| ", it.key(), " | ", F(it.value()), " | ",
                        sg["wait_caused_ms_by_rank"].contains(it.key())
                            ? F(sg["wait_caused_ms_by_rank"][it.key()])
                            : std::string("0"),
                        " | ",
                        sg["last_arriver_counts"].contains(it.key())
                            ? sg["last_arriver_counts"][it.key()].dump()
                            : std::string("0"),
                        " |\n");
      }
      md += "\n";
    }
    // Per GPU, when a process drives several (one communicator per GPU in one process).
    std::map<std::string, int> gpus_of_rank;
    for (auto it = sg["wait_ms_by_gpu"].begin(); it != sg["wait_ms_by_gpu"].end(); ++it) {
      ++gpus_of_rank[it.key().substr(0, it.key().find(':'))];
    }
    bool several = false;
    for (const auto& g : gpus_of_rank) several = several || g.second > 1;
    if (several) {
      auto gpu_or_dash = [&](const char* key) {
        return sg.contains(key) && sg[key].is_string() ? sg[key].get<std::string>()
                                                       : std::string("-");
      };
      absl::StrAppend(&md, "Per GPU (rank:device; straggler ", gpu_or_dash("straggler_gpu"),
                      ", most frequent last arriver ",
                      gpu_or_dash("most_frequent_last_arriver_gpu"),
                      "):\n\n| gpu | wait ms | others' wait for it ms | last arrivals |\n"
                      "|---|---:|---:|---:|\n");
      const Json& caused = sg.contains("wait_caused_ms_by_gpu") ? sg["wait_caused_ms_by_gpu"]
                                                                 : Json::object();
      for (auto it = sg["wait_ms_by_gpu"].begin(); it != sg["wait_ms_by_gpu"].end(); ++it) {
        absl::StrAppend(&md, "| ", it.key(), " | ", F(it.value()), " | ",
                        caused.contains(it.key()) ? F(caused[it.key()]) : std::string("0"), " | ",
                        sg["last_arriver_gpu_counts"].contains(it.key())
                            ? sg["last_arriver_gpu_counts"][it.key()].dump()
                            : std::string("0"),
                        " |\n");
      }
      md += "\n";
    }
  }

  md += "## Host overhead\n\n";
  const Json& h = s["host"];
  absl::StrAppend(
      &md, "Reference rank ", meta["options"]["reference_rank"].dump(), ", its whole profile",
      h["longest_gaps"].empty() ? "" : "; the longest idle gaps are every rank's", ".\n\n");
  absl::StrAppend(&md, "- wall ", F(h["wall_ms"]), " ms, GPU busy ", F(h["gpu_busy_ms"]),
                  " ms (", Pct(h["gpu_busy_share"]), ")\n");
  absl::StrAppend(&md, "- idle gaps between device work: ", h["idle_gaps"]["count"].dump(),
                  ", total ", F(h["idle_gaps"]["total_ms"]), " ms, p50 ",
                  F(h["idle_gaps"]["gap_us"]["p50"]), " us, max ",
                  F(h["idle_gaps"]["gap_us"]["max"]), " us\n");
  absl::StrAppend(&md, "- launch to start: mean ", F(h["launch_to_start_us"]["mean"]),
                  " us, p50 ", F(h["launch_to_start_us"]["p50"]), " us, p99 ",
                  F(h["launch_to_start_us"]["p99"]), " us\n\n");
  if (!h["api"].empty()) {
    md += "| host API | calls | timed | total ms | mean us |\n|---|---:|---:|---:|---:|\n";
    size_t n = 0;
    bool sampled = false;
    constexpr size_t kApiRows = 15;
    for (const Json& a : h["api"]) {
      sampled |= a["timed"] != a["count"];
      if (++n > kApiRows) continue;
      absl::StrAppend(&md, "| ", Cell(a["name"].get<std::string>()), " | ", F(a["count"]), " | ",
                      F(a["timed"]), " | ", F(a["total_ms"]), " | ", F(a["mean_us"]), " |\n");
    }
    if (n > kApiRows) {
      absl::StrAppend(&md, "| (", n - kApiRows, " more APIs: summary.json `host.api`) | | | | |\n");
    }
    md += "\n";
    if (sampled) {
      md += "Launch calls are timed on 1 in N (PROFAGENT_LAUNCH_API_SAMPLE): their total is the "
            "timed calls' mean times all calls.\n\n";
    }
  }
  if (!h["longest_gaps"].empty()) {
    md += "Longest idle gaps:\n\n";
    for (const Json& g : h["longest_gaps"]) {
      absl::StrAppend(&md, "- rank ", g["rank"].dump(), " device ", g["device"].dump(), " at ",
                      F(g["at_ms"]), " ms: ", F(g["gap_us"]), " us before `",
                      ShortKernelName(g["next_kernel"].get<std::string>()), "`");
      if (!g["stack"].empty()) {
        std::vector<std::string> fr;
        for (const Json& f : g["stack"]) fr.push_back(f.get<std::string>());
        absl::StrAppend(&md, "; host stack: ", absl::StrJoin(fr, " <- "));
      }
      md += "\n";
    }
    md += "\n";
  }

  md += "## Memory\n\n";
  if (s["memory"]["devices"].empty()) {
    md += "(no allocations recorded)\n\n";
  } else {
    md += "| rank | device | allocs | frees | peak bytes | peak at ms | final bytes |\n"
          "|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const Json& d : s["memory"]["devices"]) {
      absl::StrAppend(&md, "| ", d["rank"].dump(), " | ", d["device"].dump(), " | ",
                      d["allocs"].dump(), " | ", d["frees"].dump(), " | ",
                      d["peak_bytes"].dump(), " | ", F(d["peak_at_ms"]), " | ",
                      d["final_bytes"].dump(), " |\n");
    }
    md += "\n";
  }

  md += "## Warnings\n\n";
  if (meta["warnings"].empty()) {
    md += "none\n";
  } else {
    for (const Json& w : meta["warnings"]) absl::StrAppend(&md, "- ", w.get<std::string>(), "\n");
  }
  return md;
}

std::string ShortSummary(const Json& s) {
  std::string out;
  const Json& meta = s["meta"];
  absl::StrAppend(&out, "profanalyze report: ", meta["files"].size(), " file(s), ranks ",
                  meta["ranks"].dump(), ", GPU timing ", meta["gpu_timing"].get<std::string>(),
                  "\n");
  absl::StrAppend(&out, "  ", StatsLine(s["stats"]), "\n");
  std::vector<std::string> top;
  for (auto it = s["buckets_model_avg_ms"].begin(); it != s["buckets_model_avg_ms"].end(); ++it) {
    top.push_back(absl::StrCat(it.key(), " ", Pct(it.value()["share"])));
  }
  if (!top.empty()) absl::StrAppend(&out, "  model buckets: ", absl::StrJoin(top, ", "), "\n");
  if (!meta["warnings"].empty()) {
    absl::StrAppend(&out, "  ", meta["warnings"].size(), " warning(s), first: ",
                    meta["warnings"][0].get<std::string>(), "\n");
  }
  return out;
}

absl::Status RunReport(const std::string& dir, const std::string& out_dir,
                       const ReportOptions& options, std::string* printed) {
  std::vector<std::string> skipped;
  auto files = ListProfileFiles(dir, &skipped);
  if (!files.ok()) return files.status();
  if (mkdir(out_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::InternalError(absl::StrCat(out_dir, ": cannot create: ", strerror(errno)));
  }
  const std::string csv = out_dir + "/ops.csv";
  auto summary = BuildSummary(*files, options, csv);
  if (!summary.ok()) return summary.status();
  for (const std::string& s : skipped) (*summary)["meta"]["warnings"].push_back(s);
  // File paths are bytes, not necessarily UTF-8: a stray byte becomes U+FFFD (nlohmann's
  // default handler throws, which ended the program).
  absl::Status s = WriteText(out_dir + "/summary.json",
                             summary->dump(2, ' ', false, Json::error_handler_t::replace) + "\n");
  if (s.ok()) s = WriteText(out_dir + "/report.md", RenderMarkdown(*summary));
  if (!s.ok()) return s;
  if (printed != nullptr) {
    *printed = ShortSummary(*summary);
    absl::StrAppend(printed, "  wrote ", out_dir, "/summary.json, ", out_dir, "/report.md, ", csv,
                    "\n");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> RunStats(const std::string& path) {
  std::vector<std::string> files;
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    auto l = ListProfileFiles(path);
    if (!l.ok()) return l.status();
    files = *l;
  } else {
    files.push_back(path);
  }
  std::string out;
  for (const auto& f : files) {
    StatsVisitor v;
    FileSummary fs;
    absl::Status s = VisitFile(f, &v, &fs);
    if (!s.ok()) return s;
    int rank = v.rank >= 0 ? v.rank : v.header.rank();
    absl::StrAppend(&out, f, ": schema ", fs.major, ".", fs.minor, ", rank ", rank, ", host ",
                    v.header.hostname().empty() ? "?" : v.header.hostname(), ", pid ",
                    v.header.pid(), ", agent ",
                    v.header.agent_version().empty() ? "?" : v.header.agent_version(), "\n");
    absl::StrAppend(&out, "  records: ", fs.frames, " frames; strings ", v.strings,
                    (v.other.empty() ? "" : "; "), Counts(v.other), "\n");
    absl::StrAppend(&out, "  host events: ", fs.host_events,
                    v.host_kinds.empty() ? "" : " (", Counts(v.host_kinds),
                    v.host_kinds.empty() ? "" : ")", "\n");
    absl::StrAppend(&out, "  device ops: ", fs.device_ops, v.dev_kinds.empty() ? "" : " (",
                    Counts(v.dev_kinds), v.dev_kinds.empty() ? "" : ")", "\n");
    uint64_t drops = 0;
    for (const auto& d : v.drops) drops += d.second;
    drops = std::max<uint64_t>(drops, v.footer.dropped());
    absl::StrAppend(&out, "  drops: ", drops, "\n");
    if (v.t0 <= v.t1) {
      absl::StrAppend(&out, "  time span: ", absl::StrFormat("%.3f", double(v.t1 - v.t0) / 1e6),
                      " ms\n");
    } else {
      absl::StrAppend(&out, "  time span: - (no timed events)\n");
    }
    if (fs.truncated) {
      absl::StrAppend(&out, "  end: TRUNCATED: ", fs.warning, "\n");
    } else if (fs.has_footer) {
      // (Finished with a footer: how the process ended is the reason, a crash included.)
      absl::StrAppend(&out, "  end: finished (",
                      v.footer.reason().empty() ? "footer" : v.footer.reason(), ", ",
                      v.footer.records(), " records written",
                      v.footer.unrecorded_calls() > 0
                          ? absl::StrCat("; ", v.footer.unrecorded_calls(),
                                         " calls made while finishing it not recorded")
                          : std::string(),
                      ")\n");
    } else {
      absl::StrAppend(&out, "  end: no footer (the process ended abnormally)\n");
    }
  }
  return out;
}

void AddReportCommands(CLI::App& app, int* exit_code) {
  struct ReportArgs {
    std::string dir, out, kv_edges, ranks, step_pattern, run_pattern;
    ReportOptions opt;
  };
  auto args = std::make_shared<ReportArgs>();
  CLI::App* rep = app.add_subcommand("report", "write summary.json, report.md and ops.csv");
  rep->add_option("dir", args->dir, "profile directory (rank*.pb files)")->required();
  rep->add_option("-o,--out", args->out, "output directory (default: DIR)");
  rep->add_option("--rules", args->opt.rules_file, "bucket rules file (see RULES.md)");
  CLI::Option* kv_edges = rep->add_option("--kv-edges", args->kv_edges,
                                          "KV bin edges, e.g. 0,512,1024 (last bin open)");
  rep->add_option("--warmup-runs", args->opt.warmup_runs, "treat the first N runs as warm-up")
      ->check(CLI::Range(0, INT_MAX));
  rep->add_option("--step-pattern", args->step_pattern,
                  "re-derive steps from NVTX ranges matching this regex");
  rep->add_option("--run-pattern", args->run_pattern,
                  "re-derive runs from NVTX ranges matching this regex");
  CLI::Option* kv_reduce =
      rep->add_option("--kv-reduce", args->opt.kv_reduce, "mean|max|p50|p90|sum for kv=a,b lists")
          ->check(CLI::IsMember({"mean", "max", "p50", "p90", "sum"}));
  CLI::Option* ranks =
      rep->add_option("--ranks", args->ranks, "ranks to read, e.g. 0,2-3 (default: all)");
  rep->add_option("--threads", args->opt.threads, "reader threads (default: hardware)")
      ->check(CLI::Range(0, 4096));
  rep->callback([args, exit_code, kv_reduce, kv_edges, ranks]() {
    ReportOptions opt = args->opt;
    opt.kv_reduce_explicit = kv_reduce->count() > 0;
    auto fail = [exit_code](const absl::Status& s) {
      fprintf(stderr, "profanalyze report: %s\n", std::string(s.message()).c_str());
      *exit_code = 2;
    };
    if (kv_edges->count() > 0) {  // given, even empty: an empty list is an error
      auto e = ParseKvEdges(args->kv_edges);
      if (!e.ok()) return fail(e.status());
      opt.kv_edges = *e;
    }
    if (ranks->count() > 0) {
      auto r = ParseRankList(args->ranks);
      if (!r.ok()) return fail(r.status());
      opt.ranks = *r;
    }
    if (!args->step_pattern.empty()) {
      opt.step_pattern = args->step_pattern;
      opt.patterns_explicit = true;
    }
    if (!args->run_pattern.empty()) {
      opt.run_pattern = args->run_pattern;
      opt.patterns_explicit = true;
    }
    std::string printed;
    absl::Status s = RunReport(args->dir, args->out.empty() ? args->dir : args->out, opt,
                               &printed);
    if (!s.ok()) return fail(s);
    fputs(printed.c_str(), stdout);
    *exit_code = 0;
  });

  auto stats_path = std::make_shared<std::string>();
  CLI::App* stats = app.add_subcommand("stats", "record counts, drops, time span, truncation");
  stats->add_option("path", *stats_path, "a rank file or a profile directory")->required();
  stats->callback([stats_path, exit_code]() {
    auto out = RunStats(*stats_path);
    if (!out.ok()) {
      fprintf(stderr, "profanalyze stats: %s\n", std::string(out.status().message()).c_str());
      *exit_code = 2;
      return;
    }
    fputs(out->c_str(), stdout);
    *exit_code = 0;
  });
}

std::string ShortKernelName(const std::string& name, size_t max_len) {
  if (name.size() <= max_len) return name;
  absl::string_view s = name;
  absl::ConsumePrefix(&s, "void ");
  // The parameter list: the parenthesized group that ends the name.
  absl::string_view params;
  if (absl::EndsWith(s, ")")) {
    int depth = 0;
    for (size_t i = s.size(); i-- > 0;) {
      if (s[i] == ')') ++depth;
      if (s[i] == '(' && --depth == 0) {
        params = s.substr(i);
        s = s.substr(0, i);
        break;
      }
    }
  }
  const std::string tail = params.empty() ? "" : params == "()" ? "()" : "(…)";
  std::string out = ElideName(s, 1) + tail;
  if (out.size() > max_len + max_len / 5) out = ElideName(s, 0) + tail;
  return out;
}

}  // namespace analyzer
}  // namespace profagent
