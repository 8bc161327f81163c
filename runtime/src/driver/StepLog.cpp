// The per-step log: which steps rank 0 logs, and each one as a text line or
// as a JSON object; the peak that MFU is measured against.
#include "driver/StepLog.h"
#include "io/Json.h"
#include "stats/Stats.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>

namespace autoshard::rt {

double StepLogEntry::tokensPerSecond() const {
  return tokens > 0 && ms > 0 ? static_cast<double>(tokens) / (ms * 1e-3) : 0;
}

double StepLogEntry::samplesPerSecond() const {
  return samples > 0 && ms > 0 ? static_cast<double>(samples) / (ms * 1e-3)
                               : 0;
}

std::optional<double> StepLogEntry::mfu() const {
  if (flops <= 0 || peakFlopPerS <= 0 || ms <= 0)
    return std::nullopt;
  return static_cast<double>(flops) / (ms * 1e-3) / peakFlopPerS;
}

namespace {

std::string format(const char *fmt, double value) {
  char text[64];
  // A NaN's sign means nothing; printf would write "-nan" for some.
  std::snprintf(text, sizeof text, fmt, std::isnan(value) ? NAN : value);
  return text;
}

/// A rate as a person reads it: whole units from 100 up, else 4 digits.
std::string rate(double perSecond) {
  return format(perSecond >= 100 ? "%.0f" : "%.4g", perSecond);
}

} // namespace

std::string formatStepLine(const StepLogEntry &e) {
  char head[96];
  std::snprintf(head, sizeof head, "step %" PRId64 " loss %s ms %.3f", e.step,
                format("%.8g", e.loss).c_str(), e.ms);
  std::string line = head;
  if (e.lr)
    line += " lr " + format("%.6g", *e.lr);
  if (e.gradNorm)
    line += " grad_norm " + format("%.6g", *e.gradNorm);
  if (e.tokens > 0)
    line += " tokens/s " + rate(e.tokensPerSecond());
  else if (e.samples > 0)
    line += " samples/s " + rate(e.samplesPerSecond());
  if (std::optional<double> mfu = e.mfu())
    line += " mfu " + format("%.3g", *mfu * 100) + "%";
  if (e.memoryBytes >= 0)
    line += " mem " + formatBytes(e.memoryBytes);
  if (e.peakMemoryBytes >= 0)
    line += " peak " + formatBytes(e.peakMemoryBytes);
  return line;
}

std::string formatStepJson(const StepLogEntry &e) {
  JsonWriter json;
  json.beginObject();
  json.key("step").integer(e.step);
  json.key("loss").number(e.loss);
  json.key("ms").number(e.ms, "%.3f");
  if (e.lr)
    json.key("lr").number(*e.lr);
  if (e.gradNorm)
    json.key("grad_norm").number(*e.gradNorm);
  if (e.tokens > 0)
    json.key("tokens_per_s").number(e.tokensPerSecond(), "%.6g");
  if (e.samples > 0)
    json.key("samples_per_s").number(e.samplesPerSecond(), "%.6g");
  if (std::optional<double> mfu = e.mfu())
    json.key("mfu").number(*mfu, "%.6g");
  if (e.memoryBytes >= 0)
    json.key("memory_bytes").integer(e.memoryBytes);
  if (e.peakMemoryBytes >= 0)
    json.key("peak_memory_bytes").integer(e.peakMemoryBytes);
  return json.end().take();
}

std::string formatEvalJson(int64_t afterStep, double meanLoss, int64_t batches,
                           double ms, bool savedBest) {
  JsonWriter json;
  json.beginObject();
  json.key("eval_after_step").integer(afterStep);
  json.key("loss").number(meanLoss);
  json.key("batches").integer(batches);
  json.key("ms").number(ms, "%.3f");
  if (savedBest)
    json.key("saved_best").boolean(true);
  return json.end().take();
}

bool isLoggedStep(int64_t step, int64_t firstStep, int64_t logEvery,
                  int64_t lastStep) {
  return step == firstStep || step == lastStep ||
         (logEvery > 0 && step % logEvery == 0);
}

std::optional<LogFormat> parseLogFormat(std::string_view text) {
  if (text == "text")
    return LogFormat::Text;
  if (text == "json")
    return LogFormat::Json;
  return std::nullopt;
}

Expected<ComputePeak> peakFromDeviceFile(std::string_view text,
                                         const std::string &path,
                                         bool lowPrecision) {
  const std::string where = "--device-spec: '" + path + "'";
  Expected<Json> json = parseJson(text);
  if (!json)
    return Error(where + " is not JSON: " + json.message());
  const Json *schema = json->get("schema");
  if (!schema || !schema->isString() || schema->text != "autoshard-device/1")
    return Error(where + " is not a device file (its \"schema\" is not "
                         "\"autoshard-device/1\"; see data/devices/)");
  const char *key =
      lowPrecision ? "peak_bf16_flop_per_s" : "peak_f32_flop_per_s";
  const Json *figures = json->get("figures");
  const Json *figure = figures ? figures->get(key) : nullptr;
  const Json *value = figure ? figure->get("value") : nullptr;
  std::optional<double> peak = value ? value->toDouble() : std::nullopt;
  if (!peak || !std::isfinite(*peak) || *peak <= 0)
    return Error(where + " has no positive figures." + key +
                 ".value, the peak this step's MFU needs (" +
                 (lowPrecision ? "it computes in 16-bit floats"
                               : "it computes in f32") +
                 ")");
  const Json *name = json->get("name");
  std::string device = name && name->isString() ? name->text : path;
  return ComputePeak{*peak, device + "'s " + key + " (--device-spec)"};
}

} // namespace autoshard::rt
