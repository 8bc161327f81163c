// The files a run reads and writes, checked before its first step.
#pragma once

#include "core/Expected.h"
#include "driver/Options.h"

#include <string>

namespace autoshard::rt {

/// Whether `path`, a file the run writes at its end (`option` names it),
/// can be written: its directory exists and takes new files, and the file,
/// if there, is a writable one and not a directory. Nothing is created.
Status checkOutputFile(const char *option, const std::string &path);

/// Everything about the run's own files that would otherwise fail or lose
/// data only after training, checked before it (by rank 0, which writes
/// them):
/// - each output (--save-params, --save-grads, --stats-json, --trace) can
///   be written (checkOutputFile);
/// - no two outputs name one file, and no output names an input (--data,
///   --load-params): one write would replace the other file. Existing
///   files are compared by device and inode (hard and symbolic links
///   included), others by resolved absolute path;
/// - no input or output lies inside a checkpoint's directory (step-N,
///   step-N.partial, step-N.deleting) of --checkpoint-dir, which saves
///   replace and retention removes with all their files. This covers the
///   files of the checkpoint --resume reads.
/// The error names the options, their paths and what to do.
Status checkRunFiles(const Options &options);

} // namespace autoshard::rt
