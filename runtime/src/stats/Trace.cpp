// A Chrome/Perfetto trace of one rank: its ops, collectives and waits.
#include "stats/Trace.h"
#include "io/Json.h"
#include "io/Manifest.h"

#include <cinttypes>
#include <cstdio>

namespace autoshard::rt {

Trace::Trace(int64_t originNs) : origin(originNs) {
  // A step of a large model records thousands of events; start with room
  // for a few steps so that tracing rarely reallocates mid-run.
  recorded.reserve(1 << 14);
}

void Trace::record(const TraceEvent &event) {
  std::lock_guard<std::mutex> lock(mutex);
  recorded.push_back(event);
}

size_t Trace::size() const {
  std::lock_guard<std::mutex> lock(mutex);
  return recorded.size();
}

std::vector<TraceEvent> Trace::events() const {
  std::lock_guard<std::mutex> lock(mutex);
  return recorded;
}

namespace {

/// Nanoseconds as microseconds with three decimals, exactly: "12.345".
std::string micros(int64_t ns) {
  char text[32];
  const char *sign = ns < 0 ? "-" : "";
  uint64_t magnitude =
      ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  std::snprintf(text, sizeof text, "%s%" PRIu64 ".%03" PRIu64, sign,
                magnitude / 1000, magnitude % 1000);
  return text;
}

const char *trackName(TraceTrack track) {
  switch (track) {
  case TraceTrack::Main:
    return "main thread (compute)";
  case TraceTrack::Comm:
    return "communication thread";
  case TraceTrack::Offload:
    return "offload";
  }
  return "?";
}

} // namespace

std::string Trace::jsonEvents(int rank) const {
  std::lock_guard<std::mutex> lock(mutex);
  std::string out;
  out.reserve(recorded.size() * 160 + 512);
  // One event a line, objects on one line each; writeTraceFile puts the
  // ranks' lines into one array.
  JsonWriter json;
  auto add = [&]() {
    out += out.empty() ? "" : ",\n";
    out += json.take();
  };
  // A metadata event; `args` writes its args' members.
  auto metadata = [&](const char *name, int tid, auto args) {
    json.beginObject();
    json.key("name").string(name);
    json.key("ph").string("M");
    json.key("pid").integer(rank);
    json.key("tid").integer(tid);
    json.key("args").beginObject();
    args();
    json.end().end();
    add();
  };
  metadata("process_name", 0,
           [&] { json.key("name").string("rank " + std::to_string(rank)); });
  metadata("process_sort_index", 0,
           [&] { json.key("sort_index").integer(rank); });
  // The offload track only where there is offload traffic: most runs have
  // none, and an empty track would only take room in the viewer.
  bool offload = false;
  for (const TraceEvent &e : recorded)
    offload |= e.track == TraceTrack::Offload;
  for (TraceTrack track :
       {TraceTrack::Main, TraceTrack::Comm, TraceTrack::Offload}) {
    if (track == TraceTrack::Offload && !offload)
      continue;
    int tid = static_cast<int>(track);
    metadata("thread_name", tid,
             [&] { json.key("name").string(trackName(track)); });
    metadata("thread_sort_index", tid,
             [&] { json.key("sort_index").integer(tid); });
  }
  for (const TraceEvent &e : recorded) {
    json.beginObject();
    json.key("name").string(e.name);
    json.key("cat").string(e.category);
    json.key("ph").string("X");
    json.key("pid").integer(rank);
    json.key("tid").integer(static_cast<int>(e.track));
    json.key("ts").raw(micros(e.startNs - origin));
    json.key("dur").raw(micros(e.endNs - e.startNs));
    json.key("args").beginObject();
    auto count = [&](const char *key, int64_t value) {
      if (value >= 0)
        json.key(key).integer(value);
    };
    count("step", e.step);
    count("seq", e.seq);
    count("handle", e.handle);
    count("bytes", e.bytes);
    count("grid_axes_mask", e.mask);
    if (e.dtype)
      json.key("dtype").string(e.dtype);
    count("arg", e.arg);
    if (e.site) {
      json.key("op").string(e.site->op);
      if (!e.site->layer.empty())
        json.key("layer").string(e.site->layer);
      if (!e.site->loc.empty())
        json.key("loc").string(e.site->loc);
      if (!e.site->shapes.empty())
        json.key("shapes").string(e.site->shapes);
    }
    json.end().end();
    add();
  }
  return out;
}

void writeTraceFile(std::ostream &os, const std::vector<std::string> &ranks) {
  // The events of all ranks in one array, one event a line.
  JsonWriter json(JsonWriter::Layout::Spaced, /*indentWidth=*/0);
  json.beginObject();
  json.key("displayTimeUnit").string("ms");
  json.key("traceEvents").beginArray(JsonWriter::Layout::Lines);
  for (const std::string &events : ranks)
    if (!events.empty())
      json.raw(events);
  json.end().end();
  os << json.text() << "\n";
}

} // namespace autoshard::rt
