// The per-step log: which steps rank 0 logs, and each one as a text line or
// as a JSON object; the peak that MFU is measured against.
#pragma once

#include "core/Expected.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace autoshard::rt {

/// --log-format: nanoGPT-style text lines, or one JSON object per line for
/// a plotting script or an experiment tracker.
enum class LogFormat { Text, Json };

/// What one logged step reports. Rates are derived here from the step's
/// own time, so that a line shows that step, not a running average.
struct StepLogEntry {
  int64_t step = 0;
  double loss = 0.0;
  double ms = 0.0;
  /// The scheduled learning rate (--lr-schedule), when there is one.
  std::optional<double> lr;
  /// The global gradient norm before clipping, for a step that clips.
  std::optional<double> gradNorm;
  /// What the global batch of one step holds: tokens for a language model
  /// (token ids), else samples (rows); 0 when neither is known.
  int64_t tokens = 0;
  int64_t samples = 0;
  /// This rank's FLOPs per step (the manifest's `flops`) and the peak
  /// FLOP/s of one rank; MFU is flops / time / peak, shown when both are
  /// known (> 0).
  int64_t flops = 0;
  double peakFlopPerS = 0.0;
  /// This rank's device memory as the runtime allocates it (asrt_alloc:
  /// arguments, results, the arena), now and at its peak so far; < 0:
  /// not shown.
  int64_t memoryBytes = -1;
  int64_t peakMemoryBytes = -1;

  /// tokens (or samples) per second at this step's time; 0 when unknown.
  double tokensPerSecond() const;
  double samplesPerSecond() const;
  /// Model FLOPs utilisation as a fraction (0.25 for 25%); nullopt when the
  /// step's FLOPs or the peak is unknown.
  std::optional<double> mfu() const;
};

/// "step 3 loss 0.69314718 ms 1.250 lr 0.0003 grad_norm 1.2345 tokens/s
/// 8172 mfu 3.41% mem 79.9 MiB peak 80.0 MiB": the loss and time first (as
/// before, so that scripts reading "step N loss L ms T" keep working), then
/// what is known of the rate, the gradient norm, the throughput
/// (samples/s for a step without token ids), MFU and memory.
std::string formatStepLine(const StepLogEntry &entry);

/// The same as one JSON object on one line: {"step": 3, "loss": ...,
/// "ms": ..., "lr": ..., "grad_norm": ..., "tokens_per_s": ...,
/// "samples_per_s": ..., "mfu": ..., "memory_bytes": ...,
/// "peak_memory_bytes": ...}; fields that are not known are left out, a
/// non-finite number is null.
std::string formatStepJson(const StepLogEntry &entry);

/// An in-run evaluation's line in --log-format=json:
/// {"eval_after_step": 6, "loss": ..., "batches": 3, "ms": ...}.
std::string formatEvalJson(int64_t afterStep, double meanLoss, int64_t batches,
                           double ms, bool savedBest);

/// Whether 1-based step `step` is logged: the first step the run runs
/// (`firstStep`, 1 unless resumed), every `logEvery`-th and the last.
bool isLoggedStep(int64_t step, int64_t firstStep, int64_t logEvery,
                  int64_t lastStep);

/// "text" or "json".
std::optional<LogFormat> parseLogFormat(std::string_view text);

/// The peak FLOP/s one rank's MFU is measured against, and where it came
/// from (for the startup header).
struct ComputePeak {
  double flopPerS = 0.0;
  std::string source;
};

/// The peak of a device file (data/devices/*.json, schema
/// "autoshard-device/1"): figures.peak_bf16_flop_per_s.value when the step
/// computes in 16-bit floats (`lowPrecision`), else
/// figures.peak_f32_flop_per_s.value. `path` names the file in errors and
/// in the source.
Expected<ComputePeak> peakFromDeviceFile(std::string_view text,
                                         const std::string &path,
                                         bool lowPrecision);

} // namespace autoshard::rt
