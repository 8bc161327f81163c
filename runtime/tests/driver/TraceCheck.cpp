// Checks a --trace file: valid JSON, the tracks, and how a step's events nest.
//
//   trace_check FILE RANKS STEPS ASYNC_PER_STEP [TRANSFERS_PER_STEP]
//
// FILE must be a JSON object whose "traceEvents" hold, for each rank r <
// RANKS, a process (pid r) named "rank r" with the threads 1 ("main thread
// (compute)") and 2 ("communication thread"), and complete ("X") events:
//   - on the main thread, STEPS "step" events, in order and disjoint, every
//     other event inside one of them, events properly nested, and compute
//     ops in every step;
//   - on the communication thread, "comm" events one after the other in
//     issue order (seq), each inside a step;
//   - for each asynchronous collective (a "comm" event with a handle; there
//     are ASYNC_PER_STEP per step): its asrt_bucket_start ("bucket_start",
//     "issue") before it starts, its asrt_wait ("wait") after the issue and
//     ending after it, all three in the same step;
//   - for each blocking collective on the main thread ("collective" with a
//     seq): its "comm" event inside it;
//   - on the offload track (thread 3, "offload"; present only when
//     TRANSFERS_PER_STEP, default 0, is not), "offload" events one after
//     the other in start order (seq), TRANSFERS_PER_STEP per step; a
//     synchronous one (no handle) inside its offload call ("transfer", the
//     same seq) on the main thread, an asynchronous one (a handle) after
//     its asrt_transfer_start ("transfer_start", "issue") began and before
//     its asrt_transfer_wait ("transfer_wait", "wait") ended, all three in
//     the same step.
// Times are compared in integer nanoseconds (the file has microseconds with
// three decimals), so the checks are exact.
#include "io/Json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

using autoshard::rt::Json;

namespace {

// ---- The checks -------------------------------------------------------------

struct Event {
  std::string name, cat;
  int pid = -1, tid = -1;
  int64_t start = 0, end = 0; // ns
  int64_t step = -1, seq = -1, handle = -1;
};

int failures = 0;
void fail(const std::string &message) {
  std::fprintf(stderr, "trace_check: %s\n", message.c_str());
  ++failures;
}

std::string describe(const Event &e) {
  return "'" + e.name + "' (" + e.cat + ", pid " + std::to_string(e.pid) +
         ", tid " + std::to_string(e.tid) + ", " + std::to_string(e.start) +
         ".." + std::to_string(e.end) + " ns" +
         (e.seq >= 0 ? ", seq " + std::to_string(e.seq) : "") +
         (e.handle >= 0 ? ", handle " + std::to_string(e.handle) : "") + ")";
}

int64_t nanos(const Json *v) {
  std::optional<double> us = v ? v->toDouble() : std::nullopt;
  return us ? std::llround(*us * 1000.0) : -1;
}
int64_t integerArg(const Json &e, const char *key) {
  const Json *args = e.get("args");
  const Json *v = args ? args->get(key) : nullptr;
  return v ? v->toInt64().value_or(-1) : -1;
}
/// A string member's value; empty when it is missing or not a string.
std::string stringOf(const Json *v) {
  return v && v->isString() ? v->text : std::string();
}
bool inside(const Event &inner, const Event &outer) {
  return outer.start <= inner.start && inner.end <= outer.end;
}

/// The step (index into `steps`) that holds `e`, or -1.
int stepOf(const Event &e, const std::vector<Event> &steps) {
  for (size_t i = 0; i < steps.size(); ++i)
    if (inside(e, steps[i]))
      return static_cast<int>(i);
  return -1;
}

void checkRank(int pid, const std::vector<Event> &events, int64_t firstStep,
               int64_t steps, int64_t asyncPerStep, int64_t transfersPerStep) {
  std::string rank = "rank " + std::to_string(pid) + ": ";
  std::vector<Event> main, comm, offload, stepEvents;
  for (const Event &e : events) {
    if (e.tid == 1)
      main.push_back(e);
    else if (e.tid == 2)
      comm.push_back(e);
    else if (e.tid == 3)
      offload.push_back(e);
    else
      fail(rank + "event on an unknown track: " + describe(e));
  }
  auto byStart = [](const Event &a, const Event &b) {
    return a.start != b.start ? a.start < b.start : a.end > b.end;
  };
  std::sort(main.begin(), main.end(), byStart);
  std::sort(comm.begin(), comm.end(), byStart);
  std::sort(offload.begin(), offload.end(), byStart);

  for (const Event &e : main)
    if (e.name == "step")
      stepEvents.push_back(e);
  if (static_cast<int64_t>(stepEvents.size()) != steps)
    fail(rank + std::to_string(stepEvents.size()) + " step events, expected " +
         std::to_string(steps));
  for (size_t i = 0; i < stepEvents.size(); ++i) {
    if (stepEvents[i].step != firstStep + static_cast<int64_t>(i))
      fail(rank + "step event " + std::to_string(i) + " has step " +
           std::to_string(stepEvents[i].step));
    if (i > 0 && stepEvents[i].start < stepEvents[i - 1].end)
      fail(rank + "steps overlap: " + describe(stepEvents[i]));
  }

  // The main thread: nested events, each inside a step, compute in each.
  std::vector<const Event *> open;
  std::vector<int> computePerStep(stepEvents.size(), 0);
  for (const Event &e : main) {
    while (!open.empty() && open.back()->end <= e.start)
      open.pop_back();
    if (!open.empty() && !inside(e, *open.back()))
      fail(rank + describe(e) + " overlaps " + describe(*open.back()) +
           " without nesting in it");
    open.push_back(&e);
    if (e.name == "step")
      continue;
    int s = stepOf(e, stepEvents);
    if (s < 0)
      fail(rank + describe(e) + " lies outside every step");
    else if (e.cat == "compute")
      ++computePerStep[s];
  }
  for (size_t s = 0; s < computePerStep.size(); ++s)
    if (computePerStep[s] == 0)
      fail(rank + "step " + std::to_string(s + 1) + " has no compute op");

  // The communication thread: one at a time, in issue order, in steps.
  int64_t asyncCount = 0;
  for (size_t i = 0; i < comm.size(); ++i) {
    const Event &c = comm[i];
    if (c.cat != "comm")
      fail(rank + "the communication thread has " + describe(c));
    if (i > 0 && c.start < comm[i - 1].end)
      fail(rank + describe(c) + " overlaps " + describe(comm[i - 1]));
    if (i > 0 && c.seq <= comm[i - 1].seq)
      fail(rank + describe(c) + " ran after " + describe(comm[i - 1]) +
           ", issued later");
    int s = stepOf(c, stepEvents);
    if (s < 0)
      fail(rank + describe(c) + " lies outside every step");
    if (c.handle < 0)
      continue;
    ++asyncCount;
    // By name too: asrt_transfer_start's handles count apart from these.
    const Event *issue = nullptr, *wait = nullptr;
    for (const Event &e : main) {
      if (e.handle != c.handle)
        continue;
      if (e.cat == "issue" && e.name == "bucket_start")
        issue = &e;
      else if (e.cat == "wait" && e.name == "wait")
        wait = &e;
    }
    if (!issue || !wait) {
      fail(rank + describe(c) + " has no " + (issue ? "wait" : "issue") +
           " event on the main thread");
      continue;
    }
    if (issue->seq != c.seq)
      fail(rank + describe(*issue) + " issued seq " +
           std::to_string(issue->seq));
    if (issue->start > c.start)
      fail(rank + describe(c) + " started before its issue " +
           describe(*issue));
    if (wait->start < issue->end)
      fail(rank + describe(*wait) + " began before its issue ended");
    if (wait->end < c.end)
      fail(rank + describe(*wait) + " ended before its collective " +
           describe(c));
    if (stepOf(*issue, stepEvents) != s || stepOf(*wait, stepEvents) != s)
      fail(rank + describe(c) + ": its issue and wait are in other steps");
  }
  if (asyncCount != asyncPerStep * steps)
    fail(rank + std::to_string(asyncCount) +
         " asynchronous collectives, expected " +
         std::to_string(asyncPerStep * steps));

  // Blocking collectives: their run on the communication thread lies
  // inside the call.
  for (const Event &e : main) {
    if (e.cat != "collective" || e.seq < 0)
      continue;
    auto it = std::find_if(comm.begin(), comm.end(),
                           [&](const Event &c) { return c.seq == e.seq; });
    if (it == comm.end())
      fail(rank + describe(e) + " has no communication-thread event");
    else if (!inside(*it, e))
      fail(rank + describe(*it) + " is not inside its blocking call " +
           describe(e));
  }

  // Offload transfers: one at a time on the offload thread, in start
  // order; a synchronous one inside its call on the main thread, an
  // asynchronous one between its start and the end of its wait.
  std::vector<int64_t> transfersInStep(stepEvents.size(), 0);
  for (size_t i = 0; i < offload.size(); ++i) {
    const Event &t = offload[i];
    if (t.cat != "offload")
      fail(rank + "the offload track has " + describe(t));
    if (i > 0 && t.start < offload[i - 1].end)
      fail(rank + describe(t) + " overlaps " + describe(offload[i - 1]));
    if (i > 0 && t.seq <= offload[i - 1].seq)
      fail(rank + describe(t) + " ran after " + describe(offload[i - 1]) +
           ", started later");
    int s = stepOf(t, stepEvents);
    if (s < 0)
      fail(rank + describe(t) + " lies outside every step");
    else
      ++transfersInStep[s];
    if (t.handle < 0) {
      if (std::none_of(main.begin(), main.end(), [&](const Event &e) {
            return e.cat == "transfer" && e.seq == t.seq && inside(t, e);
          }))
        fail(rank + describe(t) +
             " lies inside no offload call of its seq on the main thread");
      continue;
    }
    const Event *start = nullptr, *wait = nullptr;
    for (const Event &e : main) {
      if (e.handle != t.handle)
        continue;
      if (e.cat == "issue" && e.name == "transfer_start")
        start = &e;
      else if (e.cat == "wait" && e.name == "transfer_wait")
        wait = &e;
    }
    if (!start || !wait) {
      fail(rank + describe(t) + " has no " +
           (start ? "transfer_wait" : "transfer_start") +
           " event on the main thread");
      continue;
    }
    if (start->seq != t.seq || wait->seq != t.seq)
      fail(rank + describe(t) + ": its start and wait name seqs " +
           std::to_string(start->seq) + " and " + std::to_string(wait->seq));
    if (start->start > t.start)
      fail(rank + describe(t) + " began before its start " + describe(*start));
    if (wait->start < start->end)
      fail(rank + describe(*wait) + " began before its start ended");
    if (wait->end < t.end)
      fail(rank + describe(*wait) + " ended before its transfer " +
           describe(t));
    if (stepOf(*start, stepEvents) != s || stepOf(*wait, stepEvents) != s)
      fail(rank + describe(t) + ": its start and wait are in other steps");
  }
  for (size_t s = 0; s < transfersInStep.size(); ++s)
    if (transfersInStep[s] != transfersPerStep)
      fail(rank + "step " + std::to_string(s + 1) + " has " +
           std::to_string(transfersInStep[s]) +
           " offload transfers, expected " + std::to_string(transfersPerStep));
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 5 && argc != 6) {
    std::fprintf(stderr, "usage: trace_check FILE RANKS STEPS|FIRST:LAST "
                         "ASYNC_PER_STEP [TRANSFERS_PER_STEP]\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "trace_check: cannot open %s\n", argv[1]);
    return 1;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  int ranks = std::atoi(argv[2]);
  // STEPS: steps 1..STEPS; FIRST:LAST: a --trace-steps window.
  int64_t firstStep = 1, steps = std::atoll(argv[3]);
  if (const char *colon = std::strchr(argv[3], ':')) {
    firstStep = std::atoll(argv[3]);
    steps = std::atoll(colon + 1) - firstStep + 1;
  }
  int64_t asyncPerStep = std::atoll(argv[4]);
  int64_t transfersPerStep = argc == 6 ? std::atoll(argv[5]) : 0;

  autoshard::rt::Expected<Json> root = autoshard::rt::parseJson(text);
  if (!root) {
    std::fprintf(stderr, "trace_check: %s is not valid JSON %s\n", argv[1],
                 root.message().c_str());
    return 1;
  }
  const Json *list = root->get("traceEvents");
  if (!list || !list->isArray()) {
    std::fprintf(stderr, "trace_check: no \"traceEvents\" array\n");
    return 1;
  }

  std::map<int, std::vector<Event>> perRank;
  std::map<int, std::string> processNames;
  std::map<std::pair<int, int>, std::string> threadNames;
  for (const Json &j : list->items) {
    const Json *ph = j.get("ph"), *name = j.get("name"), *pid = j.get("pid"),
               *tid = j.get("tid");
    if (!ph || !name || !pid || !tid) {
      fail("an event lacks ph, name, pid or tid");
      continue;
    }
    std::optional<int64_t> p64 = pid->toInt64(), t64 = tid->toInt64();
    if (!ph->isString() || !name->isString() || !p64 || !t64) {
      fail("an event's ph or name is not a string, or its pid or tid not an "
           "integer");
      continue;
    }
    int p = static_cast<int>(*p64), t = static_cast<int>(*t64);
    const Json *args = j.get("args");
    const Json *argName = args ? args->get("name") : nullptr;
    if (ph->text == "M") {
      if (name->text == "process_name" && argName)
        processNames[p] = stringOf(argName);
      if (name->text == "thread_name" && argName)
        threadNames[{p, t}] = stringOf(argName);
      continue;
    }
    if (ph->text != "X") {
      fail("unexpected phase '" + ph->text + "'");
      continue;
    }
    Event e;
    e.name = name->text;
    e.cat = stringOf(j.get("cat"));
    e.pid = p;
    e.tid = t;
    e.start = nanos(j.get("ts"));
    int64_t dur = nanos(j.get("dur"));
    if (dur < 0)
      fail("negative or missing dur: " + describe(e));
    e.end = e.start + dur;
    e.step = integerArg(j, "step");
    e.seq = integerArg(j, "seq");
    e.handle = integerArg(j, "handle");
    if (p < 0 || p >= ranks)
      fail("pid outside 0.." + std::to_string(ranks - 1) + ": " + describe(e));
    perRank[p].push_back(e);
  }
  for (int r = 0; r < ranks; ++r) {
    std::string want = "rank " + std::to_string(r);
    if (processNames[r] != want)
      fail("process " + std::to_string(r) + " is named '" + processNames[r] +
           "', expected '" + want + "'");
    if (threadNames[{r, 1}] != "main thread (compute)")
      fail("rank " + std::to_string(r) + " has no main-thread track");
    if (threadNames[{r, 2}] != "communication thread")
      fail("rank " + std::to_string(r) + " has no communication-thread track");
    if (transfersPerStep > 0 && threadNames[{r, 3}] != "offload")
      fail("rank " + std::to_string(r) + " has no offload track");
    checkRank(r, perRank[r], firstStep, steps, asyncPerStep,
              transfersPerStep);
  }
  if (failures)
    return 1;
  size_t count = 0;
  for (const auto &[pid, events] : perRank)
    count += events.size();
  std::printf("trace_check: %s: %zu events of %d ranks nest as expected\n",
              argv[1], count, ranks);
  return 0;
}
