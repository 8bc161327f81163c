// shard-ckpt: sharded checkpoints to one safetensors file and back.
#include "ckpt/AtomicFile.h"
#include "ckpt/CheckpointDir.h"
#include "ckpt/CheckpointReader.h"
#include "ckpt/CheckpointWriter.h"
#include "ckpt/Layout.h"
#include "ckpt/ShardFile.h"
#include "core/Dtype.h"
#include "core/NameList.h"
#include "io/Paths.h"
#include "data/Philox.h"
#include "io/RegularFile.h"
#include "driver/Safetensors.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace autoshard::rt;

namespace {

const char *const kUsage =
    "usage: shard-ckpt consolidate CHECKPOINT OUT.safetensors "
    "[--params-only]\n"
    "       shard-ckpt shard IN.safetensors --manifest STEP_MANIFEST "
    "--out DIR\n"
    "                  [--step N] [--seed S] [--data FILE]\n"
    "       shard-ckpt verify CHECKPOINT\n"
    "\n"
    "CHECKPOINT is one checkpoint directory (DIR/step-N) or a training\n"
    "binary's --checkpoint-dir, meaning its newest complete checkpoint.\n"
    "\n"
    "consolidate  checks every file's CRC-32 and writes every param and\n"
    "             opt_state as one full tensor, named as in the manifest\n"
    "             (a param again under each of its aliases, a copy);\n"
    "             the file loads with --load-params. Its __metadata__ keeps\n"
    "             the checkpoint's step, seed and data source. OUT must be\n"
    "             a new or regular file outside every checkpoint directory.\n"
    "             --params-only leaves the opt_states out: the parameters\n"
    "             for an evaluation binary (shard-compile --forward-only).\n"
    "shard        writes DIR/step-N, the sharded checkpoint the binary whose\n"
    "             manifest STEP_MANIFEST is ('./train --print-manifest >\n"
    "             FILE') would have written: every param and opt_state of\n"
    "             the step must be in IN with its dtype and global shape\n"
    "             (a param under its name or one of its aliases).\n"
    "             Step, seed and data source come from IN's metadata (a\n"
    "             consolidated checkpoint) or --step, --seed, --data.\n"
    "             Resume with 'mpirun -np W ./train --checkpoint-dir DIR\n"
    "             --resume'.\n"
    "verify       checks the MANIFEST, every file's size and CRC-32 and\n"
    "             every block's CRC-32.\n";

std::string quoted(const std::string &text) { return "'" + text + "'"; }

int fail(const std::string &message) {
  std::fprintf(stderr, "shard-ckpt: error: %s\n", message.c_str());
  return 1;
}

int usageError(const std::string &message) {
  std::fprintf(stderr, "shard-ckpt: error: %s\n%s", message.c_str(), kUsage);
  return 2;
}

/// A checkpoint directory, or the newest complete one of a checkpoint root.
Expected<CheckpointReader> openCheckpoint(const std::string &path) {
  struct stat info;
  if (::stat((path + "/" + kCheckpointManifestName).c_str(), &info) == 0)
    return CheckpointReader::open(path);
  Expected<std::vector<CheckpointEntry>> entries = listCheckpoints(path);
  if (!entries)
    return Error(entries.message());
  for (auto it = entries->rbegin(); it != entries->rend(); ++it)
    if (it->complete)
      return CheckpointReader::open(it->path);
  if (::stat(path.c_str(), &info) != 0)
    return Error("no checkpoint at " + quoted(path) + ": it does not exist");
  return Error(quoted(path) + " is neither a checkpoint (no " +
               kCheckpointManifestName +
               ") nor a checkpoint directory holding a complete one");
}

/// Whether `dir` is a checkpoint's own directory: one the checkpoint code
/// names (step-N, step-N.partial, step-N.deleting) or one that holds a
/// MANIFEST. A file written there changes or joins a checkpoint.
bool isCheckpointDirectory(const std::string &dir) {
  struct stat info;
  std::string real = resolvedPath(dir);
  std::string name = real.substr(real.find_last_of('/') + 1);
  return isCheckpointDirName(name) ||
         ::stat((dir + "/" + kCheckpointManifestName).c_str(), &info) == 0;
}

/// Whether consolidate may write `out`, which it does by renaming a new
/// file onto it: that would replace whatever `out` is (a device, a FIFO)
/// and, inside the checkpoint being read (`checkpoint`) or any other, a
/// shard file or the MANIFEST. Checked before the checkpoint is read.
Status checkConsolidateOutput(const std::string &out,
                              const std::string &checkpoint) {
  const std::string name = "OUT " + quoted(out);
  struct stat info;
  if (::stat(out.c_str(), &info) == 0 && !S_ISREG(info.st_mode))
    return Error(name + " is " + describeFileType(info.st_mode) +
                 ", not a regular file: consolidate writes a new file and "
                 "renames it onto OUT, which would replace it; give the path "
                 "of a new or a regular file");
  std::string dir = parentDirectory(out);
  if (::stat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
    return Error(name + ": its directory " + quoted(dir) +
                 " does not exist (consolidate creates no directories)");
  if (isWithinDirectory(dir, checkpoint))
    return Error(name + " lies inside " + quoted(checkpoint) +
                 ", the checkpoint being consolidated: writing OUT would "
                 "replace or add a file of it; give a path outside that "
                 "directory");
  if (isCheckpointDirectory(dir))
    return Error(name + " lies inside " + quoted(dir) +
                 ", a checkpoint's directory: writing OUT would replace or "
                 "add a file of it; give a path outside that directory");
  return Status::success();
}

/// Every file's size and CRC-32, and every block's CRC-32 (by reading each
/// tensor whole): what a resume would refuse, found before it is needed.
Status verifyAll(const CheckpointReader &reader,
                 std::map<std::string, std::vector<char>> *tensors) {
  if (Status s = reader.checkFiles(); !s)
    return s;
  for (const CheckpointFile &file : reader.manifest().files)
    if (Status s = reader.verifyFile(file.name); !s)
      return s;
  for (const CheckpointTensor &t : reader.manifest().tensors) {
    std::vector<char> bytes(
        static_cast<size_t>(t.numElements() * dtypeSize(t.dtype)));
    if (Status s = reader.readRange(t.name, 0, t.numElements(), bytes.data());
        !s)
      return s;
    if (tensors)
      (*tensors)[t.name] = std::move(bytes);
  }
  return Status::success();
}

int verify(const std::vector<std::string> &args) {
  if (args.size() != 1)
    return usageError("verify takes one CHECKPOINT");
  Expected<CheckpointReader> reader = openCheckpoint(args[0]);
  if (!reader)
    return fail(reader.message());
  if (Status s = verifyAll(*reader, nullptr); !s)
    return fail(s.message());
  const CheckpointManifest &m = reader->manifest();
  std::printf("shard-ckpt: %s is complete and intact: step %lld, strategy "
              "%s, grid %s, %zu files, %zu tensors\n",
              quoted(reader->directory()).c_str(),
              static_cast<long long>(m.step), m.strategy.c_str(),
              m.grid.c_str(), m.files.size(), m.tensors.size());
  return 0;
}

int consolidate(std::vector<std::string> args) {
  bool paramsOnly = false;
  if (auto flag = std::find(args.begin(), args.end(), "--params-only");
      flag != args.end()) {
    paramsOnly = true;
    args.erase(flag);
  }
  if (args.size() != 2)
    return usageError("consolidate takes CHECKPOINT and OUT.safetensors "
                      "[--params-only]");
  Expected<CheckpointReader> reader = openCheckpoint(args[0]);
  if (!reader)
    return fail(reader.message());
  if (Status s = checkConsolidateOutput(args[1], reader->directory()); !s)
    return fail(s.message());
  std::map<std::string, std::vector<char>> tensors;
  if (Status s = verifyAll(*reader, &tensors); !s)
    return fail(s.message());
  const CheckpointManifest &m = reader->manifest();
  std::vector<TensorView> views;
  uint64_t bytes = 0;
  size_t aliasCopies = 0;
  for (const CheckpointTensor &t : m.tensors) {
    if (paramsOnly && t.role != Role::Param)
      continue;
    views.push_back({t.name, t.dtype, t.shape, tensors[t.name].data()});
    bytes += tensors[t.name].size();
    // A tied parameter again under each alias, as --save-params writes
    // it: safetensors entries cannot share their bytes.
    for (const std::string &alias : t.aliases)
      views.push_back({alias, t.dtype, t.shape, tensors[t.name].data()});
    aliasCopies += t.aliases.size();
  }
  std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"checkpoint_step", std::to_string(m.step)},
      {"checkpoint_seed", std::to_string(m.seed)},
      {"checkpoint_data", m.data},
      {"checkpoint_strategy", m.strategy},
      {"checkpoint_grid", m.grid}};
  // Written like a checkpoint file: a crash leaves no half-written output.
  // The temporary is a new file of this process (O_EXCL), so that no
  // file of that name is overwritten and no FIFO of that name blocks.
  std::string temp = args[1] + ".tmp." + std::to_string(::getpid());
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return fail("cannot create " + quoted(temp) + " (the temporary file of " +
                quoted(args[1]) + "): " + std::strerror(errno));
  ::close(fd);
  Status written = writeSafetensors(temp, views, metadata);
  if (written)
    written = syncAndRename(temp, args[1]);
  if (!written) {
    std::remove(temp.c_str());
    return fail(written.message());
  }
  std::string copies = aliasCopies == 0
                           ? ""
                           : ", and " + std::to_string(aliasCopies) + " more " +
                                 (aliasCopies == 1 ? "copy" : "copies") +
                                 " under aliases,";
  std::printf("shard-ckpt: consolidated %zu tensors (%llu bytes)%s of %s "
              "(step %lld, strategy %s, grid %s) into %s\n",
              views.size() - aliasCopies,
              static_cast<unsigned long long>(bytes), copies.c_str(),
              quoted(reader->directory()).c_str(),
              static_cast<long long>(m.step), m.strategy.c_str(),
              m.grid.c_str(), quoted(args[1]).c_str());
  return 0;
}

template <typename Int> bool parseNumber(const std::string &text, Int &value) {
  auto [ptr, ec] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  return !text.empty() && ec == std::errc() && ptr == text.data() + text.size();
}

int shard(const std::vector<std::string> &args) {
  std::string input, manifestPath, out, stepText, seedText, dataFile;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    std::string *target = arg == "--manifest" ? &manifestPath
                          : arg == "--out"    ? &out
                          : arg == "--step"   ? &stepText
                          : arg == "--seed"   ? &seedText
                          : arg == "--data"   ? &dataFile
                                              : nullptr;
    if (target) {
      if (i + 1 >= args.size())
        return usageError(arg + " needs a value");
      *target = args[++i];
    } else if (arg.rfind("--", 0) == 0) {
      return usageError("unknown option " + quoted(arg));
    } else if (input.empty()) {
      input = arg;
    } else {
      return usageError("shard takes one IN.safetensors; " + quoted(arg) +
                        " is a second");
    }
  }
  if (input.empty() || manifestPath.empty() || out.empty())
    return usageError("shard needs IN.safetensors, --manifest and --out");

  Expected<std::string> manifestText = readWholeFile(manifestPath);
  if (!manifestText)
    return fail("--manifest: " + manifestText.message());
  Expected<Manifest> manifest = parseManifest(*manifestText);
  if (!manifest)
    return fail("--manifest " + quoted(manifestPath) +
                " is not a step manifest (the output of './train "
                "--print-manifest'): " +
                manifest.message());
  Expected<SafetensorsFile> file = readSafetensors(input);
  if (!file)
    return fail(file.message());

  // The file must hold exactly the step's params and opt_states, a param
  // under its name or an alias as --load-params reads it (the name wins,
  // else the first alias the file holds).
  // Another model's file differs in every one of its thousands of
  // tensors: each list names the first few and counts the rest.
  std::vector<CheckpointTensor> wanted = modelSignature(*manifest);
  std::vector<std::string> missing, wrong, extra;
  std::map<std::string, std::string> source;
  for (const CheckpointTensor &t : wanted) {
    for (const std::string &name : manifest->findArg(t.name)->fileNames())
      if (file->tensors.count(name)) {
        source[t.name] = name;
        break;
      }
    if (!source.count(t.name))
      missing.push_back(t.name);
  }
  for (const auto &[name, entry] : file->tensors) {
    const TensorSpec *arg = manifest->findArgByFileName(name);
    if (!arg || (arg->role != Role::Param && arg->role != Role::OptState)) {
      extra.push_back(name);
      continue;
    }
    const CheckpointTensor &t = *std::find_if(
        wanted.begin(), wanted.end(),
        [&](const CheckpointTensor &w) { return w.name == arg->name; });
    if (entry.dtype != dtypeSafetensorsName(t.dtype) || entry.shape != t.shape)
      wrong.push_back(
          name + " is " + entry.dtype + " " + formatShape(entry.shape) +
          " but the step's " + t.describe() +
          (name != t.name ? ", whose alias it is," : "") + " needs " +
          dtypeSafetensorsName(t.dtype) + " " + formatShape(t.shape));
  }
  auto count = [](size_t n) {
    return std::to_string(n) + (n == 1 ? " tensor" : " tensors");
  };
  if (!missing.empty() || !wrong.empty() || !extra.empty())
    return fail(quoted(input) + " does not hold the state of step '" +
                manifest->step + "'" +
                (missing.empty() ? ""
                                 : "; it lacks " + count(missing.size()) +
                                       ": " + listNames(missing, 5)) +
                (wrong.empty()
                     ? ""
                     : "; " + count(wrong.size()) +
                           (wrong.size() == 1 ? " differs" : " differ") +
                           " in dtype or shape: " + listNames(wrong, 3, "; ")) +
                (extra.empty()
                     ? ""
                     : "; it holds " + count(extra.size()) +
                           " that are no param or opt_state of the step: " +
                           listNames(extra, 5)) +
                " (a checkpoint needs every param and opt_state)");

  CheckpointHeader header;
  header.planHash = fnv1a64(*manifestText);
  auto meta = [&](const char *key) -> std::optional<std::string> {
    auto it = file->metadata.find(key);
    if (it == file->metadata.end())
      return std::nullopt;
    return it->second;
  };
  if (stepText.empty())
    stepText = meta("checkpoint_step").value_or("");
  if (seedText.empty())
    seedText = meta("checkpoint_seed").value_or("");
  if (stepText.empty() || !parseNumber(stepText, header.step) ||
      header.step < 0)
    return usageError(stepText.empty()
                          ? quoted(input) + " records no checkpoint_step; "
                                            "give --step N"
                          : "--step: " + quoted(stepText) +
                                " is not a step count");
  if (seedText.empty() || !parseNumber(seedText, header.seed))
    return usageError(seedText.empty()
                          ? quoted(input) + " records no checkpoint_seed; "
                                            "give --seed S"
                          : "--seed: " + quoted(seedText) + " is not a seed");
  if (!dataFile.empty()) {
    Expected<std::string> data = describeDataSource(dataFile);
    if (!data)
      return fail("--data: " + data.message());
    header.data = *data;
  } else {
    header.data = meta("checkpoint_data").value_or("synthetic");
  }

  // Starting the checkpoint removes an incomplete DIR/step-N and the
  // leftovers of an interrupted save of it, with every file in them.
  for (const std::string &doomed :
       {checkpointDirName(header.step),
        checkpointDirName(header.step) + ".partial",
        checkpointDirName(header.step) + ".deleting"})
    for (auto [what, path] :
         {std::pair{"IN", &input}, std::pair{"--manifest", &manifestPath}})
      if (isWithinDirectory(*path, out + "/" + doomed))
        return fail(std::string(what) + " " + quoted(*path) + " lies inside " +
                    quoted(out + "/" + doomed) + ", which writing step " +
                    std::to_string(header.step) + " into --out " + quoted(out) +
                    " would remove with its files; move it out first");
  // A training run writing --out at the same time would prune or replace
  // this checkpoint (and it theirs): take the directory's lock, held until
  // the process exits.
  if (Status s = makeDirectories(out); !s)
    return fail("--out: " + s.message());
  if (Expected<int> lock = lockCheckpointDirectory(out); !lock)
    return fail(lock.message());
  // A directory of checkpoints belongs to one run: a resume takes the
  // newest, whoever wrote it. Only checkpoints this run could resume from
  // may stand beside the new one.
  Expected<std::vector<CheckpointEntry>> existing = listCheckpoints(out);
  if (!existing)
    return fail("--out: " + existing.message());
  if (std::any_of(existing->begin(), existing->end(),
                  [](const CheckpointEntry &e) { return e.complete; })) {
    Expected<CheckpointReader> newest = openCheckpoint(out);
    if (!newest)
      return fail("--out: " + newest.message());
    if (Status s = checkResumable(newest->manifest(), newest->directory(),
                                  *manifest, header.seed, header.data);
        !s)
      return fail("--out " + quoted(out) + " holds checkpoints of another "
                  "run, which a resume there could mix with this one: " +
                  s.message() + "; write into an empty directory");
  }
  Expected<std::string> staging = beginCheckpoint(out, header.step);
  if (!staging)
    return fail(staging.message());
  std::vector<BlockAssignment> assignments = assignCheckpointBlocks(*manifest);
  auto world = static_cast<int>(manifest->worldSize());
  std::vector<std::optional<WrittenShardFile>> files(
      static_cast<size_t>(world));
  for (int rank = 0; rank < world; ++rank) {
    std::vector<ShardBlock> blocks = shardBlocksOfRank(
        *manifest, assignments, rank,
        [&](const TensorSpec &arg, int64_t begin) -> const void * {
          return file->bytes(source.at(arg.name)) +
                 begin * dtypeSize(arg.dtype);
        });
    if (blocks.empty())
      continue;
    Expected<WrittenShardFile> written = writeShardFile(
        *staging, shardFileName(rank), rank, header.step, blocks);
    if (!written)
      return fail(written.message());
    files[static_cast<size_t>(rank)] = std::move(*written);
  }
  std::string text = formatCheckpointManifest(
      describeCheckpoint(*manifest, assignments, files, header));
  if (Expected<CheckpointManifest> check =
          parseCheckpointManifest(text, *staging + "/MANIFEST");
      !check)
    return fail("internal error: the MANIFEST does not parse: " +
                check.message());
  if (Status s = commitCheckpoint(out, header.step, text); !s)
    return fail(s.message());
  std::printf("shard-ckpt: wrote %s: step %lld for strategy %s, grid %s "
              "(%zu files)\n",
              quoted(out + "/" + checkpointDirName(header.step)).c_str(),
              static_cast<long long>(header.step), manifest->strategy.c_str(),
              manifest->gridString().c_str(),
              static_cast<size_t>(
                  std::count_if(files.begin(), files.end(),
                                [](const auto &f) { return f.has_value(); })));
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  std::string command = args[0];
  args.erase(args.begin());
  if (command == "consolidate")
    return consolidate(args);
  if (command == "shard")
    return shard(args);
  if (command == "verify")
    return verify(args);
  return usageError("unknown command " + quoted(command) +
                    "; expected consolidate, shard or verify");
}
