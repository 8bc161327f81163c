// A Chrome/Perfetto trace of one rank: its ops, collectives and waits.
#include "core/Trace.h"
#include "core/Manifest.h"
#include "core/Stats.h"

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
  const std::string pid = std::to_string(rank);
  std::string out;
  out.reserve(recorded.size() * 160 + 512);
  out += "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " + pid +
         ", \"tid\": 0, \"args\": {\"name\": \"rank " + pid + "\"}},\n";
  out += "{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": " + pid +
         ", \"tid\": 0, \"args\": {\"sort_index\": " + pid + "}}";
  // The offload track only where there is offload traffic: most runs have
  // none, and an empty track would only take room in the viewer.
  bool offload = false;
  for (const TraceEvent &e : recorded)
    offload |= e.track == TraceTrack::Offload;
  for (TraceTrack track :
       {TraceTrack::Main, TraceTrack::Comm, TraceTrack::Offload}) {
    if (track == TraceTrack::Offload && !offload)
      continue;
    std::string tid = std::to_string(static_cast<int>(track));
    out += ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " + pid +
           ", \"tid\": " + tid +
           ", \"args\": {\"name\": " + jsonString(trackName(track)) + "}}";
    out +=
        ",\n{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": " + pid +
        ", \"tid\": " + tid + ", \"args\": {\"sort_index\": " + tid + "}}";
  }
  for (const TraceEvent &e : recorded) {
    out += ",\n{\"name\": " + jsonString(e.name) +
           ", \"cat\": " + jsonString(e.category) +
           ", \"ph\": \"X\", \"pid\": " + pid +
           ", \"tid\": " + std::to_string(static_cast<int>(e.track)) +
           ", \"ts\": " + micros(e.startNs - origin) +
           ", \"dur\": " + micros(e.endNs - e.startNs) + ", \"args\": {";
    const char *separator = "";
    auto arg = [&](const char *key, const std::string &value) {
      out += separator;
      out += '"';
      out += key;
      out += "\": ";
      out += value;
      separator = ", ";
    };
    if (e.step >= 0)
      arg("step", std::to_string(e.step));
    if (e.seq >= 0)
      arg("seq", std::to_string(e.seq));
    if (e.handle >= 0)
      arg("handle", std::to_string(e.handle));
    if (e.bytes >= 0)
      arg("bytes", std::to_string(e.bytes));
    if (e.mask >= 0)
      arg("grid_axes_mask", std::to_string(e.mask));
    if (e.dtype)
      arg("dtype", jsonString(e.dtype));
    if (e.arg >= 0)
      arg("arg", std::to_string(e.arg));
    if (e.site) {
      arg("op", jsonString(e.site->op));
      if (!e.site->layer.empty())
        arg("layer", jsonString(e.site->layer));
      if (!e.site->loc.empty())
        arg("loc", jsonString(e.site->loc));
      if (!e.site->shapes.empty())
        arg("shapes", jsonString(e.site->shapes));
    }
    out += "}}";
  }
  return out;
}

void writeTraceFile(std::ostream &os, const std::vector<std::string> &ranks) {
  os << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  bool first = true;
  for (const std::string &events : ranks) {
    if (events.empty())
      continue;
    os << (first ? "" : ",\n") << events;
    first = false;
  }
  os << "\n]}\n";
}

} // namespace autoshard::rt
