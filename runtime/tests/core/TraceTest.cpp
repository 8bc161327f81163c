// The Chrome/Perfetto trace: events, their JSON, and the file around them.
#include "stats/Trace.h"
#include "io/Manifest.h"

#include <gtest/gtest.h>

#include <sstream>

using namespace autoshard::rt;

namespace {

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

TEST(TraceTest, EventsAreCompleteEventsInMicroseconds) {
  Trace trace(/*originNs=*/1000);
  TraceEvent compute;
  compute.name = "linear_fwd";
  compute.category = "compute";
  compute.startNs = 2500;
  compute.endNs = 3750;
  trace.record(compute);
  TraceEvent comm;
  comm.name = "bucket_all_reduce";
  comm.category = "comm";
  comm.track = TraceTrack::Comm;
  comm.startNs = 500; // before the origin: a negative timestamp
  comm.endNs = 1001500;
  comm.seq = 4;
  comm.handle = 2;
  comm.bytes = 4096;
  comm.mask = 1;
  comm.dtype = "bf16";
  trace.record(comm);
  EXPECT_EQ(trace.size(), 2u);

  std::string json = trace.jsonEvents(3);
  for (const char *expected :
       {"{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 3, \"tid\": 0, "
        "\"args\": {\"name\": \"rank 3\"}}",
        "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 3, \"tid\": 1, "
        "\"args\": {\"name\": \"main thread (compute)\"}}",
        "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 3, \"tid\": 2, "
        "\"args\": {\"name\": \"communication thread\"}}",
        "{\"name\": \"linear_fwd\", \"cat\": \"compute\", \"ph\": \"X\", "
        "\"pid\": 3, \"tid\": 1, \"ts\": 1.500, \"dur\": 1.250, \"args\": {}}",
        "{\"name\": \"bucket_all_reduce\", \"cat\": \"comm\", \"ph\": \"X\", "
        "\"pid\": 3, \"tid\": 2, \"ts\": -0.500, \"dur\": 1001.000, \"args\": "
        "{\"seq\": 4, \"handle\": 2, \"bytes\": 4096, \"grid_axes_mask\": 1, "
        "\"dtype\": \"bf16\"}}"})
    EXPECT_TRUE(contains(json, expected)) << "missing " << expected << " in\n"
                                          << json;
  EXPECT_EQ(json.back(), '}') << "no trailing separator";
}

// asrt_op_site's source op: its name, layer, location and shapes as args,
// each only where the compiler knew it.
TEST(TraceTest, EventsNameTheirSourceOp) {
  OpSite linear{"train.linear", "h.0", "gpt.mlir:16",
                "8x16xf32,64x16xf32->8x64xf32"};
  OpSite relu{"train.relu", "", "", "8x64xf32->8x64xf32"};
  Trace trace(0);
  TraceEvent e;
  e.name = "linear_fwd";
  e.category = "compute";
  e.endNs = 1000;
  e.site = &linear;
  trace.record(e);
  e.name = "relu_fwd";
  e.site = &relu;
  trace.record(e);
  std::string json = trace.jsonEvents(0);
  EXPECT_TRUE(contains(
      json, "\"args\": {\"op\": \"train.linear\", \"layer\": \"h.0\", "
            "\"loc\": \"gpt.mlir:16\", \"shapes\": "
            "\"8x16xf32,64x16xf32->8x64xf32\"}}"))
      << json;
  EXPECT_TRUE(contains(json, "\"args\": {\"op\": \"train.relu\", "
                             "\"shapes\": \"8x64xf32->8x64xf32\"}}"))
      << json;
}

TEST(TraceTest, TheOffloadTrackAppearsWithItsEvents) {
  Trace trace(0);
  TraceEvent compute;
  compute.name = "relu_fwd";
  compute.endNs = 5;
  trace.record(compute);
  EXPECT_EQ(trace.jsonEvents(0).find("\"tid\": 3"), std::string::npos)
      << "an offload track without offload events";

  TraceEvent read;
  read.name = "nvme_read";
  read.category = "offload";
  read.track = TraceTrack::Offload;
  read.startNs = 1000;
  read.endNs = 3000;
  read.bytes = 64;
  read.arg = 7;
  trace.record(read);
  std::string json = trace.jsonEvents(1);
  for (const char *expected :
       {"{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 3, "
        "\"args\": {\"name\": \"offload\"}}",
        "{\"name\": \"nvme_read\", \"cat\": \"offload\", \"ph\": \"X\", "
        "\"pid\": 1, \"tid\": 3, \"ts\": 1.000, \"dur\": 2.000, \"args\": "
        "{\"bytes\": 64, \"arg\": 7}}"})
    EXPECT_TRUE(contains(json, expected)) << "missing " << expected << " in\n"
                                          << json;
}

TEST(TraceTest, TheFileJoinsTheRanks) {
  Trace zero(0), one(0);
  TraceEvent step;
  step.name = "step";
  step.category = "step";
  step.step = 1;
  step.endNs = 10;
  zero.record(step);
  one.record(step);
  std::ostringstream file;
  writeTraceFile(file, {zero.jsonEvents(0), "", one.jsonEvents(1)});
  std::string text = file.str();
  EXPECT_EQ(text.rfind("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n", 0),
            0u);
  EXPECT_TRUE(contains(text, "\"args\": {\"step\": 1}},\n{\"name\": "
                             "\"process_name\", \"ph\": \"M\", \"pid\": 1"))
      << text;
  EXPECT_EQ(text.substr(text.size() - 4), "\n]}\n");
}

// The whole file, byte for byte: one event a line, as viewers and scripts
// that grep traces see it.
TEST(TraceTest, TheFileKeepsItsExactLayout) {
  OpSite site;
  site.op = "train.linear";
  site.layer = "h.0";
  Trace trace(1000);
  TraceEvent e;
  e.name = "asrt_matmul";
  e.category = "compute";
  e.startNs = 2500;
  e.endNs = 4000;
  e.step = 1;
  e.site = &site;
  trace.record(e);
  TraceEvent c;
  c.name = "all_reduce";
  c.category = "comm";
  c.track = TraceTrack::Comm;
  c.startNs = 3000;
  c.endNs = 3001;
  c.seq = 0;
  c.bytes = 64;
  c.dtype = "f32";
  trace.record(c);
  std::ostringstream file;
  writeTraceFile(file, {trace.jsonEvents(0), Trace(0).jsonEvents(1)});
  EXPECT_EQ(file.str(), R"json({"displayTimeUnit": "ms", "traceEvents": [
{"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "rank 0"}},
{"name": "process_sort_index", "ph": "M", "pid": 0, "tid": 0, "args": {"sort_index": 0}},
{"name": "thread_name", "ph": "M", "pid": 0, "tid": 1, "args": {"name": "main thread (compute)"}},
{"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": 1, "args": {"sort_index": 1}},
{"name": "thread_name", "ph": "M", "pid": 0, "tid": 2, "args": {"name": "communication thread"}},
{"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": 2, "args": {"sort_index": 2}},
{"name": "asrt_matmul", "cat": "compute", "ph": "X", "pid": 0, "tid": 1, "ts": 1.500, "dur": 1.500, "args": {"step": 1, "op": "train.linear", "layer": "h.0"}},
{"name": "all_reduce", "cat": "comm", "ph": "X", "pid": 0, "tid": 2, "ts": 2.000, "dur": 0.001, "args": {"seq": 0, "bytes": 64, "dtype": "f32"}},
{"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "rank 1"}},
{"name": "process_sort_index", "ph": "M", "pid": 1, "tid": 0, "args": {"sort_index": 1}},
{"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "main thread (compute)"}},
{"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": 1, "args": {"sort_index": 1}},
{"name": "thread_name", "ph": "M", "pid": 1, "tid": 2, "args": {"name": "communication thread"}},
{"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": 2, "args": {"sort_index": 2}}
]}
)json");
}

} // namespace
